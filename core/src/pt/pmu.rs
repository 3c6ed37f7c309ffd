// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PT-style PMU of one CPU (spec §F.4-§F.8): the AUX transaction it
//! holds while tracing, ToPA output (single-range output for a 1-page
//! snapshot buffer, as Linux), `snapshot_aux` exactly as Linux's
//! `pt_event_snapshot_aux` after the 2024 synchronization fix (stop
//! tracing, read the position, copy the newest bytes ending there with
//! `copy_aux`, restart only if tracing was on, change no event state), and
//! for writable (full-trace) areas the STOP/INT markers and the PMI handler.
//!
//! The AUX buffer and its transactions are an [`AuxOutput`]: perfaux's own
//! area ([`AreaOutput`], what [`PtPmu::new`] takes) or a kernel's.

use core::cell::{Cell, RefCell};

use super::config::PtConfig;
use super::topa::{PhysMap, Topa, TopaPosition};
use super::tracer::{STATUS_ERROR, STATUS_STOPPED, TraceHw};
use crate::abi::{PAGE_SIZE, aux_flags};
use crate::aux::{AreaOutput, AuxArea, AuxOutput, AuxTransaction, copy_aux_pages};
use crate::caps::PmuCaps;
use crate::error::{Error, Result};
use crate::pmu::{EventInfo, Platform, Pmu, ef};
use crate::ring::{FixedEvent, OutputSink, Ring};

/// A PT-style PMU for one CPU, tracing into the AUX buffer of `O`.
pub struct PtPmu<'x, O> {
    hw: &'x dyn TraceHw,
    phys: &'x dyn PhysMap,
    /// Borrowed mutably only by `reset_markers`, inside `start_tracing`
    /// while `busy` is set; the PMI entries return early while `busy` is
    /// set, so no borrow of it ever fails.
    topa: RefCell<Topa<'x>>,
    /// The AUX buffer and its transactions.
    output: O,
    /// The open AUX transaction (`pt->handle`), if any.
    txn: Cell<Option<AuxTransaction>>,
    /// The driver is opening or ending the transaction, or copying a
    /// snapshot, with tracing off: a PMI that arrives then has nothing to
    /// collect and returns (Linux has no such PMI: a snapshot buffer has no
    /// INT regions; a spurious one must not end the transaction under the
    /// copy).
    busy: Cell<bool>,
    /// PT started on this CPU: PMIs are handled and snapshots restart tracing.
    handle_nmi: Cell<bool>,
    /// A pause (`stop(PAUSE)` from a sampler's overflow) may stop the
    /// hardware: cleared while `snapshot_aux` copies and after a stop, so
    /// that a pause racing with them does not touch the tracer (6.12).
    pause_allowed: Cell<bool>,
    /// A resume (`start(RESUME)`) may start the hardware: cleared while
    /// `snapshot_aux` copies, after a stop, and when a PMI cannot restart.
    resume_allowed: Cell<bool>,
    /// `hw.aux_paused` as the last `start`/`add` saw it: a snapshot's
    /// restart leaves a paused trace off.
    paused: Cell<bool>,
    /// `RTIT_STATUS.Error` seen by the PMI handler (Linux logs "ToPA ERROR
    /// encountered, trying to recover" and clears the bit).
    errors: Cell<u64>,
    /// Single-range output (a 1-page snapshot buffer, as Linux since
    /// ce0d998be927) instead of ToPA.
    single: bool,
    /// `buf->head`: the position at the last update (writable mode).
    head: Cell<u64>,
    /// `buf->data_size`: bytes written since the transaction began.
    data_size: Cell<u64>,
    /// `buf->wrapped`: the software advanced past the last region.
    wrapped: Cell<bool>,
    /// The event is stopped (`PERF_HES_STOPPED`): no restart after a PMI.
    stopped: Cell<bool>,
    /// The event's configuration (`pt_config`'s RTIT_CTL fields), from its
    /// `attr.config` at `add`.
    config: Cell<PtConfig>,
}

