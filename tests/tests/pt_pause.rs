// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PT PMU's pause/resume guards (`pt_event_start`/`pt_event_stop` with `PERF_EF_RESUME`/`PERF_EF_PAUSE` and 6.12's
//! `pause_allowed`/`resume_allowed`) and
//! PMIs arriving inside `snapshot_aux`: a sampler's overflow, a pausing or
//! resuming sampler's overflow, or a spurious ToPA PMI, at every piece of
//! the snapshot's copy. The tracer stays off for the whole copy whatever
//! arrives; a pause that arrives leaves tracing paused afterwards, a resume
//! is deferred to the snapshot's restart; nested samples carry no AUX data;
//! the transaction survives. Also `aux_start_paused`, and the ERROR status.

use std::cell::Cell;

use perfaux::abi::{PerfEventAttr, aux_action, aux_flags, record_type, sample_type as st};
use perfaux::event::Buffer;
use perfaux::pmu::{EventInfo, Pmu};
use perfaux::pt::hw::{STATUS_ERROR, STATUS_STOPPED, TraceHw};
use perfaux::pt::pmu::AreaPtPmu;
use perfaux::pt::topa::IdentityMap;
use perfaux::ring::{FixedEvent, OutputSink, read_header};
use perfaux::sample::SampleData;
use perfaux::soft_pt::stream::TraceEvent;
use perfaux::soft_pt::tracer::{SoftTracer, Taps};
use perfaux::{PmuCaps, Result};
use perfaux_tests::group::open;
use perfaux_tests::mem::{AuxMemory, RingMemory};
use perfaux_tests::records::{sample_aux, u64_at};
use perfaux_tests::shims::{CountingPmu, Cpu0, interrupt, with_interrupt, with_pt};

/// The PT PMU, with an interrupt point before every `split` bytes that its
/// `snapshot_aux` copies into the sample.
struct Interrupted<'p, 'x, 'a> {
    pt: &'p AreaPtPmu<'x, 'a, &'x SoftTracer<'x, Taps<'x>>, IdentityMap>,
    split: usize,
}

/// A sink that takes an interrupt before every piece it forwards.
struct SplitSink<'s> {
    inner: &'s mut dyn OutputSink,
    split: usize,
}

impl OutputSink for SplitSink<'_> {
    fn copy(&mut self, bytes: &[u8]) -> usize {
        let mut done = 0;
        for piece in bytes.chunks(self.split) {
            interrupt();
            let left = self.inner.copy(piece);
            if left != 0 {
                return bytes.len() - done - (piece.len() - left);
            }
            done += piece.len();
        }
        0
    }
}

impl Pmu for Interrupted<'_, '_, '_> {
    fn caps(&self) -> PmuCaps {
        self.pt.caps()
    }
    fn add(&self, e: &EventInfo<'_>, flags: u32) -> Result<()> {
        Pmu::add(self.pt, e, flags)
    }
    fn del(&self, e: &EventInfo<'_>, flags: u32) {
        Pmu::del(self.pt, e, flags);
    }
    fn start(&self, e: &EventInfo<'_>, flags: u32) {
        Pmu::start(self.pt, e, flags);
    }
    fn stop(&self, e: &EventInfo<'_>, flags: u32) {
        Pmu::stop(self.pt, e, flags);
    }
    fn snapshot_aux(
        &self,
        e: &EventInfo<'_>,
        sink: &mut dyn OutputSink,
        size: u64,
    ) -> perfaux::Result<u64> {
        let mut split = SplitSink {
            inner: sink,
            split: self.split,
        };
        Pmu::snapshot_aux(self.pt, e, &mut split, size)
    }
}

/// What arrives inside the outer sample's snapshot.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Nested {
    /// Another sampler's overflow (with PERF_SAMPLE_AUX).
    Sample,
    /// A sampler with `aux_pause` overflows.
    Pause,
    /// A sampler with `aux_resume` overflows (the trace was paused before).
    Resume,
    /// A ToPA PMI (a snapshot buffer raises none; the handler must cope).
    SpuriousPmi,
}

