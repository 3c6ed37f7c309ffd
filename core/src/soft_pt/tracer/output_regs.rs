// SPDX-License-Identifier: MIT OR Apache-2.0
//! The software tracer's output registers, `IA32_RTIT_OUTPUT_BASE` and
//! `IA32_RTIT_OUTPUT_MASK_PTRS`, as two parties on one CPU share them: the
//! tracer's *write*, which moves the output position past every event it
//! traces by one plain store, and the *driver*, whose PMI may interrupt
//! that write between any two instructions and read or write the registers.
//!
//! A plain store cannot tell whether a PMI wrote the register since the
//! writer last looked, and a compare-and-exchange for every event costs
//! more than the rest of the event's bookkeeping. So a PMI never stores
//! into the registers a write is moving. While a write is in progress:
//!
//! - the first driver write into it (of any register: the tracer calls
//!   [`driver_wrote`](OutputRegs::driver_wrote) for each) freezes the
//!   driver's *view* of the output where it finds it, and notes the
//!   position it saw (`seen_mask_ptrs`);
//! - a `set_output` goes to the view (*deferred*), not to the registers;
//! - every driver read returns the view;
//! - the writer *settles* at its next look at the output
//!   ([`settle`](OutputRegs::settle)): a deferred `set_output` takes effect
//!   and the view thaws, in one compare-and-exchange of the interruption
//!   word that fails, and goes round again, if a PMI came meanwhile.
//!
//! An event's bytes are *published* by the store of the position past them
//! ([`publish`](OutputRegs::publish)). The writer then reads the output
//! generation, which every driver write moves: unchanged, the event is out.
//! Otherwise [`resolve`](OutputRegs::resolve) decides by where the first
//! interrupting write came: after the publish (it saw the event), the event
//! is out; before it, the event follows that PMI, and is out only if the
//! output stayed where it was and tracing on; else its bytes are written
//! again where the output is after the PMI (or dropped, as the tracer drops
//! every byte while tracing is off).
//!
//! A write ends by [`release`](OutputRegs::release): settle, clear
//! `writing`, and settle again if a PMI came in between, so that no driver
//! write is left deferred when no write is in progress (a PMI that finds no
//! write in progress first applies what an earlier one deferred).
//!
//! Every word is a [`LocalU64`] (`local_t`): one CPU reads and writes it,
//! its PMI included. The PMI runs to its end before the interrupted writer
//! goes on, so each PMI's stores are seen by the writer all together or
//! not at all; the writer's own sequences are ordered against the PMI by
//! `barrier()`, as Linux orders a task against its NMI.

use crate::sync::{LocalBool, LocalU64, barrier};

/// Where the writer's side can be interrupted between two accesses to the
/// registers: the points at which the tests below run a PMI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Point {
    /// `settle`: the interruption word read.
    SettleLoaded,
    /// `apply`: `OUTPUT_BASE` taken from the view, `MASK_PTRS` not yet.
    ApplyBase,
    /// `settle`: the view applied, before the compare-and-exchange.
    SettleApplied,
    /// `resolve`: the position decided, before the view is applied.
    Decided,
    /// `publish`: the position stored, before the caller's check.
    Published,
    /// `release`: settled, before `writing` is cleared.
    ReleaseSettled,
    /// `release`: `writing` cleared, before the last check.
    Released,
    /// `release`: `writing` set again.
    Retaken,
}

