// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux record -o -`: perf's pipe format on standard output, streamed
//! (nothing seeks), the summary on standard error, the program's code put
//! first in the build-id cache only (nothing in the current directory, so
//! concurrent runs share no file), where perf finds it by the build-id the
//! MMAP2 records carry; perf reads it
//! from a pipe: the same samples as from the file of the same run, and in
//! full-trace mode the same branches. (perf 6.1 does not decode AUX samples
//! from a pipe, `auxtrace_queue_data`, so snapshot mode is held to the
//! samples; nor AUXTRACE data from a pipe-format file it can seek in.)

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{buildid_cache, perf_available, perfaux, record, text};
use perfaux_cli::perfdata::PerfData;

/// `perfaux record -o - args...` run in `dir`: (stdout, stderr).
fn record_to_stdout(dir: &Path, args: &[&str]) -> (Vec<u8>, String) {
    let out = perfaux()
        .current_dir(dir)
        .args(["record", "-o", "-"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    (out.stdout, text(&out.stderr))
}

/// `perf script args... -i -` reading `stream` from a pipe.
fn perf_script_from_pipe(stream: &[u8], args: &[&str]) -> String {
    let mut child = Command::new("perf")
        .arg("--buildid-dir")
        .arg(buildid_cache())
        .arg("script")
        .args(args)
        .args(["-i", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let bytes = stream.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "perf script {args:?} from a pipe");
    text(&out.stdout)
}

fn perf_script_file(path: &Path, args: &[&str]) -> String {
    let out = Command::new("perf")
        .arg("--buildid-dir")
        .arg(buildid_cache())
        .arg("script")
        .args(args)
        .arg("-i")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
    text(&out.stdout)
}

#[test]
fn dash_o_dash_streams_the_pipe_format() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--duration", "2ms", "--cpus", "2", "--seed", "4"];
    let (stream, stderr) = record_to_stdout(dir.path(), &args);
    assert_eq!(&stream[..8], b"PERFILE2");
    assert_eq!(stream[8..16], 16u64.to_le_bytes(), "the pipe header");
    let file = PerfData::parse(&stream).unwrap();
    assert!(file.pipe && file.truncated.is_none());
    let names: Vec<&str> = file.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["intel_pt//u", "cycles:u"]);
    assert!(file.features.hostname.is_some() && file.features.cmdline.is_some());
    assert!(
        file.features.build_ids.is_empty() && file.features.auxtrace_index.is_none(),
        "no build-id or AUXTRACE index sections: perf writes neither to a pipe"
    );
    // The summary went to standard error, standard output is all data.
    assert!(
        stderr.contains("perfaux: wrote standard output"),
        "{stderr}"
    );
    // A hint that works from a pipe: perf 6.1 decodes no AUX sample there.
    assert!(
        stderr.contains(
            "next: pipe it: perfaux record ... -o - | perf script -i -   (perf decodes AUX samples from a file only: -o FILE)"
        ),
        "{stderr}"
    );
    // Nothing in the current directory (no file named -, no program): the
    // program is in the build-id cache, where the summary says.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    let program = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("program   "))
        .expect("the summary names the program");
    assert!(
        Path::new(program).starts_with(buildid_cache()) && Path::new(program).is_file(),
        "{program}"
    );
    let check = perfaux()
        .args(["dump", "--check", "-"])
        .write_stdin(stream.clone())
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stdout));

    // The same run into a file: the same records after the header.
    let path = dir.path().join("same.data");
    record(&path, &[&["-q"][..], &args].concat());
    let bytes = std::fs::read(&path).unwrap();
    let twin = PerfData::parse(&bytes).unwrap();
    // (MMAP2 names the program, whose path differs.)
    let data = |f: &PerfData<'_>| {
        f.records()
            .map(Result::unwrap)
            .filter(|r| r.header.type_ < 64 || r.header.type_ >= 68 && r.header.type_ < 78)
            .map(|r| {
                let mmap2 = r.header.type_ == perfaux::abi::record_type::MMAP2;
                (
                    r.header.type_,
                    if mmap2 { Vec::new() } else { r.bytes.to_vec() },
                )
            })
            .collect::<Vec<_>>()
    };
    assert!(
        data(&file) == data(&twin),
        "the stream's records are the file's"
    );

    if !perf_available() {
        return;
    }
    let samples = |s: &str| s.lines().filter(|l| l.contains("cycles")).count();
    let piped = perf_script_from_pipe(&stream, &["-F", "event,ip"]);
    let filed = perf_script_file(&path, &["-F", "event,ip"]);
    assert!(samples(&piped) > 50, "{piped}");
    assert_eq!(samples(&piped), samples(&filed));
}

#[test]
fn a_full_trace_through_a_pipe_decodes_as_the_file_does() {
    if !perf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let args = ["--duration", "2ms", "--cpus", "2", "--mode", "full"];
    let (stream, stderr) = record_to_stdout(dir.path(), &args);
    assert!(
        stderr.contains("next: pipe it: perfaux record ... -o - | perf script --itrace=be -i -\n"),
        "{stderr}"
    );
    let path = dir.path().join("full.data");
    record(&path, &[&["-q"][..], &args].concat());
    // Per CPU, the branch sources in decode order. (Around a context
    // switch perf may give a branch to the other thread when it reads a
    // pipe, whose records it cannot sort as it sorts a file's: its "timestamps
    // and the order of events may be incorrect" warning. The flow is the same.)
    let per_cpu = |s: &str| {
        let mut cpus: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for l in s.lines().filter(|l| l.contains("branches")) {
            let f: Vec<&str> = l.split_whitespace().collect();
            cpus.entry(f[0].to_owned())
                .or_default()
                .push(f[2].to_owned());
        }
        cpus
    };
    let args = ["--itrace=be", "-F", "cpu,event,ip"];
    let piped = perf_script_from_pipe(&stream, &args);
    assert!(!piped.contains("instruction trace error"));
    let (p, f) = (per_cpu(&piped), per_cpu(&perf_script_file(&path, &args)));
    assert_eq!(p.len(), 2);
    assert!(
        p.values().all(|b| b.len() > 10_000),
        "{:?}",
        p.values().map(Vec::len)
    );
    assert!(p == f, "the pipe's branches are the file's");
}

/// Two runs into pipes at once, each its own program (seeds 5 and 6), from
/// one directory: each decodes with no error, its code found by build-id.
#[test]
fn concurrent_pipes_share_no_file() {
    if !perf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |seed: &'static str| {
        let cwd = dir.path().to_path_buf();
        std::thread::spawn(move || {
            record_to_stdout(
                &cwd,
                &[
                    "--duration",
                    "1ms",
                    "--cpus",
                    "1",
                    "--mode",
                    "full",
                    "--seed",
                    seed,
                ],
            )
            .0
        })
    };
    let (five, six) = (run("5"), run("6"));
    let streams = [five.join().unwrap(), six.join().unwrap()];
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    let mut symbols = Vec::new();
    for stream in &streams {
        let out = perf_script_from_pipe(stream, &["--itrace=be", "-F", "ip,sym"]);
        assert!(!out.contains("instruction trace error"), "{out}");
        // (ip 0: where the trace starts, from nowhere.)
        assert!(
            out.lines()
                .all(|l| l.trim_start().starts_with("0 ") || !l.contains("[unknown]")),
            "every branch in a known function"
        );
        assert!(out.lines().count() > 1000, "{out}");
        symbols.push(out);
    }
    assert_ne!(symbols[0], symbols[1], "two programs");
}
