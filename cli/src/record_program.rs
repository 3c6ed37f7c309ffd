// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux record [OPTIONS] -- PROGRAM [ARGS]`: traces a real program
//! under QEMU user mode and writes perf.data, with `perf record`'s
//! conventions: the program's streams untouched, its exit status returned
//! (128 + the signal that killed it), the summary on standard error, the
//! previous file kept as `perf.data.old`.

use std::io::BufWriter;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Instant;

use perfaux_cli::emu::{self, Mode, Options};

use crate::output::{PLAIN, RECORDING, place, staged};
use crate::record_cmd::{RecordArgs, interrupt_flag, mib};

/// Adds every binary the recording names to the build-id cache, as perf
/// record does at its end; a failure is one line, the recording stands.
fn cache_binaries(binaries: &[(String, Option<Vec<u8>>)]) {
    let Some(dir) = emu::buildid::cache_dir() else {
        return;
    };
    for (path, id) in binaries {
        if let Some(id) = id {
            if let Err(e) = emu::buildid::add(&dir, path, id) {
                eprintln!(
                    "perfaux: warning: {path} not added to the build-id cache {}: {e}",
                    dir.display()
                );
            }
        }
    }
}

/// Runs the recording of `args.program`.
pub fn run(args: &RecordArgs) -> Result<ExitCode, String> {
    if args.output.as_os_str() == "-" {
        return Err(
            "-o - with a program: perf's pipe format is written only by the simulator; give a file"
                .into(),
        );
    }
    let branches = args.branches()?;
    let mode = match (args.aux_sample, branches) {
        (Some(_), _) => Mode::Sample,
        (None, Some(_)) => Mode::Branches,
        (None, None) => Mode::Full,
    };
    let (data_pages, aux_pages) = args.pages()?;
    let options = Options {
        program: args.program.clone(),
        mode,
        period: args.period()?,
        aux_sample_size: args.aux_sample.unwrap_or(0),
        data_pages: data_pages as u32,
        aux_pages: aux_pages.map_or(emu::DEFAULT_AUX_PAGES, |p| p as u32),
        max_threads: args.max_threads,
        cmdline: std::env::args().collect(),
        truth: args.truth.is_some(),
        branches,
    };
    if args.truth.as_deref() == Some(std::path::Path::new("-")) {
        return Err(
            "--truth - with a program: standard output is the program's; give a file".into(),
        );
    }
    if args.truth.as_deref() == Some(args.output.as_path()) {
        return Err(format!(
            "--truth {}: that is the output file",
            args.output.display()
        ));
    }
    let truth_file = args
        .truth
        .as_deref()
        .map(|p| staged(p, PLAIN))
        .transpose()?;
    if mode == Mode::Sample && options.aux_sample_size < 8 {
        return Err(format!(
            "--aux-sample={}: a sample needs at least 8 bytes of trace (the kernel takes whole 8-byte words: perf_prepare_sample rounds down)",
            options.aux_sample_size
        ));
    }
    let file = staged(&args.output, RECORDING)?;
    let interrupt = interrupt_flag();
    let stop = &interrupt.stop;
    let started = Instant::now();
    let failed = |e: &dyn std::fmt::Display| {
        format!(
            "writing {}: {e} (nothing was replaced)",
            args.output.display()
        )
    };
    let (outcome, out) = emu::record(&options, BufWriter::new(file), stop)?;
    let file = out.into_inner().map_err(|e| failed(e.error()))?;
    file.as_file().sync_all().map_err(|e| failed(&e))?;
    let backup = place(file, &args.output, true)?;
    if let (Some(mut f), Some(t), Some(p)) = (truth_file, &outcome.truth, &args.truth) {
        use std::io::Write as _;
        f.write_all(t.as_bytes())
            .map_err(|e| format!("writing {}: {e}", p.display()))?;
        place(f, p, false)?;
    }
    let bytes = std::fs::metadata(&args.output).map_or(0, |m| m.len());
    if !args.no_buildid_cache {
        cache_binaries(&outcome.binaries);
    }
    let took = started.elapsed().as_secs_f64();
    let s = &outcome.summary;
    if !args.quiet {
        let mut w = String::new();
        use std::fmt::Write as _;
        let _ = writeln!(
            w,
            "perfaux: wrote {} ({:.1} MiB): {} traced under QEMU, {} thread{}, {}",
            args.output.display(),
            bytes as f64 / (1024.0 * 1024.0),
            args.program[0].to_string_lossy(),
            s.threads,
            if s.threads == 1 { "" } else { "s" },
            match (mode, branches) {
                (Mode::Sample, None) => "AUX samples",
                (Mode::Sample, Some(_)) => "AUX samples with branch stacks",
                (Mode::Branches, _) => "samples with branch stacks",
                (Mode::Full, _) => "full trace",
            }
        );
        let _ = writeln!(
            w,
            "  instructions {} traced ({:.0} M/s)",
            s.instructions,
            s.instructions as f64 / took / 1e6
        );
        if mode == Mode::Sample {
            let _ = writeln!(
                w,
                "  samples   {} ({} with AUX data, {} of trace in samples)",
                s.samples,
                s.aux_samples,
                mib(s.aux_sample_bytes)
            );
        } else if mode == Mode::Branches {
            let _ = writeln!(
                w,
                "  samples   {} ({} branches in their stacks)",
                s.samples, s.stack_branches
            );
        } else {
            let _ = writeln!(
                w,
                "  AUX       {} PERF_RECORD_AUX ({} truncated), {} in AUXTRACE records",
                s.aux_records,
                s.aux_truncated,
                mib(s.auxtrace_bytes)
            );
        }
        let _ = writeln!(
            w,
            "  lost      {} records, {} samples, {} trace events",
            s.lost_records, s.lost_samples, s.lost_trace_events
        );
        let _ = writeln!(
            w,
            "  took      {took:.2} s; peak memory: recorder {:.1} MiB, emulator {:.1} MiB",
            outcome.recorder_rss_kib as f64 / 1024.0,
            outcome.emulator_rss_kib as f64 / 1024.0
        );
        if let Some(old) = backup {
            let _ = writeln!(
                w,
                "  previous  {} (was {})",
                old.display(),
                args.output.display()
            );
        }
        let next = match mode {
            Mode::Sample => "perf script --itrace=L16 -F +brstacksym",
            Mode::Full => "perf script --itrace=i100000il16 -F +brstacksym",
            Mode::Branches => "perf script -F ip,sym,brstacksym",
        };
        let _ = writeln!(w, "next: {next} -i {}", args.output.display());
        eprint!("{w}");
    }
    for t in &outcome.threads {
        if let Some(path) = &t.exec {
            eprintln!(
                "perfaux: {path} ran untraced (pid {}): execve replaced the traced program, and QEMU user mode runs the new one natively",
                t.pid
            );
        }
    }
    if s.untraced > 0 {
        eprintln!(
            "perfaux: {} threads ran untraced: more than --max-threads {}",
            s.untraced, args.max_threads
        );
    }
    if outcome.interrupted || stop.load(Ordering::Relaxed) {
        eprintln!(
            "perfaux: interrupted: {} is complete and holds the trace up to the stop",
            args.output.display()
        );
    }
    Ok(ExitCode::from(outcome.ended.code().clamp(0, 255) as u8))
}
