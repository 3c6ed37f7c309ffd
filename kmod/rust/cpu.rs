// SPDX-License-Identifier: GPL-2.0
//! The PT driver of one CPU (Intel PT's per-CPU `struct pt`): the perfaux
//! crate's `PtPmu` and `SoftTracer`, the AUX handle of the CPU's
//! transaction (`perf_aux_output_begin/_flag/_end`), the event added here,
//! and the ticker that feeds the tracer from real activity.
//!
//! The ticker is a per-CPU hrtimer (hard interrupt context): at each tick
//! it records where the traced context was interrupted, as the hardware
//! would trace the interrupt (`perfaux::soft_pt::tick`, which the C module
//! runs too).

use core::ptr::{addr_of, NonNull};

use kernel::prelude::*;
use kernel::types::Opaque;
use perfaux::aux::{AuxOutput, AuxTransaction};
use perfaux::local::LocalPtr;
use perfaux::pt::buffer::PtBuffer;
use perfaux::pt::pmu::PtPmu;
use perfaux::soft_pt::stream::{tsc_ratio, TraceEvent};
use perfaux::soft_pt::tick::{Tick, TickFlow};
use perfaux::soft_pt::tracer::SoftTracer;

use crate::bindings;
use crate::perf::{aux_buffer, AuxHandle, Event};
use crate::phys::KernelPhys;
use crate::pmu::Pax;
use crate::step::{StepCpu, HW_STEP};

/// The address map of every CPU's tracer and driver.
static PHYS: KernelPhys = KernelPhys;

/// The PT driver of one CPU.
///
/// Every field is touched on its CPU only: by the PMU callbacks (interrupts
/// off), the ticker (a hard interrupt) and `snapshot_aux` (the PMI, an
/// NMI), which only reaches `pmu` and, through it, its tracer and the AUX
/// output.
///
/// # Invariants
/// Pinned, built in place by [`PaxCpu::new`]'s initializer: `pmu`'s output
/// refers to `handle` and `event`, fields of the same object.
#[pin_data(PinnedDrop)]
pub(crate) struct PaxCpu {
    /// The handle of this CPU's AUX transaction: only `pmu`'s output opens
    /// and ends transactions on it, one at a time.
    #[pin]
    handle: AuxHandle,
    /// The PT event added on this CPU, or null: written by `add` and `del`
    /// (interrupts off), read by the ticker and the AUX output (`begin`).
    event: LocalPtr<bindings::perf_event>,
    /// The ticker's view of where the CPU was (`perfaux::soft_pt::tick`).
    ticks: TickFlow,
    /// The ticker: set up by the CPU's online callback, cancelled by its
    /// offline one.
    #[pin]
    timer: Opaque<bindings::hrtimer>,
    /// Nanoseconds between ticks.
    period_ns: i64,
    /// The driver, holding the tracer it programs.
    pmu: PtPmu<'static, KernelAux, SoftTracer<'static>, KernelPhys>,
    /// The single-step tracer of user code (`crate::step`).
    step: StepCpu,
}

/// The AUX transactions of the event on one CPU: the kernel's, on the
/// CPU's handle.
///
/// # Invariants
/// `handle` and `event` point to the fields of the `PaxCpu` whose `pmu`
/// holds this output, living as long as it.
pub(crate) struct KernelAux {
    handle: *const AuxHandle,
    event: *const LocalPtr<bindings::perf_event>,
}

// SAFETY: the `AuxOutput` contract: `perf_aux_output_begin()` takes a
// reference on the buffer (`aux_refcount`) that `perf_aux_output_end()`
// drops, so `rb->aux_priv`, the PaxBuf `setup_aux` made, stays valid until
// then (`free_aux` runs after the last reference is gone); and the core
// allows one transaction on a buffer at a time (`rb->aux_nest`).
unsafe impl AuxOutput for KernelAux {
    type Buffer = PtBuffer<'static>;

