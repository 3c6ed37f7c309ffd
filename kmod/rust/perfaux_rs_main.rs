// SPDX-License-Identifier: GPL-2.0
//! perfaux_rs: perfaux's PT-style PMU as a Rust-for-Linux module, using the
//! `perfaux` crate directly (no C ABI in between). It registers the PMU
//! perfaux_pt.ko registers (kmod/perfaux_glue.c): ToPA tables over the AUX
//! pages `setup_aux` receives, a software tracer writing Intel PT packets
//! fed by a per-CPU ticker, `snapshot_aux` copying the newest trace bytes
//! into the sample through `perf_output_copy()` (found with a kprobe: it
//! is not exported), and Intel PT's sysfs attributes. The driver's state is
//! split as Intel PT's is: per CPU ([`cpu::PaxCpu`]) and per AUX buffer
//! ([`buffer::PaxBuf`]). With `step_user`, user-only events are traced by
//! single-stepping the thread ([`step`]), as perfaux_pt.ko's are.
//!
//! Files: `perf/` (the perf abstraction layer: events, the AUX and output
//! handles, the `PmuOps` trait, its C trampolines and the registration);
//! `task/` (the traced task's layer: its user registers and thread flags,
//! and the kernel hooks a tracer of user code needs); the driver: `pmu.rs`
//! (`PmuOps` for `Pax`), `cpu.rs` (one CPU's driver and ticker),
//! `buffer.rs` (the AUX buffer), `step.rs` (the single-step tracer, over
//! `task/`); `sysfs.rs` (format/, caps/),
//! `percpu.rs` (per-CPU memory), `phys.rs` (`virt_to_phys`), `params.rs`
//! (module parameters), `warn.rs` (`WARN()`), `helpers.c` (the kernel
//! inlines), `bindings.rs` (the generated bindings).

use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::ffi::{c_char, c_int, c_uint};

use kernel::prelude::*;

mod bindings;
mod buffer;
mod cpu;
mod params;
mod percpu;
mod perf;
mod phys;
mod pmu;
mod step;
mod sysfs;
mod task;
mod warn;

use params::module_param;
use perf::{find_output_copy, Registration};
use pmu::Pax;

/// `period_us`: microseconds between trace ticks per CPU.
static mut PERIOD_US: c_uint = 500;
module_param!(
    PERIOD_US,
    "period_us",
    param_ops_uint,
    "uint",
    "Microseconds between trace ticks per CPU (default 500)"
);

/// `psb_period`: bytes between PSB+ packet sequences.
static mut PSB_PERIOD: c_uint = 4096;
module_param!(
    PSB_PERIOD,
    "psb_period",
    param_ops_uint,
    "uint",
    "Bytes between PSB+ packet sequences (256..1048576, default 4096)"
);

/// `pmu_name`: the PMU's name.
static mut PMU_NAME: *mut c_char = c"perfaux_rs".as_ptr().cast::<c_char>().cast_mut();
module_param!(
    PMU_NAME,
    "pmu_name",
    param_ops_charp,
    "charp",
    "The PMU's name (default perfaux_rs; intel_pt on a machine without Intel PT)"
);

/// `step_user`: trace user-only events by single-stepping the thread.
static mut STEP_USER: bool = false;
module_param!(
    STEP_USER,
    "step_user",
    param_ops_bool,
    "bool",
    "Trace the user code of user-only events (intel_pt//u) by single-stepping it (default 0: the timer tracer)"
);

module_param!(
    step::RETIRED,
    "retired",
    ops = params::COUNT_OPS.0,
    "Instructions the single-step tracer has traced (what a decoder counts)"
);
module_param!(
    step::RESYNCS,
    "resyncs",
    ops = params::COUNT_OPS.0,
    "Single-step traps where the trace resynchronized (an instruction lost)"
);

/// Whether the single-step tracer is on (`step_user`).
pub(crate) fn step_user() -> bool {
    // SAFETY: the loader wrote the parameter before init; nothing writes
    // it after (read-only in sysfs).
    unsafe { STEP_USER }
}

module! {
    type: PerfauxRs,
    name: "perfaux_rs",
    author: "perfaux",
    description: "A PT-style AUX PMU whose driver is the perfaux crate, in Rust",
    license: "GPL",
}

/// The registered PMU, for the CPU hotplug callbacks (which get only a CPU
/// number): set before the hotplug state is set up, cleared after it is
/// removed. Acquire/Release: the callbacks, on other CPUs, see the built
/// PMU the store published.
static PAX: AtomicPtr<Pax> = AtomicPtr::new(core::ptr::null_mut());

/// The registered PMU, while the hotplug state and the step hooks, which
/// find it here, exist.
pub(crate) fn pax() -> Option<&'static Pax> {
    // Acquire: pairs with the Release store in `init`.
    let pax = PAX.load(Ordering::Acquire);
    // SAFETY: set to the registration's driver while it lives (see `PAX`).
    unsafe { pax.as_ref() }
}

/// The hotplug state's online callback, on `cpu`: its ticker starts.
///
/// # Safety
/// Called by the CPU hotplug core on `cpu`, while the state exists.
unsafe extern "C" fn cpu_online(cpu: c_uint) -> c_int {
    // Acquire: pairs with the Release store in `init`.
    let pax = PAX.load(Ordering::Acquire);
    // SAFETY: set while the hotplug state exists (see `PAX`).
    match unsafe { pax.as_ref() }.and_then(|p| p.cpu(cpu)) {
        Some(c) => {
            c.start_ticker();
            0
        }
        None => EINVAL.to_errno(),
    }
}

