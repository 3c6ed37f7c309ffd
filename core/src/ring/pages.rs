// SPDX-License-Identifier: MIT OR Apache-2.0
//! Caller-provided memory of a ring: the data chunks and the user page.

use crate::abi::PAGE_SIZE;
use crate::error::{Error, Result};

/// `log2(PAGE_SIZE)`: chunks are `PAGE_SIZE << order` bytes. (Under loom,
/// 64-byte pages, so that a model fills a ring in a few records.)
pub const PAGE_SHIFT: u32 = if cfg!(loom) {
    6
} else {
    PAGE_SIZE.trailing_zeros()
};

/// The largest chunk order accepted (chunks of `PAGE_SIZE << 28` = 1 TiB).
pub const MAX_ORDER: u32 = 28;

/// The largest data area accepted, in bytes (2^40).
pub const MAX_DATA_SIZE: u64 = 1 << 40;

/// The data area: a power-of-two number of chunks of `PAGE_SIZE << order`
/// bytes each (Linux: `data_pages[]` with `page_order`), addressed by
/// free-running byte positions masked with `data_size - 1`.
///
/// # Invariants
/// Every chunk pointer is non-null, 8-aligned and valid for reads and writes
/// of `chunk_size()` bytes for `'a`; the number of chunks is 0 or a power of
/// two; `data_size` is the chunk count times `chunk_size()` and at most
/// `MAX_DATA_SIZE`.
#[derive(Clone, Copy, Debug)]
pub struct DataPages<'a> {
    chunks: &'a [*mut u8],
    /// `PAGE_SHIFT + order`.
    chunk_shift: u32,
    /// `chunk_count - 1` (0 without chunks), precomputed for the write path.
    index_mask: usize,
    /// `chunk_count << chunk_shift`, precomputed for the write path (its
    /// reservation masks every position with `data_size - 1`).
    data_size: u64,
}

impl<'a> DataPages<'a> {
    /// Checks the chunk table: `EINVAL` for an order above [`MAX_ORDER`], a
    /// count that is not 0 or a power of two, a null or misaligned chunk,
    /// or more than [`MAX_DATA_SIZE`] bytes in all.
    ///
    /// # Safety
    /// Each chunk must be valid for reads and writes of `PAGE_SIZE << order`
    /// bytes for `'a`, the chunks must not overlap each other, and (while a
    /// ring or consumer uses them) be accessed only through this crate's
    /// protocol.
    pub unsafe fn new(chunks: &'a [*mut u8], order: u32) -> Result<Self> {
        if order > MAX_ORDER {
            return Err(Error::Invalid);
        }
        let chunk_shift = PAGE_SHIFT + order;
        let n = chunks.len();
        if n != 0 && !n.is_power_of_two() {
            return Err(Error::Invalid);
        }
        let size = (n as u64).checked_shl(chunk_shift).ok_or(Error::Invalid)?;
        if size > MAX_DATA_SIZE || (n != 0 && size >> chunk_shift != n as u64) {
            return Err(Error::Invalid);
        }
        if chunks.iter().any(|c| c.is_null() || (*c as usize) % 8 != 0) {
            return Err(Error::Invalid);
        }
        Ok(DataPages {
            chunks,
            chunk_shift,
            index_mask: n.saturating_sub(1),
            data_size: size,
        })
    }

    /// Size of the data area in bytes (0 for a ring without data pages).
    #[inline(always)]
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Size of one chunk in bytes.
    #[inline(always)]
    pub fn chunk_size(&self) -> usize {
        1 << self.chunk_shift
    }

    /// Number of chunks.
    #[inline(always)]
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// The chunks, if there are any: the proof the write and read paths
    /// index them by, without a check of their own. `None` for a ring
    /// without data pages (paused forever; nothing to read).
    #[inline(always)]
    pub(crate) fn chunks(&self) -> Option<Chunks<'_, 'a>> {
        // INVARIANT: the table is not empty.
        (!self.chunks.is_empty()).then_some(Chunks(self))
    }

