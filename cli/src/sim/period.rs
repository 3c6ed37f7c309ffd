// SPDX-License-Identifier: MIT OR Apache-2.0
//! A sampling counter's period as the kernel keeps it (`struct
//! hw_perf_event`'s `sample_period`, `period_left`, `last_period`): fixed
//! (`perf record -c`), or retuned in frequency mode (`-F`, `attr.freq`) by
//! `perf_adjust_period` (kernel/events/core.c) at each overflow
//! (`__perf_event_account_interrupt`) and each scheduler tick
//! (`perf_adjust_freq_unthr_context`), so that the counter overflows about
//! `sample_freq` times a second. Throttling (`perf_event_max_sample_rate`)
//! is not modelled: the simulator's periods never come near it.

/// The tick the frequency is retuned at: Debian's `CONFIG_HZ=250`
/// (`TICK_NSEC`).
pub const TICK_NS: u64 = 4_000_000;

/// One counter's period.
///
/// # Invariants
/// `sample_period >= 1` and `left >= 1`.
#[derive(Clone, Debug)]
pub struct Period {
    /// `attr.sample_freq` in frequency mode, else `None`.
    freq: Option<u64>,
    /// `hwc->sample_period`: what the counter is armed with next.
    sample_period: u64,
    /// `hwc->period_left`: events until the counter overflows.
    left: u64,
    /// `hwc->last_period`: the period the counter was last armed with (a
    /// sample's `PERF_SAMPLE_PERIOD`).
    last_period: u64,
    /// Events counted so far (`event->count`).
    count: u64,
    /// `hwc->freq_count_stamp`: `count` at the last tick.
    freq_count_stamp: u64,
    /// `hwc->freq_time_stamp`: when (ns) the counter last overflowed.
    freq_time_stamp: Option<u64>,
}

impl Period {
    /// A counter that overflows every `period` events (`period >= 1`).
    pub fn fixed(period: u64) -> Period {
        let period = period.max(1);
        // INVARIANT: both at least 1.
        Period {
            freq: None,
            sample_period: period,
            left: period,
            last_period: period,
            count: 0,
            freq_count_stamp: 0,
            freq_time_stamp: None,
        }
    }

    /// A counter in frequency mode, `freq` overflows a second: it starts
    /// at a period of 1, as `perf_event_alloc` arms it, and converges.
    pub fn frequency(freq: u64) -> Period {
        Period {
            freq: Some(freq.max(1)),
            ..Period::fixed(1)
        }
    }

    /// The period the last overflow ended (a sample's `PERIOD`).
    pub fn last_period(&self) -> u64 {
        self.last_period
    }

    /// `n` events happened at time `now_ns`; whether the counter overflowed
    /// (one overflow at most: a PMI rearms the counter once).
    pub fn count(&mut self, n: u64, now_ns: u64) -> bool {
        self.count = self.count.wrapping_add(n);
        if n < self.left {
            self.left -= n;
            return false;
        }
        // `x86_perf_event_set_period`: the events past the overflow count
        // towards the next period; the counter is rearmed with the
        // sample_period of now, before the overflow retunes it.
        let past = n - self.left;
        self.last_period = self.sample_period;
        self.left = if past >= self.sample_period {
            self.sample_period
        } else {
            self.sample_period - past
        };
        // `__perf_event_account_interrupt`: retuned from the time since
        // the last overflow, if it is recent (under two ticks).
        if self.freq.is_some() {
            if let Some(then) = self.freq_time_stamp {
                let delta = now_ns.saturating_sub(then);
                if delta > 0 && delta < 2 * TICK_NS {
                    self.adjust(delta, self.last_period);
                }
            }
            self.freq_time_stamp = Some(now_ns);
        }
        true
    }

    /// The scheduler tick (`perf_adjust_freq_unthr_context`): a counter in
    /// frequency mode is retuned from the events of the last tick.
    pub fn tick(&mut self) {
        if self.freq.is_none() {
            return;
        }
        let delta = self.count.wrapping_sub(self.freq_count_stamp);
        self.freq_count_stamp = self.count;
        if delta > 0 {
            self.adjust(TICK_NS, delta);
        }
    }

    /// `perf_adjust_period`: the period that gives `freq` overflows a
    /// second at `count` events in `nsec`, approached by an eighth of the
    /// way (a low-pass filter); a counter left far behind is rearmed.
    fn adjust(&mut self, nsec: u64, count: u64) {
        let Some(freq) = self.freq else {
            return;
        };
        // `perf_calculate_period`: count * NSEC_PER_SEC / (nsec * freq).
        let target = (u128::from(count) * 1_000_000_000)
            .checked_div(u128::from(nsec) * u128::from(freq))
            .unwrap_or(0);
        let target = i128::try_from(target).unwrap_or(i128::MAX);
        let current = i128::from(self.sample_period);
        // C's division truncates toward zero, as Rust's does.
        let delta = (target - current + 7) / 8;
        let next = (current + delta).clamp(1, i128::from(u64::MAX));
        // INVARIANT: clamped to at least 1.
        self.sample_period = u64::try_from(next).unwrap_or(u64::MAX);
        if self.left > self.sample_period.saturating_mul(8) {
            // period_left reset to 0, then rearmed with the new period.
            self.left = self.sample_period;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_period_overflows_every_period_events() {
        let mut p = Period::fixed(10);
        let overflows: usize = (0..100).filter(|&t| p.count(1, t)).count();
        assert_eq!(overflows, 10);
        assert_eq!(p.last_period(), 10);
        // Events past an overflow count towards the next one.
        let mut p = Period::fixed(10);
        assert!(p.count(13, 0));
        assert!(!p.count(6, 1));
        assert!(p.count(1, 2));
    }

    /// 2 GHz of cycles sampled at 1 kHz: the period starts at 1, as the
    /// kernel arms it, overshoots while the estimates are coarse (as the
    /// kernel's do: `last_period` is taken as the events since the last
    /// overflow), and settles on 2,000,000 within a few hundred ticks;
    /// then about 1,000 samples a second.
    #[test]
    fn frequency_mode_converges_on_the_asked_rate() {
        let mut p = Period::frequency(1000);
        let (mut now, mut next_tick) = (0u64, TICK_NS);
        let mut samples: Vec<(u64, u64)> = Vec::new();
        // Two simulated seconds, 100 cycles (50 ns) at a time.
        while now < 2_000_000_000 {
            now += 50;
            if p.count(100, now) {
                samples.push((now, p.last_period()));
            }
            if now >= next_tick {
                p.tick();
                next_tick += TICK_NS;
            }
        }
        assert_eq!(samples[0].1, 1, "the first period is 1");
        let second: Vec<u64> = samples
            .iter()
            .filter(|(t, _)| *t >= 1_000_000_000)
            .map(|&(_, period)| period)
            .collect();
        assert!((990..=1010).contains(&second.len()), "{}", second.len());
        assert!(second.iter().all(|&p| (1_990_000..=2_010_000).contains(&p)));
    }
}
