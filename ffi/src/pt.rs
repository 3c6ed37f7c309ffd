// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PT-style PMU of one CPU in C: ToPA tables in caller pages, the
//! software tracer, the PMU callbacks (add/del/start/stop), `snapshot_aux`
//! into a C sink (a kernel's `perf_output_handle`, say), the ToPA PMI
//! handler, and the trace events that feed the tracer.
//!
//! The AUX buffer is either a perfaux ring's AUX area
//! (`perfaux_pt_init_area`) or any buffer whose transactions C runs
//! (`perfaux_pt_init_ops`: a kernel module's `perf_aux_output_begin/end`).

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};
use core::ptr::{self, addr_of, addr_of_mut};

use perfaux::abi::{PAGE_SIZE, PerfEventAttr};
use perfaux::aux::{AreaOutput, AuxOutput, AuxTransaction};
use perfaux::pmu::{EventInfo, Platform, Pmu, ef};
use perfaux::pt::packet::ExecMode;
use perfaux::pt::pmu::PtPmu;
use perfaux::pt::stream::TraceEvent;
use perfaux::pt::topa::{PhysMap, Topa, TopaTable};
use perfaux::pt::tracer::SoftTracer;
use perfaux::ring::OutputSink;
use perfaux::sample::IrqMask;
use perfaux::{Error, Result};

use crate::aux::{area_ref, perfaux_aux_area};
use crate::ring::{
    fixed_event, live_box, perfaux_output_event, perfaux_ring, read_in, ring_ref, usable,
};

/// Words of `struct perfaux_pt`.
pub const PERFAUX_PT_WORDS: usize = 256;
/// Size in bytes of `struct perfaux_pt` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_PT_SIZE: usize = PERFAUX_PT_WORDS * 8;

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

/// Translates between the addresses the CPU uses and physical addresses,
/// for the ToPA tables (`virt_to_phys`/`phys_to_virt` in a kernel). Both
/// NULL: addresses are their own physical addresses (a host process).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_phys_map {
    /// The physical address of `virt`.
    pub to_phys: Option<unsafe extern "C" fn(ctx: *mut c_void, virt: *const c_void) -> u64>,
    /// The address for `phys`.
    pub to_virt: Option<unsafe extern "C" fn(ctx: *mut c_void, phys: u64) -> *mut c_void>,
    /// Their argument.
    pub ctx: *mut c_void,
}

/// Where `snapshot_aux` writes: `copy` takes `len` bytes and returns how
/// many it could **not** take (0 when all went in), like the kernel's
/// `perf_output_copy`. Called from PMI context.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_sink {
    /// The copy callback.
    pub copy:
        Option<unsafe extern "C" fn(ctx: *mut c_void, bytes: *const c_void, len: usize) -> usize>,
    /// Its argument.
    pub ctx: *mut c_void,
}

/// The AUX transactions of a buffer C owns (a kernel's: `begin` is
/// `perf_aux_output_begin`, `flag` `perf_aux_output_flag`, `end`
/// `perf_aux_output_end` after setting `handle->head` when `has_head`).
/// Called from the PMU callbacks and the PMI, never nested.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_aux_ops {
    /// Opens a transaction; fills its head, the bytes it may write, and the
    /// position where the consumer wants a wakeup; 0 or a negative errno.
    pub begin: Option<
        unsafe extern "C" fn(
            ctx: *mut c_void,
            head: *mut u64,
            space: *mut u64,
            wakeup: *mut u64,
        ) -> c_int,
    >,
    /// Adds `PERF_AUX_FLAG_*` bits to the open transaction.
    pub flag: Option<unsafe extern "C" fn(ctx: *mut c_void, flags: u64)>,
    /// Ends it with `size` new bytes (in overwrite mode, after moving the
    /// head to `head` when `has_head` is 1).
    pub end: Option<unsafe extern "C" fn(ctx: *mut c_void, size: u64, has_head: c_int, head: u64)>,
    /// Their argument.
    pub ctx: *mut c_void,
}

