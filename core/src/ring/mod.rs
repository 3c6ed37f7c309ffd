// SPDX-License-Identifier: MIT OR Apache-2.0
//! The data ring buffer (`kernel/events/ring_buffer.c`): a perf ring over caller memory, its
//! writers ([`OutputHandle`]: begin/copy/skip/end with NMI nesting, lost
//! records, wakeups) and its readers ([`Consumer`], [`BackwardReader`]).
//!
//! ```
//! use perfaux::abi::{PerfEventMmapPage, PerfEventHeader, record_type};
//! use perfaux::ring::{Consumer, FixedEvent, Ring, RingConfig, read_header};
//!
//! // Caller memory: a user page and two 4 KiB data pages (8-aligned).
//! let mut user = Box::new(PerfEventMmapPage::zeroed());
//! let mut data = vec![[0u64; 512]; 2];
//! let chunks: Vec<*mut u8> = data.iter_mut().map(|p| p.as_mut_ptr().cast()).collect();
//! let user_page: *mut PerfEventMmapPage = &mut *user;
//! // SAFETY: the memory outlives the ring and consumer, and is used only by them.
//! let ring = unsafe { Ring::new(user_page, &chunks, 0, RingConfig::default()) }.unwrap();
//! let mut consumer = unsafe { Consumer::new(user_page, &chunks, 0) }.unwrap();
//!
//! let mut handle = ring.begin(16, &mut FixedEvent::default()).unwrap();
//! handle.put_header(PerfEventHeader { type_: 9, misc: 0, size: 16 });
//! handle.put_u64(42);
//! handle.end(); // publishes data_head
//!
//! consumer.refresh();
//! let mut scratch = [0u8; 64];
//! let record = consumer.next_record(&mut scratch).unwrap().unwrap();
//! assert_eq!(read_header(record).unwrap().size, 16);
//! assert_eq!(&record[8..], &42u64.to_ne_bytes());
//! consumer.commit(); // gives the space back
//! ```

mod buffer;
mod consumer;
mod hook;
mod output;
pub(crate) mod pages;
mod sample_id;
mod sink;

pub use crate::platform::Wakeup;
pub use buffer::{Ring, RingConfig, SelfMonitoring};
pub use consumer::{BackwardReader, Consumer, read_header};
pub use hook::{Mutation, NestHook, NoHook, Point};
pub use output::OutputHandle;
pub use pages::{DataPages, MAX_DATA_SIZE, MAX_ORDER, PAGE_SHIFT};
pub use sample_id::{FixedEvent, MAX_SAMPLE_ID_SIZE, OutputEvent, SampleId};
pub use sink::{OutputSink, SliceSink};
