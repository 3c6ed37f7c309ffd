// SPDX-License-Identifier: MIT OR Apache-2.0
//! Writes perf.data in perf's two formats. [`Writer`], the file format:
//! header, id arrays and attrs first, records as they come, the feature
//! sections and the final header at `finish` (it seeks back). [`PipeWriter`],
//! the pipe format (`perf record -o -`): a short header, the events and
//! features as records, then the records, never seeking.

use std::io::{self, Seek, SeekFrom, Write};

use perfaux::abi::PerfEventAttr;

use super::features::{IndexEntry, lay_out};
use super::{FILE_ATTR_SIZE, Features, HEADER_SIZE, MAGIC, PIPE_HEADER_SIZE, feature, user_record};

/// What records are written through, in either format.
pub trait RecordWriter {
    /// Appends one record (its header says its size).
    fn record(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Bytes of records written so far.
    fn data_size(&self) -> u64;
}

/// One event of the file: its attr, name and the ids of its instances.
#[derive(Clone, Debug)]
pub struct WriterEvent {
    /// The attr (written as its first [`FILE_ATTR_SIZE`] bytes).
    pub attr: PerfEventAttr,
    /// The name perf shows.
    pub name: String,
    /// The ids of its instances (one per CPU).
    pub ids: Vec<u64>,
}

/// A perf.data writer over `out`.
pub struct Writer<W: Write + Seek> {
    out: W,
    events: Vec<(Vec<u8>, String, Vec<u64>)>,
    attrs_offset: u64,
    data_offset: u64,
    data_size: u64,
    /// Every AUXTRACE record written, as `record__process_auxtrace` notes
    /// each one for the `HEADER_AUXTRACE` index.
    index: Vec<IndexEntry>,
}

/// The attr as the file stores it: VER7 (128 bytes), `size` saying so.
fn file_attr(attr: &PerfEventAttr) -> io::Result<Vec<u8>> {
    let bytes = attr.to_bytes();
    if bytes[FILE_ATTR_SIZE..].iter().any(|&b| b != 0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "an attr with fields past 128 bytes (config3) cannot go into a perf 6.1 file",
        ));
    }
    let mut v = bytes[..FILE_ATTR_SIZE].to_vec();
    v[4..8].copy_from_slice(&(FILE_ATTR_SIZE as u32).to_le_bytes());
    Ok(v)
}

impl<W: Write + Seek> RecordWriter for Writer<W> {
    fn record(&mut self, bytes: &[u8]) -> io::Result<()> {
        Writer::record(self, bytes)
    }

    fn data_size(&self) -> u64 {
        self.data_size
    }
}

impl<W: Write + Seek> Writer<W> {
    /// Starts a file with these events; records follow with [`record`](Self::record).
    pub fn create(mut out: W, events: &[WriterEvent]) -> io::Result<Self> {
        out.write_all(&[0u8; HEADER_SIZE])?;
        // The id arrays, then the attrs pointing at them (as perf record).
        let mut pos = HEADER_SIZE as u64;
        let mut id_sections = Vec::new();
        for e in events {
            for id in &e.ids {
                out.write_all(&id.to_le_bytes())?;
            }
            id_sections.push((pos, 8 * e.ids.len() as u64));
            pos += 8 * e.ids.len() as u64;
        }
        let attrs_offset = pos;
        let mut stored = Vec::new();
        for (e, (off, size)) in events.iter().zip(id_sections) {
            let attr = file_attr(&e.attr)?;
            out.write_all(&attr)?;
            out.write_all(&off.to_le_bytes())?;
            out.write_all(&size.to_le_bytes())?;
            stored.push((attr, e.name.clone(), e.ids.clone()));
        }
        let data_offset = attrs_offset + (events.len() * (FILE_ATTR_SIZE + 16)) as u64;
        Ok(Writer {
            out,
            events: stored,
            attrs_offset,
            data_offset,
            data_size: 0,
            index: Vec::new(),
        })
    }

    /// Appends one record (its header says its size; an AUXTRACE record
    /// comes with its AUX data, and goes into the index).
    pub fn record(&mut self, bytes: &[u8]) -> io::Result<()> {
        match perfaux::ring::read_header(bytes) {
            Some(header) if header.type_ == user_record::AUXTRACE => {
                self.index.push(IndexEntry {
                    file_offset: self.data_offset + self.data_size,
                    size: u64::from(header.size),
                });
            }
            _ => {}
        }
        self.out.write_all(bytes)?;
        self.data_size += bytes.len() as u64;
        Ok(())
    }

