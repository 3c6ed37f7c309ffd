// SPDX-License-Identifier: MIT OR Apache-2.0
//! Where the tracer's packets go: the output position the driver
//! programmed, the write window ahead of it and the commit that makes a
//! write visible to a PMI ([`SoftTracer::commit`]), the walk through the
//! ToPA tables region by region (END links, INT and STOP regions), and a
//! write's [`Output`], which hands each trace event's packets to them whole
//! or not at all.

use crate::pt::hw::{STATUS_ERROR, STATUS_STOPPED};
use crate::pt::topa::{TENTS_PER_PAGE, TopaEntry, TopaPosition, TopaTable};
use crate::soft_pt::stream::PacketSink;
use crate::sync::{barrier, copy_to_memory};

use super::{Hooks, PAD_FILL, SoftTracer, UNIT_CAP};

impl<K: Hooks> SoftTracer<'_, K> {
    /// Writes one unit of packets at the output position: all of it, or,
    /// when it does not fit before the end of a STOP region, PAD up to that
    /// end and none of it. Returns whether the unit was written.
    #[inline]
    pub(super) fn emit(&self, bytes: &[u8]) -> bool {
        if !self.tracing() {
            return false;
        }
        let (dst, room, mark) = self.window();
        if (bytes.len() as u64) < room {
            // SAFETY: the window holds more than `bytes.len()` bytes
            // (`open_window`), memory the driver handed to the tracer, which
            // `bytes` (the tracer's unit buffer or a constant) does not
            // overlap.
            unsafe { copy_to_memory(dst, bytes) };
            if self.commit(mark, dst, bytes.len()) {
                self.window.store(dst.wrapping_add(bytes.len()));
                self.window_room.store(room - bytes.len() as u64);
                return true;
            }
            // A PMI moved the output meanwhile: write the unit again where
            // the output is now.
        }
        let written = self.emit_slow(bytes);
        self.open_window();
        written
    }

    /// The write window: where it is, the bytes it holds (0 when it was
    /// closed, or opened in an earlier output generation) and the mark a
    /// write into it commits with.
    #[inline]
    pub(super) fn window(&self) -> (*mut u8, u64, WindowMark) {
        let generation = self.settled_generation();
        let mark = WindowMark {
            generation,
            mask_ptrs: self.regs.mask_ptrs(),
        };
        let room = if self.window_gen.load() == mark.generation {
            self.window_room.load()
        } else {
            0
        };
        (self.window.load(), room, mark)
    }

    /// The `n` bytes at `at`, the start of the window `mark` names, were
    /// written, fewer than it holds: the output position moves past them,
    /// the tap sees them, and the interrupt hook may run (a PMI after a
    /// piece written); the caller moves the window on. `false`, with
    /// nothing done, when a PMI has written the output MSRs since the mark
    /// was taken: the window is gone, and the bytes must be written again
    /// where the output is now.
    ///
    /// A PMI may arrive anywhere in a write, the hardware's never can:
    /// this is where the write becomes visible, at once. The output
    /// position (`MASK_PTRS`) moves by one plain store, which a PMI sees
    /// entirely done or not at all: inside a write, a PMI never stores into
    /// the output registers (its `set_output` is deferred, and it reads a
    /// view frozen where the first PMI found the output; see
    /// [`OutputRegs`]). The generation read after the store says whether a
    /// PMI came since the mark; if one did, [`OutputRegs::resolve`] says
    /// whether it saw the event (then the event is out) or came before the
    /// store (then the event follows it, or goes round again when the PMI
    /// moved the output or left tracing off). The window's own fields are
    /// the writer's alone, so a PMI landing between the two can never make
    /// the window look larger than it is: its `generation` step leaves it
    /// stale.
    #[inline]
    pub(super) fn commit(&self, mark: WindowMark, at: *mut u8, n: usize) -> bool {
        if !self.commit_at(mark, n, || {}) {
            return false;
        }
        // SAFETY: the `n` bytes at `at` were just written by this tracer,
        // which nothing else writes meanwhile (the region is the tracer's);
        // the view ends with this call.
        self.written_piece(unsafe { core::slice::from_raw_parts(at.cast_const(), n) });
        self.hooks.interrupt();
        true
    }

    /// The protocol of [`commit`](Self::commit): the output position moves
    /// past the `n` bytes written at the start of the window `mark` names;
    /// `false`, with nothing done, when a PMI since the mark keeps them out.
    /// Calls `interrupted` if a PMI came since the mark, whether the bytes
    /// are out or not. Counting the bytes and telling the hooks are the
    /// caller's.
    #[inline(always)]
    pub(super) fn commit_at(&self, mark: WindowMark, n: usize, interrupted: impl FnOnce()) -> bool {
        // The offset (bits 63:32) stays inside the region: no carry.
        let moved = mark.mask_ptrs + ((n as u64) << 32);
        self.regs.publish(moved);
        // Pairs with `next_generation`: a driver write since the mark was
        // taken moved it (the barrier in `publish` orders the load).
        if self.generation.load() != mark.generation {
            interrupted();
            if !self.regs.resolve(mark.mask_ptrs, moved, || self.tracing()) {
                return false;
            }
        }
        true
    }

    /// Ends the output generation (see `generation`): the write window
    /// closes, and a write in progress commits nothing (see `commit`).
    #[inline]
    pub(super) fn next_generation(&self) {
        self.generation
            .store(self.generation.load().wrapping_add(1));
        // Pairs with `Direct::bound_branches`: a direct run in progress
        // takes no further branch without looking at the generation.
        self.branch_bound.store(0);
        self.regs.driver_wrote(self.writing.load());
    }

    /// The output generation, once the driver writes that came into this
    /// write are settled (see [`OutputRegs`]): the writer's view of the
    /// registers is current for it. A PMI after the read moves it on.
    #[inline]
    fn settled_generation(&self) -> u64 {
        loop {
            self.regs.settle();
            barrier();
            let generation = self.generation.load();
            barrier();
            // Pairs with `next_generation`: a PMI between the settle and the
            // read above left something to settle.
            if !self.regs.interrupted() {
                return generation;
            }
        }
    }

    /// Opens the write window at the output position, if tracing through
    /// ToPA into a region with room left (an END link, a full region and
    /// single-range output take the general path).
    pub(super) fn open_window(&self) {
        // The generation first: a PMI from here on leaves the window stale.
        let generation = self.settled_generation();
        self.window_room.store(0);
        if !self.tracing() || !self.uses_topa() {
            return;
        }
        let pos = TopaPosition::from_mask_ptrs(0, self.regs.mask_ptrs());
        let entry = self.entry(self.regs.base(), pos.index);
        if entry.is_end() || pos.offset >= entry.size() {
            return;
        }
        self.window
            .store(self.phys.to_virt(entry.base() + pos.offset));
        self.window_room.store(entry.size() - pos.offset);
        self.window_gen.store(generation);
    }

    /// [`emit`](Self::emit) where the unit may reach the end of the
    /// current region: through the tables.
    #[cold]
    fn emit_slow(&self, bytes: &[u8]) -> bool {
        if !self.uses_topa() {
            self.emit_single(bytes);
            return true;
        }
        match self.room_before_stop(bytes.len() as u64) {
            Some(room) => {
                if let Some(pad) = PAD_FILL.get(..room as usize) {
                    self.emit_topa(pad);
                }
                if self.tracing() {
                    // The STOP region was full already (nothing written).
                    self.halt(STATUS_STOPPED);
                }
                false
            }
            None => self.emit_topa(bytes),
        }
    }

    /// The ToPA entry `index` of the table at physical address `base`.
    fn entry(&self, base: u64, index: usize) -> TopaEntry {
        let table = self.phys.to_virt(base).cast::<TopaTable>().cast_const();
        // SAFETY: the driver programs OUTPUT_BASE (and END links) with live
        // table pages (the TraceHw contract, as for hardware); the index is
        // kept inside the page.
        unsafe { (*table).entries[index.min(TENTS_PER_PAGE - 1)] }
    }

    /// The bytes left before the end of the first STOP region ahead, if
    /// fewer than `len`: a unit of `len` bytes does not fit. `None` when it
    /// does (or the walk ends: the write itself finds out why).
    fn room_before_stop(&self, len: u64) -> Option<u64> {
        self.regs.settle();
        let mut base = self.regs.base();
        let mut pos = TopaPosition::from_mask_ptrs(0, self.regs.mask_ptrs());
        let mut room = 0;
        // A unit is at most UNIT_CAP bytes and a region at least 4 KiB: the
        // walk ends within the current region, an END link and the next.
        for _ in 0..8 {
            let entry = self.entry(base, pos.index);
            if entry.is_end() {
                base = entry.base();
                pos.index = 0;
                pos.offset = 0;
                continue;
            }
            room += entry.size().saturating_sub(pos.offset);
            if entry.stop() {
                return (room < len).then_some(room);
            }
            if room >= len {
                return None;
            }
            pos.index += 1;
            pos.offset = 0;
        }
        None
    }

    /// Single-range output: one range of `(MASK_PTRS & 0xffffffff) + 1`
    /// bytes at `OUTPUT_BASE`, wrapping at its end.
    fn emit_single(&self, mut bytes: &[u8]) {
        while !bytes.is_empty() && self.tracing() {
            // A PMI's set_output between two pieces takes effect here.
            self.regs.settle();
            let mask = self.regs.mask_ptrs();
            let size = (mask & 0xffff_ffff) + 1;
            let off = (mask >> 32) % size;
            let n = (size - off).min(bytes.len() as u64) as usize;
            let dst = self.phys.to_virt(self.regs.base() + off);
            // SAFETY: `dst..dst + n` lies in the range the driver programmed
            // (the AUX page it handed to the tracer).
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n) };
            self.written_piece(&bytes[..n]);
            bytes = &bytes[n..];
            let next = (off + n as u64) % size;
            self.regs.set_mask_ptrs((mask & 0xffff_ffff) | (next << 32));
            self.hooks.interrupt();
        }
    }

    /// Writes `bytes` through the ToPA tables at the output position, as
    /// the hardware would, region by region; stops where a STOP region
    /// fills. Returns whether every byte was written.
    fn emit_topa(&self, mut bytes: &[u8]) -> bool {
        let mut guard = 0;
        while !bytes.is_empty() && self.tracing() {
            guard += 1;
            if guard > 1 << 20 {
                // A table ring without regions: the hardware would hang; stop.
                self.halt(STATUS_ERROR);
                return false;
            }
            // A PMI's set_output between two pieces takes effect here.
            self.regs.settle();
            let mut pos = TopaPosition::from_mask_ptrs(0, self.regs.mask_ptrs());
            let entry = self.entry(self.regs.base(), pos.index);
            if entry.is_end() {
                self.regs.set_base(entry.base());
                pos.index = 0;
                pos.offset = 0;
                self.regs.set_mask_ptrs(pos.mask_ptrs());
                continue;
            }
            let room = entry.size() - pos.offset;
            if room == 0 {
                // A region left full by a STOP: nothing more is written.
                self.halt(STATUS_STOPPED);
                return false;
            }
            let n = room.min(bytes.len() as u64) as usize;
            let dst = self.phys.to_virt(entry.base() + pos.offset);
            // SAFETY: `dst..dst + n` lies in the region the entry describes,
            // memory the driver handed to the tracer (the AUX pages).
            unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n) };
            self.written_piece(&bytes[..n]);
            bytes = &bytes[n..];
            if self.hooks.interrupts() {
                // The write position first, so that a PMI sees it.
                let mut at = pos;
                at.offset += n as u64;
                if at.offset < entry.size() {
                    self.regs.set_mask_ptrs(at.mask_ptrs());
                    self.hooks.interrupt();
                }
            }
            pos.offset += n as u64;
            if pos.offset == entry.size() {
                if entry.int() {
                    self.pmi.store(self.pmi.load() + 1);
                }
                if entry.stop() {
                    self.regs.set_mask_ptrs(pos.mask_ptrs());
                    self.halt(STATUS_STOPPED);
                    return bytes.is_empty();
                }
                pos.index += 1;
                pos.offset = 0;
            }
            self.regs.set_mask_ptrs(pos.mask_ptrs());
        }
        bytes.is_empty()
    }
}

