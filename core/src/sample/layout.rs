// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perf_prepare_sample`: the size of every field, AUX last (`kernel/events/core.c`).

use super::aux_block::{AuxSampling, SnapshotAux};
use super::data::SampleData;
use crate::abi::{PerfEventAttr, branch_sample_type as br, read_format as rf, sample_type as st};
use crate::error::{Error, Result};

/// The sizes `prepare` decided, which `output` then writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleLayout {
    /// `header.size`: the whole record, a multiple of 8, at most 65528 with AUX.
    pub size: u16,
    /// RAW data size after its u32 (padded so that 4 + it is a multiple of 8).
    pub raw_size: u32,
    /// STACK_USER dump size (0: only the size word is written).
    pub stack_size: u16,
    /// AUX bytes after the AUX size word (a multiple of 8; 0: none).
    pub aux_size: u64,
}

/// Bytes of a `PERF_SAMPLE_READ` block for `read_format` and `members`.
pub fn read_size(read_format: u64, members: usize) -> usize {
    let times = 8
        * ((read_format & rf::TOTAL_TIME_ENABLED != 0) as usize
            + (read_format & rf::TOTAL_TIME_RUNNING != 0) as usize);
    let per =
        8 * (1 + (read_format & rf::ID != 0) as usize + (read_format & rf::LOST != 0) as usize);
    if read_format & rf::GROUP != 0 {
        8 + times + members * per
    } else {
        times + per
    }
}

/// The sample_type bits whose field is one u64 whatever the sample holds
/// (`__perf_event_header_size` counts them once per event), but for the
/// weight: its two bits (`WEIGHT`, `WEIGHT_STRUCT`) share one u64.
const FIXED_FIELDS: u64 = st::IDENTIFIER
    | st::IP
    | st::TID
    | st::TIME
    | st::ADDR
    | st::ID
    | st::STREAM_ID
    | st::CPU
    | st::PERIOD
    | st::DATA_SRC
    | st::TRANSACTION
    | st::PHYS_ADDR
    | st::CGROUP
    | st::DATA_PAGE_SIZE
    | st::CODE_PAGE_SIZE;

/// Computes the layout of `attr`'s sample of `data` (`perf_prepare_sample`).
/// Never calls the AUX PMU: with `PERF_SAMPLE_AUX`, the AUX size is
/// `min(65535 - header size, aux_sample_size)` rounded down to 8, then
/// limited by `aux` (no leader, leader elsewhere, area unmapped or being
/// snapshotted: 0; at most the area's size).
///
/// `EINVAL` when `data` does not fit `attr`: register values that are not
/// one per mask bit, branch counters not one per entry, or fields that
/// already pass 65535 bytes before the AUX block.
pub fn prepare<S: SnapshotAux + ?Sized>(
    attr: &PerfEventAttr,
    data: &SampleData<'_>,
    aux: Option<&AuxSampling<'_, '_, S>>,
) -> Result<SampleLayout> {
    let t = attr.sample_type;
    let has = |bit: u64| t & bit != 0;
    let mut layout = SampleLayout::default();

    // The fixed part (event->header_size): the header and every u64-sized
    // field, one word per bit of `FIXED_FIELDS` and one for either weight.
    let fixed = (t & FIXED_FIELDS).count_ones() as usize + usize::from(has(st::WEIGHT_TYPE));
    let mut size: usize = 8 + 8 * fixed;
    if has(st::READ) {
        size += read_size(attr.read_format, data.read.group.len());
    }
    if has(st::CALLCHAIN) {
        size += 8 * (1 + data.callchain.len());
    }
    if has(st::RAW) {
        size += match data.raw {
            Some(raw) => {
                let padded = (raw.len() + 4 + 7) & !7;
                layout.raw_size = u32::try_from(padded - 4).map_err(|_| Error::Invalid)?;
                padded
            }
            None => 8,
        };
    }
    if has(st::BRANCH_STACK) {
        size += 8;
        if let Some(b) = data.branch_stack {
            if attr.branch_sample_type & br::HW_INDEX != 0 {
                size += 8;
            }
            size += 24 * b.entries.len();
            if attr.branch_sample_type & br::COUNTERS != 0 {
                if b.counters.len() != b.entries.len() {
                    return Err(Error::Invalid);
                }
                size += 8 * b.counters.len();
            }
        }
    }
    if has(st::REGS_USER) {
        size += regs_size(
            attr.sample_regs_user,
            data.regs_user.abi,
            data.regs_user.values.len(),
        )?;
    }
    if has(st::STACK_USER) {
        layout.stack_size = match data.stack_user.stack {
            Some(stack) => ustack_size(attr.sample_stack_user, size, stack.len()),
            None => 0,
        };
        size += 8;
        if layout.stack_size != 0 {
            size += 8 + usize::from(layout.stack_size);
        }
    }
    if has(st::REGS_INTR) {
        size += regs_size(
            attr.sample_regs_intr,
            data.regs_intr.abi,
            data.regs_intr.values.len(),
        )?;
    }
    if has(st::AUX) {
        size += 8;
        let limit = 65535usize.checked_sub(size).ok_or(Error::Invalid)?;
        let want = (limit as u64).min(u64::from(attr.aux_sample_size)) & !7;
        layout.aux_size = match aux {
            Some(aux) if want != 0 => aux.prepare(want),
            _ => 0,
        };
        size += layout.aux_size as usize;
    }
    if size > 65535 || size % 8 != 0 {
        return Err(Error::Invalid);
    }
    layout.size = size as u16;
    Ok(layout)
}

