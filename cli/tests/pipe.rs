// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux record -o -`: perf's pipe format on standard output, streamed
//! (nothing seeks), the summary on standard error, the program's code
//! written first (beside, as `perfaux-stdout.perfaux-demo`); perf reads it
//! from a pipe: the same samples as from the file of the same run, and in
//! full-trace mode the same branches. (perf 6.1 does not decode AUX samples
//! from a pipe, `auxtrace_queue_data`, so snapshot mode is held to the
//! samples; nor AUXTRACE data from a pipe-format file it can seek in.)

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{perf_available, perfaux, record, text};
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
    assert!(
        stderr.contains("perfaux record -o - | perf script"),
        "{stderr}"
    );
    assert!(!dir.path().join("-").exists(), "no file named -");
    assert!(dir.path().join("perfaux-stdout.perfaux-demo").is_file());
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
    let (stream, _) = record_to_stdout(dir.path(), &args);
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
