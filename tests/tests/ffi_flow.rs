// SPDX-License-Identifier: MIT OR Apache-2.0
//! The C ABI's object storage exercised from Rust, so that Miri can check
//! the unsafe code behind it (objects written into caller storage, objects
//! referring to each other in place, live markers, the C callbacks):
//! `cargo +nightly miri test -p perfaux-tests --test ffi_flow`. The C
//! programs of `c_abi.rs` cover the same functions from C, under valgrind.

use std::ffi::c_void;
use std::mem::zeroed;
use std::ptr::{null, null_mut};

use perfaux::Error;
use perfaux::abi::{PerfEventAttr, attr_flags, sample_type as st};
use perfaux_ffi::*;
use perfaux_tests::mem::{AuxMemory, PageBlock, RingMemory};
use perfaux_tests::records::u32_at;

/// Collects what a sink receives.
unsafe extern "C" fn collect(ctx: *mut c_void, bytes: *const c_void, len: usize) -> usize {
    // SAFETY: `ctx` is the `Vec<u8>` the test passes; `bytes` readable for `len`.
    unsafe {
        let v = &mut *ctx.cast::<Vec<u8>>();
        v.extend_from_slice(std::slice::from_raw_parts(bytes.cast::<u8>(), len));
    }
    0
}

unsafe extern "C" fn on_wakeup(ctx: *mut c_void) {
    // SAFETY: `ctx` is the test's counter.
    unsafe { *ctx.cast::<u32>() += 1 };
}

fn trace(pt: *mut perfaux_pt_cpu, kind: u32, flags: u32, target: u64) -> i32 {
    let e = perfaux_trace_event {
        kind,
        flags,
        target,
        ..Default::default()
    };
    // SAFETY: `pt` points to initialized storage; `e` is a local.
    unsafe { perfaux_pt_trace(pt, &e) }
}

#[test]
fn ring_writer_and_reader() {
    let mem = RingMemory::new(2, 0);
    let mut wakeups = 0u32;
    let config = perfaux_ring_config {
        flags: 0,
        reserved: 0,
        watermark: 64,
        wakeup: perfaux_wakeup {
            func: Some(on_wakeup),
            ctx: (&raw mut wakeups).cast(),
        },
    };
    // SAFETY: for all calls below: storage lives on this frame, the memory in
    // `mem`, both outliving every object; objects are torn down in order.
    unsafe {
        let mut storage: (perfaux_ring, perfaux_consumer) = zeroed();
        // Raw pointers, taken once: a ring refers to its own storage (its
        // wakeup), so no `&mut` of it may be taken afterwards.
        let ring: *mut perfaux_ring = &raw mut storage.0;
        let cons: *mut perfaux_consumer = &raw mut storage.1;
        let chunks = mem.chunks().as_ptr().cast::<*mut c_void>();
        assert_eq!(
            perfaux_ring_init(ring, mem.user_page().cast(), chunks, 2, 0, &config),
            0
        );
        assert_eq!(
            perfaux_consumer_init(cons, mem.user_page().cast(), chunks, 2, 0),
            0
        );
        for n in 0..40u16 {
            let mut h: perfaux_output_handle = zeroed();
            let size = 16 + 8 * usize::from(n % 20);
            let mut rec = vec![n as u8; size];
            rec[..4].copy_from_slice(&0x1000u32.to_ne_bytes());
            rec[6..8].copy_from_slice(&(size as u16).to_ne_bytes());
            assert_eq!(perfaux_output_begin(&mut h, ring, size, null()), 0);
            assert_eq!(perfaux_output_copy(&mut h, rec.as_ptr().cast(), size), 0);
            assert_eq!(perfaux_output_end(&mut h), 0);
            assert!(perfaux_consumer_refresh(cons) > 0);
            let mut back = [0u8; 256];
            assert_eq!(
                perfaux_consumer_next(cons, back.as_mut_ptr().cast(), back.len()),
                size as isize
            );
            assert_eq!(&back[..size], &rec[..]);
            assert_eq!(perfaux_consumer_commit(cons), 0);
        }
        assert!(wakeups > 0);
        assert_eq!(perfaux_output_end(&mut zeroed()), Error::Invalid.errno());
        assert_eq!(perfaux_consumer_fini(cons), 0);
        assert_eq!(perfaux_ring_fini(ring), 0);
        assert_eq!(perfaux_ring_fini(ring), Error::Invalid.errno());
    }
}

/// A platform with no callbacks (CPU 0, no clock, no task, no IRQ masking).
fn no_platform() -> perfaux_platform {
    perfaux_platform {
        cpu: None,
        clock: None,
        current_task: None,
        irq_save: None,
        irq_restore: None,
        ctx: null_mut(),
    }
}

