// SPDX-License-Identifier: GPL-2.0
//! Per-CPU memory from the kernel's per-CPU allocator (`alloc_percpu()`,
//! mm/percpu.c) and the two ways to reach a CPU's copy, `this_cpu_ptr()` and
//! `per_cpu_ptr()` (arch/x86/include/asm/percpu.h), for x86-64: 6.12's Rust
//! has no per-CPU API. Also `get_irq_regs()`, a per-CPU read.

use core::arch::asm;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::ffi::{c_uint, c_ulong};

use kernel::prelude::*;

use crate::perf;

/// The possible CPUs (`for_each_possible_cpu()`): every bit set in
/// `cpu_possible_mask` below `nr_cpu_ids`.
pub(crate) fn possible_cpus() -> impl Iterator<Item = c_uint> {
    // SAFETY: both are written once at boot (setup_nr_cpu_ids(),
    // init_cpu_possible()) and read-only afterwards, as for_each_possible_cpu()
    // reads them.
    let (nr, bits) = unsafe { (perf::nr_cpu_ids, &raw const perf::__cpu_possible_mask.bits) };
    let word_bits = c_ulong::BITS;
    (0..nr).filter(move |&cpu| {
        // SAFETY: `bits` is the mask's bitmap of NR_CPUS bits; `get` refuses
        // a CPU beyond it.
        let words = unsafe { &*bits };
        words
            .get((cpu / word_bits) as usize)
            .is_some_and(|w| w & (1 << (cpu % word_bits)) != 0)
    })
}

/// This CPU's per-CPU offset (`this_cpu_off`, as `arch_raw_cpu_ptr()` reads
/// it: `%gs:this_cpu_off(%rip)`).
///
/// # Safety
/// Preemption must be off (or the caller must not mind which CPU's offset
/// it gets, as with any raw per-CPU read).
#[inline(always)]
unsafe fn this_cpu_off() -> usize {
    let off: usize;
    // SAFETY: a per-CPU read of a variable every CPU has (the caller's
    // `# Safety` says which CPU's it is); reads memory only.
    unsafe {
        asm!("mov {off}, qword ptr gs:[rip + {var}]", off = out(reg) off,
             var = sym perf::this_cpu_off, options(nostack, readonly, preserves_flags));
    }
    off
}

/// `get_irq_regs()`: the registers of the context the current hard
/// interrupt interrupted, or null outside one.
///
/// # Safety
/// Called with interrupts off (in a hard interrupt, say).
#[inline(always)]
pub(crate) unsafe fn irq_regs() -> *mut perf::pt_regs {
    let regs: *mut perf::pt_regs;
    // SAFETY: a per-CPU read of `__irq_regs` (lib/irq_regs.c, exported);
    // with interrupts off it is this CPU's and stable.
    unsafe {
        asm!("mov {regs}, qword ptr gs:[rip + {var}]", regs = out(reg) regs,
             var = sym perf::__irq_regs, options(nostack, readonly, preserves_flags));
    }
    regs
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
    /// CPU's copy in place with `init(cpu, copy)`, which must write a whole
    /// `T` there or fail; on a failure the copies built so far are dropped
    /// and the memory freed.
    pub(crate) fn new(mut init: impl FnMut(c_uint, *mut T) -> Result) -> Result<Self> {
        let size = core::mem::size_of::<T>().max(1);
        let gfp = kernel::bindings::GFP_KERNEL;
        // SAFETY: a plain allocation (`__alloc_percpu()`, a macro over this
        // call); zeroed memory, the result checked for NULL.
        let base = unsafe { perf::pcpu_alloc_noprof(size, core::mem::align_of::<T>(), false, gfp) };
        let base = NonNull::new(base.cast::<T>()).ok_or(ENOMEM)?;
        let mut built = 0usize;
        let mut failed = None;
        for cpu in possible_cpus() {
            // SAFETY: `base` is this allocation and `cpu` possible.
            let copy = unsafe { Self::copy_of(base, cpu) };
            match copy.map(|p| init(cpu, p.as_ptr())) {
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

    /// CPU `cpu`'s copy (`per_cpu_ptr()`), or `None` past `NR_CPUS`.
    ///
    /// # Safety
    /// `base` a per-CPU allocation and `cpu` a possible CPU.
    unsafe fn copy_of(base: NonNull<T>, cpu: c_uint) -> Option<NonNull<T>> {
        // SAFETY: written once at boot, read-only after (per_cpu_offset()).
        let offsets = unsafe { (&raw const perf::__per_cpu_offset).as_ref() }?;
        let off = *offsets.get(cpu as usize)?;
        // c_ulong is the kernel's usize.
        NonNull::new(base.as_ptr().wrapping_byte_add(off))
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
        // SAFETY: preemption is off (the caller's `# Safety`); this CPU is
        // possible, so by the type invariant its copy at the per-CPU base
        // plus this CPU's offset holds a `T` living as long as `self`.
        unsafe { &*self.base.as_ptr().wrapping_byte_add(this_cpu_off()) }
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
        unsafe { perf::free_percpu(self.base.as_ptr().cast()) };
    }
}

impl<T> Drop for PerCpu<T> {
    fn drop(&mut self) {
        // SAFETY: every possible CPU's copy is live (the type invariant);
        // drop runs once and nothing uses `self` after.
        unsafe { self.teardown(usize::MAX) };
    }
}
