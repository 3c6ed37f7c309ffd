// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux record -- PROGRAM`: real programs traced under QEMU user mode,
//! decoded by Linux perf's own Intel PT decoder and held to the plugin's
//! ground truth: every instruction per thread, every branch in order, each
//! sample's history, 0 errors. Programs: `/bin/true`, `ls /usr/bin`, gzip
//! of 1 MB, and `tests/programs/workload.c` (threads, fork, recursion, a
//! function-pointer table, a jump table, a signal handler, `rep movsb`).
//!
//! Needs `qemu-x86_64` (Debian: qemu-user), `perf` and a C compiler; with
//! `PERFAUX_REQUIRE_QEMU` set (CI sets it) a missing one fails the tests
//! instead of skipping them.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::{perf_available, perfaux, text};

/// Whether the emulator, the plugin and perf are here; the plugin is built
/// if it is not (`cargo test` builds the `perfaux` binary, not the plugin
/// of another package).
fn ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let required = std::env::var_os("PERFAUX_REQUIRE_QEMU").is_some();
        let qemu = std::process::Command::new("qemu-x86_64")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !qemu {
            assert!(
                !required,
                "PERFAUX_REQUIRE_QEMU is set but qemu-x86_64 does not run"
            );
            common::skipped(
                "qemu-x86_64 not installed (apt-get install qemu-user): the real programs",
            );
            return false;
        }
        if !perf_available() {
            assert!(
                !required,
                "PERFAUX_REQUIRE_QEMU is set but perf does not run"
            );
            return false;
        }
        build_plugin();
        true
    })
}

/// Builds the plugin beside the `perfaux` binary under test.
fn build_plugin() {
    let bin = assert_cmd::cargo::cargo_bin("perfaux");
    let dir = bin.parent().unwrap();
    let release = dir.file_name().is_some_and(|n| n == "release");
    let mut cmd = std::process::Command::new(env!("CARGO"));
    cmd.args(["build", "--quiet", "-p", "perfaux-qemu"]);
    if release {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "building the plugin: {}",
        text(&out.stderr)
    );
    assert!(
        dir.join("libperfaux_qemu.so").is_file(),
        "the plugin is beside {}",
        bin.display()
    );
}

/// The scratch directory of this test process, under cargo's target
/// directory (emptied when a run starts, left for a look after it).
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("programs");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

/// The test program, compiled once (with symbols).
fn workload() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        compile(
            "tests/programs/workload.c",
            "workload",
            &["-O1", "-g", "-pthread", "-no-pie"],
        )
    })
    .clone()
}

/// `src` (from the crate's directory) compiled by `cc` with `flags` into
/// the scratch directory as `name`.
fn compile(src: &str, name: &str, flags: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
    let bin = scratch().join(name);
    let out = std::process::Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("a C compiler (cc) runs");
    assert!(
        out.status.success(),
        "cc {}: {}",
        src.display(),
        text(&out.stderr)
    );
    bin
}

/// A 1 MB file of base64 text (gzip's input), the same bytes every run.
fn megabyte() -> PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = scratch().join("input.txt");
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut bytes = Vec::with_capacity(1 << 20);
        while bytes.len() < 1 << 20 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bytes.push(if bytes.len() % 77 == 76 {
                b'\n'
            } else {
                alphabet[(x % 64) as usize]
            });
        }
        std::fs::write(&path, bytes).unwrap();
        path
    })
    .clone()
}

/// The build-id cache of the tests (not the user's ~/.debug).
fn cache() -> PathBuf {
    scratch().join("buildid-cache")
}

/// `perf --buildid-dir <the tests' cache>`.
fn perf() -> std::process::Command {
    let mut cmd = std::process::Command::new("perf");
    cmd.arg("--buildid-dir").arg(cache());
    cmd
}

/// `perfaux record -q -o DATA [args] -- program...` in the scratch
/// directory; its output.
fn record(data: &Path, args: &[&str], program: &[&str]) -> Output {
    recorder(data, args, program).output().unwrap()
}

/// `perfaux record -q -o DATA ARGS -- PROGRAM`, not started.
fn recorder(data: &Path, args: &[&str], program: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_perfaux"));
    cmd.current_dir(scratch())
        .env("PERF_BUILDID_DIR", cache())
        .arg("record")
        .arg("-q")
        .arg("-o")
        .arg(data)
        .args(args)
        .arg("--")
        .args(program);
    cmd
}

