// SPDX-License-Identifier: GPL-2.0-or-later
//! perfaux's QEMU user-mode plugin: the perfaux engine plays the kernel for
//! a real, unmodified program.
//!
//! `perfaux record -- PROGRAM` runs `qemu-x86_64 -plugin
//! libperfaux_qemu.so,session=FD PROGRAM`. The session (a shared file laid
//! out by `perfaux-qemu-session`) gives the run's parameters and the slots
//! its rings live in. Each guest thread, when it first runs, claims a slot
//! and gets there what a CPU has in `perfaux_pt.ko`: a data ring and an AUX
//! area over the slot's pages, a software Intel PT tracer writing through
//! ToPA tables into the AUX area, the PT PMU over it, and the group of the
//! PT leader and an `instructions:u` sampler whose overflows are PMIs that
//! write `PERF_SAMPLE_AUX` samples through the engine's `snapshot_aux`.
//!
//! The instruction flow comes from the blocks QEMU executes
//! ([`perfaux::soft_pt::blocks`]), the side band (COMM, MMAP2, FORK, EXIT) from
//! the program's system calls and the ELF headers of what QEMU loaded.

// The unit tests link without QEMU, so without the entry points that call
// into it (`callbacks`): what only those use is unused there.
#![cfg_attr(test, allow(dead_code))]

mod blocks;
mod engine;
mod maps;
mod records;
mod session;
mod thread;
mod truth;

// The entry points and QEMU's API (resolved by QEMU's binary when it loads
// the plugin).
#[cfg(not(test))]
mod callbacks;
