// SPDX-License-Identifier: MIT OR Apache-2.0
//! Samples with the AUX block: the size rules of `perf_prepare_sample` and
//! `perf_prepare_sample_aux` (worked examples: rounding, clamps, no leader),
//! the snapshot through a test PMU (wraps, short and failed snapshots as
//! `perf_aux_sample_output` pads them), and byte-for-byte agreement with what the PMU's
//! AUX area holds.

use perfaux::Error;
use perfaux::abi::{PerfEventAttr, sample_type as st};
use perfaux::aux::{AuxArea, AuxConfig};
use perfaux::ring::{FixedEvent, Ring, RingConfig, read_header};
use perfaux::sample::{
    AuxSampling, NoIrqMask, SampleData, SampleLayout, SnapshotAux, prepare, write_sample,
};
use perfaux_tests::mem::{AuxMemory, RingMemory};
use perfaux_tests::pmu::{Behaviour, TestPmu};
use perfaux_tests::records::{sample_aux, u64_at};

const TID_TIME_AUX: u64 = st::TID | st::TIME | st::AUX;

fn attr(sample_type: u64, aux_sample_size: u32) -> PerfEventAttr {
    let mut a = PerfEventAttr::new(136);
    a.sample_type = sample_type;
    a.aux_sample_size = aux_sample_size;
    a
}

fn data() -> SampleData<'static> {
    SampleData {
        pid: 10,
        tid: 11,
        time: 12345,
        ..SampleData::default()
    }
}

/// A data ring, an AUX area of `aux_pages` pages in overwrite mode, and the
/// test PMU with `traced` bytes of pattern written.
struct Setup {
    mem: RingMemory,
    aux: AuxMemory,
}

impl Setup {
    fn new(ring_pages: usize, aux_pages: usize) -> Setup {
        Setup {
            mem: RingMemory::new(ring_pages, 0),
            aux: AuxMemory::new(aux_pages, 0),
        }
    }

    fn area(&self) -> AuxArea<'_> {
        self.mem.aux_area(
            &self.aux,
            AuxConfig {
                overwrite: true,
                ..AuxConfig::default()
            },
        )
    }
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    (0..n as u64)
        .map(|i| ((i * 131 + seed * 17) % 251) as u8)
        .collect()
}

/// The AUX size word and the bytes after it, for a TID|TIME|AUX sample.
fn aux_of(record: &[u8]) -> (u64, &[u8]) {
    sample_aux(record, st::TID | st::TIME | st::AUX)
}

/// What the AUX area holds in the `n` bytes before `position`.
fn newest(aux: &AuxMemory, position: u64, n: u64) -> Vec<u8> {
    (0..n)
        .map(|i| aux.byte((position - n + i) as usize))
        .collect()
}

fn sample<S: SnapshotAux + ?Sized>(
    ring: &Ring<'_>,
    a: &PerfEventAttr,
    d: &SampleData<'_>,
    aux: Option<&AuxSampling<'_, '_, S>>,
) -> Result<SampleLayout, Error> {
    write_sample(ring, &mut FixedEvent::default(), a, d, aux, &NoIrqMask)
}

#[test]
fn e2_worked_examples() {
    // (aux_sample_size, AUX area pages, expected aux size, expected record size)
    let table: [(u32, usize, u64, u16); 7] = [
        (4096, 4, 4096, 4128),
        (4097, 4, 4096, 4128),
        (7, 4, 0, 32),
        (0, 4, 0, 32),
        (100_000, 4, 16384, 16416),
        (100_000, 32, 65496, 65528),
        (8192, 1, 4096, 4128),
    ];
    for (ask, pages, aux_size, record_size) in table {
        let s = Setup::new(32, pages);
        let ring = s.mem.ring(RingConfig::default());
        let area = s.area();
        let pmu = TestPmu::new(&area);
        pmu.trace(&s.aux, &pattern(3 * s.aux.size() + 1000, ask as u64));
        let sampling = AuxSampling {
            area: &area,
            pmu: &pmu,
            active_here: true,
        };
        let layout = sample(&ring, &attr(TID_TIME_AUX, ask), &data(), Some(&sampling)).unwrap();
        assert_eq!(
            (layout.aux_size, layout.size),
            (aux_size, record_size),
            "aux_sample_size {ask}, {pages} pages"
        );
        let r = &s.mem.records()[0];
        assert_eq!(read_header(r).unwrap().size, record_size);
        let (size, bytes) = aux_of(r);
        assert_eq!(size, aux_size);
        assert_eq!(
            bytes.len() as u64,
            aux_size,
            "the size word equals the bytes that follow"
        );
        assert!(
            bytes == newest(&s.aux, pmu.position.get(), aux_size),
            "the newest bytes, oldest first"
        );
        assert_eq!(
            pmu.snapshots.get(),
            u32::from(aux_size != 0),
            "no PMU call for an empty AUX block"
        );
    }
}

