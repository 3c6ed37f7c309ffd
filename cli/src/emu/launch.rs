// SPDX-License-Identifier: MIT OR Apache-2.0
//! Starting the program under the emulator: finding `qemu-x86_64` and the
//! plugin, checking that the program is something the emulator runs (an
//! x86-64 ELF, or a script whose interpreter is one), and spawning it with
//! the session's descriptor.

use std::ffi::{OsStr, OsString};
use std::io::Read as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::Ended;

/// The plugin's file name.
pub const PLUGIN: &str = "libperfaux_qemu.so";

/// `name` looked up as `execvp` looks it up: a path if it has a slash,
/// else the first executable file of that name in `$PATH`.
pub fn which(name: &OsStr) -> Option<PathBuf> {
    let is_exec = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| {
            use std::os::unix::fs::PermissionsExt as _;
            m.is_file() && m.permissions().mode() & 0o111 != 0
        })
    };
    if name.as_bytes().contains(&b'/') {
        let p = PathBuf::from(name);
        return is_exec(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_exec(p))
}

/// The emulator: `$PERFAUX_QEMU`, else `qemu-x86_64` on `$PATH`.
pub fn qemu() -> Result<PathBuf, String> {
    if let Some(q) = std::env::var_os("PERFAUX_QEMU") {
        return which(&q).ok_or_else(|| {
            format!(
                "PERFAUX_QEMU={}: not an executable file",
                Path::new(&q).display()
            )
        });
    }
    which(OsStr::new("qemu-x86_64")).ok_or_else(|| {
        "qemu-x86_64 not found: install QEMU user mode (Debian: apt-get install qemu-user), or set PERFAUX_QEMU".into()
    })
}

/// The plugin: `$PERFAUX_QEMU_PLUGIN`, else beside the `perfaux` binary
/// (where `cargo build` puts both), else in `../lib/perfaux/` from it.
pub fn plugin() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("PERFAUX_QEMU_PLUGIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("PERFAUX_QEMU_PLUGIN={}: no such file", p.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("where is perfaux? {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [
        dir.join(PLUGIN),
        // `cargo test` runs the binary from target/<profile>/, the plugin
        // too; from target/<profile>/deps/ one level up.
        dir.join("..").join(PLUGIN),
        dir.join("../lib/perfaux").join(PLUGIN),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            format!(
                "the QEMU plugin {PLUGIN} is not beside {}: build it (cargo build --release -p perfaux-qemu) or set PERFAUX_QEMU_PLUGIN",
                exe.display()
            )
        })
}

/// What a file is, by its first bytes.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// An x86-64 ELF.
    Elf64X86,
    /// A script: its interpreter and the interpreter's optional argument.
    Script(PathBuf, Option<OsString>),
    /// Something the emulator does not run, said in words.
    Other(String),
}

/// `e_machine` names for the error message.
fn machine_name(m: u16) -> String {
    match m {
        3 => "x86 (i386)".into(),
        40 => "ARM".into(),
        183 => "AArch64".into(),
        243 => "RISC-V".into(),
        8 => "MIPS".into(),
        20 | 21 => "PowerPC".into(),
        22 => "s390".into(),
        _ => format!("machine {m}"),
    }
}

fn kind(path: &Path) -> Result<Kind, String> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let head = &head[..n];
    if head.starts_with(b"\x7fELF") {
        if head.len() < 20 {
            return Ok(Kind::Other("a truncated ELF file".into()));
        }
        let machine = u16::from_le_bytes([head[18], head[19]]);
        return Ok(match (head[4], head[5], machine) {
            (2, 1, 62) => Kind::Elf64X86,
            (1, _, m) => Kind::Other(format!("a 32-bit ELF for {}", machine_name(m))),
            (_, 2, _) => Kind::Other("a big-endian ELF".into()),
            (_, _, m) => Kind::Other(format!("an ELF for {}", machine_name(m))),
        });
    }
    if let Some(rest) = head.strip_prefix(b"#!") {
        let line = rest.split(|&b| b == b'\n').next().unwrap_or(&[]);
        let line = String::from_utf8_lossy(line);
        let mut words = line.trim().splitn(2, [' ', '\t']);
        let interp = words.next().unwrap_or("");
        if interp.is_empty() {
            return Ok(Kind::Other("a script without an interpreter".into()));
        }
        let arg = words.next().map(|a| OsString::from(a.trim()));
        return Ok(Kind::Script(PathBuf::from(interp), arg));
    }
    Ok(Kind::Other(
        "not an executable format (neither ELF nor a #! script)".into(),
    ))
}

/// The command line the emulator runs.
#[derive(Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The file QEMU loads, then its arguments.
    pub argv: Vec<OsString>,
    /// The program's `argv[0]`.
    pub argv0: OsString,
}

