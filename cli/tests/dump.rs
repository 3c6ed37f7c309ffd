// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux dump` on good and malformed files: a clear one-line error and a
//! non-zero exit for every kind of damage, never a panic; `--check` finds
//! broken invariants; another reader (`linux-perf-data`) reads our files.

mod common;

use std::path::{Path, PathBuf};

use common::{perfaux, text};
use perfaux_cli::perfdata::{PerfData, parse_sample};

fn tmp(name: &str) -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| common::fresh_dir("dump"));
    dir.join(name)
}

/// A small recorded file (snapshot mode, 2 CPUs).
fn recorded(name: &str) -> (PathBuf, Vec<u8>) {
    let path = tmp(name);
    let out = perfaux()
        .args(["record", "--samples", "40", "--cpus", "2", "-q", "-o"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

/// Runs `perfaux dump [--check]` on `bytes`; returns (exit code, stdout, stderr).
fn dump(bytes: &[u8], check: bool) -> (Option<i32>, String, String) {
    let path = tmp(&format!("damaged-{}.data", bytes.len()));
    std::fs::write(&path, bytes).unwrap();
    let mut cmd = perfaux();
    cmd.arg("dump");
    if check {
        cmd.arg("--check");
    }
    let out = cmd.arg(&path).output().unwrap();
    let _ = std::fs::remove_file(&path);
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn assert_refused(bytes: &[u8], needle: &str) {
    for check in [false, true] {
        let (code, stdout, stderr) = dump(bytes, check);
        assert_ne!(code, Some(0), "accepted (check {check}): {stdout}");
        let all = format!("{stdout}{stderr}");
        assert!(
            all.contains(needle),
            "check {check}: expected {needle:?} in {all}"
        );
        assert!(!all.contains("panicked"), "{all}");
    }
}

/// File offset of the first sample's AUX size word.
fn first_aux_size_at(bytes: &[u8]) -> (usize, u64) {
    let file = PerfData::parse(bytes).unwrap();
    for r in file.records() {
        let r = r.unwrap();
        if r.header.type_ == 9 {
            let id = u64::from_le_bytes(r.bytes[8..16].try_into().unwrap());
            let s = parse_sample(&file.event_of(id).unwrap().attr, r.bytes).unwrap();
            if s.aux.is_some() {
                return (r.offset as usize + s.aux_offset, r.offset);
            }
        }
    }
    panic!("no AUX sample")
}

#[test]
fn a_good_file_dumps_and_checks() {
    let (path, _) = recorded("good.data");
    let out = perfaux().arg("dump").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for needle in [
        "event 0: intel_pt//u",
        "event 1: cycles:u",
        "group {anon_group} leader 0 members 2",
        "AUXTRACE_INFO type 1",
        "COMM pid/tid 1000/1000 \"perfaux-demo\"",
        "MMAP2 pid/tid 1000/1000 [0x400000, 0x",
        ".perfaux-demo build-id ",
        "ID_INDEX 4 ids",
        "SWITCH_CPU_WIDE OUT preempt next_prev pid/tid 100",
        "SWITCH_CPU_WIDE IN  next_prev pid/tid 100",
        "auxtrace index: 0 entries",
        "ITRACE_START",
        "aux 4096 bytes: PSB at +",
        "FINISHED_ROUND",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing from the dump");
    }
    let out = perfaux()
        .args(["dump", "--check"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let _ = std::fs::remove_file(path);
}

#[test]
fn malformed_files_are_refused_clearly() {
    let (path, good) = recorded("base.data");
    let _ = std::fs::remove_file(path);

    let mut bad_magic = good.clone();
    bad_magic[..8].copy_from_slice(b"PERFILE1");
    assert_refused(&bad_magic, "not a perf.data file");
    assert_refused(&[], "not a perf.data file: it is empty");

    assert_refused(&good[..50], "truncated header");
    assert_refused(&good[..good.len() / 2], "past the end of the file");

    let mut attr_size = good.clone();
    attr_size[16..24].copy_from_slice(&(136u64 + 16).to_le_bytes());
    assert_refused(&attr_size, "not a whole number of 152-byte entries");

    let attrs_off = u64::from_le_bytes(good[24..32].try_into().unwrap()) as usize;
    let mut attr_field = good.clone();
    attr_field[attrs_off + 4..attrs_off + 8].copy_from_slice(&136u32.to_le_bytes());
    assert_refused(&attr_field, "attr 0 says size 136");

    // A record whose size runs past the data section: the last one's.
    let data_off = u64::from_le_bytes(good[40..48].try_into().unwrap()) as usize;
    let last = PerfData::parse(&good)
        .unwrap()
        .records()
        .map(Result::unwrap)
        .last()
        .unwrap()
        .offset as usize;
    let mut long_record = good.clone();
    long_record[last + 6..last + 8].copy_from_slice(&0xfff8u16.to_le_bytes());
    assert_refused(&long_record, "runs past the data section");

    let mut tiny_record = good.clone();
    tiny_record[data_off + 6..data_off + 8].copy_from_slice(&4u16.to_le_bytes());
    assert_refused(&tiny_record, "smaller than its header");

    // An AUX size that runs past its record.
    let (at, record) = first_aux_size_at(&good);
    let mut aux_past = good.clone();
    aux_past[at..at + 8].copy_from_slice(&8192u64.to_le_bytes());
    assert_refused(&aux_past, &format!("{record:#x}"));
    assert_refused(&aux_past, "the AUX data needs 8192 bytes");
}

#[test]
fn check_reports_broken_invariants() {
    let (path, good) = recorded("invariants.data");
    let _ = std::fs::remove_file(path);
    // An AUX size that disagrees with its record: 4 bytes of slack after
    // the last field. (An AUX size that is not a multiple of 8 in a record
    // sized to match is `dump/check.rs`'s unit test.)
    let (at, record) = first_aux_size_at(&good);
    let mut odd = good.clone();
    odd[at..at + 8].copy_from_slice(&4092u64.to_le_bytes());
    let (code, stdout, _) = dump(&odd, true);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "{record:#x}: a cycles:u sample that does not parse: 4 bytes left"
        )),
        "{stdout}"
    );

    // Non-zero padding after a COMM name.
    let file = PerfData::parse(&good).unwrap();
    let comm = file
        .records()
        .map(Result::unwrap)
        .find(|r| r.header.type_ == 3)
        .unwrap();
    let mut padding = good.clone();
    let name_end = comm.offset as usize + 16 + "perfaux-demo".len() + 1;
    padding[name_end] = b'x';
    let (code, stdout, _) = dump(&padding, true);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("COMM name padding is not zero"), "{stdout}");
}

#[test]
fn linux_perf_data_reads_our_files() {
    let (path, bytes) = recorded("other-reader.data");
    let file = linux_perf_data::PerfFileReader::parse_file(std::io::Cursor::new(&bytes))
        .expect("linux-perf-data parses the header");
    let linux_perf_data::PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = file;
    let names: Vec<String> = perf_file
        .event_attributes()
        .iter()
        .map(|a| a.name().unwrap_or("?").to_owned())
        .collect();
    assert_eq!(names, ["intel_pt//u", "cycles:u"]);
    let mut samples = 0;
    while let Some(record) = record_iter
        .next_record(&mut perf_file)
        .expect("every record parses")
    {
        if let linux_perf_data::PerfFileRecord::EventRecord { record, .. } = record {
            if let Ok(linux_perf_data::linux_perf_event_reader::EventRecord::Sample(_)) =
                record.parse()
            {
                samples += 1;
            }
        }
    }
    let ours = PerfData::parse(&bytes)
        .unwrap()
        .records()
        .filter(|r| r.as_ref().unwrap().header.type_ == 9)
        .count();
    assert!(ours >= 40);
    assert_eq!(samples, ours, "linux-perf-data finds every sample");
    let _ = std::fs::remove_file(Path::new(&path));
}

/// `perfaux dump --check FILE | head -1` on a file with thousands of
/// violations: the closed pipe ends the output quietly (no panic), and the
/// exit status is still the verdict.
#[test]
fn check_into_a_closed_pipe_does_not_panic() {
    let path = tmp("many.data");
    let out = perfaux()
        .args(["record", "--samples", "1500", "--cpus", "1", "-q", "-o"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Every sample's AUX size one word short of its record: a violation each.
    let mut bytes = std::fs::read(&path).unwrap();
    let file = PerfData::parse(&bytes).unwrap();
    let mut at = Vec::new();
    for r in file.records() {
        let r = r.unwrap();
        if r.header.type_ == 9 {
            let id = u64::from_le_bytes(r.bytes[8..16].try_into().unwrap());
            let s = parse_sample(&file.event_of(id).unwrap().attr, r.bytes).unwrap();
            at.push(r.offset as usize + s.aux_offset);
        }
    }
    assert!(at.len() >= 1500);
    for a in at {
        bytes[a..a + 8].copy_from_slice(&4092u64.to_le_bytes());
    }
    std::fs::write(&path, &bytes).unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("perfaux"))
        .args(["dump", "--check"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away at once
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let _ = std::fs::remove_file(path);
}

/// A file cut short: `dump` and `dump --check` read its complete records,
/// say the cut once on standard error and agree on the status (2, a
/// damaged input).
#[test]
fn dump_and_check_agree_on_a_cut_file() {
    let (path, good) = recorded("cut-whole.data");
    let _ = std::fs::remove_file(path);
    let cut = &good[..good.len() * 2 / 3];
    for check in [false, true] {
        let (code, stdout, stderr) = dump(cut, check);
        assert_eq!(code, Some(2), "check {check}: {stdout}{stderr}");
        assert_eq!(stderr.lines().count(), 1, "check {check}: {stderr}");
        assert!(stderr.contains(": truncated: the data section"), "{stderr}");
        assert!(!stdout.contains("truncated"), "said once: {stdout}");
    }
}
