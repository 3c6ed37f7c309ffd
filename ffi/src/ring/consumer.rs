// SPDX-License-Identifier: MIT OR Apache-2.0
//! The consumer of a writable ring: what `perf record` does with the
//! mapping (`data_head` Acquire, the records, `data_tail` Release).

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};
use core::ptr::{self, addr_of_mut};

use perfaux::Error;
use perfaux::abi::PerfEventMmapPage;
use perfaux::ring::Consumer;

use super::{PERFAUX_CONSUMER_WORDS, chunk_slice};
use crate::storage::{live_box, usable};

/// Storage of a consumer (the reader of a writable ring). Opaque.
#[repr(C)]
pub struct perfaux_consumer {
    /// Opaque.
    pub opaque: [u64; PERFAUX_CONSUMER_WORDS],
}

const CONSUMER_LIVE: u64 = 0x7065_7266_636f_6e73; // "perfcons"

#[repr(C)]
struct ConsumerBox {
    live: u64,
    consumer: Consumer<'static>,
}

const _: () = {
    assert!(size_of::<ConsumerBox>() <= size_of::<perfaux_consumer>());
    assert!(align_of::<ConsumerBox>() <= align_of::<perfaux_consumer>());
};

/// The consumer at `p`, if it is one.
///
/// # Safety
/// `p` must be NULL or point to `struct perfaux_consumer` storage.
unsafe fn consumer_mut<'a>(p: *mut perfaux_consumer) -> Option<&'a mut Consumer<'static>> {
    // SAFETY: `p` is NULL or consumer storage (this function's
    // `# Safety`), which `live_box` needs; the live word says
    // `perfaux_consumer_init` wrote it, not torn down.
    unsafe { live_box::<_, ConsumerBox>(p, CONSUMER_LIVE).map(|c| &mut (*c).consumer) }
}

/// Initializes the consumer of a writable ring over the same memory
/// (`user_page`, `chunks`, `nr_chunks`, `order` as given to
/// `perfaux_ring_init`), reading from `data_tail`. It may run on another
/// CPU than the writers. Returns 0, `-EINVAL` for bad arguments, `-EBUSY`
/// if `consumer` is initialized.
///
/// # Safety
/// As `perfaux_ring_init`, for `consumer` and the memory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_consumer_init(
    consumer: *mut perfaux_consumer,
    user_page: *mut c_void,
    chunks: *const *mut c_void,
    nr_chunks: usize,
    order: u32,
) -> c_int {
    if !usable(consumer) || !usable(user_page.cast::<PerfEventMmapPage>()) || order > 20 {
        return Error::Invalid.errno();
    }
    // SAFETY: `consumer` is NULL or `struct perfaux_consumer` storage (this function's `#
    // Safety`), which is what `consumer_mut` needs.
    if unsafe { consumer_mut(consumer) }.is_some() {
        return Error::Busy.errno();
    }
    // SAFETY: the chunk array contract is the caller's.
    let Some(chunks) = (unsafe { chunk_slice(chunks, nr_chunks) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: the memory is the ring's, valid until fini (the contract).
    match unsafe { Consumer::new(user_page.cast(), chunks, order) } {
        Ok(c) => {
            let b = consumer.cast::<ConsumerBox>();
            // SAFETY: valid storage (asserted size); the live word goes last.
            unsafe {
                addr_of_mut!((*b).consumer).write(c);
                addr_of_mut!((*b).live).write(CONSUMER_LIVE);
            }
            0
        }
        Err(e) => e.errno(),
    }
}

/// Loads `data_head`: returns the bytes available to read (at most the
/// data size), or `-EINVAL` for a bad consumer.
///
/// # Safety
/// `consumer` NULL or consumer storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_consumer_refresh(consumer: *mut perfaux_consumer) -> i64 {
    // SAFETY: `consumer` is NULL or `struct perfaux_consumer` storage (this function's `#
    // Safety`), which is what `consumer_mut` needs.
    match unsafe { consumer_mut(consumer) } {
        Some(c) => c.refresh().min(i64::MAX as u64) as i64,
        None => i64::from(Error::Invalid.errno()),
    }
}

/// Copies the next record (below the last loaded `data_head`) into `buf`
/// and consumes it. Returns its size, 0 when every record was read,
/// `-ENOMEM` when `buf_len` is smaller than the record (it stays unread),
/// `-EINVAL` for a bad consumer, NULL `buf`, or a malformed record.
///
/// # Safety
/// `consumer` NULL or consumer storage; `buf` writable for `buf_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_consumer_next(
    consumer: *mut perfaux_consumer,
    buf: *mut c_void,
    buf_len: usize,
) -> isize {
    // SAFETY: `consumer` is NULL or `struct perfaux_consumer` storage (this function's `#
    // Safety`), which is what `consumer_mut` needs.
    let Some(c) = (unsafe { consumer_mut(consumer) }) else {
        return Error::Invalid.errno() as isize;
    };
    if buf.is_null() || buf_len > isize::MAX as usize {
        return Error::Invalid.errno() as isize;
    }
    match c.peek_size() {
        None => return 0,
        Some(Err(e)) => return e.errno() as isize,
        Some(Ok(size)) if size > buf_len => return Error::NoMemory.errno() as isize,
        Some(Ok(_)) => {}
    }
    // SAFETY: writable for `buf_len` bytes (the caller's contract), C memory
    // that the ring does not own.
    let out = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), buf_len) };
    let (src, n) = match c.next_record(out) {
        Some(Ok(record)) => (record.as_ptr(), record.len()),
        Some(Err(e)) => return e.errno() as isize,
        None => return 0,
    };
    if src != buf.cast::<u8>().cast_const() {
        // SAFETY: the record was returned in place: `n` published bytes of
        // the ring that the writer leaves alone until `data_tail` passes
        // them (not yet committed); `buf` holds `buf_len >= n` bytes and is
        // not ring memory.
        unsafe { ptr::copy_nonoverlapping(src, buf.cast::<u8>(), n) };
    }
    n as isize
}

/// Gives every record read so far back to the writer (`data_tail`).
/// Returns 0, or `-EINVAL` for a bad consumer.
///
/// # Safety
/// `consumer` NULL or consumer storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_consumer_commit(consumer: *mut perfaux_consumer) -> c_int {
    // SAFETY: `consumer` is NULL or `struct perfaux_consumer` storage (this function's `#
    // Safety`), which is what `consumer_mut` needs.
    match unsafe { consumer_mut(consumer) } {
        Some(c) => {
            c.commit();
            0
        }
        None => Error::Invalid.errno(),
    }
}

/// Tears a consumer down. Returns 0, or `-EINVAL` for a bad consumer.
///
/// # Safety
/// `consumer` NULL or consumer storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_consumer_fini(consumer: *mut perfaux_consumer) -> c_int {
    // SAFETY: `consumer` is NULL or `struct perfaux_consumer` storage (this function's `#
    // Safety`), which is what `consumer_mut` needs.
    if unsafe { consumer_mut(consumer) }.is_none() {
        return Error::Invalid.errno();
    }
    let b = consumer.cast::<ConsumerBox>();
    // SAFETY: live: dropped once, then marked dead.
    unsafe {
        ptr::drop_in_place(addr_of_mut!((*b).consumer));
        addr_of_mut!((*b).live).write(0);
    }
    0
}
