// SPDX-License-Identifier: MIT OR Apache-2.0
//! Host-side shims shared by the integration tests and benchmarks: page
//! memory for rings, and helpers to build rings and consumers over it.

pub mod group;
pub mod mem;
pub mod pmu;
pub mod records;
pub mod shims;
