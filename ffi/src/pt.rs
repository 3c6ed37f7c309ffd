// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PT-style PMU in C, split as Intel PT's driver is: a per-CPU object
//! (`struct perfaux_pt_cpu`: the software tracer, the PMU callbacks
//! add/del/start/stop, `snapshot_aux` into a C sink such as a kernel's
//! `perf_output_handle`, the ToPA PMI handler and the trace events that feed
//! the tracer) and a per-buffer object (`struct perfaux_pt_buffer`: the ToPA
//! tables over one AUX buffer's pages, made by `setup_aux`, ended by
//! `free_aux`). The CPU object reaches a buffer only through the AUX
//! transaction it holds: the `begin` callback hands it out, as
//! `perf_aux_output_begin` returns `rb->aux_priv`.
//!
//! The transactions are either a perfaux ring's AUX area
//! (`perfaux_pt_cpu_init_area`) or C's (`perfaux_pt_cpu_init`: a kernel
//! module's `perf_aux_output_begin/end`).

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};
use core::ptr::{self, NonNull, addr_of, addr_of_mut};

use perfaux::abi::{PAGE_SIZE, PerfEventAttr};
use perfaux::aux::{AreaOutput, AuxOutput, AuxTransaction};
use perfaux::pmu::{EventInfo, Pmu, ef};
use perfaux::pt::buffer::PtBuffer;
use perfaux::pt::packet::ExecMode;
use perfaux::pt::pmu::PtPmu;
use perfaux::pt::stream::TraceEvent;
use perfaux::pt::topa::TopaTable;
use perfaux::pt::tracer::SoftTracer;
use perfaux::{Error, Result, warn_on_once};

use crate::aux::{area_ref, perfaux_aux_area};
use crate::platform::{CPhysMap, CPlatform, perfaux_phys_map, perfaux_platform};
use crate::ring::{fixed_event, perfaux_output_event, perfaux_ring, ring_ref};
use crate::sink::{CSink, perfaux_sink};
use crate::storage::{live_box, read_in, usable};

/// Words of `struct perfaux_pt_cpu`.
pub const PERFAUX_PT_CPU_WORDS: usize = 256;
/// Size in bytes of `struct perfaux_pt_cpu` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_PT_CPU_SIZE: usize = PERFAUX_PT_CPU_WORDS * 8;
/// Words of `struct perfaux_pt_buffer`.
pub const PERFAUX_PT_BUFFER_WORDS: usize = 16;
/// Size in bytes of `struct perfaux_pt_buffer` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_PT_BUFFER_SIZE: usize = PERFAUX_PT_BUFFER_WORDS * 8;

/// `PERF_EF_START` (add: start right away).
pub const PERFAUX_EF_START: u32 = 0x01;
/// `PERF_EF_RELOAD`.
pub const PERFAUX_EF_RELOAD: u32 = 0x02;
/// `PERF_EF_UPDATE` (stop/del: publish what was traced).
pub const PERFAUX_EF_UPDATE: u32 = 0x04;
/// `PERF_EF_PAUSE` (stop: pause the trace, `aux_pause`).
pub const PERFAUX_EF_PAUSE: u32 = 0x08;
/// `PERF_EF_RESUME` (start: resume the trace, `aux_resume`).
pub const PERFAUX_EF_RESUME: u32 = 0x10;

const _: () = assert!(
    PERFAUX_EF_START == ef::START
        && PERFAUX_EF_RELOAD == ef::RELOAD
        && PERFAUX_EF_UPDATE == ef::UPDATE
        && PERFAUX_EF_PAUSE == ef::PAUSE
        && PERFAUX_EF_RESUME == ef::RESUME
);

/// `perfaux_trace_event.kind`: a conditional branch (Jcc, LOOP, JRCXZ), a
/// TNT bit: `PERFAUX_TRACE_TAKEN` in `flags` if taken; `target` is the next
/// instruction (the target if taken, else the one after the branch).
pub const PERFAUX_TRACE_CONDITIONAL: u32 = 1;
/// A direct near JMP to `target` (no packet).
pub const PERFAUX_TRACE_JUMP: u32 = 2;
/// A near CALL to `target` returning to `from` (no packet; a TIP with
/// `PERFAUX_TRACE_INDIRECT`); the return address is kept for return
/// compression.
pub const PERFAUX_TRACE_CALL: u32 = 3;
/// A near RET to `target` (a taken TNT bit if compressed, else a TIP).
pub const PERFAUX_TRACE_RETURN: u32 = 4;
/// An indirect near JMP or a far transfer (IRET, SYSRET) to `target` (TIP).
pub const PERFAUX_TRACE_INDIRECT_JUMP: u32 = 5;
/// An asynchronous event (interrupt, exception, PMI) with `from` the next
/// instruction of the interrupted code: FUP(`from`), then TIP(`target`) with
/// `PERFAUX_TRACE_HAS_TARGET` (a traced handler), else TIP.PGD (the handler
/// is not traced: packet generation stops).
pub const PERFAUX_TRACE_ASYNC: u32 = 6;
/// Packet generation (re)starts at `target` (TIP.PGE).
pub const PERFAUX_TRACE_ENABLE: u32 = 7;
/// Packet generation stops synchronously, at a branch into code not traced
/// (TIP.PGD, with `target` if `PERFAUX_TRACE_HAS_TARGET`).
pub const PERFAUX_TRACE_DISABLE: u32 = 8;
/// The execution mode changes (MODE.Exec): `value` 16, 32 or 64.
pub const PERFAUX_TRACE_MODE: u32 = 9;
/// The TSC reads `value` (a TSC packet if TSC packets are on).
pub const PERFAUX_TRACE_TIME: u32 = 10;
/// The core:bus ratio is `value`, 0 to 255 (CBR).
pub const PERFAUX_TRACE_FREQUENCY: u32 = 11;
/// A mini time counter tick with CTC bits `value`, 0 to 255 (MTC).
pub const PERFAUX_TRACE_TICK: u32 = 12;
/// Padding (PAD).
pub const PERFAUX_TRACE_PAD: u32 = 13;
/// The tracer lost packets (OVF).
pub const PERFAUX_TRACE_OVERFLOW: u32 = 14;