/// The platform: interrupt masking, CPU id, clock and current task (to
/// stamp `PERF_RECORD_AUX` trailers). Every callback may run in NMI context.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfaux_platform {
    /// The current CPU.
    pub cpu: Option<unsafe extern "C" fn(ctx: *mut c_void) -> u32>,
    /// The perf clock now.
    pub clock: Option<unsafe extern "C" fn(ctx: *mut c_void) -> u64>,
    /// The current task's process and thread ids (not `current`: a kernel macro).
    pub current_task: Option<unsafe extern "C" fn(ctx: *mut c_void, pid: *mut u32, tid: *mut u32)>,
    /// Masks interrupts; returns what `irq_restore` needs.
    pub irq_save: Option<unsafe extern "C" fn(ctx: *mut c_void) -> usize>,
    /// Restores the interrupt state `irq_save` returned.
    pub irq_restore: Option<unsafe extern "C" fn(ctx: *mut c_void, state: usize)>,
    /// Their argument.
    pub ctx: *mut c_void,
}

/// Storage of a PT PMU. Opaque.
#[repr(C)]
pub struct perfaux_pt {
    /// Opaque.
    pub opaque: [u64; PERFAUX_PT_WORDS],
}

struct CPhysMap(perfaux_phys_map);

impl PhysMap for CPhysMap {
    fn to_phys(&self, virt: *const u8) -> u64 {
        match self.0.to_phys {
            // SAFETY: a callback the caller registered for this purpose.
            Some(f) => unsafe { f(self.0.ctx, virt.cast()) },
            None => virt as u64,
        }
    }
    fn to_virt(&self, phys: u64) -> *mut u8 {
        match self.0.to_virt {
            // SAFETY: a callback the caller registered for this purpose.
            Some(f) => unsafe { f(self.0.ctx, phys) }.cast(),
            None => phys as usize as *mut u8,
        }
    }
}

pub(crate) struct CPlatform(pub(crate) perfaux_platform);

impl IrqMask for CPlatform {
    fn save(&self) -> usize {
        match self.0.irq_save {
            // SAFETY: a callback the caller registered for this purpose.
            Some(f) => unsafe { f(self.0.ctx) },
            None => 0,
        }
    }
    fn restore(&self, state: usize) {
        if let Some(f) = self.0.irq_restore {
            // SAFETY: as above.
            unsafe { f(self.0.ctx, state) }
        }
    }
}

impl Platform for CPlatform {
    fn cpu(&self) -> u32 {
        // SAFETY: as above.
        self.0.cpu.map_or(0, |f| unsafe { f(self.0.ctx) })
    }
    fn clock(&self) -> u64 {
        // SAFETY: as above.
        self.0.clock.map_or(0, |f| unsafe { f(self.0.ctx) })
    }
    fn current(&self) -> (u32, u32) {
        let (mut pid, mut tid) = (0, 0);
        if let Some(f) = self.0.current_task {
            // SAFETY: as above; both pointers are to locals.
            unsafe { f(self.0.ctx, &mut pid, &mut tid) };
        }
        (pid, tid)
    }
}

/// A buffer whose transactions C runs.
struct COps {
    ops: perfaux_aux_ops,
    pages: &'static [*mut u8],
    overwrite: bool,
}

// SAFETY: `perfaux_pt_init_ops`'s contract: the pages are valid for reads
// and writes while the PMU lives and written only by its tracer.
unsafe impl AuxOutput for COps {
    fn pages(&self) -> &[*mut u8] {
        self.pages
    }
    fn is_overwrite(&self) -> bool {
        self.overwrite
    }
    fn begin(&self) -> Result<AuxTransaction> {
        let Some(f) = self.ops.begin else {
            return Err(Error::NotSupported);
        };
        let mut t = AuxTransaction::default();
        // SAFETY: the registered callback, with pointers to locals.
        let r = unsafe { f(self.ops.ctx, &mut t.head, &mut t.space, &mut t.wakeup) };
        match r {
            0 => Ok(t),
            e => Err(Error::from_errno(e).unwrap_or(Error::NoSpace)),
        }
    }
    fn flag(&self, flags: u64) {
        if let Some(f) = self.ops.flag {
            // SAFETY: the registered callback.
            unsafe { f(self.ops.ctx, flags) }
        }
    }
    fn end(&self, size: u64, snapshot_head: Option<u64>) {
        if let Some(f) = self.ops.end {
            let (has, head) = snapshot_head.map_or((0, 0), |h| (1, h));
            // SAFETY: the registered callback.
            unsafe { f(self.ops.ctx, size, has, head) }
        }
    }
}

