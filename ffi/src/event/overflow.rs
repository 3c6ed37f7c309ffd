// SPDX-License-Identifier: MIT OR Apache-2.0
//! The overflow of a sampling event from C: the PMI's sample data
//! (`struct perfaux_sample_data`) and `perfaux_event_overflow`.

use core::ffi::{c_int, c_void};

use perfaux::Error;
use perfaux::sample::SampleData;

use super::{perfaux_event, with_event};
use crate::platform::{perfaux_platform, read_platform};
use crate::storage::read_in;

/// What the PMI knows about a sample: the payload fields. TID, TIME, ID,
/// STREAM_ID and CPU come from the event and the platform, as in Linux;
/// READ, BRANCH_STACK, REGS_*, STACK_USER are written empty from C.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_sample_data {
    /// `header.misc` (`PERF_RECORD_MISC_*`).
    pub misc: u16,
    /// Reserved, must be 0.
    pub reserved0: u16,
    /// Reserved, must be 0.
    pub reserved1: u32,
    /// IP.
    pub ip: u64,
    /// ADDR.
    pub addr: u64,
    /// PERIOD.
    pub period: u64,
    /// WEIGHT.
    pub weight: u64,
    /// DATA_SRC.
    pub data_src: u64,
    /// TRANSACTION.
    pub transaction: u64,
    /// PHYS_ADDR.
    pub phys_addr: u64,
    /// CGROUP.
    pub cgroup: u64,
    /// DATA_PAGE_SIZE.
    pub data_page_size: u64,
    /// CODE_PAGE_SIZE.
    pub code_page_size: u64,
    /// CALLCHAIN entries (NULL if `callchain_len` is 0).
    pub callchain: *const u64,
    /// Their number.
    pub callchain_len: usize,
    /// RAW bytes (NULL if none: an empty RAW is written).
    pub raw: *const c_void,
    /// Their number.
    pub raw_len: u32,
    /// Reserved, must be 0.
    pub reserved2: u32,
}

/// The overflow of a sampling event, from PMI context: pauses the AUX
/// leader first if `aux_pause`, writes the sample (with `aux_sample_size`,
/// the AUX block from the leader PMU's `snapshot_aux`) into the event's
/// output buffer, resumes the leader after if `aux_resume`.
///
/// Returns the size of the sample record, or `-ENOSPC` when there is no
/// buffer or the ring refused the sample (counted as lost), `-EINVAL` for
/// bad arguments (reserved fields, NULL pointers with lengths).
///
/// # Safety
/// `ev` NULL or event storage; `platform` and `data` readable; the
/// pointers in `data` readable for their lengths; on the event's CPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_overflow(
    ev: *mut perfaux_event,
    platform: *const perfaux_platform,
    data: *const perfaux_sample_data,
) -> c_int {
    // SAFETY: `platform` is NULL or a readable `struct perfaux_platform` (this function's `#
    // Safety`), which is what `read_platform` needs.
    let Some(p) = (unsafe { read_platform(platform) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: `data` is NULL or readable sample data whose pointers are readable for their
    // lengths (this function's `# Safety`), which is what `sample_data` needs.
    let Ok(sample) = (unsafe { sample_data(data) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: `ev` is NULL or `struct perfaux_event` storage (this function's
    // `# Safety`), which is what `with_event` needs.
    unsafe {
        with_event(ev, |e| match e.overflow(&p, &sample) {
            Ok(layout) => c_int::from(layout.size),
            Err(err) => err.errno(),
        })
    }
}

/// The engine's view of C sample data; `Err` if it is malformed.
///
/// # Safety
/// `data` NULL or readable, its pointers readable for their lengths for `'a`.
pub(crate) unsafe fn sample_data<'a>(
    data: *const perfaux_sample_data,
) -> Result<SampleData<'a>, ()> {
    // SAFETY: NULL or readable (the caller's contract).
    let d = unsafe { read_in(data) }.ok_or(())?;
    if d.reserved0 != 0 || d.reserved1 != 0 || d.reserved2 != 0 {
        return Err(());
    }
    if (d.callchain.is_null() && d.callchain_len != 0)
        || (!d.callchain.is_null() && !d.callchain.is_aligned())
        || d.callchain_len > 0xffff
    {
        return Err(());
    }
    let callchain: &[u64] = if d.callchain_len == 0 {
        &[]
    } else {
        // SAFETY: non-null, aligned, readable for `callchain_len` entries
        // (the caller's contract), a bounded length.
        unsafe { core::slice::from_raw_parts(d.callchain, d.callchain_len) }
    };
    let raw: Option<&[u8]> = match (d.raw.is_null(), d.raw_len) {
        (true, 0) => None,
        (true, _) => return Err(()),
        // SAFETY: non-null, readable for `raw_len` bytes (the contract).
        (false, n) => Some(unsafe { core::slice::from_raw_parts(d.raw.cast::<u8>(), n as usize) }),
    };
    Ok(SampleData {
        misc: d.misc,
        ip: d.ip,
        addr: d.addr,
        period: d.period,
        weight: d.weight,
        data_src: d.data_src,
        transaction: d.transaction,
        phys_addr: d.phys_addr,
        cgroup: d.cgroup,
        data_page_size: d.data_page_size,
        code_page_size: d.code_page_size,
        callchain,
        raw,
        ..SampleData::default()
    })
}
