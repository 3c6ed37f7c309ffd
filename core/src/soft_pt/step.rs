// SPDX-License-Identifier: MIT OR Apache-2.0
//! A single-step tracer's view of one thread: what the thread's user code
//! did, one retired instruction at a time, turned into the [`TraceEvent`]s
//! Intel PT hardware would report for it with tracing limited to user mode
//! (`intel_pt//u`).
//!
//! The platform single-steps the thread (EFLAGS.TF: a debug trap after each
//! instruction) and tells the [`Stepper`] three things:
//! - [`Stepper::step`], at each trap: the bytes of the instruction that just
//!   ran (at [`Stepper::pending`]) and where the thread goes next. The
//!   [`insn`](crate::soft_pt::insn) classifier tells the branch kind, so a Jcc becomes
//!   a TNT bit, a RET or an indirect branch a TIP, a direct JMP nothing;
//! - [`Stepper::leave`], when the thread enters the kernel: a system call or
//!   another trapping instruction that ran ([`Entry::SystemCall`], or
//!   [`Entry::Interrupted`] past the instruction: TIP.PGD, as the CPL change
//!   disables a user-only trace), or an interrupt, exception or
//!   context switch before the pending instruction ran
//!   ([`Entry::Interrupted`]: FUP + TIP.PGD, an asynchronous disable);
//! - [`Stepper::resume_at`], where the kernel sends the thread back to user
//!   code (the system call's return address, a signal handler, the
//!   `sigreturn` target, a new program's entry). The first trap after it
//!   writes a TSC and TIP.PGE there, as hardware does when tracing resumes.
//!
//! A single-step trap comes after the instruction ran, so the instruction
//! at the resume address has already run when the first trap after a
//! return from the kernel arrives: its bytes are the ones [`Stepper::step`]
//! asks for then. A REP string instruction traps after each iteration with
//! the IP still on it; only its last iteration counts as an instruction, as
//! a decoder counts it.
//!
//! Anything the platform did not report (the thread went elsewhere than
//! the instruction allows) is written as an asynchronous exit where the
//! instruction would have gone and a re-enable where the thread is: the
//! trace stays decodable, and nothing is made up.
//!
//! ```
//! use perfaux::soft_pt::step::{Entry, Stepper};
//! use perfaux::soft_pt::stream::TraceEvent;
//! let mut events = Vec::new();
//! let mut s = Stepper::new();
//! s.resume_at(0x1000); // execve returns to the entry point
//! // The first trap: `jne +0x10` at 0x1000 ran and was taken.
//! s.step(&[0x75, 0x10], 0x1012, 7, &mut |e| events.push(e)).unwrap();
//! // `syscall` at 0x1012 runs: the system-call exit path reports it, and
//! // that the kernel returns to 0x1014.
//! assert_eq!(s.pending(), Some(0x1012));
//! s.leave(Entry::SystemCall(0x1012), &mut |e| events.push(e));
//! s.resume_at(0x1014);
//! assert_eq!(s.retired(), 2);
//! assert_eq!(
//!     events,
//!     [
//!         TraceEvent::Time(7),
//!         TraceEvent::Enable(0x1000),
//!         TraceEvent::Conditional { taken: true, next: 0x1012 },
//!         TraceEvent::Disable(None),
//!     ]
//! );
//! ```

use super::insn::{Branch, InsnError, decode};
use super::stream::TraceEvent;

/// The most [`TraceEvent`]s one call of any [`Stepper`] method writes: the
/// work per single-step trap is bounded (a decode of at most 15 bytes and
/// this many events, each a bounded number of packet bytes), whatever the
/// thread does. [`Stepper::step`] writes the most: TSC and TIP.PGE after a
/// return from the kernel, the instruction's own event, then an
/// asynchronous exit, TSC and TIP.PGE where the thread really went.
pub const MAX_EVENTS_PER_CALL: usize = 6;

