// SPDX-License-Identifier: GPL-2.0-or-later
//! One guest thread as the engine sees it: the blocks it runs, gathered in
//! batches and turned into trace events ([`BlockFlow`]), its counter's
//! overflows taken as PMIs between two blocks, and its system calls.
//!
//! Everything here runs on the thread's own host thread (QEMU user mode
//! runs each guest thread on a host thread of its own), in the plugin's
//! callbacks: nothing else touches a `Thread` while it lives.

use std::sync::atomic::{AtomicU64, Ordering};

use perfaux::abi::{misc, sample_type as st};
use perfaux::lbr::{BranchFilter, BranchKind, LBR_DEPTH, Lbr};
use perfaux::sample::{BranchStack, SampleData};
use perfaux::soft_pt::blocks::{Block, BlockFlow, FlowSink, MAX_EVENTS_PER_CALL};
use perfaux::soft_pt::stream::TraceEvent;
use perfaux_qemu_session::{EXEC_PATH_MAX, Mode, SLOT_DONE, truth};

use crate::blocks::Code;
use crate::engine::{Engine, now, trailer};
use crate::records::{self, Mmap};
use crate::session::Session;
use crate::truth::Truth;

/// Trace events gathered before the tracer takes them: a run of a few tens
/// of thousands of instructions, so the tracer works in long `trace_all`
/// runs, and the clock is read once a run.
pub const RUN: usize = 4096;

/// The events of a run, for one `trace_all`.
struct Events<'a>(&'a mut Vec<TraceEvent>);

impl FlowSink for Events<'_> {
    // No truth kept: the flow skips the branches.
    const BRANCHES: bool = false;
    #[inline]
    fn event(&mut self, event: TraceEvent) {
        self.0.push(event);
    }
}

/// The events of a run and the last-branch record (AUX samples with
/// branch stacks).
struct EventsAndLbr<'a> {
    events: &'a mut Vec<TraceEvent>,
    lbr: &'a mut Lbr,
}

impl FlowSink for EventsAndLbr<'_> {
    #[inline(always)]
    fn event(&mut self, event: TraceEvent) {
        self.events.push(event);
    }
    #[inline(always)]
    fn branch(&mut self, from: u64, to: u64, kind: Option<BranchKind>) {
        if let Some(kind) = kind {
            self.lbr.record(from, to, kind);
        }
    }
}

/// The last-branch record alone (branch stacks without a trace): the
/// events are not made.
struct LbrOnly<'a>(&'a mut Lbr);

impl FlowSink for LbrOnly<'_> {
    #[inline(always)]
    fn event(&mut self, _: TraceEvent) {}
    #[inline(always)]
    fn branch(&mut self, from: u64, to: u64, kind: Option<BranchKind>) {
        if let Some(kind) = kind {
            self.0.record(from, to, kind);
        }
    }
}

/// What a run makes when the truth is kept: the trace's events (when
/// the thread is traced), the truth's branches (when kept), the
/// last-branch record (when samples carry branch stacks).
struct WithBranches<'a> {
    events: Option<&'a mut Vec<TraceEvent>>,
    truth: Option<&'a mut Vec<[u64; 3]>>,
    lbr: Option<&'a mut Lbr>,
}

impl FlowSink for WithBranches<'_> {
    #[inline]
    fn event(&mut self, event: TraceEvent) {
        if let Some(events) = self.events.as_mut() {
            events.push(event);
        }
    }
    #[inline]
    fn branch(&mut self, from: u64, to: u64, kind: Option<BranchKind>) {
        if let Some(truth) = self.truth.as_mut() {
            truth.push([truth::BRANCH, from, to]);
        }
        if let (Some(lbr), Some(kind)) = (self.lbr.as_mut(), kind) {
            lbr.record(from, to, kind);
        }
    }
}