impl<'x, 'a> PtPmu<'x, AreaOutput<'x, 'a>> {
    /// A PMU tracing through `topa` (built over `area`'s pages) with `hw`,
    /// writing `PERF_RECORD_AUX` for `record_event` into `ring`. `EINVAL`
    /// if the tables do not cover the area.
    pub fn new(
        hw: &'x dyn TraceHw,
        phys: &'x dyn PhysMap,
        topa: Topa<'x>,
        area: &'x AuxArea<'a, ()>,
        ring: &'x Ring<'a>,
        record_event: FixedEvent,
    ) -> Result<Self> {
        PtPmu::with_output(hw, phys, topa, AreaOutput::new(area, ring, record_event))
    }

    /// The same PMU, stamping the `sample_id` trailer of its
    /// `PERF_RECORD_AUX` records with `platform`'s current task, clock and
    /// CPU at the time each record is written.
    pub fn with_platform(self, platform: &'x dyn Platform) -> Self {
        PtPmu {
            output: self.output.with_platform(platform),
            ..self
        }
    }
}

impl<'x, O: AuxOutput> PtPmu<'x, O> {
    /// A PMU tracing through `topa` (built over `output`'s pages) with `hw`.
    /// `EINVAL` if the tables do not cover the buffer.
    pub fn with_output(
        hw: &'x dyn TraceHw,
        phys: &'x dyn PhysMap,
        topa: Topa<'x>,
        output: O,
    ) -> Result<Self> {
        if topa.size() != output.size() {
            return Err(Error::Invalid);
        }
        Ok(PtPmu {
            hw,
            phys,
            topa: RefCell::new(topa),
            single: output.is_overwrite() && output.pages().len() == 1,
            output,
            txn: Cell::new(None),
            busy: Cell::new(false),
            handle_nmi: Cell::new(false),
            pause_allowed: Cell::new(false),
            resume_allowed: Cell::new(false),
            paused: Cell::new(false),
            errors: Cell::new(0),
            head: Cell::new(0),
            data_size: Cell::new(0),
            wrapped: Cell::new(false),
            stopped: Cell::new(true),
            config: Cell::new(PtConfig::default()),
        })
    }

    /// The AUX output.
    pub fn output(&self) -> &O {
        &self.output
    }

    /// `pt_config_start`: tracing on, unless the event is paused.
    fn config_start(&self) {
        if !self.paused.get() {
            self.hw.enable();
        }
    }

    /// `pt_config_stop`: tracing off, if it is on (a PMI may have stopped
    /// it already).
    fn config_stop(&self) {
        if self.hw.enabled() {
            self.hw.disable();
        }
    }

    /// The output position as the MSRs say (`pt_read_offset`).
    fn hw_position(&self, topa: &Topa<'_>) -> TopaPosition {
        let (base, mask) = self.hw.output();
        let table = topa
            .tables()
            .iter()
            .position(|t| self.phys.to_phys(core::ptr::from_ref(t).cast()) == base)
            .unwrap_or(0);
        TopaPosition::from_mask_ptrs(table, mask)
    }

    /// The write position in the buffer, 0 up to the buffer size. A tracer
    /// that reports a position outside the tables (broken hardware) reads
    /// as the buffer start.
    fn position(&self) -> u64 {
        let size = self.output.size().max(1);
        if self.single {
            return (self.hw.output().1 >> 32) % size;
        }
        // `topa` is borrowed mutably only inside `busy` sections, which
        // the PMI entries never enter: this borrow cannot fail.
        let Ok(topa) = self.topa.try_borrow() else {
            return 0;
        };
        topa.offset_of(self.hw_position(&topa))
            .map_or(0, |o| o % size)
    }

    /// Programs the output at buffer offset `head` (`pt_buffer_reset_offsets`
    /// + `pt_config_buffer`).
    fn program_output(&self, head: u64) {
        let size = self.output.size();
        if self.single {
            let mask = 0x7f | ((size - 1) & !0x7f) | ((head & (size - 1)) << 32);
            self.hw.set_topa(false);
            if let Some(&page) = self.output.pages().first() {
                self.hw.set_output(self.phys.to_phys(page), mask);
            }
            return;
        }
        self.hw.set_topa(true);
        let Ok(topa) = self.topa.try_borrow() else {
            return; // unreachable: see `position`
        };
        let pos = topa.position_of(head);
        if let Some(table) = topa.tables().get(pos.table) {
            let base = self.phys.to_phys(core::ptr::from_ref(table).cast());
            self.hw.set_output(base, pos.mask_ptrs());
        }
    }