/// The offline callback, on `cpu`: its ticker stops.
///
/// # Safety
/// As `cpu_online`.
unsafe extern "C" fn cpu_offline(cpu: c_uint) -> c_int {
    // Acquire: pairs with the Release store in `init`.
    let pax = PAX.load(Ordering::Acquire);
    // SAFETY: as in `cpu_online`.
    if let Some(c) = unsafe { pax.as_ref() }.and_then(|p| p.cpu(cpu)) {
        c.stop_ticker();
    }
    0
}

/// The module: the registered PMU, its hotplug state and, with
/// `step_user`, the single-step tracer's hooks.
struct PerfauxRs {
    /// Taken (and so unregistered) in `drop`, before the warn hook goes.
    reg: Option<KBox<Registration<Pax>>>,
    hp_state: c_int,
    /// Unregistered after the PMU in `drop`.
    step_hooks: Option<KBox<task::hooks::Registration<step::Steps>>>,
}

impl kernel::Module for PerfauxRs {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // SAFETY: the loader wrote the parameters before init; nothing
        // writes them after (read-only in sysfs).
        let (period_us, psb_period, name) = unsafe { (PERIOD_US, PSB_PERIOD, PMU_NAME) };
        if !(256..=1 << 20).contains(&psb_period) || period_us == 0 || name.is_null() {
            pr_err!(
                "bad parameters (psb_period {}, period_us {})\n",
                psb_period,
                period_us
            );
            return Err(EINVAL);
        }
        let copy = find_output_copy()?;
        // The step hooks before the PMU, as perfaux_pt.ko's: a thread armed
        // with TF before its trap hook exists would die of SIGTRAP. They
        // find the PMU through PAX once it is set.
        let step_hooks = if step_user() {
            Some(task::hooks::Registration::<step::Steps>::register()?)
        } else {
            None
        };
        perfaux::warn::set_hook(Some(warn::hook));
        let registered =
            Pax::new(i64::from(period_us) * 1000, u64::from(psb_period)).and_then(|pax| {
                // SAFETY: `name` is the parameter's NUL-terminated string
                // (checked non-NULL above), which lives as long as the module,
                // as do the sysfs groups and `__this_module`; `copy` is
                // perf_output_copy().
                unsafe {
                    Registration::register(
                        pax,
                        core::ffi::CStr::from_ptr(name.cast()),
                        sysfs::groups(),
                        bindings::PERF_PMU_CAP_EXCLUSIVE | bindings::PERF_PMU_CAP_ITRACE,
                        (&raw const params::__this_module).cast_mut().cast(),
                        copy,
                    )
                }
            });
        let reg = match registered {
            Ok(r) => r,
            Err(e) => {
                pr_err!("perf_pmu_register: {:?}\n", e);
                perfaux::warn::set_hook(None);
                return Err(e);
            }
        };
        let ty = reg.type_();
        let pax: &Pax = reg.ops();
        // Release: pairs with the Acquire loads of the hotplug callbacks.
        PAX.store(core::ptr::from_ref(pax).cast_mut(), Ordering::Release);
        // cpuhp_setup_state(): the online callback runs on every online CPU now.
        // SAFETY: a name and two callbacks that live as long as the module.
        let hp_state = unsafe {
            bindings::__cpuhp_setup_state(
                bindings::cpuhp_state_CPUHP_AP_ONLINE_DYN,
                c"perf/perfaux_rs:online".as_ptr().cast(),
                true,
                Some(cpu_online),
                Some(cpu_offline),
                false,
            )
        };
        if hp_state < 0 {
            pr_err!("cpuhp_setup_state: {}\n", hp_state);
            PAX.store(core::ptr::null_mut(), Ordering::Release);
            drop(reg);
            perfaux::warn::set_hook(None);
            return Err(Error::from_errno(hp_state));
        }
        // SAFETY: a NUL-terminated string (the default, or what
        // param_ops_charp stored), checked non-NULL above.
        let name = unsafe { core::ffi::CStr::from_ptr(name.cast()) };
        pr_info!(
            "registered as {}, type {}, tick {} us, PSB every {} bytes{}\n",
            name.to_str().unwrap_or("?"),
            ty,
            period_us,
            psb_period,
            if step_user() {
                ", user code single-stepped"
            } else {
                ""
            }
        );
        Ok(PerfauxRs {
            reg: Some(reg),
            hp_state,
            step_hooks,
        })
    }
}

impl Drop for PerfauxRs {
    fn drop(&mut self) {
        // The tickers stop on every CPU (cpuhp_remove_state() runs the
        // offline callback), then the PMU goes; no event is left
        // (`pmu.module` holds the module while one exists).
        // SAFETY: the state `init` set up, removed once.
        unsafe { bindings::__cpuhp_remove_state(self.hp_state as bindings::cpuhp_state, true) };
        PAX.store(core::ptr::null_mut(), Ordering::Release);
        // perf_pmu_unregister(), then the per-CPU drivers drop.
        drop(self.reg.take());
        // No event is left (each stop disarmed its thread), so no thread
        // has TF from the stepper; the hooks go, and their running calls
        // finish.
        drop(self.step_hooks.take());
        perfaux::warn::set_hook(None);
        pr_info!("unregistered\n");
    }
}
