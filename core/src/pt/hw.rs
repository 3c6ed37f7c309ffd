// SPDX-License-Identifier: MIT OR Apache-2.0
//! The tracer as the driver sees it: the `IA32_RTIT_*` MSRs it programs and
//! reads ([`TraceHw`]), and the `RTIT_STATUS` bits it acts on. `pt.c`
//! writes these with `wrmsrl`; perfaux's driver calls a [`TraceHw`], which
//! hardware access or a software tracer (`crate::soft_pt`) implements.

use super::config::PtConfig;

/// `RTIT_STATUS.Stopped` (bit 5).
pub const STATUS_STOPPED: u64 = 1 << 5;
/// `RTIT_STATUS.Error` (bit 4).
pub const STATUS_ERROR: u64 = 1 << 4;
/// `RTIT_STATUS.PacketByteCnt` (bits 48:32): bytes since the last PSB; a
/// PSB is sent when it is 0, so writing 0 asks for one.
pub const STATUS_PACKET_BYTE_CNT: u64 = 0x1_ffff << 32;

/// What a PT driver programs and reads (the `IA32_RTIT_*` MSRs).
pub trait TraceHw {
    /// Sets `RTIT_CTL.TraceEn` (tracing on).
    fn enable(&self);
    /// Clears `RTIT_CTL.TraceEn`; the output written so far is in memory
    /// when this returns (the WRMSR serializes; the driver's `wmb()`).
    fn disable(&self);
    /// Whether tracing is on.
    fn enabled(&self) -> bool;
    /// Sets `RTIT_CTL.ToPA`: output through ToPA tables (`true`), or into
    /// one contiguous range that wraps at its end (`false`, single-range
    /// output: `OUTPUT_BASE` is the range, `MASK_PTRS` bits 31:0 its size - 1
    /// and bits 63:32 the write offset).
    fn set_topa(&self, topa: bool);
    /// Writes `OUTPUT_BASE` (the current table's physical address) and
    /// `OUTPUT_MASK_PTRS`.
    fn set_output(&self, base: u64, mask_ptrs: u64);
    /// Reads `OUTPUT_BASE` and `OUTPUT_MASK_PTRS`.
    fn output(&self) -> (u64, u64);
    /// Writes the configuration fields of `RTIT_CTL` (`TSCEn`, `DisRETC`,
    /// `BranchEn`, `PSBFreq`), as `pt_config` does before it sets TraceEn.
    fn configure(&self, config: PtConfig);
    /// Reads `RTIT_STATUS`.
    fn status(&self) -> u64;
    /// Writes `RTIT_STATUS`.
    fn set_status(&self, status: u64);
}

/// A reference is programmed as what it refers to: a driver holds its
/// tracer by value, and that value may be a borrow (`&SoftTracer`, `&dyn
/// TraceHw`).
impl<T: TraceHw + ?Sized> TraceHw for &T {
    #[inline(always)]
    fn enable(&self) {
        (**self).enable();
    }
    #[inline(always)]
    fn disable(&self) {
        (**self).disable();
    }
    #[inline(always)]
    fn enabled(&self) -> bool {
        (**self).enabled()
    }
    #[inline(always)]
    fn set_topa(&self, topa: bool) {
        (**self).set_topa(topa);
    }
    #[inline(always)]
    fn set_output(&self, base: u64, mask_ptrs: u64) {
        (**self).set_output(base, mask_ptrs);
    }
    #[inline(always)]
    fn output(&self) -> (u64, u64) {
        (**self).output()
    }
    #[inline(always)]
    fn configure(&self, config: PtConfig) {
        (**self).configure(config);
    }
    #[inline(always)]
    fn status(&self) -> u64 {
        (**self).status()
    }
    #[inline(always)]
    fn set_status(&self, status: u64) {
        (**self).set_status(status);
    }
}
