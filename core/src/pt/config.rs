// SPDX-License-Identifier: MIT OR Apache-2.0
//! The Intel PT event configuration: the `attr.config` bits of the
//! `intel_pt` PMU's `format/` attributes (`arch/x86/events/intel/pt.c`),
//! checked as `pt_event_valid` checks them against what this tracer
//! implements, and turned into the `IA32_RTIT_CTL` value `pt_config`
//! programs.
//!
//! ```
//! use perfaux::pt::config::{PtConfig, bits};
//! // `perf record -e intel_pt/tsc,noretcomp,psb_period=2/`
//! let c = PtConfig::from_attr(bits::TSC | bits::NORETCOMP | (2 << bits::PSB_PERIOD_SHIFT)).unwrap();
//! assert!(c.tsc && !c.return_compression && c.branches);
//! assert_eq!(c.psb_freq, 2);
//! // `intel_pt/cyc,cyc_thresh=3/`: a CYC packet once 4 cycles have passed.
//! let c = PtConfig::from_attr(bits::CYC | (3 << bits::CYC_THRESH_SHIFT)).unwrap();
//! assert!(c.cyc && c.cyc_thresh == 3);
//! // MTC is not implemented: refused, as `pt_event_valid` refuses it on
//! // hardware without the `mtc` capability.
//! assert!(PtConfig::from_attr(bits::MTC).is_err());
//! ```

use crate::error::{Error, Result};

/// The `attr.config` bits (`/sys/bus/event_source/devices/intel_pt/format/`),
/// which are the `IA32_RTIT_CTL` bits of the same names.
pub mod bits {
    /// `pt` (config:0): `RTIT_CTL.TraceEn` as "pass-through": with it set,
    /// `branch` is honoured as given; without it, branches are always on.
    pub const PT: u64 = 1 << 0;
    /// `cyc` (config:1): cycle-accurate mode (CYC packets).
    pub const CYC: u64 = 1 << 1;
    /// `pwr_evt` (config:4): power event trace.
    pub const PWR_EVT: u64 = 1 << 4;
    /// `fup_on_ptw` (config:5).
    pub const FUP_ON_PTW: u64 = 1 << 5;
    /// `mtc` (config:9): MTC timing packets.
    pub const MTC: u64 = 1 << 9;
    /// `tsc` (config:10): TSC packets.
    pub const TSC: u64 = 1 << 10;
    /// `noretcomp` (config:11): every return is a TIP (`RTIT_CTL.DisRETC`).
    pub const NORETCOMP: u64 = 1 << 11;
    /// `ptw` (config:12): PTWRITE packets.
    pub const PTW: u64 = 1 << 12;
    /// `branch` (config:13): branch packets (`RTIT_CTL.BranchEn`).
    pub const BRANCH: u64 = 1 << 13;
    /// `mtc_period` (config:14-17).
    pub const MTC_PERIOD: u64 = 0xf << 14;
    /// `cyc_thresh` (config:19-22).
    pub const CYC_THRESH: u64 = 0xf << CYC_THRESH_SHIFT;
    /// Where `cyc_thresh` starts.
    pub const CYC_THRESH_SHIFT: u32 = 19;
    /// `psb_period` (config:24-27): a PSB+ every 2 KiB << n of output.
    pub const PSB_PERIOD: u64 = 0xf << PSB_PERIOD_SHIFT;
    /// Where `psb_period` starts.
    pub const PSB_PERIOD_SHIFT: u32 = 24;
    /// `event` (config:31): event trace.
    pub const EVENT: u64 = 1 << 31;
    /// `notnt` (config:55): TNT disable.
    pub const NOTNT: u64 = 1 << 55;
    /// `PT_CONFIG_MASK`: every bit `pt_event_valid` lets through at all.
    pub const MASK: u64 = PT
        | TSC
        | NORETCOMP
        | BRANCH
        | CYC
        | CYC_THRESH
        | PSB_PERIOD
        | MTC
        | MTC_PERIOD
        | PWR_EVT
        | EVENT
        | NOTNT
        | FUP_ON_PTW
        | PTW;
}

/// The PSB frequencies this tracer offers (`caps/psb_periods`): 2 KiB to
/// 64 KiB, encodings 0 to 5.
pub const PSB_PERIODS: u64 = 0x3f;

/// The CYC thresholds this tracer offers (`caps/cycle_thresholds`): every
/// encoding, 0 (a CYC with every CYC-eligible packet) to 15 (once 2^14
/// cycles have passed).
pub const CYCLE_THRESHOLDS: u64 = 0xffff;

