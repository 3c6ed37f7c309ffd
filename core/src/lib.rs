// SPDX-License-Identifier: MIT OR Apache-2.0
//! # perfaux
//!
//! A `no_std` engine for Linux perf's AUX sampling (`PERF_SAMPLE_AUX`,
//! Linux 5.5): the user-space ABI, attr validation with the kernel's errno,
//! the data ring, the AUX area, sample records with the AUX block, events and
//! groups, and a PT-style PMU, all over caller-provided memory, with no
//! allocation.
//!
//! The behaviour reference is the project's `spec/kernel-aux-sampling.md`;
//! section numbers in the documentation (§B.1, H.1 O6, ...) point into it.
//!
//! Modules:
//! - [`abi`]: `perf_event_attr`, records, `perf_event_mmap_page`, with every
//!   size and offset asserted;
//! - [`attr`]: attr copy-in (size negotiation) and the open-time checks;
//! - [`aux`]: the AUX area, AUX transactions, `PERF_RECORD_AUX`, `copy_aux`;
//! - [`sample`]: sample records: layout (with the AUX size clamp) and output
//!   (with the AUX block from `snapshot_aux`);
//! - [`event`], [`pmu`]: events and groups (AUX leader link, states,
//!   output redirection, inheritance, the overflow flow) over the PMU contract;
//! - [`pt`]: the PT-style PMU: packets, ToPA, a software tracer, and the
//!   PMU in snapshot and full-trace modes;
//! - [`ring`]: the data ring: output handles with NMI nesting, lost
//!   records, wakeups, and its consumers;
//! - [`PmuCaps`]: what a PMU can do, as those checks need to know;
//! - [`Error`]: the one error type, one Linux errno per variant.

#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(loom)]
extern crate std;

pub mod abi;
pub mod attr;
pub mod aux;
mod caps;
mod error;
pub mod event;
pub mod pmu;
pub mod pt;
pub mod ring;
pub mod sample;
mod sync;
pub mod warn;

/// Loom-model memory (only under `cfg(loom)`): see `sync`.
#[cfg(loom)]
#[doc(hidden)]
pub use sync::loom_memory;

pub use caps::PmuCaps;
pub use error::{Error, Result};
