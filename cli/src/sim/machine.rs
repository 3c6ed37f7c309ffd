// SPDX-License-Identifier: MIT OR Apache-2.0
//! What a simulated CPU does in a quantum: its threads run the program one
//! block at a time, the tracer sees every branch, timer interrupts, PMIs
//! and context switches enter the kernel, and counter overflows take
//! samples (`Event::overflow`), all in simulated cycles.

use perfaux::abi::{PerfEventHeader, misc, record_type};
use perfaux::lbr::LBR_DEPTH;
use perfaux::pt::hw::TraceHw;
use perfaux::ring::{FixedEvent, Ring, SampleId};
use perfaux::sample::{BranchStack, SampleData};
use perfaux::soft_pt::stream::TraceEvent;

use super::config::{CYCLES_PER_NS, Counter, Mode, QUANTUM, START_NS, TIMESLICE, TSC_EVERY};
use super::cpu::Cpu;
use super::period::TICK_NS;
use super::program::Thread;
use super::truth::{Branch, SamplePoint};

/// `PERF_RECORD_MISC_SWITCH_OUT`.
const MISC_SWITCH_OUT: u16 = 1 << 13;
/// `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`: the task was preempted.
const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;

/// One step in this many takes an interrupt.
const IRQ_ONE_IN: u64 = 5000;
/// Cycles an interrupt spends in the kernel.
const IRQ_CYCLES: u64 = 1200;
/// Cycles a PMI spends in the kernel (the sample is taken halfway).
const PMI_CYCLES: u64 = 600;
/// Cycles on each side of a context switch's records.
const SWITCH_CYCLES: u64 = 400;

impl Cpu<'_, '_> {
    /// perf time (ns) of CPU cycle count `cycles`.
    fn ns(cycles: u64) -> u64 {
        START_NS + cycles / CYCLES_PER_NS
    }

    /// The TSC at `cycles` (a 2 GHz TSC: perf time = TSC / 2).
    fn tsc(cycles: u64) -> u64 {
        (START_NS * CYCLES_PER_NS) + cycles
    }

    /// Time passes on the CPU: its clock and its tracer's TSC follow.
    fn tick(&mut self, cycles: u64) {
        self.cycles += cycles;
        self.platform.now.set(Self::ns(self.cycles));
        self.tracer.set_clock(Self::tsc(self.cycles));
    }

    /// The leader was just scheduled in (its tracer is on): tracing of the
    /// current thread begins with a timestamp and TIP.PGE.
    pub fn start_tracing(&mut self) {
        self.tick(0);
        self.trace(TraceEvent::Frequency(20));
        self.trace(TraceEvent::Time(Self::tsc(self.cycles)));
        let t = &self.threads[self.current];
        let ip = t.ip(self.setup.code);
        self.trace_branch(TraceEvent::Enable(ip), Some((0, ip)));
    }

    /// The current thread leaves for the kernel for good (the end of the
    /// recording): FUP + TIP.PGD, or FUP + TIP into the handler.
    pub fn stop_tracing(&mut self) {
        let ip = self.threads[self.current].ip(self.setup.code);
        let to = self.setup.kernel.map(|k| k.functions[0].start);
        self.trace_branch(
            TraceEvent::Async { from: ip, to },
            Some((ip, to.unwrap_or(0))),
        );
    }

    /// Runs the CPU for one quantum, or until its sample budget is spent.
    pub fn run_quantum(&mut self) {
        let end = self.cycles + QUANTUM;
        while self.cycles < end && self.sample_budget != Some(0) {
            if self.cycles >= self.next_switch {
                self.context_switch();
            }
            if self.rng.below(IRQ_ONE_IN) == 0 {
                // An interrupt arrives between two instructions of a block.
                let t = &mut self.threads[self.current];
                let k = self.rng.below(t.straight_left(self.setup.code) as u64 + 1) as usize;
                let n = t.advance(self.setup.code, k);
                self.retire(n, false);
                self.kernel_entry(IRQ_CYCLES, |_| {});
            }
            let step = self.threads[self.current].step(self.setup.code, 0);
            self.trace_branch(step.event, step.taken);
            self.retire(
                step.instructions,
                step.taken.is_some() || matches!(step.event, TraceEvent::Conditional { .. }),
            );
        }
    }

    /// Traces `event`, which made no branch of its own.
    fn trace(&mut self, event: TraceEvent) {
        self.trace_branch(event, None);
    }

