// SPDX-License-Identifier: MIT OR Apache-2.0
//! The ring against a plain `Vec<u8>` model: random record sizes, random
//! splits into copy/skip calls, random consumer steps, in every mode
//! (writable/overwrite, forward/backward) and geometry (chunks, order).
//! After every step the ring's data bytes, `data_head` and pending lost
//! count must equal the model's, and the consumer must read exactly the
//! model's records.

use std::collections::VecDeque;

use perfaux::Error;
use perfaux::abi::{PAGE_SIZE, record_type};
use perfaux::ring::{FixedEvent, RingConfig};
use perfaux_tests::mem::RingMemory;
use perfaux_tests::records::test_record;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Write a record of `8 * words` bytes, handed over in pieces; pieces
    /// marked `true` are skipped instead of copied.
    Write {
        words: usize,
        pieces: Vec<(usize, bool)>,
    },
    /// Consume up to this many records (writable mode only).
    Consume(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (2usize..160, proptest::collection::vec((1usize..200, prop::bool::weighted(0.2)), 1..5))
            .prop_map(|(words, pieces)| Op::Write { words, pieces }),
        1 => (0usize..6).prop_map(Op::Consume),
    ]
}

struct Model {
    bytes: Vec<u8>,
    head: u64,
    tail: u64,
    lost: u64,
    overwrite: bool,
    backward: bool,
    /// Records published and not consumed, oldest first (writable mode).
    records: VecDeque<Vec<u8>>,
}

impl Model {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn put(&mut self, at: u64, data: &[u8], skipped: &[bool]) {
        for (i, (&b, &skip)) in data.iter().zip(skipped).enumerate() {
            if !skip {
                let n = self.bytes.len() as u64;
                self.bytes[((at + i as u64) % n) as usize] = b;
            }
        }
    }

    /// Returns whether the record was accepted.
    fn write(&mut self, record: &[u8], skipped: &[bool]) -> bool {
        let lost_size = if self.lost != 0 { 24 } else { 0 };
        let size = (record.len() + lost_size) as u64;
        let mask = self.size() - 1;
        if !self.overwrite {
            let space = if self.backward {
                self.head.wrapping_sub(self.tail.wrapping_add(1)) & mask
            } else {
                self.tail.wrapping_sub(self.head.wrapping_add(1)) & mask
            };
            if space < size {
                self.lost += 1;
                return false;
            }
        }
        let start = if self.backward {
            self.head.wrapping_sub(size)
        } else {
            self.head
        };
        self.head = if self.backward {
            start
        } else {
            start.wrapping_add(size)
        };
        let mut at = start;
        if lost_size != 0 {
            let mut lost = Vec::new();
            lost.extend_from_slice(&record_type::LOST.to_ne_bytes());
            lost.extend_from_slice(&0u16.to_ne_bytes());
            lost.extend_from_slice(&24u16.to_ne_bytes());
            lost.extend_from_slice(&5u64.to_ne_bytes());
            lost.extend_from_slice(&self.lost.to_ne_bytes());
            self.put(at, &lost, &[false; 24]);
            self.records.push_back(lost);
            self.lost = 0;
            at = at.wrapping_add(24);
        }
        self.put(at, record, skipped);
        let mut visible = record.to_vec();
        for (b, &s) in visible.iter_mut().zip(skipped) {
            if s {
                *b = 0xee; // placeholder: compared only where written
            }
        }
        self.records.push_back(visible);
        true
    }
}

fn check(config: (usize, u32, bool, bool), ops: Vec<Op>) -> Result<(), TestCaseError> {
    let (chunks, order, overwrite, backward) = config;
    let mem = RingMemory::new(chunks, order);
    let ring = mem.ring(RingConfig {
        overwrite,
        backward,
        ..RingConfig::default()
    });
    let mut consumer = (!overwrite && !backward).then(|| mem.consumer());
    let mut model = Model {
        bytes: vec![0; chunks * (PAGE_SIZE << order)],
        head: 0,
        tail: 0,
        lost: 0,
        overwrite,
        backward,
        records: VecDeque::new(),
    };
    let mut scratch = vec![0u8; 65536];
    for (seq, op) in ops.into_iter().enumerate() {
        match op {
            Op::Write { words, pieces } => {
                let record = test_record(seq as u64, 8 * words);
                // Hand the record over in the given pieces (the last takes the rest).
                let mut skipped = vec![false; record.len()];
                let mut spans = Vec::new();
                let mut at = 0;
                for (k, (len, skip)) in pieces.into_iter().enumerate() {
                    // The header is always copied: a reader needs its size.
                    let (len, skip) = if k == 0 {
                        (len.max(8), false)
                    } else {
                        (len, skip)
                    };
                    let len = len.min(record.len() - at);
                    spans.push((at, len, skip));
                    at += len;
                }
                if at < record.len() {
                    spans.push((at, record.len() - at, false));
                }
                let accepted = match ring.begin(
                    record.len(),
                    &mut FixedEvent {
                        id: 5,
                        sample_id: None,
                    },
                ) {
                    Ok(mut h) => {
                        for &(from, len, skip) in &spans {
                            if skip {
                                prop_assert_eq!(h.skip(len), 0);
                                skipped[from..from + len].fill(true);
                            } else {
                                prop_assert_eq!(h.copy(&record[from..from + len]), 0);
                            }
                        }
                        prop_assert_eq!(h.remaining(), 0);
                        h.end();
                        true
                    }
                    Err(Error::NoSpace) => false,
                    Err(e) => return Err(TestCaseError::fail(format!("unexpected {e}"))),
                };
                prop_assert_eq!(
                    accepted,
                    model.write(&record, &skipped),
                    "record {} accepted?",
                    seq
                );
            }
            Op::Consume(n) => {
                let Some(c) = consumer.as_mut() else { continue };
                c.refresh();
                for _ in 0..n {
                    let Some(r) = c.next_record(&mut scratch) else {
                        break;
                    };
                    let r = r.map_err(|e| TestCaseError::fail(format!("{e}")))?;
                    let want = model.records.pop_front().expect("the model has the record");
                    prop_assert_eq!(r.len(), want.len());
                    for (i, (&got, &w)) in r.iter().zip(&want).enumerate() {
                        prop_assert!(w == 0xee || got == w, "byte {} of a record", i);
                    }
                }
                c.commit();
                // The consumer's tail is what it read.
                // SAFETY: the user page is valid; read atomically.
                model.tail =
                    unsafe { std::ptr::addr_of!((*mem.user_page()).data_tail).read_volatile() };
            }
        }
        prop_assert_eq!(mem.data_head(), model.head);
        prop_assert_eq!(ring.pending_lost(), model.lost);
    }
    // Every byte of the data area, chunk by chunk.
    let chunk = PAGE_SIZE << order;
    for i in 0..chunks {
        prop_assert!(
            mem.chunk_bytes(i) == &model.bytes[i * chunk..(i + 1) * chunk],
            "chunk {} differs",
            i
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn ring_matches_the_vec_model(
        config in (prop_oneof![Just(1usize), Just(2), Just(4)], 0u32..2, any::<bool>(), any::<bool>()),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        check(config, ops)?;
    }
}
