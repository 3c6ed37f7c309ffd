// SPDX-License-Identifier: MIT OR Apache-2.0
//! Parses `PERF_RECORD_SAMPLE` bodies (every field, in the kernel's order,
//! `perf_output_sample`'s order: the AUX block last) and the `sample_id` trailer of other
//! records, with every length checked against the record.

use perfaux::abi::{
    PerfEventAttr, branch_sample_type as bst, read_format as rf, sample_type as st,
};
use perfaux::ring::SampleId;

use super::reader::FormatError;

/// The fields of a sample that perfaux's tools look at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedSample<'a> {
    /// IP.
    pub ip: Option<u64>,
    /// TID: (pid, tid).
    pub tid: Option<(u32, u32)>,
    /// TIME.
    pub time: Option<u64>,
    /// IDENTIFIER or ID.
    pub id: Option<u64>,
    /// CPU.
    pub cpu: Option<u32>,
    /// PERIOD.
    pub period: Option<u64>,
    /// The AUX block's data (AUX).
    pub aux: Option<&'a [u8]>,
    /// Offset of the AUX size word in the record (AUX).
    pub aux_offset: usize,
    /// BRANCH_STACK.
    pub branch_stack: Option<ParsedBranchStack<'a>>,
    /// CALLCHAIN: its words (`nr` little-endian u64s, context markers
    /// such as `PERF_CONTEXT_USER` among the addresses).
    pub callchain: Option<&'a [u8]>,
}

impl ParsedSample<'_> {
    /// The callchain's entries, in order (innermost first).
    pub fn callchain(&self) -> impl Iterator<Item = u64> + '_ {
        self.callchain
            .unwrap_or_default()
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))
    }
}

/// The name of a callchain context marker (`enum perf_callchain_context`),
/// if `entry` is one.
pub fn callchain_context(entry: u64) -> Option<&'static str> {
    Some(match entry as i64 {
        -32 => "hv",
        -128 => "kernel",
        -512 => "user",
        -2048 => "guest",
        -2176 => "guest kernel",
        -2560 => "guest user",
        _ => return None,
    })
}

/// A sample's `PERF_SAMPLE_BRANCH_STACK`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParsedBranchStack<'a> {
    /// `hw_idx`, when `branch_sample_type` has `HW_INDEX`.
    pub hw_index: Option<u64>,
    /// The entries' bytes: `nr` of (from, to, flags), 24 bytes each.
    entries: &'a [u8],
}

impl ParsedBranchStack<'_> {
    /// Entries (`nr`).
    pub fn len(&self) -> usize {
        self.entries.len() / 24
    }

    /// Whether the stack has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, newest first: (from, to, flags).
    pub fn entries(&self) -> impl Iterator<Item = [u64; 3]> + '_ {
        self.entries.chunks_exact(24).map(|e| {
            let w = |k: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&e[8 * k..8 * k + 8]);
                u64::from_le_bytes(b)
            };
            [w(0), w(1), w(2)]
        })
    }
}

/// The `sample_id` trailer of a non-sample record (`sample_id_all`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleIdTrailer {
    /// TID: (pid, tid).
    pub tid: Option<(u32, u32)>,
    /// TIME.
    pub time: Option<u64>,
    /// ID / IDENTIFIER.
    pub id: Option<u64>,
    /// CPU.
    pub cpu: Option<u32>,
}

