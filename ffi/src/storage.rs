// SPDX-License-Identifier: MIT OR Apache-2.0
//! Objects in caller storage: how every C struct passed by pointer is read
//! ([`read_in`]), and how a `struct perfaux_*` storage is recognised as an
//! initialized object ([`live_box`]: the live word first), and how an
//! object knows who still refers to it ([`Users`], [`Hold`]).
//!
//! The storage contract: each object's storage is declared by the caller
//! with the size and alignment the header gives, zeroed before its first
//! `*_init` (a zeroed live word is "not initialized"), and not moved while
//! initialized; `*_fini` clears the live word again.

use core::sync::atomic::{AtomicUsize, Ordering};

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

/// How many objects refer to one in place. Its `*_fini` refuses with
/// `-EBUSY` while any does, as the kernel's counts keep a buffer
/// (`rb->refcount`, `rb->aux_refcount`) or an event (`event->refcount`)
/// alive while something holds it: C storage torn down in the wrong order
/// is refused instead of being freed under its users.
///
/// Taken and dropped on set-up paths only (init, open, `set_buffer`,
/// `set_output`, fini), never on a PMI path.
///
/// # Invariants
/// The count is the number of live [`Hold`]s on it.
pub(crate) struct Users(AtomicUsize);

impl Users {
    /// Nobody refers to the object yet.
    pub(crate) const fn new() -> Self {
        // INVARIANT: no hold exists yet.
        Users(AtomicUsize::new(0))
    }

    /// One more user, until the returned hold is dropped.
    pub(crate) fn hold(&self) -> Hold<'_> {
        // Relaxed: a new reference is taken from a live one (the caller
        // found the object initialized), so nothing needs ordering here;
        // `Arc::clone`'s reasoning. It cannot wrap: each hold occupies
        // storage of its own, and holds are never forgotten.
        // INVARIANT: one more hold, returned.
        self.0.fetch_add(1, Ordering::Relaxed);
        Hold(self)
    }

    /// Whether any object still refers to this one.
    pub(crate) fn in_use(&self) -> bool {
        // Acquire pairs with the Release in `Hold::drop`: what the last
        // user did through its reference happens before the teardown that
        // follows a `false` here.
        self.0.load(Ordering::Acquire) != 0
    }
}

/// One object's reference to another's [`Users`], given back when dropped
/// (in the holder's `*_fini`, or when the holder takes another).
pub(crate) struct Hold<'a>(&'a Users);

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        // Release pairs with the Acquire in `Users::in_use`.
        // INVARIANT: this hold ends here.
        self.0.0.fetch_sub(1, Ordering::Release);
    }
}
