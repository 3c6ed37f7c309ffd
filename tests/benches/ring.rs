// SPDX-License-Identifier: MIT OR Apache-2.0
//! The write path of the data ring, side by side with peers, in one run.
//!
//! - `write/<size>/{perfaux,minimal,rtrb,bbqueue}`: one record of `size`
//!   bytes per iteration (reserve, copy, publish); the consumer gives the
//!   space back in bulk every 64 KiB for all of them, so its cost is
//!   amortized alike. `minimal` is the perf protocol's floor, written here
//!   ([`MinimalRing`]); `minimal-paged`, `minimal-paged-checked` and
//!   `kernel-steps` add the steps Linux's write path takes beyond it, one
//!   at a time ([`StepRing`]), so that one run prices each.
//! - `copy/<size>/{perfaux,memcpy_pages,memcpy_same_offset,memcpy_aligned}`:
//!   records of 4 KiB to 64 KiB through a handle that crosses 4 KiB chunks
//!   and the ring end of a 128 KiB ring, against a bare walk over 128 KiB
//!   of separate 4 KiB pages copying page by page as Linux's
//!   `__output_copy` does (`memcpy_pages`), and one plain memcpy of the
//!   same bytes into a 128 KiB area at the positions a ring would use
//!   (8-byte aligned, 40 bytes past a cache line) and at cache-line-aligned
//!   positions. `perfaux_one_chunk` is the handle over one 128 KiB chunk
//!   (Linux's vmalloc'd ring). `rep_movsb_pages{,_2k}` model the kernel's copy: the same
//!   page walk by `rep movsb` (Linux's `memcpy` on CPUs with fast short
//!   `rep movsb`), once per page piece or in perfaux's glibc pieces.
//!
//! - `sample/<aux size>-<contiguous|wrapped>/{perfaux,memcpy}`: a PMI-path
//!   sample (IP|TID|TIME|CPU|PERIOD + AUX) with 4, 16 and 64 KiB snapshots
//!   through the test PMU's `snapshot_aux`, against memcpy of the same AUX
//!   bytes from the AUX pages (`memcpy-same-source`), the same bytes into
//!   separate 4 KiB pages by a bare walk (`memcpy-pages`) and, as in
//!   earlier runs, one memcpy from a contiguous buffer (`memcpy`).
//!
//! - `pt/tracer/4096-{events,branches}`: the software PT tracer's packet
//!   throughput through ToPA, one `trace` call per event, for a program's
//!   mix of events and for conditional branches only;
//!   `pt/tracer/4096-{events,indirect}-batch`: the mix, and indirect
//!   branches only (a TIP each: the encoder and write path at their
//!   busiest), handed over in one `trace_all`.
//! - `pt/snapshot-<size>/{perfaux,memcpy-same-source,memcpy}`:
//!   `snapshot_aux` of 4, 16 and 64 KiB against memcpy of the same bytes
//!   from the same AUX pages, and (earlier runs' baseline) against one
//!   memcpy from another buffer at the same page offset.
//!
//! `scripts/bench-report` turns criterion's estimates into the ratio table of
//! BENCHMARKS.md.

use std::hint::black_box;
use std::mem::MaybeUninit;

use bbqueue::nicknames::Churrasco;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use perfaux::abi::{PerfEventAttr, sample_type as st};
use perfaux::aux::AuxConfig;
use perfaux::ring::{FixedEvent, RingConfig, SliceSink};
use perfaux::sample::{AuxSampling, NoIrqMask, SampleData, write_sample};
use perfaux_tests::mem::{AuxMemory, PageBlock, RingMemory};
use perfaux_tests::pmu::TestPmu;

const RING_BYTES: usize = 256 * 1024;
const DRAIN_EVERY: usize = 64 * 1024;
const SIZES: [usize; 5] = [16, 32, 64, 256, 4096];

static BB: Churrasco<RING_BYTES> = Churrasco::new();