/// What a write into the window commits against (see
/// [`SoftTracer::commit`]): the output generation and position it started
/// in.
#[derive(Clone, Copy)]
pub(super) struct WindowMark {
    pub(super) generation: u64,
    pub(super) mask_ptrs: u64,
}

/// Where a write puts its packets: the output of one write of the tracer
/// (one holding of `writing`), trace event by trace event, the packets of
/// each reaching the output whole or not at all (see [`SoftTracer::emit`]).
///
/// Where the write window holds more than an event's packets can take, they
/// are written straight into it (*direct*): every byte lands strictly
/// inside the current region, where no END link, INT or STOP can be met, so
/// the event's packets are whole by construction, and the output position
/// moves past them at the event's end (see [`SoftTracer::commit`]).
/// Otherwise they are gathered in the tracer's unit buffer and handed to
/// [`SoftTracer::emit`] at the end, which writes them all or pads the STOP
/// region instead.
///
/// The window is held here for the write, and stored back into the tracer
/// at its end and around every `emit` (which moves it).
///
/// A PMI may interrupt an event's direct write half done; it sees the
/// output position before the event (as it does a gathered one). When it
/// moved the output or left tracing off, the event's commit fails and its
/// bytes are gathered and emitted where the output is after the PMI (see
/// [`SoftTracer::commit`]).
pub(super) struct Output<'t, 'p, K: Hooks> {
    pub(super) tracer: &'t SoftTracer<'p, K>,
    /// The write window: its free space starts here, ...
    pub(super) window: *mut u8,
    /// ... and holds this many bytes (0: none), ...
    pub(super) room: u64,
    /// ... for writes committed against this mark.
    pub(super) mark: WindowMark,
    /// The current event's bytes are going to the window (else to the unit
    /// buffer).
    direct: bool,
    /// Bytes of the current event written and not handed out, at most
    /// `UNIT_CAP`.
    len: usize,
    /// Some of the current event's bytes were not written.
    dropped: bool,
}

