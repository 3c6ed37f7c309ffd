// SPDX-License-Identifier: MIT OR Apache-2.0
//! # perfaux
//!
//! A `no_std` engine for Linux perf's AUX sampling (`PERF_SAMPLE_AUX`,
//! Linux 5.5): the user-space ABI, attr validation with the kernel's errno,
//! the data ring, the AUX area, sample records with the AUX block, events and
//! groups, and a PT-style PMU, all over caller-provided memory, with no
//! allocation.
//!
//! The behaviour is Linux's: the documentation names the kernel function or
//! file each piece follows (`kernel/events/core.c`, `ring_buffer.c`,
//! `arch/x86/events/intel/pt.c`, Linux 6.1 unless it says otherwise).
//!
//! Modules:
//! - [`abi`]: `perf_event_attr`, records, `perf_event_mmap_page`, with every
//!   size and offset asserted;
//! - [`attr`]: attr copy-in (size negotiation) and the open-time checks;
//! - [`aux`]: the AUX area, AUX transactions, `PERF_RECORD_AUX`, `copy_aux`;
//! - [`sample`]: sample records: layout (with the AUX size clamp) and output
//!   (with the AUX block from `snapshot_aux`);
//! - [`event`], [`pmu`]: events and groups (AUX leader link, states,
//!   output redirection, inheritance, the overflow flow) over the PMU contract;
//! - [`pt`]: the PT-style PMU driver (`pt.c`'s twin): `attr.config`, ToPA,
//!   the AUX buffer, the PMU in snapshot and full-trace modes, and the
//!   tracer seam it programs;
//! - [`soft_pt`]: a software Intel PT behind that seam: the tracer, its
//!   packet stream, and its flow sources (single-step with an x86-64
//!   instruction decoder, an emulator's translation blocks);
//! - [`lbr`]: a software last-branch record, the branch stacks of samples
//!   (`PERF_SAMPLE_BRANCH_STACK`) from the branches a flow takes;
//! - [`ring`]: the data ring: output handles with NMI nesting, lost
//!   records, wakeups, and its consumers;
//! - [`PmuCaps`]: what a PMU can do, as those checks need to know;
//! - [`Error`]: the one error type, one Linux errno per variant.
//!
//! # Quick start
//!
//! The Rust twin of the C quick start (`tests/c/quickstart.c`): a data ring
//! and a snapshot-mode AUX area over your own pages, the PT state of that
//! area's buffer and the PT driver of one CPU, a little trace, and a
//! snapshot of its newest bytes into your own sink, as a sample's
//! `snapshot_aux` takes it from PMI context. Pages are 4 KiB aligned;
//! every object borrows the memory and the objects below it, so none can
//! outlive what it uses, and they are torn down in reverse order when they
//! go out of scope.
//!
//! ```
//! use perfaux::abi::PerfEventMmapPage;
//! use perfaux::aux::{AuxArea, AuxConfig};
//! use perfaux::pmu::ef;
//! use perfaux::pt::{buffer::PtBuffer, pmu::PtPmu};
//! use perfaux::soft_pt::stream::TraceEvent;
//! use perfaux::pt::topa::{IdentityMap, TopaTable};
//! use perfaux::soft_pt::tracer::SoftTracer;
//! use perfaux::ring::{FixedEvent, OutputSink, Ring, RingConfig};
//!
//! #[repr(C, align(4096))]
//! struct Page([u8; 4096]);
//!
//! /// A sink takes bytes and returns how many it could NOT take.
//! struct Copy(Vec<u8>);
//! impl OutputSink for Copy {
//!     fn copy(&mut self, bytes: &[u8]) -> usize {
//!         self.0.extend_from_slice(bytes);
//!         0
//!     }
//! }
//!
//! # fn main() -> perfaux::Result<()> {
//! // Your memory: the user page, 4 data pages, 4 AUX pages.
//! let mut user = Box::new(Page([0; 4096]));
//! let mut data: Vec<Page> = (0..4).map(|_| Page([0; 4096])).collect();
//! let mut aux: Vec<Page> = (0..4).map(|_| Page([0; 4096])).collect();
//! let user_page = user.0.as_mut_ptr().cast::<PerfEventMmapPage>();
//! let data_pages: Vec<*mut u8> = data.iter_mut().map(|p| p.0.as_mut_ptr()).collect();
//! let aux_pages: Vec<*mut u8> = aux.iter_mut().map(|p| p.0.as_mut_ptr()).collect();
//!
//! // SAFETY: the pages are live, 4 KiB aligned and disjoint, and nothing
//! // else touches them while the ring and the area live.
//! let ring = unsafe { Ring::new(user_page, &data_pages, 0, RingConfig::default())? };
//! let snapshot_mode = AuxConfig { overwrite: true, ..AuxConfig::default() };
//! // SAFETY: as above; `user_page` is the ring's.
//! let area = unsafe { AuxArea::new(user_page, &aux_pages, snapshot_mode)? };
//!
//! // setup_aux: the PT buffer (ToPA tables) over the area's pages, then
//! // one CPU's driver tracing into it.
//! let mut tables = [TopaTable::new()];
//! // SAFETY: as above; only the tracer this buffer programs writes them.
//! let buffer = unsafe { PtBuffer::new(&mut tables, &aux_pages, true, &IdentityMap)? };
//! let tracer = SoftTracer::new(&IdentityMap, 4096);
//! let record_event = FixedEvent { id: 1, sample_id: None };
//! let pt = PtPmu::new(&tracer, &IdentityMap, &buffer, &area, &ring, record_event)?;
//!
//! // pmu->add with PERF_EF_START: event 1, attr.config = intel_pt's tsc
//! // bit, not paused.
//! pt.add(1, 1 << 10, false, ef::START)?;
//!
//! // What the CPU does: tracing on at 0x400000, then branches.
//! tracer.trace(TraceEvent::Enable(0x40_0000));
//! for i in 0..2000 {
//!     tracer.trace(TraceEvent::Conditional { taken: i % 3 != 0, next: 0x40_0000 });
//! }
//!
//! // A sample's AUX block: the newest 256 bytes of trace.
//! let mut snapshot = Copy(Vec::new());
//! assert_eq!(pt.snapshot_aux(&mut snapshot, 256), Ok(256));
//! assert_eq!(snapshot.0.len(), 256);
//! assert!(tracer.written() > 256);
//!
//! // pmu->del ends the AUX transaction; the rest goes in reverse order.
//! pt.del();
//! # Ok(())
//! # }
//! ```
//!
//! # An AUX sample, end to end
//!
//! What `perf record -e '{intel_pt//,cycles}' --aux-sample=256` sets up, on
//! the same memory: the PT event leads a group, a sampling event joins it
//! with `aux_sample_size`, writes into the leader's buffer
//! (`PERF_EVENT_IOC_SET_OUTPUT`), and its overflow (the PMI) writes a
//! `PERF_RECORD_SAMPLE` whose AUX block is the newest trace, which a
//! consumer reads back as `perf record` would.
//!
//! ```
//! use perfaux::abi::{PerfEventAttr, PerfEventMmapPage, record_type, sample_type as st};
//! use perfaux::aux::{AuxArea, AuxConfig};
//! use perfaux::event::{Buffer, Event, EventConfig};
//! use perfaux::pmu::{EventInfo, Platform, Pmu};
//! use perfaux::pt::{buffer::PtBuffer, pmu::PtPmu};
//! use perfaux::soft_pt::stream::TraceEvent;
//! use perfaux::pt::topa::{IdentityMap, TopaTable};
//! use perfaux::soft_pt::tracer::SoftTracer;
//! use perfaux::ring::{Consumer, FixedEvent, Ring, RingConfig, read_header};
//! use perfaux::sample::{IrqMask, SampleData};
//! use perfaux::PmuCaps;
//!
//! #[repr(C, align(4096))]
//! struct Page([u8; 4096]);
//!
//! /// The sampling event's PMU: a counter that overflows when asked.
//! struct Cycles;
//! impl Pmu for Cycles {
//!     fn caps(&self) -> PmuCaps { PmuCaps::NONE }
//!     fn add(&self, _: &EventInfo<'_>, _: u32) -> perfaux::Result<()> { Ok(()) }
//!     fn del(&self, _: &EventInfo<'_>, _: u32) {}
//!     fn start(&self, _: &EventInfo<'_>, _: u32) {}
//!     fn stop(&self, _: &EventInfo<'_>, _: u32) {}
//! }
//!
//! /// CPU 0, its clock, the task running there; interrupts are masked
//! /// already (the PMI).
//! struct Cpu0;
//! impl IrqMask for Cpu0 {
//!     fn save(&self) -> usize { 0 }
//!     fn restore(&self, _: usize) {}
//! }
//! impl Platform for Cpu0 {
//!     fn cpu(&self) -> u32 { 0 }
//!     fn clock(&self) -> u64 { 1_000 }
//!     fn current(&self) -> (u32, u32) { (42, 42) }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut user = Box::new(Page([0; 4096]));
//! let mut data: Vec<Page> = (0..4).map(|_| Page([0; 4096])).collect();
//! let mut aux: Vec<Page> = (0..4).map(|_| Page([0; 4096])).collect();
//! let user_page = user.0.as_mut_ptr().cast::<PerfEventMmapPage>();
//! let data_pages: Vec<*mut u8> = data.iter_mut().map(|p| p.0.as_mut_ptr()).collect();
//! let aux_pages: Vec<*mut u8> = aux.iter_mut().map(|p| p.0.as_mut_ptr()).collect();
//! // SAFETY: live, aligned, disjoint pages, used only by these objects.
//! let ring = unsafe { Ring::new(user_page, &data_pages, 0, RingConfig::default())? };
//! let snapshot_mode = AuxConfig { overwrite: true, ..AuxConfig::default() };
//! // SAFETY: as above; `user_page` is the ring's.
//! let area = unsafe { AuxArea::new(user_page, &aux_pages, snapshot_mode)? };
//! let mut tables = [TopaTable::new()];
//! // SAFETY: as above; only the tracer this buffer programs writes them.
//! let pt_buffer = unsafe { PtBuffer::new(&mut tables, &aux_pages, true, &IdentityMap)? };
//! let tracer = SoftTracer::new(&IdentityMap, 4096);
//! let pt = PtPmu::new(&tracer, &IdentityMap, &pt_buffer, &area, &ring, FixedEvent::default())?;
//!
//! // The group: intel_pt// leading, cycles with aux_sample_size 256.
//! let mut pt_attr = PerfEventAttr::new(136);
//! pt_attr.type_ = 8;
//! let leader = Event::open(EventConfig {
//!     attr: pt_attr, pmu: &pt, id: 1, cpu: 0, leader: None, parent: None,
//! }).map_err(|rule| format!("{rule:?}"))?;
//! let buffer = Buffer { ring: &ring, aux: Some(&area) };
//! leader.set_buffer(&buffer);
//! let mut attr = PerfEventAttr::new(136);
//! attr.sample_period = 100_000;
//! attr.sample_type = st::IP | st::TID | st::TIME | st::AUX;
//! attr.aux_sample_size = 256;
//! let cycles = Event::open(EventConfig {
//!     attr, pmu: &Cycles, id: 2, cpu: 0, leader: Some(&leader), parent: None,
//! }).map_err(|rule| format!("{rule:?}"))?;
//! cycles.join_group();
//! cycles.set_output(&leader)?;
//! leader.sched_in(&Cpu0)?;
//!
//! // The CPU runs traced code, then the counter overflows: the PMI.
//! tracer.trace(TraceEvent::Enable(0x40_0000));
//! for i in 0..2000 {
//!     tracer.trace(TraceEvent::Conditional { taken: i % 3 != 0, next: 0x40_0000 });
//! }
//! let ip = 0x40_1234;
//! cycles.overflow(&Cpu0, &SampleData { ip, ..SampleData::default() })?;
//!
//! // The consumer (perf record) reads the sample back.
//! // SAFETY: the ring's memory, in writable mode; the only consumer.
//! let mut consumer = unsafe { Consumer::new(user_page, &data_pages, 0)? };
//! consumer.refresh();
//! let mut scratch = [0u8; 65536];
//! let mut found = false;
//! while let Some(record) = consumer.next_record(&mut scratch) {
//!     let record = record?;
//!     if read_header(record).map(|h| h.type_) != Some(record_type::SAMPLE) {
//!         continue; // the leader's ITRACE_START
//!     }
//!     let word = |at: usize| u64::from_ne_bytes(record[at..at + 8].try_into().unwrap());
//!     // IP, PID/TID, TIME, then the AUX block: its size, its bytes.
//!     assert_eq!(word(8), ip);
//!     assert_eq!((word(16) & 0xffff_ffff, word(16) >> 32), (42, 42));
//!     assert_eq!(word(24), 1_000);
//!     let aux_size = word(32) as usize;
//!     assert_eq!(aux_size, 256);
//!     let trace = &record[40..40 + aux_size];
//!     // The newest 256 bytes the tracer wrote, where it wrote them.
//!     let head = tracer.written() as usize % (4 * 4096);
//!     let page = |at: usize| aux[at / 4096].0[at % 4096];
//!     assert!(trace.iter().enumerate().all(|(i, &b)| b == page((head + 4 * 4096 - 256 + i) % (4 * 4096))));
//!     found = true;
//! }
//! consumer.commit();
//! assert!(found, "the sample was written");
//! # Ok(())
//! # }
//! ```

#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(loom)]
extern crate std;

pub mod abi;
pub mod attr;
pub mod aux;
mod caps;
mod error;
pub mod event;
pub mod lbr;
pub mod platform;
pub mod pmu;
pub mod pt;
pub mod ring;
pub mod sample;
pub mod soft_pt;
mod sync;
pub mod warn;

/// Same-CPU words with the kernel's `READ_ONCE` / `WRITE_ONCE` semantics and
/// `barrier()`, for a driver's own per-CPU state that its PMU callbacks, its
/// interrupt handlers and the PMI on one CPU share (the Rust-for-Linux
/// module's `struct PaxCpu` keeps the event on the CPU in a [`LocalPtr`](local::LocalPtr)).
pub mod local {
    pub use crate::sync::{LocalBool, LocalPtr, LocalU32, LocalU64, barrier};
}

/// Loom-model memory (only under `cfg(loom)`): see `sync`.
#[cfg(loom)]
#[doc(hidden)]
pub use sync::loom_memory;

pub use caps::PmuCaps;
pub use error::{Error, Result};
