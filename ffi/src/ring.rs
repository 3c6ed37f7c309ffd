// SPDX-License-Identifier: MIT OR Apache-2.0
//! Data rings over caller pages, output handles, and the consumer.
//!
//! Every object lives in storage the caller declares (`struct perfaux_ring`,
//! `struct perfaux_output_handle`, `struct perfaux_consumer`: opaque words
//! of the right size and alignment) and must not move while initialized.
//! A word of each object marks it initialized, so that a handle used
//! before `begin` or after `end`, or a ring after `fini`, is refused with
//! `-EINVAL` instead of being trusted.

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};
use core::ptr::{self, addr_of, addr_of_mut};

use perfaux::Error;
use perfaux::abi::{PerfEventMmapPage, sample_type};
use perfaux::ring::{
    Consumer, FixedEvent, NoHook, OutputHandle, Ring, RingConfig, SampleId, Wakeup,
};

use crate::storage::{live_box, read_in, usable};

/// `perfaux_ring_config.flags`: overwrite mode (a read-only mapping in
/// Linux): the writer never waits for `data_tail`.
pub const PERFAUX_RING_OVERWRITE: u32 = 1 << 0;
/// `perfaux_ring_config.flags`: write records backward (`write_backward`).
pub const PERFAUX_RING_BACKWARD: u32 = 1 << 1;

/// Alignment in bytes of every `struct perfaux_*` object storage.
pub const PERFAUX_OBJECT_ALIGN: usize = 8;

/// Words of `struct perfaux_ring`.
pub const PERFAUX_RING_WORDS: usize = 24;
/// Size in bytes of `struct perfaux_ring` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_RING_SIZE: usize = PERFAUX_RING_WORDS * 8;
/// Words of `struct perfaux_output_handle`.
pub const PERFAUX_OUTPUT_HANDLE_WORDS: usize = 8;
/// Size in bytes of `struct perfaux_output_handle` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_OUTPUT_HANDLE_SIZE: usize = PERFAUX_OUTPUT_HANDLE_WORDS * 8;
/// Words of `struct perfaux_consumer`.
pub const PERFAUX_CONSUMER_WORDS: usize = 16;
/// Size in bytes of `struct perfaux_consumer` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_CONSUMER_SIZE: usize = PERFAUX_CONSUMER_WORDS * 8;

/// Called when the consumer should be woken (from the outermost writer's
/// `end`, possibly in NMI context: it must not block, lock or allocate).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_wakeup {
    /// The callback, or NULL for none.
    pub func: Option<unsafe extern "C" fn(ctx: *mut c_void)>,
    /// Its argument.
    pub ctx: *mut c_void,
}

/// How a ring behaves; all zero is a writable forward ring with the
/// watermark at half the data size and nobody to wake.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_ring_config {
    /// `PERFAUX_RING_*` bits.
    pub flags: u32,
    /// Reserved, must be 0.
    pub reserved: u32,
    /// Wake the consumer every this many bytes (0: half the data size).
    pub watermark: u64,
    /// The wakeup callback.
    pub wakeup: perfaux_wakeup,
}

/// Storage of a ring. Opaque: only its size and alignment matter.
#[repr(C)]
pub struct perfaux_ring {
    /// Opaque.
    pub opaque: [u64; PERFAUX_RING_WORDS],
}

/// Storage of an output handle (one record being written). Opaque.
#[repr(C)]
pub struct perfaux_output_handle {
    /// Opaque.
    pub opaque: [u64; PERFAUX_OUTPUT_HANDLE_WORDS],
}

/// Storage of a consumer (the reader of a writable ring). Opaque.
#[repr(C)]
pub struct perfaux_consumer {
    /// Opaque.
    pub opaque: [u64; PERFAUX_CONSUMER_WORDS],
}

