// SPDX-License-Identifier: MIT OR Apache-2.0
//! The group fixture: opening the events of a test group in one line
//! instead of an `EventConfig` literal each (CPU 0, no parent: what nearly
//! every test wants; the literal stays where a test needs another CPU or
//! an inherited child).

use perfaux::abi::PerfEventAttr;
use perfaux::attr::Rule;
use perfaux::event::{Event, EventConfig};
use perfaux::pmu::Pmu;

/// `Event::open` of `attr` on `pmu` with `id`, bound to CPU 0, in the group
/// of `leader` if given; the open's verdict.
pub fn try_open<'g, P>(
    attr: PerfEventAttr,
    pmu: &'g dyn Pmu,
    id: u64,
    leader: Option<&'g Event<'g, P>>,
) -> Result<Event<'g, P>, Rule> {
    Event::open(EventConfig {
        attr,
        pmu,
        id,
        cpu: 0,
        leader,
        parent: None,
    })
}

/// [`try_open`] of an event the test expects to open.
#[track_caller]
pub fn open<'g, P>(
    attr: PerfEventAttr,
    pmu: &'g dyn Pmu,
    id: u64,
    leader: Option<&'g Event<'g, P>>,
) -> Event<'g, P> {
    match try_open(attr, pmu, id, leader) {
        Ok(e) => e,
        Err(rule) => panic!("event {id} refused: {rule:?}"),
    }
}