/// How the thread entered the kernel, for [`Stepper::leave`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// A system call instruction (SYSCALL, SYSENTER, INT 0x80, all two
    /// bytes long) at the address ran, as the system-call exit path reports
    /// it: the return address minus 2 before the kernel changed it.
    SystemCall(u64),
    /// The kernel was entered with `ip` saved as the thread's next user
    /// instruction (an interrupt, an exception, a context switch, a signal):
    /// if `ip` is the pending instruction, that instruction did not run
    /// (an asynchronous exit); otherwise it ran and trapped (INT3).
    Interrupted(u64),
}

/// Why [`Stepper::step`] could not follow the instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepError {
    /// The stepper follows no thread (not started, or stopped).
    Idle,
    /// The instruction at the pending address does not decode. The trace
    /// has an OVF packet and resumes at the new address: the instruction
    /// is lost, and the decoder says so.
    Code(InsnError),
    /// The instruction entered the kernel without [`Stepper::leave`]: the
    /// trace has TIP.PGD for it and resumes at the new address, without the
    /// one instruction that ran at the (unknown) return address.
    UnreportedKernelEntry,
}

/// Where the followed thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum State {
    /// Not following a thread.
    Idle,
    /// Running traced user code; the instruction at the address runs next.
    At(u64),
    /// In the kernel (tracing off); back to user code at the address if
    /// known.
    Out(Option<u64>),
}

/// One thread's single-step tracer state (see the module documentation).
///
/// # Invariants
/// `retired` counts exactly the instructions whose packets the stepper
/// produced: a decoder walking those packets counts as many.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stepper {
    state: State,
    retired: u64,
}

impl Default for Stepper {
    fn default() -> Self {
        Self::new()
    }
}

impl Stepper {
    /// A stepper that follows no thread yet.
    pub const fn new() -> Stepper {
        Stepper {
            state: State::Idle,
            retired: 0,
        }
    }

    /// The address of the instruction whose bytes the next
    /// [`step`](Self::step) needs: the next instruction to run, or the
    /// address the thread resumes at. `None` while idle or when the resume
    /// address is unknown.
    pub const fn pending(&self) -> Option<u64> {
        match self.state {
            State::At(ip) | State::Out(Some(ip)) => Some(ip),
            State::Idle | State::Out(None) => None,
        }
    }

    /// Whether a thread is followed.
    pub const fn following(&self) -> bool {
        !matches!(self.state, State::Idle)
    }

    /// Instructions retired so far (what a decoder of the trace counts).
    pub const fn retired(&self) -> u64 {
        self.retired
    }

    /// The thread goes back to user code at `ip` (it starts being followed
    /// if it was not): the first instruction there runs before the next
    /// trap, which writes TSC + TIP.PGE(`ip`) first.
    pub fn resume_at(&mut self, ip: u64) {
        self.state = State::Out(Some(ip));
    }

    /// The thread entered the kernel (see [`Entry`]). Writes TIP.PGD for a
    /// trap, FUP(ip) + TIP.PGD for an interruption of the pending
    /// instruction; nothing when the thread was not in user code. The
    /// resume address is then the interrupted IP, or unknown after a trap
    /// until [`resume_at`](Self::resume_at).
    pub fn leave(&mut self, entry: Entry, out: &mut impl FnMut(TraceEvent)) {
        let pending = match (self.state, entry) {
            (State::At(pending), _) => pending,
            (State::Out(Some(resume)), Entry::SystemCall(at)) if at == resume => {
                // The system call at `resume` ran first after the return
                // there, before any single-step trap (a restarted one, or
                // one a signal handler returned to).
                out(TraceEvent::Enable(resume));
                self.retire_trap(out);
                self.state = State::Out(None);
                return;
            }
            (State::Out(_), Entry::SystemCall(_)) => {
                // The thread was first seen inside this system call.
                self.state = State::Out(None);
                return;
            }
            (State::Out(_), Entry::Interrupted(ip)) => {
                // Still out; the kernel saved another resume address (a
                // system call it restarts, a signal frame).
                self.state = State::Out(Some(ip));
                return;
            }
            (State::Idle, _) => return,
        };
        match entry {
            Entry::Interrupted(ip) if ip == pending => {
                out(TraceEvent::Async {
                    from: pending,
                    to: None,
                });
                self.state = State::Out(Some(ip));
            }
            Entry::Interrupted(ip) => {
                self.retire_trap(out);
                self.state = State::Out(Some(ip));
            }
            Entry::SystemCall(_) => {
                self.retire_trap(out);
                self.state = State::Out(None);
            }
        }
    }