/// A signal's resolution, made apart and put in its place afterwards.
#[derive(Default)]
struct Resolution {
    events: Vec<TraceEvent>,
    truth: Vec<[u64; 3]>,
    taken: Vec<(u64, u64, BranchKind)>,
}

impl FlowSink for Resolution {
    fn event(&mut self, event: TraceEvent) {
        self.events.push(event);
    }
    fn branch(&mut self, from: u64, to: u64, kind: Option<BranchKind>) {
        self.truth.push([truth::BRANCH, from, to]);
        if let Some(kind) = kind {
            self.taken.push((from, to, kind));
        }
    }
}

/// Runs `$call` (a flow method taking the sink last) with the thread's
/// sink: one made for each way of running without a truth (a trace, a
/// trace and branch stacks, branch stacks alone), and the general one
/// when the truth is kept (a macro: the flow is borrowed beside the
/// thread's other fields).
macro_rules! flow {
    ($t:expr, $method:ident($($arg:expr),*)) => {
        match ($t.truth.as_mut(), $t.lbr.as_mut(), $t.engine.pt.is_some()) {
            (None, None, _) => $t.flow.$method($($arg,)* &mut Events(&mut $t.events)),
            (None, Some(lbr), true) => $t.flow.$method($($arg,)* &mut EventsAndLbr {
                events: &mut $t.events,
                lbr,
            }),
            (None, Some(lbr), false) => $t.flow.$method($($arg,)* &mut LbrOnly(lbr)),
            (Some(truth), lbr, traced) => $t.flow.$method($($arg,)* &mut WithBranches {
                events: if traced { Some(&mut $t.events) } else { None },
                truth: Some(truth.pending()),
                lbr,
            }),
        }
    };
}

/// Who a new thread is.
#[derive(Clone, Copy, Debug)]
pub enum Origin {
    /// The program's first thread: COMM of the exec and the first MMAP2s.
    Exec {
        /// The program's name.
        comm: &'static str,
        /// The executable and the interpreter.
        maps: &'static [Mmap],
    },
    /// A thread or process `perf` learns of by `PERF_RECORD_FORK` from
    /// its parent (pid, tid).
    Fork((u32, u32)),
}

/// A traced guest thread.
pub struct Thread {
    /// The thread's process id.
    pub pid: u32,
    /// The thread id.
    pub tid: u32,
    session: &'static Session,
    engine: Engine,
    flow: BlockFlow<'static>,
    events: Vec<TraceEvent>,
    /// The clock at the start of the current run (the TSC of the run's
    /// restarts of tracing).
    tsc: u64,
    /// The sampler's period (0: no sampler).
    period: u64,
    /// Instructions since the sampler's last overflow.
    count: u64,
    /// The system call the thread is in: its number and arguments.
    pub syscall: (i64, [u64; 6]),
    /// The ground truth, when asked for.
    truth: Option<Truth>,
    /// The last-branch record, when samples carry branch stacks.
    lbr: Option<Lbr>,
    /// A signal delivered between two blocks whose handler has not
    /// returned: where its resolution goes (see [`Thread::deliver`]).
    signal: Option<Signal>,
    /// The thread is in `rt_sigreturn`: the next block is where a
    /// handler returns.
    sigreturn: bool,
}

/// Where a delivered signal's resolution goes: the events and truth
/// entries made since are held back until the handler returns.
#[derive(Clone, Copy, Debug)]
struct Signal {
    /// The index in the run's events where the signal came.
    events: usize,
    /// The index in the truth's pending entries.
    truth: usize,
    /// The branches the last-branch record had recorded.
    lbr: u64,
    /// The handler's address.
    handler: u64,
}

/// The most trace events held back while a signal's handler runs; past
/// it the signal is taken as not returning (the flow's guess).
const SIGNAL_EVENTS_MAX: usize = 1 << 20;

