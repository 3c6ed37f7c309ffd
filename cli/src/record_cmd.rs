// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux record`: runs the simulated machine and writes perf.data.

use std::cell::Cell;
use std::io::{BufWriter, Write as _};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use perfaux_cli::emu::buildid;
use perfaux_cli::sim::{self, Config, Counter, Image, Mode, Stop};

use crate::output::{PLAIN, RECORDING, place, staged};
use crate::record_options::{
    EventSpec, parse_duration, parse_event, parse_mmap_pages, parse_size_u32,
};

/// Trace a program under QEMU user mode (`-- PROGRAM`), or simulate
/// PT-style AUX sampling on N CPUs, and write a perf.data file.
#[derive(Args, Debug)]
// A negative number is a bad value of its option, not an unknown flag.
#[command(allow_negative_numbers = true)]
#[command(after_help = "Examples:
  perfaux record -- gzip -kf file                 trace a real program (QEMU user mode): the whole Intel PT trace
  perfaux record --aux-sample -c 50000 -- ls      every 50000 instructions a sample with the newest 4 KiB of trace
  perfaux record -b -c 10007 -- ./prog            every 10007 instructions a sample with the newest 32 taken branches (LBR's)
  perfaux record                                  the simulator: 4 CPUs, 20 ms, snapshot mode, perf.data
  perfaux record --samples 1000 --seed 7 -o a.data
  perfaux record --mode full --aux-pages 256      the whole trace, as AUXTRACE records
  perfaux record -e cycles -e instructions --period 50000 --aux-sample-size 65536
  perfaux record --mode full -o - | perf script --itrace=be -i -      perf's pipe format
Then: perf script -D -i perf.data | less   or   perfaux dump --check perf.data")]
pub struct RecordArgs {
    /// Output file; `-` streams perf's pipe format to standard output
    /// (`perfaux record -o - | perf script -i -`), the summary then on
    /// standard error and the program's code in the build-id cache only.
    #[arg(short, long, default_value = "perf.data")]
    pub(crate) output: PathBuf,
    /// Simulated CPUs (1-256).
    #[arg(long, default_value_t = 4, conflicts_with = "program")]
    cpus: usize,
    /// Simulated time to run: 20ms, 1.5ms, 1s, 500us (a bare number is
    /// ms) [default: 20ms].
    #[arg(long, value_name = "TIME", value_parser = parse_duration, conflicts_with_all = ["samples", "program"], allow_hyphen_values = true)]
    duration: Option<u64>,
    /// Stop once this many samples are written.
    #[arg(long, conflicts_with = "program")]
    samples: Option<u64>,
    /// Bytes of trace each sample carries (attr.aux_sample_size; snapshot
    /// mode) [default: 4096]. The kernel takes whole 8-byte words.
    #[arg(long, value_name = "BYTES", value_parser = parse_size_u32, conflicts_with = "program")]
    aux_sample_size: Option<u32>,
    /// AUX area pages per CPU, or per thread of a program (a power of
    /// two) [default: 64 simulated, 1024 for a program: 4 MiB, perf's].
    #[arg(long, value_name = "PAGES")]
    aux_pages: Option<usize>,
    /// Data ring pages per CPU, or per thread of a program (a power of
    /// two) [default: 128].
    #[arg(long, value_name = "PAGES")]
    data_pages: Option<usize>,
    /// perf's -m: the data ring's and the AUX area's size, in pages or
    /// with a suffix (512K, 16M), each rounded up to a power of two pages;
    /// either may be left out (-m ,1024).
    #[arg(short = 'm', long = "mmap-pages", value_name = "PAGES[,AUX]", conflicts_with_all = ["data_pages", "aux_pages"])]
    mmap_pages: Option<String>,
    /// Seed of the synthetic program: the same seed writes the same file.
    #[arg(long, default_value_t = 1, conflicts_with = "program")]
    seed: u64,
    /// snapshot: samples carry the newest trace; full: the whole trace is
    /// recorded (PERF_RECORD_AUX + AUXTRACE) and samples carry none.
    #[arg(long, value_enum, default_value_t = ModeArg::Snapshot, conflicts_with = "program")]
    mode: ModeArg,
    /// Sampling event in the PT group, perf's name with `:u` allowed:
    /// cycles, instructions, branches (repeat for more) [default: cycles].
    #[arg(short, long = "event", value_name = "EVENT", value_parser = parse_event, conflicts_with = "program")]
    events: Vec<EventSpec>,
    /// Trace the kernel's interrupt handler too (`intel_pt//`, `cycles`):
    /// its code is written to `<output>.perfaux-vmlinux` for
    /// `perf script --vmlinux`. Default: user space only (`intel_pt//u`).
    #[arg(long, conflicts_with = "program")]
    kernel: bool,
    /// Write the ground truth here (`-`: standard output): every branch an
    /// ideal decoder shows per CPU, and each sample's branch stack.
    #[arg(long, value_name = "FILE")]
    pub(crate) truth: Option<PathBuf>,
    /// No progress bar or summary.
    #[arg(short, long)]
    pub(crate) quiet: bool,
    /// With a program: every sample (an `instructions:u` overflow) carries
    /// the newest SIZE bytes (8K, 64K: suffixes allowed) of its thread's
    /// trace (perf's `--aux-sample`; default 4096), instead of the whole
    /// trace.
    #[arg(long, value_name = "SIZE", num_args = 0..=1, default_missing_value = "4096", value_parser = parse_size_u32, requires = "program")]
    pub(crate) aux_sample: Option<u32>,
    /// Every sample carries the newest 32 taken branches (a branch stack,
    /// as Intel's LBR gives `perf record -b`; user branches).
    #[arg(short = 'b', long = "branch-any", conflicts_with = "branch_filter")]
    pub(crate) branch_any: bool,
    /// Branch stacks of the branches FILTER names: perf's comma-separated
    /// words (any, any_call, any_ret, ind_call, ind_jmp, call, cond; u;
    /// save_type, hw_index, priv, no_flags, no_cycles, no_tx).
    #[arg(short = 'j', long = "branch-filter", value_name = "FILTER")]
    pub(crate) branch_filter: Option<String>,
    /// Events between samples (perf's -c: cycles, instructions or
    /// branches of the simulator's samplers; a program's instructions,
    /// with --aux-sample or -b) [default: 100000].
    #[arg(
        short = 'c',
        long = "count",
        visible_alias = "period",
        value_name = "N"
    )]
    count: Option<u64>,
    /// perf's -F: samples a second (or `max`, 100000), the period retuned
    /// as the kernel retunes it (attr.freq) from a period of 1; the
    /// simulator's clock is 2 GHz. Not with a program (QEMU's pace is not
    /// the program's): give -c there.
    #[arg(
        short = 'F',
        long = "freq",
        value_name = "HZ",
        conflicts_with = "count"
    )]
    freq: Option<String>,
    /// With a program: the most threads traced over the run (each has its
    /// own rings, as each CPU has in `perf record`); more run untraced.
    #[arg(long, default_value_t = 256, requires = "program")]
    pub(crate) max_threads: u32,
    /// Do not add the binaries the recording names (a program's, or the
    /// simulator's code) to the build-id cache ($PERF_BUILDID_DIR or
    /// ~/.debug), where perf finds them by build-id after they are
    /// replaced or moved (perf record's --no-buildid-cache).
    #[arg(long)]
    pub(crate) no_buildid_cache: bool,
    /// A real x86-64 program to trace under QEMU user mode, and its
    /// arguments (after `--`). Without one, the simulator runs.
    #[arg(last = true, value_name = "PROGRAM")]
    pub program: Vec<std::ffi::OsString>,
}

