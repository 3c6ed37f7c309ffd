// SPDX-License-Identifier: MIT OR Apache-2.0
//! Linux perf's own Intel PT decoder against the simulator's ground truth:
//! for several seeds, CPU counts, AUX sample sizes, both modes, user-only
//! and with the kernel traced, `perf script --itrace=be` must print no
//! instruction trace error and exactly the truth's branches per CPU
//! (from, to, tid), in order, at times that never go back and lie within
//! the recording; in sampling mode every sample's `--itrace=L64` branch
//! stack must be the truth's. Set `PERFAUX_REQUIRE_PERF=1` (CI does) to
//! fail instead of skipping when `perf` is missing.

mod common;

use common::{perf_available, record, text};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

/// One branch: (from, to, tid).
type Branch = (u64, u64, u32);

/// A sample: (tid, ip, branch stack newest first).
type Sample = (u32, u64, Vec<(u64, u64)>);

#[derive(Default)]
struct Truth {
    branches: BTreeMap<u32, Vec<Branch>>,
    samples: BTreeMap<u32, Vec<Sample>>,
    /// Full mode: instructions `--itrace=i0ns` must count per CPU.
    instructions: BTreeMap<u32, u64>,
    /// Per CPU, the first and last branch time (ns).
    times: BTreeMap<u32, (u64, u64)>,
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("not hex: {s}"))
}

fn read_truth(path: &Path) -> Truth {
    let mut t = Truth::default();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.first() {
            Some(&"branch") => {
                let cpu = f[1].parse().unwrap();
                let time: u64 = f[3].parse().unwrap();
                let span = t.times.entry(cpu).or_insert((time, time));
                span.0 = span.0.min(time);
                span.1 = span.1.max(time);
                t.branches.entry(cpu).or_default().push((
                    hex(f[4]),
                    hex(f[5]),
                    f[2].parse().unwrap(),
                ));
            }
            Some(&"instructions") => {
                t.instructions
                    .insert(f[1].parse().unwrap(), f[2].parse().unwrap());
            }
            Some(&"sample") => {
                let stack = f[6..]
                    .iter()
                    .map(|e| {
                        let (a, b) = e.split_once('/').unwrap();
                        (hex(a), hex(b))
                    })
                    .collect();
                t.samples.entry(f[1].parse().unwrap()).or_default().push((
                    f[2].parse().unwrap(),
                    hex(f[4]),
                    stack,
                ));
            }
            _ => {}
        }
    }
    t
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("perfaux-itrace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn perf_script(file: &Path, extra: &[&str]) -> String {
    let out = Process::new("perf")
        .arg("script")
        .args(extra)
        .arg("-i")
        .arg(file)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "perf script {extra:?}: {stderr}"
    );
    let stdout = text(&out.stdout);
    for bad in [
        "instruction trace error",
        "Failed to get instruction",
        "Can't parse sample",
    ] {
        assert!(
            !stdout.contains(bad) && !stderr.contains(bad),
            "perf script {extra:?}: {bad}"
        );
    }
    stdout
}

