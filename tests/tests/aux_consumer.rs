// SPDX-License-Identifier: MIT OR Apache-2.0
//! `AuxConsumer` against a model: the engine writes a counting byte
//! stream through AUX transactions into a writable area, the consumer
//! reads it back in pieces of any size (wrapping the area's end), commits
//! when it likes, and the engine's space is exactly what the committed
//! tail leaves (`CIRC_SPACE`).

use std::collections::VecDeque;

use perfaux::Error;
use perfaux::abi::PAGE_SIZE;
use perfaux::aux::{AuxConfig, AuxConsumer};
use perfaux::ring::{FixedEvent, RingConfig};
use perfaux_tests::mem::{AuxMemory, RingMemory};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    /// The tracer writes up to this many bytes in one transaction.
    Produce(u64),
    /// The consumer refreshes and reads up to this many bytes.
    Consume(usize),
    /// The consumer gives back what it read.
    Commit,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u64..20_000).prop_map(Step::Produce),
        3 => (0usize..20_000).prop_map(Step::Consume),
        1 => Just(Step::Commit),
    ]
}

/// Byte `i` of the stream the tracer writes.
fn byte(i: u64) -> u8 {
    (i.wrapping_mul(0x9e37_79b9) >> 13) as u8
}

fn run(pages: usize, steps: &[Step]) -> Result<(), TestCaseError> {
    let mem = RingMemory::new(2, 0);
    let ring = mem.ring(RingConfig::default());
    let aux = AuxMemory::new(pages, 0);
    let area = mem.aux_area(&aux, AuxConfig::default());
    let size = (pages * PAGE_SIZE) as u64;
    // SAFETY: the area's own memory, writable mode, the only consumer.
    let mut consumer = unsafe { AuxConsumer::new(mem.user_page(), aux.pages()) }.unwrap();
    prop_assert_eq!(consumer.size(), size);
    // The model: bytes written and not yet read; the committed tail.
    let mut unread: VecDeque<u8> = VecDeque::new();
    let (mut written, mut read, mut committed) = (0u64, 0u64, 0u64);
    for s in steps {
        match *s {
            Step::Produce(n) => {
                let Ok(h) = area.begin() else {
                    // Full (head - tail == size - 1 leaves no space).
                    prop_assert_eq!(written - committed, size - 1);
                    continue;
                };
                prop_assert_eq!(h.head(), written);
                prop_assert_eq!(h.space(), size - 1 - (written - committed), "CIRC_SPACE");
                let n = n.min(h.space());
                for i in written..written + n {
                    let at = (i % size) as usize;
                    // SAFETY: a live AUX page; [head, head + space) is the
                    // tracer's while the transaction is open.
                    unsafe { *aux.pages()[at / PAGE_SIZE].add(at % PAGE_SIZE) = byte(i) };
                    unread.push_back(byte(i));
                }
                written += n;
                h.end(n, &ring, &mut FixedEvent::default());
                let _ = mem.records();
            }
            Step::Consume(max) => {
                prop_assert_eq!(consumer.refresh(), written - read);
                prop_assert_eq!(consumer.position(), read);
                let mut out = vec![0u8; max];
                let n = consumer.read_to_slice(&mut out);
                prop_assert_eq!(n as u64, (written - read).min(max as u64));
                let want: Vec<u8> = unread.drain(..n).collect();
                prop_assert_eq!(&out[..n], &want[..], "bytes {}..{}", read, read + n as u64);
                read += n as u64;
                prop_assert_eq!(consumer.available(), written - read);
            }
            Step::Commit => {
                consumer.commit();
                committed = read;
                // SAFETY: the user page is live; read with no writer active.
                prop_assert_eq!(unsafe { (*mem.user_page()).aux_tail }, committed);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn the_consumer_reads_what_the_engine_wrote_and_gives_space_back(
        pages in prop_oneof![Just(1usize), Just(2), Just(4)],
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        run(pages, &steps)?;
    }
}

/// A new consumer starts at the committed tail; `skip_to_head` consumes
/// without reading.
#[test]
fn a_new_consumer_starts_at_aux_tail_and_skip_consumes() {
    let mem = RingMemory::new(2, 0);
    let ring = mem.ring(RingConfig::default());
    let aux = AuxMemory::new(2, 0);
    let area = mem.aux_area(&aux, AuxConfig::default());
    area.begin()
        .unwrap()
        .end(3000, &ring, &mut FixedEvent::default());
    {
        // SAFETY: as in `run`.
        let mut first = unsafe { AuxConsumer::new(mem.user_page(), aux.pages()) }.unwrap();
        assert_eq!(first.refresh(), 3000);
        first.skip_to_head();
        assert_eq!(first.available(), 0);
        first.commit();
    }
    area.begin()
        .unwrap()
        .end(100, &ring, &mut FixedEvent::default());
    // SAFETY: as in `run`; the first consumer is gone.
    let mut second = unsafe { AuxConsumer::new(mem.user_page(), aux.pages()) }.unwrap();
    assert_eq!(second.position(), 3000);
    assert_eq!(second.refresh(), 100);
}

#[test]
fn bad_memory_is_refused() {
    let mem = RingMemory::new(2, 0);
    let aux = AuxMemory::new(4, 0);
    let pages = aux.pages();
    let odd = [pages[0], pages[1], pages[2]];
    let misaligned = [pages[0].wrapping_add(8)];
    let null = [std::ptr::null_mut()];
    for bad in [&pages[..0], &odd[..], &misaligned[..], &null[..]] {
        // SAFETY: refused before any access.
        let r = unsafe { AuxConsumer::new(mem.user_page(), bad) };
        assert_eq!(r.err(), Some(Error::Invalid), "{} pages", bad.len());
    }
    // SAFETY: as above.
    let r = unsafe { AuxConsumer::new(std::ptr::null_mut(), pages) };
    assert_eq!(r.err(), Some(Error::Invalid));
}