    /// The region entry holding buffer page `page`, and the one before it.
    fn entry_before_page(topa: &Topa<'_>, page: u64) -> (usize, usize) {
        let pos = topa.position_of(page * PAGE_SIZE as u64);
        if pos.index > 0 {
            return (pos.table, pos.index - 1);
        }
        let tables = topa.tables();
        let table = if pos.table == 0 {
            tables.len().saturating_sub(1)
        } else {
            pos.table - 1
        };
        let last = tables.get(table).map_or(0, |t| t.last as usize);
        (table, last.saturating_sub(1))
    }

    /// `pt_buffer_reset_markers`: STOP+INT on the region before the one
    /// where the consumer's data begins, INT where the consumer wants to be
    /// woken (at worst one page before the stop). `EINVAL` (TRUNCATED) when
    /// the current region cannot be filled without passing the consumer.
    fn reset_markers(&self, txn: AuxTransaction, head: u64) -> Result<()> {
        let space = txn.space;
        // Inside `start_tracing`'s busy section: nothing else borrows it.
        let Ok(mut topa) = self.topa.try_borrow_mut() else {
            return Err(Error::Busy);
        };
        let pos = topa.position_of(head);
        let region = topa.entry(pos.table, pos.index).map_or(0, |e| e.size());
        if pos.offset + space + 1 < region {
            self.output.flag(aux_flags::TRUNCATED);
            return Err(Error::Invalid);
        }
        let nr_pages = self.output.size() / PAGE_SIZE as u64;
        let mut npages = space >> 12;
        if (head + space + 1) % PAGE_SIZE as u64 == 0 {
            npages += 1;
        }
        let stop_page = ((head >> 12) + npages) & (nr_pages - 1);
        let wakeup = txn.wakeup >> 12;
        let intr_page = ((head >> 12) + npages).wrapping_sub(1).min(wakeup) & (nr_pages - 1);
        let stop = Self::entry_before_page(&topa, stop_page);
        let intr = Self::entry_before_page(&topa, intr_page);
        for t in 0..topa.tables().len() {
            let last = topa.tables().get(t).map_or(0, |table| table.last as usize);
            for i in 0..last {
                topa.mark(t, i, false, false);
            }
        }
        topa.mark(intr.0, intr.1, true, false);
        topa.mark(stop.0, stop.1, true, true);
        Ok(())
    }

    /// `pt_event_start`: opens the AUX transaction (if none is open) and
    /// starts tracing at its head; in writable mode places the markers.
    fn start_tracing(&self) -> Result<()> {
        if self.busy.replace(true) {
            return Err(Error::Busy);
        }
        let txn = match self.txn.get() {
            Some(t) => t,
            None => match self.output.begin() {
                Ok(t) => {
                    self.txn.set(Some(t));
                    t
                }
                Err(e) => {
                    self.busy.set(false);
                    return Err(e);
                }
            },
        };
        let head = txn.head;
        self.head.set(head);
        self.data_size.set(0);
        self.wrapped.set(false);
        if !self.output.is_overwrite() && self.reset_markers(txn, head).is_err() {
            self.txn.set(None);
            self.output.end(0, None);
            self.stopped.set(true);
            self.busy.set(false);
            return Err(Error::Invalid);
        }
        self.busy.set(false);
        self.program_output(head);
        self.hw.configure(self.config.get());
        self.stopped.set(false);
        // `pt_config`: resume before start, so as not to undo what a PMI
        // set; the PMI handler after the configuration is complete; pause
        // only after the start, so that its stop cannot race with it.
        self.resume_allowed.set(true);
        self.handle_nmi.set(true);
        self.config_start();
        self.pause_allowed.set(true);
        Ok(())
    }

