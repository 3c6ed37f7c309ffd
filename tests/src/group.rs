// SPDX-License-Identifier: MIT OR Apache-2.0
//! The group fixture: opening the events of a test group in one line
//! instead of an `EventConfig` literal each (CPU 0: what nearly every test
//! wants; the literal stays where a test needs another CPU). An inherited
//! child names its parent ([`open_child`]).

use perfaux::abi::PerfEventAttr;
use perfaux::attr::Rule;
use perfaux::event::{Event, EventConfig};
use perfaux::pmu::Pmu;

/// `Event::open` of `attr` on `pmu` with `id`, bound to CPU 0, in the group
/// of `leader` if given; the open's verdict.
pub fn try_open<'g>(
    attr: PerfEventAttr,
    pmu: &'g dyn Pmu,
    id: u64,
    leader: Option<&'g Event<'g>>,
) -> Result<Event<'g>, Rule> {
    try_open_child(attr, pmu, id, leader, None)
}

/// `Event::open` of an inherited child of `parent` (None: an event of its
/// own), otherwise as [`try_open`].
pub fn try_open_child<'g>(
    attr: PerfEventAttr,
    pmu: &'g dyn Pmu,
    id: u64,
    leader: Option<&'g Event<'g>>,
    parent: impl Into<Option<&'g Event<'g>>>,
) -> Result<Event<'g>, Rule> {
    Event::open(EventConfig {
        attr,
        pmu,
        id,
        cpu: 0,
        leader,
        parent: parent.into(),
    })
}

/// [`try_open`] of an event the test expects to open.
#[track_caller]
pub fn open<'g>(
    attr: PerfEventAttr,
    pmu: &'g dyn Pmu,
    id: u64,
    leader: Option<&'g Event<'g>>,
) -> Event<'g> {
    opened(try_open(attr, pmu, id, leader), id)
}

/// [`try_open_child`] of a child the test expects to open.
#[track_caller]
pub fn open_child<'g>(
    attr: PerfEventAttr,
    pmu: &'g dyn Pmu,
    id: u64,
    leader: Option<&'g Event<'g>>,
    parent: &'g Event<'g>,
) -> Event<'g> {
    opened(try_open_child(attr, pmu, id, leader, parent), id)
}

/// The event an open the test expects to succeed gave, or a panic naming
/// the rule that refused event `id`.
#[track_caller]
fn opened<'g>(open: Result<Event<'g>, Rule>, id: u64) -> Event<'g> {
    match open {
        Ok(e) => e,
        Err(rule) => panic!("event {id} refused: {rule:?}"),
    }
}
