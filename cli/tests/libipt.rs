// SPDX-License-Identifier: MIT OR Apache-2.0
//! Intel's reference decoder, libipt (Debian `libipt-dev`), as a second
//! judge beside perf: `tests/libipt/ptdecode.c` walks the simulator's
//! traces instruction by instruction against the program's ELF (and the
//! handler's, with `--kernel`). Every CPU's full trace decodes into exactly
//! the truth's branches, in order, with no error; every sample's AUX
//! payload decodes with no error into a run of its CPU's branches. Several
//! seeds and CPU counts, user only and with the kernel traced.
//! `PERFAUX_REQUIRE_LIBIPT=1` (CI sets it) fails instead of skipping when
//! libipt cannot be built against.

mod common;

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use perfaux_cli::perfdata::{PerfData, parse_sample};
use perfaux_cli::sim::{self, Config, Counter, Mode, Stop};

/// The scratch directory of this test binary.
fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| common::fresh_dir("libipt"))
}

/// `ptdecode`, built once against libipt; `None` (a named skip) if libipt
/// is not installed, unless `PERFAUX_REQUIRE_LIBIPT` is set.
fn ptdecode() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = scratch().join("ptdecode");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/libipt/ptdecode.c");
        let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args(["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-o"])
            .arg(&exe)
            .arg(&src)
            .arg("-lipt")
            .output()
            .expect("the C compiler runs");
        if out.status.success() {
            return Some(exe);
        }
        let why = String::from_utf8_lossy(&out.stderr);
        assert!(
            std::env::var_os("PERFAUX_REQUIRE_LIBIPT").is_none(),
            "PERFAUX_REQUIRE_LIBIPT is set but ptdecode.c does not build against libipt: {why}"
        );
        common::skipped("libipt not installed (apt-get install libipt-dev): its decodes");
        None
    })
    .as_deref()
}

/// What libipt made of a stream: its transfers and its errors.
struct Decoded {
    branches: Vec<(u64, u64)>,
    errors: Vec<String>,
}

/// Runs `ptdecode` on `stream` against `elfs`.
fn decode(exe: &Path, stream: &[u8], elfs: &[&Path], name: &str) -> Decoded {
    let path = scratch().join(format!("{name}.pt"));
    std::fs::write(&path, stream).unwrap();
    let out = Command::new(exe).arg(&path).args(elfs).output().unwrap();
    assert!(
        out.status.success(),
        "ptdecode {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_file(&path);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut decoded = Decoded {
        branches: Vec::new(),
        errors: Vec::new(),
    };
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["errors", _] => {}
            [from, to] => decoded.branches.push((
                u64::from_str_radix(from, 16).unwrap(),
                u64::from_str_radix(to, 16).unwrap(),
            )),
            _ => decoded.errors.push(line.to_owned()),
        }
    }
    decoded
}

/// The truth's branches per CPU (from, to), in decode order.
fn truth_branches(truth: &str) -> BTreeMap<u32, Vec<(u64, u64)>> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let mut per_cpu: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    for line in truth.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.first() == Some(&"branch") {
            per_cpu
                .entry(f[1].parse().unwrap())
                .or_default()
                .push((hex(f[4]), hex(f[5])));
        }
    }
    per_cpu
}

fn config(cpus: usize, seed: u64, mode: Mode, kernel: bool) -> Config {
    Config {
        cpus,
        stop: Stop::Duration(3_000_000),
        period: 100_000,
        freq: None,
        aux_sample_size: 4096,
        aux_pages: 256,
        data_pages: 128,
        seed,
        mode,
        counters: vec![Counter::Cycles],
        cmdline: vec![],
        kernel,
        truth: true,
        binary: "/nonexistent/perfaux-demo".into(),
        branches: None,
    }
}

