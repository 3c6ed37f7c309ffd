// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perf_output_sample`: the record's bytes in the kernel's order, AUX last
//! (`perf_output_sample`, `perf_aux_sample_output`).

use super::aux_block::{AuxSampling, SnapshotAux};
use super::data::{ReadGroupEntry, Regs, SampleData};
use super::layout::SampleLayout;
use crate::abi::{
    PerfEventAttr, PerfEventHeader, branch_sample_type as br, read_format as rf, record_type,
    sample_type as st,
};
use crate::aux::copy_zeros;
use crate::platform::IrqMask;
use crate::ring::{NestHook, OutputHandle, OutputSink};

/// Zeros for padding, copied in pieces.
const ZEROS: [u8; 64] = [0; 64];

/// Writes the sample `prepare` laid out into `handle` (opened with
/// `layout.size` bytes). The AUX block's bytes come from `aux`'s PMU through
/// `snapshot_aux`, with interrupts masked by `irq` and the area's
/// `in_sampling` guard set.
///
/// Where the PMU copies fewer bytes than the AUX size (or fails), the rest
/// of the block is zero-filled. Linux writes at most 8 zero bytes and leaves
/// older ring bytes in the remainder (`perf_aux_sample_output`); perfaux deliberately never
/// exposes stale bytes.
pub fn output<H: NestHook, S: SnapshotAux + ?Sized>(
    handle: &mut OutputHandle<'_, '_, H>,
    attr: &PerfEventAttr,
    data: &SampleData<'_>,
    layout: &SampleLayout,
    aux: Option<&AuxSampling<'_, '_, S>>,
    irq: &dyn IrqMask,
) {
    let t = attr.sample_type;
    let has = |bit: u64| t & bit != 0;
    let h = handle;
    // The header and the u64 fields before READ, gathered and copied in one
    // piece (Linux makes one `perf_output_put` each): one walk of the
    // handle instead of up to ten, the same bytes.
    let mut head = FieldBuffer::new(PerfEventHeader {
        type_: record_type::SAMPLE,
        misc: data.misc,
        size: layout.size,
    });
    let mut put_head = |bit: u64, v: u64| {
        if has(bit) {
            head.push(v);
        }
    };
    put_head(st::IDENTIFIER, data.id);
    put_head(st::IP, data.ip);
    put_head(st::TID, pair(data.pid, data.tid));
    put_head(st::TIME, data.time);
    put_head(st::ADDR, data.addr);
    put_head(st::ID, data.id);
    put_head(st::STREAM_ID, data.stream_id);
    put_head(st::CPU, pair(data.cpu, 0));
    put_head(st::PERIOD, data.period);
    let _ = h.copy(head.bytes());
    let put = |h: &mut OutputHandle<'_, '_, H>, bit: u64, v: u64| {
        if has(bit) {
            let _ = h.put_u64(v);
        }
    };
    if has(st::READ) {
        write_read(h, attr.read_format, data);
    }
    if has(st::CALLCHAIN) {
        let _ = h.put_u64(data.callchain.len() as u64);
        for &ip in data.callchain {
            let _ = h.put_u64(ip);
        }
    }
    if has(st::RAW) {
        match data.raw {
            Some(raw) => {
                let _ = h.copy(&layout.raw_size.to_ne_bytes());
                let _ = h.copy(raw);
                // Padding (at most 7 bytes, `prepare`'s rounding).
                let pad = (layout.raw_size as usize).saturating_sub(raw.len());
                let _ = h.copy(ZEROS.get(..pad).unwrap_or(&ZEROS));
            }
            None => {
                // The empty RAW: size 4, then one zero u32.
                let _ = h.put_u64(pair(4, 0));
            }
        }
    }
    if has(st::BRANCH_STACK) {
        match data.branch_stack {
            Some(b) => {
                let _ = h.put_u64(b.entries.len() as u64);
                if attr.branch_sample_type & br::HW_INDEX != 0 {
                    let _ = h.put_u64(b.hw_index);
                }
                for e in b.entries {
                    for &w in e {
                        let _ = h.put_u64(w);
                    }
                }
                if attr.branch_sample_type & br::COUNTERS != 0 {
                    for &c in b.counters {
                        let _ = h.put_u64(c);
                    }
                }
            }
            None => {
                let _ = h.put_u64(0);
            }
        }
    }
    if has(st::REGS_USER) {
        write_regs(h, &data.regs_user);
    }
    if has(st::STACK_USER) {
        let _ = h.put_u64(u64::from(layout.stack_size));
        if layout.stack_size != 0 {
            let stack = data.stack_user.stack.unwrap_or(&[]);
            let (dump, _) = stack.split_at(usize::from(layout.stack_size).min(stack.len()));
            let _ = h.copy(dump);
            // Bytes that could not be copied are skipped, as Linux does.
            let _ = h.skip(usize::from(layout.stack_size) - dump.len());
            let _ = h.put_u64(dump.len() as u64);
        }
    }
    put(h, st::WEIGHT_TYPE, data.weight);
    put(h, st::DATA_SRC, data.data_src);
    put(h, st::TRANSACTION, data.transaction);
    if has(st::REGS_INTR) {
        write_regs(h, &data.regs_intr);
    }
    put(h, st::PHYS_ADDR, data.phys_addr);
    put(h, st::CGROUP, data.cgroup);
    put(h, st::DATA_PAGE_SIZE, data.data_page_size);
    put(h, st::CODE_PAGE_SIZE, data.code_page_size);
    if has(st::AUX) {
        let _ = h.put_u64(layout.aux_size);
        if layout.aux_size != 0 {
            if let Some(aux) = aux {
                // The AUX block is the record's last field: the handle's
                // remaining bytes are exactly the AUX size, so the PMU
                // cannot write past it whatever it does.
                let _ = aux.snapshot(irq, h as &mut dyn OutputSink, layout.aux_size);
            }
            zero_fill(h);
        }
    }
}

