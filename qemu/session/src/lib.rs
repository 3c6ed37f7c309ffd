// SPDX-License-Identifier: MIT OR Apache-2.0
//! The memory a traced program's emulator and `perfaux record` share: what
//! the mmaps of `perf record`'s events are between the kernel and perf.
//!
//! `perfaux record` creates one shared file (a memfd) and hands it to the
//! emulator's plugin. The file starts with a [`Header`] (the run's
//! parameters and the attrs of the events to open, as `perf record` opens
//! them), then a table of [`SlotInfo`]s, then the slots. A slot is what
//! one CPU's mmaps are in `perf record -e '{intel_pt//u,instructions:u}'`:
//! a user page (`struct perf_event_mmap_page`), the data ring's pages and
//! the AUX area's pages. Each guest thread claims a slot of its own when it
//! first runs (its "CPU" for the file: the slot index), and the plugin's
//! engine writes that thread's records, samples and trace there; the
//! recorder drains every live slot as `perf record` drains its mmaps.
//!
//! The protocol of a slot's [`SlotInfo::state`]:
//! [`SLOT_FREE`] -> (plugin: claims, builds the engine over the slot's
//! pages, fills pid/tid, then publishes) [`SLOT_LIVE`] -> (plugin: the
//! thread ended and everything is written) [`SLOT_DONE`] -> (recorder:
//! drained to the end, pages released) [`SLOT_DRAINED`]. The data ring and
//! AUX area inside follow the kernel's protocol over the user page
//! (`data_head`/`data_tail`, `aux_head`/`aux_tail`).
//!
//! ```
//! use perfaux_qemu_session::{Layout, Mode};
//! let layout = Layout::new(4, 128, 1024, Mode::Sample).unwrap();
//! // The AUX area of slot 1 starts on its own 4 MiB boundary.
//! assert_eq!(layout.aux_page(1, 0) % (4 << 20), 0);
//! assert!(layout.file_bytes() >= 4 * (4 << 20));
//! ```

use core::sync::atomic::{AtomicU32, AtomicU64};

use perfaux::abi::{PAGE_SIZE, PerfEventAttr, PerfEventMmapPage};
use static_assertions::const_assert_eq;

/// [`Header::magic`]: "PAUXQEMU".
pub const MAGIC: u64 = u64::from_le_bytes(*b"PAUXQEMU");
/// [`Header::version`] of this layout.
pub const VERSION: u32 = 1;

/// A slot nobody claimed.
pub const SLOT_FREE: u32 = 0;
/// A slot a thread writes; the recorder drains it.
pub const SLOT_LIVE: u32 = 1;
/// A slot whose thread ended: everything it wrote is in its rings.
pub const SLOT_DONE: u32 = 2;
/// A done slot the recorder drained to the end; its pages are released.
pub const SLOT_DRAINED: u32 = 3;

/// The most slots a file has room for.
pub const MAX_SLOTS: u32 = 4096;

/// What each thread records: how the PT leader's AUX area is used, or no
/// PT leader at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Mode {
    /// A snapshot (overwrite) area; each sample carries the trace's newest
    /// bytes (`perf record --aux-sample`).
    Sample = 0,
    /// A writable area, read whole by the recorder (`PERF_RECORD_AUXTRACE`).
    Full = 1,
    /// No PT leader and no AUX area: the sampler alone leads, its samples
    /// carrying branch stacks (`perf record -b`).
    Branches = 2,
}

impl Mode {
    /// The mode of [`Header::mode`]'s value.
    pub fn from_u32(v: u32) -> Option<Mode> {
        match v {
            0 => Some(Mode::Sample),
            1 => Some(Mode::Full),
            2 => Some(Mode::Branches),
            _ => None,
        }
    }
}

