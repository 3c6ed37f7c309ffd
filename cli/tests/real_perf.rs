// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux dump` on files real perf writes: a corpus made by the machine's
//! own `perf record` (one event; `-a`; `-g`; two events; `--switch-events`;
//! `-z`, zstd-compressed records; a copy cut in the middle of its data;
//! `-o -`, the pipe format, read from a file and from standard input, and
//! cut), checked against `perf script`.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{perf_available, perfaux, text};

/// A busy shell loop: samples on every CPU clock tick.
const WORK: &[&str] = &[
    "--",
    "sh",
    "-c",
    "i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done",
];

/// `perf record args... -o path`; `false` (and why, on stderr) when this
/// machine's kernel does not let perf record at all. `-N`: the tests leave
/// nothing in the user's build-id cache.
fn perf_record(path: &Path, args: &[&str]) -> bool {
    let out = Command::new("perf")
        .arg("record")
        .arg("-q")
        .arg("-N")
        .arg("-o")
        .arg(path)
        .args(args)
        .output()
        .unwrap();
    if !out.status.success() {
        common::skipped(&format!(
            "perf record {args:?} does not run here ({})",
            text(&out.stderr).trim()
        ));
    }
    out.status.success()
}

/// Samples per event name as `perf script -F event` counts them.
fn perf_counts(path: &Path) -> BTreeMap<String, usize> {
    let out = Command::new("perf")
        .args(["script", "-F", "event", "-i"])
        .arg(path)
        .output()
        .unwrap();
    let mut counts = BTreeMap::new();
    for line in text(&out.stdout).lines() {
        let name = line.trim().trim_end_matches(':').to_owned();
        if !name.is_empty() {
            *counts.entry(name).or_insert(0) += 1;
        }
    }
    counts
}

/// Samples per event name as `perfaux dump` names them.
fn dump_counts(path: &Path) -> BTreeMap<String, usize> {
    let out = perfaux().arg("dump").arg(path).output().unwrap();
    let mut counts = BTreeMap::new();
    for line in text(&out.stdout).lines() {
        let mut words = line.split_whitespace();
        if words.nth(2) == Some("SAMPLE") {
            *counts.entry(words.next().unwrap().to_owned()).or_insert(0) += 1;
        }
    }
    counts
}

fn check(path: &Path) -> (Option<i32>, String) {
    let out = perfaux()
        .arg("dump")
        .arg("--check")
        .arg(path)
        .output()
        .unwrap();
    (out.status.code(), text(&out.stdout) + &text(&out.stderr))
}

#[test]
fn dump_reads_what_perf_record_writes() {
    if !perf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("one.data", &["-e", "cpu-clock"]),
        ("all.data", &["-a", "-e", "cpu-clock"]),
        ("graph.data", &["-g", "-e", "cpu-clock"]),
        ("two.data", &["-e", "task-clock,cpu-clock"]),
        ("switch.data", &["--switch-events", "-e", "cpu-clock"]),
        ("zstd.data", &["-z", "-e", "cpu-clock"]),
    ];
    for (name, args) in cases {
        let path = dir.path().join(name);
        let mut all = args.to_vec();
        if *name == "all.data" {
            all.extend(["--", "sleep", "0.2"]);
        } else {
            all.extend(WORK);
        }
        if !perf_record(&path, &all) {
            return;
        }
        let (code, out) = check(&path);
        assert_eq!(code, Some(0), "{name}: {out}");
        // Every sample named by its event, as perf names it.
        let (perf, ours) = (perf_counts(&path), dump_counts(&path));
        assert!(!perf.is_empty(), "{name}: perf script shows no samples");
        assert_eq!(ours, perf, "{name}: samples per event");
    }
    // Two events: both named, in perf's numbers (not all under the first).
    assert_eq!(dump_counts(&dir.path().join("two.data")).len(), 2);
    // -g: every sample shows its callchain, its context marked.
    let graph = text(
        &perfaux()
            .arg("dump")
            .arg(dir.path().join("graph.data"))
            .output()
            .unwrap()
            .stdout,
    );
    let chains = graph.lines().filter(|l| l.contains(" callchain ")).count();
    assert!(chains > 0, "{graph}");
    assert_eq!(
        chains,
        graph.lines().filter(|l| l.contains(" SAMPLE ")).count()
    );
    assert!(graph.contains(": [user]") || graph.contains(": [kernel]"));

    // A copy cut in the middle of its data: the complete records, then one
    // line saying what is missing; the check agrees (status 2).
    let whole = std::fs::read(dir.path().join("two.data")).unwrap();
    let cut = dir.path().join("cut.data");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let out = perfaux().arg("dump").arg(&cut).output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("truncated:") && err.contains("complete records before the cut"),
        "{err}"
    );
    let samples = text(&out.stdout)
        .lines()
        .filter(|l| l.contains(" SAMPLE "))
        .count();
    assert!(samples > 0, "the complete records are shown");
    let (code, report) = check(&cut);
    assert_eq!(code, Some(2), "{report}");
    assert!(
        report.contains(": OK\n") && report.contains("truncated:"),
        "the complete part is sound, the cut said: {report}"
    );
}

#[test]
fn dump_reads_perf_records_pipe_format() {
    if !perf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pipe.data");
    let out = Command::new("perf")
        .args(["record", "-q", "-o", "-", "-e", "task-clock,cpu-clock"])
        .args(WORK)
        .output()
        .unwrap();
    if !out.status.success() {
        common::skipped("perf record -o - does not run here: its pipe format");
        return;
    }
    std::fs::write(&path, &out.stdout).unwrap();
    let (code, report) = check(&path);
    assert_eq!(code, Some(0), "{report}");
    let (perf, ours) = (perf_counts(&path), dump_counts(&path));
    assert_eq!(perf.len(), 2, "{perf:?}");
    assert_eq!(ours, perf, "samples per event");
    // The events and features are records of the stream.
    let dumped = text(&perfaux().arg("dump").arg(&path).output().unwrap().stdout);
    assert!(dumped.contains("HEADER_ATTR task-clock"), "{dumped}");
    assert!(dumped.contains("HEADER_FEATURE event_desc"), "{dumped}");
    assert!(dumped.contains("HEADER_FEATURE (the last)"), "{dumped}");
    // From standard input, as `perf record -o - | perfaux dump -`.
    let piped = perfaux()
        .args(["dump", "-"])
        .write_stdin(out.stdout.clone())
        .output()
        .unwrap();
    assert_eq!(piped.status.code(), Some(0));
    let from_stdin = text(&piped.stdout);
    assert_eq!(
        from_stdin.lines().skip(1).collect::<Vec<_>>(),
        dumped.lines().skip(1).collect::<Vec<_>>(),
        "the same records as from the file (the first line names the input)"
    );
    // A stream cut short: its complete records checked, the cut said once.
    let cut = perfaux()
        .args(["dump", "--check", "-"])
        .write_stdin(out.stdout[..out.stdout.len() * 2 / 3].to_vec())
        .output()
        .unwrap();
    let report = text(&cut.stdout);
    assert_eq!(cut.status.code(), Some(2), "{report}");
    assert!(text(&cut.stderr).contains("truncated:"), "{report}");
}
