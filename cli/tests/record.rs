// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux record` end to end: several seeds in both modes, each file
//! checked by `perfaux dump --check`, byte-identical for the same seed, and
//! read by Linux `perf`: every AUX payload perf prints (`perf script -D`)
//! rebuilt from its hex and compared byte for byte with what the file holds,
//! no parse errors, every sample listed. Set `PERFAUX_REQUIRE_PERF=1` (CI
//! does) to fail instead of skipping the perf part when `perf` is missing.

mod common;

use common::{perf_available, perfaux, record, text};
use std::path::{Path, PathBuf};
use std::process::Output;

use perfaux_cli::perfdata::{PerfData, parse_sample, user_record};
use perfaux_cli::sim::PSB_PERIOD;

fn tmp(name: &str) -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| common::fresh_dir("record"));
    dir.join(name)
}

/// The AUX payloads of a file in order (sample AUX blocks and AUXTRACE
/// data), and the number of samples.
fn payloads(bytes: &[u8]) -> (Vec<Vec<u8>>, u64) {
    let (payloads, per_event) = contents(bytes);
    (payloads, per_event.iter().map(|(_, n)| n).sum())
}

/// The AUX payloads of a file in order, and its samples per event name.
fn contents(bytes: &[u8]) -> (Vec<Vec<u8>>, Vec<(String, u64)>) {
    let file = PerfData::parse(bytes).unwrap();
    let mut out = Vec::new();
    let mut samples: Vec<(String, u64)> = file.events.iter().map(|e| (e.name.clone(), 0)).collect();
    for r in file.records() {
        let r = r.unwrap();
        match r.header.type_ {
            9 => {
                let id = u64::from_le_bytes(r.bytes[8..16].try_into().unwrap());
                let e = file.event_of(id).unwrap();
                samples.iter_mut().find(|(n, _)| *n == e.name).unwrap().1 += 1;
                let s = parse_sample(&e.attr, r.bytes).unwrap();
                if let Some(aux) = s.aux.filter(|a| !a.is_empty()) {
                    out.push(aux.to_vec());
                }
            }
            user_record::AUXTRACE => out.push(r.payload.to_vec()),
            _ => {}
        }
    }
    (out, samples)
}

/// A payload as `perf script -D` printed it: its bytes, and the packet
/// descriptions in order.
struct Dumped {
    bytes: Vec<u8>,
    packets: Vec<String>,
}

/// Rebuilds every "Intel Processor Trace data" block of perf's dump. Each
/// packet line is `.  OFFSET:  b0 b1 ...` padded to 16 bytes, then the
/// packet's description (`intel_pt_dump` in tools/perf/util/intel-pt.c).
fn perf_payloads(dump: &str) -> Vec<Dumped> {
    let mut out = Vec::new();
    let mut lines = dump.lines();
    while let Some(line) = lines.next() {
        let Some(size) = line
            .strip_prefix(". ... Intel Processor Trace data: size ")
            .and_then(|s| s.strip_suffix(" bytes"))
        else {
            continue;
        };
        let size: usize = size.parse().unwrap();
        let mut d = Dumped {
            bytes: Vec::new(),
            packets: Vec::new(),
        };
        while d.bytes.len() < size {
            let l = lines.next().expect("the dump ends inside a payload");
            let (offset, rest) = l
                .strip_prefix(".")
                .and_then(|l| l.split_once(':'))
                .unwrap_or_else(|| panic!("not a packet line: {l:?}"));
            assert_eq!(
                usize::from_str_radix(offset.trim(), 16).unwrap(),
                d.bytes.len(),
                "offsets follow the bytes"
            );
            // 16 columns of " xx", then " description".
            let columns: String = rest.chars().skip(1).take(48).collect();
            for b in columns.split_whitespace() {
                d.bytes.push(u8::from_str_radix(b, 16).unwrap());
            }
            d.packets
                .push(rest.chars().skip(49).collect::<String>().trim().to_owned());
        }
        assert_eq!(d.bytes.len(), size, "a payload's lines hold its size");
        out.push(d);
    }
    out
}

fn perf(args: &[&str], file: &Path) -> Output {
    std::process::Command::new("perf")
        .args(args)
        .arg("-i")
        .arg(file)
        .output()
        .unwrap()
}