/// The start of the shared file: the run's parameters, written by the
/// recorder before the emulator starts and read-only afterwards, and the
/// counters both sides update.
#[repr(C)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: u64,
    /// [`VERSION`].
    pub version: u32,
    /// Slots the file has room for.
    pub slots: u32,
    /// Data ring pages per slot (a power of two).
    pub data_pages: u32,
    /// AUX pages per slot (a power of two; 0 in [`Mode::Branches`]).
    pub aux_pages: u32,
    /// A [`Mode`].
    pub mode: u32,
    /// The recorder's process id: a thread waiting for it to drain stops
    /// waiting once it is gone.
    pub recorder: u32,
    /// The PT leader's attr (`intel_pt//u`).
    pub leader_attr: PerfEventAttr,
    /// The sampler's attr (`instructions:u`, `sample_period` the period).
    pub sampler_attr: PerfEventAttr,
    /// The next slot to claim (plugin: `fetch_add`, Relaxed: the slot's
    /// own state publishes what is in it).
    pub next_slot: AtomicU32,
    /// Threads that ran untraced for want of a free slot (plugin: Relaxed
    /// `fetch_add`; the recorder reads it after the emulator exited).
    pub untraced: AtomicU32,
    /// Instructions the emulator ran, all threads of all processes
    /// (plugin: Relaxed `fetch_add` as each thread ends).
    pub instructions: AtomicU64,
}

const_assert_eq!(core::mem::size_of::<Header>(), 320);
const_assert_eq!(core::mem::offset_of!(Header, magic), 0);
const_assert_eq!(core::mem::offset_of!(Header, version), 8);
const_assert_eq!(core::mem::offset_of!(Header, slots), 12);
const_assert_eq!(core::mem::offset_of!(Header, data_pages), 16);
const_assert_eq!(core::mem::offset_of!(Header, aux_pages), 20);
const_assert_eq!(core::mem::offset_of!(Header, mode), 24);
const_assert_eq!(core::mem::offset_of!(Header, recorder), 28);
const_assert_eq!(core::mem::offset_of!(Header, leader_attr), 32);
const_assert_eq!(core::mem::offset_of!(Header, sampler_attr), 168);
const_assert_eq!(core::mem::offset_of!(Header, next_slot), 304);
const_assert_eq!(core::mem::offset_of!(Header, untraced), 308);
const_assert_eq!(core::mem::offset_of!(Header, instructions), 312);

/// One slot's entry in the table after the header.
#[repr(C)]
pub struct SlotInfo {
    /// `SLOT_*`. The plugin stores [`SLOT_LIVE`] and [`SLOT_DONE`] with
    /// Release after what they publish (the pid and tid, the rings'
    /// set-up; the thread's last records and counts); the recorder loads
    /// it with Acquire before reading them, and stores [`SLOT_DRAINED`]
    /// (Relaxed: only the recorder reads it then).
    pub state: AtomicU32,
    /// The thread's process id.
    pub pid: AtomicU32,
    /// The thread id.
    pub tid: AtomicU32,
    /// Bytes of `exec_path` that hold the program the thread's `execve`
    /// is starting; 0 when none is pending. The plugin writes the path,
    /// then stores the length with Release at the system call's entry,
    /// and stores 0 (Relaxed) when the call fails; a thread whose process
    /// the call replaced never ends, and its slot keeps the path: the
    /// recorder (Acquire, then the bytes) names the program that ran
    /// untraced.
    pub exec_len: AtomicU32,
    /// Instructions the thread retired into its trace (what a decoder
    /// counts): final when published by [`SLOT_DONE`], else as of the
    /// last batch the plugin traced (Relaxed).
    pub retired: AtomicU64,
    /// Trace bytes the thread's tracer wrote: final when published by
    /// [`SLOT_DONE`], else as of the last batch, stored with Release after
    /// the bytes (a thread that dies without ending leaves its trace up to
    /// there in its AUX area, whole packets, beyond `aux_head`).
    pub trace_bytes: AtomicU64,
    /// Trace events lost to a full AUX area, published by [`SLOT_DONE`].
    pub lost_events: AtomicU64,
    /// Samples the data ring refused, published by [`SLOT_DONE`].
    pub lost_samples: AtomicU64,
    /// Reserved.
    pub _reserved: [u64; 2],
    /// The path of a pending `execve` (see `exec_len`).
    pub exec_path: core::cell::UnsafeCell<[u8; EXEC_PATH_MAX]>,
}

/// The most bytes of an `execve` path a slot keeps.
pub const EXEC_PATH_MAX: usize = 256;

