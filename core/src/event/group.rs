// SPDX-License-Identifier: MIT OR Apache-2.0
//! Leaving a group: `perf_group_detach` and `perf_put_aux_event`.

use core::ptr;

use super::{Event, EventState};
use crate::sync::Ordering;

impl<'g> Event<'g> {
    /// Closes the event (`perf_group_detach` + `perf_put_aux_event`): taken
    /// off the PMU and out of its leader's sibling list; if it is an AUX
    /// leader, every sibling linked to it loses the link and goes to
    /// `Error` (`perf_put_aux_event`).
    pub fn close(&self) {
        self.sched_out();
        // Relaxed: same-CPU state (set-up path).
        self.state.store(EventState::Off as u8, Ordering::Relaxed);
        // A sibling leaves its leader's list (`perf_group_detach`'s
        // `list_del_init`): the group is scheduled without it from now on,
        // and nothing in the group refers to it any more.
        if let Some(l) = self.leader {
            let mut prev: Option<&Event<'g>> = None;
            let mut s = l.first_sibling.get();
            while let Some(e) = s {
                if ptr::eq(e, self) {
                    let next = e.next_sibling.get();
                    match prev {
                        None => l.first_sibling.set(next),
                        Some(p) => p.next_sibling.set(next),
                    }
                    break;
                }
                prev = Some(e);
                s = e.next_sibling.get();
            }
            self.next_sibling.set(None);
        }
        let mut s = self.first_sibling.get();
        while let Some(e) = s {
            // Relaxed load: only set-up paths write the link, and this is one.
            if ptr::eq(e.aux_event.load(Ordering::Relaxed), self) {
                // Release pairs with the Acquire in `aux_event()`.
                e.aux_event.store(ptr::null_mut(), Ordering::Release);
                e.sched_out();
                // Relaxed: same-CPU state (set-up path).
                e.state.store(EventState::Error as u8, Ordering::Relaxed);
            }
            s = e.next_sibling.get();
        }
        self.first_sibling.set(None);
    }
}
