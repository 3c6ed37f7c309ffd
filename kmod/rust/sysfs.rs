// SPDX-License-Identifier: GPL-2.0
//! The PMU's sysfs attributes, as Intel PT's (arch/x86/events/intel/pt.c)
//! and perfaux_pt.ko's (kmod/perfaux_sysfs.c): `format/`, the attr.config
//! bits perf parses `intel_pt/.../` terms into; `caps/`, what the tracer
//! implements, as CPUID leaf 0x14 would report it for hardware that does
//! the same; and the timing attributes. perf reads them to build its
//! default configuration and to check the user's.

use core::ptr;
use kernel::ffi::{c_char, c_void};

use crate::perf;

/// `PMU_FORMAT_ATTR()` and `dev_ext_attribute` in one: a read-only
/// attribute `name` whose `show` is given `var`.
macro_rules! ext_attr {
    ($id:ident, $name:literal, $show:ident, $var:expr) => {
        static mut $id: perf::dev_ext_attribute = perf::dev_ext_attribute {
            attr: perf::device_attribute {
                attr: perf::attribute {
                    name: concat!($name, "\0").as_ptr().cast(),
                    mode: 0o444,
                },
                show: Some($show),
                store: None,
            },
            var: $var as *mut c_void,
        };
    };
}

/// A format attribute: `config:<bits>`.
macro_rules! format_attr {
    ($id:ident, $name:literal, $bits:literal) => {
        ext_attr!($id, $name, show_str, concat!($bits, "\0").as_ptr());
    };
}

/// A capability: a hexadecimal number.
macro_rules! cap_attr {
    ($id:ident, $name:literal, $value:expr) => {
        ext_attr!($id, $name, show_hex, $value as usize);
    };
}

/// The attribute pointers of a group, NULL-terminated.
macro_rules! attrs {
    ($($id:ident),* $(,)?) => {
        // SAFETY: only the addresses are taken.
        [$(unsafe { &raw mut $id.attr.attr },)* ptr::null_mut()]
    };
}

/// The `var` of the `dev_ext_attribute` whose `attr` field `attr` is.
///
/// # Safety
/// `attr` is the `attr` field of one of this file's attributes.
unsafe fn ext_var(attr: *mut perf::device_attribute) -> *mut c_void {
    // SAFETY: `attr` is the first field of a live `dev_ext_attribute`
    // (this function's `# Safety`).
    unsafe { (*kernel::container_of!(attr, perf::dev_ext_attribute, attr)).var }
}

/// `show` of a string attribute: the string and a newline.
///
/// # Safety
/// Called by sysfs with one of this file's string attributes (their `var`
/// a NUL-terminated string) and a page-sized buffer.
unsafe extern "C" fn show_str(
    _dev: *mut perf::device,
    attr: *mut perf::device_attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: one of this file's attributes, its `var` a C string; `buf`
    // is what sysfs_emit() takes.
    unsafe { perf::sysfs_emit(buf, c"%s\n".as_ptr().cast(), ext_var(attr)) as isize }
}

/// `show` of a capability: the value in hexadecimal (pt_cap_show()).
///
/// # Safety
/// As `show_str`, for a capability (`var` holding the value).
unsafe extern "C" fn show_hex(
    _dev: *mut perf::device,
    attr: *mut perf::device_attribute,
    buf: *mut c_char,
) -> isize {
    // SAFETY: as in `show_str`; `var` is a number.
    unsafe { perf::sysfs_emit(buf, c"%lx\n".as_ptr().cast(), ext_var(attr) as usize) as isize }
}

format_attr!(FORMAT_PT, "pt", "config:0");
format_attr!(FORMAT_CYC, "cyc", "config:1");
format_attr!(FORMAT_PWR_EVT, "pwr_evt", "config:4");
format_attr!(FORMAT_FUP_ON_PTW, "fup_on_ptw", "config:5");
format_attr!(FORMAT_MTC, "mtc", "config:9");
format_attr!(FORMAT_TSC, "tsc", "config:10");
format_attr!(FORMAT_NORETCOMP, "noretcomp", "config:11");
format_attr!(FORMAT_PTW, "ptw", "config:12");
format_attr!(FORMAT_BRANCH, "branch", "config:13");
format_attr!(FORMAT_EVENT, "event", "config:31");
format_attr!(FORMAT_NOTNT, "notnt", "config:55");
format_attr!(FORMAT_MTC_PERIOD, "mtc_period", "config:14-17");
format_attr!(FORMAT_CYC_THRESH, "cyc_thresh", "config:19-22");
format_attr!(FORMAT_PSB_PERIOD, "psb_period", "config:24-27");

static mut FORMAT_ATTRS: [*mut perf::attribute; 15] = attrs![
    FORMAT_PT,
    FORMAT_CYC,
    FORMAT_PWR_EVT,
    FORMAT_EVENT,
    FORMAT_NOTNT,
    FORMAT_FUP_ON_PTW,
    FORMAT_MTC,
    FORMAT_TSC,
    FORMAT_NORETCOMP,
    FORMAT_PTW,
    FORMAT_BRANCH,
    FORMAT_MTC_PERIOD,
    FORMAT_CYC_THRESH,
    FORMAT_PSB_PERIOD,
];

