// SPDX-License-Identifier: MIT OR Apache-2.0
//! Size negotiation: `perf_copy_attr` + `copy_struct_from_user` (`include/linux/uaccess.h`).

use super::rule::Rule;
use super::validate::{CopyPolicy, validate_attr};
use crate::abi::{PAGE_SIZE, PERF_ATTR_SIZE, PERF_ATTR_SIZE_VER0, PerfEventAttr, attr_offsets};

/// Byte range of the `size` field in a user attr.
const SIZE_FIELD: core::ops::Range<usize> = attr_offsets::SIZE..attr_offsets::SIZE + 4;

/// Copies a user attr in, as `perf_event_open(2)` does, and runs the
/// post-copy checks.
///
/// `uattr` is the memory the caller may access, starting at the attr: its
/// length is how many bytes are readable. The function reads no byte at or
/// past the attr's own `size` (nor past `uattr.len()`), and writes only the
/// `size` field, and only on `E2BIG`.
///
/// Steps, in Linux's order:
/// - fewer than 8 readable bytes (the `size` field cannot be read):
///   [`Rule::SizeUnreadable`] (`EFAULT`);
/// - `size == 0` means [`PERF_ATTR_SIZE_VER0`];
/// - `size < 64` or `size > 4096`: [`Rule::SizeOutOfRange`] (`E2BIG`);
/// - `size > 136`: the bytes `[136, size)` must be zero. A non-zero byte gives
///   [`Rule::UnknownTailNonZero`] (`E2BIG`); reaching past `uattr.len()`
///   before finding one gives [`Rule::AttrUnreadable`] (`EFAULT`), with
///   nothing written back;
/// - `size <= 136` and `size > uattr.len()`: [`Rule::AttrUnreadable`];
/// - the first `min(size, 136)` bytes are copied, the rest of the attr is
///   zero (a size that ends inside a field copies it partially: size 114 takes the two low
///   bytes of `aux_sample_size`);
/// - `attr.size` keeps the caller's value, even above 136;
/// - the checks of [`validate_attr`].
///
/// On every `E2BIG` the supported size (136) is written into the `size` field
/// of `uattr`, as `put_user(sizeof(*attr), &uattr->size)` does.
///
/// Byte-granular faults: Linux scans the tail word by word, so a fault at a
/// page boundary behaves exactly as here; with a limit inside a word this
/// function is the precise one (it never reads a byte the caller withheld).
pub fn copy_attr(uattr: &mut [u8], policy: &CopyPolicy) -> Result<PerfEventAttr, Rule> {
    let result = negotiate(uattr);
    if matches!(result, Err(Rule::SizeOutOfRange | Rule::UnknownTailNonZero)) {
        write_back_size(uattr);
    }
    let mut attr = result?;
    validate_attr(&mut attr, policy)?;
    Ok(attr)
}

/// Writes the supported attr size (136) into the `size` field of a user
/// attr, as the kernel does on `E2BIG`. Does nothing if the field is not
/// within `uattr`.
pub fn write_back_size(uattr: &mut [u8]) {
    if let Some(field) = uattr.get_mut(SIZE_FIELD) {
        field.copy_from_slice(&PERF_ATTR_SIZE.to_ne_bytes());
    }
}

