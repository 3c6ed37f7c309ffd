// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PT-style PMU of one CPU in snapshot mode (spec §F.4, §F.5, §F.8): the
//! AUX transaction it holds while tracing, ToPA output (single-range output
//! for a 1-page buffer, as Linux), and `snapshot_aux`
//! exactly as Linux's `pt_event_snapshot_aux` after the 2024
//! synchronization fix: stop tracing, read the position, copy the newest
//! bytes ending there (wrapping) with `copy_aux`, restart only if tracing
//! was on, change no event state.

use core::cell::{Cell, RefCell};

use super::topa::{PhysMap, Topa, TopaPosition};
use super::tracer::TraceHw;
use crate::aux::{AuxArea, AuxHandle, copy_aux};
use crate::caps::PmuCaps;
use crate::error::{Error, Result};
use crate::pmu::{EventInfo, Pmu, ef};
use crate::ring::{FixedEvent, OutputSink, Ring};

/// A PT-style PMU for one CPU, tracing into one AUX area through ToPA.
pub struct PtPmu<'x, 'a> {
    hw: &'x dyn TraceHw,
    phys: &'x dyn PhysMap,
    topa: Topa<'x>,
    area: &'x AuxArea<'a, ()>,
    /// Where `PERF_RECORD_AUX` goes when a transaction ends, and for whom.
    ring: &'x Ring<'a>,
    record_event: Cell<FixedEvent>,
    /// The open AUX transaction (`pt->handle`).
    handle: RefCell<Option<AuxHandle<'x, 'a, ()>>>,
    /// PT started on this CPU: PMIs are handled and snapshots restart tracing.
    handle_nmi: Cell<bool>,
    /// Single-range output (a 1-page snapshot buffer, as Linux since
    /// ce0d998be927) instead of ToPA.
    single: bool,
}

impl<'x, 'a> PtPmu<'x, 'a> {
    /// A PMU tracing through `topa` (built over `area`'s pages) with `hw`,
    /// writing `PERF_RECORD_AUX` for `record_event` into `ring`.
    /// `EINVAL` if the tables do not cover the area or the area is not in
    /// overwrite (snapshot) mode: this PMU samples, it does not stream.
    pub fn new(
        hw: &'x dyn TraceHw,
        phys: &'x dyn PhysMap,
        topa: Topa<'x>,
        area: &'x AuxArea<'a, ()>,
        ring: &'x Ring<'a>,
        record_event: FixedEvent,
    ) -> Result<PtPmu<'x, 'a>> {
        if topa.size() != area.size() || !area.is_overwrite() {
            return Err(Error::Invalid);
        }
        Ok(PtPmu {
            hw,
            phys,
            topa,
            area,
            ring,
            record_event: Cell::new(record_event),
            handle: RefCell::new(None),
            handle_nmi: Cell::new(false),
            single: area.pages().len() == 1,
        })
    }

    /// The write position in the buffer (`pt_read_offset` + `pt_update_head`
    /// in snapshot mode): 0 up to the buffer size.
    fn position(&self) -> u64 {
        let (base, mask) = self.hw.output();
        if self.single {
            return (mask >> 32) % self.area.size();
        }
        let table = self
            .topa
            .tables()
            .iter()
            .position(|t| self.phys.to_phys(core::ptr::from_ref(t).cast()) == base)
            .unwrap_or(0);
        self.topa
            .offset_of(TopaPosition::from_mask_ptrs(table, mask))
    }

    /// Programs the output at buffer offset `head` (`pt_buffer_reset_offsets`
    /// + `pt_config_buffer`).
    fn program_output(&self, head: u64) {
        if self.single {
            let size = self.area.size();
            let mask = 0x7f | ((size - 1) & !0x7f) | ((head & (size - 1)) << 32);
            self.hw.set_topa(false);
            self.hw
                .set_output(self.phys.to_phys(self.area.pages()[0]), mask);
            return;
        }
        self.hw.set_topa(true);
        let pos = self.topa.position_of(head);
        let base = self
            .phys
            .to_phys(core::ptr::from_ref(&self.topa.tables()[pos.table]).cast());
        self.hw.set_output(base, pos.mask_ptrs());
    }

    /// `pt_event_start`: opens the AUX transaction (unless paused) and
    /// starts tracing at its head.
    fn start_tracing(&self) -> Result<()> {
        let mut slot = self.handle.borrow_mut();
        if slot.is_none() {
            *slot = Some(self.area.begin()?);
        }
        let head = slot.as_ref().map_or(0, |h| h.head());
        self.program_output(head);
        self.handle_nmi.set(true);
        self.hw.enable();
        Ok(())
    }

    /// `pt_event_stop` with `PERF_EF_UPDATE`: stops, reads the position and
    /// ends the transaction: `aux_head` becomes the write position and a
    /// `PERF_RECORD_AUX {position, buffer size, OVERWRITE}` is written.
    fn stop_and_update(&self) {
        self.handle_nmi.set(false);
        self.hw.disable();
        let Some(mut handle) = self.handle.borrow_mut().take() else {
            return;
        };
        let position = self.position();
        handle.set_head(position);
        let mut event = self.record_event.get();
        handle.end(self.area.size(), self.ring, &mut event);
    }
}

impl Pmu for PtPmu<'_, '_> {
    fn caps(&self) -> PmuCaps {
        PmuCaps::AUX
            | PmuCaps::SNAPSHOT_AUX
            | PmuCaps::ITRACE
            | PmuCaps::EXCLUSIVE
            | PmuCaps::AUX_PAUSE
    }

    fn add(&self, _event: &EventInfo<'_>, flags: u32) -> Result<()> {
        if self.handle.borrow().is_some() {
            return Err(Error::Busy); // one PT event per CPU
        }
        if flags & ef::START != 0 {
            self.start_tracing().map_err(|_| Error::Invalid)?;
        }
        Ok(())
    }

    fn del(&self, _event: &EventInfo<'_>, _flags: u32) {
        self.stop_and_update();
    }

    fn start(&self, _event: &EventInfo<'_>, _flags: u32) {
        let _ = self.start_tracing();
    }

    fn stop(&self, _event: &EventInfo<'_>, flags: u32) {
        if flags & ef::PAUSE != 0 {
            // Pause: the hardware stops; the transaction stays open.
            self.hw.disable();
        } else if flags & ef::UPDATE != 0 {
            self.stop_and_update();
        } else {
            self.handle_nmi.set(false);
            self.hw.disable();
        }
    }

    fn snapshot_aux(&self, _event: &EventInfo<'_>, sink: &mut dyn OutputSink, size: u64) -> i64 {
        // No transaction open on this CPU: Linux WARNs and copies nothing.
        let Ok(slot) = self.handle.try_borrow() else {
            return 0;
        };
        let Some(handle) = slot.as_ref() else {
            return 0;
        };
        if size == 0 {
            return 0; // copy_aux would copy everything
        }
        // Unconditionally (d92792a4b26e): stop, so the bytes are in memory.
        let was_tracing = self.handle_nmi.get();
        self.hw.disable();
        let to = self.position();
        let bufsize = self.area.size();
        let size = size.min(bufsize);
        let from = (to + bufsize - size) % bufsize;
        let n = match copy_aux(handle, sink, from, to) {
            Ok(n) => n as i64,
            Err(e) => i64::from(e.errno()),
        };
        if was_tracing {
            self.hw.enable();
        }
        n
    }
}