/// `perfaux_trace_event.flags`: the conditional branch was taken.
pub const PERFAUX_TRACE_TAKEN: u32 = 1;
/// `perfaux_trace_event.flags`: the call is indirect.
pub const PERFAUX_TRACE_INDIRECT: u32 = 2;
/// `perfaux_trace_event.flags`: `target` is given (ASYNC, DISABLE).
pub const PERFAUX_TRACE_HAS_TARGET: u32 = 4;

/// One thing that happened on the traced CPU, for `perfaux_pt_trace`.
/// Fields a kind does not use must be zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct perfaux_trace_event {
    /// `PERFAUX_TRACE_*`.
    pub kind: u32,
    /// `PERFAUX_TRACE_TAKEN`, `PERFAUX_TRACE_INDIRECT`,
    /// `PERFAUX_TRACE_HAS_TARGET`, as the kind allows.
    pub flags: u32,
    /// Where execution goes next (see the kind).
    pub target: u64,
    /// The interrupted code's next instruction (ASYNC) or the return
    /// address (CALL).
    pub from: u64,
    /// The TSC (TIME), mode (MODE), ratio (FREQUENCY) or CTC bits (TICK).
    pub value: u64,
}

const _: () = assert!(core::mem::size_of::<perfaux_trace_event>() == 32);
const _: () = assert!(core::mem::offset_of!(perfaux_trace_event, kind) == 0);
const _: () = assert!(core::mem::offset_of!(perfaux_trace_event, flags) == 4);
const _: () = assert!(core::mem::offset_of!(perfaux_trace_event, target) == 8);
const _: () = assert!(core::mem::offset_of!(perfaux_trace_event, from) == 16);
const _: () = assert!(core::mem::offset_of!(perfaux_trace_event, value) == 24);

/// The AUX transactions of the event running on one CPU, run by C (a
/// kernel's: `begin` is `perf_aux_output_begin` on the CPU's handle, `flag`
/// `perf_aux_output_flag`, `end` `perf_aux_output_end` after setting
/// `handle->head` when `has_head`). Called from the PMU callbacks and the
/// PMI on that CPU, never nested.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_aux_ops {
    /// Opens a transaction; fills the buffer's PT object (what `setup_aux`
    /// made: `rb->aux_priv`), its head, the bytes it may write, and the
    /// position where the consumer wants a wakeup; 0 or a negative errno.
    /// The buffer must stay valid until the matching `end` returns, and no
    /// other transaction on it may be open meanwhile.
    pub begin: Option<
        unsafe extern "C" fn(
            ctx: *mut c_void,
            buffer: *mut *const perfaux_pt_buffer,
            head: *mut u64,
            space: *mut u64,
            wakeup: *mut u64,
        ) -> c_int,
    >,
    /// Adds `PERF_AUX_FLAG_*` bits to the open transaction.
    pub flag: Option<unsafe extern "C" fn(ctx: *mut c_void, flags: u64)>,
    /// Ends it with `size` new bytes (in overwrite mode, after moving the
    /// head to `head` when `has_head` is 1). The buffer may be freed after.
    pub end: Option<unsafe extern "C" fn(ctx: *mut c_void, size: u64, has_head: c_int, head: u64)>,
    /// Their argument.
    pub ctx: *mut c_void,
}

/// Storage of the PT driver of one CPU. Opaque.
#[repr(C)]
pub struct perfaux_pt_cpu {
    /// Opaque.
    pub opaque: [u64; PERFAUX_PT_CPU_WORDS],
}

/// Storage of the PT driver's state of one AUX buffer (what `setup_aux`
/// returns). Opaque.
#[repr(C)]
pub struct perfaux_pt_buffer {
    /// Opaque.
    pub opaque: [u64; PERFAUX_PT_BUFFER_WORDS],
}

/// What `struct perfaux_pt_buffer` holds.
#[repr(C)]
struct BufferBox {
    live: u64,
    buffer: PtBuffer<'static>,
}

const BUFFER_LIVE: u64 = 0x7065_7266_7074_6266; // "perfptbf"

const _: () = {
    assert!(size_of::<BufferBox>() <= size_of::<perfaux_pt_buffer>());
    assert!(align_of::<BufferBox>() <= align_of::<perfaux_pt_buffer>());
};

/// The initialized PT buffer at `p`, if it is one.
///
/// # Safety
/// `p` must be NULL or point to `struct perfaux_pt_buffer` storage.
unsafe fn buffer_ref<'a>(p: *const perfaux_pt_buffer) -> Option<&'a BufferBox> {
    // SAFETY: the caller's contract; live: initialized and not torn down.
    unsafe { live_box::<_, BufferBox>(p, BUFFER_LIVE).map(|b| &*b) }
}

