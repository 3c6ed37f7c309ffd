// SPDX-License-Identifier: MIT OR Apache-2.0
//! The software tracer where its output stops (a ToPA STOP region fills):
//! the packets of one trace event are written whole or not at all, the
//! rest of the region is PAD (so the driver sees it full), the events whose
//! packets were lost are reported, and once the driver restarts tracing the
//! stream starts over at a PSB+ with packet generation off until TIP.PGE.

use std::cell::RefCell;

use perfaux::pt::hw::{STATUS_STOPPED, TraceHw};
use perfaux::pt::topa::{IdentityMap, Topa, TopaPosition, TopaTable};
use perfaux::soft_pt::packet::PSB;
use perfaux::soft_pt::stream::TraceEvent;
use perfaux::soft_pt::tracer::{SoftTracer, Taps};
use perfaux_tests::mem::AuxMemory;
use perfaux_tests::shims::{StreamModel, decodes};

/// Two 4 KiB regions, the first marked INT + STOP; the tracer writing
/// into the first from its start, tapped.
fn stop_after_one_region<R>(
    f: impl FnOnce(&SoftTracer<'_, Taps<'_>>, &RefCell<StreamModel>, &Topa<'_>) -> R,
) -> R {
    let aux = AuxMemory::scattered(2);
    let mut tables = vec![TopaTable::new(); 1];
    let mut topa = Topa::build(&mut tables, aux.pages(), &IdentityMap).unwrap();
    topa.mark(0, 0, true, true);
    let tap = RefCell::new(StreamModel::default());
    let tracer = SoftTracer::with_hooks(&IdentityMap, 1 << 16, Taps::new());
    tracer.hooks().set_tap(Some(&tap));
    tracer.set_topa(true);
    let base = std::ptr::from_ref(&topa.tables()[0]) as u64;
    tracer.set_output(base, TopaPosition::default().mask_ptrs());
    tracer.enable();
    f(&tracer, &tap, &topa)
}

/// Conditional branches, and every fifth an indirect one: each indirect
/// branch's unit is the TNT bits gathered (one byte) and a 3-byte TIP (16
/// bits of IP change).
fn events(n: usize) -> impl Iterator<Item = TraceEvent> {
    let mut ip = 0x40_0000u64;
    (0..n).map(move |i| {
        ip = 0x40_0000 + (ip + 0x135) % 0xf000;
        if i % 5 == 4 {
            TraceEvent::Indirect { target: ip }
        } else {
            TraceEvent::Conditional {
                taken: i % 3 == 0,
                next: ip,
            }
        }
    })
}

#[test]
fn a_stop_region_ends_on_whole_packets_padded_to_its_end() {
    stop_after_one_region(|tracer, tap, _| {
        tracer.trace(TraceEvent::Enable(0x40_0000));
        let mut fed = 1;
        for e in events(10_000) {
            if !tracer.enabled() {
                break;
            }
            tracer.trace(e);
            fed += 1;
        }
        assert!(!tracer.enabled(), "the STOP region filled");
        assert_ne!(tracer.status() & STATUS_STOPPED, 0);
        assert_eq!(tracer.take_pmi(), 1, "the region's INT");
        let stream = tap.borrow().0.clone();
        assert_eq!(
            stream.len(),
            4096,
            "written to the region's end, no further"
        );
        assert!(decodes(&stream), "no packet cut at the STOP");
        // Units of 4 bytes from an offset the PSB+ and TIP.PGE leave odd:
        // the last does not fit.
        let pad = stream.iter().rev().take_while(|&&b| b == 0).count();
        assert!(
            (1..4).contains(&pad),
            "what did not fit is PAD: {pad} bytes, {:02x?}",
            &stream[4080..]
        );
        // The event whose packets did not fit (and those whose TNT bits
        // were still gathered) are lost, the newest ones.
        let lost = tracer.take_loss().expect("a loss");
        assert_eq!(lost.end, fed, "up to the last event fed");
        assert!(
            lost.start < lost.end && lost.end - lost.start < 50,
            "{lost:?}"
        );
        assert_eq!(tracer.take_loss(), None, "taken");
        // Events while the output is stopped are lost too.
        let before = tracer.lost_events();
        tracer.trace(TraceEvent::Indirect { target: 0x40_1234 });
        assert_eq!(tracer.lost_events(), before + 1);
        assert_eq!(tap.borrow().0.len(), 4096, "and write nothing");
    });
}

#[test]
fn after_a_restart_the_stream_starts_over_at_a_psb() {
    stop_after_one_region(|tracer, tap, topa| {
        tracer.trace(TraceEvent::Enable(0x40_0000));
        for e in events(10_000) {
            if !tracer.enabled() {
                break;
            }
            tracer.trace(e);
        }
        tracer.take_loss();
        // The driver's PMI: Stopped cleared, the output on the next region,
        // TraceEn set again (`pt_handle_status`, `pt_config_start`).
        tracer.set_status(tracer.status() & !STATUS_STOPPED);
        let base = std::ptr::from_ref(&topa.tables()[0]) as u64;
        let next = TopaPosition {
            table: 0,
            index: 1,
            offset: 0,
        };
        tracer.set_output(base, next.mask_ptrs());
        tracer.enable();
        assert!(!tracer.generating(), "PacketEn off until a TIP.PGE");
        // Branches before the TIP.PGE make no packets.
        tracer.trace(TraceEvent::Conditional {
            taken: true,
            next: 0x40_2000,
        });
        tracer.trace(TraceEvent::Indirect { target: 0x40_3000 });
        tracer.trace(TraceEvent::Enable(0x40_4000));
        tracer.trace(TraceEvent::Indirect { target: 0x40_5000 });
        let stream = tap.borrow().0.clone();
        let resumed = &stream[4096..];
        assert_eq!(&resumed[..16], &PSB, "a PSB+ first");
        assert!(decodes(resumed));
        let psbend = resumed
            .windows(2)
            .position(|w| w == [0x02, 0x23])
            .expect("PSBEND");
        // TIP.PGE with the whole IP (IP compression starts over after the
        // PSB): opcode 0x11 with IPBytes 3 (6 bytes, sign-extended).
        // Nothing for the branches before it, then TIP.PGE whose 4 IP bytes
        // are the whole IP against a last IP of 0 (IP compression starts
        // over after the PSB).
        let after = &resumed[psbend + 2..];
        assert_eq!(&after[..5], &[0x51, 0x00, 0x40, 0x40, 0x00], "{after:02x?}");
        assert!(tracer.generating());
        assert_eq!(tracer.take_loss(), None);
    });
}