/// The command line the emulator runs for `argv` (the program and its
/// arguments): the program found on `$PATH`, checked; a script becomes
/// its interpreter's command line, as the kernel's `binfmt_script` makes
/// it.
pub fn resolve(argv: &[OsString]) -> Result<Resolved, String> {
    let (name, args) = argv.split_first().ok_or("no program to run")?;
    let path = which(name).ok_or_else(|| {
        let shown = Path::new(name).display();
        if name.as_bytes().contains(&b'/') {
            format!("{shown}: no such executable file")
        } else {
            format!("{shown}: command not found")
        }
    })?;
    match kind(&path)? {
        Kind::Elf64X86 => Ok(Resolved {
            argv: std::iter::once(path.into_os_string())
                .chain(args.iter().cloned())
                .collect(),
            argv0: name.clone(),
        }),
        Kind::Script(interp, arg) => match kind(&interp) {
            Ok(Kind::Elf64X86) => Ok(Resolved {
                argv0: interp.clone().into_os_string(),
                argv: std::iter::once(interp.into_os_string())
                    .chain(arg)
                    .chain(std::iter::once(path.into_os_string()))
                    .chain(args.iter().cloned())
                    .collect(),
            }),
            Ok(Kind::Script(..)) => Err(format!(
                "{}: its interpreter {} is itself a script",
                path.display(),
                interp.display()
            )),
            Ok(Kind::Other(what)) => Err(format!(
                "{}: its interpreter {} is {what}; perfaux traces x86-64 programs",
                path.display(),
                interp.display()
            )),
            Err(e) => Err(format!("{}: its interpreter: {e}", path.display())),
        },
        Kind::Other(what) => Err(format!(
            "{}: {what}; perfaux traces x86-64 programs",
            path.display()
        )),
    }
}

/// The emulator running the program. Dropped before it was reaped (the
/// recording failed: a full disk, a write error), it is killed and
/// reaped: no program goes on untraced and unwaited-for behind an error.
pub struct Emulator {
    child: Child,
    reaped: bool,
}

impl Emulator {
    /// The emulator's end, if it has ended: how, and its resource usage
    /// (the largest of its processes it waited for).
    pub fn reap(&mut self) -> Result<Option<(Ended, libc::rusage)>, String> {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
        let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: waits for our own child without blocking; the pointers
        // are to locals.
        let pid = unsafe {
            libc::wait4(
                self.child.id() as libc::pid_t,
                &mut status,
                libc::WNOHANG,
                &mut rusage,
            )
        };
        if pid < 0 {
            return Err(format!(
                "waiting for the emulator: {}",
                std::io::Error::last_os_error()
            ));
        }
        if pid == 0 {
            return Ok(None);
        }
        self.reaped = true;
        let ended = if libc::WIFEXITED(status) {
            Ended::Exited(libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            Ended::Killed(libc::WTERMSIG(status))
        } else {
            Ended::Exited(1)
        };
        Ok(Some((ended, rusage)))
    }

    /// Asks the program to end (SIGTERM), as `perf record` asks its
    /// workload after Ctrl-C.
    pub fn terminate(&self) {
        if !self.reaped {
            // SAFETY: signals our own child, not reaped (its pid is ours).
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts `qemu` with `plugin` on `program`, handing it the session
/// descriptor `fd` (and a directory for the ground truth); the program's
/// standard streams are perfaux's.
pub fn spawn(
    qemu: &Path,
    plugin: &Path,
    fd: i32,
    truth: Option<&Path>,
    program: &Resolved,
) -> Result<Emulator, String> {
    let mut plugin_arg = plugin.as_os_str().to_owned();
    plugin_arg.push(format!(",session={fd}"));
    if let Some(dir) = truth {
        // QEMU splits plugin arguments at commas.
        if dir.as_os_str().as_bytes().contains(&b',') {
            return Err(format!(
                "{}: a truth directory without commas",
                dir.display()
            ));
        }
        plugin_arg.push(",truth=");
        plugin_arg.push(dir);
    }
    let mut cmd = Command::new(qemu);
    cmd.arg("-plugin").arg(plugin_arg);
    // QEMU's argv[0] for the program: the name it was given.
    cmd.arg("-0").arg(&program.argv0);
    cmd.args(&program.argv);
    // SAFETY: the closure only calls fcntl, which is async-signal-safe,
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // The session descriptor survives the exec (it is CLOEXEC in
            // perfaux); the plugin closes it once mapped.
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("starting {}: {e}", qemu.display()))?;
    Ok(Emulator {
        child,
        reaped: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_checked_before_the_emulator_runs() {
        assert!(
            resolve(&["no-such-program-perfaux".into()])
                .unwrap_err()
                .contains("command not found")
        );
        assert!(
            resolve(&["/no/such/file".into()])
                .unwrap_err()
                .contains("no such executable file")
        );
        let sh = resolve(&["sh".into(), "-c".into(), "true".into()]).unwrap();
        assert_eq!((sh.argv.len(), sh.argv0.as_os_str()), (3, OsStr::new("sh")));
    }

    #[test]
    fn scripts_run_their_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh -e\necho hi\n").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let argv = resolve(&[script.clone().into_os_string(), "x".into()]).unwrap();
        assert_eq!(
            argv.argv,
            [
                OsString::from("/bin/sh"),
                "-e".into(),
                script.into_os_string(),
                "x".into()
            ]
        );
    }
}
