// SPDX-License-Identifier: MIT OR Apache-2.0
//! The values of `perfaux record`'s options, spelt as perf spells them:
//! durations (`20ms`, `1.5ms`), sizes with perf's suffixes (`8k`, `64K`,
//! `16M`), `-m pages[,aux]` (`record_opts__parse_mmap_pages`), and events
//! with modifiers (`cycles:u`).

/// Parses `20ms`, `1.5ms`, `1s`, `500us`, `1000ns` (a bare number is ms)
/// into ns; a fraction finer than a nanosecond is refused, not rounded.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let end = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(end);
    let scale: u64 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "" | "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in '{s}': use ns, us, ms or s (a bare number is ms)"
            ));
        }
    };
    let not_a_duration = || format!("'{s}' is not a duration such as 20ms, 1.5ms, 1s or 500us");
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(not_a_duration());
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| not_a_duration())?
    };
    // The fraction in ns: its digits times the unit's scale, exactly.
    let digits = u32::try_from(fraction.len()).map_err(|_| not_a_duration())?;
    let fraction_ns = if fraction.is_empty() {
        0
    } else {
        let value: u128 = fraction.parse().map_err(|_| not_a_duration())?;
        let ten = 10u128.checked_pow(digits).ok_or_else(not_a_duration)?;
        let ns = value * u128::from(scale);
        if ns % ten != 0 {
            return Err(format!(
                "'{s}': finer than a nanosecond, the simulator's clock"
            ));
        }
        u64::try_from(ns / ten).map_err(|_| not_a_duration())?
    };
    whole
        .checked_mul(scale)
        .and_then(|ns| ns.checked_add(fraction_ns))
        .filter(|&ns| ns > 0)
        .ok_or_else(|| format!("'{s}': a duration between 1ns and 584 years"))
}

/// Parses a byte count with perf's size suffixes: `4096`, `8k` or `8K`
/// (KiB), `16m`/`16M` (MiB), `1g`/`1G` (GiB), `512b`/`512B` (bytes).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (number, suffix) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], Some(c)),
        _ => (s, None),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{s}' is not a size such as 4096, 8K or 16M"))?;
    let scale: u64 = match suffix {
        None | Some('b' | 'B') => 1,
        Some('k' | 'K') => 1 << 10,
        Some('m' | 'M') => 1 << 20,
        Some('g' | 'G') => 1 << 30,
        Some(c) => {
            return Err(format!(
                "unknown suffix '{c}' in '{s}': use B, K, M or G (1024-based), or none for bytes"
            ));
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("'{s}': too large"))
}

/// A `u32` size (`--aux-sample-size`, `--aux-sample`), suffixes allowed.
pub fn parse_size_u32(s: &str) -> Result<u32, String> {
    let n = parse_size(s)?;
    u32::try_from(n).map_err(|_| format!("'{s}': at most 4G - 1 bytes ({n} given)"))
}

/// One part of `-m`: pages, or a size with a suffix rounded up to whole
/// pages; either rounded up to a power of two, as perf's `parse_pages_arg`
/// rounds it (the note says so, as perf's "rounding mmap pages size").
fn mmap_part(s: &str, what: &str, notes: &mut Vec<String>) -> Result<usize, String> {
    let has_suffix = s.ends_with(|c: char| c.is_ascii_alphabetic());
    let bad = |e: String| format!("-m '{s}': the {what} as pages (128) or a size (512K, 16M): {e}");
    let pages = if has_suffix {
        parse_size(s).map_err(bad)?.div_ceil(4096)
    } else {
        s.parse::<u64>()
            .map_err(|_| bad(format!("'{s}' is not a number")))?
    };
    if pages == 0 {
        return Err(format!("-m '{s}': the {what} needs at least one page"));
    }
    let rounded = pages
        .checked_next_power_of_two()
        .and_then(|p| usize::try_from(p).ok())
        .ok_or_else(|| format!("-m '{s}': too large"))?;
    if rounded as u64 != pages || has_suffix && rounded as u64 * 4096 != parse_size(s)? {
        notes.push(format!(
            "-m: rounding the {what} '{s}' to {} KiB ({rounded} pages)",
            rounded * 4
        ));
    }
    Ok(rounded)
}

/// What `-m` asks for.
#[derive(Debug, PartialEq, Eq)]
pub struct MmapPages {
    /// The data ring's pages, if given.
    pub data: Option<usize>,
    /// The AUX area's pages, if given.
    pub aux: Option<usize>,
    /// What was rounded, to be said.
    pub notes: Vec<String>,
}