fn write_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("write");
    for size in SIZES {
        let record: Vec<u8> = (0..size).map(|i| i as u8).collect();
        let per_drain = DRAIN_EVERY / size;
        group.throughput(Throughput::Bytes(size as u64));

        let mem = RingMemory::new(RING_BYTES / 4096, 0);
        let ring = mem.ring(RingConfig::default());
        let mut consumer = mem.consumer();
        let mut source = FixedEvent::default();
        let mut n = 0;
        group.bench_function(BenchmarkId::new(size.to_string(), "perfaux"), |b| {
            b.iter(|| {
                // One opaque input, the record, as the step rings get it
                // (`write(black_box(record))`): a second `black_box` on the
                // size alone would route it through the stack, a store and
                // a load on the reservation's path that the peers do not pay.
                let record = black_box(&record[..]);
                let mut h = ring.begin(record.len(), &mut source).expect("room");
                h.copy(record);
                h.end();
                n += 1;
                if n == per_drain {
                    n = 0;
                    consumer.refresh();
                    consumer.skip_to_head();
                    consumer.commit();
                }
            })
        });

        step_ring(
            &mut group,
            size,
            "minimal",
            &MinimalRing::new(RING_BYTES),
            &record,
        );
        // The kernel's steps, one at a time (`StepRing`).
        step_ring(
            &mut group,
            size,
            "minimal-paged",
            &StepRing::<true, false, false>::new(RING_BYTES),
            &record,
        );
        step_ring(
            &mut group,
            size,
            "minimal-paged-checked",
            &StepRing::<true, true, false>::new(RING_BYTES),
            &record,
        );
        step_ring(
            &mut group,
            size,
            "kernel-steps",
            &StepRing::<true, true, true>::new(RING_BYTES),
            &record,
        );

        let (mut prod, mut cons) = rtrb::RingBuffer::<u8>::new(RING_BYTES);
        let mut n = 0;
        group.bench_function(BenchmarkId::new(size.to_string(), "rtrb"), |b| {
            b.iter(|| {
                // The same one opaque input as every other ring's.
                let record = black_box(&record[..]);
                let mut chunk = prod.write_chunk_uninit(record.len()).expect("room");
                let (first, second) = chunk.as_mut_slices();
                let (a, rest) = record.split_at(first.len());
                first.copy_from_slice(as_uninit(a));
                second.copy_from_slice(as_uninit(rest));
                // SAFETY: every slot of the chunk was written just above.
                unsafe { chunk.commit_all() };
                n += 1;
                if n == per_drain {
                    n = 0;
                    let slots = cons.slots();
                    cons.read_chunk(slots).expect("filled").commit_all();
                }
            })
        });

        let prod = BB.stream_producer();
        let cons = BB.stream_consumer();
        let mut n = 0;
        group.bench_function(BenchmarkId::new(size.to_string(), "bbqueue"), |b| {
            b.iter(|| {
                let record = black_box(&record[..]);
                let mut grant = prod.grant_exact(record.len()).expect("room");
                grant.copy_from_slice(record);
                grant.commit(record.len());
                n += 1;
                if n == per_drain {
                    n = 0;
                    while let Ok(r) = cons.read() {
                        let len = r.len();
                        r.release(len);
                    }
                }
            })
        });
    }
    group.finish();
}

/// One `write/<size>/<name>` case over a [`StepRing`].
fn step_ring<const P: bool, const C: bool, const W: bool>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    size: usize,
    name: &str,
    ring: &StepRing<P, C, W>,
    record: &[u8],
) {
    let per_drain = DRAIN_EVERY / size;
    let mut n = 0;
    group.bench_function(BenchmarkId::new(size.to_string(), name), |b| {
        b.iter(|| {
            assert!(ring.write(black_box(record)), "room");
            n += 1;
            if n == per_drain {
                n = 0;
                ring.drain();
            }
        })
    });
}

/// The minimal perf-style ring, the protocol's floor: what
/// `perf_output_begin`/`end` cannot do without on one CPU with NMIs
/// (reserve by an unlocked compare-and-swap after the `data_tail` check,
/// the nest count, publish `data_head` with the missed-update re-check)
/// and nothing else: no LOST records, wakeups, pause, overwrite or
/// backward modes, sample counting or interruption hooks, over one
/// contiguous block instead of pages. It copies as perfaux does (small
/// records inline, the rest in pieces of at most 2 KiB), so that the two
/// differ in their protocol only.
type MinimalRing = StepRing<false, false, false>;

/// The minimal ring plus the steps Linux's `__perf_output_begin` and
/// `perf_output_put_handle` take that the floor leaves out, each switched
/// on by a parameter, so that one run prices every step:
/// - `PAGED`: the data are separate 4 KiB pages (`rb->data_pages`): the
///   record's page and address are looked up
///   (`handle->page = (offset >> PAGE_SHIFT) & (nr_pages - 1)`,
///   `handle->addr = rb->data_pages[handle->page] + ...`) and the copy
///   moves to the next page where one ends (`__output_copy`);
/// - `CHECKED`: `if (unlikely(rb->paused))` (a lost record and out),
///   `if (unlikely(have_lost = local_read(&rb->lost)))` (room for a
///   `PERF_RECORD_LOST`), `if (!rb->overwrite)` around the `data_tail`
///   check;
/// - `WAKEUP`: `handle->wakeup = local_read(&rb->wakeup)` at begin, the
///   watermark (`if (unlikely(head - local_read(&rb->wakeup) >
///   rb->watermark)) local_add(rb->watermark, &rb->wakeup)`) after the
///   reservation, and `if (handle->wakeup != local_read(&rb->wakeup))
///   perf_output_wakeup(handle)` at the end (counted here).
///
/// `StepRing<true, true, true>` is the kernel's forward write path, as
/// plain as it can be written; what perfaux costs beyond it is perfaux's
/// own.
struct StepRing<const PAGED: bool, const CHECKED: bool, const WAKEUP: bool> {
    data: PageBlock,
    /// `rb->data_pages` (PAGED): one block per page, owned here, and their
    /// addresses.
    _pages: Vec<PageBlock>,
    page_ptrs: Vec<*mut u8>,
    mask: u64,
    /// `rb->head`, written only by this CPU's (nested) writers.
    head: std::cell::UnsafeCell<u64>,
    /// `rb->nest`.
    nest: std::cell::Cell<u32>,
    /// `rb->paused`, `rb->lost`, `rb->overwrite` (CHECKED).
    paused: std::cell::Cell<bool>,
    lost: std::cell::Cell<u64>,
    overwrite: bool,
    /// `rb->wakeup`, `rb->watermark` (WAKEUP), and the wakeups raised.
    wakeup: std::cell::Cell<u64>,
    watermark: u64,
    wakeups: std::cell::Cell<u64>,
    /// The user page's words.
    data_head: std::sync::atomic::AtomicU64,
    data_tail: std::sync::atomic::AtomicU64,
}

