// SPDX-License-Identifier: GPL-2.0
//! The driver: Intel PT's callbacks (arch/x86/events/intel/pt.c) as the
//! perf layer's [`PmuOps`], over each CPU's [`PaxCpu`] (Intel PT's per-CPU
//! `struct pt`) and the AUX buffers of [`crate::buffer`]. No binding of the
//! perf core is called here: the layer (`crate::perf`) does that.

use kernel::ffi::c_uint;
use kernel::prelude::*;
use perfaux::pmu::ef;

use crate::buffer::PaxBuf;
use crate::cpu::PaxCpu;
use crate::percpu::PerCpu;
use crate::perf::{eopnotsupp, Event, OutputHandle, PmuOps, HES_STOPPED};
use crate::step;

/// The driver of every CPU.
pub(crate) struct Pax {
    cpus: PerCpu<PaxCpu>,
}

// SAFETY: each CPU's driver is touched on that CPU only (PaxCpu's rules),
// by the perf core's callbacks and the CPU's own interrupts.
unsafe impl Send for Pax {}
// SAFETY: as for `Send`.
unsafe impl Sync for Pax {}

impl Pax {
    /// Every CPU's driver, ticking every `period_ns` once its CPU is
    /// online, a PSB+ every `psb_period` bytes.
    pub(crate) fn new(period_ns: i64, psb_period: u64) -> Result<Pax> {
        let cpus = PerCpu::new(|_| PaxCpu::new(period_ns, psb_period))?;
        Ok(Pax { cpus })
    }

    /// The driver of CPU `cpu`, if it is a possible CPU.
    pub(crate) fn cpu(&self, cpu: c_uint) -> Option<&PaxCpu> {
        self.cpus.get(cpu)
    }

    /// This CPU's driver, from a callback the perf core makes with
    /// interrupts off (every one but `event_init` and the AUX set-up).
    fn this_cpu(&self) -> &PaxCpu {
        // SAFETY: interrupts are off in the callbacks that call this (the
        // `PmuOps` contexts), so no preemption while the reference is used.
        unsafe { self.this_cpu_irqs_off() }
    }

    /// This CPU's driver.
    ///
    /// # Safety
    /// Interrupts are off until the reference is dropped.
    pub(crate) unsafe fn this_cpu_irqs_off(&self) -> &PaxCpu {
        // SAFETY: no preemption while the reference is used (this
        // function's `# Safety`).
        unsafe { self.cpus.this_cpu() }
    }
}

/// `hw.state` after a start (`pt_event_start`): running with a transaction
/// open, else stopped (no buffer: unmapped, or full).
fn set_started(event: &Event, c: &PaxCpu) {
    event.set_hw_state(if c.tracing() { 0 } else { HES_STOPPED });
}

impl PmuOps for Pax {
    type AuxBuffer = PaxBuf;

    /// `pt_event_init`: the config bits the tracer implements
    /// (`pt_event_valid()`), and no branch stack.
    fn event_init(&self, event: &Event) -> Result {
        if perfaux::pt::config::PtConfig::from_attr(event.config()).is_err() {
            return Err(EINVAL);
        }
        if event.has_branch_stack() {
            return Err(eopnotsupp());
        }
        // Per task, the single-step tracer follows the event's thread; CPU
        // wide, every user thread while it runs on the CPU, perf included,
        // as Intel PT does.
        event.set_hw_config(if step::wanted(event) {
            step::HW_STEP
        } else {
            0
        });
        Ok(())
    }

    /// `pt_event_add`: one PT event per CPU; with `PERF_EF_START`, opens the
    /// AUX transaction and starts tracing.
    fn add(&self, event: &Event, flags: u32) -> Result {
        let c = self.this_cpu();
        if !c.event().is_null() {
            return Err(EBUSY);
        }
        c.set_event(event.as_ptr());
        // pt_event_add() reads the event's id and attr.config; this PMU does
        // not offer aux_pause, so the event is never paused.
        if let Err(e) = c
            .pmu()
            .add(event.id(), event.config(), false, flags & ef::START)
        {
            // A start that cannot trace (no AUX buffer) fails the add.
            c.set_event(core::ptr::null_mut());
            event.set_hw_state(HES_STOPPED);
            return Err(if e == perfaux::Error::Busy {
                EBUSY
            } else {
                EINVAL
            });
        }
        set_started(event, c);
        // add with PERF_EF_START starts it: the core calls no start.
        if flags & ef::START != 0 && !event.is_stopped() {
            c.step_start(event);
        }
        Ok(())
    }

    /// `pt_event_del`: stops tracing and ends the transaction.
    fn del(&self, event: &Event, _flags: u32) {
        self.stop(event, ef::UPDATE);
        let c = self.this_cpu();
        if c.event() == event.as_ptr() {
            c.set_event(core::ptr::null_mut());
        }
    }

    /// `pt_event_start`: a new transaction if none is open.
    fn start(&self, event: &Event, _flags: u32) {
        let c = self.this_cpu();
        if perfaux::warn_on_once!(
            c.event() != event.as_ptr(),
            "start of an event not added on this CPU"
        ) {
            return;
        }
        c.pmu().start(false, 0);
        set_started(event, c);
        if !event.is_stopped() {
            c.step_start(event);
        }
    }

    /// `pt_event_stop`: with `PERF_EF_UPDATE`, ends the transaction.
    fn stop(&self, event: &Event, flags: u32) {
        let c = self.this_cpu();
        if c.event() != event.as_ptr() {
            return;
        }
        c.step_stop();
        c.pmu().stop(false, flags & ef::UPDATE);
        event.set_hw_state(event.hw_state() | HES_STOPPED);
    }

    /// `pt_buffer_setup_aux`: the ToPA tables over the AUX pages (or the
    /// single-range output of a 1-page snapshot buffer).
    fn setup_aux(
        &self,
        _event: &Event,
        pages: &[*mut u8],
        overwrite: bool,
    ) -> Result<KBox<PaxBuf>> {
        PaxBuf::new(pages, overwrite)
    }

    /// `pt_buffer_free_aux`.
    fn free_aux(buffer: KBox<PaxBuf>) -> Result {
        PaxBuf::free(buffer)
    }

    /// `pt_event_snapshot_aux`, from the PMI: the newest `size` trace bytes
    /// into the sample's record.
    fn snapshot_aux(&self, _event: &Event, output: &mut OutputHandle, size: u64) -> u64 {
        let c = self.this_cpu();
        c.step_sample_point();
        match c.pmu().snapshot_aux(output, size) {
            Ok(n @ 1..) => n,
            // Nothing to copy: no transaction is open here (the AUX area is
            // being unmapped). Zeros instead of Intel PT's WARN, so the
            // sample's AUX block is whole (`copy_zeros` says why).
            _ => perfaux::aux::copy_zeros(output, size),
        }
    }
}
