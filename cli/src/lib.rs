// SPDX-License-Identifier: MIT OR Apache-2.0
//! The library behind the `perfaux` host tools: the perf.data format
//! ([`perfdata`]: writer and checked reader), the simulated machine that
//! `perfaux record` runs ([`sim`]), and the checks and packet summaries of
//! `perfaux dump` ([`dump`]).

pub mod branch_filter;
pub mod dump;
pub mod emu;
pub mod perfdata;
pub mod rng;
pub mod sim;
