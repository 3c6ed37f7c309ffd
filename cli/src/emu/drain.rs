// SPDX-License-Identifier: MIT OR Apache-2.0
//! The recorder's reading of the session, as `perf record` reads its mmaps
//! each round (`record__mmap_read_all`): every live slot's data ring into
//! the file, then, for a full trace, its new AUX data as a
//! `PERF_RECORD_AUXTRACE` (`record__auxtrace_mmap_read`); a slot whose
//! thread ended is read to its end and its memory released.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use perfaux::abi::{PerfEventAttr, record_type};
use perfaux::aux::AuxConsumer;
use perfaux::ring::Consumer;
use perfaux_qemu_session::{Mode, SLOT_DONE, SLOT_DRAINED, SLOT_FREE};

use super::session::Session;
use crate::perfdata::synth;
use crate::perfdata::{AuxRecord, LostRecord, RecordWriter, parse_sample};

/// What a run wrote and what its threads counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// `PERF_RECORD_SAMPLE` records.
    pub samples: u64,
    /// Samples that carried AUX data.
    pub aux_samples: u64,
    /// Bytes of AUX data in samples.
    pub aux_sample_bytes: u64,
    /// Entries in the samples' branch stacks.
    pub stack_branches: u64,
    /// `PERF_RECORD_AUX` records.
    pub aux_records: u64,
    /// `PERF_RECORD_AUX` records flagged TRUNCATED.
    pub aux_truncated: u64,
    /// Bytes of AUX data in `PERF_RECORD_AUXTRACE` records.
    pub auxtrace_bytes: u64,
    /// Records the data rings dropped (sum of `PERF_RECORD_LOST.lost`).
    pub lost_records: u64,
    /// Samples the rings refused.
    pub lost_samples: u64,
    /// Trace events whose packets a full AUX area lost.
    pub lost_trace_events: u64,
    /// Records of every type.
    pub records: u64,
    /// Trace bytes the tracers wrote.
    pub trace_bytes: u64,
    /// Instructions the traced threads retired into their traces.
    pub instructions: u64,
    /// Threads traced (slots used).
    pub threads: u32,
    /// Threads that ran untraced (no free slot).
    pub untraced: u32,
    /// Slots whose thread did not end by itself (the recording stopped
    /// first, or its process was replaced by `execve`).
    pub unfinished: u32,
}

/// A traced thread, as its slot says at the end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadEnd {
    /// Its slot (its CPU in the file).
    pub slot: u32,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Instructions it retired into its trace.
    pub instructions: u64,
    /// Whether it ended by itself (else its trace was salvaged, or its
    /// process was still running when the recording stopped).
    pub ended: bool,
    /// The program an `execve` of the thread was starting when its trace
    /// ended: for a thread that did not end, the program that replaced it
    /// and ran untraced.
    pub exec: Option<String>,
}

/// One slot as the drain reads it.
struct SlotReader {
    data: Vec<*mut u8>,
    aux: Vec<*mut u8>,
    drained: bool,
}

/// Moves records from the session's slots into a perf.data writer.
pub struct Drain<'s> {
    session: &'s Session,
    readers: Vec<SlotReader>,
    /// The sampler's attr (to read a sample's AUX size).
    sampler: PerfEventAttr,
    /// What has been written.
    pub summary: Summary,
    /// Every file an MMAP2 record named.
    pub paths: BTreeSet<String>,
    /// Every thread, in slot order, once its slot is read to its end.
    pub threads: Vec<ThreadEnd>,
    scratch: Vec<u8>,
}

/// The offset of `PERF_RECORD_MMAP2`'s file name.
const MMAP2_NAME: usize = 72;

