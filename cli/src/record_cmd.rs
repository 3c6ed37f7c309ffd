// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux record`: runs the simulated machine and writes perf.data.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use perfaux_cli::sim::{self, Config, Counter, Mode, Stop};

/// Simulate PT-style AUX sampling on N CPUs and write a perf.data file.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  perfaux record                                  4 CPUs, 20 ms, snapshot mode, perf.data
  perfaux record --samples 1000 --seed 7 -o a.data
  perfaux record --mode full --aux-pages 256      the whole trace, as AUXTRACE records
  perfaux record -e cycles -e instructions --period 50000 --aux-sample-size 65536
Then: perf script -D -i perf.data | less   or   perfaux dump --check perf.data")]
pub struct RecordArgs {
    /// Output file.
    #[arg(short, long, default_value = "perf.data")]
    output: PathBuf,
    /// Simulated CPUs (1-256).
    #[arg(long, default_value_t = 4)]
    cpus: usize,
    /// Simulated time to run, e.g. 20ms, 1s, 500us.
    #[arg(long, value_parser = parse_duration, conflicts_with = "samples")]
    duration: Option<u64>,
    /// Stop once this many samples are written.
    #[arg(long)]
    samples: Option<u64>,
    /// Counter events between samples.
    #[arg(long, default_value_t = 100_000)]
    period: u64,
    /// Bytes of trace each sample carries (attr.aux_sample_size; snapshot mode).
    #[arg(long, default_value_t = 4096)]
    aux_sample_size: u32,
    /// AUX area pages per CPU (a power of two).
    #[arg(long, default_value_t = 64)]
    aux_pages: usize,
    /// Data ring pages per CPU (a power of two).
    #[arg(long, default_value_t = 128)]
    data_pages: usize,
    /// Seed of the synthetic program: the same seed writes the same file.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// snapshot: samples carry the newest trace; full: the whole trace is
    /// recorded (PERF_RECORD_AUX + AUXTRACE) and samples carry none.
    #[arg(long, value_enum, default_value_t = ModeArg::Snapshot)]
    mode: ModeArg,
    /// Sampling event in the PT group (repeat for more).
    #[arg(short, long = "event", value_enum, default_values_t = [EventArg::Cycles])]
    events: Vec<EventArg>,
    /// Trace the kernel's interrupt handler too (`intel_pt//`, `cycles`):
    /// its code is written to `<output>.perfaux-vmlinux` for
    /// `perf script --vmlinux`. Default: user space only (`intel_pt//u`).
    #[arg(long)]
    kernel: bool,
    /// Write the ground truth here: every branch an ideal decoder shows per
    /// CPU, and each sample's branch stack.
    #[arg(long, value_name = "FILE")]
    truth: Option<PathBuf>,
    /// No progress bar or summary.
    #[arg(short, long)]
    quiet: bool,
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

#[derive(Clone, Copy, Debug, ValueEnum)]
enum EventArg {
    Cycles,
    Instructions,
    Branches,
}

/// Parses `20ms`, `1s`, `500us`, `1000ns` (a bare number is ms) into ns.
fn parse_duration(s: &str) -> Result<u64, String> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a duration such as 20ms, 1s or 500us"))?;
    let scale = match unit {
        "ns" => 1,
        "us" => 1_000,
        "" | "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in '{s}': use ns, us, ms or s"
            ));
        }
    };
    n.checked_mul(scale)
        .filter(|&ns| ns > 0)
        .ok_or_else(|| format!("'{s}': a duration between 1ns and 584 years"))
}

fn mib(bytes: u64) -> String {
    format!(
        "{bytes} bytes ({:.1} MiB)",
        bytes as f64 / (1024.0 * 1024.0)
    )
}

