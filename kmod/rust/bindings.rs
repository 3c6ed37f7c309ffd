// SPDX-License-Identifier: GPL-2.0
//! The kernel's perf, kprobe and module-parameter APIs, as Kbuild's
//! bindgen run generated them from `perf_helper.h` (see `Kbuild`): 6.12's
//! `kernel::bindings` has none of them.
#![allow(
    dead_code,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    missing_docs,
    unreachable_pub,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    improper_ctypes,
    unsafe_op_in_unsafe_fn,
    unnecessary_transmutes
)]

use kernel::ffi;

// The types the kernel's bindgen command blocklists, defined as
// rust/bindings/lib.rs defines them.
type __kernel_size_t = usize;
type __kernel_ssize_t = isize;
type __kernel_ptrdiff_t = isize;

include!("perf_bindings.rs");
