// SPDX-License-Identifier: MIT OR Apache-2.0
//! An emulator's view of one thread: the blocks of code it executes
//! (QEMU's translation blocks), turned into the [`TraceEvent`]s Intel PT
//! hardware would report for them with tracing limited to user mode
//! (`intel_pt//u`). A second flow source for the same tracer, beside the
//! single-step one in [`step`](super::step).
//!
//! A block is straight-line code that only its last instruction may leave:
//! the emulator ends a block at every control transfer. So the flow of a
//! thread is known from the order in which blocks start: when a block
//! starts, the previous block's last instruction went there. The platform
//! tells the [`BlockFlow`]:
//! - [`BlockFlow::enter`], as each block starts: the previous block's exit
//!   is resolved against the new start (a Jcc taken or not, where a RET or
//!   an indirect branch went), and after time in the kernel tracing
//!   resumes there (TSC + TIP.PGE);
//! - [`BlockFlow::system_call`], when the running block's last instruction
//!   (a system call) enters the kernel: TIP.PGD;
//! - [`BlockFlow::interrupt`], when the thread is interrupted before the
//!   block it entered runs (a PMI): FUP + TIP.PGD, an asynchronous
//!   disable, and [`BlockFlow::resume`] when it returns there: TSC +
//!   TIP.PGE;
//! - [`BlockFlow::stop`], when tracing of the thread ends.
//!
//! A block's instructions retire when it is left, so
//! [`BlockFlow::retired`] counts exactly the instructions a decoder of the
//! trace walks. A REP string instruction is the last of its block and the
//! emulator runs it again (a block starting at it) until the last
//! iteration: only that one retires, as a decoder counts it.
//!
//! A block that starts where the previous one cannot go (the kernel
//! delivered a signal between two blocks) is traced as an asynchronous exit
//! where the previous block went and a re-enable at the new block. Where a
//! Jcc, a RET or an indirect branch went cannot be told from where a signal
//! handler starts; a platform that knows the program's handlers says the
//! block is one ([`BlockFlow::deliver`]), and the interrupted place is
//! resolved when the handler returns there
//! ([`BlockFlow::resolve_interrupted`]: the exit's events go where the
//! signal came, before the handler's). Without that, such an exit is taken
//! as the branch to the handler, a Jcc as not taken.
//!
//! ```
//! use perfaux::soft_pt::blocks::{Block, BlockFlow};
//! use perfaux::soft_pt::stream::TraceEvent;
//! let mut events = Vec::new();
//! let mut flow = BlockFlow::new();
//! // A block of three instructions ending in `jne +0x10` at 0x1005, then
//! // the block at its target, ending in `syscall` at 0x1020.
//! let a = Block::new(0x1000, 3, 0x1005, &[0x75, 0x10]).unwrap();
//! let b = Block::new(0x1017, 2, 0x1020, &[0x0f, 0x05]).unwrap();
//! flow.enter(&a, 7, &mut |e| events.push(e));
//! flow.enter(&b, 8, &mut |e| events.push(e));
//! flow.system_call(&mut |e| events.push(e));
//! assert_eq!(flow.retired(), 5);
//! assert_eq!(
//!     events,
//!     [
//!         TraceEvent::Time(7),
//!         TraceEvent::Enable(0x1000),
//!         TraceEvent::Conditional { taken: true, next: 0x1017 },
//!         TraceEvent::Disable(None),
//!     ]
//! );
//! ```

use super::insn::{Branch, InsnError, decode};
use super::stream::TraceEvent;
use crate::lbr::BranchKind;

/// The most [`TraceEvent`]s one call of any [`BlockFlow`] method writes:
/// the previous block's event, an asynchronous exit, TSC and TIP.PGE.
pub const MAX_EVENTS_PER_CALL: usize = 4;

/// How a block ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exit {
    /// The block ends before the instruction at the address, without a
    /// control transfer (the emulator's block size limit, a page end).
    FallThrough(u64),
    /// The block's last instruction.
    Insn {
        /// Its address.
        at: u64,
        /// Its length in bytes.
        len: u8,
        /// Its control transfer.
        branch: Branch,
        /// A string instruction with a REP prefix.
        repeated: bool,
    },
}

