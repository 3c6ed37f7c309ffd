// SPDX-License-Identifier: MIT OR Apache-2.0
//! The tracer seam ([`TraceHw`]) and a software tracer ([`SoftTracer`]) that
//! writes a [`PacketStream`] through ToPA tables exactly as the hardware
//! does: region by region, following END links (the last back to the
//! first), raising a PMI when an INT region fills and stopping when a STOP
//! region fills.

use core::cell::{Cell, RefCell, UnsafeCell};

use super::config::PtConfig;
use super::stream::{PacketSink, PacketStream, TraceEvent};
use super::topa::{PhysMap, TopaPosition, TopaTable};

/// `RTIT_STATUS.Stopped` (bit 5).
pub const STATUS_STOPPED: u64 = 1 << 5;
/// `RTIT_STATUS.Error` (bit 4).
pub const STATUS_ERROR: u64 = 1 << 4;

/// What a PT driver programs and reads (the `IA32_RTIT_*` MSRs).
pub trait TraceHw {
    /// Sets `RTIT_CTL.TraceEn` (tracing on).
    fn enable(&self);
    /// Clears `RTIT_CTL.TraceEn`; the output written so far is in memory
    /// when this returns (the WRMSR serializes; the driver's `wmb()`).
    fn disable(&self);
    /// Whether tracing is on.
    fn enabled(&self) -> bool;
    /// Sets `RTIT_CTL.ToPA`: output through ToPA tables (`true`), or into
    /// one contiguous range that wraps at its end (`false`, single-range
    /// output: `OUTPUT_BASE` is the range, `MASK_PTRS` bits 31:0 its size - 1
    /// and bits 63:32 the write offset).
    fn set_topa(&self, topa: bool);
    /// Writes `OUTPUT_BASE` (the current table's physical address) and
    /// `OUTPUT_MASK_PTRS`.
    fn set_output(&self, base: u64, mask_ptrs: u64);
    /// Reads `OUTPUT_BASE` and `OUTPUT_MASK_PTRS`.
    fn output(&self) -> (u64, u64);
    /// Writes the configuration fields of `RTIT_CTL` (`TSCEn`, `DisRETC`,
    /// `BranchEn`, `PSBFreq`), as `pt_config` does before it sets TraceEn.
    fn configure(&self, config: PtConfig);
    /// Reads `RTIT_STATUS`.
    fn status(&self) -> u64;
    /// Writes `RTIT_STATUS`.
    fn set_status(&self, status: u64);
}

/// A software stand-in for the tracer of one CPU.
///
/// Single-CPU object: trace events and the driver's MSR accesses come from
/// that CPU (possibly nested: a PMI's driver code runs between two events).
pub struct SoftTracer<'p> {
    phys: &'p dyn PhysMap,
    /// The packet generator, created at the first packet.
    ///
    /// # Invariants
    /// Only `trace`, `generating`, `disable` and `configure` touch it, on
    /// this CPU (the type is not `Sync`), and only while `writing` is clear;
    /// `trace` sets `writing` for as long as it holds a `&mut` to it, so a
    /// PMI that interrupts the write (the `interrupt` hook) and calls back
    /// into the tracer never makes a second reference.
    stream: UnsafeCell<Option<PacketStream>>,
    /// `trace` is writing packets (it holds the stream).
    writing: Cell<bool>,
    /// The PSB period of `PSBFreq` 0.
    psb_base: u64,
    /// What `RTIT_CTL` says; a new value starts a new stream.
    config: Cell<PtConfig>,
    /// The timestamp counter, running whether tracing is on or not.
    clock: Cell<u64>,
    enabled: Cell<bool>,
    topa: Cell<bool>,
    base: Cell<u64>,
    mask_ptrs: Cell<u64>,
    status: Cell<u64>,
    /// ToPA PMIs raised and not yet taken.
    pmi: Cell<u32>,
    /// Bytes written into the output since creation.
    written: Cell<u64>,
    /// Sees every byte written to the output (for models in tests and tools).
    tap: Cell<Option<&'p RefCell<dyn PacketSink + 'p>>>,
    /// Called after each piece written to a region: where a PMI can arrive
    /// in the middle of a write (tests).
    interrupt: Cell<Option<&'p dyn Fn()>>,
}

