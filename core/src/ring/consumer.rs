// SPDX-License-Identifier: MIT OR Apache-2.0
//! The consumer side of a ring: what user space does with the mapping
//! (the `data_head`/`data_tail` protocol of `<linux/perf_event.h>`). It sees only the user
//! page and the data chunks.

use core::ptr::addr_of_mut;

use super::pages::{DataPages, check_user_page};
use crate::abi::{PerfEventHeader, PerfEventMmapPage};
use crate::error::{Error, Result};
use crate::sync::{AtomicU64, Ordering, fence, shared_u64};

const HEADER_SIZE: usize = 8;

/// Reads a record header from the first 8 bytes of `bytes`.
pub fn read_header(bytes: &[u8]) -> Option<PerfEventHeader> {
    let b: &[u8; 8] = bytes.get(..HEADER_SIZE)?.try_into().ok()?;
    Some(PerfEventHeader {
        type_: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
        misc: u16::from_ne_bytes([b[4], b[5]]),
        size: u16::from_ne_bytes([b[6], b[7]]),
    })
}

/// Reads the records of a writable ring in order, as `perf record` does:
/// load `data_head` (C), read `[data_tail, data_head)`, then store
/// `data_tail` (D) to give the space back.
///
/// A record that lies in one chunk is returned in place (no copy); one that
/// crosses a chunk boundary or the ring's end is copied into the caller's
/// scratch buffer.
///
/// ```no_run
/// # use perfaux::ring::Consumer;
/// # fn demo(mut consumer: Consumer<'_>) {
/// let mut scratch = [0u8; 65536];
/// consumer.refresh();
/// while let Some(record) = consumer.next_record(&mut scratch) {
///     let record = record.expect("a well-formed ring");
///     let header = perfaux::ring::read_header(record).unwrap();
///     println!("type {} size {}", header.type_, header.size);
/// }
/// consumer.commit();
/// # }
/// ```
pub struct Consumer<'a> {
    pages: DataPages<'a>,
    user_page: *mut PerfEventMmapPage,
    /// Free-running position of the next record.
    pos: u64,
    /// The `data_head` loaded by the last `refresh`.
    head: u64,
}

// SAFETY: the consumer holds pointers to caller memory valid for 'a (its
// constructor's contract) and touches the shared words only atomically;
// it can run on any thread (the consumer's CPU).
unsafe impl Send for Consumer<'_> {}

impl<'a> Consumer<'a> {
    /// A consumer of the ring whose user page and chunks these are, starting
    /// at the current `data_tail`. `EINVAL` as for [`Ring::new`](super::Ring::new).
    ///
    /// # Safety
    /// The memory must be that of a live [`Ring`](super::Ring) in **writable**
    /// (not overwrite) mode, valid for `'a`, with no other consumer: in
    /// writable mode the writer never touches `[data_tail, data_head)`,
    /// which is what makes reading it in place sound.
    pub unsafe fn new(
        user_page: *mut PerfEventMmapPage,
        chunks: &'a [*mut u8],
        order: u32,
    ) -> Result<Self> {
        check_user_page(user_page)?;
        // SAFETY: `DataPages::new` needs each chunk valid for `PAGE_SIZE <<
        // order` bytes for 'a and touched only by the ring and its
        // consumers: this constructor's own contract says so.
        let pages = unsafe { DataPages::new(chunks, order)? };
        let mut c = Consumer {
            pages,
            user_page,
            pos: 0,
            head: 0,
        };
        // Relaxed: only this consumer writes data_tail.
        c.pos = c.tail_word().load(Ordering::Relaxed);
        c.head = c.pos;
        Ok(c)
    }

    fn head_word(&self) -> &AtomicU64 {
        // SAFETY: within the user page, valid, aligned, atomic-only (contract).
        unsafe { shared_u64(addr_of_mut!((*self.user_page).data_head)) }
    }