    fn begin(&self) -> perfaux::Result<(AuxTransaction, NonNull<PtBuffer<'static>>)> {
        // SAFETY: the type invariant.
        let (handle, event) = unsafe { (&*self.handle, (*self.event).load()) };
        if event.is_null() {
            return Err(perfaux::Error::NoSpace);
        }
        // SAFETY: the event added here, alive until `del`, which ends the
        // transaction first; the driver opens one transaction at a time.
        let opened = unsafe { handle.begin(Event::from_raw(event)) };
        let Some((buf, span)) = opened else {
            return Err(perfaux::Error::NoSpace);
        };
        let t = AuxTransaction {
            head: span.head,
            space: span.size,
            wakeup: span.wakeup,
        };
        // SAFETY: the buffer's aux_priv is what this PMU's setup_aux made
        // (only it makes the AUX area of an event of this PMU), valid until
        // the transaction ends.
        let buf = unsafe { aux_buffer::<Pax>(buf) };
        // SAFETY: as above.
        Ok((t, NonNull::from(unsafe { &(*buf.as_ptr()).pt })))
    }

    fn flag(&self, flags: u64) {
        // SAFETY: the type invariant; the driver calls `flag` only between
        // `begin` and `end`.
        unsafe { (*self.handle).flag(flags) };
    }

    fn end(&self, size: u64, snapshot_head: Option<u64>) {
        // SAFETY: as for `flag`.
        unsafe { (*self.handle).end(size, snapshot_head) };
    }
}