/// Transactions C runs.
struct COps(perfaux_aux_ops);

// SAFETY: `perfaux_aux_ops`'s contract: the buffer `begin` fills stays valid
// until the matching `end` and is held by one transaction at a time; the
// live check below refuses anything that is not an initialized buffer.
unsafe impl AuxOutput for COps {
    type Buffer = PtBuffer<'static>;

    fn begin(&self) -> Result<(AuxTransaction, NonNull<PtBuffer<'static>>)> {
        let (Some(begin), Some(end)) = (self.0.begin, self.0.end) else {
            return Err(Error::NotSupported);
        };
        let mut t = AuxTransaction::default();
        let mut buffer: *const perfaux_pt_buffer = ptr::null();
        // SAFETY: the registered callback, with pointers to locals.
        let r = unsafe {
            begin(
                self.0.ctx,
                &mut buffer,
                &mut t.head,
                &mut t.space,
                &mut t.wakeup,
            )
        };
        if r != 0 {
            return Err(Error::from_errno(r).unwrap_or(Error::NoSpace));
        }
        // SAFETY: NULL or what C's setup_aux initialized (the contract);
        // the live word tells which.
        match unsafe { buffer_ref(buffer) } {
            Some(b) => Ok((t, NonNull::from(&b.buffer))),
            None => {
                warn_on_once!(true, "AUX begin gave no initialized PT buffer");
                // SAFETY: the registered callback: the transaction opened
                // above ends, with nothing written.
                unsafe { end(self.0.ctx, 0, 0, 0) };
                Err(Error::Invalid)
            }
        }
    }
    fn flag(&self, flags: u64) {
        if let Some(f) = self.0.flag {
            // SAFETY: the registered callback.
            unsafe { f(self.0.ctx, flags) }
        }
    }
    fn end(&self, size: u64, snapshot_head: Option<u64>) {
        if let Some(f) = self.0.end {
            let (has, head) = snapshot_head.map_or((0, 0), |h| (1, h));
            // SAFETY: the registered callback.
            unsafe { f(self.0.ctx, size, has, head) }
        }
    }
}

/// The transactions of a C PT driver.
enum PtOutput {
    Area(AreaOutput<'static, 'static, PtBuffer<'static>>),
    Ops(COps),
}

// SAFETY: delegates to two implementations that uphold the contract.
unsafe impl AuxOutput for PtOutput {
    type Buffer = PtBuffer<'static>;

