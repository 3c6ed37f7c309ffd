// SPDX-License-Identifier: MIT OR Apache-2.0
//! The data ring against `kernel/events/ring_buffer.c` and its buffer edge cases.

use std::sync::atomic::{AtomicUsize, Ordering};

use perfaux::Error;
use perfaux::abi::{
    PAGE_SIZE, PERF_MMAP_PAGE_HEADER_SIZE, PerfEventMmapPage, mmap_caps, record_type,
    sample_type as st,
};
use perfaux::ring::{FixedEvent, Ring, RingConfig, SampleId, Wakeup, read_header};
use perfaux_tests::mem::RingMemory;
use perfaux_tests::records::{check_test_record, test_record, u64_at, write_test_record};

fn read_all(mem: &RingMemory) -> Vec<Vec<u8>> {
    let mut c = mem.consumer();
    c.refresh();
    let mut scratch = vec![0u8; 65536];
    let mut out = Vec::new();
    while let Some(r) = c.next_record(&mut scratch) {
        out.push(r.expect("well-formed").to_vec());
    }
    c.commit();
    out
}

#[test]
fn user_page_is_initialized_as_linux_does() {
    let mem = RingMemory::new(4, 0);
    let _ring = mem.ring(RingConfig::default());
    // SAFETY: the user page is valid; no writer is active.
    let page: &PerfEventMmapPage = unsafe { &*mem.user_page() };
    assert_eq!(page.capabilities, mmap_caps::BIT0_IS_DEPRECATED);
    assert_eq!(page.size, PERF_MMAP_PAGE_HEADER_SIZE);
    assert_eq!(page.data_offset, PAGE_SIZE as u64);
    assert_eq!(page.data_size, 4 * PAGE_SIZE as u64);
    assert_eq!((page.data_head, page.data_tail), (0, 0));
}

#[test]
fn bad_memory_is_refused() {
    let mem = RingMemory::new(3, 0);
    let cfg = RingConfig::default();
    // SAFETY: the memory is valid; each call must fail before using it.
    unsafe {
        assert_eq!(
            Ring::new(mem.user_page(), mem.chunks(), 0, cfg).err(),
            Some(Error::Invalid),
            "3 chunks"
        );
        assert_eq!(
            Ring::new(std::ptr::null_mut(), &mem.chunks()[..2], 0, cfg).err(),
            Some(Error::Invalid)
        );
        assert_eq!(
            Ring::new(
                mem.user_page().cast::<u8>().add(4).cast(),
                &mem.chunks()[..2],
                0,
                cfg
            )
            .err(),
            Some(Error::Invalid)
        );
        let null_chunk = [mem.chunks()[0], std::ptr::null_mut()];
        assert_eq!(
            Ring::new(mem.user_page(), &null_chunk, 0, cfg).err(),
            Some(Error::Invalid)
        );
        let odd_chunk = [mem.chunks()[0].add(1)];
        assert_eq!(
            Ring::new(mem.user_page(), &odd_chunk, 0, cfg).err(),
            Some(Error::Invalid)
        );
        assert_eq!(
            Ring::new(mem.user_page(), &mem.chunks()[..1], 29, cfg).err(),
            Some(Error::Invalid)
        );
    }
}

#[test]
fn records_round_trip_in_order_across_chunks_and_the_ring_end() {
    for order in [0, 1] {
        let mem = RingMemory::new(2, order);
        let ring = mem.ring(RingConfig::default());
        let mut c = mem.consumer();
        let mut scratch = vec![0u8; 65536];
        let mut next = 0u64;
        let mut seq = 0u64;
        // Odd sizes of 8-multiples walk the records across every boundary.
        for round in 0..200 {
            for _ in 0..3 {
                let size = 8 * (2 + (seq as usize * 37 + round) % 300);
                write_test_record(&ring, seq, size).unwrap();
                seq += 1;
            }
            c.refresh();
            while let Some(r) = c.next_record(&mut scratch) {
                assert_eq!(check_test_record(r.unwrap()), Ok(next));
                next += 1;
            }
            c.commit();
        }
        assert_eq!(next, seq);
        assert!(
            ring.head() > 4 * mem.data_size() as u64,
            "the ring wrapped several times"
        );
    }
}

