// SPDX-License-Identifier: MIT OR Apache-2.0
//! Ground truth: what an ideal Intel PT decoder must show for a run
//! (`perfaux record --truth FILE`). The simulator records every control
//! transfer each CPU made (with the tracer's output position after it) and
//! every sample's AUX window; this module turns that into what Linux perf's
//! decoder (`tools/perf/util/intel-pt.c`) can and does recover:
//!
//! - Full-trace mode: the whole stream, from its first PSB.
//! - Sampling mode: each sample's window is a separate buffer of its CPU's
//!   queue. perf starts a buffer at its first PSB; when the previous
//!   buffer's last PSB+ (one with a TSC) lies inside the buffer, the two
//!   overlap and decoding continues where the previous one ended
//!   (`intel_pt_find_overlap_tsc`); else it is a new trace (a new
//!   `trace_nr`, and each thread's branch stack starts afresh).
//! - A sample's branch stack (`--itrace=L<n>`) is its thread's newest
//!   branches in the current trace, newest first (`thread_stack__br_sample`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::ops::Range;

use perfaux::lbr::LBR_DEPTH;
use perfaux::soft_pt::packet::PSB;

/// One control transfer (`from` or `to` 0: a trace end or start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Branch {
    /// Source (0 for a trace start).
    pub from: u64,
    /// Target (0 for a trace end).
    pub to: u64,
    /// The thread that made it.
    pub tid: u32,
    /// perf time (ns) when it executed.
    pub time: u64,
    /// Tracer output bytes written once its packets were (a pending TNT
    /// bit counts as written).
    pub pos: u64,
    /// The tracer's index of the trace event it was
    /// (`SoftTracer::next_event`), for losses (`SoftTracer::take_loss`).
    pub event: u64,
}

/// A sample taken at a PMI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplePoint {
    /// The interrupted thread.
    pub tid: u32,
    /// The sample's time.
    pub time: u64,
    /// The sample's IP.
    pub ip: u64,
    /// Tracer output position when the snapshot was taken.
    pub end: u64,
    /// AUX bytes in the sample (the window is `[end - size, end)`).
    pub size: u64,
    /// How many of the CPU's taken branches ([`CpuTruth::taken`]) came
    /// before it.
    pub taken: usize,
}

/// What one CPU did.
#[derive(Clone, Debug, Default)]
pub struct CpuTruth {
    /// Every control transfer, in order.
    pub branches: Vec<Branch>,
    /// Every sample written, in order.
    pub samples: Vec<SamplePoint>,
    /// Every byte the tracer wrote.
    pub stream: Vec<u8>,
    /// Samples whose record the drain has seen (and sized).
    pub drained: usize,
    /// Instructions retired while packets were generated (what a decoder
    /// walks, from the first TIP.PGE on).
    pub instructions: u64,
    /// Trace events whose packets the tracer lost (a STOP region filled),
    /// as event index ranges.
    pub lost: Vec<Range<u64>>,
    /// With branch stacks: every taken branch the CPU made, traced or not,
    /// in order (from, to).
    pub taken: Vec<(u64, u64)>,
    /// With branch stacks: where the last-branch record was flushed (a
    /// thread switched in), as the counts of [`taken`](Self::taken) and of
    /// [`samples`](Self::samples) before it.
    pub flushed: Vec<(usize, usize)>,
}

/// What an LBR holds at `cpu`'s sample `k`: the newest [`LBR_DEPTH`]
/// taken branches before it since the last flush before it, user branches
/// only (both ends below the kernel's half), newest first.
pub fn lbr_stack(cpu: &CpuTruth, k: usize) -> Vec<(u64, u64)> {
    let at = cpu.samples[k].taken;
    let since = cpu
        .flushed
        .iter()
        .rev()
        .find(|&&(_, samples)| samples <= k)
        .map_or(0, |&(taken, _)| taken);
    cpu.taken[since..at]
        .iter()
        .rev()
        .filter(|(from, to)| *from != 0 && *to != 0 && from >> 63 == 0 && to >> 63 == 0)
        .take(LBR_DEPTH)
        .copied()
        .collect()
}

impl CpuTruth {
    /// The tracer lost the packets of the events `lost`: their branches
    /// are not in the trace. The instruction count is then no longer what
    /// a decoder walks (it walks up to the last branch whose outcome it
    /// has); the truth file leaves it out.
    pub fn lose(&mut self, lost: Range<u64>) {
        let first = self.branches.partition_point(|b| b.event < lost.start);
        let end = self.branches.partition_point(|b| b.event < lost.end);
        self.branches.drain(first..end);
        self.lost.push(lost);
    }
}