const OUTER: u64 = 4096;

fn program(tracer: &SoftTracer<'_, Taps<'_>>, from: u64, n: u64) {
    for i in from..from + n {
        tracer.trace(TraceEvent::Conditional {
            taken: i % 3 == 0,
            next: 0x40_0000,
        });
        if i % 4 == 0 {
            tracer.trace(TraceEvent::Indirect {
                target: 0x40_0000 + (i % 512) * 32,
            });
        }
    }
}

/// Runs a snapshot-mode PT group; `nested` arrives at interruption point
/// `k` (1-based) of the outer sample's copy. Returns the number of points.
fn run(nested: Nested, k: usize) -> usize {
    let mem = RingMemory::new(32, 0);
    let aux = AuxMemory::new(4, 0);
    with_pt(&mem, &aux, true, 1024, FixedEvent::default(), |p| {
        let (tracer, model, pt) = (p.tracer, p.model, p.pmu);
        let pmu = Interrupted { pt, split: 512 };
        let counter = CountingPmu;
        let buffer = Buffer {
            ring: p.ring,
            aux: Some(p.area),
        };
        let mut leader_attr = PerfEventAttr::new(136);
        leader_attr.type_ = 8;
        let leader = open(leader_attr, &pmu, 1, None);
        leader.set_buffer(&buffer);
        let sampler_attr = |size: u32, action: u32| {
            let mut a = PerfEventAttr::new(136);
            a.sample_period = 1;
            a.sample_type = st::TIME | st::AUX;
            a.aux_sample_size = size;
            a.aux_action = action;
            a
        };
        let open = |id: u64, attr: PerfEventAttr| open(attr, &counter, id, Some(&leader));
        let outer = open(2, sampler_attr(OUTER as u32, 0));
        let inner = open(3, sampler_attr(1024, 0));
        let pauser = open(4, sampler_attr(0, aux_action::PAUSE));
        let resumer = open(5, sampler_attr(0, aux_action::RESUME));
        for e in [&outer, &inner, &pauser, &resumer] {
            e.join_group();
            e.set_output(&leader).unwrap();
        }
        let p = Cpu0;
        leader.sched_in(&p).unwrap();
        assert!(tracer.enabled(), "the leader traces once scheduled");
        tracer.trace(TraceEvent::Enable(0x40_0000));
        program(tracer, 0, 6000);
        if nested == Nested::Resume {
            pauser.overflow(&p, &SampleData::default()).unwrap();
            assert!(!tracer.enabled(), "a pause stops the trace");
        }

        let points = Cell::new(0usize);
        let handler = || {
            points.set(points.get() + 1);
            assert!(!tracer.enabled(), "the tracer is off for the whole copy");
            if points.get() != k {
                return;
            }
            match nested {
                Nested::Sample => {
                    let layout = inner.overflow(&p, &SampleData::default()).unwrap();
                    assert_eq!(layout.aux_size, 0, "no AUX inside a snapshot");
                }
                Nested::Pause => {
                    pauser.overflow(&p, &SampleData::default()).unwrap();
                }
                Nested::Resume => {
                    resumer.overflow(&p, &SampleData::default()).unwrap();
                }
                Nested::SpuriousPmi => pt.handle_pmi(),
            }
            assert!(!tracer.enabled(), "nothing restarts the tracer mid-copy");
        };
        let layout = with_interrupt(&handler, || {
            outer.overflow(&p, &SampleData::default()).unwrap()
        });
        assert_eq!(layout.aux_size, OUTER);
        // The stream as it stood when the snapshot stopped the tracer (that
        // stop flushed the pending TNT bits; nothing traced since).
        let before = model.borrow().0.clone();
        assert!(before.len() > OUTER as usize);
        let newest = &before[before.len() - OUTER as usize..];
        let records = mem.records();
        let samples: Vec<&[u8]> = records
            .iter()
            .map(|r| &r[..])
            .filter(|r| read_header(r).unwrap().type_ == record_type::SAMPLE)
            .collect();
        let outer_record = samples
            .iter()
            .find(|r| r.len() > OUTER as usize)
            .expect("the outer sample");
        assert!(
            outer_record[24..24 + OUTER as usize] == *newest,
            "the outer snapshot is the newest bytes ({nested:?} at {k})"
        );
        let after_paused = match nested {
            // The pause arrived (if k was reached) and stays.
            Nested::Pause => k <= points.get(),
            // The resume arrived (if k was reached); else still paused.
            Nested::Resume => k > points.get(),
            Nested::Sample | Nested::SpuriousPmi => false,
        };
        assert_eq!(
            tracer.enabled(),
            !after_paused,
            "{nested:?} at {k}: tracing after the sample"
        );
        // The transaction is still open: nothing was published, and a later
        // snapshot (after a resume) still sees the newest bytes.
        assert!(
            !records
                .iter()
                .any(|r| read_header(r).unwrap().type_ == record_type::AUX),
            "no PERF_RECORD_AUX: the transaction stayed open"
        );
        resumer.overflow(&p, &SampleData::default()).unwrap();
        assert!(tracer.enabled());
        program(tracer, 3000, 500);
        let again = outer.overflow(&p, &SampleData::default()).unwrap();
        assert_eq!(again.aux_size, OUTER);
        let records = mem.records();
        let last = records
            .iter()
            .rev()
            .find(|r| r.len() > OUTER as usize)
            .unwrap();
        let stream = &model.borrow().0;
        let (size, aux) = sample_aux(last, st::TIME | st::AUX);
        assert_eq!(size, OUTER);
        assert_eq!(
            aux[..OUTER as usize],
            stream[stream.len() - OUTER as usize..]
        );
        points.get()
    })
}

