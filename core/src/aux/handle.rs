// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`AuxHandle`]: one AUX transaction (`perf_aux_output_begin` ... `end`,
//! `perf_aux_output_skip`, `perf_aux_output_flag`), and `PERF_RECORD_AUX` /
//! `PERF_RECORD_ITRACE_START`.

use core::marker::PhantomData;

use super::area::AuxArea;
use crate::abi::{PerfEventHeader, aux_flags, record_type};
use crate::error::{Error, Result};
use crate::ring::{NestHook, OutputEvent, Ring};
use crate::sync::{Ordering, barrier};

/// An open AUX transaction: the PMU writes trace data between `begin` and
/// `end`. At most one per area at a time.
#[must_use = "an AUX transaction holds the area until it ends"]
pub struct AuxHandle<'x, 'a> {
    area: &'x AuxArea<'a>,
    /// Write position (`handle->head`): the driver sets it in overwrite mode.
    head: u64,
    /// Space the driver may fill (`handle->size`): 0 in overwrite mode.
    size: u64,
    /// Next watermark boundary (`handle->wakeup`).
    wakeup: u64,
    /// `PERF_AUX_FLAG_*` gathered for the `PERF_RECORD_AUX`.
    flags: u64,
    ended: bool,
    _not_send: PhantomData<*mut u8>,
}

impl<'a> AuxArea<'a> {
    /// Opens a transaction (`perf_aux_output_begin`).
    ///
    /// Errors: `EINVAL` if the area is unmapped (teardown in progress);
    /// `EBUSY` if a transaction is already open on it (Linux WARNs on
    /// `aux_nest`); `ENOSPC` in writable mode when the consumer's `aux_tail`
    /// leaves no room: then the event's disable is requested
    /// ([`take_disable_request`](Self::take_disable_request)) and the
    /// consumer woken, as `perf_aux_output_begin` does.
    pub fn begin(&self) -> Result<AuxHandle<'_, 'a>> {
        if !self.is_mapped() || !self.get() {
            return Err(Error::Invalid);
        }
        // Plain same-CPU word: transactions run on the AUX event's CPU.
        if self.nest.load() != 0 {
            self.put();
            return Err(Error::Busy);
        }
        self.nest.store(1);
        barrier();

        let head = self.head.load();
        let mut handle = AuxHandle {
            area: self,
            head,
            size: 0,
            wakeup: 0,
            flags: 0,
            ended: false,
            _not_send: PhantomData,
        };
        if !self.overwrite {
            // A: Acquire pairs with the consumer's Release store of aux_tail
            // after it read the data: the space handed to the hardware below
            // is no longer being read.
            let tail = self.aux_tail_word().load(Ordering::Acquire);
            handle.wakeup = self.wakeup.load().wrapping_add(self.watermark);
            let size = self.size();
            if head.wrapping_sub(tail) < size {
                // CIRC_SPACE: at most size - 1.
                handle.size = tail.wrapping_sub(head.wrapping_add(1)) & (size - 1);
            }
            if handle.size == 0 {
                // Relaxed: a flag for the event layer (see take_disable_request).
                self.disable_requested.store(true, Ordering::Relaxed);
                self.wake();
                handle.ended = true;
                self.nest.store(0);
                self.put();
                return Err(Error::NoSpace);
            }
        }
        Ok(handle)
    }
}

