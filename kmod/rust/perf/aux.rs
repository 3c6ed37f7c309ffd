// SPDX-License-Identifier: GPL-2.0
//! The perf core's output handles as a PMU uses them: the AUX handle of
//! its transactions (`perf_aux_output_begin/_flag/_end`) and a sample's
//! handle in `snapshot_aux` (`perf_output_copy`).

use core::ptr::NonNull;
use kernel::ffi::{c_uint, c_void};
use kernel::prelude::*;
use kernel::types::Opaque;
use perfaux::ring::OutputSink;

use super::Event;
use crate::bindings;

/// The AUX output handle of one CPU's transactions (Intel PT's
/// `pt->handle`).
///
/// # Invariants
/// Used on its CPU only, with interrupts off or from the PMI, one
/// transaction at a time: the perf core's rule for an AUX handle.
#[repr(transparent)]
pub(crate) struct AuxHandle(Opaque<bindings::perf_output_handle>);

/// An open AUX transaction: where it starts and how much room it has.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AuxSpan {
    /// `handle->head`: the offset in the buffer where output starts.
    pub(crate) head: u64,
    /// `handle->size`: the bytes the PMU may write.
    pub(crate) size: u64,
    /// `handle->wakeup`: where the consumer wants a wakeup.
    pub(crate) wakeup: u64,
}

impl AuxHandle {
    /// A handle with no transaction open.
    pub(crate) fn new() -> Self {
        AuxHandle(Opaque::new(Default::default()))
    }

    /// `perf_aux_output_begin()`: opens a transaction on `event`'s AUX
    /// buffer; the buffer's private data (`rb->aux_priv`, what `setup_aux`
    /// returned) and the span, or `None` (no buffer, or no room).
    ///
    /// # Safety
    /// No transaction is open on this handle; `event` is the PMU's event
    /// on this CPU, live until the transaction ends.
    pub(crate) unsafe fn begin(&self, event: &Event) -> Option<(NonNull<c_void>, AuxSpan)> {
        // SAFETY: this CPU's handle with no transaction open, and the event
        // on the CPU (this function's `# Safety`).
        let buf = unsafe { bindings::perf_aux_output_begin(self.0.get(), event.as_ptr()) };
        let buf = NonNull::new(buf)?;
        // SAFETY: the transaction just opened filled the handle (`head` is
        // the union's member an AUX handle uses).
        let span = unsafe {
            let h = &*self.0.get();
            AuxSpan {
                head: h.__bindgen_anon_2.head as u64,
                size: h.size as u64,
                wakeup: h.wakeup as u64,
            }
        };
        Some((buf, span))
    }

    /// `perf_aux_output_flag()`: `PERF_AUX_FLAG_*` for the open transaction.
    ///
    /// # Safety
    /// A transaction is open on this handle.
    pub(crate) unsafe fn flag(&self, flags: u64) {
        // SAFETY: the open transaction's handle (this function's `# Safety`).
        unsafe { bindings::perf_aux_output_flag(self.0.get(), flags) };
    }

    /// `perf_aux_output_end()` with `size` bytes written; in overwrite mode
    /// the head first moves to `snapshot_head`, as `pt_update_head()` does.
    ///
    /// # Safety
    /// A transaction is open on this handle; it is closed after.
    pub(crate) unsafe fn end(&self, size: u64, snapshot_head: Option<u64>) {
        // SAFETY: the open transaction's handle (this function's `# Safety`).
        unsafe {
            if let Some(head) = snapshot_head {
                (*self.0.get()).__bindgen_anon_2.head = head as _;
            }
            bindings::perf_aux_output_end(self.0.get(), size as _);
        }
    }

    /// Whether a transaction is open (`perf_get_aux()` is not NULL).
    pub(crate) fn is_open(&self) -> bool {
        // SAFETY: this CPU's handle, read on its CPU (the type invariant).
        !unsafe { bindings::perf_get_aux(self.0.get()) }.is_null()
    }

    /// The event of the open transaction (`handle->event`).
    ///
    /// # Safety
    /// A transaction is open on this handle; the reference does not outlive
    /// it.
    pub(crate) unsafe fn event(&self) -> &Event {
        // SAFETY: the open transaction's event, alive until it ends (this
        // function's `# Safety`).
        unsafe { Event::from_raw((*self.0.get()).event) }
    }
}

/// `perf_output_copy()` (kernel/events/internal.h): copies `len` bytes
/// into the output handle's record, returns how many did not fit. Not
/// exported: found at load time with a kprobe.
pub(crate) type OutputCopy = unsafe extern "C" fn(
    handle: *mut bindings::perf_output_handle,
    buf: *const c_void,
    len: c_uint,
) -> c_uint;

/// A sample's output handle, as `snapshot_aux` receives it: an output sink
/// for the engine's copies.
///
/// # Invariants
/// `handle` is the open handle of the record being written, for the
/// duration of the `snapshot_aux` callback the value lives in; `copy` is
/// `perf_output_copy()`.
pub(crate) struct OutputHandle {
    copy: OutputCopy,
    handle: *mut bindings::perf_output_handle,
}

impl OutputHandle {
    /// The sample's handle `handle`, written through `copy`.
    ///
    /// # Safety
    /// `handle` is the handle the perf core passed to the running
    /// `snapshot_aux`; `copy` is `perf_output_copy()`. The value does not
    /// outlive the callback.
    pub(crate) unsafe fn new(copy: OutputCopy, handle: *mut bindings::perf_output_handle) -> Self {
        // INVARIANT: the caller's contract.
        OutputHandle { copy, handle }
    }
}

impl OutputSink for OutputHandle {
    fn copy(&mut self, bytes: &[u8]) -> usize {
        let len = bytes.len().min(c_uint::MAX as usize);
        // SAFETY: the handle of the record `snapshot_aux` is writing (the
        // type invariant), `len` readable bytes.
        let left = unsafe { (self.copy)(self.handle, bytes.as_ptr().cast(), len as c_uint) };
        bytes.len() - len + (left as usize).min(len)
    }
}

/// The address of `perf_output_copy`, from a kprobe registered on it and
/// removed at once: the symbol is not exported, and `snapshot_aux` must
/// write into the sample's handle.
pub(crate) fn find_output_copy() -> Result<OutputCopy> {
    let mut kp = bindings::kprobe {
        symbol_name: c"perf_output_copy".as_ptr().cast(),
        ..Default::default()
    };
    // SAFETY: `kp` is a zeroed kprobe naming a symbol, alive until it is
    // unregistered below.
    let r = unsafe { bindings::register_kprobe(&mut kp) };
    if r != 0 {
        pr_err!(
            "cannot find perf_output_copy (kprobe: {}); snapshot_aux needs it\n",
            r
        );
        return Err(Error::from_errno(r));
    }
    let addr = kp.addr;
    // SAFETY: registered just above.
    unsafe { bindings::unregister_kprobe(&mut kp) };
    if addr.is_null() {
        return Err(ENOENT);
    }
    // SAFETY: the kprobe sits on the first instruction of perf_output_copy,
    // whose prototype is OutputCopy.
    Ok(unsafe { core::mem::transmute::<*mut u8, OutputCopy>(addr.cast()) })
}
