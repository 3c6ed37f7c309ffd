// SPDX-License-Identifier: MIT OR Apache-2.0
//! What the cli's integration tests share (each test crate uses some).
#![allow(dead_code)]

use std::path::Path;
use std::process::Output;

use assert_cmd::Command;

/// The `perfaux` binary of this build.
pub fn perfaux() -> Command {
    Command::cargo_bin("perfaux").expect("the perfaux binary is built")
}

/// `perfaux record -o path args...`, which must succeed.
pub fn record(path: &Path, args: &[&str]) -> Output {
    let out = perfaux()
        .arg("record")
        .arg("-o")
        .arg(path)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "record {args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// `perfaux repair cut -o fixed`, which must succeed.
pub fn repair(cut: &Path, fixed: &Path) {
    let out = perfaux()
        .arg("repair")
        .arg(cut)
        .arg("-o")
        .arg(fixed)
        .output()
        .unwrap();
    assert!(out.status.success(), "repair: {}", text(&out.stderr));
}

/// Whether `perf` runs here. With `PERFAUX_REQUIRE_PERF` set (CI sets it),
/// a missing perf fails the test instead of skipping its perf checks.
pub fn perf_available() -> bool {
    let found = std::process::Command::new("perf")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("PERFAUX_REQUIRE_PERF").is_none(),
            "PERFAUX_REQUIRE_PERF is set but `perf` does not run"
        );
        eprintln!("perf not installed: the perf checks are skipped");
    }
    found
}

/// Bytes as text, lossily.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