#[test]
fn pmis_at_every_point_of_the_snapshot_copy() {
    for nested in [
        Nested::Sample,
        Nested::Pause,
        Nested::Resume,
        Nested::SpuriousPmi,
    ] {
        let points = run(nested, usize::MAX);
        // One point per 512-byte piece, one more where the window wraps.
        assert!(points >= (OUTER / 512) as usize, "{points} points");
        for k in 1..=points {
            run(nested, k);
        }
    }
}

#[test]
fn a_pausing_sample_carries_the_trace_and_leaves_it_paused() {
    let mem = RingMemory::new(32, 0);
    let aux = AuxMemory::new(4, 0);
    with_pt(&mem, &aux, true, 1024, FixedEvent::default(), |p| {
        let (tracer, model, pt) = (p.tracer, p.model, p.pmu);
        let counter = CountingPmu;
        let buffer = Buffer {
            ring: p.ring,
            aux: Some(p.area),
        };
        let mut leader_attr = PerfEventAttr::new(136);
        leader_attr.type_ = 8;
        leader_attr.aux_action = aux_action::START_PAUSED;
        let leader = open(leader_attr, pt, 1, None);
        leader.set_buffer(&buffer);
        let open = |id: u64, action: u32, aux: u32| {
            let mut a = PerfEventAttr::new(136);
            a.sample_period = 1;
            a.sample_type = st::TIME | st::AUX;
            a.aux_sample_size = aux;
            a.aux_action = action;
            open(a, &counter, id, Some(&leader))
        };
        let pauser = open(2, aux_action::PAUSE, 2048);
        let resumer = open(3, aux_action::RESUME, 0);
        for e in [&pauser, &resumer] {
            e.join_group();
            e.set_output(&leader).unwrap();
        }
        let p = Cpu0;
        leader.sched_in(&p).unwrap();
        // aux_start_paused: scheduled, transaction open, but no trace.
        assert!(!tracer.enabled(), "aux_start_paused: the tracer stays off");
        program(tracer, 0, 100);
        assert_eq!(tracer.written(), 0);
        resumer.overflow(&p, &SampleData::default()).unwrap();
        assert!(tracer.enabled(), "resumed");
        tracer.trace(TraceEvent::Enable(0x40_0000));
        program(tracer, 0, 2000);
        let written = tracer.written();
        assert!(written > 2048);
        // The pausing sampler's own sample still carries the newest bytes:
        // pause first, then the snapshot, whose restart honours the pause.
        let layout = pauser.overflow(&p, &SampleData::default()).unwrap();
        assert_eq!(layout.aux_size, 2048);
        let records = mem.records();
        let sample = records
            .iter()
            .find(|r| read_header(r).unwrap().type_ == record_type::SAMPLE && r.len() > 2048)
            .unwrap();
        let stream = model.borrow().0.clone();
        assert_eq!(
            sample_aux(sample, st::TIME | st::AUX).1[..2048],
            stream[stream.len() - 2048..]
        );
        assert!(
            !tracer.enabled(),
            "a pausing sample leaves the trace paused"
        );
        // (The pause flushed the pending TNT bits, as TraceEn dropping does.)
        let written = tracer.written();
        program(tracer, 2000, 500);
        assert_eq!(tracer.written(), written, "nothing traced while paused");
        resumer.overflow(&p, &SampleData::default()).unwrap();
        program(tracer, 2500, 500);
        assert!(tracer.written() > written, "traced again after the resume");
        // The stream continues where it stopped: one stream, no gap.
        let layout = pauser.overflow(&p, &SampleData::default()).unwrap();
        assert_eq!(layout.aux_size, 2048);
        let stream = model.borrow().0.clone();
        let records = mem.records();
        let sample = records
            .iter()
            .rev()
            .find(|r| read_header(r).unwrap().type_ == record_type::SAMPLE && r.len() > 2048)
            .unwrap();
        assert_eq!(
            sample_aux(sample, st::TIME | st::AUX).1[..2048],
            stream[stream.len() - 2048..]
        );
        // A resume is refused while the status says STOPPED or ERROR.
        for bad in [STATUS_STOPPED, STATUS_ERROR] {
            tracer.set_status(bad);
            resumer.overflow(&p, &SampleData::default()).unwrap();
            assert!(!tracer.enabled(), "no resume with status {bad:#x}");
            tracer.set_status(0);
            pauser.overflow(&p, &SampleData::default()).unwrap();
        }
        resumer.overflow(&p, &SampleData::default()).unwrap();
        assert!(tracer.enabled());
        // Stopping the leader closes the transaction; a later resume finds
        // no configured trace and leaves the tracer off.
        leader.sched_out();
        assert!(!tracer.enabled());
        pt.start(false, perfaux::pmu::ef::RESUME);
        assert!(!tracer.enabled(), "no resume after a stop");
    })
}