/// A record's header and the u64 fields that follow it, gathered to be
/// copied at once.
///
/// # Invariants
/// `len` is a multiple of 8 and at most `bytes`' size: the header, then at
/// most 9 words (`push` drops a word that would pass the end).
struct FieldBuffer {
    bytes: [u8; 80],
    len: usize,
}

impl FieldBuffer {
    /// The buffer holding `header`.
    #[inline(always)]
    fn new(header: PerfEventHeader) -> Self {
        let mut buf = FieldBuffer {
            bytes: [0u8; 80],
            len: 0,
        };
        buf.push(u64::from_ne_bytes(header.to_ne_bytes()));
        // INVARIANT: the header's 8 bytes, pushed into the empty buffer.
        buf
    }

    /// Appends `v`. The caller pushes at most the nine fields that fit.
    #[inline(always)]
    fn push(&mut self, v: u64) {
        if let Some(slot) = self.bytes.get_mut(self.len..self.len + 8) {
            slot.copy_from_slice(&v.to_ne_bytes());
            // INVARIANT: 8 more bytes, written just above and inside `bytes`.
            self.len += 8;
        }
    }

    /// The header and the fields pushed.
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&self.bytes)
    }
}

/// Two u32 fields as one little word, `first` at the lower address.
fn pair(first: u32, second: u32) -> u64 {
    let mut w = [0u8; 8];
    w[..4].copy_from_slice(&first.to_ne_bytes());
    w[4..].copy_from_slice(&second.to_ne_bytes());
    u64::from_ne_bytes(w)
}

/// `perf_output_read_one` / `perf_output_read_group`.
fn write_read<H: NestHook>(h: &mut OutputHandle<'_, '_, H>, format: u64, data: &SampleData<'_>) {
    let r = &data.read;
    let entry = |h: &mut OutputHandle<'_, '_, H>, e: &ReadGroupEntry| {
        let _ = h.put_u64(e.value);
        if format & rf::ID != 0 {
            let _ = h.put_u64(e.id);
        }
        if format & rf::LOST != 0 {
            let _ = h.put_u64(e.lost);
        }
    };
    if format & rf::GROUP != 0 {
        let _ = h.put_u64(r.group.len() as u64);
    } else {
        let _ = h.put_u64(r.this.value);
    }
    if format & rf::TOTAL_TIME_ENABLED != 0 {
        let _ = h.put_u64(r.time_enabled);
    }
    if format & rf::TOTAL_TIME_RUNNING != 0 {
        let _ = h.put_u64(r.time_running);
    }
    if format & rf::GROUP != 0 {
        for e in r.group {
            entry(h, e);
        }
    } else {
        if format & rf::ID != 0 {
            let _ = h.put_u64(r.this.id);
        }
        if format & rf::LOST != 0 {
            let _ = h.put_u64(r.this.lost);
        }
    }
}

/// The ABI word, then the registers unless the ABI is 0.
fn write_regs<H: NestHook>(h: &mut OutputHandle<'_, '_, H>, regs: &Regs<'_>) {
    let _ = h.put_u64(regs.abi);
    if regs.abi != 0 {
        for &v in regs.values {
            let _ = h.put_u64(v);
        }
    }
}

/// Zeroes whatever is left of the reservation.
fn zero_fill<H: NestHook>(h: &mut OutputHandle<'_, '_, H>) {
    let left = h.remaining() as u64;
    copy_zeros(h, left);
}
