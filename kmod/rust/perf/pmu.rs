// SPDX-License-Identifier: GPL-2.0
//! A PMU driver's callbacks ([`PmuOps`]), the `extern "C"` trampolines the
//! perf core calls ([`Adapter`]), and the registered `struct pmu` that owns
//! the driver ([`Registration`]).

use core::ffi::CStr;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::ffi::{c_int, c_long, c_ulong, c_void};
use kernel::prelude::*;
use kernel::types::Opaque;

use super::{Event, OutputCopy, OutputHandle};
use crate::bindings;

// The kernel's PERF_EF_* are the engine's, which drivers pass on.
const _: () = assert!(
    bindings::PERF_EF_START == perfaux::pmu::ef::START
        && bindings::PERF_EF_UPDATE == perfaux::pmu::ef::UPDATE
        && bindings::PERF_EF_RELOAD == perfaux::pmu::ef::RELOAD
);

/// What a PMU driver does for the perf core (`struct pmu`'s callbacks).
/// The contexts are the perf core's: `event_init` at open; `add`, `del`,
/// `start`, `stop` and `read` on the event's CPU with interrupts off;
/// `snapshot_aux` in the PMI (or with interrupts off) on the CPU of the
/// sampler, where the AUX event runs; `setup_aux` and `free_aux` at the
/// AUX area's mmap and its last reference.
pub(crate) trait PmuOps: Sized + Send + Sync {
    /// The private data of an AUX buffer (`rb->aux_priv`).
    type AuxBuffer;

    /// `event_init`, for an event whose `attr.type` is this PMU's (the
    /// adapter refuses the others with `ENOENT`, as every PMU does).
    fn event_init(&self, event: &Event) -> Result;

    /// `add` (`PERF_EF_*` in `flags`).
    fn add(&self, event: &Event, flags: u32) -> Result;

    /// `del`.
    fn del(&self, event: &Event, flags: u32);

    /// `start`.
    fn start(&self, event: &Event, flags: u32);

    /// `stop`.
    fn stop(&self, event: &Event, flags: u32);

    /// `read`: the event's count, if it has one.
    fn read(&self, _event: &Event) {}

    /// `setup_aux`: the buffer state over the AUX area's `pages` (valid
    /// until `free_aux` of the result returns), in overwrite (snapshot)
    /// mode if `overwrite`. An error fails the AUX mmap.
    fn setup_aux(
        &self,
        event: &Event,
        pages: &[*mut u8],
        overwrite: bool,
    ) -> Result<KBox<Self::AuxBuffer>>;

    /// `free_aux`: the last transaction on `buffer` has ended. An error
    /// leaves the buffer leaked, and the module pinned with it (the
    /// adapter's reference for the buffer stays).
    fn free_aux(buffer: KBox<Self::AuxBuffer>) -> Result;

    /// `snapshot_aux`: up to `size` bytes of `event`'s AUX data into the
    /// sample's `output`; returns how many went in.
    fn snapshot_aux(&self, event: &Event, output: &mut OutputHandle, size: u64) -> u64;
}

/// What `rb->aux_priv` points to: the driver's buffer, and the module the
/// buffer holds from `setup_aux` to `free_aux`.
///
/// The ring buffer frees its AUX buffer through `rb->free_aux` when its
/// last AUX mapping goes, which can be after the event that set it up, and
/// that event's module reference, are gone: an event whose output was set
/// to the PMU's event maps the same ring and AUX area. Without a reference
/// of its own, the module could be removed first, and `free_aux` would
/// jump into freed text (kmod/guest/check.c's `rmmod-aux` fault case).
struct AuxPriv<T: PmuOps> {
    buffer: KBox<T::AuxBuffer>,
    module: *mut bindings::module,
}

/// The driver's buffer of a transaction: what `perf_aux_output_begin()`
/// returned (`rb->aux_priv`).
///
/// # Safety
/// `aux_priv` is the private data of an AUX buffer that `Adapter::<T>`'s
/// `setup_aux` made, whose transaction is open (the buffer lives until it
/// ends and `free_aux` runs).
pub(crate) unsafe fn aux_buffer<T: PmuOps>(aux_priv: NonNull<c_void>) -> NonNull<T::AuxBuffer> {
    // SAFETY: an `AuxPriv<T>` the adapter boxed, alive (this function's
    // `# Safety`).
    NonNull::from(unsafe { &*(*aux_priv.as_ptr().cast::<AuxPriv<T>>()).buffer })
}

/// The callbacks the perf core calls, each finding the driver from the
/// event's `pmu` and passing it a borrowed [`Event`].
pub(crate) struct Adapter<T: PmuOps>(PhantomData<T>);

