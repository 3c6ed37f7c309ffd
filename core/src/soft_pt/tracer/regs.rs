// SPDX-License-Identifier: MIT OR Apache-2.0
//! The tracer's registers as the driver programs them ([`TraceHw`]):
//! `RTIT_CTL` (TraceEn, ToPA, the configuration fields), the output MSRs
//! and `RTIT_STATUS`, with what each write does to a write in progress
//! (a PMI's) and to the packet stream.

use crate::pt::config::{PtConfig, rtit_ctl};
use crate::pt::hw::{STATUS_PACKET_BYTE_CNT, TraceHw};
use crate::sync::barrier;

use super::output::Output;
use super::{Hooks, SoftTracer};

impl<K: Hooks> TraceHw for SoftTracer<'_, K> {
    fn enable(&self) {
        self.output_stopped.store(false);
        self.set_ctl(rtit_ctl::TRACE_EN, true);
    }

    fn disable(&self) {
        // Branches gathered but not emitted go out first, as the hardware
        // flushes its TNT buffer when TraceEn drops. When a PMI interrupted
        // a write, `writing` is set (the write holds the stream), so
        // nothing is flushed into the middle of that write: like the
        // hardware's, its writes are never split, and it completes once
        // tracing is on again.
        if self.tracing() && !self.writing.load() {
            self.writing.store(true);
            barrier();
            // SAFETY: `writing` was clear and is now set, as in `trace`.
            let stream = unsafe { (*self.stream.get()).as_mut() };
            // (A stop with no branch outcome waiting writes nothing: the
            // output is not opened, as on every snapshot's stop but the
            // first after a run of branches.)
            if let Some(stream) = stream.and_then(|s| (!s.stop_quietly()).then_some(s)) {
                let pending = stream.unwritten_events();
                let mut out = Output::new(self);
                stream.stop(&mut out);
                let delivered = out.end_event();
                out.close();
                if self.halted.load() {
                    // The flush met a STOP: lost are the events it held if
                    // it did not fit, else those no packet covers yet.
                    let end = self.events.load();
                    let uncovered = if delivered {
                        stream.unwritten_events()
                    } else {
                        pending
                    };
                    self.resync(stream, end.saturating_sub(uncovered)..end);
                }
            }
            barrier();
            self.regs.release(&self.writing);
        }
        self.set_ctl(rtit_ctl::TRACE_EN, false);
    }

    fn enabled(&self) -> bool {
        self.tracing()
    }

    fn set_topa(&self, topa: bool) {
        self.set_ctl(rtit_ctl::TOPA, topa);
    }

    fn set_output(&self, base: u64, mask_ptrs: u64) {
        self.next_generation();
        // Inside a write (this is a PMI's call), deferred until the writer
        // settles (see `OutputRegs`).
        self.regs.set(self.writing.load(), base, mask_ptrs);
    }

    fn output(&self) -> (u64, u64) {
        self.regs.read()
    }

    fn configure(&self, config: PtConfig) {
        if config != self.config() {
            // A new configuration: the next packet starts a new stream
            // (PSB+ first). Drivers configure with tracing off.
            self.next_generation();
            let ctl = self.ctl.load();
            self.ctl.store(ctl & !rtit_ctl::CONFIG | config.rtit_ctl());
            if !self.tracing() && !self.writing.load() {
                // SAFETY: `writing` is clear: no reference to the stream
                // exists (the invariant); this write ends here.
                unsafe { *self.stream.get() = None };
            }
        }
    }

    fn status(&self) -> u64 {
        self.status.load() | (self.packet_byte_cnt() << 32)
    }

    fn set_status(&self, status: u64) {
        self.status.store(status & !STATUS_PACKET_BYTE_CNT);
        let count = (status & STATUS_PACKET_BYTE_CNT) >> 32;
        if count != self.packet_byte_cnt() {
            // Only 0 can be written in effect: the count restarts, and the
            // hardware sends a PSB when it is 0 (see `fresh`).
            self.packet_bytes.store(0);
            self.fresh.store(true);
            self.next_generation();
        }
    }
}