    fn begin(&self) -> Result<(AuxTransaction, NonNull<PtBuffer<'static>>)> {
        match self {
            PtOutput::Area(a) => a.begin(),
            PtOutput::Ops(o) => o.begin(),
        }
    }
    fn flag(&self, flags: u64) {
        match self {
            PtOutput::Area(a) => a.flag(flags),
            PtOutput::Ops(o) => o.flag(flags),
        }
    }
    fn end(&self, size: u64, snapshot_head: Option<u64>) {
        match self {
            PtOutput::Area(a) => a.end(size, snapshot_head),
            PtOutput::Ops(o) => o.end(size, snapshot_head),
        }
    }
}

/// What `struct perfaux_pt_cpu` holds. The tracer and the PMU refer to the
/// fields before them in place (the storage does not move).
#[repr(C)]
pub(crate) struct CpuBox {
    live: u64,
    phys: CPhysMap,
    platform: CPlatform,
    tracer: SoftTracer<'static>,
    pmu: PtPmu<'static, PtOutput>,
}

const CPU_LIVE: u64 = 0x7065_7266_7074_6370; // "perfptcp"

const _: () = {
    assert!(size_of::<CpuBox>() <= size_of::<perfaux_pt_cpu>());
    assert!(align_of::<CpuBox>() <= align_of::<perfaux_pt_cpu>());
};

/// The initialized PT CPU object at `p`, if it is one.
///
/// # Safety
/// `p` must be NULL or point to `struct perfaux_pt_cpu` storage.
pub(crate) unsafe fn cpu_ref<'a>(p: *const perfaux_pt_cpu) -> Option<&'a CpuBox> {
    // SAFETY: the caller's contract; live: initialized and not torn down.
    unsafe { live_box::<_, CpuBox>(p, CPU_LIVE).map(|b| &*b) }
}

/// Builds the BufferBox in `buf` over `pages`, its tables in `tables`.
///
/// # Safety
/// `buf` valid storage that does not move; `tables` valid for writes of
/// `nr_tables` 4 KiB pages, 4 KiB aligned, and `pages` valid for reads and
/// writes, for the buffer's life (until `perfaux_pt_buffer_fini`).
unsafe fn build_buffer(
    buf: *mut perfaux_pt_buffer,
    tables: *mut c_void,
    nr_tables: usize,
    pages: &'static [*mut u8],
    overwrite: bool,
    phys: *const perfaux_phys_map,
) -> c_int {
    if !usable(buf) || tables.is_null() || (tables as usize) % PAGE_SIZE != 0 || nr_tables == 0 {
        return Error::Invalid.errno();
    }
    if nr_tables > isize::MAX as usize / PAGE_SIZE {
        return Error::Invalid.errno();
    }
    // SAFETY: `buf` is NULL or `struct perfaux_pt_buffer` storage (this function's `# Safety`),
    // which is what `buffer_ref` needs.
    if unsafe { buffer_ref(buf) }.is_some() {
        return Error::Busy.errno();
    }
    // SAFETY: NULL or readable (the caller's contract).
    let Some(phys) = (unsafe { CPhysMap::read(phys) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: the table pages are the caller's for the buffer's life;
    // zeroed first, so the slice holds valid (all-zero) tables.
    let tables: &'static mut [TopaTable] = unsafe {
        ptr::write_bytes(tables.cast::<u8>(), 0, nr_tables * PAGE_SIZE);
        core::slice::from_raw_parts_mut(tables.cast::<TopaTable>(), nr_tables)
    };
    // SAFETY: the pages are valid for the buffer's life and written only by
    // the tracer of a CPU object holding its transaction (the contract).
    let buffer = match unsafe { PtBuffer::new(tables, pages, overwrite, &phys) } {
        Ok(b) => b,
        Err(e) => return e.errno(),
    };
    let b = buf.cast::<BufferBox>();
    // SAFETY: valid storage for a BufferBox (asserted, the contract); the
    // live word goes last.
    unsafe {
        addr_of_mut!((*b).buffer).write(buffer);
        addr_of_mut!((*b).live).write(BUFFER_LIVE);
    }
    0
}

/// Regions one ToPA table page holds (the last of its 507 entries links to
/// the next table).
pub const PERFAUX_PT_REGIONS_PER_TABLE: usize = 506;
const _: () = assert!(PERFAUX_PT_REGIONS_PER_TABLE == perfaux::pt::topa::REGIONS_PER_TABLE);

/// The ToPA table pages `perfaux_pt_buffer_init` needs at most for
/// `nr_pages` AUX pages (one region per page when none are contiguous);
/// the `PERFAUX_PT_TABLES_FOR_PAGES(nr_pages)` macro gives the same
/// number as a constant expression.
#[unsafe(no_mangle)]
pub extern "C" fn perfaux_pt_tables_for_pages(nr_pages: usize) -> usize {
    perfaux::pt::topa::tables_for_pages(nr_pages)
}

/// Initializes the PT state of one AUX buffer (`setup_aux`): `nr_pages`
/// 4 KiB pages (`pages`, one pointer per page, a power of two), overwrite
/// (snapshot) mode if `overwrite` is 1, its ToPA tables in `tables`
/// (`nr_tables` 4 KiB-aligned pages, `perfaux_pt_tables_for_pages(nr_pages)`
/// of them at most), physical
/// addresses through `phys` (NULL: identity; a kernel passes
/// `virt_to_phys`/`phys_to_virt`, the same map as the CPU objects').
///
/// Returns 0, `-EINVAL` for bad arguments (NULL or misaligned storage, a
/// page count that is not a power of two, a NULL page, one of the two phys
/// callbacks only), `-ENOMEM` if the tables are too few, `-EBUSY` if `buf`
/// is initialized.
///
/// # Safety
/// `buf` valid for writes of `sizeof(struct perfaux_pt_buffer)` bytes and
/// not moved until `perfaux_pt_buffer_fini`; `tables`, the page array and
/// the pages valid for as long, the pages written by nothing but the tracer
/// of the CPU object holding the buffer's transaction; `phys` NULL or
/// readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_buffer_init(
    buf: *mut perfaux_pt_buffer,
    tables: *mut c_void,
    nr_tables: usize,
    pages: *const *mut c_void,
    nr_pages: usize,
    overwrite: c_int,
    phys: *const perfaux_phys_map,
) -> c_int {
    if !usable(pages)
        || !nr_pages.is_power_of_two()
        || nr_pages > isize::MAX as usize / size_of::<*mut u8>()
        || !(0..=1).contains(&overwrite)
    {
        return Error::Invalid.errno();
    }
    // SAFETY: `nr_pages` readable pointers that outlive the buffer.
    let pages: &'static [*mut u8] =
        unsafe { core::slice::from_raw_parts(pages.cast::<*mut u8>(), nr_pages) };
    // SAFETY: the caller's contract, as `build_buffer` states it.
    unsafe { build_buffer(buf, tables, nr_tables, pages, overwrite == 1, phys) }
}

/// Initializes the PT state of a perfaux AUX `area`'s buffer (its pages,
/// its mode), tables and `phys` as for `perfaux_pt_buffer_init`. Returns 0,
/// `-EINVAL` (`area` not initialized, bad arguments), `-ENOMEM` or `-EBUSY`.
///
/// # Safety
/// As `perfaux_pt_buffer_init`; `area` initialized and outliving the buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_buffer_init_area(
    buf: *mut perfaux_pt_buffer,
    tables: *mut c_void,
    nr_tables: usize,
    area: *const perfaux_aux_area,
    phys: *const perfaux_phys_map,
) -> c_int {
    // SAFETY: `area` is NULL or `struct perfaux_aux_area` storage (this function's `# Safety`),
    // which is what `area_ref` needs.
    let Some(area) = (unsafe { area_ref(area) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: an area's pages are valid for its life, which outlasts the
    // buffer (the contract); only the tracer writes them.
    unsafe {
        build_buffer(
            buf,
            tables,
            nr_tables,
            area.pages(),
            area.is_overwrite(),
            phys,
        )
    }
}

/// Ends the PT state of one AUX buffer (`free_aux`). Returns 0, `-EBUSY`
/// (and warns: the kernel never does this) while a transaction holds it,
/// `-EINVAL` if `buf` is not an initialized buffer.
///
/// # Safety
/// `buf` NULL or buffer storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_buffer_fini(buf: *mut perfaux_pt_buffer) -> c_int {
    // SAFETY: `buf` is NULL or `struct perfaux_pt_buffer` storage (this function's `# Safety`),
    // which is what `buffer_ref` needs.
    let Some(b) = (unsafe { buffer_ref(buf) }) else {
        return Error::Invalid.errno();
    };
    if warn_on_once!(
        b.buffer.is_held(),
        "free_aux of a PT buffer a transaction holds"
    ) {
        return Error::Busy.errno();
    }
    let b = buf.cast::<BufferBox>();
    // SAFETY: live: marked dead, then dropped once.
    unsafe {
        addr_of_mut!((*b).live).write(0);
        ptr::drop_in_place(addr_of_mut!((*b).buffer));
    }
    0
}

/// Builds the CpuBox in `cpu`: phys map, platform and tracer in place, then
/// the PMU over `output`.
///
/// # Safety
/// `cpu` valid storage that does not move; `phys` and `platform` NULL or
/// readable.
unsafe fn build_cpu(
    cpu: *mut perfaux_pt_cpu,
    phys: *const perfaux_phys_map,
    platform: *const perfaux_platform,
    psb_period: u64,
    output: impl FnOnce(&'static CPlatform) -> Result<PtOutput>,
) -> c_int {
    if !usable(cpu) || !(256..=1 << 20).contains(&psb_period) {
        return Error::Invalid.errno();
    }
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    if unsafe { cpu_ref(cpu) }.is_some() {
        return Error::Busy.errno();
    }
    // SAFETY: NULL or readable (the caller's contract).
    let Some(phys) = (unsafe { CPhysMap::read(phys) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: NULL or readable (the caller's contract).
    let platform = unsafe { read_in(platform) }.unwrap_or(perfaux_platform {
        cpu: None,
        clock: None,
        current_task: None,
        irq_save: None,
        irq_restore: None,
        ctx: ptr::null_mut(),
    });
    let b = cpu.cast::<CpuBox>();
    // SAFETY: valid storage for a CpuBox (asserted, the contract); fields
    // are written in dependency order and stay in place.
    unsafe {
        addr_of_mut!((*b).live).write(0);
        addr_of_mut!((*b).phys).write(phys);
        addr_of_mut!((*b).platform).write(CPlatform(platform));
    }
    // SAFETY: just written, living as long as the storage.
    let (phys, platform): (&'static CPhysMap, &'static CPlatform) =
        unsafe { (&*addr_of!((*b).phys), &*addr_of!((*b).platform)) };
    let output = match output(platform) {
        Ok(o) => o,
        Err(e) => return e.errno(),
    };
    // SAFETY: as above.
    unsafe { addr_of_mut!((*b).tracer).write(SoftTracer::new(phys, psb_period)) };
    // SAFETY: as above.
    let tracer: &'static SoftTracer<'static> = unsafe { &*addr_of!((*b).tracer) };
    // SAFETY: valid storage; the live word goes last.
    unsafe {
        addr_of_mut!((*b).pmu).write(PtPmu::with_output(tracer, phys, output));
        addr_of_mut!((*b).live).write(CPU_LIVE);
    }
    0
}

/// Initializes the PT driver of one CPU tracing into a perfaux AUX `area`
/// (initialized over `ring`'s user page) whose PT state is `buffer`
/// (`perfaux_pt_buffer_init_area` over that area), writing
/// `PERF_RECORD_AUX` for `event` into `ring`, its trailer stamped by
/// `platform` (NULL: as `event` gives it). A PSB+ is written every
/// `psb_period` bytes (256 to 1 MiB). `phys` NULL: identity.
///
/// Returns 0, `-EINVAL` for bad arguments (NULL or misaligned storage, a
/// ring, area or buffer not initialized, a buffer over other pages, a
/// malformed event, one of the two phys callbacks only), `-EBUSY` if `cpu`
/// is initialized.
///
/// # Safety
/// `cpu` valid for writes of `sizeof(struct perfaux_pt_cpu)` bytes and not
/// moved until `perfaux_pt_cpu_fini`; `ring`, `area` and `buffer`
/// initialized and outliving it; the pointers to structs NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_cpu_init_area(
    cpu: *mut perfaux_pt_cpu,
    buffer: *const perfaux_pt_buffer,
    area: *const perfaux_aux_area,
    ring: *const perfaux_ring,
    event: *const perfaux_output_event,
    platform: *const perfaux_platform,
    phys: *const perfaux_phys_map,
    psb_period: u64,
) -> c_int {
    // SAFETY: `area` is NULL or `struct perfaux_aux_area` storage; `ring` is NULL or `struct
    // perfaux_ring` storage (this function's `# Safety`), which is what `area_ref` and
    // `ring_ref` needs.
    let (Some(area), Some(ring)) = (unsafe { area_ref(area) }, unsafe { ring_ref(ring) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: `buffer` is NULL or `struct perfaux_pt_buffer` storage (this function's `#
    // Safety`), which is what `buffer_ref` needs.
    let Some(buffer) = (unsafe { buffer_ref(buffer) }).map(|b| &b.buffer) else {
        return Error::Invalid.errno();
    };
    if buffer.pages() != area.pages() || buffer.is_overwrite() != area.is_overwrite() {
        return Error::Invalid.errno();
    }
    // SAFETY: NULL or readable (the caller's contract).
    let event = unsafe { read_in(event) }.unwrap_or_default();
    let Some(event) = fixed_event(&event) else {
        return Error::Invalid.errno();
    };
    let stamp = !platform.is_null();
    // SAFETY: the caller's contract, as `build_cpu` states it.
    unsafe {
        build_cpu(cpu, phys, platform, psb_period, |p| {
            let out = AreaOutput::new(area, ring, event, buffer);
            Ok(PtOutput::Area(if stamp {
                out.with_platform(p)
            } else {
                out
            }))
        })
    }
}

/// Initializes the PT driver of one CPU whose AUX transactions C runs
/// through `ops` (a kernel module: `perf_aux_output_begin` on the CPU's
/// handle, for the event added there), each handing out the PT state of
/// the event's buffer (`perfaux_pt_buffer_init`, in `setup_aux`).
/// `psb_period` and `phys` as for `perfaux_pt_cpu_init_area`.
///
/// Returns 0, `-EINVAL` for bad arguments (NULL ops callbacks included),
/// `-EBUSY` if `cpu` is initialized.
///
/// # Safety
/// `cpu` as for `perfaux_pt_cpu_init_area`; `ops` and `phys` NULL or
/// readable; the callbacks keep the `perfaux_aux_ops` contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_cpu_init(
    cpu: *mut perfaux_pt_cpu,
    ops: *const perfaux_aux_ops,
    phys: *const perfaux_phys_map,
    psb_period: u64,
) -> c_int {
    // SAFETY: NULL or readable (the caller's contract).
    let Some(ops) = (unsafe { read_in(ops) })
        .filter(|o| o.begin.is_some() && o.flag.is_some() && o.end.is_some())
    else {
        return Error::Invalid.errno();
    };
    // SAFETY: the caller's contract, as `build_cpu` states it.
    unsafe {
        build_cpu(cpu, phys, ptr::null(), psb_period, |_| {
            Ok(PtOutput::Ops(COps(ops)))
        })
    }
}

/// Tears the PT driver of one CPU down; its event must be off it
/// (`perfaux_pt_del`) first. Returns 0, `-EBUSY` while an AUX transaction
/// is open, `-EINVAL` if `cpu` is not an initialized CPU object.
///
/// # Safety
/// `cpu` NULL or PT CPU storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_cpu_fini(cpu: *mut perfaux_pt_cpu) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    if b.pmu.in_transaction() {
        return Error::Busy.errno();
    }
    let b = cpu.cast::<CpuBox>();
    // SAFETY: live: marked dead, then dropped once (the PMU before what it
    // refers to).
    unsafe {
        addr_of_mut!((*b).live).write(0);
        ptr::drop_in_place(addr_of_mut!((*b).pmu));
        ptr::drop_in_place(addr_of_mut!((*b).tracer));
    }
    0
}

impl CpuBox {
    /// The PMU, for events opened on it.
    pub(crate) fn pmu(&self) -> &dyn Pmu {
        &self.pmu
    }
}

/// The event a PMU callback sees from C that gives none.
pub(crate) fn no_info() -> EventInfo<'static> {
    EventInfo {
        attr: &NO_ATTR,
        id: 0,
        cpu: -1,
        aux_paused: false,
    }
}

/// The attr of a PT event C gives no configuration for (config 0).
static NO_ATTR: PerfEventAttr = PerfEventAttr::new(136);

/// Runs `f` with the event a PMU callback from C sees: an attr with
/// `config`, `hw.aux_paused` as given.
fn with_info<R>(id: u64, config: u64, aux_paused: u32, f: impl FnOnce(&EventInfo<'_>) -> R) -> R {
    let mut attr = PerfEventAttr::new(136);
    attr.config = config;
    f(&EventInfo {
        attr: &attr,
        id,
        cpu: -1,
        aux_paused: aux_paused != 0,
    })
}

fn flags_ok(flags: u32, allowed: u32) -> bool {
    flags & !allowed == 0
}

/// `pt_event_init`'s check of an event's `attr.config` (the Intel PT format
/// bits: `pt`, `tsc`, `noretcomp`, `branch`, `psb_period`; `cyc`, `mtc`,
/// `pwr_evt`, `event`, `notnt`, `ptw` and `fup_on_ptw` are not offered):
/// call it when an event is created. Returns 0, or `-EINVAL` for a
/// configuration Linux's `pt_event_valid` would refuse on this tracer.
#[unsafe(no_mangle)]
pub extern "C" fn perfaux_pt_check_config(attr_config: u64) -> c_int {
    match perfaux::pt::config::PtConfig::from_attr(attr_config) {
        Ok(_) => 0,
        Err(e) => e.errno(),
    }
}

/// `pmu->add`: puts the PT event `event_id` (a kernel's `event->id`),
/// configured by its `attr_config`, on this CPU (one at a time) and, with
/// `PERFAUX_EF_START`, opens an AUX transaction and starts tracing (not if
/// `aux_paused`). An event's first start on this CPU clears the PSB byte
/// counter, so its trace begins with a PSB+ (`pt_config`). Returns 0,
/// `-EBUSY` if an event is on already, `-EINVAL` for a bad `cpu`, flags or
/// configuration, or the error that kept it from starting (`-ENOSPC`: no
/// room in the buffer).
///
/// # Safety
/// `cpu` NULL or PT CPU storage; called on its CPU with interrupts masked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_add(
    cpu: *mut perfaux_pt_cpu,
    flags: u32,
    event_id: u64,
    attr_config: u64,
    aux_paused: u32,
) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_START) || aux_paused > 1 {
        return Error::Invalid.errno();
    }
    match with_info(event_id, attr_config, aux_paused, |i| b.pmu.add(i, flags)) {
        Ok(()) => 0,
        Err(e) => e.errno(),
    }
}

/// `pmu->del`: stops tracing and ends the transaction (a `PERF_RECORD_AUX`
/// or the `end` callback). Returns 0 or `-EINVAL`.
///
/// # Safety
/// As `perfaux_pt_add`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_del(cpu: *mut perfaux_pt_cpu, flags: u32) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_UPDATE) {
        return Error::Invalid.errno();
    }
    b.pmu.del(&no_info(), flags);
    0
}

