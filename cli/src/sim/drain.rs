// SPDX-License-Identifier: MIT OR Apache-2.0
//! The reader side of the run, as `perf record` reads each mmap every
//! round (`record__mmap_read_all`): the data ring's records into the file,
//! then, for a full trace, the new AUX data as a `PERF_RECORD_AUXTRACE`
//! (`record__auxtrace_mmap_read`), with what was moved counted for the
//! run's [`Summary`].

use perfaux::abi::record_type;
use perfaux::aux::AuxConsumer;
use perfaux::ring::Consumer;

use super::config::Mode;
use super::cpu::Cpu;
use super::truth::CpuTruth;
use crate::perfdata::synth;
use crate::perfdata::{AuxRecord, LostRecord, RecordWriter, WriterEvent, parse_sample, sample_id};

/// What a run wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// `PERF_RECORD_SAMPLE` records.
    pub samples: u64,
    /// Samples that carried AUX data.
    pub aux_samples: u64,
    /// Bytes of AUX data in samples.
    pub aux_sample_bytes: u64,
    /// Entries in the samples' branch stacks (`-b`).
    pub stack_branches: u64,
    /// `PERF_RECORD_AUX` records.
    pub aux_records: u64,
    /// `PERF_RECORD_AUX` records flagged TRUNCATED.
    pub aux_truncated: u64,
    /// Bytes of AUX data in `PERF_RECORD_AUXTRACE` records.
    pub auxtrace_bytes: u64,
    /// Records the data rings dropped (sum of `PERF_RECORD_LOST.lost`).
    pub lost_records: u64,
    /// Samples the rings refused (the events' lost-sample counts).
    pub lost_samples: u64,
    /// Trace events whose packets the tracers lost: their AUX areas were
    /// full (the TRUNCATED records), the consumer behind.
    pub lost_trace_events: u64,
    /// Records of every type.
    pub records: u64,
    /// Trace bytes the tracers wrote.
    pub trace_bytes: u64,
    /// Simulated time per CPU (ns).
    pub simulated_ns: u64,
    /// Bytes of the data section.
    pub data_bytes: u64,
    /// The progress callback stopped the run before its end.
    pub interrupted: bool,
}

/// Moves records from the rings into the file, counting what it moves.
pub struct Sink<'w, R: RecordWriter> {
    /// Where the records go.
    pub writer: &'w mut R,
    /// The file's events, to find a sample's attr by its id.
    events: &'w [WriterEvent],
    /// The first event's `sample_type`, which says where every sample's
    /// id is (`evsel__calc_id_pos`: all events agree).
    id_sample_type: u64,
    /// What has been written so far.
    pub summary: Summary,
    /// Where a record that wraps the ring's end is put together.
    scratch: Vec<u8>,
}

impl<'w, R: RecordWriter> Sink<'w, R> {
    /// A sink writing into `writer` a file of `events`.
    pub fn new(writer: &'w mut R, events: &'w [WriterEvent]) -> Sink<'w, R> {
        Sink {
            writer,
            events,
            id_sample_type: events.first().map_or(0, |e| e.attr.sample_type),
            summary: Summary::default(),
            scratch: vec![0; 1 << 16],
        }
    }

    /// Writes one whole record.
    pub fn write(&mut self, record: &[u8]) -> Result<(), String> {
        self.summary.records += 1;
        self.writer
            .record(record)
            .map_err(|e| format!("writing: {e}"))
    }

    /// Counts a record read from a ring, decoded as the file's reader
    /// decodes it; a sample also gives the truth its AUX size.
    fn account(&mut self, r: &[u8], truth: &mut CpuTruth) -> Result<(), String> {
        let header = perfaux::ring::read_header(r).ok_or("a record without a header")?;
        match header.type_ {
            record_type::SAMPLE => {
                self.summary.samples += 1;
                let id = sample_id(self.id_sample_type, r).ok_or("a sample without its id")?;
                let attr = self
                    .events
                    .iter()
                    .find(|e| e.ids.contains(&id))
                    .map(|e| e.attr)
                    .ok_or_else(|| format!("a sample of unknown id {id}"))?;
                let s = parse_sample(&attr, r).map_err(|e| format!("our own sample: {e}"))?;
                let aux = s.aux.map_or(0, <[u8]>::len) as u64;
                if aux > 0 {
                    self.summary.aux_samples += 1;
                    self.summary.aux_sample_bytes += aux;
                }
                if let Some(stack) = s.branch_stack {
                    self.summary.stack_branches += stack.len() as u64;
                }
                // Samples leave a CPU's ring in the order its PMIs took them.
                if let Some(p) = truth.samples.get_mut(truth.drained) {
                    p.size = aux;
                    truth.drained += 1;
                }
            }
            record_type::LOST => {
                let lost = LostRecord::parse(r).map_err(|e| format!("our own record: {e}"))?;
                self.summary.lost_records += lost.lost;
            }
            record_type::AUX => {
                let aux = AuxRecord::parse(r).map_err(|e| format!("our own record: {e}"))?;
                self.summary.aux_records += 1;
                if aux.truncated() {
                    self.summary.aux_truncated += 1;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Reads `cpu`'s data ring, then (full-trace mode) its new AUX data,
    /// as `perf record` does each round.
    pub fn drain(&mut self, cpu: &mut Cpu<'_, '_>) -> Result<(), String> {
        let (c, mem) = (cpu.index, cpu.memory);
        // SAFETY: the ring memory lives in `mem`, in the run's arena; this
        // is its only consumer.
        let mut consumer = unsafe { Consumer::new(mem.user_page(), mem.data_pages(), 0) }
            .map_err(|e| format!("data ring consumer: {e:?}"))?;
        consumer.refresh();
        let mut scratch = std::mem::take(&mut self.scratch);
        while let Some(record) = consumer.next_record(&mut scratch) {
            let record = record.map_err(|e| format!("CPU {c}: a malformed ring record: {e:?}"))?;
            self.account(record, &mut cpu.truth)?;
            self.write(record)?;
        }
        consumer.commit();
        self.scratch = scratch;
        if cpu.setup.config.mode == Mode::Full {
            // SAFETY: the AUX area in `mem` is writable in full-trace mode,
            // and this is its only consumer.
            let mut aux = unsafe { AuxConsumer::new(mem.user_page(), mem.aux_pages()) }
                .map_err(|e| format!("AUX consumer: {e:?}"))?;
            aux.refresh();
            // Everything up to aux_head, padded to 8 bytes as `perf record`
            // pads it; the next record starts at aux_head (the padding is
            // outside the stream: perf's overlap logic and `dump --check`
            // drop it). aux_head moves only after whole packets (the PMI
            // and the end of a transaction read the hardware's position),
            // so no record ends inside a packet unless the trace stopped.
            let len = aux.available() as usize;
            if len > 0 {
                let padded = len.next_multiple_of(8);
                let mut record = synth::auxtrace(
                    padded as u64,
                    aux.position(),
                    cpu.platform.now.get(),
                    c as u32,
                    u32::MAX, // per CPU
                    c as u32,
                );
                let at = record.len();
                record.resize(at + padded, 0);
                aux.read_to_slice(&mut record[at..at + len]);
                aux.commit();
                self.summary.auxtrace_bytes += len as u64;
                self.write(&record)?;
            }
        }
        Ok(())
    }
}