impl<const PAGED: bool, const CHECKED: bool, const WAKEUP: bool> StepRing<PAGED, CHECKED, WAKEUP> {
    fn new(size: usize) -> Self {
        let pages: Vec<PageBlock> = if PAGED {
            (0..size / 4096).map(|_| PageBlock::new(4096)).collect()
        } else {
            Vec::new()
        };
        StepRing {
            data: PageBlock::new(if PAGED { 4096 } else { size }),
            page_ptrs: pages.iter().map(PageBlock::ptr).collect(),
            _pages: pages,
            mask: size as u64 - 1,
            head: std::cell::UnsafeCell::new(0),
            nest: std::cell::Cell::new(0),
            paused: std::cell::Cell::new(false),
            lost: std::cell::Cell::new(0),
            overwrite: false,
            wakeup: std::cell::Cell::new(0),
            // perfaux's default, as the bench's perfaux ring has it.
            watermark: size as u64 / 2,
            wakeups: std::cell::Cell::new(0),
            data_head: std::sync::atomic::AtomicU64::new(0),
            data_tail: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// `local_cmpxchg` on `head`: x86 `cmpxchg` without `lock`.
    #[inline(always)]
    fn cmpxchg_head(&self, current: u64, new: u64) -> bool {
        let seen: u64;
        // SAFETY: `head` is valid and aligned for the ring's life; only
        // this thread writes it; the instruction is one, so an interrupt
        // sees it done or not; without `nomem` it is a compiler barrier.
        unsafe {
            std::arch::asm!(
                "cmpxchg qword ptr [{p}], {new}",
                p = in(reg) self.head.get(),
                new = in(reg) new,
                inout("rax") current => seen,
                options(nostack),
            );
        }
        seen == current
    }

    #[inline(always)]
    fn write(&self, record: &[u8]) -> bool {
        use std::sync::atomic::{Ordering, compiler_fence};
        let mut size = record.len() as u64;
        if CHECKED {
            if self.paused.get() {
                self.lost.set(self.lost.get() + 1);
                return false;
            }
            if self.lost.get() != 0 {
                // Room for the PERF_RECORD_LOST (header, id, count).
                size += 24;
            }
        }
        self.nest.set(self.nest.get() + 1);
        let handle_wakeup = if WAKEUP { self.wakeup.get() } else { 0 };
        compiler_fence(Ordering::SeqCst);
        let offset = loop {
            let tail = self.data_tail.load(Ordering::Acquire);
            // SAFETY: read by this thread only; nested writers finish first.
            let offset = unsafe { *self.head.get() };
            if (!CHECKED || !self.overwrite)
                && tail.wrapping_sub(offset.wrapping_add(1)) & self.mask < size
            {
                if CHECKED {
                    self.lost.set(self.lost.get() + 1);
                }
                self.end(handle_wakeup);
                return false;
            }
            if self.cmpxchg_head(offset, offset + size) {
                break offset;
            }
        };
        if WAKEUP && (offset + size).wrapping_sub(self.wakeup.get()) > self.watermark {
            self.wakeup.set(self.wakeup.get() + self.watermark);
        }
        if PAGED {
            let nr = self.page_ptrs.len();
            let mut at = offset;
            let mut rest = record;
            while !rest.is_empty() {
                let page = (at >> 12) as usize & (nr - 1);
                let in_page = (at & 4095) as usize;
                let n = rest.len().min(4096 - in_page);
                // SAFETY: `page < nr` (masked; the kernel indexes
                // `rb->data_pages` unchecked too), and `in_page + n` bytes
                // lie in that page; the record is not ring memory.
                unsafe {
                    let dst = self.page_ptrs.get_unchecked(page).add(in_page);
                    copy_like_perfaux(dst, rest.get_unchecked(..n));
                }
                rest = &rest[n..];
                at += n as u64;
            }
        } else {
            let at = (offset & self.mask) as usize;
            let first = record.len().min(self.mask as usize + 1 - at);
            // SAFETY: `at + first` and `record.len() - first` bytes lie in the
            // block; the record is not ring memory.
            unsafe {
                copy_like_perfaux(self.data.ptr().add(at), &record[..first]);
                copy_like_perfaux(self.data.ptr(), &record[first..]);
            }
        }
        self.end(handle_wakeup);
        true
    }

    #[inline(always)]
    fn end(&self, handle_wakeup: u64) {
        use std::sync::atomic::{Ordering, compiler_fence};
        let nest = self.nest.get();
        if nest > 1 {
            self.nest.set(nest - 1);
            return;
        }
        loop {
            compiler_fence(Ordering::SeqCst);
            // SAFETY: as in `write`.
            let head = unsafe { *self.head.get() };
            self.data_head.store(head, Ordering::Release);
            compiler_fence(Ordering::SeqCst);
            self.nest.set(0);
            compiler_fence(Ordering::SeqCst);
            // SAFETY: as in `write`.
            if head == unsafe { *self.head.get() } {
                break;
            }
            self.nest.set(1);
        }
        if WAKEUP && handle_wakeup != self.wakeup.get() {
            self.wakeups.set(self.wakeups.get() + 1);
        }
    }

    /// The consumer frees everything published (D).
    fn drain(&self) {
        use std::sync::atomic::Ordering;
        let head = self.data_head.load(Ordering::Acquire);
        self.data_tail.store(head, Ordering::Release);
    }
}

/// perfaux's payload copy (`sync::copy_to`, private to the crate), for the
/// minimal ring: records of 8 to 64 bytes inline, larger ones in pieces of
/// at most 2 KiB cut where the destination starts a cache line, as glibc
/// builds of perfaux copy (the bench writes no record under 16 bytes, so the shorter
/// inline moves are left out). A copy, not a call through `SliceSink`, so
/// that the floor pays for no adapter.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of writes, apart from `src`.
#[inline(always)]
unsafe fn copy_like_perfaux(dst: *mut u8, src: &[u8]) {
    let len = src.len();
    let s = src.as_ptr();
    // SAFETY: every move stays in `src` and `dst[..len]`, as in perfaux.
    unsafe {
        if (16..=64).contains(&len) {
            let first = s.cast::<u128>().read_unaligned();
            let last = s.add(len - 16).cast::<u128>().read_unaligned();
            if len > 32 {
                let second = s.add(16).cast::<u128>().read_unaligned();
                let before_last = s.add(len - 32).cast::<u128>().read_unaligned();
                dst.add(16).cast::<u128>().write_unaligned(second);
                dst.add(len - 32)
                    .cast::<u128>()
                    .write_unaligned(before_last);
            }
            dst.cast::<u128>().write_unaligned(first);
            dst.add(len - 16).cast::<u128>().write_unaligned(last);
        } else if (8..16).contains(&len) {
            let first = s.cast::<u64>().read_unaligned();
            let last = s.add(len - 8).cast::<u64>().read_unaligned();
            dst.cast::<u64>().write_unaligned(first);
            dst.add(len - 8).cast::<u64>().write_unaligned(last);
        } else {
            cut_at_lines(dst, len, |at, n| {
                std::ptr::copy_nonoverlapping(s.add(at), dst.add(at), n)
            });
        }
    }
}

/// Cuts a copy of `len` bytes to `dst` as glibc builds of perfaux cut it
/// (`sync::memcpy_pieces`, private to the crate): pieces of at most 2 KiB,
/// every cut where the destination starts a cache line; `f(offset, length)`
/// for each, in order.
#[inline(always)]
fn cut_at_lines(dst: *mut u8, len: usize, mut f: impl FnMut(usize, usize)) {
    let mut done = 0;
    let mut n = if len <= 2048 {
        len
    } else {
        2048 - dst as usize % 64
    };
    while done < len {
        n = n.min(len - done);
        f(done, n);
        done += n;
        n = 2048;
    }
}

/// Copies `bytes` to position `at` of the 4 KiB pages `pages` (a ring of
/// them: the position wraps), page by page as Linux's `__output_copy`
/// does, each piece by `copy(dst, piece)`, which must write `piece` to
/// `dst` and nothing else; returns the position after them.
///
/// # Safety
/// Every page must be valid for writes of 4096 bytes and apart from
/// `bytes`.
#[inline(always)]
unsafe fn walk_pages(
    pages: &[*mut u8],
    mut at: usize,
    mut bytes: &[u8],
    mut copy: impl FnMut(*mut u8, &[u8]),
) -> usize {
    while !bytes.is_empty() {
        let in_page = at % 4096;
        let n = bytes.len().min(4096 - in_page);
        let page = pages[(at / 4096) % pages.len()];
        // `in_page + n <= 4096` bytes of one of the pages, apart from
        // `bytes` (the contract).
        copy(page.wrapping_add(in_page), &bytes[..n]);
        bytes = &bytes[n..];
        at += n;
    }
    at
}

/// [`walk_pages`] copying each piece as perfaux copies it.
///
/// # Safety
/// As for [`walk_pages`].
#[inline(always)]
unsafe fn copy_page_by_page(pages: &[*mut u8], at: usize, bytes: &[u8]) -> usize {
    // SAFETY: `walk_pages` hands out pieces of the pages valid for
    // `piece.len()` bytes and apart from it (this function's contract).
    unsafe { walk_pages(pages, at, bytes, |dst, piece| copy_like_perfaux(dst, piece)) }
}

/// Linux's `memcpy` on a CPU with fast short `rep movsb`
/// (`arch/x86/lib/memcpy_64.S`: `rep movsb` and nothing else).
///
/// # Safety
/// `dst` must be valid for writes of `src.len()` bytes, apart from `src`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn rep_movsb(dst: *mut u8, src: &[u8]) {
    // SAFETY: `rep movsb` copies `rcx = src.len()` bytes from `rsi` to
    // `rdi` forwards (the direction flag is clear, as the ABI requires
    // between calls): `dst` is valid for them, apart from `src` (the
    // contract).
    unsafe {
        std::arch::asm!(
            "rep movsb",
            inout("rdi") dst => _,
            inout("rsi") src.as_ptr() => _,
            inout("rcx") src.len() => _,
            options(nostack, preserves_flags),
        );
    }
}

fn as_uninit(bytes: &[u8]) -> &[MaybeUninit<u8>] {
    // SAFETY: MaybeUninit<u8> has the layout of u8, and initialized bytes
    // are valid MaybeUninit values; the slice is only read.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast(), bytes.len()) }
}

fn copy_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("copy");
    for size in [4096usize, 16384, 65528] {
        // The record's bytes lie half a page from where they go modulo
        // 4 KiB (its records start 40 bytes into a page, so its source at
        // 2088). On this machine a copy slows down where its destination
        // lies less than about 600 bytes past its source modulo 4 KiB (the
        // loads alias the copy's own stores): a scan of all 4096 distances
        // measured a 4 KiB memcpy at 600 ns within 32 bytes, 110 ns at 256
        // and 60 ns at 600, against 43 ns beyond, and perfaux's pieces and
        // memcpy's one call suffer differently. A `Vec` put the record
        // wherever the allocator did, and that decided the verdict (memcpy
        // of 4 KiB measured 52-88 ns across runs).
        let source_block = PageBlock::new(size + 4096);
        // SAFETY: `2088 + size` bytes lie in the block, which outlives the
        // slice and is written only through it.
        let record = unsafe { std::slice::from_raw_parts_mut(source_block.ptr().add(2088), size) };
        for (i, b) in record.iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        let record = &*record;
        group.throughput(Throughput::Bytes(size as u64));

        // 128 KiB in 4 KiB chunks, overwrite mode: no consumer needed. A
        // 40-byte record first moves the records off cache-line alignment,
        // where perf records really start.
        let mem = RingMemory::new(32, 0);
        let ring = mem.ring(RingConfig {
            overwrite: true,
            ..RingConfig::default()
        });
        let mut source = FixedEvent::default();
        let mut first = ring.begin(40, &mut source).expect("room");
        first.skip(40);
        first.end();
        group.bench_function(BenchmarkId::new(size.to_string(), "perfaux"), |b| {
            b.iter(|| {
                let mut h = ring
                    .begin(size, &mut source)
                    .expect("overwrite mode never refuses");
                h.copy(black_box(record));
                h.end();
            })
        });

        // The same handle over one 128 KiB chunk (order 5), as Linux's ring
        // is where it is vmalloc'd (`CONFIG_PERF_USE_VMALLOC`: one chunk,
        // `page_order` set): perfaux's protocol over memory laid out as
        // memcpy's, with no page walk in between.
        let one_chunk = RingMemory::new(1, 5);
        let ring_one = one_chunk.ring(RingConfig {
            overwrite: true,
            ..RingConfig::default()
        });
        let mut first = ring_one.begin(40, &mut source).expect("room");
        first.skip(40);
        first.end();
        group.bench_function(
            BenchmarkId::new(size.to_string(), "perfaux_one_chunk"),
            |b| {
                b.iter(|| {
                    let mut h = ring_one
                        .begin(size, &mut source)
                        .expect("overwrite mode never refuses");
                    h.copy(black_box(record));
                    h.end();
                })
            },
        );

        // The same bytes into 128 KiB of separate 4 KiB pages at the same
        // positions, by a bare walk over the pages copying as perfaux does
        // (`copy_like_perfaux`): the shape of Linux's `__output_copy`, which
        // copies page by page, with none of the ring's protocol. Between
        // this and one memcpy lies what the pages cost; between perfaux and
        // this, what perfaux's handle costs.
        let pages = RingMemory::new(32, 0);
        let page_ptrs = pages.chunks();
        let mut pos = 40usize;
        group.bench_function(BenchmarkId::new(size.to_string(), "memcpy_pages"), |b| {
            b.iter(|| {
                // SAFETY: the pages are the ring memory's, alive for the
                // bench; the record is another allocation.
                unsafe { copy_page_by_page(page_ptrs, pos, black_box(record)) };
                black_box(page_ptrs.as_ptr());
                pos = (pos + size) % (128 * 1024);
            })
        });

        // The kernel's copy on this CPU: the same page walk, each page piece
        // copied by `rep movsb`, which is all Linux's `memcpy` does on CPUs
        // with fast short `rep movsb` (`arch/x86/lib/memcpy_64.S`), once per
        // piece (`rep_movsb_pages`, as `__output_copy` calls it) or cut as
        // perfaux cuts copies for glibc (`rep_movsb_pages_2k`: 2 KiB pieces
        // cut at the destination's cache lines). What decides perfaux's
        // piece size in a kernel build (`sync::MEMCPY_PIECE`).
        #[cfg(target_arch = "x86_64")]
        for (name, cut) in [("rep_movsb_pages", false), ("rep_movsb_pages_2k", true)] {
            let mut pos = 40usize;
            group.bench_function(BenchmarkId::new(size.to_string(), name), |b| {
                b.iter(|| {
                    // SAFETY: as for `memcpy_pages`; every piece `rep_movsb`
                    // gets lies in the one `walk_pages` handed out.
                    unsafe {
                        walk_pages(page_ptrs, pos, black_box(record), |dst, piece| {
                            if cut {
                                cut_at_lines(dst, piece.len(), |at, n| {
                                    rep_movsb(dst.add(at), &piece[at..at + n])
                                });
                            } else {
                                rep_movsb(dst, piece);
                            }
                        })
                    };
                    black_box(page_ptrs.as_ptr());
                    pos = (pos + size) % (128 * 1024);
                })
            });
        }

        // The same bytes, memcpy'd into the same 128 KiB footprint at the
        // positions a ring would use (so both run out of the same cache
        // level), starting 40 bytes past a cache line or on one.
        let dst = PageBlock::new(128 * 1024 + 64 * 1024);
        for (name, start) in [("memcpy_same_offset", 40usize), ("memcpy_aligned", 0)] {
            let mut pos = start;
            group.bench_function(BenchmarkId::new(size.to_string(), name), |b| {
                b.iter(|| {
                    // SAFETY: `pos < 128 KiB` and `size <= 64 KiB`: inside the
                    // block; source and destination are distinct allocations.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            black_box(record.as_ptr()),
                            dst.ptr().add(pos),
                            size,
                        )
                    };
                    black_box(dst.ptr());
                    pos = (pos + size) % (128 * 1024);
                    if start == 0 {
                        pos &= !63;
                    }
                })
            });
        }
    }
    group.finish();
}