impl<'p> SoftTracer<'p> {
    /// A stopped tracer whose `PSBFreq` 0 means a PSB+ every `psb_base`
    /// bytes (2 KiB on hardware; tests take smaller ones), configured as
    /// [`PtConfig::default`] with TSC packets on until a driver programs it.
    pub fn new(phys: &'p dyn PhysMap, psb_base: u64) -> SoftTracer<'p> {
        SoftTracer {
            phys,
            stream: UnsafeCell::new(None),
            writing: Cell::new(false),
            psb_base,
            config: Cell::new(PtConfig {
                tsc: true,
                ..PtConfig::default()
            }),
            clock: Cell::new(0),
            enabled: Cell::new(false),
            topa: Cell::new(true),
            base: Cell::new(0),
            mask_ptrs: Cell::new(0x7f),
            status: Cell::new(0),
            pmi: Cell::new(0),
            written: Cell::new(0),
            tap: Cell::new(None),
            interrupt: Cell::new(None),
        }
    }

    /// Runs `f` after every piece the tracer writes into a region, as a
    /// PMI arriving in the middle of a write would (tests).
    pub fn set_interrupt(&self, f: Option<&'p dyn Fn()>) {
        self.interrupt.set(f);
    }

    /// Shows every byte the tracer writes to its output to `tap` as well.
    pub fn set_tap(&self, tap: Option<&'p RefCell<dyn PacketSink + 'p>>) {
        self.tap.set(tap);
    }

    /// Something happened on the CPU: the packets for it go to the output
    /// while tracing is on, and are not generated at all while it is off.
    pub fn trace(&self, event: TraceEvent) {
        if let TraceEvent::Time(tsc) = event {
            self.clock.set(tsc);
        }
        if !self.enabled.get() {
            return;
        }
        if self.writing.replace(true) {
            // An event inside a packet write cannot happen on hardware
            // (only a PMI can interrupt it, and a PMI traces nothing).
            return;
        }
        // SAFETY: `writing` was clear and is now set: no other reference to
        // the stream exists or is made until it is cleared (the invariant).
        let stream = unsafe { &mut *self.stream.get() };
        let stream = stream
            .get_or_insert_with(|| PacketStream::with_config(self.psb_base, self.config.get()));
        stream.set_clock(self.clock.get());
        let mut out = Output { tracer: self };
        stream.feed(event, &mut out);
        self.writing.set(false);
    }

    /// The timestamp counter now reads `tsc` (no packet; later PSB+ blocks
    /// carry it).
    pub fn set_clock(&self, tsc: u64) {
        self.clock.set(tsc);
    }

    /// The configuration `RTIT_CTL` holds.
    pub fn config(&self) -> PtConfig {
        self.config.get()
    }

    /// Whether packet generation is on (between TIP.PGE and TIP.PGD, with
    /// TraceEn set).
    pub fn generating(&self) -> bool {
        if !self.enabled.get() || self.writing.get() {
            return false;
        }
        // SAFETY: `writing` is clear: no `&mut` to the stream exists, and
        // this shared one ends here (the invariant).
        unsafe { (*self.stream.get()).as_ref() }.is_some_and(PacketStream::enabled)
    }

    /// Takes the ToPA PMIs raised since the last call (an INT region filled).
    pub fn take_pmi(&self) -> u32 {
        self.pmi.replace(0)
    }

    /// Bytes written to the output so far.
    pub fn written(&self) -> u64 {
        self.written.get()
    }

    /// Whether output goes through ToPA tables (else single-range).
    pub fn uses_topa(&self) -> bool {
        self.topa.get()
    }

    /// Tells the tap and the interrupt hook about `bytes` just written.
    fn written_piece(&self, bytes: &[u8]) {
        self.written.set(self.written.get() + bytes.len() as u64);
        if let Some(tap) = self.tap.get() {
            if let Ok(mut t) = tap.try_borrow_mut() {
                t.write(bytes);
            }
        }
    }

    /// Single-range output: one range of `(MASK_PTRS & 0xffffffff) + 1`
    /// bytes at `OUTPUT_BASE`, wrapping at its end.
    fn emit_single(&self, mut bytes: &[u8]) {
        while !bytes.is_empty() && self.enabled.get() {
            let mask = self.mask_ptrs.get();
            let size = (mask & 0xffff_ffff) + 1;
            let off = (mask >> 32) % size;
            let n = (size - off).min(bytes.len() as u64) as usize;
            let dst = self.phys.to_virt(self.base.get() + off);
            // SAFETY: `dst..dst + n` lies in the range the driver programmed
            // (the AUX page it handed to the tracer).
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n) };
            self.written_piece(&bytes[..n]);
            bytes = &bytes[n..];
            let next = (off + n as u64) % size;
            self.mask_ptrs.set((mask & 0xffff_ffff) | (next << 32));
            if let Some(f) = self.interrupt.get() {
                f();
            }
        }
    }

    /// Writes `bytes` at the output position, as the hardware would.
    fn emit(&self, mut bytes: &[u8]) {
        if !self.topa.get() {
            self.emit_single(bytes);
            return;
        }
        let mut guard = 0;
        while !bytes.is_empty() && self.enabled.get() {
            guard += 1;
            if guard > 1 << 20 {
                // A table ring without regions: the hardware would hang; stop.
                self.status.set(self.status.get() | STATUS_ERROR);
                self.enabled.set(false);
                return;
            }
            let mut pos = TopaPosition::from_mask_ptrs(0, self.mask_ptrs.get());
            let table = self
                .phys
                .to_virt(self.base.get())
                .cast::<TopaTable>()
                .cast_const();
            // SAFETY: the driver programs OUTPUT_BASE with a live table page
            // and indexes inside it (the TraceHw contract, as for hardware).
            let entry = unsafe { (*table).entries[pos.index.min(super::topa::TENTS_PER_PAGE - 1)] };
            if entry.is_end() {
                self.base.set(entry.base());
                pos.index = 0;
                pos.offset = 0;
                self.mask_ptrs.set(pos.mask_ptrs());
                continue;
            }
            let room = entry.size() - pos.offset;
            if room == 0 {
                // A region left full by a STOP: nothing more is written.
                self.status.set(self.status.get() | STATUS_STOPPED);
                self.enabled.set(false);
                return;
            }
            let n = room.min(bytes.len() as u64) as usize;
            let dst = self.phys.to_virt(entry.base() + pos.offset);
            // SAFETY: `dst..dst + n` lies in the region the entry describes,
            // memory the driver handed to the tracer (the AUX pages).
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n) };
            self.written_piece(&bytes[..n]);
            bytes = &bytes[n..];
            if let Some(f) = self.interrupt.get() {
                // The write position first, so that a PMI sees it.
                let mut at = pos;
                at.offset += n as u64;
                if at.offset < entry.size() {
                    self.mask_ptrs.set(at.mask_ptrs());
                    f();
                }
            }
            pos.offset += n as u64;
            if pos.offset == entry.size() {
                if entry.int() {
                    self.pmi.set(self.pmi.get() + 1);
                }
                if entry.stop() {
                    self.mask_ptrs.set(pos.mask_ptrs());
                    self.status.set(self.status.get() | STATUS_STOPPED);
                    self.enabled.set(false);
                    return;
                }
                pos.index += 1;
                pos.offset = 0;
            }
            self.mask_ptrs.set(pos.mask_ptrs());
        }
    }
}

