// SPDX-License-Identifier: MIT OR Apache-2.0
//! What tests and tools see of a tracer's writes, as a type parameter of
//! [`SoftTracer`](super::SoftTracer) (as [`NestHook`](crate::ring::NestHook)
//! is of a ring): [`NoHooks`], every tracer's outside tests and tools,
//! compiles every call to them out; [`Taps`] shows every byte written to a
//! model and runs a PMI wherever a write can be interrupted.

use core::cell::{Cell, RefCell};

use crate::soft_pt::stream::PacketSink;

/// Called by a tracer as it writes.
pub trait Hooks {
    /// Whether the hooks can see anything at all: `false` leaves no trace
    /// of them in the tracer's code, and lets a direct run count its bytes
    /// once, at its end.
    const ANY: bool;

    /// `bytes` were just written to the output, in order.
    fn written(&self, bytes: &[u8]);

    /// Whether [`interrupt`](Self::interrupt) does something: a write
    /// through the tables then makes its position visible before each call.
    fn interrupts(&self) -> bool;

    /// A piece was written: a PMI may arrive here, in the middle of a write
    /// (the hardware's writes are never interrupted; perfaux's can be).
    fn interrupt(&self);
}

/// The hooks of every tracer outside tests and tools: none.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHooks;

impl Hooks for NoHooks {
    const ANY: bool = false;

    #[inline(always)]
    fn written(&self, _bytes: &[u8]) {}

    #[inline(always)]
    fn interrupts(&self) -> bool {
        false
    }

    #[inline(always)]
    fn interrupt(&self) {}
}

/// A tap that sees every byte a tracer writes, and an interrupt that runs
/// after every piece, each set (or cleared) while nothing traces.
#[derive(Default)]
pub struct Taps<'p> {
    tap: Cell<Option<&'p RefCell<dyn PacketSink + 'p>>>,
    interrupt: Cell<Option<&'p dyn Fn()>>,
}

impl<'p> Taps<'p> {
    /// Neither a tap nor an interrupt.
    pub const fn new() -> Self {
        Taps {
            tap: Cell::new(None),
            interrupt: Cell::new(None),
        }
    }

    /// Shows every byte the tracer writes to its output to `tap` as well.
    /// Set-up only: call it while no trace event or PMI is running on the
    /// tracer.
    pub fn set_tap(&self, tap: Option<&'p RefCell<dyn PacketSink + 'p>>) {
        self.tap.set(tap);
    }

    /// Runs `f` after every piece the tracer writes into a region, as a
    /// PMI arriving in the middle of a write would. Set-up only, as
    /// [`set_tap`](Self::set_tap).
    pub fn set_interrupt(&self, f: Option<&'p dyn Fn()>) {
        self.interrupt.set(f);
    }
}

impl Hooks for Taps<'_> {
    const ANY: bool = true;

    fn written(&self, bytes: &[u8]) {
        if let Some(tap) = self.tap.get() {
            // A tap that is busy (its owner reads it inside a PMI) misses
            // nothing it could have taken: it is the owner's borrow.
            if let Ok(mut t) = tap.try_borrow_mut() {
                t.write(bytes);
            }
        }
    }

    fn interrupts(&self) -> bool {
        self.interrupt.get().is_some()
    }

    fn interrupt(&self) {
        if let Some(f) = self.interrupt.get() {
            f();
        }
    }
}
