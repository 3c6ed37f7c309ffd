// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PT driver split as Intel PT's is: per-CPU [`PtPmu`]s reach a
//! [`PtBuffer`] only through the AUX transaction they hold, handed out by
//! an output that behaves as the kernel's `perf_aux_output_begin/end` (one
//! transaction per buffer at a time, `aux_head` moved by the driver's head in
//! overwrite mode, no buffer once it is unmapped). The cases are the ones a
//! user reaches in a kernel: a per-task event migrating between two CPUs, an
//! AUX munmap while the event runs (stop with UPDATE, then `free_aux`), and
//! a new buffer and a new event after it. Every trace a buffer holds starts
//! with a PSB+ (the first-round clear of `RTIT_STATUS`) and decodes.

use std::cell::Cell;
use std::ptr::NonNull;

use perfaux::abi::PerfEventAttr;
use perfaux::aux::{AuxOutput, AuxTransaction};
use perfaux::pmu::ef;
use perfaux::pt::buffer::PtBuffer;
use perfaux::pt::pmu::PtPmu;
use perfaux::pt::topa::{IdentityMap, TopaTable};
use perfaux::ring::OutputSink;
use perfaux::soft_pt::stream::TraceEvent;
use perfaux::soft_pt::tracer::SoftTracer;
use perfaux::{Error, Result};
use perfaux_tests::mem::AuxMemory;
use perfaux_tests::shims::decodes;

const PSB: [u8; 16] = [
    2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
];

/// The kernel's side of one AUX buffer (`struct perf_buffer`'s AUX part):
/// the driver's buffer while mapped, `aux_head`, and whether a transaction
/// is open (`aux_nest`).
struct KernelBuffer<'b> {
    mapped: Cell<Option<&'b PtBuffer<'b>>>,
    head: Cell<u64>,
    nest: Cell<bool>,
}

impl<'b> KernelBuffer<'b> {
    /// A freshly mapped buffer whose driver state is `buffer`.
    fn mapping(buffer: &'b PtBuffer<'b>) -> Self {
        KernelBuffer {
            mapped: Cell::new(Some(buffer)),
            head: Cell::new(0),
            nest: Cell::new(false),
        }
    }
}

/// One CPU's handle on the buffer of the event running there.
struct Handle<'k, 'b> {
    buffer: &'k KernelBuffer<'b>,
    open: Cell<bool>,
}

impl<'k, 'b> Handle<'k, 'b> {
    fn on(buffer: &'k KernelBuffer<'b>) -> Self {
        Handle {
            buffer,
            open: Cell::new(false),
        }
    }
}

// SAFETY: the buffer is borrowed for longer than the test's transactions;
// `nest` refuses a second open transaction on it.
unsafe impl<'b> AuxOutput for Handle<'_, 'b> {
    type Buffer = PtBuffer<'b>;

    fn begin(&self) -> Result<(AuxTransaction, NonNull<PtBuffer<'b>>)> {
        let Some(buf) = self.buffer.mapped.get() else {
            return Err(Error::NoSpace); // unmapped: aux_mmap_count is 0
        };
        if self.buffer.nest.replace(true) {
            return Err(Error::NoSpace);
        }
        self.open.set(true);
        let t = AuxTransaction {
            head: self.buffer.head.get(),
            space: buf.size(),
            wakeup: u64::MAX,
        };
        Ok((t, NonNull::from(buf)))
    }

    fn flag(&self, _: u64) {}

    fn end(&self, _size: u64, snapshot_head: Option<u64>) {
        assert!(self.open.replace(false), "end without begin");
        if let Some(h) = snapshot_head {
            self.buffer.head.set(h);
        }
        self.buffer.nest.set(false);
    }
}

struct Copy(Vec<u8>);

impl OutputSink for Copy {
    fn copy(&mut self, bytes: &[u8]) -> usize {
        self.0.extend_from_slice(bytes);
        0
    }
}

/// A tick of the timer tracer on one CPU: time, then a branch or two.
fn tick(tracer: &SoftTracer<'_>, at: u64, first: bool) {
    tracer.trace(TraceEvent::Time(1_000_000 + at * 1000));
    if first {
        tracer.trace(TraceEvent::Enable(0x40_0000));
    }
    tracer.trace(TraceEvent::Async {
        from: 0x40_0000 + (at % 64) * 16,
        to: Some(0xffff_ffff_8100_0000),
    });
    tracer.trace(TraceEvent::Indirect {
        target: 0x40_0000 + (at % 64) * 16,
    });
}

fn buffer_bytes(aux: &AuxMemory) -> Vec<u8> {
    aux.pages()
        .iter()
        // SAFETY: test memory of 4 KiB pages; nothing traces during the read.
        .flat_map(|&p| unsafe { std::slice::from_raw_parts(p, 4096) }.to_vec())
        .collect()
}

