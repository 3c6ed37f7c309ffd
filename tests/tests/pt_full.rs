//! The PT-style PMU in full-trace mode (a writable AUX area): STOP/INT
//! markers, ToPA PMIs, PERF_RECORD_AUX. A consumer that keeps up reads the
//! whole stream through the records and aux_head/aux_tail; one that does not
//! gets everything that was written, then a TRUNCATED record, and the event's
//! disable is requested; one that reads now and then, re-enabling the event
//! after each overflow, reads back every byte the tracer wrote.

use std::sync::atomic::{AtomicU64, Ordering};

use perfaux::abi::{aux_flags, record_type};
use perfaux::pmu::ef;
use perfaux::ring::{FixedEvent, read_header};
use perfaux::soft_pt::stream::TraceEvent;
use perfaux_tests::mem::{AuxMemory, RingMemory};
use perfaux_tests::records::u64_at;
use perfaux_tests::shims::with_pt;

fn program(n: usize) -> Vec<TraceEvent> {
    let mut state = 7u64;
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            match (state >> 40) % 8 {
                0..=4 => TraceEvent::Conditional {
                    taken: state & (1 << 20) != 0,
                    next: 0x40_0000,
                },
                5 | 6 => TraceEvent::Indirect {
                    target: 0x40_0000 + ((state >> 20) % 0x4000) * 16,
                },
                _ => TraceEvent::Time(state >> 8),
            }
        })
        .collect()
}

/// The AUX records in the data ring: (offset, size, flags).
fn aux_records(mem: &RingMemory) -> Vec<(u64, u64, u64)> {
    mem.records()
        .iter()
        .filter(|r| read_header(r).unwrap().type_ == record_type::AUX)
        .map(|r| {
            let w = |k: usize| u64_at(r, 8 + 8 * k);
            (w(0), w(1), w(2))
        })
        .collect()
}

fn aux_tail(mem: &RingMemory) -> &AtomicU64 {
    // SAFETY: the user page lives as long as `mem`; aux_tail is 8-aligned
    // and only accessed atomically here (the consumer's side).
    unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*mem.user_page()).aux_tail)) }
}

/// How the consumer reads the AUX area.
#[derive(Clone, Copy)]
enum Consumer {
    /// After every ToPA PMI.
    KeepsUp,
    /// Only at the end.
    Never,
    /// After every third PMI (so its tail stops where a PMI's skid left
    /// the head, mid-page), re-enabling the event when the area overflowed
    /// (PERF_EVENT_IOC_ENABLE after the kernel's disable).
    Lags,
}

fn run(consumer: Consumer) -> (Vec<u8>, Vec<u8>, Vec<u64>, bool) {
    let mem = RingMemory::new(16, 0);
    let aux = AuxMemory::scattered(8); // eight 4 KiB regions
    with_pt(
        &mem,
        &aux,
        false,
        1024,
        FixedEvent {
            id: 1,
            sample_id: None,
        },
        |p| {
            let (area, tracer, model, pt) = (p.area, p.tracer, p.model, p.pmu);
            // Event 1, intel_pt/tsc/.
            let tsc = perfaux::pt::config::bits::TSC;
            pt.add(1, tsc, false, ef::START).unwrap();

            let mut received = Vec::new();
            let mut flags = Vec::new();
            let mut pmis = 0;
            let mut disabled = false;
            let consume = |received: &mut Vec<u8>, flags: &mut Vec<u64>| {
                for (offset, size, f) in aux_records(&mem) {
                    flags.push(f);
                    received.extend((0..size).map(|i| aux.byte((offset + i) as usize)));
                    // Release: the AUX bytes were read before the space is given back.
                    aux_tail(&mem).store(offset + size, Ordering::Release);
                }
            };
            tracer.trace(TraceEvent::Enable(0x40_0000));
            for e in program(40_000) {
                tracer.trace(e);
                if tracer.take_pmi() > 0 {
                    pt.handle_pmi();
                    pmis += 1;
                    match consumer {
                        Consumer::KeepsUp => consume(&mut received, &mut flags),
                        Consumer::Lags if pmis % 3 == 0 => {
                            consume(&mut received, &mut flags);
                            if area.take_disable_request() {
                                disabled = true;
                                pt.del();
                                consume(&mut received, &mut flags);
                                pt.add(1, tsc, false, ef::START).unwrap();
                                tracer.trace(TraceEvent::Enable(0x40_0000));
                            }
                        }
                        _ => {}
                    }
                }
            }
            pt.del();
            consume(&mut received, &mut flags);
            disabled |= area.take_disable_request();
            let stream = model.borrow().0.clone();
            (received, stream, flags, disabled)
        },
    )
}

#[test]
fn a_consumer_that_keeps_up_reads_the_whole_stream() {
    let (received, stream, flags, disabled) = run(Consumer::KeepsUp);
    assert!(
        stream.len() > 100_000,
        "the stream wrapped the 32 KiB area several times: {}",
        stream.len()
    );
    assert!(flags.len() > 5, "{} AUX records", flags.len());
    assert!(
        flags.iter().all(|f| f & aux_flags::TRUNCATED == 0),
        "{flags:x?}"
    );
    assert_eq!(received.len(), stream.len());
    assert!(
        received == stream,
        "the records and the AUX area give back the whole stream"
    );
    assert!(!disabled);
}

#[test]
fn a_consumer_that_falls_behind_gets_truncated_data_and_the_event_disabled() {
    let (received, stream, flags, disabled) = run(Consumer::Never);
    assert!(
        received == stream,
        "what was written is all there, in order"
    );
    assert_eq!(
        stream.len(),
        32 * 1024,
        "the tracer stopped when the area was full (STOP on the region before the tail)"
    );
    assert!(
        flags.iter().any(|f| f & aux_flags::TRUNCATED != 0),
        "{flags:x?}"
    );
    assert!(disabled, "the event's disable is requested");
}

#[test]
fn a_consumer_that_lags_gets_back_every_byte_written_and_nothing_else() {
    let (received, stream, flags, disabled) = run(Consumer::Lags);
    let truncated = flags
        .iter()
        .filter(|f| *f & aux_flags::TRUNCATED != 0)
        .count();
    assert!(
        truncated > 2,
        "the area overflowed: {truncated} TRUNCATED records"
    );
    assert!(disabled);
    assert!(
        stream.len() > 100_000,
        "re-enabled, the tracer went on: {} bytes",
        stream.len()
    );
    // Had a STOP let the tracer pass the consumer's tail, the bytes read
    // back from the area would be newer than those the tracer wrote there.
    assert_eq!(received.len(), stream.len());
    assert!(received == stream, "every byte written is read back intact");
}