/// What the decoder shows for one CPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expected {
    /// Branches in decode order.
    pub branches: Vec<Branch>,
    /// Per sample (in order): its branch stack, newest first, at most
    /// [`BRANCH_STACK`] entries, as (from, to).
    pub stacks: Vec<Vec<(u64, u64)>>,
}

/// The branch stack depth the truth file lists (`--itrace=L64`).
pub const BRANCH_STACK: usize = 64;

/// Offsets of the PSBs in `stream` (found as perf finds them: the byte
/// pattern).
fn psbs(stream: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(p) = find(&stream[at..], &PSB) {
        out.push((at + p) as u64);
        at += p + PSB.len();
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The PSB+ at `psb`: (its FUP's IP if any, whether it has a TSC), if it
/// ends (PSBEND) before `end`.
fn psb_plus(stream: &[u8], psb: u64, end: u64) -> Option<(Option<u64>, bool)> {
    let end = (end as usize).min(stream.len());
    let mut at = psb as usize + PSB.len();
    let mut fup = None;
    let mut tsc = false;
    while at < end {
        let b = stream[at];
        match b {
            0x02 if at + 1 < end && stream[at + 1] == 0x23 => return Some((fup, tsc)),
            0x02 if at + 1 < end && stream[at + 1] == 0x03 => at += 4, // CBR
            0x19 => {
                tsc = true;
                at += 8;
            }
            0x99 => at += 2, // MODE
            0x00 => at += 1, // PAD
            _ if b & 0x1f == 0x1d => {
                // FUP, compressed against last IP 0 (a PSB resets it).
                let n = match b >> 5 {
                    0 => 0,
                    1 => 2,
                    2 => 4,
                    3 | 4 => 6,
                    6 => 8,
                    _ => return None,
                };
                if at + 1 + n > end {
                    return None;
                }
                let mut ip = [0u8; 8];
                ip[..n].copy_from_slice(&stream[at + 1..at + 1 + n]);
                let mut v = u64::from_le_bytes(ip);
                if b >> 5 == 3 {
                    v = (((v << 16) as i64) >> 16) as u64;
                }
                fup = (n > 0).then_some(v);
                at += 1 + n;
            }
            _ => return None,
        }
    }
    None
}

/// The per-thread branch stacks as perf keeps them (one entry more than
/// a sample shows: its own PMI's entry is not in its stack).
#[derive(Default)]
struct Stacks {
    threads: HashMap<u32, (u64, Vec<Branch>)>,
}

impl Stacks {
    fn push(&mut self, b: &Branch, trace: u64) {
        let (nr, stack) = self.threads.entry(b.tid).or_default();
        if *nr != trace {
            stack.clear();
            *nr = trace;
        }
        stack.push(*b);
        if stack.len() > BRANCH_STACK + 1 {
            stack.remove(0);
        }
    }

    /// The stack of a sample of `tid` whose PMI's packets end at `end`:
    /// perf attaches it before it reports the PMI's own trace end (the
    /// decoder stops at the first branch past the sample's time).
    fn of(&self, tid: u32, end: u64) -> Vec<(u64, u64)> {
        self.threads
            .get(&tid)
            .map(|(_, s)| {
                s.iter()
                    .rev()
                    .filter(|b| b.pos < end)
                    .take(BRANCH_STACK)
                    .map(|b| (b.from, b.to))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Appends the decode of the branches whose packets lie in `(from, end]`.
fn decode_range(
    cpu: &CpuTruth,
    from: u64,
    end: u64,
    trace: u64,
    out: &mut Expected,
    stacks: &mut Stacks,
) {
    let first = cpu.branches.partition_point(|b| b.pos <= from);
    let last = cpu.branches.partition_point(|b| b.pos <= end);
    for b in &cpu.branches[first..last] {
        stacks.push(b, trace);
        out.branches.push(*b);
    }
}

/// What perf's decoder recovers from one CPU's whole stream (full-trace
/// mode: consecutive AUXTRACE buffers, one trace): every branch after the
/// first PSB.
pub fn expected_full(cpu: &CpuTruth) -> Expected {
    let mut out = Expected::default();
    let mut stacks = Stacks::default();
    let all = psbs(&cpu.stream);
    let Some(&psb) = all.first() else {
        out.stacks = vec![Vec::new(); cpu.samples.len()];
        return out;
    };
    decode_range(cpu, psb, u64::MAX, 1, &mut out, &mut stacks);
    // A sample's stack: its thread's newest branches before the PMI.
    for s in &cpu.samples {
        let before = out.branches.partition_point(|b| b.pos < s.end);
        let stack = out.branches[..before]
            .iter()
            .rev()
            .filter(|b| b.tid == s.tid)
            .take(BRANCH_STACK)
            .map(|b| (b.from, b.to))
            .collect();
        out.stacks.push(stack);
    }
    out
}

/// What perf's decoder recovers from one CPU's sample windows.
pub fn expected_samples(cpu: &CpuTruth) -> Expected {
    let all = psbs(&cpu.stream);
    let mut out = Expected::default();
    let mut stacks = Stacks::default();
    let mut trace = 0;
    // The previous window's end and its last complete PSB+ with a TSC.
    let mut prev: Option<(u64, Option<u64>)> = None;
    for s in &cpu.samples {
        let (start, end) = (s.end.saturating_sub(s.size), s.end);
        let inside: Vec<u64> = all
            .iter()
            .copied()
            .filter(|&p| p >= start && p + 16 <= end)
            .collect();
        let last_with_tsc = inside
            .iter()
            .rev()
            .copied()
            .find(|&p| matches!(psb_plus(&cpu.stream, p, end), Some((_, true))));
        match (inside.first(), prev) {
            (None, _) => {} // no PSB: perf skips the buffer
            (Some(_), Some((prev_end, Some(prev_psb)))) if prev_psb >= start => {
                decode_range(cpu, prev_end, end, trace, &mut out, &mut stacks);
            }
            (Some(&psb), _) => {
                trace += 1;
                decode_range(cpu, psb, end, trace, &mut out, &mut stacks);
            }
        }
        out.stacks.push(stacks.of(s.tid, s.end));
        if !inside.is_empty() {
            prev = Some((end, last_with_tsc));
        }
    }
    out
}

/// The truth file: a header, then per CPU its decoded branches and its
/// samples with their branch stacks.
pub fn render(cpus: &[CpuTruth], full: bool, branch_stacks: bool) -> String {
    let mut s = String::new();
    s.push_str("# perfaux ground truth: what an ideal Intel PT decoder shows\n");
    s.push_str(
        "# branch <cpu> <tid> <time ns> <from> <to>      (decode order; 0: trace start/end)\n",
    );
    s.push_str(
        "# sample <cpu> <tid> <time ns> <ip> <n> <from>/<to>...  (branch stack, newest first)\n",
    );
    s.push_str(
        "# instructions <cpu> <n>   (full-trace mode without lost trace: every instruction --itrace=i0ns walks)\n",
    );
    s.push_str(
        "# lost <cpu> <n>   (full-trace mode: trace events whose packets a full AUX area lost)\n",
    );
    s.push_str(
        "# lbr <cpu> <tid> <ip> <n> <from>/<to>...   (-b: each sample's LBR stack, newest first)\n",
    );
    for (c, cpu) in cpus.iter().enumerate() {
        let e = if full {
            expected_full(cpu)
        } else {
            expected_samples(cpu)
        };
        for b in &e.branches {
            let _ = writeln!(
                s,
                "branch {c} {} {} {:#x} {:#x}",
                b.tid, b.time, b.from, b.to
            );
        }
        if full && cpu.lost.is_empty() {
            let _ = writeln!(s, "instructions {c} {}", cpu.instructions);
        }
        if !cpu.lost.is_empty() {
            let n: u64 = cpu.lost.iter().map(|r| r.end - r.start).sum();
            let _ = writeln!(s, "lost {c} {n}");
        }
        for (p, stack) in cpu.samples.iter().zip(&e.stacks) {
            let _ = write!(
                s,
                "sample {c} {} {} {:#x} {}",
                p.tid,
                p.time,
                p.ip,
                stack.len()
            );
            for (f, t) in stack {
                let _ = write!(s, " {f:#x}/{t:#x}");
            }
            s.push('\n');
        }
        if branch_stacks {
            for (k, p) in cpu.samples.iter().enumerate() {
                let stack = lbr_stack(cpu, k);
                let _ = write!(s, "lbr {c} {} {:#x} {}", p.tid, p.ip, stack.len());
                for (f, t) in stack {
                    let _ = write!(s, " {f:#x}/{t:#x}");
                }
                s.push('\n');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psb_plus_reads_the_fup_and_tsc() {
        let mut s = PSB.to_vec();
        s.extend([
            0x99, 0x01, 0x19, 1, 2, 3, 4, 5, 6, 7, 0x5d, 0x00, 0x10, 0x40, 0x00, 0x02, 0x03, 20, 0,
            0x02, 0x23,
        ]);
        assert_eq!(
            psb_plus(&s, 0, s.len() as u64),
            Some((Some(0x40_1000), true))
        );
        assert_eq!(psb_plus(&s, 0, s.len() as u64 - 1), None);
        assert_eq!(psbs(&s), vec![0]);
    }
}