    /// Traces `event` and, if it transferred control, records the branch
    /// for the truth (with the current thread and the tracer's position).
    fn trace_branch(&mut self, event: TraceEvent, taken: Option<(u64, u64)>) {
        let tracer = self.tracer;
        // Only `--truth` needs to know (the default run skips the query).
        // A TIP.PGE starts packet generation if TraceEn is set.
        let traced = self.setup.config.truth
            && (tracer.generating()
                || (matches!(event, TraceEvent::Enable(_)) && tracer.enabled()));
        let index = tracer.next_event();
        tracer.trace(event);
        if let (Some((from, to)), Some(kind)) = (taken, event.branch_kind()) {
            // The LBR sees every branch, traced or not.
            if let Some(lbr) = self.lbr.as_mut() {
                lbr.record(from, to, kind);
            }
            // The truth keeps the kinds the filter asks for (its rules are
            // `perfaux::lbr`'s, tested there); which of them the record
            // still holds at a sample is the truth's own model.
            if self.setup.config.truth && self.lbr.as_ref().is_some_and(|l| l.filter().keeps(kind))
            {
                self.truth.taken.push((from, to));
            }
        }
        if let (Some((from, to)), true) = (taken, traced) {
            self.truth.branches.push(Branch {
                from,
                to,
                tid: self.threads[self.current].tid,
                time: Self::ns(self.cycles),
                pos: tracer.written(),
                event: index,
            });
        }
        if self.setup.config.mode == Mode::Full && tracer.take_pmi() > 0 {
            // The ToPA PMI of an INT region, taken right after the write
            // that filled it.
            self.pt.handle_pmi();
        }
        if let Some(lost) = tracer.take_loss() {
            // A STOP region filled: these events' packets never reached
            // the output (this one's among them, perhaps).
            self.truth.lose(lost);
        }
    }

    /// `instructions` retired (a branch among them if `branch`): their
    /// cycles, the periodic TSC, and the counters' overflows (PMIs).
    fn retire(&mut self, instructions: u64, branch: bool) {
        if self.setup.config.truth && self.tracer.generating() {
            self.truth.instructions += instructions;
        }
        let cycles = instructions * (1 + self.rng.below(3));
        self.tick(cycles);
        if self.cycles >= self.next_tsc {
            self.trace(TraceEvent::Time(Self::tsc(self.cycles)));
            self.next_tsc = self.cycles + TSC_EVERY;
        }
        if self.cycles >= self.next_freq_tick {
            // The scheduler tick retunes counters in frequency mode.
            for p in &mut self.periods {
                p.tick();
            }
            self.next_freq_tick += TICK_NS * CYCLES_PER_NS;
        }
        let now = Self::ns(self.cycles);
        let counters = self.setup.config.counters.len();
        for k in 0..counters {
            let events = match self.setup.config.counters[k] {
                Counter::Cycles => cycles,
                Counter::Instructions => instructions,
                Counter::Branches => u64::from(branch),
            };
            // With the budget spent the run ends at this instruction: no
            // further sample.
            if self.periods[k].count(events, now) && self.sample_budget != Some(0) {
                self.pmi(k);
            }
        }
    }

    /// A counter overflowed: the PMI enters the kernel (FUP + TIP.PGD when
    /// it is not traced), the sampler's overflow takes the sample with the
    /// trace's newest bytes, and the return to the interrupted code
    /// re-enables tracing after a TSC at or past the sample's time.
    fn pmi(&mut self, sampler: usize) {
        self.kernel_entry(PMI_CYCLES, |m| {
            let ip = m.threads[m.current].ip(m.setup.code);
            let mut stack = [[0; 3]; LBR_DEPTH];
            let branch_stack = m.lbr.as_ref().map(|lbr| BranchStack {
                hw_index: lbr.hw_index(),
                entries: lbr.read(&mut stack),
                counters: &[],
            });
            let data = SampleData {
                misc: misc::USER,
                ip,
                period: m.periods[sampler].last_period(),
                branch_stack,
                ..SampleData::default()
            };
            let end = m.tracer.written();
            // A refused sample is counted by the event (lost_samples).
            let written = m.samplers[sampler].overflow(m.platform, &data).is_ok();
            if written {
                if let Some(budget) = m.sample_budget.as_mut() {
                    *budget = budget.saturating_sub(1);
                }
            }
            if written && m.setup.config.truth {
                m.truth.samples.push(SamplePoint {
                    tid: m.threads[m.current].tid,
                    time: m.platform.now.get(),
                    ip,
                    end,
                    size: 0, // the drain reads it from the record
                    taken: m.truth.taken.len(),
                });
            }
        });
    }