/// The `sample_id` trailer of a non-sample record (with `sample_id_all`):
/// which of the fields are written is `sample_type`'s TID, TIME, ID,
/// STREAM_ID, CPU and IDENTIFIER bits.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct perfaux_sample_id {
    /// The event's `sample_type`.
    pub sample_type: u64,
    /// TID: process id.
    pub pid: u32,
    /// TID: thread id.
    pub tid: u32,
    /// TIME.
    pub time: u64,
    /// ID and IDENTIFIER.
    pub id: u64,
    /// STREAM_ID.
    pub stream_id: u64,
    /// CPU.
    pub cpu: u32,
    /// Reserved, must be 0.
    pub reserved: u32,
}

/// The event a record is written for: its id (in `PERF_RECORD_LOST`) and,
/// if `has_sample_id`, the trailer of the records the engine adds.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct perfaux_output_event {
    /// The event's id.
    pub id: u64,
    /// Non-zero: `sample_id` is written after `PERF_RECORD_LOST`.
    pub has_sample_id: u32,
    /// Reserved, must be 0.
    pub reserved: u32,
    /// The trailer.
    pub sample_id: perfaux_sample_id,
}

const RING_LIVE: u64 = 0x7065_7266_7269_6e67; // "perfring"
const HANDLE_LIVE: u64 = 0x7065_7266_6f75_7470; // "perfoutp"
const CONSUMER_LIVE: u64 = 0x7065_7266_636f_6e73; // "perfcons"

/// The C callback as the engine's wakeup.
pub(crate) struct CWakeup(pub(crate) perfaux_wakeup);

// SAFETY: the ring calls the callback from the writers of its own CPU; the
// C contract of `perfaux_ring_init` makes `ctx` usable from there.
unsafe impl Sync for CWakeup {}

impl Wakeup for CWakeup {
    fn wakeup(&self) {
        if let Some(f) = self.0.func {
            // SAFETY: the caller registered `f` with `ctx` for this purpose.
            unsafe { f(self.0.ctx) }
        }
    }
}

/// What `struct perfaux_ring` holds.
#[repr(C)]
struct RingBox {
    /// `RING_LIVE` while initialized.
    live: u64,
    /// The callback `ring` refers to (it lives in the same storage).
    wakeup: CWakeup,
    ring: Ring<'static>,
}

#[repr(C)]
struct HandleBox {
    live: u64,
    handle: OutputHandle<'static, 'static, NoHook>,
}

#[repr(C)]
struct ConsumerBox {
    live: u64,
    consumer: Consumer<'static>,
}

const _: () = {
    assert!(align_of::<perfaux_ring>() == PERFAUX_OBJECT_ALIGN);
    assert!(size_of::<perfaux_ring>() == PERFAUX_RING_SIZE);
    assert!(size_of::<RingBox>() <= size_of::<perfaux_ring>());
    assert!(align_of::<RingBox>() <= align_of::<perfaux_ring>());
    assert!(size_of::<HandleBox>() <= size_of::<perfaux_output_handle>());
    assert!(align_of::<HandleBox>() <= align_of::<perfaux_output_handle>());
    assert!(size_of::<ConsumerBox>() <= size_of::<perfaux_consumer>());
    assert!(align_of::<ConsumerBox>() <= align_of::<perfaux_consumer>());
};

/// Nobody to wake.
pub(crate) const NO_WAKEUP: perfaux_wakeup = perfaux_wakeup {
    func: None,
    ctx: ptr::null_mut(),
};

/// The initialized ring at `p`, if it is one.
///
/// # Safety
/// `p` must be NULL or point to a `struct perfaux_ring` (initialized or not)
/// valid for reads for `'a`.
pub(crate) unsafe fn ring_ref<'a>(p: *const perfaux_ring) -> Option<&'a Ring<'static>> {
    // SAFETY: `p` is NULL or ring storage readable for 'a (this function's
    // `# Safety`), which `live_box` needs; the live word says
    // `perfaux_ring_init` wrote the box and `perfaux_ring_fini` has not
    // dropped it.
    unsafe { live_box::<_, RingBox>(p, RING_LIVE).map(|b| &(*b).ring) }
}