    /// `pt_handle_status`: a STOP region left full is TRUNCATED data; the
    /// output moves past it. Returns whether the data was truncated.
    fn handle_status(&self) -> bool {
        let status = self.hw.status();
        let mut truncated = false;
        if status & STATUS_ERROR != 0 {
            // "ToPA ERROR encountered, trying to recover": counted, cleared.
            self.errors.set(self.errors.get() + 1);
        }
        if status & STATUS_STOPPED != 0 && !self.single {
            if let Ok(topa) = self.topa.try_borrow() {
                let pos = self.hw_position(&topa);
                if topa.entry(pos.table, pos.index).map(|e| e.size()) == Some(pos.offset) {
                    truncated = true;
                    let (next, wrapped) = topa.advance(pos);
                    if wrapped {
                        self.wrapped.set(true);
                    }
                    if let Some(table) = topa.tables().get(next.table) {
                        let base = self.phys.to_phys(core::ptr::from_ref(table).cast());
                        self.hw.set_output(base, next.mask_ptrs());
                    }
                }
            }
        }
        self.hw
            .set_status(status & !(STATUS_STOPPED | STATUS_ERROR));
        truncated
    }

    /// `pt_update_head`: how many bytes were written since the last update
    /// (writable mode), or the write position (snapshot mode).
    fn update_head(&self) {
        let size = self.output.size();
        let base = self.position();
        if self.output.is_overwrite() {
            self.data_size.set(base);
            return;
        }
        let old = self.head.replace(base) & (size - 1);
        let mut base = base;
        if base < old || (base == old && self.wrapped.get()) {
            base += size;
        }
        self.wrapped.set(false);
        self.data_size.set(self.data_size.get() + base - old);
    }

    /// Ends the open transaction with what was written (`pt_event_stop` with
    /// UPDATE, and the PMI handler): snapshot mode publishes the write
    /// position and the whole buffer; writable mode the new bytes.
    fn end_transaction(&self, truncated: bool) {
        // Busy: a stop reached from inside the driver's own update (an NMI
        // cannot stop PT); that update finishes the transaction.
        if self.busy.replace(true) {
            return;
        }
        if self.txn.take().is_some() {
            self.update_head();
            if truncated {
                self.output.flag(aux_flags::TRUNCATED);
            }
            let (size, head) = if self.output.is_overwrite() {
                (self.output.size(), Some(self.data_size.get()))
            } else {
                (self.data_size.get(), None)
            };
            self.data_size.set(0);
            self.output.end(size, head);
        }
        self.busy.set(false);
    }

    /// The ToPA PMI (`intel_pt_interrupt`, spec §F.7): stop, account for
    /// what was written, end the transaction (a `PERF_RECORD_AUX`), and
    /// unless the event is stopped begin a new one and trace on. Does
    /// nothing when no PT event was started here (a PMI after a stop).
    pub fn handle_pmi(&self) {
        if !self.handle_nmi.get() {
            return;
        }
        // Inside the driver's own start or end of the transaction, or a
        // snapshot's copy (see `busy`); or no transaction to collect
        // (`if (!event) return`).
        if self.busy.get() || self.txn.get().is_none() {
            return;
        }
        self.config_stop();
        let truncated = self.handle_status();
        self.end_transaction(truncated);
        if self.stopped.get() {
            return;
        }
        if self.start_tracing().is_err() {
            // No room, or the markers cannot be placed: tracing stays off,
            // and no resume may turn it on without a transaction.
            self.handle_nmi.set(false);
            self.resume_allowed.set(false);
            self.pause_allowed.set(false);
            self.stopped.set(true);
        }
    }

    /// Whether tracing stopped for good (a full area): the event layer
    /// learns it from the area's disable request too.
    pub fn is_stopped(&self) -> bool {
        self.stopped.get()
    }

    /// How many times the PMI handler found `RTIT_STATUS.Error` set (and
    /// cleared it). Linux logs each one; hardware sets it for a ToPA it
    /// cannot follow, the software tracer for a table ring without regions.
    pub fn errors(&self) -> u64 {
        self.errors.get()
    }
}