/// What the tracer does for one event: the fields of `IA32_RTIT_CTL` it
/// honours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PtConfig {
    /// TSC packets (in every PSB+ and when asked for).
    pub tsc: bool,
    /// Returns to the matching call site are a taken TNT bit (`noretcomp`
    /// clear), else every return is a TIP.
    pub return_compression: bool,
    /// Branch packets (TNT, TIP, FUP); off only with `pt` and no `branch`.
    pub branches: bool,
    /// `PSBFreq`: a PSB+ every `2 KiB << psb_freq` of output.
    pub psb_freq: u8,
    /// `CYCEn`: cycle-accurate mode, a CYC packet before CYC-eligible
    /// packets (see [`PacketStream`](crate::soft_pt::stream::PacketStream)).
    pub cyc: bool,
    /// `CycThresh`: with `cyc`, a CYC only once `2^(cyc_thresh - 1)`
    /// cycles have passed since the last (0: whenever any have).
    pub cyc_thresh: u8,
}

impl Default for PtConfig {
    /// `attr.config` 0: branches on (the legacy default), no TSC, returns
    /// compressed, a PSB+ every 2 KiB.
    fn default() -> PtConfig {
        PtConfig {
            tsc: false,
            return_compression: true,
            branches: true,
            psb_freq: 0,
            cyc: false,
            cyc_thresh: 0,
        }
    }
}

impl PtConfig {
    /// `pt_event_valid` for a tracer whose capabilities are: `psb_cyc`
    /// (cycle-accurate mode with [`CYCLE_THRESHOLDS`], configurable PSB
    /// frequency with [`PSB_PERIODS`]); no `mtc`, `power_event_trace`,
    /// `event_trace`, `tnt_disable` or `ptwrite`; `branch_en_always_on`
    /// clear. `EINVAL` for anything else, as Linux returns from
    /// `pt_event_init`. `fup_on_ptw` without `ptw` is taken and does
    /// nothing, as there.
    pub fn from_attr(attr_config: u64) -> Result<PtConfig> {
        use bits::*;
        if attr_config & MASK != attr_config {
            return Err(Error::Invalid);
        }
        let psb_freq = (attr_config & PSB_PERIOD) >> PSB_PERIOD_SHIFT;
        if psb_freq != 0 && PSB_PERIODS & (1 << psb_freq) == 0 {
            return Err(Error::Invalid);
        }
        let cyc_thresh = (attr_config & CYC_THRESH) >> CYC_THRESH_SHIFT;
        if cyc_thresh != 0 && CYCLE_THRESHOLDS & (1 << cyc_thresh) == 0 {
            return Err(Error::Invalid);
        }
        if attr_config & (MTC | MTC_PERIOD | PWR_EVT | EVENT | NOTNT | PTW) != 0 {
            return Err(Error::Invalid);
        }
        // BRANCH only with the pass-through bit; without it branches are on.
        let branches = if attr_config & PT != 0 {
            attr_config & BRANCH != 0
        } else if attr_config & BRANCH != 0 {
            return Err(Error::Invalid);
        } else {
            true
        };
        Ok(PtConfig {
            tsc: attr_config & TSC != 0,
            return_compression: attr_config & NORETCOMP == 0,
            branches,
            psb_freq: psb_freq as u8,
            cyc: attr_config & CYC != 0,
            cyc_thresh: cyc_thresh as u8,
        })
    }
}

/// Bits of `IA32_RTIT_CTL` (the SDM's names; `pt_config` writes them).
pub mod rtit_ctl {
    /// `TraceEn`: tracing on.
    pub const TRACE_EN: u64 = 1 << 0;
    /// `CYCEn`: cycle-accurate mode.
    pub const CYC_EN: u64 = 1 << 1;
    /// `ToPA`: output through ToPA tables (else single-range).
    pub const TOPA: u64 = 1 << 8;
    /// `TSCEn`: TSC packets.
    pub const TSC_EN: u64 = 1 << 10;
    /// `DisRETC`: no return compression.
    pub const DIS_RETC: u64 = 1 << 11;
    /// `BranchEn`: branch packets.
    pub const BRANCH_EN: u64 = 1 << 13;
    /// `PSBFreq` (bits 27:24).
    pub const PSB_FREQ: u64 = 0xf << PSB_FREQ_SHIFT;
    /// Where `PSBFreq` starts.
    pub const PSB_FREQ_SHIFT: u32 = 24;
    /// `CycThresh` (bits 22:19).
    pub const CYC_THRESH: u64 = 0xf << CYC_THRESH_SHIFT;
    /// Where `CycThresh` starts.
    pub const CYC_THRESH_SHIFT: u32 = 19;
    /// The configuration fields (what [`PtConfig`](super::PtConfig) holds).
    pub const CONFIG: u64 = CYC_EN | TSC_EN | DIS_RETC | BRANCH_EN | CYC_THRESH | PSB_FREQ;
}

