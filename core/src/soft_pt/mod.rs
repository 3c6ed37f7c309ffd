// SPDX-License-Identifier: MIT OR Apache-2.0
//! A software Intel PT: what the tracer hardware of one CPU does, for
//! CPUs that have none (a VM, an emulator, another vendor's CPU).
//!
//! - [`tracer`]: the tracer itself ([`tracer::SoftTracer`]), programmed
//!   through the driver's seam ([`pt::hw::TraceHw`](crate::pt::hw::TraceHw):
//!   `RTIT_CTL`, the output MSRs, `RTIT_STATUS`) and writing through the
//!   driver's ToPA tables as the hardware does;
//! - [`stream`]: the packets it emits for what the CPU executes, by the
//!   hardware's rules (PSB+, FUP + TIP/TIP.PGD for asynchronous events,
//!   return compression), and [`packet`], their encodings with the
//!   hardware's IP compression;
//! - its flow sources, which turn what a thread did into the
//!   [`stream::TraceEvent`]s the tracer takes: [`step`], a single-step
//!   tracer's retired instructions (with [`insn`], the instruction length
//!   decoder and branch classifier it needs); [`blocks`], an emulator's
//!   executed translation blocks; and [`tick`], a periodic interrupt's view
//!   of where the CPU was.
//!
//! It reads what the driver writes ([`pt::config`](crate::pt::config),
//! [`pt::topa`](crate::pt::topa)) as the hardware reads it; the driver
//! ([`pt`](crate::pt)) knows nothing of it.

pub mod blocks;
pub mod insn;
pub mod packet;
pub mod step;
pub mod stream;
pub mod tick;
pub mod tracer;
