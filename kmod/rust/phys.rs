// SPDX-License-Identifier: GPL-2.0
//! `virt_to_phys()` and `phys_to_virt()` for the ToPA tables: inline
//! functions in C (arch/x86/include/asm/page_64.h, `__phys_addr_nodebug()`
//! and `__va()`), written out here for x86-64.

use kernel::ffi::c_ulong;

use perfaux::pt::topa::PhysMap;

use crate::perf;

/// `__START_KERNEL_map` (arch/x86/include/asm/page_64_types.h): where the
/// kernel image is mapped.
const START_KERNEL_MAP: c_ulong = 0xffff_ffff_8000_0000;

/// `PAGE_OFFSET`: the base of the direct map of all physical memory.
#[cfg(CONFIG_DYNAMIC_MEMORY_LAYOUT)]
fn page_offset() -> c_ulong {
    // SAFETY: set once at boot (kernel_randomize_memory()), read-only after.
    unsafe { perf::page_offset_base }
}

/// `PAGE_OFFSET`: `__PAGE_OFFSET_BASE_L4` without a dynamic layout (no
/// KASLR of the memory regions and 4-level paging).
#[cfg(not(CONFIG_DYNAMIC_MEMORY_LAYOUT))]
fn page_offset() -> c_ulong {
    0xffff_8880_0000_0000
}

/// The kernel's own address translation: the direct map, or the kernel
/// image (`phys_base`). AUX pages and ToPA tables are direct-map pages
/// (the page allocator's).
pub(crate) struct KernelPhys;

impl PhysMap for KernelPhys {
    fn to_phys(&self, virt: *const u8) -> u64 {
        // c_ulong is the kernel's usize: 64 bits here.
        // __phys_addr_nodebug(): below __START_KERNEL_map it is the direct
        // map, above it the kernel image.
        let x = virt as c_ulong;
        let y = x.wrapping_sub(START_KERNEL_MAP);
        let base = if x > y {
            // SAFETY: set once at boot (head_64.S), read-only after.
            unsafe { perf::phys_base }
        } else {
            START_KERNEL_MAP.wrapping_sub(page_offset())
        };
        y.wrapping_add(base) as u64
    }

    fn to_virt(&self, phys: u64) -> *mut u8 {
        // __va(): the direct map.
        (phys as c_ulong).wrapping_add(page_offset()) as *mut u8
    }
}
