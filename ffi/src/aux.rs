// SPDX-License-Identifier: MIT OR Apache-2.0
//! AUX areas over caller pages, attached to a ring's user page.

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};
use core::ptr::{self, addr_of, addr_of_mut};

use perfaux::Error;
use perfaux::abi::PerfEventMmapPage;
use perfaux::aux::{AuxArea, AuxConfig};
use perfaux::ring::Wakeup;

use crate::ring::{CWakeup, perfaux_wakeup, usable};

/// `perfaux_aux_config.flags`: overwrite (snapshot) mode, a read-only AUX
/// mapping in Linux: the tracer writes on, whatever was read.
pub const PERFAUX_AUX_OVERWRITE: u32 = 1 << 0;

/// Words of `struct perfaux_aux_area`.
pub const PERFAUX_AUX_AREA_WORDS: usize = 24;

/// How an AUX area behaves; all zero is a writable area with the watermark
/// at half its size and nobody to wake.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_aux_config {
    /// `PERFAUX_AUX_*` bits.
    pub flags: u32,
    /// Reserved, must be 0.
    pub reserved: u32,
    /// Wake the consumer every this many bytes (writable mode; 0: half).
    pub watermark: u64,
    /// The wakeup callback.
    pub wakeup: perfaux_wakeup,
}

/// Storage of an AUX area. Opaque.
#[repr(C)]
pub struct perfaux_aux_area {
    /// Opaque.
    pub opaque: [u64; PERFAUX_AUX_AREA_WORDS],
}

const AREA_LIVE: u64 = 0x7065_7266_6175_7861; // "perfauxa"

struct AreaBox {
    live: u64,
    wakeup: CWakeup,
    area: AuxArea<'static, ()>,
}

const _: () = {
    assert!(size_of::<AreaBox>() <= size_of::<perfaux_aux_area>());
    assert!(align_of::<AreaBox>() <= align_of::<perfaux_aux_area>());
};

/// The initialized area at `p`, if it is one.
///
/// # Safety
/// `p` must be NULL or point to `struct perfaux_aux_area` storage, valid
/// for `'a`.
pub(crate) unsafe fn area_ref<'a>(p: *const perfaux_aux_area) -> Option<&'a AuxArea<'static, ()>> {
    if !usable(p) {
        return None;
    }
    let b = p.cast::<AreaBox>();
    // SAFETY: valid, aligned storage of AreaBox's size; the first word read
    // as a u64 whatever it holds.
    if unsafe { addr_of!((*b).live).read() } != AREA_LIVE {
        return None;
    }
    // SAFETY: live: `perfaux_aux_area_init` wrote an AreaBox, not torn down.
    Some(unsafe { &(*b).area })
}

/// Initializes an AUX area of `nr_pages` 4 KiB pages (`pages`, one pointer
/// per page in buffer order, a power of two of them) attached to a ring's
/// `user_page` (initialize the ring first): it sets `aux_offset`/`aux_size`
/// and the AUX head and tail words there. `config` NULL: all defaults.
///
/// Returns 0, `-EINVAL` for a NULL or misaligned `area` or `user_page`, no
/// pages, a page count that is not a power of two, a NULL page, unknown
/// flags or reserved fields, `-EBUSY` if `area` is initialized.
///
/// # Safety
/// `area` must be valid for writes of `sizeof(struct perfaux_aux_area)`
/// bytes and not move until `perfaux_aux_area_fini`; the user page, the
/// page array and the pages must stay valid until then, used by nothing
/// but the engine (and a consumer reading below `aux_head`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_aux_area_init(
    area: *mut perfaux_aux_area,
    user_page: *mut c_void,
    pages: *const *mut c_void,
    nr_pages: usize,
    config: *const perfaux_aux_config,
) -> c_int {
    if !usable(area) || !usable(user_page.cast::<PerfEventMmapPage>()) {
        return Error::Invalid.errno();
    }
    // SAFETY: the caller's contract.
    if unsafe { area_ref(area) }.is_some() {
        return Error::Busy.errno();
    }
    let config = if config.is_null() {
        perfaux_aux_config {
            flags: 0,
            reserved: 0,
            watermark: 0,
            wakeup: perfaux_wakeup {
                func: None,
                ctx: ptr::null_mut(),
            },
        }
    } else {
        // SAFETY: non-null and readable (the caller's contract).
        unsafe { config.read_unaligned() }
    };
    if config.flags & !PERFAUX_AUX_OVERWRITE != 0 || config.reserved != 0 {
        return Error::Invalid.errno();
    }
    if nr_pages == 0 || !usable(pages) || nr_pages > isize::MAX as usize / size_of::<*mut u8>() {
        return Error::Invalid.errno();
    }
    // SAFETY: non-null, aligned, `nr_pages` readable pointers that outlive
    // the area (the caller's contract).
    let pages: &'static [*mut u8] =
        unsafe { core::slice::from_raw_parts(pages.cast::<*mut u8>(), nr_pages) };
    let b = area.cast::<AreaBox>();
    // SAFETY: valid storage for an AreaBox (asserted size, the contract);
    // the wakeup is written first and stays in place.
    unsafe {
        addr_of_mut!((*b).live).write(0);
        addr_of_mut!((*b).wakeup).write(CWakeup(config.wakeup));
    }
    // SAFETY: just written; it lives as long as the storage.
    let wakeup: &'static CWakeup = unsafe { &*addr_of!((*b).wakeup) };
    let aux = AuxConfig {
        overwrite: config.flags & PERFAUX_AUX_OVERWRITE != 0,
        watermark: config.watermark,
        wakeup: Some(wakeup as &(dyn Wakeup + Sync)),
    };
    // SAFETY: the user page and pages are valid and exclusive to the engine
    // until fini (the caller's contract); the area checks the rest.
    match unsafe { AuxArea::new(user_page.cast(), pages, aux, ()) } {
        Ok(a) => {
            // SAFETY: valid storage; the live word goes last.
            unsafe {
                addr_of_mut!((*b).area).write(a);
                addr_of_mut!((*b).live).write(AREA_LIVE);
            }
            0
        }
        Err(e) => e.errno(),
    }
}

/// Tears an AUX area down. No transaction may be open on it. Returns 0, or
/// `-EINVAL` if `area` is not an initialized area.
///
/// # Safety
/// `area` must be NULL or point to `struct perfaux_aux_area` storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_aux_area_fini(area: *mut perfaux_aux_area) -> c_int {
    // SAFETY: the caller's contract.
    if unsafe { area_ref(area) }.is_none() {
        return Error::Invalid.errno();
    }
    let b = area.cast::<AreaBox>();
    // SAFETY: live: dropped once, then marked dead.
    unsafe {
        ptr::drop_in_place(addr_of_mut!((*b).area));
        addr_of_mut!((*b).live).write(0);
    }
    0
}
