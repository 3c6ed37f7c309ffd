// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux record` never destroys or half-writes a file: the output is
//! written beside the target and renamed into place on success, an existing
//! recording is kept as `<output>.old` (perf's `check_backup`), a run that
//! dies (here: killed for exceeding its file-size limit) leaves the previous
//! file byte for byte, and Ctrl-C stops the run cleanly with a complete,
//! shorter file, one line saying so and perf's exit status 130.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{perfaux, record, text};
use perfaux_cli::perfdata::PerfData;

/// Files in `dir` whose names start with `.` (the temporary outputs).
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

fn parses(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let file = PerfData::parse(&bytes).expect("a complete perf.data");
    file.records()
        .inspect(|r| assert!(r.is_ok(), "a record does not parse"))
        .count()
}

#[test]
fn an_existing_recording_is_kept_as_old() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("perf.data");
    record(&out, &["--samples", "50", "--seed", "1", "--quiet"]);
    let first = std::fs::read(&out).unwrap();
    let o = record(&out, &["--samples", "60", "--seed", "2"]);
    assert!(
        text(&o.stdout).contains("perf.data.old (was"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(
        std::fs::read(dir.path().join("perf.data.old")).unwrap(),
        first
    );
    assert!(parses(&out) > 0);
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
    // A third run replaces the older .old, as perf does.
    let second = std::fs::read(&out).unwrap();
    record(&out, &["--samples", "10", "--quiet"]);
    assert_eq!(
        std::fs::read(dir.path().join("perf.data.old")).unwrap(),
        second
    );
}

#[test]
fn a_run_that_dies_leaves_the_previous_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("perf.data");
    record(&out, &["--samples", "50", "--quiet"]);
    let before = std::fs::read(&out).unwrap();
    // prlimit: writing past 1 MB kills the run (SIGXFSZ) in the middle.
    let bin = assert_cmd::cargo::cargo_bin("perfaux");
    let status = std::process::Command::new("prlimit")
        .env("PERF_BUILDID_DIR", common::buildid_cache())
        .arg("--fsize=1000000")
        .arg(&bin)
        .args(["record", "--duration", "200ms", "--quiet", "-o"])
        .arg(&out)
        .stderr(Stdio::null())
        .status()
        .expect("prlimit (util-linux) runs");
    assert!(!status.success(), "the run was meant to die: {status:?}");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        before,
        "the old file is intact"
    );
    assert!(!dir.path().join("perf.data.old").exists());
}

