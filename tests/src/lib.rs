// SPDX-License-Identifier: MIT OR Apache-2.0
//! Host-side shims shared by the integration tests and benchmarks: page
//! memory for rings, and helpers to build rings and consumers over it.

pub mod group;
pub mod mem;
pub mod pmu;
pub mod records;
pub mod shims;

/// Says that a test skipped a check, where the test run shows it: straight
/// to standard error, past the harness's capture (which keeps a passing
/// test's `eprintln!` output back), so that a missing tool is never a
/// silent pass. The `PERFAUX_REQUIRE_*` variables (CI sets them) turn
/// these skips into failures instead.
pub fn skipped(what: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {what}");
}