impl Thread {
    /// The calling host thread's guest thread `pid`/`tid`, from `origin`,
    /// in a slot of `session`; `None` if every slot is taken (it runs
    /// untraced, counted in the session's header) or the engine cannot be
    /// set up (said on stderr).
    pub fn start(session: &'static Session, pid: u32, tid: u32, origin: Origin) -> Option<Thread> {
        let slot = session.claim()?;
        let engine = match Engine::new(session, slot, pid, tid) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("perfaux: thread {tid} runs untraced: {e}");
                return None;
            }
        };
        let attr = session.header().leader_attr;
        let t = now();
        let tr = trailer(&attr, slot, pid, tid, t);
        match origin {
            Origin::Exec { comm, maps } => {
                records::comm(engine.ring, pid, tid, comm, true, tr);
                for m in maps {
                    records::mmap2(engine.ring, pid, tid, m, tr);
                }
            }
            Origin::Fork(parent) => {
                records::task(engine.ring, false, (pid, tid), parent, t, tr);
            }
        }
        let sampler = session.header().sampler_attr;
        let lbr = if sampler.sample_type & st::BRANCH_STACK != 0 {
            match BranchFilter::new(sampler.branch_sample_type) {
                Ok(filter) => Some(Lbr::new(filter)),
                Err(e) => {
                    eprintln!(
                        "perfaux: thread {tid} runs untraced: branch stacks: {}",
                        e.reason
                    );
                    return None;
                }
            }
        } else {
            None
        };
        session.publish(slot, pid, tid);
        let period = sampler.sample_period;
        Some(Thread {
            pid,
            tid,
            session,
            engine,
            flow: BlockFlow::new(),
            // No call writes more than MAX_EVENTS_PER_CALL: a run grows
            // the vector only while a signal's handler runs (up to
            // SIGNAL_EVENTS_MAX events).
            events: Vec::with_capacity(RUN + 4 * MAX_EVENTS_PER_CALL),
            tsc: t,
            // 0 when the run does not sample (no sampler is opened then).
            period,
            count: 0,
            syscall: (-1, [0; 6]),
            truth: crate::truth::open(slot),
            lbr,
            signal: None,
            sigreturn: false,
        })
    }

    /// `block` starts running: the previous block's exit is resolved, the
    /// sampler's overflow in it taken as a PMI before this one runs.
    #[inline]
    pub fn block(&mut self, code: &'static Code) {
        let block = &code.block;
        let retired = if self.sigreturn || code.handler.load(Ordering::Relaxed) {
            self.signal_block(code)
        } else {
            flow!(self, enter(block, self.tsc))
        };
        self.count(retired, block);
        if self.events.len() >= RUN {
            self.flush();
        }
    }

    /// `retired` more instructions for the sampler: an overflow is a PMI
    /// before `next` (held while a signal's handler runs: its events wait
    /// for the handler's return, and a sample must follow what it shows).
    #[inline]
    fn count(&mut self, retired: u64, next: &Block) {
        if self.period != 0 {
            self.count += retired;
            if self.count >= self.period && self.signal.is_none() {
                self.count %= self.period;
                self.pmi(next);
            }
        }
    }

    /// A block that may begin or end a signal's delivery: a handler's
    /// first block after one whose exit could have gone anywhere (the
    /// kernel delivered a signal between them), or the first block after
    /// `rt_sigreturn` (where the handler returned: the interrupted place).
    /// Enters it; returns the instructions that retired.
    #[cold]
    fn signal_block(&mut self, code: &'static Code) -> u64 {
        let block = &code.block;
        let is_handler = code.handler.load(Ordering::Relaxed);
        // A handler's block right after rt_sigreturn is another signal the
        // kernel delivered on that return: the interrupted place comes
        // with the return of that one's handler.
        if std::mem::take(&mut self.sigreturn) && self.signal.is_some() && !is_handler {
            self.end_signal(Some(block.start()));
        }
        if !(is_handler && self.flow.may_deliver(block.start())) {
            return flow!(self, enter(block, self.tsc));
        }
        // A signal in a handler: the first one's handler is taken as not
        // returning.
        self.end_signal(None);
        self.signal = Some(Signal {
            events: self.events.len(),
            truth: self.truth.as_mut().map_or(0, |t| t.pending().len()),
            lbr: self.lbr.as_ref().map_or(0, Lbr::recorded),
            handler: block.start(),
        });
        flow!(self, deliver(block, self.tsc))
    }

    /// The pending signal's handler returned to `resume`, or (`None`) is
    /// taken as not returning: the interrupted block's exit and the
    /// asynchronous exit go where the signal came, before the handler's
    /// events.
    fn end_signal(&mut self, resume: Option<u64>) {
        let Some(signal) = self.signal.take() else {
            return;
        };
        let mut made = Resolution::default();
        // Not returning: gone to the handler, the flow's guess.
        let resume = resume.unwrap_or(signal.handler);
        let retired = self.flow.resolve_interrupted(resume, self.tsc, &mut made);
        if self.engine.pt.is_some() {
            let at = signal.events.min(self.events.len());
            self.events.splice(at..at, made.events);
        }
        if let Some(t) = self.truth.as_mut() {
            let pending = t.pending();
            let at = signal.truth.min(pending.len());
            pending.splice(at..at, made.truth);
        }
        if let Some(lbr) = self.lbr.as_mut() {
            // Taken before every branch of the handler: below them in the
            // record, in their order.
            let newer = lbr.recorded().wrapping_sub(signal.lbr);
            for (from, to, kind) in made.taken {
                lbr.record_before(usize::try_from(newer).unwrap_or(usize::MAX), from, to, kind);
            }
        }
        if self.period != 0 {
            self.count += retired;
        }
    }

    /// Hands the run's events to the tracer, lets the recorder catch up if
    /// it is behind, and starts the next run at the clock's new time.
    /// While a signal's handler runs the events wait (their first must
    /// come after the resolution), unless too many do: then the signal is
    /// taken as not returning.
    #[cold]
    pub fn flush(&mut self) {
        if self.signal.is_some() {
            if self.events.len() < SIGNAL_EVENTS_MAX {
                return;
            }
            self.end_signal(None);
        }
        self.trace();
        self.throttle();
        self.progress();
        self.tsc = now();
        self.engine.set_clock(self.tsc);
    }

    /// Tells the recorder how far the thread's trace has come, for a
    /// thread that ends without [`end`](Self::end) (a fatal signal kills
    /// the emulator without a callback): its AUX data up to here is
    /// complete packets the recorder can still read.
    fn progress(&mut self) {
        if let Some(t) = self.truth.as_mut() {
            t.flush();
        }
        let info = self.session.info(self.engine.slot);
        info.retired.store(self.flow.retired(), Ordering::Relaxed);
        let written = self.engine.pt.as_ref().map_or(0, |pt| pt.tracer.written());
        // Release: pairs with the recorder's Acquire load; the trace bytes
        // it counts are in the AUX pages before it.
        info.trace_bytes.store(written, Ordering::Release);
    }

    /// Hands the pending events to the tracer; a ToPA PMI (a full-trace
    /// INT region filled) goes to the PT PMU's handler.
    fn trace(&mut self) {
        let Some(pt) = &self.engine.pt else {
            return;
        };
        pt.tracer.trace_all(&self.events);
        self.events.clear();
        if pt.tracer.take_pmi() > 0 {
            pt.pmu.handle_pmi();
        }
    }

    /// The sampler overflowed in the block before `next`, which the thread
    /// has just entered: the PMI leaves user space before it (FUP +
    /// TIP.PGD), the sample takes the trace's newest bytes, and tracing
    /// resumes at it after a TSC at or past the sample's time.
    #[cold]
    fn pmi(&mut self, next: &Block) {
        let mark = self.truth.as_mut().map_or(0, |t| t.pending().len());
        flow!(self, interrupt());
        self.trace();
        if let Some(t) = self.truth.as_mut() {
            // Before the PMI's own exit (FUP + TIP.PGD), which the
            // interrupt above logged: the sample's history ends before it.
            let pending = t.pending();
            pending.insert(mark.min(pending.len()), [truth::SAMPLE, next.start(), 0]);
        }
        if let Some(sampler) = self.engine.sampler {
            let mut stack = [[0; 3]; LBR_DEPTH];
            let branch_stack = self.lbr.as_ref().map(|lbr| BranchStack {
                hw_index: lbr.hw_index(),
                entries: lbr.read(&mut stack),
                counters: &[],
            });
            let data = SampleData {
                misc: misc::USER,
                ip: next.start(),
                period: self.period,
                branch_stack,
                ..SampleData::default()
            };
            // A refused sample is counted by the event (lost_samples).
            let _ = sampler.overflow(self.engine.platform, &data);
        }
        // With only branch stacks kept, no trace event is made, so no run
        // ends (and no flush throttles) until a system call: samples alone
        // can fill the data ring. The PMI is where it grows, so it is
        // where the recorder is waited for.
        if self.behind() {
            self.wait_for_recorder();
        }
        let tsc = now();
        self.engine.set_clock(tsc);
        flow!(self, resume(tsc));
    }

    /// The thread enters `rt_sigreturn`: the next block is where the
    /// handler of the pending signal returns.
    pub fn sigreturn(&mut self) {
        self.sigreturn = true;
    }

    /// The running block's last instruction, a system call, enters the
    /// kernel.
    pub fn system_call(&mut self) {
        flow!(self, system_call());
        self.flush();
    }

    /// The thread's `execve` starts the program at `path` (`Some`), or
    /// failed (`None`): the slot says so, for the recorder to name the
    /// program if it replaced this one (QEMU user mode runs it natively,
    /// untraced).
    pub fn exec(&mut self, path: Option<&[u8]>) {
        let info = self.session.info(self.engine.slot);
        match path {
            Some(p) => {
                let n = p.len().min(EXEC_PATH_MAX);
                // SAFETY: the slot's path buffer is written only by this
                // thread, and read by the recorder only up to the length
                // published below (Release), which is 0 while writing.
                unsafe {
                    info.exec_len.store(0, Ordering::Relaxed);
                    let dst = info.exec_path.get().cast::<u8>();
                    std::ptr::copy_nonoverlapping(p.as_ptr(), dst, n);
                }
                // Release: pairs with the recorder's Acquire load before it
                // reads the bytes.
                info.exec_len.store(n as u32, Ordering::Release);
            }
            None => info.exec_len.store(0, Ordering::Relaxed),
        }
    }

    /// The thread took a new name (`prctl(PR_SET_NAME)`):
    /// `PERF_RECORD_COMM`, as `perf_event_comm` writes it.
    pub fn rename(&mut self, name: &str) {
        let tr = self.trailer();
        records::comm(self.engine.ring, self.pid, self.tid, name, false, tr);
    }

    /// The process mapped `map` executable: `PERF_RECORD_MMAP2`.
    pub fn mmap(&mut self, map: &Mmap) {
        let tr = self.trailer();
        records::mmap2(self.engine.ring, self.pid, self.tid, map, tr);
    }

    /// Ends the AUX transaction and begins another (a context switch out
    /// and back in): the trace so far is published (aux_head,
    /// `PERF_RECORD_AUX`) for the recorder. Called while the thread is in
    /// the kernel (tracing off).
    pub fn publish(&mut self) {
        self.end_signal(None);
        self.flush();
        self.engine.leader.sched_out();
        let _ = self.engine.leader.sched_in(self.engine.platform);
    }

    /// The thread ends (`exit`, the process's end, or a fatal signal):
    /// its trace is closed and published, `PERF_RECORD_EXIT` written, and
    /// its slot handed to the recorder to drain.
    pub fn end(mut self) {
        self.end_signal(None);
        self.flush();
        flow!(self, stop());
        self.trace();
        self.engine.leader.sched_out();
        if let Some(t) = self.truth.as_mut() {
            t.flush();
        }
        let tr = self.trailer();
        records::task(
            self.engine.ring,
            true,
            (self.pid, self.tid),
            (self.pid, self.pid),
            tr.time,
            tr,
        );
        let info = self.session.info(self.engine.slot);
        info.retired.store(self.flow.retired(), Ordering::Relaxed);
        if let Some(pt) = &self.engine.pt {
            info.trace_bytes
                .store(pt.tracer.written(), Ordering::Relaxed);
            info.lost_events
                .store(pt.tracer.lost_events(), Ordering::Relaxed);
        }
        let lost = self.engine.sampler.map_or(0, |s| s.lost_samples());
        info.lost_samples.store(lost, Ordering::Relaxed);
        // Relaxed: the slot's state publishes it.
        self.session
            .header()
            .instructions
            .fetch_add(self.flow.retired(), Ordering::Relaxed);
        // Release: pairs with the recorder's Acquire load; everything the
        // thread wrote and counted is before it.
        info.state.store(SLOT_DONE, Ordering::Release);
    }

    /// The sample_id trailer of a record about this thread, now.
    fn trailer(&self) -> perfaux::ring::SampleId {
        let attr = self.session.header().leader_attr;
        trailer(&attr, self.engine.slot, self.pid, self.tid, now())
    }

    /// The recorder drains the rings while the program runs. When it falls
    /// behind (the data ring or, for a full trace, the AUX area half full),
    /// the thread waits for it: an emulated CPU can, and so nothing is
    /// lost, where hardware would drop records or stop the trace.
    fn throttle(&mut self) {
        if !self.behind() {
            return;
        }
        flow!(self, interrupt());
        self.trace();
        self.wait_for_recorder();
        let tsc = now();
        self.engine.set_clock(tsc);
        flow!(self, resume(tsc));
    }

    /// Waits, with the thread's trace off, until the recorder is no longer
    /// [`behind`](Self::behind) (or has died). The AUX transaction ends
    /// first, so that the trace so far is published for it to drain.
    fn wait_for_recorder(&mut self) {
        self.engine.leader.sched_out();
        let mut waits = 0u32;
        while self.behind() {
            std::thread::sleep(std::time::Duration::from_micros(200));
            waits += 1;
            if waits % 5000 == 0 && !self.session.recorder_alive() {
                break;
            }
        }
        let _ = self.engine.leader.sched_in(self.engine.platform);
    }

    /// Whether the recorder is behind: half the data ring or (full trace)
    /// half the AUX area waits for it.
    fn behind(&self) -> bool {
        let up = self.session.user_page(self.engine.slot);
        // SAFETY: the user page is the slot's, in the session mapping for
        // the life of the process; the tails are u64s at their ABI offsets.
        let (data_tail, aux_tail) = unsafe {
            (
                AtomicU64::from_ptr(&raw mut (*up).data_tail),
                AtomicU64::from_ptr(&raw mut (*up).aux_tail),
            )
        };
        // Relaxed: a hint for throttling; the rings' own protocol (the
        // Acquire loads in the writers) orders what they overwrite.
        let data_used = (self.engine.ring.head()).saturating_sub(data_tail.load(Ordering::Relaxed));
        if data_used > self.engine.ring.data_size() / 2 {
            return true;
        }
        match &self.engine.pt {
            Some(pt) if self.session.layout().mode() == Mode::Full => {
                pt.tracer
                    .written()
                    .saturating_sub(aux_tail.load(Ordering::Relaxed))
                    > pt.area.size() / 2
            }
            _ => false,
        }
    }
}