/// As [`record`], with the recorder stopped (`SIGSTOP`) for 400 ms of
/// every 500 until it ends: the program, emulated, must wait for it
/// rather than lose a record or a byte of trace. The pauses only make
/// the recorder slow; what the caller checks does not depend on them.
fn record_stalled(data: &Path, args: &[&str], program: &[&str]) -> Output {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::Duration;
    let mut child = recorder(data, args, program)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let signal = |name: &str| {
        let _ = std::process::Command::new("kill")
            .args([name, &pid])
            .status();
    };
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    // Only try_wait reaps the recorder, between two pauses: its pid is
    // not another process's while it is signalled.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(100));
        signal("-STOP");
        std::thread::sleep(Duration::from_millis(400));
        signal("-CONT");
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// `perf script -i DATA args`: its standard output, after checking that
/// perf reported no instruction trace error.
fn perf_script(data: &Path, args: &[&str]) -> String {
    let out = perf()
        .arg("script")
        .arg("-i")
        .arg(data)
        .args(args)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "perf script {args:?}: {stderr}");
    assert!(
        !stdout.contains("instruction trace error") && !stderr.contains("instruction trace error"),
        "perf script {args:?} on {}: {}",
        data.display(),
        stderr
            .lines()
            .chain(stdout.lines().filter(|l| l.contains("error")))
            .take(10)
            .collect::<Vec<_>>()
            .join("\n")
    );
    stdout
}

/// perf's count of the instructions of each CPU (a thread's slot), from
/// `--itrace=i1i` (one synthesized sample per instruction).
fn perf_instructions(data: &Path) -> BTreeMap<u32, u64> {
    let out = perf()
        .args([
            "report",
            "--itrace=i1i",
            "--stdio",
            "--sort",
            "cpu",
            "-F",
            "sample,cpu",
            "-i",
        ])
        .arg(data)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        !stderr.contains("instruction trace error"),
        "perf report: {stderr}"
    );
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[1].parse().unwrap(), f[0].parse().unwrap())
        })
        .collect()
}

/// A sample's ip and its history, newest branch first.
type Sample = (u64, Vec<(u64, u64)>);

/// The plugin's ground truth (`--truth`).
#[derive(Default)]
struct Truth {
    /// slot -> (pid, tid, instructions, ended).
    threads: BTreeMap<u32, (u32, u32, u64, bool)>,
    /// slot -> every branch, in order.
    branches: BTreeMap<u32, Vec<(u64, u64)>>,
    /// slot -> each sample's ip and history (newest first).
    samples: BTreeMap<u32, Vec<Sample>>,
    /// slot -> where each sample came among the slot's branches.
    sample_at: BTreeMap<u32, Vec<usize>>,
}

impl Truth {
    /// The branch stack of each sample of `slot` as an LBR holds it: the
    /// newest 32 taken branches before the sample (no asynchronous exit
    /// or start of tracing: those are transfers to or from the kernel),
    /// newest first.
    fn branch_stacks(&self, slot: u32) -> Vec<Sample> {
        let branches = self.branches.get(&slot).map_or(&[][..], Vec::as_slice);
        self.samples[&slot]
            .iter()
            .zip(&self.sample_at[&slot])
            .map(|(sample, &at)| {
                let stack = branches[..at]
                    .iter()
                    .rev()
                    .filter(|(from, to)| *from != 0 && *to != 0)
                    .take(32)
                    .copied()
                    .collect();
                (sample.0, stack)
            })
            .collect()
    }
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

fn pair(s: &str) -> (u64, u64) {
    let mut p = s.split('/');
    (hex(p.next().unwrap()), hex(p.next().unwrap()))
}

fn read_truth(path: &Path) -> Truth {
    let mut t = Truth::default();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let slot: u32 = f[1].parse().unwrap();
        match f[0] {
            "thread" => {
                t.threads.insert(
                    slot,
                    (
                        f[2].parse().unwrap(),
                        f[3].parse().unwrap(),
                        f[4].parse().unwrap(),
                        f[5] == "ended",
                    ),
                );
            }
            "branch" => t
                .branches
                .entry(slot)
                .or_default()
                .push((hex(f[2]), hex(f[3]))),
            "sample" => {
                let at = t.branches.get(&slot).map_or(0, Vec::len);
                t.sample_at.entry(slot).or_default().push(at);
                let history = f[4..].iter().map(|e| pair(e)).collect();
                t.samples
                    .entry(slot)
                    .or_default()
                    .push((hex(f[2]), history));
            }
            other => panic!("truth line {other}"),
        }
    }
    t
}

/// perf's branches of each CPU (slot), from `--itrace=be`.
fn perf_branches(data: &Path) -> BTreeMap<u32, Vec<(u64, u64)>> {
    let mut got: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    for line in perf_script(data, &["--itrace=be", "-F", "cpu,ip,addr"]).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let cpu = f[0].trim_matches(|c| c == '[' || c == ']').parse().unwrap();
        let i = f.iter().position(|&w| w == "=>").expect("a branch has =>");
        got.entry(cpu)
            .or_default()
            .push((hex(f[i - 1]), hex(f[i + 1])));
    }
    got
}

/// perf's samples of each CPU with their `--itrace=L64` histories.
fn perf_samples(data: &Path) -> BTreeMap<u32, Vec<Sample>> {
    perf_brstacks(data, "--itrace=L64")
}

