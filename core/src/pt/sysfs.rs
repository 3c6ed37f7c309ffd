// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PMU's sysfs attributes, as `pt.c` registers Intel PT's
//! (`pt_attr_groups`): [`FORMAT`], the `attr.config` bits perf parses
//! `intel_pt/.../` terms into; [`CAPS`], what the tracer implements, as
//! CPUID leaf 0x14 would report it for hardware that does the same; and
//! [`TIMING`], the timing attributes. perf reads them to build its default
//! configuration and to check the user's, so they must say exactly what
//! [`PtConfig::from_attr`](super::config::PtConfig::from_attr) accepts.
//! Both kernel modules register these tables (the C one through
//! `perfaux_pt_format_attr` and its siblings).
//!
//! ```
//! use perfaux::pt::sysfs::{CAPS, FORMAT};
//! let tsc = FORMAT.iter().find(|a| a.name == c"tsc").unwrap();
//! assert_eq!(tsc.config, c"config:10");
//! let mtc = CAPS.iter().find(|a| a.name == c"mtc").unwrap();
//! assert_eq!(mtc.value, 0); // no MTC packets: `intel_pt/mtc/` is refused
//! ```

use core::ffi::CStr;

use super::config::{CYCLE_THRESHOLDS, PSB_PERIODS, bits};

/// A `format/` attribute: the term `name` sets the `attr.config` bits
/// `config` names (`config:10`, `config:24-27`), which are `bits`.
#[derive(Clone, Copy, Debug)]
pub struct FormatAttr {
    /// The file's name, the term perf parses.
    pub name: &'static CStr,
    /// The file's content (without the newline `show` adds).
    pub config: &'static CStr,
    /// The mask `config` describes.
    pub bits: u64,
}

/// A `caps/` attribute: a capability and its value (`pt_cap_show` prints
/// it in hexadecimal).
#[derive(Clone, Copy, Debug)]
pub struct CapAttr {
    /// The file's name.
    pub name: &'static CStr,
    /// The capability's value.
    pub value: u64,
}

/// A timing attribute of the PMU's own directory, a fixed string.
#[derive(Clone, Copy, Debug)]
pub struct TimingAttr {
    /// The file's name.
    pub name: &'static CStr,
    /// The file's content (without the newline `show` adds).
    pub value: &'static CStr,
}

const fn format(name: &'static CStr, config: &'static CStr, bits: u64) -> FormatAttr {
    FormatAttr { name, config, bits }
}

const fn cap(name: &'static CStr, value: u64) -> CapAttr {
    CapAttr { name, value }
}

/// `format/`: the Intel PT format attributes (`pt_formats_attr`), every one
/// perf 6.1 knows, so that it parses every term and the driver refuses what
/// the tracer does not do (`pt_event_valid`).
pub const FORMAT: [FormatAttr; 14] = [
    format(c"pt", c"config:0", bits::PT),
    format(c"cyc", c"config:1", bits::CYC),
    format(c"pwr_evt", c"config:4", bits::PWR_EVT),
    format(c"event", c"config:31", bits::EVENT),
    format(c"notnt", c"config:55", bits::NOTNT),
    format(c"fup_on_ptw", c"config:5", bits::FUP_ON_PTW),
    format(c"mtc", c"config:9", bits::MTC),
    format(c"tsc", c"config:10", bits::TSC),
    format(c"noretcomp", c"config:11", bits::NORETCOMP),
    format(c"ptw", c"config:12", bits::PTW),
    format(c"branch", c"config:13", bits::BRANCH),
    format(c"mtc_period", c"config:14-17", bits::MTC_PERIOD),
    format(c"cyc_thresh", c"config:19-22", bits::CYC_THRESH),
    format(c"psb_period", c"config:24-27", bits::PSB_PERIOD),
];