#[test]
fn a_migrating_event_an_aux_munmap_and_a_new_buffer() {
    let map = IdentityMap;
    let tracers = [SoftTracer::new(&map, 4096), SoftTracer::new(&map, 4096)];
    let attr = {
        let mut a = PerfEventAttr::new(136);
        a.config = perfaux::pt::config::bits::TSC;
        a
    };

    // setup_aux of the first event's buffer (snapshot mode, 8 pages).
    let aux = AuxMemory::new(8, 0);
    let mut tables = vec![TopaTable::new(); 1];
    // SAFETY: the memory outlives the buffer; only the tracers write it.
    let buffer = unsafe { PtBuffer::new(&mut tables, aux.pages(), true, &map) }.unwrap();
    let kernel = KernelBuffer::mapping(&buffer);
    let handles = [Handle::on(&kernel), Handle::on(&kernel)];
    let cpus: Vec<_> = (0..2)
        .map(|c| PtPmu::with_output(&tracers[c], &map, &handles[c]))
        .collect();

    // Other events ran on both CPUs before: their streams are mid-way.
    for (c, cpu) in cpus.iter().enumerate() {
        cpu.add(100 + c as u64, attr.config, false, ef::START)
            .unwrap();
        for t in 0..300 {
            tick(&tracers[c], t, t == 0);
        }
        cpu.del();
    }
    // That wrote into the buffer; a new buffer would be clean. Start over
    // on fresh memory, as a new mmap would.
    let aux = AuxMemory::new(8, 0);
    let mut tables = vec![TopaTable::new(); 1];
    // SAFETY: as above.
    let buffer = unsafe { PtBuffer::new(&mut tables, aux.pages(), true, &map) }.unwrap();
    kernel.mapped.set(Some(&buffer));
    kernel.head.set(0);

    // Event 7 runs on CPU 0, migrates to CPU 1, and back: each CPU's first
    // round starts with a PSB+, and each transaction continues where the
    // last one left off (aux_head).
    let mut snapshots = Vec::new();
    for round in 0..6u64 {
        let c = (round % 2) as usize;
        cpus[c].add(7, attr.config, false, ef::START).unwrap();
        assert!(buffer.is_held());
        for t in 0..20 {
            tick(&tracers[c], round * 100 + t, round < 2 && t == 0);
        }
        let mut copy = Copy(Vec::new());
        assert_eq!(cpus[c].snapshot_aux(&mut copy, 1024), Ok(1024));
        snapshots.push(copy.0);
        cpus[c].del();
        assert!(!buffer.is_held());
    }
    let bytes = buffer_bytes(&aux);
    let head = kernel.head.get() as usize;
    assert_eq!(&bytes[..16], &PSB, "the trace starts with a PSB+");
    assert!(decodes(&bytes[..head]), "the migrated trace decodes");
    assert_eq!(
        bytes[head..].iter().filter(|&&b| b != 0).count(),
        0,
        "nothing was written past the head"
    );
    // Each CPU's first snapshot holds its first round's PSB+.
    assert!(
        snapshots[..2]
            .iter()
            .all(|s| s.windows(16).any(|w| w == PSB))
    );

    // The AUX munmap while the event runs on CPU 1: stop with UPDATE (the
    // transaction ends), then free_aux; the event stays on the CPU.
    cpus[1].add(7, attr.config, false, ef::START).unwrap();
    tick(&tracers[1], 900, false);
    cpus[1].stop(false, ef::UPDATE);
    assert!(!buffer.is_held(), "free_aux may end the buffer now");
    kernel.mapped.set(None);
    let frozen = buffer_bytes(&aux);
    // Ticks, samples and a restart after it touch no buffer.
    for t in 0..50 {
        tick(&tracers[1], 1000 + t, false);
    }
    let mut copy = Copy(Vec::new());
    assert_eq!(cpus[1].snapshot_aux(&mut copy, 1024), Ok(0));
    assert!(copy.0.is_empty());
    cpus[1].start(false, 0);
    assert!(cpus[1].is_stopped(), "no buffer: the event stays stopped");
    cpus[1].del();
    assert_eq!(buffer_bytes(&aux), frozen, "no byte written after the stop");

    // A new mmap (a new buffer) and a new event: a clean, decodable trace.
    let aux2 = AuxMemory::new(8, 0);
    let mut tables2 = vec![TopaTable::new(); 1];
    // SAFETY: as above.
    let buffer2 = unsafe { PtBuffer::new(&mut tables2, aux2.pages(), true, &map) }.unwrap();
    let kernel2 = KernelBuffer::mapping(&buffer2);
    let handle2 = Handle::on(&kernel2);
    let cpu = PtPmu::with_output(&tracers[1], &map, &handle2);
    cpu.add(8, attr.config, false, ef::START).unwrap();
    for t in 0..10 {
        tick(&tracers[1], 2000 + t, t == 0);
    }
    cpu.del();
    let bytes = buffer_bytes(&aux2);
    assert_eq!(&bytes[..16], &PSB, "a new event's trace starts with a PSB+");
    // Nothing of event 7's packet state: packet generation is off until the
    // new event's TIP.PGE, so its PSB+ holds no FUP (no stale IP).
    let mut i = 16;
    while bytes[i..i + 2] != [0x02, 0x23] {
        i += match (bytes[i], bytes[i + 1]) {
            (0x99, _) => 2,    // MODE
            (0x19, _) => 8,    // TSC
            (0x02, 0x03) => 4, // CBR
            (b, _) if b & 0x1f == 0x1d => panic!("a FUP in the first PSB+ at {i}"),
            other => panic!("an unexpected packet {other:02x?} in the PSB+ at {i}"),
        };
    }
    assert!(decodes(&bytes[..kernel2.head.get() as usize]));
}