#[test]
fn sizes_round_down_to_8() {
    let s = Setup::new(4, 4);
    let area = s.area();
    let pmu = TestPmu::new(&area);
    let sampling = AuxSampling {
        area: &area,
        pmu: &pmu,
        active_here: true,
    };
    for (ask, want) in [
        (1, 0),
        (7, 0),
        (8, 8),
        (15, 8),
        (4097, 4096),
        (65535, 16384),
    ] {
        assert_eq!(
            prepare(&attr(TID_TIME_AUX, ask), &data(), Some(&sampling))
                .unwrap()
                .aux_size,
            want,
            "{ask}"
        );
    }
}

#[test]
fn larger_than_the_area_copies_the_whole_buffer_oldest_first() {
    let s = Setup::new(16, 2);
    let ring = s.mem.ring(RingConfig::default());
    let area = s.area();
    let pmu = TestPmu::new(&area);
    pmu.trace(&s.aux, &pattern(12_345, 3)); // not at a page boundary
    let sampling = AuxSampling {
        area: &area,
        pmu: &pmu,
        active_here: true,
    };
    let layout = sample(
        &ring,
        &attr(TID_TIME_AUX, 1 << 20),
        &data(),
        Some(&sampling),
    )
    .unwrap();
    assert_eq!(layout.aux_size, 8192);
    let r = &s.mem.records()[0];
    assert!(aux_of(r).1 == newest(&s.aux, 12_345, 8192));
}

#[test]
fn the_record_never_passes_65528_bytes() {
    let s = Setup::new(32, 32);
    let ring = s.mem.ring(RingConfig {
        overwrite: true,
        ..RingConfig::default()
    });
    let area = s.area();
    let pmu = TestPmu::new(&area);
    pmu.trace(&s.aux, &pattern(200_000, 5));
    let sampling = AuxSampling {
        area: &area,
        pmu: &pmu,
        active_here: true,
    };
    for extra in [
        0u64,
        st::IP,
        st::IP | st::ADDR | st::PERIOD,
        st::IP | st::ID | st::CPU,
    ] {
        let layout = sample(
            &ring,
            &attr(TID_TIME_AUX | extra, u32::MAX),
            &data(),
            Some(&sampling),
        )
        .unwrap();
        assert!(layout.size <= 65528 && layout.size % 8 == 0, "{layout:?}");
        assert!(
            65535 - usize::from(layout.size) < 8,
            "the AUX block takes everything left: {layout:?}"
        );
    }
    let layout = prepare(&attr(TID_TIME_AUX, u32::MAX), &data(), Some(&sampling)).unwrap();
    assert_eq!(layout.size, 65528, "a record of exactly 65528 bytes");
}

#[test]
fn large_fields_shrink_the_aux_block_to_nothing() {
    let s = Setup::new(32, 32);
    let area = s.area();
    let pmu = TestPmu::new(&area);
    let sampling = AuxSampling {
        area: &area,
        pmu: &pmu,
        active_here: true,
    };
    let a = attr(TID_TIME_AUX | st::CALLCHAIN, u32::MAX);
    let chain = vec![0u64; 4000];
    let d = SampleData {
        callchain: &chain,
        ..data()
    };
    let layout = prepare(&a, &d, Some(&sampling)).unwrap();
    assert_eq!(
        layout.aux_size,
        (65535 - (8 + 16 + 8 * 4001 + 8)) as u64 & !7
    );
    let chain = vec![0u64; 8186]; // 8 + 16 + 8 * 8187 + 8 = 65528: nothing left
    let d = SampleData {
        callchain: &chain,
        ..data()
    };
    let layout = prepare(&a, &d, Some(&sampling)).unwrap();
    assert_eq!((layout.aux_size, layout.size), (0, 65528));
    let chain = vec![0u64; 8200]; // past 65535 before the AUX block
    let d = SampleData {
        callchain: &chain,
        ..data()
    };
    assert_eq!(prepare(&a, &d, Some(&sampling)), Err(Error::Invalid));
}

