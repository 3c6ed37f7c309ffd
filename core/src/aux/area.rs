// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`AuxArea`]: the AUX state of a perf buffer (`rb_alloc_aux`, `rb_free_aux`
//! in `kernel/events/ring_buffer.c`).

use core::ptr::addr_of_mut;

use crate::abi::{PAGE_SIZE, PerfEventMmapPage};
use crate::error::{Error, Result};
use crate::ring::Wakeup;
use crate::sync::{AtomicBool, AtomicU32, LocalU32, LocalU64, Ordering, shared_u64};

/// How an AUX area behaves.
#[derive(Clone, Copy, Default)]
pub struct AuxConfig<'a> {
    /// Overwrite (snapshot) mode: the AUX mapping is read-only, `aux_tail`
    /// is ignored and the tracer overwrites old data. Otherwise writable
    /// (full-trace) mode.
    pub overwrite: bool,
    /// `attr.aux_watermark`: bytes between wakeups in writable mode; 0
    /// means half the area (at most `u32::MAX`). Ignored in overwrite mode.
    pub watermark: u64,
    /// Who to wake (the AUX event's consumer); `None`: nobody.
    pub wakeup: Option<&'a (dyn Wakeup + Sync)>,
}

impl core::fmt::Debug for AuxConfig<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AuxConfig")
            .field("overwrite", &self.overwrite)
            .field("watermark", &self.watermark)
            .field("wakeup", &self.wakeup.is_some())
            .finish()
    }
}

/// The AUX area of a ring over caller pages.
///
/// Fields and who touches them:
/// - `head`, `wakeup`, `nest`: the CPU of the AUX event, in transactions;
/// - `in_sampling`: that CPU, around `snapshot_aux` (a sampler there checks it);
/// - `refcount`, `mapped`: the mapping (any CPU) and transactions;
/// - `disable_requested`: set by transactions, taken by the event layer;
/// - user page `aux_head`: written at `end`; `aux_tail`: the consumer.
///
/// # Invariants
/// - `pages` is a non-empty power of two of non-null, 4 KiB-aligned pages,
///   valid for `'a`, accessed only through this crate while the area lives
///   (the constructor's contract), so `copy_aux` may read any of them;
/// - `nest` is 1 exactly while a transaction ([`AuxHandle`](super::AuxHandle)) is open, and
///   `refcount` counts the mapping and each open transaction, so pages are
///   never released under an open transaction;
/// - in writable mode a transaction never hands out bytes in
///   `[aux_tail, aux_head)`, the consumer's.
///
/// A writable (full-trace) area: a tracer's transaction hands out the free
/// space, the tracer writes it, `end` publishes it (and writes the
/// `PERF_RECORD_AUX` into the ring), and the consumer reads it back and
/// gives the space back.
///
/// ```
/// use perfaux::abi::PerfEventMmapPage;
/// use perfaux::aux::{AuxArea, AuxConfig, AuxConsumer};
/// use perfaux::ring::{FixedEvent, Ring, RingConfig};
///
/// #[repr(C, align(4096))]
/// struct Page([u8; 4096]);
///
/// # fn main() -> perfaux::Result<()> {
/// let mut user = Box::new(Page([0; 4096]));
/// let mut data: Vec<Page> = (0..2).map(|_| Page([0; 4096])).collect();
/// let mut aux: Vec<Page> = (0..2).map(|_| Page([0; 4096])).collect();
/// let user_page = user.0.as_mut_ptr().cast::<PerfEventMmapPage>();
/// let data_pages: Vec<*mut u8> = data.iter_mut().map(|p| p.0.as_mut_ptr()).collect();
/// let aux_pages: Vec<*mut u8> = aux.iter_mut().map(|p| p.0.as_mut_ptr()).collect();
/// // SAFETY: live, aligned, disjoint pages, used only through these objects.
/// let ring = unsafe { Ring::new(user_page, &data_pages, 0, RingConfig::default())? };
/// // SAFETY: as above; `user_page` is the ring's.
/// let area = unsafe { AuxArea::new(user_page, &aux_pages, AuxConfig::default())? };
///
/// // The tracer's side: a transaction, 100 bytes of trace, the end.
/// let handle = area.begin()?;
/// assert_eq!(handle.space(), 8191); // CIRC_SPACE: the size - 1
/// for i in 0..100 {
///     // SAFETY: [head, head + space) is the tracer's while the handle lives.
///     unsafe { *aux_pages[0].add(i) = i as u8 };
/// }
/// handle.end(100, &ring, &mut FixedEvent::default());
///
/// // The consumer's side (perf record): read what is published, give it back.
/// // SAFETY: the area's memory, writable mode, the only consumer.
/// let mut consumer = unsafe { AuxConsumer::new(user_page, &aux_pages)? };
/// assert_eq!(consumer.refresh(), 100);
/// let mut trace = [0u8; 100];
/// assert_eq!(consumer.read_to_slice(&mut trace), 100);
/// assert!(trace.iter().enumerate().all(|(i, &b)| b == i as u8));
/// consumer.commit();
/// assert_eq!(area.begin()?.space(), 8191, "all of it free again");
/// # Ok(())
/// # }
/// ```
pub struct AuxArea<'a> {
    pub(super) user_page: *mut PerfEventMmapPage,
    /// One pointer per 4 KiB page, in buffer order (Linux `aux_pages[]`).
    pub(super) pages: &'a [*mut u8],
    pub(super) overwrite: bool,
    pub(super) watermark: u64,
    pub(super) waker: Option<&'a (dyn Wakeup + Sync)>,
    /// Free-running producer position (`rb->aux_head`).
    pub(super) head: LocalU64,
    /// Last watermark boundary crossed (`rb->aux_wakeup`).
    pub(super) wakeup: LocalU64,
    /// 1 while a transaction is open (`aux_nest`).
    pub(super) nest: LocalU32,
    /// 1 while `snapshot_aux` runs on this area (`aux_in_sampling`).
    pub(super) in_sampling: LocalU32,
    /// 1 for the mapping + 1 per open transaction (`aux_refcount`).
    pub(super) refcount: AtomicU32,
    /// The area is mapped (`aux_mmap_count != 0`).
    pub(super) mapped: AtomicBool,
    /// A transaction asked for the event to be disabled (`pending_disable`).
    pub(super) disable_requested: AtomicBool,
}

