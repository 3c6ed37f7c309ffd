// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PT-style PMU of one CPU (`pt_buffer_setup_aux` to `pt_event_snapshot_aux`
//! in `arch/x86/events/intel/pt.c`): the AUX transaction it
//! holds while tracing, ToPA output (single-range output for a 1-page
//! snapshot buffer, as Linux), `snapshot_aux` exactly as Linux's
//! `pt_event_snapshot_aux` after the 2024 synchronization fix (stop
//! tracing, read the position, copy the newest bytes ending there with
//! `copy_aux`, restart only if tracing was on, change no event state), and
//! for writable (full-trace) areas the STOP/INT markers and the PMI handler.
//!
//! The driver's state is split as Intel PT's is: this per-CPU object, and
//! one [`PtBuffer`] per AUX buffer, reached only through the open AUX
//! transaction. The transactions are an [`AuxOutput`]: perfaux's own area
//! ([`AreaOutput`], what [`PtPmu::new`] takes) or a kernel's.

use super::buffer::PtBuffer;
use super::config::PtConfig;
use super::hw::{STATUS_ERROR, STATUS_STOPPED, TraceHw};
use super::topa::{PhysMap, Topa, TopaPosition, TopaTable};
use crate::abi::{PAGE_SIZE, aux_flags};
use crate::aux::{AreaOutput, AuxArea, AuxOutput, AuxTransaction, copy_aux_pages};
use crate::caps::PmuCaps;
use crate::error::{Error, Result};
use crate::pmu::{EventInfo, Platform, Pmu, ef};
use crate::ring::{FixedEvent, OutputSink, Ring};
use crate::sync::{LocalBool, LocalPtr, LocalU64, barrier};
use crate::warn_on_once;

/// The PT driver of one CPU (Linux's per-CPU `struct pt`), tracing into
/// the AUX buffer its open transaction holds.
///
/// It holds its seams by value: the tracer `H` (the MSRs) and the address
/// map `P`, each a type the compiler sees through, so that driving them
/// costs no indirect call (a borrow works too: `&SoftTracer`, or `&dyn
/// TraceHw` where one driver serves several tracers). Its own methods
/// ([`add`](Self::add), [`start`](Self::start), [`stop`](Self::stop),
/// [`del`](Self::del), [`snapshot_aux`](Self::snapshot_aux)) take what
/// `pt.c`'s callbacks read of the event and nothing else; its [`Pmu`]
/// implementation is the adapter the event layer calls.
///
/// Every field is a same-CPU word: task context (the PMU callbacks, with
/// interrupts masked) and the PMI on this CPU both touch them, with the
/// `WRITE_ONCE` + `barrier()` discipline of `pt.c`.
///
/// The crate's front page sets one up over an AUX area and takes a
/// snapshot ([Quick start](crate#quick-start)), and runs it as the leader
/// of a sampling group ([An AUX sample, end to end](crate#an-aux-sample-end-to-end));
/// `tests/tests/pt_lifetime.rs` drives it through a kernel-style AUX output.
///
/// # Invariants
/// `buffer` is non-null exactly between a successful `output.begin()` and
/// the matching `output.end()`, and then points to the buffer that `begin`
/// returned, valid until that `end` (the [`AuxOutput`] contract). It is
/// cleared before `end` is called, so no path reaches a buffer whose
/// transaction ended: the driver holds no buffer past `free_aux`.
pub struct PtPmu<'x, O: AuxOutput<Buffer = PtBuffer<'x>>, H: TraceHw, P: PhysMap> {
    /// The tracer's MSRs.
    hw: H,
    /// Physical addresses of the tables and pages, as the MSRs take them.
    phys: P,
    /// The transactions on the AUX buffer of the event running here.
    output: O,
    /// The buffer of the open AUX transaction (`perf_get_aux(&pt->handle)`),
    /// or null: none. Written by the transaction's begin and end (task
    /// context or the PMI), read by every entry.
    buffer: LocalPtr<PtBuffer<'x>>,
    /// The driver is opening or ending the transaction, or copying a
    /// snapshot, with tracing off: a PMI that arrives then has nothing to
    /// collect and returns (Linux has no such PMI: a snapshot buffer has no
    /// INT regions; a spurious one must not end the transaction under the
    /// copy).
    busy: LocalBool,
    /// PT started on this CPU: PMIs are handled and snapshots restart
    /// tracing (`pt->handle_nmi`).
    handle_nmi: LocalBool,
    /// A pause (`stop(PAUSE)` from a sampler's overflow) may stop the
    /// hardware: cleared while `snapshot_aux` copies and after a stop, so
    /// that a pause racing with them does not touch the tracer (6.12's
    /// `pt->pause_allowed`).
    pause_allowed: LocalBool,
    /// A resume (`start(RESUME)`) may start the hardware: cleared while
    /// `snapshot_aux` copies, after a stop, and when a PMI cannot restart
    /// (`pt->resume_allowed`).
    resume_allowed: LocalBool,
    /// `hw.aux_paused` as the last `start`/`add` saw it: a snapshot's
    /// restart leaves a paused trace off.
    paused: LocalBool,
    /// `RTIT_STATUS.Error` seen by the PMI handler (Linux logs "ToPA ERROR
    /// encountered, trying to recover" and clears the bit).
    errors: LocalU64,
    /// The event is stopped (`PERF_HES_STOPPED`): no restart after a PMI.
    stopped: LocalBool,
    /// The event's configuration as `RTIT_CTL` fields (`pt_config`), from
    /// its `attr.config` at `add`.
    config: LocalU64,
    /// The id of the event on this CPU (from `add`), plus one.
    event: LocalU64,
    /// The id, plus one, of the event last configured here (0: none).
    /// `pt_config` clears `RTIT_STATUS` (the PSB byte counter) at an
    /// event's first configuration (`hw.aux_config` still 0), so its trace
    /// starts with a PSB+. perfaux keeps that per CPU: an event's first
    /// start on a CPU after another event ran there is a first round too.
    configured: LocalU64,
}

