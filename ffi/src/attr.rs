// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux_attr_copy` and `perfaux_event_check`: attr copy-in and the
//! open-time AUX/group rules (`perf_copy_attr`, `sys_perf_event_open`).

use core::ffi::{c_int, c_void};
use core::ptr;

use perfaux::abi::{PAGE_SIZE, PERF_ATTR_SIZE, PerfEventAttr};
use perfaux::attr::{CopyPolicy, GroupLeader, check_event, copy_attr, validate_attr};
use perfaux::{Error, PmuCaps};

/// Size in bytes of the normalized attr `perfaux_attr_copy` writes
/// (`struct perf_event_attr` through `PERF_ATTR_SIZE_VER8`).
pub const PERFAUX_ATTR_SIZE: u32 = 136;

const _: () = assert!(PERFAUX_ATTR_SIZE == PERF_ATTR_SIZE);

/// Copies a user-space `struct perf_event_attr` in and validates it, as
/// Linux 6.18's `perf_event_open(2)` does (size negotiation, then the
/// post-copy checks).
///
/// `uattr` points at the attr as user space passed it; its `size` field is
/// at offset 4; `readable` bytes from `uattr` may be read. No byte at or
/// past the attr's own `size` is read. On success the normalized 136-byte
/// attr (zero-extended, `size` kept as given, `sample_max_stack` and the
/// branch privilege levels filled in as Linux does) is written to `out`,
/// which must hold `out_len >= 136` bytes; on failure `out` is untouched.
///
/// Returns 0, or:
/// - `-EINVAL` if `out` is NULL, `out_len < 136`, or `out` overlaps the
///   readable attr (checked first, before `uattr` is touched);
/// - `-EFAULT` if `uattr` is NULL, `readable < 8`, or the attr's bytes reach
///   past `readable`;
/// - `-E2BIG` for a size below 64 or above 4096, or non-zero bytes past the
///   136 known; then 136 is written into the u32 at offset 4 of `uattr`;
/// - `-EINVAL`, `-EACCES`, `-ENOSYS` from the post-copy checks.
///
/// # Safety
/// `uattr` (unless NULL) must be valid for reads of `readable` bytes and for
/// a 4-byte write at offset 4, and `out` (unless NULL) valid for writes of
/// `out_len` bytes; neither may be modified by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_attr_copy(
    uattr: *mut c_void,
    readable: usize,
    out: *mut c_void,
    out_len: usize,
) -> c_int {
    if out.is_null() || out_len < PERF_ATTR_SIZE as usize {
        return Error::Invalid.errno();
    }
    if uattr.is_null() || readable < 8 {
        return Error::Fault.errno();
    }
    // The kernel never looks past PAGE_SIZE bytes of an attr, so neither do
    // we; this also keeps the slice below within isize::MAX.
    let len = readable.min(PAGE_SIZE);
    if ranges_overlap(uattr as usize, len, out as usize, PERF_ATTR_SIZE as usize) {
        return Error::Invalid.errno();
    }
    // SAFETY: the caller guarantees `uattr` is valid for reads of
    // `readable >= len` bytes and for the size write-back, and that nothing
    // else accesses it during the call; `out` does not overlap it (checked
    // above), so this is the only reference to those bytes.
    let user = unsafe { core::slice::from_raw_parts_mut(uattr.cast::<u8>(), len) };
    match copy_attr(user, &CopyPolicy::default()) {
        Ok(attr) => {
            let bytes = attr.to_bytes();
            // SAFETY: `out` is valid for `out_len >= 136` bytes of writes (the
            // caller's contract, length checked above) and does not overlap
            // `bytes`, a local.
            unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), out.cast::<u8>(), bytes.len()) };
            0
        }
        Err(rule) => rule.error().errno(),
    }
}

/// Applies the open-time rules of `perf_event_open(2)` that concern AUX
/// events and groups, given the attrs and the PMU capabilities
/// (`PERFAUX_CAP_*`) of the event and of its group leader, in Linux 6.18's
/// order: PMU init (extended regs, `NO_EXCLUDE`), the AUX rules of
/// `perf_event_alloc` (`aux_output`, `aux_pause`/`aux_resume`,
/// `aux_start_paused`), sampling on a `NO_INTERRUPT` PMU, the clock, the
/// group rules (same clock; a sibling may be neither `exclusive` nor
/// `pinned`), then the AUX leader link (`aux_sample_size` needs a leader
/// whose PMU has `snapshot_aux`; `aux_output` an AUX instruction tracer;
/// `aux_pause`/`aux_resume` a leader that can pause).
///
/// `attr` and `leader_attr` are normalized attrs as `perfaux_attr_copy`
/// writes them (136 bytes, any alignment); `leader_attr` NULL means the
/// event opens without a group.
///
/// Returns 0 if the event may open, or `-EINVAL` / `-EOPNOTSUPP` as Linux
/// would. `-EINVAL` also for a NULL `attr`, capability bits perfaux does not
/// define, or an attr that does not pass `perfaux_attr_copy`'s checks.
///
/// # Safety
/// `attr` (unless NULL) must be valid for reads of 136 bytes, and so must
/// `leader_attr` unless NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_event_check(
    attr: *const c_void,
    pmu_caps: u32,
    leader_attr: *const c_void,
    leader_caps: u32,
) -> c_int {
    let (Some(caps), Some(leader_caps)) = (
        PmuCaps::from_bits(pmu_caps),
        PmuCaps::from_bits(leader_caps),
    ) else {
        return Error::Invalid.errno();
    };
    // SAFETY: the caller guarantees `attr` is NULL or valid for 136 bytes of reads.
    let Some(attr) = (unsafe { read_attr(attr) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: the caller guarantees `leader_attr` is NULL or valid for 136
    // bytes of reads (this function's `# Safety`).
    let leader = unsafe { read_attr(leader_attr) };
    for a in [Some(&attr), leader.as_ref()].into_iter().flatten() {
        if let Err(rule) = validate_attr(&mut a.clone(), &CopyPolicy::default()) {
            return rule.error().errno();
        }
    }
    // The attr-level checks: the caller vouches that the leader leads its
    // group on the event's CPU (the C ABI has no events here).
    let leader = leader
        .as_ref()
        .map(|attr| GroupLeader::new(attr, leader_caps));
    match check_event(&attr, caps, leader) {
        Ok(()) => 0,
        Err(rule) => rule.error().errno(),
    }
}

/// Reads a 136-byte attr image from C memory of any alignment.
///
/// # Safety
/// `p` must be NULL or valid for reads of 136 bytes.
pub(crate) unsafe fn read_attr(p: *const c_void) -> Option<PerfEventAttr> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and valid for 136 bytes of reads (the caller's
    // contract); `read_unaligned` has no alignment requirement and any bit
    // pattern is a valid byte array.
    let bytes = unsafe { ptr::read_unaligned(p.cast::<[u8; PERF_ATTR_SIZE as usize]>()) };
    Some(PerfEventAttr::from_bytes(&bytes))
}

/// Whether `[a, a + a_len)` and `[b, b + b_len)` share a byte (addresses
/// compared as integers, saturating at the top of the address space).
fn ranges_overlap(a: usize, a_len: usize, b: usize, b_len: usize) -> bool {
    a < b.saturating_add(b_len) && b < a.saturating_add(a_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_is_exact() {
        assert!(!ranges_overlap(0, 8, 8, 8));
        assert!(ranges_overlap(0, 9, 8, 8));
        assert!(!ranges_overlap(16, 8, 8, 8));
        assert!(ranges_overlap(usize::MAX - 4, 100, usize::MAX - 1, 100));
    }
}
