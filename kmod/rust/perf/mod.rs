// SPDX-License-Identifier: GPL-2.0
//! The perf core as a PMU driver sees it, in safe Rust: the layer between
//! the C structures and calls (`bindings`) and a driver, which implements
//! [`PmuOps`] and touches no binding of the perf core itself, as
//! `rust/kernel/net/phy.rs` is to `drivers/net/phy/ax88796b_rust.rs`.
//!
//! - [`Event`]: a `struct perf_event` the perf core hands a callback, with
//!   the accessors a PMU reads and writes (`attr`, `id`, `hw.state`,
//!   `hw.config`);
//! - [`AuxHandle`]: the CPU's AUX output handle, over
//!   `perf_aux_output_begin/_flag/_end`;
//! - [`OutputHandle`]: a sample's output handle in `snapshot_aux`, a sink
//!   for the engine's copies (`perf_output_copy`);
//! - [`PmuOps`], `Adapter` and [`Registration`]: the callbacks a driver
//!   implements, the `extern "C"` trampolines the perf core calls, and the
//!   registered `struct pmu` that owns the driver.
//!
//! What a newer kernel's `rust/kernel` makes unnecessary elsewhere in the
//! module: `warn.rs` (`warn_on!`, rust/kernel/bug.rs), the hrtimer calls
//! of `cpu.rs` (`kernel::time::hrtimer`) and the hotplug callbacks'
//! bindings (`kernel::cpu`, as it grows). Per-CPU memory and this perf
//! layer have no mainline counterpart yet; `helpers.c` shrinks as
//! `rust/helpers/` grows.

mod aux;
mod event;
mod pmu;

pub(crate) use aux::{find_output_copy, AuxHandle, OutputCopy, OutputHandle};
pub(crate) use event::{eopnotsupp, Event, HES_STOPPED};
pub(crate) use pmu::{aux_buffer, PmuOps, Registration};
