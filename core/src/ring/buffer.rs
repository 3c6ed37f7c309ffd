// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`Ring`]: the kernel side of a data ring (`struct perf_buffer`, `rb_alloc`, `ring_buffer_init`).

use core::ptr::addr_of_mut;

use super::hook::{NestHook, NoHook};
use super::pages::{DataPages, check_user_page};
use crate::abi::{PAGE_SIZE, PERF_MMAP_PAGE_HEADER_SIZE, PerfEventMmapPage, mmap_caps};
use crate::error::Result;
use crate::platform::Wakeup;
use crate::sync::{AtomicBool, LocalU32, LocalU64, Ordering, shared_u64};

/// How a ring behaves. The default: writable, forward, watermark half the
/// data size, nobody to wake.
#[derive(Clone, Copy, Default)]
pub struct RingConfig<'a> {
    /// Overwrite mode: `data_tail` is ignored and old data is overwritten
    /// (a read-only mapping). Otherwise a full ring drops records.
    pub overwrite: bool,
    /// Write backward (`attr.write_backward`): `head` counts down.
    pub backward: bool,
    /// Bytes between wakeups (`attr.wakeup_watermark` when `attr.watermark`,
    /// else 0). Clamped to the data size; 0 means half the data size.
    pub watermark: u64,
    /// Who to wake; `None`: nobody.
    pub wakeup: Option<&'a (dyn Wakeup + Sync)>,
}

impl core::fmt::Debug for RingConfig<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RingConfig")
            .field("overwrite", &self.overwrite)
            .field("backward", &self.backward)
            .field("watermark", &self.watermark)
            .field("wakeup", &self.wakeup.is_some())
            .finish()
    }
}

/// The self-monitoring fields of the user page that the platform keeps
/// up to date (`perf_event_update_userpage`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SelfMonitoring {
    /// `index`: hardware counter + 1, or 0.
    pub index: u32,
    /// `offset`: add to the counter value.
    pub offset: i64,
    /// `time_enabled`.
    pub time_enabled: u64,
    /// `time_running`.
    pub time_running: u64,
}

/// The kernel side of a perf data ring over caller memory.
///
/// Writers are the contexts of one CPU (task, IRQ, NMI), which may nest;
/// the consumer runs elsewhere and sees only the user page and the data
/// chunks (see [`Consumer`](super::Consumer)). A ring is `Send` (it can be
/// handed to the CPU that owns it) but not `Sync`: two CPUs must never
/// write one ring.
///
/// Fields and who writes them (all others are fixed at creation):
/// - `head`: writers, by compare-and-swap (`local_cmpxchg`);
/// - `nest`, `events`, `wakeup`, `lost`: writers, with same-CPU operations;
/// - `paused`: whoever pauses the ring (`PERF_EVENT_IOC_PAUSE_OUTPUT`);
/// - user page `data_head`: the outermost writer; `data_tail`: the consumer.
///
/// # Invariants
/// - `user_page` is a checked (non-null, aligned) user page and `pages` the
///   checked data chunks (see [`DataPages`]), both valid for `'a` and
///   accessed, while the ring lives, only by it and its consumers (the
///   constructor's contract);
/// - a ring without data chunks is paused, forever: the constructor pauses
///   it and `resume` refuses it, so a running ring has chunks;
/// - `nest` is 0 outside a writer and counts the writers in progress
///   inside one; only the writer that takes it from 1 to 0 publishes
///   `data_head`;
/// - in writable mode `head - data_tail` never exceeds the data size: a
///   reservation that would pass the consumer is refused and counted lost.
pub struct Ring<'a, H: NestHook = NoHook> {
    pub(super) pages: DataPages<'a>,
    pub(super) user_page: *mut PerfEventMmapPage,
    pub(super) overwrite: bool,
    pub(super) backward: bool,
    pub(super) watermark: u64,
    pub(super) waker: Option<&'a (dyn Wakeup + Sync)>,
    /// Written by `pause`/`resume` (any CPU); read by `begin`.
    pub(super) paused: AtomicBool,
    /// Free-running reservation position.
    pub(super) head: LocalU64,
    /// Writer nesting depth.
    pub(super) nest: LocalU32,
    /// Samples counted toward `wakeup_events`.
    pub(super) events: LocalU64,
    /// Wakeup generation: a change seen by the outermost `end` wakes the consumer.
    pub(super) wakeup: LocalU64,
    /// Records dropped since the last `PERF_RECORD_LOST`.
    pub(super) lost: LocalU64,
    pub(super) hook: H,
}

