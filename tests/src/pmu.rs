// SPDX-License-Identifier: MIT OR Apache-2.0
//! A simple AUX PMU for tests: a "tracer" that writes known bytes into its
//! AUX area, and a `snapshot_aux` that copies the newest bytes with
//! `copy_aux` through the transaction it holds open, as Intel PT does.

use std::cell::Cell;

use perfaux::abi::{PerfEventAttr, sample_type as st};
use perfaux::aux::{AuxArea, AuxHandle, copy_aux};
use perfaux::ring::{FixedEvent, OutputSink, Ring};
use perfaux::sample::{
    AuxSampling, NoIrqMask, SampleData, SampleLayout, SnapshotAux, write_sample,
};

/// How `snapshot_aux` misbehaves, for the padding cases of `perf_aux_sample_output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Copies exactly what is asked.
    Exact,
    /// Copies `size - k` bytes.
    Short(u64),
    /// Copies nothing and returns this (negative) errno.
    Fail(i64),
}

/// The test PMU, per CPU: its open AUX transaction and write position.
pub struct TestPmu<'x, 'a> {
    handle: AuxHandle<'x, 'a>,
    /// Free-running position of the next trace byte.
    pub position: Cell<u64>,
    /// `snapshot_aux` calls so far.
    pub snapshots: Cell<u32>,
    /// Misbehaviour, if any.
    pub behaviour: Cell<Behaviour>,
    /// When set, a PMI arrives inside the next `snapshot_aux`: a nested
    /// TID|TIME|AUX sample (aux_sample_size 4096, time 999) is written to
    /// this ring with this PMU as its AUX leader, before copying.
    pub pmi_ring: Cell<Option<&'x Ring<'a>>>,
    /// The nested sample's layout.
    pub nested: Cell<Option<Result<SampleLayout, perfaux::Error>>>,
}

impl<'x, 'a> TestPmu<'x, 'a> {
    /// Opens the transaction the PMU keeps on `area` while "tracing".
    pub fn new(area: &'x AuxArea<'a>) -> Self {
        TestPmu {
            handle: area.begin().expect("a free AUX area"),
            position: Cell::new(0),
            snapshots: Cell::new(0),
            behaviour: Cell::new(Behaviour::Exact),
            pmi_ring: Cell::new(None),
            nested: Cell::new(None),
        }
    }

    /// The tracer writes `bytes` at the current position.
    pub fn trace(&self, aux: &crate::mem::AuxMemory, bytes: &[u8]) {
        aux.write(self.position.get() as usize, bytes);
        self.position.set(self.position.get() + bytes.len() as u64);
    }
}

impl SnapshotAux for TestPmu<'_, '_> {
    fn snapshot_aux(&self, sink: &mut dyn OutputSink, size: u64) -> perfaux::Result<u64> {
        self.snapshots.set(self.snapshots.get() + 1);
        if let Some(ring) = self.pmi_ring.take() {
            let sampling = AuxSampling {
                area: self.handle.area(),
                pmu: self,
                active_here: true,
            };
            let mut attr = PerfEventAttr::new(136);
            attr.sample_type = st::TID | st::TIME | st::AUX;
            attr.aux_sample_size = 4096;
            let data = SampleData {
                pid: 10,
                tid: 11,
                time: 999,
                ..SampleData::default()
            };
            self.nested.set(Some(write_sample(
                ring,
                &mut FixedEvent::default(),
                &attr,
                &data,
                Some(&sampling),
                &NoIrqMask,
            )));
        }
        let size = match self.behaviour.get() {
            Behaviour::Exact => size,
            Behaviour::Short(k) => size.saturating_sub(k),
            Behaviour::Fail(errno) => {
                return Err(
                    perfaux::Error::from_errno(errno as i32).unwrap_or(perfaux::Error::Fault)
                );
            }
        };
        if size == 0 {
            return Ok(0); // never ask copy_aux for zero bytes: it would copy everything
        }
        let to = self.position.get();
        copy_aux(&self.handle, sink, to.wrapping_sub(size), to)
    }
}