struct Cursor<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], FormatError> {
        let left = (self.body.len() - self.at) as u64;
        if n > left {
            return Err(FormatError(format!(
                "{what} needs {n} bytes at offset {} but the record has {left} left",
                self.at
            )));
        }
        let s = &self.body[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    fn u64(&mut self, what: &str) -> Result<u64, FormatError> {
        let b = self.take(8, what)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }

    fn pair(&mut self, what: &str) -> Result<(u32, u32), FormatError> {
        let w = self.u64(what)?;
        Ok((w as u32, (w >> 32) as u32))
    }

    fn skip_words(&mut self, n: u64, what: &str) -> Result<(), FormatError> {
        let bytes = n
            .checked_mul(8)
            .ok_or_else(|| FormatError(format!("{what}: {n} words")))?;
        self.take(bytes, what).map(|_| ())
    }
}

/// Parses the sample record `record` (header included) written with `attr`.
pub fn parse_sample<'a>(
    attr: &PerfEventAttr,
    record: &'a [u8],
) -> Result<ParsedSample<'a>, FormatError> {
    let t = attr.sample_type;
    let mut c = Cursor {
        body: record,
        at: 8,
    };
    let mut s = ParsedSample::default();
    if t & st::IDENTIFIER != 0 {
        s.id = Some(c.u64("IDENTIFIER")?);
    }
    if t & st::IP != 0 {
        s.ip = Some(c.u64("IP")?);
    }
    if t & st::TID != 0 {
        s.tid = Some(c.pair("TID")?);
    }
    if t & st::TIME != 0 {
        s.time = Some(c.u64("TIME")?);
    }
    if t & st::ADDR != 0 {
        c.u64("ADDR")?;
    }
    if t & st::ID != 0 {
        s.id = Some(c.u64("ID")?);
    }
    if t & st::STREAM_ID != 0 {
        c.u64("STREAM_ID")?;
    }
    if t & st::CPU != 0 {
        s.cpu = Some(c.pair("CPU")?.0);
    }
    if t & st::PERIOD != 0 {
        s.period = Some(c.u64("PERIOD")?);
    }
    if t & st::READ != 0 {
        let f = attr.read_format;
        let per_value = 1 + u64::from(f & rf::ID != 0) + u64::from(f & rf::LOST != 0);
        let times =
            u64::from(f & rf::TOTAL_TIME_ENABLED != 0) + u64::from(f & rf::TOTAL_TIME_RUNNING != 0);
        if f & rf::GROUP != 0 {
            let nr = c.u64("READ nr")?;
            c.skip_words(times, "READ times")?;
            c.skip_words(nr.saturating_mul(per_value), "READ values")?;
        } else {
            c.skip_words(times + per_value, "READ")?;
        }
    }
    if t & st::CALLCHAIN != 0 {
        let nr = c.u64("CALLCHAIN nr")?;
        let bytes = nr
            .checked_mul(8)
            .ok_or_else(|| FormatError(format!("CALLCHAIN: {nr} words")))?;
        s.callchain = Some(c.take(bytes, "CALLCHAIN")?);
    }
    if t & st::RAW != 0 {
        let size = u32::from_le_bytes(c.take(4, "RAW size")?.try_into().unwrap_or([0; 4]));
        c.take(u64::from(size), "RAW")?;
    }
    if t & st::BRANCH_STACK != 0 {
        let nr = c.u64("BRANCH_STACK nr")?;
        let hw_index = if attr.branch_sample_type & bst::HW_INDEX != 0 {
            Some(c.u64("BRANCH_STACK hw_idx")?)
        } else {
            None
        };
        let entries = c.take(nr.saturating_mul(24), "BRANCH_STACK entries")?;
        if attr.branch_sample_type & bst::COUNTERS != 0 {
            c.skip_words(nr, "BRANCH_STACK counters")?;
        }
        s.branch_stack = Some(ParsedBranchStack { hw_index, entries });
    }
    if t & st::REGS_USER != 0 {
        let abi = c.u64("REGS_USER abi")?;
        if abi != 0 {
            c.skip_words(u64::from(attr.sample_regs_user.count_ones()), "REGS_USER")?;
        }
    }
    if t & st::STACK_USER != 0 {
        let size = c.u64("STACK_USER size")?;
        c.take(size, "STACK_USER")?;
        if size != 0 {
            c.u64("STACK_USER dyn_size")?;
        }
    }
    if t & st::WEIGHT_TYPE != 0 {
        c.u64("WEIGHT")?;
    }
    if t & st::DATA_SRC != 0 {
        c.u64("DATA_SRC")?;
    }
    if t & st::TRANSACTION != 0 {
        c.u64("TRANSACTION")?;
    }
    if t & st::REGS_INTR != 0 {
        let abi = c.u64("REGS_INTR abi")?;
        if abi != 0 {
            c.skip_words(u64::from(attr.sample_regs_intr.count_ones()), "REGS_INTR")?;
        }
    }
    if t & st::PHYS_ADDR != 0 {
        c.u64("PHYS_ADDR")?;
    }
    if t & st::CGROUP != 0 {
        c.u64("CGROUP")?;
    }
    if t & st::DATA_PAGE_SIZE != 0 {
        c.u64("DATA_PAGE_SIZE")?;
    }
    if t & st::CODE_PAGE_SIZE != 0 {
        c.u64("CODE_PAGE_SIZE")?;
    }
    if t & st::AUX != 0 {
        s.aux_offset = c.at;
        let size = c.u64("AUX size")?;
        s.aux = Some(c.take(size, "the AUX data")?);
    }
    if c.at != record.len() {
        return Err(FormatError(format!(
            "{} bytes left after the last field",
            record.len() - c.at
        )));
    }
    Ok(s)
}