#[test]
fn a_bad_directory_is_named_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("missing").join("perf.data");
    let o = perfaux()
        .args(["record", "--samples", "10", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    // The path as a path, the OS's words, nothing else (no debug string
    // of a temporary name).
    assert_eq!(
        err,
        format!(
            "perfaux: cannot create {}: No such file or directory (os error 2)\n",
            out.display()
        )
    );
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}

/// Runs a 10 s recording, sends it `signal` once it runs, and holds it to
/// what perf record does: a complete, shorter file, one line, and the
/// status a shell reports for that signal.
fn a_signal_writes_a_complete_shorter_file(signal: &str, status: i32) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("perf.data");
    let bin = assert_cmd::cargo::cargo_bin("perfaux");
    let child = std::process::Command::new(&bin)
        .env("PERF_BUILDID_DIR", common::buildid_cache())
        .args(["record", "--duration", "10s", "--quiet", "-o"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Running: a temporary output has appeared beside the target.
    let started = Instant::now();
    while leftovers(dir.path()).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(20), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let kill = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    // As perf record ends after the signal, with its file written.
    assert_eq!(
        o.status.code(),
        Some(status),
        "{signal}: {}",
        text(&o.stderr)
    );
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{signal}: one line: {err}");
    assert!(
        err.starts_with("perfaux: interrupted after "),
        "{signal}: {err}"
    );
    assert!(parses(&out) > 0, "{signal}: the file is complete");
    assert!(
        leftovers(dir.path()).is_empty(),
        "{signal}: {:?}",
        leftovers(dir.path())
    );
    // It holds fewer samples than the full 10 s would.
    let check = perfaux()
        .arg("dump")
        .arg("--check")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{signal}: {}",
        text(&check.stdout)
    );
}

#[test]
fn ctrl_c_writes_a_complete_shorter_file() {
    a_signal_writes_a_complete_shorter_file("INT", 130);
}

#[test]
fn sigterm_and_sighup_stop_a_recording_as_ctrl_c_does() {
    // What `timeout`, CI runners and systemd send, and a closed terminal.
    a_signal_writes_a_complete_shorter_file("TERM", 143);
    a_signal_writes_a_complete_shorter_file("HUP", 129);
}

#[test]
fn limits_are_refused_or_warned_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("perf.data");
    let run = |args: &[&str]| {
        perfaux()
            .args(["record", "--samples", "20", "--quiet", "-o"])
            .arg(&out)
            .args(args)
            .output()
            .unwrap()
    };
    // 16 GiB of AUX areas: refused before anything is allocated or written.
    let o = run(&["--aux-pages", "1048576"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("16.0 GiB of buffers"),
        "{}",
        text(&o.stderr)
    );
    // A data ring too small for one sample: every sample would be lost.
    let o = run(&["--data-pages", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("takes 4160 bytes, more than the 4096-byte data ring"),
        "{}",
        text(&o.stderr)
    );
    assert!(!out.exists(), "nothing written for a refused run");
    // The kernel's clamp of aux_sample_size, said in one line.
    let o = run(&["--aux-sample-size", "70000"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        text(&o.stderr).trim(),
        "perfaux: warning: --aux-sample-size 70000: a sample is at most 65535 bytes, so each carries at most 65464 bytes of trace (the kernel's clamp)"
    );
    // Negative numbers: a bad value of the option, not the usage dump; a
    // usage error, with perf's status.
    let o = run(&["--cpus", "-1"]);
    assert_eq!(o.status.code(), Some(129));
    let err = text(&o.stderr);
    assert!(
        err.starts_with("perfaux: invalid value '-1' for '--cpus <CPUS>'")
            && !err.contains("Usage:"),
        "{err}"
    );
}

#[test]
fn the_summary_says_one_cpu_not_one_cpus() {
    let dir = tempfile::tempdir().unwrap();
    for (cpus, words) in [("1", "): 1 CPU, "), ("2", "): 2 CPUs, ")] {
        let out = perfaux()
            .args(["record", "--samples", "5", "--cpus", cpus, "-o"])
            .arg(dir.path().join("perf.data"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        // The summary is the run's output (standard error with -o -).
        assert!(text(&out.stdout).contains(words), "{}", text(&out.stdout));
    }
}

/// The samples in `path`.
fn samples_in(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let file = PerfData::parse(&bytes).unwrap();
    file.records()
        .map(Result::unwrap)
        .filter(|r| r.header.type_ == perfaux::abi::record_type::SAMPLE)
        .count()
}

/// `--samples N` writes N samples, however many CPUs take them in the
/// last round.
#[test]
fn samples_n_writes_exactly_n() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("perf.data");
    for (n, cpus, more) in [
        (1, "4", &[][..]),
        (7, "4", &["-e", "cycles", "-e", "instructions"][..]),
        (101, "3", &["--mode", "full"][..]),
    ] {
        let count = n.to_string();
        let args = [&["--cpus", cpus, "--samples", &count, "-q"][..], more].concat();
        record(&out, &args);
        assert_eq!(samples_in(&out), n, "--samples {n} on {cpus} CPUs {more:?}");
    }
}

/// What a run would otherwise change silently is refused or said once
/// before it starts.
#[test]
fn no_option_changes_silently() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("perf.data");
    let run = |args: &[&str]| {
        perfaux()
            .args(["record", "--samples", "5", "--quiet", "-o"])
            .arg(&out)
            .args(args)
            .output()
            .unwrap()
    };
    // 1 to 7 bytes round down to none: refused as 0 is.
    for size in ["0", "1", "7"] {
        let o = run(&["--aux-sample-size", size]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            text(&o.stderr).contains(&format!(
                "--aux-sample-size {size}: snapshot mode samples need at least 8 bytes"
            )),
            "{}",
            text(&o.stderr)
        );
    }
    // Rounded down to whole words, as the kernel does, and said.
    let o = run(&["--aux-sample-size", "4100"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        text(&o.stderr).contains("--aux-sample-size 4100: the kernel takes whole 8-byte words (perf_prepare_sample rounds down), so samples carry 4096 bytes"),
        "{}",
        text(&o.stderr)
    );
    // Unused in a full trace.
    let o = run(&["--mode", "full", "--aux-sample-size", "8192"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        text(&o.stderr).contains("--aux-sample-size 8192 is unused: --mode full"),
        "{}",
        text(&o.stderr)
    );
    // A duration below the simulator's step: what it became.
    let o = perfaux()
        .args(["record", "--duration", "2ns", "--quiet", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        text(&o.stderr).trim(),
        "perfaux: warning: --duration 2ns: the simulated CPUs take turns every 100 us, so the run lasts 100us"
    );
    // A directory as the output: refused before the run.
    let o = perfaux()
        .args(["record", "--duration", "10s", "--quiet", "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stderr).trim(),
        format!("perfaux: -o {}: is a directory", dir.path().display())
    );
}

/// `--truth -` writes the truth to standard output (the summary then to
/// standard error), not to a file named `-`.
#[test]
fn truth_dash_is_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = perfaux()
        .current_dir(dir.path())
        .args(["record", "--samples", "3", "--cpus", "1", "--truth", "-"])
        .args(["-o", "t.data"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!dir.path().join("-").exists());
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("# perfaux ground truth"), "{stdout}");
    assert!(stdout.contains("\nbranch 0 "), "{stdout}");
    assert!(text(&out.stderr).contains("perfaux: wrote t.data"));
    let both = perfaux()
        .current_dir(dir.path())
        .args(["record", "--samples", "3", "--truth", "-", "-o", "-"])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2));
    assert!(text(&both.stderr).contains("--truth - with -o -: both on standard output"));
}

/// A reader that goes away (`| head -c 100`) ends a `-o -` run quietly,
/// with a SIGPIPE writer's status, as `perf record -o -` ends.
#[test]
fn a_closed_pipe_ends_the_run_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let bin = assert_cmd::cargo::cargo_bin("perfaux");
    let mut child = std::process::Command::new(&bin)
        .env("PERF_BUILDID_DIR", common::buildid_cache())
        .current_dir(dir.path())
        .args(["record", "-q", "--duration", "1s", "-o", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 100];
    use std::io::Read as _;
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut head)
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(&head[..8], b"PERFILE2");
    assert_eq!(out.status.code(), Some(141));
    assert_eq!(text(&out.stderr), "", "quiet");
}

/// perf's spellings: -c (and --period), -m pages[,aux] with sizes, size
/// suffixes, `:u` events; -F refused with its reason; usage errors in the
/// one error style with status 129; recordings created 0600 as perf
/// creates them; --help gives defaults and units.
#[test]
fn options_as_perf_spells_them() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("perf.data");
    let run = |args: &[&str]| {
        perfaux()
            .args(["record", "--samples", "5", "--cpus", "1", "--quiet", "-o"])
            .arg(&out)
            .args(args)
            .output()
            .unwrap()
    };
    let sampler = |path: &Path| {
        let bytes = std::fs::read(path).unwrap();
        let file = PerfData::parse(&bytes).unwrap();
        let e = &file.events[1];
        (e.name.clone(), e.attr.sample_period, e.attr.aux_sample_size)
    };
    for (args, want) in [
        (&["-c", "50000"][..], ("cycles:u", 50_000, 4096)),
        (&["--period", "60000"][..], ("cycles:u", 60_000, 4096)),
        (
            &["-e", "instructions:u", "--aux-sample-size", "8k"][..],
            ("instructions:u", 100_000, 8192),
        ),
        (&["-m", "512K,128K"][..], ("cycles:u", 100_000, 4096)),
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
        let (name, period, aux) = sampler(&out);
        assert_eq!((name.as_str(), period, aux), want, "{args:?}");
    }
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600,
        "perf.data is created 0600, as perf creates it"
    );
    let o = run(&["-m", "100"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        text(&o.stderr).trim(),
        "perfaux: -m: rounding the data ring '100' to 512 KiB (128 pages)"
    );
    // Usage errors (129), then refusals of what the run cannot do (2).
    for (args, said, status) in [
        (&["-F", "1000", "-c", "5"][..], "cannot be used with", 129),
        (
            &["-e", "cycles:k"][..],
            "'cycles:k': modifier 'k' is not simulated",
            129,
        ),
        (
            &["--aux-sample-size", "8x"][..],
            "unknown suffix 'x' in '8x'",
            129,
        ),
        (
            &["-m", "128", "--data-pages", "64"][..],
            "cannot be used with",
            129,
        ),
        (
            &["--no-such-option"][..],
            "unexpected argument '--no-such-option'",
            129,
        ),
        (&["-F", "200000"][..], "-F 200000: between 1 and 100000", 2),
        (
            &["-e", "cycles:u", "--kernel"][..],
            "-e cycles:u with --kernel",
            2,
        ),
    ] {
        let o = run(args);
        let err = text(&o.stderr);
        assert!(
            err.starts_with("perfaux: ") && err.contains(said),
            "{args:?}: {err}"
        );
        assert_eq!(o.status.code(), Some(status), "{args:?}: {err}");
    }
    // -F with a program: refused before anything runs, with the reason.
    let o = perfaux()
        .args(["record", "-F", "1000", "-q", "-o"])
        .arg(&out)
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).starts_with("perfaux: -F 1000 with a program: frequency mode"),
        "{}",
        text(&o.stderr)
    );
    let o = run(&["--duration", "1.5ms"]);
    assert_eq!(
        o.status.code(),
        Some(129),
        "--duration and --samples conflict"
    );
    let o = perfaux()
        .args(["record", "--duration", "1.5ms", "--quiet", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stderr), "", "1.5 ms is 15 whole steps");
    let help = text(
        &perfaux()
            .args(["record", "--help"])
            .output()
            .unwrap()
            .stdout,
    );
    // Words, whatever the terminal's width wrapped.
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "(a bare number is ms) [default: 20ms]",
        "[default: 100000]",
        "[default: 128]",
    ] {
        assert!(help.contains(needle), "{needle:?} in --help");
    }
}

