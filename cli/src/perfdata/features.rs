// SPDX-License-Identifier: MIT OR Apache-2.0
//! Feature sections: what `perf report --header` shows (host, CPUs, command
//! line), and the event names, PMU names and groups that make samples
//! readable. Encodings as `tools/perf/util/header.c` writes them.

use super::reader::FormatError;
use super::{FILE_ATTR_SIZE, NAME_ALIGN, feature};

/// One event group (`HEADER_GROUP_DESC`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDesc {
    /// The group's name (`{anon_group}` for an unnamed one).
    pub name: String,
    /// Index of the leader among the file's events.
    pub leader: u32,
    /// Number of members, the leader included.
    pub members: u32,
}

/// One `HEADER_BUILD_ID` entry (`struct perf_record_header_build_id`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildId {
    /// The machine's pid (-1: the host).
    pub pid: i32,
    /// `PERF_RECORD_MISC_USER` or `_KERNEL`.
    pub misc: u16,
    /// The GNU build-id (20 bytes).
    pub id: Vec<u8>,
    /// The binary's path.
    pub path: String,
}

/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: the entry says the build-id's size.
const MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// The feature sections of a file. `None`/empty: the section is absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// `HEADER_HOSTNAME`.
    pub hostname: Option<String>,
    /// `HEADER_OSRELEASE`.
    pub osrelease: Option<String>,
    /// `HEADER_VERSION`.
    pub version: Option<String>,
    /// `HEADER_ARCH`.
    pub arch: Option<String>,
    /// `HEADER_NRCPUS`: (available, online).
    pub nr_cpus: Option<(u32, u32)>,
    /// `HEADER_CMDLINE`.
    pub cmdline: Option<Vec<String>>,
    /// `HEADER_PMU_MAPPINGS`: (type, name).
    pub pmu_mappings: Vec<(u32, String)>,
    /// `HEADER_GROUP_DESC`.
    pub groups: Vec<GroupDesc>,
    /// `HEADER_EVENT_DESC` names, in event order (filled by the reader; the
    /// writer takes names from the events).
    pub event_names: Vec<String>,
    /// `HEADER_BUILD_ID`.
    pub build_ids: Vec<BuildId>,
    /// `HEADER_AUXTRACE`: the index of the file's AUXTRACE records, as
    /// `perf record` writes it (`auxtrace_index__write`). perf 6.1 queues a
    /// full trace's buffers from it and walks the data section only when
    /// it is empty; its presence also lets perf read AUX data with
    /// `-F +brstackinsn`. [`Writer`](super::Writer) lists the AUXTRACE
    /// records it wrote, so a writer's caller passes `Some(vec![])`.
    pub auxtrace_index: Option<Vec<IndexEntry>>,
    /// `HEADER_BRANCH_STACK`: samples carry branch stacks (`perf record`
    /// keeps the empty section when an event has `PERF_SAMPLE_BRANCH_STACK`).
    pub branch_stack: bool,
}

/// The feature part of a file for `sections` (bit, bytes, in bit order),
/// starting at `table_offset` (the end of the data): the table of
/// `{offset, size}` entries, then the sections (`perf_header__adds_write`),
/// and the header bitmap that announces them.
pub(super) fn lay_out(table_offset: u64, sections: &[(u32, Vec<u8>)]) -> (Vec<u8>, [u8; 32]) {
    let mut out = Vec::new();
    let mut at = table_offset + 16 * sections.len() as u64;
    for (_, bytes) in sections {
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        at += bytes.len() as u64;
    }
    let mut bitmap = [0u8; feature::BITS as usize / 8];
    for (bit, bytes) in sections {
        out.extend_from_slice(bytes);
        bitmap[*bit as usize / 8] |= 1 << (bit % 8);
    }
    (out, bitmap)
}

/// One entry of the AUXTRACE index (`struct auxtrace_index_entry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// File offset of the `PERF_RECORD_AUXTRACE` record.
    pub file_offset: u64,
    /// Its `header.size` (the record, not the AUX data after it).
    pub size: u64,
}

/// Appends a perf string: `u32 len` (NUL included, rounded up to
/// [`NAME_ALIGN`]), the bytes, zero padding.
pub(super) fn put_string(out: &mut Vec<u8>, s: &str) {
    let len = (s.len() + 1).div_ceil(NAME_ALIGN) * NAME_ALIGN;
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    out.resize(out.len() + len - s.len(), 0);
}

