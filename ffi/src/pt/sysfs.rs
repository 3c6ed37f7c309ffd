// SPDX-License-Identifier: MIT OR Apache-2.0
//! The `intel_pt` PMU's sysfs attributes for a C kernel module
//! (`perfaux::pt::sysfs`: `format/`, `caps/` and the timing attributes),
//! one by index, so that the module registers the engine's tables instead
//! of a copy of them.

use core::ffi::{c_char, c_int};

use perfaux::Error;
use perfaux::pt::sysfs::{CAPS, FORMAT, TIMING};

/// The attributes of `format/` (`perfaux_pt_format_attr`).
pub const PERFAUX_PT_FORMAT_ATTRS: u32 = 14;
/// The attributes of `caps/` (`perfaux_pt_cap_attr`).
pub const PERFAUX_PT_CAP_ATTRS: u32 = 18;
/// The timing attributes of the PMU's directory (`perfaux_pt_timing_attr`).
pub const PERFAUX_PT_TIMING_ATTRS: u32 = 2;

const _: () = assert!(
    PERFAUX_PT_FORMAT_ATTRS as usize == FORMAT.len()
        && PERFAUX_PT_CAP_ATTRS as usize == CAPS.len()
        && PERFAUX_PT_TIMING_ATTRS as usize == TIMING.len()
);

/// Writes `value` through `out`, or fails with `EINVAL` for a null `out`.
///
/// # Safety
/// `out` NULL or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, value: T) -> Result<(), Error> {
    if out.is_null() {
        return Err(Error::Invalid);
    }
    // SAFETY: non-null and valid for a write (this function's `# Safety`).
    unsafe { out.write(value) };
    Ok(())
}

/// `format/` attribute `index` (0 to `PERFAUX_PT_FORMAT_ATTRS - 1`): its
/// file name and content (`"config:10"`, without a newline), both static
/// NUL-terminated strings. Returns 0, `-ENOENT` past the last, `-EINVAL`
/// for a NULL out pointer.
///
/// # Safety
/// `name` and `config` NULL or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_format_attr(
    index: u32,
    name: *mut *const c_char,
    config: *mut *const c_char,
) -> c_int {
    let Some(a) = FORMAT.get(index as usize) else {
        return Error::NoEntry.errno();
    };
    // SAFETY: NULL or writable (this function's `# Safety`).
    match unsafe { put(name, a.name.as_ptr()).and_then(|()| put(config, a.config.as_ptr())) } {
        Ok(()) => 0,
        Err(e) => e.errno(),
    }
}

/// `caps/` attribute `index` (0 to `PERFAUX_PT_CAP_ATTRS - 1`): its file
/// name (a static NUL-terminated string) and value (shown in hexadecimal,
/// as `pt_cap_show` does). Returns 0, `-ENOENT` past the last, `-EINVAL` for
/// a NULL out pointer.
///
/// # Safety
/// `name` NULL or valid for a write of a pointer, `value` NULL or valid for
/// a write of a `u64`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_cap_attr(
    index: u32,
    name: *mut *const c_char,
    value: *mut u64,
) -> c_int {
    let Some(a) = CAPS.get(index as usize) else {
        return Error::NoEntry.errno();
    };
    // SAFETY: NULL or writable (this function's `# Safety`).
    match unsafe { put(name, a.name.as_ptr()).and_then(|()| put(value, a.value)) } {
        Ok(()) => 0,
        Err(e) => e.errno(),
    }
}

/// Timing attribute `index` (0 to `PERFAUX_PT_TIMING_ATTRS - 1`) of the
/// PMU's own directory: its file name and content, static NUL-terminated
/// strings. Returns 0, `-ENOENT` past the last, `-EINVAL` for a NULL out
/// pointer.
///
/// # Safety
/// `name` and `value` NULL or valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_timing_attr(
    index: u32,
    name: *mut *const c_char,
    value: *mut *const c_char,
) -> c_int {
    let Some(a) = TIMING.get(index as usize) else {
        return Error::NoEntry.errno();
    };
    // SAFETY: NULL or writable (this function's `# Safety`).
    match unsafe { put(name, a.name.as_ptr()).and_then(|()| put(value, a.value.as_ptr())) } {
        Ok(()) => 0,
        Err(e) => e.errno(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ffi::CStr;
    use std::string::String;
    use std::vec::Vec;

    fn s(p: *const c_char) -> String {
        // SAFETY: the engine's static strings.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap().into()
    }

    #[test]
    fn every_attribute_by_index_then_enoent() {
        let (mut name, mut text, mut value) = (core::ptr::null(), core::ptr::null(), 0u64);
        let mut format = Vec::new();
        for i in 0..PERFAUX_PT_FORMAT_ATTRS {
            // SAFETY: writable locals.
            let r = unsafe { perfaux_pt_format_attr(i, &mut name, &mut text) };
            assert_eq!(r, 0);
            format.push((s(name), s(text)));
        }
        assert!(format.contains(&("psb_period".into(), "config:24-27".into())));
        let mut caps = Vec::new();
        for i in 0..PERFAUX_PT_CAP_ATTRS {
            // SAFETY: writable locals.
            assert_eq!(unsafe { perfaux_pt_cap_attr(i, &mut name, &mut value) }, 0);
            caps.push((s(name), value));
        }
        assert!(caps.contains(&("psb_periods".into(), 0x3f)));
        for i in 0..PERFAUX_PT_TIMING_ATTRS {
            // SAFETY: writable locals.
            let r = unsafe { perfaux_pt_timing_attr(i, &mut name, &mut text) };
            assert_eq!(r, 0);
        }
        let enoent = Error::NoEntry.errno();
        // SAFETY: writable locals, or NULL.
        unsafe {
            assert_eq!(
                perfaux_pt_format_attr(PERFAUX_PT_FORMAT_ATTRS, &mut name, &mut text),
                enoent
            );
            assert_eq!(
                perfaux_pt_cap_attr(PERFAUX_PT_CAP_ATTRS, &mut name, &mut value),
                enoent
            );
            assert_eq!(
                perfaux_pt_timing_attr(PERFAUX_PT_TIMING_ATTRS, &mut name, &mut text),
                enoent
            );
            let einval = Error::Invalid.errno();
            assert_eq!(
                perfaux_pt_format_attr(0, core::ptr::null_mut(), &mut text),
                einval
            );
            assert_eq!(
                perfaux_pt_cap_attr(0, &mut name, core::ptr::null_mut()),
                einval
            );
        }
    }
}
