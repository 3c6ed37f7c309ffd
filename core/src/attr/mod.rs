// SPDX-License-Identifier: MIT OR Apache-2.0
//! Attr copy-in and validation, with the errno Linux 6.18 gives, in Linux's order.
//!
//! Every refusal is a [`Rule`] naming the check that failed; [`Rule::error`]
//! (or `Error::from`) gives the errno.
//!
//! Three steps, as `perf_event_open(2)` takes them:
//!
//! 1. [`copy_attr`]: size negotiation (`perf_copy_attr` +
//!    `copy_struct_from_user`), then
//! 2. the post-copy checks of `perf_copy_attr` ([`CopyPolicy`]
//!    holds what they need to know of the system), then, once the PMUs are known,
//! 3. [`check_event`]: the open-time rules that depend only on the attrs and
//!    the PMU capabilities of the event and of its group leader
//!    (`sys_perf_event_open`, `perf_event_alloc`, `perf_get_aux_event`): AUX output, AUX
//!    pause/resume, `aux_sample_size`
//!    and its AUX leader, clocks, and group membership.
//!
//! ```
//! use perfaux::abi::{sample_type, PERF_ATTR_SIZE_VER6};
//! use perfaux::attr::{check_event, copy_attr, CopyPolicy, GroupLeader, Rule};
//! use perfaux::{Error, PmuCaps};
//!
//! // A VER6 attr asking for 4 KiB of AUX data per sample.
//! let mut user = [0u8; PERF_ATTR_SIZE_VER6 as usize];
//! user[4..8].copy_from_slice(&PERF_ATTR_SIZE_VER6.to_ne_bytes());
//! user[24..32].copy_from_slice(&sample_type::AUX.to_ne_bytes());
//! user[112..116].copy_from_slice(&4096u32.to_ne_bytes());
//! let sampler = copy_attr(&mut user, &CopyPolicy::default()).unwrap();
//!
//! // Alone it cannot open: aux_sample_size needs an AUX leader with snapshot_aux.
//! let refused = check_event(&sampler, PmuCaps::NONE, None).unwrap_err();
//! assert_eq!(refused, Rule::AuxEventWithoutLeader);
//! assert_eq!(refused.error(), Error::Invalid);
//! let pt = perfaux::abi::PerfEventAttr::new(PERF_ATTR_SIZE_VER6);
//! let leader = GroupLeader::new(&pt, PmuCaps::AUX | PmuCaps::SNAPSHOT_AUX);
//! assert_eq!(check_event(&sampler, PmuCaps::NONE, Some(leader)), Ok(()));
//! ```

mod copy;
mod open;
mod rule;
mod validate;

pub use copy::{copy_attr, write_back_size};
pub use open::{EventClock, GroupLeader, check_event, needs_aux_event};
pub use rule::Rule;
pub use validate::{CopyPolicy, validate_attr};
