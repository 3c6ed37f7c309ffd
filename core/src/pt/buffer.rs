// SPDX-License-Identifier: MIT OR Apache-2.0
//! One AUX buffer as the PT driver keeps it (Linux's `struct pt_buffer`):
//! the ToPA tables over its pages, whether it is a snapshot buffer and
//! whether it uses single-range output, and the driver's accounting of the
//! open transaction (`head`, `data_size`, `wrapped`). `setup_aux` makes one
//! over the pages it is given ([`PtBuffer::new`]); `free_aux` ends it.
//!
//! The per-CPU driver ([`PtPmu`](super::pmu::PtPmu)) reaches a buffer only
//! through the AUX transaction it holds (the analogue of
//! `perf_get_aux(&pt->handle)`), and a transaction keeps the buffer alive
//! (`aux_refcount`), so no path can use a buffer after `free_aux`.

use core::cell::UnsafeCell;

use super::topa::{PhysMap, Topa, TopaTable};
use crate::abi::PAGE_SIZE;
use crate::error::{Error, Result};
use crate::sync::{AtomicBool, LocalBool, LocalU64, Ordering};

/// The PT driver's state of one AUX buffer.
///
/// # Invariants
/// - `pages` are valid for reads and writes of 4096 bytes each for `'b`, a
///   power of two of them, and nothing but a tracer programmed with this
///   buffer's tables writes them (the contract of [`PtBuffer::new`]).
/// - `topa` describes exactly `pages` (`Topa::build` over them).
/// - Only the holder of the open AUX transaction on this buffer touches
///   `topa`, `head`, `data_size` and `wrapped`, on its CPU, and at most
///   one transaction on a buffer is open at a time (the
///   [`AuxOutput`](crate::aux::AuxOutput) contract, Linux's `rb->aux_nest`);
///   the holder takes `&mut` to `topa` only inside its busy section, which
///   its PMI entries never enter.
pub struct PtBuffer<'b> {
    topa: UnsafeCell<Topa<'b>>,
    pages: &'b [*mut u8],
    /// Overwrite (snapshot) mode: `buf->snapshot`.
    overwrite: bool,
    /// Single-range output (a 1-page snapshot buffer, as Linux since
    /// ce0d998be927) instead of ToPA.
    single: bool,
    /// `buf->head`: the position at the last update (writable mode).
    pub(super) head: LocalU64,
    /// `buf->data_size`: bytes written since the transaction began.
    pub(super) data_size: LocalU64,
    /// `buf->wrapped`: the software advanced past the last region.
    pub(super) wrapped: LocalBool,
    /// A transaction holds the buffer: set by the holder right after its
    /// `begin`, cleared right before its `end`. Read by [`PtBuffer::is_held`]
    /// from `free_aux`, on any CPU; Relaxed: the kernel orders the end of
    /// the last transaction before `free_aux` by the `aux_refcount` drop.
    held: AtomicBool,
}

impl<'b> PtBuffer<'b> {
    /// The buffer over `pages` (one pointer per 4 KiB page, a power of two
    /// of them, in buffer order) in overwrite (snapshot) mode if
    /// `overwrite`, its ToPA tables built into `tables` (one table holds
    /// 506 regions; `ENOMEM` if they are too few), as `pt_buffer_setup_aux`
    /// builds them. `EINVAL` for an empty or not power-of-two page count, a
    /// null page, or one the tables cannot address.
    ///
    /// # Safety
    /// Every page must be valid for reads and writes of 4096 bytes for
    /// `'b`, and nothing but a tracer programmed with this buffer's tables
    /// (by [`PtPmu`](super::pmu::PtPmu)) may write them while it lives.
    pub unsafe fn new(
        tables: &'b mut [TopaTable],
        pages: &'b [*mut u8],
        overwrite: bool,
        phys: &dyn PhysMap,
    ) -> Result<Self> {
        if !pages.len().is_power_of_two() {
            return Err(Error::Invalid);
        }
        let topa = Topa::build(tables, pages, phys)?;
        // INVARIANT: `topa` was built over `pages`; the caller vouches for
        // the pages; no transaction holds a new buffer.
        Ok(PtBuffer {
            topa: UnsafeCell::new(topa),
            pages,
            overwrite,
            single: overwrite && pages.len() == 1,
            head: LocalU64::new(0),
            data_size: LocalU64::new(0),
            wrapped: LocalBool::new(false),
            held: AtomicBool::new(false),
        })
    }