const_assert_eq!(core::mem::size_of::<SlotInfo>(), 64 + EXEC_PATH_MAX);
const_assert_eq!(core::mem::offset_of!(SlotInfo, exec_path), 64);
const_assert_eq!(core::mem::offset_of!(SlotInfo, state), 0);
const_assert_eq!(core::mem::offset_of!(SlotInfo, pid), 4);
const_assert_eq!(core::mem::offset_of!(SlotInfo, tid), 8);
const_assert_eq!(core::mem::offset_of!(SlotInfo, exec_len), 12);
const_assert_eq!(core::mem::offset_of!(SlotInfo, retired), 16);
const_assert_eq!(core::mem::offset_of!(SlotInfo, trace_bytes), 24);
const_assert_eq!(core::mem::offset_of!(SlotInfo, lost_events), 32);
const_assert_eq!(core::mem::offset_of!(SlotInfo, lost_samples), 40);

/// The clock of a session, on both sides: perf time is `CLOCK_MONOTONIC`
/// in ns, and so is the trace's TSC (`time_mult` 1, `time_shift` 0).
pub fn now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A mapping of a whole session file, as either side reaches into it.
///
/// # Invariants
/// `base` maps all `layout.file_bytes()` bytes of a session file whose
/// header passed [`Layout::of`] (or was written from `layout`), readable
/// and writable, for as long as the `Mapped` lives.
pub struct Mapped {
    base: *mut u8,
    layout: Layout,
}

impl Mapped {
    /// The mapping at `base` of a file laid out as `layout`.
    ///
    /// # Safety
    /// `base` must map all `layout.file_bytes()` bytes of the file, shared,
    /// readable and writable, its header initialised, for as long as the
    /// returned value lives.
    pub unsafe fn new(base: *mut u8, layout: Layout) -> Mapped {
        // INVARIANT: the caller's promise.
        Mapped { base, layout }
    }

    /// Where the mapping starts.
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The header.
    pub fn header(&self) -> &Header {
        // SAFETY: the mapping starts with the initialised header (the
        // invariant), page aligned.
        unsafe { &*self.base.cast::<Header>() }
    }

    /// Slot `slot`'s table entry (`slot < layout.slots()`).
    pub fn info(&self, slot: u32) -> &SlotInfo {
        let at = self.layout.slot_info(slot) as usize;
        // SAFETY: the table lies inside the mapping (the layout); entries
        // are 8-byte aligned (a page plus multiples of their size).
        unsafe { &*self.base.add(at).cast::<SlotInfo>() }
    }

    /// Slot `slot`'s user page.
    pub fn user_page(&self, slot: u32) -> *mut PerfEventMmapPage {
        self.base
            .wrapping_add(self.layout.user_page(slot) as usize)
            .cast()
    }

    /// Slot `slot`'s data pages.
    pub fn data_pages(&self, slot: u32) -> Vec<*mut u8> {
        self.layout.data_page_ptrs(self.base, slot)
    }

    /// Slot `slot`'s AUX pages, in the area's order.
    pub fn aux_pages(&self, slot: u32) -> Vec<*mut u8> {
        self.layout.aux_page_ptrs(self.base, slot)
    }
}

/// The id of slot `slot`'s event `k`: its PT leader (0) and its sampler
/// (1), slot after slot, from 1 (`perf record` gives each CPU's events
/// their own ids the same way).
pub const fn event_id(slot: u32, k: u32) -> u64 {
    1 + 2 * slot as u64 + k as u64
}

/// The ground truth a plugin keeps on request (`truth=DIR`): one file
/// per slot in the directory, of little-endian `[u64; 3]` entries in the
/// order the thread made them.
pub mod truth {
    /// `[BRANCH, from, to]`: control went from `from` to `to` as a decoder
    /// reports a branch (a taken branch; `to` 0: tracing stopped there;
    /// `from` 0: tracing started at `to`).
    pub const BRANCH: u64 = 0;
    /// `[SAMPLE, ip, 0]`: a sample at `ip`, after the branches before it
    /// (its own PMI's exit follows).
    pub const SAMPLE: u64 = 1;

    /// Slot `slot`'s file in the truth directory.
    pub fn file_name(slot: u32) -> String {
        format!("{slot}.truth")
    }
}

/// Why a layout cannot be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutError(pub String);

impl core::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LayoutError {}

/// Where everything is in the shared file, in bytes from its start.
///
/// A slot is its AUX pages, then its user page, then its data pages; each
/// slot starts on a multiple of the AUX area's size, so that a mapping of
/// the file aligned to that size gives the AUX area naturally aligned
/// blocks (the ToPA's large regions, in sample mode). In full mode the
/// AUX pages are taken in an interleaved order (see [`Layout::aux_page`]).
///
/// # Invariants
/// `slots` is in `1..=MAX_SLOTS`; `data_pages` is a power of two;
/// `aux_pages` is 0 in branch mode and a power of two otherwise, at least 2
/// in full mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    slots: u32,
    data_pages: u32,
    aux_pages: u32,
    mode: Mode,
}

