// SPDX-License-Identifier: MIT OR Apache-2.0
//! `SoftTracer::trace_all` against `SoftTracer::trace` one event at a time:
//! for any program of trace events, cut into runs anywhere, the two write
//! the same bytes to the same places of the AUX memory, stop at the same
//! STOP region, report the same lost events, PMIs and status, and leave the
//! output at the same position. Programs cross region ends, END links, a
//! STOP region and PSB periods, and hold every kind of event.
//!
//! And both against the packet generator alone: the bytes the tracer
//! writes (its fast path straight into the ToPA window, and the general
//! one event by event) are those `PacketStream::feed` makes for the same
//! program, also when a PMI moves the output or remaps the current region
//! at any point of a `trace_all`.

use proptest::prelude::*;

use perfaux::soft_pt::packet::ExecMode;
use std::cell::RefCell;

use perfaux::pt::hw::TraceHw;
use perfaux::pt::topa::{IdentityMap, PhysMap, Topa, TopaEntry, TopaPosition, TopaTable};
use perfaux::soft_pt::stream::{PacketSink, PacketStream, TraceEvent};
use perfaux::soft_pt::tracer::{Hooks, SoftTracer, Taps};
use perfaux_tests::mem::AuxMemory;

/// What a run of the tracer leaves: the AUX bytes, the output position,
/// the status, and the tracer's counts.
#[derive(PartialEq, Eq)]
struct Outcome {
    aux: Vec<u8>,
    position: (u64, u64),
    status: u64,
    enabled: bool,
    next_event: u64,
    lost_events: u64,
    loss: Option<std::ops::Range<u64>>,
    pmis: u32,
    written: u64,
}

impl std::fmt::Debug for Outcome {
    /// The counts, and the AUX bytes as their length and a checksum (a
    /// difference shows in `first_difference`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sum = self
            .aux
            .iter()
            .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(b.into()));
        f.debug_struct("Outcome")
            .field(
                "aux",
                &format_args!("{} bytes, sum {sum:#x}", self.aux.len()),
            )
            .field("position", &self.position)
            .field("status", &format_args!("{:#x}", self.status))
            .field("enabled", &self.enabled)
            .field("next_event", &self.next_event)
            .field("lost_events", &self.lost_events)
            .field("loss", &self.loss)
            .field("pmis", &self.pmis)
            .field("written", &self.written)
            .finish()
    }
}

/// Where two outcomes' AUX bytes first differ, with the bytes around it.
fn first_difference(a: &Outcome, b: &Outcome) -> String {
    match a.aux.iter().zip(&b.aux).position(|(x, y)| x != y) {
        None => "the same AUX bytes".into(),
        Some(i) => {
            let around = i.saturating_sub(8)..(i + 8).min(a.aux.len());
            format!(
                "AUX bytes differ from {i}: {:?} against {:?}",
                &a.aux[around.clone()],
                &b.aux[around]
            )
        }
    }
}

/// Starts `tracer` on `topa`'s first region; returns its table's address.
fn start(tracer: &SoftTracer<'_, impl Hooks>, topa: &Topa<'_>) -> u64 {
    tracer.set_topa(true);
    let base = std::ptr::from_ref(&topa.tables()[0]) as u64;
    tracer.set_output(base, TopaPosition::default().mask_ptrs());
    tracer.enable();
    base
}

/// Traces `program` in `trace_all` runs of the lengths `runs` gives
/// (cycled).
fn trace_in_runs(tracer: &SoftTracer<'_, impl Hooks>, program: &[TraceEvent], runs: &[usize]) {
    let mut rest = program;
    for &n in runs.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (now, later) = rest.split_at(n.min(rest.len()));
        tracer.trace_all(now);
        rest = later;
    }
}

/// Traces `program` through ToPA over four scattered 4 KiB regions (the
/// third INT + STOP when `stop`, so the output stops there), with a PSB+
/// every 256 bytes: one event at a time when `runs` is empty, else in runs
/// of the given lengths (cycled).
fn run(program: &[TraceEvent], stop: bool, runs: &[usize]) -> Outcome {
    run_tapped(program, stop, runs, false)
}

