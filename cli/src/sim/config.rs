// SPDX-License-Identifier: MIT OR Apache-2.0
//! What a run is: the [`Config`] a command line gives, checked as the
//! kernel and `perf record` check it, and the attrs of the group it opens
//! (the PT leader and its sampling counters), as
//! `perf record -e '{intel_pt//u,cycles:u}' --aux-sample` opens them.

use perfaux::abi::{PerfEventAttr, attr_flags, sample_type as st};
use perfaux::pt::config::bits as pt_bits;

/// The `attr.type` of the simulated `intel_pt` PMU.
pub const PT_TYPE: u32 = 8;
/// The tracer's PSB period for `psb_period=0`: 2 KiB, as the hardware's.
pub(super) const PSB_BASE: u64 = 2048;
/// Bytes between PSB+ sequences: `psb_period=0`, 2^(0+11), the smallest
/// Intel PT offers, so that every default 4 KiB sample holds a PSB (a
/// decoder's sync point) with room to spare.
pub const PSB_PERIOD: u64 = PSB_BASE;
// The simulated machine's clock: fixed, not configurable.
/// The perf time of the first simulated cycle (ns).
pub const START_NS: u64 = 1_000_000_000;
/// The simulated CPUs run at 2 GHz: two cycles a nanosecond, and so does
/// the TSC: perf time = TSC / 2 (`time_shift` 1, `time_mult` 1).
pub const CYCLES_PER_NS: u64 = 2;
/// Cycles each CPU runs before the rings are drained (100 µs).
pub const QUANTUM: u64 = 200_000;
/// A quantum in simulated nanoseconds: a run's duration is a whole number
/// of them.
pub const QUANTUM_NS: u64 = QUANTUM / CYCLES_PER_NS;
/// Cycles a thread runs before the CPU switches to the next (1 ms).
pub const TIMESLICE: u64 = 2_000_000;
/// Cycles between TSC packets (10 µs).
pub const TSC_EVERY: u64 = 20_000;

/// How the PT leader's AUX area is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Overwrite (snapshot) area; samplers carry the newest trace bytes.
    Snapshot,
    /// Writable area; the trace is read whole (`PERF_RECORD_AUX` +
    /// `PERF_RECORD_AUXTRACE`); samplers carry no AUX data (Intel PT takes
    /// AUX samples from snapshot buffers only).
    Full,
}

/// A sampling counter of the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// `cycles` (PERF_COUNT_HW_CPU_CYCLES).
    Cycles,
    /// `instructions` (PERF_COUNT_HW_INSTRUCTIONS).
    Instructions,
    /// `branches` (PERF_COUNT_HW_BRANCH_INSTRUCTIONS).
    Branches,
}

impl Counter {
    /// The name perf shows.
    pub fn name(self) -> &'static str {
        match self {
            Counter::Cycles => "cycles",
            Counter::Instructions => "instructions",
            Counter::Branches => "branches",
        }
    }

    fn config(self) -> u64 {
        match self {
            Counter::Cycles => 0,
            Counter::Instructions => 1,
            Counter::Branches => 4,
        }
    }
}

/// When the run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// After this much simulated time (ns) on every CPU.
    Duration(u64),
    /// Once this many samples are in the file.
    Samples(u64),
}

/// Everything that determines a run (and so the file's bytes).
#[derive(Clone, Debug)]
pub struct Config {
    /// Simulated CPUs.
    pub cpus: usize,
    /// When to stop.
    pub stop: Stop,
    /// Counter events between samples.
    pub period: u64,
    /// Frequency mode (`-F`): overflows a second each sampler aims at,
    /// the period retuned as the kernel retunes it; `period` unused.
    pub freq: Option<u64>,
    /// `attr.aux_sample_size` of the samplers (snapshot mode).
    pub aux_sample_size: u32,
    /// AUX area pages per CPU (a power of two).
    pub aux_pages: usize,
    /// Data ring pages per CPU (a power of two).
    pub data_pages: usize,
    /// The seed of every random choice.
    pub seed: u64,
    /// Snapshot or full-trace.
    pub mode: Mode,
    /// The sampling counters (at least one).
    pub counters: Vec<Counter>,
    /// The command line, for the file's cmdline feature.
    pub cmdline: Vec<String>,
    /// Trace the kernel's interrupt handler too (`intel_pt//` instead of
    /// `intel_pt//u`).
    pub kernel: bool,
    /// Keep what the ground truth needs and render it ([`Outputs::truth`](super::Outputs::truth)).
    pub truth: bool,
    /// The path the MMAP2 records give the program's ELF (where the caller
    /// writes [`Outputs::elf`](super::Outputs::elf)).
    pub binary: String,
    /// The samplers' `branch_sample_type` when samples carry branch stacks
    /// (`-b`, `-j`).
    pub branches: Option<u64>,
}

