// SPDX-License-Identifier: MIT OR Apache-2.0
//! Sinks: where `snapshot_aux` writes. A C sink (`struct perfaux_sink`) as
//! the engine's [`OutputSink`], and the engine's sink handed to C callbacks.

use core::ffi::c_void;
use core::ptr;

use perfaux::ring::OutputSink;

/// Where `snapshot_aux` writes: `copy` takes `len` bytes and returns how
/// many it could **not** take (0 when all went in), like the kernel's
/// `perf_output_copy`. Called from PMI context.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_sink {
    /// The copy callback.
    pub copy:
        Option<unsafe extern "C" fn(ctx: *mut c_void, bytes: *const c_void, len: usize) -> usize>,
    /// Its argument.
    pub ctx: *mut c_void,
}

/// A C sink as the engine's output sink.
pub(crate) struct CSink(pub(crate) perfaux_sink);

impl OutputSink for CSink {
    fn copy(&mut self, bytes: &[u8]) -> usize {
        let Some(f) = self.0.copy else {
            return bytes.len();
        };
        // SAFETY: the registered callback, given `bytes.len()` readable
        // bytes; its answer is clamped to what was given.
        let left = unsafe { f(self.0.ctx, bytes.as_ptr().cast(), bytes.len()) };
        left.min(bytes.len())
    }
}

/// The engine's sink behind a C sink: `ctx` is a `&mut &mut dyn OutputSink`.
unsafe extern "C" fn engine_sink_copy(ctx: *mut c_void, bytes: *const c_void, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    if bytes.is_null() {
        return len;
    }
    // SAFETY: `ctx` is the `&mut &mut dyn OutputSink` that `with_c_sink`
    // passes for the duration of its closure; `bytes` is readable for `len`
    // (the C callback's contract, checked for NULL).
    unsafe {
        let sink = &mut *ctx.cast::<&mut dyn OutputSink>();
        sink.copy(core::slice::from_raw_parts(bytes.cast::<u8>(), len))
    }
}

/// Runs `f` with a C sink that writes into the engine's `sink` (for C
/// `snapshot_aux` callbacks given the sample being written).
pub(crate) fn with_c_sink<R>(sink: &mut dyn OutputSink, f: impl FnOnce(&perfaux_sink) -> R) -> R {
    let mut sink = sink;
    let c = perfaux_sink {
        copy: Some(engine_sink_copy),
        ctx: ptr::from_mut(&mut sink).cast(),
    };
    f(&c)
}
