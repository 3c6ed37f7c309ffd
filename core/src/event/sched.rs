// SPDX-License-Identifier: MIT OR Apache-2.0
//! Scheduling: a group onto its CPU as one unit (`group_sched_in`, with
//! its rollback), off again (`event_sched_out`), and `PERF_EVENT_IOC_ENABLE`.

use core::ptr;

use super::{Event, EventState, Identity};
use crate::aux::write_itrace_start;
use crate::caps::PmuCaps;
use crate::error::Result;
use crate::pmu::{Platform, ef};
use crate::sync::Ordering;

impl<'g> Event<'g> {
    /// Schedules the event (and, for a leader, its group) onto `platform`'s
    /// CPU as one unit (`group_sched_in`): the event, then each sibling
    /// (`event_sched_in`: an ITRACE PMU's event first emits
    /// `PERF_RECORD_ITRACE_START`, once; events in `Error` or `Off` stay
    /// off). If the PMU refuses one, the siblings scheduled before it and the
    /// event itself are taken off again (`group_sched_in`'s `group_error`
    /// path) and the refusal is returned: the group runs whole or not at
    /// all. (Linux returns `-EAGAIN` to its scheduler, which never shows it
    /// to user space; the PMU's reason says more.)
    pub fn sched_in(&self, platform: &dyn Platform) -> Result<()> {
        if self.state() != EventState::Inactive {
            return Ok(());
        }
        self.sched_in_one(platform)?;
        let mut s = self.first_sibling.get();
        while let Some(e) = s {
            if let Err(refused) = e.sched_in_one(platform) {
                let mut undo = self.first_sibling.get();
                while let Some(done) = undo {
                    if ptr::eq(done, e) {
                        break;
                    }
                    done.sched_out_one();
                    undo = done.next_sibling.get();
                }
                self.sched_out_one();
                return Err(refused);
            }
            s = e.next_sibling.get();
        }
        Ok(())
    }

    /// `event_sched_in` of this event alone.
    fn sched_in_one(&self, platform: &dyn Platform) -> Result<()> {
        if self.state() != EventState::Inactive {
            return Ok(());
        }
        if self.pmu.caps().contains(PmuCaps::ITRACE)
            && !self.itrace_started.swap(true, Ordering::Relaxed)
        {
            if let Some(b) = self.buffer() {
                let (pid, tid) = platform.current();
                let _ = write_itrace_start(
                    b.ring,
                    &mut Identity {
                        event: self,
                        platform,
                    },
                    pid,
                    tid,
                );
            }
        }
        // Always START, as `event_sched_in`: a paused AUX event is added and
        // its transaction opened, but the PMU sees `aux_paused` and leaves
        // the trace off until a resume.
        self.pmu.add(&self.info(), ef::START)?;
        // Relaxed (both): same-CPU state, read by PMIs on this CPU only after
        // these stores in program order.
        self.oncpu.store(platform.cpu() as i32, Ordering::Relaxed);
        self.state
            .store(EventState::Active as u8, Ordering::Relaxed);
        Ok(())
    }

    /// Takes the event (and its group) off the PMU (`event_sched_out`).
    pub fn sched_out(&self) {
        let mut s = self.first_sibling.get();
        while let Some(e) = s {
            e.sched_out_one();
            s = e.next_sibling.get();
        }
        self.sched_out_one();
    }

    /// `event_sched_out` of this event alone.
    fn sched_out_one(&self) {
        if self.state() == EventState::Active {
            self.state
                .store(EventState::Inactive as u8, Ordering::Relaxed);
            self.pmu.del(&self.info(), ef::UPDATE);
            self.oncpu.store(-1, Ordering::Relaxed);
        }
    }

    /// Enables the event (`PERF_EVENT_IOC_ENABLE`): `Off` and `Error` become
    /// `Inactive`. A sampler whose AUX leader went away then runs unlinked
    /// and its samples carry no AUX data (`perf_put_aux_event`).
    pub fn enable(&self) {
        if matches!(self.state(), EventState::Off | EventState::Error) {
            self.state
                .store(EventState::Inactive as u8, Ordering::Relaxed);
        }
    }
}
