// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux`: host tools around the perfaux engine.
//!
//! `perfaux attr` decodes a `struct perf_event_attr` given as hex and tells
//! what Linux 6.18's `perf_event_open(2)` would say about it, and why.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod attr_cmd;
mod hex;

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
    Attr(attr_cmd::AttrArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
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