impl<'s> Drain<'s> {
    /// A drain of `session`, whose samplers open `sampler`.
    pub fn new(session: &'s Session, sampler: PerfEventAttr) -> Drain<'s> {
        Drain {
            session,
            readers: Vec::new(),
            sampler,
            summary: Summary::default(),
            paths: BTreeSet::new(),
            threads: Vec::new(),
            scratch: vec![0; 1 << 16],
        }
    }

    /// Reads every slot once; returns the bytes moved. A round that moved
    /// anything ends with `PERF_RECORD_FINISHED_ROUND`.
    pub fn round(&mut self, w: &mut impl RecordWriter) -> Result<u64, String> {
        let s = self.session;
        for slot in self.readers.len() as u32..s.claimed() {
            self.readers.push(SlotReader {
                data: s.data_pages(slot),
                aux: s.aux_pages(slot),
                drained: false,
            });
        }
        let mut moved = 0;
        for slot in 0..self.readers.len() {
            if self.readers[slot].drained {
                continue;
            }
            let info = s.info(slot as u32);
            // Acquire: pairs with the plugin's Release stores of the state;
            // what the slot holds (set-up, last records, counts) is seen.
            let state = info.state.load(Ordering::Acquire);
            if state == SLOT_FREE {
                continue;
            }
            moved += self.drain_slot(slot as u32, w)?;
            if state == SLOT_DONE {
                self.finish(slot as u32, true);
            }
        }
        if moved > 0 {
            self.write(w, &synth::finished_round())?;
        }
        Ok(moved)
    }

    /// The end of the recording: every slot read to its end, those whose
    /// thread did not end counted.
    pub fn close(&mut self, w: &mut impl RecordWriter) -> Result<(), String> {
        self.round(w)?;
        for slot in 0..self.readers.len() {
            if !self.readers[slot].drained {
                self.summary.unfinished += 1;
                if self.session.layout().mode() == Mode::Full {
                    self.salvage(slot as u32, w)?;
                }
                self.finish(slot as u32, false);
            }
        }
        self.threads.sort_by_key(|t| t.slot);
        let h = self.session.header();
        self.summary.threads = self.readers.len() as u32;
        // Relaxed: the emulator has exited (or stopped writing).
        self.summary.untraced = h.untraced.load(Ordering::Relaxed);
        Ok(())
    }

    /// Slot `slot`'s thread died without ending its trace (a fatal signal
    /// kills the emulator without a callback; `execve` replaced the
    /// process): what its tracer wrote after the last published `aux_head`,
    /// whole packets up to the plugin's last batch, is read from the AUX
    /// pages as one more AUXTRACE record. Nothing is made up: the bytes
    /// are the engine's.
    fn salvage(&mut self, slot: u32, w: &mut impl RecordWriter) -> Result<(), String> {
        let s = self.session;
        let info = s.info(slot);
        // Acquire: pairs with the plugin's Release store after the bytes.
        let end = info.trace_bytes.load(Ordering::Acquire);
        let up = s.user_page(slot);
        // SAFETY: the user page is in the mapping; aux_tail is this
        // drain's own (it is the consumer), read as a u64 at its offset.
        let tail = unsafe { std::ptr::read_volatile(&raw const (*up).aux_tail) };
        let size = (s.layout().aux_pages() * perfaux::abi::PAGE_SIZE) as u64;
        // What the area still holds: at most its size behind the end.
        let start = tail.max(end.saturating_sub(size));
        if end <= start {
            return Ok(());
        }
        let len = (end - start) as usize;
        let padded = len.next_multiple_of(8);
        let tid = info.tid.load(Ordering::Relaxed);
        let mut record = synth::auxtrace(padded as u64, start, crate::emu::now(), slot, tid, slot);
        let at = record.len();
        record.resize(at + padded, 0);
        let pages = &self.readers[slot as usize].aux;
        let page = perfaux::abi::PAGE_SIZE as u64;
        let mut pos = start;
        while pos < end {
            let off = pos % size;
            let in_page = (off % page) as usize;
            let n = ((page - off % page) as usize).min((end - pos) as usize);
            let src = pages[(off / page) as usize].wrapping_add(in_page);
            let dst = at + (pos - start) as usize;
            // SAFETY: `src` is inside one AUX page of the slot, in the
            // mapping, `n` bytes to the page's end at most; the thread is
            // gone, so nothing writes them.
            let bytes = unsafe { std::slice::from_raw_parts(src, n) };
            record[dst..dst + n].copy_from_slice(bytes);
            pos += n as u64;
        }
        self.summary.auxtrace_bytes += len as u64;
        self.write(w, &record)
    }

    /// Slot `slot` is read to its end: its counts are taken, its memory
    /// released.
    fn finish(&mut self, slot: u32, ended: bool) {
        let info = self.session.info(slot);
        let instructions = info.retired.load(Ordering::Relaxed);
        // Acquire: pairs with the plugin's Release store after the bytes.
        let exec_len = info.exec_len.load(Ordering::Acquire) as usize;
        let exec = (!ended && exec_len > 0).then(|| {
            let n = exec_len.min(perfaux_qemu_session::EXEC_PATH_MAX);
            // SAFETY: the slot's thread is gone (not ended: its process
            // was replaced, or the recording stopped): the bytes below the
            // published length are written and nothing writes them now.
            let bytes = unsafe { std::slice::from_raw_parts(info.exec_path.get().cast::<u8>(), n) };
            String::from_utf8_lossy(bytes).into_owned()
        });
        self.threads.push(ThreadEnd {
            slot,
            pid: info.pid.load(Ordering::Relaxed),
            tid: info.tid.load(Ordering::Relaxed),
            instructions,
            ended,
            exec,
        });
        self.summary.instructions += instructions;
        self.summary.trace_bytes += info.trace_bytes.load(Ordering::Relaxed);
        self.summary.lost_trace_events += info.lost_events.load(Ordering::Relaxed);
        self.summary.lost_samples += info.lost_samples.load(Ordering::Relaxed);
        // Relaxed: only the recorder reads the state from now on.
        info.state.store(SLOT_DRAINED, Ordering::Relaxed);
        self.session.release(slot);
        self.readers[slot as usize].drained = true;
    }

    fn write(&mut self, w: &mut impl RecordWriter, record: &[u8]) -> Result<(), String> {
        self.summary.records += 1;
        w.record(record).map_err(|e| format!("writing: {e}"))
    }

    /// Reads slot `slot`'s data ring, then (full trace) its new AUX data.
    fn drain_slot(&mut self, slot: u32, w: &mut impl RecordWriter) -> Result<u64, String> {
        let s = self.session;
        let reader = &self.readers[slot as usize];
        let mut moved = 0u64;
        // SAFETY: the slot's user page and data pages are in the session
        // mapping, alive while `self.session` is; this is their only
        // consumer.
        let mut consumer = unsafe { Consumer::new(s.user_page(slot), &reader.data, 0) }
            .map_err(|e| format!("slot {slot}: data ring: {e:?}"))?;
        consumer.refresh();
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut records = Vec::new();
        while let Some(record) = consumer.next_record(&mut scratch) {
            let record = record.map_err(|e| format!("slot {slot}: a malformed record: {e:?}"))?;
            moved += record.len() as u64;
            records.push(record.to_vec());
        }
        consumer.commit();
        self.scratch = scratch;
        for r in &records {
            self.account(r)?;
            self.write(w, r)?;
        }
        if s.layout().mode() == Mode::Full {
            let reader = &self.readers[slot as usize];
            // SAFETY: the AUX pages are the slot's, in the mapping; a full
            // trace's area is writable by its consumer, this drain.
            let mut aux = unsafe { AuxConsumer::new(s.user_page(slot), &reader.aux) }
                .map_err(|e| format!("slot {slot}: AUX consumer: {e:?}"))?;
            aux.refresh();
            let len = aux.available() as usize;
            if len > 0 {
                // Padded to 8 bytes as perf record pads it; the next
                // record starts at aux_head.
                let padded = len.next_multiple_of(8);
                let tid = s.info(slot).tid.load(Ordering::Relaxed);
                let mut record = synth::auxtrace(
                    padded as u64,
                    aux.position(),
                    crate::emu::now(),
                    slot,
                    tid,
                    slot,
                );
                let at = record.len();
                record.resize(at + padded, 0);
                aux.read_to_slice(&mut record[at..at + len]);
                aux.commit();
                self.summary.auxtrace_bytes += len as u64;
                moved += len as u64;
                self.write(w, &record)?;
            }
        }
        Ok(moved)
    }

    /// Counts a record; an MMAP2's file is remembered for the build-ids.
    fn account(&mut self, r: &[u8]) -> Result<(), String> {
        let header = perfaux::ring::read_header(r).ok_or("a record without a header")?;
        match header.type_ {
            record_type::SAMPLE => {
                self.summary.samples += 1;
                let s = parse_sample(&self.sampler, r)
                    .map_err(|e| format!("the plugin's sample: {e}"))?;
                let aux = s.aux.map_or(0, <[u8]>::len) as u64;
                if aux > 0 {
                    self.summary.aux_samples += 1;
                    self.summary.aux_sample_bytes += aux;
                }
                if let Some(stack) = s.branch_stack {
                    self.summary.stack_branches += stack.len() as u64;
                }
            }
            record_type::LOST => {
                let lost = LostRecord::parse(r).map_err(|e| format!("the plugin's record: {e}"))?;
                self.summary.lost_records += lost.lost;
            }
            record_type::AUX => {
                let aux = AuxRecord::parse(r).map_err(|e| format!("the plugin's record: {e}"))?;
                self.summary.aux_records += 1;
                if aux.truncated() {
                    self.summary.aux_truncated += 1;
                }
            }
            record_type::MMAP2 => {
                if let Some(name) = r.get(MMAP2_NAME..) {
                    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                    self.paths
                        .insert(String::from_utf8_lossy(&name[..end]).into_owned());
                }
            }
            _ => {}
        }
        Ok(())
    }
}
