// SPDX-License-Identifier: MIT OR Apache-2.0
//! What the benchmarks of real programs share: the CPU time of a run, the
//! plugin in release, programs on `$PATH`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The CPU time of `cmd` and all it waited for, and its standard error.
// The child is reaped by `wait4` (for its rusage), not `Child::wait`.
#[allow(clippy::zombie_processes)]
pub fn cpu_time(cmd: &mut Command) -> (Duration, String) {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as libc::pid_t;
    let stderr = child.stderr;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut e) = stderr {
            use std::io::Read as _;
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let mut status = 0;
    // SAFETY: zeroed rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, pointers to locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    let err = reader.join().unwrap();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed: {err}"
    );
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(usage.ru_utime) + tv(usage.ru_stime), err)
}

/// Builds the QEMU plugin in release beside `perfaux` (where `record`
/// looks for it); its path.
pub fn build_plugin(perfaux: &Path) -> PathBuf {
    let out = Command::new(env!("CARGO"))
        .args(["build", "--release", "--quiet", "-p", "perfaux-qemu"])
        .status()
        .unwrap();
    assert!(out.success(), "building the plugin");
    let plugin = perfaux.parent().unwrap().join("libperfaux_qemu.so");
    assert!(plugin.is_file(), "{}", plugin.display());
    plugin
}

/// `name` on `$PATH`.
#[allow(dead_code)] // Not every benchmark runs one.
pub fn launch_path(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not on PATH"))
}
