// SPDX-License-Identifier: MIT OR Apache-2.0
//! BOLT without LBR, measured (README: BOLT without LBR; BENCHMARKS.md):
//! the benchmark program `tests/programs/layout.c` run natively as the
//! compiler laid it out, BOLTed from perfaux's branch stacks (`perfaux
//! record -b`: perf2bolt's LBR mode), and BOLTed from what a machine
//! without LBR gives today (`perf record -e cpu-clock:u` natively:
//! perf2bolt `-nl`, samples without branches). The three binaries run
//! `PERFAUX_BENCH_ROUNDS` times (9), rounds interleaved; the table gives
//! the minimum and the median CPU time of each and the speed-ups of the
//! medians.
//!
//! `cargo bench -p perfaux-cli --bench bolt` (needs qemu-user, linux-perf,
//! a C compiler and BOLT: Debian's `bolt-19` in `/usr/lib/llvm-19/bin`, or
//! `PERFAUX_BOLT_DIR`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{build_plugin, cpu_time};

/// Rounds of the program per timed run.
const RUN_ROUNDS: &str = "20000";
/// Rounds of the program per profiling run under QEMU.
const PROFILE_ROUNDS: &str = "500";

/// Runs `cmd`, which must succeed; its standard output.
fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// perf2bolt's and llvm-bolt's options of the README, from the profile
/// `data` (`extra`: perf2bolt's mode) to `out`.
fn bolt(bolt_dir: &Path, binary: &Path, data: &Path, extra: &[&str], out: &Path) {
    let fdata = out.with_extension("fdata");
    run(Command::new(bolt_dir.join("perf2bolt"))
        .args(extra)
        .arg("-p")
        .arg(data)
        .arg("-o")
        .arg(&fdata)
        .arg(binary));
    run(Command::new(bolt_dir.join("llvm-bolt"))
        .arg(binary)
        .arg("-data")
        .arg(&fdata)
        .args([
            "-reorder-blocks=ext-tsp",
            "-reorder-functions=hfsort",
            "-split-functions",
            "-o",
        ])
        .arg(out));
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("PERFAUX_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(9);
    let bolt_dir = std::env::var_os("PERFAUX_BOLT_DIR")
        .map_or_else(|| PathBuf::from("/usr/lib/llvm-19/bin"), PathBuf::from);
    let perfaux = Path::new(env!("CARGO_BIN_EXE_perfaux"));
    build_plugin(perfaux);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-bolt");
    std::fs::create_dir_all(&dir).unwrap();
    let layout = dir.join("layout");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/layout.c");
    run(Command::new("cc")
        .args(["-O2", "-Wl,--emit-relocs", "-o"])
        .arg(&layout)
        .arg(&src));

    // perfaux's branch stacks, under QEMU.
    let lbr_data = dir.join("lbr.data");
    run(Command::new(perfaux)
        .args([
            "record",
            "-q",
            "--no-buildid-cache",
            "-b",
            "-c",
            "10007",
            "-o",
        ])
        .arg(&lbr_data)
        .arg("--")
        .arg(&layout)
        .arg(PROFILE_ROUNDS));
    let from_lbr = dir.join("layout.lbr");
    bolt(&bolt_dir, &layout, &lbr_data, &[], &from_lbr);
    // Time samples without branches, natively: what a VM gives today.
    let nl_data = dir.join("nl.data");
    run(Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock:u", "-F", "20000", "-o"])
        .arg(&nl_data)
        .arg("--")
        .arg(&layout)
        .arg(RUN_ROUNDS));
    let from_nl = dir.join("layout.nl");
    bolt(&bolt_dir, &layout, &nl_data, &["-nl"], &from_nl);

    let binaries = [
        ("as compiled (cc -O2)", &layout),
        ("BOLT from perfaux's branch stacks (-b)", &from_lbr),
        ("BOLT from time samples (-nl)", &from_nl),
    ];
    let want = run(Command::new(&layout).arg("1000"));
    for (name, b) in &binaries {
        assert_eq!(
            run(Command::new(b).arg("1000")),
            want,
            "{name}: another result"
        );
    }
    let mut times = vec![Vec::new(); binaries.len()];
    for round in 0..rounds {
        eprintln!("round {}/{rounds}", round + 1);
        for (k, (_, b)) in binaries.iter().enumerate() {
            times[k].push(cpu_time(Command::new(b).arg(RUN_ROUNDS)).0);
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let base = median(&mut times[0].clone());
    println!("\nlayout {RUN_ROUNDS} ({rounds} interleaved runs each, CPU time)\n");
    println!("| binary | min ms | median ms | speed-up (medians) |");
    println!("|---|---:|---:|---:|");
    for (k, (name, _)) in binaries.iter().enumerate() {
        let min = *times[k].iter().min().unwrap();
        let med = median(&mut times[k]);
        println!(
            "| {name} | {:.0} | {:.0} | {:.2}x |",
            ms(min),
            ms(med),
            ms(base) / ms(med)
        );
    }
}
