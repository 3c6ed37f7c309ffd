// SPDX-License-Identifier: MIT OR Apache-2.0
//! perfaux's files against the files perf itself writes from the same
//! records (`perf inject`, which needs no kernel): the AUXTRACE index a full
//! trace carries, and what perf 6.1 makes of a copy cut short, before and
//! after `perfaux repair`.

mod common;

use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{perf_available, perfaux, record, repair, text};
use perfaux_cli::perfdata::{IndexEntry, PerfData};

fn tmp(name: &str) -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| common::fresh_dir("cut"));
    dir.join(name)
}

/// A 2-CPU recording of `samples` samples in `mode`, and the file
/// `perf inject` writes from it: the same records, written by perf.
fn ours_and_perfs(name: &str, mode: &str, samples: &str) -> (PathBuf, PathBuf) {
    let ours = tmp(&format!("{name}.data"));
    record(
        &ours,
        &["-q", "--cpus", "2", "--samples", samples, "--mode", mode],
    );
    let theirs = tmp(&format!("{name}-inject.data"));
    perf_inject(&ours, &theirs);
    (ours, theirs)
}

/// `perf inject -i from -o to`: the same records, written by perf.
fn perf_inject(from: &Path, to: &Path) {
    let out = Command::new("perf")
        .args(["inject", "-i"])
        .arg(from)
        .arg("-o")
        .arg(to)
        .output()
        .unwrap();
    assert!(out.status.success(), "perf inject: {}", text(&out.stderr));
}

/// The AUXTRACE records of `file` as index entries, with their data.
fn auxtrace_records(file: &PerfData<'_>) -> Vec<(IndexEntry, Vec<u8>)> {
    file.records()
        .map(Result::unwrap)
        .filter_map(|r| Some((r.index_entry()?, r.payload.to_vec())))
        .collect()
}

/// A full trace's file indexes every AUXTRACE record where it is (perf 6.1
/// then queues the trace from the index, not by walking the data), as the
/// file `perf inject` writes from it does: as many entries, the same AUX
/// data in index order. A sampling-mode file has the index, empty, as
/// `perf record --aux-sample` writes it.
#[test]
fn a_full_trace_indexes_its_auxtrace_records_as_perf_does() {
    if !perf_available() {
        return;
    }
    for mode in ["full", "snapshot"] {
        let (ours, theirs) = ours_and_perfs(&format!("index-{mode}"), mode, "200");
        let (a, b) = (
            std::fs::read(&ours).unwrap(),
            std::fs::read(&theirs).unwrap(),
        );
        let (a, b) = (PerfData::parse(&a).unwrap(), PerfData::parse(&b).unwrap());
        let (ours_records, theirs_records) = (auxtrace_records(&a), auxtrace_records(&b));
        let index = a
            .features
            .auxtrace_index
            .clone()
            .expect("an AUXTRACE index");
        let listed: Vec<IndexEntry> = ours_records.iter().map(|(e, _)| *e).collect();
        assert_eq!(
            index, listed,
            "{mode}: the index lists every AUXTRACE record"
        );
        let perf_index = b.features.auxtrace_index.clone().expect("perf's index");
        assert_eq!(perf_index.len(), index.len(), "{mode}: entries");
        if mode == "full" {
            assert!(index.len() > 10, "only {} AUXTRACE records", index.len());
        } else {
            assert!(index.is_empty());
        }
        let data = |records: &[(IndexEntry, Vec<u8>)]| -> Vec<Vec<u8>> {
            records.iter().map(|(_, d)| d.clone()).collect()
        };
        assert_eq!(
            data(&ours_records),
            data(&theirs_records),
            "{mode}: AUX data"
        );
        let out = perfaux()
            .arg("dump")
            .arg("--check")
            .arg(&ours)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stdout));
    }
}

/// How `perf report` ends on `file` within a few seconds.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Exit(i32),
    Signal(i32),
    /// Still running after 3 s (killed then).
    Spinning,
}

fn perf_report(file: &Path) -> Outcome {
    let mut child = Command::new("perf")
        .args(["report", "--stdio", "-i"])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(3) {
            child.kill().unwrap();
            child.wait().unwrap();
            return Outcome::Spinning;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    match (status.code(), status.signal()) {
        (Some(code), _) => Outcome::Exit(code),
        (None, Some(signal)) => Outcome::Signal(signal),
        (None, None) => unreachable!("an exit status is a code or a signal"),
    }
}

/// A copy cut inside its data fails in perf 6.1 as a cut copy of the file
/// perf itself writes from the same records does (sampling mode: perf's
/// auxtrace walk reads past the cut into the zeros of the last page and
/// spins; full mode: into pages with no file, SIGBUS), so it is perf's
/// reading, not perfaux's writing; `perfaux repair` makes either readable.
#[test]
fn a_cut_file_fails_in_perf_as_a_cut_perf_written_file_does() {
    if !perf_available() {
        return;
    }
    for mode in ["snapshot", "full"] {
        let (ours, theirs) = ours_and_perfs(&format!("cut-{mode}"), mode, "300");
        let mut outcomes = Vec::new();
        for file in [&ours, &theirs] {
            let bytes = std::fs::read(file).unwrap();
            let cut = file.with_extension("cut");
            std::fs::write(&cut, &bytes[..bytes.len() * 3 / 10 + 3]).unwrap();
            outcomes.push(perf_report(&cut));
            let fixed = file.with_extension("fixed");
            repair(&cut, &fixed);
            assert_eq!(
                perf_report(&fixed),
                Outcome::Exit(0),
                "{mode}: the repaired {}",
                fixed.display()
            );
        }
        assert_eq!(
            outcomes[0], outcomes[1],
            "{mode}: perf on perfaux's cut file, then on perf's"
        );
        // SIGBUS is 7 on x86-64.
        let expected = if mode == "snapshot" {
            Outcome::Spinning
        } else {
            Outcome::Signal(7)
        };
        assert_eq!(outcomes[0], expected, "{mode}: perf 6.1 on a cut file");
    }
}

#[test]
fn repairing_a_complete_file_gives_the_file_itself() {
    // `repair x -o y && perf script -i y` holds whether x was cut or not.
    let whole = tmp("whole.data");
    record(&whole, &["--samples", "20", "--quiet"]);
    let copy = tmp("whole-repaired.data");
    let _ = std::fs::remove_file(&copy);
    repair(&whole, &copy);
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(&whole).unwrap()
    );
    // In place: left as it is.
    let before = std::fs::metadata(&whole).unwrap().modified().unwrap();
    repair(&whole, &whole);
    assert_eq!(
        std::fs::metadata(&whole).unwrap().modified().unwrap(),
        before
    );
}