impl<O: AuxOutput> Pmu for PtPmu<'_, O> {
    fn caps(&self) -> PmuCaps {
        PmuCaps::AUX
            | PmuCaps::SNAPSHOT_AUX
            | PmuCaps::ITRACE
            | PmuCaps::EXCLUSIVE
            | PmuCaps::AUX_PAUSE
    }

    fn event_init(&self, attr: &crate::abi::PerfEventAttr) -> Result<()> {
        // `pt_event_init`: the config bits as `pt_event_valid` checks them.
        PtConfig::from_attr(attr.config).map(|_| ())
    }

    fn add(&self, event: &EventInfo<'_>, flags: u32) -> Result<()> {
        // One PT event per CPU.
        if self.busy.get() || self.txn.get().is_some() {
            return Err(Error::Busy);
        }
        // `pt_event_init` refuses what `pt_event_valid` refuses; an event
        // that got past it elsewhere is refused here.
        self.config.set(PtConfig::from_attr(event.attr.config)?);
        self.paused.set(event.aux_paused);
        if flags & ef::START != 0 {
            // A start that leaves the event stopped fails the group's schedule.
            self.start_tracing().map_err(|_| Error::Invalid)?;
        }
        Ok(())
    }

    fn del(&self, event: &EventInfo<'_>, _flags: u32) {
        self.stop(event, ef::UPDATE);
    }

    fn start(&self, event: &EventInfo<'_>, flags: u32) {
        self.paused.set(event.aux_paused);
        if flags & ef::RESUME != 0 {
            // Only a trace that is configured, and neither stopped by its
            // output nor in error, is resumed; a PMI may clear the status
            // meanwhile, so `resume_allowed` is read again.
            if self.resume_allowed.get()
                && self.hw.status() & (STATUS_STOPPED | STATUS_ERROR) == 0
                && self.resume_allowed.get()
            {
                self.config_start();
            }
            return;
        }
        let _ = self.start_tracing();
    }

    fn stop(&self, event: &EventInfo<'_>, flags: u32) {
        if flags & ef::PAUSE != 0 {
            // Pause: the hardware stops; the transaction stays open.
            self.paused.set(event.aux_paused);
            if self.pause_allowed.get() {
                self.config_stop();
            }
            return;
        }
        // `handle_nmi` first, so that a PMI racing with the stop does not
        // restart tracing; then no pause or resume touches the tracer, and
        // `snapshot_aux` (which checks `handle_nmi`) will not re-allow them.
        self.handle_nmi.set(false);
        self.pause_allowed.set(false);
        self.resume_allowed.set(false);
        self.config_stop();
        self.stopped.set(true);
        if flags & ef::UPDATE != 0 {
            self.end_transaction(false);
        }
    }

    fn snapshot_aux(&self, _event: &EventInfo<'_>, sink: &mut dyn OutputSink, size: u64) -> i64 {
        // No transaction open on this CPU, or a writable buffer: Linux WARNs
        // and copies nothing (spec H.4 C10, C11). Inside the driver's own
        // update (`busy`) there is nothing consistent to copy either.
        if self.busy.get() || self.txn.get().is_none() || size == 0 || !self.output.is_overwrite() {
            return 0;
        }
        self.busy.set(true);
        // No pause or resume touches the tracer while the bytes are copied.
        self.pause_allowed.set(false);
        self.resume_allowed.set(false);
        // Unconditionally (d92792a4b26e): stop, so the bytes are in memory.
        self.config_stop();
        let to = self.position();
        let bufsize = self.output.size();
        let size = size.min(bufsize);
        // (An output without pages has no transaction: bufsize is not 0.)
        let from = (to + bufsize - size).checked_rem(bufsize).unwrap_or(0);
        // SAFETY: the pages are valid while the transaction is open (the
        // `AuxOutput` contract) and the tracer is stopped for the copy.
        let n = match unsafe { copy_aux_pages(self.output.pages(), sink, from, to) } {
            Ok(n) => n as i64,
            Err(e) => i64::from(e.errno()),
        };
        self.busy.set(false);
        // `handle_nmi` says whether tracing was on: restart it (unless the
        // event is paused), re-allowing resume before and pause after.
        if self.handle_nmi.get() {
            self.resume_allowed.set(true);
            self.config_start();
            self.pause_allowed.set(true);
        }
        n
    }
}