/// A cursor over a feature section, every read checked.
pub(super) struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Cursor { bytes, at: 0, what }
    }

    fn err(&self, why: &str) -> FormatError {
        FormatError(format!("{} section: {why} at byte {}", self.what, self.at))
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| self.err(&format!("{n} bytes past the end")))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub(super) fn u32(&mut self) -> Result<u32, FormatError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn u64(&mut self) -> Result<u64, FormatError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }

    pub(super) fn string(&mut self) -> Result<String, FormatError> {
        let len = self.u32()? as usize;
        let raw = self.take(len)?;
        let end = raw
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.err("a string without its NUL"))?;
        if raw[end..].iter().any(|&b| b != 0) {
            return Err(self.err("non-zero string padding"));
        }
        String::from_utf8(raw[..end].to_vec()).map_err(|_| self.err("a string that is not UTF-8"))
    }
}

impl Features {
    /// The sections to write, as (feature bit, bytes), in bit order.
    /// `events` are (attr bytes of [`FILE_ATTR_SIZE`], name, ids).
    pub(super) fn encode(&self, events: &[(&[u8], &str, &[u64])]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        if !self.build_ids.is_empty() {
            let mut b = Vec::new();
            for e in &self.build_ids {
                let len = (e.path.len() + 1).div_ceil(NAME_ALIGN) * NAME_ALIGN;
                b.extend_from_slice(&0u32.to_le_bytes()); // header.type
                b.extend_from_slice(&(e.misc | MISC_BUILD_ID_SIZE).to_le_bytes());
                b.extend_from_slice(&((36 + len) as u16).to_le_bytes());
                b.extend_from_slice(&e.pid.to_le_bytes());
                let mut id = [0u8; 24];
                let n = e.id.len().min(20);
                id[..n].copy_from_slice(&e.id[..n]);
                id[20] = n as u8;
                b.extend_from_slice(&id);
                b.extend_from_slice(e.path.as_bytes());
                b.resize(b.len() + len - e.path.len(), 0);
            }
            out.push((feature::BUILD_ID, b));
        }
        let string = |bit, s: &Option<String>, out: &mut Vec<(u32, Vec<u8>)>| {
            if let Some(s) = s {
                let mut b = Vec::new();
                put_string(&mut b, s);
                out.push((bit, b));
            }
        };
        string(feature::HOSTNAME, &self.hostname, &mut out);
        string(feature::OSRELEASE, &self.osrelease, &mut out);
        string(feature::VERSION, &self.version, &mut out);
        string(feature::ARCH, &self.arch, &mut out);
        if let Some((avail, online)) = self.nr_cpus {
            let mut b = Vec::new();
            b.extend_from_slice(&avail.to_le_bytes());
            b.extend_from_slice(&online.to_le_bytes());
            out.push((feature::NRCPUS, b));
        }
        if let Some(args) = &self.cmdline {
            let mut b = Vec::new();
            b.extend_from_slice(&(args.len() as u32).to_le_bytes());
            for a in args {
                put_string(&mut b, a);
            }
            out.push((feature::CMDLINE, b));
        }
        if !events.is_empty() {
            let mut b = Vec::new();
            b.extend_from_slice(&(events.len() as u32).to_le_bytes());
            b.extend_from_slice(&(FILE_ATTR_SIZE as u32).to_le_bytes());
            for (attr, name, ids) in events {
                b.extend_from_slice(attr);
                b.extend_from_slice(&(ids.len() as u32).to_le_bytes());
                put_string(&mut b, name);
                for id in *ids {
                    b.extend_from_slice(&id.to_le_bytes());
                }
            }
            out.push((feature::EVENT_DESC, b));
        }
        if self.branch_stack {
            out.push((feature::BRANCH_STACK, Vec::new()));
        }
        if !self.pmu_mappings.is_empty() {
            let mut b = Vec::new();
            b.extend_from_slice(&(self.pmu_mappings.len() as u32).to_le_bytes());
            for (ty, name) in &self.pmu_mappings {
                b.extend_from_slice(&ty.to_le_bytes());
                put_string(&mut b, name);
            }
            out.push((feature::PMU_MAPPINGS, b));
        }
        if !self.groups.is_empty() {
            let mut b = Vec::new();
            b.extend_from_slice(&(self.groups.len() as u32).to_le_bytes());
            for g in &self.groups {
                put_string(&mut b, &g.name);
                b.extend_from_slice(&g.leader.to_le_bytes());
                b.extend_from_slice(&g.members.to_le_bytes());
            }
            out.push((feature::GROUP_DESC, b));
        }
        if let Some(index) = &self.auxtrace_index {
            let mut b = (index.len() as u64).to_le_bytes().to_vec();
            for e in index {
                b.extend_from_slice(&e.file_offset.to_le_bytes());
                b.extend_from_slice(&e.size.to_le_bytes());
            }
            out.push((feature::AUXTRACE, b));
        }
        out
    }