    /// Bytes of records written so far.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Writes the feature sections and the header; returns the output.
    /// With `features.auxtrace_index` present, the index written lists the
    /// AUXTRACE records written (whatever entries it held).
    pub fn finish(mut self, features: &Features) -> io::Result<W> {
        let indexed;
        let features = match &features.auxtrace_index {
            Some(_) => {
                indexed = Features {
                    auxtrace_index: Some(std::mem::take(&mut self.index)),
                    ..features.clone()
                };
                &indexed
            }
            None => features,
        };
        let events: Vec<(&[u8], &str, &[u64])> = self
            .events
            .iter()
            .map(|(a, n, i)| (a.as_slice(), n.as_str(), i.as_slice()))
            .collect();
        let (feature_part, bitmap) =
            lay_out(self.data_offset + self.data_size, &features.encode(&events));
        self.out.write_all(&feature_part)?;
        let mut header = Vec::with_capacity(HEADER_SIZE);
        header.extend_from_slice(&MAGIC);
        header.extend_from_slice(&(HEADER_SIZE as u64).to_le_bytes());
        header.extend_from_slice(&((FILE_ATTR_SIZE + 16) as u64).to_le_bytes());
        for (off, size) in [
            (
                self.attrs_offset,
                (self.events.len() * (FILE_ATTR_SIZE + 16)) as u64,
            ),
            (self.data_offset, self.data_size),
            (0, 0), // event_types: unused
        ] {
            header.extend_from_slice(&off.to_le_bytes());
            header.extend_from_slice(&size.to_le_bytes());
        }
        header.extend_from_slice(&bitmap);
        self.out.seek(SeekFrom::Start(0))?;
        self.out.write_all(&header)?;
        self.out.seek(SeekFrom::End(0))?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A perf.data stream in perf's pipe format over `out`, which need not
/// seek (a pipe, standard output): what `perf record -o -` writes
/// (`perf_event__synthesize_for_pipe`), read by `perf script -i -`.
pub struct PipeWriter<W: Write> {
    out: W,
    data_size: u64,
}

/// One record of `type_`: its header, then `body`.
fn user_record(type_: u32, body: &[u8]) -> io::Result<Vec<u8>> {
    let size = u16::try_from(8 + body.len()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a record of type {type_} would take {} bytes",
                8 + body.len()
            ),
        )
    })?;
    let mut r = Vec::with_capacity(size as usize);
    r.extend_from_slice(&type_.to_le_bytes());
    r.extend_from_slice(&0u16.to_le_bytes());
    r.extend_from_slice(&size.to_le_bytes());
    r.extend_from_slice(body);
    Ok(r)
}

impl<W: Write> PipeWriter<W> {
    /// Starts the stream: the header, a `PERF_RECORD_HEADER_ATTR` per event
    /// (its attr and ids), a `PERF_RECORD_HEADER_FEATURE` per feature perf
    /// writes in this format (the build-ids and the AUXTRACE index need a
    /// seekable file and are left out, as perf leaves them), and the
    /// `HEADER_LAST_FEATURE` mark.
    pub fn create(mut out: W, events: &[WriterEvent], features: &Features) -> io::Result<Self> {
        out.write_all(&MAGIC)?;
        out.write_all(&(PIPE_HEADER_SIZE as u64).to_le_bytes())?;
        let mut stored = Vec::new();
        for e in events {
            let mut body = file_attr(&e.attr)?;
            for id in &e.ids {
                body.extend_from_slice(&id.to_le_bytes());
            }
            out.write_all(&user_record(user_record::HEADER_ATTR, &body)?)?;
            stored.push((file_attr(&e.attr)?, e.name.as_str(), e.ids.as_slice()));
        }
        let events: Vec<(&[u8], &str, &[u64])> = stored
            .iter()
            .map(|(a, n, i)| (a.as_slice(), *n, *i))
            .collect();
        for (bit, section) in features.encode(&events) {
            if !feature::in_pipe(bit) {
                continue;
            }
            let mut body = u64::from(bit).to_le_bytes().to_vec();
            body.extend_from_slice(&section);
            out.write_all(&user_record(user_record::HEADER_FEATURE, &body)?)?;
        }
        let last = u64::from(feature::LAST).to_le_bytes();
        out.write_all(&user_record(user_record::HEADER_FEATURE, &last)?)?;
        Ok(PipeWriter { out, data_size: 0 })
    }

    /// Ends the stream (nothing follows the records); returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> RecordWriter for PipeWriter<W> {
    fn record(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.data_size += bytes.len() as u64;
        Ok(())
    }

    fn data_size(&self) -> u64 {
        self.data_size
    }
}
