// SPDX-License-Identifier: MIT OR Apache-2.0
//! The order perf sorts records into, and the records it cannot sort.
//!
//! A ring's records are not in time order: a record's time is taken
//! before its space is reserved (`perf_prepare_sample`, then
//! `perf_output_begin` in kernel/events/core.c), so an interrupt that
//! writes in between puts later times ahead of it. perf sorts instead
//! (tools/perf/util/ordered-events.c): it queues every timed record and,
//! at each `PERF_RECORD_FINISHED_ROUND`, delivers what is not newer than
//! the newest time queued by the round before; a record older than the
//! last one delivered comes too late ("out of order event", counted in
//! `nr_unordered_events` and reported as "N out of order events
//! recorded"). That is the ordering a producer owes perf, and the one
//! [`RoundOrder`] checks.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// perf's ordered-events queue, reduced to the times it holds.
///
/// perf also flushes half its queue when the queue outgrows its memory
/// limit (`OE_FLUSH__HALF`, `ordered_events.mem_limit`, 1 GiB by
/// default for `perf report`); a file whose rounds hold that much is not
/// one perfaux or its tests write, and is not modelled.
///
/// # Invariants
///
/// `max_timestamp` is the newest time queued since the start, and
/// `last_flush` the newest time delivered.
#[derive(Debug, Default)]
pub struct RoundOrder {
    /// Times queued and not yet delivered (`oe->events`).
    queued: BinaryHeap<Reverse<u64>>,
    /// The newest time ever queued (`oe->max_timestamp`).
    max_timestamp: u64,
    /// Up to where the next round delivers (`oe->next_flush`).
    next_flush: u64,
    /// The time last delivered (`oe->last_flush`).
    last_flush: u64,
}

impl RoundOrder {
    /// Queues a record of `time` (`ordered_events__queue`). `Err` carries
    /// the time last delivered when the record comes after it: perf
    /// counts it out of order. Time 0 is untimed and never queued
    /// (`-ETIME`: perf delivers it at once).
    pub fn queue(&mut self, time: u64) -> Result<(), u64> {
        if time == 0 || time == u64::MAX {
            return Ok(());
        }
        self.queued.push(Reverse(time));
        self.max_timestamp = self.max_timestamp.max(time);
        if time < self.last_flush {
            return Err(self.last_flush);
        }
        Ok(())
    }

    /// A `PERF_RECORD_FINISHED_ROUND` (`__ordered_events__flush` with
    /// `OE_FLUSH__ROUND`): delivers every queued time up to the newest of
    /// the previous round, then makes this round's newest the next limit.
    pub fn finished_round(&mut self) {
        let limit = self.next_flush;
        // do_flush(): a zero limit delivers nothing.
        if limit != 0 {
            while let Some(&Reverse(time)) = self.queued.peek() {
                if time > limit {
                    break;
                }
                self.queued.pop();
                // INVARIANT: times leave the heap oldest first, so the
                // last one delivered is the newest delivered.
                self.last_flush = time;
            }
        }
        self.next_flush = self.max_timestamp;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_going_back_within_the_rounds_perf_sorts_are_in_order() {
        let mut order = RoundOrder::default();
        // An interrupt's records ahead of the record it interrupted, and
        // the other CPU's older records read after them.
        for t in [10, 30, 20, 5] {
            assert_eq!(order.queue(t), Ok(()));
        }
        order.finished_round();
        // The first round only sets the limit (30): nothing delivered, so
        // anything may still come.
        assert_eq!(order.queue(1), Ok(()));
        order.finished_round();
        // Delivered up to 30: only what is newer may come now.
        assert_eq!(order.queue(31), Ok(()));
        assert_eq!(order.queue(29), Err(30));
        // Untimed records are never queued.
        assert_eq!(order.queue(0), Ok(()));
    }

    #[test]
    fn a_record_two_rounds_late_is_out_of_order() {
        let mut order = RoundOrder::default();
        order.queue(100).unwrap();
        order.finished_round();
        order.queue(200).unwrap();
        order.finished_round();
        // Round two delivered 100 (the first round's newest); 150 is still
        // ahead of what was delivered.
        assert_eq!(order.queue(150), Ok(()));
        order.finished_round();
        // Round three delivered up to 200.
        assert_eq!(order.queue(199), Err(200));
        assert_eq!(order.queue(200), Ok(()));
    }

    #[test]
    fn without_rounds_perf_sorts_the_whole_file() {
        let mut order = RoundOrder::default();
        for t in (1..1000).rev() {
            assert_eq!(order.queue(t), Ok(()));
        }
    }
}