/// [`run`], with a tap on the tracer when `tapped` (a tracer with
/// [`Taps`], whose build of the fast path tells its hooks; else one with
/// none, as every tracer outside tests).
fn run_tapped(program: &[TraceEvent], stop: bool, runs: &[usize], tapped: bool) -> Outcome {
    let tap = RefCell::new(Bytes(Vec::new()));
    if tapped {
        let tracer = SoftTracer::with_hooks(&IdentityMap, 256, Taps::new());
        tracer.hooks().set_tap(Some(&tap));
        run_on(&tracer, program, stop, runs)
    } else {
        run_on(&SoftTracer::new(&IdentityMap, 256), program, stop, runs)
    }
}

/// [`run`] on `tracer`.
fn run_on(
    tracer: &SoftTracer<'_, impl Hooks>,
    program: &[TraceEvent],
    stop: bool,
    runs: &[usize],
) -> Outcome {
    let aux = AuxMemory::scattered(4);
    let mut tables = vec![TopaTable::new(); 1];
    let mut topa = Topa::build(&mut tables, aux.pages(), &IdentityMap).unwrap();
    if stop {
        topa.mark(0, 2, true, true);
    }
    let base = start(tracer, &topa);
    if runs.is_empty() {
        for &e in program {
            tracer.trace(e);
        }
    } else {
        trace_in_runs(tracer, program, runs);
    }
    Outcome {
        aux: (0..aux.size()).map(|i| aux.byte(i)).collect(),
        // The table's address differs between runs: where in it.
        position: (tracer.output().0 - base, tracer.output().1),
        status: tracer.status(),
        enabled: tracer.enabled(),
        next_event: tracer.next_event(),
        lost_events: tracer.lost_events(),
        loss: tracer.take_loss(),
        pmis: tracer.take_pmi(),
        written: tracer.written(),
    }
}

/// Collects what a tracer's tap sees, or what a packet generator makes.
struct Bytes(Vec<u8>);

impl PacketSink for Bytes {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}

/// The bytes the tracer writes for `program` (read through its tap), traced
/// in runs of the given lengths (cycled), through ToPA over four scattered
/// 4 KiB regions with a PSB+ every 256 bytes; and the bytes
/// `PacketStream::feed` makes for it with the tracer's configuration.
fn tracer_and_generator(program: &[TraceEvent], runs: &[usize]) -> (Vec<u8>, Vec<u8>) {
    let aux = AuxMemory::scattered(4);
    let mut tables = vec![TopaTable::new(); 1];
    let topa = Topa::build(&mut tables, aux.pages(), &IdentityMap).unwrap();
    let tap = RefCell::new(Bytes(Vec::new()));
    let tracer = SoftTracer::with_hooks(&IdentityMap, 256, Taps::new());
    tracer.hooks().set_tap(Some(&tap));
    start(&tracer, &topa);
    trace_in_runs(&tracer, program, runs);
    tracer.hooks().set_tap(None);
    let mut generator = PacketStream::with_config(256, tracer.config());
    let mut made = Bytes(Vec::new());
    for &e in program {
        generator.feed(e, &mut made);
    }
    (tap.into_inner().0, made.0)
}

