// SPDX-License-Identifier: MIT OR Apache-2.0
//! One line per record: its offset, size and type, and the fields of its
//! body that say what it is about.

use std::fmt::Write as _;

use perfaux::abi::{misc, record_type};

use super::packets::summarize;
use super::{
    MISC_MMAP_BUILD_ID, MISC_SWITCH_OUT, MISC_SWITCH_OUT_PREEMPT, c_string, header_misc,
    record_name, sample_id_of, trailer_of, word,
};
use crate::perfdata::{
    AuxRecord, LostRecord, PerfData, Record, callchain_context, feature, parse_sample, user_record,
};

/// One line describing `record`, and what is wrong with it if it cannot
/// be read as its type says.
pub fn describe(file: &PerfData<'_>, record: &Record<'_>) -> (String, Option<String>) {
    let mut problem = None;
    let r = record.bytes;
    let mut line = format!(
        "{:#010x} [{:#06x}] {}",
        record.offset,
        record.header.size,
        record_name(record.header.type_)
    );
    match record.header.type_ {
        record_type::SAMPLE => {
            let id = sample_id_of(file, r).unwrap_or(0);
            match file.event_for(Some(id)) {
                Some(e) => match parse_sample(&e.attr, r) {
                    Ok(s) => {
                        let _ = write!(line, " {}", e.name);
                        if let Some(cpu) = s.cpu {
                            let _ = write!(line, " cpu {cpu}");
                        }
                        if let Some(t) = s.time {
                            let _ = write!(line, " time {t}");
                        }
                        if let Some((pid, tid)) = s.tid {
                            let _ = write!(line, " pid/tid {pid}/{tid}");
                        }
                        if let Some(ip) = s.ip {
                            let mode = if record.header.misc & misc::CPUMODE_MASK == misc::KERNEL {
                                "k"
                            } else {
                                "u"
                            };
                            let _ = write!(line, " ip {ip:#x} ({mode})");
                        }
                        if let Some(p) = s.period {
                            let _ = write!(line, " period {p}");
                        }
                        if s.callchain.is_some() {
                            // As perf script -D lists it: one entry a line,
                            // context markers named.
                            let n = s.callchain().count();
                            let _ = write!(line, " callchain {n}");
                            for (i, entry) in s.callchain().enumerate() {
                                match callchain_context(entry) {
                                    Some(ctx) => {
                                        let _ = write!(line, "\n    {i:2}: [{ctx}]");
                                    }
                                    None => {
                                        let _ = write!(line, "\n    {i:2}: {entry:#x}");
                                    }
                                }
                            }
                        }
                        if let Some(stack) = &s.branch_stack {
                            let _ = write!(line, " branch stack {}", stack.len());
                            if let Some(hw) = stack.hw_index {
                                let _ = write!(line, " (hw_idx {hw})");
                            }
                            for (i, [from, to, flags]) in stack.entries().enumerate() {
                                let _ = write!(line, "\n    {i:2}: {from:#x} -> {to:#x}");
                                if flags != 0 {
                                    let _ = write!(line, " flags {flags:#x}");
                                }
                            }
                        }
                        if let Some(aux) = s.aux {
                            let _ = write!(line, " aux {} bytes", aux.len());
                            if !aux.is_empty() {
                                let _ = write!(line, ": {}", summarize(aux));
                            }
                        }
                    }
                    Err(e) => {
                        let _ = write!(line, " (unparsable: {e})");
                        problem = Some(format!("sample at {:#x}: {e}", record.offset));
                    }
                },
                None => {
                    let _ = write!(line, " (unknown id {id})");
                    problem = Some(format!("sample at {:#x}: unknown id {id}", record.offset));
                }
            }
        }
        record_type::COMM => {
            let _ = write!(
                line,
                " pid/tid {}/{} {:?}",
                word(r, 8) as u32,
                (word(r, 8) >> 32) as u32,
                c_string(r, 16)
            );
        }
        record_type::MMAP | record_type::MMAP2 => {
            // MMAP2 adds the device/inode or build-id union and prot/flags
            // before the name.
            let mmap2 = record.header.type_ == record_type::MMAP2;
            let build_id = if mmap2 && header_misc(r) & MISC_MMAP_BUILD_ID != 0 {
                let n = usize::from(r.get(40).copied().unwrap_or(0)).min(20);
                let id = r.get(44..44 + n).unwrap_or_default();
                format!(
                    " build-id {}",
                    id.iter().map(|b| format!("{b:02x}")).collect::<String>()
                )
            } else {
                String::new()
            };
            let _ = write!(
                line,
                " pid/tid {}/{} [{:#x}, {:#x}) pgoff {:#x} {}{build_id}",
                word(r, 8) as u32,
                (word(r, 8) >> 32) as u32,
                word(r, 16),
                word(r, 16).wrapping_add(word(r, 24)),
                word(r, 32),
                c_string(r, if mmap2 { 72 } else { 40 })
            );
        }
        record_type::SWITCH_CPU_WIDE => {
            let out = header_misc(r) & MISC_SWITCH_OUT != 0;
            let _ = write!(
                line,
                " {} {} next_prev pid/tid {}/{}",
                if out { "OUT" } else { "IN" },
                if out && header_misc(r) & MISC_SWITCH_OUT_PREEMPT != 0 {
                    "preempt"
                } else {
                    ""
                },
                word(r, 8) as u32,
                (word(r, 8) >> 32) as u32,
            );
        }
        user_record::ID_INDEX => {
            let _ = write!(line, " {} ids", word(r, 8));
        }
        record_type::LOST => match LostRecord::parse(r) {
            Ok(l) => {
                let _ = write!(line, " id {} lost {}", l.id, l.lost);
            }
            Err(e) => problem = Some(e.0),
        },
        record_type::AUX => match AuxRecord::parse(r) {
            Ok(a) => {
                let _ = write!(
                    line,
                    " offset {:#x} size {:#x} flags {:#x}{}{}",
                    a.offset,
                    a.size,
                    a.flags,
                    if a.truncated() { " TRUNCATED" } else { "" },
                    if a.overwrite() { " OVERWRITE" } else { "" },
                );
            }
            Err(e) => problem = Some(e.0),
        },
        record_type::ITRACE_START => {
            let _ = write!(
                line,
                " pid/tid {}/{}",
                word(r, 8) as u32,
                (word(r, 8) >> 32) as u32
            );
        }
        user_record::AUXTRACE_INFO => {
            let _ = write!(line, " type {}", word(r, 8) as u32);
        }
        user_record::HEADER_ATTR => {
            // The pipe format's events, in the order the reader took them.
            let nth = file
                .records()
                .map_while(Result::ok)
                .take_while(|o| o.offset < record.offset)
                .filter(|o| o.header.type_ == user_record::HEADER_ATTR)
                .count();
            if let Some(e) = file.events.get(nth) {
                let _ = write!(line, " {} ids {:?}", e.name, e.ids);
            }
        }
        user_record::HEADER_FEATURE => {
            let bit = word(r, 8) as u32;
            let _ = if bit == feature::LAST {
                write!(line, " (the last)")
            } else {
                write!(line, " {}", feature::name(bit))
            };
        }
        user_record::AUXTRACE => {
            let _ = write!(
                line,
                " size {:#x} offset {:#x} cpu {}: {}",
                word(r, 8),
                word(r, 16),
                word(r, 40) as u32,
                summarize(record.payload)
            );
        }
        _ => {}
    }
    if let Some(t) = trailer_of(file, record) {
        if let (Some(cpu), Some(time)) = (t.cpu, t.time) {
            let _ = write!(line, " [cpu {cpu} time {time}]");
        }
    }
    (line, problem)
}