impl Config {
    /// Refuses what the kernel would refuse, or what makes no run.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=256).contains(&self.cpus) {
            return Err(format!("--cpus {}: between 1 and 256", self.cpus));
        }
        if self.period == 0 {
            return Err(
                "a period of 0 (-c, --period): a counter must overflow after at least one event"
                    .into(),
            );
        }
        if let Some(freq) = self.freq {
            // perf_event_open: EINVAL above perf_event_max_sample_rate
            // (its default, 100000), and 0 is no frequency.
            if !(1..=100_000).contains(&freq) {
                return Err(format!(
                    "-F {freq}: between 1 and 100000 (perf_event_max_sample_rate's default; perf_event_open: EINVAL)"
                ));
            }
        }
        if let Some(bits) = self.branches {
            crate::branch_filter::check(bits)?;
            if self.kernel {
                return Err(
                    "-b/-j with --kernel: branch stacks hold user branches only, and the kernel's samplers would ask for kernel ones too"
                        .into(),
                );
            }
        }
        if !self.data_pages.is_power_of_two() {
            return Err(format!(
                "--data-pages {}: the data ring is a power of two pages (perf_mmap: EINVAL)",
                self.data_pages
            ));
        }
        if !self.aux_pages.is_power_of_two() {
            return Err(format!(
                "--aux-pages {}: the AUX area is a power of two pages (perf_mmap: EINVAL)",
                self.aux_pages
            ));
        }
        if self.mode == Mode::Full && self.aux_pages < 2 {
            return Err(
                "--aux-pages 1 with --mode full: a writable AUX area needs two chunks at least (rb_alloc_aux: EINVAL)"
                    .into(),
            );
        }
        if self.mode == Mode::Snapshot && self.aux_sample_size < 8 {
            return Err(format!(
                "--aux-sample-size {}: snapshot mode samples need at least 8 bytes (the kernel takes whole 8-byte words: perf_prepare_sample rounds down)",
                self.aux_sample_size
            ));
        }
        if self.counters.is_empty() {
            return Err("no sampling event".into());
        }
        let buffers = self.cpus as u64 * (self.aux_pages as u64 + self.data_pages as u64) * 4096;
        if buffers > MAX_BUFFER_BYTES {
            return Err(format!(
                "--aux-pages {} --data-pages {} on {} CPUs: {:.1} GiB of buffers, above the {} GiB the simulator takes (perf record is held to perf_event_mlock_kb the same way)",
                self.aux_pages,
                self.data_pages,
                self.cpus,
                buffers as f64 / (1u64 << 30) as f64,
                MAX_BUFFER_BYTES >> 30
            ));
        }
        if self.mode == Mode::Snapshot {
            let aux = self
                .aux_sample_size
                .min(max_aux_per_sample(self))
                .min((self.aux_pages * 4096).min(u32::MAX as usize) as u32)
                & !7;
            let sample = (sample_fixed_bytes(self) + aux) as usize;
            if sample > self.data_pages * 4096 {
                return Err(format!(
                    "--data-pages {}: a sample with {aux} bytes of trace takes {sample} bytes, more than the {}-byte data ring holds: every sample would be lost",
                    self.data_pages,
                    self.data_pages * 4096
                ));
            }
        }
        match self.stop {
            Stop::Duration(0) | Stop::Samples(0) => {
                Err("nothing to record: zero duration or samples".into())
            }
            _ => Ok(()),
        }
    }
}