/// Bytes of the header and the slot table, rounded to the largest AUX
/// alignment (the slots follow).
fn table_bytes(slots: u32) -> u64 {
    let raw = PAGE_SIZE as u64 + u64::from(slots) * core::mem::size_of::<SlotInfo>() as u64;
    raw.next_multiple_of(PAGE_SIZE as u64)
}

impl Layout {
    /// The layout of `slots` slots of `data_pages` data and `aux_pages` AUX
    /// pages in `mode`.
    ///
    /// # Errors
    /// A page count that is not a power of two (`perf_mmap` refuses it), a
    /// writable AUX area of one page (`rb_alloc_aux` refuses it), no slot
    /// or more than [`MAX_SLOTS`].
    pub fn new(
        slots: u32,
        data_pages: u32,
        aux_pages: u32,
        mode: Mode,
    ) -> Result<Layout, LayoutError> {
        if !(1..=MAX_SLOTS).contains(&slots) {
            return Err(LayoutError(format!(
                "{slots} slots: between 1 and {MAX_SLOTS}"
            )));
        }
        if !data_pages.is_power_of_two() {
            return Err(LayoutError(format!(
                "{data_pages} data pages: the data ring is a power of two pages (perf_mmap: EINVAL)"
            )));
        }
        if mode == Mode::Branches {
            if aux_pages != 0 {
                return Err(LayoutError(format!(
                    "{aux_pages} AUX pages for branch stacks alone: no AUX area is mapped"
                )));
            }
        } else if !aux_pages.is_power_of_two() {
            return Err(LayoutError(format!(
                "{aux_pages} AUX pages: the AUX area is a power of two pages (perf_mmap: EINVAL)"
            )));
        }
        if mode == Mode::Full && aux_pages < 2 {
            return Err(LayoutError(
                "1 AUX page for a full trace: a writable AUX area needs two pages at least (rb_alloc_aux: EINVAL)".into(),
            ));
        }
        // INVARIANT: checked above.
        Ok(Layout {
            slots,
            data_pages,
            aux_pages,
            mode,
        })
    }

    /// The layout a header describes.
    ///
    /// # Errors
    /// A header of another magic or version, or parameters [`Layout::new`]
    /// refuses.
    pub fn of(header: &Header) -> Result<Layout, LayoutError> {
        if header.magic != MAGIC || header.version != VERSION {
            return Err(LayoutError(format!(
                "not a perfaux session of version {VERSION} (magic {:#x}, version {})",
                header.magic, header.version
            )));
        }
        let mode = Mode::from_u32(header.mode)
            .ok_or_else(|| LayoutError(format!("mode {}", header.mode)))?;
        Layout::new(header.slots, header.data_pages, header.aux_pages, mode)
    }

    /// Slots.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Data pages per slot.
    pub fn data_pages(&self) -> usize {
        self.data_pages as usize
    }

