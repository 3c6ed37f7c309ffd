// SPDX-License-Identifier: MIT OR Apache-2.0
//! Linux perf's own Intel PT decoder against the simulator's ground truth:
//! for several seeds, CPU counts, AUX sample sizes, both modes, user-only
//! and with the kernel traced, `perf script --itrace=be` must print no
//! instruction trace error and exactly the truth's branches per CPU
//! (from, to, tid), in order, at times that never go back and lie within
//! the recording; in sampling mode every sample's `--itrace=L64` branch
//! stack must be the truth's. A full-trace run whose AUX area overflows
//! (TRUNCATED records) may show one "Lost trace data" error per TRUNCATED
//! record (perf reports each) and nothing else: the branches whose packets
//! were lost are not in the truth. Set `PERFAUX_REQUIRE_PERF=1` (CI does) to
//! fail instead of skipping when `perf` is missing.

mod common;

use common::{perf_available, record, text};
use perfaux::abi::aux_flags;
use perfaux_cli::perfdata::PerfData;
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
    /// Trace events whose packets a full AUX area lost, per CPU.
    lost: BTreeMap<u32, u64>,
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
            Some(&"lost") => {
                t.lost.insert(f[1].parse().unwrap(), f[2].parse().unwrap());
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
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| common::fresh_dir("itrace"));
    dir.join(name)
}

/// `PERF_RECORD_AUX` records flagged TRUNCATED in `file`.
fn truncated_records(file: &Path) -> usize {
    let bytes = std::fs::read(file).unwrap();
    let data = PerfData::parse(&bytes).unwrap();
    data.records()
        .map(Result::unwrap)
        .filter(|r| {
            r.header.type_ == perfaux::abi::record_type::AUX
                && u64::from_le_bytes(r.bytes[24..32].try_into().unwrap()) & aux_flags::TRUNCATED
                    != 0
        })
        .count()
}

/// perf script's output; it must show no instruction trace error but
/// `lost` "Lost trace data" errors (one per TRUNCATED record).
fn perf_script(file: &Path, extra: &[&str], lost: usize) -> String {
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
    let errors: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("instruction trace error"))
        .collect();
    let lost_lines = errors
        .iter()
        .filter(|l| l.ends_with("code 8: Lost trace data"))
        .count();
    assert!(
        lost_lines == errors.len(),
        "perf script {extra:?}: {:?}",
        errors.iter().find(|l| !l.ends_with("Lost trace data"))
    );
    if extra
        .iter()
        .any(|a| a.starts_with("--itrace=") && a.contains('e'))
    {
        assert_eq!(lost_lines, lost, "perf script {extra:?}: lost-data errors");
    }
    for bad in ["Failed to get instruction", "Can't parse sample"] {
        assert!(
            !stdout.contains(bad) && !stderr.contains(bad),
            "perf script {extra:?}: {bad}"
        );
    }
    // perf's closing count of the errors it reported.
    let warned = stderr
        .lines()
        .find_map(|l| l.trim().strip_suffix(" instruction trace errors"))
        .map_or(0, |n| n.trim().parse::<usize>().unwrap());
    assert!(
        warned == 0 || warned == lost,
        "perf script {extra:?}: {stderr}"
    );
    stdout
}

/// The samples of `perf script --itrace=L64 -F event,cpu,tid,time,ip,brstack`
/// per CPU.
fn samples_of(l64: &str) -> BTreeMap<u32, Vec<Sample>> {
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
    got
}