impl<T: PmuOps> Adapter<T> {
    /// # Safety
    /// The perf core's `event_init` of an event being opened on a PMU
    /// registered by a `Registration<T>`.
    unsafe extern "C" fn event_init(event: *mut bindings::perf_event) -> c_int {
        // SAFETY: the perf core's event, in its callback (this function's
        // `# Safety`).
        let (reg, event) = unsafe { Registration::<T>::of(event) };
        if event.attr_type() != reg.type_() as u32 {
            return ENOENT.to_errno();
        }
        match reg.ops.event_init(event) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    /// The perf core's `add` of an event of a `Registration<T>`'s PMU.
    unsafe extern "C" fn add(event: *mut bindings::perf_event, flags: c_int) -> c_int {
        // SAFETY: as in `event_init`.
        let (reg, event) = unsafe { Registration::<T>::of(event) };
        match reg.ops.add(event, flags as u32) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    /// As `add`.
    unsafe extern "C" fn del(event: *mut bindings::perf_event, flags: c_int) {
        // SAFETY: as in `event_init`.
        let (reg, event) = unsafe { Registration::<T>::of(event) };
        reg.ops.del(event, flags as u32);
    }

    /// # Safety
    /// As `add`.
    unsafe extern "C" fn start(event: *mut bindings::perf_event, flags: c_int) {
        // SAFETY: as in `event_init`.
        let (reg, event) = unsafe { Registration::<T>::of(event) };
        reg.ops.start(event, flags as u32);
    }

    /// # Safety
    /// As `add`.
    unsafe extern "C" fn stop(event: *mut bindings::perf_event, flags: c_int) {
        // SAFETY: as in `event_init`.
        let (reg, event) = unsafe { Registration::<T>::of(event) };
        reg.ops.stop(event, flags as u32);
    }

    /// # Safety
    /// As `add`.
    unsafe extern "C" fn read(event: *mut bindings::perf_event) {
        // SAFETY: as in `event_init`.
        let (reg, event) = unsafe { Registration::<T>::of(event) };
        reg.ops.read(event);
    }

    /// # Safety
    /// The perf core's `setup_aux` for an event of a `Registration<T>`'s
    /// PMU: `pages` holds `nr_pages` page addresses that stay valid until
    /// `free_aux` of the result returns.
    unsafe extern "C" fn setup_aux(
        event: *mut bindings::perf_event,
        pages: *mut *mut c_void,
        nr_pages: c_int,
        overwrite: bool,
    ) -> *mut c_void {
        // SAFETY: as in `event_init`.
        let (reg, event) = unsafe { Registration::<T>::of(event) };
        let Ok(nr) = usize::try_from(nr_pages) else {
            return core::ptr::null_mut();
        };
        if pages.is_null() {
            return core::ptr::null_mut();
        }
        // SAFETY: `nr_pages` page addresses (this function's `# Safety`),
        // borrowed for the call.
        let pages = unsafe { core::slice::from_raw_parts(pages.cast::<*mut u8>(), nr) };
        // The box first: once the driver has made its buffer, nothing fails.
        let Ok(slot) = KBox::<AuxPriv<T>>::new_uninit(GFP_KERNEL) else {
            pr_warn!("setup_aux of {} pages: no memory\n", nr);
            return core::ptr::null_mut();
        };
        let buffer = match reg.ops.setup_aux(event, pages, overwrite) {
            Ok(buffer) => buffer,
            Err(e) => {
                pr_warn!("setup_aux of {} pages: {:?}\n", nr, e);
                return core::ptr::null_mut();
            }
        };
        // SAFETY: set at registration, read-only after.
        let module = unsafe { (*reg.pmu.get()).module };
        // SAFETY: the module holds a reference already (the event of its
        // PMU this callback is for holds one: perf_init_event()'s
        // try_module_get()).
        unsafe { bindings::pax_module_get(module) };
        KBox::into_raw(KBox::write(slot, AuxPriv { buffer, module })).cast()
    }

    /// # Safety
    /// The perf core's `free_aux` of what `setup_aux` returned, once.
    unsafe extern "C" fn free_aux(aux: *mut c_void) {
        if aux.is_null() {
            return;
        }
        // SAFETY: `setup_aux`'s `KBox::into_raw`, given back once.
        let AuxPriv { buffer, module } =
            KBox::into_inner(unsafe { KBox::from_raw(aux.cast::<AuxPriv<T>>()) });
        if T::free_aux(buffer).is_ok() {
            // SAFETY: the reference `setup_aux` took for this buffer. Last:
            // no instruction of the module runs after it (LLVM makes it a
            // tail call, which kmod/rust/test checks), so an rmmod that
            // follows at once cannot pull the text from under it.
            unsafe { bindings::module_put(module) };
        }
    }

    /// # Safety
    /// The perf core's `snapshot_aux` of an event of a `Registration<T>`'s
    /// PMU; `handle` is the sample's open output handle.
    unsafe extern "C" fn snapshot_aux(
        event: *mut bindings::perf_event,
        handle: *mut bindings::perf_output_handle,
        size: c_ulong,
    ) -> c_long {
        // SAFETY: as in `event_init`.
        let (reg, event) = unsafe { Registration::<T>::of(event) };
        // SAFETY: the sample's handle for this callback, and
        // `perf_output_copy()` (the registration found it).
        let mut output = unsafe { OutputHandle::new(reg.output_copy, handle) };
        let n = reg.ops.snapshot_aux(event, &mut output, size as u64);
        n.min(c_long::MAX as u64) as c_long
    }
}

/// A registered PMU: the `struct pmu` the perf core calls through
/// [`Adapter<T>`], and the driver `T` it calls.
///
/// # Invariants
/// Boxed (it never moves) from before `perf_pmu_register()` until after
/// `perf_pmu_unregister()`, which `drop` calls if `registered`; the perf
/// core calls the callbacks only with events of this `pmu`, so
/// `event->pmu` leads back here.
pub(crate) struct Registration<T: PmuOps> {
    pmu: Opaque<bindings::pmu>,
    ops: T,
    output_copy: OutputCopy,
    registered: bool,
}

// SAFETY: `pmu` belongs to the perf core once registered and is not
// touched here after but for `type`, which no longer changes; `ops` is
// `Send + Sync` (the trait's bound); `output_copy` is a function.
unsafe impl<T: PmuOps> Send for Registration<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: PmuOps> Sync for Registration<T> {}

impl<T: PmuOps> Registration<T> {
    /// Registers `ops` as the PMU `name` (`perf_pmu_register()`), owned by
    /// `module`, with the sysfs `attr_groups` and `PERF_PMU_CAP_*`
    /// `capabilities`; `snapshot_aux` writes through `output_copy`.
    ///
    /// # Safety
    /// `name`, `attr_groups` and `module` live until the registration is
    /// dropped; `output_copy` is `perf_output_copy()`.
    pub(crate) unsafe fn register(
        ops: T,
        name: &CStr,
        attr_groups: *mut *const bindings::attribute_group,
        capabilities: u32,
        module: *mut bindings::module,
        output_copy: OutputCopy,
    ) -> Result<KBox<Self>> {
        let pmu = bindings::pmu {
            module,
            attr_groups,
            task_ctx_nr: bindings::perf_event_task_context_perf_sw_context as c_int,
            capabilities: capabilities as c_int,
            event_init: Some(Adapter::<T>::event_init),
            add: Some(Adapter::<T>::add),
            del: Some(Adapter::<T>::del),
            start: Some(Adapter::<T>::start),
            stop: Some(Adapter::<T>::stop),
            read: Some(Adapter::<T>::read),
            setup_aux: Some(Adapter::<T>::setup_aux),
            free_aux: Some(Adapter::<T>::free_aux),
            snapshot_aux: Some(Adapter::<T>::snapshot_aux),
            ..Default::default()
        };
        let mut reg = KBox::new(
            Registration {
                pmu: Opaque::new(pmu),
                ops,
                output_copy,
                registered: false,
            },
            GFP_KERNEL,
        )?;
        // SAFETY: `pmu` is filled in and boxed; the strings and groups live
        // long enough (this function's `# Safety`).
        let r = unsafe { bindings::perf_pmu_register(reg.pmu.get(), name.as_ptr().cast(), -1) };
        if r != 0 {
            return Err(Error::from_errno(r));
        }
        // INVARIANT: registered, boxed.
        reg.registered = true;
        Ok(reg)
    }

    /// The PMU's type (`pmu->type`), which `attr.type` names.
    pub(crate) fn type_(&self) -> c_int {
        // SAFETY: set by the registration, read-only after.
        unsafe { (*self.pmu.get()).type_ }
    }

    /// The driver.
    pub(crate) fn ops(&self) -> &T {
        &self.ops
    }

    /// The registration of an event's PMU, and the event.
    ///
    /// # Safety
    /// `event` is an event of a PMU a `Registration<T>` registered, passed
    /// to one of its callbacks now running.
    unsafe fn of<'a>(event: *mut bindings::perf_event) -> (&'a Self, &'a Event) {
        // SAFETY: the perf core's event for the callback (this function's
        // `# Safety`).
        let event = unsafe { Event::from_raw(event) };
        // SAFETY: `event->pmu` is the `pmu` field of a live registration
        // (the type invariant; `Opaque` is transparent).
        let reg = unsafe { &*kernel::container_of!(event.pmu(), Self, pmu) };
        (reg, event)
    }
}

impl<T: PmuOps> Drop for Registration<T> {
    fn drop(&mut self) {
        if self.registered {
            // SAFETY: registered, unregistered once; no event is left
            // (`pmu->module` holds the module while one exists).
            unsafe { bindings::perf_pmu_unregister(self.pmu.get()) };
        }
    }
}