/// The sample and trailer fields of every event: perf needs the same
/// `sample_id` layout in all of them, and IDENTIFIER to find the event.
pub(super) const ID_FIELDS: u64 = st::TID | st::TIME | st::CPU | st::IDENTIFIER;

/// The PT leader's name in the file.
pub(super) fn leader_name(config: &Config) -> &'static str {
    if config.kernel {
        "intel_pt//"
    } else {
        "intel_pt//u"
    }
}

/// The PT leader's attr, as `perf record -e intel_pt//u` opens it: TSC
/// packets, return compression, `psb_period=0`, context switch records.
pub fn leader_attr(config: &Config) -> PerfEventAttr {
    let mut a = PerfEventAttr::new(136);
    a.type_ = PT_TYPE;
    a.config = pt_bits::TSC;
    a.sample_period = 1;
    a.sample_type = st::IP | ID_FIELDS;
    a.flags = attr_flags::SAMPLE_ID_ALL | attr_flags::EXCLUDE_GUEST | attr_flags::CONTEXT_SWITCH;
    if !config.kernel {
        a.flags |= attr_flags::EXCLUDE_KERNEL | attr_flags::EXCLUDE_HV;
    }
    if config.mode == Mode::Full {
        a.aux_watermark = 0; // half the area, the kernel's default
    }
    a
}

/// A sampler's attr (`cycles:u`, or `cycles` with `--kernel`).
pub fn sampler_attr(counter: Counter, config: &Config) -> PerfEventAttr {
    let mut a = PerfEventAttr::new(136);
    a.type_ = 0; // PERF_TYPE_HARDWARE
    a.config = counter.config();
    match config.freq {
        // `sample_freq`, the union's other member, with `freq` set.
        Some(freq) => {
            a.sample_period = freq;
            a.flags |= attr_flags::FREQ;
        }
        None => a.sample_period = config.period,
    }
    a.sample_type = st::IP | st::PERIOD | ID_FIELDS;
    if config.mode == Mode::Snapshot {
        a.sample_type |= st::AUX;
        a.aux_sample_size = config.aux_sample_size;
    }
    if let Some(bits) = config.branches {
        a.sample_type |= st::BRANCH_STACK;
        a.branch_sample_type = bits;
    }
    a.flags |= attr_flags::SAMPLE_ID_ALL | attr_flags::EXCLUDE_GUEST;
    if !config.kernel {
        a.flags |= attr_flags::EXCLUDE_KERNEL | attr_flags::EXCLUDE_HV;
    }
    a
}

/// The most memory a run's data rings and AUX areas take, all CPUs together.
pub const MAX_BUFFER_BYTES: u64 = 4 << 30;

/// The most AUX bytes one sample of `config`'s samplers carries: a sample
/// is at most 65535 bytes, so the kernel clamps `aux_sample_size` to what
/// fits beside the other fields, rounded down to 8 (`perf_prepare_sample`).
pub fn max_aux_per_sample(config: &Config) -> u32 {
    (65535 - sample_fixed_bytes(config)) & !7
}

/// The bytes of a sample besides its AUX data: the header, the fields
/// (every one these samplers carry is 8 bytes but the branch stack), the
/// fullest branch stack, and the AUX size word.
fn sample_fixed_bytes(config: &Config) -> u32 {
    let attr = sampler_attr(Counter::Cycles, config);
    let words = (attr.sample_type & !(st::AUX | st::BRANCH_STACK)).count_ones();
    let stack = if attr.sample_type & st::BRANCH_STACK != 0 {
        let hw_index = attr.branch_sample_type & perfaux::abi::branch_sample_type::HW_INDEX != 0;
        8 + 8 * u32::from(hw_index) + 24 * perfaux::lbr::LBR_DEPTH as u32
    } else {
        0
    };
    8 + 8 * words + stack + 8
}

impl Config {
    /// The id of CPU `cpu`'s event `index`: its leader (0), then its
    /// samplers (1..), CPU after CPU, from 1.
    pub(super) fn event_id(&self, cpu: usize, index: usize) -> u64 {
        1 + (cpu * (self.counters.len() + 1) + index) as u64
    }
}