    fn tail_word(&self) -> &AtomicU64 {
        // SAFETY: as for `head_word`.
        unsafe { shared_u64(addr_of_mut!((*self.user_page).data_tail)) }
    }

    /// Loads `data_head`; returns the bytes published and not yet read.
    pub fn refresh(&mut self) -> u64 {
        // C: Acquire pairs with the writer's Release store of data_head (B):
        // the record bytes below the head are visible.
        self.head = self.head_word().load(Ordering::Acquire);
        self.available()
    }

    /// Bytes between the read position and the last loaded `data_head`, at
    /// most the data size (a `data_head` further ahead is a writer's bug;
    /// without chunks there is never anything to read).
    pub fn available(&self) -> u64 {
        self.head.wrapping_sub(self.pos).min(self.pages.data_size())
    }

    /// The size of the next record below the last loaded `data_head`,
    /// without consuming it: `None` when all were read, `EINVAL` for a
    /// malformed header (as [`next_record`](Self::next_record)).
    pub fn peek_size(&self) -> Option<Result<usize>> {
        let avail = self.available();
        if avail == 0 {
            return None;
        }
        if avail < HEADER_SIZE as u64 {
            return Some(Err(Error::Invalid));
        }
        let mut hb = [0u8; HEADER_SIZE];
        // SAFETY: the header lies in [pos, head): published and not yet
        // consumed, so the writer does not touch it (writable mode).
        unsafe { self.pages.read(self.pos, &mut hb) };
        let size = u64::from(u16::from_ne_bytes([hb[6], hb[7]]));
        if size < HEADER_SIZE as u64 || size > avail {
            return Some(Err(Error::Invalid));
        }
        Some(Ok(size as usize))
    }

    /// The next record below the last loaded `data_head`, or `None` when all
    /// were read (call [`refresh`](Self::refresh) for more).
    ///
    /// Errors (the record stays unread): `ENOMEM` if the record crosses a
    /// chunk boundary and `scratch` is smaller than it; `EINVAL` if its
    /// header is malformed (size below 8 or past `data_head`), which a
    /// correct writer never produces.
    pub fn next_record<'s>(&'s mut self, scratch: &'s mut [u8]) -> Option<Result<&'s [u8]>> {
        let avail = self.available();
        // Without chunks nothing is ever available (`available` is at most
        // the data size, 0).
        let chunks = self.pages.chunks().filter(|_| avail != 0)?;
        let mut hb = [0u8; HEADER_SIZE];
        if avail < HEADER_SIZE as u64 {
            return Some(Err(Error::Invalid));
        }
        // SAFETY: the header lies in [pos, head): published and not yet
        // consumed, so the writer does not touch it (writable mode).
        unsafe { chunks.read(self.pos, &mut hb) };
        let size = u64::from(u16::from_ne_bytes([hb[6], hb[7]]));
        if size < HEADER_SIZE as u64 || size > avail {
            return Some(Err(Error::Invalid));
        }
        let size = size as usize;
        let (_, at, left_in_chunk) = chunks.locate(self.pos);
        // Under loom the payload lives in loom words: always copy.
        let record = if size <= left_in_chunk && !cfg!(loom) {
            // SAFETY: `at` is valid for `left_in_chunk >= size` bytes; they
            // are published and unconsumed, so nothing writes them while the
            // borrow (which holds `self`) lasts.
            unsafe { core::slice::from_raw_parts(at.cast_const(), size) }
        } else {
            let Some(out) = scratch.get_mut(..size) else {
                return Some(Err(Error::NoMemory));
            };
            // SAFETY: the record's bytes, across chunks, lie in [pos, head):
            // published and not consumed, so the writer leaves them alone in
            // writable mode (the constructor's contract).
            unsafe { chunks.read(self.pos, out) };
            &*out
        };
        self.pos = self.pos.wrapping_add(size as u64);
        Some(Ok(record))
    }

    /// Marks every record below the last loaded `data_head` as read,
    /// without looking at them (commit to give the space back).
    pub fn skip_to_head(&mut self) {
        self.pos = self.head;
    }

