// SPDX-License-Identifier: MIT OR Apache-2.0
//! AUX areas over caller pages, attached to a ring's user page, and AUX
//! transactions on them (for drivers that write AUX data themselves).

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};
use core::ptr::{self, addr_of, addr_of_mut};

use perfaux::Error;
use perfaux::aux::{AuxArea, AuxConfig, AuxHandle, copy_aux};
use perfaux::ring::Wakeup;

use crate::ring::{
    CWakeup, NO_WAKEUP, fixed_event, perfaux_output_event, perfaux_ring, perfaux_wakeup, ring_hold,
    ring_ref,
};
use crate::sink::{CSink, perfaux_sink};
use crate::storage::{Hold, Users, live_box, read_in, usable};

/// `perfaux_aux_config.flags`: overwrite (snapshot) mode, a read-only AUX
/// mapping in Linux: the tracer writes on, whatever was read.
pub const PERFAUX_AUX_OVERWRITE: u32 = 1 << 0;

/// Words of `struct perfaux_aux_area`.
pub const PERFAUX_AUX_AREA_WORDS: usize = 24;
/// Size in bytes of `struct perfaux_aux_area` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_AUX_AREA_SIZE: usize = PERFAUX_AUX_AREA_WORDS * 8;

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

#[repr(C)]
struct AreaBox {
    live: u64,
    /// The PT buffers, PT CPU objects and events over the area.
    users: Users,
    /// The ring whose user page the area's head and tail live in.
    ring: Hold<'static>,
    wakeup: CWakeup,
    area: AuxArea<'static>,
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
pub(crate) unsafe fn area_ref<'a>(p: *const perfaux_aux_area) -> Option<&'a AuxArea<'static>> {
    // SAFETY: `p` is NULL or AUX area storage valid for 'a (this function's
    // `# Safety`), which `live_box` needs; the live word says
    // `perfaux_aux_area_init` wrote an AreaBox, not torn down.
    unsafe { live_box::<_, AreaBox>(p, AREA_LIVE).map(|b| &(*b).area) }
}

/// The initialized area at `p` with a hold on it, for an object that keeps
/// referring to it: the area's `fini` is refused until the hold is dropped.
///
/// # Safety
/// As [`area_ref`].
pub(crate) unsafe fn area_hold<'a>(
    p: *const perfaux_aux_area,
) -> Option<(&'a AuxArea<'static>, Hold<'a>)> {
    // SAFETY: as `area_ref` (this function's `# Safety`): the live word says
    // an AreaBox is there.
    unsafe { live_box::<_, AreaBox>(p, AREA_LIVE).map(|b| (&(*b).area, (*b).users.hold())) }
}

/// Initializes an AUX area of `nr_pages` 4 KiB pages (`pages`, one pointer
/// per page in buffer order, a power of two of them) attached to `ring`:
/// it sets `aux_offset`/`aux_size` and the AUX head and tail words in the
/// ring's user page, and holds the ring (its `fini` is refused until the
/// area's). `config` NULL: all defaults.
///
/// Returns 0, `-EINVAL` for a NULL or misaligned `area`, a `ring` that is
/// not initialized, no pages, a page count that is not a power of two, a
/// NULL page or one that is not 4 KiB aligned (AUX pages are pages, as the
/// kernel's are: a PT PMU's ToPA tables can only address whole pages),
/// unknown flags or reserved fields, `-EBUSY` if `area` is initialized.
///
/// # Safety
/// `area` must be valid for writes of `sizeof(struct perfaux_aux_area)`
/// bytes and not move until `perfaux_aux_area_fini`; `ring` NULL or ring
/// storage; the page array and the pages must stay valid until then, used
/// by nothing but the engine (and a consumer reading below `aux_head`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_aux_area_init(
    area: *mut perfaux_aux_area,
    ring: *const perfaux_ring,
    pages: *const *mut c_void,
    nr_pages: usize,
    config: *const perfaux_aux_config,
) -> c_int {
    if !usable(area) {
        return Error::Invalid.errno();
    }
    // SAFETY: `area` is NULL or `struct perfaux_aux_area` storage (this function's `# Safety`),
    // which is what `area_ref` needs.
    if unsafe { area_ref(area) }.is_some() {
        return Error::Busy.errno();
    }
    // SAFETY: NULL or readable (the caller's contract).
    let config = unsafe { read_in(config) }.unwrap_or(perfaux_aux_config {
        flags: 0,
        reserved: 0,
        watermark: 0,
        wakeup: NO_WAKEUP,
    });
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
    // SAFETY: `ring` is NULL or ring storage (this function's `# Safety`);
    // the hold keeps it initialized for as long as the area refers to it.
    let Some((ring, ring_users)) = (unsafe { ring_hold(ring) }) else {
        return Error::Invalid.errno();
    };
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
    // SAFETY: the ring's user page is valid while the ring is, which the
    // hold keeps so until fini; the pages are valid and exclusive to the
    // engine until then (the caller's contract); the area checks the rest.
    match unsafe { AuxArea::new(ring.user_page(), pages, aux) } {
        Ok(a) => {
            // SAFETY: valid storage; the live word goes last.
            unsafe {
                addr_of_mut!((*b).users).write(Users::new());
                addr_of_mut!((*b).ring).write(ring_users);
                addr_of_mut!((*b).area).write(a);
                addr_of_mut!((*b).live).write(AREA_LIVE);
            }
            0
        }
        Err(e) => e.errno(),
    }
}