#[test]
fn no_area_or_inactive_leader_gives_size_0_without_calling_the_pmu() {
    let s = Setup::new(4, 4);
    let ring = s.mem.ring(RingConfig::default());
    let area = s.area();
    let pmu = TestPmu::new(&area);
    // No AUX leader at all (aux_sample_size without a link).
    assert_eq!(
        sample(
            &ring,
            &attr(TID_TIME_AUX, 4096),
            &data(),
            None::<&AuxSampling<'_, '_>>
        )
        .unwrap()
        .aux_size,
        0
    );
    // The leader is not active on this CPU.
    let elsewhere = AuxSampling {
        area: &area,
        pmu: &pmu,
        active_here: false,
    };
    assert_eq!(
        sample(&ring, &attr(TID_TIME_AUX, 4096), &data(), Some(&elsewhere))
            .unwrap()
            .aux_size,
        0
    );
    // The area is unmapped.
    let here = AuxSampling {
        area: &area,
        pmu: &pmu,
        active_here: true,
    };
    area.unmap();
    assert_eq!(
        sample(&ring, &attr(TID_TIME_AUX, 4096), &data(), Some(&here))
            .unwrap()
            .aux_size,
        0
    );
    assert_eq!(pmu.snapshots.get(), 0);
    for r in s.mem.records() {
        assert_eq!(
            (read_header(&r).unwrap().size, aux_of(&r).0),
            (32, 0),
            "a zero size word, nothing after"
        );
    }
}

#[test]
fn a_sample_inside_a_snapshot_gets_no_aux_and_the_outer_one_is_intact() {
    let s = Setup::new(16, 4);
    let ring = s.mem.ring(RingConfig::default());
    let area = s.area();
    let pmu = TestPmu::new(&area);
    pmu.trace(&s.aux, &pattern(20_000, 7));
    let sampling = AuxSampling {
        area: &area,
        pmu: &pmu,
        active_here: true,
    };
    pmu.pmi_ring.set(Some(&ring));
    let outer = sample(&ring, &attr(TID_TIME_AUX, 4096), &data(), Some(&sampling)).unwrap();
    assert_eq!(outer.aux_size, 4096);
    assert_eq!(
        pmu.nested.take().unwrap().unwrap().aux_size,
        0,
        "the nested sample carries no AUX data"
    );
    assert_eq!(pmu.snapshots.get(), 1, "the PMU was not re-entered");
    let r = s.mem.records();
    assert_eq!(r.len(), 2);
    // Reservation order: the outer sample first, the nested one after it.
    assert_eq!(aux_of(&r[0]).0, 4096);
    assert!(
        aux_of(&r[0]).1 == newest(&s.aux, 20_000, 4096),
        "outer AUX bytes intact"
    );
    assert_eq!((read_header(&r[1]).unwrap().size, aux_of(&r[1]).0), (32, 0));
    assert_eq!(u64_at(&r[1], 16), 999);
    assert!(!area.in_sampling(), "the guard is down again");
}

#[test]
fn a_refused_sample_never_touches_the_pmu() {
    let s = Setup::new(1, 4);
    let ring = s.mem.ring(RingConfig::default());
    let area = s.area();
    let pmu = TestPmu::new(&area);
    let sampling = AuxSampling {
        area: &area,
        pmu: &pmu,
        active_here: true,
    };
    sample(&ring, &attr(TID_TIME_AUX, 2048), &data(), Some(&sampling)).unwrap();
    assert_eq!(pmu.snapshots.get(), 1);
    assert_eq!(
        sample(&ring, &attr(TID_TIME_AUX, 2048), &data(), Some(&sampling)),
        Err(Error::NoSpace)
    );
    assert_eq!(
        pmu.snapshots.get(),
        1,
        "no snapshot for a sample without room"
    );
    assert_eq!(ring.pending_lost(), 1);
}