/// `caps/`: what the software tracer does. ToPA output with several
/// entries per table, cycle-accurate mode and configurable PSB frequency
/// (`psb_cyc`, `cycle_thresholds`, `psb_periods`) and nothing else: no
/// MTC, PTWRITE, power or event trace, TNT disable, IP or CR3 filtering,
/// single-range output. `pt_event_valid` refuses the config bits of what
/// is 0 here, and so does `PtConfig::from_attr`.
pub const CAPS: [CapAttr; 18] = [
    cap(c"max_subleaf", 1),
    cap(c"cr3_filtering", 0),
    cap(c"psb_cyc", 1),
    cap(c"ip_filtering", 0),
    cap(c"mtc", 0),
    cap(c"ptwrite", 0),
    cap(c"power_event_trace", 0),
    cap(c"event_trace", 0),
    cap(c"tnt_disable", 0),
    cap(c"topa_output", 1),
    cap(c"topa_multiple_entries", 1),
    cap(c"single_range_output", 0),
    cap(c"output_subsys", 0),
    cap(c"payloads_lip", 0),
    cap(c"num_address_ranges", 0),
    cap(c"mtc_periods", 0),
    cap(c"cycle_thresholds", CYCLE_THRESHOLDS),
    cap(c"psb_periods", PSB_PERIODS),
];

/// `pt.c`'s timing attributes: the tracer has no ART and reports no
/// non-turbo ratio, so both are 0.
pub const TIMING: [TimingAttr; 2] = [
    TimingAttr {
        name: c"max_nonturbo_ratio",
        value: c"0",
    },
    TimingAttr {
        name: c"tsc_art_ratio",
        value: c"0:0",
    },
];

#[cfg(test)]
mod tests {
    use super::super::config::PtConfig;
    use super::*;

    /// The mask a `config:a` or `config:a-b` string names.
    fn mask(config: &CStr) -> u64 {
        let s = config.to_str().unwrap().strip_prefix("config:").unwrap();
        let (lo, hi) = match s.split_once('-') {
            Some((lo, hi)) => (lo.parse::<u32>().unwrap(), hi.parse::<u32>().unwrap()),
            None => (s.parse().unwrap(), s.parse().unwrap()),
        };
        (lo..=hi).fold(0, |m, b| m | 1 << b)
    }

    #[test]
    fn every_format_string_names_its_bits() {
        let mut all = 0;
        for a in FORMAT {
            assert_eq!(mask(a.config), a.bits, "{:?}", a.name);
            assert_eq!(all & a.bits, 0, "{:?} overlaps", a.name);
            all |= a.bits;
        }
        assert_eq!(
            all,
            bits::MASK,
            "every bit pt_event_valid knows has a format"
        );
    }

    fn cap_of(name: &CStr) -> u64 {
        CAPS.iter().find(|c| c.name == name).unwrap().value
    }

    fn format_of(name: &CStr) -> u64 {
        FORMAT.iter().find(|f| f.name == name).unwrap().bits
    }

    /// What `caps/` says 0 to, `from_attr` refuses, as `pt_event_valid`
    /// refuses it on hardware without the capability; what it offers,
    /// `from_attr` takes.
    #[test]
    fn the_caps_say_what_the_config_check_accepts() {
        for (cap, term) in [
            (c"mtc", c"mtc"),
            (c"ptwrite", c"ptw"),
            (c"power_event_trace", c"pwr_evt"),
            (c"event_trace", c"event"),
            (c"tnt_disable", c"notnt"),
        ] {
            assert_eq!(cap_of(cap), 0);
            assert!(PtConfig::from_attr(format_of(term)).is_err(), "{term:?}");
        }
        assert_eq!(cap_of(c"psb_cyc"), 1);
        assert!(PtConfig::from_attr(format_of(c"cyc")).unwrap().cyc);
        let thresholds = cap_of(c"cycle_thresholds");
        for n in 0..16u64 {
            let accepted = PtConfig::from_attr(bits::CYC | n << bits::CYC_THRESH_SHIFT).is_ok();
            assert_eq!(
                accepted,
                n == 0 || thresholds & (1 << n) != 0,
                "cyc_thresh={n}"
            );
        }
        let periods = cap_of(c"psb_periods");
        for n in 0..16u64 {
            let accepted = PtConfig::from_attr(n << bits::PSB_PERIOD_SHIFT).is_ok();
            assert_eq!(
                accepted,
                n == 0 || periods & (1 << n) != 0,
                "psb_period={n}"
            );
        }
        for term in [c"pt", c"tsc", c"noretcomp"] {
            assert!(PtConfig::from_attr(format_of(term)).is_ok(), "{term:?}");
        }
        assert!(PtConfig::from_attr(bits::PT | bits::BRANCH).is_ok());
    }
}