/// The first steps of `perf_copy_attr`: read the size, bound it, check the unknown tail,
/// copy the known part.
fn negotiate(uattr: &[u8]) -> Result<PerfEventAttr, Rule> {
    let size_bytes: [u8; 4] = uattr
        .get(SIZE_FIELD)
        .and_then(|b| b.try_into().ok())
        .ok_or(Rule::SizeUnreadable)?;
    let mut size = u32::from_ne_bytes(size_bytes);

    // ABI compatibility quirk: an attr of size 0 is a VER0 attr.
    if size == 0 {
        size = PERF_ATTR_SIZE_VER0;
    }
    if size < PERF_ATTR_SIZE_VER0 || size as usize > PAGE_SIZE {
        return Err(Rule::SizeOutOfRange);
    }
    let size = size as usize;
    let known = PERF_ATTR_SIZE as usize;

    if size > known {
        // check_zeroed_user() on [known, size): the first non-zero byte
        // decides, unless the readable memory ends before one is found.
        let readable_tail = uattr.get(known..size.min(uattr.len())).unwrap_or(&[]);
        if readable_tail.iter().any(|&b| b != 0) {
            return Err(Rule::UnknownTailNonZero);
        }
        if size > uattr.len() {
            return Err(Rule::AttrUnreadable);
        }
    }

    let copy_len = size.min(known);
    let src = uattr.get(..copy_len).ok_or(Rule::AttrUnreadable)?;
    let mut image = [0u8; PERF_ATTR_SIZE as usize];
    image[..copy_len].copy_from_slice(src);

    let mut attr = PerfEventAttr::from_bytes(&image);
    attr.size = size as u32;
    Ok(attr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn copy(b: &mut [u8]) -> Result<PerfEventAttr, Error> {
        copy_attr(b, &CopyPolicy::default()).map_err(Error::from)
    }
    use crate::abi::{PERF_ATTR_SIZE_VER5, PERF_ATTR_SIZE_VER8};

    fn user(size: u32) -> [u8; 4200] {
        let mut b = [0u8; 4200];
        b[4..8].copy_from_slice(&size.to_ne_bytes());
        b
    }

    fn size_field(b: &[u8]) -> u32 {
        u32::from_ne_bytes(b[4..8].try_into().unwrap())
    }

    #[test]
    fn size_zero_is_ver0() {
        let mut b = user(0);
        b[64] = 0xff; // beyond VER0: never read
        let a = copy(&mut b[..64]).unwrap();
        assert_eq!(a.size, 64);
        assert_eq!(a.config2, 0);
    }

    #[test]
    fn out_of_range_sizes_are_e2big_with_write_back() {
        for size in [1u32, 63, 4097, u32::MAX] {
            let mut b = user(size);
            assert_eq!(copy(&mut b), Err(Error::TooBig), "{size}");
            assert_eq!(size_field(&b), PERF_ATTR_SIZE_VER8);
        }
    }

    #[test]
    fn larger_sizes_need_a_zero_tail() {
        let mut b = user(144);
        let a = copy(&mut b[..144]).unwrap();
        assert_eq!(a.size, 144);
        b[143] = 1;
        assert_eq!(copy(&mut b[..144]), Err(Error::TooBig));
        assert_eq!(size_field(&b), 136);
    }

    #[test]
    fn short_sizes_copy_partially() {
        let mut b = user(PERF_ATTR_SIZE_VER5);
        b[112..116].copy_from_slice(&0x0102_0304u32.to_ne_bytes());
        let a = copy(&mut b[..112]).unwrap();
        assert_eq!(a.aux_sample_size, 0);
        b[4..8].copy_from_slice(&114u32.to_ne_bytes());
        let a = copy(&mut b[..114]).unwrap();
        assert_eq!(a.aux_sample_size, 0x0304);
    }

    #[test]
    fn unreadable_memory_is_efault_without_write_back() {
        let mut b = user(136);
        for len in [0, 3, 7] {
            assert_eq!(copy(&mut b[..len]), Err(Error::Fault));
        }
        assert_eq!(copy(&mut b[..135]), Err(Error::Fault));
        b[4..8].copy_from_slice(&200u32.to_ne_bytes());
        assert_eq!(copy(&mut b[..150]), Err(Error::Fault));
        assert_eq!(size_field(&b), 200);
        // A non-zero tail byte before the unreadable part wins: E2BIG.
        b[140] = 1;
        assert_eq!(copy(&mut b[..150]), Err(Error::TooBig));
        assert_eq!(size_field(&b), 136);
    }

    #[test]
    fn junk_past_the_callers_size_is_never_read() {
        let mut b = [0xa5u8; 200];
        b[..112].fill(0);
        b[4..8].copy_from_slice(&112u32.to_ne_bytes());
        let a = copy(&mut b).unwrap();
        assert_eq!(a.size, 112);
        assert_eq!(a.aux_sample_size, 0);
        assert_eq!(a.config3, 0);
    }
}
