// SPDX-License-Identifier: MIT OR Apache-2.0
//! Threads executing the simulated program's machine code ([`Code`]),
//! block by block: each step runs the rest of a basic block and its
//! terminator, drawing the branch outcome or table entry from the thread's
//! seeded generator, and says what the CPU's PT tracer sees and which
//! control transfer (if any) it made.

use perfaux::soft_pt::stream::TraceEvent;

use super::code::{BlockId, Code, Terminator};
use crate::rng::SplitMix64;

/// Where the user program's code starts (its ELF is mapped one page lower).
pub const TEXT_START: u64 = 0x40_1000;
/// Where the kernel's interrupt handler code starts (`--kernel`).
pub const KERNEL_TEXT_START: u64 = 0xffff_ffff_8100_1000;

/// One thread of the program (or one run of the interrupt handler).
#[derive(Clone, Debug)]
pub struct Thread {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    block: BlockId,
    /// Index in the block's body of the next instruction (the body's
    /// length: the terminator is next).
    at: usize,
    /// Return blocks of the calls in progress.
    stack: Vec<BlockId>,
    rng: SplitMix64,
}

/// What one step did.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// Instructions retired.
    pub instructions: u64,
    /// The control transfer as the tracer sees it.
    pub event: TraceEvent,
    /// The transfer's (from, to), if control went elsewhere than the next
    /// instruction (what a branch trace lists).
    pub taken: Option<(u64, u64)>,
    /// The step ended in `iretq`: the handler is done (its target is the
    /// interrupted code, which the caller knows).
    pub iret: bool,
}

impl Thread {
    /// A thread `pid`/`tid` about to run function `entry` of `code`.
    pub fn new(pid: u32, tid: u32, code: &Code, entry: usize, seed: u64) -> Thread {
        Thread {
            pid,
            tid,
            block: code.entry(entry),
            at: 0,
            stack: Vec::new(),
            rng: SplitMix64::new(seed),
        }
    }

    /// The next instruction to execute.
    pub fn ip(&self, code: &Code) -> u64 {
        let b = &code.blocks[self.block];
        b.body.get(self.at).copied().unwrap_or(b.branch)
    }

    /// Straight-line instructions left before the block's terminator.
    pub fn straight_left(&self, code: &Code) -> usize {
        code.blocks[self.block].body.len() - self.at
    }

    /// Executes `n` straight-line instructions (at most those left).
    pub fn advance(&mut self, code: &Code, n: usize) -> u64 {
        let n = n.min(self.straight_left(code));
        self.at += n;
        n as u64
    }

    /// Runs the rest of the block and its terminator. `iret_to` is where
    /// an `iretq` returns (the interrupted code).
    pub fn step(&mut self, code: &Code, iret_to: u64) -> Step {
        let instructions = self.straight_left(code) as u64 + 1;
        let b = &code.blocks[self.block];
        let from = b.branch;
        let fall = self.block + 1;
        let start = |id: BlockId| code.blocks[id].start();
        let mut iret = false;
        let (event, next_block, taken) = match &b.term {
            Terminator::Cond { taken, percent } => {
                if self.rng.chance(u64::from(*percent)) {
                    let to = start(*taken);
                    (
                        TraceEvent::Conditional {
                            taken: true,
                            next: to,
                        },
                        *taken,
                        Some(to),
                    )
                } else {
                    (
                        TraceEvent::Conditional {
                            taken: false,
                            next: b.next,
                        },
                        fall,
                        None,
                    )
                }
            }
            Terminator::Jump(t) => (TraceEvent::Jump { target: start(*t) }, *t, Some(start(*t))),
            Terminator::Call(f) => {
                self.stack.push(fall);
                let to = code.functions[*f].start;
                let e = TraceEvent::Call {
                    target: to,
                    ret: b.next,
                    indirect: false,
                };
                (e, code.entry(*f), Some(to))
            }
            Terminator::IndirectJump { targets, .. } => {
                let t = targets[self.rng.below(targets.len() as u64) as usize];
                (TraceEvent::Indirect { target: start(t) }, t, Some(start(t)))
            }
            Terminator::IndirectCall { callees, .. } => {
                let f = callees[self.rng.below(callees.len() as u64) as usize];
                self.stack.push(fall);
                let to = code.functions[f].start;
                let e = TraceEvent::Call {
                    target: to,
                    ret: b.next,
                    indirect: true,
                };
                (e, code.entry(f), Some(to))
            }
            Terminator::Ret => {
                // Functions other than the entry are only ever called.
                let back = self.stack.pop().unwrap_or(code.entry(0));
                let to = start(back);
                (TraceEvent::Return { target: to }, back, Some(to))
            }
            Terminator::Iret => {
                iret = true;
                (
                    TraceEvent::Indirect { target: iret_to },
                    code.entry(0),
                    Some(iret_to),
                )
            }
        };
        self.block = next_block;
        self.at = 0;
        Step {
            instructions,
            event,
            taken: taken.map(|to| (from, to)),
            iret,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::code::Shape;
    use super::*;

    #[test]
    fn a_thread_follows_the_code() {
        let shape = Shape {
            text_base: TEXT_START,
            functions: 30,
            levels: 5,
            prefix: "fn",
            handler: false,
            tables: true,
            jumps: true,
        };
        let code = Code::generate(shape, &mut SplitMix64::new(3));
        let mut t = Thread::new(1, 1, &code, 0, 9);
        let mut depth = 0i64;
        let mut max_depth = 0;
        for _ in 0..100_000 {
            let before = t.ip(&code);
            let s = t.step(&code, 0);
            if let Some((from, to)) = s.taken {
                assert!(from >= before);
                assert_eq!(to, t.ip(&code));
            }
            match s.event {
                TraceEvent::Call { .. } => depth += 1,
                TraceEvent::Return { .. } => depth -= 1,
                _ => {}
            }
            assert!(depth >= 0);
            max_depth = max_depth.max(depth);
        }
        assert!((2..=5).contains(&max_depth), "depth {max_depth}");
    }
}
