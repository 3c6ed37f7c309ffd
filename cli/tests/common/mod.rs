// SPDX-License-Identifier: MIT OR Apache-2.0
//! What the cli's integration tests share (each test crate uses some).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;

/// The `perfaux` binary of this build, its build-id cache the tests' own.
pub fn perfaux() -> Command {
    let mut cmd = Command::cargo_bin("perfaux").expect("the perfaux binary is built");
    cmd.env("PERF_BUILDID_DIR", buildid_cache());
    cmd
}

/// The tests' build-id cache (never the user's `~/.debug`): under the
/// target directory, shared by the test binaries (cargo runs them one at a
/// time) and bounded, its entries named by build-id. perf commands that
/// must find a recording's code there take `--buildid-dir` with it.
pub fn buildid_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("buildid-cache")
}

/// `target/tmp/<name>`, emptied: a test binary's scratch directory, made
/// once per run (callers keep it in a `OnceLock`). It lives under the
/// target directory, so nothing is left in the system's temporary
/// directory and each run starts clean.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
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
        skipped("perf not installed (apt-get install linux-perf): the perf checks");
    }
    found
}

/// Bytes as text, lossily.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Says that a test skipped a check, where the test run shows it: straight
/// to standard error, past the harness's capture (which keeps a passing
/// test's `eprintln!` output back), so that a missing tool is never a
/// silent pass. The `PERFAUX_REQUIRE_*` variables (CI sets them) turn
/// these skips into failures instead.
pub fn skipped(what: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {what}");
}
