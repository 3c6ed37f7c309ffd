// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux dump --check`: the invariants a faithful producer keeps, over
//! a whole file.

use std::collections::{BTreeMap, BTreeSet};

use perfaux::abi::record_type;
use perfaux::lbr::LBR_DEPTH;

use super::ordering::RoundOrder;
use super::packets::summarize;
use super::{is_kernel_record, record_name, sample_id_of, word};
use crate::perfdata::{
    AuxRecord, FormatError, IndexEntry, PerfData, intel_pt_priv, parse_sample, parse_trailer,
    trailer_size, user_record,
};

/// What `perfaux dump --check` found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Every invariant that does not hold, with where.
    pub violations: Vec<String>,
    /// Records checked.
    pub records: u64,
    /// Samples checked.
    pub samples: u64,
    /// AUX payloads decoded (samples and AUXTRACE).
    pub payloads: u64,
    /// Bytes in those payloads.
    pub aux_bytes: u64,
    /// Branch-stack entries checked.
    pub stack_branches: u64,
}

/// Executable mappings of each process, from its MMAP and MMAP2 records:
/// pid -> (start, end).
#[derive(Default)]
struct CodeMaps(BTreeMap<u32, Vec<(u64, u64)>>);

impl CodeMaps {
    /// Notes an MMAP (exec unless `PERF_RECORD_MISC_MMAP_DATA`) or an
    /// MMAP2 (exec if `prot` has `PROT_EXEC`), or a FORK of a new process
    /// (which starts with its parent's maps, as perf's `machine__process_fork_event`
    /// clones them).
    fn note(&mut self, t: u32, misc: u16, r: &[u8]) {
        if t == record_type::FORK && r.len() >= 16 {
            let (pid, ppid) = (word(r, 8) as u32, (word(r, 8) >> 32) as u32);
            if pid != ppid {
                let parent = self.0.get(&ppid).cloned().unwrap_or_default();
                self.0.insert(pid, parent);
            }
            return;
        }
        const MMAP_DATA: u16 = 1 << 13;
        const PROT_EXEC: u64 = 4;
        let exec = match t {
            record_type::MMAP => misc & MMAP_DATA == 0,
            record_type::MMAP2 => r.len() >= 72 && word(r, 64) as u32 as u64 & PROT_EXEC != 0,
            _ => false,
        };
        if exec && r.len() >= 40 {
            let (pid, start, len) = (word(r, 8) as u32, word(r, 16), word(r, 24));
            self.0
                .entry(pid)
                .or_default()
                .push((start, start.saturating_add(len)));
        }
    }

    /// Whether `ip` is in code process `pid` mapped.
    fn has(&self, pid: u32, ip: u64) -> bool {
        self.0
            .get(&pid)
            .is_some_and(|maps| maps.iter().any(|&(a, b)| (a..b).contains(&ip)))
    }
}

/// A sample's branch stack: at most [`LBR_DEPTH`] entries (the deepest
/// LBR: Intel's 32, Arch LBR's `lbr_nr` tops out at 32 as well), each from and
/// to in code its process mapped (user code, for a user-only event).
fn check_branch_stack(
    stack: &crate::perfdata::ParsedBranchStack<'_>,
    pid: Option<u32>,
    maps: &CodeMaps,
    bad: &mut impl FnMut(String),
) {
    if stack.len() > LBR_DEPTH {
        bad(format!(
            "a branch stack of {} entries: an LBR holds at most {LBR_DEPTH}",
            stack.len()
        ));
    }
    let Some(pid) = pid else {
        return;
    };
    for (i, [from, to, _]) in stack.entries().enumerate() {
        for (end, ip) in [("from", from), ("to", to)] {
            if !maps.has(pid, ip) {
                bad(format!(
                    "branch stack entry {i}: {end} {ip:#x} is in no code process {pid} mapped"
                ));
                return;
            }
        }
    }
}