    /// AUX pages per slot.
    pub fn aux_pages(&self) -> usize {
        self.aux_pages as usize
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Bytes of one slot's AUX area.
    pub fn aux_bytes(&self) -> u64 {
        u64::from(self.aux_pages) * PAGE_SIZE as u64
    }

    /// The alignment a mapping of the file needs: a slot's AUX area, a
    /// page when there is none.
    pub fn align(&self) -> u64 {
        self.aux_bytes().max(PAGE_SIZE as u64)
    }

    /// The distance between two slots.
    fn stride(&self) -> u64 {
        let rest = u64::from(1 + self.data_pages) * PAGE_SIZE as u64;
        self.aux_bytes() + rest.next_multiple_of(self.align())
    }

    /// Where the slots start.
    fn first_slot(&self) -> u64 {
        table_bytes(self.slots).next_multiple_of(self.align())
    }

    /// The file's size.
    pub fn file_bytes(&self) -> u64 {
        self.first_slot() + u64::from(self.slots) * self.stride()
    }

    /// Where slot `slot`'s entry is in the table.
    pub fn slot_info(&self, slot: u32) -> u64 {
        PAGE_SIZE as u64 + u64::from(slot) * core::mem::size_of::<SlotInfo>() as u64
    }

    /// Where slot `slot` starts (its AUX area), and how long it is.
    pub fn slot_range(&self, slot: u32) -> (u64, u64) {
        (
            self.first_slot() + u64::from(slot) * self.stride(),
            self.stride(),
        )
    }

    /// Where slot `slot`'s user page is.
    pub fn user_page(&self, slot: u32) -> u64 {
        self.slot_range(slot).0 + self.aux_bytes()
    }

    /// Where data page `k` of slot `slot` is.
    pub fn data_page(&self, slot: u32, k: usize) -> u64 {
        self.user_page(slot) + ((1 + k) * PAGE_SIZE) as u64
    }

    /// Where page `k` (in the AUX area's order) of slot `slot`'s AUX area
    /// is. In sample mode the pages are in memory order. In full mode they
    /// are interleaved (even pages first, then odd ones), so that no two
    /// consecutive pages of the area are adjacent in memory: the PT driver
    /// then builds one ToPA region per page, as over the scattered pages
    /// `rb_alloc_aux` gives a writable area, and places its STOP and INT
    /// markers a page from the consumer, not half an area.
    pub fn aux_page(&self, slot: u32, k: usize) -> u64 {
        let n = self.aux_pages();
        let page = match self.mode {
            Mode::Sample | Mode::Branches => k,
            Mode::Full if k < n / 2 => 2 * k,
            Mode::Full => 2 * (k - n / 2) + 1,
        };
        self.slot_range(slot).0 + (page * PAGE_SIZE) as u64
    }

    /// Pointers to slot `slot`'s data pages in a mapping of the file at
    /// `base`.
    pub fn data_page_ptrs(&self, base: *mut u8, slot: u32) -> Vec<*mut u8> {
        (0..self.data_pages())
            .map(|k| base.wrapping_add(self.data_page(slot, k) as usize))
            .collect()
    }

    /// Pointers to slot `slot`'s AUX pages, in the area's order, in a
    /// mapping of the file at `base`.
    pub fn aux_page_ptrs(&self, base: *mut u8, slot: u32) -> Vec<*mut u8> {
        (0..self.aux_pages())
            .map(|k| base.wrapping_add(self.aux_page(slot, k) as usize))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_do_not_overlap_and_aux_areas_are_aligned() {
        for (mode, aux) in [(Mode::Sample, 16), (Mode::Full, 16), (Mode::Branches, 0)] {
            let l = Layout::new(3, 8, aux, mode).unwrap();
            let mut pages = Vec::new();
            for s in 0..3 {
                let (start, len) = l.slot_range(s);
                assert_eq!(start % l.align(), 0);
                assert!(start >= l.slot_info(l.slots()));
                pages.push(l.user_page(s));
                pages.extend((0..8).map(|k| l.data_page(s, k)));
                pages.extend((0..aux as usize).map(|k| l.aux_page(s, k)));
                assert!(
                    pages
                        .iter()
                        .rev()
                        .take(9 + aux as usize)
                        .all(|&p| p >= start && p + 4096 <= start + len)
                );
            }
            let mut sorted = pages.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), pages.len(), "{mode:?}");
            assert!(sorted.last().unwrap() + 4096 <= l.file_bytes());
        }
    }

    #[test]
    fn full_mode_pages_are_never_adjacent() {
        let l = Layout::new(1, 1, 64, Mode::Full).unwrap();
        for k in 1..64 {
            assert_ne!(l.aux_page(0, k), l.aux_page(0, k - 1) + 4096, "{k}");
        }
    }

    #[test]
    fn bad_parameters_are_refused_with_the_kernel_reason() {
        assert!(
            Layout::new(1, 3, 4, Mode::Sample)
                .unwrap_err()
                .0
                .contains("EINVAL")
        );
        assert!(
            Layout::new(1, 4, 6, Mode::Sample)
                .unwrap_err()
                .0
                .contains("EINVAL")
        );
        assert!(
            Layout::new(1, 4, 1, Mode::Full)
                .unwrap_err()
                .0
                .contains("rb_alloc_aux")
        );
        assert!(Layout::new(1, 4, 1, Mode::Branches).is_err());
        assert!(Layout::new(1, 4, 0, Mode::Sample).is_err());
        assert!(Layout::new(0, 4, 4, Mode::Full).is_err());
        assert!(Layout::new(MAX_SLOTS + 1, 4, 4, Mode::Full).is_err());
    }
}