    /// The buffer's pages.
    pub fn pages(&self) -> &'b [*mut u8] {
        self.pages
    }

    /// The buffer's size in bytes.
    pub fn size(&self) -> u64 {
        (self.pages.len() * PAGE_SIZE) as u64
    }

    /// The size less one: a power of two of pages (the invariants), so an
    /// offset into the buffer is a position `& mask`, no division on the
    /// PMI path.
    pub fn mask(&self) -> u64 {
        self.size().wrapping_sub(1)
    }

    /// Whether the buffer is in overwrite (snapshot) mode.
    pub fn is_overwrite(&self) -> bool {
        self.overwrite
    }

    /// Whether the tracer writes it as one range (a 1-page snapshot buffer).
    pub fn is_single_range(&self) -> bool {
        self.single
    }

    /// Whether an AUX transaction holds the buffer: `free_aux` must not
    /// end it then (the kernel never calls it so; a driver that did would
    /// free memory the tracer writes).
    pub fn is_held(&self) -> bool {
        // Relaxed: see the field.
        self.held.load(Ordering::Relaxed)
    }

    /// Marks the buffer held by the transaction just opened; `false` if it
    /// was held already (two open transactions: a broken `AuxOutput`).
    pub(super) fn hold(&self) -> bool {
        // Relaxed: see the field.
        !self.held.swap(true, Ordering::Relaxed)
    }

    /// Marks the buffer free, right before its transaction ends.
    pub(super) fn release(&self) {
        // Relaxed: see the field.
        self.held.store(false, Ordering::Relaxed);
    }

    /// The ToPA tables.
    ///
    /// # Safety
    /// The caller holds the open transaction on this buffer, on its CPU,
    /// outside its busy section's `topa_mut` borrow (the invariants).
    pub(super) unsafe fn topa(&self) -> &Topa<'b> {
        // SAFETY: the caller is the only user (the holder), and holds no
        // `&mut` from `topa_mut` meanwhile (the caller's contract).
        unsafe { &*self.topa.get() }
    }

    /// The ToPA tables, to place the STOP/INT markers.
    ///
    /// # Safety
    /// The caller holds the open transaction on this buffer, inside its busy
    /// section (no PMI entry of the holder uses the tables then), and makes
    /// no other reference to them while this one lives.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn topa_mut(&self) -> &mut Topa<'b> {
        // SAFETY: the holder's busy section excludes every other user
        // (the caller's contract and the invariants).
        unsafe { &mut *self.topa.get() }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;
    use crate::pt::topa::IdentityMap;

    #[repr(C, align(4096))]
    struct Page([u8; 4096]);

    #[test]
    fn a_buffer_needs_a_power_of_two_of_pages_and_enough_tables() {
        let mut mem: Vec<Page> = (0..3).map(|_| Page([0; 4096])).collect();
        let pages: Vec<*mut u8> = mem.iter_mut().map(|p| p.0.as_mut_ptr()).collect();
        let mut tables = [TopaTable::new()];
        // SAFETY: the pages live for the test and nothing traces into them.
        let three = unsafe { PtBuffer::new(&mut tables, &pages, false, &IdentityMap) };
        assert_eq!(three.err(), Some(Error::Invalid));
        let mut tables = [TopaTable::new()];
        // SAFETY: no pages: refused before any is touched.
        let empty = unsafe { PtBuffer::new(&mut tables, &[], true, &IdentityMap) };
        assert_eq!(empty.err(), Some(Error::Invalid));
        let mut tables = [TopaTable::new()];
        // SAFETY: the pages live for the test and nothing traces into them.
        let one = unsafe { PtBuffer::new(&mut tables, &pages[..1], true, &IdentityMap) }.unwrap();
        assert!(one.is_single_range() && one.is_overwrite() && !one.is_held());
        assert_eq!(one.size(), 4096);
        assert!(one.hold() && !one.hold());
        one.release();
        assert!(!one.is_held());
    }
}