/// The data pages of a C call as a slice.
///
/// # Safety
/// `chunks` must be NULL or valid for reads of `nr` pointers for `'static`
/// (the init contracts).
unsafe fn chunk_slice(chunks: *const *mut c_void, nr: usize) -> Option<&'static [*mut u8]> {
    if nr == 0 {
        return Some(&[]);
    }
    if !usable(chunks) || nr > isize::MAX as usize / size_of::<*mut u8>() {
        return None;
    }
    // SAFETY: non-null, aligned, `nr` readable pointers that outlive the
    // object (the caller's contract); the size fits in isize (checked).
    Some(unsafe { core::slice::from_raw_parts(chunks.cast::<*mut u8>(), nr) })
}

/// Initializes a ring over caller memory: `user_page` (the 4 KiB
/// `perf_event_mmap_page`, 8-aligned) and `nr_chunks` data chunks of
/// `4096 << order` bytes each (`chunks`, an array of pointers; NULL if
/// `nr_chunks` is 0). The ring zeroes the pages and fills the user page.
/// `config` NULL means all defaults.
///
/// Returns 0, `-EINVAL` for a NULL or misaligned `ring` or `user_page`, a
/// NULL `chunks` with chunks, a chunk count that is not a power of two,
/// an order above 20, unknown flags or reserved fields, or `-EBUSY` if
/// `ring` is already initialized.
///
/// # Safety
/// `ring` must be valid for writes of `sizeof(struct perfaux_ring)` bytes and
/// not move until `perfaux_ring_fini`; the user page, the chunk array and
/// the chunks must stay valid (and be used by nothing but this ring and its
/// consumer) until then; `config`, if not NULL, must be readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_ring_init(
    ring: *mut perfaux_ring,
    user_page: *mut c_void,
    chunks: *const *mut c_void,
    nr_chunks: usize,
    order: u32,
    config: *const perfaux_ring_config,
) -> c_int {
    if !usable(ring) || !usable(user_page.cast::<PerfEventMmapPage>()) || order > 20 {
        return Error::Invalid.errno();
    }
    // SAFETY: `ring` is valid for reads (the caller's contract).
    if unsafe { ring_ref(ring) }.is_some() {
        return Error::Busy.errno();
    }
    // SAFETY: NULL or readable (the caller's contract).
    let config = unsafe { read_in(config) }.unwrap_or(perfaux_ring_config {
        flags: 0,
        reserved: 0,
        watermark: 0,
        wakeup: NO_WAKEUP,
    });
    if config.flags & !(PERFAUX_RING_OVERWRITE | PERFAUX_RING_BACKWARD) != 0 || config.reserved != 0
    {
        return Error::Invalid.errno();
    }
    // SAFETY: the chunk array contract is the caller's.
    let Some(chunks) = (unsafe { chunk_slice(chunks, nr_chunks) }) else {
        return Error::Invalid.errno();
    };
    let b = ring.cast::<RingBox>();
    // SAFETY: `b` is valid, aligned storage for a RingBox (asserted size and
    // alignment, the caller's contract). The wakeup is written first; the
    // ring refers to it in place, where it stays (the storage does not move
    // until fini).
    unsafe {
        addr_of_mut!((*b).live).write(0);
        addr_of_mut!((*b).wakeup).write(CWakeup(config.wakeup));
    }
    // SAFETY: just written; the reference lives as long as the storage.
    let wakeup: &'static CWakeup = unsafe { &*addr_of!((*b).wakeup) };
    let ring_config = RingConfig {
        overwrite: config.flags & PERFAUX_RING_OVERWRITE != 0,
        backward: config.flags & PERFAUX_RING_BACKWARD != 0,
        watermark: config.watermark,
        wakeup: Some(wakeup),
    };
    // SAFETY: the pages are valid and exclusive to this ring and its
    // consumer until fini (the caller's contract); the ring checks the rest.
    match unsafe { Ring::new(user_page.cast(), chunks, order, ring_config) } {
        Ok(r) => {
            // SAFETY: valid storage (above); the live word goes last.
            unsafe {
                addr_of_mut!((*b).ring).write(r);
                addr_of_mut!((*b).live).write(RING_LIVE);
            }
            0
        }
        Err(e) => e.errno(),
    }
}

