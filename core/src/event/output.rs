// SPDX-License-Identifier: MIT OR Apache-2.0
//! Where an event's records go: its own buffer, its parent's (an inherited
//! child), or another event's (`perf_event_set_output`); and the PMU's side
//! of an AUX area (`setup_aux`, `free_aux`).

use core::ptr;

use super::{Buffer, Event};
use crate::attr::EventClock;
use crate::caps::PmuCaps;
use crate::error::{Error, Result};
use crate::sync::Ordering;

impl<'g> Event<'g> {
    /// Gives the event its own buffer (the mmap of its fd).
    pub fn set_buffer(&self, buffer: &'g Buffer<'g>) {
        // Release: the buffer's set-up before the pointer (pairs with the
        // Acquire load in `buffer()`).
        self.buffer
            .store(ptr::from_ref(buffer).cast_mut(), Ordering::Release);
    }

    /// The buffer this event's records go to: its own, or its parent's for
    /// an inherited child (Linux `ring_buffer_get` follows `event->parent`).
    pub fn buffer(&self) -> Option<&'g Buffer<'g>> {
        let owner = self.parent.unwrap_or(self);
        // Acquire pairs with the Release store in `set_buffer`/`set_output`.
        let p = owner.buffer.load(Ordering::Acquire);
        // SAFETY: the pointer is null or a `&'g Buffer` stored by
        // `set_buffer`/`set_output`, valid for 'g.
        unsafe { p.as_ref() }
    }

    /// Prepares the PMU for an AUX area over `pages` (`rb_alloc_aux` →
    /// `pmu->setup_aux`, `rb_alloc_aux`): `EOPNOTSUPP` if the PMU has no AUX area;
    /// for a PMU that needs one contiguous block (`AUX_NO_SG`) in overwrite
    /// mode, `ENOMEM` unless the pages are one block (`rb_alloc_aux` for
    /// `PERF_PMU_CAP_AUX_NO_SG`); then
    /// whatever the PMU's `setup_aux` says. Build the [`AuxArea`](crate::aux::AuxArea) over the
    /// same pages afterwards, and call [`free_aux`](Self::free_aux) when it
    /// is released.
    pub fn setup_aux(&self, pages: &[*mut u8], overwrite: bool) -> Result<()> {
        let caps = self.pmu.caps();
        if !caps.contains(PmuCaps::AUX) {
            return Err(Error::NotSupported);
        }
        if caps.contains(PmuCaps::AUX_NO_SG) && overwrite {
            let contiguous = pages
                .windows(2)
                .all(|w| w[1] as usize == (w[0] as usize).wrapping_add(crate::abi::PAGE_SIZE));
            if !contiguous {
                return Err(Error::NoMemory);
            }
        }
        self.pmu.setup_aux(&self.info(), pages, overwrite)
    }

    /// Tells the PMU the AUX area is gone (`pmu->free_aux`).
    pub fn free_aux(&self) {
        self.pmu.free_aux(&self.info());
    }

    /// Redirects this event's output into `target`'s buffer
    /// (`PERF_EVENT_IOC_SET_OUTPUT`, `perf_event_set_output`): `EINVAL` for itself, another
    /// CPU, another clock, mixed `write_backward`, two AUX events of
    /// different PMUs (`perf_event_set_output`'s `pmu != pmu` check), a target without a
    /// buffer, or an event
    /// that has a buffer of its own already.
    pub fn set_output(&self, target: &'g Event<'g>) -> Result<()> {
        if ptr::eq(self, target) || self.cpu != target.cpu {
            return Err(Error::Invalid);
        }
        if EventClock::of(&self.attr).ok() != EventClock::of(&target.attr).ok()
            || self.attr.write_backward() != target.attr.write_backward()
        {
            return Err(Error::Invalid);
        }
        let has_aux = |e: &Event<'g>| e.pmu.caps().contains(PmuCaps::AUX);
        if has_aux(self) && has_aux(target) && !ptr::addr_eq(self.pmu, target.pmu) {
            return Err(Error::Invalid);
        }
        // Relaxed: set-up path; the caller serializes set-up of one event.
        if !self.buffer.load(Ordering::Relaxed).is_null() {
            return Err(Error::Invalid);
        }
        let buffer = target.buffer().ok_or(Error::Invalid)?;
        self.set_buffer(buffer);
        Ok(())
    }
}