#[test]
fn full_writable_ring_drops_then_reports_lost() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    for seq in 0..7 {
        write_test_record(&ring, seq, 512).unwrap(); // 3584 of 4096 bytes
    }
    assert_eq!(
        write_test_record(&ring, 7, 512),
        Err(Error::NoSpace),
        "511 bytes free < 512"
    );
    assert_eq!(write_test_record(&ring, 8, 1024), Err(Error::NoSpace));
    assert_eq!(ring.pending_lost(), 2);
    let first = read_all(&mem);
    assert_eq!(first.len(), 7);
    // The next successful reservation starts with PERF_RECORD_LOST.
    let trailer = SampleId {
        sample_type: st::TID | st::TIME | st::IDENTIFIER,
        pid: 1,
        tid: 2,
        time: 3,
        id: 4,
        ..SampleId::default()
    };
    let mut source = FixedEvent {
        id: 77,
        sample_id: Some(trailer),
    };
    let mut h = ring.begin(16, &mut source).unwrap();
    assert_eq!(
        h.remaining(),
        16,
        "the LOST record (48 bytes) is written before the caller's bytes"
    );
    assert_eq!(h.copy(&test_record(9, 16)), 0);
    h.end();
    let records = read_all(&mem);
    assert_eq!(records.len(), 2);
    let lost = &records[0];
    let hdr = read_header(lost).unwrap();
    assert_eq!((hdr.type_, hdr.misc, hdr.size), (record_type::LOST, 0, 48));
    assert_eq!(u64_at(lost, 8), 77, "id");
    assert_eq!(u64_at(lost, 16), 2, "lost");
    let mut expected_trailer = [0u8; 24];
    trailer.encode(&mut expected_trailer);
    assert_eq!(&lost[24..], &expected_trailer);
    assert_eq!(check_test_record(&records[1]), Ok(9));
    assert_eq!(ring.pending_lost(), 0);
}

#[test]
fn a_record_of_the_whole_data_size_never_fits() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    assert_eq!(write_test_record(&ring, 0, 4096), Err(Error::NoSpace));
    assert_eq!(ring.pending_lost(), 1);
    // 4088 fits (CIRC_SPACE leaves data_size - 1 = 4095 bytes).
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    write_test_record(&ring, 0, 4088).unwrap();
}

#[test]
fn overwrite_ring_never_drops() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig {
        overwrite: true,
        ..RingConfig::default()
    });
    for seq in 0..100 {
        write_test_record(&ring, seq, 512).unwrap();
    }
    assert_eq!(ring.pending_lost(), 0);
    assert_eq!(mem.data_head(), 100 * 512);
    // The newest records are intact where they landed.
    let last = (99 * 512) % 4096;
    assert_eq!(
        check_test_record(&mem.chunk_bytes(0)[last..last + 512]),
        Ok(99)
    );
}

#[test]
fn ring_without_data_pages_is_paused_and_counts_nothing() {
    let mem = RingMemory::new(0, 0);
    let ring = mem.ring(RingConfig::default());
    assert!(ring.is_paused());
    assert_eq!(write_test_record(&ring, 0, 16), Err(Error::NoSpace));
    assert_eq!(ring.pending_lost(), 0);
    ring.resume();
    assert!(ring.is_paused(), "no data pages: stays paused");
}

#[test]
fn paused_ring_counts_lost_records() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    ring.pause();
    assert_eq!(write_test_record(&ring, 0, 16), Err(Error::NoSpace));
    assert_eq!(ring.pending_lost(), 1);
    ring.resume();
    write_test_record(&ring, 1, 16).unwrap();
    let records = read_all(&mem);
    assert_eq!(read_header(&records[0]).unwrap().type_, record_type::LOST);
}

#[test]
fn bad_sizes_are_refused_without_counting() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    let mut src = FixedEvent::default();
    assert_eq!(ring.begin(0, &mut src).err(), Some(Error::Invalid));
    assert_eq!(ring.begin(65536, &mut src).err(), Some(Error::Invalid));
    assert_eq!(ring.pending_lost(), 0);
}

#[test]
fn writes_never_pass_the_reservation() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    let mut h = ring.begin(16, &mut FixedEvent::default()).unwrap();
    assert_eq!(h.copy(&[1u8; 10]), 0);
    assert_eq!(h.copy(&[2u8; 10]), 4, "4 bytes would overrun");
    assert_eq!(h.skip(3), 3);
    assert_eq!(h.remaining(), 0);
    h.end();
    assert_eq!(
        &mem.chunk_bytes(0)[16..24],
        &[0u8; 8],
        "nothing written past the record"
    );
}