// SAFETY: a ring owns no thread-bound state: its raw pointers are to caller
// memory valid for 'a (Ring::new's contract) and all its mutable state is
// atomic. Moving it to another thread (the CPU that will own it) is sound.
// It is deliberately not Sync: its same-CPU operations are not atomic
// against another CPU.
unsafe impl<H: NestHook + Send> Send for Ring<'_, H> {}

impl<'a> Ring<'a, NoHook> {
    /// A ring over `chunks` (each `PAGE_SIZE << order` bytes; 0 or a power of
    /// two of them) with the user page `user_page`. Zeroes every page and
    /// initializes the user page as Linux does (`cap_bit0_is_deprecated`,
    /// `size` 96, `data_offset` PAGE_SIZE, `data_size`). A ring without
    /// chunks exists but is paused forever (`ring_buffer_init`: `rb->paused` without pages).
    ///
    /// Errors: `EINVAL` for a null or misaligned pointer, an order above
    /// [`MAX_ORDER`](super::MAX_ORDER), or a chunk count that is not 0 or a
    /// power of two.
    ///
    /// # Safety
    /// `user_page` must be valid for reads and writes of
    /// `size_of::<PerfEventMmapPage>()` bytes and each chunk for
    /// `PAGE_SIZE << order` bytes, for `'a`; none may overlap; while the
    /// ring lives they are accessed only by it and by [`Consumer`](super::Consumer)s.
    pub unsafe fn new(
        user_page: *mut PerfEventMmapPage,
        chunks: &'a [*mut u8],
        order: u32,
        config: RingConfig<'a>,
    ) -> Result<Self> {
        // SAFETY: `with_hook`'s contract is this function's (its `# Safety`
        // says so), which the caller upholds.
        unsafe { Ring::with_hook(user_page, chunks, order, config, NoHook) }
    }
}

impl<'a, H: NestHook> Ring<'a, H> {
    /// [`Ring::new`] with a [`NestHook`] called at every interruption point.
    ///
    /// # Safety
    /// As for [`Ring::new`].
    pub unsafe fn with_hook(
        user_page: *mut PerfEventMmapPage,
        chunks: &'a [*mut u8],
        order: u32,
        config: RingConfig<'a>,
        hook: H,
    ) -> Result<Self> {
        check_user_page(user_page)?;
        // SAFETY: each chunk is valid for `PAGE_SIZE << order` bytes for 'a,
        // disjoint, and touched only by this ring and its consumers (this
        // constructor's contract, which `DataPages::new` needs).
        let pages = unsafe { DataPages::new(chunks, order)? };
        let data_size = pages.data_size();
        let mut watermark = config.watermark.min(data_size);
        if watermark == 0 {
            watermark = data_size / 2;
        }
        pages.zero_all();
        // SAFETY: `user_page` is valid and exclusively ours during set-up
        // (the contract); nobody shares it yet.
        unsafe {
            user_page.write(PerfEventMmapPage::zeroed());
            let page = &mut *user_page;
            page.capabilities = mmap_caps::BIT0_IS_DEPRECATED;
            page.size = PERF_MMAP_PAGE_HEADER_SIZE;
            page.data_offset = PAGE_SIZE as u64;
            page.data_size = data_size;
        }
        // INVARIANT: the user page and the chunks were checked above and are
        // the caller's for 'a; a ring without chunks starts paused (and
        // `resume` keeps it so); no writer is in progress (nest 0); head is
        // data_tail, so no reservation has passed the consumer.
        Ok(Ring {
            pages,
            user_page,
            overwrite: config.overwrite,
            backward: config.backward,
            watermark,
            waker: config.wakeup,
            paused: AtomicBool::new(data_size == 0),
            head: LocalU64::new(0),
            nest: LocalU32::new(0),
            events: LocalU64::new(0),
            wakeup: LocalU64::new(0),
            lost: LocalU64::new(0),
            hook,
        })
    }

    /// Size of the data area in bytes.
    pub fn data_size(&self) -> u64 {
        self.pages.data_size()
    }

    /// The byte distance between wakeups, after clamping.
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// Whether the ring overwrites old data instead of dropping new records.
    pub fn is_overwrite(&self) -> bool {
        self.overwrite
    }

    /// Whether the ring is written backward.
    pub fn is_backward(&self) -> bool {
        self.backward
    }

    /// The user page (`perf_event_mmap_page`) the ring was built over: what
    /// an [`AuxArea`](crate::aux::AuxArea) of this ring is attached to.
    pub fn user_page(&self) -> *mut PerfEventMmapPage {
        self.user_page
    }

