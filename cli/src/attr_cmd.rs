// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perfaux attr`: decode a `perf_event_attr` and check it as Linux 6.18's
//! `perf_event_open(2)` would (size negotiation, post-copy checks, and the
//! AUX/group rules given the PMU capabilities of the event and its leader).

use std::fmt::Write as _;
use std::io::Read as _;
use std::process::ExitCode;

use perfaux::PmuCaps;
use perfaux::abi::{
    PERF_ATTR_SIZE, PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE, PerfEventAttr,
    attr_flags, aux_action, read_format, sample_type,
};
use perfaux::attr::{CopyPolicy, GroupLeader, Rule, check_event, copy_attr};

use crate::hex;

const EXAMPLES: &str = "\
Examples:
  # A cpu-clock sampler asking for 4 KiB of AUX data, under a PT-style leader: accepted
  perfaux attr --example aux-sampler --leader-example pt-leader

  # The same sampler alone: refused (EINVAL), and the rule that refused it
  perfaux attr --example aux-sampler

  # Your own attr, as hex (xxd -p output works; '-' reads stdin), under a software leader
  perfaux attr 01000000880000000000000000000000... --leader-pmu sw

  # Only the first 100 bytes are readable (the rest would fault)
  perfaux attr --example aux-sampler --readable 100

PMU presets: sw (software events: no-nmi), core (a CPU PMU with aux-output),
pt (PT-style AUX PMU: aux, snapshot-aux, aux-pause, itrace, exclusive), none.
Or name capabilities joined by commas: aux, snapshot-aux, aux-pause, aux-output,
itrace, exclusive, no-nmi, no-interrupt, extended-regs, no-exclude, aux-no-sg.

Exit status: 0 if perf_event_open would accept the attr, 1 if it would refuse
it (the errno and the rule are printed), 2 for bad arguments.";

/// Decode a perf_event_attr and check it as perf_event_open(2) would.
#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct AttrArgs {
    /// The attr as hex, as user space passes it (at least its `size` bytes); `-` reads stdin.
    #[arg(required_unless_present = "example", conflicts_with = "example", num_args = 1..)]
    hex: Vec<String>,
    /// Use a built-in attr instead of HEX.
    #[arg(long, value_enum)]
    example: Option<Example>,
    /// How many bytes from the attr's start are readable (default: all given).
    #[arg(long)]
    readable: Option<usize>,
    /// The event's PMU: a preset (sw, core, pt, none) or capabilities joined by
    /// commas. Default: the example's PMU, else sw.
    #[arg(long)]
    pmu: Option<String>,
    /// The group leader's attr as hex (omit for an event without a group).
    #[arg(long, conflicts_with = "leader_example")]
    leader: Option<String>,
    /// Use a built-in attr as the group leader.
    #[arg(long, value_enum)]
    leader_example: Option<Example>,
    /// The leader's PMU, as for --pmu. Default: the leader example's PMU, else sw.
    #[arg(long)]
    leader_pmu: Option<String>,
    /// Print only the verdict.
    #[arg(long, short)]
    quiet: bool,
}

/// Built-in attrs.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Example {
    /// A cpu-clock sampler with PERF_SAMPLE_AUX and aux_sample_size 4096.
    AuxSampler,
    /// A PT-style AUX event, the group leader AUX samplers need.
    PtLeader,
    /// A cycles event writing into its leader's trace (aux_output, PEBS-via-PT style).
    AuxOutput,
}

impl Example {
    fn attr(self) -> PerfEventAttr {
        let mut a = PerfEventAttr::new(PERF_ATTR_SIZE);
        match self {
            Example::AuxSampler => {
                a.type_ = PERF_TYPE_SOFTWARE;
                a.config = PERF_COUNT_SW_CPU_CLOCK;
                a.sample_period = 100_000;
                a.sample_type = sample_type::IDENTIFIER
                    | sample_type::IP
                    | sample_type::TID
                    | sample_type::TIME
                    | sample_type::CPU
                    | sample_type::PERIOD
                    | sample_type::AUX;
                a.flags =
                    attr_flags::DISABLED | attr_flags::EXCLUDE_KERNEL | attr_flags::SAMPLE_ID_ALL;
                a.aux_sample_size = 4096;
            }
            Example::PtLeader => {
                a.type_ = 8; // a dynamic PMU type, as intel_pt gets
                a.sample_period = 1;
                a.sample_type = sample_type::IDENTIFIER
                    | sample_type::TID
                    | sample_type::TIME
                    | sample_type::CPU;
                a.flags =
                    attr_flags::DISABLED | attr_flags::EXCLUDE_KERNEL | attr_flags::SAMPLE_ID_ALL;
            }
            Example::AuxOutput => {
                a.type_ = PERF_TYPE_HARDWARE;
                a.sample_period = 10_000;
                a.sample_type = sample_type::IDENTIFIER | sample_type::IP;
                a.flags = attr_flags::AUX_OUTPUT
                    | (3 << attr_flags::PRECISE_IP_SHIFT)
                    | attr_flags::EXCLUDE_KERNEL;
            }
        }
        a
    }