/// How a block's exit is resolved: one flat kind, so that the flow makes
/// one dispatch per block (the exit's and the branch's kinds folded).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
enum Kind {
    /// Ends before `after` without a control transfer.
    FallThrough,
    /// The last instruction is not a branch: on to `after`.
    Plain,
    /// A REP string instruction: again at `at` until its last iteration.
    Repeated,
    /// Jcc: a TNT bit; `target` if taken, else `after`.
    Conditional,
    /// Direct JMP to `target`.
    Jump,
    /// Direct CALL of `target`, returning to `after`.
    Call,
    /// Indirect CALL, returning to `after`.
    IndirectCall,
    /// RET.
    Return,
    /// Indirect JMP or a far transfer.
    Indirect,
    /// A transfer into the kernel (SYSCALL, INT n, INT3).
    Trap,
}

/// One translated block: where it starts, how many instructions it runs,
/// and how it ends.
///
/// # Invariants
/// Every instruction of the block but its last falls through to the next
/// (the emulator ends blocks at control transfers); `after` is where the
/// last one falls through to (`at` + its length, or for a
/// `Kind::FallThrough` block the instruction it ends before, `at`
/// itself), `target` the direct target of a direct branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Block {
    start: u64,
    at: u64,
    after: u64,
    target: u64,
    insns: u32,
    kind: Kind,
}

impl Block {
    /// The block at `start` of `count` instructions as the emulator's
    /// translator reports it, the last at `last_at` with bytes `last`.
    ///
    /// An instruction that crosses a page end is reported as the last of a
    /// block with its bytes cut at the page end, but the emulator runs it
    /// in the next block: it is not part of this one, which then falls
    /// through to it.
    ///
    /// # Errors
    /// [`InsnError::Invalid`] if the last instruction does not decode, or
    /// decodes to fewer bytes than reported; [`InsnError::Truncated`] if a
    /// block's only instruction is cut.
    pub fn new(start: u64, count: u32, last_at: u64, last: &[u8]) -> Result<Block, InsnError> {
        let insn = match decode(last, last_at) {
            Ok(insn) if usize::from(insn.len) == last.len() => insn,
            Ok(_) => return Err(InsnError::Invalid),
            Err(InsnError::Truncated { .. }) if count > 1 => {
                // INVARIANT: the block falls through to the cut instruction.
                return Ok(Block {
                    start,
                    at: last_at,
                    after: last_at,
                    target: 0,
                    insns: count - 1,
                    kind: Kind::FallThrough,
                });
            }
            Err(e) => return Err(e),
        };
        let (kind, target) = match insn.branch {
            Branch::None if insn.repeated => (Kind::Repeated, 0),
            Branch::None => (Kind::Plain, 0),
            Branch::Conditional { target } => (Kind::Conditional, target),
            Branch::Jump { target } => (Kind::Jump, target),
            Branch::Call { target } => (Kind::Call, target),
            Branch::IndirectCall => (Kind::IndirectCall, 0),
            Branch::Return => (Kind::Return, 0),
            Branch::IndirectJump | Branch::Far | Branch::SystemReturn => (Kind::Indirect, 0),
            Branch::SystemCall => (Kind::Trap, 0),
        };
        // INVARIANT: `after` is past the last instruction, `target` the
        // direct branch's.
        Ok(Block {
            start,
            at: last_at,
            after: last_at.wrapping_add(u64::from(insn.len)),
            target,
            insns: count,
            kind,
        })
    }

    /// Where the block starts.
    pub const fn start(&self) -> u64 {
        self.start
    }

    /// The instructions the block runs.
    pub const fn insns(&self) -> u32 {
        self.insns
    }

    /// How the block ends.
    pub fn exit(&self) -> Exit {
        let branch = match self.kind {
            Kind::FallThrough => return Exit::FallThrough(self.after),
            Kind::Plain | Kind::Repeated => Branch::None,
            Kind::Conditional => Branch::Conditional {
                target: self.target,
            },
            Kind::Jump => Branch::Jump {
                target: self.target,
            },
            Kind::Call => Branch::Call {
                target: self.target,
            },
            Kind::IndirectCall => Branch::IndirectCall,
            Kind::Return => Branch::Return,
            Kind::Indirect => Branch::IndirectJump,
            Kind::Trap => Branch::SystemCall,
        };
        Exit::Insn {
            at: self.at,
            len: self.after.wrapping_sub(self.at) as u8,
            branch,
            repeated: self.kind == Kind::Repeated,
        }
    }
}

