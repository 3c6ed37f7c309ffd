// SPDX-License-Identifier: MIT OR Apache-2.0
//! Interruption points of the write path, for deterministic nesting tests.
//!
//! A [`Ring`](super::Ring) is generic over a [`NestHook`]; the default,
//! [`NoHook`], compiles to nothing. A test hook is called at every point
//! where a task-level writer can be interrupted by an IRQ or NMI writer on
//! the same CPU, and may run a complete nested write right there. That turns
//! "an NMI arrives between these two instructions" into a repeatable test.

use super::Ring;

/// Where the write path can be interrupted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Point {
    /// `begin`: after `nest` was raised, before the reservation loop.
    BeginNested,
    /// `begin`: after `data_tail` was loaded.
    BeginTailLoaded,
    /// `begin`: after `head` was loaded, before the compare-and-swap.
    BeginHeadLoaded,
    /// `begin`: after the compare-and-swap reserved the space.
    BeginReserved,
    /// `begin`: after the `PERF_RECORD_LOST` was written.
    BeginLostWritten,
    /// `copy`/`skip`: before each piece that fits in the current chunk.
    CopyPiece,
    /// `end`: after `head` was loaded for publishing.
    EndHeadLoaded,
    /// `end`: after `data_head` was stored, before `nest` drops to 0.
    EndPublished,
    /// `end`: after `nest` dropped to 0, before the missed-update re-check
    /// (the window of Linux commit 1b038c6e05ff).
    EndNestDropped,
    /// `end`: an inner writer after lowering `nest` (it never publishes).
    EndInner,
}

/// Deliberate bugs a test hook can switch on, to show that the nesting
/// harness catches them. [`NoHook`] switches none on.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// The correct code.
    None,
    /// `end` does not re-check `head` after dropping `nest` (missed updates).
    NoRecheck,
    /// `end` drops `nest` before storing `data_head`, as Linux did before
    /// commit 1b038c6e05ff (`data_head` can go backwards).
    NestDropBeforePublish,
}

/// Called at every [`Point`] of a ring's write path.
pub trait NestHook: Sized {
    /// A deliberate bug to run with (tests of the harness only).
    #[doc(hidden)]
    const MUTATION: Mutation = Mutation::None;

    /// The writer on `ring` reached `point`; a nested write may run now.
    fn at(&self, ring: &Ring<'_, Self>, point: Point);
}

/// The hook of production rings: does nothing, costs nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHook;

impl NestHook for NoHook {
    #[inline(always)]
    fn at(&self, _ring: &Ring<'_, Self>, _point: Point) {}
}
