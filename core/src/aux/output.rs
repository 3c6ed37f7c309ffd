// SPDX-License-Identifier: MIT OR Apache-2.0
//! The AUX output as a PMU driver sees it: Linux's `perf_aux_output_begin`,
//! `_flag` and `_end` on the driver's per-CPU handle, each transaction
//! handing out the driver's state of the buffer (`rb->aux_priv`, what its
//! `setup_aux` made). [`AreaOutput`] implements it over perfaux's own
//! [`AuxArea`] and data ring; a kernel module implements it over the
//! kernel's functions, so the same driver code runs in both worlds.

use core::cell::UnsafeCell;
use core::ptr::NonNull;

use super::{AuxArea, AuxHandle};
use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::ring::{FixedEvent, Ring};

/// The numbers of an open AUX transaction (`struct perf_output_handle`'s
/// `head`, `size` and `wakeup`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuxTransaction {
    /// Where the transaction starts writing (a free-running position).
    pub head: u64,
    /// Bytes it may write before reaching the consumer's data (writable
    /// mode); the whole buffer in overwrite mode.
    pub space: u64,
    /// The position at which the consumer wants a wakeup.
    pub wakeup: u64,
}

/// The AUX output of one CPU's driver: the transactions on the AUX buffer
/// of the event running there (Linux's `perf_aux_output_begin`, `_flag`
/// and `_end` on the driver's per-CPU handle). Calls come from that CPU
/// only, with interrupts masked or from its PMI, never nested within each
/// other.
///
/// # Safety
/// Implementors guarantee that the buffer [`begin`](Self::begin) returns
/// (what the PMU's `setup_aux` made for it: `rb->aux_priv`) is valid for
/// shared references from that `begin` until the matching
/// [`end`](Self::end) returns, as the kernel's transaction holds
/// `aux_refcount`; and that while it is open no other transaction on that
/// buffer is open anywhere (Linux's `rb->aux_nest`).
pub unsafe trait AuxOutput {
    /// The driver's state of one buffer.
    type Buffer;

    /// Opens a transaction (`perf_aux_output_begin`) and returns it with the
    /// buffer's driver state. `ENOSPC` when there is no room, no buffer, or
    /// the buffer is going away; `EBUSY` if one is open.
    fn begin(&self) -> Result<(AuxTransaction, NonNull<Self::Buffer>)>;

    /// Flags the open transaction (`perf_aux_output_flag`).
    fn flag(&self, flags: u64);

    /// Ends the open transaction (`perf_aux_output_end`) with `size` new
    /// bytes; in overwrite mode `head` first moves to `snapshot_head`
    /// (the driver's write position). A `PERF_RECORD_AUX` says so. The
    /// buffer `begin` returned may be gone once this returns.
    fn end(&self, size: u64, snapshot_head: Option<u64>);
}

// SAFETY: the referent upholds the contract; a reference forwards to it.
unsafe impl<T: AuxOutput + ?Sized> AuxOutput for &T {
    type Buffer = T::Buffer;

    fn begin(&self) -> Result<(AuxTransaction, NonNull<T::Buffer>)> {
        (**self).begin()
    }

    fn flag(&self, flags: u64) {
        (**self).flag(flags);
    }

    fn end(&self, size: u64, snapshot_head: Option<u64>) {
        (**self).end(size, snapshot_head);
    }
}

/// [`AuxOutput`] over perfaux's own AUX area, writing `PERF_RECORD_AUX`
/// into `ring` for `event`, its trailer stamped from `platform` if given;
/// its transactions hand out `buffer`, the driver's state of the area.
///
/// # Invariants
/// `handle` is touched only by `begin`, `flag` and `end`, which the
/// [`AuxOutput`] contract says never nest: no two references to it exist.
pub struct AreaOutput<'x, 'a, B> {
    area: &'x AuxArea<'a>,
    ring: &'x Ring<'a>,
    event: FixedEvent,
    platform: Option<&'x dyn Platform>,
    buffer: &'x B,
    /// The open transaction.
    handle: UnsafeCell<Option<AuxHandle<'x, 'a>>>,
}

impl<'x, 'a, B> AreaOutput<'x, 'a, B> {
    /// The output of `area`, recording into `ring` for `event`, its
    /// transactions holding `buffer` (the driver's state over the area's
    /// pages, what `setup_aux` made).
    pub fn new(
        area: &'x AuxArea<'a>,
        ring: &'x Ring<'a>,
        event: FixedEvent,
        buffer: &'x B,
    ) -> Self {
        // INVARIANT: no transaction is open yet.
        AreaOutput {
            area,
            ring,
            event,
            platform: None,
            buffer,
            handle: UnsafeCell::new(None),
        }
    }

    /// The same output, stamping the `sample_id` trailer of its
    /// `PERF_RECORD_AUX` records with `platform`'s current task, clock and
    /// CPU when each is written (as Linux's `perf_event_header__init_id`).
    pub fn with_platform(mut self, platform: &'x dyn Platform) -> Self {
        self.platform = Some(platform);
        self
    }

    /// The area.
    pub fn area(&self) -> &'x AuxArea<'a> {
        self.area
    }

    fn record_event(&self) -> FixedEvent {
        let mut event = self.event;
        if let (Some(p), Some(id)) = (self.platform, event.sample_id.as_mut()) {
            (id.pid, id.tid) = p.current();
            id.time = p.clock();
            id.cpu = p.cpu();
        }
        event
    }
}

// SAFETY: `buffer` is borrowed for `'x`, longer than any transaction; the
// area's own `begin` refuses a second open transaction (its `nest`).
unsafe impl<B> AuxOutput for AreaOutput<'_, '_, B> {
    type Buffer = B;

    fn begin(&self) -> Result<(AuxTransaction, NonNull<B>)> {
        // SAFETY: begin/flag/end never nest (the invariant): this is the
        // only reference to the slot.
        let slot = unsafe { &mut *self.handle.get() };
        if slot.is_some() {
            return Err(Error::Busy);
        }
        let h = self.area.begin()?;
        let t = AuxTransaction {
            head: h.head(),
            space: h.space(),
            wakeup: h.wakeup_position(),
        };
        *slot = Some(h);
        Ok((t, NonNull::from(self.buffer)))
    }

    fn flag(&self, flags: u64) {
        // SAFETY: as in `begin`.
        if let Some(h) = unsafe { &mut *self.handle.get() }.as_mut() {
            h.flag(flags);
        }
    }

    fn end(&self, size: u64, snapshot_head: Option<u64>) {
        // SAFETY: as in `begin`.
        let Some(mut h) = unsafe { &mut *self.handle.get() }.take() else {
            return;
        };
        if let Some(head) = snapshot_head {
            h.set_head(head);
        }
        let mut event = self.record_event();
        h.end(size, self.ring, &mut event);
    }
}