/// Tears an AUX area down and lets go of its ring. Returns 0, `-EBUSY`
/// (and nothing changes) while anything still refers to the area: a PT
/// buffer, a PT CPU object or an event over it, or an open transaction
/// (the kernel's `rb->aux_refcount`), or `-EINVAL` if `area` is not an
/// initialized area.
///
/// # Safety
/// `area` must be NULL or point to `struct perfaux_aux_area` storage; no
/// other call may use the area meanwhile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_aux_area_fini(area: *mut perfaux_aux_area) -> c_int {
    // SAFETY: `area` is NULL or `struct perfaux_aux_area` storage (this function's `# Safety`),
    // which is what `live_box` needs.
    let Some(b) = (unsafe { live_box::<_, AreaBox>(area, AREA_LIVE) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: live (checked), so an AreaBox is there.
    let (users, a) = unsafe { (&(*b).users, &(*b).area) };
    if users.in_use() || a.in_transaction() {
        return Error::Busy.errno();
    }
    // SAFETY: live: marked dead, then the area dropped once, then the hold
    // on the ring it wrote into.
    unsafe {
        addr_of_mut!((*b).live).write(0);
        ptr::drop_in_place(addr_of_mut!((*b).area));
        ptr::drop_in_place(addr_of_mut!((*b).ring));
    }
    0
}

/// Words of `struct perfaux_aux_handle`.
pub const PERFAUX_AUX_HANDLE_WORDS: usize = 8;
/// Size in bytes of `struct perfaux_aux_handle` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_AUX_HANDLE_SIZE: usize = PERFAUX_AUX_HANDLE_WORDS * 8;

/// Storage of an AUX transaction (a driver's `perf_output_handle` on its
/// AUX area). Opaque.
#[repr(C)]
pub struct perfaux_aux_handle {
    /// Opaque.
    pub opaque: [u64; PERFAUX_AUX_HANDLE_WORDS],
}

/// The numbers of an open AUX transaction.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct perfaux_aux_state {
    /// Where it writes (a free-running position; mask with the area size).
    pub head: u64,
    /// Bytes it may write before the consumer's data (writable mode).
    pub space: u64,
    /// Where the consumer wants a wakeup.
    pub wakeup: u64,
    /// The `PERF_AUX_FLAG_*` bits set so far.
    pub flags: u64,
}

const AUX_HANDLE_LIVE: u64 = 0x7065_7266_6178_6864; // "perfaxhd"

#[repr(C)]
struct AuxHandleBox {
    live: u64,
    handle: AuxHandle<'static, 'static>,
}

const _: () = {
    assert!(size_of::<AuxHandleBox>() <= size_of::<perfaux_aux_handle>());
    assert!(align_of::<AuxHandleBox>() <= align_of::<perfaux_aux_handle>());
};