impl<'t, 'p, K: Hooks> Output<'t, 'p, K> {
    /// The output of a write of `tracer`, which must hold `writing` (its
    /// unit buffer is this output's until it is cleared).
    #[inline]
    pub(super) fn new(tracer: &'t SoftTracer<'p, K>) -> Self {
        let (window, room, mark) = tracer.window();
        Output {
            tracer,
            window,
            room,
            mark,
            direct: room > UNIT_CAP as u64,
            len: 0,
            dropped: false,
        }
    }

    /// Takes the tracer's window again (after a PMI's write, or an `emit`);
    /// what is still to come of the current event goes direct only if it
    /// did and the window has room.
    #[inline]
    pub(super) fn reload(&mut self) {
        let (window, room, mark) = self.tracer.window();
        self.window = window;
        self.room = room;
        self.mark = mark;
        self.direct &= room > UNIT_CAP as u64;
    }

    /// Stores the window back into the tracer (before an `emit`, and at the
    /// write's end).
    #[inline]
    fn store(&self) {
        self.tracer.window.store(self.window);
        self.tracer.window_room.store(self.room);
        self.tracer.window_gen.store(self.mark.generation);
    }

    /// Where the current event's next byte goes.
    #[inline(always)]
    fn dst(&self) -> *mut u8 {
        let base = if self.direct {
            self.window
        } else {
            self.tracer.unit.get().cast::<u8>()
        };
        base.wrapping_add(self.len)
    }

