//! Sample records (spec §A.5, §E.2-§E.5): the size of every
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

pub use aux_block::{AuxSampling, IrqMask, NoIrqMask, SnapshotAux};
pub use data::{BranchStack, ReadGroupEntry, ReadValues, Regs, SampleData, StackUser};
pub use layout::{SampleLayout, prepare};
pub use write::output;

use crate::error::Result;
use crate::ring::{NestHook, OutputEvent, Ring};

/// Writes one sample the way Linux's `__perf_event_output` does: `prepare`
/// (no PMU call), reserve the record (`ENOSPC`: the sample is dropped,
/// counted lost by the ring, and the AUX PMU is **not** touched, spec H.3
/// S8), `output` (the AUX block from `snapshot_aux`), publish. `event` is the
/// output event (for a `PERF_RECORD_LOST` written first). `wakeup_events`
/// is the event's `attr.wakeup_events` when it has no `watermark`, else 0.
pub fn write_sample<H: NestHook, P, E: OutputEvent>(
    ring: &Ring<'_, H>,
    event: &mut E,
    attr: &crate::abi::PerfEventAttr,
    data: &SampleData<'_>,
    aux: Option<&AuxSampling<'_, '_, P>>,
    irq: &dyn IrqMask,
) -> Result<SampleLayout> {
    let layout = prepare(attr, data, aux)?;
    let mut handle = ring.begin(usize::from(layout.size), event)?;
    output(&mut handle, attr, data, &layout, aux, irq);
    if !attr.watermark() {
        handle.count_sample(attr.wakeup_events);
    }
    handle.end();
    Ok(layout)
}
