// SPDX-License-Identifier: MIT OR Apache-2.0
//! Writes perf.data: header, id arrays and attrs first, records as they
//! come, the feature sections and the final header at `finish`.

use std::io::{self, Seek, SeekFrom, Write};

use perfaux::abi::PerfEventAttr;

use super::{FILE_ATTR_SIZE, Features, HEADER_SIZE, MAGIC, feature};

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
        })
    }

    /// Appends one record (its header says its size).
    pub fn record(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.data_size += bytes.len() as u64;
        Ok(())
    }

    /// Bytes of records written so far.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Writes the feature sections and the header; returns the output.
    pub fn finish(mut self, features: &Features) -> io::Result<W> {
        let events: Vec<(&[u8], &str, &[u64])> = self
            .events
            .iter()
            .map(|(a, n, i)| (a.as_slice(), n.as_str(), i.as_slice()))
            .collect();
        let sections = features.encode(&events);
        let table_offset = self.data_offset + self.data_size;
        let mut at = table_offset + 16 * sections.len() as u64;
        for (_, bytes) in &sections {
            self.out.write_all(&at.to_le_bytes())?;
            self.out.write_all(&(bytes.len() as u64).to_le_bytes())?;
            at += bytes.len() as u64;
        }
        let mut bitmap = [0u8; feature::BITS as usize / 8];
        for (bit, bytes) in &sections {
            self.out.write_all(bytes)?;
            bitmap[*bit as usize / 8] |= 1 << (bit % 8);
        }
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
