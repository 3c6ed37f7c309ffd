// SPDX-License-Identifier: MIT OR Apache-2.0
//! The Linux perf user-space ABI (`include/uapi/linux/perf_event.h`): layouts shared with
//! user space
//! and C, each `#[repr(C)]` with its size and every field offset asserted at
//! compile time. A test in `perfaux-tests` also compares each field with the
//! system's `<linux/perf_event.h>` through bindgen.

mod attr;
mod mmap;
mod record;
mod sample;

pub use attr::*;
pub use mmap::*;
pub use record::*;
pub use sample::*;

/// Page size of the ABI (x86-64).
pub const PAGE_SIZE: usize = 4096;