/// The AUX output of a C PT PMU.
enum PtOutput {
    Area(AreaOutput<'static, 'static>),
    Ops(COps),
}

// SAFETY: delegates to two implementations that uphold the contract.
unsafe impl AuxOutput for PtOutput {
    fn pages(&self) -> &[*mut u8] {
        match self {
            PtOutput::Area(a) => a.pages(),
            PtOutput::Ops(o) => o.pages(),
        }
    }
    fn is_overwrite(&self) -> bool {
        match self {
            PtOutput::Area(a) => a.is_overwrite(),
            PtOutput::Ops(o) => o.is_overwrite(),
        }
    }
    fn begin(&self) -> Result<AuxTransaction> {
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

/// What `struct perfaux_pt` holds. The tracer and the PMU refer to the
/// fields before them in place (the storage does not move).
#[repr(C)]
pub(crate) struct PtBox {
    live: u64,
    phys: CPhysMap,
    platform: CPlatform,
    tracer: SoftTracer<'static>,
    pmu: PtPmu<'static, PtOutput>,
    /// The `attr.config` the PMU callbacks see (the Intel PT format bits):
    /// what `perfaux_pt_set_config` accepted last.
    config: core::cell::Cell<u64>,
}

const PT_LIVE: u64 = 0x7065_7266_7074_706d; // "perfptpm"

const _: () = {
    assert!(size_of::<PtBox>() <= size_of::<perfaux_pt>());
    assert!(align_of::<PtBox>() <= align_of::<perfaux_pt>());
};

/// The attr of a PT PMU that was given no configuration (config 0).
static NO_ATTR: PerfEventAttr = PerfEventAttr::new(136);

/// The initialized PT PMU at `p`, if it is one.
///
/// # Safety
/// `p` must be NULL or point to `struct perfaux_pt` storage.
pub(crate) unsafe fn pt_ref<'a>(p: *const perfaux_pt) -> Option<&'a PtBox> {
    // SAFETY: the caller's contract; live: initialized and not torn down.
    unsafe { live_box::<_, PtBox>(p, PT_LIVE).map(|b| &*b) }
}

/// Builds the PtBox in `pt`: phys map, platform and tracer in place, then
/// the ToPA tables over `pages` in `tables`, then the PMU over `output`.
///
/// # Safety
/// `pt` valid storage that does not move; `tables` valid for writes of
/// `nr_tables` 4 KiB pages, 4 KiB aligned, for the PMU's life; `pages`
/// valid as the init functions require.
unsafe fn build(
    pt: *mut perfaux_pt,
    tables: *mut c_void,
    nr_tables: usize,
    phys: *const perfaux_phys_map,
    platform: *const perfaux_platform,
    psb_period: u64,
    output: impl FnOnce(&'static CPlatform) -> PtOutput,
) -> c_int {
    if !usable(pt) || tables.is_null() || (tables as usize) % PAGE_SIZE != 0 || nr_tables == 0 {
        return Error::Invalid.errno();
    }
    if nr_tables > isize::MAX as usize / PAGE_SIZE || !(256..=1 << 20).contains(&psb_period) {
        return Error::Invalid.errno();
    }
    // SAFETY: the caller's contract.
    if unsafe { pt_ref(pt) }.is_some() {
        return Error::Busy.errno();
    }
    // SAFETY: NULL or readable (the caller's contract).
    let phys = unsafe { read_in(phys) }.unwrap_or(perfaux_phys_map {
        to_phys: None,
        to_virt: None,
        ctx: ptr::null_mut(),
    });
    if phys.to_phys.is_some() != phys.to_virt.is_some() {
        return Error::Invalid.errno();
    }
    // SAFETY: NULL or readable (the caller's contract).
    let platform = unsafe { read_in(platform) }.unwrap_or(perfaux_platform {
        cpu: None,
        clock: None,
        current_task: None,
        irq_save: None,
        irq_restore: None,
        ctx: ptr::null_mut(),
    });
    let b = pt.cast::<PtBox>();
    // SAFETY: valid storage for a PtBox (asserted, the contract); fields
    // are written in dependency order and stay in place.
    unsafe {
        addr_of_mut!((*b).live).write(0);
        addr_of_mut!((*b).phys).write(CPhysMap(phys));
        addr_of_mut!((*b).platform).write(CPlatform(platform));
        addr_of_mut!((*b).config).write(core::cell::Cell::new(0));
    }
    // SAFETY: just written, living as long as the storage.
    let (phys, platform): (&'static CPhysMap, &'static CPlatform) =
        unsafe { (&*addr_of!((*b).phys), &*addr_of!((*b).platform)) };
    // SAFETY: as above.
    unsafe { addr_of_mut!((*b).tracer).write(SoftTracer::new(phys, psb_period)) };
    // SAFETY: as above.
    let tracer: &'static SoftTracer<'static> = unsafe { &*addr_of!((*b).tracer) };
    // SAFETY: the table pages are the caller's for the PMU's life; zeroed
    // first, so the slice holds valid (all-zero) tables.
    let tables: &'static mut [TopaTable] = unsafe {
        ptr::write_bytes(tables.cast::<u8>(), 0, nr_tables * PAGE_SIZE);
        core::slice::from_raw_parts_mut(tables.cast::<TopaTable>(), nr_tables)
    };
    let output = output(platform);
    let topa = match Topa::build(tables, output.pages(), phys) {
        Ok(t) => t,
        Err(e) => return e.errno(),
    };
    match PtPmu::with_output(tracer, phys, topa, output) {
        Ok(pmu) => {
            // SAFETY: valid storage; the live word goes last.
            unsafe {
                addr_of_mut!((*b).pmu).write(pmu);
                addr_of_mut!((*b).live).write(PT_LIVE);
            }
            0
        }
        Err(e) => e.errno(),
    }
}

/// Initializes a PT PMU tracing into a perfaux AUX `area` (initialized over
/// `ring`'s user page), writing `PERF_RECORD_AUX` for `event` into `ring`,
/// its trailer stamped by `platform` (NULL: as `event` gives it). ToPA
/// tables go into `tables` (`nr_tables` 4 KiB-aligned pages; one holds 506
/// regions); a PSB+ is written every `psb_period` bytes (256 to 1 MiB).
/// `phys` NULL: identity.
///
/// Returns 0, `-EINVAL` for bad arguments (NULL or misaligned storage, a
/// ring or area not initialized, a malformed event, one of the two phys
/// callbacks only), `-ENOMEM` if the tables are too few, `-EBUSY` if `pt`
/// is initialized.
///
/// # Safety
/// `pt` valid for writes of `sizeof(struct perfaux_pt)` bytes and not moved
/// until `perfaux_pt_fini`; `tables` valid as said for as long; `ring` and
/// `area` initialized and outliving the PMU; the pointers to structs NULL
/// or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_init_area(
    pt: *mut perfaux_pt,
    tables: *mut c_void,
    nr_tables: usize,
    area: *const perfaux_aux_area,
    ring: *const perfaux_ring,
    event: *const perfaux_output_event,
    platform: *const perfaux_platform,
    phys: *const perfaux_phys_map,
    psb_period: u64,
) -> c_int {
    // SAFETY: the caller's contract.
    let (Some(area), Some(ring)) = (unsafe { area_ref(area) }, unsafe { ring_ref(ring) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: NULL or readable (the caller's contract).
    let event = unsafe { read_in(event) }.unwrap_or_default();
    let Some(event) = fixed_event(&event) else {
        return Error::Invalid.errno();
    };
    let stamp = !platform.is_null();
    // SAFETY: forwarded contract.
    unsafe {
        build(pt, tables, nr_tables, phys, platform, psb_period, |p| {
            let out = AreaOutput::new(area, ring, event);
            PtOutput::Area(if stamp { out.with_platform(p) } else { out })
        })
    }
}

/// Initializes a PT PMU tracing into a buffer whose transactions C runs
/// through `ops` (a kernel module: the pages `setup_aux` received):
/// `nr_pages` 4 KiB pages (`pages`, one pointer per page, a power of two),
/// overwrite (snapshot) mode if `overwrite` is 1. Tables, `psb_period` and
/// `phys` as for `perfaux_pt_init_area` (a kernel passes its
/// `virt_to_phys`/`phys_to_virt`).
///
/// Returns 0, `-EINVAL` for bad arguments (NULL ops callbacks included),
/// `-ENOMEM` if the tables are too few, `-EBUSY` if `pt` is initialized.
///
/// # Safety
/// As `perfaux_pt_init_area`; the page array and the pages must stay valid
/// until `perfaux_pt_fini`, written by nothing but the tracer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_init_ops(
    pt: *mut perfaux_pt,
    tables: *mut c_void,
    nr_tables: usize,
    pages: *const *mut c_void,
    nr_pages: usize,
    overwrite: c_int,
    ops: *const perfaux_aux_ops,
    phys: *const perfaux_phys_map,
    psb_period: u64,
) -> c_int {
    if !usable(pages)
        || !nr_pages.is_power_of_two()
        || nr_pages > isize::MAX as usize / size_of::<*mut u8>()
        || !(0..=1).contains(&overwrite)
    {
        return Error::Invalid.errno();
    }
    // SAFETY: NULL or readable (the caller's contract).
    let Some(ops) = (unsafe { read_in(ops) })
        .filter(|o| o.begin.is_some() && o.flag.is_some() && o.end.is_some())
    else {
        return Error::Invalid.errno();
    };
    // SAFETY: `nr_pages` readable pointers that outlive the PMU.
    let pages: &'static [*mut u8] =
        unsafe { core::slice::from_raw_parts(pages.cast::<*mut u8>(), nr_pages) };
    // SAFETY: forwarded contract.
    unsafe {
        build(pt, tables, nr_tables, phys, ptr::null(), psb_period, |_| {
            PtOutput::Ops(COps {
                ops,
                pages,
                overwrite: overwrite == 1,
            })
        })
    }
}

/// Tears a PT PMU down; it must be stopped (`perfaux_pt_del`) first.
/// Returns 0, `-EBUSY` while an AUX transaction is open, `-EINVAL` if `pt`
/// is not an initialized PMU.
///
/// # Safety
/// `pt` NULL or PT storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_fini(pt: *mut perfaux_pt) -> c_int {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { pt_ref(pt) }) else {
        return Error::Invalid.errno();
    };
    if !b.pmu.is_stopped() {
        return Error::Busy.errno();
    }
    let b = pt.cast::<PtBox>();
    // SAFETY: live: dropped once (the PMU before what it refers to), then
    // marked dead.
    unsafe {
        addr_of_mut!((*b).live).write(0);
        ptr::drop_in_place(addr_of_mut!((*b).pmu));
        ptr::drop_in_place(addr_of_mut!((*b).tracer));
    }
    0
}

impl PtBox {
    /// The PMU, for events opened on it.
    pub(crate) fn pmu(&self) -> &dyn Pmu {
        &self.pmu
    }
}

/// The event a PMU callback sees from C that gives none.
pub(crate) fn no_info() -> EventInfo<'static> {
    info(0)
}

