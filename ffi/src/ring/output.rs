// SPDX-License-Identifier: MIT OR Apache-2.0
//! Output handles: one record being written into a ring (`perf_output_begin`,
//! `perf_output_copy`, `perf_output_skip`, `perf_output_end`).

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};
use core::ptr::{addr_of, addr_of_mut};

use perfaux::Error;
use perfaux::ring::{NoHook, OutputHandle};

use super::{
    PERFAUX_OUTPUT_HANDLE_WORDS, fixed_event, perfaux_output_event, perfaux_ring, ring_ref,
};
use crate::storage::{live_box, read_in, usable};

/// Storage of an output handle (one record being written). Opaque.
#[repr(C)]
pub struct perfaux_output_handle {
    /// Opaque.
    pub opaque: [u64; PERFAUX_OUTPUT_HANDLE_WORDS],
}

const HANDLE_LIVE: u64 = 0x7065_7266_6f75_7470; // "perfoutp"

#[repr(C)]
struct HandleBox {
    live: u64,
    handle: OutputHandle<'static, 'static, NoHook>,
}

const _: () = {
    assert!(size_of::<HandleBox>() <= size_of::<perfaux_output_handle>());
    assert!(align_of::<HandleBox>() <= align_of::<perfaux_output_handle>());
};

/// Reserves `size` bytes (a whole record, header included) in `ring` and
/// opens `handle` on them (`perf_output_begin`). `event` (NULL: id 0, no
/// trailer) names the event for the `PERF_RECORD_LOST` that goes first
/// when records were dropped. May be called from any context of the
/// ring's CPU, nested (task, IRQ, NMI).
///
/// Returns 0, or `-ENOSPC` when the ring is paused or full (a lost record
/// is counted), `-EINVAL` for `size` 0 or above 65535, a bad `ring`,
/// `handle` or `event`, `-EBUSY` if `handle` is open already.
///
/// # Safety
/// `handle` must be valid for writes of `sizeof(struct perfaux_output_handle)`
/// bytes and not move until `perfaux_output_end`; `ring` NULL or a ring's
/// storage; `event` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_output_begin(
    handle: *mut perfaux_output_handle,
    ring: *mut perfaux_ring,
    size: usize,
    event: *const perfaux_output_event,
) -> c_int {
    if !usable(handle) {
        return Error::Invalid.errno();
    }
    // SAFETY: `handle` is NULL or `struct perfaux_output_handle` storage (this function's `#
    // Safety`), which is what `handle_mut` needs.
    if unsafe { handle_mut(handle) }.is_some() {
        return Error::Busy.errno();
    }
    let h = handle.cast::<HandleBox>();
    // SAFETY: `ring` is NULL or `struct perfaux_ring` storage (this function's `# Safety`),
    // which is what `ring_ref` needs.
    let Some(r) = (unsafe { ring_ref(ring) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: NULL or readable (the caller's contract).
    let event = unsafe { read_in(event) }.unwrap_or_default();
    let Some(mut source) = fixed_event(&event) else {
        return Error::Invalid.errno();
    };
    match r.begin(size, &mut source) {
        Ok(out) => {
            // SAFETY: valid storage; the live word goes last.
            unsafe {
                addr_of_mut!((*h).handle).write(out);
                addr_of_mut!((*h).live).write(HANDLE_LIVE);
            }
            0
        }
        Err(e) => e.errno(),
    }
}

/// The open handle at `p`, if it is one.
///
/// # Safety
/// `p` must be NULL or point to `struct perfaux_output_handle` storage.
unsafe fn handle_mut<'a>(
    p: *mut perfaux_output_handle,
) -> Option<&'a mut OutputHandle<'static, 'static, NoHook>> {
    // SAFETY: `p` is NULL or output handle storage (this function's
    // `# Safety`), which `live_box` needs; the live word says
    // `perfaux_output_begin` wrote it and `end` has not consumed it; the C
    // contract keeps one user of a handle at a time.
    unsafe { live_box::<_, HandleBox>(p, HANDLE_LIVE).map(|h| &mut (*h).handle) }
}

/// Copies `len` bytes into the record (`perf_output_copy`). Returns how
/// many were **not** copied (0, or what would have gone past the
/// reservation), or `-EINVAL` for a handle that is not open or NULL
/// `bytes` with a non-zero `len`.
///
/// # Safety
/// `handle` NULL or handle storage; `bytes` readable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_output_copy(
    handle: *mut perfaux_output_handle,
    bytes: *const c_void,
    len: usize,
) -> isize {
    // SAFETY: `handle` is NULL or `struct perfaux_output_handle` storage (this function's `#
    // Safety`), which is what `handle_mut` needs.
    let Some(h) = (unsafe { handle_mut(handle) }) else {
        return Error::Invalid.errno() as isize;
    };
    if len == 0 {
        return 0;
    }
    if bytes.is_null() || len > isize::MAX as usize {
        return Error::Invalid.errno() as isize;
    }
    // SAFETY: non-null, readable for `len` bytes (the caller's contract);
    // ring memory is not C's, so they do not overlap.
    let src = unsafe { core::slice::from_raw_parts(bytes.cast::<u8>(), len) };
    h.copy(src) as isize
}

/// Skips `len` bytes of the record, leaving them as they are
/// (`perf_output_skip`). Returns how many were **not** skipped, or
/// `-EINVAL` for a handle that is not open.
///
/// # Safety
/// `handle` NULL or handle storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_output_skip(
    handle: *mut perfaux_output_handle,
    len: usize,
) -> isize {
    // SAFETY: `handle` is NULL or `struct perfaux_output_handle` storage (this function's `#
    // Safety`), which is what `handle_mut` needs.
    let Some(h) = (unsafe { handle_mut(handle) }) else {
        return Error::Invalid.errno() as isize;
    };
    h.skip(len).min(isize::MAX as usize) as isize
}

/// Publishes the record and closes the handle (`perf_output_end`); the
/// outermost writer moves `data_head` and may wake the consumer. Returns 0,
/// or `-EINVAL` for a handle that is not open.
///
/// # Safety
/// `handle` NULL or handle storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_output_end(handle: *mut perfaux_output_handle) -> c_int {
    // SAFETY: `handle` is NULL or `struct perfaux_output_handle` storage (this function's `#
    // Safety`), which is what `handle_mut` needs.
    if unsafe { handle_mut(handle) }.is_none() {
        return Error::Invalid.errno();
    }
    let h = handle.cast::<HandleBox>();
    // SAFETY: live (checked): the handle is moved out once and the storage
    // marked closed before it is ended, so nothing can end it twice.
    unsafe {
        addr_of_mut!((*h).live).write(0);
        addr_of!((*h).handle).read().end();
    }
    0
}
