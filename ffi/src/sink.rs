// SPDX-License-Identifier: MIT OR Apache-2.0
//! Sinks: where `snapshot_aux` writes. A C sink (`struct perfaux_sink`) as
//! the engine's [`OutputSink`], and the engine's sink handed to C callbacks.

use core::ffi::c_void;
use core::ptr;

use perfaux::ring::OutputSink;
use perfaux::{Error, Result};

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

/// A C `snapshot_aux`'s return (a byte count or a negative errno) as the
/// engine's. An errno the engine has no name for reads as `EFAULT`: the copy
/// failed, and the sample's AUX block is zero-filled either way.
pub(crate) fn snapshot_from_c(ret: i64) -> Result<u64> {
    if ret >= 0 {
        return Ok(ret as u64);
    }
    Err(i32::try_from(ret)
        .ok()
        .and_then(Error::from_errno)
        .unwrap_or(Error::Fault))
}

/// The engine's `snapshot_aux` result as C's: the byte count or a negative
/// errno.
pub(crate) fn snapshot_to_c(result: Result<u64>) -> i64 {
    match result {
        Ok(n) => i64::try_from(n).unwrap_or(i64::MAX),
        Err(e) => i64::from(e.errno()),
    }
}

/// Writes `size` zero bytes into `sink`, in pieces of at most 512, until
/// it takes no more; returns how many it took, or `-EINVAL` for a NULL
/// sink or one without a copy callback. What a kernel module's
/// `snapshot_aux` writes when its PMU has nothing to copy (no transaction
/// open here: the AUX area being unmapped), so that the sample's AUX block
/// is whole and the kernel does not WARN at a short copy
/// (`perfaux::aux::copy_zeros`). PMI-safe.
///
/// # Safety
/// `sink` NULL or readable; its callback callable with its `ctx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_sink_copy_zeros(sink: *const perfaux_sink, size: u64) -> i64 {
    // SAFETY: NULL or readable (this function's `# Safety`).
    let Some(sink) = (unsafe { crate::storage::read_in(sink) }).filter(|s| s.copy.is_some()) else {
        return i64::from(Error::Invalid.errno());
    };
    snapshot_to_c(Ok(perfaux::aux::copy_zeros(&mut CSink(sink), size)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_results_cross_the_boundary_both_ways() {
        assert_eq!(snapshot_from_c(4096), Ok(4096));
        assert_eq!(snapshot_from_c(0), Ok(0));
        assert_eq!(snapshot_from_c(-14), Err(Error::Fault));
        assert_eq!(snapshot_from_c(-22), Err(Error::Invalid));
        // -EIO has no name in the engine: a failed copy all the same.
        assert_eq!(snapshot_from_c(-5), Err(Error::Fault));
        assert_eq!(snapshot_from_c(i64::MIN), Err(Error::Fault));
        assert_eq!(snapshot_to_c(Ok(512)), 512);
        assert_eq!(snapshot_to_c(Err(Error::NoSpace)), -28);
        assert_eq!(snapshot_to_c(Ok(u64::MAX)), i64::MAX);
    }
}
