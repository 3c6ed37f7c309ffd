// SPDX-License-Identifier: MIT OR Apache-2.0
//! The AUX block of a sample: its size (`perf_prepare_sample_aux`) and its bytes, from the
//! AUX leader PMU's `snapshot_aux` (`perf_aux_sample_output`, `perf_pmu_snapshot_aux`).

use crate::aux::AuxArea;
use crate::error::Result;
use crate::platform::IrqMask;
use crate::ring::OutputSink;

/// A PMU that can copy the newest bytes of its AUX trace into a sample
/// (Linux `pmu::snapshot_aux`, `include/linux/perf_event.h`).
pub trait SnapshotAux {
    /// Copies at most `size` bytes, the newest of the trace (oldest byte
    /// first), into `sink`; returns how many (Linux returns them, or a
    /// negative errno, as a `long`; the C ABI does too).
    ///
    /// # Errors
    /// Whatever stopped the copy (`EFAULT`: the sink took fewer bytes than
    /// given). The sample's AUX block is zero-filled from where it stopped.
    ///
    /// Called with interrupts masked, usually from NMI, on the CPU where the
    /// AUX event is active. Must not change the event's state (no stop/start
    /// visible to it, no AUX transaction end), must make the tracer's writes
    /// visible before reading them, and resume tracing only if it was running.
    fn snapshot_aux(&self, sink: &mut dyn OutputSink, size: u64) -> Result<u64>;
}

/// The AUX side of a sampler (`event->aux_event`): the AUX leader's area
/// (through the parent for inherited events), what copies its newest bytes
/// (the leader itself, whose PMU's `snapshot_aux` it calls, or any
/// [`SnapshotAux`]), and whether the leader is active on this CPU now.
///
/// `S` is a type, not a trait object, where the caller knows it (the event
/// layer's leader is an [`Event`](crate::event::Event)), so the sample path
/// makes one dynamic call into the PMU, as Linux does; `dyn SnapshotAux`
/// serves callers that do not.
pub struct AuxSampling<'x, 'a, S: SnapshotAux + ?Sized = dyn SnapshotAux + 'x> {
    /// The leader's AUX area.
    pub area: &'x AuxArea<'a>,
    /// The leader (its PMU's `snapshot_aux`).
    pub pmu: &'x S,
    /// The leader is ACTIVE and on this CPU (`perf_prepare_sample_aux`'s checks; otherwise
    /// Linux WARNs and the sample carries no AUX data).
    pub active_here: bool,
}

impl<S: SnapshotAux + ?Sized> AuxSampling<'_, '_, S> {
    /// `perf_prepare_sample_aux`: how many AUX bytes a sample asking for
    /// `size` (already clamped and rounded to 8) can carry: 0 if the leader
    /// is not active here, the area is unmapped, or a snapshot is running on
    /// it now (an NMI inside another sample's copy: `perf_prepare_sample_aux`'s
    /// `aux_in_sampling` check); else at
    /// most the area's size.
    pub(super) fn prepare(&self, size: u64) -> u64 {
        if !self.active_here || !self.area.is_mapped() || self.area.in_sampling() {
            return 0;
        }
        let size = size.min(self.area.size());
        (size + 7) & !7
    }

    /// `perf_pmu_snapshot_aux`: the PMU call between the `in_sampling`
    /// guard, with interrupts masked.
    pub(super) fn snapshot(
        &self,
        irq: &dyn IrqMask,
        sink: &mut dyn OutputSink,
        size: u64,
    ) -> Result<u64> {
        let state = irq.save();
        self.area.set_in_sampling(true);
        let n = self.pmu.snapshot_aux(sink, size);
        self.area.set_in_sampling(false);
        irq.restore(state);
        n
    }
}