/// Records `config`; writes its ELF files; returns the file, the outputs
/// and the ELF paths.
fn run(config: &Config, name: &str) -> (Vec<u8>, sim::Outputs, Vec<PathBuf>) {
    let (_, out, outputs) = sim::record(config, Cursor::new(Vec::new()), &mut |_| {
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    let mut elfs = vec![scratch().join(format!("{name}.elf"))];
    std::fs::write(&elfs[0], &outputs.elf).unwrap();
    if let Some(k) = &outputs.kernel_elf {
        elfs.push(scratch().join(format!("{name}.vmlinux")));
        std::fs::write(&elfs[1], k).unwrap();
    }
    (out.into_inner(), outputs, elfs)
}

/// Every CPU's full trace: libipt's transfers are the truth's, in order,
/// with no error.
#[test]
fn libipt_decodes_full_traces_into_the_truth() {
    let Some(exe) = ptdecode() else {
        return;
    };
    let mut total = 0;
    for (cpus, seed, kernel) in [
        (1, 1, false),
        (2, 7, false),
        (4, 3, false),
        (2, 9, true),
        (1, 66, true),
    ] {
        let name = format!(
            "full-{cpus}cpu-seed{seed}{}",
            if kernel { "-kernel" } else { "" }
        );
        let (_, outputs, elfs) = run(&config(cpus, seed, Mode::Full, kernel), &name);
        let elfs: Vec<&Path> = elfs.iter().map(PathBuf::as_path).collect();
        let truth = truth_branches(outputs.truth.as_deref().unwrap());
        assert_eq!(truth.len(), cpus, "{name}: every CPU traced");
        for (cpu, want) in &truth {
            let stream = &outputs.streams[*cpu as usize];
            let got = decode(exe, stream, &elfs, &format!("{name}-cpu{cpu}"));
            assert!(got.errors.is_empty(), "{name} CPU {cpu}: {:?}", got.errors);
            if let Some(i) =
                (0..want.len().min(got.branches.len())).find(|&i| want[i] != got.branches[i])
            {
                panic!(
                    "{name} CPU {cpu}: branch {i} of {}: libipt {:x?}, truth {:x?}",
                    want.len(),
                    &got.branches[i..(i + 4).min(got.branches.len())],
                    &want[i..(i + 4).min(want.len())]
                );
            }
            assert_eq!(got.branches.len(), want.len(), "{name} CPU {cpu}: branches");
            total += want.len();
        }
    }
    println!("libipt: {total} branches of full traces equal the truth's");
    assert!(total > 100_000, "{total} branches compared");
}

/// Every sample's AUX payload (snapshot mode): libipt decodes it with no
/// error, and what it recovers is a run of its CPU's branches (libipt's
/// decode of the CPU's whole stream, itself error-free).
#[test]
fn libipt_decodes_every_sample_payload() {
    let Some(exe) = ptdecode() else {
        return;
    };
    let mut checked = 0;
    for (cpus, seed, kernel) in [(2, 4, false), (2, 11, true)] {
        let name = format!(
            "snap-{cpus}cpu-seed{seed}{}",
            if kernel { "-kernel" } else { "" }
        );
        let (bytes, outputs, elfs) = run(&config(cpus, seed, Mode::Snapshot, kernel), &name);
        let elfs: Vec<&Path> = elfs.iter().map(PathBuf::as_path).collect();
        let whole: Vec<Vec<(u64, u64)>> = outputs
            .streams
            .iter()
            .enumerate()
            .map(|(cpu, s)| {
                let d = decode(exe, s, &elfs, &format!("{name}-cpu{cpu}"));
                assert!(d.errors.is_empty(), "{name} CPU {cpu}: {:?}", d.errors);
                d.branches
            })
            .collect();
        let file = PerfData::parse(&bytes).unwrap();
        for r in file.records().map(Result::unwrap) {
            if r.header.type_ != perfaux::abi::record_type::SAMPLE {
                continue;
            }
            let id = u64::from_le_bytes(r.bytes[8..16].try_into().unwrap());
            let Some(e) = file.event_of(id) else { continue };
            let s = parse_sample(&e.attr, r.bytes).unwrap();
            let (Some(aux), Some(cpu)) = (s.aux, s.cpu) else {
                continue;
            };
            let got = decode(exe, aux, &elfs, &format!("{name}-sample"));
            assert!(
                got.errors.is_empty(),
                "{name} sample at {:#x}: {:?}",
                r.offset,
                got.errors
            );
            // The first transfer may start from the PSB's FUP, which a
            // whole stream decode does not name: compare from the second.
            let run = got.branches.get(1..).unwrap_or_default();
            let cpu_branches = &whole[cpu as usize];
            assert!(
                run.is_empty() || cpu_branches.windows(run.len()).any(|w| w == run),
                "{name} sample at {:#x} (CPU {cpu}): {} branches not a run of the CPU's",
                r.offset,
                run.len()
            );
            checked += 1;
        }
    }
    println!("libipt: {checked} sample payloads decode into runs of their CPUs' branches");
    assert!(checked > 50, "{checked} samples");
}
