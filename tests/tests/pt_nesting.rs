// SPDX-License-Identifier: MIT OR Apache-2.0
//! PMIs arriving in the middle of the software tracer's writes: a sample
//! (with its AUX snapshot through the PT PMU) after every piece the tracer
//! writes into a region. Every snapshot equals the newest bytes written so
//! far; the interrupted write completes unsplit, so the whole stream still
//! decodes; a sample arriving inside another's snapshot carries no AUX data.

use std::cell::Cell;

use perfaux::abi::{PerfEventAttr, record_type, sample_type as st};
use perfaux::event::Buffer;
use perfaux::ring::{FixedEvent, read_header};
use perfaux::sample::SampleData;
use perfaux::soft_pt::stream::TraceEvent;
use perfaux_tests::group::open;
use perfaux_tests::mem::{AuxMemory, RingMemory};
use perfaux_tests::shims::{CountingPmu, Cpu0, decodes, interrupt, with_interrupt, with_pt};

/// Runs a program of `events`, one `trace` call each or (`batch`) all in
/// one `trace_all`; a PMI (a 2048-byte AUX sample) arrives after the `k`-th
/// piece the tracer writes. Returns the number of pieces.
fn run(events: &[TraceEvent], k: usize, batch: bool) -> usize {
    let mem = RingMemory::new(16, 0);
    let aux = AuxMemory::new(4, 0); // four 4 KiB regions: writes cross them
    with_pt(&mem, &aux, true, 512, FixedEvent::default(), |p| {
        let (tracer, model, pt) = (p.tracer, p.model, p.pmu);
        let counter = CountingPmu;
        let buffer = Buffer {
            ring: p.ring,
            aux: Some(p.area),
        };
        let mut leader_attr = PerfEventAttr::new(136);
        leader_attr.type_ = 8;
        let leader = open(leader_attr, pt, 1, None);
        leader.set_buffer(&buffer);
        let mut attr = PerfEventAttr::new(136);
        attr.sample_period = 1;
        attr.sample_type = st::TIME | st::AUX;
        attr.aux_sample_size = 2048;
        let sampler = open(attr, &counter, 2, Some(&leader));
        sampler.join_group();
        sampler.set_output(&leader).unwrap();
        let p = Cpu0;
        leader.sched_in(&p).unwrap();

        let pieces = Cell::new(0usize);
        let checked = Cell::new(false);
        let pmi = || {
            pieces.set(pieces.get() + 1);
            if pieces.get() != k {
                return;
            }
            let layout = sampler.overflow(&p, &SampleData::default()).unwrap();
            assert_eq!(layout.aux_size, 2048);
            let records = mem.records();
            let r = records
                .iter()
                .find(|r| read_header(r).unwrap().type_ == record_type::SAMPLE)
                .unwrap();
            let stream = &model.borrow().0;
            let n = stream.len().min(2048);
            assert!(
                r[24 + 2048 - n..] == stream[stream.len() - n..],
                "the snapshot is the newest bytes, mid-write"
            );
            checked.set(true);
        };
        tracer.hooks().set_interrupt(Some(&interrupt));
        with_interrupt(&pmi, || {
            tracer.trace(TraceEvent::Enable(0x40_0000));
            if batch {
                tracer.trace_all(events);
            } else {
                for &e in events {
                    tracer.trace(e);
                }
            }
        });
        tracer.hooks().set_interrupt(None);
        assert!(k > pieces.get() || checked.get());
        // The interrupted writes were not split: the stream decodes.
        let stream = model.borrow().0.clone();
        assert!(decodes(&stream), "the stream decodes");
        pieces.get()
    })
}

/// A program of branches, indirect branches and timestamps.
fn program() -> Vec<TraceEvent> {
    let mut events = Vec::new();
    for i in 0..600u64 {
        events.push(TraceEvent::Conditional {
            taken: i % 3 == 0,
            next: 0x40_0000,
        });
        if i % 5 == 0 {
            events.push(TraceEvent::Indirect {
                target: 0x40_0000 + i * 64,
            });
        }
        if i % 50 == 0 {
            events.push(TraceEvent::Time(i * 1000));
        }
    }
    events
}

#[test]
fn a_pmi_after_every_piece_of_the_tracer_writes() {
    let events = program();
    let pieces = run(&events, usize::MAX, false);
    assert!(pieces > 100, "{pieces} pieces");
    for k in 1..=pieces {
        run(&events, k, false);
    }
}

/// The same program in one `trace_all`: the PMIs land between the events
/// of one write and inside them.
#[test]
fn a_pmi_after_every_piece_of_a_batch() {
    let events = program();
    let pieces = run(&events, usize::MAX, true);
    assert_eq!(pieces, run(&events, usize::MAX, false), "the same pieces");
    for k in 1..=pieces {
        run(&events, k, true);
    }
}
