// SPDX-License-Identifier: GPL-2.0
//! The PMU's sysfs attributes, as Intel PT's (arch/x86/events/intel/pt.c)
//! and perfaux_pt.ko's (kmod/perfaux_sysfs.c): `format/`, the attr.config
//! bits perf parses `intel_pt/.../` terms into; `caps/`, what the tracer
//! implements, as CPUID leaf 0x14 would report it for hardware that does
//! the same; and the timing attributes. perf reads them to build its
//! default configuration and to check the user's. The tables are the
//! engine's (`perfaux::pt::sysfs`), built into attributes at compile time.

use core::ffi::CStr;
use core::ptr;
use kernel::ffi::{c_char, c_void};
use perfaux::pt::sysfs::{CAPS, FORMAT, TIMING};

use crate::bindings;

/// A read-only attribute `name` whose `show` is given `var`
/// (`dev_ext_attribute`, as `PMU_FORMAT_ATTR()` and pt.c's `PT_CAP()` make
/// them).
const fn ext_attr(
    name: &'static CStr,
    show: unsafe extern "C" fn(
        *mut bindings::device,
        *mut bindings::device_attribute,
        *mut c_char,
    ) -> isize,
    var: *mut c_void,
) -> bindings::dev_ext_attribute {
    bindings::dev_ext_attribute {
        attr: bindings::device_attribute {
            attr: bindings::attribute {
                name: name.as_ptr().cast(),
                mode: 0o444,
            },
            show: Some(show),
            store: None,
        },
        var,
    }
}

/// The attributes of one of the engine's tables, at compile time: each
/// entry `$a` becomes `ext_attr($a.name, $show, $var)`.
macro_rules! ext_attrs {
    ($table:expr, $show:expr, |$a:ident| $var:expr) => {{
        let mut out = [const { ext_attr(c"", $show, ptr::null_mut()) }; $table.len()];
        let mut i = 0;
        while i < $table.len() {
            let $a = &$table[i];
            out[i] = ext_attr($a.name, $show, $var);
            i += 1;
        }
        out
    }};
}

/// The attribute pointers of a group over `attrs`, NULL-terminated (`M`
/// is one more than `N`).
const fn attr_ptrs<const N: usize, const M: usize>(
    attrs: *mut [bindings::dev_ext_attribute; N],
) -> [*mut bindings::attribute; M] {
    let mut out = [ptr::null_mut(); M];
    let mut i = 0;
    while i < N {
        // SAFETY: only the address of element `i < N` of the array is taken.
        out[i] = unsafe { &raw mut (*attrs)[i].attr.attr };
        i += 1;
    }
    out
}

/// The `var` of the `dev_ext_attribute` whose `attr` field `attr` is.
///
/// # Safety
/// `attr` is the `attr` field of one of this file's attributes.
unsafe fn ext_var(attr: *mut bindings::device_attribute) -> *mut c_void {
    // SAFETY: `attr` is the first field of a live `dev_ext_attribute`
    // (this function's `# Safety`).
    unsafe { (*kernel::container_of!(attr, bindings::dev_ext_attribute, attr)).var }
}

/// `show` of a string attribute: the string and a newline.
///
/// # Safety
/// Called by sysfs with one of this file's string attributes (their `var`
/// a NUL-terminated string) and a page-sized buffer.
unsafe extern "C" fn show_str(
    _dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: one of this file's attributes, its `var` a C string; `buf`
    // is what sysfs_emit() takes.
    unsafe { bindings::sysfs_emit(buf, c"%s\n".as_ptr().cast(), ext_var(attr)) as isize }
}

/// `show` of a capability: the value in hexadecimal (pt_cap_show()).
///
/// # Safety
/// As `show_str`, for a capability (`var` holding the value).
unsafe extern "C" fn show_hex(
    _dev: *mut bindings::device,
    attr: *mut bindings::device_attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: as in `show_str`; `var` is a number.
    unsafe { bindings::sysfs_emit(buf, c"%lx\n".as_ptr().cast(), ext_var(attr) as usize) as isize }
}

// format/ and the timing attributes show a string, caps/ a number.
static mut FORMAT_EXT: [bindings::dev_ext_attribute; FORMAT.len()] =
    ext_attrs!(FORMAT, show_str, |a| a.config.as_ptr() as *mut c_void);
static mut FORMAT_ATTRS: [*mut bindings::attribute; FORMAT.len() + 1] =
    attr_ptrs(&raw mut FORMAT_EXT);
static mut CAP_EXT: [bindings::dev_ext_attribute; CAPS.len()] =
    ext_attrs!(CAPS, show_hex, |a| a.value as usize as *mut c_void);
static mut CAP_ATTRS: [*mut bindings::attribute; CAPS.len() + 1] = attr_ptrs(&raw mut CAP_EXT);
static mut TIMING_EXT: [bindings::dev_ext_attribute; TIMING.len()] =
    ext_attrs!(TIMING, show_str, |a| a.value.as_ptr() as *mut c_void);
static mut TIMING_ATTRS: [*mut bindings::attribute; TIMING.len() + 1] =
    attr_ptrs(&raw mut TIMING_EXT);

/// A named group over `attrs`.
const fn group(
    name: *const c_char,
    attrs: *mut *mut bindings::attribute,
) -> bindings::attribute_group {
    bindings::attribute_group {
        name,
        is_visible: None,
        is_bin_visible: None,
        attrs,
        bin_attrs: ptr::null_mut(),
    }
}

static mut CAP_GROUP: bindings::attribute_group =
    group(c"caps".as_ptr().cast(), (&raw mut CAP_ATTRS).cast());
static mut FORMAT_GROUP: bindings::attribute_group =
    group(c"format".as_ptr().cast(), (&raw mut FORMAT_ATTRS).cast());
static mut TIMING_GROUP: bindings::attribute_group =
    group(ptr::null(), (&raw mut TIMING_ATTRS).cast());

/// `pmu->attr_groups`, NULL-terminated.
static mut GROUPS: [*const bindings::attribute_group; 4] = [
    &raw const CAP_GROUP,
    &raw const FORMAT_GROUP,
    &raw const TIMING_GROUP,
    ptr::null(),
];

/// The attribute groups of the PMU. sysfs reads them (and the attributes)
/// from registration on; nothing writes them.
pub(crate) fn groups() -> *mut *const bindings::attribute_group {
    (&raw mut GROUPS).cast()
}
