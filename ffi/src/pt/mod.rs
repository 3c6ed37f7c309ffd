// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PT-style PMU in C, split as Intel PT's driver is: a per-CPU object
//! (`struct perfaux_pt_cpu`: the software tracer, the PMU callbacks
//! add/del/start/stop, `snapshot_aux` into a C sink such as a kernel's
//! `perf_output_handle`, the ToPA PMI handler and the trace events that feed
//! the tracer) and a per-buffer object (`struct perfaux_pt_buffer`: the ToPA
//! tables over one AUX buffer's pages, made by `setup_aux`, ended by
//! `free_aux`). The CPU object reaches a buffer only through the AUX
//! transaction it holds: the `begin` callback hands it out, as
//! `perf_aux_output_begin` returns `rb->aux_priv`.
//!
//! The transactions are either a perfaux ring's AUX area
//! (`perfaux_pt_cpu_init_area`) or C's (`perfaux_pt_cpu_init`: a kernel
//! module's `perf_aux_output_begin/end`).

mod buffer;
mod cpu;
mod ops;
mod output;
mod step;
mod sysfs;
mod trace;

pub use buffer::*;
pub use cpu::*;
pub use ops::*;
pub use output::perfaux_aux_ops;
pub use step::*;
pub use sysfs::*;
pub use trace::*;