/// The PT CPU under test and its leader event, as `with_pt_cpu` made them.
struct PtCpu<'m> {
    pt: *mut perfaux_pt_cpu,
    leader: *mut perfaux_event,
    mem: &'m RingMemory,
    aux: &'m AuxMemory,
}

/// A PT CPU through the C ABI: a 16 KiB ring, an 8 KiB AUX area in
/// overwrite mode over two separate pages, one ToPA table, a PSB+ every
/// 256 bytes, and a leader event (`leader_attr`) on them, not yet scheduled
/// in. Runs `f`, which must close any event it opens, then tears the rest
/// down in order, checking every call.
fn with_pt_cpu<R>(leader_attr: &PerfEventAttr, f: impl FnOnce(&PtCpu<'_>) -> R) -> R {
    let mem = RingMemory::new(4, 0);
    let aux = AuxMemory::new(2, 0);
    let tables = PageBlock::new(4096);
    let la = leader_attr.to_bytes();
    let overwrite = perfaux_aux_config {
        flags: PERFAUX_AUX_OVERWRITE,
        reserved: 0,
        watermark: 0,
        wakeup: perfaux_wakeup {
            func: None,
            ctx: null_mut(),
        },
    };
    // SAFETY: for all calls below, as in the ring test: storage on this
    // frame, the memory in the locals, all outliving the objects; the
    // leader is torn down before the PMU, area and ring it refers to.
    unsafe {
        let mut storage: (
            perfaux_ring,
            perfaux_aux_area,
            perfaux_pt_cpu,
            perfaux_event,
            perfaux_pt_buffer,
        ) = zeroed();
        // Raw pointers, taken once: the objects refer to each other in
        // place, so no `&mut` may be taken of them afterwards.
        let ring: *mut perfaux_ring = &raw mut storage.0;
        let area: *mut perfaux_aux_area = &raw mut storage.1;
        let pt: *mut perfaux_pt_cpu = &raw mut storage.2;
        let leader: *mut perfaux_event = &raw mut storage.3;
        let buffer: *mut perfaux_pt_buffer = &raw mut storage.4;
        let chunks = mem.chunks().as_ptr().cast::<*mut c_void>();
        let pages = aux.pages().as_ptr().cast::<*mut c_void>();
        assert_eq!(
            perfaux_ring_init(ring, mem.user_page().cast(), chunks, 4, 0, null()),
            0
        );
        assert_eq!(perfaux_aux_area_init(area, ring, pages, 2, &overwrite), 0);
        assert_eq!(
            perfaux_pt_buffer_init_area(buffer, tables.ptr().cast(), 1, area, null()),
            0
        );
        assert_eq!(
            perfaux_pt_cpu_init_area(pt, buffer, area, ring, null(), null(), null(), 256),
            0
        );
        assert_eq!(
            perfaux_event_open_pt(leader, la.as_ptr().cast(), pt, 1, 0, null(), null()),
            0
        );
        assert_eq!(perfaux_event_set_buffer(leader, ring, area), 0);
        let result = f(&PtCpu {
            pt,
            leader,
            mem: &mem,
            aux: &aux,
        });
        assert_eq!(perfaux_event_fini(leader), 0);
        assert_eq!(perfaux_pt_cpu_fini(pt), 0);
        assert_eq!(perfaux_pt_buffer_fini(buffer), 0);
        assert_eq!(perfaux_aux_area_fini(area), 0);
        assert_eq!(perfaux_ring_fini(ring), 0);
        result
    }
}

#[test]
fn pt_leader_and_a_sampler_through_the_c_abi() {
    let mut leader_attr = PerfEventAttr::new(136);
    leader_attr.type_ = 8;
    leader_attr.sample_type = st::TID | st::TIME | st::IDENTIFIER;
    leader_attr.flags = attr_flags::SAMPLE_ID_ALL;
    let mut sampler_attr = PerfEventAttr::new(136);
    sampler_attr.type_ = 1;
    sampler_attr.sample_period = 1;
    sampler_attr.sample_type = st::IDENTIFIER | st::AUX;
    sampler_attr.aux_sample_size = 512;
    sampler_attr.flags = attr_flags::SAMPLE_ID_ALL;
    let sa = sampler_attr.to_bytes();
    let counter = perfaux_pmu_ops {
        caps: PERFAUX_CAP_NO_NMI,
        reserved: 0,
        add: None,
        del: None,
        start: None,
        stop: None,
        snapshot_aux: None,
        ctx: null_mut(),
    };
    let platform = no_platform();
    with_pt_cpu(&leader_attr, |c| {
        let (pt, leader) = (c.pt, c.leader);
        // SAFETY: as in `with_pt_cpu`; the sampler's storage is on this
        // frame and it is torn down here, before the leader.
        unsafe {
            let mut sampler_storage: perfaux_event = zeroed();
            let sampler: *mut perfaux_event = &raw mut sampler_storage;
            assert_eq!(
                perfaux_event_open(sampler, sa.as_ptr().cast(), &counter, 2, 0, leader, null()),
                0
            );
            assert_eq!(perfaux_event_join_group(sampler), 0);
            assert_eq!(perfaux_event_set_output(sampler, leader), 0);
            assert_eq!(perfaux_event_sched_in(leader, &platform), 0);
            assert_eq!(trace(pt, PERFAUX_TRACE_ENABLE, 0, 0x40_0000), 0);
            for i in 0..300u64 {
                assert_eq!(
                    trace(
                        pt,
                        PERFAUX_TRACE_CONDITIONAL,
                        (i % 3 == 0) as u32,
                        0x40_0000
                    ),
                    0
                );
                if i % 4 == 0 {
                    assert_eq!(
                        trace(pt, PERFAUX_TRACE_INDIRECT_JUMP, 0, 0x40_0000 + i * 32),
                        0
                    );
                }
            }
            let data: perfaux_sample_data = zeroed();
            assert_eq!(
                perfaux_event_overflow(sampler, &platform, &data),
                8 + 8 + 8 + 512
            );
            let mut direct = Vec::new();
            let sink = perfaux_sink {
                copy: Some(collect),
                ctx: (&raw mut direct).cast(),
            };
            assert_eq!(perfaux_pt_snapshot_aux(pt, &sink, 512), 512);
            let records = c.mem.records();
            let sample = records
                .iter()
                .find(|r| u32_at(r, 0) == 9)
                .expect("a sample");
            assert_eq!(
                &sample[24..],
                &direct[..],
                "the sample's AUX block is the snapshot"
            );
            assert_eq!(perfaux_event_fini(sampler), 0);
        }
    });
}

/// The AUX bytes a PT CPU writes for `events` (after a TIP.PGE), fed one
/// `perfaux_pt_trace` call each or in one `perfaux_pt_trace_all`, with the
/// PMIs the calls reported.
fn pt_trace_through_the_c_abi(events: &[perfaux_trace_event], batch: bool) -> (Vec<u8>, i32) {
    let mut leader_attr = PerfEventAttr::new(136);
    leader_attr.type_ = 8;
    let platform = no_platform();
    with_pt_cpu(&leader_attr, |c| {
        // SAFETY: `c`'s objects are live for the closure; `events` is a
        // slice.
        unsafe {
            assert_eq!(perfaux_event_sched_in(c.leader, &platform), 0);
            assert_eq!(trace(c.pt, PERFAUX_TRACE_ENABLE, 0, 0x40_0000), 0);
            let pmis = if batch {
                perfaux_pt_trace_all(c.pt, events.as_ptr(), events.len())
            } else {
                events.iter().map(|e| perfaux_pt_trace(c.pt, e)).sum()
            };
            let bytes = (0..c.aux.size()).map(|i| c.aux.byte(i)).collect();
            (bytes, pmis)
        }
    })
}

#[test]
fn a_batch_through_the_c_abi_is_the_events_one_by_one() {
    // More than one of the batch's stack pieces, across both AUX pages
    // (the buffer wraps: overwrite mode), with PSB+ every 256 bytes.
    let events: Vec<perfaux_trace_event> = (0..1500u64)
        .map(|i| perfaux_trace_event {
            kind: match i % 7 {
                3 => PERFAUX_TRACE_INDIRECT_JUMP,
                6 => PERFAUX_TRACE_TIME,
                _ => PERFAUX_TRACE_CONDITIONAL,
            },
            flags: u32::from(i % 7 != 3 && i % 7 != 6 && i % 3 == 0),
            target: if i % 7 == 6 {
                0
            } else {
                0x40_0000 + (i * 0x35) % 0x2_0000
            },
            value: if i % 7 == 6 { i * 1000 } else { 0 },
            ..Default::default()
        })
        .collect();
    let (one_by_one, pmis) = pt_trace_through_the_c_abi(&events, false);
    let (batched, batch_pmis) = pt_trace_through_the_c_abi(&events, true);
    assert!(
        one_by_one.iter().any(|&b| b != 0),
        "the events made packets"
    );
    assert!(one_by_one == batched, "the same AUX bytes");
    assert_eq!(pmis, batch_pmis);

    // One malformed event refuses the whole batch: nothing is traced.
    let mut bad = events.clone();
    bad[1000].kind = 0xffff;
    let (untouched, _) = pt_trace_through_the_c_abi(&bad[..0], true);
    let (refused, err) = pt_trace_through_the_c_abi(&bad, true);
    assert_eq!(err, Error::Invalid.errno());
    assert!(refused == untouched, "nothing traced");
    // SAFETY: NULL storage is refused before anything is read.
    let null_cpu = unsafe { perfaux_pt_trace_all(null_mut(), events.as_ptr(), 1) };
    assert_eq!(null_cpu, Error::Invalid.errno());
}