/// Any trace event, mostly those of straight-line code (branches, calls,
/// returns), with addresses near each other and far apart.
fn event() -> impl Strategy<Value = TraceEvent> {
    let ip = prop_oneof![
        3 => 0x40_0000u64..0x40_1000,
        1 => 0x40_0000u64..0x4000_0000,
        1 => any::<u64>().prop_map(|ip| ip | 0xffff_8000_0000_0000),
    ];
    let mode = prop_oneof![
        Just(ExecMode::Bits16),
        Just(ExecMode::Bits32),
        Just(ExecMode::Bits64),
    ];
    prop_oneof![
        24 => (any::<bool>(), ip.clone()).prop_map(|(taken, next)| TraceEvent::Conditional { taken, next }),
        2 => ip.clone().prop_map(|target| TraceEvent::Jump { target }),
        3 => (ip.clone(), ip.clone(), any::<bool>())
            .prop_map(|(target, ret, indirect)| TraceEvent::Call { target, ret, indirect }),
        3 => ip.clone().prop_map(|target| TraceEvent::Return { target }),
        4 => ip.clone().prop_map(|target| TraceEvent::Indirect { target }),
        1 => (ip.clone(), proptest::option::of(ip.clone()))
            .prop_map(|(from, to)| TraceEvent::Async { from, to }),
        1 => ip.clone().prop_map(TraceEvent::Enable),
        1 => proptest::option::of(ip).prop_map(TraceEvent::Disable),
        1 => mode.prop_map(TraceEvent::Mode),
        2 => any::<u64>().prop_map(TraceEvent::Time),
        1 => any::<u8>().prop_map(TraceEvent::Frequency),
        1 => any::<u8>().prop_map(TraceEvent::Tick),
        1 => Just(TraceEvent::Pad),
        1 => Just(TraceEvent::Overflow),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn trace_all_in_any_runs_is_trace_one_by_one(
        program in proptest::collection::vec(event(), 1..6000),
        runs in proptest::collection::vec(1usize..700, 1..8),
        stop in any::<bool>(),
    ) {
        let mut program = program;
        program.insert(0, TraceEvent::Enable(0x40_0000));
        let one_by_one = run(&program, stop, &[]);
        let batched = run(&program, stop, &runs);
        prop_assert_eq!(&batched, &one_by_one, "{}", first_difference(&batched, &one_by_one));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// The tracer builds its write path twice, with and without the calls
    /// to its tap and interrupt hook (which tests and tools set): the two
    /// write the same.
    #[test]
    fn a_tap_changes_nothing_the_tracer_writes(
        program in proptest::collection::vec(event(), 1..6000),
        runs in proptest::collection::vec(1usize..700, 1..8),
        stop in any::<bool>(),
    ) {
        let mut program = program;
        program.insert(0, TraceEvent::Enable(0x40_0000));
        let plain = run(&program, stop, &runs);
        let tapped = run_tapped(&program, stop, &runs, true);
        prop_assert_eq!(&tapped, &plain, "{}", first_difference(&tapped, &plain));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_tracer_writes_what_the_packet_generator_makes(
        program in proptest::collection::vec(event(), 1..6000),
        runs in proptest::collection::vec(1usize..700, 1..8),
    ) {
        let mut program = program;
        program.insert(0, TraceEvent::Enable(0x40_0000));
        let (written, made) = tracer_and_generator(&program, &runs);
        let at = written.iter().zip(&made).position(|(a, b)| a != b);
        prop_assert!(
            written == made,
            "{} bytes written, {} made, first difference at {:?}",
            written.len(),
            made.len(),
            at
        );
    }
}

/// A program's mix (three in four conditional branches, indirect branches,
/// timestamps, the odd call and return) in long runs: the fast path's own
/// ground, through every region end, END link and PSB+ of the output.
#[test]
fn a_program_mix_writes_what_the_packet_generator_makes() {
    let mut state = 0x1234_5678u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let program: Vec<TraceEvent> = std::iter::once(TraceEvent::Enable(0x40_0000))
        .chain((0..200_000).map(|_| match next() % 32 {
            0..=23 => TraceEvent::Conditional {
                taken: next() % 2 == 0,
                next: 0x40_0000 + next() % 0x1000,
            },
            24..=27 => TraceEvent::Indirect {
                target: 0x40_0000 + (next() % 0x10000) * 16,
            },
            28 => TraceEvent::Call {
                target: 0x40_8000,
                ret: 0x40_0100,
                indirect: next() % 2 == 0,
            },
            29 => TraceEvent::Return { target: 0x40_0100 },
            30 => TraceEvent::Jump { target: 0x40_2000 },
            _ => TraceEvent::Time(next()),
        }))
        .collect();
    for runs in [[program.len()], [4096], [1]] {
        let (written, made) = tracer_and_generator(&program, &runs);
        assert!(written.len() > 100_000, "{} bytes", written.len());
        assert!(written == made, "runs of {runs:?}: the bytes differ");
    }
}

/// The whole program at once, where it stops in a STOP region: the events
/// after the stop are lost, not traced.
#[test]
fn a_batch_stops_at_a_stop_region() {
    let program: Vec<TraceEvent> = std::iter::once(TraceEvent::Enable(0x40_0000))
        .chain((0..20_000u64).map(|i| TraceEvent::Indirect {
            target: 0x40_0000 + (i * 0x1234) % 0x10_0000,
        }))
        .collect();
    let one_by_one = run(&program, true, &[]);
    let batched = run(&program, true, &[program.len()]);
    assert!(!batched.enabled, "the output stopped");
    assert!(batched.lost_events > 0);
    assert_eq!(
        batched,
        one_by_one,
        "{}",
        first_difference(&batched, &one_by_one)
    );
}

/// A program of the events a direct run takes (conditional branches, calls
/// and returns, indirect branches, timestamps), from a seed.
fn straight_line(seed: u64, len: usize) -> Vec<TraceEvent> {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let mut program = vec![TraceEvent::Enable(0x40_0000)];
    for _ in 0..len {
        let ip = 0x40_0000 + (next() % 0x4000) * 4;
        program.push(match next() % 16 {
            0..=10 => TraceEvent::Conditional {
                taken: next() % 2 == 0,
                next: ip,
            },
            11 => TraceEvent::Call {
                target: ip,
                ret: ip + 5,
                indirect: next() % 2 == 0,
            },
            12 => TraceEvent::Return { target: ip },
            13 | 14 => TraceEvent::Indirect { target: ip },
            _ => TraceEvent::Time(1000 + next() % 1000),
        });
    }
    program
}

/// The bytes the packet generator makes for `program` with a new tracer's
/// configuration and a PSB+ every 256 bytes, and where each event's end
/// in them.
fn generated(program: &[TraceEvent]) -> (Vec<u8>, Vec<usize>) {
    let config = SoftTracer::new(&IdentityMap, 256).config();
    let mut generator = PacketStream::with_config(256, config);
    let mut made = Bytes(Vec::new());
    let ends = program
        .iter()
        .map(|&e| {
            generator.feed(e, &mut made);
            made.0.len()
        })
        .collect();
    (made.0, ends)
}

/// A PMI that stops tracing, moves the output to the start of the third
/// region and starts it again (the ToPA PMI's new buffer), or only stops
/// and restarts it (a snapshot), arriving at every point where one can in
/// one `trace_all` (after each packet and after each event's commit: inside
/// events and between them): the bytes in the AUX memory, the first
/// region's up to where the PMI found the output and then, after a move,
/// the third region's, are every byte the packet generator makes for the
/// program, once and in order. (A direct run leaves the window where it
/// was when a PMI comes between two events: the next event's bytes go
/// there, and its commit resolves them.)
#[test]
fn a_pmi_that_moves_the_output_in_a_batch_loses_and_repeats_nothing() {
    let program = straight_line(11, 400);
    let (made, _) = generated(&program);
    assert!(made.len() < 4096 - 64, "the program fits the first region");
    let moved_to = TopaPosition {
        table: 0,
        index: 2,
        offset: 0,
    };
    for moves in [true, false] {
        let mut k = 1;
        loop {
            let aux = AuxMemory::scattered(4);
            let mut tables = vec![TopaTable::new(); 1];
            let topa = Topa::build(&mut tables, aux.pages(), &IdentityMap).unwrap();
            let tracer = SoftTracer::with_hooks(&IdentityMap, 256, Taps::new());
            let base = start(&tracer, &topa);
            let calls = std::cell::Cell::new(0);
            let seen = std::cell::Cell::new(None);
            let pmi = || {
                calls.set(calls.get() + 1);
                if calls.get() != k {
                    return;
                }
                seen.set(Some(tracer.output().1 >> 32));
                tracer.disable();
                if moves {
                    tracer.set_output(base, moved_to.mask_ptrs());
                }
                tracer.enable();
            };
            tracer.hooks().set_interrupt(Some(&pmi));
            tracer.trace_all(&program);
            tracer.hooks().set_interrupt(None);
            let Some(seen) = seen.get() else {
                break; // fewer than k points: every one was taken
            };
            let end = (tracer.output().1 >> 32) as usize;
            let mut out: Vec<u8> = (0..seen as usize).map(|i| aux.byte(i)).collect();
            if moves {
                out.extend((0..end).map(|i| aux.byte(2 * 4096 + i)));
            } else {
                out.extend((seen as usize..end).map(|i| aux.byte(i)));
            }
            assert!(out == made, "moves {moves}, PMI at point {k} of the write");
            k += 1;
        }
        assert!(k > 100, "{k} points");
    }
}

/// A PMI that points the current region's table entry at another page and
/// restarts tracing (the hardware reads the tables again when TraceEn is
/// set), at every point of one `trace_all`: the bytes from where the PMI
/// found the output on go to the new page, but for those of the event it
/// came into, which may still go where the output was (a direct run ends
/// with that event, and the next write reads the tables again).
#[test]
fn a_pmi_that_remaps_the_current_region_in_a_batch_takes_effect_after_one_event() {
    let program = straight_line(12, 400);
    let (made, ends) = generated(&program);
    assert!(made.len() < 4096 - 64, "the program fits the first region");
    let mut k = 1;
    loop {
        let aux = AuxMemory::scattered(5);
        let (pages, spare) = aux.pages().split_at(4);
        let spare = spare[0];
        let mut tables = vec![TopaTable::new(); 1];
        let topa = Topa::build(&mut tables, pages, &IdentityMap).unwrap();
        let tracer = SoftTracer::with_hooks(&IdentityMap, 256, Taps::new());
        start(&tracer, &topa);
        // The PMI writes the table by address, as the tracer reads it (the
        // `Topa` is done with it).
        let table = tables.as_mut_ptr();
        let calls = std::cell::Cell::new(0);
        let seen = std::cell::Cell::new(None);
        let pmi = || {
            calls.set(calls.get() + 1);
            if calls.get() != k {
                return;
            }
            seen.set(Some((tracer.output().1 >> 32) as usize));
            tracer.disable();
            let entry = TopaEntry::region(IdentityMap.to_phys(spare), 0).unwrap();
            // SAFETY: the table outlives the tracer's use of it; nothing
            // holds a reference into it (the tracer reads it by address).
            unsafe { (*table).entries[0] = entry };
            tracer.enable();
        };
        tracer.hooks().set_interrupt(Some(&pmi));
        tracer.trace_all(&program);
        tracer.hooks().set_interrupt(None);
        let Some(seen) = seen.get() else {
            break; // fewer than k points: every one was taken
        };
        let end = (tracer.output().1 >> 32) as usize;
        // SAFETY: the pages are 4 KiB each, alive, and no longer written.
        let old = unsafe { std::slice::from_raw_parts(pages[0], 4096) };
        // SAFETY: as above.
        let new = unsafe { std::slice::from_raw_parts(spare, 4096) };
        // Where the first event's end after `seen` lies: the bytes of the
        // event the PMI came into (or, between two events, of the next).
        let next_end = ends.iter().copied().find(|&e| e > seen).unwrap_or(end);
        let split = [seen, next_end]
            .into_iter()
            .find(|&s| s <= end && old[..s].iter().chain(&new[s..end]).eq(made.iter()));
        assert!(
            split.is_some(),
            "PMI at point {k} of the write (output at {seen}, ends at {end})"
        );
        k += 1;
    }
    assert!(k > 100, "{k} points");
}
