// SPDX-License-Identifier: MIT OR Apache-2.0
//! A cut perf.data file made whole: its complete records under a header
//! that says how many bytes they take.
//!
//! Why it is needed: perf 6.1 trusts the header's data size. For a file
//! with AUX data, `intel_pt_process_auxtrace_info` queues the trace by
//! walking the data section (`auxtrace_queue_data` ->
//! `perf_session__peek_events`) through its single mmap of the file
//! (`perf_session__peek_event`: `one_mmap`), so past the cut it reads the
//! zeros of the last page, a record of size 0 that the walk never steps
//! over (`perf report` spins at 100% CPU), or pages with no file behind
//! them (SIGBUS). It does so for any cut file with AUX data, whoever wrote
//! it: the index a full trace's file carries (`HEADER_AUXTRACE`) would
//! spare the walk, but it lives after the data and goes with the cut, and
//! sampling mode walks regardless. A repaired file ends where its records
//! do, so perf reads every one of them.

use super::features::lay_out;
use super::reader::{FormatError, u64_at};
use super::{Features, HEADER_SIZE, PerfData, feature};

/// Where the feature bitmap sits in the header: its last 32 bytes.
const BITMAP_AT: usize = HEADER_SIZE - feature::BITS as usize / 8;
/// Where the header holds the data section's size.
const DATA_SIZE_AT: usize = 48;

/// What [`repair`] made of a cut file.
#[derive(Debug)]
pub struct Repaired {
    /// The repaired file.
    pub bytes: Vec<u8>,
    /// Complete records kept.
    pub records: u64,
    /// File offset of the first incomplete record: where the cut is.
    pub cut_at: u64,
    /// The feature sections the header announced, lost with the cut
    /// (their bits are cleared), by name.
    pub features_lost: Vec<&'static str>,
    /// Entries of the AUXTRACE index rebuilt from the records kept, when
    /// the header announced one (`HEADER_AUXTRACE`: perf then queues the
    /// AUX data from it, as from a complete file).
    pub index: Option<usize>,
}

fn err<T>(msg: impl Into<String>) -> Result<T, FormatError> {
    Err(FormatError(msg.into()))
}

/// Repairs `bytes`, a perf.data file in either format cut inside its
/// data: `Ok(None)` when it is not cut (nothing to repair), an error when
/// what precedes the cut is damaged or cannot be kept.
///
/// The file format keeps the header, the attrs, their ids and the complete
/// records, with the header's data size set to their bytes. The features
/// (after the data, so gone) are dropped, bar a rebuilt AUXTRACE index.
/// The pipe format keeps the complete records (it has no size to mend).
pub fn repair(bytes: &[u8]) -> Result<Option<Repaired>, FormatError> {
    let file = PerfData::parse(bytes)?;
    if file.truncated.is_none() {
        return Ok(None);
    }
    let mut end = file.data_offset;
    let mut records = 0;
    let mut index = Vec::new();
    for record in file.records() {
        let record = record.map_err(|e| FormatError(format!("damaged before the cut: {e}")))?;
        index.extend(record.index_entry());
        end = record.offset + (record.bytes.len() + record.payload.len()) as u64;
        records += 1;
    }
    let kept = &bytes[..end as usize];
    if file.pipe {
        return Ok(Some(Repaired {
            bytes: kept.to_vec(),
            records,
            cut_at: end,
            features_lost: Vec::new(),
            index: None,
        }));
    }
    check_before_data(bytes, file.data_offset)?;
    let mut out = kept.to_vec();
    out[DATA_SIZE_AT..DATA_SIZE_AT + 8].copy_from_slice(&(end - file.data_offset).to_le_bytes());
    let announced = &file.feature_bits;
    let had_index = announced.contains(&feature::AUXTRACE);
    let entries = index.len();
    // The one feature that can be rebuilt from the records: the index.
    let rebuilt = Features {
        auxtrace_index: had_index.then_some(index),
        // An empty section: kept as it was announced.
        branch_stack: announced.contains(&feature::BRANCH_STACK),
        ..Features::default()
    };
    let (feature_part, bitmap) = lay_out(end, &rebuilt.encode(&[]));
    out[BITMAP_AT..HEADER_SIZE].copy_from_slice(&bitmap);
    out.extend_from_slice(&feature_part);
    Ok(Some(Repaired {
        bytes: out,
        records,
        cut_at: end,
        features_lost: announced
            .iter()
            .filter(|&&bit| bit != feature::AUXTRACE && bit != feature::BRANCH_STACK)
            .map(|&bit| feature::name(bit))
            .collect(),
        index: had_index.then_some(entries),
    }))
}