/// A run that would fill its file system stops first, with a complete,
/// shorter file and one line, instead of failing at the end with nothing
/// written. (A 72 MiB tmpfs; it needs the right to mount one, else it says
/// it skipped.)
#[test]
fn a_run_stops_before_it_fills_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=72m", "perfaux-test"])
        .arg(dir.path())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        common::skipped("the full-disk stop: mounting a tmpfs needs root");
        return;
    }
    let out = dir.path().join("perf.data");
    let o = perfaux()
        .args([
            "record",
            "--duration",
            "1s",
            "--quiet",
            "--no-buildid-cache",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let size = std::fs::metadata(&out).map(|m| m.len());
    let check = perfaux()
        .args(["dump", "--check"])
        .arg(&out)
        .output()
        .unwrap();
    let _ = std::process::Command::new("umount")
        .arg(dir.path())
        .status();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.starts_with("perfaux: warning: stopped after ")
            && err.contains("64 MiB short of filling the file system")
            && err.lines().count() == 1,
        "{err}"
    );
    let size = size.unwrap();
    assert!(size > 4 << 20 && size < 12 << 20, "{size} bytes");
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stdout));
}

/// `-F`: frequency mode as the kernel runs it. The sampler's attr has
/// `freq` and `sample_freq`; the first sample's period is 1, as the kernel
/// arms the counter, and once the periods have settled the samples come
/// about a millisecond apart (1 kHz).
#[test]
fn frequency_mode_retunes_the_period() {
    use perfaux_cli::perfdata::parse_sample;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("perf.data");
    record(
        &out,
        &["-F", "1000", "--duration", "600ms", "--cpus", "1", "-q"],
    );
    let bytes = std::fs::read(&out).unwrap();
    let file = PerfData::parse(&bytes).unwrap();
    let sampler = &file.events[1];
    assert!(sampler.attr.freq(), "attr.freq");
    assert_eq!(sampler.attr.sample_freq(), 1000);
    let samples: Vec<(u64, u64)> = file
        .records()
        .map(Result::unwrap)
        .filter(|r| r.header.type_ == perfaux::abi::record_type::SAMPLE)
        .map(|r| {
            let s = parse_sample(&sampler.attr, r.bytes).unwrap();
            (s.time.unwrap(), s.period.unwrap())
        })
        .collect();
    assert_eq!(samples[0].1, 1, "{:?}", &samples[..5]);
    // The last 200 ms of the run: 200 samples, give or take 10 %.
    let end = samples.last().unwrap().0;
    let late = samples
        .iter()
        .filter(|(t, _)| *t + 200_000_000 > end)
        .count();
    assert!(
        (180..=220).contains(&late),
        "{late} samples in the last 200 ms"
    );
}
