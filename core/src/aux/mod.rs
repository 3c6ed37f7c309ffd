// SPDX-License-Identifier: MIT OR Apache-2.0
//! The AUX area (`kernel/events/ring_buffer.c`'s AUX part): a second buffer of a ring,
//! written by a hardware
//! tracer, with its own head and tail in the user page; [`AuxHandle`]
//! transactions (`perf_aux_output_begin` / `end` / `skip` / `flag`),
//! `PERF_RECORD_AUX`, and [`copy_aux`] (`perf_output_copy_aux`), which copies AUX bytes
//! into an output sink from PMI context; [`AuxOutput`], the AUX output as a
//! PMU driver sees it (this area, or a kernel's through C callbacks);
//! [`AuxConsumer`], the reader of a writable area, as `perf record`.

mod area;
mod consumer;
mod copy;
mod handle;
mod output;

pub use area::{AuxArea, AuxConfig};
pub use consumer::AuxConsumer;
pub use copy::{copy_aux, copy_aux_pages, copy_zeros};
pub use handle::{AuxHandle, write_itrace_start};
pub use output::{AreaOutput, AuxOutput, AuxTransaction};