impl PaxCpu {
    /// One CPU's driver, built in place, ticking every `period_ns`, its
    /// tracer writing a PSB+ every `psb_period` bytes.
    pub(crate) fn new(period_ns: i64, psb_period: u64) -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            handle: AuxHandle::new(),
            event: LocalPtr::null(),
            ticks: TickFlow::new(),
            timer: Opaque::new(Default::default()),
            period_ns,
            step: StepCpu::new(),
            // INVARIANT: the output points to this object's fields, which
            // are pinned with it.
            pmu: PtPmu::with_output(
                {
                    let tracer = SoftTracer::new(&PHYS, psb_period);
                    // The CBR of every PSB+: CYC packets count TSC ticks.
                    // SAFETY: reads a kernel variable set at boot.
                    tracer.set_ratio(tsc_ratio(unsafe { bindings::pax_tsc_khz() }));
                    tracer
                },
                KernelPhys,
                KernelAux {
                    // SAFETY: only the addresses of the fields of the object
                    // being initialized are taken.
                    handle: unsafe { addr_of!((*this.as_ptr()).handle) },
                    // SAFETY: as above.
                    event: unsafe { addr_of!((*this.as_ptr()).event) },
                },
            ),
        }? Error)
    }

    /// The PT PMU of this CPU.
    pub(crate) fn pmu(&self) -> &PtPmu<'static, KernelAux, SoftTracer<'static>, KernelPhys> {
        &self.pmu
    }

    /// The event added here, or null.
    pub(crate) fn event(&self) -> *mut bindings::perf_event {
        self.event.load()
    }

    /// `add` put `event` here (null: `del` took it off).
    pub(crate) fn set_event(&self, event: *mut bindings::perf_event) {
        self.event.store(event);
        self.ticks.reset();
    }

    /// Whether an AUX transaction is open here (Intel PT:
    /// `perf_get_aux(&pt->handle)`).
    pub(crate) fn tracing(&self) -> bool {
        self.handle.is_open()
    }

    /// The single-step tracer of this CPU.
    pub(crate) fn step(&self) -> &StepCpu {
        &self.step
    }

    /// Feeds the tracer one event, then handles the ToPA PMIs its writes
    /// raised (full-trace mode) as the hardware's PMI would, right after.
    pub(crate) fn trace(&self, event: TraceEvent) {
        self.pmu.hw().trace(event);
        for _ in 0..self.pmu.hw().take_pmi() {
            self.pmu.handle_pmi();
        }
    }

    /// Starts the ticker (the CPU's online callback, on that CPU).
    pub(crate) fn start_ticker(&self) {
        let t = self.timer.get();
        // SAFETY: this object's timer, not armed (offline cancelled it);
        // `tick` finds the object from it (`container_of`).
        unsafe {
            bindings::hrtimer_init(
                t,
                bindings::CLOCK_MONOTONIC as _,
                bindings::hrtimer_mode_HRTIMER_MODE_REL_PINNED_HARD,
            );
            (*t).function = Some(tick);
            bindings::hrtimer_start_range_ns(
                t,
                self.period_ns,
                0,
                bindings::hrtimer_mode_HRTIMER_MODE_REL_PINNED_HARD,
            );
        }
    }

    /// Stops the ticker and waits for a running tick (offline callback).
    pub(crate) fn stop_ticker(&self) {
        // SAFETY: this object's timer, initialized by `start_ticker` (the
        // offline callback runs only after the online one succeeded).
        unsafe { bindings::hrtimer_cancel(self.timer.get()) };
    }

    /// One tick: what the tracer records of the interrupted context.
    ///
    /// # Safety
    /// Called from the ticker, in a hard interrupt on this CPU.
    unsafe fn on_tick(&self) {
        // SAFETY: a hard interrupt (this function's `# Safety`): this CPU's
        // get_irq_regs(), stable while it runs.
        let regs = unsafe { bindings::pax_get_irq_regs() };
        // As intel_pt_interrupt(): only with a transaction open, for its event.
        if regs.is_null() || !self.tracing() {
            return;
        }
        // SAFETY: a transaction is open, so the handle's event is the
        // event added here, alive until `del`, which cannot run during
        // this interrupt; `regs` is the interrupted context's frame.
        let (event, user, ip) = unsafe {
            (
                self.handle.event(),
                bindings::pax_user_mode(regs),
                bindings::pax_instruction_pointer(regs),
            )
        };
        // A single-stepped event's trace is the stepper's alone.
        if event.is_stopped() || event.hw_config() & HW_STEP != 0 {
            return;
        }
        // What the interrupt looks like in the trace: perfaux::soft_pt::tick.
        let tick = Tick {
            ip: ip as u64,
            user,
            // SAFETY: reads the TSC; no memory.
            tsc: unsafe { bindings::pax_rdtsc_ordered() },
            handler: tick as *const () as u64,
            exclude_user: event.exclude_user(),
            exclude_kernel: event.exclude_kernel(),
        };
        self.ticks.tick(&tick, |e| self.trace(e));
    }
}

#[pinned_drop]
impl PinnedDrop for PaxCpu {
    fn drop(self: Pin<&mut Self>) {
        // The perf core deletes every event before the PMU goes away, and
        // del ends the transaction: none may be open here.
        if self.pmu.in_transaction() {
            crate::warn::warn("a CPU's driver torn down with an AUX transaction open");
        }
    }
}

/// The ticker's callback.
///
/// # Safety
/// Called by the hrtimer core for a timer `start_ticker` armed: the
/// `timer` field of a live `PaxCpu` on this CPU, in a hard interrupt.
unsafe extern "C" fn tick(timer: *mut bindings::hrtimer) -> bindings::hrtimer_restart {
    // SAFETY: the timer is a PaxCpu's `timer` field (this function's
    // `# Safety`; `Opaque` is transparent), and the PaxCpu lives.
    let cpu = unsafe { &*kernel::container_of!(timer, PaxCpu, timer) };
    // SAFETY: the running timer (hrtimer_forward_now(): the next tick,
    // one period after this one); a hard interrupt on the PaxCpu's CPU.
    unsafe {
        bindings::pax_hrtimer_forward_now(timer, cpu.period_ns);
        cpu.on_tick();
    }
    bindings::hrtimer_restart_HRTIMER_RESTART
}