    /// Reads the section of feature `bit` into `self`; unknown bits are
    /// kept as bytes by the caller and ignored here.
    pub(super) fn decode(&mut self, bit: u32, bytes: &[u8]) -> Result<(), FormatError> {
        let mut c = Cursor::new(bytes, feature::name(bit));
        match bit {
            feature::HOSTNAME => self.hostname = Some(c.string()?),
            feature::OSRELEASE => self.osrelease = Some(c.string()?),
            feature::VERSION => self.version = Some(c.string()?),
            feature::ARCH => self.arch = Some(c.string()?),
            feature::NRCPUS => self.nr_cpus = Some((c.u32()?, c.u32()?)),
            feature::BRANCH_STACK => self.branch_stack = true,
            feature::CMDLINE => {
                let n = c.u32()?;
                let mut args = Vec::new();
                for _ in 0..n {
                    args.push(c.string()?);
                }
                self.cmdline = Some(args);
            }
            feature::EVENT_DESC => {
                let n = c.u32()?;
                let size = c.u32()? as usize;
                for _ in 0..n {
                    c.take(size)?;
                    let ids = c.u32()? as usize;
                    self.event_names.push(c.string()?);
                    c.take(ids.checked_mul(8).ok_or_else(|| c.err("too many ids"))?)?;
                }
            }
            feature::PMU_MAPPINGS => {
                let n = c.u32()?;
                for _ in 0..n {
                    let ty = c.u32()?;
                    self.pmu_mappings.push((ty, c.string()?));
                }
            }
            feature::GROUP_DESC => {
                let n = c.u32()?;
                for _ in 0..n {
                    let name = c.string()?;
                    let leader = c.u32()?;
                    let members = c.u32()?;
                    self.groups.push(GroupDesc {
                        name,
                        leader,
                        members,
                    });
                }
            }
            feature::BUILD_ID => {
                while c.at < c.bytes.len() {
                    let head = c.take(8)?;
                    let misc = u16::from_le_bytes([head[4], head[5]]);
                    let size = u16::from_le_bytes([head[6], head[7]]) as usize;
                    let pid = c.u32()? as i32;
                    let id = c.take(24)?;
                    let n = if misc & MISC_BUILD_ID_SIZE != 0 {
                        usize::from(id[20]).min(20)
                    } else {
                        20
                    };
                    let name = c.take(
                        size.checked_sub(36)
                            .ok_or_else(|| c.err("a build-id entry shorter than its header"))?,
                    )?;
                    let path = name.split(|&b| b == 0).next().unwrap_or_default();
                    self.build_ids.push(BuildId {
                        pid,
                        misc: misc & !MISC_BUILD_ID_SIZE,
                        id: id[..n].to_vec(),
                        path: String::from_utf8_lossy(path).into_owned(),
                    });
                }
            }
            feature::AUXTRACE => {
                // As auxtrace_index__process: the count must fit the section.
                let n = c.u64()?;
                let fits = n
                    .checked_mul(16)
                    .and_then(|b| b.checked_add(8))
                    .is_some_and(|b| b <= bytes.len() as u64);
                if !fits {
                    return Err(c.err(&format!("an index of {n} entries")));
                }
                let mut index = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let file_offset = c.u64()?;
                    index.push(IndexEntry {
                        file_offset,
                        size: c.u64()?,
                    });
                }
                self.auxtrace_index = Some(index);
            }
            _ => {}
        }
        Ok(())
    }
}