    /// Whether a writer is between `begin` and `end` now (`rb->nest` not
    /// 0): a set-up path's check that no output handle is open before the
    /// ring goes away. Writers run on the ring's CPU; from another CPU the
    /// answer is only as fresh as that CPU's last store.
    pub fn has_writer(&self) -> bool {
        self.nest.load() != 0
    }

    /// The free-running reservation position (`rb->head`).
    pub fn head(&self) -> u64 {
        self.head.load()
    }

    /// `data_head` as the consumer sees it now.
    pub fn published_head(&self) -> u64 {
        // Acquire, as a consumer's load (C); used for statistics and tests.
        self.data_head_word().load(Ordering::Acquire)
    }

    /// Records dropped and not yet reported by a `PERF_RECORD_LOST`.
    pub fn pending_lost(&self) -> u64 {
        self.lost.load()
    }

    /// The hook this ring calls at its interruption points.
    pub fn hook(&self) -> &H {
        &self.hook
    }

    /// Stops all output (`PERF_EVENT_IOC_PAUSE_OUTPUT` 1): every `begin`
    /// fails with `ENOSPC` and counts a lost record. May be called from any CPU.
    pub fn pause(&self) {
        // Relaxed, ordering nothing: a flag, as the kernel's plain store to
        // `rb->paused` in `rb_toggle_paused`. A writer on another CPU may
        // still see it clear and write one more record; writers in flight
        // finish theirs.
        self.paused.store(true, Ordering::Relaxed);
    }

    /// Resumes output (`PERF_EVENT_IOC_PAUSE_OUTPUT` 0). A ring without data
    /// pages stays paused.
    pub fn resume(&self) {
        // Relaxed, as `pause`: a flag; `begin` reads it with a Relaxed
        // load, and no data is published through it.
        self.paused.store(self.data_size() == 0, Ordering::Relaxed);
    }

    /// Whether output is paused.
    pub fn is_paused(&self) -> bool {
        // Relaxed: a plain flag (see `pause`).
        self.paused.load(Ordering::Relaxed)
    }

    /// Publishes the self-monitoring fields under the user page's `lock`
    /// seqcount (`perf_event_update_userpage`): `lock` is odd while they
    /// change. Same-CPU writers only (the platform calls it from the event's CPU).
    #[cfg(not(loom))]
    pub fn update_self_monitoring(&self, v: &SelfMonitoring) {
        let page = self.user_page;
        // SAFETY: the field is within the user page, valid and aligned for
        // 'a (Ring::new's contract), and only accessed atomically while the
        // ring lives. The same holds for the fields below.
        let lock = unsafe { crate::sync::shared_u32(addr_of_mut!((*page).lock)) };
        let seq = lock.load(Ordering::Relaxed);
        // Release on the odd value, then the fields: a reader that sees the
        // fields' new values sees the odd lock (pairs with the reader's
        // re-check after an Acquire fence).
        lock.store(seq.wrapping_add(1), Ordering::Relaxed);
        crate::sync::fence(Ordering::Release);
        // SAFETY: these fields are within the user page too, valid and
        // aligned for 'a (Ring::new's contract) and only accessed atomically.
        unsafe {
            crate::sync::shared_u32(addr_of_mut!((*page).index)).store(v.index, Ordering::Relaxed);
            shared_u64(addr_of_mut!((*page).offset).cast())
                .store(v.offset as u64, Ordering::Relaxed);
            shared_u64(addr_of_mut!((*page).time_enabled)).store(v.time_enabled, Ordering::Relaxed);
            shared_u64(addr_of_mut!((*page).time_running)).store(v.time_running, Ordering::Relaxed);
        }
        // Release: the fields before the even value (pairs with the reader's
        // Acquire load of `lock`).
        lock.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The user page's `data_head` word.
    #[inline(always)]
    pub(super) fn data_head_word(&self) -> &crate::sync::AtomicU64 {
        // SAFETY: within the user page, valid and 8-aligned for 'a, accessed
        // only atomically while the ring lives (Ring::new's contract).
        unsafe { shared_u64(addr_of_mut!((*self.user_page).data_head)) }
    }

    /// The user page's `data_tail` word.
    #[inline(always)]
    pub(super) fn data_tail_word(&self) -> &crate::sync::AtomicU64 {
        // SAFETY: as for `data_head_word`.
        unsafe { shared_u64(addr_of_mut!((*self.user_page).data_tail)) }
    }
}