/// Checks the invariants of a faithful producer over a whole file: every
/// record well-formed and 8-byte sized, samples parse by their event's
/// sample_type, AUX sizes multiples of 8 and within `aux_sample_size`,
/// string padding zero, trailers naming known ids, no record perf finds out
/// of order ([`RoundOrder`]), branch stacks of at most 32 entries within
/// the code their process mapped, a PSB in every AUX payload of at least a PSB period + 256 bytes,
/// and every payload decoding from its first PSB to its end with TSCs that
/// never go back.
pub fn check(file: &PerfData<'_>) -> Result<CheckReport, FormatError> {
    let mut rep = CheckReport::default();
    let mut order = RoundOrder::default();
    let mut maps = CodeMaps::default();
    let mut psb_period: Option<u64> = None;
    let mut seen_info = false;
    let sample_id_all = file.events.first().is_some_and(|e| e.attr.sample_id_all());
    let mut traces: BTreeMap<u32, TraceRun> = BTreeMap::new();
    let mut trace_violations = Vec::new();
    // (file offset, header.size) of every AUXTRACE record, for the index.
    let mut auxtrace_records = Vec::new();
    for record in file.records() {
        let record = record?;
        rep.records += 1;
        let r = record.bytes;
        let at = record.offset;
        let mut bad = |msg: String| rep.violations.push(format!("{at:#x}: {msg}"));
        // perf writes its pipe-format feature records unpadded.
        if r.len() % 8 != 0 && record.header.type_ != user_record::HEADER_FEATURE {
            bad(format!(
                "{} record of {} bytes, not a multiple of 8",
                record_name(record.header.type_),
                r.len()
            ));
        }
        let mut time: Option<u64> = None;
        // Whether or not records carry a trailer.
        maps.note(record.header.type_, record.header.misc, r);
        match record.header.type_ {
            user_record::FINISHED_ROUND => order.finished_round(),
            user_record::ID_INDEX => {
                let n = word(r, 8) as usize;
                if n.checked_mul(32).and_then(|b| b.checked_add(16)) != Some(r.len()) {
                    bad(format!("ID_INDEX of {n} entries in {} bytes", r.len()));
                } else {
                    for i in 0..n {
                        let id = word(r, 16 + 32 * i);
                        if file.event_of(id).is_none() {
                            bad(format!("ID_INDEX names unknown id {id}"));
                        }
                    }
                }
                if seen_info {
                    bad("ID_INDEX after AUXTRACE_INFO (perf queues AUX data by it)".into());
                }
            }
            user_record::AUXTRACE_INFO => {
                seen_info = true;
                if word(r, 8) as u32 == crate::perfdata::AUXTRACE_INTEL_PT {
                    // perf tests `config & tsc_bit`: masks, not bit numbers.
                    for (what, at) in [
                        ("TSC_BIT", intel_pt_priv::TSC_BIT),
                        ("NORETCOMP_BIT", intel_pt_priv::NORETCOMP_BIT),
                    ] {
                        let mask = word(r, 16 + 8 * at);
                        if mask != 0 && (!mask.is_power_of_two() || mask < 64) {
                            bad(format!(
                                "AUXTRACE_INFO {what} {mask:#x} is not a config mask"
                            ));
                        }
                    }
                }
                if word(r, 8) as u32 == crate::perfdata::AUXTRACE_INTEL_PT {
                    let pmu = word(r, 16 + 8 * intel_pt_priv::PMU_TYPE) as u32;
                    psb_period = file
                        .events
                        .iter()
                        .find(|e| e.attr.type_ == pmu)
                        .map(|e| 1u64 << (((e.attr.config >> 24) & 0xf) + 11));
                }
            }
            record_type::SAMPLE => {
                rep.samples += 1;
                let id = sample_id_of(file, r);
                let Some(e) = file.event_for(id) else {
                    bad(format!("a sample of unknown id {}", id.unwrap_or(0)));
                    continue;
                };
                match parse_sample(&e.attr, r) {
                    Err(err) => bad(format!("a {} sample that does not parse: {err}", e.name)),
                    Ok(s) => {
                        time = s.time;
                        if let Some(stack) = &s.branch_stack {
                            check_branch_stack(stack, s.tid.map(|t| t.0), &maps, &mut bad);
                            rep.stack_branches += stack.len() as u64;
                        }
                        if let Some(aux) = s.aux {
                            if aux.len() % 8 != 0 {
                                bad(format!("AUX size {} is not a multiple of 8", aux.len()));
                            }
                            let max = (u64::from(e.attr.aux_sample_size) + 7) & !7;
                            if aux.len() as u64 > max {
                                bad(format!(
                                    "AUX size {} exceeds aux_sample_size {}",
                                    aux.len(),
                                    e.attr.aux_sample_size
                                ));
                            }
                            if !aux.is_empty() {
                                if !seen_info {
                                    bad("AUX data before any AUXTRACE_INFO: perf cannot decode it"
                                        .into());
                                }
                                check_payload(aux, psb_period, &mut bad);
                                rep.payloads += 1;
                                rep.aux_bytes += aux.len() as u64;
                            }
                        }
                    }
                }
            }
            user_record::AUXTRACE => {
                if record.payload.len() % 8 != 0 {
                    bad(format!(
                        "AUXTRACE data of {} bytes, not a multiple of 8",
                        record.payload.len()
                    ));
                }
                if !seen_info {
                    bad("AUXTRACE before any AUXTRACE_INFO".into());
                }
                auxtrace_records.extend(record.index_entry());
                // A full trace is one stream per CPU, cut into records
                // anywhere (mid-packet too): decode what follows on.
                let (offset, cpu) = (word(r, 16), word(r, 40) as u32);
                let run = traces.entry(cpu).or_default();
                let end = run.start + run.bytes.len() as u64;
                if run.bytes.is_empty() || offset < run.start || offset > end {
                    if !run.bytes.is_empty() {
                        let (start, bytes) = (run.start, std::mem::take(&mut run.bytes));
                        check_trace(cpu, start, &bytes, &mut trace_violations);
                    }
                    run.start = offset;
                } else {
                    // Padding of the record before (perf record pads each
                    // to 8 bytes) is overwritten by what follows it.
                    run.bytes.truncate((offset - run.start) as usize);
                }
                run.bytes.extend_from_slice(record.payload);
                rep.payloads += 1;
                rep.aux_bytes += record.payload.len() as u64;
            }
            t if is_kernel_record(t) && sample_id_all => {
                match parse_trailer(&file.events[0].attr, r) {
                    Err(err) => bad(format!("{}: {err}", record_name(t))),
                    Ok(tr) => {
                        if let Some(id) = tr.id.filter(|&id| file.event_for(Some(id)).is_none()) {
                            bad(format!("{} names unknown id {id}", record_name(t)));
                        }
                        time = tr.time;
                        let trailer = trailer_size(&file.events[0].attr);
                        let name_at = match t {
                            record_type::COMM => Some(16),
                            record_type::MMAP => Some(40),
                            record_type::MMAP2 => Some(72),
                            _ => None,
                        };
                        if let Some(name_at) = name_at {
                            let body = &r[..r.len().saturating_sub(trailer)];
                            match body
                                .get(name_at..)
                                .and_then(|s| s.iter().position(|&b| b == 0))
                            {
                                None => bad(format!("{} name without its NUL", record_name(t))),
                                Some(nul) => {
                                    if body[name_at + nul..].iter().any(|&b| b != 0) {
                                        bad(format!("{} name padding is not zero", record_name(t)));
                                    }
                                }
                            }
                        }
                        if let Some(a) = AuxRecord::parse(r).ok().filter(|a| a.flags & !0xff != 0) {
                            bad(format!("AUX flags {:#x} has unknown bits", a.flags));
                        }
                    }
                }
            }
            _ => {}
        }
        if let Some(t) = time {
            if let Err(flushed) = order.queue(t) {
                bad(format!(
                    "time {t} comes after perf delivered {flushed}: an out of order event"
                ));
            }
        }
    }
    for (cpu, run) in traces {
        check_trace(cpu, run.start, &run.bytes, &mut trace_violations);
    }
    rep.violations.extend(trace_violations);
    if let Some(index) = &file.features.auxtrace_index {
        check_index(index, &auxtrace_records, &mut rep.violations);
    }
    Ok(rep)
}