fn info(aux_paused: u32) -> EventInfo<'static> {
    EventInfo {
        attr: &NO_ATTR,
        id: 0,
        cpu: -1,
        aux_paused: aux_paused != 0,
    }
}

/// Runs `f` with the event the PMU callbacks of `b` see: an attr with the
/// configured `config`.
fn with_info<R>(b: &PtBox, aux_paused: u32, f: impl FnOnce(&EventInfo<'_>) -> R) -> R {
    let mut attr = PerfEventAttr::new(136);
    attr.config = b.config.get();
    f(&EventInfo {
        attr: &attr,
        id: 0,
        cpu: -1,
        aux_paused: aux_paused != 0,
    })
}

fn flags_ok(flags: u32, allowed: u32) -> bool {
    flags & !allowed == 0
}

/// `pt_event_init`'s check of an event's `attr.config` (the Intel PT format
/// bits: `pt`, `tsc`, `noretcomp`, `branch`, `psb_period`; `cyc`, `mtc`,
/// `pwr_evt`, `event`, `notnt`, `ptw` and `fup_on_ptw` are not offered),
/// and the configuration later `perfaux_pt_add` calls trace with. Call it
/// when the event is created and whenever another event is added. Returns
/// 0, or `-EINVAL` for a bad `pt` or a configuration Linux's
/// `pt_event_valid` would refuse on this tracer (the previous one stays).
///
/// # Safety
/// `pt` NULL or PT storage; not while the PT event is on the PMU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_set_config(pt: *const perfaux_pt, attr_config: u64) -> c_int {
    // SAFETY: NULL or PT storage (the caller's contract).
    let Some(b) = (unsafe { pt_ref(pt) }) else {
        return Error::Invalid.errno();
    };
    if perfaux::pt::config::PtConfig::from_attr(attr_config).is_err() {
        return Error::Invalid.errno();
    }
    b.config.set(attr_config);
    0
}