/// The PMI path of a sample with AUX data: `write_sample` (prepare, begin,
/// IP|TID|TIME|CPU|PERIOD, the AUX block through the test PMU's
/// `snapshot_aux` and `copy_aux`, end) against memcpy of the same AUX bytes
/// from the AUX pages to the same ring positions (and, as in earlier runs,
/// one memcpy from a contiguous buffer).
fn sample_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("sample");
    let fixed = st::IP | st::TID | st::TIME | st::CPU | st::PERIOD | st::AUX;
    // 65472 is the largest AUX block next to these fields (`perf_prepare_sample`'s clamp to a
    // 65528-byte record).
    for size in [4096u32, 16384, 65472] {
        for wrapped in [false, true] {
            let name = if wrapped { "wrapped" } else { "contiguous" };
            group.throughput(Throughput::Bytes(u64::from(size)));
            let mem = RingMemory::new(64, 0); // 256 KiB, overwrite mode
            let ring = mem.ring(RingConfig {
                overwrite: true,
                ..RingConfig::default()
            });
            let aux = AuxMemory::new(32, 0); // 128 KiB of separate pages
            let area = mem.aux_area(
                &aux,
                AuxConfig {
                    overwrite: true,
                    ..AuxConfig::default()
                },
            );
            let pmu = TestPmu::new(&area);
            // The newest bytes end 1000 bytes after the area's end (wrapped) or
            // well inside it (contiguous).
            let end = if wrapped {
                128 * 1024 + 1000
            } else {
                100 * 1024
            };
            pmu.position.set(end);
            let sampling = AuxSampling {
                area: &area,
                pmu: &pmu,
                active_here: true,
            };
            let mut attr = PerfEventAttr::new(136);
            attr.sample_type = fixed;
            attr.aux_sample_size = size;
            let data = SampleData {
                ip: 0x401000,
                pid: 1,
                tid: 2,
                time: 3,
                cpu: 1,
                period: 10_000,
                ..SampleData::default()
            };
            let mut event = FixedEvent::default();
            group.bench_function(BenchmarkId::new(format!("{size}-{name}"), "perfaux"), |b| {
                b.iter(|| {
                    let layout = write_sample(
                        &ring,
                        &mut event,
                        &attr,
                        black_box(&data),
                        Some(&sampling),
                        &NoIrqMask,
                    )
                    .expect("overwrite mode never refuses");
                    black_box(layout);
                })
            });
            let dst = PageBlock::new(256 * 1024 + 64 * 1024);
            // memcpy of the very AUX bytes the sample copies, from where
            // they are (the AUX pages, one memcpy each: they are separate
            // allocations, as order-0 pages are) to the same ring positions
            // in one block: what the AUX buffer's layout costs is in both,
            // what the ring's pages cost is perfaux's.
            let mut pieces = PieceRecorder::default();
            // SAFETY: the AUX pages live for the bench; nothing writes them.
            let n = unsafe {
                perfaux::aux::copy_aux_pages(aux.pages(), &mut pieces, end - u64::from(size), end)
            };
            assert_eq!(n, Ok(u64::from(size)));
            let mut pos = 40usize;
            group.bench_function(
                BenchmarkId::new(format!("{size}-{name}"), "memcpy-same-source"),
                |b| {
                    b.iter(|| {
                        let mut at = pos;
                        for &(from, len) in black_box(&pieces.0) {
                            // SAFETY: `from..from + len` is AUX memory (alive,
                            // unwritten); `at + len` stays inside the block
                            // (`pos < 256 KiB`, the pieces add up to `size`
                            // < 64 KiB); distinct allocations.
                            unsafe { std::ptr::copy_nonoverlapping(from, dst.ptr().add(at), len) };
                            at += len;
                        }
                        black_box(dst.ptr());
                        pos = (pos + size as usize + 56) % (256 * 1024);
                    })
                },
            );
            // The same pieces into 256 KiB of separate 4 KiB pages at the
            // same positions, by a bare walk that also cuts them at the
            // pages' ends, copying as perfaux does (`copy_like_perfaux`):
            // the copy's floor once both sides are pages, as in the kernel
            // (`perf_output_copy_aux` into `__output_copy`), with none of
            // the sample's work.
            let pages = RingMemory::new(64, 0);
            let page_ptrs = pages.chunks();
            let mut pos = 40usize;
            group.bench_function(
                BenchmarkId::new(format!("{size}-{name}"), "memcpy-pages"),
                |b| {
                    b.iter(|| {
                        let mut at = pos;
                        for &(from, len) in black_box(&pieces.0) {
                            // SAFETY: `from..from + len` is AUX memory (alive,
                            // unwritten), a separate allocation; the pages are
                            // the ring memory's, alive for the bench.
                            at = unsafe {
                                copy_page_by_page(
                                    page_ptrs,
                                    at,
                                    std::slice::from_raw_parts(from, len),
                                )
                            };
                        }
                        black_box(page_ptrs.as_ptr());
                        pos = (pos + size as usize + 56) % (256 * 1024);
                    })
                },
            );
            // The earlier runs' baseline, kept for comparison: one memcpy
            // from a contiguous buffer.
            let src: Vec<u8> = (0..size).map(|i| i as u8).collect();
            let mut pos = 40usize;
            group.bench_function(BenchmarkId::new(format!("{size}-{name}"), "memcpy"), |b| {
                b.iter(|| {
                    // SAFETY: `pos < 256 KiB` and `size < 64 KiB`: inside the
                    // block; distinct allocations.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            black_box(src.as_ptr()),
                            dst.ptr().add(pos),
                            size as usize,
                        )
                    };
                    black_box(dst.ptr());
                    pos = (pos + size as usize + 56) % (256 * 1024);
                })
            });
        }
    }
    group.finish();
}

