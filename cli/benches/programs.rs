// SPDX-License-Identifier: MIT OR Apache-2.0
//! What tracing a real program under QEMU costs, side by side in one run:
//! the CPU time (user + system, the run and every process it waited for:
//! `wait4`'s rusage) of each program natively, under QEMU alone, under
//! QEMU with the plugin's callback on every block doing nothing
//! (`idle=on`), recorded as a full trace, with AUX samples and with branch
//! stacks (`perfaux record`, `--aux-sample`, `-b`; recorder included); then ptrace single-stepping of `/bin/true`
//! beside it. Each configuration runs `PERFAUX_BENCH_ROUNDS` times (5),
//! rounds interleaved, and the minimum counts: this machine's speed drifts
//! (BENCHMARKS.md), the minimum is the run least disturbed.
//!
//! `cargo bench -p perfaux-cli --bench programs` (needs qemu-user, gzip
//! and a C compiler; it builds the plugin in release).

mod common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{build_plugin, cpu_time, launch_path};

/// Single-steps `program` with ptrace to its end: (steps, CPU time of the
/// stepper and the stepped program).
fn single_step(program: &Path) -> (u64, Duration) {
    let path = std::ffi::CString::new(program.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: zeroed rusage is valid.
    let mut before: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a plain query.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut before) };
    // SAFETY: the child only calls async-signal-safe functions (ptrace,
    // raise, execv, _exit) before exec.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: the child asks to be traced and runs the program.
        unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::raise(libc::SIGSTOP);
            let argv = [path.as_ptr(), std::ptr::null()];
            libc::execv(path.as_ptr(), argv.as_ptr());
            libc::_exit(127);
        }
    }
    let mut steps = 0u64;
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid.
    let mut child: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for the traced child.
        unsafe { libc::wait4(pid, &mut status, 0, &mut child) };
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            break;
        }
        steps += 1;
        // SAFETY: steps the stopped child, delivering nothing.
        unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, pid, 0, 0) };
    }
    // SAFETY: zeroed rusage is valid; a plain query.
    let mut after: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut after) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let own = tv(after.ru_utime) + tv(after.ru_stime) - tv(before.ru_utime) - tv(before.ru_stime);
    (steps, own + tv(child.ru_utime) + tv(child.ru_stime))
}

/// The instructions a recording traced (its summary line).
fn traced(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("instructions "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Peak memory (MiB) of the recorder and the emulator (the summary line).
fn memory(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.split_once("peak memory: ").map(|(_, m)| m.to_owned()))
        .unwrap_or_default()
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-programs");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn main() {
    // `cargo bench` passes --bench; a filter is not supported.
    let rounds: usize = std::env::var("PERFAUX_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let perfaux = Path::new(env!("CARGO_BIN_EXE_perfaux"));
    let plugin = build_plugin(perfaux);
    let dir = scratch();
    let compute = dir.join("compute");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/compute.c");
    let cc = Command::new("cc")
        .args(["-O2", "-g", "-o"])
        .arg(&compute)
        .arg(&src)
        .status()
        .unwrap();
    assert!(cc.success());
    let input = dir.join("input.txt");
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let text: Vec<u8> = (0..1 << 20)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 77 == 76 {
                b'\n'
            } else {
                alphabet[(x % 64) as usize]
            }
        })
        .collect();
    std::fs::write(&input, text).unwrap();

    let gzip = launch_path("gzip");
    let ls = launch_path("ls");
    let programs: Vec<(&str, Vec<OsString>)> = vec![
        (
            "gzip of 1 MB",
            vec![gzip.into(), "-kf".into(), input.clone().into()],
        ),
        ("compute", vec![compute.clone().into(), "3".into()]),
        ("ls /usr/bin", vec![ls.into(), "/usr/bin".into()]),
    ];
    let configs = [
        "native",
        "qemu",
        "qemu + callback",
        "full trace",
        "AUX samples",
        "branch stacks",
    ];
    // [program][config] -> min CPU time; the recordings' instructions and memory.
    let mut best = vec![vec![Duration::MAX; configs.len()]; programs.len()];
    let mut insns = vec![0u64; programs.len()];
    let mut mem = vec![String::new(); programs.len()];
    let data = dir.join("bench.data");
    for round in 0..rounds {
        eprintln!("round {}/{rounds}", round + 1);
        for (p, (_, argv)) in programs.iter().enumerate() {
            for (c, config) in configs.iter().enumerate() {
                let mut cmd = match *config {
                    "native" => Command::new(&argv[0]),
                    "qemu" => Command::new("qemu-x86_64"),
                    "qemu + callback" => {
                        let mut arg = plugin.clone().into_os_string();
                        arg.push(",idle=on");
                        let mut c = Command::new("qemu-x86_64");
                        c.arg("-plugin").arg(arg);
                        c
                    }
                    _ => {
                        let mut c = Command::new(perfaux);
                        c.args(["record", "--no-buildid-cache", "-o"]).arg(&data);
                        if *config == "AUX samples" {
                            c.arg("--aux-sample");
                        }
                        if *config == "branch stacks" {
                            c.arg("-b");
                        }
                        c.arg("--");
                        c
                    }
                };
                let args = if *config == "native" {
                    &argv[1..]
                } else {
                    &argv[..]
                };
                cmd.args(args).current_dir(&dir);
                let (t, err) = cpu_time(&mut cmd);
                if *config == "full trace" {
                    insns[p] = traced(&err);
                    mem[p] = memory(&err);
                }
                best[p][c] = best[p][c].min(t);
            }
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "\n| program | guest instructions | native ms | QEMU alone | + callback per block | full trace | AUX samples | branch stacks | traced M insn/s (full, CPU) | peak memory (full) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for (p, (name, _)) in programs.iter().enumerate() {
        let native = ms(best[p][0]);
        let cell = |c: usize| format!("{:.0} ms = {:.1}x", ms(best[p][c]), ms(best[p][c]) / native);
        println!(
            "| {name} | {} | {native:.1} | {} | {} | {} | {} | {} | {:.0} | {} |",
            insns[p],
            cell(1),
            cell(2),
            cell(3),
            cell(4),
            cell(5),
            insns[p] as f64 / best[p][3].as_secs_f64() / 1e6,
            mem[p]
        );
    }
    let true_native = (0..rounds)
        .map(|_| cpu_time(&mut Command::new("/bin/true")).0)
        .min()
        .unwrap();
    let (steps, stepped) = single_step(Path::new("/bin/true"));
    println!(
        "\nptrace single-step of /bin/true: {steps} steps in {:.0} ms of CPU = {:.0}x native ({:.3} ms), {:.1} k instructions/s",
        ms(stepped),
        ms(stepped) / ms(true_native),
        ms(true_native),
        steps as f64 / stepped.as_secs_f64() / 1e3
    );
}
