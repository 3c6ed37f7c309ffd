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
use perfaux::ring::{FixedEvent, Ring, RingConfig, SampleId, Wakeup};

use crate::storage::{Hold, Users, live_box, read_in, usable};

mod consumer;
mod output;

pub use consumer::*;
pub use output::*;

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
    /// The AUX areas, PT CPU objects and events that write into the ring.
    users: Users,
    /// The callback `ring` refers to (it lives in the same storage).
    wakeup: CWakeup,
    ring: Ring<'static>,
}

const _: () = {
    assert!(align_of::<perfaux_ring>() == PERFAUX_OBJECT_ALIGN);
    assert!(size_of::<perfaux_ring>() == PERFAUX_RING_SIZE);
    assert!(size_of::<RingBox>() <= size_of::<perfaux_ring>());
    assert!(align_of::<RingBox>() <= align_of::<perfaux_ring>());
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

/// The initialized ring at `p` with a hold on it, for an object that keeps
/// referring to it: the ring's `fini` is refused until the hold is dropped.
///
/// # Safety
/// As [`ring_ref`].
pub(crate) unsafe fn ring_hold<'a>(
    p: *const perfaux_ring,
) -> Option<(&'a Ring<'static>, Hold<'a>)> {
    // SAFETY: as `ring_ref` (this function's `# Safety`): the live word says
    // a RingBox is there.
    unsafe { live_box::<_, RingBox>(p, RING_LIVE).map(|b| (&(*b).ring, (*b).users.hold())) }
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
        addr_of_mut!((*b).users).write(Users::new());
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

/// Tears a ring down: its memory is the caller's again. Returns 0,
/// `-EBUSY` (and nothing changes) while anything still refers to the ring:
/// an AUX area attached to it, a PT CPU object or an event writing into
/// it, or an open output handle (tear those down first, as the kernel
/// keeps a buffer while `rb->refcount` holds it), or `-EINVAL` if `ring`
/// is not an initialized ring. A consumer reads the memory, not the ring:
/// it is not counted, and must be torn down before the memory is freed.
///
/// # Safety
/// `ring` must be NULL or point to `struct perfaux_ring` storage; no other
/// call may use the ring meanwhile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_ring_fini(ring: *mut perfaux_ring) -> c_int {
    // SAFETY: `ring` is NULL or `struct perfaux_ring` storage (this function's `# Safety`),
    // which is what `live_box` needs.
    let Some(b) = (unsafe { live_box::<_, RingBox>(ring, RING_LIVE) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: live (checked), so a RingBox is there.
    let (users, r) = unsafe { (&(*b).users, &(*b).ring) };
    if users.in_use() || r.has_writer() {
        return Error::Busy.errno();
    }
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