/// Records with `args`, then holds perf's decode against the truth;
/// returns the file's TRUNCATED records.
fn decode_matches_truth(name: &str, args: &[&str]) -> usize {
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
    let lost = truncated_records(&data);
    let be = perf_script(&data, &be_args, lost);
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
    if full && total <= 4_000_000 && truth.lost.is_empty() {
        let mut i_args = vec!["--itrace=i0ns", "-F", "cpu,event"];
        i_args.extend(&vmlinux);
        let mut counted: BTreeMap<u32, u64> = BTreeMap::new();
        for line in perf_script(&data, &i_args, lost).lines() {
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
        let got = samples_of(&perf_script(&data, &l_args, lost));
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
    lost
}

/// A sample's ip and branch stack (from, to), newest first.
type Stack = (u64, Vec<(u64, u64)>);

/// Records with `-b` and `args`; every sample's branch stack as perf reads
/// it (`--no-itrace`: the stack the sample carries) is the truth's `lbr`
/// line, CPU by CPU in order; returns the samples checked.
fn branch_stacks_match_truth(name: &str, args: &[&str]) -> usize {
    let data = tmp(&format!("{name}.data"));
    let truth_path = tmp(&format!("{name}.truth"));
    let mut all = vec!["-q", "--truth", truth_path.to_str().unwrap()];
    all.extend(args);
    record(&data, &all);
    let mut want: BTreeMap<u32, Vec<Stack>> = BTreeMap::new();
    for line in std::fs::read_to_string(&truth_path).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.first() == Some(&"lbr") {
            let stack = f[5..]
                .iter()
                .map(|e| {
                    let (a, b) = e.split_once('/').unwrap();
                    (hex(a), hex(b))
                })
                .collect();
            want.entry(f[1].parse().unwrap())
                .or_default()
                .push((hex(f[3]), stack));
        }
    }
    let mut got: BTreeMap<u32, Vec<Stack>> = BTreeMap::new();
    for line in perf_script(&data, &["--no-itrace", "-F", "cpu,ip,brstack"], 0).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let cpu = f[0].trim_matches(|c| c == '[' || c == ']').parse().unwrap();
        let stack = f[2..]
            .iter()
            .map(|e| {
                let mut p = e.split('/');
                (hex(p.next().unwrap()), hex(p.next().unwrap()))
            })
            .collect();
        got.entry(cpu).or_default().push((hex(f[1]), stack));
    }
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{name}: CPUs"
    );
    let mut n = 0;
    for (cpu, w) in &want {
        let g = &got[cpu];
        assert_eq!(g.len(), w.len(), "{name} CPU {cpu}: samples");
        for (i, (g, w)) in g.iter().zip(w).enumerate() {
            assert_eq!(
                g, w,
                "{name} CPU {cpu} sample {i}: perf's stack, then the truth's"
            );
        }
        n += w.len();
    }
    n
}

