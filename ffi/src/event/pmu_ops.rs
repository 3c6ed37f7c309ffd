// SPDX-License-Identifier: MIT OR Apache-2.0
//! A PMU whose callbacks are C functions (`struct perfaux_pmu_ops`), as
//! the engine's [`Pmu`].

use core::ffi::{c_int, c_void};

use perfaux::Error;
use perfaux::PmuCaps;
use perfaux::pmu::{EventInfo, Pmu};
use perfaux::ring::OutputSink;

use crate::sink::{perfaux_sink, snapshot_from_c, with_c_sink};

/// A PMU whose callbacks are C functions (a counter, say). `caps` are
/// `PERFAUX_CAP_*` bits. A NULL callback does nothing (`add` succeeds,
/// `snapshot_aux` copies nothing). Every callback gets the event's id; all
/// run on the event's CPU with interrupts masked, `snapshot_aux` (and
/// `start`/`stop` with `PERFAUX_EF_RESUME`/`PAUSE`) possibly in PMI context.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_pmu_ops {
    /// `PERFAUX_CAP_*` bits.
    pub caps: u32,
    /// Reserved, must be 0.
    pub reserved: u32,
    /// `pmu->add`: 0 or a negative errno.
    pub add: Option<
        unsafe extern "C" fn(ctx: *mut c_void, id: u64, flags: u32, aux_paused: u32) -> c_int,
    >,
    /// `pmu->del`.
    pub del: Option<unsafe extern "C" fn(ctx: *mut c_void, id: u64, flags: u32)>,
    /// `pmu->start`.
    pub start: Option<unsafe extern "C" fn(ctx: *mut c_void, id: u64, flags: u32, aux_paused: u32)>,
    /// `pmu->stop`.
    pub stop: Option<unsafe extern "C" fn(ctx: *mut c_void, id: u64, flags: u32, aux_paused: u32)>,
    /// `pmu->snapshot_aux`: copy at most `size` of the newest AUX bytes into
    /// `sink`; return the byte count or a negative errno.
    pub snapshot_aux: Option<
        unsafe extern "C" fn(
            ctx: *mut c_void,
            id: u64,
            sink: *const perfaux_sink,
            size: u64,
        ) -> i64,
    >,
    /// Their argument.
    pub ctx: *mut c_void,
}

/// A C PMU as the engine's.
pub(super) struct OpsPmu(pub(super) perfaux_pmu_ops);

impl Pmu for OpsPmu {
    fn caps(&self) -> PmuCaps {
        PmuCaps::from_bits(self.0.caps).unwrap_or(PmuCaps::NONE)
    }
    fn add(&self, e: &EventInfo<'_>, flags: u32) -> perfaux::Result<()> {
        let Some(f) = self.0.add else {
            return Ok(());
        };
        // SAFETY: the registered callback.
        match unsafe { f(self.0.ctx, e.id, flags, u32::from(e.aux_paused)) } {
            0 => Ok(()),
            r => Err(Error::from_errno(r).unwrap_or(Error::Invalid)),
        }
    }
    fn del(&self, e: &EventInfo<'_>, flags: u32) {
        if let Some(f) = self.0.del {
            // SAFETY: the registered callback.
            unsafe { f(self.0.ctx, e.id, flags) }
        }
    }
    fn start(&self, e: &EventInfo<'_>, flags: u32) {
        if let Some(f) = self.0.start {
            // SAFETY: the registered callback.
            unsafe { f(self.0.ctx, e.id, flags, u32::from(e.aux_paused)) }
        }
    }
    fn stop(&self, e: &EventInfo<'_>, flags: u32) {
        if let Some(f) = self.0.stop {
            // SAFETY: the registered callback.
            unsafe { f(self.0.ctx, e.id, flags, u32::from(e.aux_paused)) }
        }
    }
    fn snapshot_aux(
        &self,
        e: &EventInfo<'_>,
        sink: &mut dyn OutputSink,
        size: u64,
    ) -> perfaux::Result<u64> {
        let Some(f) = self.0.snapshot_aux else {
            return Ok(0);
        };
        // SAFETY: the registered callback; the C sink and the sink it
        // points to live for the whole call.
        let ret = with_c_sink(sink, |c| unsafe { f(self.0.ctx, e.id, c, size) });
        snapshot_from_c(ret)
    }
}