    fn pmu(self) -> PmuCaps {
        match self {
            Example::AuxSampler => preset("sw"),
            Example::PtLeader => preset("pt"),
            Example::AuxOutput => preset("core"),
        }
    }
}

fn preset(name: &str) -> PmuCaps {
    match name {
        "sw" => PmuCaps::NO_NMI,
        "core" => PmuCaps::AUX_OUTPUT,
        "pt" => {
            PmuCaps::AUX
                | PmuCaps::SNAPSHOT_AUX
                | PmuCaps::AUX_PAUSE
                | PmuCaps::ITRACE
                | PmuCaps::EXCLUSIVE
        }
        _ => PmuCaps::NONE,
    }
}

/// A preset name or capability names joined by commas.
fn parse_pmu(text: &str) -> Result<PmuCaps, String> {
    if matches!(text, "sw" | "core" | "pt" | "none") {
        return Ok(preset(text));
    }
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).try_fold(PmuCaps::NONE, |caps, name| {
        let cap = PmuCaps::NAMES.iter().find(|(n, _)| *n == name).map(|(_, c)| *c).ok_or_else(|| {
            let known: Vec<_> = PmuCaps::NAMES.iter().map(|(n, _)| *n).collect();
            format!("unknown PMU capability {name:?}; presets: sw, core, pt, none; capabilities: {}", known.join(", "))
        })?;
        Ok(caps | cap)
    })
}

fn caps_names(caps: PmuCaps) -> String {
    let names: Vec<_> = PmuCaps::NAMES
        .iter()
        .filter(|(_, c)| caps.contains(*c))
        .map(|(n, _)| *n)
        .collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(",")
    }
}

fn read_hex(words: &[String]) -> Result<Vec<u8>, String> {
    if words.len() == 1 && words[0] == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("reading stdin: {e}"))?;
        return hex::parse(&text);
    }
    hex::parse(&words.join(" "))
}

pub fn run(args: &AttrArgs) -> Result<ExitCode, String> {
    let (mut bytes, default_pmu) = match args.example {
        Some(example) => (example.attr().to_bytes().to_vec(), example.pmu()),
        None => (read_hex(&args.hex)?, preset("sw")),
    };
    if args.readable.is_none() {
        // Fewer bytes than the attr says it has is a short argument, not a
        // fault to model (that is what --readable is for).
        let size = bytes
            .get(4..8)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let need = match size {
            None => 8,
            Some(0) => 64, // PERF_ATTR_SIZE_VER0, what size 0 means
            Some(n) => n,
        };
        if bytes.len() < need {
            return Err(match size {
                None => format!(
                    "{} bytes given: an attr starts with its type and size (8 bytes at least)",
                    bytes.len()
                ),
                Some(n) => format!(
                    "{} bytes given, but the attr's size field says {n}: give all of them, or --readable N to have the rest fault",
                    bytes.len()
                ),
            });
        }
    }
    let readable = args.readable.unwrap_or(bytes.len());
    if readable > bytes.len() {
        return Err(format!(
            "--readable {readable} is more than the {} bytes given",
            bytes.len()
        ));
    }
    let pmu = args.pmu.as_deref().map_or(Ok(default_pmu), parse_pmu)?;

    let leader = match (&args.leader, args.leader_example) {
        (Some(hex_text), _) => Some((hex::parse(hex_text)?, preset("sw"))),
        (None, Some(example)) => Some((example.attr().to_bytes().to_vec(), example.pmu())),
        (None, None) => None,
    };
    let leader = match leader {
        None => None,
        Some((mut leader_bytes, default_caps)) => {
            let caps = args
                .leader_pmu
                .as_deref()
                .map_or(Ok(default_caps), parse_pmu)?;
            let attr = copy_attr(&mut leader_bytes, &CopyPolicy::default())
                .map_err(|rule| format!("the leader attr itself would be refused: {rule}"))?;
            Some((attr, caps))
        }
    };

    let original = bytes.clone();
    let copied = copy_attr(&mut bytes[..readable], &CopyPolicy::default());
    let verdict = copied.and_then(|attr| {
        let group = leader.as_ref().map(|(a, caps)| GroupLeader::new(a, *caps));
        check_event(&attr, pmu, group).map(|()| attr)
    });

    let mut out = String::new();
    if !args.quiet {
        let shown = match &verdict {
            Ok(attr) => *attr,
            Err(_) => raw_image(&original, readable),
        };
        describe(&mut out, &shown, readable, verdict.is_ok());
        let _ = writeln!(out, "event PMU:   {}", caps_names(pmu));
        match &leader {
            Some((_, caps)) => {
                let _ = writeln!(out, "leader PMU:  {}", caps_names(*caps));
            }
            None => {
                let _ = writeln!(out, "leader:      none (the event opens without a group)");
            }
        }
    }
    let code = match verdict {
        Ok(_) => {
            let _ = writeln!(out, "perf_event_open: 0 (accepted)");
            ExitCode::SUCCESS
        }
        Err(rule) => {
            let _ = writeln!(
                out,
                "perf_event_open: {} ({rule:?}): {}",
                rule.error(),
                rule.describe()
            );
            if matches!(rule, Rule::SizeOutOfRange | Rule::UnknownTailNonZero) {
                let _ = writeln!(
                    out,
                    "                 the kernel writes {PERF_ATTR_SIZE} into the caller's size field"
                );
            }
            ExitCode::from(1)
        }
    };
    print!("{out}");
    Ok(code)
}