/// `pt_event_init`'s check of an `attr.config` alone (no PMU needed: call
/// it when an event is created): 0, or `-EINVAL` for what
/// `perfaux_pt_set_config` refuses.
#[unsafe(no_mangle)]
pub extern "C" fn perfaux_pt_check_config(attr_config: u64) -> c_int {
    match perfaux::pt::config::PtConfig::from_attr(attr_config) {
        Ok(_) => 0,
        Err(e) => e.errno(),
    }
}

/// `pmu->add`: puts the PT event on this CPU (one at a time) and, with
/// `PERFAUX_EF_START`, opens an AUX transaction and starts tracing (not if
/// `aux_paused`). Returns 0, `-EBUSY` if an event is on already, `-EINVAL`
/// for a bad `pt` or flags, or the error that kept it from starting
/// (`-ENOSPC`: no room in the buffer).
///
/// # Safety
/// `pt` NULL or PT storage; called on the PMU's CPU with interrupts masked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_add(pt: *mut perfaux_pt, flags: u32, aux_paused: u32) -> c_int {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { pt_ref(pt) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_START) || aux_paused > 1 {
        return Error::Invalid.errno();
    }
    match with_info(b, aux_paused, |i| b.pmu.add(i, flags)) {
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
pub unsafe extern "C" fn perfaux_pt_del(pt: *mut perfaux_pt, flags: u32) -> c_int {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { pt_ref(pt) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_UPDATE) {
        return Error::Invalid.errno();
    }
    with_info(b, 0, |i| b.pmu.del(i, flags));
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
    pt: *mut perfaux_pt,
    flags: u32,
    aux_paused: u32,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { pt_ref(pt) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_RELOAD | PERFAUX_EF_RESUME) || aux_paused > 1 {
        return Error::Invalid.errno();
    }
    with_info(b, aux_paused, |i| b.pmu.start(i, flags));
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
    pt: *mut perfaux_pt,
    flags: u32,
    aux_paused: u32,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { pt_ref(pt) }) else {
        return Error::Invalid.errno();
    };
    if !flags_ok(flags, PERFAUX_EF_UPDATE | PERFAUX_EF_PAUSE) || aux_paused > 1 {
        return Error::Invalid.errno();
    }
    with_info(b, aux_paused, |i| b.pmu.stop(i, flags));
    0
}

