// SPDX-License-Identifier: GPL-2.0
//! Per-CPU memory from the kernel's per-CPU allocator (`alloc_percpu()`,
//! mm/percpu.c) and the two ways to reach a CPU's copy, `this_cpu_ptr()` and
//! `per_cpu_ptr()`: 6.12's Rust has no per-CPU API, so these are the
//! kernel's own macros, called through helpers.c.

use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::ffi::c_uint;

use kernel::prelude::*;

use crate::bindings;

/// The possible CPUs (`for_each_possible_cpu()`).
pub(crate) fn possible_cpus() -> impl Iterator<Item = c_uint> {
    // SAFETY: reads of boot-time constants (nr_cpu_ids, the possible mask).
    let nr = unsafe { bindings::pax_nr_cpu_ids() };
    // SAFETY: as above.
    (0..nr).filter(|&cpu| unsafe { bindings::pax_cpu_possible(cpu) })
}

/// One `T` per possible CPU, in per-CPU memory.
///
/// # Invariants
/// `base` is the `__percpu` address `__alloc_percpu(size_of::<T>(),
/// align_of::<T>())` returned, freed only by `drop`; every possible CPU's
/// copy holds a `T` written by `new`'s `init`, which lives (in place: the
/// memory never moves) until `drop` drops it.
pub(crate) struct PerCpu<T> {
    base: NonNull<T>,
    _owns: PhantomData<T>,
}

impl<T> PerCpu<T> {
    /// Allocates zeroed per-CPU memory for a `T` and builds each possible
    /// CPU's copy in place, pinned, with the initializer `init(cpu)`; on a
    /// failure the copies built so far are dropped and the memory freed.
    pub(crate) fn new<I: PinInit<T, Error>>(mut init: impl FnMut(c_uint) -> I) -> Result<Self> {
        let size = core::mem::size_of::<T>().max(1);
        // SAFETY: a plain allocation (`__alloc_percpu()`); zeroed memory,
        // the result checked for NULL.
        let base = unsafe { bindings::pax_alloc_percpu(size, core::mem::align_of::<T>()) };
        let base = NonNull::new(base.cast::<T>()).ok_or(ENOMEM)?;
        let mut built = 0usize;
        let mut failed = None;
        for cpu in possible_cpus() {
            // SAFETY: `base` is this allocation and `cpu` possible.
            let copy = unsafe { Self::copy_of(base, cpu) };
            // SAFETY: `p` is this CPU's copy: valid, aligned, uninitialized
            // storage for a `T`, which never moves (per-CPU memory) until
            // `teardown` drops it in place: pinned.
            match copy.map(|p| unsafe { init(cpu).__pinned_init(p.as_ptr()) }) {
                Some(Ok(())) => built += 1,
                Some(Err(e)) => {
                    failed = Some(e);
                    break;
                }
                None => {
                    failed = Some(EINVAL);
                    break;
                }
            }
        }
        let this = PerCpu {
            base,
            _owns: PhantomData,
        };
        match failed {
            // INVARIANT: every possible CPU's copy was built.
            None => Ok(this),
            Some(e) => {
                let this = core::mem::ManuallyDrop::new(this);
                // SAFETY: the first `built` copies were built; `this` is not
                // dropped, so this is the only teardown.
                unsafe { this.teardown(built) };
                Err(e)
            }
        }
    }

    /// CPU `cpu`'s copy (`per_cpu_ptr()`).
    ///
    /// # Safety
    /// `base` a per-CPU allocation and `cpu` a possible CPU.
    unsafe fn copy_of(base: NonNull<T>, cpu: c_uint) -> Option<NonNull<T>> {
        // SAFETY: a per-CPU allocation and a possible CPU (this function's
        // `# Safety`): per_cpu_ptr() is that CPU's copy.
        NonNull::new(unsafe { bindings::pax_per_cpu_ptr(base.as_ptr().cast(), cpu) }.cast())
    }

    /// CPU `cpu`'s copy, or `None` for a CPU that is not possible.
    pub(crate) fn get(&self, cpu: c_uint) -> Option<&T> {
        if !possible_cpus().any(|c| c == cpu) {
            return None;
        }
        // SAFETY: `cpu` is possible; by the type invariant its copy holds a
        // `T` living as long as `self`.
        unsafe { Self::copy_of(self.base, cpu).map(|p| &*p.as_ptr()) }
    }

    /// This CPU's copy (`this_cpu_ptr()`).
    ///
    /// # Safety
    /// Preemption must be off for as long as the reference is used.
    pub(crate) unsafe fn this_cpu(&self) -> &T {
        // SAFETY: preemption is off (the caller's `# Safety`), so
        // this_cpu_ptr() is this CPU's copy, which is possible: by the type
        // invariant it holds a `T` living as long as `self`.
        unsafe { &*bindings::pax_this_cpu_ptr(self.base.as_ptr().cast()).cast::<T>() }
    }

    /// Drops the first `n` possible CPUs' copies and frees the memory.
    ///
    /// # Safety
    /// Those copies hold live `T`s; called once, and nothing uses `self`
    /// after.
    unsafe fn teardown(&self, n: usize) {
        for cpu in possible_cpus().take(n) {
            // SAFETY: `base` is the allocation and `cpu` possible.
            if let Some(p) = unsafe { Self::copy_of(self.base, cpu) } {
                // SAFETY: a live `T` (this function's `# Safety`), dropped
                // once.
                unsafe { core::ptr::drop_in_place(p.as_ptr()) };
            }
        }
        // SAFETY: the allocation (the type invariant), freed once.
        unsafe { bindings::free_percpu(self.base.as_ptr().cast()) };
    }
}

impl<T> Drop for PerCpu<T> {
    fn drop(&mut self) {
        // SAFETY: every possible CPU's copy is live (the type invariant);
        // drop runs once and nothing uses `self` after.
        unsafe { self.teardown(usize::MAX) };
    }
}