/// A non-empty AUXTRACE index lists exactly the file's AUXTRACE records:
/// perf 6.1 then queues AUX data from the index alone
/// (`auxtrace_queues__process_index`), so a record missing from it is
/// trace perf never decodes, and an entry that is not a record is garbage
/// it decodes. An empty index makes perf walk the data section instead.
fn check_index(index: &[IndexEntry], records: &[IndexEntry], violations: &mut Vec<String>) {
    if index.is_empty() || index == records {
        return;
    }
    let key = |e: &IndexEntry| (e.file_offset, e.size);
    let indexed: BTreeSet<_> = index.iter().map(key).collect();
    let written: BTreeSet<_> = records.iter().map(key).collect();
    let missing = written.difference(&indexed).count();
    let stray: Vec<_> = indexed.difference(&written).collect();
    if missing > 0 {
        violations.push(format!(
            "the AUXTRACE index leaves out {missing} of the {} AUXTRACE records (perf never decodes their data)",
            records.len()
        ));
    }
    if let Some((offset, size)) = stray.first() {
        violations.push(format!(
            "the AUXTRACE index has {} entries that are no AUXTRACE record (the first at {offset:#x}, size {size:#x})",
            stray.len(),
        ));
    }
    if missing == 0 && stray.is_empty() {
        violations
            .push("the AUXTRACE index lists the AUXTRACE records out of order or twice".into());
    }
}