impl RecordArgs {
    /// The sample period (`-c`) of a program's sampler.
    pub(crate) fn period(&self) -> Result<u64, String> {
        if let Some(hz) = &self.freq {
            return Err(format!(
                "-F {hz} with a program: frequency mode samples so often a second, and QEMU's pace is not the program's (the samples would follow the emulator's speed); give a period in instructions with -c N"
            ));
        }
        Ok(self.count.unwrap_or(100_000))
    }

    /// The simulator's frequency mode (`-F HZ` or `-F max`), if asked for.
    fn freq(&self) -> Result<Option<u64>, String> {
        self.freq
            .as_deref()
            .map(|f| match f {
                "max" => Ok(100_000),
                _ => f
                    .parse::<u64>()
                    .map_err(|_| format!("-F '{f}': samples a second, as a number (or max)")),
            })
            .transpose()
    }

    /// The data ring's and the AUX area's pages (`--data-pages`,
    /// `--aux-pages`, or `-m`, whose rounding is said on standard error);
    /// the AUX area's `None` for the mode's default.
    pub(crate) fn pages(&self) -> Result<(usize, Option<usize>), String> {
        let Some(m) = &self.mmap_pages else {
            return Ok((self.data_pages.unwrap_or(128), self.aux_pages));
        };
        let pages = parse_mmap_pages(m)?;
        for note in &pages.notes {
            eprintln!("perfaux: {note}");
        }
        Ok((pages.data.unwrap_or(128), pages.aux))
    }