/// Tears a ring down (its memory is the caller's again). No output handle
/// may be open on it. Returns 0, or `-EINVAL` if `ring` is not an
/// initialized ring.
///
/// # Safety
/// `ring` must be NULL or point to `struct perfaux_ring` storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_ring_fini(ring: *mut perfaux_ring) -> c_int {
    // SAFETY: `ring` is NULL or `struct perfaux_ring` storage (this function's `# Safety`),
    // which is what `ring_ref` needs.
    if unsafe { ring_ref(ring) }.is_none() {
        return Error::Invalid.errno();
    }
    let b = ring.cast::<RingBox>();
    // SAFETY: live, so a RingBox is there; dropped once, then marked dead.
    unsafe {
        ptr::drop_in_place(addr_of_mut!((*b).ring));
        addr_of_mut!((*b).live).write(0);
    }
    0
}

/// The engine's view of a C output event; `None` if it is malformed.
pub(crate) fn fixed_event(e: &perfaux_output_event) -> Option<FixedEvent> {
    let ids = sample_type::TID
        | sample_type::TIME
        | sample_type::ID
        | sample_type::STREAM_ID
        | sample_type::CPU
        | sample_type::IDENTIFIER;
    if e.reserved != 0
        || e.sample_id.reserved != 0
        || e.sample_id.sample_type & !sample_type::KNOWN != 0
    {
        return None;
    }
    let s = e.sample_id;
    Some(FixedEvent {
        id: e.id,
        sample_id: (e.has_sample_id != 0).then_some(SampleId {
            sample_type: s.sample_type & ids,
            pid: s.pid,
            tid: s.tid,
            time: s.time,
            id: s.id,
            stream_id: s.stream_id,
            cpu: s.cpu,
        }),
    })
}

