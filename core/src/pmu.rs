// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PMU contract (Linux `struct pmu`, the parts AUX sampling uses), and
//! the platform services the event layer needs.

use crate::abi::PerfEventAttr;
use crate::caps::PmuCaps;
use crate::error::Result;
use crate::ring::OutputSink;

pub use crate::platform::Platform;

/// `PERF_EF_*`: flags of `add`, `start` and `stop`.
pub mod ef {
    /// `PERF_EF_START`: start counting/tracing right after `add`.
    pub const START: u32 = 0x01;
    /// `PERF_EF_RELOAD`: reload the counter on `start`.
    pub const RELOAD: u32 = 0x02;
    /// `PERF_EF_UPDATE`: update the counter on `stop`.
    pub const UPDATE: u32 = 0x04;
    /// `PERF_EF_PAUSE`: pause the AUX trace (`aux_pause`, Linux 6.13).
    pub const PAUSE: u32 = 0x08;
    /// `PERF_EF_RESUME`: resume the AUX trace (`aux_resume`).
    pub const RESUME: u32 = 0x10;
}

/// What a PMU learns about the event it drives.
#[derive(Clone, Copy, Debug)]
pub struct EventInfo<'e> {
    /// The event's attr.
    pub attr: &'e PerfEventAttr,
    /// The event's id.
    pub id: u64,
    /// The CPU it is bound to, or -1 (per task).
    pub cpu: i32,
    /// `hw.aux_paused` at the time of the call: the AUX trace is paused
    /// (`aux_start_paused`, or a pausing sampler's overflow). An AUX PMU
    /// must not start tracing while it is set, even under [`ef::START`].
    pub aux_paused: bool,
}

/// A PMU as the event layer drives it. All methods run on the CPU the
/// event is (being) scheduled on, with interrupts masked; `snapshot_aux`
/// also from NMI.
pub trait Pmu {
    /// What the PMU can do.
    fn caps(&self) -> PmuCaps;

    /// `pmu->event_init`'s own checks of an event being opened on this PMU
    /// (its `config` bits, say); an error refuses the open with `EINVAL`
    /// ([`Rule::PmuRefusedConfig`](crate::attr::Rule::PmuRefusedConfig)).
    /// The default accepts every attr.
    fn event_init(&self, attr: &crate::abi::PerfEventAttr) -> Result<()> {
        let _ = attr;
        Ok(())
    }

    /// Puts the event on this CPU's PMU (`pmu->add`); with [`ef::START`],
    /// starts it. An AUX PMU opens its AUX transaction here.
    fn add(&self, event: &EventInfo<'_>, flags: u32) -> Result<()>;

    /// Takes the event off the PMU (`pmu->del`), closing any AUX transaction.
    fn del(&self, event: &EventInfo<'_>, flags: u32);

    /// Starts (or, with [`ef::RESUME`], resumes) the event.
    fn start(&self, event: &EventInfo<'_>, flags: u32);

    /// Stops (or, with [`ef::PAUSE`], pauses) the event.
    fn stop(&self, event: &EventInfo<'_>, flags: u32);

    /// `pmu->setup_aux`: prepare to trace into `pages` (one pointer per 4 KiB
    /// page, in buffer order; a high-order block is its pages in a row) in
    /// overwrite (snapshot) or writable mode. The default refuses
    /// (`EOPNOTSUPP`), as for a PMU without an AUX area.
    fn setup_aux(&self, event: &EventInfo<'_>, pages: &[*mut u8], overwrite: bool) -> Result<()> {
        let _ = (event, pages, overwrite);
        Err(crate::error::Error::NotSupported)
    }

    /// `pmu->free_aux`: the AUX area set up for `event` is released.
    fn free_aux(&self, event: &EventInfo<'_>) {
        let _ = event;
    }

    /// `pmu->snapshot_aux` (`include/linux/perf_event.h`): copy at most `size` of the newest
    /// AUX bytes into `sink`, without changing the event's state; return the
    /// byte count (Linux: or a negative errno; the C ABI's callbacks do).
    /// Only PMUs with [`PmuCaps::SNAPSHOT_AUX`] are asked; the default
    /// copies nothing.
    ///
    /// # Errors
    /// Whatever stopped the copy; the sample's AUX block is zero-filled
    /// from there.
    fn snapshot_aux(
        &self,
        event: &EventInfo<'_>,
        sink: &mut dyn OutputSink,
        size: u64,
    ) -> Result<u64> {
        let _ = (event, sink, size);
        Ok(0)
    }
}