    /// The samples' `branch_sample_type` (`-b`, `-j`), `None` without
    /// branch stacks (what the engine cannot serve, the run refuses:
    /// `Config::check`, `emu::record`).
    pub(crate) fn branches(&self) -> Result<Option<u64>, String> {
        Ok(match (&self.branch_filter, self.branch_any) {
            (Some(filter), _) => Some(perfaux_cli::branch_filter::parse(filter)?),
            (None, true) => Some(perfaux_cli::branch_filter::ANY),
            (None, false) => None,
        })
    }
}

/// Where the program's ELF goes: beside the output, named after it (a
/// different program per seed, so never shared between files).
pub fn binary_path(output: &std::path::Path, suffix: &str) -> Result<PathBuf, String> {
    let abs = std::path::absolute(output)
        .map_err(|e| format!("cannot resolve {}: {e}", output.display()))?;
    let mut name = abs.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    Ok(abs.with_file_name(name))
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModeArg {
    Snapshot,
    Full,
}

/// What the run will do otherwise than the options say, each said once
/// before it starts (nothing changes silently).
fn quiet_changes(args: &RecordArgs, config: &Config) -> Vec<String> {
    let mut said = Vec::new();
    match (config.mode, args.aux_sample_size) {
        (Mode::Full, Some(size)) => said.push(format!(
            "--aux-sample-size {size} is unused: --mode full records the whole trace, and samples carry none"
        )),
        (Mode::Snapshot, Some(size)) if size % 8 != 0 => said.push(format!(
            "--aux-sample-size {size}: the kernel takes whole 8-byte words (perf_prepare_sample rounds down), so samples carry {} bytes",
            size & !7
        )),
        _ => {}
    }
    if let Stop::Duration(ns) = config.stop {
        let step = sim::QUANTUM_NS;
        if ns % step != 0 {
            let runs = ns.div_ceil(step) * step;
            said.push(format!(
                "--duration {}: the simulated CPUs take turns every {} us, so the run lasts {}",
                human_ns(ns),
                step / 1000,
                human_ns(runs)
            ));
        }
    }
    said
}

/// `ns` in the largest unit that keeps it whole (`2ns`, `1500us`, `20ms`).
fn human_ns(ns: u64) -> String {
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// `N bytes (M MiB)`.
pub(crate) fn mib(bytes: u64) -> String {
    format!(
        "{bytes} bytes ({:.1} MiB)",
        bytes as f64 / (1024.0 * 1024.0)
    )
}

/// Runs `perfaux record`.
pub fn run(args: &RecordArgs) -> Result<ExitCode, String> {
    if !args.program.is_empty() {
        return crate::record_program::run(args);
    }
    if args.kernel {
        if let Some(e) = args.events.iter().find(|e| e.user_only) {
            return Err(format!(
                "-e {}:u with --kernel: the samplers count the kernel's handler too; drop :u or --kernel",
                e.counter.name()
            ));
        }
    }
    let (data_pages, aux_pages) = args.pages()?;
    let config = Config {
        cpus: args.cpus,
        stop: match (args.samples, args.duration) {
            (Some(n), _) => Stop::Samples(n),
            (None, Some(ns)) => Stop::Duration(ns),
            (None, None) => Stop::Duration(20_000_000),
        },
        period: args.count.unwrap_or(100_000),
        freq: args.freq()?,
        aux_sample_size: args.aux_sample_size.unwrap_or(4096),
        aux_pages: aux_pages.unwrap_or(64),
        data_pages,
        seed: args.seed,
        mode: match args.mode {
            ModeArg::Snapshot => Mode::Snapshot,
            ModeArg::Full => Mode::Full,
        },
        counters: if args.events.is_empty() {
            vec![Counter::Cycles]
        } else {
            args.events.iter().map(|e| e.counter).collect()
        },
        cmdline: std::env::args().collect(),
        kernel: args.kernel,
        truth: args.truth.is_some(),
        binary: String::new(),
        branches: args.branches()?,
    };
    let mut config = config;
    let to_stdout = args.output.as_os_str() == "-";
    // `-o -`: perf's pipe format on standard output; the side files then
    // take a fixed name in the current directory.
    let named = if to_stdout {
        Path::new(STDOUT_NAME)
    } else {
        args.output.as_path()
    };
    let elf_path = binary_path(named, ".perfaux-demo")?;
    let vmlinux = binary_path(named, ".perfaux-vmlinux")?;
    config.binary = elf_path
        .to_str()
        .ok_or_else(|| format!("{}: not a UTF-8 path", elf_path.display()))?
        .to_owned();
    config.check()?;
    if args.output.is_dir() {
        return Err(format!("-o {}: is a directory", args.output.display()));
    }
    for warning in quiet_changes(args, &config) {
        eprintln!("perfaux: warning: {warning}");
    }
    let max_aux = sim::max_aux_per_sample(&config);
    if config.mode == Mode::Snapshot && config.aux_sample_size > max_aux {
        // perf record refuses more than 60 KiB; the kernel clamps. Say so.
        eprintln!(
            "perfaux: warning: --aux-sample-size {}: a sample is at most 65535 bytes, so each carries at most {max_aux} bytes of trace (the kernel's clamp)",
            config.aux_sample_size
        );
    }
    let truth_to_stdout = args.truth.as_deref() == Some(Path::new("-"));
    if truth_to_stdout && to_stdout {
        return Err("--truth - with -o -: both on standard output".into());
    }
    if args.truth.as_deref() == Some(args.output.as_path()) {
        return Err(format!(
            "--truth {}: that is the output file",
            args.output.display()
        ));
    }
    // Every output is written to a temporary file beside it and renamed
    // into place only when the run has succeeded: a failed, full-disk or
    // killed run leaves the previous files as they were. The temporary
    // files are created first, so a bad path fails before the run.
    let truth_file = args
        .truth
        .as_deref()
        .filter(|_| !truth_to_stdout)
        .map(|p| staged(p, PLAIN))
        .transpose()?;
    let file = if to_stdout {
        None
    } else {
        Some(staged(&args.output, RECORDING)?)
    };
    // The program's code (and the handler's), where the file's MMAP2
    // records say, and in the build-id cache, where perf finds it by the
    // build-id those records carry whatever becomes of the path (a newer
    // run's code there, a moved recording). With the records on standard
    // output it goes to the cache only, before the run (the reader may
    // need it at once): nothing lands in the current directory and
    // concurrent runs share no file; beside the output only if the cache
    // is off or fails.
    let (elf, kernel_elf) = sim::images(&config)?;
    let cache = (!args.no_buildid_cache).then(buildid::cache_dir).flatten();
    let mut side: Vec<(&Path, &Image)> = vec![(&elf_path, &elf)];
    if let Some(k) = &kernel_elf {
        side.push((&vmlinux, k));
    }
    let write_side = |side: &[(&Path, &Image)]| -> Result<(), String> {
        for (path, image) in side {
            let mut f = staged(path, PLAIN)?;
            f.write_all(&image.bytes)
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            place(f, path, false)?;
        }
        Ok(())
    };
    let cached: Vec<Option<PathBuf>> = side
        .iter()
        .map(|(path, image)| {
            cache
                .as_deref()
                .and_then(|dir| cache_image(dir, path, image))
        })
        .collect();
    // Where the summary says each side file is.
    let mut side_at: Vec<PathBuf> = side.iter().map(|(p, _)| p.to_path_buf()).collect();
    if to_stdout {
        for (((path, image), cached), at) in side.iter().zip(&cached).zip(&mut side_at) {
            match cached {
                Some(entry) => *at = entry.clone(),
                None => write_side(&[(path, image)])?,
            }
        }
    }
    let interrupt = interrupt_flag();
    let stop = &interrupt.stop;
    let started = Instant::now();
    // Hidden until the run has taken a second: short runs print no bar.
    let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed}] {wide_bar} {percent:>3}% ETA {eta} {msg}",
        )
        .map_err(|e| e.to_string())?,
    );
    let mut shown = false;
    let failed = |e: &dyn std::fmt::Display| {
        format!(
            "writing {}: {e} (nothing was replaced)",
            args.output.display()
        )
    };
    // The output's file system: a run that would fill it stops first, with
    // a complete file, instead of failing at the end with nothing written.
    let room = if to_stdout {
        None
    } else {
        free_bytes(&args.output).map(|free| free.saturating_sub(DISK_MARGIN))
    };
    let disk_stop = Cell::new(false);
    let mut progress = |p: sim::Progress| {
        if room.is_some_and(|room| p.bytes >= room) {
            disk_stop.set(true);
            return ControlFlow::Break(());
        }
        if !args.quiet && !shown && started.elapsed() > Duration::from_secs(1) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            shown = true;
        }
        bar.set_position((p.fraction * 1000.0) as u64);
        bar.set_message(format!(
            "{} samples, {:.1} MiB",
            p.samples,
            p.bytes as f64 / (1024.0 * 1024.0)
        ));
        if stop.load(Ordering::Relaxed) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let (summary, outputs, backup, file_bytes) = match file {
        None => {
            let closed = Rc::new(Cell::new(false));
            let out = BufWriter::new(Stdout {
                out: std::io::stdout().lock(),
                closed: Rc::clone(&closed),
            });
            let (summary, _, outputs) = match sim::record_pipe(&config, out, &mut progress) {
                Ok(done) => done,
                // The reader went away (`| head`): the run ends quietly,
                // with the status a writer killed by SIGPIPE has, as
                // `perf record -o -` ends.
                Err(_) if closed.get() => return Ok(ExitCode::from(128 + 13)),
                Err(e) => return Err(format!("writing standard output: {e}")),
            };
            let bytes = summary.data_bytes;
            (summary, outputs, None, bytes)
        }
        Some(file) => {
            let (summary, out, outputs) = sim::record(&config, BufWriter::new(file), &mut progress)
                .map_err(|e| failed(&e))?;
            let file = out.into_inner().map_err(|e| failed(e.error()))?;
            file.as_file().sync_all().map_err(|e| failed(&e))?;
            write_side(&side)?;
            // perf record's check_backup: an existing non-empty output
            // becomes `<output>.old` (the older `.old` goes).
            let backup = place(file, &args.output, true)?;
            let bytes = std::fs::metadata(&args.output).map_or(0, |m| m.len());
            (summary, outputs, backup, bytes)
        }
    };
    bar.finish_and_clear();
    if let (Some(mut f), Some(t), Some(p)) = (truth_file, &outputs.truth, &args.truth) {
        f.write_all(t.as_bytes())
            .map_err(|e| format!("writing {}: {e}", p.display()))?;
        place(f, p, false)?;
    }
    if let (true, Some(t)) = (truth_to_stdout, &outputs.truth) {
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(t.as_bytes()).and_then(|()| out.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(ExitCode::from(128 + 13));
            }
            return Err(format!("writing the truth to standard output: {e}"));
        }
    }
    let took = started.elapsed().as_secs_f64();
    let output = if to_stdout {
        "standard output".to_owned()
    } else {
        args.output.display().to_string()
    };
    if !args.quiet {
        let report = Report {
            output: &output,
            config: &config,
            summary: &summary,
            file_bytes,
            took,
            elf: &side_at[0],
            vmlinux: side_at.get(1).map(PathBuf::as_path),
            backup: backup.as_deref(),
            input: if to_stdout { "-" } else { output.as_str() },
        };
        // With the records (or the truth) on standard output, the summary
        // goes to standard error, as perf record's messages do.
        let printed = if to_stdout || truth_to_stdout {
            report.print(&mut std::io::stderr().lock())
        } else {
            report.print(&mut std::io::stdout().lock())
        };
        if let Err(e) = printed {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(format!("writing the summary: {e}"));
            }
        }
    }
    if disk_stop.get() {
        // One line even with --quiet: the run is shorter than asked.
        eprintln!(
            "perfaux: warning: stopped after {:.1} ms simulated, {} MiB short of filling the file system: {output} is complete and holds {} samples",
            summary.simulated_ns as f64 / 1e6,
            DISK_MARGIN >> 20,
            summary.samples
        );
        return Ok(ExitCode::SUCCESS);
    }
    if summary.interrupted {
        // One line even with --quiet: the file is valid, and shorter than asked.
        eprintln!(
            "perfaux: interrupted after {:.1} ms simulated: {output} is complete and holds {} samples",
            summary.simulated_ns as f64 / 1e6,
            summary.samples
        );
        // perf record, stopped by SIGINT, SIGTERM or SIGHUP, also writes its
        // file, then ends by that signal (130, 143, 129).
        return Ok(ExitCode::from(interrupt.status().unwrap_or(130)));
    }
    Ok(ExitCode::SUCCESS)
}

