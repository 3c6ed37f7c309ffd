// SPDX-License-Identifier: MIT OR Apache-2.0
//! The overflow of a sampling event (`__perf_event_overflow` ->
//! `perf_event_output`): the sample with its AUX block from the leader's
//! `snapshot_aux`, and AUX pause/resume around it.

use super::{Event, EventState, Identity};
use crate::abi::sample_type as st;
use crate::error::{Error, Result};
use crate::pmu::{Platform, ef};
use crate::ring::OutputSink;
use crate::sample::{AuxSampling, SampleData, SampleLayout, SnapshotAux, write_sample};
use crate::sync::Ordering;

/// An AUX event copies the newest bytes of its trace through its PMU
/// (`perf_pmu_snapshot_aux`: `event->pmu->snapshot_aux(event, ...)`): the
/// sample layer's one call into the leader's PMU.
impl SnapshotAux for Event<'_> {
    #[inline]
    fn snapshot_aux(&self, sink: &mut dyn OutputSink, size: u64) -> Result<u64> {
        self.pmu.snapshot_aux(&self.info(), sink, size)
    }
}

impl<'g> Event<'g> {
    /// The overflow of a sampling event (`__perf_event_overflow` →
    /// `perf_event_output`), from PMI context: pause the AUX leader first if
    /// `aux_pause`; write the sample (with `aux_sample_size`, the AUX block
    /// from the leader's `snapshot_aux`) into the output buffer; resume the
    /// leader after if `aux_resume` (`perf_event_aux_pause`, Linux 6.13).
    ///
    /// `data` gives what the PMI knows (IP, misc, period, addr and the other
    /// payload fields); TID, TIME, ID, STREAM_ID and CPU are the event's and
    /// `platform`'s, whatever `data` says, as in Linux.
    ///
    /// `ENOSPC` when there is no buffer (nothing counted) or the ring refused
    /// the sample (counted in [`lost_samples`](Self::lost_samples); the AUX
    /// PMU is not touched).
    pub fn overflow(&self, platform: &dyn Platform, data: &SampleData<'_>) -> Result<SampleLayout> {
        let leader = self.aux_event();
        if self.attr.aux_pause() {
            if let Some(l) = leader {
                l.aux_pause_resume(true);
            }
        }
        let result = self.output_sample(platform, data, leader);
        if self.attr.aux_resume() {
            if let Some(l) = leader {
                l.aux_pause_resume(false);
            }
        }
        result
    }

    fn output_sample(
        &self,
        platform: &dyn Platform,
        data: &SampleData<'_>,
        leader: Option<&Event<'g>>,
    ) -> Result<SampleLayout> {
        let output = self.parent.unwrap_or(self);
        let Some(buffer) = output.buffer() else {
            return Err(Error::NoSpace);
        };
        let sampling = match leader {
            Some(l) if self.attr.sample_type & st::AUX != 0 && self.attr.aux_sample_size != 0 => {
                l.buffer().and_then(|b| b.aux).map(|area| {
                    let active_here =
                        l.state() == EventState::Active && l.oncpu() == platform.cpu() as i32;
                    AuxSampling {
                        area,
                        pmu: l,
                        active_here,
                    }
                })
            }
            _ => None,
        };
        // The identity fields come from the event and the platform, as
        // `perf_prepare_sample` fills them (`__perf_event_header__init_id`):
        // the current task, the event clock, the primary (parent's) id, the
        // event's own id, this CPU.
        let (pid, tid) = platform.current();
        let data = SampleData {
            pid,
            tid,
            time: platform.clock(),
            id: self.parent.map_or(self.id, |p| p.id),
            stream_id: self.id,
            cpu: platform.cpu(),
            ..*data
        };
        // The sampling event names itself in a PERF_RECORD_LOST
        // (`lost_event.id = event->id`) and in the refreshed identity.
        let mut identity = Identity {
            event: self,
            platform,
        };
        let result = write_sample(
            buffer.ring,
            &mut identity,
            &self.attr,
            &data,
            sampling.as_ref(),
            platform,
        );
        if result == Err(Error::NoSpace) {
            // Relaxed: a statistic (event->lost_samples).
            self.lost_samples.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// Pauses (`true`) or resumes the AUX trace of this AUX leader, once per
    /// state change, with interrupts masked by the caller (PMI).
    fn aux_pause_resume(&self, pause: bool) {
        if self.state() != EventState::Active {
            return;
        }
        // A same-CPU flag (hw.aux_paused), as perf_event_aux_pause()'s
        // READ_ONCE + WRITE_ONCE: only this PMI path writes it.
        if self.aux_paused.swap(pause) == pause {
            return;
        }
        if pause {
            self.pmu.stop(&self.info(), ef::PAUSE);
        } else {
            self.pmu.start(&self.info(), ef::RESUME);
        }
    }
}
