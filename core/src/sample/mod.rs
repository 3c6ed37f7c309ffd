// SPDX-License-Identifier: MIT OR Apache-2.0
//! Sample records (`perf_prepare_sample`, `perf_output_sample`): the size of every
//! `PERF_SAMPLE_*` field in the kernel's order ([`prepare`], which never
//! touches the AUX PMU), and the writing of the record ([`output`]), whose
//! last field is the AUX block a PMU's `snapshot_aux` fills from PMI context.
//!
//! The flow Linux follows, and callers of this module too:
//! `prepare` → `Ring::begin(layout.size)` (a refused record is dropped and
//! the AUX PMU never touched) → `output` → `end`.

mod aux_block;
mod data;
mod layout;
mod write;

pub use crate::platform::{IrqMask, NoIrqMask};
pub use aux_block::{AuxSampling, SnapshotAux};
pub use data::{BranchStack, ReadGroupEntry, ReadValues, Regs, SampleData, StackUser};
pub use layout::{SampleLayout, prepare};
pub use write::output;

use crate::error::Result;
use crate::ring::{NestHook, OutputEvent, Ring};

/// Writes one sample the way Linux's `__perf_event_output` does: `prepare`
/// (no PMU call), reserve the record (`ENOSPC`: the sample is dropped,
/// counted lost by the ring, and the AUX PMU is **not** touched:
/// `perf_output_begin` fails before `perf_output_sample`), `output` (the AUX block from
/// `snapshot_aux`), publish; the sample
/// counts toward `attr.wakeup_events` unless the event uses a watermark.
///
/// `event` is the output event. When a `PERF_RECORD_LOST` goes first, Linux
/// refreshes the sample's identity fields from it (pid/tid, time, id,
/// stream_id, cpu: `__perf_output_begin` re-runs `perf_event_header__init_id`) and the
/// sample carries those: so does this.
pub fn write_sample<H: NestHook, E: OutputEvent, S: SnapshotAux + ?Sized>(
    ring: &Ring<'_, H>,
    event: &mut E,
    attr: &crate::abi::PerfEventAttr,
    data: &SampleData<'_>,
    aux: Option<&AuxSampling<'_, '_, S>>,
    irq: &dyn IrqMask,
) -> Result<SampleLayout> {
    let layout = prepare(attr, data, aux)?;
    let mut refreshed = None;
    let mut handle = ring.begin_sample(usize::from(layout.size), event, |id| {
        refreshed = Some(*id);
    })?;
    match refreshed {
        None => output(&mut handle, attr, data, &layout, aux, irq),
        Some(id) => {
            let refreshed = SampleData {
                pid: id.pid,
                tid: id.tid,
                time: id.time,
                id: id.id,
                stream_id: id.stream_id,
                cpu: id.cpu,
                ..*data
            };
            output(&mut handle, attr, &refreshed, &layout, aux, irq);
        }
    }
    if !attr.watermark() {
        handle.count_sample(attr.wakeup_events);
    }
    handle.end();
    Ok(layout)
}