    /// Hands the bytes of the current event written so far to the output:
    /// moves the output position past them (direct), or emits them
    /// (gathered). An event that goes on after a flush gathers, as the
    /// window may have moved.
    #[inline(always)]
    fn flush(&mut self) {
        if self.len == 0 {
            return;
        }
        if self.direct {
            self.direct = false;
            if self.tracer.commit(self.mark, self.window, self.len) {
                self.window = self.window.wrapping_add(self.len);
                self.room -= self.len as u64;
                self.mark.mask_ptrs += (self.len as u64) << 32;
                self.len = 0;
                return;
            }
            // A PMI inside this event kept its bytes out (see
            // `SoftTracer::commit`): they go out again through `emit`.
            self.gather_window(self.len);
        }
        self.emit_gathered();
    }

    /// The current event's `n` bytes at the window, which did not commit
    /// (in `flush`, or the last event of a direct run), go to the unit
    /// buffer: the event goes on gathered, and ending it emits them where
    /// the output is now, without committing them a second time.
    pub(super) fn gather_window(&mut self, n: usize) {
        let n = n.min(UNIT_CAP);
        // SAFETY: the event wrote its `n <= UNIT_CAP` bytes at `window`, the
        // AUX memory, which a PMI does not free; the unit buffer (this
        // output's, see `new`) holds `UNIT_CAP` bytes and is not the output.
        unsafe {
            core::ptr::copy_nonoverlapping(self.window, self.tracer.unit.get().cast::<u8>(), n)
        };
        self.len = n;
        self.direct = false;
    }