#[test]
fn the_simulators_branch_stacks_are_its_cpus_newest_branches() {
    if !perf_available() {
        return;
    }
    // Snapshot mode: the samples carry their trace and their stack.
    let n = branch_stacks_match_truth(
        "b1",
        &["-b", "--seed", "5", "--cpus", "4", "--samples", "400"],
    );
    assert!(n >= 400, "{n} samples");
    // Full-trace mode, two counters, a filter: calls and returns, typed.
    let n = branch_stacks_match_truth(
        "b2",
        &[
            "-j",
            "any_call,any_ret,save_type,hw_index",
            "--mode",
            "full",
            "--seed",
            "6",
            "--cpus",
            "2",
            "--samples",
            "300",
            "-e",
            "cycles",
            "-e",
            "branches",
        ],
    );
    assert!(n >= 300, "{n} samples");
    // A stack starts empty when a thread is switched in (the LBR is
    // flushed): with a sample every 300 cycles, the first ones after each
    // switch are short, the rest full.
    let n = branch_stacks_match_truth(
        "b3",
        &[
            "-b",
            "--mode",
            "full",
            "--cpus",
            "1",
            "--period",
            "300",
            "--duration",
            "3ms",
        ],
    );
    assert!(n > 5000, "{n} samples");
    let truth = std::fs::read_to_string(tmp("b3.truth")).unwrap();
    let sizes: Vec<usize> = truth
        .lines()
        .filter(|l| l.starts_with("lbr "))
        .map(|l| l.split_whitespace().nth(4).unwrap().parse().unwrap())
        .collect();
    let short = sizes.iter().filter(|&&s| s < 32).count();
    assert!(
        (2..20).contains(&short),
        "{short} short stacks of {}",
        sizes.len()
    );
    // The file says its samples carry stacks (HEADER_BRANCH_STACK): perf
    // report's branch view takes it.
    let report = Process::new("perf")
        .args(["report", "--branch-history", "--stdio", "-i"])
        .arg(tmp("b1.data"))
        .output()
        .unwrap();
    assert!(report.status.success(), "{}", text(&report.stderr));
    assert!(
        text(&report.stdout).contains("predicted"),
        "{}",
        text(&report.stdout)
    );
    let out = common::perfaux()
        .args(["dump", "--check"])
        .arg(tmp("b2.data"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stdout));
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

/// A full-trace consumer that falls behind (AUX areas of 2 to 8 pages, the
/// kernel excluded and traced): TRUNCATED records, one "Lost trace data"
/// error each and no other, and every branch perf decodes is the truth's,
/// those whose packets were lost left out.
#[test]
fn an_overflowing_aux_area_loses_only_what_its_truncated_records_say() {
    if !perf_available() {
        return;
    }
    for (pages, seed, cpus, kernel) in [
        ("2", "6", "2", false),
        ("4", "7", "3", false),
        ("8", "1", "4", false),
        ("4", "8", "2", true),
    ] {
        let mut args = vec![
            "--seed",
            seed,
            "--cpus",
            cpus,
            "--duration",
            "4ms",
            "--mode",
            "full",
            "--aux-pages",
            pages,
        ];
        if kernel {
            args.push("--kernel");
        }
        let lost = decode_matches_truth(&format!("o{pages}-{seed}"), &args);
        assert!(lost > 0, "{pages} pages: no TRUNCATED record");
    }
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

/// A file cut short (a copy stopped mid-way): perf 6.1's trace decoder
/// walks on past the cut (spinning or SIGBUS), so `perfaux repair` writes
/// the complete records as a file perf reads whole. Cut mid-record at three
/// points of a sampling-mode file, the repaired file's samples are, CPU by
/// CPU, the truth's first ones, each with the truth's branch history; cut
/// in a full trace, every branch perf decodes is the truth's, in order.
#[test]
fn a_repaired_cut_file_decodes_into_the_truth_up_to_the_cut() {
    if !perf_available() {
        return;
    }
    for (mode, seed) in [("snapshot", "11"), ("full", "12")] {
        let name = format!("cut-{mode}");
        let data = tmp(&format!("{name}.data"));
        let truth_path = tmp(&format!("{name}.truth"));
        record(
            &data,
            &[
                "-q",
                "--truth",
                truth_path.to_str().unwrap(),
                "--seed",
                seed,
                "--cpus",
                "2",
                "--samples",
                "300",
                "--mode",
                mode,
            ],
        );
        let truth = read_truth(&truth_path);
        let bytes = std::fs::read(&data).unwrap();
        for percent in [20, 50, 90] {
            // Past a record's start: the cut is inside one.
            let cut = tmp(&format!("{name}-{percent}.data"));
            std::fs::write(&cut, &bytes[..bytes.len() * percent / 100 + 3]).unwrap();
            let fixed = tmp(&format!("{name}-{percent}-fixed.data"));
            common::repair(&cut, &fixed);
            let what = format!("{mode} cut at {percent}%");
            let fixed_bytes = std::fs::read(&fixed).unwrap();
            let parsed = PerfData::parse(&fixed_bytes).unwrap();
            assert!(parsed.truncated.is_none(), "{what}: still cut");
            let samples_in_file = parsed
                .records()
                .map(Result::unwrap)
                .filter(|r| r.header.type_ == perfaux::abi::record_type::SAMPLE)
                .count();
            if mode == "snapshot" {
                let l_args = ["--itrace=L64", "-F", "event,cpu,tid,time,ip,brstack"];
                let got = samples_of(&perf_script(&fixed, &l_args, 0));
                let total: usize = got.values().map(Vec::len).sum();
                assert!(total > 0, "{what}: no samples");
                assert_eq!(total, samples_in_file, "{what}: samples");
                for (cpu, have) in &got {
                    let want = &truth.samples[cpu];
                    assert_eq!(have[..], want[..have.len()], "{what}: CPU {cpu}");
                }
            } else {
                let be_args = ["--itrace=be", "-F", "tid,cpu,event,ip,addr"];
                let be = perf_script(&fixed, &be_args, truncated_records(&fixed));
                let mut got: BTreeMap<u32, Vec<Branch>> = BTreeMap::new();
                for line in be.lines() {
                    let f: Vec<&str> = line.split_whitespace().collect();
                    if !f[2].starts_with("branches") {
                        continue;
                    }
                    let cpu = f[1].trim_matches(|c| c == '[' || c == ']').parse().unwrap();
                    let i = f.iter().position(|&w| w == "=>").unwrap();
                    got.entry(cpu).or_default().push((
                        hex(f[i - 1]),
                        hex(f[i + 1]),
                        f[0].parse().unwrap(),
                    ));
                }
                assert!(!got.is_empty(), "{what}: no branches");
                for (cpu, have) in &got {
                    let want = &truth.branches[cpu];
                    assert!(
                        have.len() <= want.len(),
                        "{what}: CPU {cpu}: more than the truth"
                    );
                    if let Some(i) = have.iter().zip(want).position(|(a, b)| a != b) {
                        panic!(
                            "{what}: CPU {cpu} branch {i}: perf {:x?}, truth {:x?}",
                            have[i], want[i]
                        );
                    }
                }
            }
            let _ = std::fs::remove_file(cut);
            let _ = std::fs::remove_file(fixed);
        }
        for p in [
            data.clone(),
            truth_path,
            PathBuf::from(format!("{}.perfaux-demo", data.display())),
        ] {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `perf --buildid-dir CACHE script --itrace=be -F ip,sym,addr -i file`:
/// its output and the instruction trace errors it printed.
fn branches_via_cache(file: &Path, cache: &Path) -> (String, usize) {
    let out = Process::new("perf")
        .arg("--buildid-dir")
        .arg(cache)
        .args(["script", "--itrace=be", "-F", "ip,sym,addr", "-i"])
        .arg(file)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    let errors = stdout
        .lines()
        .filter(|l| l.contains("instruction trace error"))
        .count();
    (stdout, errors)
}

/// perf finds the simulator's code by build-id in the cache `record` fills,
/// as `perf record` fills it: a recording whose program file a newer run
/// replaced (`perf.data.old`) or that was moved away from it decodes as it
/// did, with no error. Without the cache (`--no-buildid-cache`, an empty
/// cache) the old file does not: the test has teeth.
#[test]
fn old_and_moved_recordings_decode_through_the_build_id_cache() {
    if !perf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("perf.data");
    let old = dir.path().join("perf.data.old");
    let args = |seed: &'static str| {
        [
            "-q",
            "--mode",
            "full",
            "--cpus",
            "1",
            "--duration",
            "1ms",
            "--seed",
            seed,
        ]
    };
    let cache = common::buildid_cache();
    record(&data, &args("3"));
    let (first, errors) = branches_via_cache(&data, &cache);
    assert_eq!(errors, 0, "{first}");
    assert!(first.lines().count() > 1000);

    // A newer run of another program: its code replaces the old one's file.
    record(&data, &args("4"));
    let (again, errors) = branches_via_cache(&old, &cache);
    assert_eq!(errors, 0);
    assert!(again == first, "perf.data.old decodes as it did");

    // Moved elsewhere, its program file gone.
    let moved = dir.path().join("elsewhere/kept.data");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&old, &moved).unwrap();
    std::fs::remove_file(dir.path().join("perf.data.perfaux-demo")).unwrap();
    let (again, errors) = branches_via_cache(&moved, &cache);
    assert_eq!(errors, 0);
    assert!(again == first, "a moved recording decodes as it did");

    // The control: the same two runs without the cache.
    let empty = dir.path().join("empty-cache");
    let data = dir.path().join("uncached.data");
    let uncached = |seed| [&args(seed)[..], &["--no-buildid-cache"]].concat();
    record(&data, &uncached("3"));
    record(&data, &uncached("4"));
    let (_, errors) = branches_via_cache(&dir.path().join("uncached.data.old"), &empty);
    assert!(errors > 0, "without the cache the old file's code is gone");
    let entry = cache
        .join(dir.path().strip_prefix("/").unwrap())
        .join("uncached.data.perfaux-demo");
    assert!(!entry.exists(), "--no-buildid-cache adds nothing");
}
