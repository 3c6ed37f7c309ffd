// SPDX-License-Identifier: MIT OR Apache-2.0
//! The one place that names atomics and shared-memory accesses.
//!
//! Everything the ring (and later the AUX area) shares goes through here:
//!
//! - **Local** words ([`LocalU64`], [`LocalU32`]): state only the contexts of
//!   one CPU touch (task, IRQ, NMI nested on each other), the kernel's
//!   `local_t` and its `READ_ONCE`/`WRITE_ONCE` words. They need to be atomic
//!   against an interrupt on the same CPU, not against other CPUs. On x86-64
//!   the read-modify-writes are single instructions *without* the `lock`
//!   prefix, exactly as the kernel's `local_cmpxchg`/`local_add_return`
//!   (an unlocked `cmpxchg` costs ~3 ns where a locked one costs ~9 ns).
//!   Elsewhere (and under Miri and loom) they are relaxed atomics.
//! - **Shared** words of the user page ([`shared_u64`]): `data_head`,
//!   `data_tail` and friends, which another CPU reads or writes; their
//!   ordering is spelled out at every use, with the pairing of ring_buffer.c's A/B/C/D.
//! - **Payload** bytes ([`copy_to`], [`copy_from`], [`zero`]): record bytes
//!   in the caller's pages, published by the `data_head` release store.
//!
//! Under `cfg(loom)` the atomics are loom's, so the cross-CPU protocol can
//! be model-checked.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, Ordering, fence,
};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, Ordering, fence,
};

pub(crate) use core::sync::atomic::compiler_fence;

/// Whether the unlocked x86-64 read-modify-write instructions are used.
const UNLOCKED_RMW: bool = cfg!(all(target_arch = "x86_64", not(loom), not(miri)));

/// A 64-bit word only the contexts of one CPU modify (Linux `local_t`).
///
/// Loads and stores are plain (relaxed) accesses; the read-modify-writes are
/// atomic against interrupts and NMIs on the same CPU. Other CPUs may read
/// the value (for statistics) but must not modify it.
#[derive(Debug)]
pub struct LocalU64(AtomicU64);

impl LocalU64 {
    /// A new word holding `v`.
    pub fn new(v: u64) -> Self {
        LocalU64(AtomicU64::new(v))
    }

