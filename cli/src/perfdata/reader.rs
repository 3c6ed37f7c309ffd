// SPDX-License-Identifier: MIT OR Apache-2.0
//! Reads perf.data with every offset and length checked: a malformed file
//! is a [`FormatError`] that says what and where, never a panic.

use std::fmt;

use perfaux::abi::{PERF_ATTR_SIZE, PerfEventAttr, PerfEventHeader};

use super::features::IndexEntry;
use super::{Features, HEADER_SIZE, MAGIC, PIPE_HEADER_SIZE, feature, user_record};

/// What is wrong with a file, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError(pub String);

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FormatError {}

fn err<T>(msg: impl Into<String>) -> Result<T, FormatError> {
    Err(FormatError(msg.into()))
}

/// One event of a file.
#[derive(Clone, Debug)]
pub struct FileEvent {
    /// Its attr (zero-extended to the engine's size).
    pub attr: PerfEventAttr,
    /// The ids of its instances.
    pub ids: Vec<u64>,
    /// Its name (from `HEADER_EVENT_DESC`), or "event N".
    pub name: String,
}

/// A parsed file: the events, the data section and the features.
#[derive(Debug)]
pub struct PerfData<'a> {
    /// The events, in file order.
    pub events: Vec<FileEvent>,
    /// The data section's bytes.
    pub data: &'a [u8],
    /// Offset of the data section in the file.
    pub data_offset: u64,
    /// The feature sections perfaux understands.
    pub features: Features,
    /// The bits set in the feature bitmap (in a cut file, the features the
    /// header announces, whether or not their sections survived).
    pub feature_bits: Vec<u32>,
    /// The file ends before its header says (a copy cut short, a recording
    /// killed before its header was rewritten): what is missing. The
    /// complete records before the cut are read; the features, which follow
    /// the data, are read up to the cut.
    pub truncated: Option<String>,
    /// The file is in perf's pipe format (`perf record -o -`): a 16-byte
    /// header, then records only; the events and features are records too
    /// (`PERF_RECORD_HEADER_ATTR`, `_HEADER_FEATURE`), which
    /// [`records`](Self::records) yields with the others.
    pub pipe: bool,
}

/// The little-endian word at `b[at..at + 8]`.
pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// `bytes[off..off + size]`, or an error naming `what`.
fn section<'a>(bytes: &'a [u8], off: u64, size: u64, what: &str) -> Result<&'a [u8], FormatError> {
    let end = off.checked_add(size);
    match end {
        Some(end) if end <= bytes.len() as u64 => Ok(&bytes[off as usize..end as usize]),
        _ => err(format!(
            "the {what} section ({size} bytes at {off:#x}) runs past the end of the file ({} bytes)",
            bytes.len()
        )),
    }
}