/// Everything perf must agree with, for one file.
fn check_with_perf(file: &Path, bytes: &[u8]) {
    let (mut ours, per_event) = contents(bytes);
    let out = perf(&["script", "-D"], file);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "perf script -D: {stderr}");
    for bad in [
        "Can't parse sample",
        "failed to process",
        "Bad header",
        "incompatible",
    ] {
        assert!(!stderr.contains(bad), "perf script -D says {bad}: {stderr}");
    }
    let dumped = perf_payloads(&text(&out.stdout));
    let mut before_sync = 0;
    for d in &dumped {
        // A snapshot starts wherever the newest N bytes start, mid-packet
        // as often as not (Linux copies exactly those bytes); perf's dumper
        // does not sync to a PSB, so it may misread the bytes before the
        // first PSB. From the first PSB on, every packet must decode.
        let first_psb = d
            .packets
            .iter()
            .position(|p| p.starts_with("PSB") && !p.starts_with("PSBEND"));
        if d.bytes.len() as u64 >= PSB_PERIOD + 256 {
            assert!(
                first_psb.is_some(),
                "perf finds a PSB in every large payload"
            );
        }
        let sync = first_psb.unwrap_or(d.packets.len());
        before_sync += d.packets[..sync]
            .iter()
            .filter(|p| p.contains("Bad packet"))
            .count();
        assert!(
            !d.packets[sync..].iter().any(|p| p.contains("Bad packet")),
            "a Bad packet after the first PSB"
        );
    }
    eprintln!(
        "{}: {} payloads, {} Bad packet lines before the first PSB",
        file.display(),
        dumped.len(),
        before_sync
    );
    let mut theirs: Vec<Vec<u8>> = dumped.into_iter().map(|d| d.bytes).collect();
    assert_eq!(theirs.len(), ours.len(), "perf prints every AUX payload");
    // perf delivers samples in time order across CPUs; the file holds them
    // per drain round: compare as multisets.
    ours.sort();
    theirs.sort();
    assert!(
        ours == theirs,
        "perf's payloads are the file's, byte for byte"
    );

    let out = perf(&["script", "--no-itrace"], file);
    assert_eq!(
        out.status.code(),
        Some(0),
        "perf script: {}",
        text(&out.stderr)
    );
    let listing = text(&out.stdout);
    for (name, samples) in &per_event {
        let listed = listing
            .lines()
            .filter(|l| l.contains(&format!(" {name}:")))
            .count();
        assert_eq!(
            listed as u64, *samples,
            "perf script lists every {name} sample"
        );
    }

    let out = perf(&["report", "--stdio"], file);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "perf report: {stderr}");
    assert!(
        !stderr.contains("failed to process"),
        "perf report: {stderr}"
    );
    assert!(!stderr.contains("AUX data lost"), "perf report: {stderr}");
}

fn run_case(seed: u64, mode: &str) {
    let a = tmp(&format!("{mode}-{seed}.data"));
    let seed_arg = seed.to_string();
    let args = [
        "--seed",
        &seed_arg,
        "--mode",
        mode,
        "--samples",
        "200",
        "--cpus",
        "2",
        "--aux-pages",
        "32",
        "-q",
    ];
    record(&a, &args);
    let bytes = std::fs::read(&a).unwrap();
    record(&a, &args);
    assert!(
        bytes == std::fs::read(&a).unwrap(),
        "the same command writes the same bytes"
    );
    let out = perfaux()
        .arg("dump")
        .arg("--check")
        .arg(&a)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "dump --check: {}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stdout).ends_with(": OK\n"),
        "{}",
        text(&out.stdout)
    );
    let (payloads, samples) = payloads(&bytes);
    assert!(samples >= 200, "{samples} samples");
    assert!(!payloads.is_empty());
    if perf_available() {
        check_with_perf(&a, &bytes);
    }
    let _ = std::fs::remove_file(a);
}

#[test]
fn snapshot_mode_seeds() {
    for seed in [1, 2, 3] {
        run_case(seed, "snapshot");
    }
}

#[test]
fn full_trace_mode_seeds() {
    for seed in [1, 2] {
        run_case(seed, "full");
    }
}