    /// The chunks, without looking: for the write path, where the ring's
    /// own invariant already says they are there.
    ///
    /// # Safety
    /// The table must have at least one chunk.
    #[inline(always)]
    pub(crate) unsafe fn chunks_unchecked(&self) -> Chunks<'_, 'a> {
        debug_assert!(!self.chunks.is_empty());
        // INVARIANT: the table is not empty (the caller's contract).
        Chunks(self)
    }

    /// Zeroes every chunk (set-up path).
    pub(crate) fn zero_all(&self) {
        for &c in self.chunks {
            // SAFETY: each chunk is valid for `chunk_size()` bytes of writes
            // (type invariant).
            unsafe { crate::sync::zero(c, self.chunk_size()) };
        }
    }

    /// Copies `out.len()` bytes starting at free-running position `pos`,
    /// across chunk boundaries and the end of the area. Without chunks there
    /// is nothing to copy from, and `out` is left as it is.
    ///
    /// # Safety
    /// Nobody may write the bytes read while this runs (the consumer's side
    /// of the protocol guarantees it for published, unconsumed bytes).
    pub(crate) unsafe fn read(&self, pos: u64, out: &mut [u8]) {
        if let Some(chunks) = self.chunks() {
            // SAFETY: nobody writes the bytes read (this function's `# Safety`),
            // the one clause `Chunks::read` has.
            unsafe { chunks.read(pos, out) };
        }
    }
}

/// The chunks of a [`DataPages`] known to be there: where the write path
/// finds the address of a position without a bounds check or a panic path.
///
/// # Invariants
/// The table has at least one chunk, so its count is a power of two and
/// `index_mask` is `count - 1`: every index masked with it is in bounds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chunks<'p, 'a>(&'p DataPages<'a>);

impl Chunks<'_, '_> {
    /// Size of one chunk in bytes.
    #[inline(always)]
    pub(crate) fn chunk_size(&self) -> usize {
        self.0.chunk_size()
    }

    /// The chunk holding free-running position `pos`, the address of `pos`
    /// in it, and the bytes left in that chunk from there.
    #[inline(always)]
    pub(crate) fn locate(&self, pos: u64) -> (usize, *mut u8, usize) {
        let pages = self.0;
        let chunk_mask = (pages.chunk_size() - 1) as u64;
        let index = ((pos >> pages.chunk_shift) as usize) & pages.index_mask;
        let within = (pos & chunk_mask) as usize;
        // `wrapping_add` keeps this safe code; the result lies inside the
        // chunk because `within < chunk_size()`.
        (
            index,
            self.chunk(index).wrapping_add(within),
            pages.chunk_size() - within,
        )
    }

    /// The start of chunk `index` (masked to the chunk count).
    #[inline(always)]
    pub(crate) fn chunk(&self, index: usize) -> *mut u8 {
        let pages = self.0;
        // SAFETY: `index & index_mask <= count - 1`: in bounds (type
        // invariant: at least one chunk, a power of two of them). No bounds
        // check, no panic path on the write path.
        unsafe { *pages.chunks.get_unchecked(index & pages.index_mask) }
    }

    /// Copies `out.len()` bytes starting at free-running position `pos`,
    /// across chunk boundaries and the end of the area.
    ///
    /// # Safety
    /// Nobody may write the bytes read while this runs (the consumer's side
    /// of the protocol guarantees it for published, unconsumed bytes).
    pub(crate) unsafe fn read(&self, mut pos: u64, mut out: &mut [u8]) {
        while !out.is_empty() {
            let (_, src, left) = self.locate(pos);
            let n = left.min(out.len());
            let (now, rest) = out.split_at_mut(n);
            // SAFETY: `src` is valid for `left >= n` bytes (`locate`, and
            // the DataPages invariant: each chunk valid for `chunk_size()`
            // bytes); nobody writes them (the caller's contract).
            unsafe { crate::sync::copy_from(now, src) };
            out = rest;
            pos = pos.wrapping_add(n as u64);
        }
    }
}

/// Checks a user-page pointer: non-null and 8-aligned, else `EINVAL`.
pub(crate) fn check_user_page<T>(p: *mut T) -> Result<()> {
    if p.is_null() || (p as usize) % 8 != 0 {
        Err(Error::Invalid)
    } else {
        Ok(())
    }
}