/// Where the followed thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum State<'b> {
    /// Not following a thread.
    Idle,
    /// Running the block; its exit is not known yet.
    In(&'b Block),
    /// Interrupted before the block's first instruction (tracing off).
    Held(&'b Block),
    /// In the kernel (tracing off): back at the address if known.
    Out(Option<u64>),
}

/// Receives what a [`BlockFlow`] makes of a thread's blocks.
pub trait FlowSink {
    /// Whether [`branch`](Self::branch) wants to hear of branches: a sink
    /// that does not spares the flow the test of each Jcc's outcome, a
    /// branch as unpredictable as the program's.
    const BRANCHES: bool = true;
    /// The next event for the tracer.
    fn event(&mut self, event: TraceEvent);
    /// Control went from `from` to `to` in a way a decoder reports as a
    /// branch: a taken branch of `kind` (its instruction's address and
    /// target), or, with no kind, an asynchronous exit (`to` 0) or the
    /// start of tracing (`from` 0). For a ground truth and a last-branch
    /// record ([`Lbr`](crate::lbr::Lbr)); ignored by default.
    fn branch(&mut self, from: u64, to: u64, kind: Option<BranchKind>) {
        let _ = (from, to, kind);
    }
}

impl<F: FnMut(TraceEvent)> FlowSink for F {
    const BRANCHES: bool = false;
    fn event(&mut self, event: TraceEvent) {
        self(event);
    }
}

/// One thread's block-flow tracer state (see the module documentation),
/// over blocks that live for `'b` (an emulator keeps one [`Block`] per
/// translated block, so the flow holds the running one by reference).
///
/// # Invariants
/// `retired` counts exactly the instructions whose packets the flow
/// produced: a decoder walking those packets counts as many.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockFlow<'b> {
    state: State<'b>,
    /// The block a signal interrupted at its end, while its handler runs
    /// (see [`BlockFlow::deliver`]).
    interrupted: Option<&'b Block>,
    retired: u64,
}