impl PtConfig {
    /// The `IA32_RTIT_CTL` configuration fields for this configuration
    /// (`pt_config`: `CYCEn`, `TSCEn`, `DisRETC`, `BranchEn`, `CycThresh`,
    /// `PSBFreq`).
    pub const fn rtit_ctl(self) -> u64 {
        let mut ctl = (self.psb_freq as u64 & 0xf) << rtit_ctl::PSB_FREQ_SHIFT
            | (self.cyc_thresh as u64 & 0xf) << rtit_ctl::CYC_THRESH_SHIFT;
        if self.cyc {
            ctl |= rtit_ctl::CYC_EN;
        }
        if self.tsc {
            ctl |= rtit_ctl::TSC_EN;
        }
        if !self.return_compression {
            ctl |= rtit_ctl::DIS_RETC;
        }
        if self.branches {
            ctl |= rtit_ctl::BRANCH_EN;
        }
        ctl
    }

    /// The configuration the fields of an `IA32_RTIT_CTL` value say (the
    /// other bits are ignored).
    pub const fn from_rtit_ctl(ctl: u64) -> PtConfig {
        PtConfig {
            tsc: ctl & rtit_ctl::TSC_EN != 0,
            return_compression: ctl & rtit_ctl::DIS_RETC == 0,
            branches: ctl & rtit_ctl::BRANCH_EN != 0,
            psb_freq: ((ctl & rtit_ctl::PSB_FREQ) >> rtit_ctl::PSB_FREQ_SHIFT) as u8,
            cyc: ctl & rtit_ctl::CYC_EN != 0,
            cyc_thresh: ((ctl & rtit_ctl::CYC_THRESH) >> rtit_ctl::CYC_THRESH_SHIFT) as u8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bits::*;
    use super::*;

    #[test]
    fn pt_event_valid_rules() {
        assert_eq!(PtConfig::from_attr(0), Ok(PtConfig::default()));
        // BRANCH without the pass-through bit is refused; with it, honoured.
        assert_eq!(PtConfig::from_attr(BRANCH), Err(Error::Invalid));
        assert!(PtConfig::from_attr(PT | BRANCH).unwrap().branches);
        assert!(!PtConfig::from_attr(PT).unwrap().branches);
        // Bits outside PT_CONFIG_MASK.
        assert_eq!(PtConfig::from_attr(1 << 2), Err(Error::Invalid));
        assert_eq!(PtConfig::from_attr(1 << 63), Err(Error::Invalid));
        // PSB periods 0-5 offered, 6-15 not.
        for n in 0..16u64 {
            let r = PtConfig::from_attr(n << PSB_PERIOD_SHIFT);
            assert_eq!(r.is_ok(), n <= 5, "psb_period={n}");
        }
        for bad in [MTC, 3 << 14, PWR_EVT, EVENT, NOTNT, PTW, PTW | FUP_ON_PTW] {
            assert_eq!(PtConfig::from_attr(bad), Err(Error::Invalid), "{bad:#x}");
        }
        let c = PtConfig::from_attr(TSC | NORETCOMP).unwrap();
        assert!(c.tsc && !c.return_compression);
        // Cycle-accurate mode, every threshold; a threshold alone is taken
        // (and does nothing without CYCEn), as pt_event_valid takes it.
        for n in 0..16u64 {
            let c = PtConfig::from_attr(CYC | n << CYC_THRESH_SHIFT).unwrap();
            assert!(c.cyc && u64::from(c.cyc_thresh) == n);
        }
        assert!(!PtConfig::from_attr(5 << CYC_THRESH_SHIFT).unwrap().cyc);
        // FUPonPTW alone: pt_event_valid checks it only with PTW.
        assert_eq!(PtConfig::from_attr(FUP_ON_PTW), Ok(PtConfig::default()));
    }

    #[test]
    fn rtit_ctl_round_trips_every_valid_config() {
        for attr in [
            0,
            PT,
            PT | BRANCH,
            TSC,
            NORETCOMP,
            TSC | NORETCOMP | (5 << PSB_PERIOD_SHIFT),
            CYC,
            CYC | TSC | (15 << CYC_THRESH_SHIFT),
        ] {
            let c = PtConfig::from_attr(attr).unwrap();
            let ctl = c.rtit_ctl();
            assert_eq!(ctl & !rtit_ctl::CONFIG, 0);
            assert_eq!(
                PtConfig::from_rtit_ctl(ctl | rtit_ctl::TRACE_EN | rtit_ctl::TOPA),
                c
            );
        }
        // The attr bits and the MSR bits coincide where Linux copies them.
        assert_eq!(
            PtConfig::from_attr(TSC).unwrap().rtit_ctl() & rtit_ctl::TSC_EN,
            TSC
        );
    }
}
