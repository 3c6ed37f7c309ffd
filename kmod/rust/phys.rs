// SPDX-License-Identifier: GPL-2.0
//! The address map of the ToPA tables and AUX pages: the kernel's own
//! `virt_to_phys()` and `phys_to_virt()` (inlines, called through
//! helpers.c).

use perfaux::pt::topa::PhysMap;

use crate::bindings;

/// The kernel's own address translation. AUX pages and ToPA tables are
/// direct-map pages (the page allocator's), which is what `virt_to_phys()`
/// takes.
pub(crate) struct KernelPhys;

impl PhysMap for KernelPhys {
    fn to_phys(&self, virt: *const u8) -> u64 {
        // SAFETY: a pure translation; the driver passes direct-map
        // addresses (its tables and the AUX pages).
        unsafe { bindings::pax_virt_to_phys(virt.cast()) }
    }

    fn to_virt(&self, phys: u64) -> *mut u8 {
        // SAFETY: a pure translation (`__va()`).
        unsafe { bindings::pax_phys_to_virt(phys) }.cast()
    }
}
