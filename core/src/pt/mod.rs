// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PT-style PMU driver, the twin of `arch/x86/events/intel/pt.c`:
//! [`config`], the event's `attr.config` (the `intel_pt` format bits)
//! checked as `pt_event_valid` checks it, and the `RTIT_CTL` fields it
//! becomes; [`topa`], the output tables over the AUX pages and the output
//! position; [`buffer`], the driver's state of one AUX buffer (`struct
//! pt_buffer`); [`pmu`], the PMU of one CPU in snapshot mode (with
//! `snapshot_aux`) and full-trace mode (with the ToPA PMI handler); and
//! [`hw`], the tracer as the driver programs it (the `IA32_RTIT_*` MSRs);
//! and [`sysfs`], the PMU's `format/`, `caps/` and timing attributes.
//!
//! The driver knows the tracer only through [`hw::TraceHw`]: hardware, or
//! the software Intel PT of [`soft_pt`](crate::soft_pt), which reads the
//! same registers and tables the driver writes.

pub mod buffer;
pub mod config;
pub mod hw;
pub mod pmu;
pub mod sysfs;
pub mod topa;