#[test]
fn an_error_status_is_counted_cleared_and_tracing_goes_on() {
    let mem = RingMemory::new(16, 0);
    let aux = AuxMemory::new(8, 0);
    with_pt(&mem, &aux, false, 1024, FixedEvent::default(), |p| {
        let (tracer, pt) = (p.tracer, p.pmu);
        pt.add(1, 0, false, perfaux::pmu::ef::START).unwrap();
        tracer.trace(TraceEvent::Enable(0x40_0000));
        program(tracer, 0, 500);
        tracer.set_status(STATUS_ERROR);
        pt.handle_pmi();
        assert_eq!(pt.errors(), 1, "the error is seen once");
        assert_eq!(tracer.status(), 0, "and cleared");
        assert!(tracer.enabled(), "tracing goes on in a new transaction");
        let records = mem.records();
        let aux_records: Vec<_> = records
            .iter()
            .filter(|r| read_header(r).unwrap().type_ == record_type::AUX)
            .collect();
        assert_eq!(aux_records.len(), 1, "the data so far is published");
        let flags = u64_at(aux_records[0], 24);
        assert_eq!(
            flags & aux_flags::TRUNCATED,
            0,
            "an error alone truncates nothing"
        );
        pt.del();
        assert!(!tracer.enabled());
    })
}
