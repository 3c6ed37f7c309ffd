// SPDX-License-Identifier: MIT OR Apache-2.0
//! loom models of the cross-CPU ring protocol (ring_buffer.c's A/B/C/D): a writer on one
//! CPU, the consumer on another, talking only through `data_head`,
//! `data_tail` and the payload, every word of which is a loom atomic (see
//! `sync::loom_memory`), so a missing Release/Acquire shows up as a stale or
//! torn record. Run with:
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" cargo test -p perfaux --release --test loom_ring
//! ```
//!
//! Under loom a page is 64 bytes, so a one-chunk ring holds three 16-byte
//! records and the writer really runs into the consumer's tail.
#![cfg(loom)]

use std::alloc::{Layout, alloc_zeroed};

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use perfaux::Error;
use perfaux::abi::{PerfEventMmapPage, record_type};
use perfaux::loom_memory;
use perfaux::ring::{BackwardReader, Consumer, FixedEvent, Ring, RingConfig, read_header};

const CHUNK: usize = 64;
const RECORD: usize = 16;
const TEST_TYPE: u32 = 0x5445_5354;

/// Caller memory for one ring, allocated once and shared by every model
/// execution (each registers fresh loom words over it).
struct Memory {
    user: *mut PerfEventMmapPage,
    chunks: &'static [*mut u8],
}

// SAFETY: the memory is leaked and only ever accessed through the ring
// protocol under test (or through registered loom words).
unsafe impl Sync for Memory {}
// SAFETY: as above.
unsafe impl Send for Memory {}

fn memory() -> &'static Memory {
    // SAFETY: non-zero sizes with valid alignments; the blocks are leaked
    // (they live for the whole test process).
    let (user, chunk) = unsafe {
        (
            alloc_zeroed(Layout::from_size_align(4096, 4096).unwrap()),
            alloc_zeroed(Layout::from_size_align(CHUNK, 64).unwrap()),
        )
    };
    let chunks: &'static [*mut u8] = Box::leak(vec![chunk].into_boxed_slice());
    Box::leak(Box::new(Memory {
        user: user.cast(),
        chunks,
    }))
}

/// Registers the words the protocol shares: data_head/data_tail and the chunk.
fn register(m: &Memory) {
    let positions = std::ptr::addr_of_mut!(unsafe_deref(m.user).data_head).cast::<u8>();
    loom_memory::register(positions, 16);
    loom_memory::register(m.chunks[0], CHUNK);
}

/// `&mut *p` for field projection of the leaked user page.
fn unsafe_deref(p: *mut PerfEventMmapPage) -> &'static mut PerfEventMmapPage {
    // SAFETY: the page is leaked (valid forever); only the address of a field
    // is taken, never a value read through this reference concurrently.
    unsafe { &mut *p }
}

fn record(seq: u64) -> [u8; RECORD] {
    let mut r = [0u8; RECORD];
    r[..4].copy_from_slice(&TEST_TYPE.to_ne_bytes());
    r[6..8].copy_from_slice(&(RECORD as u16).to_ne_bytes());
    r[8..].copy_from_slice(&(seq * 0x0101_0101 + 0x5a).to_ne_bytes());
    r
}

/// The sequence number of a complete record; panics on a torn one.
fn check(bytes: &[u8]) -> Option<u64> {
    let h = read_header(bytes).expect("a header");
    if h.type_ == record_type::LOST {
        return None;
    }
    assert_eq!(
        (h.type_, h.size as usize),
        (TEST_TYPE, RECORD),
        "torn header: {bytes:02x?}"
    );
    let word = u64::from_ne_bytes(bytes[8..16].try_into().unwrap());
    assert_eq!((word - 0x5a) % 0x0101_0101, 0, "torn payload: {bytes:02x?}");
    Some((word - 0x5a) / 0x0101_0101)
}

fn write(ring: &Ring<'_>, seq: u64) -> Result<(), Error> {
    let mut h = ring.begin(
        RECORD,
        &mut FixedEvent {
            id: 1,
            sample_id: None,
        },
    )?;
    assert_eq!(h.copy(&record(seq)), 0);
    h.end();
    Ok(())
}

fn model(f: impl Fn() + Send + Sync + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(f);
}

/// Writable mode: the writer never overwrites what the consumer has not
/// given back, and the consumer only ever reads complete records, in order.
#[test]
fn writer_and_consumer_on_two_cpus() {
    let m = memory();
    model(move || {
        register(m);
        // SAFETY: the memory is valid for the test's life and used only by
        // this ring and its consumer.
        let ring = unsafe { Ring::new(m.user, m.chunks, 0, RingConfig::default()) }.unwrap();
        // SAFETY: as above; the ring is in writable mode.
        let mut consumer = unsafe { Consumer::new(m.user, m.chunks, 0) }.unwrap();

        let writer = thread::spawn(move || {
            let mut written = 0;
            for seq in 0..4 {
                if write(&ring, seq).is_ok() {
                    written += 1;
                }
            }
            (written, ring.pending_lost())
        });

        let mut scratch = [0u8; 64];
        let mut seen = Vec::new();
        let mut drain = |c: &mut Consumer<'_>| {
            c.refresh();
            while let Some(r) = c.next_record(&mut scratch) {
                if let Some(seq) = check(r.expect("well-formed")) {
                    seen.push(seq);
                }
            }
            c.commit();
        };
        drain(&mut consumer);
        drain(&mut consumer);
        let (written, pending) = writer.join().unwrap();
        drain(&mut consumer);

        assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order: {seen:?}");
        assert_eq!(
            seen.len(),
            written,
            "every accepted record read once: {seen:?}"
        );
        assert!(written >= 3, "three records always fit");
        assert!(pending <= 4 - written as u64);
    });
}

/// Overwrite mode, written backward: once the writer has stopped (the
/// ring is paused and writers in flight finished), a reader on another CPU
/// walking from `data_head` sees only complete records, newest first.
#[test]
fn paused_backward_ring_read_from_another_cpu() {
    let m = memory();
    model(move || {
        register(m);
        let config = RingConfig {
            overwrite: true,
            backward: true,
            ..RingConfig::default()
        };
        // SAFETY: as in the writable test.
        let ring = unsafe { Ring::new(m.user, m.chunks, 0, config) }.unwrap();
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let done_writer = done.clone();
        let writer = thread::spawn(move || {
            for seq in 0..5 {
                write(&ring, seq).expect("overwrite mode never refuses");
            }
            ring.pause();
            // Release: the writer's last record happens-before the reader's walk.
            done_writer.store(true, Ordering::Release);
        });
        // Acquire pairs with the writer's Release above.
        while !done.load(Ordering::Acquire) {
            thread::yield_now();
        }
        // SAFETY: no writer is active any more (waited for above).
        let mut reader = unsafe { BackwardReader::new(m.user, m.chunks, 0) }.unwrap();
        let mut out = [0u8; 64];
        let mut seqs = Vec::new();
        while let Some(n) = reader.next_record(&mut out) {
            seqs.push(check(&out[..n.unwrap()]).expect("no LOST in overwrite mode"));
        }
        assert_eq!(
            seqs,
            [4, 3, 2, 1],
            "a full lap of the newest records, newest first"
        );
        writer.join().unwrap();
    });
}
