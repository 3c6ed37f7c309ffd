// SPDX-License-Identifier: MIT OR Apache-2.0
//! What `perfaux dump` prints and checks: a line per record, the Intel PT
//! packets of every AUX payload summarized by an independent decoder
//! (`iptr-decoder`), and the invariants a faithful producer keeps.

mod check;
mod describe;
pub mod ordering;
mod packets;

pub use check::{CheckReport, check};
pub use describe::describe;
pub use packets::{PSB, PacketSummary, summarize};

use perfaux::abi::record_type;

use crate::perfdata::{PerfData, Record, parse_trailer, sample_id, user_record, word_at};

/// The name of a record type.
pub fn record_name(type_: u32) -> String {
    let name = match type_ {
        record_type::MMAP => "MMAP",
        record_type::LOST => "LOST",
        record_type::COMM => "COMM",
        record_type::EXIT => "EXIT",
        record_type::FORK => "FORK",
        record_type::SAMPLE => "SAMPLE",
        record_type::MMAP2 => "MMAP2",
        record_type::AUX => "AUX",
        record_type::ITRACE_START => "ITRACE_START",
        record_type::LOST_SAMPLES => "LOST_SAMPLES",
        record_type::SWITCH => "SWITCH",
        record_type::SWITCH_CPU_WIDE => "SWITCH_CPU_WIDE",
        user_record::FINISHED_ROUND => "FINISHED_ROUND",
        user_record::ID_INDEX => "ID_INDEX",
        user_record::AUXTRACE_INFO => "AUXTRACE_INFO",
        user_record::AUXTRACE => "AUXTRACE",
        user_record::HEADER_ATTR => "HEADER_ATTR",
        user_record::HEADER_FEATURE => "HEADER_FEATURE",
        user_record::EVENT_UPDATE => "EVENT_UPDATE",
        user_record::THREAD_MAP => "THREAD_MAP",
        user_record::CPU_MAP => "CPU_MAP",
        user_record::FINISHED_INIT => "FINISHED_INIT",
        other => return format!("type {other}"),
    };
    name.to_owned()
}

/// `PERF_RECORD_MISC_SWITCH_OUT`.
const MISC_SWITCH_OUT: u16 = 1 << 13;
/// `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`.
const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID` (on MMAP2).
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

fn header_misc(r: &[u8]) -> u16 {
    u16::from_le_bytes([
        r.get(4).copied().unwrap_or(0),
        r.get(5).copied().unwrap_or(0),
    ])
}

/// The word at `at`, or 0 past the record's end (a line still prints;
/// `check` reports the short record).
fn word(r: &[u8], at: usize) -> u64 {
    word_at(r, at).unwrap_or(0)
}

/// The C string at `at` in `r`, up to its NUL.
fn c_string(r: &[u8], at: usize) -> String {
    let s = r.get(at..).unwrap_or_default();
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    String::from_utf8_lossy(&s[..end]).into_owned()
}

/// The id a sample names ([`sample_id`]: where perf finds it).
fn sample_id_of(file: &PerfData<'_>, r: &[u8]) -> Option<u64> {
    sample_id(file.events.first()?.attr.sample_type, r)
}

/// Whether a record type is the kernel's (and so carries a trailer).
fn is_kernel_record(type_: u32) -> bool {
    type_ != record_type::SAMPLE && type_ < 64
}

fn trailer_of(
    file: &PerfData<'_>,
    record: &Record<'_>,
) -> Option<crate::perfdata::SampleIdTrailer> {
    let e = file.events.first()?;
    if !is_kernel_record(record.header.type_) || !e.attr.sample_id_all() {
        return None;
    }
    parse_trailer(&e.attr, record.bytes).ok()
}