/// What the attr's readable bytes say, zero-extended, for display when the
/// copy-in refused it.
fn raw_image(bytes: &[u8], readable: usize) -> PerfEventAttr {
    let mut image = [0u8; PERF_ATTR_SIZE as usize];
    let n = readable.min(image.len());
    image[..n].copy_from_slice(&bytes[..n]);
    PerfEventAttr::from_bytes(&image)
}

fn bit_names(value: u64, names: &[(&str, u64)]) -> String {
    let mut parts: Vec<String> = names
        .iter()
        .filter(|(_, b)| value & b != 0)
        .map(|(n, _)| n.to_string())
        .collect();
    let known = names.iter().fold(0, |acc, (_, b)| acc | b);
    if value & !known != 0 {
        parts.push(format!("unknown {:#x}", value & !known));
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join("|")
    }
}

fn describe(out: &mut String, a: &PerfEventAttr, readable: usize, normalized: bool) {
    let title = if normalized {
        "normalized, as the kernel keeps it"
    } else {
        "raw bytes, zero-extended"
    };
    let _ = writeln!(out, "perf_event_attr ({title}; {readable} bytes readable)");
    let mut row = |name: &str, value: String| {
        let _ = writeln!(out, "  {name:<20} {value}");
    };
    let flags = a.flags & !attr_flags::PRECISE_IP_MASK;
    row("type", a.type_.to_string());
    row("size", a.size.to_string());
    row("config", format!("{:#x}", a.config));
    row(
        if a.freq() {
            "sample_freq"
        } else {
            "sample_period"
        },
        a.sample_period.to_string(),
    );
    row(
        "sample_type",
        format!(
            "{:#x} {}",
            a.sample_type,
            bit_names(a.sample_type, sample_type::NAMES)
        ),
    );
    row(
        "read_format",
        format!(
            "{:#x} {}",
            a.read_format,
            bit_names(a.read_format, read_format::NAMES)
        ),
    );
    row(
        "flags",
        format!("{:#x} {}", a.flags, bit_names(flags, attr_flags::NAMES)),
    );
    row("precise_ip", a.precise_ip().to_string());
    row(
        if a.watermark() {
            "wakeup_watermark"
        } else {
            "wakeup_events"
        },
        a.wakeup_events.to_string(),
    );
    row("bp_type", a.bp_type.to_string());
    row("config1", format!("{:#x}", a.config1));
    row("config2", format!("{:#x}", a.config2));
    row("branch_sample_type", format!("{:#x}", a.branch_sample_type));
    row("sample_regs_user", format!("{:#x}", a.sample_regs_user));
    row("sample_stack_user", a.sample_stack_user.to_string());
    row("clockid", a.clockid.to_string());
    row("sample_regs_intr", format!("{:#x}", a.sample_regs_intr));
    row("aux_watermark", a.aux_watermark.to_string());
    row("sample_max_stack", a.sample_max_stack.to_string());
    row("__reserved_2", a.reserved_2.to_string());
    row("aux_sample_size", a.aux_sample_size.to_string());
    let actions = [
        ("aux_start_paused", u64::from(aux_action::START_PAUSED)),
        ("aux_pause", u64::from(aux_action::PAUSE)),
        ("aux_resume", u64::from(aux_action::RESUME)),
    ];
    row(
        "aux_action",
        format!(
            "{:#x} {}",
            a.aux_action,
            bit_names(a.aux_action.into(), &actions)
        ),
    );
    row("sig_data", format!("{:#x}", a.sig_data));
    row("config3", format!("{:#x}", a.config3));
    let _ = writeln!(
        out,
        "  hex: {}",
        hex::format(&a.to_bytes()).replace('\n', "")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmu_specs_parse() {
        assert_eq!(parse_pmu("pt").unwrap(), preset("pt"));
        assert_eq!(
            parse_pmu("aux, snapshot-aux").unwrap(),
            PmuCaps::AUX | PmuCaps::SNAPSHOT_AUX
        );
        assert!(
            parse_pmu("aux,warp-drive")
                .unwrap_err()
                .contains("warp-drive")
        );
        assert_eq!(caps_names(PmuCaps::NONE), "none");
    }

    #[test]
    fn examples_pass_the_copy_checks() {
        for e in [Example::AuxSampler, Example::PtLeader, Example::AuxOutput] {
            let mut bytes = e.attr().to_bytes();
            assert!(copy_attr(&mut bytes, &CopyPolicy::default()).is_ok());
        }
    }
}
