// SPDX-License-Identifier: MIT OR Apache-2.0
//! Samples without the event layer, for callers that keep their own events
//! (a hypervisor, say): the layout of a sample (`perf_prepare_sample`) and
//! the whole write (prepare, reserve, output, end), the AUX block taken
//! from a PT PMU's or a C callback's `snapshot_aux`.

use core::ffi::{c_int, c_void};

use perfaux::Error;
use perfaux::aux::AuxArea;
use perfaux::ring::{FixedEvent, OutputSink};
use perfaux::sample::{AuxSampling, SampleData, SnapshotAux, prepare, write_sample};

use crate::attr::read_attr;
use crate::aux::{area_ref, perfaux_aux_area};
use crate::event::{perfaux_sample_data, sample_data};
use crate::platform::{CPlatform, perfaux_platform};
use crate::pt::{CpuBox, cpu_ref, perfaux_pt_cpu};
use crate::ring::{fixed_event, perfaux_output_event, perfaux_ring, ring_ref};
use crate::sink::{perfaux_sink, snapshot_from_c, with_c_sink};
use crate::storage::read_in;

/// Where a sample's AUX block comes from: the AUX leader's `area` and its
/// `snapshot_aux`, either a PT PMU (`pt`) or a callback (`snapshot`, used
/// when `pt` is NULL). `active_here` 0 means the leader is not active on
/// this CPU: the sample then carries no AUX data (Linux WARNs).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_sample_aux {
    /// The leader's AUX area.
    pub area: *const perfaux_aux_area,
    /// The leader's PT CPU object, or NULL.
    pub pt: *const perfaux_pt_cpu,
    /// Otherwise: copy at most `size` of the newest AUX bytes into `sink`;
    /// return the byte count or a negative errno.
    pub snapshot:
        Option<unsafe extern "C" fn(ctx: *mut c_void, sink: *const perfaux_sink, size: u64) -> i64>,
    /// Its argument.
    pub ctx: *mut c_void,
    /// 1 if the leader is active on this CPU.
    pub active_here: u32,
    /// Reserved, must be 0.
    pub reserved: u32,
}

/// The layout `perfaux_sample_prepare` computes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct perfaux_sample_layout {
    /// The record's size (`header.size`).
    pub size: u32,
    /// RAW bytes after their u32 size, padded.
    pub raw_size: u32,
    /// AUX bytes after the AUX size word (a multiple of 8).
    pub aux_size: u64,
}