impl Default for BlockFlow<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'b> BlockFlow<'b> {
    /// A flow that follows no thread yet.
    pub const fn new() -> BlockFlow<'b> {
        BlockFlow {
            state: State::Idle,
            interrupted: None,
            retired: 0,
        }
    }

    /// Instructions retired so far (what a decoder of the trace counts).
    pub const fn retired(&self) -> u64 {
        self.retired
    }

    /// Whether the thread runs traced code (a block was entered and not
    /// left for the kernel).
    pub const fn in_block(&self) -> bool {
        matches!(self.state, State::In(_))
    }

    /// `block` starts running; `tsc` is the time stamp counter. The
    /// previous block's exit went to its start. Returns the instructions
    /// that retired with it (the previous block's).
    // Always inlined: the one call a block makes, in the emulator's
    // callback of every executed block.
    #[inline(always)]
    pub fn enter(&mut self, block: &'b Block, tsc: u64, out: &mut impl FlowSink) -> u64 {
        let before = self.retired;
        let next = block.start;
        match self.state {
            State::In(prev) => self.leave_block(prev, next, tsc, out),
            State::Idle | State::Out(_) | State::Held(_) => Self::restart(next, tsc, out),
        }
        self.state = State::In(block);
        self.retired - before
    }

    /// The running block's last instruction, a system call, entered the
    /// kernel: TIP.PGD. Nothing when no block runs.
    pub fn system_call(&mut self, out: &mut impl FlowSink) {
        if let State::In(prev) = self.state {
            self.retired += u64::from(prev.insns);
            let from = prev.at;
            out.event(TraceEvent::Disable(None));
            out.branch(from, 0, None);
            self.state = State::Out(None);
        }
    }

    /// The thread is interrupted before the first instruction of the
    /// block it just [`enter`](Self::enter)ed (a PMI): FUP + TIP.PGD.
    /// [`resume`](Self::resume) runs the block after the kernel; an
    /// [`enter`](Self::enter) of another block means the kernel sent the
    /// thread there instead. Nothing when no block runs.
    pub fn interrupt(&mut self, out: &mut impl FlowSink) {
        if let State::In(block) = self.state {
            out.event(TraceEvent::Async {
                from: block.start,
                to: None,
            });
            out.branch(block.start, 0, None);
            self.state = State::Held(block);
        }
    }

    /// The kernel returns to the block an [`interrupt`](Self::interrupt)
    /// held: TSC + TIP.PGE. Nothing unless a block is held.
    pub fn resume(&mut self, tsc: u64, out: &mut impl FlowSink) {
        if let State::Held(block) = self.state {
            Self::restart(block.start, tsc, out);
            self.state = State::In(block);
        }
    }

    /// Stops following the thread. A block still running is taken as not
    /// run (the thread died in it, or its end is not known): FUP of its
    /// start + TIP.PGD.
    pub fn stop(&mut self, out: &mut impl FlowSink) {
        if let State::In(prev) = self.state {
            out.event(TraceEvent::Async {
                from: prev.start,
                to: None,
            });
            out.branch(prev.start, 0, None);
        }
        self.state = State::Idle;
    }

    /// Whether a block that starts at `next` now could be a signal handler
    /// the kernel entered between two blocks, with the interrupted place
    /// not known yet: the running block ends in an instruction that may go
    /// elsewhere than one fixed place (a Jcc, a RET, an indirect branch, a
    /// REP iteration) and `next` is not a place a Jcc or a REP goes by
    /// itself. A signal already pending must be resolved before another
    /// is delivered.
    pub fn may_deliver(&self, next: u64) -> bool {
        let State::In(prev) = self.state else {
            return false;
        };
        match prev.kind {
            Kind::Conditional => next != prev.target && next != prev.after,
            Kind::Repeated => next != prev.at && next != prev.after,
            Kind::Return | Kind::IndirectCall | Kind::Indirect => true,
            Kind::FallThrough | Kind::Plain | Kind::Jump | Kind::Call | Kind::Trap => false,
        }
    }

    /// Whether a signal's interrupted block waits for
    /// [`resolve_interrupted`](Self::resolve_interrupted).
    pub const fn interrupted(&self) -> bool {
        self.interrupted.is_some()
    }

    /// The kernel delivered a signal between two blocks: `handler` runs
    /// next (TSC + TIP.PGE there), while where the running block went, the
    /// place the signal interrupted, is known only when the handler
    /// returns ([`resolve_interrupted`](Self::resolve_interrupted)). The
    /// platform writes the resolution's events before this call's, as the
    /// hardware would have written them. Without
    /// [`may_deliver`](Self::may_deliver), or with a signal pending, an
    /// [`enter`](Self::enter).
    pub fn deliver(&mut self, handler: &'b Block, tsc: u64, out: &mut impl FlowSink) -> u64 {
        if self.interrupted.is_some() || !self.may_deliver(handler.start) {
            return self.enter(handler, tsc, out);
        }
        if let State::In(prev) = self.state {
            self.interrupted = Some(prev);
        }
        Self::restart(handler.start, tsc, out);
        self.state = State::In(handler);
        0
    }

    /// The handler of a [`deliver`](Self::deliver)ed signal returned to
    /// `resume` (the kernel's `rt_sigreturn`): the interrupted block's
    /// exit toward it and the asynchronous exit there (FUP + TIP.PGD), to
    /// be written where the signal was delivered. When the handler will
    /// not return (it left by a jump, the thread ends, another signal
    /// came), `resume` is the handler's start: the block is taken as having
    /// gone there, as a flow that does not know the handlers takes it.
    /// Returns the instructions that retired (the interrupted block's);
    /// nothing when no signal waits.
    pub fn resolve_interrupted(&mut self, resume: u64, tsc: u64, out: &mut impl FlowSink) -> u64 {
        let Some(prev) = self.interrupted.take() else {
            return 0;
        };
        let before = self.retired;
        // Where the block went (a REP between two iterations: on it),
        // unless the handler changed where the thread returns (then where
        // its code sent it is a guess).
        let went = self.take_exit(prev, resume, tsc, out).unwrap_or(resume);
        out.event(TraceEvent::Async {
            from: went,
            to: None,
        });
        out.branch(went, 0, None);
        self.retired - before
    }

    /// Tracing (re)starts at `next`: TSC + TIP.PGE.
    fn restart(next: u64, tsc: u64, out: &mut impl FlowSink) {
        out.event(TraceEvent::Time(tsc));
        out.event(TraceEvent::Enable(next));
        out.branch(0, next, None);
    }

    /// `prev` ran to its end and the thread went to `next`: its
    /// instructions retire, its last one's event.
    #[inline(always)]
    fn leave_block<O: FlowSink>(&mut self, prev: &Block, next: u64, tsc: u64, out: &mut O) {
        if let Some(went) = self.take_exit(prev, next, tsc, out) {
            if went != next {
                Self::redirected(went, next, tsc, out);
            }
        }
    }

    /// `prev` ran to its end and the thread went to `next`: its
    /// instructions retire and its last one's event is written; returns
    /// where the block went, or `None` when nothing more is to be said (a
    /// REP iteration; a trap, after which tracing restarted at `next`).
    #[inline(always)]
    fn take_exit<O: FlowSink>(
        &mut self,
        prev: &Block,
        next: u64,
        tsc: u64,
        out: &mut O,
    ) -> Option<u64> {
        let (at, after, target) = (prev.at, prev.after, prev.target);
        self.retired += u64::from(prev.insns);
        // Where the block can go, and the event that says it went there;
        // `next` elsewhere is a redirection by the kernel.
        let went = match prev.kind {
            Kind::Conditional => {
                let taken = next != after && next == target;
                let to = if taken { target } else { after };
                if O::BRANCHES && taken {
                    out.branch(at, to, Some(BranchKind::Conditional));
                }
                out.event(TraceEvent::Conditional { taken, next: to });
                to
            }
            Kind::Return => {
                out.branch(at, next, Some(BranchKind::Return));
                out.event(TraceEvent::Return { target: next });
                next
            }
            Kind::Call => {
                out.branch(at, target, Some(BranchKind::Call));
                out.event(TraceEvent::Call {
                    target,
                    ret: after,
                    indirect: false,
                });
                target
            }
            Kind::Jump => {
                out.branch(at, target, Some(BranchKind::Jump));
                out.event(TraceEvent::Jump { target });
                target
            }
            Kind::Plain | Kind::FallThrough => after,
            Kind::IndirectCall => {
                out.branch(at, next, Some(BranchKind::IndirectCall));
                out.event(TraceEvent::Call {
                    target: next,
                    ret: after,
                    indirect: true,
                });
                next
            }
            Kind::Indirect => {
                out.branch(at, next, Some(BranchKind::IndirectJump));
                out.event(TraceEvent::Indirect { target: next });
                next
            }
            Kind::Repeated if next == at => {
                // One iteration of a REP string instruction: it retires
                // with its last iteration, in a later block.
                self.retired -= 1;
                return None;
            }
            Kind::Repeated => after,
            Kind::Trap => {
                // A trap (INT3, INT n) or a system call the platform did
                // not report: the kernel ran and sent the thread to `next`.
                out.event(TraceEvent::Disable(None));
                out.branch(at, 0, None);
                Self::restart(next, tsc, out);
                return None;
            }
        };
        Some(went)
    }

    /// The thread went to `next` where its code went to `went`: the kernel
    /// took it there (a signal) between two blocks.
    fn redirected(went: u64, next: u64, tsc: u64, out: &mut impl FlowSink) {
        out.event(TraceEvent::Async {
            from: went,
            to: None,
        });
        out.branch(went, 0, None);
        Self::restart(next, tsc, out);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[derive(Default)]
    struct Log {
        events: Vec<TraceEvent>,
        branches: Vec<(u64, u64)>,
        kinds: Vec<Option<BranchKind>>,
    }

    impl FlowSink for Log {
        fn event(&mut self, e: TraceEvent) {
            self.events.push(e);
        }
        fn branch(&mut self, from: u64, to: u64, kind: Option<BranchKind>) {
            self.branches.push((from, to));
            self.kinds.push(kind);
        }
    }

    fn block(start: u64, count: u32, at: u64, bytes: &[u8]) -> Block {
        Block::new(start, count, at, bytes).unwrap()
    }

    /// Runs `blocks` in order from the idle state; the instructions
    /// retired, and the events after the first block's TSC + TIP.PGE.
    fn run(blocks: &[Block]) -> (u64, Log) {
        let mut flow = BlockFlow::new();
        let mut log = Log::default();
        for b in blocks {
            flow.enter(b, 1, &mut log);
        }
        log.events.drain(..2);
        log.branches.remove(0);
        log.kinds.remove(0);
        (flow.retired(), log)
    }

    #[test]
    fn each_branch_kind_makes_the_event_perf_expects() {
        let at = 0x40_0010;
        use BranchKind as K;
        let cases: &[(&[u8], u64, TraceEvent, Option<K>)] = &[
            (
                &[0x74, 0x10],
                at + 0x12,
                TraceEvent::Conditional {
                    taken: true,
                    next: at + 0x12,
                },
                Some(K::Conditional),
            ),
            (
                &[0x74, 0x10],
                at + 2,
                TraceEvent::Conditional {
                    taken: false,
                    next: at + 2,
                },
                None,
            ),
            (
                &[0xeb, 0x00],
                at + 2,
                TraceEvent::Jump { target: at + 2 },
                Some(K::Jump),
            ),
            (
                &[0xe8, 0x10, 0, 0, 0],
                at + 0x15,
                TraceEvent::Call {
                    target: at + 0x15,
                    ret: at + 5,
                    indirect: false,
                },
                Some(K::Call),
            ),
            (
                &[0xff, 0xd0],
                0x1234,
                TraceEvent::Call {
                    target: 0x1234,
                    ret: at + 2,
                    indirect: true,
                },
                Some(K::IndirectCall),
            ),
            (
                &[0xc3],
                0x999,
                TraceEvent::Return { target: 0x999 },
                Some(K::Return),
            ),
            (
                &[0xff, 0xe0],
                0x777,
                TraceEvent::Indirect { target: 0x777 },
                Some(K::IndirectJump),
            ),
        ];
        for (code, next, event, kind) in cases {
            let a = block(0x40_0000, 4, at, code);
            let b = block(*next, 1, *next, &[0x90]);
            let (retired, log) = run(&[a, b]);
            assert_eq!(log.events, [*event], "{code:x?}");
            assert_eq!(retired, 4, "{code:x?}");
            // A taken branch is reported with its kind; a Jcc not taken is
            // no branch.
            let taken: Vec<_> = kind.iter().map(|k| Some(*k)).collect();
            assert_eq!(log.kinds, taken, "{code:x?}");
        }
    }

    #[test]
    fn taken_branches_are_reported_with_their_instruction() {
        let a = block(0x1000, 2, 0x1004, &[0x74, 0x10]); // je 0x1016
        let b = block(0x1006, 1, 0x1006, &[0xc3]); // not taken, then ret
        let c = block(0x5000, 1, 0x5000, &[0x90]);
        let (_, log) = run(&[a, b, c]);
        assert_eq!(log.branches, [(0x1006, 0x5000)]);
    }

    #[test]
    fn a_page_crossing_instruction_belongs_to_the_next_block() {
        // `mov $imm32, %eax` (5 bytes) cut after 2 at the page end.
        let a = block(0x1ff0, 4, 0x1ffe, &[0xb8, 0x01]);
        assert_eq!((a.insns(), a.exit()), (3, Exit::FallThrough(0x1ffe)));
        let b = block(0x1ffe, 1, 0x1ffe, &[0xb8, 1, 2, 3, 4]);
        let (retired, log) = run(&[a, b]);
        assert!(log.events.is_empty());
        assert_eq!(retired, 3);
        // The only instruction of a block cannot be cut.
        assert_eq!(
            Block::new(0x1ffe, 1, 0x1ffe, &[0xb8, 0x01]),
            Err(InsnError::Truncated { needed: 5 })
        );
        // Bytes past the instruction's end are not an instruction.
        assert_eq!(Block::new(0, 1, 0, &[0x90, 0x90]), Err(InsnError::Invalid));
    }

    #[test]
    fn a_rep_instruction_retires_once_after_its_iterations() {
        let a = block(0x1000, 3, 0x1004, &[0xf3, 0xa4]); // rep movsb
        let rep = block(0x1004, 1, 0x1004, &[0xf3, 0xa4]);
        let after = block(0x1006, 1, 0x1006, &[0x90]);
        let (retired, log) = run(&[a, rep, rep, rep, after]);
        assert!(log.events.is_empty());
        assert_eq!(retired, 3);
    }

    #[test]
    fn system_calls_disable_and_the_next_block_enables() {
        let mut flow = BlockFlow::new();
        let mut log = Log::default();
        let a = block(0x1000, 2, 0x1003, &[0x0f, 0x05]);
        let h = block(0x7000, 1, 0x7000, &[0x90]); // a signal handler
        flow.enter(&a, 5, &mut log);
        flow.system_call(&mut log);
        flow.system_call(&mut log); // nothing runs: nothing happens
        flow.enter(&h, 9, &mut log);
        assert_eq!(
            log.events,
            [
                TraceEvent::Time(5),
                TraceEvent::Enable(0x1000),
                TraceEvent::Disable(None),
                TraceEvent::Time(9),
                TraceEvent::Enable(0x7000),
            ]
        );
        assert_eq!(log.branches, [(0, 0x1000), (0x1003, 0), (0, 0x7000)]);
        assert_eq!(flow.retired(), 2);
    }

    #[test]
    fn an_interrupt_exits_before_the_block_and_resumes_it() {
        let mut flow = BlockFlow::new();
        let mut log = Log::default();
        let a = block(0x1000, 2, 0x1003, &[0x75, 0x10]); // jne 0x1015
        let b = block(0x1005, 3, 0x1005, &[0x90]);
        let c = block(0x1006, 1, 0x1006, &[0x90]);
        flow.enter(&a, 1, &mut log);
        assert_eq!(flow.enter(&b, 2, &mut log), 2);
        flow.interrupt(&mut log);
        flow.interrupt(&mut log); // held already: nothing
        flow.resume(3, &mut log);
        flow.resume(3, &mut log); // running: nothing
        assert_eq!(flow.enter(&c, 4, &mut log), 3);
        assert_eq!(
            &log.events[2..],
            [
                TraceEvent::Conditional {
                    taken: false,
                    next: 0x1005
                },
                TraceEvent::Async {
                    from: 0x1005,
                    to: None
                },
                TraceEvent::Time(3),
                TraceEvent::Enable(0x1005),
            ]
        );
        assert_eq!(flow.retired(), 5);
    }

    #[test]
    fn the_kernel_may_send_an_interrupted_thread_elsewhere() {
        let mut flow = BlockFlow::new();
        let mut log = Log::default();
        let b1 = block(0x1000, 2, 0x1003, &[0x90]);
        flow.enter(&b1, 1, &mut log);
        flow.interrupt(&mut log);
        let b2 = block(0x7000, 1, 0x7000, &[0x90]);
        flow.enter(&b2, 5, &mut log);
        assert_eq!(
            &log.events[2..],
            [
                TraceEvent::Async {
                    from: 0x1000,
                    to: None
                },
                TraceEvent::Time(5),
                TraceEvent::Enable(0x7000),
            ]
        );
        assert_eq!(flow.retired(), 0);
    }

    #[test]
    fn a_signal_between_blocks_is_an_asynchronous_exit() {
        let a = block(0x1000, 2, 0x1003, &[0xe8, 0, 1, 0, 0]); // call 0x1108
        let h = block(0x7000, 1, 0x7000, &[0x90]);
        let (retired, log) = run(&[a, h]);
        assert_eq!(
            log.events,
            [
                TraceEvent::Call {
                    target: 0x1108,
                    ret: 0x1008,
                    indirect: false
                },
                TraceEvent::Async {
                    from: 0x1108,
                    to: None
                },
                TraceEvent::Time(1),
                TraceEvent::Enable(0x7000),
            ]
        );
        assert_eq!(log.branches, [(0x1003, 0x1108), (0x1108, 0), (0, 0x7000)]);
        assert_eq!(retired, 2);
    }

    #[test]
    fn a_delivered_signal_is_resolved_where_its_handler_returns() {
        let a = block(0x1000, 2, 0x1003, &[0x75, 0x10]); // jne 0x1015
        let h = block(0x7000, 3, 0x7008, &[0x0f, 0x05]); // the handler, sigreturn
        let r = block(0x1015, 1, 0x1015, &[0x90]);
        let mut flow = BlockFlow::new();
        let mut log = Log::default();
        flow.enter(&a, 1, &mut log);
        assert!(flow.may_deliver(0x7000));
        // The Jcc's own targets are no delivery.
        assert!(!flow.may_deliver(0x1015) && !flow.may_deliver(0x1005));
        assert_eq!(flow.deliver(&h, 2, &mut log), 0);
        assert!(flow.interrupted());
        flow.system_call(&mut log); // rt_sigreturn
        // What the platform writes where the signal came: the Jcc was
        // taken (the handler returned to its target), the exit there.
        let mut resolution = Log::default();
        assert_eq!(flow.resolve_interrupted(0x1015, 3, &mut resolution), 2);
        assert_eq!(
            resolution.events,
            [
                TraceEvent::Conditional {
                    taken: true,
                    next: 0x1015
                },
                TraceEvent::Async {
                    from: 0x1015,
                    to: None
                },
            ]
        );
        assert_eq!(resolution.branches, [(0x1003, 0x1015), (0x1015, 0)]);
        flow.enter(&r, 4, &mut log);
        assert_eq!(
            log.events[2..],
            [
                TraceEvent::Time(2),
                TraceEvent::Enable(0x7000),
                TraceEvent::Disable(None),
                TraceEvent::Time(4),
                TraceEvent::Enable(0x1015),
            ]
        );
        assert_eq!(flow.retired(), 5);
        assert!(!flow.interrupted());
    }

    #[test]
    fn a_signal_between_rep_iterations_exits_on_the_rep() {
        let rep = block(0x1000, 1, 0x1000, &[0xf3, 0xa4]); // rep movsb
        let h = block(0x7000, 1, 0x7000, &[0x90]);
        let mut flow = BlockFlow::new();
        let mut log = Log::default();
        flow.enter(&rep, 1, &mut log);
        flow.deliver(&h, 2, &mut log);
        let mut resolution = Log::default();
        assert_eq!(flow.resolve_interrupted(0x1000, 3, &mut resolution), 0);
        assert_eq!(
            resolution.events,
            [TraceEvent::Async {
                from: 0x1000,
                to: None
            }]
        );
    }

    #[test]
    fn a_signal_that_never_returns_takes_the_branch_to_the_handler() {
        let a = block(0x1000, 2, 0x1003, &[0xc3]); // ret
        let h = block(0x7000, 1, 0x7000, &[0x90]);
        let mut flow = BlockFlow::new();
        let mut log = Log::default();
        flow.enter(&a, 1, &mut log);
        flow.deliver(&h, 2, &mut log);
        let mut resolution = Log::default();
        // It will not return: taken as gone to the handler.
        assert_eq!(flow.resolve_interrupted(0x7000, 3, &mut resolution), 2);
        assert_eq!(
            resolution.events,
            [
                TraceEvent::Return { target: 0x7000 },
                TraceEvent::Async {
                    from: 0x7000,
                    to: None
                }
            ]
        );
        // Nothing pending: nothing more.
        assert_eq!(flow.resolve_interrupted(0x1003, 3, &mut resolution), 0);
        // A block whose successor is fixed is not a delivery's candidate.
        let mut flow = BlockFlow::new();
        let call = block(0x1000, 1, 0x1000, &[0xe8, 0, 0, 0, 0]);
        flow.enter(&call, 1, &mut log);
        assert!(!flow.may_deliver(0x7000));
        assert_eq!(flow.deliver(&h, 2, &mut log), 1, "an enter");
        assert!(!flow.interrupted());
    }

    #[test]
    fn a_trap_disables_and_resumes_where_the_kernel_sent_the_thread() {
        let a = block(0x1000, 2, 0x1003, &[0xcc]); // int3
        let h = block(0x7000, 1, 0x7000, &[0x90]);
        let (retired, log) = run(&[a, h]);
        assert_eq!(
            log.events,
            [
                TraceEvent::Disable(None),
                TraceEvent::Time(1),
                TraceEvent::Enable(0x7000)
            ]
        );
        assert_eq!(retired, 2);
    }

    #[test]
    fn stop_takes_a_running_block_as_not_run() {
        let mut flow = BlockFlow::new();
        let mut log = Log::default();
        let b3 = block(0x1000, 5, 0x1010, &[0x90]);
        flow.enter(&b3, 1, &mut log);
        flow.stop(&mut log);
        assert_eq!(
            log.events[2..],
            [TraceEvent::Async {
                from: 0x1000,
                to: None
            }]
        );
        assert_eq!((flow.retired(), flow.in_block()), (0, false));
    }

    #[test]
    fn no_call_writes_more_than_the_bound() {
        // An unexpected target after a conditional: event, FUP + PGD,
        // TSC, PGE.
        let mut flow = BlockFlow::new();
        let mut log = Log::default();
        let b4 = block(0x1000, 1, 0x1000, &[0x74, 0x10]);
        flow.enter(&b4, 1, &mut log);
        let before = log.events.len();
        let b5 = block(0x9000, 1, 0x9000, &[0x90]);
        flow.enter(&b5, 1, &mut log);
        assert_eq!(log.events.len() - before, MAX_EVENTS_PER_CALL);
    }
}