/// The AUXTRACE data of one CPU that follows on from `start`.
#[derive(Default)]
struct TraceRun {
    start: u64,
    bytes: Vec<u8>,
}

/// A full trace's run of AUX data decodes from its first PSB to its end
/// with TSCs that never go back.
fn check_trace(cpu: u32, start: u64, bytes: &[u8], violations: &mut Vec<String>) {
    check_payload(bytes, None, &mut |msg| {
        violations.push(format!(
            "CPU {cpu} AUX data at {start:#x}..{:#x}: {msg}",
            start + bytes.len() as u64
        ));
    });
}

/// A PSB where one must be, decoding to the end, TSCs that never go back.
fn check_payload(aux: &[u8], psb_period: Option<u64>, bad: &mut impl FnMut(String)) {
    let s = summarize(aux);
    if let Some(period) = psb_period {
        if aux.len() as u64 >= period + 256 && s.psb_at.is_none() {
            bad(format!(
                "an AUX payload of {} bytes (PSB period {period}) holds no PSB",
                aux.len()
            ));
        }
    }
    if let Some(e) = &s.error {
        bad(format!(
            "an AUX payload of {} bytes does not decode: {e}",
            aux.len()
        ));
    }
    if s.tscs.windows(2).any(|w| w[1] < w[0]) {
        bad("TSC packets go back in time within an AUX payload".into());
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use perfaux::abi::{PerfEventAttr, attr_flags, sample_type as st};

    use super::*;
    use crate::perfdata::{Features, Writer, WriterEvent};

    /// A file of one event (IDENTIFIER | AUX, `aux_sample_size` 64) and one
    /// sample whose AUX block holds `aux` bytes, sized to match.
    fn file_with_aux(aux: usize) -> Vec<u8> {
        let mut attr = PerfEventAttr::new(136);
        attr.sample_type = st::IDENTIFIER | st::AUX;
        attr.aux_sample_size = 64;
        attr.flags = attr_flags::SAMPLE_ID_ALL;
        let events = [WriterEvent {
            attr,
            name: "s".into(),
            ids: vec![1],
        }];
        let mut w = Writer::create(Cursor::new(Vec::new()), &events).unwrap();
        // AUXTRACE_INFO first (Intel PT; PMU type 99 names no event here).
        let mut info = Vec::new();
        info.extend_from_slice(&user_record::AUXTRACE_INFO.to_le_bytes());
        info.extend_from_slice(&0u16.to_le_bytes());
        info.extend_from_slice(&96u16.to_le_bytes());
        info.extend_from_slice(&crate::perfdata::AUXTRACE_INTEL_PT.to_le_bytes());
        info.extend_from_slice(&0u32.to_le_bytes());
        info.extend_from_slice(&99u64.to_le_bytes());
        info.resize(96, 0);
        w.record(&info).unwrap();
        let size = 8 + 8 + 8 + aux;
        let mut r = Vec::new();
        r.extend_from_slice(&record_type::SAMPLE.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&(size as u16).to_le_bytes());
        r.extend_from_slice(&1u64.to_le_bytes());
        r.extend_from_slice(&(aux as u64).to_le_bytes());
        r.resize(size, 0);
        w.record(&r).unwrap();
        w.finish(&Features::default()).unwrap().into_inner()
    }

    #[test]
    fn check_wants_aux_sizes_in_multiples_of_8_and_within_aux_sample_size() {
        let clean = check(&PerfData::parse(&file_with_aux(16)).unwrap()).unwrap();
        assert!(clean.violations.is_empty(), "{:?}", clean.violations);
        let odd = check(&PerfData::parse(&file_with_aux(12)).unwrap()).unwrap();
        assert!(
            odd.violations
                .iter()
                .any(|v| v.ends_with("AUX size 12 is not a multiple of 8")),
            "{:?}",
            odd.violations
        );
        assert!(
            odd.violations
                .iter()
                .any(|v| v.ends_with("SAMPLE record of 36 bytes, not a multiple of 8")),
            "{:?}",
            odd.violations
        );
        let big = check(&PerfData::parse(&file_with_aux(72)).unwrap()).unwrap();
        assert!(
            big.violations
                .iter()
                .any(|v| v.ends_with("AUX size 72 exceeds aux_sample_size 64")),
            "{:?}",
            big.violations
        );
    }

    /// What `check` finds in the file `bytes`.
    fn violations_of(bytes: &[u8]) -> Vec<String> {
        check(&PerfData::parse(bytes).unwrap()).unwrap().violations
    }

    /// A file of one event (IDENTIFIER | TIME) whose samples carry
    /// `times`, a 0 standing for a `PERF_RECORD_FINISHED_ROUND`.
    fn file_with_times(times: &[u64]) -> Vec<u8> {
        let mut attr = PerfEventAttr::new(136);
        attr.sample_type = st::IDENTIFIER | st::TIME;
        attr.flags = attr_flags::SAMPLE_ID_ALL;
        let events = [WriterEvent {
            attr,
            name: "s".into(),
            ids: vec![1],
        }];
        let mut w = Writer::create(Cursor::new(Vec::new()), &events).unwrap();
        for &time in times {
            let mut r = Vec::new();
            if time == 0 {
                r.extend_from_slice(&user_record::FINISHED_ROUND.to_le_bytes());
                r.extend_from_slice(&[0, 0, 8, 0]);
            } else {
                r.extend_from_slice(&record_type::SAMPLE.to_le_bytes());
                r.extend_from_slice(&[0, 0, 24, 0]);
                r.extend_from_slice(&1u64.to_le_bytes());
                r.extend_from_slice(&time.to_le_bytes());
            }
            w.record(&r).unwrap();
        }
        w.finish(&Features::default()).unwrap().into_inner()
    }

    /// A file of one event (TID | IDENTIFIER | BRANCH_STACK): process 7
    /// maps code at 0x1000..0x2000, then a sample carries `stack`.
    fn file_with_stack(stack: &[(u64, u64)], sample_id_all: bool) -> Vec<u8> {
        let mut attr = PerfEventAttr::new(136);
        attr.sample_type = st::TID | st::IDENTIFIER | st::BRANCH_STACK;
        attr.branch_sample_type = perfaux::abi::branch_sample_type::ANY;
        if sample_id_all {
            attr.flags = attr_flags::SAMPLE_ID_ALL;
        }
        let events = [WriterEvent {
            attr,
            name: "s".into(),
            ids: vec![1],
        }];
        let mut w = Writer::create(Cursor::new(Vec::new()), &events).unwrap();
        let words = |r: &mut Vec<u8>, ws: &[u64]| {
            for x in ws {
                r.extend_from_slice(&x.to_le_bytes());
            }
        };
        // MMAP2: pid/tid, addr, len, pgoff, dev, ino, ino_gen, prot|flags,
        // "/a" padded, then the trailer (pid/tid, identifier) if any.
        let mut mmap2 = Vec::new();
        mmap2.extend_from_slice(&record_type::MMAP2.to_le_bytes());
        mmap2.extend_from_slice(&[0, 0, if sample_id_all { 96 } else { 80 }, 0]);
        words(
            &mut mmap2,
            &[7 | 7 << 32, 0x1000, 0x1000, 0, 0, 0, 0, 5 | 2 << 32],
        );
        mmap2.extend_from_slice(b"/a\0\0\0\0\0\0");
        if sample_id_all {
            words(&mut mmap2, &[7 | 7 << 32, 1]);
        }
        w.record(&mmap2).unwrap();
        let mut sample = Vec::new();
        sample.extend_from_slice(&record_type::SAMPLE.to_le_bytes());
        let size = 32 + 24 * stack.len() as u16;
        sample.extend_from_slice(&[0, 0]);
        sample.extend_from_slice(&size.to_le_bytes());
        words(&mut sample, &[1, 7 | 7 << 32, stack.len() as u64]);
        for &(from, to) in stack {
            words(&mut sample, &[from, to, 0]);
        }
        w.record(&sample).unwrap();
        w.finish(&Features::default()).unwrap().into_inner()
    }

    #[test]
    fn check_holds_branch_stacks_to_mapped_code_and_32_entries() {
        let violations = |stack: &[(u64, u64)]| violations_of(&file_with_stack(stack, true));
        // Maps count whether or not records carry a trailer.
        assert_eq!(
            violations_of(&file_with_stack(&[(0x1010, 0x1800)], false)),
            Vec::<String>::new()
        );
        assert_eq!(
            violations(&[(0x1010, 0x1800), (0x1fff, 0x1000)]),
            Vec::<String>::new()
        );
        let outside = violations(&[(0x1010, 0x1800), (0x1fff, 0x2000)]);
        assert_eq!(outside.len(), 1, "{outside:?}");
        assert!(
            outside[0].ends_with("entry 1: to 0x2000 is in no code process 7 mapped"),
            "{outside:?}"
        );
        let deep = violations(&[(0x1010, 0x1800); 33]);
        assert_eq!(deep.len(), 1, "{deep:?}");
        assert!(
            deep[0].ends_with("a branch stack of 33 entries: an LBR holds at most 32"),
            "{deep:?}"
        );
    }

    #[test]
    fn check_finds_the_records_perf_cannot_sort() {
        let violations = |times: &[u64]| violations_of(&file_with_times(times));
        // An interrupt's records ahead of the one it interrupted: sorted
        // within the rounds perf keeps open.
        assert!(violations(&[10, 30, 20, 0, 25, 0, 40]).is_empty());
        // Two rounds late: 30 was delivered before 25 came.
        let late = violations(&[10, 30, 0, 40, 0, 25]);
        assert_eq!(late.len(), 1, "{late:?}");
        assert!(
            late[0].ends_with("time 25 comes after perf delivered 30: an out of order event"),
            "{late:?}"
        );
    }

    #[test]
    fn an_auxtrace_index_must_list_exactly_the_auxtrace_records() {
        let e = |file_offset, size| IndexEntry { file_offset, size };
        let records = [e(0x100, 0x30), e(0x1000, 0x30), e(0x3000, 0x30)];
        let check = |index: &[IndexEntry]| {
            let mut v = Vec::new();
            check_index(index, &records, &mut v);
            v
        };
        assert!(check(&records).is_empty());
        // Empty: perf walks the data instead.
        assert!(check(&[]).is_empty());
        let missing = check(&records[..2]);
        assert_eq!(missing.len(), 1);
        assert!(missing[0].contains("leaves out 1 of the 3"), "{missing:?}");
        let stray = check(&[records[0], records[1], records[2], e(0x2000, 0x30)]);
        assert!(
            stray[0].contains("1 entries that are no AUXTRACE record (the first at 0x2000"),
            "{stray:?}"
        );
        let wrong_size = check(&[records[0], records[1], e(0x3000, 0x28)]);
        assert_eq!(wrong_size.len(), 2, "{wrong_size:?}");
        let order = check(&[records[1], records[0], records[2]]);
        assert!(order[0].contains("out of order"), "{order:?}");
    }
}