/// `-m pages[,aux]` (`record_opts__parse_mmap_pages`): the data ring's
/// pages and the AUX area's, either part may be left out (`-m ,1024`);
/// sizes with suffixes are rounded up to a power of two pages.
pub fn parse_mmap_pages(s: &str) -> Result<MmapPages, String> {
    let mut notes = Vec::new();
    let (data, aux) = match s.split_once(',') {
        Some((d, a)) => (d, Some(a)),
        None => (s, None),
    };
    let data = match data {
        "" => None,
        d => Some(mmap_part(d, "data ring", &mut notes)?),
    };
    let aux = match aux {
        None | Some("") => None,
        Some(a) => Some(mmap_part(a, "AUX area", &mut notes)?),
    };
    if data.is_none() && aux.is_none() {
        return Err(format!(
            "-m '{s}': give pages[,aux pages], e.g. 128 or 128,1024"
        ));
    }
    Ok(MmapPages { data, aux, notes })
}

/// A sampling event of the simulator: its counter, and whether it was
/// asked for user space only (`:u`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// The counter.
    pub counter: perfaux_cli::sim::Counter,
    /// `:u` was given.
    pub user_only: bool,
}

/// `cycles`, `instructions`, `branches`, each with perf's `:u` modifier
/// (what the simulator samples without `--kernel`); other modifiers are
/// refused with the reason.
pub fn parse_event(s: &str) -> Result<EventSpec, String> {
    use perfaux_cli::sim::Counter;
    let (name, modifiers) = s.split_once(':').unwrap_or((s, ""));
    let counter = match name {
        "cycles" | "cpu-cycles" => Counter::Cycles,
        "instructions" => Counter::Instructions,
        "branches" | "branch-instructions" => Counter::Branches,
        _ => {
            return Err(format!(
                "'{s}': the simulator samples cycles, instructions or branches"
            ));
        }
    };
    match modifiers {
        "" => Ok(EventSpec {
            counter,
            user_only: false,
        }),
        "u" => Ok(EventSpec {
            counter,
            user_only: true,
        }),
        m => Err(format!(
            "'{s}': modifier '{m}' is not simulated: the samplers count user code (:u), and with --kernel the handler too"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_fractions() {
        assert_eq!(parse_duration("20ms"), Ok(20_000_000));
        assert_eq!(parse_duration("10"), Ok(10_000_000), "a bare number is ms");
        assert_eq!(parse_duration("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration(".5s"), Ok(500_000_000));
        assert_eq!(parse_duration("2ns"), Ok(2));
        assert!(
            parse_duration("1.5ns")
                .unwrap_err()
                .contains("finer than a nanosecond")
        );
        assert!(
            parse_duration("1.2.3ms")
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(
            parse_duration("5min")
                .unwrap_err()
                .contains("unknown unit 'min'")
        );
        assert!(parse_duration("0ms").unwrap_err().contains("between 1ns"));
        assert!(parse_duration("ms").unwrap_err().contains("not a duration"));
    }

    #[test]
    fn sizes_take_perfs_suffixes_in_either_case() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("8k"), Ok(8192));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("16M"), Ok(16 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("512B"), Ok(512));
        assert!(parse_size("8x").unwrap_err().contains("unknown suffix 'x'"));
        assert!(parse_size("K").unwrap_err().contains("not a size"));
        assert!(parse_size_u32("4G").unwrap_err().contains("at most"));
    }

    #[test]
    fn mmap_pages_as_perf_parses_them() {
        let pages = |s| {
            let m = parse_mmap_pages(s).unwrap();
            assert!(m.notes.is_empty(), "{s}: {:?}", m.notes);
            (m.data, m.aux)
        };
        assert_eq!(pages("128"), (Some(128), None));
        assert_eq!(pages("128,1024"), (Some(128), Some(1024)));
        assert_eq!(pages(",64"), (None, Some(64)));
        assert_eq!(pages("512K,4M"), (Some(128), Some(1024)));
        let m = parse_mmap_pages("100,12K").unwrap();
        assert_eq!((m.data, m.aux), (Some(128), Some(4)));
        assert_eq!(
            m.notes,
            [
                "-m: rounding the data ring '100' to 512 KiB (128 pages)",
                "-m: rounding the AUX area '12K' to 16 KiB (4 pages)"
            ]
        );
        assert!(parse_mmap_pages("0").is_err());
        assert!(parse_mmap_pages(",").is_err());
        assert!(
            parse_mmap_pages("lots")
                .unwrap_err()
                .contains("pages (128) or a size")
        );
    }

    #[test]
    fn events_take_the_u_modifier() {
        use perfaux_cli::sim::Counter;
        assert_eq!(
            parse_event("cycles:u"),
            Ok(EventSpec {
                counter: Counter::Cycles,
                user_only: true
            })
        );
        assert_eq!(
            parse_event("instructions").unwrap().counter,
            Counter::Instructions
        );
        assert!(
            parse_event("cycles:k")
                .unwrap_err()
                .contains("modifier 'k'")
        );
        assert!(
            parse_event("cache-misses")
                .unwrap_err()
                .contains("cycles, instructions or branches")
        );
    }
}