struct CountingWakeup(AtomicUsize);
impl Wakeup for CountingWakeup {
    fn wakeup(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn watermark_wakeups() {
    let w = CountingWakeup(AtomicUsize::new(0));
    let mem = RingMemory::new(4, 0); // 16 KiB
    let ring = mem.ring(RingConfig {
        watermark: 1024,
        wakeup: Some(&w),
        ..RingConfig::default()
    });
    assert_eq!(ring.watermark(), 1024);
    let mut c = mem.consumer();
    let mut scratch = vec![0u8; 65536];
    for seq in 0..64 {
        write_test_record(&ring, seq, 128).unwrap(); // 8192 bytes in all
        c.refresh();
        while c.next_record(&mut scratch).is_some() {}
        c.commit();
    }
    // A wakeup when the head passes each watermark (strictly beyond it):
    // 8192 / 1024 = 8 crossings, the last only at 8192 + ... so 7.
    assert_eq!(w.0.load(Ordering::Relaxed), 7);
    // Default: half the data size; clamped to the data size.
    assert_eq!(mem.ring(RingConfig::default()).watermark(), 8192);
    assert_eq!(
        mem.ring(RingConfig {
            watermark: 1 << 30,
            ..RingConfig::default()
        })
        .watermark(),
        16384
    );
}

#[test]
fn wakeup_events_wake_every_nth_sample() {
    let w = CountingWakeup(AtomicUsize::new(0));
    let mem = RingMemory::new(16, 0);
    let ring = mem.ring(RingConfig {
        wakeup: Some(&w),
        ..RingConfig::default()
    });
    for seq in 0..10 {
        let mut h = ring.begin(16, &mut FixedEvent::default()).unwrap();
        h.copy(&test_record(seq, 16));
        h.count_sample(3);
        h.end();
    }
    assert_eq!(w.0.load(Ordering::Relaxed), 3, "after samples 3, 6 and 9");
}

#[test]
fn backward_ring_reads_newest_first() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig {
        overwrite: true,
        backward: true,
        ..RingConfig::default()
    });
    for seq in 0..50 {
        write_test_record(&ring, seq, 8 * (2 + seq as usize % 13)).unwrap();
    }
    assert_eq!(mem.data_head(), ring.head());
    assert!((mem.data_head() as i64) < 0, "head counts down from 0");
    ring.pause();
    let mut reader = mem.backward_reader();
    let mut out = vec![0u8; 65536];
    let mut seqs = Vec::new();
    let mut bytes = 0;
    while let Some(n) = reader.next_record(&mut out) {
        let n = n.unwrap();
        bytes += n;
        seqs.push(check_test_record(&out[..n]).unwrap());
    }
    assert!(bytes <= 4096);
    assert_eq!(seqs[0], 49, "newest first");
    assert!(
        seqs.windows(2).all(|w| w[0] == w[1] + 1),
        "then each older one: {seqs:?}"
    );
    assert!(seqs.len() > 10);
}

#[test]
fn backward_ring_before_wrapping_stops_at_unused_space() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig {
        overwrite: true,
        backward: true,
        ..RingConfig::default()
    });
    for seq in 0..3 {
        write_test_record(&ring, seq, 64).unwrap();
    }
    ring.pause();
    let mut reader = mem.backward_reader();
    let mut out = vec![0u8; 64];
    let mut seqs = Vec::new();
    while let Some(n) = reader.next_record(&mut out) {
        seqs.push(check_test_record(&out[..n.unwrap()]).unwrap());
    }
    assert_eq!(seqs, [2, 1, 0]);
}

#[test]
fn consumer_scratch_too_small_leaves_the_record() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    // Push the head so that the next record straddles the ring end.
    for seq in 0..7 {
        write_test_record(&ring, seq, 576).unwrap();
    }
    read_all(&mem);
    write_test_record(&ring, 7, 512).unwrap(); // 4032..4544: wraps
    let mut c = mem.consumer();
    c.refresh();
    let mut small = [0u8; 100];
    assert_eq!(
        c.next_record(&mut small).unwrap().err(),
        Some(Error::NoMemory)
    );
    let mut big = [0u8; 512];
    assert_eq!(
        check_test_record(c.next_record(&mut big).unwrap().unwrap()),
        Ok(7)
    );
}

#[test]
fn self_monitoring_fields_are_published_under_the_lock() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    ring.update_self_monitoring(&perfaux::ring::SelfMonitoring {
        index: 3,
        offset: -5,
        time_enabled: 10,
        time_running: 9,
    });
    // SAFETY: no writer is active.
    let page = unsafe { &*mem.user_page() };
    assert_eq!(
        (
            page.lock,
            page.index,
            page.offset,
            page.time_enabled,
            page.time_running
        ),
        (2, 3, -5, 10, 9)
    );
}

/// `__perf_output_begin`: the LOST record's sample_id is refreshed from the output
/// event when it is written (Linux re-reads the clock), and the values are
/// the ones the LOST trailer carries.
#[test]
fn lost_record_refreshes_the_sample_id() {
    struct Clocked {
        now: u64,
        refreshed: u32,
    }
    impl perfaux::ring::OutputEvent for Clocked {
        fn id(&self) -> u64 {
            9
        }
        fn id_header_size(&self) -> usize {
            8
        }
        fn sample_id(&mut self) -> Option<SampleId> {
            self.now += 100;
            self.refreshed += 1;
            Some(SampleId {
                sample_type: st::TIME,
                time: self.now,
                ..SampleId::default()
            })
        }
    }
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    ring.pause();
    assert_eq!(write_test_record(&ring, 0, 16), Err(Error::NoSpace));
    ring.resume();
    let mut clock = Clocked {
        now: 1000,
        refreshed: 0,
    };
    let mut h = ring.begin(16, &mut clock).unwrap();
    h.copy(&test_record(1, 16));
    h.end();
    assert_eq!(
        clock.refreshed, 1,
        "refreshed once, when the LOST record was written"
    );
    let records = read_all(&mem);
    let lost = &records[0];
    assert_eq!(read_header(lost).unwrap().size, 32);
    assert_eq!(u64_at(lost, 24), 1100, "the refreshed time");
    // Without losses, nothing is refreshed.
    write_test_record(&ring, 2, 16).unwrap();
    let mut h = ring.begin(16, &mut clock).unwrap();
    h.copy(&test_record(3, 16));
    h.end();
    assert_eq!(clock.refreshed, 1);
}