// SAFETY: the area's raw pointers are to caller memory valid for 'a (the
// constructor's contract) and its state is atomic; it may move to the CPU
// that owns it. It is not Sync, so safe Rust cannot share it between
// threads; C and kernel users do share it, within these rules: `unmap`,
// `is_mapped` and `is_released` run on any CPU and touch only the atomics
// `mapped` and `refcount`; the local words (`head`, `wakeup`, `nest`,
// `in_sampling`) belong to the CPU of the AUX event.
unsafe impl Send for AuxArea<'_> {}

impl<'a> AuxArea<'a> {
    /// An AUX area over `pages` (one 4 KiB page each, a power-of-two count,
    /// in buffer order: a high-order block is its pages in a row), attached
    /// to the ring whose user page this is. Zeroes the pages, writes
    /// `aux_size` into the user page (and `aux_offset`, if 0, right after the
    /// data area, as `perf record` maps it), and holds the mapping's reference.
    ///
    /// The PMU's own state for the pages (what `setup_aux` returns in
    /// Linux, `rb->aux_priv`) is the PMU's to keep: an [`AuxOutput`](super::AuxOutput)
    /// hands it out with the transaction, as PT's [`PtBuffer`](crate::pt::buffer::PtBuffer) is.
    ///
    /// Errors: `EINVAL` for no pages, a count that is not a power of two, a
    /// null page or one that is not 4 KiB aligned (AUX pages are whole
    /// pages, as the kernel's are; ToPA tables address nothing smaller), or
    /// a null/misaligned user page.
    ///
    /// # Safety
    /// `user_page` must be the live ring's user page and each page valid for
    /// reads and writes of 4 KiB, for `'a`, not overlapping; while the area
    /// lives they are accessed only through this crate.
    pub unsafe fn new(
        user_page: *mut PerfEventMmapPage,
        pages: &'a [*mut u8],
        config: AuxConfig<'a>,
    ) -> Result<Self> {
        if user_page.is_null() || (user_page as usize) % 8 != 0 {
            return Err(Error::Invalid);
        }
        let n = pages.len();
        if n == 0
            || !n.is_power_of_two()
            || pages
                .iter()
                .any(|p| p.is_null() || (*p as usize) % PAGE_SIZE != 0)
        {
            return Err(Error::Invalid);
        }
        let size = (n as u64) * PAGE_SIZE as u64;
        let watermark = if config.overwrite {
            0
        } else if config.watermark == 0 {
            (size / 2).min(u64::from(u32::MAX))
        } else {
            config.watermark
        };
        for &p in pages {
            // SAFETY: each page is valid for 4 KiB of writes (the contract).
            unsafe { crate::sync::zero(p, PAGE_SIZE) };
        }
        // SAFETY: the user page is valid (contract); these two words are
        // written only here, before the area is shared.
        unsafe {
            let page = &mut *user_page;
            if page.aux_offset == 0 {
                page.aux_offset = page.data_offset + page.data_size;
            }
            page.aux_size = size;
        }
        // INVARIANT: the pages were checked above and are the caller's for
        // 'a; no transaction is open (nest 0) and the mapping holds the one
        // reference.
        Ok(AuxArea {
            user_page,
            pages,
            overwrite: config.overwrite,
            watermark,
            waker: config.wakeup,
            head: LocalU64::new(0),
            wakeup: LocalU64::new(0),
            nest: LocalU32::new(0),
            in_sampling: LocalU32::new(0),
            refcount: AtomicU32::new(1),
            mapped: AtomicBool::new(true),
            disable_requested: AtomicBool::new(false),
        })
    }

