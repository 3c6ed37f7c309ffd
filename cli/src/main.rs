// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux`: host tools around the perfaux engine.
//!
//! `perfaux record` simulates PT-style AUX sampling and writes a perf.data
//! file Linux `perf` reads; `perfaux dump` prints and checks such files;
//! `perfaux repair` makes a cut file one perf reads whole;
//! `perfaux attr` decodes a `struct perf_event_attr` given as hex and tells
//! what Linux 6.18's `perf_event_open(2)` would say about it, and why.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod attr_cmd;
mod dump_cmd;
mod hex;
mod output;
mod record_cmd;
mod record_options;
mod record_program;
mod repair_cmd;

#[derive(Parser)]
#[command(
    name = "perfaux",
    version,
    about = "Linux perf AUX sampling, re-implemented: host tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Record(record_cmd::RecordArgs),
    Dump(dump_cmd::DumpArgs),
    Repair(repair_cmd::RepairArgs),
    Attr(attr_cmd::AttrArgs),
}

/// A command line clap refuses: said in perfaux's one error style, with
/// perf's status for a usage error (129: `usage_with_options`). Help and
/// version requests print as clap prints them and succeed.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    eprint!("perfaux: {text}");
    ExitCode::from(129)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let result = match cli.command {
        Command::Record(args) => record_cmd::run(&args),
        Command::Dump(args) => dump_cmd::run(&args),
        Command::Repair(args) => repair_cmd::run(&args),
        Command::Attr(args) => attr_cmd::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("perfaux: {message}");
            ExitCode::from(2)
        }
    }
}