/// The output registers and what a PMI did to them inside a write (see the
/// [module documentation](self)).
///
/// # Invariants
/// - While `writing` is set (the tracer's flag), only the holder of the
///   write stores into `base` and `mask_ptrs`.
/// - `interrupted` is nonzero only after a driver write made while a write
///   was in progress and before the writer (or, once it released the write,
///   the next driver write) settled it; while it is nonzero the driver reads
///   the view.
pub(crate) struct OutputRegs {
    /// `OUTPUT_BASE` as the writer uses it.
    base: LocalU64,
    /// `MASK_PTRS` as the writer moves it.
    mask_ptrs: LocalU64,
    /// 0: no driver write since the last settle. Else bit 0 says a
    /// `set_output` was deferred, and the bits above count the driver
    /// writes, so that the word changes with every one (a settle that read
    /// it before fails its compare-and-exchange). Written by the driver (set)
    /// and the writer (cleared, by compare-and-exchange only).
    interrupted: LocalU64,
    /// `MASK_PTRS` as the first driver write since the last settle found
    /// it: whether that PMI saw an event the writer was publishing.
    /// Written by the driver.
    seen_mask_ptrs: LocalU64,
    /// The output the driver sees while `interrupted` is set: as the first
    /// driver write found it, or as the last deferred `set_output` wrote
    /// it. Written by the driver.
    view_base: LocalU64,
    view_mask_ptrs: LocalU64,
}

impl OutputRegs {
    /// Registers reading `base` and `mask_ptrs`, with no write interrupted.
    pub(crate) fn new(base: u64, mask_ptrs: u64) -> Self {
        OutputRegs {
            base: LocalU64::new(base),
            mask_ptrs: LocalU64::new(mask_ptrs),
            interrupted: LocalU64::new(0),
            seen_mask_ptrs: LocalU64::new(0),
            view_base: LocalU64::new(0),
            view_mask_ptrs: LocalU64::new(0),
        }
    }

    // ---- The driver's side (task context or a PMI) ----

    /// The output as the driver reads it (`rdmsr`): the view while a
    /// driver write inside a write is not yet settled.
    pub(crate) fn read(&self) -> (u64, u64) {
        if self.interrupted.load() != 0 {
            (self.view_base.load(), self.view_mask_ptrs.load())
        } else {
            (self.base.load(), self.mask_ptrs.load())
        }
    }

    /// A driver write to any of the tracer's registers is being made,
    /// inside a write (`writing`) or not. Inside one, the first since the
    /// last settle freezes the view where the output is and notes the
    /// position; every one moves the interruption word on. Outside one,
    /// what an earlier PMI deferred into a write that has ended since (see
    /// [`release`](Self::release)) takes effect first.
    pub(crate) fn driver_wrote(&self, writing: bool) {
        let state = self.interrupted.load();
        if !writing {
            if state != 0 {
                self.apply(state);
                self.interrupted.store(0);
            }
            return;
        }
        if state == 0 {
            let (base, mask_ptrs) = (self.base.load(), self.mask_ptrs.load());
            self.seen_mask_ptrs.store(mask_ptrs);
            self.view_base.store(base);
            self.view_mask_ptrs.store(mask_ptrs);
        }
        // Pairs with the writer's compare-and-exchange in `settle` and
        // `resolve`: the word is different from any it read before.
        self.interrupted
            .store(((state >> 1) + 1) << 1 | (state & 1));
    }

    /// The driver's `set_output` (`wrmsr` of both registers), after
    /// [`driver_wrote`](Self::driver_wrote): deferred into the view inside a
    /// write, stored outside one.
    pub(crate) fn set(&self, writing: bool, base: u64, mask_ptrs: u64) {
        if writing {
            self.view_base.store(base);
            self.view_mask_ptrs.store(mask_ptrs);
            self.interrupted.store(self.interrupted.load() | 1);
        } else {
            self.base.store(base);
            self.mask_ptrs.store(mask_ptrs);
        }
    }

    // ---- The writer's side (the holder of `writing`) ----

    /// `OUTPUT_BASE` as the writer uses it: [`settle`](Self::settle) first.
    #[inline(always)]
    pub(crate) fn base(&self) -> u64 {
        self.base.load()
    }

    /// `MASK_PTRS` as the writer moves it: [`settle`](Self::settle) first.
    #[inline(always)]
    pub(crate) fn mask_ptrs(&self) -> u64 {
        self.mask_ptrs.load()
    }

    /// The writer follows an END link to the table at `base`.
    pub(crate) fn set_base(&self, base: u64) {
        self.base.store(base);
    }