/// perf's samples of each CPU with the branch stacks perf shows with
/// `itrace` (`--no-itrace`: the stacks the samples carry).
fn perf_brstacks(data: &Path, itrace: &str) -> BTreeMap<u32, Vec<Sample>> {
    let mut got: BTreeMap<u32, Vec<Sample>> = BTreeMap::new();
    for line in perf_script(data, &[itrace, "-F", "cpu,ip,brstack"]).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let cpu = f[0].trim_matches(|c| c == '[' || c == ']').parse().unwrap();
        let history = f[2..].iter().map(|e| pair(e)).collect();
        got.entry(cpu).or_default().push((hex(f[1]), history));
    }
    got
}

/// Records `program` as a full trace with the truth, and holds perf's
/// decode to it: every branch of every thread in order, every
/// instruction per thread; returns the truth.
fn full_trace_matches_truth(name: &str, program: &[&str]) -> Truth {
    full_trace_matches_truth_by(record, name, program)
}

/// [`full_trace_matches_truth`], recorded by `record`.
fn full_trace_matches_truth_by(
    record: fn(&Path, &[&str], &[&str]) -> Output,
    name: &str,
    program: &[&str],
) -> Truth {
    let data = scratch().join(format!("{name}.data"));
    let truth_path = scratch().join(format!("{name}.truth"));
    let out = record(&data, &["--truth", truth_path.to_str().unwrap()], program);
    assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
    let truth = read_truth(&truth_path);
    assert!(!truth.threads.is_empty(), "{name}: no thread traced");
    let branches = perf_branches(&data);
    for (slot, want) in &truth.branches {
        let got = branches.get(slot).map_or(&[][..], Vec::as_slice);
        if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
            panic!(
                "{name}: thread {slot} branch {i} of {}: perf {:x?}, truth {:x?}",
                want.len(),
                &got[i..(i + 3).min(got.len())],
                &want[i..(i + 3).min(want.len())]
            );
        }
        assert_eq!(got.len(), want.len(), "{name}: thread {slot}: branches");
    }
    let counted = perf_instructions(&data);
    let want: BTreeMap<u32, u64> = truth.threads.iter().map(|(s, t)| (*s, t.2)).collect();
    assert_eq!(
        counted, want,
        "{name}: instructions per thread (perf, then the plugin)"
    );
    truth
}

#[test]
fn true_and_ls_decode_to_every_instruction_and_branch() {
    if !ready() {
        return;
    }
    let t = full_trace_matches_truth("true", &["/bin/true"]);
    assert_eq!(t.threads.len(), 1);
    assert!(t.threads[&0].2 > 50_000, "/bin/true runs ld.so and libc");
    let t = full_trace_matches_truth("ls", &["ls", "/usr/bin"]);
    assert!(t.threads[&0].2 > 1_000_000);
}

#[test]
fn a_non_pie_program_with_libraries_high_above_it_decodes_exactly() {
    if !ready() {
        return;
    }
    // Debian's python3.11 is linked at 0x400000, its libraries far above:
    // IPs whose upper 32 bits differ, where every PSB+ FUP must be whole
    // (perf reads it against the last IP before the PSB when it walks to
    // it first). Before that fix, 1,989 instruction trace errors.
    let python = Path::new("/usr/bin/python3");
    let required = std::env::var_os("PERFAUX_REQUIRE_QEMU").is_some();
    if !python.is_file() {
        assert!(!required, "/usr/bin/python3 (Debian's python3) is missing");
        return;
    }
    let t = full_trace_matches_truth("python", &["/usr/bin/python3", "-c", "pass"]);
    assert!(t.threads[&0].2 > 1_000_000);
}

