// SPDX-License-Identifier: MIT OR Apache-2.0
//! Objects in caller storage: how every C struct passed by pointer is read
//! ([`read_in`]), and how a `struct perfaux_*` storage is recognised as an
//! initialized object ([`live_box`]: the live word first).
//!
//! The storage contract: each object's storage is declared by the caller
//! with the size and alignment the header gives, zeroed before its first
//! `*_init` (a zeroed live word is "not initialized"), and not moved while
//! initialized; `*_fini` clears the live word again.

/// `*p` by value (any alignment), or `None` for NULL: how every C struct
/// passed by pointer is read.
///
/// # Safety
/// `p` must be NULL or readable for `size_of::<T>()` bytes holding a valid
/// `T` (for the `perfaux_*` structs: function pointers or NULL in the
/// callback fields, anything elsewhere).
pub(crate) unsafe fn read_in<T: Copy>(p: *const T) -> Option<T> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and readable (the caller's contract);
    // `read_unaligned` has no alignment requirement.
    Some(unsafe { p.read_unaligned() })
}

/// The object box in storage `p`, if its live word says it is
/// initialized. Every box is `#[repr(C)]` with that word first; storage
/// that was never initialized (or was torn down) holds another value there.
///
/// # Safety
/// `p` must be NULL or point to storage of at least `size_of::<B>()` bytes,
/// valid for reads.
pub(crate) unsafe fn live_box<S, B>(p: *const S, live: u64) -> Option<*mut B> {
    if !usable(p) {
        return None;
    }
    // SAFETY: non-null and aligned (checked), at least a word of readable
    // storage (the caller's contract): its first word, read as a u64
    // whatever the storage holds, is a box's live word.
    if unsafe { p.cast::<u64>().read() } != live {
        return None;
    }
    Some(p.cast_mut().cast::<B>())
}

/// Whether `p` is non-null and aligned for `T`.
pub(crate) fn usable<T>(p: *const T) -> bool {
    !p.is_null() && p.is_aligned()
}