    /// Size of the area in bytes (`perf_aux_size`, in 64 bits).
    #[inline(always)]
    pub fn size(&self) -> u64 {
        (self.pages.len() as u64) * PAGE_SIZE as u64
    }

    /// The pages, one per 4 KiB, in buffer order (what `setup_aux` receives).
    pub fn pages(&self) -> &'a [*mut u8] {
        self.pages
    }

    /// Whether the area is in overwrite (snapshot) mode.
    pub fn is_overwrite(&self) -> bool {
        self.overwrite
    }

    /// The wakeup watermark in bytes (0 in overwrite mode).
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// The producer position (`rb->aux_head`).
    pub fn head(&self) -> u64 {
        self.head.load()
    }

    /// Whether a `snapshot_aux` is running on this area now (a sampler that
    /// interrupted it must not start another: `perf_prepare_sample_aux`'s `aux_in_sampling` check).
    #[inline(always)]
    pub fn in_sampling(&self) -> bool {
        self.in_sampling.load() != 0
    }

    /// Marks a `snapshot_aux` as running (`perf_pmu_snapshot_aux` steps 2
    /// and 4); the sample layer brackets the PMU call with it.
    #[inline(always)]
    pub fn set_in_sampling(&self, on: bool) {
        // Plain same-CPU word (WRITE_ONCE) with compiler fences around the
        // PMU call: an NMI on this CPU sees it set before any AUX byte is read.
        crate::sync::barrier();
        self.in_sampling.store(u32::from(on));
        crate::sync::barrier();
    }

    /// Takes a pending request to disable the AUX event (made when a
    /// writable area is full or a transaction ended TRUNCATED). Linux 6.1
    /// loses this request on CPU 0 (`perf_event_disable_inatomic` from
    /// `perf_aux_output_end`: the irq_work runs, `pending_disable` is -1); perfaux never does: a
    /// documented deviation.
    pub fn take_disable_request(&self) -> bool {
        // Relaxed: a flag handed from the PMI path to the event layer's
        // deferred work, which then acts on the event, not on this memory.
        self.disable_requested.swap(false, Ordering::Relaxed)
    }

    /// The mapping goes away (`perf_mmap_close` of the last AUX vma): no new
    /// transaction can begin, and the mapping's reference is dropped.
    /// Returns true when no transaction holds the area any more, so the PMU's
    /// private data can be freed (`free_aux`) and the pages released.
    pub fn unmap(&self) -> bool {
        // Relaxed: `begin` also takes a reference with inc-not-zero, which
        // is what keeps the area alive; this flag only refuses new ones.
        self.mapped.store(false, Ordering::Relaxed);
        self.put()
    }

    /// Whether the last reference is gone (unmapped, no transaction open):
    /// the PMU's private data may be freed and the pages released.
    pub fn is_released(&self) -> bool {
        // Acquire pairs with the droppers' AcqRel in `put`.
        self.refcount.load(Ordering::Acquire) == 0
    }

    /// Whether a transaction ([`AuxHandle`](super::AuxHandle)) is open on
    /// the area now (`aux_nest` not 0): a set-up path's check before the
    /// area goes away. Transactions run on the AUX event's CPU; from another
    /// CPU the answer is only as fresh as that CPU's last store.
    pub fn in_transaction(&self) -> bool {
        self.nest.load() != 0
    }

    /// Whether the area is still mapped.
    pub fn is_mapped(&self) -> bool {
        // Relaxed: see `unmap`.
        self.mapped.load(Ordering::Relaxed)
    }

    /// Takes a reference unless the count is 0 (`refcount_inc_not_zero`).
    pub(super) fn get(&self) -> bool {
        // Relaxed RMW: the count only orders the area's lifetime; the pages
        // themselves outlive it (Rust lifetimes), as `aux_refcount` ensures in C.
        let mut n = self.refcount.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                return false;
            }
            match self.refcount.compare_exchange_weak(
                n,
                n + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(seen) => n = seen,
            }
        }
    }

    /// Drops a reference; true if it was the last.
    pub(super) fn put(&self) -> bool {
        // AcqRel: the last dropper sees every transaction's effects before
        // the area is freed (pairs with the other droppers' Release).
        self.refcount.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// The user page's `aux_head` word.
    pub(super) fn aux_head_word(&self) -> &crate::sync::AtomicU64 {
        // SAFETY: within the user page, valid and aligned for 'a, accessed
        // only atomically while the area lives (the constructor's contract).
        unsafe { shared_u64(addr_of_mut!((*self.user_page).aux_head)) }
    }

    /// The user page's `aux_tail` word.
    pub(super) fn aux_tail_word(&self) -> &crate::sync::AtomicU64 {
        // SAFETY: as for `aux_head_word`.
        unsafe { shared_u64(addr_of_mut!((*self.user_page).aux_tail)) }
    }

    /// Wakes the AUX consumer (`perf_output_wakeup`).
    pub(super) fn wake(&self) {
        if let Some(w) = self.waker {
            w.wakeup();
        }
    }
}