/// Runs `perfaux record`.
pub fn run(args: &RecordArgs) -> Result<ExitCode, String> {
    let config = Config {
        cpus: args.cpus,
        stop: match (args.samples, args.duration) {
            (Some(n), _) => Stop::Samples(n),
            (None, Some(ns)) => Stop::Duration(ns),
            (None, None) => Stop::Duration(20_000_000),
        },
        period: args.period,
        aux_sample_size: args.aux_sample_size,
        aux_pages: args.aux_pages,
        data_pages: args.data_pages,
        seed: args.seed,
        mode: match args.mode {
            ModeArg::Snapshot => Mode::Snapshot,
            ModeArg::Full => Mode::Full,
        },
        counters: args
            .events
            .iter()
            .map(|e| match e {
                EventArg::Cycles => Counter::Cycles,
                EventArg::Instructions => Counter::Instructions,
                EventArg::Branches => Counter::Branches,
            })
            .collect(),
        cmdline: std::env::args().collect(),
        kernel: args.kernel,
        truth: args.truth.is_some(),
        binary: String::new(),
    };
    let mut config = config;
    let elf_path = binary_path(&args.output, ".perfaux-demo")?;
    config.binary = elf_path
        .to_str()
        .ok_or_else(|| format!("{}: not a UTF-8 path", elf_path.display()))?
        .to_owned();
    config.check()?;
    if args.truth.as_deref() == Some(args.output.as_path()) {
        return Err(format!(
            "--truth {}: that is the output file",
            args.output.display()
        ));
    }
    // Opened first, so that a bad path fails before the run (and before
    // the output is touched).
    let truth_file = args
        .truth
        .as_ref()
        .map(|p| File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display())))
        .transpose()?;
    let file = File::create(&args.output)
        .map_err(|e| format!("cannot create {}: {e}", args.output.display()))?;
    let started = Instant::now();
    // Hidden until the run has taken a second: short runs print no bar.
    let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed}] {wide_bar} {percent:>3}% {msg}")
            .map_err(|e| e.to_string())?,
    );
    let mut shown = false;
    let (summary, out, outputs) = sim::record(&config, BufWriter::new(file), &mut |p| {
        if !args.quiet && !shown && started.elapsed() > Duration::from_secs(1) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            shown = true;
        }
        bar.set_position((p.fraction * 1000.0) as u64);
        bar.set_message(format!("{} samples", p.samples));
    })?;
    bar.finish_and_clear();
    out.into_inner()
        .map_err(|e| format!("writing {}: {}", args.output.display(), e.error()))?
        .sync_all()
        .map_err(|e| format!("writing {}: {e}", args.output.display()))?;
    std::fs::write(&elf_path, &outputs.elf)
        .map_err(|e| format!("writing {}: {e}", elf_path.display()))?;
    let vmlinux = binary_path(&args.output, ".perfaux-vmlinux")?;
    if let Some(k) = &outputs.kernel_elf {
        std::fs::write(&vmlinux, k).map_err(|e| format!("writing {}: {e}", vmlinux.display()))?;
    }
    if let (Some(mut f), Some(t), Some(p)) = (truth_file, &outputs.truth, &args.truth) {
        use std::io::Write as _;
        f.write_all(t.as_bytes())
            .map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    let took = started.elapsed().as_secs_f64();
    if !args.quiet {
        let file_bytes = std::fs::metadata(&args.output)
            .map(|m| m.len())
            .unwrap_or(0);
        println!(
            "perfaux: wrote {} ({:.1} MiB): {} CPUs, {:.1} ms simulated, {} mode",
            args.output.display(),
            file_bytes as f64 / (1024.0 * 1024.0),
            config.cpus,
            summary.simulated_ns as f64 / 1e6,
            match config.mode {
                Mode::Snapshot => "snapshot",
                Mode::Full => "full-trace",
            }
        );
        println!(
            "  samples   {} ({} with AUX data, {} of trace in samples)",
            summary.samples,
            summary.aux_samples,
            mib(summary.aux_sample_bytes)
        );
        println!(
            "  AUX       {} PERF_RECORD_AUX ({} truncated), {} in AUXTRACE records",
            summary.aux_records,
            summary.aux_truncated,
            mib(summary.auxtrace_bytes)
        );
        println!(
            "  lost      {} records, {} samples",
            summary.lost_records, summary.lost_samples
        );
        println!(
            "  trace     {} of Intel PT packets written by the tracers",
            mib(summary.trace_bytes)
        );
        println!(
            "  took      {took:.2} s ({:.1} MB/s of perf.data, {:.0} samples/s)",
            file_bytes as f64 / took / 1e6,
            summary.samples as f64 / took
        );
        println!("  program   {}", elf_path.display());
        let vm = if outputs.kernel_elf.is_some() {
            format!(" --vmlinux {}", vmlinux.display())
        } else {
            String::new()
        };
        println!(
            "next: perf script --itrace=L16 -F +brstacksym -i {0}{vm}   or   perfaux dump --check {0}",
            args.output.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