impl<'a> AuxHandle<'_, 'a> {
    /// The area this transaction writes.
    pub fn area(&self) -> &AuxArea<'a> {
        self.area
    }

    /// The write position (`handle->head`).
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Sets the write position: in overwrite mode the driver reports where
    /// the hardware is (free-running), and `end` publishes it as `aux_head`.
    pub fn set_head(&mut self, head: u64) {
        self.head = head;
    }

    /// Bytes the driver may still write (`handle->size`); 0 in overwrite mode.
    pub fn space(&self) -> u64 {
        self.size
    }

    /// The position at which the consumer wants to be woken next
    /// (`handle->wakeup`: the last boundary plus the watermark; writable mode).
    pub fn wakeup_position(&self) -> u64 {
        self.wakeup
    }

    /// The flags gathered so far.
    pub fn flags(&self) -> u64 {
        self.flags
    }

    /// Adds `PERF_AUX_FLAG_*` bits to the coming `PERF_RECORD_AUX`
    /// (`perf_aux_output_flag`). `OVERWRITE` is the core's to set: a call
    /// that passes it is ignored entirely (Linux WARNs).
    pub fn flag(&mut self, flags: u64) {
        if flags & aux_flags::OVERWRITE != 0 {
            return;
        }
        self.flags |= flags;
    }

    /// Publishes `size` bytes without a record (`perf_aux_output_skip`):
    /// `ENOSPC` if more than the space left.
    pub fn skip(&mut self, size: u64) -> Result<()> {
        if size > self.size {
            return Err(Error::NoSpace);
        }
        let area = self.area;
        let head = area.head.load().wrapping_add(size);
        area.head.store(head);
        // Release: the AUX bytes before the position that says they exist
        // (pairs with the consumer's Acquire load of aux_head).
        area.aux_head_word().store(head, Ordering::Release);
        if self.need_wakeup() {
            area.wake();
            self.wakeup = area.wakeup.load().wrapping_add(area.watermark);
        }
        self.head = head;
        self.size -= size;
        Ok(())
    }

    /// Ends the transaction (`perf_aux_output_end`): `size` bytes
    /// of new data (writable mode), or in overwrite mode the data up to the
    /// position set with [`set_head`](Self::set_head). Writes
    /// `PERF_RECORD_AUX {aux_offset, aux_size, flags}` (with `event`'s
    /// sample_id trailer) into `ring`, unless there is nothing to say (size 0
    /// and no flag but OVERWRITE); the record may be lost like any other.
    /// Then publishes `aux_head`, wakes the consumer at the watermark or on
    /// TRUNCATED (which also requests the event's disable).
    pub fn end<H: NestHook, E: OutputEvent>(
        mut self,
        size: u64,
        ring: &Ring<'_, H>,
        event: &mut E,
    ) {
        let area = self.area;
        let mut wakeup = self.flags & aux_flags::TRUNCATED != 0;
        let offset = if area.overwrite {
            self.flags |= aux_flags::OVERWRITE;
            area.head.store(self.head);
            self.head
        } else {
            self.flags &= !aux_flags::OVERWRITE;
            let old = area.head.load();
            area.head.store(old.wrapping_add(size));
            old
        };
        let interesting =
            self.flags & !(aux_flags::PMU_FORMAT_TYPE_MASK | aux_flags::OVERWRITE) != 0;
        if size != 0 || interesting {
            write_aux_record(ring, event, offset, size, self.flags);
        }
        // Release: as in `skip`.
        area.aux_head_word()
            .store(area.head.load(), Ordering::Release);
        if self.need_wakeup() {
            wakeup = true;
        }
        if wakeup {
            if self.flags & aux_flags::TRUNCATED != 0 {
                // Relaxed: a flag for the event layer (see take_disable_request).
                area.disable_requested.store(true, Ordering::Relaxed);
            }
            area.wake();
        }
        self.finish();
    }

    /// `rb_need_aux_wakeup`: in writable mode, crossing a watermark boundary.
    fn need_wakeup(&self) -> bool {
        let area = self.area;
        if area.overwrite || area.watermark == 0 {
            return false;
        }
        let head = area.head.load();
        if head.wrapping_sub(area.wakeup.load()) >= area.watermark {
            area.wakeup.store(head - head % area.watermark);
            return true;
        }
        false
    }

    /// Closes the transaction: `aux_nest = 0` and the reference dropped.
    fn finish(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        barrier();
        self.area.nest.store(0);
        // Never the last reference while mapped; after `unmap` the caller
        // learns from `unmap`'s result or its own bookkeeping.
        self.area.put();
    }
}

impl Drop for AuxHandle<'_, '_> {
    /// A transaction dropped without `end` closes without a record or a new
    /// head, as if the driver ended it with nothing written.
    fn drop(&mut self) {
        self.finish();
    }
}

/// Writes `PERF_RECORD_AUX` for `event` into `ring` (`perf_event_aux_event`).
fn write_aux_record<H: NestHook, E: OutputEvent>(
    ring: &Ring<'_, H>,
    event: &mut E,
    offset: u64,
    size: u64,
    flags: u64,
) {
    let record_size = 32 + event.id_header_size();
    let Ok(mut h) = ring.begin(record_size, event) else {
        return; // lost, and counted as such by the ring
    };
    let trailer = event.sample_id();
    let _ = h.put_header(PerfEventHeader {
        type_: record_type::AUX,
        misc: 0,
        size: record_size as u16,
    });
    let _ = h.put_u64(offset);
    let _ = h.put_u64(size);
    let _ = h.put_u64(flags);
    if let Some(t) = trailer {
        let _ = h.put_sample_id(&t);
    }
    h.end();
}

/// Writes `PERF_RECORD_ITRACE_START {pid, tid}` for `event` into `ring`
/// (`perf_event_itrace_started`; emitted before an ITRACE PMU's first `add`). `ENOSPC` if the
/// ring refused it (counted lost).
pub fn write_itrace_start<H: NestHook, E: OutputEvent>(
    ring: &Ring<'_, H>,
    event: &mut E,
    pid: u32,
    tid: u32,
) -> Result<()> {
    let record_size = 16 + event.id_header_size();
    let mut h = ring.begin(record_size, event)?;
    let trailer = event.sample_id();
    let _ = h.put_header(PerfEventHeader {
        type_: record_type::ITRACE_START,
        misc: 0,
        size: record_size as u16,
    });
    let mut ids = [0u8; 8];
    ids[..4].copy_from_slice(&pid.to_ne_bytes());
    ids[4..].copy_from_slice(&tid.to_ne_bytes());
    let _ = h.copy(&ids);
    if let Some(t) = trailer {
        let _ = h.put_sample_id(&t);
    }
    h.end();
    Ok(())
}