/// Room a run leaves free on its output's file system (the side files,
/// the file's features and index, and everyone else's writes).
const DISK_MARGIN: u64 = 64 << 20;

/// Bytes free to an unprivileged writer on the file system `path` will be
/// written to (its directory's), if `statvfs` says.
fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `name` is a NUL-terminated path and `st` is writable storage
    // for one `struct statvfs`, which statvfs(3) fills when it returns 0.
    if unsafe { libc::statvfs(name.as_ptr(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it initialized `st`.
    let st = unsafe { st.assume_init() };
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// The side files' base name for `-o -` (in the current directory, which
/// the records name; the files go to the build-id cache).
const STDOUT_NAME: &str = "perfaux-stdout";

/// Adds `image`, which the recording names `path`, to the build-id cache
/// `dir`: the cache's copy, or `None` after a one-line warning (the
/// recording stands; perf then needs the file at `path`).
fn cache_image(dir: &Path, path: &Path, image: &Image) -> Option<PathBuf> {
    let name = path.to_str()?;
    match buildid::add_bytes(dir, name, &image.build_id, &image.bytes) {
        Ok(_) => Some(buildid::entry(dir, name, &image.build_id)),
        Err(e) => {
            eprintln!(
                "perfaux: warning: {} not added to the build-id cache {}: {e}",
                path.display(),
                dir.display()
            );
            None
        }
    }
}

/// Standard output for the records of `-o -`, remembering whether the
/// reader went away (a write failed with `EPIPE`).
struct Stdout<W> {
    out: W,
    closed: Rc<Cell<bool>>,
}

impl<W: std::io::Write> Stdout<W> {
    fn note<T>(&self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                self.closed.set(true);
            }
        }
        r
    }
}

impl<W: std::io::Write> std::io::Write for Stdout<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.out.write(buf);
        self.note(r)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.out.flush();
        self.note(r)
    }
}