/// `pmu->start`: starts tracing (a new transaction if none is open), or
/// with `PERFAUX_EF_RESUME` resumes a paused trace (`aux_paused` is the
/// event's `hw.aux_paused` after the change). Returns 0 or `-EINVAL`.
///
/// # Safety
/// As `perfaux_pt_add`; `RESUME` may come from PMI context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_start(
    cpu: *mut perfaux_pt_cpu,
    flags: u32,
    aux_paused: u32,
) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_RELOAD | PERFAUX_EF_RESUME) || aux_paused > 1 {
        return Error::Invalid.errno();
    }
    with_info(0, 0, aux_paused, |i| b.pmu.start(i, flags));
    0
}

/// `pmu->stop`: stops tracing (with `PERFAUX_EF_UPDATE`, ending the
/// transaction), or with `PERFAUX_EF_PAUSE` pauses it. Returns 0 or
/// `-EINVAL`.
///
/// # Safety
/// As `perfaux_pt_add`; `PAUSE` may come from PMI context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_stop(
    cpu: *mut perfaux_pt_cpu,
    flags: u32,
    aux_paused: u32,
) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_UPDATE | PERFAUX_EF_PAUSE) || aux_paused > 1 {
        return Error::Invalid.errno();
    }
    with_info(0, 0, aux_paused, |i| b.pmu.stop(i, flags));
    0
}