impl<'a> PerfData<'a> {
    /// Parses the header, attrs and features of `bytes` (the records are
    /// read lazily by [`records`](Self::records)), in either of perf's
    /// formats: a file, or a pipe-format stream saved to one.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, FormatError> {
        if bytes.is_empty() {
            return err("not a perf.data file: it is empty");
        }
        if bytes.len() < 8 || bytes[..8] != MAGIC {
            return err("not a perf.data file: the magic is not PERFILE2");
        }
        if bytes.len() >= PIPE_HEADER_SIZE && u64_at(bytes, 8) == PIPE_HEADER_SIZE as u64 {
            return Self::parse_pipe(bytes);
        }
        if bytes.len() < HEADER_SIZE {
            return err(format!(
                "truncated header: {} bytes, {HEADER_SIZE} needed",
                bytes.len()
            ));
        }
        let header_size = u64_at(bytes, 8);
        if header_size != HEADER_SIZE as u64 {
            return err(format!("header size {header_size}, expected {HEADER_SIZE}"));
        }
        let attr_size = u64_at(bytes, 16);
        let (attrs_off, attrs_size) = (u64_at(bytes, 24), u64_at(bytes, 32));
        let (data_off, data_size) = (u64_at(bytes, 40), u64_at(bytes, 48));
        let attrs = section(bytes, attrs_off, attrs_size, "attrs")?;
        let (data, truncated) = match section(bytes, data_off, data_size, "data") {
            Ok(d) => (d, None),
            // Cut inside the data: the complete records are still there.
            Err(e) if data_off <= bytes.len() as u64 => (&bytes[data_off as usize..], Some(e.0)),
            Err(e) => return Err(e),
        };
        if attr_size < 16 + 64 || attr_size > 16 + PERF_ATTR_SIZE as u64 {
            return err(format!(
                "attr_size {attr_size}: an attr of {} bytes is not one perf writes",
                attr_size.saturating_sub(16)
            ));
        }
        if attrs_size % attr_size != 0 {
            return err(format!(
                "the attrs section ({attrs_size} bytes) is not a whole number of {attr_size}-byte entries"
            ));
        }
        let mut events = Vec::new();
        for (i, entry) in attrs.chunks_exact(attr_size as usize).enumerate() {
            let size = attr_size as usize - 16;
            let declared = u32::from_le_bytes([entry[4], entry[5], entry[6], entry[7]]);
            if declared as usize != size {
                return err(format!(
                    "attr {i} says size {declared} but the file's attr_size is {attr_size} ({size} + 16): perf would see no events"
                ));
            }
            let mut full = [0u8; PERF_ATTR_SIZE as usize];
            full[..size].copy_from_slice(&entry[..size]);
            let attr = PerfEventAttr::from_bytes(&full);
            let (ids_off, ids_size) = (u64_at(entry, size), u64_at(entry, size + 8));
            if ids_size % 8 != 0 {
                return err(format!("attr {i}: an id array of {ids_size} bytes"));
            }
            let ids = section(bytes, ids_off, ids_size, "id array")?
                .chunks_exact(8)
                .map(|w| u64_at(w, 0))
                .collect();
            events.push(FileEvent {
                attr,
                ids,
                name: format!("event {i}"),
            });
        }
        let mut features = Features::default();
        let feature_bits: Vec<u32> = (0..feature::BITS)
            .filter(|&bit| bytes[HEADER_SIZE - 32 + bit as usize / 8] & (1 << (bit % 8)) != 0)
            .collect();
        let mut table = data_off + data_size;
        let mut truncated = truncated;
        for &bit in &feature_bits {
            if truncated.is_some() {
                break;
            }
            // A file cut after its data: the records are whole, the
            // features from the cut on are gone (perf reads such a file
            // too; perf_header__process_sections stops where reading fails).
            let entry = match section(bytes, table, 16, "feature table") {
                Ok(entry) => entry,
                Err(e) => {
                    truncated = Some(e.0);
                    break;
                }
            };
            table += 16;
            let body = match section(
                bytes,
                u64_at(entry, 0),
                u64_at(entry, 8),
                feature::name(bit),
            ) {
                Ok(body) => body,
                Err(e) => {
                    truncated = Some(e.0);
                    break;
                }
            };
            features.decode(bit, body)?;
        }
        if !features.event_names.is_empty() {
            if features.event_names.len() != events.len() {
                return err(format!(
                    "event_desc names {} events, the attrs section {}",
                    features.event_names.len(),
                    events.len()
                ));
            }
            for (e, n) in events.iter_mut().zip(&features.event_names) {
                e.name.clone_from(n);
            }
        }
        Ok(PerfData {
            events,
            data,
            data_offset: data_off,
            features,
            feature_bits,
            truncated,
            pipe: false,
        })
    }

    /// The pipe format (`perf_header__read_pipe`, then
    /// `perf_event__process_attr` and `perf_event__process_feature` as the
    /// records come): every record after the 16-byte header is data; the
    /// events and features come from the attr and feature records.
    fn parse_pipe(bytes: &'a [u8]) -> Result<Self, FormatError> {
        let data = &bytes[PIPE_HEADER_SIZE..];
        let mut events = Vec::new();
        let mut features = Features::default();
        let mut feature_bits = Vec::new();
        let mut truncated = None;
        let mut records = Records {
            data,
            at: 0,
            base: PIPE_HEADER_SIZE as u64,
            failed: false,
            cut: false,
        };
        while let Some(r) = records.next() {
            let r = match r {
                Ok(r) => r,
                // A stream ends where the writer stopped: a record cut
                // there is a truncation, anything else is damage.
                Err(e) if records.at_cut() => {
                    truncated = Some(e.0);
                    break;
                }
                Err(e) => return Err(e),
            };
            match r.header.type_ {
                user_record::HEADER_ATTR => events.push(pipe_attr(&r, events.len())?),
                user_record::HEADER_FEATURE => {
                    let what = || format!("the feature record at {:#x}", r.offset);
                    if r.bytes.len() < 16 {
                        return err(format!("{}: {} bytes", what(), r.bytes.len()));
                    }
                    let bit = u64_at(r.bytes, 8);
                    if bit == u64::from(feature::LAST) {
                        continue;
                    }
                    let bit = u32::try_from(bit)
                        .ok()
                        .filter(|&b| b > 0 && b < feature::LAST)
                        .ok_or_else(|| FormatError(format!("{}: feature {bit}", what())))?;
                    feature_bits.push(bit);
                    features.decode(bit, &r.bytes[16..])?;
                }
                _ => {}
            }
        }
        if features.event_names.len() == events.len() {
            for (e, n) in events.iter_mut().zip(&features.event_names) {
                e.name.clone_from(n);
            }
        }
        Ok(PerfData {
            events,
            data,
            data_offset: PIPE_HEADER_SIZE as u64,
            features,
            feature_bits,
            truncated,
            pipe: true,
        })
    }

    /// The records of the data section, in order.
    pub fn records(&self) -> Records<'a> {
        Records {
            data: self.data,
            at: 0,
            base: self.data_offset,
            failed: false,
            cut: self.truncated.is_some(),
        }
    }

    /// The event whose instances include `id`.
    pub fn event_of(&self, id: u64) -> Option<&FileEvent> {
        self.events.iter().find(|e| e.ids.contains(&id))
    }

    /// The event a record belongs to by perf's rule (`evlist__event2evsel`):
    /// the first event when the file has one, when the record carries no
    /// id, or when its id is 0 ("synthesized events have an id of zero":
    /// the MMAP and COMM records perf writes for tasks that already ran);
    /// else the event whose instances include the id.
    pub fn event_for(&self, id: Option<u64>) -> Option<&FileEvent> {
        match id {
            _ if self.events.len() == 1 => self.events.first(),
            None | Some(0) => self.events.first(),
            Some(id) => self.event_of(id),
        }
    }
}