/// What a finished run says (`perfaux record` without `--quiet`).
struct Report<'r> {
    output: &'r str,
    config: &'r Config,
    summary: &'r sim::Summary,
    file_bytes: u64,
    took: f64,
    elf: &'r Path,
    vmlinux: Option<&'r Path>,
    backup: Option<&'r Path>,
    /// The name perf's `-i` takes for the output.
    input: &'r str,
}

impl Report<'_> {
    fn print(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        let (summary, config, took) = (self.summary, self.config, self.took);
        writeln!(
            w,
            "perfaux: wrote {} ({:.1} MiB): {} CPU{}, {:.1} ms simulated, {} mode",
            self.output,
            self.file_bytes as f64 / (1024.0 * 1024.0),
            config.cpus,
            if config.cpus == 1 { "" } else { "s" },
            summary.simulated_ns as f64 / 1e6,
            match config.mode {
                Mode::Snapshot => "snapshot",
                Mode::Full => "full-trace",
            }
        )?;
        writeln!(
            w,
            "  samples   {} ({} with AUX data, {} of trace in samples)",
            summary.samples,
            summary.aux_samples,
            mib(summary.aux_sample_bytes)
        )?;
        if config.branches.is_some() {
            writeln!(
                w,
                "  stacks    {} branches in the samples' branch stacks",
                summary.stack_branches
            )?;
        }
        writeln!(
            w,
            "  AUX       {} PERF_RECORD_AUX ({} truncated), {} in AUXTRACE records",
            summary.aux_records,
            summary.aux_truncated,
            mib(summary.auxtrace_bytes)
        )?;
        writeln!(
            w,
            "  lost      {} records, {} samples, {} trace events{}",
            summary.lost_records,
            summary.lost_samples,
            summary.lost_trace_events,
            if summary.lost_trace_events > 0 {
                " (full AUX areas: a larger --aux-pages keeps them)"
            } else {
                ""
            }
        )?;
        writeln!(
            w,
            "  trace     {} of Intel PT packets written by the tracers",
            mib(summary.trace_bytes)
        )?;
        writeln!(
            w,
            "  took      {took:.2} s ({:.1} MB/s of perf.data, {:.0} samples/s)",
            self.file_bytes as f64 / took / 1e6,
            summary.samples as f64 / took
        )?;
        writeln!(w, "  program   {}", self.elf.display())?;
        if let Some(old) = self.backup {
            writeln!(w, "  previous  {} (was {})", old.display(), self.output)?;
        }
        let vm = self
            .vmlinux
            .map(|v| format!(" --vmlinux {}", v.display()))
            .unwrap_or_default();
        if self.input == "-" {
            // perf 6.1 decodes no AUX samples from a pipe
            // (`auxtrace_queue_data` skips pipes): a full trace, or the
            // samples (with their own branch stacks, -b), are what it shows.
            let pipe = match (self.config.mode, self.config.branches.is_some()) {
                (Mode::Full, _) => format!("perf script --itrace=be -i -{vm}"),
                (Mode::Snapshot, true) => format!("perf script -F +brstacksym -i -{vm}"),
                (Mode::Snapshot, false) => format!(
                    "perf script -i -{vm}   (perf decodes AUX samples from a file only: -o FILE)"
                ),
            };
            writeln!(w, "next: pipe it: perfaux record ... -o - | {pipe}")
        } else {
            writeln!(
                w,
                "next: perf script --itrace=L16 -F +brstacksym -i {0}{vm}   or   perfaux dump --check {0}",
                self.input
            )
        }
    }
}