/// The attrs and their id arrays must lie before the data (where `perf
/// record` puts them) to survive the cut: a repaired file ends with its
/// data.
fn check_before_data(bytes: &[u8], data_offset: u64) -> Result<(), FormatError> {
    let attr_size = u64_at(bytes, 16) as usize;
    let (attrs_off, attrs_size) = (u64_at(bytes, 24), u64_at(bytes, 32));
    if attrs_off + attrs_size > data_offset {
        return err(format!(
            "the attrs ({attrs_size} bytes at {attrs_off:#x}) follow the data at {data_offset:#x}: they are lost with the cut"
        ));
    }
    let attrs = &bytes[attrs_off as usize..(attrs_off + attrs_size) as usize];
    for (i, entry) in attrs.chunks_exact(attr_size).enumerate() {
        let (off, size) = (u64_at(entry, attr_size - 16), u64_at(entry, attr_size - 8));
        if size > 0 && off + size > data_offset {
            return err(format!(
                "the ids of attr {i} ({size} bytes at {off:#x}) follow the data at {data_offset:#x}: they are lost with the cut"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perfdata::{IndexEntry, PipeWriter, Writer, WriterEvent, user_record};
    use perfaux::abi::PerfEventAttr;
    use std::io::Cursor;

    fn event() -> WriterEvent {
        WriterEvent {
            attr: PerfEventAttr {
                type_: 1,
                sample_type: 1,
                ..PerfEventAttr::default()
            },
            name: "cpu-clock".into(),
            ids: vec![7],
        }
    }

    /// A record of `type_`, `size` bytes, filled with `fill`.
    fn record(type_: u32, size: usize, fill: u8) -> Vec<u8> {
        let mut r = vec![fill; size];
        r[..4].copy_from_slice(&type_.to_le_bytes());
        r[4..6].fill(0);
        r[6..8].copy_from_slice(&(size as u16).to_le_bytes());
        r
    }

    /// An AUXTRACE record with `len` bytes of AUX data.
    fn auxtrace(len: usize) -> Vec<u8> {
        let mut r = record(user_record::AUXTRACE, user_record::AUXTRACE_SIZE, 0);
        r[8..16].copy_from_slice(&(len as u64).to_le_bytes());
        r.resize(r.len() + len, 0xa5);
        r
    }

    fn records() -> Vec<Vec<u8>> {
        vec![
            record(3, 40, 1),
            auxtrace(64),
            record(9, 24, 2),
            auxtrace(128),
            record(9, 32, 3),
        ]
    }

    fn file(features: &Features) -> (Vec<u8>, u64) {
        let mut w = Writer::create(Cursor::new(Vec::new()), &[event()]).unwrap();
        let data_offset = (HEADER_SIZE + 8 + 128 + 16) as u64;
        for r in records() {
            w.record(&r).unwrap();
        }
        (w.finish(features).unwrap().into_inner(), data_offset)
    }

    fn with_index() -> Features {
        Features {
            hostname: Some("host".into()),
            auxtrace_index: Some(Vec::new()),
            ..Features::default()
        }
    }

    #[test]
    fn a_complete_file_needs_no_repair() {
        let (bytes, _) = file(&with_index());
        assert!(repair(&bytes).unwrap().is_none());
    }

    #[test]
    fn every_cut_keeps_the_complete_records_and_reads_as_a_complete_file() {
        let (bytes, data_offset) = file(&with_index());
        let ends: Vec<u64> = records()
            .iter()
            .scan(data_offset, |at, r| {
                *at += r.len() as u64;
                Some(*at)
            })
            .collect();
        // Cuts in the data, and in the features after it.
        for cut in data_offset as usize + 1..bytes.len() {
            let r = repair(&bytes[..cut]).unwrap().expect("a cut file");
            let complete = ends.iter().filter(|&&e| e <= cut as u64).count();
            assert_eq!(r.records, complete as u64, "cut at {cut}");
            assert_eq!(r.features_lost, ["hostname", "event_desc"]);
            let fixed = PerfData::parse(&r.bytes).unwrap();
            assert!(fixed.truncated.is_none(), "cut at {cut}");
            let kept: Vec<Vec<u8>> = fixed
                .records()
                .map(|r| {
                    let r = r.unwrap();
                    [r.bytes, r.payload].concat()
                })
                .collect();
            assert_eq!(kept, records()[..complete], "cut at {cut}");
            // The index lists the AUXTRACE records kept, where they are.
            let index = fixed.features.auxtrace_index.clone().unwrap();
            let expected: Vec<IndexEntry> = fixed
                .records()
                .map(Result::unwrap)
                .filter(|r| r.header.type_ == user_record::AUXTRACE)
                .map(|r| IndexEntry {
                    file_offset: r.offset,
                    size: user_record::AUXTRACE_SIZE as u64,
                })
                .collect();
            assert_eq!(index, expected, "cut at {cut}");
            assert_eq!(r.index, Some(expected.len()));
            assert_eq!(fixed.feature_bits, [feature::AUXTRACE]);
        }
    }

    #[test]
    fn a_file_without_an_index_gets_none() {
        let (bytes, _) = file(&Features::default());
        let r = repair(&bytes[..bytes.len() - 100]).unwrap().unwrap();
        assert_eq!(r.index, None);
        let fixed = PerfData::parse(&r.bytes).unwrap();
        assert!(fixed.feature_bits.is_empty() && fixed.truncated.is_none());
    }

    #[test]
    fn a_cut_pipe_stream_keeps_its_complete_records() {
        let mut w = PipeWriter::create(Vec::new(), &[event()], &Features::default()).unwrap();
        use crate::perfdata::RecordWriter;
        for r in records() {
            w.record(&r).unwrap();
        }
        let bytes = w.finish().unwrap();
        assert!(repair(&bytes).unwrap().is_none());
        let r = repair(&bytes[..bytes.len() - 5]).unwrap().unwrap();
        assert_eq!(r.bytes.len(), bytes.len() - 32);
        let fixed = PerfData::parse(&r.bytes).unwrap();
        assert!(fixed.pipe && fixed.truncated.is_none());
    }

    #[test]
    fn damage_before_the_cut_is_refused() {
        let (mut bytes, data_offset) = file(&Features::default());
        // The second record's size: 2, smaller than its header.
        let at = data_offset as usize + 40 + 6;
        bytes[at..at + 2].copy_from_slice(&2u16.to_le_bytes());
        let e = repair(&bytes[..bytes.len() - 100]).unwrap_err();
        assert!(e.0.starts_with("damaged before the cut"), "{e}");
    }
}