/// One record: its header, its bytes (header included), and for
/// `PERF_RECORD_AUXTRACE` the AUX data that follows it.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// Offset in the file.
    pub offset: u64,
    /// The header.
    pub header: PerfEventHeader,
    /// The record, `header.size` bytes.
    pub bytes: &'a [u8],
    /// The data after an AUXTRACE record (empty for others).
    pub payload: &'a [u8],
}

impl Record<'_> {
    /// The `HEADER_AUXTRACE` index entry of this record, if it is an
    /// AUXTRACE record: where it is and its header size.
    pub fn index_entry(&self) -> Option<IndexEntry> {
        (self.header.type_ == user_record::AUXTRACE).then(|| IndexEntry {
            file_offset: self.offset,
            size: u64::from(self.header.size),
        })
    }
}

/// The event of a `PERF_RECORD_HEADER_ATTR` record (the `i`th): the attr,
/// as long as its `size` says, then the ids to the record's end.
fn pipe_attr(r: &Record<'_>, i: usize) -> Result<FileEvent, FormatError> {
    let body = &r.bytes[8..];
    let what = || format!("the attr record at {:#x}", r.offset);
    if body.len() < 8 {
        return err(format!("{}: {} bytes", what(), r.bytes.len()));
    }
    let size = u32::from_le_bytes([body[4], body[5], body[6], body[7]]) as usize;
    if !(64..=PERF_ATTR_SIZE as usize).contains(&size) || size > body.len() {
        return err(format!(
            "{}: an attr of {size} bytes in a record of {}",
            what(),
            r.bytes.len()
        ));
    }
    if (body.len() - size) % 8 != 0 {
        return err(format!("{}: ids of {} bytes", what(), body.len() - size));
    }
    let mut full = [0u8; PERF_ATTR_SIZE as usize];
    full[..size].copy_from_slice(&body[..size]);
    Ok(FileEvent {
        attr: PerfEventAttr::from_bytes(&full),
        ids: body[size..].chunks_exact(8).map(|w| u64_at(w, 0)).collect(),
        name: format!("event {i}"),
    })
}