/// Reserves `size` bytes (a whole record, header included) in `ring` and
/// opens `handle` on them (`perf_output_begin`). `event` (NULL: id 0, no
/// trailer) names the event for the `PERF_RECORD_LOST` that goes first
/// when records were dropped. May be called from any context of the
/// ring's CPU, nested (task, IRQ, NMI).
///
/// Returns 0, or `-ENOSPC` when the ring is paused or full (a lost record
/// is counted), `-EINVAL` for `size` 0 or above 65535, a bad `ring`,
/// `handle` or `event`, `-EBUSY` if `handle` is open already.
///
/// # Safety
/// `handle` must be valid for writes of `sizeof(struct perfaux_output_handle)`
/// bytes and not move until `perfaux_output_end`; `ring` NULL or a ring's
/// storage; `event` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_output_begin(
    handle: *mut perfaux_output_handle,
    ring: *mut perfaux_ring,
    size: usize,
    event: *const perfaux_output_event,
) -> c_int {
    if !usable(handle) {
        return Error::Invalid.errno();
    }
    // SAFETY: `handle` is NULL or `struct perfaux_output_handle` storage (this function's `#
    // Safety`), which is what `handle_mut` needs.
    if unsafe { handle_mut(handle) }.is_some() {
        return Error::Busy.errno();
    }
    let h = handle.cast::<HandleBox>();
    // SAFETY: `ring` is NULL or `struct perfaux_ring` storage (this function's `# Safety`),
    // which is what `ring_ref` needs.
    let Some(r) = (unsafe { ring_ref(ring) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: NULL or readable (the caller's contract).
    let event = unsafe { read_in(event) }.unwrap_or_default();
    let Some(mut source) = fixed_event(&event) else {
        return Error::Invalid.errno();
    };
    match r.begin(size, &mut source) {
        Ok(out) => {
            // SAFETY: valid storage; the live word goes last.
            unsafe {
                addr_of_mut!((*h).handle).write(out);
                addr_of_mut!((*h).live).write(HANDLE_LIVE);
            }
            0
        }
        Err(e) => e.errno(),
    }
}

/// The open handle at `p`, if it is one.
///
/// # Safety
/// `p` must be NULL or point to `struct perfaux_output_handle` storage.
unsafe fn handle_mut<'a>(
    p: *mut perfaux_output_handle,
) -> Option<&'a mut OutputHandle<'static, 'static, NoHook>> {
    // SAFETY: `p` is NULL or output handle storage (this function's
    // `# Safety`), which `live_box` needs; the live word says
    // `perfaux_output_begin` wrote it and `end` has not consumed it; the C
    // contract keeps one user of a handle at a time.
    unsafe { live_box::<_, HandleBox>(p, HANDLE_LIVE).map(|h| &mut (*h).handle) }
}

/// Copies `len` bytes into the record (`perf_output_copy`). Returns how
/// many were **not** copied (0, or what would have gone past the
/// reservation), or `-EINVAL` for a handle that is not open or NULL
/// `bytes` with a non-zero `len`.
///
/// # Safety
/// `handle` NULL or handle storage; `bytes` readable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_output_copy(
    handle: *mut perfaux_output_handle,
    bytes: *const c_void,
    len: usize,
) -> isize {
    // SAFETY: `handle` is NULL or `struct perfaux_output_handle` storage (this function's `#
    // Safety`), which is what `handle_mut` needs.
    let Some(h) = (unsafe { handle_mut(handle) }) else {
        return Error::Invalid.errno() as isize;
    };
    if len == 0 {
        return 0;
    }
    if bytes.is_null() || len > isize::MAX as usize {
        return Error::Invalid.errno() as isize;
    }
    // SAFETY: non-null, readable for `len` bytes (the caller's contract);
    // ring memory is not C's, so they do not overlap.
    let src = unsafe { core::slice::from_raw_parts(bytes.cast::<u8>(), len) };
    h.copy(src) as isize
}

/// Skips `len` bytes of the record, leaving them as they are
/// (`perf_output_skip`). Returns how many were **not** skipped, or
/// `-EINVAL` for a handle that is not open.
///
/// # Safety
/// `handle` NULL or handle storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_output_skip(
    handle: *mut perfaux_output_handle,
    len: usize,
) -> isize {
    // SAFETY: `handle` is NULL or `struct perfaux_output_handle` storage (this function's `#
    // Safety`), which is what `handle_mut` needs.
    let Some(h) = (unsafe { handle_mut(handle) }) else {
        return Error::Invalid.errno() as isize;
    };
    h.skip(len).min(isize::MAX as usize) as isize
}

/// Publishes the record and closes the handle (`perf_output_end`); the
/// outermost writer moves `data_head` and may wake the consumer. Returns 0,
/// or `-EINVAL` for a handle that is not open.
///
/// # Safety
/// `handle` NULL or handle storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_output_end(handle: *mut perfaux_output_handle) -> c_int {
    // SAFETY: `handle` is NULL or `struct perfaux_output_handle` storage (this function's `#
    // Safety`), which is what `handle_mut` needs.
    if unsafe { handle_mut(handle) }.is_none() {
        return Error::Invalid.errno();
    }
    let h = handle.cast::<HandleBox>();
    // SAFETY: live (checked): the handle is moved out once and the storage
    // marked closed before it is ended, so nothing can end it twice.
    unsafe {
        addr_of_mut!((*h).live).write(0);
        addr_of!((*h).handle).read().end();
    }
    0
}

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