/// `pmu->snapshot_aux` (Linux's `pt_event_snapshot_aux`): stops tracing,
/// copies the newest `size` bytes of the buffer, ending at the write
/// position, into `sink`, and restarts tracing if it was on (and not
/// paused). Returns the bytes copied; 0 with no open transaction, a
/// writable buffer, or from inside the driver's own update; `-EFAULT` if
/// the sink took fewer bytes; `-EINVAL` for a bad `cpu` or sink.
///
/// # Safety
/// `cpu` NULL or PT CPU storage; `sink` NULL or readable; called on the PMU's
/// CPU from PMI context or with interrupts masked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_snapshot_aux(
    cpu: *mut perfaux_pt_cpu,
    sink: *const perfaux_sink,
    size: u64,
) -> i64 {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return i64::from(Error::Invalid.errno());
    };
    // SAFETY: NULL or readable (the caller's contract).
    let Some(sink) = (unsafe { read_in(sink) }).filter(|s| s.copy.is_some()) else {
        return i64::from(Error::Invalid.errno());
    };
    b.pmu.snapshot_aux(&no_info(), &mut CSink(sink), size)
}

/// The ToPA PMI handler (`intel_pt_interrupt`): stops, ends the
/// transaction with what was written, begins the next and traces on (unless
/// stopped). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `cpu` NULL or PT CPU storage; called from the PMI on the PMU's CPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_handle_pmi(cpu: *mut perfaux_pt_cpu) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    b.pmu.handle_pmi();
    0
}