    /// [`flush`](Self::flush) of the bytes gathered in the unit buffer.
    #[inline(never)]
    fn emit_gathered(&mut self) {
        let unit = self.tracer.unit.get().cast::<u8>();
        // SAFETY: the first `len <= UNIT_CAP` bytes of the unit buffer were
        // written by this output, which holds it (`new`).
        let bytes = unsafe { core::slice::from_raw_parts(unit.cast_const(), self.len) };
        self.store();
        self.dropped |= !self.tracer.emit(bytes);
        self.reload();
        self.len = 0;
    }

    /// Ends the current trace event: writes what is left of its packets;
    /// returns whether every byte was written. The next event goes direct
    /// if the window has room for it.
    #[inline]
    pub(super) fn end_event(&mut self) -> bool {
        self.flush();
        let delivered = !self.dropped;
        self.dropped = false;
        self.direct = self.room > UNIT_CAP as u64;
        delivered
    }

    /// Ends the write: the window goes back to the tracer.
    #[inline]
    pub(super) fn close(self) {
        self.store();
    }

    /// Whether the next event can go straight into the window by
    /// [`PacketStream::feed_direct`]: nothing of an event is held, and the
    /// window has room for the most any event writes.
    #[inline(always)]
    pub(super) fn direct_ready(&self) -> bool {
        self.len == 0 && self.room > UNIT_CAP as u64
    }
}

impl<K: Hooks> PacketSink for Output<'_, '_, K> {
    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) {
        if bytes.len() <= UNIT_CAP - self.len {
            // SAFETY: the event's bytes start at the unit buffer or at the
            // window, which hold `UNIT_CAP` bytes and more than that (see
            // `end_event`), and `len + bytes.len() <= UNIT_CAP`; `bytes` is
            // a packet on the stack or a constant, not the output or the
            // unit buffer.
            unsafe { copy_to_memory(self.dst(), bytes) };
            self.len += bytes.len();
            if self.direct {
                self.tracer.hooks.interrupt();
            }
        } else {
            self.write_split(bytes);
        }
    }
}

impl<K: Hooks> Output<'_, '_, K> {
    /// [`write`](PacketSink::write) of more than is left of `UNIT_CAP`:
    /// more than one event makes (UNIT_CAP bounds it), so the event's
    /// packets are split, still in order.
    #[cold]
    fn write_split(&mut self, bytes: &[u8]) {
        self.flush();
        if bytes.len() <= UNIT_CAP {
            // SAFETY: as in `write`, with `len` 0 after the flush.
            unsafe { copy_to_memory(self.dst(), bytes) };
            self.len = bytes.len();
        } else {
            self.store();
            self.dropped |= !self.tracer.emit(bytes);
            self.reload();
        }
    }
}