    /// `local_read`.
    #[inline(always)]
    pub fn load(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// `local_set`.
    #[inline(always)]
    pub fn store(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    /// `local_cmpxchg`: replaces `current` by `new`; returns the value seen.
    #[inline(always)]
    pub fn compare_exchange(&self, current: u64, new: u64) -> Result<u64, u64> {
        if UNLOCKED_RMW {
            #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
            {
                let seen: u64;
                // SAFETY: `as_ptr` is valid and 8-aligned for the life of
                // `self`. `cmpxchg` without `lock` is one instruction, so an
                // interrupt on this CPU sees it entirely done or not at all;
                // other CPUs never write this word (the type's contract).
                // Without `nomem`/`readonly` the asm is also a compiler
                // barrier (the compiler assumes it may touch any memory), as
                // the kernel's `local_cmpxchg` ("memory" clobber); the
                // Relaxed fallback below is not, so callers that need the
                // barrier (the ring's reservation) add `barrier()`.
                unsafe {
                    core::arch::asm!(
                        "cmpxchg qword ptr [{p}], {new}",
                        p = in(reg) self.0.as_ptr(),
                        new = in(reg) new,
                        inout("rax") current => seen,
                        options(nostack),
                    );
                }
                return if seen == current { Ok(seen) } else { Err(seen) };
            }
        }
        self.0
            .compare_exchange(current, new, Ordering::Relaxed, Ordering::Relaxed)
    }

    /// `local_add_return` minus the add: adds `v`, returns the old value.
    #[inline(always)]
    pub fn fetch_add(&self, v: u64) -> u64 {
        if UNLOCKED_RMW {
            #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
            {
                let mut old = v;
                // SAFETY: as in `compare_exchange`: one unlocked instruction
                // on a valid, aligned word no other CPU writes.
                unsafe {
                    core::arch::asm!(
                        "xadd qword ptr [{p}], {v}",
                        p = in(reg) self.0.as_ptr(),
                        v = inout(reg) old,
                        options(nostack),
                    );
                }
                return old;
            }
        }
        self.0.fetch_add(v, Ordering::Relaxed)
    }

    /// `local_xchg` (on x86 an implicitly locked `xchg`, as in the kernel).
    #[inline(always)]
    pub fn swap(&self, v: u64) -> u64 {
        self.0.swap(v, Ordering::Relaxed)
    }
}

/// A 32-bit word only the contexts of one CPU access, with `READ_ONCE` /
/// `WRITE_ONCE` semantics (the ring's `nest`).
#[derive(Debug)]
pub struct LocalU32(AtomicU32);

impl LocalU32 {
    /// A new word holding `v`.
    pub fn new(v: u32) -> Self {
        LocalU32(AtomicU32::new(v))
    }

    /// `READ_ONCE`.
    #[inline(always)]
    pub fn load(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    /// `WRITE_ONCE`.
    #[inline(always)]
    pub fn store(&self, v: u32) {
        self.0.store(v, Ordering::Relaxed);
    }
}

/// A flag only the contexts of one CPU access (task, IRQ, NMI nested on
/// each other), with `READ_ONCE` / `WRITE_ONCE` semantics: the PT driver's
/// `handle_nmi`, `pause_allowed`, `resume_allowed` and the tracer's
/// registers. A read-modify-write is a load and a store: an interrupt in
/// between runs to completion before the store (nesting is last in, first
/// out), so every user that brackets a section with it restores the value
/// it found before it returns.
#[derive(Debug)]
pub struct LocalBool(AtomicBool);

impl LocalBool {
    /// A new flag holding `v`.
    pub fn new(v: bool) -> Self {
        LocalBool(AtomicBool::new(v))
    }

    /// `READ_ONCE`.
    #[inline(always)]
    pub fn load(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `WRITE_ONCE`.
    #[inline(always)]
    pub fn store(&self, v: bool) {
        self.0.store(v, Ordering::Relaxed);
    }

    /// Stores `v` and returns what the flag held: a `READ_ONCE` and a
    /// `WRITE_ONCE`, not a locked instruction (an interrupt in between
    /// restores what it found, see the type).
    #[inline(always)]
    pub fn swap(&self, v: bool) -> bool {
        let old = self.load();
        self.store(v);
        old
    }
}

/// A pointer only the contexts of one CPU access, with `READ_ONCE` /
/// `WRITE_ONCE` semantics (the PT driver's open transaction's buffer).
#[derive(Debug)]
pub struct LocalPtr<T>(AtomicPtr<T>);

impl<T> LocalPtr<T> {
    /// A null pointer.
    pub fn null() -> Self {
        LocalPtr(AtomicPtr::new(core::ptr::null_mut()))
    }

    /// `READ_ONCE`.
    #[inline(always)]
    pub fn load(&self) -> *mut T {
        self.0.load(Ordering::Relaxed)
    }

    /// `WRITE_ONCE`.
    #[inline(always)]
    pub fn store(&self, p: *mut T) {
        self.0.store(p, Ordering::Relaxed);
    }
}

/// `barrier()`: the compiler keeps memory accesses on their side of it (an
/// interrupt on this CPU sees them in program order; no CPU fence).
#[inline(always)]
pub fn barrier() {
    compiler_fence(Ordering::SeqCst);
}

/// A shared 64-bit word of the user page, as an atomic.
///
/// # Safety
/// `p` must be valid for reads and writes of 8 bytes, 8-aligned, and only
/// accessed atomically for the returned lifetime.
#[cfg(not(loom))]
#[inline(always)]
pub unsafe fn shared_u64<'a>(p: *mut u64) -> &'a AtomicU64 {
    // SAFETY: the caller guarantees validity, alignment and atomic-only access.
    unsafe { AtomicU64::from_ptr(p) }
}

/// A shared 32-bit word of the user page, as an atomic.
///
/// # Safety
/// As for [`shared_u64`], for 4 bytes, 4-aligned.
#[cfg(not(loom))]
#[inline(always)]
pub unsafe fn shared_u32<'a>(p: *mut u32) -> &'a AtomicU32 {
    // SAFETY: the caller guarantees validity, alignment and atomic-only access.
    unsafe { AtomicU32::from_ptr(p) }
}

/// Under loom, shared memory is a table of loom atomics, one per 8-byte word
/// of the regions a model registers ([`loom_memory::register`]): payload
/// bytes and user-page words then take part in loom's exploration of
/// reorderings, and a missing Release/Acquire shows up as stale bytes.
#[cfg(loom)]
pub mod loom_memory {
    extern crate std;

    use std::boxed::Box;
    use std::sync::Mutex;
    use std::vec::Vec;

    use super::{AtomicU64, Ordering};

    struct Region {
        base: usize,
        words: &'static [AtomicU64],
    }

    loom::lazy_static! {
        static ref REGIONS: Mutex<Vec<Region>> = Mutex::new(Vec::new());
    }

    /// Makes `[base, base + len)` (8-aligned, a multiple of 8 bytes) loom
    /// memory for the current model execution, zeroed.
    pub fn register(base: *mut u8, len: usize) {
        assert!(
            base as usize % 8 == 0 && len % 8 == 0,
            "loom memory is word-granular"
        );
        let words: Vec<AtomicU64> = (0..len / 8).map(|_| AtomicU64::new(0)).collect();
        let words: &'static [AtomicU64] = Box::leak(words.into_boxed_slice());
        REGIONS.lock().unwrap().push(Region {
            base: base as usize,
            words,
        });
    }

    /// The loom word at `addr`.
    pub fn word(addr: usize) -> &'static AtomicU64 {
        assert!(addr % 8 == 0, "loom memory is word-granular: {addr:#x}");
        let regions = REGIONS.lock().unwrap();
        for r in regions.iter() {
            if addr >= r.base && addr < r.base + r.words.len() * 8 {
                return &r.words[(addr - r.base) / 8];
            }
        }
        panic!("address {addr:#x} is not registered loom memory");
    }

    /// Loom version of [`super::copy_to`]: word stores, Relaxed.
    pub fn copy_to(dst: *mut u8, src: &[u8]) {
        for (i, w) in src.chunks(8).enumerate() {
            let w: [u8; 8] = w.try_into().expect("loom payloads are whole words");
            word(dst as usize + i * 8).store(u64::from_ne_bytes(w), Ordering::Relaxed);
        }
    }

    /// Loom version of [`super::copy_from`]: word loads, Relaxed.
    pub fn copy_from(dst: &mut [u8], src: *const u8) {
        for (i, w) in dst.chunks_mut(8).enumerate() {
            let v = word(src as usize + i * 8).load(Ordering::Relaxed);
            w.copy_from_slice(&v.to_ne_bytes()[..w.len()]);
        }
    }
}

/// A shared 64-bit word of the user page (loom: the registered loom word).
///
/// # Safety
/// As the non-loom version.
#[cfg(loom)]
#[inline(always)]
pub unsafe fn shared_u64<'a>(p: *mut u64) -> &'a AtomicU64 {
    loom_memory::word(p as usize)
}

/// The most bytes [`copy_to`] hands `memcpy` in one call, chosen by the
/// `memcpy` the build links (`None`: any number, the copy whole).
///
/// - **glibc on x86-64**: 2 KiB. glibc's x86-64 `memcpy` takes
///   `rep movsb` from 2112 bytes (its `x86_rep_movsb_threshold`), which
///   stalls where the destination lies a few bytes past the source modulo
///   4 KiB (its loads alias its own stores: 1.1 us for 4 KiB at 8 bytes past,
///   against 52 ns for its vector loop in 2 KiB pieces, on this project's
///   machine). Below the threshold glibc's vector loop does not stall so.
/// - **Everywhere else** (a kernel, a hypervisor, musl): whole. Linux's
///   `memcpy`, for one, is a bare `rep movsb` on CPUs with fast short
///   `rep movsb` (`arch/x86/lib/memcpy_64.S`), stalls and all, so pieces
///   would only restart it: the bench's model of the kernel's page walk
///   (`copy/<size>/rep_movsb_pages{,_2k}`) measured `rep movsb` per piece
///   cut as for glibc 1.13-1.15 / 1.08-1.10 / 1.00 times as long as per
///   page piece at 4 / 16 / 64 KiB. Elsewhere the kernel's `memcpy_orig` is a
///   loop, which pieces only interrupt. Linux's `__output_copy` calls
///   `memcpy` once per page piece.
pub(crate) const MEMCPY_PIECE: Option<usize> =
    if cfg!(all(target_env = "gnu", target_arch = "x86_64")) {
        Some(2048)
    } else {
        None
    };

/// Cuts a copy of `len > piece` bytes to address `dst` into the pieces
/// [`copy_to`] hands `memcpy` ([`MEMCPY_PIECE`]), calling
/// `f(offset, length)` for each in order: at most `piece` bytes each
/// (`piece > 64`), and every cut where the destination starts a cache line
/// (the first piece ends at the last line boundary within `piece` bytes).
/// A cut inside a line leaves the line to two calls' overlapping unaligned
/// stores, and glibc's vector loop then runs 30-40 % slower: 16 KiB to 40
/// bytes past a line took 207-250 ns in pieces cut every 2 KiB from the
/// start, against 150-186 ns cut at lines (and 152-184 ns in one call), on
/// this project's machine.
#[inline(always)]
fn memcpy_pieces(dst: usize, len: usize, piece: usize, mut f: impl FnMut(usize, usize)) {
    let mut done = 0;
    let mut n = piece - dst % 64;
    while done < len {
        n = n.min(len - done);
        f(done, n);
        done += n;
        n = piece;
    }
}

/// Copies `src` to `dst` (payload bytes in a caller's page).
///
/// Copies of up to 64 bytes (most side-band records and small samples) are
/// made inline with at most four overlapping unaligned moves, saving the
/// call into `memcpy`. Larger ones go to `memcpy` in pieces of at most
/// [`MEMCPY_PIECE`] bytes (2 KiB against glibc's, whole elsewhere), cut
/// where the destination starts a cache line ([`memcpy_pieces`]).
///
/// # Safety
/// `dst` must be valid for writes of `src.len()` bytes and not overlap `src`.
#[inline(always)]
pub unsafe fn copy_to(dst: *mut u8, src: &[u8]) {
    #[cfg(loom)]
    return loom_memory::copy_to(dst, src);
    // SAFETY: `dst` is valid for `src.len()` bytes of writes and does not
    // overlap `src` (this function's contract), which is all the copy needs.
    #[cfg(not(loom))]
    unsafe {
        copy_to_memory(dst, src)
    };
}

/// [`copy_to`] on plain memory (never loom's model of it: for buffers that
/// are not ring memory, such as a [`SliceSink`](crate::ring::SliceSink)'s,
/// and for the software tracer's packets, mostly 1 to 9 bytes, which it
/// copies inline too).
///
/// # Safety
/// As for [`copy_to`].
#[inline(always)]
pub(crate) unsafe fn copy_to_memory(dst: *mut u8, src: &[u8]) {
    let len = src.len();
    let s = src.as_ptr();
    // SAFETY: in every branch reads stay within `src` and writes within
    // `dst[..len]` (the caller's contract): `head_tail::<T>` is called only
    // with `size_of::<T>() <= len`, the middle moves cover `[16, 32)` and
    // `[len - 32, len - 16)` only when `len > 32`, a single byte is moved
    // only when `len == 1`, and `memcpy_pieces` hands out pieces that tile
    // `[0, len)`. Copies over 64 bytes are tested for
    // first: a large copy (an AUX block's pieces) then takes one test to
    // reach `memcpy`, and the small ones (fields, headers, packets) take
    // their size tests one after the other below it.
    unsafe {
        if len > 64 {
            match MEMCPY_PIECE {
                Some(piece) if len > piece => memcpy_pieces(dst as usize, len, piece, |at, n| {
                    core::ptr::copy_nonoverlapping(s.add(at), dst.add(at), n)
                }),
                _ => core::ptr::copy_nonoverlapping(s, dst, len),
            }
        } else if len >= 16 {
            if len > 32 {
                let second = s.add(16).cast::<u128>().read_unaligned();
                let before_last = s.add(len - 32).cast::<u128>().read_unaligned();
                dst.add(16).cast::<u128>().write_unaligned(second);
                dst.add(len - 32)
                    .cast::<u128>()
                    .write_unaligned(before_last);
            }
            head_tail::<u128>(s, dst, len);
        } else if len >= 8 {
            head_tail::<u64>(s, dst, len);
        } else if len >= 4 {
            head_tail::<u32>(s, dst, len);
        } else if len >= 2 {
            head_tail::<u16>(s, dst, len);
        } else if len == 1 {
            dst.write(s.read());
        }
    }
}

/// Copies `len` bytes from `s` to `dst` with two unaligned moves of `T`
/// that overlap when `len < 2 * size_of::<T>()`: `[0, W)` and
/// `[len - W, len)`, `W = size_of::<T>()`. With `W <= len <= 2W` that is
/// every byte.
///
/// # Safety
/// `size_of::<T>() <= len`; `s` readable and `dst` writable for `len`
/// bytes, apart.
#[inline(always)]
unsafe fn head_tail<T: Copy>(s: *const u8, dst: *mut u8, len: usize) {
    let w = core::mem::size_of::<T>();
    // SAFETY: both moves lie within `[0, len)` as `w <= len` (the contract).
    unsafe {
        let first = s.cast::<T>().read_unaligned();
        let last = s.add(len - w).cast::<T>().read_unaligned();
        dst.cast::<T>().write_unaligned(first);
        dst.add(len - w).cast::<T>().write_unaligned(last);
    }
}

/// Copies `dst.len()` bytes from `src` (payload bytes in a caller's page).
///
/// # Safety
/// `src` must be valid for reads of `dst.len()` bytes and not overlap `dst`.
#[inline(always)]
pub unsafe fn copy_from(dst: &mut [u8], src: *const u8) {
    #[cfg(loom)]
    return loom_memory::copy_from(dst, src);
    // SAFETY: the caller guarantees `src` is valid for `dst.len()` bytes.
    #[cfg(not(loom))]
    unsafe {
        core::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len())
    };
}

/// Zeroes `len` bytes at `dst`.
///
/// # Safety
/// `dst` must be valid for writes of `len` bytes.
#[inline(always)]
pub unsafe fn zero(dst: *mut u8, len: usize) {
    #[cfg(loom)]
    for i in (0..len).step_by(8) {
        loom_memory::word(dst as usize + i).store(0, Ordering::Relaxed);
    }
    // SAFETY: the caller guarantees `dst` is valid for `len` bytes.
    #[cfg(not(loom))]
    unsafe {
        core::ptr::write_bytes(dst, 0, len)
    };
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn local_word_operations() {
        let w = LocalU64::new(5);
        assert_eq!(w.compare_exchange(5, 9), Ok(5));
        assert_eq!(w.compare_exchange(5, 1), Err(9));
        assert_eq!(w.fetch_add(3), 9);
        assert_eq!(w.load(), 12);
        assert_eq!(w.swap(0), 12);
        assert_eq!(w.fetch_add(7), 0);
        assert_eq!(
            w.fetch_add(u64::MAX),
            7,
            "wraps like the kernel's unsigned arithmetic"
        );
        assert_eq!(w.load(), 6);
    }

    #[test]
    fn large_copies_are_cut_at_the_destinations_cache_lines() {
        let Some(piece) = MEMCPY_PIECE else {
            return; // whole copies: nothing is cut
        };
        for len in [piece + 1, 4056, 4096, 16384, 65528] {
            for dst in (4096..4096 + 64).chain([usize::MAX / 2 + 40]) {
                let mut pieces = std::vec::Vec::new();
                memcpy_pieces(dst, len, piece, |at, n| pieces.push((at, n)));
                let mut next = 0;
                for &(at, n) in &pieces {
                    assert_eq!(at, next, "len {len} to {dst:#x}: in order, no gap");
                    assert!((1..=piece).contains(&n), "len {len}: piece of {n}");
                    next = at + n;
                    if next < len {
                        assert_eq!((dst + next) % 64, 0, "len {len} to {dst:#x}: cut at {next}");
                    }
                }
                assert_eq!(next, len, "len {len} to {dst:#x}: every byte");
                assert!(pieces.len() <= len / piece + 2, "len {len}: {pieces:?}");
            }
        }
    }

    #[test]
    fn copies_of_every_length_are_exact() {
        let src: [u8; 5000] = core::array::from_fn(|i| (i * 7 + 1) as u8);
        // Every length around the inline thresholds (fewer under Miri, where
        // each byte costs microseconds).
        let step = if cfg!(miri) { 5 } else { 1 };
        for len in (0..=80).step_by(step).chain([2047, 2048, 2049, 4096, 5000]) {
            for at in [0, 1, 8, 40] {
                let mut dst = [0u8; 5040];
                // SAFETY: `at + len <= 5040` and the arrays are distinct.
                unsafe { copy_to(dst.as_mut_ptr().add(at), &src[..len]) };
                assert_eq!(&dst[at..at + len], &src[..len], "len {len} at {at}");
                assert!(
                    dst[..at].iter().chain(&dst[at + len..]).all(|&b| b == 0),
                    "len {len}: nothing else written"
                );
            }
        }
    }
}
