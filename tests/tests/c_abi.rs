// SPDX-License-Identifier: MIT OR Apache-2.0
//! C programs that use only `include/perfaux.h` (`tests/c/*.c`), compiled
//! with the system C compiler (`-Wall -Wextra -Werror`) against the
//! `perfaux-ffi` static library, and run: under valgrind with zero errors
//! and no leak when valgrind is installed (`PERFAUX_REQUIRE_VALGRIND=1`,
//! which CI sets, makes its absence a failure).
//!
//! The static library is built here with `cargo rustc --crate-type
//! staticlib` into its own target directory, as a C user would build it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

/// Builds `libperfaux_ffi.a` once per test run.
fn staticlib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let target = root().join("target/c-abi");
        let out = Command::new(env!("CARGO"))
            .current_dir(root())
            .args([
                "rustc",
                "--quiet",
                "-p",
                "perfaux-ffi",
                "--crate-type",
                "staticlib",
            ])
            .arg("--target-dir")
            .arg(&target)
            .env_remove("RUSTFLAGS")
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "building the static library: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        target.join("debug/libperfaux_ffi.a")
    })
}

fn valgrind() -> Option<&'static str> {
    let found = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("PERFAUX_REQUIRE_VALGRIND").is_none(),
            "PERFAUX_REQUIRE_VALGRIND is set but valgrind does not run"
        );
        perfaux_tests::skipped(
            "valgrind not installed (apt-get install valgrind): the C programs run without it",
        );
        return None;
    }
    Some("valgrind")
}

/// Compiles `tests/c/<name>.c` and runs it; returns its stdout.
fn run_c(name: &str) -> String {
    let lib = staticlib();
    // One directory per program: the tests run in parallel and each removes its own.
    let dir = std::env::temp_dir().join(format!("perfaux-c-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let out = Command::new(&cc)
        .args([
            "-std=c11",
            "-D_ISOC11_SOURCE",
            "-g",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
        ])
        .arg("-I")
        .arg(root().join("include"))
        .arg(root().join(format!("tests/c/{name}.c")))
        .arg(lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("the C compiler runs");
    assert!(
        out.status.success(),
        "{cc} {name}.c: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut cmd = match valgrind() {
        Some(v) => {
            let mut c = Command::new(v);
            c.args([
                "--quiet",
                "--error-exitcode=99",
                "--leak-check=full",
                "--errors-for-leak-kinds=definite,indirect",
            ])
            .arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    let out = cmd.output().expect("the C program runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{name}: exit {:?}\n{stdout}{stderr}",
        out.status.code()
    );
    assert!(stderr.is_empty(), "{name} (valgrind) reported:\n{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
    stdout
}

/// The C quick start (docs/c.md) builds with the documented command line and
/// runs clean under valgrind.
#[test]
fn the_c_quick_start_runs() {
    let out = run_c("quickstart");
    assert!(out.contains("a 256-byte snapshot taken"), "{out}");
}

#[test]
fn ring_writes_reader_lost_records_and_bad_inputs() {
    let out = run_c("ring");
    assert!(out.starts_with("ring: 500 records"), "{out}");
}

#[test]
fn pt_snapshot_through_a_c_sink_full_trace_through_c_transactions_and_bad_inputs() {
    let out = run_c("pt");
    assert!(out.contains("pt snapshot: "), "{out}");
    assert!(out.contains("nothing lost"), "{out}");
    assert!(out.contains("bad inputs refused"), "{out}");
}

/// The header under `__KERNEL__` includes only `<linux/types.h>`: it
/// compiles with no C library at all, given the types the kernel's
/// `linux/types.h` defines.
#[test]
fn the_header_compiles_in_a_kernel_build() {
    let dir = std::env::temp_dir().join(format!("perfaux-kernel-h-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("linux")).unwrap();
    std::fs::write(
        dir.join("linux/types.h"),
        "/* the types the kernel's linux/types.h gives */\n\
         typedef unsigned char uint8_t; typedef unsigned short uint16_t;\n\
         typedef unsigned int uint32_t; typedef unsigned long long uint64_t;\n\
         typedef int int32_t; typedef long long int64_t;\n\
         typedef unsigned long size_t; typedef long ptrdiff_t; typedef unsigned long uintptr_t;\n\
         typedef _Bool bool;\n",
    )
    .unwrap();
    let probe = dir.join("probe.c");
    std::fs::write(
        &probe,
        "#include \"perfaux.h\"\n\
         int probe(perfaux_pt_cpu *pt) { return perfaux_pt_handle_pmi(pt) + PERFAUX_EF_UPDATE; }\n",
    )
    .unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let out = Command::new(&cc)
        .args([
            "-std=gnu11",
            "-ffreestanding",
            "-nostdinc",
            "-D__KERNEL__",
            "-Wall",
            "-Werror",
        ])
        .args(["-fsyntax-only", "-I"])
        .arg(&dir)
        .arg("-I")
        .arg(root().join("include"))
        .arg(&probe)
        .output()
        .expect("the C compiler runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn events_groups_and_aux_samples_from_c() {
    let out = run_c("event");
    assert!(out.starts_with("event: 20 AUX samples"), "{out}");
}

#[test]
fn aux_transactions_and_samples_without_the_event_layer() {
    let out = run_c("sample");
    assert!(out.starts_with("sample: AUX transactions"), "{out}");
}

/// Every `_fini` and `_end` of an object another live object refers to is
/// refused with `-EBUSY` and changes nothing, in every state a teardown can
/// reach; the others succeed, and their memory is freed at once, so that
/// valgrind sees any later use of it.
#[test]
fn teardown_in_the_wrong_order_is_refused() {
    let out = run_c("teardown");
    // Nine objects (ring, AUX area, PT buffer, PT CPU, leader, sampler,
    // child, output handle, AUX handle) reach 27 states; the program checks
    // each verdict against its model, this the totals.
    assert_eq!(
        out,
        "teardown: 27 reachable states, 135 ends tried, 87 refused with -EBUSY\n"
    );
}