/// Feeds the software tracer: the packets for `event` go to the buffer
/// while tracing is on. Returns the number of ToPA PMIs the writes raised
/// (INT regions filled; call `perfaux_pt_handle_pmi` for them), or
/// `-EINVAL` for a bad `cpu`, a NULL or unknown event.
///
/// # Safety
/// `cpu` NULL or PT CPU storage; `event` NULL or readable; on the PMU's CPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_trace(
    cpu: *mut perfaux_pt_cpu,
    event: *const perfaux_trace_event,
) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: NULL or readable (the caller's contract).
    let Some(event) = (unsafe { read_in(event) }).and_then(|e| trace_event(&e)) else {
        return Error::Invalid.errno();
    };
    b.tracer.trace(event);
    b.tracer.take_pmi().min(i32::MAX as u32) as c_int
}

fn trace_event(e: &perfaux_trace_event) -> Option<TraceEvent> {
    // Which fields and flags each kind takes; anything else is refused.
    const T: u32 = PERFAUX_TRACE_TAKEN;
    const I: u32 = PERFAUX_TRACE_INDIRECT;
    const H: u32 = PERFAUX_TRACE_HAS_TARGET;
    let (flags, uses_target, uses_from, uses_value) = match e.kind {
        PERFAUX_TRACE_CONDITIONAL => (T, true, false, false),
        PERFAUX_TRACE_CALL => (I, true, true, false),
        PERFAUX_TRACE_JUMP
        | PERFAUX_TRACE_RETURN
        | PERFAUX_TRACE_INDIRECT_JUMP
        | PERFAUX_TRACE_ENABLE => (0, true, false, false),
        PERFAUX_TRACE_ASYNC => (H, true, true, false),
        PERFAUX_TRACE_DISABLE => (H, true, false, false),
        PERFAUX_TRACE_MODE | PERFAUX_TRACE_TIME | PERFAUX_TRACE_FREQUENCY | PERFAUX_TRACE_TICK => {
            (0, false, false, true)
        }
        PERFAUX_TRACE_PAD | PERFAUX_TRACE_OVERFLOW => (0, false, false, false),
        _ => return None,
    };
    let target_given =
        e.kind != PERFAUX_TRACE_ASYNC && e.kind != PERFAUX_TRACE_DISABLE || e.flags & H != 0;
    if e.flags & !flags != 0
        || (!uses_target || !target_given) && e.target != 0
        || !uses_from && e.from != 0
        || !uses_value && e.value != 0
    {
        return None;
    }
    let target = (e.flags & H != 0).then_some(e.target);
    let small = |max: u64| (e.value <= max).then_some(e.value as u8);
    Some(match e.kind {
        PERFAUX_TRACE_CONDITIONAL => TraceEvent::Conditional {
            taken: e.flags & T != 0,
            next: e.target,
        },
        PERFAUX_TRACE_JUMP => TraceEvent::Jump { target: e.target },
        PERFAUX_TRACE_CALL => TraceEvent::Call {
            target: e.target,
            ret: e.from,
            indirect: e.flags & I != 0,
        },
        PERFAUX_TRACE_RETURN => TraceEvent::Return { target: e.target },
        PERFAUX_TRACE_INDIRECT_JUMP => TraceEvent::Indirect { target: e.target },
        PERFAUX_TRACE_ASYNC => TraceEvent::Async {
            from: e.from,
            to: target,
        },
        PERFAUX_TRACE_ENABLE => TraceEvent::Enable(e.target),
        PERFAUX_TRACE_DISABLE => TraceEvent::Disable(target),
        PERFAUX_TRACE_MODE => TraceEvent::Mode(match e.value {
            16 => ExecMode::Bits16,
            32 => ExecMode::Bits32,
            64 => ExecMode::Bits64,
            _ => return None,
        }),
        PERFAUX_TRACE_TIME => TraceEvent::Time(e.value),
        PERFAUX_TRACE_FREQUENCY => TraceEvent::Frequency(small(255)?),
        PERFAUX_TRACE_TICK => TraceEvent::Tick(small(255)?),
        PERFAUX_TRACE_PAD => TraceEvent::Pad,
        _ => TraceEvent::Overflow,
    })
}