    /// The writer moves the output position (its own writes through the
    /// tables, piece by piece; a PMI after a piece sees it once settled).
    pub(crate) fn set_mask_ptrs(&self, mask_ptrs: u64) {
        self.mask_ptrs.store(mask_ptrs);
    }

    /// Whether a driver write came since the last settle.
    #[inline(always)]
    pub(crate) fn interrupted(&self) -> bool {
        self.interrupted.load() != 0
    }

    /// Settles the driver writes that came into the write: a deferred
    /// `set_output` takes effect, and the driver reads the registers again.
    #[inline]
    pub(crate) fn settle(&self) {
        if self.interrupted.load() != 0 {
            self.settle_slow(|_| {});
        }
    }

    /// [`settle`](Self::settle), running `decide` with the interruption
    /// word before the registers take the view, on every round.
    #[cold]
    fn settle_slow(&self, mut decide: impl FnMut(u64)) {
        loop {
            let state = self.interrupted.load();
            if state == 0 {
                return;
            }
            self.point(Point::SettleLoaded);
            decide(state);
            self.point(Point::Decided);
            self.apply(state);
            self.point(Point::SettleApplied);
            barrier();
            // Pairs with `driver_wrote`'s store: no driver write came since
            // `state` was read, so none is lost by thawing the view.
            if self.interrupted.compare_exchange(state, 0).is_ok() {
                return;
            }
        }
    }

    /// The registers take the view, if a `set_output` was deferred into it.
    fn apply(&self, state: u64) {
        if state & 1 != 0 {
            self.base.store(self.view_base.load());
            self.point(Point::ApplyBase);
            self.mask_ptrs.store(self.view_mask_ptrs.load());
        }
    }

    /// A point where a PMI may come (see [`Point`]): the tests run one
    /// there; elsewhere it is nothing.
    #[inline(always)]
    fn point(&self, _point: Point) {
        #[cfg(test)]
        tests::at(self, _point);
    }

    /// Publishes the bytes of an event, already in memory, by moving the
    /// output position to `moved`: the commit point of an event. The
    /// caller then reads the output generation; if it moved since the event
    /// began, [`resolve`](Self::resolve) says whether the event is out.
    #[inline(always)]
    pub(crate) fn publish(&self, moved: u64) {
        // The bytes before the position that shows them: a PMI that sees
        // the position sees the bytes (same CPU: program order, once the
        // compiler keeps it).
        barrier();
        self.mask_ptrs.store(moved);
        barrier();
        self.point(Point::Published);
    }

    /// A driver write came while the event whose bytes lie from `before` to
    /// the `moved` just [published](Self::publish) was being written:
    /// whether the event is out, then settles. It is out if the first such
    /// write came after the publish (that PMI saw it), or, if it came
    /// before, when no `set_output` was deferred and `tracing` (asked after
    /// the PMIs) says tracing is on: the event then follows the PMI in the
    /// trace, where the output still is. Else the position goes back to
    /// `before`, which is what the driver saw, and the caller writes the
    /// bytes again where the output is now.
    #[cold]
    pub(crate) fn resolve(&self, before: u64, moved: u64, tracing: impl Fn() -> bool) -> bool {
        let mut out = true;
        self.settle_slow(|state| {
            out = self.seen_mask_ptrs.load() == moved || (state & 1 == 0 && tracing());
            self.mask_ptrs.store(if out { moved } else { before });
        });
        out
    }

