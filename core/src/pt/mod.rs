// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PT-style PMU (after `arch/x86/events/intel/pt.c`): [`packet`], the Intel PT packet
//! encodings, with the hardware's IP compression; [`config`], the event's
//! `attr.config` (the `intel_pt` format bits) checked as `pt_event_valid`
//! checks it; [`stream`], the packets a tracer emits for what the CPU
//! executes, by the hardware's rules (PSB+ FUP = next instruction, FUP +
//! TIP/TIP.PGD for asynchronous events, return compression); [`topa`], the
//! output tables over the AUX pages and the output position; [`tracer`],
//! the tracer seam and a software tracer writing through the tables;
//! [`buffer`], the driver's state of one AUX buffer (`struct pt_buffer`);
//! [`pmu`], the PMU of one CPU in snapshot mode (with `snapshot_aux`) and
//! full-trace mode (with the ToPA PMI handler).

pub mod blocks;
pub mod buffer;
pub mod config;
mod output_regs;
pub mod packet;
pub mod pmu;
pub mod step;
pub mod stream;
pub mod topa;
pub mod tracer;