/// A snapshot source from C.
enum Source {
    Pt(&'static CpuBox),
    Callback(
        unsafe extern "C" fn(*mut c_void, *const perfaux_sink, u64) -> i64,
        *mut c_void,
    ),
}

impl SnapshotAux for Source {
    fn snapshot_aux(&self, sink: &mut dyn OutputSink, size: u64) -> perfaux::Result<u64> {
        match self {
            Source::Pt(b) => b.snapshot_aux(sink, size),
            Source::Callback(f, ctx) => {
                // SAFETY: the registered callback; the C sink and the sink it
                // points to live for the whole call.
                let ret = with_c_sink(sink, |c| unsafe { f(*ctx, c, size) });
                snapshot_from_c(ret)
            }
        }
    }
}

/// Reads a C AUX source.
///
/// # Safety
/// `aux` NULL or readable, its pointers NULL or initialized objects.
unsafe fn source(aux: *const perfaux_sample_aux) -> Result<Option<Leader>, Error> {
    // SAFETY: NULL or readable (the caller's contract).
    let Some(a) = (unsafe { read_in(aux) }) else {
        return Ok(None);
    };
    if a.reserved != 0 || a.active_here > 1 {
        return Err(Error::Invalid);
    }
    // SAFETY: `a.area` is NULL or `struct perfaux_aux_area` storage (this function's `#
    // Safety`), which is what `area_ref` needs.
    let Some(area) = (unsafe { area_ref(a.area) }) else {
        return Err(Error::Invalid);
    };
    let src = if a.pt.is_null() {
        match a.snapshot {
            Some(f) => Source::Callback(f, a.ctx),
            None => return Err(Error::Invalid),
        }
    } else {
        // SAFETY: `a.pt` is NULL or `struct perfaux_pt_cpu` storage (this function's `#
        // Safety`), which is what `cpu_ref` needs.
        match unsafe { cpu_ref(a.pt) } {
            Some(b) => Source::Pt(b),
            None => return Err(Error::Invalid),
        }
    };
    Ok(Some(Leader {
        area,
        source: src,
        active_here: a.active_here == 1,
    }))
}

/// The AUX leader of a sample from C.
struct Leader {
    area: &'static AuxArea<'static>,
    source: Source,
    active_here: bool,
}

impl Leader {
    fn sampling(&self) -> AuxSampling<'_, 'static> {
        AuxSampling {
            area: self.area,
            pmu: &self.source,
            active_here: self.active_here,
        }
    }
}

/// Computes the layout of the sample `data` of an event with `attr` (a
/// normalized 136-byte attr) into `layout`, without writing anything
/// (`perf_prepare_sample`): with `PERF_SAMPLE_AUX`, the AUX size from
/// `aux_sample_size`, limited by `aux` (NULL: no leader, 0 bytes).
/// Returns 0, or `-EINVAL` for bad arguments or a sample that does not fit
/// a record.
///
/// # Safety
/// `attr` readable for 136 bytes; `data`, `aux` NULL or readable (and what
/// they point to as their docs say); `layout` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_sample_prepare(
    attr: *const c_void,
    data: *const perfaux_sample_data,
    aux: *const perfaux_sample_aux,
    layout: *mut perfaux_sample_layout,
) -> c_int {
    if layout.is_null() {
        return Error::Invalid.errno();
    }
    // SAFETY: `attr` is NULL or 136 readable bytes (this function's `# Safety`), which is what
    // `read_attr` needs.
    let Some(attr) = (unsafe { read_attr(attr) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: `data` is NULL or readable sample data whose pointers are readable for their
    // lengths (this function's `# Safety`), which is what `sample_data` needs.
    let Ok(sample) = (unsafe { sample_data(data) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: `aux` is NULL or a readable `struct perfaux_sample_aux` naming NULL or
    // initialized objects (this function's `# Safety`), which is what `source` needs.
    let src = match unsafe { source(aux) } {
        Ok(s) => s,
        Err(e) => return e.errno(),
    };
    let sampling = src.as_ref().map(Leader::sampling);
    match prepare(&attr, &sample, sampling.as_ref()) {
        Ok(l) => {
            let out = perfaux_sample_layout {
                size: u32::from(l.size),
                raw_size: l.raw_size,
                aux_size: l.aux_size,
            };
            // SAFETY: non-null and writable (the caller's contract).
            unsafe { layout.write_unaligned(out) };
            0
        }
        Err(e) => e.errno(),
    }
}

/// Writes one sample of an event with `attr` into `ring` (prepare, begin,
/// output, end, as `perf_event_output`): `event` gives the identity fields
/// (its `sample_id`: pid/tid, time, id, stream id, cpu) and, with
/// `has_sample_id`, the trailer of a `PERF_RECORD_LOST` written first;
/// `data` the payload; `aux` the AUX block's source (NULL: none); `platform`
/// masks interrupts around the snapshot (NULL: already masked). Returns the
/// record's size, `-ENOSPC` if the ring refused it, `-EINVAL` for bad
/// arguments.
///
/// # Safety
/// As `perfaux_sample_prepare`; `ring` NULL or ring storage; `event` and
/// `platform` NULL or readable; on the ring's CPU, from any context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_sample_write(
    ring: *const perfaux_ring,
    attr: *const c_void,
    event: *const perfaux_output_event,
    data: *const perfaux_sample_data,
    aux: *const perfaux_sample_aux,
    platform: *const perfaux_platform,
) -> c_int {
    // SAFETY: `ring` is NULL or `struct perfaux_ring` storage (this function's `# Safety`),
    // which is what `ring_ref` needs.
    let Some(ring) = (unsafe { ring_ref(ring) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: `attr` is NULL or 136 readable bytes (this function's `# Safety`), which is what
    // `read_attr` needs.
    let Some(attr) = (unsafe { read_attr(attr) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: NULL or readable (the caller's contract).
    let Some(e) = (unsafe { read_in(event) }) else {
        return Error::Invalid.errno();
    };
    let Some(mut fixed): Option<FixedEvent> = fixed_event(&e) else {
        return Error::Invalid.errno();
    };
    // SAFETY: `data` is NULL or readable sample data whose pointers are readable for their
    // lengths (this function's `# Safety`), which is what `sample_data` needs.
    let Ok(sample) = (unsafe { sample_data(data) }) else {
        return Error::Invalid.errno();
    };
    let s = e.sample_id;
    let sample = SampleData {
        pid: s.pid,
        tid: s.tid,
        time: s.time,
        id: s.id,
        stream_id: s.stream_id,
        cpu: s.cpu,
        ..sample
    };
    // SAFETY: `aux` is NULL or a readable `struct perfaux_sample_aux` naming NULL or
    // initialized objects (this function's `# Safety`), which is what `source` needs.
    let src = match unsafe { source(aux) } {
        Ok(s) => s,
        Err(err) => return err.errno(),
    };
    let sampling = src.as_ref().map(Leader::sampling);
    // SAFETY: NULL or readable (the caller's contract).
    let irq = unsafe { read_in(platform) }.map(CPlatform);
    let mask: &dyn perfaux::sample::IrqMask = match &irq {
        Some(p) => p,
        None => &perfaux::sample::NoIrqMask,
    };
    match write_sample(ring, &mut fixed, &attr, &sample, sampling.as_ref(), mask) {
        Ok(l) => c_int::from(l.size),
        Err(err) => err.errno(),
    }
}