    /// Ends the write `writing` says is in progress: settles, clears it, and
    /// settles again (the write taken back) while a PMI came in between, so
    /// that no driver write is left deferred once no write is in progress.
    pub(crate) fn release(&self, writing: &LocalBool) {
        loop {
            self.settle();
            self.point(Point::ReleaseSettled);
            barrier();
            writing.store(false);
            barrier();
            self.point(Point::Released);
            // A PMI from here on finds no write in progress: it settles
            // what the one before it deferred, then writes the registers.
            if self.interrupted.load() == 0 {
                return;
            }
            writing.store(true);
            barrier();
            self.point(Point::Retaken);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every interleaving of one event's write with up to two PMIs, each
    //! at any of the writer's points: the deterministic nesting harness of
    //! the ring (`ring::hook`), for the output registers.
    extern crate std;
    use std::cell::{Cell, RefCell};
    use std::format;
    use std::string::String;
    use std::vec::Vec;

    use super::*;

    /// What a PMI does: it always reads the output first (as a snapshot's
    /// `pt_read_offset` or the ToPA handler's does), then writes.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Pmi {
        /// Reads only.
        Read,
        /// Stops tracing (`snapshot_aux` of a stopped event, a pause).
        Stop,
        /// Stops and starts tracing again (`snapshot_aux`).
        Restart,
        /// Stops, moves the output, starts (the ToPA PMI's new buffer).
        Move,
    }

    /// The output a `Move` PMI programs.
    const MOVED_BASE: u64 = 0x9000;
    const MOVED_MASK: u64 = 0x7f | (5 << 32);

    /// One run: the tracer's state the registers work beside, and the PMIs
    /// to run at the point numbered `at` (counting every point reached).
    struct Run {
        writing: LocalBool,
        generation: Cell<u64>,
        tracing: Cell<bool>,
        points: Cell<usize>,
        pmis: Vec<(usize, Pmi)>,
        /// The positions the PMIs read, in order, and whether each moved
        /// the output.
        seen: RefCell<Vec<(u64, Pmi)>>,
        /// Whether tracing was on when `resolve` last decided.
        tracing_when_decided: Cell<Option<bool>>,
    }

    std::thread_local! {
        static RUN: RefCell<Option<std::rc::Rc<Run>>> = const { RefCell::new(None) };
    }

    /// A PMI reaching `point` of `regs`' writer.
    pub(super) fn at(regs: &OutputRegs, point: Point) {
        let Some(run) = RUN.with(|r| r.borrow().clone()) else {
            return;
        };
        if point == Point::Decided {
            run.tracing_when_decided.set(Some(run.tracing.get()));
        }
        let n = run.points.get();
        run.points.set(n + 1);
        for &(_, pmi) in run.pmis.iter().filter(|(k, _)| *k == n) {
            pmi_body(&run, regs, pmi);
        }
    }

    /// A driver write (the tracer's `next_generation`).
    fn driver_write(run: &Run, regs: &OutputRegs) {
        run.generation.set(run.generation.get() + 1);
        regs.driver_wrote(run.writing.load());
    }

    fn pmi_body(run: &Run, regs: &OutputRegs, pmi: Pmi) {
        if pmi != Pmi::Read {
            driver_write(run, regs);
            run.tracing.set(false);
        }
        let (_, mask) = regs.read();
        run.seen.borrow_mut().push((mask, pmi));
        match pmi {
            Pmi::Read | Pmi::Stop => {}
            Pmi::Restart => {
                driver_write(run, regs);
                run.tracing.set(true);
            }
            Pmi::Move => {
                driver_write(run, regs);
                regs.set(run.writing.load(), MOVED_BASE, MOVED_MASK);
                driver_write(run, regs);
                run.tracing.set(true);
            }
        }
    }

    /// The outcome of one event's write under `pmis`.
    struct Outcome {
        /// Whether the event is out (at `before..moved` of the first output).
        out: bool,
        /// The output after the write, as the driver reads it.
        end: (u64, u64),
        seen: Vec<(u64, Pmi)>,
        tracing_when_decided: Option<bool>,
        interrupted: bool,
        points: usize,
    }

    const BASE: u64 = 0x1000;
    const BEFORE: u64 = 0x7f | (100 << 32);
    const MOVED: u64 = 0x7f | (140 << 32);

    /// The writer's side of one event, as the tracer writes it: settle and
    /// take the mark (`settled_generation`), write the bytes, publish, check
    /// the generation, resolve if it moved, release.
    fn write_event(pmis: &[(usize, Pmi)]) -> Outcome {
        let regs = OutputRegs::new(BASE, BEFORE);
        let run = std::rc::Rc::new(Run {
            writing: LocalBool::new(false),
            generation: Cell::new(0),
            tracing: Cell::new(true),
            points: Cell::new(0),
            pmis: pmis.to_vec(),
            seen: RefCell::new(Vec::new()),
            tracing_when_decided: Cell::new(None),
        });
        RUN.with(|r| *r.borrow_mut() = Some(run.clone()));
        run.writing.store(true);
        let (generation, before) = loop {
            regs.settle();
            let generation = run.generation.get();
            if !regs.interrupted() {
                break (generation, regs.mask_ptrs());
            }
        };
        // (Between taking the mark and the publish: the event's bytes.)
        at(&regs, Point::Published);
        let moved = before + (40 << 32);
        regs.publish(moved);
        let out =
            run.generation.get() == generation || regs.resolve(before, moved, || run.tracing.get());
        regs.release(&run.writing);
        RUN.with(|r| *r.borrow_mut() = None);
        let seen = run.seen.borrow().clone();
        Outcome {
            out,
            end: regs.read(),
            seen,
            tracing_when_decided: run.tracing_when_decided.get(),
            interrupted: regs.interrupted(),
            points: run.points.get(),
        }
    }

    /// What must hold of an outcome: `Err` says what did not.
    fn check(o: &Outcome) -> Result<(), String> {
        assert_eq!(BEFORE + (40 << 32), MOVED);
        if o.interrupted {
            return Err(String::from("a driver write left unsettled"));
        }
        let moved_by = o.seen.iter().position(|&(_, p)| p == Pmi::Move);
        // The positions the PMIs read before any moved the output: the
        // event's start or its end, never the end and then the start.
        let reads: Vec<u64> = o.seen[..moved_by.map_or(o.seen.len(), |m| m + 1)]
            .iter()
            .map(|s| s.0)
            .collect();
        if reads.iter().any(|&r| r != BEFORE && r != MOVED) {
            return Err(format!("a PMI read {reads:x?}"));
        }
        if reads.windows(2).any(|w| w[0] == MOVED && w[1] == BEFORE) {
            return Err(format!("the position went back: {reads:x?}"));
        }
        let saw = reads.contains(&MOVED);
        if saw && !o.out {
            return Err(String::from("a PMI saw the event, which is not out"));
        }
        match moved_by {
            // The event is out in the old output only if the PMI that moved
            // it had seen it; the output is the one that PMI programmed.
            Some(_) => {
                if o.out && !saw {
                    return Err(String::from("out behind an output that moved on"));
                }
                if o.end != (MOVED_BASE, MOVED_MASK) {
                    return Err(format!("the new output was lost: {:x?}", o.end));
                }
            }
            None => {
                let want = if o.out { MOVED } else { BEFORE };
                if o.end != (BASE, want) {
                    return Err(format!("out {} but the output reads {:x?}", o.out, o.end));
                }
                // Out after PMIs that did not see it: only into a trace
                // that is on.
                if o.out && !saw && o.tracing_when_decided == Some(false) {
                    return Err(String::from("out after tracing stopped"));
                }
            }
        }
        Ok(())
    }

    const PMIS: [Pmi; 4] = [Pmi::Read, Pmi::Stop, Pmi::Restart, Pmi::Move];

    #[test]
    fn one_event_under_every_placement_of_one_or_two_pmis() {
        let quiet = write_event(&[]);
        assert!(quiet.out);
        check(&quiet).unwrap();
        let points = quiet.points + 4;
        let mut runs = 0;
        for k1 in 0..points {
            for p1 in PMIS {
                let o = write_event(&[(k1, p1)]);
                check(&o).unwrap_or_else(|e| panic!("{p1:?} at {k1}: {e}"));
                runs += 1;
                for k2 in k1..points + 8 {
                    for p2 in PMIS {
                        let pmis = [(k1, p1), (k2, p2)];
                        let o = write_event(&pmis);
                        check(&o).unwrap_or_else(|e| panic!("{pmis:?}: {e}"));
                        runs += 1;
                    }
                }
            }
        }
        assert!(runs > 500, "{runs} runs");
    }
}