/// A C sink as the engine's output sink.
pub(crate) struct CSink(pub(crate) perfaux_sink);

impl OutputSink for CSink {
    fn copy(&mut self, bytes: &[u8]) -> usize {
        let Some(f) = self.0.copy else {
            return bytes.len();
        };
        // SAFETY: the registered callback, given `bytes.len()` readable
        // bytes; its answer is clamped to what was given.
        let left = unsafe { f(self.0.ctx, bytes.as_ptr().cast(), bytes.len()) };
        left.min(bytes.len())
    }
}

/// The engine's sink behind a C sink: `ctx` is a `&mut &mut dyn OutputSink`.
unsafe extern "C" fn engine_sink_copy(ctx: *mut c_void, bytes: *const c_void, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    if bytes.is_null() {
        return len;
    }
    // SAFETY: `ctx` is the `&mut &mut dyn OutputSink` that `with_c_sink`
    // passes for the duration of its closure; `bytes` is readable for `len`
    // (the C callback's contract, checked for NULL).
    unsafe {
        let sink = &mut *ctx.cast::<&mut dyn OutputSink>();
        sink.copy(core::slice::from_raw_parts(bytes.cast::<u8>(), len))
    }
}

/// Runs `f` with a C sink that writes into the engine's `sink` (for C
/// `snapshot_aux` callbacks given the sample being written).
pub(crate) fn with_c_sink<R>(sink: &mut dyn OutputSink, f: impl FnOnce(&perfaux_sink) -> R) -> R {
    let mut sink = sink;
    let c = perfaux_sink {
        copy: Some(engine_sink_copy),
        ctx: ptr::from_mut(&mut sink).cast(),
    };
    f(&c)
}

