// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux repair CUT -o FIXED`: a perf.data file cut short, rewritten
//! as its complete records under a header that says where they end.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use perfaux_cli::perfdata::repair;

use crate::output::{RECORDING, place, staged};

/// Write the complete records of a cut perf.data file as a file perf reads
/// whole.
///
/// perf 6.1 trusts the header's data size: on a cut file with AUX data
/// (Intel PT, perfaux, whoever wrote it) its trace decoder walks on past
/// the cut, and `perf report` / `perf script` spin at 100% CPU or die of
/// SIGBUS. The repaired file keeps the header, the events and every
/// complete record (the data size set to theirs) and drops the feature
/// sections the cut took, bar the AUXTRACE index, which is rebuilt. A file
/// in perf's pipe format keeps its complete records.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  perfaux repair cut.data -o fixed.data && perf script -i fixed.data --itrace=i0ns
  perfaux repair perf.data -o perf.data      in place (written whole, then renamed)
A file that is not cut is copied whole to the output (left alone when it is the output).")]
pub struct RepairArgs {
    /// The cut perf.data file.
    file: PathBuf,
    /// Where to write the repaired file (may be the input itself).
    #[arg(short, long)]
    output: PathBuf,
}

/// Runs `perfaux repair`.
pub fn run(args: &RepairArgs) -> Result<ExitCode, String> {
    let name = args.file.display();
    let bytes = std::fs::read(&args.file).map_err(|e| format!("cannot read {name}: {e}"))?;
    let out = args.output.display();
    let Some(fixed) = repair(&bytes).map_err(|e| format!("{name}: {e}"))? else {
        // Not cut: the output is the file itself, so that `repair x -o y
        // && perf script -i y` holds whether x was cut or not.
        let same = std::fs::canonicalize(&args.file)
            .ok()
            .zip(std::fs::canonicalize(&args.output).ok())
            .is_some_and(|(a, b)| a == b);
        if same {
            println!("{name}: not cut: nothing to repair, left as it is");
        } else {
            let mut f = staged(&args.output, RECORDING)?;
            f.write_all(&bytes)
                .and_then(|()| f.as_file().sync_all())
                .map_err(|e| format!("writing {out}: {e} (nothing was replaced)"))?;
            place(f, &args.output, false)?;
            println!("{name}: not cut: nothing to repair, copied whole to {out}");
        }
        return Ok(ExitCode::SUCCESS);
    };
    let mut f = staged(&args.output, RECORDING)?;
    f.write_all(&fixed.bytes)
        .and_then(|()| f.as_file().sync_all())
        .map_err(|e| format!("writing {out}: {e} (nothing was replaced)"))?;
    place(f, &args.output, false)?;
    let dropped = bytes.len() as u64 - fixed.cut_at.min(bytes.len() as u64);
    let lost = if fixed.features_lost.is_empty() {
        String::new()
    } else {
        format!("; lost with the cut: {}", fixed.features_lost.join(", "))
    };
    let index = fixed
        .index
        .map(|n| format!("; AUXTRACE index rebuilt ({n} entries)"))
        .unwrap_or_default();
    println!(
        "{out}: the {} complete records of {name} ({} bytes; the {dropped} bytes from {:#x} on dropped){lost}{index}",
        fixed.records,
        fixed.bytes.len(),
        fixed.cut_at,
    );
    Ok(ExitCode::SUCCESS)
}
