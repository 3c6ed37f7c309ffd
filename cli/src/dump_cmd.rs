// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux dump FILE`: header, events and records of a perf.data file,
//! AUX payloads as packet summaries; `--check` verifies the invariants.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use perfaux_cli::dump::{check, describe};
use perfaux_cli::perfdata::{PerfData, feature};

/// Print (and check) a perf.data file.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  perfaux dump perf.data | less
  perfaux dump --check perf.data      exit status 1 if an invariant does not hold
  perf record -o - -- prog | perfaux dump -     perf's pipe format, from standard input")]
pub struct DumpArgs {
    /// The perf.data file, in perf's file or pipe format; `-` reads standard
    /// input (`perf record -o - | perfaux dump -`).
    file: PathBuf,
    /// Verify the invariants (AUX sizes multiples of 8, records well-formed,
    /// padding zero, a PSB in every large enough snapshot, payloads that
    /// decode); print only the verdict.
    #[arg(long)]
    check: bool,
}

/// Runs `perfaux dump`.
pub fn run(args: &DumpArgs) -> Result<ExitCode, String> {
    let stdin = args.file.as_os_str() == "-";
    let bytes = if stdin {
        let mut b = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut b)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        b
    } else {
        std::fs::read(&args.file)
            .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?
    };
    let name = if stdin {
        "<stdin>".to_owned()
    } else {
        args.file.display().to_string()
    };
    // perf record -z: the compressed records unpacked first.
    let bytes = match perfaux_cli::perfdata::inflate(&bytes).map_err(|e| format!("{name}: {e}"))? {
        Some(unpacked) => unpacked,
        None => bytes,
    };
    let file = PerfData::parse(&bytes).map_err(|e| format!("{name}: {e}"))?;
    // A file cut short: its complete records, then one line saying so.
    let cut_short = |records: u64| {
        file.truncated.as_ref().map(|why| {
            format!(
                "truncated: {why}; the {records} complete records before the cut were read \
                 (`perfaux repair` writes them as a file perf reads whole)"
            )
        })
    };
    if args.check {
        let report = check(&file).map_err(|e| format!("{name}: {e}"))?;
        let mut out = std::io::stdout().lock();
        let printed = (|| -> std::io::Result<()> {
            for v in &report.violations {
                writeln!(out, "{name}: {v}")?;
            }
            let stacks = if report.stack_branches > 0 {
                format!(", {} branch-stack entries", report.stack_branches)
            } else {
                String::new()
            };
            writeln!(
                out,
                "{name}: {} records, {} samples, {} AUX payloads ({} bytes){stacks}: {}",
                report.records,
                report.samples,
                report.payloads,
                report.aux_bytes,
                if report.violations.is_empty() {
                    "OK".to_owned()
                } else {
                    match report.violations.len() {
                        1 => "1 violation".to_owned(),
                        n => format!("{n} violations"),
                    }
                }
            )
        })();
        match printed {
            // A closed pipe (`| head`) is not an error; the verdict stands.
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(format!("writing the check: {e}"));
            }
            _ => {}
        }
        // A cut file ends as `dump` ends it: the complete part checked,
        // then the cut said once, and status 2 (a damaged input), whatever
        // the complete part held.
        if let Some(line) = cut_short(report.records) {
            return Err(format!("{name}: {line}"));
        }
        return Ok(if report.violations.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result = (|| -> std::io::Result<Result<(), String>> {
        writeln!(
            out,
            "{name}: {} bytes, {} events, data {} bytes at {:#x}",
            bytes.len(),
            file.events.len(),
            file.data.len(),
            file.data_offset
        )?;
        let f = &file.features;
        let names: Vec<&str> = file
            .feature_bits
            .iter()
            .map(|&b| feature::name(b))
            .collect();
        writeln!(out, "features: {}", names.join(", "))?;
        if let Some(h) = &f.hostname {
            writeln!(
                out,
                "  hostname {h}, os release {}",
                f.osrelease.as_deref().unwrap_or("?")
            )?;
        }
        if let Some((avail, online)) = f.nr_cpus {
            writeln!(out, "  cpus {online} online of {avail}")?;
        }
        if let Some(cmd) = &f.cmdline {
            writeln!(out, "  cmdline {}", cmd.join(" "))?;
        }
        for g in &f.groups {
            writeln!(
                out,
                "  group {} leader {} members {}",
                g.name, g.leader, g.members
            )?;
        }
        for b in &f.build_ids {
            let id: String = b.id.iter().map(|x| format!("{x:02x}")).collect();
            writeln!(
                out,
                "  build-id {id} {} (pid {}, misc {})",
                b.path, b.pid, b.misc
            )?;
        }
        if let Some(index) = &f.auxtrace_index {
            writeln!(out, "  auxtrace index: {} entries", index.len())?;
        }
        for (i, e) in file.events.iter().enumerate() {
            writeln!(
                out,
                "event {i}: {} type {} config {:#x} sample_type {:#x} period {} aux_sample_size {} ids {:?}",
                e.name,
                e.attr.type_,
                e.attr.config,
                e.attr.sample_type,
                e.attr.sample_period,
                e.attr.aux_sample_size,
                e.ids
            )?;
        }
        let mut first_problem = None;
        let mut complete = 0u64;
        for record in file.records() {
            complete += 1;
            match record {
                Ok(r) => {
                    let (line, problem) = describe(&file, &r);
                    writeln!(out, "{line}")?;
                    if first_problem.is_none() {
                        first_problem = problem;
                    }
                }
                Err(e) => return Ok(Err(format!("{name}: {e}"))),
            }
        }
        Ok(match (first_problem, cut_short(complete)) {
            (Some(p), _) => Err(format!("{name}: {p}")),
            (None, Some(line)) => Err(format!("{name}: {line}")),
            (None, None) => Ok(()),
        })
    })();
    match result {
        Ok(Ok(())) => Ok(ExitCode::SUCCESS),
        Ok(Err(e)) => Err(e),
        // A closed pipe (`| head`) is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(format!("writing the dump: {e}")),
    }
}
