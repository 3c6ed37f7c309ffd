// SPDX-License-Identifier: MIT OR Apache-2.0
//! A timer's view of a CPU: at each tick (a periodic interrupt), where the
//! traced context was interrupted, turned into the [`TraceEvent`]s Intel PT
//! hardware would report for the interrupt. A third flow source for the
//! tracer, beside [`step`](super::step) and [`blocks`](super::blocks): it
//! sees no control flow between ticks, only that the CPU was somewhere, so
//! a decoder walks from one interrupted IP to the next (both kernel
//! modules' ticker, where no single-step tracer runs).
//!
//! At a tick in a context the event traces ([`Tick::traced`]): TSC (first,
//! so that a first PSB+ carries it), TIP.PGE at the interrupted IP if
//! tracing was off, then the interrupt: FUP at the IP and TIP into the
//! handler and back when the kernel is traced, else FUP + TIP.PGD into the
//! untraced kernel and TIP.PGE back. At a tick in an excluded context,
//! tracing went off on the way there, at an IP the ticker never saw: a
//! TIP.PGD without one, once.
//!
//! ```
//! use perfaux::soft_pt::stream::TraceEvent;
//! use perfaux::soft_pt::tick::{Tick, TickFlow};
//! // `intel_pt//u`: user space only.
//! let flow = TickFlow::new();
//! let at = |ip, user| Tick { ip, user, tsc: 100, handler: 0xffff_8000, exclude_user: false, exclude_kernel: true };
//! let mut events = Vec::new();
//! flow.tick(&at(0x40_1000, true), |e| events.push(e));
//! assert_eq!(events, [
//!     TraceEvent::Time(100),
//!     TraceEvent::Enable(0x40_1000),
//!     TraceEvent::Async { from: 0x40_1000, to: None },
//!     TraceEvent::Enable(0x40_1000),
//! ]);
//! events.clear();
//! flow.tick(&at(0xffff_1234, false), |e| events.push(e)); // in the kernel
//! assert_eq!(events, [TraceEvent::Disable(None)]);
//! ```

use crate::sync::LocalBool;

use super::stream::TraceEvent;

/// What one tick found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tick {
    /// The interrupted instruction pointer.
    pub ip: u64,
    /// The interrupted context ran in user mode (`user_mode(regs)`).
    pub user: bool,
    /// The timestamp counter at the tick.
    pub tsc: u64,
    /// Where the interrupt went: the TIP target of a traced kernel.
    pub handler: u64,
    /// The event's `attr.exclude_user`.
    pub exclude_user: bool,
    /// The event's `attr.exclude_kernel`.
    pub exclude_kernel: bool,
}

impl Tick {
    /// Whether the event traces the interrupted context.
    pub const fn traced(&self) -> bool {
        if self.user {
            !self.exclude_user
        } else {
            !self.exclude_kernel
        }
    }
}

/// The ticker of one CPU: whether the tracer saw the traced context at the
/// last tick (so it sent a TIP.PGE and owes a TIP.PGD when the context goes).
///
/// Same-CPU state: the ticker (a hard interrupt) and the PMU's `add`/`del`
/// (interrupts off) on that CPU touch it.
#[derive(Debug)]
pub struct TickFlow {
    traced: LocalBool,
}

impl Default for TickFlow {
    fn default() -> Self {
        TickFlow::new()
    }
}

impl TickFlow {
    /// A ticker that has seen nothing.
    pub fn new() -> Self {
        TickFlow {
            traced: LocalBool::new(false),
        }
    }

    /// An event came or went (`add`, `del`): the next traced tick starts
    /// with TIP.PGE.
    pub fn reset(&self) {
        self.traced.store(false);
    }

    /// The trace events of one tick, in order, into `out` (at most four).
    pub fn tick(&self, tick: &Tick, mut out: impl FnMut(TraceEvent)) {
        if !tick.traced() {
            if self.traced.swap(false) {
                out(TraceEvent::Disable(None));
            }
            return;
        }
        out(TraceEvent::Time(tick.tsc));
        if !self.traced.swap(true) {
            out(TraceEvent::Enable(tick.ip));
        }
        if tick.exclude_kernel {
            // Into the untraced kernel (FUP, TIP.PGD) and back (TIP.PGE).
            out(TraceEvent::Async {
                from: tick.ip,
                to: None,
            });
            out(TraceEvent::Enable(tick.ip));
        } else {
            // The interrupt: FUP at the interrupted IP, TIP into the
            // handler, and TIP back on the return.
            out(TraceEvent::Async {
                from: tick.ip,
                to: Some(tick.handler),
            });
            out(TraceEvent::Indirect { target: tick.ip });
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn events(flow: &TickFlow, tick: Tick) -> Vec<TraceEvent> {
        let mut v = Vec::new();
        flow.tick(&tick, |e| v.push(e));
        v
    }

    const KERNEL: Tick = Tick {
        ip: 0xffff_ffff_8100_0000,
        user: false,
        tsc: 7,
        handler: 0xffff_ffff_8200_0000,
        exclude_user: false,
        exclude_kernel: false,
    };

    #[test]
    fn a_traced_kernel_sees_the_interrupt_go_in_and_come_back() {
        let flow = TickFlow::new();
        assert_eq!(
            events(&flow, KERNEL),
            [
                TraceEvent::Time(7),
                TraceEvent::Enable(KERNEL.ip),
                TraceEvent::Async {
                    from: KERNEL.ip,
                    to: Some(KERNEL.handler)
                },
                TraceEvent::Indirect { target: KERNEL.ip },
            ]
        );
        // Tracing stays on: no second TIP.PGE.
        assert_eq!(events(&flow, KERNEL).len(), 3);
        // A reset (a new event) starts over.
        flow.reset();
        assert_eq!(events(&flow, KERNEL).len(), 4);
    }

    #[test]
    fn an_excluded_context_ends_tracing_once() {
        let flow = TickFlow::new();
        let user_only = Tick {
            exclude_kernel: true,
            ..KERNEL
        };
        assert!(events(&flow, user_only).is_empty(), "nothing was traced");
        let user = Tick {
            user: true,
            ip: 0x40_0000,
            ..user_only
        };
        assert_eq!(events(&flow, user).len(), 4);
        assert_eq!(events(&flow, user_only), [TraceEvent::Disable(None)]);
        assert!(events(&flow, user_only).is_empty());
        assert_eq!(events(&flow, user)[1], TraceEvent::Enable(0x40_0000));
    }
}
