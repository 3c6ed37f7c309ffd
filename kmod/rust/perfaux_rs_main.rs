// SPDX-License-Identifier: GPL-2.0
//! perfaux_rs: perfaux's PT-style PMU as a Rust-for-Linux module, using the
//! `perfaux` crate directly (no C ABI in between).
//!
//! Work in progress: this first step proves the build and the bindings in
//! a CONFIG_RUST 6.12 kernel (kmod/rust/test): the `perfaux` crate
//! (edition 2024) and the module are compiled by Kbuild against the
//! kernel's own `core`, the perf bindings come from the kernel's own
//! headers at build time, and the module finds `perf_output_copy` (which
//! `snapshot_aux` needs and the kernel does not export) as the C module
//! does. The PMU itself is the next step.

use core::ffi::{c_char, c_uint, c_void};

use kernel::prelude::*;

mod params;
mod perf;

use params::module_param;

/// `period_us`: microseconds between trace ticks per CPU.
static mut PERIOD_US: c_uint = 500;
module_param!(PERIOD_US, "period_us", param_ops_uint, "uint",
    "Microseconds between trace ticks per CPU (default 500)");

/// `psb_period`: bytes between PSB+ packet sequences.
static mut PSB_PERIOD: c_uint = 4096;
module_param!(PSB_PERIOD, "psb_period", param_ops_uint, "uint",
    "Bytes between PSB+ packet sequences (256..1048576, default 4096)");

/// `pmu_name`: the PMU's name.
static mut PMU_NAME: *mut c_char = c"perfaux_pt".as_ptr().cast_mut();
module_param!(PMU_NAME, "pmu_name", param_ops_charp, "charp",
    "The PMU's name (default perfaux_pt; intel_pt on a machine without Intel PT)");

module! {
    type: PerfauxRs,
    name: "perfaux_rs",
    author: "perfaux",
    description: "perfaux's PT-style AUX PMU, in Rust (work in progress)",
    license: "GPL",
}

/// `perf_output_copy()` (kernel/events/internal.h): copies `len` bytes
/// into the output handle's record, returns how many did not fit.
type OutputCopy =
    unsafe extern "C" fn(handle: *mut perf::perf_output_handle, buf: *const c_void, len: c_uint) -> c_uint;

/// The address of `perf_output_copy`, from a kprobe registered on it and
/// removed at once: the symbol is not exported, and `snapshot_aux` must
/// write into the sample's handle.
fn find_output_copy() -> Result<OutputCopy> {
    let mut kp = perf::kprobe {
        symbol_name: c"perf_output_copy".as_ptr().cast(),
        ..Default::default()
    };
    // SAFETY: `kp` is a zeroed kprobe naming a symbol, alive until it is
    // unregistered below.
    let r = unsafe { perf::register_kprobe(&mut kp) };
    if r != 0 {
        pr_err!("cannot find perf_output_copy (kprobe: {}); snapshot_aux needs it\n", r);
        return Err(Error::from_errno(r));
    }
    let addr = kp.addr;
    // SAFETY: registered just above.
    unsafe { perf::unregister_kprobe(&mut kp) };
    if addr.is_null() {
        return Err(ENOENT);
    }
    // SAFETY: the kprobe sits on the first instruction of perf_output_copy,
    // whose prototype is OutputCopy.
    Ok(unsafe { core::mem::transmute::<*mut u8, OutputCopy>(addr.cast()) })
}

struct PerfauxRs;

impl kernel::Module for PerfauxRs {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // SAFETY: the loader wrote the parameters before init; nothing
        // writes them after (read-only in sysfs).
        let (period_us, psb_period, name) = unsafe { (PERIOD_US, PSB_PERIOD, PMU_NAME) };
        if !(256..=1 << 20).contains(&psb_period) || period_us == 0 || name.is_null() {
            pr_err!("bad parameters (psb_period {}, period_us {})\n", psb_period, period_us);
            return Err(EINVAL);
        }
        let copy = find_output_copy()?;
        // The crate's own checks run here as in the C module: Intel PT's
        // default configuration is valid, MTC is refused.
        let bits = perfaux::pt::config::bits::TSC | perfaux::pt::config::bits::NORETCOMP;
        let valid = perfaux::pt::config::PtConfig::from_attr(bits).is_ok()
            && perfaux::pt::config::PtConfig::from_attr(perfaux::pt::config::bits::MTC).is_err();
        if !valid {
            return Err(EINVAL);
        }
        // SAFETY: a NUL-terminated string (the default, or what
        // param_ops_charp stored), checked non-NULL above.
        let name = unsafe { core::ffi::CStr::from_ptr(name) };
        pr_info!(
            "loaded: perf_output_copy at {:p}, perfaux crate linked; pmu_name {}, period_us {}, psb_period {}\n",
            copy as *const (),
            name.to_str().unwrap_or("?"),
            period_us,
            psb_period
        );
        Ok(PerfauxRs)
    }
}

impl Drop for PerfauxRs {
    fn drop(&mut self) {
        pr_info!("unloaded\n");
    }
}