    /// Gives the bytes read so far back to the writer (`data_tail`).
    pub fn commit(&mut self) {
        // D: the record loads are complete before the tail store; a full
        // fence as the kernel's smp_mb(), then Release, which pairs with the
        // writer's Acquire load of data_tail (A).
        fence(Ordering::SeqCst);
        self.tail_word().store(self.pos, Ordering::Release);
    }
}

/// Reads a paused **backward** ring newest record first, as
/// `perf record --overwrite` does: from `data_head` forward until the data
/// size is covered or an unused (zero) header is reached
/// (`overwrite_rb_find_range` in tools/lib/perf/mmap.c). Records are copied
/// out, never returned in place.
pub struct BackwardReader<'a> {
    pages: DataPages<'a>,
    pos: u64,
    end: u64,
}

impl<'a> BackwardReader<'a> {
    /// A reader of the ring's records as of now.
    ///
    /// # Safety
    /// The memory must be that of a live backward [`Ring`](super::Ring),
    /// valid for `'a`, and **no writer may be active** while the reader
    /// lives (pause the ring and let writers in flight finish).
    pub unsafe fn new(
        user_page: *mut PerfEventMmapPage,
        chunks: &'a [*mut u8],
        order: u32,
    ) -> Result<Self> {
        check_user_page(user_page)?;
        // SAFETY: `DataPages::new` needs each chunk valid for `PAGE_SIZE <<
        // order` bytes for 'a: they are a live ring's, valid for 'a, with no
        // writer active (this constructor's contract).
        let pages = unsafe { DataPages::new(chunks, order)? };
        // SAFETY: within the user page, valid, aligned, atomic-only (contract).
        let head_word = unsafe { shared_u64(addr_of_mut!((*user_page).data_head)) };
        // C: Acquire pairs with the writer's Release store (B).
        let start = head_word.load(Ordering::Acquire);
        let data_size = pages.data_size();
        let mut end = start;
        let mut last = 0u64;
        while data_size != 0 && end.wrapping_sub(start) <= data_size {
            let covered = end.wrapping_sub(start);
            if covered >= data_size {
                // The last record ran past one lap: it was partly overwritten.
                if covered > data_size {
                    end = end.wrapping_sub(last);
                }
                break;
            }
            let mut hb = [0u8; HEADER_SIZE];
            // SAFETY: no writer is active (the constructor's contract).
            unsafe { pages.read(end, &mut hb) };
            last = u64::from(u16::from_ne_bytes([hb[6], hb[7]]));
            if last < HEADER_SIZE as u64 {
                // 0: never written; 1..7: not a record. Either way, the end.
                break;
            }
            end = end.wrapping_add(last);
        }
        Ok(BackwardReader {
            pages,
            pos: start,
            end,
        })
    }

    /// Copies the next (older) record into `out` and returns its length, or
    /// `None` at the end. `ENOMEM` if `out` is too small (the record stays unread).
    pub fn next_record(&mut self, out: &mut [u8]) -> Option<Result<usize>> {
        if self.pos == self.end || self.pages.data_size() == 0 {
            return None;
        }
        let mut hb = [0u8; HEADER_SIZE];
        // SAFETY: no writer is active (the constructor's contract).
        unsafe { self.pages.read(self.pos, &mut hb) };
        let size = usize::from(u16::from_ne_bytes([hb[6], hb[7]]));
        if size < HEADER_SIZE {
            return Some(Err(Error::Invalid));
        }
        let Some(dst) = out.get_mut(..size) else {
            return Some(Err(Error::NoMemory));
        };
        // SAFETY: the record lies within the data size read from the
        // newest end, and the ring is paused with no writer active (the
        // constructor's contract), so nothing writes the bytes read.
        unsafe { self.pages.read(self.pos, dst) };
        self.pos = self.pos.wrapping_add(size as u64);
        Some(Ok(size))
    }
}