/// The PT driver of one CPU tracing into perfaux's own AUX area.
pub type AreaPtPmu<'x, 'a, H, P> = PtPmu<'x, AreaOutput<'x, 'a, PtBuffer<'x>>, H, P>;

impl<'x, 'a, H: TraceHw, P: PhysMap> AreaPtPmu<'x, 'a, H, P> {
    /// A PMU tracing with `hw` into `buffer` (built over `area`'s pages),
    /// writing `PERF_RECORD_AUX` for `record_event` into `ring`. `EINVAL`
    /// if `buffer` is not over `area`'s pages, in `area`'s mode.
    pub fn new(
        hw: H,
        phys: P,
        buffer: &'x PtBuffer<'x>,
        area: &'x AuxArea<'a>,
        ring: &'x Ring<'a>,
        record_event: FixedEvent,
    ) -> Result<Self> {
        if buffer.pages() != area.pages() || buffer.is_overwrite() != area.is_overwrite() {
            return Err(Error::Invalid);
        }
        Ok(PtPmu::with_output(
            hw,
            phys,
            AreaOutput::new(area, ring, record_event, buffer),
        ))
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

impl<'x, O: AuxOutput<Buffer = PtBuffer<'x>>, H: TraceHw, P: PhysMap> PtPmu<'x, O, H, P> {
    /// The driver of one CPU tracing with `hw`, its transactions (and
    /// through them the buffers it traces into) from `output`.
    pub fn with_output(hw: H, phys: P, output: O) -> Self {
        // INVARIANT: no transaction is open.
        PtPmu {
            hw,
            phys,
            output,
            buffer: LocalPtr::null(),
            busy: LocalBool::new(false),
            handle_nmi: LocalBool::new(false),
            pause_allowed: LocalBool::new(false),
            resume_allowed: LocalBool::new(false),
            paused: LocalBool::new(false),
            errors: LocalU64::new(0),
            stopped: LocalBool::new(true),
            config: LocalU64::new(PtConfig::default().rtit_ctl()),
            event: LocalU64::new(0),
            configured: LocalU64::new(0),
        }
    }

    /// The AUX output.
    pub fn output(&self) -> &O {
        &self.output
    }

    /// The tracer this driver programs.
    pub fn hw(&self) -> &H {
        &self.hw
    }

    /// Whether an AUX transaction is open on this CPU (`pt->handle.event`).
    pub fn in_transaction(&self) -> bool {
        !self.buffer.load().is_null()
    }

    /// The buffer of the open transaction (`perf_get_aux`).
    ///
    /// The reference must not be used after the transaction ends (after
    /// `output.end`): every caller drops it before ending.
    fn buffer(&self) -> Option<&PtBuffer<'x>> {
        let p = self.buffer.load();
        // SAFETY: non-null only while the transaction that returned it is
        // open, during which it is valid (the invariant); callers drop the
        // reference before they end the transaction.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Enters the busy section; `false` if the driver is in it already (a
    /// PMI, or a nested call, inside its own update).
    fn enter_busy(&self) -> bool {
        if self.busy.load() {
            return false;
        }
        // A PMI between the load and the store runs to completion first.
        self.busy.store(true);
        barrier();
        true
    }

    /// Leaves the busy section.
    fn leave_busy(&self) {
        barrier();
        self.busy.store(false);
    }

    /// `pt_config_start`: tracing on, unless the event is paused.
    fn config_start(&self) {
        if !self.paused.load() {
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

    /// The output position as the MSRs say (`pt_read_offset`): which table
    /// `OUTPUT_BASE` names, and the entry and offset in it. `None` for a
    /// table that is not the buffer's (broken hardware, or a driver bug).
    ///
    /// The table is found as `pt_read_offset` finds it, from
    /// `phys_to_virt(OUTPUT_BASE)`: the tables are one slice, so its index
    /// is the distance from the first, checked against `to_phys` of the
    /// table found. Only where the map does not give the slice's own
    /// address back (tables in memory with a second mapping, such as
    /// vmalloc's) are the tables searched one by one.
    fn hw_position(&self, topa: &Topa<'_>) -> Option<TopaPosition> {
        let (base, mask) = self.hw.output();
        let tables = topa.tables();
        let is_base = |t: &TopaTable| self.phys.to_phys(core::ptr::from_ref(t).cast()) == base;
        let distance = (self.phys.to_virt(base) as usize).wrapping_sub(tables.as_ptr() as usize);
        let guess = distance / core::mem::size_of::<TopaTable>();
        let table = match tables.get(guess) {
            Some(t) if distance % core::mem::size_of::<TopaTable>() == 0 && is_base(t) => guess,
            _ => tables.iter().position(is_base)?,
        };
        Some(TopaPosition::from_mask_ptrs(table, mask))
    }

    /// The write position in `buf`, 0 up to its size. A tracer that reports
    /// a position outside the tables reads as the buffer start (warned).
    fn position(&self, buf: &PtBuffer<'_>) -> u64 {
        if buf.is_single_range() {
            return (self.hw.output().1 >> 32) & buf.mask();
        }
        // SAFETY: this driver holds `buf`'s transaction (it came from
        // `self.buffer`) and takes no `&mut` to the tables here.
        let topa = unsafe { buf.topa() };
        let offset = self.hw_position(topa).and_then(|p| topa.offset_of(p));
        if warn_on_once!(
            offset.is_none(),
            "PT output position outside the buffer's tables"
        ) {
            return 0;
        }
        offset.unwrap_or(0) & buf.mask()
    }

    /// Programs the output at `buf` offset `head` (`pt_buffer_reset_offsets`
    /// + `pt_config_buffer`).
    fn program_output(&self, buf: &PtBuffer<'_>, head: u64) {
        let size = buf.size();
        if buf.is_single_range() {
            let mask = 0x7f | ((size - 1) & !0x7f) | ((head & (size - 1)) << 32);
            self.hw.set_topa(false);
            if let Some(&page) = buf.pages().first() {
                self.hw.set_output(self.phys.to_phys(page), mask);
            }
            return;
        }
        self.hw.set_topa(true);
        // SAFETY: as in `position`.
        let topa = unsafe { buf.topa() };
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
    ///
    /// # Safety
    /// Inside the busy section, holding `buf`'s transaction.
    unsafe fn reset_markers(&self, buf: &PtBuffer<'_>, txn: AuxTransaction) -> Result<()> {
        let (head, space) = (txn.head, txn.space);
        // SAFETY: the caller's contract: in the busy section, which no PMI
        // entry enters, with `buf`'s transaction; the only reference.
        let topa = unsafe { buf.topa_mut() };
        let pos = topa.position_of(head);
        let region = topa.entry(pos.table, pos.index).map_or(0, |e| e.size());
        if pos.offset + space + 1 < region {
            self.output.flag(aux_flags::TRUNCATED);
            return Err(Error::Invalid);
        }
        let nr_pages = buf.size() / PAGE_SIZE as u64;
        // The STOP goes on the region before the page holding the first
        // byte the tracer must not write (`head + space + 1`, the consumer's
        // tail a whole buffer on). Linux counts `(head >> PAGE_SHIFT) +
        // (size >> PAGE_SHIFT)` (+1 when that byte starts a page), the same
        // page when `head` is page-aligned, one page short when it is not
        // (a PMI's skid, a restart after a stop); when `space` is under a
        // page that puts the STOP on the region the tracer has just left,
        // and it overwrites unread data until it wraps round to it. perfaux
        // counts from the byte (a deliberate deviation, see the README).
        let stop_abs = (head + space + 1) >> 12;
        let stop_page = stop_abs & (nr_pages - 1);
        let wakeup = txn.wakeup >> 12;
        let intr_page = stop_abs.wrapping_sub(1).min(wakeup) & (nr_pages - 1);
        let stop = Self::entry_before_page(topa, stop_page);
        let intr = Self::entry_before_page(topa, intr_page);
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

    /// Opens the transaction (`perf_aux_output_begin` in `pt_event_start`),
    /// resets the buffer's accounting and places the markers (writable
    /// mode). Inside the busy section; on failure no transaction is open.
    fn begin_transaction(&self) -> Result<()> {
        let (txn, buf) = self.output.begin()?;
        // SAFETY: valid until the matching `end` (the AuxOutput contract);
        // the reference is dropped before it is called below.
        let buf_ref = unsafe { buf.as_ref() };
        if warn_on_once!(!buf_ref.hold(), "a second AUX transaction on one PT buffer") {
            // A broken output: end the transaction without touching the
            // buffer another holder owns.
            self.output.end(0, None);
            return Err(Error::Busy);
        }
        // INVARIANT: `buffer` is set right after a successful `begin`.
        self.buffer.store(buf.as_ptr());
        buf_ref.head.store(txn.head);
        buf_ref.data_size.store(0);
        buf_ref.wrapped.store(false);
        // SAFETY: in the busy section (the caller's), holding the transaction.
        if !buf_ref.is_overwrite() && unsafe { self.reset_markers(buf_ref, txn) }.is_err() {
            self.finish_transaction(buf_ref, 0, None);
            return Err(Error::Invalid);
        }
        self.program_output(buf_ref, txn.head);
        Ok(())
    }

    /// Ends the open transaction on `buf` with `size` bytes (and, in
    /// overwrite mode, the head at `snapshot_head`): clears `buffer` first,
    /// so that nothing reaches `buf` once the kernel may free it.
    fn finish_transaction(&self, buf: &PtBuffer<'_>, size: u64, snapshot_head: Option<u64>) {
        buf.data_size.store(0);
        buf.release();
        // INVARIANT: `buffer` is cleared before the matching `end`.
        self.buffer.store(core::ptr::null_mut());
        barrier();
        self.output.end(size, snapshot_head);
    }

    /// `pt_event_start`: opens the AUX transaction (if none is open) and
    /// starts tracing at its head; in writable mode places the markers.
    fn start_tracing(&self) -> Result<()> {
        if !self.enter_busy() {
            return Err(Error::Busy);
        }
        // A transaction still open (a stop without UPDATE) is traced on from
        // where its output stands.
        let opened = if self.in_transaction() {
            Ok(())
        } else {
            self.begin_transaction()
        };
        self.leave_busy();
        if let Err(e) = opened {
            self.stopped.store(true);
            return Err(e);
        }
        self.hw
            .configure(PtConfig::from_rtit_ctl(self.config.load()));
        // "First round: clear STATUS, in particular the PSB byte counter."
        if self.configured.load() != self.event.load() {
            self.hw.set_status(0);
            self.configured.store(self.event.load());
        }
        self.stopped.store(false);
        // `pt_config`: resume before start, so as not to undo what a PMI
        // set; the PMI handler after the configuration is complete; pause
        // only after the start, so that its stop cannot race with it.
        self.resume_allowed.store(true);
        barrier();
        self.handle_nmi.store(true);
        barrier();
        self.config_start();
        barrier();
        self.pause_allowed.store(true);
        Ok(())
    }

    /// `pt_handle_status`: a STOP region left full is TRUNCATED data; the
    /// output moves past it. Returns whether the data was truncated.
    fn handle_status(&self, buf: &PtBuffer<'_>) -> bool {
        let status = self.hw.status();
        let mut truncated = false;
        if status & STATUS_ERROR != 0 {
            // "ToPA ERROR encountered, trying to recover": counted, cleared.
            self.errors.store(self.errors.load() + 1);
        }
        if status & STATUS_STOPPED != 0 && !buf.is_single_range() {
            // SAFETY: this driver holds `buf`'s transaction; no `&mut` to the
            // tables exists outside the busy section.
            let topa = unsafe { buf.topa() };
            if let Some(pos) = self.hw_position(topa) {
                if topa.entry(pos.table, pos.index).map(|e| e.size()) == Some(pos.offset) {
                    truncated = true;
                    let (next, wrapped) = topa.advance(pos);
                    if wrapped {
                        buf.wrapped.store(true);
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
    fn update_head(&self, buf: &PtBuffer<'_>) {
        let size = buf.size();
        let base = self.position(buf);
        if buf.is_overwrite() {
            buf.data_size.store(base);
            return;
        }
        let old = buf.head.load() & (size - 1);
        buf.head.store(base);
        let mut base = base;
        if base < old || (base == old && buf.wrapped.load()) {
            base += size;
        }
        buf.wrapped.store(false);
        buf.data_size.store(buf.data_size.load() + base - old);
    }

    /// Ends the open transaction with what was written (`pt_event_stop` with
    /// UPDATE, and the PMI handler): snapshot mode publishes the write
    /// position and the whole buffer; writable mode the new bytes.
    fn end_transaction(&self, truncated: bool) {
        // Busy: a stop reached from inside the driver's own update (an NMI
        // cannot stop PT); that update finishes the transaction.
        if !self.enter_busy() {
            return;
        }
        if let Some(buf) = self.buffer() {
            self.update_head(buf);
            if truncated {
                self.output.flag(aux_flags::TRUNCATED);
            }
            let (size, head) = if buf.is_overwrite() {
                (buf.size(), Some(buf.data_size.load()))
            } else {
                (buf.data_size.load(), None)
            };
            // `buf` is not used past this call.
            self.finish_transaction(buf, size, head);
        }
        self.leave_busy();
    }

    /// The ToPA PMI (`intel_pt_interrupt`): stop, account for
    /// what was written, end the transaction (a `PERF_RECORD_AUX`), and
    /// unless the event is stopped begin a new one and trace on. Does
    /// nothing when no PT event was started here (a PMI after a stop).
    pub fn handle_pmi(&self) {
        if !self.handle_nmi.load() {
            return;
        }
        // Inside the driver's own start or end of the transaction, or a
        // snapshot's copy (see `busy`); or no transaction to collect
        // (`if (!event) return` and `buf = perf_get_aux(); if (!buf) return`).
        if self.busy.load() {
            return;
        }
        let Some(buf) = self.buffer() else {
            return;
        };
        self.config_stop();
        let truncated = self.handle_status(buf);
        self.end_transaction(truncated);
        if self.stopped.load() {
            return;
        }
        if self.start_tracing().is_err() {
            // No room, or the markers cannot be placed: tracing stays off,
            // and no resume may turn it on without a transaction.
            self.handle_nmi.store(false);
            self.resume_allowed.store(false);
            self.pause_allowed.store(false);
            self.stopped.store(true);
        }
    }

    /// Whether tracing stopped for good (a full area): the event layer
    /// learns it from the area's disable request too.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load()
    }

    /// How many times the PMI handler found `RTIT_STATUS.Error` set (and
    /// cleared it). Linux logs each one; hardware sets it for a ToPA it
    /// cannot follow, the software tracer for a table ring without regions.
    pub fn errors(&self) -> u64 {
        self.errors.load()
    }
}

impl<'x, O: AuxOutput<Buffer = PtBuffer<'x>>, H: TraceHw, P: PhysMap> PtPmu<'x, O, H, P> {
    /// `pt_event_add`: the event `id` with `attr.config` `config` comes to
    /// this CPU; with [`ef::START`] tracing starts (unless `aux_paused`).
    /// `EBUSY` while another PT event is here, `EINVAL` for a configuration
    /// `pt_event_valid` refuses or a start that leaves the event stopped.
    pub fn add(&self, id: u64, config: u64, aux_paused: bool, flags: u32) -> Result<()> {
        // One PT event per CPU (`if (pt->handle.event) goto fail`).
        if self.busy.load() || self.in_transaction() {
            return Err(Error::Busy);
        }
        // `pt_event_init` refuses what `pt_event_valid` refuses; an event
        // that got past it elsewhere is refused here.
        self.config.store(PtConfig::from_attr(config)?.rtit_ctl());
        self.paused.store(aux_paused);
        self.event.store(id.wrapping_add(1));
        if flags & ef::START != 0 {
            // A start that leaves the event stopped fails the group's schedule.
            self.start_tracing().map_err(|_| Error::Invalid)?;
        }
        Ok(())
    }

    /// `pt_event_del`: a stop with [`ef::UPDATE`].
    pub fn del(&self) {
        self.stop(false, ef::UPDATE);
    }

    /// `pt_event_start`: with [`ef::RESUME`], a paused trace goes on
    /// (unless `aux_paused`); otherwise the AUX transaction opens and
    /// tracing starts (a start that cannot trace leaves the event stopped).
    pub fn start(&self, aux_paused: bool, flags: u32) {
        self.paused.store(aux_paused);
        if flags & ef::RESUME != 0 {
            // Only a trace that is configured, and neither stopped by its
            // output nor in error, is resumed; a PMI may clear the status
            // meanwhile, so `resume_allowed` is read again (the two
            // READ_ONCEs of `pt_event_start`).
            if self.resume_allowed.load() {
                barrier();
                if self.hw.status() & (STATUS_STOPPED | STATUS_ERROR) == 0 {
                    barrier();
                    if self.resume_allowed.load() {
                        self.config_start();
                    }
                }
            }
            return;
        }
        // A start that cannot trace leaves the event stopped.
        let _ = self.start_tracing();
    }

    /// `pt_event_stop`: with [`ef::PAUSE`], tracing pauses (`aux_paused`
    /// as the event layer set it) and the transaction stays open; otherwise
    /// tracing stops, and with [`ef::UPDATE`] the transaction ends with
    /// what was written.
    pub fn stop(&self, aux_paused: bool, flags: u32) {
        if flags & ef::PAUSE != 0 {
            // Pause: the hardware stops; the transaction stays open.
            self.paused.store(aux_paused);
            if self.pause_allowed.load() {
                self.config_stop();
            }
            return;
        }
        // `handle_nmi` first, so that a PMI racing with the stop does not
        // restart tracing; then no pause or resume touches the tracer, and
        // `snapshot_aux` (which checks `handle_nmi`) will not re-allow them
        // (`pt_event_stop`: WRITE_ONCE(pt->handle_nmi, 0); barrier()).
        self.handle_nmi.store(false);
        barrier();
        self.pause_allowed.store(false);
        self.resume_allowed.store(false);
        barrier();
        self.config_stop();
        self.stopped.store(true);
        if flags & ef::UPDATE != 0 {
            self.end_transaction(false);
        }
    }

    /// `pt_event_snapshot_aux`: copies the newest `size` bytes of the
    /// snapshot buffer's trace into `sink` (a sample's AUX block), from PMI
    /// context, leaving the trace undisturbed. Returns the bytes copied: 0
    /// with no snapshot buffer here, or inside the driver's own update.
    pub fn snapshot_aux(&self, sink: &mut dyn OutputSink, size: u64) -> Result<u64> {
        // Inside the driver's own update there is nothing consistent to copy.
        if size == 0 || self.busy.load() {
            return Ok(0);
        }
        // No transaction open here, or a writable buffer: nothing to copy.
        // `pt_event_snapshot_aux` WARNs at both, but a
        // user reaches them: an AUX munmap stops the event before it frees
        // the buffer, and a sampler overflowing in between still asks; a
        // sampler may sit under a writable AUX area. No warning, then.
        let Some(buf) = self.buffer() else {
            return Ok(0);
        };
        if !buf.is_overwrite() {
            return Ok(0);
        }
        if !self.enter_busy() {
            return Ok(0);
        }
        // No pause or resume touches the tracer while the bytes are copied.
        self.pause_allowed.store(false);
        self.resume_allowed.store(false);
        barrier();
        // Unconditionally (d92792a4b26e): stop, so the bytes are in memory.
        self.config_stop();
        let to = self.position(buf);
        let bufsize = buf.size();
        let size = size.min(bufsize);
        let from = (to + bufsize - size) & buf.mask();
        // SAFETY: the pages are valid while the transaction is open (the
        // buffer's invariants) and the tracer is stopped for the copy.
        let n = unsafe { copy_aux_pages(buf.pages(), sink, from, to) };
        self.leave_busy();
        // `handle_nmi` says whether tracing was on: restart it (unless the
        // event is paused), re-allowing resume before and pause after.
        if self.handle_nmi.load() {
            self.resume_allowed.store(true);
            barrier();
            self.config_start();
            barrier();
            self.pause_allowed.store(true);
        }
        n
    }
}

/// The event layer's view of the driver: each callback passes on what the
/// driver reads of the event.
impl<'x, O: AuxOutput<Buffer = PtBuffer<'x>>, H: TraceHw, P: PhysMap> Pmu for PtPmu<'x, O, H, P> {
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
        PtPmu::add(self, event.id, event.attr.config, event.aux_paused, flags)
    }

    fn del(&self, _event: &EventInfo<'_>, _flags: u32) {
        PtPmu::del(self);
    }

    fn start(&self, event: &EventInfo<'_>, flags: u32) {
        PtPmu::start(self, event.aux_paused, flags);
    }

    fn stop(&self, event: &EventInfo<'_>, flags: u32) {
        PtPmu::stop(self, event.aux_paused, flags);
    }

    fn snapshot_aux(
        &self,
        _event: &EventInfo<'_>,
        sink: &mut dyn OutputSink,
        size: u64,
    ) -> Result<u64> {
        PtPmu::snapshot_aux(self, sink, size)
    }
}