/// Bytes the tracer has written so far, or `-EINVAL` for a bad `cpu`.
///
/// # Safety
/// `cpu` NULL or PT CPU storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_written(cpu: *const perfaux_pt_cpu) -> i64 {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    match unsafe { cpu_ref(cpu) } {
        Some(b) => b.tracer.written().min(i64::MAX as u64) as i64,
        None => i64::from(Error::Invalid.errno()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trace_kind_maps_and_nothing_else_does() {
        let ev = |kind, flags, target, from, value| {
            trace_event(&perfaux_trace_event {
                kind,
                flags,
                target,
                from,
                value,
            })
        };
        assert_eq!(
            ev(PERFAUX_TRACE_CONDITIONAL, PERFAUX_TRACE_TAKEN, 0x10, 0, 0),
            Some(TraceEvent::Conditional {
                taken: true,
                next: 0x10
            })
        );
        assert_eq!(
            ev(PERFAUX_TRACE_CALL, PERFAUX_TRACE_INDIRECT, 0x20, 0x15, 0),
            Some(TraceEvent::Call {
                target: 0x20,
                ret: 0x15,
                indirect: true
            })
        );
        assert_eq!(
            ev(PERFAUX_TRACE_ASYNC, 0, 0, 0x30, 0),
            Some(TraceEvent::Async {
                from: 0x30,
                to: None
            })
        );
        assert_eq!(
            ev(PERFAUX_TRACE_ASYNC, PERFAUX_TRACE_HAS_TARGET, 0x40, 0x30, 0),
            Some(TraceEvent::Async {
                from: 0x30,
                to: Some(0x40)
            })
        );
        assert_eq!(
            ev(PERFAUX_TRACE_DISABLE, 0, 0, 0, 0),
            Some(TraceEvent::Disable(None))
        );
        assert_eq!(
            ev(PERFAUX_TRACE_MODE, 0, 0, 0, 32),
            Some(TraceEvent::Mode(ExecMode::Bits32))
        );
        assert_eq!(
            ev(PERFAUX_TRACE_TIME, 0, 0, 0, 1 << 40),
            Some(TraceEvent::Time(1 << 40))
        );
        for kind in 1..=14 {
            let value = if kind == PERFAUX_TRACE_MODE { 64 } else { 0 };
            assert!(ev(kind, 0, 0, 0, value).is_some(), "kind {kind}");
        }
        // Unknown kinds, flags or fields a kind does not take.
        assert_eq!(ev(0, 0, 0, 0, 0), None);
        assert_eq!(ev(15, 0, 0, 0, 0), None);
        assert_eq!(ev(PERFAUX_TRACE_CONDITIONAL, 8, 0, 0, 0), None);
        assert_eq!(ev(PERFAUX_TRACE_RETURN, PERFAUX_TRACE_TAKEN, 0, 0, 0), None);
        assert_eq!(ev(PERFAUX_TRACE_JUMP, 0, 0, 1, 0), None);
        assert_eq!(ev(PERFAUX_TRACE_ASYNC, 0, 0x40, 0x30, 0), None);
        assert_eq!(ev(PERFAUX_TRACE_MODE, 0, 0, 0, 8), None);
        assert_eq!(ev(PERFAUX_TRACE_FREQUENCY, 0, 0, 0, 256), None);
        assert_eq!(ev(PERFAUX_TRACE_PAD, 0, 1, 0, 0), None);
    }
}
