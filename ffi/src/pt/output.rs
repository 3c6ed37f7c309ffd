// SPDX-License-Identifier: MIT OR Apache-2.0
//! The AUX transactions a PT CPU object traces into: a perfaux ring's AUX
//! area, or C's (`perfaux_aux_ops`: a kernel's `perf_aux_output_begin/end`).

use core::ffi::{c_int, c_void};
use core::ptr::{self, NonNull};

use perfaux::aux::{AreaOutput, AuxOutput, AuxTransaction};
use perfaux::pt::buffer::PtBuffer;
use perfaux::{Error, Result, warn_on_once};

use super::buffer::{buffer_ref, perfaux_pt_buffer};

/// The AUX transactions of the event running on one CPU, run by C (a
/// kernel's: `begin` is `perf_aux_output_begin` on the CPU's handle, `flag`
/// `perf_aux_output_flag`, `end` `perf_aux_output_end` after setting
/// `handle->head` when `has_head`). Called from the PMU callbacks and the
/// PMI on that CPU, never nested.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_aux_ops {
    /// Opens a transaction; fills the buffer's PT object (what `setup_aux`
    /// made: `rb->aux_priv`), its head, the bytes it may write, and the
    /// position where the consumer wants a wakeup; 0 or a negative errno.
    /// The buffer must stay valid until the matching `end` returns, and no
    /// other transaction on it may be open meanwhile.
    pub begin: Option<
        unsafe extern "C" fn(
            ctx: *mut c_void,
            buffer: *mut *const perfaux_pt_buffer,
            head: *mut u64,
            space: *mut u64,
            wakeup: *mut u64,
        ) -> c_int,
    >,
    /// Adds `PERF_AUX_FLAG_*` bits to the open transaction.
    pub flag: Option<unsafe extern "C" fn(ctx: *mut c_void, flags: u64)>,
    /// Ends it with `size` new bytes (in overwrite mode, after moving the
    /// head to `head` when `has_head` is 1). The buffer may be freed after.
    pub end: Option<unsafe extern "C" fn(ctx: *mut c_void, size: u64, has_head: c_int, head: u64)>,
    /// Their argument.
    pub ctx: *mut c_void,
}

/// Transactions C runs.
pub(super) struct COps(pub(super) perfaux_aux_ops);

// SAFETY: `perfaux_aux_ops`'s contract: the buffer `begin` fills stays valid
// until the matching `end` and is held by one transaction at a time; the
// live check below refuses anything that is not an initialized buffer.
unsafe impl AuxOutput for COps {
    type Buffer = PtBuffer<'static>;

    fn begin(&self) -> Result<(AuxTransaction, NonNull<PtBuffer<'static>>)> {
        let (Some(begin), Some(end)) = (self.0.begin, self.0.end) else {
            return Err(Error::NotSupported);
        };
        let mut t = AuxTransaction::default();
        let mut buffer: *const perfaux_pt_buffer = ptr::null();
        // SAFETY: the registered callback, with pointers to locals.
        let r = unsafe {
            begin(
                self.0.ctx,
                &mut buffer,
                &mut t.head,
                &mut t.space,
                &mut t.wakeup,
            )
        };
        if r != 0 {
            return Err(Error::from_errno(r).unwrap_or(Error::NoSpace));
        }
        // SAFETY: NULL or what C's setup_aux initialized (the contract);
        // the live word tells which.
        match unsafe { buffer_ref(buffer) } {
            Some(b) => Ok((t, NonNull::from(&b.buffer))),
            None => {
                warn_on_once!(true, "AUX begin gave no initialized PT buffer");
                // SAFETY: the registered callback: the transaction opened
                // above ends, with nothing written.
                unsafe { end(self.0.ctx, 0, 0, 0) };
                Err(Error::Invalid)
            }
        }
    }
    fn flag(&self, flags: u64) {
        if let Some(f) = self.0.flag {
            // SAFETY: the registered callback.
            unsafe { f(self.0.ctx, flags) }
        }
    }
    fn end(&self, size: u64, snapshot_head: Option<u64>) {
        if let Some(f) = self.0.end {
            let (has, head) = snapshot_head.map_or((0, 0), |h| (1, h));
            // SAFETY: the registered callback.
            unsafe { f(self.0.ctx, size, has, head) }
        }
    }
}

/// The transactions of a C PT driver.
pub(super) enum PtOutput {
    Area(AreaOutput<'static, 'static, PtBuffer<'static>>),
    Ops(COps),
}

// SAFETY: delegates to two implementations that uphold the contract.
unsafe impl AuxOutput for PtOutput {
    type Buffer = PtBuffer<'static>;

    fn begin(&self) -> Result<(AuxTransaction, NonNull<PtBuffer<'static>>)> {
        match self {
            PtOutput::Area(a) => a.begin(),
            PtOutput::Ops(o) => o.begin(),
        }
    }
    fn flag(&self, flags: u64) {
        match self {
            PtOutput::Area(a) => a.flag(flags),
            PtOutput::Ops(o) => o.flag(flags),
        }
    }
    fn end(&self, size: u64, snapshot_head: Option<u64>) {
        match self {
            PtOutput::Area(a) => a.end(size, snapshot_head),
            PtOutput::Ops(o) => o.end(size, snapshot_head),
        }
    }
}