// What the software tracer does: ToPA output with several entries per
// table, configurable PSB frequency (psb_cyc, psb_periods) and nothing
// else: no MTC, CYC thresholds, PTWRITE, power or event trace, IP or CR3
// filtering. pt_event_valid() refuses the config bits of what is 0 here,
// and so does PtConfig::from_attr().
cap_attr!(CAP_MAX_SUBLEAF, "max_subleaf", 1);
cap_attr!(CAP_CR3_FILTERING, "cr3_filtering", 0);
cap_attr!(CAP_PSB_CYC, "psb_cyc", 1);
cap_attr!(CAP_IP_FILTERING, "ip_filtering", 0);
cap_attr!(CAP_MTC, "mtc", 0);
cap_attr!(CAP_PTWRITE, "ptwrite", 0);
cap_attr!(CAP_POWER_EVENT_TRACE, "power_event_trace", 0);
cap_attr!(CAP_EVENT_TRACE, "event_trace", 0);
cap_attr!(CAP_TNT_DISABLE, "tnt_disable", 0);
cap_attr!(CAP_TOPA_OUTPUT, "topa_output", 1);
cap_attr!(CAP_TOPA_MULTIPLE_ENTRIES, "topa_multiple_entries", 1);
cap_attr!(CAP_SINGLE_RANGE_OUTPUT, "single_range_output", 0);
cap_attr!(CAP_OUTPUT_SUBSYS, "output_subsys", 0);
cap_attr!(CAP_PAYLOADS_LIP, "payloads_lip", 0);
cap_attr!(CAP_NUM_ADDRESS_RANGES, "num_address_ranges", 0);
cap_attr!(CAP_MTC_PERIODS, "mtc_periods", 0);
cap_attr!(CAP_CYCLE_THRESHOLDS, "cycle_thresholds", 0);
cap_attr!(
    CAP_PSB_PERIODS,
    "psb_periods",
    perfaux::pt::config::PSB_PERIODS
);

static mut CAP_ATTRS: [*mut perf::attribute; 19] = attrs![
    CAP_MAX_SUBLEAF,
    CAP_CR3_FILTERING,
    CAP_PSB_CYC,
    CAP_IP_FILTERING,
    CAP_MTC,
    CAP_PTWRITE,
    CAP_POWER_EVENT_TRACE,
    CAP_EVENT_TRACE,
    CAP_TNT_DISABLE,
    CAP_TOPA_OUTPUT,
    CAP_TOPA_MULTIPLE_ENTRIES,
    CAP_SINGLE_RANGE_OUTPUT,
    CAP_OUTPUT_SUBSYS,
    CAP_PAYLOADS_LIP,
    CAP_NUM_ADDRESS_RANGES,
    CAP_MTC_PERIODS,
    CAP_CYCLE_THRESHOLDS,
    CAP_PSB_PERIODS,
];

// pt.c's timing attributes: the tracer's CBR packets carry ratio 0 and it
// has no ART, so both are 0.
ext_attr!(
    TIMING_MAX_NONTURBO_RATIO,
    "max_nonturbo_ratio",
    show_str,
    c"0".as_ptr().cast::<u8>()
);
ext_attr!(
    TIMING_TSC_ART_RATIO,
    "tsc_art_ratio",
    show_str,
    c"0:0".as_ptr().cast::<u8>()
);

static mut TIMING_ATTRS: [*mut perf::attribute; 3] =
    attrs![TIMING_MAX_NONTURBO_RATIO, TIMING_TSC_ART_RATIO];

/// A named group over `attrs`.
const fn group(name: *const c_char, attrs: *mut *mut perf::attribute) -> perf::attribute_group {
    perf::attribute_group {
        name,
        is_visible: None,
        is_bin_visible: None,
        attrs,
        bin_attrs: ptr::null_mut(),
    }
}

static mut CAP_GROUP: perf::attribute_group =
    group(c"caps".as_ptr().cast(), (&raw mut CAP_ATTRS).cast());
static mut FORMAT_GROUP: perf::attribute_group =
    group(c"format".as_ptr().cast(), (&raw mut FORMAT_ATTRS).cast());
static mut TIMING_GROUP: perf::attribute_group = group(ptr::null(), (&raw mut TIMING_ATTRS).cast());

/// `pmu->attr_groups`, NULL-terminated.
static mut GROUPS: [*const perf::attribute_group; 4] = [
    &raw const CAP_GROUP,
    &raw const FORMAT_GROUP,
    &raw const TIMING_GROUP,
    ptr::null(),
];

/// The attribute groups of the PMU. sysfs reads them (and the attributes)
/// from registration on; nothing writes them.
pub(crate) fn groups() -> *mut *const perf::attribute_group {
    (&raw mut GROUPS).cast()
}