/// `pmu->snapshot_aux` (Linux's `pt_event_snapshot_aux`): stops tracing,
/// copies the newest `size` bytes of the buffer, ending at the write
/// position, into `sink`, and restarts tracing if it was on (and not
/// paused). Returns the bytes copied; 0 with no open transaction, a
/// writable buffer, or from inside the driver's own update; `-EFAULT` if
/// the sink took fewer bytes; `-EINVAL` for a bad `pt` or sink.
///
/// # Safety
/// `pt` NULL or PT storage; `sink` NULL or readable; called on the PMU's
/// CPU from PMI context or with interrupts masked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_snapshot_aux(
    pt: *mut perfaux_pt,
    sink: *const perfaux_sink,
    size: u64,
) -> i64 {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { pt_ref(pt) }) else {
        return i64::from(Error::Invalid.errno());
    };
    // SAFETY: NULL or readable (the caller's contract).
    let Some(sink) = (unsafe { read_in(sink) }).filter(|s| s.copy.is_some()) else {
        return i64::from(Error::Invalid.errno());
    };
    with_info(b, 0, |i| b.pmu.snapshot_aux(i, &mut CSink(sink), size))
}

/// The ToPA PMI handler (`intel_pt_interrupt`): stops, ends the
/// transaction with what was written, begins the next and traces on (unless
/// stopped). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `pt` NULL or PT storage; called from the PMI on the PMU's CPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_handle_pmi(pt: *mut perfaux_pt) -> c_int {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { pt_ref(pt) }) else {
        return Error::Invalid.errno();
    };
    b.pmu.handle_pmi();
    0
}

/// Feeds the software tracer: the packets for `event` go to the buffer
/// while tracing is on. Returns the number of ToPA PMIs the writes raised
/// (INT regions filled; call `perfaux_pt_handle_pmi` for them), or
/// `-EINVAL` for a bad `pt`, a NULL or unknown event.
///
/// # Safety
/// `pt` NULL or PT storage; `event` NULL or readable; on the PMU's CPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_trace(
    pt: *mut perfaux_pt,
    event: *const perfaux_trace_event,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { pt_ref(pt) }) else {
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

/// Bytes the tracer has written so far, or `-EINVAL` for a bad `pt`.
///
/// # Safety
/// `pt` NULL or PT storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_written(pt: *const perfaux_pt) -> i64 {
    // SAFETY: the caller's contract.
    match unsafe { pt_ref(pt) } {
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