/// The open AUX transaction at `p`, if it is one.
///
/// # Safety
/// `p` NULL or AUX handle storage.
unsafe fn aux_handle_mut<'a>(
    p: *mut perfaux_aux_handle,
) -> Option<&'a mut AuxHandle<'static, 'static>> {
    // SAFETY: `p` is NULL or AUX handle storage (this function's
    // `# Safety`), which `live_box` needs; the live word says begun and not
    // ended; the C contract keeps one user of a handle at a time.
    unsafe { live_box::<_, AuxHandleBox>(p, AUX_HANDLE_LIVE).map(|h| &mut (*h).handle) }
}

/// Opens an AUX transaction on `area` (`perf_aux_output_begin`): one at a
/// time per area. Returns 0, `-ENOSPC` when a writable area is full (the
/// event's disable is requested, as Linux), `-EBUSY` when one is open on
/// the area or in `handle`, `-EINVAL` for bad arguments or an area going
/// away.
///
/// # Safety
/// `handle` valid for writes of `sizeof(struct perfaux_aux_handle)` bytes,
/// not moved until `perfaux_aux_end`; `area` NULL or AUX area storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_aux_begin(
    handle: *mut perfaux_aux_handle,
    area: *const perfaux_aux_area,
) -> c_int {
    if !usable(handle) {
        return Error::Invalid.errno();
    }
    // SAFETY: `handle` is NULL or `struct perfaux_aux_handle` storage (this function's `#
    // Safety`), which is what `aux_handle_mut` needs.
    if unsafe { aux_handle_mut(handle) }.is_some() {
        return Error::Busy.errno();
    }
    // SAFETY: `area` is NULL or AUX area storage that outlives the
    // transaction (this function's `# Safety`), which `area_ref` needs.
    let Some(a) = (unsafe { area_ref(area) }) else {
        return Error::Invalid.errno();
    };
    match a.begin() {
        Ok(h) => {
            let b = handle.cast::<AuxHandleBox>();
            // SAFETY: valid storage (asserted size); the live word last.
            unsafe {
                addr_of_mut!((*b).handle).write(h);
                addr_of_mut!((*b).live).write(AUX_HANDLE_LIVE);
            }
            0
        }
        Err(e) => e.errno(),
    }
}

/// Reads the open transaction's numbers into `state`. Returns 0 or
/// `-EINVAL`.
///
/// # Safety
/// `handle` NULL or AUX handle storage; `state` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_aux_get_state(
    handle: *mut perfaux_aux_handle,
    state: *mut perfaux_aux_state,
) -> c_int {
    // SAFETY: `handle` is NULL or `struct perfaux_aux_handle` storage (this function's `#
    // Safety`), which is what `aux_handle_mut` needs.
    let Some(h) = (unsafe { aux_handle_mut(handle) }) else {
        return Error::Invalid.errno();
    };
    if state.is_null() {
        return Error::Invalid.errno();
    }
    let s = perfaux_aux_state {
        head: h.head(),
        space: h.space(),
        wakeup: h.wakeup_position(),
        flags: h.flags(),
    };
    // SAFETY: non-null and writable (the caller's contract).
    unsafe { state.write_unaligned(s) };
    0
}

/// Adds `PERF_AUX_FLAG_*` bits (TRUNCATED, PARTIAL, ...; OVERWRITE is the
/// engine's) to the transaction. Returns 0 or `-EINVAL`.
///
/// # Safety
/// `handle` NULL or AUX handle storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_aux_flag(handle: *mut perfaux_aux_handle, flags: u64) -> c_int {
    // SAFETY: `handle` is NULL or `struct perfaux_aux_handle` storage (this function's `#
    // Safety`), which is what `aux_handle_mut` needs.
    let Some(h) = (unsafe { aux_handle_mut(handle) }) else {
        return Error::Invalid.errno();
    };
    h.flag(flags);
    0
}