#[test]
fn short_or_failed_snapshots_are_zero_filled() {
    // Deliberate deviation (design.md): Linux writes at most 8 zero bytes
    // and leaves stale ring bytes; perfaux zero-fills the whole remainder.
    for behaviour in [
        Behaviour::Short(3),
        Behaviour::Short(8),
        Behaviour::Short(1000),
        Behaviour::Fail(-22),
    ] {
        let s = Setup::new(1, 2);
        let ring = s.mem.ring(RingConfig {
            overwrite: true,
            ..RingConfig::default()
        });
        // Fill the data ring with 0xff first, so zeros cannot be left-overs.
        for _ in 0..4 {
            let mut h = ring.begin(1024, &mut FixedEvent::default()).unwrap();
            h.copy(&[0xff; 1024]);
            h.end();
        }
        let area = s.area();
        let pmu = TestPmu::new(&area);
        pmu.trace(&s.aux, &pattern(9000, 1));
        pmu.behaviour.set(behaviour);
        let sampling = AuxSampling {
            area: &area,
            pmu: &pmu,
            active_here: true,
        };
        let layout = sample(&ring, &attr(TID_TIME_AUX, 2048), &data(), Some(&sampling)).unwrap();
        assert_eq!(
            layout.aux_size, 2048,
            "the size was decided before the PMU ran"
        );
        let at = 4096; // the sample landed at the ring's start again
        let bytes = &s.mem.chunk_bytes(0)[at % 4096 + 32..at % 4096 + 32 + 2048];
        let copied = match behaviour {
            Behaviour::Short(k) => 2048 - k as usize,
            _ => 0,
        };
        let want = newest(&s.aux, 9000, copied as u64);
        assert!(
            bytes[..copied] == want[..],
            "{behaviour:?}: the copied part"
        );
        assert!(
            bytes[copied..].iter().all(|&b| b == 0),
            "{behaviour:?}: the rest is zeros"
        );
    }
}

/// `__perf_output_begin`: a sample written right after a PERF_RECORD_LOST carries
/// the identity values refreshed for that record (the new time, and the
/// output event's id as stream id), as Linux's does.
#[test]
fn a_sample_after_a_lost_record_carries_the_refreshed_values() {
    use perfaux::ring::{OutputEvent, SampleId};
    struct Clock(u64);
    impl OutputEvent for Clock {
        fn id(&self) -> u64 {
            77
        }
        fn id_header_size(&self) -> usize {
            16
        }
        fn sample_id(&mut self) -> Option<SampleId> {
            self.0 += 1;
            Some(SampleId {
                sample_type: st::TID | st::TIME,
                pid: 10,
                tid: 11,
                time: self.0,
                stream_id: 77,
                ..SampleId::default()
            })
        }
    }
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    ring.pause();
    assert!(
        sample(
            &ring,
            &attr(st::TID | st::TIME | st::STREAM_ID, 0),
            &data(),
            None::<&AuxSampling<'_, '_>>
        )
        .is_err()
    );
    ring.resume();
    let mut clock = Clock(5000);
    let a = attr(st::TID | st::TIME | st::STREAM_ID, 0);
    write_sample(
        &ring,
        &mut clock,
        &a,
        &SampleData {
            stream_id: 1,
            ..data()
        },
        None::<&AuxSampling<'_, '_>>,
        &NoIrqMask,
    )
    .unwrap();
    let r = mem.records();
    assert_eq!(
        read_header(&r[0]).unwrap().type_,
        perfaux::abi::record_type::LOST
    );
    assert_eq!(u64_at(&r[0], 32), 5001, "the LOST trailer's time");
    let s = &r[1];
    assert_eq!(
        u64_at(s, 16),
        5001,
        "the sample's time is the refreshed one"
    );
    assert_eq!(u64_at(s, 24), 77, "stream_id from the output event");
    // Without a LOST record, the caller's values stand.
    write_sample(
        &ring,
        &mut clock,
        &a,
        &SampleData {
            stream_id: 1,
            ..data()
        },
        None::<&AuxSampling<'_, '_>>,
        &NoIrqMask,
    )
    .unwrap();
    let r = mem.records();
    assert_eq!(u64_at(&r[0], 16), 12345);
    assert_eq!(u64_at(&r[0], 24), 1);
}