    /// The CPU enters the kernel at the current thread's next instruction
    /// for `cycles`, running `inside` halfway, and returns. With the kernel
    /// excluded: FUP + TIP.PGD, then TSC + TIP.PGE back. With it traced:
    /// FUP + TIP into the handler, its code, and `iretq` back (TIP) after a
    /// TSC.
    fn kernel_entry(&mut self, cycles: u64, inside: impl FnOnce(&mut Self)) {
        let ip = self.threads[self.current].ip(self.setup.code);
        match self.setup.kernel {
            None => {
                self.trace_branch(TraceEvent::Async { from: ip, to: None }, Some((ip, 0)));
                self.tick(cycles / 2);
                inside(self);
                self.tick(cycles - cycles / 2);
                self.trace(TraceEvent::Time(Self::tsc(self.cycles)));
                // Back to the current thread (a switch may have changed it).
                let back = self.threads[self.current].ip(self.setup.code);
                self.trace_branch(TraceEvent::Enable(back), Some((0, back)));
            }
            Some(k) => {
                let mut handler = Thread::new(0, 0, k, 0, self.rng.next_u64());
                let entry = handler.ip(k);
                self.trace_branch(
                    TraceEvent::Async {
                        from: ip,
                        to: Some(entry),
                    },
                    Some((ip, entry)),
                );
                self.tick(cycles / 2);
                inside(self);
                self.tick(cycles - cycles / 2);
                self.trace(TraceEvent::Time(Self::tsc(self.cycles)));
                let back = self.threads[self.current].ip(self.setup.code);
                loop {
                    let step = handler.step(k, back);
                    if self.setup.config.truth && self.tracer.generating() {
                        self.truth.instructions += step.instructions;
                    }
                    self.trace_branch(step.event, step.taken);
                    self.tick(step.instructions);
                    if step.iret {
                        break;
                    }
                }
            }
        }
    }

    /// The scheduler switches the CPU to its next thread, from the timer
    /// interrupt: the old thread's trace ends (FUP + TIP.PGD, or FUP + TIP
    /// into the handler), `PERF_RECORD_SWITCH_CPU_WIDE` out and in are
    /// written between the trace's timestamps, and the trace goes on in the
    /// new thread after a TSC (TIP.PGE, or the handler's `iretq`).
    fn context_switch(&mut self) {
        self.next_switch += TIMESLICE;
        if self.threads.len() < 2 {
            return;
        }
        self.kernel_entry(2 * SWITCH_CYCLES, |m| {
            let old = m.current;
            let next = (old + 1) % m.threads.len();
            let (o, n) = (&m.threads[old], &m.threads[next]);
            let (o, n) = ((o.pid, o.tid), (n.pid, n.tid));
            m.switch_record(true, o, n);
            m.tick(2);
            m.current = next;
            m.platform.current.set(n);
            if let Some(lbr) = m.lbr.as_mut() {
                lbr.reset();
                m.truth
                    .flushed
                    .push((m.truth.taken.len(), m.truth.samples.len()));
            }
            m.switch_record(false, n, o);
        });
    }

    /// `perf_event_switch_output` for the leader (`context_switch`): the
    /// record in its ring, with the trailer of the task it is about.
    fn switch_record(&self, out: bool, task: (u32, u32), other: (u32, u32)) {
        let id = self.leader_id();
        let mut event = FixedEvent {
            id,
            sample_id: Some(SampleId {
                sample_type: self.setup.leader_attr.sample_type,
                pid: task.0,
                tid: task.1,
                time: self.platform.now.get(),
                id,
                stream_id: id,
                cpu: self.index as u32,
            }),
        };
        // A full ring drops it and counts it lost (PERF_RECORD_LOST), as
        // the kernel's does.
        let _ = write_switch(self.ring, &mut event, out, other);
    }
}

/// Writes `PERF_RECORD_SWITCH_CPU_WIDE` into `ring` as
/// `perf_event_switch_output` does: `out` for the task leaving (with
/// `SWITCH_OUT` and, as for a preemption by the timer, `SWITCH_OUT_PREEMPT`),
/// else for the task coming in; `other` is the task on the other side; the
/// trailer (from `event`) names the task the record is about.
fn write_switch(
    ring: &Ring<'_>,
    event: &mut FixedEvent,
    out: bool,
    other: (u32, u32),
) -> perfaux::Result<()> {
    let trailer = event.sample_id.map_or(0, |s| s.size());
    let size = 8 + 8 + trailer;
    let misc = if out {
        MISC_SWITCH_OUT | MISC_SWITCH_OUT_PREEMPT
    } else {
        0
    };
    let sample_id = event.sample_id;
    let mut h = ring.begin(size, event)?;
    let _ = h.put_header(PerfEventHeader {
        type_: record_type::SWITCH_CPU_WIDE,
        misc,
        size: size as u16,
    });
    let mut body = [0u8; 8];
    body[..4].copy_from_slice(&other.0.to_le_bytes());
    body[4..].copy_from_slice(&other.1.to_le_bytes());
    let _ = h.copy(&body);
    if let Some(id) = sample_id {
        let _ = h.put_sample_id(&id);
    }
    h.end();
    Ok(())
}