/// The tracer's output as a packet sink.
struct Output<'t, 'p> {
    tracer: &'t SoftTracer<'p>,
}

impl PacketSink for Output<'_, '_> {
    fn write(&mut self, bytes: &[u8]) {
        self.tracer.emit(bytes);
    }
}

impl TraceHw for SoftTracer<'_> {
    fn enable(&self) {
        self.enabled.set(true);
    }

    fn disable(&self) {
        // Branches gathered but not emitted go out first, as the hardware
        // flushes its TNT buffer when TraceEn drops. When a PMI interrupted
        // a write, `writing` is set (the write holds the stream), so
        // nothing is flushed into the middle of that write: like the
        // hardware's, its writes are never split, and it completes once
        // tracing is on again.
        if self.enabled.get() && !self.writing.replace(true) {
            // SAFETY: `writing` was clear and is now set, as in `trace`.
            if let Some(stream) = unsafe { (*self.stream.get()).as_mut() } {
                stream.stop(&mut Output { tracer: self });
            }
            self.writing.set(false);
        }
        self.enabled.set(false);
    }

    fn enabled(&self) -> bool {
        self.enabled.get()
    }

    fn set_topa(&self, topa: bool) {
        self.topa.set(topa);
    }

    fn set_output(&self, base: u64, mask_ptrs: u64) {
        self.base.set(base);
        self.mask_ptrs.set(mask_ptrs);
    }

    fn output(&self) -> (u64, u64) {
        (self.base.get(), self.mask_ptrs.get())
    }

    fn configure(&self, config: PtConfig) {
        if config != self.config.get() {
            // A new configuration: the next packet starts a new stream
            // (PSB+ first). Drivers configure with tracing off.
            self.config.set(config);
            if !self.enabled.get() && !self.writing.get() {
                // SAFETY: `writing` is clear: no reference to the stream
                // exists (the invariant); this write ends here.
                unsafe { *self.stream.get() = None };
            }
        }
    }

    fn status(&self) -> u64 {
        self.status.get()
    }

    fn set_status(&self, status: u64) {
        self.status.set(status);
    }
}