/// Records with `args`, then holds perf's decode against the truth.
fn decode_matches_truth(name: &str, args: &[&str]) {
    let data = tmp(&format!("{name}.data"));
    let truth_path = tmp(&format!("{name}.truth"));
    let truth_arg = truth_path.to_str().unwrap();
    let mut all = vec!["-q", "--truth", truth_arg];
    all.extend(args);
    record(&data, &all);
    let truth = read_truth(&truth_path);
    let full = args.contains(&"full");
    let mut vmlinux = Vec::new();
    let vm_path = format!("{}.perfaux-vmlinux", data.display());
    if args.contains(&"--kernel") {
        vmlinux = vec!["--vmlinux", vm_path.as_str()];
    }

    // Every branch, per CPU.
    let mut be_args = vec!["--itrace=be", "-F", "tid,cpu,time,event,flags,ip,addr"];
    be_args.extend(&vmlinux);
    let be = perf_script(&data, &be_args);
    let mut perf: BTreeMap<u32, Vec<Branch>> = BTreeMap::new();
    let mut last_time: BTreeMap<u32, f64> = BTreeMap::new();
    for line in be.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // perf prints the file's own samples (`cycles:u:` ...) among the
        // synthesized `branches` events: only the latter are branches.
        if !f[3].starts_with("branches") {
            continue;
        }
        let tid: u32 = f[0].parse().unwrap();
        let cpu: u32 = f[1].trim_matches(|c| c == '[' || c == ']').parse().unwrap();
        let time: f64 = f[2].trim_end_matches(':').parse().unwrap();
        let i = f.iter().position(|&w| w == "=>").expect("a branch has =>");
        let (from, to) = (hex(f[i - 1]), hex(f[i + 1]));
        let last = last_time.entry(cpu).or_insert(0.0);
        assert!(
            time >= *last,
            "{name}: CPU {cpu} time goes back at {line:?}"
        );
        // Within the recording: perf's times come from the TSC packets
        // (printed to the microsecond), the truth's from the clock.
        let (first, last_ns) = truth.times[&cpu];
        assert!(
            time >= (first / 1000) as f64 / 1e6 - 2e-6 && time <= last_ns as f64 / 1e9 + 2e-6,
            "{name}: CPU {cpu} time {time} outside the recording [{first}, {last_ns}] ns"
        );
        *last = time;
        perf.entry(cpu).or_default().push((from, to, tid));
    }
    assert_eq!(
        perf.keys().collect::<Vec<_>>(),
        truth.branches.keys().collect::<Vec<_>>(),
        "{name}: CPUs"
    );
    for (cpu, want) in &truth.branches {
        let got = &perf[cpu];
        if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
            panic!(
                "{name}: CPU {cpu} branch {i} of {}: perf {:x?}, truth {:x?}",
                want.len(),
                &got[i..(i + 3).min(got.len())],
                &want[i..(i + 3).min(want.len())]
            );
        }
        assert_eq!(got.len(), want.len(), "{name}: CPU {cpu} branch count");
        assert!(
            want.len() > 1000,
            "{name}: CPU {cpu}: only {} branches",
            want.len()
        );
    }

    // Every instruction (full mode, kept small: perf prints one line each).
    let total: u64 = truth.instructions.values().sum();
    if full && total <= 4_000_000 {
        let mut i_args = vec!["--itrace=i0ns", "-F", "cpu,event"];
        i_args.extend(&vmlinux);
        let mut counted: BTreeMap<u32, u64> = BTreeMap::new();
        for line in perf_script(&data, &i_args).lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            // The file's own samples are printed too: count instructions.
            if f[1].starts_with("instructions") {
                let cpu = f[0].trim_matches(|c| c == '[' || c == ']').parse().unwrap();
                *counted.entry(cpu).or_default() += 1;
            }
        }
        assert_eq!(counted, truth.instructions, "{name}: instructions per CPU");
    }

    // Every sample's history (sampling mode: perf attaches the branches of
    // the trace to each sample that carries it).
    if !full {
        let mut l_args = vec!["--itrace=L64", "-F", "event,cpu,tid,time,ip,brstack"];
        l_args.extend(&vmlinux);
        let l64 = perf_script(&data, &l_args);
        let mut got: BTreeMap<u32, Vec<Sample>> = BTreeMap::new();
        for line in l64.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let cpu: u32 = f[1].trim_matches(|c| c == '[' || c == ']').parse().unwrap();
            let stack = f[5..]
                .iter()
                .map(|e| {
                    let mut p = e.split('/');
                    (hex(p.next().unwrap()), hex(p.next().unwrap()))
                })
                .collect();
            got.entry(cpu)
                .or_default()
                .push((f[0].parse().unwrap(), hex(f[4]), stack));
        }
        for (cpu, want) in &truth.samples {
            let have = &got[cpu];
            assert_eq!(have.len(), want.len(), "{name}: CPU {cpu} samples");
            for (i, (h, w)) in have.iter().zip(want).enumerate() {
                assert_eq!(
                    h, w,
                    "{name}: CPU {cpu} sample {i}: perf's history, then the truth"
                );
            }
            assert!(
                want.iter().all(|s| !s.2.is_empty()),
                "{name}: a sample without history"
            );
        }
    }
    for p in [
        data.clone(),
        truth_path,
        PathBuf::from(format!("{}.perfaux-demo", data.display())),
    ] {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_file(vm_path);
}

#[test]
fn sampling_mode_decodes_into_the_truth() {
    if !perf_available() {
        return;
    }
    decode_matches_truth("s1", &["--seed", "1", "--cpus", "4", "--samples", "400"]);
    decode_matches_truth(
        "s2",
        &[
            "--seed",
            "2",
            "--cpus",
            "1",
            "--samples",
            "150",
            "--aux-sample-size",
            "16384",
        ],
    );
    decode_matches_truth(
        "s3",
        &[
            "--seed",
            "3",
            "--cpus",
            "2",
            "--samples",
            "120",
            "--aux-sample-size",
            "65536",
            "-e",
            "cycles",
            "-e",
            "instructions",
        ],
    );
}

#[test]
fn full_trace_mode_decodes_into_the_truth() {
    if !perf_available() {
        return;
    }
    decode_matches_truth(
        "f1",
        &[
            "--seed",
            "4",
            "--cpus",
            "2",
            "--samples",
            "200",
            "--mode",
            "full",
        ],
    );
    decode_matches_truth(
        "f2",
        &[
            "--seed",
            "5",
            "--cpus",
            "3",
            "--duration",
            "3ms",
            "--mode",
            "full",
            "--aux-pages",
            "128",
        ],
    );
}

#[test]
fn full_trace_instruction_counts_equal_the_simulators() {
    if !perf_available() {
        return;
    }
    decode_matches_truth(
        "i1",
        &[
            "--seed",
            "9",
            "--cpus",
            "2",
            "--duration",
            "1ms",
            "--mode",
            "full",
        ],
    );
    decode_matches_truth(
        "i2",
        &[
            "--kernel",
            "--seed",
            "10",
            "--cpus",
            "1",
            "--duration",
            "1ms",
            "--mode",
            "full",
        ],
    );
}

#[test]
fn a_traced_kernel_handler_decodes_into_the_truth() {
    if !perf_available() {
        return;
    }
    decode_matches_truth(
        "k1",
        &["--kernel", "--seed", "6", "--cpus", "2", "--samples", "200"],
    );
    decode_matches_truth(
        "k2",
        &[
            "--kernel",
            "--seed",
            "7",
            "--cpus",
            "1",
            "--samples",
            "100",
            "--aux-sample-size",
            "32768",
        ],
    );
    decode_matches_truth(
        "k3",
        &[
            "--kernel",
            "--seed",
            "8",
            "--cpus",
            "2",
            "--samples",
            "150",
            "--mode",
            "full",
        ],
    );
}