/// The size of the `sample_id` trailer of `attr`'s non-sample records.
pub fn trailer_size(attr: &PerfEventAttr) -> usize {
    SampleId {
        sample_type: attr.sample_type,
        ..SampleId::default()
    }
    .size()
}

/// Parses the `sample_id` trailer at the end of a non-sample `record`.
pub fn parse_trailer(attr: &PerfEventAttr, record: &[u8]) -> Result<SampleIdTrailer, FormatError> {
    let t = attr.sample_type;
    let words = trailer_size(attr) / 8;
    if record.len() < 8 + 8 * words {
        return Err(FormatError(format!(
            "a {}-byte record cannot hold a {}-byte sample_id trailer",
            record.len(),
            8 * words
        )));
    }
    let mut c = Cursor {
        body: record,
        at: record.len() - 8 * words,
    };
    let mut s = SampleIdTrailer::default();
    if t & st::TID != 0 {
        s.tid = Some(c.pair("TID")?);
    }
    if t & st::TIME != 0 {
        s.time = Some(c.u64("TIME")?);
    }
    if t & st::ID != 0 {
        s.id = Some(c.u64("ID")?);
    }
    if t & st::STREAM_ID != 0 {
        c.u64("STREAM_ID")?;
    }
    if t & st::CPU != 0 {
        s.cpu = Some(c.pair("CPU")?.0);
    }
    if t & st::IDENTIFIER != 0 {
        s.id = Some(c.u64("IDENTIFIER")?);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callchain_is_read_with_its_context_markers() {
        let mut attr = PerfEventAttr::new(136);
        attr.sample_type = st::IP | st::CALLCHAIN | st::PERIOD;
        let user = (-512i64) as u64;
        // IP, PERIOD, then CALLCHAIN: the sample_type order.
        let words = [0x40_1000u64, 7, 3, user, 0x40_1000, 0x40_2345];
        let mut record = vec![9, 0, 0, 0, 2, 0, 8 + 8 * words.len() as u8, 0];
        for w in words {
            record.extend(w.to_le_bytes());
        }
        let s = parse_sample(&attr, &record).unwrap();
        assert_eq!(s.ip, Some(0x40_1000));
        assert_eq!(
            s.callchain().collect::<Vec<_>>(),
            [user, 0x40_1000, 0x40_2345]
        );
        assert_eq!(s.period, Some(7));
        assert_eq!(callchain_context(user), Some("user"));
        assert_eq!(callchain_context((-128i64) as u64), Some("kernel"));
        assert_eq!(callchain_context(0x40_1000), None);
        // A chain longer than the record is a format error, not a panic.
        record[24] = 200;
        assert!(parse_sample(&attr, &record).is_err());
    }
}
