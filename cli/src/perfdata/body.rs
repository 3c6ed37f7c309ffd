// SPDX-License-Identifier: MIT OR Apache-2.0
//! The bodies of the kernel records perfaux's tools count and check,
//! decoded by name with their lengths checked (`include/uapi/linux/
//! perf_event.h` gives the layouts), and where a sample names its event.

use perfaux::abi::{aux_flags, record_type, sample_type as st};

use super::reader::FormatError;

/// The little-endian word at `r[at..at + 8]`, if the record holds it.
pub fn word_at(r: &[u8], at: usize) -> Option<u64> {
    r.get(at..at + 8)
        .and_then(|w| w.try_into().ok())
        .map(u64::from_le_bytes)
}

/// The words `N` of a record of type `type_` at offsets 8, 16, ...: the
/// fixed part of its body.
fn words<const N: usize>(record: &[u8], type_: u32, what: &str) -> Result<[u64; N], FormatError> {
    let got = u32::from_le_bytes(
        record
            .get(0..4)
            .and_then(|w| w.try_into().ok())
            .ok_or_else(|| FormatError(format!("{what}: a record without a header")))?,
    );
    if got != type_ {
        return Err(FormatError(format!("{what}: a record of type {got}")));
    }
    let mut out = [0; N];
    for (i, w) in out.iter_mut().enumerate() {
        *w = word_at(record, 8 + 8 * i).ok_or_else(|| {
            FormatError(format!(
                "{what}: {} bytes, fewer than the {} of its body",
                record.len(),
                8 + 8 * N
            ))
        })?;
    }
    Ok(out)
}

/// `PERF_RECORD_LOST`: records the kernel dropped because the data ring
/// was full (`perf_event_lost`'s record, `perf_output_begin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LostRecord {
    /// The event whose records were dropped.
    pub id: u64,
    /// How many.
    pub lost: u64,
}

impl LostRecord {
    /// Decodes a whole `PERF_RECORD_LOST` record.
    pub fn parse(record: &[u8]) -> Result<LostRecord, FormatError> {
        let [id, lost] = words(record, record_type::LOST, "PERF_RECORD_LOST")?;
        Ok(LostRecord { id, lost })
    }
}

/// `PERF_RECORD_AUX`: new data in the AUX area (`perf_event_aux_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuxRecord {
    /// The AUX offset the data starts at.
    pub offset: u64,
    /// Its size.
    pub size: u64,
    /// `PERF_AUX_FLAG_*`.
    pub flags: u64,
}

impl AuxRecord {
    /// Decodes a whole `PERF_RECORD_AUX` record.
    pub fn parse(record: &[u8]) -> Result<AuxRecord, FormatError> {
        let [offset, size, flags] = words(record, record_type::AUX, "PERF_RECORD_AUX")?;
        Ok(AuxRecord {
            offset,
            size,
            flags,
        })
    }

    /// The data ends early: the area was full (`PERF_AUX_FLAG_TRUNCATED`).
    pub fn truncated(&self) -> bool {
        self.flags & aux_flags::TRUNCATED != 0
    }

    /// The data was written over older data (`PERF_AUX_FLAG_OVERWRITE`).
    pub fn overwrite(&self) -> bool {
        self.flags & aux_flags::OVERWRITE != 0
    }
}

/// The id a sample names, where perf finds it (`evsel__calc_id_pos`): the
/// first word with `PERF_SAMPLE_IDENTIFIER`, else with `PERF_SAMPLE_ID`
/// after IP, TID, TIME and ADDR. `sample_type` is the file's first event's:
/// perf requires every event of a file to agree on that position. `None`
/// when the samples carry no id or the record is too short to hold it.
pub fn sample_id(sample_type: u64, record: &[u8]) -> Option<u64> {
    if sample_type & st::IDENTIFIER != 0 {
        return word_at(record, 8);
    }
    if sample_type & st::ID == 0 {
        return None;
    }
    let before = [st::IP, st::TID, st::TIME, st::ADDR]
        .iter()
        .filter(|&&b| sample_type & b != 0)
        .count();
    word_at(record, 8 + 8 * before)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(type_: u32, words: &[u64]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&type_.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&((8 + 8 * words.len()) as u16).to_le_bytes());
        for w in words {
            r.extend_from_slice(&w.to_le_bytes());
        }
        r
    }

    #[test]
    fn lost_and_aux_decode_by_name() {
        let lost = record(record_type::LOST, &[4, 17]);
        assert_eq!(
            LostRecord::parse(&lost).unwrap(),
            LostRecord { id: 4, lost: 17 }
        );
        let aux = record(record_type::AUX, &[0x1000, 0x80, aux_flags::TRUNCATED]);
        let a = AuxRecord::parse(&aux).unwrap();
        assert_eq!((a.offset, a.size), (0x1000, 0x80));
        assert!(a.truncated() && !a.overwrite());
    }

    #[test]
    fn a_short_or_foreign_record_is_refused() {
        let short = record(record_type::AUX, &[0x1000, 0x80]);
        let e = AuxRecord::parse(&short).unwrap_err();
        assert!(e.0.contains("fewer than the 32"), "{e}");
        let lost = record(record_type::LOST, &[4, 17]);
        assert!(AuxRecord::parse(&lost).unwrap_err().0.contains("type 2"));
        assert!(LostRecord::parse(&[0; 3]).is_err());
    }

    #[test]
    fn the_id_is_where_perf_looks_for_it() {
        let r = record(record_type::SAMPLE, &[11, 22, 33, 44]);
        assert_eq!(sample_id(st::IDENTIFIER | st::IP, &r), Some(11));
        // ID after IP and TIME (TID absent): the third word.
        assert_eq!(sample_id(st::IP | st::TIME | st::ID, &r), Some(33));
        assert_eq!(sample_id(st::IP | st::TIME, &r), None);
        assert_eq!(sample_id(st::IDENTIFIER, &r[..12]), None);
    }
}