/// The iterator of [`PerfData::records`]; stops after the first error,
/// and in a truncated file quietly at the first incomplete record.
pub struct Records<'a> {
    data: &'a [u8],
    at: usize,
    base: u64,
    failed: bool,
    /// The data section is cut short (`PerfData::truncated`).
    cut: bool,
}

impl Records<'_> {
    /// The last error was a record running past the end of the data: in a
    /// stream, where it was cut.
    fn at_cut(&self) -> bool {
        let rest = &self.data[self.at.min(self.data.len())..];
        if rest.len() < 8 {
            return true;
        }
        let size = u16::from_le_bytes([rest[6], rest[7]]) as usize;
        let auxtrace =
            u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) == user_record::AUXTRACE;
        size > rest.len()
            || (auxtrace && size >= 16 && {
                let len = u64_at(rest, 8);
                len > (rest.len().saturating_sub(size)) as u64
            })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, FormatError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.data.len() {
            return None;
        }
        let offset = self.base + self.at as u64;
        let rest = &self.data[self.at..];
        let fail = |this: &mut Self, msg: String| {
            this.failed = true;
            Some(err(format!("record at {offset:#x}: {msg}")))
        };
        if rest.len() < 8 {
            if self.cut {
                return None;
            }
            return fail(
                self,
                format!("a truncated header ({} bytes left)", rest.len()),
            );
        }
        let header = PerfEventHeader {
            type_: u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]),
            misc: u16::from_le_bytes([rest[4], rest[5]]),
            size: u16::from_le_bytes([rest[6], rest[7]]),
        };
        let size = header.size as usize;
        if size < 8 {
            return fail(self, format!("size {size} is smaller than its header"));
        }
        if size > rest.len() {
            if self.cut {
                return None;
            }
            return fail(
                self,
                format!(
                    "size {size} runs past the data section ({} bytes left)",
                    rest.len()
                ),
            );
        }
        let bytes = &rest[..size];
        let mut payload: &[u8] = &[];
        if header.type_ == user_record::AUXTRACE {
            if size < user_record::AUXTRACE_SIZE {
                return fail(self, format!("an AUXTRACE record of {size} bytes"));
            }
            let len = u64_at(bytes, 8);
            match usize::try_from(len)
                .ok()
                .filter(|&l| l <= rest.len() - size)
            {
                Some(l) => payload = &rest[size..size + l],
                None if self.cut => return None,
                None => {
                    return fail(
                        self,
                        format!(
                            "AUXTRACE data of {len} bytes runs past the data section ({} bytes left)",
                            rest.len() - size
                        ),
                    );
                }
            }
        }
        self.at += size + payload.len();
        Some(Ok(Record {
            offset,
            header,
            bytes,
            payload,
        }))
    }
}
