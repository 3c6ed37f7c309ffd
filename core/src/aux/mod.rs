// SPDX-License-Identifier: MIT OR Apache-2.0
//! The AUX area (spec §D): a second buffer of a ring, written by a hardware
//! tracer, with its own head and tail in the user page; [`AuxHandle`]
//! transactions (`perf_aux_output_begin` / `end` / `skip` / `flag`),
//! `PERF_RECORD_AUX`, and [`copy_aux`] (spec §E.6), which copies AUX bytes
//! into an output sink from PMI context.

mod area;
mod copy;
mod handle;

pub use area::{AuxArea, AuxConfig};
pub use copy::copy_aux;
pub use handle::{AuxHandle, write_itrace_start};