/// Bytes of a registers block: the ABI word, then one word per mask bit
/// unless the ABI is 0 (no registers).
fn regs_size(mask: u64, abi: u64, values: usize) -> Result<usize> {
    if abi == 0 {
        return Ok(8);
    }
    if values != mask.count_ones() as usize {
        return Err(Error::Invalid);
    }
    Ok(8 + 8 * values)
}

/// `perf_sample_ustack_size`: the dump size, limited by the stack available
/// (the task size above the stack pointer) and by what still fits in a
/// 16-bit record after `header_size` bytes.
fn ustack_size(requested: u32, header_size: usize, available: usize) -> u16 {
    let task_size = available.min(u16::MAX as usize) as u16;
    let mut stack = (requested.min(u32::from(u16::MAX)) as u16).min(task_size);
    // The static size word and the dynamic size word.
    let header = (header_size as u16).wrapping_add(16);
    if header.wrapping_add(stack) < header {
        // It would overflow the u16 record size: take what fits.
        stack = u16::MAX.wrapping_sub(header).wrapping_sub(8);
        stack = stack.wrapping_add(7) & !7;
    }
    stack
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_fields_one_word_each_and_one_for_either_weight() {
        let attr = |t: u64| {
            let mut a = PerfEventAttr::new(136);
            a.sample_type = t;
            a
        };
        let size = |t: u64| {
            prepare::<dyn SnapshotAux>(&attr(t), &SampleData::default(), None).map(|l| l.size)
        };
        assert_eq!(size(0), Ok(8));
        assert_eq!(size(FIXED_FIELDS), Ok(8 + 8 * 15));
        assert_eq!(size(FIXED_FIELDS | st::WEIGHT), Ok(8 + 8 * 16));
        assert_eq!(size(st::WEIGHT_STRUCT), Ok(16));
        // Both weight bits (perf_event_open refuses them together): still
        // one word, as `__perf_event_header_size` counts it.
        assert_eq!(size(st::WEIGHT_TYPE), Ok(16));
        for bit in 0..64 {
            let b = 1u64 << bit;
            if FIXED_FIELDS & b != 0 {
                assert_eq!(size(b), Ok(16), "bit {bit}");
            }
        }
    }

    #[test]
    fn read_sizes() {
        assert_eq!(read_size(0, 0), 8);
        assert_eq!(read_size(rf::TOTAL_TIME_ENABLED | rf::ID | rf::LOST, 0), 32);
        assert_eq!(read_size(rf::GROUP, 3), 8 + 24);
        assert_eq!(read_size(rf::KNOWN, 2), 8 + 16 + 2 * 24);
    }

    #[test]
    fn ustack_fits_the_record() {
        assert_eq!(ustack_size(4096, 64, 100_000), 4096);
        assert_eq!(
            ustack_size(4096, 64, 1000),
            1000,
            "limited by the stack available"
        );
        // Would pass 65535: shrunk to what fits.
        let s = ustack_size(65528, 1000, 100_000);
        assert!(1000 + 16 + usize::from(s) <= 65535 && s % 8 == 0, "{s}");
    }
}
