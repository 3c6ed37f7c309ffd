// SPDX-License-Identifier: MIT OR Apache-2.0
//! The AUX area against `perf_aux_output_begin`/`end` and their edge cases,
//! and `copy_aux` against `perf_output_copy_aux` (wraps, boundaries, the whole
//! area, many pages).

use std::sync::atomic::{AtomicUsize, Ordering};

use perfaux::Error;
use perfaux::abi::{PAGE_SIZE, aux_flags, record_type, sample_type as st};
use perfaux::aux::{AuxArea, AuxConfig, copy_aux, write_itrace_start};
use perfaux::ring::{FixedEvent, RingConfig, SampleId, Wakeup, read_header};
use perfaux_tests::mem::{AuxMemory, RingMemory, VecSink};
use perfaux_tests::records::u64_at;

struct Counter(AtomicUsize);
impl Wakeup for Counter {
    fn wakeup(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn event() -> FixedEvent {
    FixedEvent {
        id: 7,
        sample_id: Some(SampleId {
            sample_type: st::TID | st::IDENTIFIER,
            pid: 1,
            tid: 2,
            id: 7,
            ..SampleId::default()
        }),
    }
}

fn word(r: &[u8], i: usize) -> u64 {
    u64_at(r, 8 + 8 * i)
}

fn aux_head(mem: &RingMemory) -> u64 {
    // SAFETY: the user page is valid; read when no writer is active.
    unsafe { (*mem.user_page()).aux_head }
}

#[test]
fn overwrite_mode_records() {
    let mem = RingMemory::new(4, 0);
    let ring = mem.ring(RingConfig::default());
    let aux = AuxMemory::new(4, 2);
    let area = mem.aux_area(
        &aux,
        AuxConfig {
            overwrite: true,
            ..AuxConfig::default()
        },
    );
    assert_eq!(area.size(), 16384);
    assert_eq!(area.watermark(), 0);
    // SAFETY: read before any concurrent access.
    let (aux_size, aux_offset) =
        unsafe { ((*mem.user_page()).aux_size, (*mem.user_page()).aux_offset) };
    assert_eq!((aux_size, aux_offset), (16384, 4096 + 16384));

    // Size 0, only OVERWRITE: no record.
    let h = area.begin().unwrap();
    assert_eq!(h.space(), 0);
    h.end(0, &ring, &mut event());
    assert!(mem.records().is_empty());

    // The driver reports its position; the record says where and how much.
    let mut h = area.begin().unwrap();
    h.set_head(40_000);
    h.end(16384, &ring, &mut event());
    assert_eq!(aux_head(&mem), 40_000);
    assert_eq!(area.head(), 40_000);
    let r = mem.records();
    assert_eq!(r.len(), 1);
    let hdr = read_header(&r[0]).unwrap();
    assert_eq!((hdr.type_, hdr.misc, hdr.size), (record_type::AUX, 0, 48));
    assert_eq!(
        (word(&r[0], 0), word(&r[0], 1), word(&r[0], 2)),
        (40_000, 16384, aux_flags::OVERWRITE)
    );
    assert_eq!(word(&r[0], 3), 1 | (2 << 32), "pid/tid trailer");
    assert_eq!(word(&r[0], 4), 7, "identifier trailer");

    // Size 0 with a flag beyond OVERWRITE (and the PMU format bits): a record.
    let mut h = area.begin().unwrap();
    h.flag(aux_flags::PARTIAL | aux_flags::CORESIGHT_FORMAT_RAW);
    h.set_head(40_000);
    h.end(0, &ring, &mut event());
    let r = mem.records();
    assert_eq!(
        word(&r[0], 2),
        aux_flags::PARTIAL | aux_flags::CORESIGHT_FORMAT_RAW | aux_flags::OVERWRITE
    );
    // Only format bits: nothing to say.
    let mut h = area.begin().unwrap();
    h.flag(aux_flags::CORESIGHT_FORMAT_RAW);
    h.end(0, &ring, &mut event());
    assert!(mem.records().is_empty());
}

#[test]
fn nested_transactions_are_refused() {
    let mem = RingMemory::new(1, 0);
    let aux = AuxMemory::new(1, 0);
    let area = mem.aux_area(&aux, AuxConfig::default());
    let h = area.begin().unwrap();
    assert_eq!(area.begin().err(), Some(Error::Busy));
    drop(h);
    assert!(area.begin().is_ok(), "a dropped transaction is closed");
}

#[test]
fn flag_overwrite_is_ignored() {
    let mem = RingMemory::new(1, 0);
    let aux = AuxMemory::new(1, 0);
    let area = mem.aux_area(&aux, AuxConfig::default());
    let mut h = area.begin().unwrap();
    h.flag(aux_flags::OVERWRITE | aux_flags::TRUNCATED);
    assert_eq!(h.flags(), 0, "the whole call is ignored");
    h.flag(aux_flags::COLLISION);
    assert_eq!(h.flags(), aux_flags::COLLISION);
}

#[test]
fn writable_mode_space_records_and_watermark_wakeups() {
    let woken = Counter(AtomicUsize::new(0));
    let mem = RingMemory::new(4, 0);
    let ring = mem.ring(RingConfig::default());
    let aux = AuxMemory::new(4, 0);
    let config = AuxConfig {
        overwrite: false,
        watermark: 0,
        wakeup: Some(&woken),
    };
    let area = mem.aux_area(&aux, config);
    assert_eq!(area.watermark(), 8192, "default: half the area");

    let h = area.begin().unwrap();
    assert_eq!(h.space(), 16383, "CIRC_SPACE: size - 1");
    h.end(5000, &ring, &mut event());
    assert_eq!(aux_head(&mem), 5000);
    assert_eq!(woken.0.load(Ordering::Relaxed), 0);
    let r = mem.records();
    assert_eq!(
        (word(&r[0], 0), word(&r[0], 1), word(&r[0], 2)),
        (0, 5000, 0)
    );

    let h = area.begin().unwrap();
    assert_eq!(h.space(), 16383 - 5000);
    h.end(4000, &ring, &mut event());
    assert_eq!(woken.0.load(Ordering::Relaxed), 1, "crossed 8192");
    let r = mem.records();
    assert_eq!((word(&r[0], 0), word(&r[0], 1)), (5000, 4000));

    // skip: within the space, and past it.
    let mut h = area.begin().unwrap();
    let space = h.space();
    assert_eq!(h.skip(space + 1), Err(Error::NoSpace));
    h.skip(100).unwrap();
    assert_eq!(h.head(), 9100);
    assert_eq!(aux_head(&mem), 9100);
    h.end(0, &ring, &mut event());
    assert!(mem.records().is_empty(), "size 0, no flags: no record");
}

#[test]
fn full_writable_area_refuses_requests_disable_and_wakes() {
    let woken = Counter(AtomicUsize::new(0));
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    let aux = AuxMemory::new(1, 0);
    let config = AuxConfig {
        overwrite: false,
        watermark: 1 << 20,
        wakeup: Some(&woken),
    };
    let area = mem.aux_area(&aux, config);
    let h = area.begin().unwrap();
    h.end(4095, &ring, &mut event());
    assert!(!area.take_disable_request());
    assert_eq!(area.begin().err(), Some(Error::NoSpace));
    assert!(
        area.take_disable_request(),
        "the event's disable is requested (even on CPU 0)"
    );
    assert!(!area.take_disable_request(), "taken once");
    assert_eq!(woken.0.load(Ordering::Relaxed), 1, "the consumer is woken");
    // The consumer gives the data back: room again.
    // SAFETY: the user page is valid; the test stands in for the consumer.
    unsafe {
        std::sync::atomic::AtomicU64::from_ptr(std::ptr::addr_of_mut!((*mem.user_page()).aux_tail))
            .store(4095, Ordering::Release)
    };
    let h = area.begin().unwrap();
    assert_eq!(h.space(), 4095);
}

#[test]
fn truncated_requests_disable_and_wakes() {
    let woken = Counter(AtomicUsize::new(0));
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    let aux = AuxMemory::new(2, 0);
    let config = AuxConfig {
        overwrite: false,
        watermark: 1 << 20,
        wakeup: Some(&woken),
    };
    let area = mem.aux_area(&aux, config);
    let mut h = area.begin().unwrap();
    h.flag(aux_flags::TRUNCATED);
    h.end(64, &ring, &mut event());
    assert!(area.take_disable_request());
    assert_eq!(woken.0.load(Ordering::Relaxed), 1);
    assert_eq!(word(&mem.records()[0], 2), aux_flags::TRUNCATED);
}

#[test]
fn unmapped_area_refuses_new_transactions_and_releases_last() {
    let mem = RingMemory::new(1, 0);
    let aux = AuxMemory::new(1, 0);
    let area = mem.aux_area(&aux, AuxConfig::default());
    let h = area.begin().unwrap();
    assert!(!area.unmap(), "a transaction still holds the area");
    assert!(!area.is_released());
    assert_eq!(
        area.begin().err(),
        Some(Error::Invalid),
        "no restart after unmap"
    );
    drop(h);
    assert!(area.is_released(), "the last transaction released it");
}

#[test]
fn bad_aux_memory_is_refused() {
    let mem = RingMemory::new(1, 0);
    let aux = AuxMemory::new(4, 0);
    let cfg = AuxConfig::default();
    // SAFETY: the calls must fail before touching the memory.
    unsafe {
        assert!(AuxArea::new(mem.user_page(), &aux.pages()[..3], cfg).is_err());
        assert!(AuxArea::new(mem.user_page(), &[], cfg).is_err());
        assert!(AuxArea::new(std::ptr::null_mut(), aux.pages(), cfg).is_err());
        let with_null = [aux.pages()[0], std::ptr::null_mut()];
        assert!(AuxArea::new(mem.user_page(), &with_null, cfg).is_err());
    }
}

fn expected(aux: &AuxMemory, from: usize, to: usize) -> Vec<u8> {
    let size = aux.size();
    let (from, to) = (from % size, to % size);
    let len = if to > from {
        to - from
    } else {
        size - from + to
    };
    (0..len).map(|i| aux.byte(from + i)).collect()
}

#[test]
fn copy_aux_ranges() {
    // Two order-1 blocks; four pages apart from each other; and an order-1
    // block then two single pages: a piece to the sink is one page or pages
    // that follow each other in memory, never more.
    // (Under Miri, which takes minutes for each, only the mix: pages in a
    // row and pages apart in one buffer.)
    let memories = [
        (AuxMemory::mixed(&[1, 0, 0]), 2 * PAGE_SIZE),
        (AuxMemory::new(4, 1), 2 * PAGE_SIZE),
        (AuxMemory::scattered(4), PAGE_SIZE),
    ];
    let take = if cfg!(miri) { 1 } else { memories.len() };
    for (aux, largest) in memories.iter().take(take) {
        copy_aux_cases(aux, *largest);
    }
}

/// `copy_aux`'s cases over `aux` (16 KiB), whose longest run of pages
/// that follow each other in memory is `largest` bytes.
fn copy_aux_cases(aux: &AuxMemory, largest: usize) {
    let mem = RingMemory::new(1, 0);
    let area = mem.aux_area(
        aux,
        AuxConfig {
            overwrite: true,
            ..AuxConfig::default()
        },
    );
    let pattern: Vec<u8> = (0..aux.size()).map(|i| (i * 31 % 251) as u8).collect();
    aux.write(0, &pattern);
    let size = aux.size() as u64;
    let h = area.begin().unwrap();
    let cases: [(&str, u64, u64); 9] = [
        ("to >= size, contiguous", 1000, 5000),
        ("wraps", 15000, 2000),
        ("to == 0", size - 4096, 0),
        ("to == size", size - 4096, size),
        ("from == to copies everything", 7000, 7000),
        ("from == to at 0", 0, 0),
        ("free-running positions", 5 * size + 100, 5 * size + 9000),
        ("one byte", 4095, 4096),
        ("page boundary to page boundary", 4096, 12288),
    ];
    for (name, from, to) in cases {
        let mut sink = VecSink::default();
        let n = copy_aux(&h, &mut sink, from, to).unwrap();
        let want = expected(aux, from as usize, to as usize);
        assert_eq!(n as usize, want.len(), "{name}");
        assert!(sink.bytes == want, "{name}: bytes differ");
        assert!(
            sink.calls.iter().all(|&c| c <= largest),
            "{name}: a sink call took more than pages in a row: {:?}",
            sink.calls
        );
        if largest > PAGE_SIZE && name == "from == to copies everything" {
            assert!(
                sink.calls.iter().any(|&c| c > PAGE_SIZE),
                "pages in a row go in one piece: {:?}",
                sink.calls
            );
        }
    }
}

#[test]
fn copy_aux_into_a_ring_across_its_end() {
    let mem = RingMemory::new(2, 0);
    let ring = mem.ring(RingConfig::default());
    let aux = AuxMemory::new(8, 0);
    let area = mem.aux_area(
        &aux,
        AuxConfig {
            overwrite: true,
            ..AuxConfig::default()
        },
    );
    let pattern: Vec<u8> = (0..aux.size()).map(|i| (i * 7 % 253) as u8).collect();
    aux.write(0, &pattern);
    // Move the data ring near its end, then copy 6000 bytes spanning AUX pages.
    let mut c = mem.consumer();
    for _ in 0..3 {
        let mut h = ring.begin(2000, &mut FixedEvent::default()).unwrap();
        h.skip(2000);
        h.end();
    }
    c.refresh();
    c.skip_to_head();
    c.commit();
    let aux_handle = area.begin().unwrap();
    let mut h = ring.begin(8 + 6000, &mut FixedEvent::default()).unwrap();
    h.put_header(perfaux::abi::PerfEventHeader {
        type_: 9,
        misc: 0,
        size: 6008,
    });
    assert_eq!(copy_aux(&aux_handle, &mut h, 30_000, 36_000), Ok(6000));
    h.end();
    c.refresh();
    let mut scratch = vec![0u8; 65536];
    let r = c.next_record(&mut scratch).unwrap().unwrap();
    assert_eq!(&r[8..], &expected(&aux, 30_000, 36_000)[..]);
}

#[test]
fn itrace_start_record() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    write_itrace_start(&ring, &mut event(), 100, 101).unwrap();
    let r = mem.records();
    let hdr = read_header(&r[0]).unwrap();
    assert_eq!((hdr.type_, hdr.size), (record_type::ITRACE_START, 32));
    assert_eq!(word(&r[0], 0), 100 | (101 << 32));
    assert_eq!(word(&r[0], 2), 7);
}

/// perf-event-data reads the PERF_RECORD_AUX and ITRACE_START records the
/// AUX area writes, trailers included.
#[test]
fn perf_event_data_parses_aux_and_itrace_start_records() {
    use perf_event_data::Record;
    use perf_event_data::endian::Native;
    use perf_event_data::parse::{ParseConfig, Parser};
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    let aux = AuxMemory::new(2, 0);
    let area = mem.aux_area(&aux, AuxConfig::default());
    let mut e = event();
    write_itrace_start(&ring, &mut e, 100, 101).unwrap();
    let mut h = area.begin().unwrap();
    h.flag(aux_flags::PARTIAL);
    h.end(3000, &ring, &mut e);
    let mut h = area.begin().unwrap();
    h.flag(aux_flags::TRUNCATED);
    h.end(1000, &ring, &mut e);
    let mut attr = perf_event_open_sys::bindings::perf_event_attr::default();
    attr.sample_type = st::TID | st::IDENTIFIER;
    attr.set_sample_id_all(1);
    let config: ParseConfig<Native> = ParseConfig::from(attr);
    let parsed: Vec<String> = mem
        .records()
        .iter()
        .map(|r| {
            match Parser::new(&r[..], config.clone())
                .parse::<Record<'_>>()
                .expect("parses")
            {
                Record::ITraceStart(t) => format!("itrace {} {}", t.pid, t.tid),
                Record::Aux(a) => {
                    format!("aux {} {} {:#x}", a.aux_offset, a.aux_size, a.flags.bits())
                }
                other => format!("{other:?}"),
            }
        })
        .collect();
    assert_eq!(
        parsed,
        ["itrace 100 101", "aux 0 3000 0x4", "aux 3000 1000 0x1"]
    );
}