/// Skips `size` bytes of a writable area (`perf_aux_output_skip`): a
/// `PERF_RECORD_AUX`-less advance of the head. Returns 0, `-ENOSPC` past
/// the transaction's space, or `-EINVAL`.
///
/// # Safety
/// `handle` NULL or AUX handle storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_aux_skip(handle: *mut perfaux_aux_handle, size: u64) -> c_int {
    // SAFETY: `handle` is NULL or `struct perfaux_aux_handle` storage (this function's `#
    // Safety`), which is what `aux_handle_mut` needs.
    let Some(h) = (unsafe { aux_handle_mut(handle) }) else {
        return Error::Invalid.errno();
    };
    match h.skip(size) {
        Ok(()) => 0,
        Err(e) => e.errno(),
    }
}

/// Moves the head of an overwrite-mode transaction to the tracer's write
/// position before `perfaux_aux_end` (`handle->head = ...` in Intel PT's
/// snapshot stop). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `handle` NULL or AUX handle storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_aux_set_head(handle: *mut perfaux_aux_handle, head: u64) -> c_int {
    // SAFETY: `handle` is NULL or `struct perfaux_aux_handle` storage (this function's `#
    // Safety`), which is what `aux_handle_mut` needs.
    let Some(h) = (unsafe { aux_handle_mut(handle) }) else {
        return Error::Invalid.errno();
    };
    h.set_head(head);
    0
}

/// Copies the AUX bytes `[from, to)` (positions masked with the area size;
/// `from == to` is the whole area) into `sink` (`perf_output_copy_aux`,
/// for a driver's `snapshot_aux`). Returns the bytes copied, `-EFAULT` if
/// the sink took fewer, `-EINVAL` for bad arguments.
///
/// # Safety
/// `handle` NULL or AUX handle storage; `sink` NULL or readable; the
/// tracer must not write the range meanwhile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_aux_copy(
    handle: *mut perfaux_aux_handle,
    sink: *const perfaux_sink,
    from: u64,
    to: u64,
) -> i64 {
    // SAFETY: `handle` is NULL or `struct perfaux_aux_handle` storage (this function's `#
    // Safety`), which is what `aux_handle_mut` needs.
    let Some(h) = (unsafe { aux_handle_mut(handle) }) else {
        return i64::from(Error::Invalid.errno());
    };
    // SAFETY: NULL or readable (the caller's contract).
    let Some(sink) = (unsafe { read_in(sink) }).filter(|s| s.copy.is_some()) else {
        return i64::from(Error::Invalid.errno());
    };
    match copy_aux(h, &mut CSink(sink), from, to) {
        Ok(n) => n.min(i64::MAX as u64) as i64,
        Err(e) => i64::from(e.errno()),
    }
}

/// Ends the transaction (`perf_aux_output_end`) with `size` new bytes
/// (writable mode; in overwrite mode the data up to the head): writes
/// `PERF_RECORD_AUX` for `event` (NULL: id 0, no trailer) into `ring`,
/// publishes `aux_head`, wakes the consumer at the watermark or on
/// TRUNCATED (which also requests the event's disable). Returns 0, or
/// `-EINVAL` for bad arguments (the transaction then stays open).
///
/// # Safety
/// `handle` NULL or AUX handle storage; `ring` NULL or ring storage;
/// `event` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_aux_end(
    handle: *mut perfaux_aux_handle,
    size: u64,
    ring: *const perfaux_ring,
    event: *const perfaux_output_event,
) -> c_int {
    // SAFETY: `handle` is NULL or `struct perfaux_aux_handle` storage (this function's `#
    // Safety`), which is what `aux_handle_mut` needs.
    if unsafe { aux_handle_mut(handle) }.is_none() {
        return Error::Invalid.errno();
    }
    // SAFETY: `ring` is NULL or `struct perfaux_ring` storage (this function's `# Safety`),
    // which is what `ring_ref` needs.
    let Some(ring) = (unsafe { ring_ref(ring) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: NULL or readable (the caller's contract).
    let event = unsafe { read_in(event) }.unwrap_or_default();
    let Some(mut event) = fixed_event(&event) else {
        return Error::Invalid.errno();
    };
    let b = handle.cast::<AuxHandleBox>();
    // SAFETY: live (checked): marked ended, then moved out once and ended.
    unsafe {
        addr_of_mut!((*b).live).write(0);
        addr_of!((*b).handle).read().end(size, ring, &mut event);
    }
    0
}