#[test]
fn several_sampling_events_in_one_group() {
    let path = tmp("events.data");
    record(
        &path,
        &[
            "-e",
            "cycles",
            "-e",
            "instructions",
            "-e",
            "branches",
            "--period",
            "20000",
            "--duration",
            "1ms",
            "--cpus",
            "2",
            "-q",
        ],
    );
    let bytes = std::fs::read(&path).unwrap();
    let (_, per_event) = contents(&bytes);
    let names: Vec<&str> = per_event.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["intel_pt//u", "cycles:u", "instructions:u", "branches:u"]
    );
    assert!(per_event[1..].iter().all(|(_, n)| *n > 0), "{per_event:?}");
    let out = perfaux()
        .args(["dump", "--check"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    if perf_available() {
        check_with_perf(&path, &bytes);
        let out = perf(&["report", "--header-only"], &path);
        assert!(
            text(&out.stdout).contains("group: {intel_pt//u,cycles:u,instructions:u,branches:u}"),
            "perf sees the group"
        );
    }
    let _ = std::fs::remove_file(path);
}

#[test]
fn different_seeds_write_different_traces() {
    let a = tmp("seed-10.data");
    let b = tmp("seed-11.data");
    record(&a, &["--seed", "10", "--samples", "50", "-q"]);
    record(&b, &["--seed", "11", "--samples", "50", "-q"]);
    assert_ne!(
        payloads(&std::fs::read(a).unwrap()).0,
        payloads(&std::fs::read(b).unwrap()).0
    );
}

#[test]
fn the_summary_accounts_for_every_trace_byte_in_full_mode() {
    let path = tmp("summary.data");
    let out = record(
        &path,
        &["--mode", "full", "--samples", "100", "--cpus", "1"],
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("samples   "), "{stdout}");
    assert!(stdout.contains("(0 truncated)"), "{stdout}");
    assert!(
        stdout.contains("lost      0 records, 0 samples, 0 trace events"),
        "{stdout}"
    );
    // The whole stream reaches the file: the AUXTRACE records hold every
    // byte the tracer wrote, and nothing else but their 8-byte padding.
    let line = |label: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap()
    };
    let words = |l: &str| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let trace: u64 = words(line("trace"))[1].parse().unwrap();
    let aux = words(line("AUX"));
    let at = aux.iter().position(|w| w == "bytes").unwrap();
    let auxtrace: u64 = aux[at - 1].parse().unwrap();
    assert!(trace > 0);
    assert_eq!(auxtrace, trace, "{stdout}");
    let bytes = std::fs::read(&path).unwrap();
    let (payloads, _) = payloads(&bytes);
    let total: u64 = payloads.iter().map(|p| p.len() as u64).sum();
    assert!(
        total >= trace && total < trace + 8 * payloads.len() as u64,
        "padding aside, AUXTRACE holds the trace: {total} vs {trace}"
    );
    let _ = std::fs::remove_file(path);
}

/// The repro: full-trace mode with a small AUX area (the
/// simulator's reader falls behind): TRUNCATED records, the lost trace
/// events counted in the summary, and `dump --check` clean at every size.
#[test]
fn a_small_aux_area_in_full_mode_truncates_and_checks_clean() {
    for pages in ["2", "4", "8", "16"] {
        let path = tmp(&format!("small-{pages}.data"));
        let out = record(
            &path,
            &["--mode", "full", "--aux-pages", pages, "--duration", "3ms"],
        );
        let stdout = text(&out.stdout);
        let lost_line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with("lost"))
            .unwrap();
        if pages != "16" {
            assert!(!stdout.contains("(0 truncated)"), "{pages}: {stdout}");
            assert!(
                lost_line.contains("(full AUX areas: a larger --aux-pages keeps them)"),
                "{pages}: {stdout}"
            );
        }
        let check = perfaux()
            .args(["dump", "--check"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(
            check.status.code(),
            Some(0),
            "{pages} pages: {}",
            text(&check.stdout)
        );
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn bad_options_get_one_line_and_a_failure() {
    for (args, needle) in [
        (vec!["--cpus", "0"], "--cpus 0"),
        (vec!["--aux-pages", "3"], "--aux-pages 3"),
        (vec!["--data-pages", "6"], "--data-pages 6"),
        (vec!["--mode", "full", "--aux-pages", "1"], "two chunks"),
        (vec!["--period", "0"], "a period of 0 (-c, --period)"),
        (vec!["-c", "0"], "a period of 0 (-c, --period)"),
        (vec!["--duration", "5 parsecs"], "duration"),
        (
            vec!["--duration", "10ms", "--samples", "5"],
            "cannot be used with",
        ),
        (vec!["--mode", "sideways"], "sideways"),
        (
            vec!["--truth", "/nonexistent-dir/truth.txt"],
            "cannot create /nonexistent-dir/truth.txt",
        ),
    ] {
        let out = perfaux()
            .arg("record")
            .arg("-o")
            .arg(tmp("never.data"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?} succeeded");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            stderr.lines().next().is_some_and(|l| l.contains(needle)),
            "{args:?}: first line: {stderr}"
        );
    }
    // The truth may not overwrite the recording.
    let out = perfaux()
        .arg("record")
        .arg("-o")
        .arg(tmp("same.data"))
        .arg("--truth")
        .arg(tmp("same.data"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("that is the output file"));
    assert!(!tmp("same.data").exists());
}