/// The software PT tracer: packet bytes per second through ToPA into a
/// 64 KiB AUX area; and `snapshot_aux` (stop, position, copy_aux, restart)
/// of 4, 16 and 64 KiB against a memcpy of the same bytes.
fn pt_path(c: &mut Criterion) {
    use perfaux::pt::buffer::PtBuffer;
    use perfaux::pt::hw::TraceHw;
    use perfaux::pt::pmu::PtPmu;
    use perfaux::pt::topa::{IdentityMap, TopaTable};
    use perfaux::soft_pt::stream::TraceEvent;
    use perfaux::soft_pt::tracer::SoftTracer;

    let mut group = c.benchmark_group("pt");
    let mem = RingMemory::new(4, 0);
    let ring = mem.ring(RingConfig {
        overwrite: true,
        ..RingConfig::default()
    });
    let aux = AuxMemory::new(16, 2); // 64 KiB in four 16 KiB regions
    let area = mem.aux_area(
        &aux,
        AuxConfig {
            overwrite: true,
            ..AuxConfig::default()
        },
    );
    let mut tables = vec![TopaTable::new(); 1];
    // SAFETY: the bench memory outlives the buffer; only the tracer writes it.
    let buffer =
        unsafe { PtBuffer::new(&mut tables, aux.pages(), true, &IdentityMap) }.expect("tables");
    let tracer = SoftTracer::new(&IdentityMap, 4096);
    let pt = PtPmu::new(
        &tracer,
        &IdentityMap,
        &buffer,
        &area,
        &ring,
        FixedEvent::default(),
    )
    .expect("pmu");
    pt.add(1, 0, false, perfaux::pmu::ef::START).expect("add");
    tracer.trace(TraceEvent::Enable(0x40_0000));

    // A program's worth of events: mostly conditional branches, some
    // indirect branches and calls, a few timestamps.
    let mut state = 0x1234_5678u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let events: Vec<TraceEvent> = (0..4096)
        .map(|_| match next() % 16 {
            0..=11 => TraceEvent::Conditional {
                taken: next() % 2 == 0,
                next: 0x40_0000,
            },
            12..=14 => TraceEvent::Indirect {
                target: 0x40_0000 + (next() % 0x10000) * 16,
            },
            _ => TraceEvent::Time(next()),
        })
        .collect();
    let before = tracer.written();
    for &e in &events {
        tracer.trace(e);
    }
    let per_batch = tracer.written() - before;
    // A loop's worth: conditional branches only, whose TNT bits make a
    // packet every 47 events (the floor of the per-event cost).
    let branches: Vec<TraceEvent> = (0..4096)
        .map(|i| TraceEvent::Conditional {
            taken: i % 3 == 0,
            next: 0x40_0000,
        })
        .collect();
    let before = tracer.written();
    for &e in &branches {
        tracer.trace(e);
    }
    group.throughput(Throughput::Bytes(tracer.written() - before));
    group.bench_function("tracer/4096-branches", |b| {
        b.iter(|| {
            for &e in &branches {
                tracer.trace(black_box(e));
            }
        })
    });
    group.throughput(Throughput::Bytes(per_batch));
    group.bench_function("tracer/4096-events", |b| {
        b.iter(|| {
            for &e in &events {
                tracer.trace(black_box(e));
            }
        })
    });
    // The same events handed over at once (`trace_all`), as a tracer fed
    // from a recorded or simulated instruction stream takes them.
    // (The same packets as one by one, but for where a PSB+ falls; the
    // tracer's tests check the bytes.)
    let before = tracer.written();
    tracer.trace_all(&events);
    group.throughput(Throughput::Bytes(tracer.written() - before));
    group.bench_function("tracer/4096-events-batch", |b| {
        b.iter(|| tracer.trace_all(black_box(&events)))
    });
    let indirect: Vec<TraceEvent> = (0..4096)
        .map(|_| TraceEvent::Indirect {
            target: 0x40_0000 + (next() % 0x10000) * 16,
        })
        .collect();
    let before = tracer.written();
    tracer.trace_all(&indirect);
    group.throughput(Throughput::Bytes(tracer.written() - before));
    group.bench_function("tracer/4096-indirect-batch", |b| {
        b.iter(|| tracer.trace_all(black_box(&indirect)))
    });

    // Where the trace ends decides where the snapshot's pieces lie in the
    // AUX pages and so, through the source's distance to the destination
    // modulo 4 KiB, what their memcpy costs (both perfaux's and the
    // baselines'). After the tracer series it would be wherever criterion's
    // iteration counts left it, different in every run. Conditional
    // branches (a TNT packet every few of them) move it to the same place
    // in every run: 1000 to 1063 bytes into a 16 KiB output region.
    let mut laps = 0;
    while !(1000..1064).contains(&((tracer.output().1 >> 32) % 16384)) {
        laps += 1;
        assert!(laps < 1 << 20, "the trace position never reached its mark");
        tracer.trace(TraceEvent::Conditional {
            taken: laps % 3 == 0,
            next: 0x40_0000,
        });
    }

    for size in [4096u64, 16384, 65536] {
        group.throughput(Throughput::Bytes(size));
        // The snapshot goes into a page-aligned buffer through perfaux's
        // SliceSink, which copies as a ring's output handle does.
        let block = PageBlock::new(size as usize);
        {
            // SAFETY: the block is `size` bytes, zeroed, used only through
            // this slice while it lives.
            let buf = unsafe { std::slice::from_raw_parts_mut(block.ptr(), size as usize) };
            let mut sink = SliceSink::new(buf);
            group.bench_function(
                BenchmarkId::new(format!("snapshot-{size}"), "perfaux"),
                |b| {
                    b.iter(|| {
                        sink.clear();
                        let n = pt.snapshot_aux(&mut sink, black_box(size));
                        assert_eq!(n, Ok(size));
                        black_box(sink.len());
                    })
                },
            );
        }
        // memcpy of the very bytes the snapshot copies, from where they are
        // (the AUX pages: one memcpy per run of pages that follow each other
        // in memory, 16 KiB blocks here) into the same buffer. On this
        // machine a memcpy's speed depends on where its source is, not only
        // on its offset in a page (a 16 KiB copy from offset 2758 took 162
        // ns from one block and 217 ns from another), so only the same
        // source prices the driver rather than the memory layout.
        let mut pieces = PieceRecorder::default();
        assert_eq!(pt.snapshot_aux(&mut pieces, size), Ok(size));
        if std::env::var_os("PERFAUX_BENCH_SHOW").is_some() {
            eprintln!(
                "snapshot-{size}: pieces (page offset, length) {:?}",
                pieces
                    .0
                    .iter()
                    .map(|&(p, n)| (p as usize % 4096, n))
                    .collect::<Vec<_>>()
            );
        }
        let dst = block.ptr();
        group.bench_function(
            BenchmarkId::new(format!("snapshot-{size}"), "memcpy-same-source"),
            |b| {
                b.iter(|| {
                    let mut at = 0;
                    for &(from, len) in black_box(&pieces.0) {
                        // SAFETY: `from..from + len` is AUX memory the
                        // snapshot read (alive for the bench, the tracer
                        // idle); `dst` is the sink's block of `size` bytes
                        // (the sink is gone) and the pieces add up to it.
                        unsafe { std::ptr::copy_nonoverlapping(from, dst.add(at), len) };
                        at += len;
                    }
                    black_box(dst);
                })
            },
        );
        // One memcpy of as many bytes into the same buffer, from another
        // source at the snapshot's offset in its page (the baseline of
        // earlier runs, kept for comparison): the trace ends anywhere in a
        // page (its position now), and the snapshot starts `size` (a number
        // of pages) before.
        let start = (tracer.output().1 >> 32) as usize % 4096;
        let src = PageBlock::new(size as usize + 4096);
        let dst = block.ptr();
        group.bench_function(
            BenchmarkId::new(format!("snapshot-{size}"), "memcpy"),
            |b| {
                b.iter(|| {
                    // SAFETY: `start + size` bytes lie in `src`; `dst` is the
                    // sink's block of `size` bytes (the sink is gone).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            black_box(src.ptr().add(start)),
                            dst,
                            size as usize,
                        )
                    };
                    black_box(dst);
                })
            },
        );
    }
    group.finish();
}

/// An output sink that records where each piece it is given lies (for a
/// baseline that copies the same bytes from the same places).
#[derive(Default)]
struct PieceRecorder(Vec<(*const u8, usize)>);

impl perfaux::ring::OutputSink for PieceRecorder {
    fn copy(&mut self, bytes: &[u8]) -> usize {
        self.0.push((bytes.as_ptr(), bytes.len()));
        0
    }
}

criterion_group!(benches, write_path, copy_path, sample_path, pt_path);
criterion_main!(benches);