    /// Stops following the thread, which is in the kernel with `ip` saved
    /// as its next user instruction (as [`leave`](Self::leave) with
    /// [`Entry::Interrupted`]).
    pub fn stop(&mut self, ip: u64, out: &mut impl FnMut(TraceEvent)) {
        self.leave(Entry::Interrupted(ip), out);
        self.state = State::Idle;
    }

    /// A single-step trap: the instruction at [`pending`](Self::pending),
    /// whose bytes `code` starts with, ran, and the thread runs `next`
    /// now; `tsc` is the time stamp counter. Writes the instruction's
    /// packets through `out`.
    ///
    /// # Errors
    /// [`StepError`]: the trace is still consistent (see each variant), the
    /// stepper follows the thread at `next`.
    pub fn step(
        &mut self,
        code: &[u8],
        next: u64,
        tsc: u64,
        out: &mut impl FnMut(TraceEvent),
    ) -> Result<(), StepError> {
        let ip = match self.state {
            State::Idle => return Err(StepError::Idle),
            State::At(ip) => ip,
            State::Out(Some(ip)) => {
                out(TraceEvent::Time(tsc));
                out(TraceEvent::Enable(ip));
                ip
            }
            State::Out(None) => {
                // Where the kernel returned is unknown: the instruction
                // that ran there is lost; trace on from `next`.
                out(TraceEvent::Time(tsc));
                out(TraceEvent::Enable(next));
                self.state = State::At(next);
                return Err(StepError::UnreportedKernelEntry);
            }
        };
        self.state = State::At(next);
        let insn = match decode(code, ip) {
            Ok(insn) => insn,
            Err(e) => {
                out(TraceEvent::Overflow);
                out(TraceEvent::Enable(next));
                return Err(StepError::Code(e));
            }
        };
        if insn.repeated && next == ip {
            // One iteration of a REP string instruction: not retired yet.
            return Ok(());
        }
        if insn.branch == Branch::SystemCall {
            // Into the kernel and back without `leave`: TIP.PGD for the
            // trap, and the instruction at the return address (which ran
            // before this trap) is lost.
            self.retire_trap(out);
            out(TraceEvent::Time(tsc));
            out(TraceEvent::Enable(next));
            return Err(StepError::UnreportedKernelEntry);
        }
        self.retired += 1;
        let after = ip.wrapping_add(u64::from(insn.len));
        // Where the instruction can go, and the event that says it went
        // there; `next` elsewhere is a redirection nobody reported.
        let (went, event) = match insn.branch {
            Branch::None => (after, None),
            Branch::Conditional { target } => {
                let taken = next != after && next == target;
                let to = if taken { target } else { after };
                (to, Some(TraceEvent::Conditional { taken, next: to }))
            }
            Branch::Jump { target } => (target, Some(TraceEvent::Jump { target })),
            Branch::Call { target } => (
                target,
                Some(TraceEvent::Call {
                    target,
                    ret: after,
                    indirect: false,
                }),
            ),
            Branch::IndirectCall => (
                next,
                Some(TraceEvent::Call {
                    target: next,
                    ret: after,
                    indirect: true,
                }),
            ),
            Branch::Return => (next, Some(TraceEvent::Return { target: next })),
            Branch::IndirectJump | Branch::Far | Branch::SystemReturn => {
                (next, Some(TraceEvent::Indirect { target: next }))
            }
            // Handled above.
            Branch::SystemCall => return Ok(()),
        };
        if let Some(event) = event {
            out(event);
        }
        if went != next {
            // The thread is not where the instruction sent it: an
            // asynchronous exit there and a re-enable here.
            out(TraceEvent::Async {
                from: went,
                to: None,
            });
            out(TraceEvent::Time(tsc));
            out(TraceEvent::Enable(next));
        }
        Ok(())
    }