#[test]
fn threads_fork_signals_and_tables_decode_exactly() {
    if !ready() {
        return;
    }
    let bin = workload();
    let t = full_trace_matches_truth("workload", &[bin.to_str().unwrap(), "2000"]);
    // The main thread, two threads, the forked child: all traced, ended.
    assert_eq!(t.threads.len(), 4, "{:?}", t.threads);
    let pids: std::collections::BTreeSet<u32> = t.threads.values().map(|t| t.0).collect();
    assert_eq!(pids.len(), 2, "the child is a process of its own");
    assert!(t.threads.values().all(|t| t.3), "every thread ended");
    // The threads named themselves (prctl(PR_SET_NAME)): perf shows it.
    let data = scratch().join("workload.data");
    let comms = perf_script(&data, &["--itrace=i100000i", "-F", "comm,tid"]);
    let named: std::collections::BTreeSet<&str> = comms
        .lines()
        .filter(|l| l.trim_start().starts_with("worker"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(named.len(), 2, "{comms}");
}

#[test]
fn every_sample_carries_the_history_the_truth_has() {
    if !ready() {
        return;
    }
    let bin = workload();
    let data = scratch().join("samples.data");
    let truth_path = scratch().join("samples.truth");
    let out = record(
        &data,
        &[
            "--aux-sample",
            "-c",
            "10000",
            "--truth",
            truth_path.to_str().unwrap(),
        ],
        &[bin.to_str().unwrap(), "2000"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let truth = read_truth(&truth_path);
    let got = perf_samples(&data);
    let mut total = 0;
    for (slot, want) in &truth.samples {
        let have = &got[slot];
        assert_eq!(have.len(), want.len(), "thread {slot}: samples");
        for (i, (h, w)) in have.iter().zip(want).enumerate() {
            assert_eq!(h.0, w.0, "thread {slot} sample {i}: ip");
            assert_eq!(
                h.1, w.1,
                "thread {slot} sample {i}: perf's history, then the truth"
            );
            assert_eq!(h.1.len(), 64, "thread {slot} sample {i}: a full history");
        }
        total += want.len();
    }
    assert!(total > 100, "{total} samples");
}

#[test]
fn gzip_of_a_megabyte_decodes_with_no_error() {
    if !ready() {
        return;
    }
    let input = megabyte();
    let input = input.to_str().unwrap();
    // The whole trace: every instruction counted.
    let data = scratch().join("gzip.data");
    let out = record(&data, &[], &["gzip", "-kf", input]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let counted = perf_instructions(&data);
    assert_eq!(counted.len(), 1);
    assert!(counted[&0] > 50_000_000, "{counted:?}");
    // AUX samples: every one decodes into a full history.
    let data = scratch().join("gzip-samples.data");
    let out = record(&data, &["--aux-sample"], &["gzip", "-kf", input]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let samples = perf_samples(&data);
    let n: usize = samples.values().map(Vec::len).sum();
    assert!(n > 500, "{n} samples");
    assert!(samples.values().flatten().all(|s| s.1.len() == 64));
}

#[test]
fn a_recording_decodes_after_its_binary_is_replaced() {
    if !ready() {
        return;
    }
    // A copy of the program of its own, replaced after the recording by
    // another program at the same path: perf finds the code that ran in
    // the build-id cache, as after `perf record`.
    let bin = scratch().join("replaced");
    std::fs::copy(workload(), &bin).unwrap();
    let data = scratch().join("replaced.data");
    let out = record(&data, &[], &[bin.to_str().unwrap(), "500"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let before = perf_instructions(&data);
    std::fs::remove_file(&bin).unwrap();
    std::fs::copy("/bin/true", &bin).unwrap();
    assert_eq!(perf_instructions(&data), before, "decoded from the cache");
    assert_eq!(before.len(), 4);
    // --no-buildid-cache leaves the cache alone.
    let out = perfaux()
        .current_dir(scratch())
        .env("PERF_BUILDID_DIR", scratch().join("other-cache"))
        .args(["record", "-q", "--no-buildid-cache", "-o"])
        .arg(scratch().join("uncached.data"))
        .arg("--")
        .arg(&bin)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !scratch().join("other-cache").exists(),
        "--no-buildid-cache adds nothing"
    );
}

#[test]
fn programs_started_by_execve_are_named_and_the_rest_decodes() {
    if !ready() {
        return;
    }
    // sh forks and execs ls (its child is traced up to the exec), then
    // execs true itself.
    let data = scratch().join("exec.data");
    let truth_path = scratch().join("exec.truth");
    let out = record(
        &data,
        &["--truth", truth_path.to_str().unwrap()],
        &["sh", "-c", "ls / >/dev/null; exec true"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let untraced: Vec<&str> = err.lines().filter(|l| l.contains("ran untraced")).collect();
    assert_eq!(untraced.len(), 2, "{err}");
    assert!(
        untraced.iter().any(|l| l.contains("/ls ran untraced")),
        "{err}"
    );
    assert!(
        untraced.iter().any(|l| l.contains("/true ran untraced")),
        "{err}"
    );
    // Each traced up to its exec, exactly.
    let truth = read_truth(&truth_path);
    let want: BTreeMap<u32, u64> = truth.threads.iter().map(|(s, t)| (*s, t.2)).collect();
    assert_eq!(want.len(), 2, "sh and its child");
    assert_eq!(perf_instructions(&data), want);
}

/// The address and size of each function symbol of `bin` (`nm -S`).
fn symbols(bin: &Path) -> BTreeMap<String, (u64, u64)> {
    let out = std::process::Command::new("nm")
        .args(["-S", "--defined-only"])
        .arg(bin)
        .output()
        .expect("nm runs");
    text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4).then(|| (f[3].to_owned(), (hex(f[0]), hex(f[1]))))
        })
        .collect()
}

#[test]
fn asynchronous_signals_exit_where_their_handler_returns() {
    if !ready() {
        return;
    }
    // A timer's signal arrives between any two blocks of a loop of
    // conditional branches; where it interrupted the thread is known when
    // the handler returns (rt_sigreturn), and the trace must say that
    // place, not a guess at the Jcc's outcome.
    let bin = workload();
    let truth = full_trace_matches_truth("timer", &[bin.to_str().unwrap(), "timer"]);
    let syms = symbols(&bin);
    let handler = syms["on_alarm"].0;
    let (spin, len) = syms["spin"];
    let e = &truth.branches[&0];
    let mut checked = 0;
    for i in 1..e.len() {
        let (exit, to) = e[i - 1];
        if e[i] != (0, handler) || to != 0 || !(spin..spin + len).contains(&exit) {
            continue;
        }
        let resume = e[i + 1..]
            .iter()
            .find(|b| b.0 == 0 && b.1 != handler)
            .expect("the handler returns")
            .1;
        assert_eq!(
            resume, exit,
            "signal {checked}: exit at {exit:#x}, the handler returned to {resume:#x}"
        );
        checked += 1;
    }
    assert!(checked >= 200, "{checked} signals in the loop");

    // With AUX samples: those due while a handler runs wait for its return
    // (the trace before them is written then); every history is still the
    // truth's.
    let data = scratch().join("timer-samples.data");
    let truth_path = scratch().join("timer-samples.truth");
    let out = record(
        &data,
        &[
            "--aux-sample",
            "-c",
            "20000",
            "--truth",
            truth_path.to_str().unwrap(),
        ],
        &[bin.to_str().unwrap(), "timer"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let want = &read_truth(&truth_path).samples[&0];
    let got = &perf_samples(&data)[&0];
    assert_eq!(got.len(), want.len(), "samples");
    assert!(got.len() > 100, "{} samples", got.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "sample {i}: perf's history, then the truth");
    }
}

/// Records `program` with `args` and the truth; every sample's branch
/// stack as perf reads it (`--no-itrace`) is the truth's, sample for
/// sample. Returns the samples checked, and the truth.
fn branch_stacks_match_truth(name: &str, args: &[&str], program: &[&str]) -> (usize, Truth) {
    branch_stacks_match_truth_by(record, name, args, program)
}

/// [`branch_stacks_match_truth`], recorded by `record`.
fn branch_stacks_match_truth_by(
    record: fn(&Path, &[&str], &[&str]) -> Output,
    name: &str,
    args: &[&str],
    program: &[&str],
) -> (usize, Truth) {
    let data = scratch().join(format!("{name}.data"));
    let truth_path = scratch().join(format!("{name}.truth"));
    let mut all = args.to_vec();
    all.extend(["--truth", truth_path.to_str().unwrap()]);
    let out = record(&data, &all, program);
    assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
    let truth = read_truth(&truth_path);
    let got = perf_brstacks(&data, "--no-itrace");
    let mut total = 0;
    for slot in truth.samples.keys() {
        let want = truth.branch_stacks(*slot);
        let have = got.get(slot).map_or(&[][..], Vec::as_slice);
        assert_eq!(have.len(), want.len(), "{name} thread {slot}: samples");
        for (i, (h, w)) in have.iter().zip(&want).enumerate() {
            assert_eq!(
                h, w,
                "{name} thread {slot} sample {i}: perf's stack, then the truth's"
            );
        }
        total += want.len();
    }
    (total, truth)
}

#[test]
fn every_branch_stack_is_the_newest_32_taken_branches() {
    if !ready() {
        return;
    }
    let bin = workload();
    let (n, truth) = branch_stacks_match_truth(
        "lbr",
        &["-b", "-c", "10000"],
        &[bin.to_str().unwrap(), "2000"],
    );
    assert!(n > 100, "{n} samples");
    let full: usize = (truth.samples.keys())
        .map(|&slot| {
            truth
                .branch_stacks(slot)
                .iter()
                .filter(|s| s.1.len() == 32)
                .count()
        })
        .sum();
    assert!(full * 10 >= n * 9, "{full} of {n} stacks are full");
    // Signals: the branch a signal interrupted is known when its handler
    // returns, and goes below the handler's branches in the stack. A
    // short period, so that samples fall due inside handlers (taken at
    // their return, with the handler's branches the newest).
    let (n, _) = branch_stacks_match_truth(
        "lbr-timer",
        &["-b", "-c", "500"],
        &[bin.to_str().unwrap(), "timer"],
    );
    assert!(n > 100, "{n} samples");
    // perf report reads the stacks as it reads LBR's.
    let data = scratch().join("lbr.data");
    let check = perfaux()
        .arg("dump")
        .arg("--check")
        .arg(&data)
        .output()
        .unwrap();
    // Every invariant holds but, on a loaded host, perf's record order: a
    // thread preempted between stamping a record and publishing it can
    // publish it after the recorder's next rounds, which perf counts as
    // an "out of order event" and still processes (its kernel rings do
    // the same, `real_perf.rs`). Such a line is allowed, and says so.
    let report = text(&check.stdout);
    let violations: Vec<&str> = report
        .lines()
        .filter(|l| !l.contains(" records, ") && !l.contains("an out of order event"))
        .collect();
    assert!(
        violations.is_empty() && (check.status.success() || report.contains("out of order event")),
        "{report}{}",
        text(&check.stderr)
    );
    if !check.status.success() {
        common::skipped(
            "lbr.data's record order: a record came out of perf's order (a loaded host)",
        );
    }
    let out = perf()
        .args(["report", "--branch-history", "--stdio", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let report = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(report.contains("predicted"), "{report}");
}

#[test]
fn a_stalled_recorder_loses_nothing() {
    if !ready() {
        return;
    }
    // The recorder stopped most of the time: the emulated program waits
    // for it. Branch stacks alone, a sample every 500 instructions of a
    // long loop with no system call: no trace event comes between the
    // samples, which fill the data ring faster than anything else (a
    // stretch of 150,000 instructions fills half of it). And a full
    // trace.
    let bin = workload();
    let (n, _) = branch_stacks_match_truth_by(
        record_stalled,
        "lbr-stalled",
        &["-b", "-c", "500"],
        &[bin.to_str().unwrap(), "20000"],
    );
    assert!(n > 5_000, "{n} samples");
    full_trace_matches_truth_by(record_stalled, "workload-stalled", &[bin.to_str().unwrap()]);
}

#[test]
fn aux_samples_with_branch_stacks_carry_two_histories_that_agree() {
    if !ready() {
        return;
    }
    let bin = workload();
    let (n, truth) = branch_stacks_match_truth(
        "lbr-aux",
        &["--aux-sample", "-b", "-c", "10000"],
        &[bin.to_str().unwrap(), "2000"],
    );
    assert!(n > 100, "{n} samples");
    // The trace each sample carries decodes (no error) to the history the
    // truth lists; its taken branches begin with the sample's stack.
    let data = scratch().join("lbr-aux.data");
    perf_script(&data, &["--itrace=L64", "-F", "ip"]);
    for (slot, samples) in &truth.samples {
        for (i, (stack, history)) in truth.branch_stacks(*slot).iter().zip(samples).enumerate() {
            let taken: Vec<(u64, u64)> = history
                .1
                .iter()
                .filter(|(from, to)| *from != 0 && *to != 0)
                .copied()
                .collect();
            let n = stack.1.len().min(taken.len());
            assert!(n > 0, "thread {slot} sample {i}: no branch");
            assert_eq!(stack.1[..n], taken[..n], "thread {slot} sample {i}");
        }
    }
}

#[test]
fn branch_filters_keep_the_kinds_perf_asks_for() {
    if !ready() {
        return;
    }
    let bin = workload();
    let data = scratch().join("lbr-calls.data");
    let out = record(
        &data,
        &["-j", "any_call,any_ret,save_type", "-c", "10000"],
        &[bin.to_str().unwrap(), "2000"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let script = perf_script(&data, &["--no-itrace", "-F", "brstack"]);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for entry in script.split_whitespace() {
        let kind = entry.rsplit('/').next().unwrap().to_owned();
        *kinds.entry(kind).or_default() += 1;
    }
    assert!(
        kinds.len() >= 2
            && kinds
                .keys()
                .all(|k| k == "CALL" || k == "IND_CALL" || k == "RET"),
        "{kinds:?}"
    );
    assert!(kinds["CALL"] > 100 && kinds["RET"] > 100, "{kinds:?}");
    // The simulator's kernel-traced runs would want kernel branches:
    // refused, not served without them.
    let out = perfaux()
        .current_dir(scratch())
        .args(["record", "-q", "-b", "--kernel", "-o", "sim-b.data"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("user branches only"));
    // What an LBR of user branches cannot give is refused in one line.
    for (filter, word) in [
        ("any,k", "-j k:"),
        ("any,stack", "-j stack:"),
        ("jmp", "'jmp'"),
    ] {
        let out = record(&data, &["-j", filter], &["/bin/true"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{filter}: {err}");
        assert_eq!(err.lines().count(), 1, "{filter}: {err}");
        assert!(err.contains(word), "{filter}: {err}");
    }
}

/// BOLT's tools (Debian's `bolt-19`: `/usr/lib/llvm-19/bin`, or
/// `PERFAUX_BOLT_DIR`); `None` skips, a failure under
/// `PERFAUX_REQUIRE_BOLT`.
fn bolt_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("PERFAUX_BOLT_DIR")
        .map_or_else(|| PathBuf::from("/usr/lib/llvm-19/bin"), PathBuf::from);
    if dir.join("perf2bolt").is_file() && dir.join("llvm-bolt").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("PERFAUX_REQUIRE_BOLT").is_none(),
        "PERFAUX_REQUIRE_BOLT is set but {} has no perf2bolt and llvm-bolt (apt-get install bolt-19)",
        dir.display()
    );
    common::skipped("BOLT not installed (apt-get install bolt-19): the BOLT checks");
    None
}

#[test]
fn bolt_reads_branch_stacks_as_it_reads_lbr() {
    if !ready() {
        return;
    }
    let Some(bolt) = bolt_dir() else {
        return;
    };
    // The manual's BOLT section (docs/cli.md), on the small build of its program.
    let bin = compile(
        "tests/programs/layout.c",
        "layout",
        &["-O2", "-DSMALL", "-Wl,--emit-relocs"],
    );
    let data = scratch().join("bolt.data");
    let out = record(
        &data,
        &["-b", "-c", "10007"],
        &[bin.to_str().unwrap(), "200"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let fdata = scratch().join("bolt.fdata");
    let out = std::process::Command::new(bolt.join("perf2bolt"))
        .current_dir(scratch())
        .arg("-p")
        .arg(&data)
        .arg("-o")
        .arg(&fdata)
        .arg(&bin)
        .output()
        .unwrap();
    let log = text(&out.stdout) + &text(&out.stderr);
    assert!(out.status.success(), "perf2bolt: {log}");
    // LBR mode: every entry read, no trace that the code contradicts.
    assert!(log.contains("LBR entries"), "perf2bolt: {log}");
    assert!(
        log.contains("traces mismatching disassembled function contents: 0 (0.0%)"),
        "perf2bolt: {log}"
    );
    // A profile for every function the program ran: its 512 and main.
    let profiled: usize = log
        .lines()
        .find_map(|l| {
            l.split_once(" out of ")
                .filter(|_| l.contains("non-empty execution profile"))
        })
        .and_then(|(n, _)| n.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("perf2bolt: {log}"));
    assert!(profiled >= 513, "{profiled} functions profiled: {log}");
    let bolted = scratch().join("layout.bolt");
    let out = std::process::Command::new(bolt.join("llvm-bolt"))
        .arg(&bin)
        .arg("-data")
        .arg(&fdata)
        .args([
            "-reorder-blocks=ext-tsp",
            "-reorder-functions=hfsort",
            "-split-functions",
            "-o",
        ])
        .arg(&bolted)
        .output()
        .unwrap();
    assert!(out.status.success(), "llvm-bolt: {}", text(&out.stderr));
    let run = |b: &Path| {
        std::process::Command::new(b)
            .arg("1000")
            .output()
            .unwrap()
            .stdout
    };
    assert_eq!(
        run(&bolted),
        run(&bin),
        "the BOLTed program computes the same"
    );
}

/// The freestanding test program of the kernel module's perf phase
/// (`kmod/guest/step_prog.c`: no libc, so no code path depends on the
/// CPU model), built static.
fn step_prog() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        compile(
            "../kmod/guest/step_prog.c",
            "step_prog",
            &[
                "-O1",
                "-static",
                "-nostdlib",
                "-fno-pie",
                "-no-pie",
                "-fno-stack-protector",
            ],
        )
    })
    .clone()
}

/// The instructions `program` runs natively, counted by ptrace
/// single-stepping it: one trap after each instruction, a REP string
/// instruction trapping after each iteration with the IP still on it (one
/// instruction, as a decoder counts it), and the last instruction (the
/// exit system call) trapping no more.
fn single_step_count(program: &Path, arg: &str) -> u64 {
    use std::ffi::CString;
    let path = CString::new(program.to_str().unwrap()).unwrap();
    let arg = CString::new(arg).unwrap();
    // SAFETY: the child calls only async-signal-safe functions before exec.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: the child asks to be traced, stops, and runs the program.
        unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            let argv = [path.as_ptr(), arg.as_ptr(), std::ptr::null()];
            libc::execv(path.as_ptr(), argv.as_ptr());
            libc::_exit(127);
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child's stop at its exec.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let rip = || {
        // SAFETY: zeroed registers are valid; GETREGS fills them for the
        // stopped tracee.
        let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut regs) };
        regs.rip
    };
    let mut last = rip();
    let mut count = 0u64;
    loop {
        // SAFETY: steps the stopped tracee, delivering no signal.
        unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, pid, 0, 0) };
        // SAFETY: waits for the tracee's next stop or end.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            // The exit system call ran.
            return count + 1;
        }
        let now = rip();
        if now != last {
            count += 1;
        }
        last = now;
    }
}

#[test]
fn a_static_program_runs_what_ptrace_counts_natively() {
    if !ready() {
        return;
    }
    // No libc: the same instructions run under the emulator's CPU model
    // and the host's, so a ptrace single-step of it natively counts what
    // the trace must hold.
    let bin = step_prog();
    let truth = full_trace_matches_truth("step_prog", &[bin.to_str().unwrap(), "loop"]);
    let traced: u64 = truth.threads.values().map(|t| t.2).sum();
    assert_eq!(traced, single_step_count(&bin, "loop"));
}

/// Records the workload for long, sends `signal` to perfaux's process
/// group (`group`: as Ctrl-C reaches a shell's job) or to perfaux alone
/// (as `timeout` and CI runners send SIGTERM) once records reach the
/// file, and holds the run to perf record's conduct: a complete, shorter
/// file that decodes, no temporary file left, and `status` (the program's:
/// the signal ended it, or perfaux asked it to end with SIGTERM).
fn a_signal_leaves_a_complete_shorter_file(name: &str, signal: i32, group: bool, status: i32) {
    let bin = workload();
    let data = scratch().join(format!("{name}.data"));
    // In a process group of its own, as a shell runs a job.
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("perfaux"));
    cmd.current_dir(scratch())
        .env("PERF_BUILDID_DIR", cache())
        // A small AUX area: its trace reaches the file soon.
        .args(["record", "-q", "--aux-pages", "16", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&bin)
        .arg("100000000")
        .stderr(std::process::Stdio::piped());
    use std::os::unix::process::CommandExt as _;
    cmd.process_group(0);
    let child = cmd.spawn().unwrap();
    // Wait until records reach the file being written (its temporary name
    // beside it): the program runs under the emulator then.
    let prefix = format!(".{name}.data.");
    let staged = || {
        std::fs::read_dir(scratch())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.metadata().map_or(0, |m| m.len()))
            .max()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while staged().unwrap_or(0) < 64 << 10 {
        assert!(
            std::time::Instant::now() < deadline,
            "{name}: no records within 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = child.id() as libc::pid_t;
    // SAFETY: signals our own child, or its process group.
    unsafe { libc::kill(if group { -pid } else { pid }, signal) };
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(status), "{name}: {err}");
    assert!(err.contains("interrupted"), "{name}: {err}");
    assert_eq!(staged(), None, "{name}: no temporary file left");
    let counted = perf_instructions(&data);
    assert!(counted[&0] > 100_000, "{name}: {counted:?}");
}

#[test]
fn ctrl_c_leaves_a_complete_shorter_file() {
    if !ready() {
        return;
    }
    // Ctrl-C reaches perfaux and the program alike: the program's SIGINT.
    a_signal_leaves_a_complete_shorter_file("ctrlc", libc::SIGINT, true, 130);
}

#[test]
fn sigterm_to_the_recorder_ends_the_program_and_keeps_the_file() {
    if !ready() {
        return;
    }
    // perfaux alone: it asks the program to end (SIGTERM), as perf record
    // asks its workload, and writes its file.
    a_signal_leaves_a_complete_shorter_file("term", libc::SIGTERM, false, 143);
    a_signal_leaves_a_complete_shorter_file("hup", libc::SIGHUP, false, 143);
}

#[test]
fn a_crashing_program_keeps_its_trace_and_its_status() {
    if !ready() {
        return;
    }
    let bin = workload();
    let data = scratch().join("crash.data");
    let out = record(&data, &[], &[bin.to_str().unwrap(), "crash"]);
    assert_eq!(
        out.status.code(),
        Some(128 + 11),
        "SIGSEGV: {}",
        text(&out.stderr)
    );
    let counted = perf_instructions(&data);
    assert!(
        counted[&0] > 10_000,
        "the trace up to the fault: {counted:?}"
    );
}

#[test]
fn bad_programs_are_one_line_errors() {
    let dir = scratch();
    let cases: Vec<(Vec<String>, &str)> = {
        let elf32 = dir.join("elf32");
        let mut head = vec![0u8; 64];
        head[..4].copy_from_slice(b"\x7fELF");
        head[4] = 1; // ELFCLASS32
        head[5] = 1;
        head[18] = 3; // EM_386
        std::fs::write(&elf32, &head).unwrap();
        let arm = dir.join("arm64");
        head[4] = 2;
        head[18] = 183; // EM_AARCH64
        std::fs::write(&arm, &head).unwrap();
        let text_file = dir.join("notes.txt");
        std::fs::write(&text_file, "hello\n").unwrap();
        let script = dir.join("script");
        std::fs::write(&script, format!("#!{}\n", arm.display())).unwrap();
        for p in [&elf32, &arm, &text_file, &script] {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let s = |p: &Path| p.to_str().unwrap().to_owned();
        vec![
            (vec!["no-such-program-perfaux".into()], "command not found"),
            (vec![s(&elf32)], "32-bit ELF for x86 (i386)"),
            (vec![s(&arm)], "an ELF for AArch64"),
            (vec![s(&text_file)], "neither ELF nor a #! script"),
            (vec![s(&script)], "its interpreter"),
        ]
    };
    for (program, says) in cases {
        let out = perfaux()
            .current_dir(dir)
            .args(["record", "-o", "bad.data", "--"])
            .args(&program)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{program:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{program:?}: one line: {err}");
        assert!(err.contains(says), "{program:?}: {err}");
        assert!(!dir.join("bad.data").exists(), "{program:?}: no file");
    }
    // The emulator missing: one line naming the package.
    let out = perfaux()
        .current_dir(dir)
        .env("PERFAUX_QEMU", "/nonexistent/qemu-x86_64")
        .args(["record", "-o", "bad.data", "--", "/bin/true"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("PERFAUX_QEMU"), "{err}");
    let out = perfaux()
        .current_dir(dir)
        .env("PATH", "/nonexistent")
        .args(["record", "-o", "bad.data", "--", "/bin/true"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(err.contains("apt-get install qemu-user"), "{err}");
}