/// What stops a run early: SIGINT (Ctrl-C), SIGTERM (what `timeout`, CI
/// runners and systemd send) or SIGHUP, as they stop `perf record`. The
/// run then ends at its next round with a complete, shorter file; a second
/// one ends the process at once, with the status that signal gives.
pub(crate) struct Interrupt {
    /// Set by the first of those signals.
    pub(crate) stop: Arc<AtomicBool>,
    /// The last of them to arrive (0: none).
    signal: Arc<AtomicUsize>,
}

impl Interrupt {
    /// The exit status of a run the signal stopped: 128 + the signal, as a
    /// shell reports `perf record`'s (it writes its file, then raises the
    /// signal again); `None` if none came.
    pub(crate) fn status(&self) -> Option<u8> {
        match self.signal.load(Ordering::Relaxed) {
            0 => None,
            s => Some(128u8.saturating_add(s as u8)),
        }
    }
}

/// Installs the handlers of [`Interrupt`]'s signals. Failing to install
/// one leaves that signal's default: nothing is replaced either way.
pub(crate) fn interrupt_flag() -> Interrupt {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use signal_hook::flag;
    let stop = Arc::new(AtomicBool::new(false));
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        // In this order: the shutdown tests the flag before the first
        // signal sets it, so only a second one ends the process.
        let _ = flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&stop));
        let _ = flag::register(sig, Arc::clone(&stop));
        let _ = flag::register_usize(sig, Arc::clone(&signal), sig as usize);
    }
    Interrupt { stop, signal }
}