    /// The pending instruction ran and trapped into the kernel: TIP.PGD.
    fn retire_trap(&mut self, out: &mut impl FnMut(TraceEvent)) {
        self.retired += 1;
        out(TraceEvent::Disable(None));
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::{vec, vec::Vec};

    fn run(s: &mut Stepper, code: &[u8], next: u64) -> (Vec<TraceEvent>, Result<(), StepError>) {
        let mut ev = Vec::new();
        let r = s.step(code, next, 100, &mut |e| ev.push(e));
        (ev, r)
    }

    fn at(ip: u64) -> Stepper {
        let mut s = Stepper::new();
        s.state = State::At(ip);
        s
    }

    #[test]
    fn each_branch_kind_makes_the_event_perf_expects() {
        let ip = 0x40_0000;
        let cases: &[(&[u8], u64, TraceEvent)] = &[
            (
                &[0x74, 0x10],
                ip + 0x12,
                TraceEvent::Conditional {
                    taken: true,
                    next: ip + 0x12,
                },
            ),
            (
                &[0x74, 0x10],
                ip + 2,
                TraceEvent::Conditional {
                    taken: false,
                    next: ip + 2,
                },
            ),
            (
                &[0xe2, 0xfe],
                ip,
                TraceEvent::Conditional {
                    taken: true,
                    next: ip,
                },
            ), // loop .
            (&[0xeb, 0x00], ip + 2, TraceEvent::Jump { target: ip + 2 }),
            (
                &[0xe8, 0x10, 0, 0, 0],
                ip + 0x15,
                TraceEvent::Call {
                    target: ip + 0x15,
                    ret: ip + 5,
                    indirect: false,
                },
            ),
            (
                &[0xff, 0xd0],
                0x1234,
                TraceEvent::Call {
                    target: 0x1234,
                    ret: ip + 2,
                    indirect: true,
                },
            ),
            (&[0xc3], 0x999, TraceEvent::Return { target: 0x999 }),
            (&[0xff, 0xe0], 0x777, TraceEvent::Indirect { target: 0x777 }),
        ];
        for (code, next, event) in cases {
            let mut s = at(ip);
            let (ev, r) = run(&mut s, code, *next);
            assert_eq!(r, Ok(()), "{code:x?}");
            assert_eq!(ev, [*event], "{code:x?}");
            assert_eq!((s.pending(), s.retired()), (Some(*next), 1));
        }
    }

    #[test]
    fn plain_instructions_make_no_packet() {
        let mut s = at(0x1000);
        let (ev, r) = run(&mut s, &[0x48, 0x89, 0xc3], 0x1003); // mov %rax,%rbx
        assert_eq!((ev, r, s.retired()), (vec![], Ok(()), 1));
    }

    #[test]
    fn a_rep_string_instruction_counts_once() {
        let mut s = at(0x1000);
        for _ in 0..3 {
            assert_eq!(run(&mut s, &[0xf3, 0xa4], 0x1000), (vec![], Ok(())));
        }
        assert_eq!(s.retired(), 0);
        assert_eq!(run(&mut s, &[0xf3, 0xa4], 0x1002), (vec![], Ok(())));
        assert_eq!(s.retired(), 1);
    }

    #[test]
    fn the_first_trap_after_a_return_enables_with_a_timestamp_first() {
        let mut s = Stepper::new();
        assert_eq!(run(&mut s, &[0x90], 1).1, Err(StepError::Idle));
        s.resume_at(0x2000);
        let (ev, r) = run(&mut s, &[0x90], 0x2001);
        assert_eq!(r, Ok(()));
        assert_eq!(ev, [TraceEvent::Time(100), TraceEvent::Enable(0x2000)]);
        assert_eq!(s.retired(), 1);
    }

    #[test]
    fn an_interruption_before_the_pending_instruction_is_an_async_exit() {
        let mut s = at(0x3000);
        let mut ev = Vec::new();
        s.leave(Entry::Interrupted(0x3000), &mut |e| ev.push(e));
        assert_eq!(
            ev,
            [TraceEvent::Async {
                from: 0x3000,
                to: None
            }]
        );
        assert_eq!((s.pending(), s.retired()), (Some(0x3000), 0));
        // A second report while out changes nothing but the resume address.
        s.leave(Entry::Interrupted(0x3000), &mut |e| ev.push(e));
        assert_eq!(ev.len(), 1);
    }

    #[test]
    fn a_trap_retires_the_pending_instruction_with_tip_pgd() {
        // INT3 at 0x3000 (saved IP after it), then the SIGTRAP handler.
        let mut s = at(0x3000);
        let mut ev = Vec::new();
        s.leave(Entry::Interrupted(0x3001), &mut |e| ev.push(e));
        s.resume_at(0x5000);
        assert_eq!(ev, [TraceEvent::Disable(None)]);
        assert_eq!((s.pending(), s.retired()), (Some(0x5000), 1));
        // A system call: the return address comes from the exit path.
        let mut s = at(0x3000);
        s.leave(Entry::SystemCall(0x3000), &mut |_| {});
        assert_eq!(s.pending(), None);
        s.resume_at(0x3002);
        assert_eq!(s.pending(), Some(0x3002));
    }

    #[test]
    fn a_system_call_first_after_a_return_ran_there() {
        // The kernel restarts the system call at 0x3000: back there, it
        // runs again before any single-step trap.
        let mut s = at(0x3000);
        let mut ev = Vec::new();
        s.leave(Entry::SystemCall(0x3000), &mut |e| ev.push(e));
        s.resume_at(0x3000);
        s.leave(Entry::SystemCall(0x3000), &mut |e| ev.push(e));
        assert_eq!(
            ev,
            [
                TraceEvent::Disable(None),
                TraceEvent::Enable(0x3000),
                TraceEvent::Disable(None)
            ]
        );
        assert_eq!((s.pending(), s.retired()), (None, 2));
        // First seen inside a system call (resume guessed after it):
        // nothing until its exit says where it returns.
        let mut s = Stepper::new();
        s.resume_at(0x5002);
        s.leave(Entry::SystemCall(0x5000), &mut |e| ev.push(e));
        assert_eq!((ev.len(), s.retired(), s.pending()), (3, 0, None));
        s.resume_at(0x4000);
        assert_eq!(s.pending(), Some(0x4000));
    }

    #[test]
    fn stop_leaves_and_goes_idle() {
        let mut s = at(0x3000);
        let mut ev = Vec::new();
        s.stop(0x3000, &mut |e| ev.push(e));
        assert_eq!(
            ev,
            [TraceEvent::Async {
                from: 0x3000,
                to: None
            }]
        );
        assert!(!s.following());
        // Idle: nothing more is written.
        s.leave(Entry::SystemCall(0x3000), &mut |e| ev.push(e));
        assert_eq!(ev.len(), 1);
    }

    #[test]
    fn an_unreported_redirection_is_an_async_exit_and_a_re_enable() {
        // A NOP that "went" to 0x9000: exit at 0x1001, enable at 0x9000.
        let mut s = at(0x1000);
        let (ev, r) = run(&mut s, &[0x90], 0x9000);
        assert_eq!(r, Ok(()));
        assert_eq!(
            ev,
            [
                TraceEvent::Async {
                    from: 0x1001,
                    to: None
                },
                TraceEvent::Time(100),
                TraceEvent::Enable(0x9000)
            ]
        );
        // A Jcc that went neither way: its not-taken bit first.
        let mut s = at(0x1000);
        let (ev, _) = run(&mut s, &[0x74, 0x10], 0x9000);
        assert_eq!(
            ev[0],
            TraceEvent::Conditional {
                taken: false,
                next: 0x1002
            }
        );
        assert_eq!(
            ev[1],
            TraceEvent::Async {
                from: 0x1002,
                to: None
            }
        );
    }

    #[test]
    fn unreported_kernel_entries_and_bad_code_resynchronize() {
        let mut s = at(0x1000);
        let (ev, r) = run(&mut s, &[0x0f, 0x05], 0x1010);
        assert_eq!(r, Err(StepError::UnreportedKernelEntry));
        assert_eq!(
            ev,
            [
                TraceEvent::Disable(None),
                TraceEvent::Time(100),
                TraceEvent::Enable(0x1010)
            ]
        );
        assert_eq!((s.pending(), s.retired()), (Some(0x1010), 1));

        let mut s = at(0x1000);
        let (ev, r) = run(&mut s, &[0x06], 0x1001);
        assert_eq!(r, Err(StepError::Code(InsnError::Invalid)));
        assert_eq!(ev, [TraceEvent::Overflow, TraceEvent::Enable(0x1001)]);
        assert_eq!(s.retired(), 0);

        let mut s = at(0x1000);
        s.leave(Entry::SystemCall(0x1000), &mut |_| {});
        let (ev, r) = run(&mut s, &[0x90], 0x2000);
        assert_eq!(r, Err(StepError::UnreportedKernelEntry));
        assert_eq!(ev, [TraceEvent::Time(100), TraceEvent::Enable(0x2000)]);
    }

    /// [`MAX_EVENTS_PER_CALL`] holds for any mix of calls on any code and
    /// destinations (a pseudo-random walk over branch kinds, bad code,
    /// kernel entries of both kinds, resumes and stops), and `retired`
    /// only grows by at most one per call.
    #[test]
    fn no_call_writes_more_than_max_events() {
        const CODES: &[&[u8]] = &[
            &[0x74, 0x10],
            &[0xe2, 0xfe],
            &[0xeb, 0x00],
            &[0xe8, 0x10, 0, 0, 0],
            &[0xff, 0xd0],
            &[0xc3],
            &[0xff, 0xe0],
            &[0x0f, 0x05],
            &[0xf3, 0xa4],
            &[0x48, 0x89, 0xc3],
            &[0xcc],
            &[0x0f, 0x0b],
            &[0x0f],
            &[],
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut s = Stepper::new();
        let mut most = 0;
        // Miri runs a shorter walk (it still reaches the bound).
        let calls = if cfg!(miri) { 5_000 } else { 200_000 };
        for _ in 0..calls {
            let mut n = 0;
            let before = s.retired();
            let ip = s.pending().unwrap_or(0x1000);
            let target = match rand() % 4 {
                0 => ip,
                1 => ip + 2,
                2 => ip + 0x12,
                _ => rand() % 0x10_0000,
            };
            let out = &mut |_: TraceEvent| n += 1;
            match rand() % 8 {
                0 => s.resume_at(target),
                1 => s.leave(
                    Entry::SystemCall(if rand() % 2 == 0 { ip } else { target }),
                    out,
                ),
                2 => s.leave(
                    Entry::Interrupted(if rand() % 2 == 0 { ip } else { target }),
                    out,
                ),
                3 if rand() % 16 == 0 => s.stop(target, out),
                _ => {
                    let code = CODES[(rand() % CODES.len() as u64) as usize];
                    let _ = s.step(code, target, rand(), out);
                }
            }
            assert!(n <= MAX_EVENTS_PER_CALL, "{n} events in one call");
            assert!(s.retired() - before <= 1);
            most = most.max(n);
        }
        assert_eq!(
            most, MAX_EVENTS_PER_CALL,
            "the bound is reached, so it is tight"
        );
    }
}
