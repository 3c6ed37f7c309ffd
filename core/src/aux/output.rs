// SPDX-License-Identifier: MIT OR Apache-2.0
//! The AUX output as a PMU driver sees it: Linux's `perf_aux_output_begin`,
//! `_flag` and `_end` on the driver's per-CPU handle, and the pages of the
//! buffer (`setup_aux`'s). [`AreaOutput`] implements it over perfaux's own
//! [`AuxArea`] and data ring; a kernel module implements it over the
//! kernel's functions, so the same driver code runs in both worlds.

use core::cell::{Cell, RefCell};

use super::{AuxArea, AuxHandle};
use crate::abi::PAGE_SIZE;
use crate::error::{Error, Result};
use crate::pmu::Platform;
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

/// The AUX output of one CPU's driver. Calls come from that CPU only, with
/// interrupts masked or from its PMI, never nested within each other.
///
/// # Safety
/// Implementors guarantee that [`pages`](Self::pages) are valid for reads
/// and writes of 4096 bytes each (a power of two of them, in buffer order)
/// from [`begin`](Self::begin) until the matching [`end`](Self::end), and
/// that nothing but the driver's tracer writes them meanwhile.
pub unsafe trait AuxOutput {
    /// The buffer's pages, one pointer per 4 KiB page.
    fn pages(&self) -> &[*mut u8];

    /// The buffer's size in bytes.
    fn size(&self) -> u64 {
        (self.pages().len() * PAGE_SIZE) as u64
    }

    /// Whether the buffer is in overwrite (snapshot) mode.
    fn is_overwrite(&self) -> bool;

    /// Opens a transaction (`perf_aux_output_begin`). `ENOSPC` when there
    /// is no room or the buffer is going away; `EBUSY` if one is open.
    fn begin(&self) -> Result<AuxTransaction>;

    /// Flags the open transaction (`perf_aux_output_flag`).
    fn flag(&self, flags: u64);

    /// Ends the open transaction (`perf_aux_output_end`) with `size` new
    /// bytes; in overwrite mode `head` first moves to `snapshot_head`
    /// (the driver's write position). A `PERF_RECORD_AUX` says so.
    fn end(&self, size: u64, snapshot_head: Option<u64>);
}

/// [`AuxOutput`] over perfaux's own AUX area, writing `PERF_RECORD_AUX`
/// into `ring` for `event`, its trailer stamped from `platform` if given.
pub struct AreaOutput<'x, 'a> {
    area: &'x AuxArea<'a, ()>,
    ring: &'x Ring<'a>,
    event: Cell<FixedEvent>,
    platform: Option<&'x dyn Platform>,
    /// The open transaction. Only the driver's begin/flag/end borrow it,
    /// never nested (the trait's contract); a failed borrow is a no-op.
    handle: RefCell<Option<AuxHandle<'x, 'a, ()>>>,
}

impl<'x, 'a> AreaOutput<'x, 'a> {
    /// The output of `area`, recording into `ring` for `event`.
    pub fn new(area: &'x AuxArea<'a, ()>, ring: &'x Ring<'a>, event: FixedEvent) -> Self {
        AreaOutput {
            area,
            ring,
            event: Cell::new(event),
            platform: None,
            handle: RefCell::new(None),
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
    pub fn area(&self) -> &'x AuxArea<'a, ()> {
        self.area
    }

    fn record_event(&self) -> FixedEvent {
        let mut event = self.event.get();
        if let (Some(p), Some(id)) = (self.platform, event.sample_id.as_mut()) {
            (id.pid, id.tid) = p.current();
            id.time = p.clock();
            id.cpu = p.cpu();
        }
        event
    }
}

// SAFETY: an AuxArea's pages are valid for its life and written only by
// the tracer of the transaction (the area's own invariants).
unsafe impl AuxOutput for AreaOutput<'_, '_> {
    fn pages(&self) -> &[*mut u8] {
        self.area.pages()
    }

    fn size(&self) -> u64 {
        self.area.size()
    }

    fn is_overwrite(&self) -> bool {
        self.area.is_overwrite()
    }

    fn begin(&self) -> Result<AuxTransaction> {
        let Ok(mut slot) = self.handle.try_borrow_mut() else {
            return Err(Error::Busy);
        };
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
        Ok(t)
    }

    fn flag(&self, flags: u64) {
        if let Ok(mut slot) = self.handle.try_borrow_mut() {
            if let Some(h) = slot.as_mut() {
                h.flag(flags);
            }
        }
    }

    fn end(&self, size: u64, snapshot_head: Option<u64>) {
        let Some(mut h) = self.handle.try_borrow_mut().ok().and_then(|mut s| s.take()) else {
            return;
        };
        if let Some(head) = snapshot_head {
            h.set_head(head);
        }
        let mut event = self.record_event();
        h.end(size, self.ring, &mut event);
    }
}
