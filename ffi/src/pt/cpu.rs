// SPDX-License-Identifier: MIT OR Apache-2.0
//! The per-CPU object (`struct perfaux_pt_cpu`): the phys map, the
//! platform, the software tracer and the PT PMU over the CPU's AUX
//! transactions, built in place in C's storage and torn down by `fini`.

use core::ffi::c_int;
use core::mem::{align_of, size_of};
use core::ptr::{self, addr_of, addr_of_mut};

use perfaux::aux::AreaOutput;
use perfaux::pmu::Pmu;
use perfaux::pt::pmu::PtPmu;
use perfaux::ring::OutputSink;
use perfaux::soft_pt::stream::TraceEvent;
use perfaux::soft_pt::tick::TickFlow;
use perfaux::soft_pt::tracer::SoftTracer;
use perfaux::{Error, Result};

use super::buffer::{buffer_hold, perfaux_pt_buffer};
use super::output::{COps, PtOutput, perfaux_aux_ops};
use crate::aux::{area_hold, perfaux_aux_area};
use crate::platform::{CPhysMap, CPlatform, perfaux_phys_map, perfaux_platform};
use crate::ring::{fixed_event, perfaux_output_event, perfaux_ring, ring_hold};
use crate::storage::{Hold, Users, live_box, read_in, usable};

/// Words of `struct perfaux_pt_cpu`.
pub const PERFAUX_PT_CPU_WORDS: usize = 256;
/// Size in bytes of `struct perfaux_pt_cpu` (aligned to `PERFAUX_OBJECT_ALIGN`).
pub const PERFAUX_PT_CPU_SIZE: usize = PERFAUX_PT_CPU_WORDS * 8;

/// Storage of the PT driver of one CPU. Opaque.
#[repr(C)]
pub struct perfaux_pt_cpu {
    /// Opaque.
    pub opaque: [u64; PERFAUX_PT_CPU_WORDS],
}

/// What `struct perfaux_pt_cpu` holds. The tracer and the PMU refer to the
/// fields before them in place (the storage does not move).
#[repr(C)]
pub(crate) struct CpuBox {
    pub(super) live: u64,
    /// The events opened on the CPU's PMU.
    pub(super) users: Users,
    /// What a CPU object over a perfaux AUX area writes into.
    holds: Option<AreaHolds>,
    pub(super) phys: CPhysMap,
    pub(super) platform: CPlatform,
    /// The driver, holding the software tracer it programs.
    pub(super) pmu: CpuPmu,
    /// A kernel module's ticker (`perfaux_pt_tick`).
    pub(super) ticks: TickFlow,
}

/// The PT driver of a CPU object: it owns its tracer, which translates
/// addresses with the object's phys map.
pub(super) type CpuPmu = PtPmu<'static, PtOutput, SoftTracer<'static>, &'static CPhysMap>;

/// The holds of a CPU object over a perfaux AUX area: the ring its
/// `PERF_RECORD_AUX` go to, the area and the area's PT buffer.
struct AreaHolds {
    _ring: Hold<'static>,
    _area: Hold<'static>,
    _buffer: Hold<'static>,
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
    // SAFETY: `p` is NULL or PT CPU storage (this function's `# Safety`),
    // which `live_box` needs; the live word says it was initialized and not
    // torn down.
    unsafe { live_box::<_, CpuBox>(p, CPU_LIVE).map(|b| &*b) }
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
    holds: Option<AreaHolds>,
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
        addr_of_mut!((*b).users).write(Users::new());
        addr_of_mut!((*b).holds).write(None);
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
    let tracer = SoftTracer::new(phys, psb_period);
    // SAFETY: valid storage; the live word goes last.
    unsafe {
        addr_of_mut!((*b).pmu).write(PtPmu::with_output(tracer, phys, output));
        addr_of_mut!((*b).ticks).write(TickFlow::new());
        addr_of_mut!((*b).holds).write(holds);
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
/// is initialized. The CPU object holds `ring`, `area` and `buffer`: their
/// `fini` is refused until the CPU object's.
///
/// # Safety
/// `cpu` valid for writes of `sizeof(struct perfaux_pt_cpu)` bytes and not
/// moved until `perfaux_pt_cpu_fini`; `ring`, `area` and `buffer` NULL or
/// storage of their kinds; the pointers to structs NULL or readable.
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
    // SAFETY: `area`, `ring` and `buffer` are NULL or storage of their
    // kinds (this function's `# Safety`), which is what the `*_hold`
    // functions need; the holds keep them initialized while the CPU object
    // refers to them.
    let (Some((area, area_users)), Some((ring, ring_users)), Some((buffer, buffer_users))) = (
        unsafe { area_hold(area) },
        unsafe { ring_hold(ring) },
        unsafe { buffer_hold(buffer) },
    ) else {
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
    let holds = AreaHolds {
        _ring: ring_users,
        _area: area_users,
        _buffer: buffer_users,
    };
    // SAFETY: `cpu` is storage that does not move, `phys` and `platform`
    // NULL or readable (this function's `# Safety`): `build_cpu`'s clauses.
    unsafe {
        build_cpu(cpu, phys, platform, psb_period, Some(holds), |p| {
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
    // SAFETY: `cpu` is storage that does not move and `phys` NULL or
    // readable (this function's `# Safety`); the platform is NULL:
    // `build_cpu`'s clauses.
    unsafe {
        build_cpu(cpu, phys, ptr::null(), psb_period, None, |_| {
            Ok(PtOutput::Ops(COps(ops)))
        })
    }
}

/// Tears the PT driver of one CPU down and lets go of what it wrote into;
/// its event must be off it (`perfaux_pt_del`) first. Returns 0, `-EBUSY`
/// (and nothing changes) while an event opened on it is open
/// (`perfaux_event_open_pt`) or an AUX transaction is, `-EINVAL` if `cpu`
/// is not an initialized CPU object.
///
/// # Safety
/// `cpu` NULL or PT CPU storage; no other call may use it meanwhile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_cpu_fini(cpu: *mut perfaux_pt_cpu) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    if b.users.in_use() || b.pmu.in_transaction() {
        return Error::Busy.errno();
    }
    let b = cpu.cast::<CpuBox>();
    // SAFETY: live: marked dead, then dropped once (the PMU, with its
    // tracer, before what it refers to, the holds last).
    unsafe {
        addr_of_mut!((*b).live).write(0);
        ptr::drop_in_place(addr_of_mut!((*b).pmu));
        ptr::drop_in_place(addr_of_mut!((*b).ticks));
        ptr::drop_in_place(addr_of_mut!((*b).holds));
    }
    0
}

impl CpuBox {
    /// A sample's AUX block from this CPU's trace (`pt_event_snapshot_aux`).
    pub(crate) fn snapshot_aux(&self, sink: &mut dyn OutputSink, size: u64) -> Result<u64> {
        self.pmu.snapshot_aux(sink, size)
    }

    /// The software tracer the driver programs.
    pub(crate) fn tracer(&self) -> &SoftTracer<'static> {
        self.pmu.hw()
    }

    /// Feeds the tracer `event`, then handles the ToPA PMIs its writes
    /// raised (full-trace mode) right after it, as the hardware's PMI would
    /// come (`perfaux_pt_handle_pmi`).
    pub(super) fn trace_and_handle(&self, event: TraceEvent) {
        self.tracer().trace(event);
        for _ in 0..self.tracer().take_pmi() {
            self.pmu.handle_pmi();
        }
    }

    /// The PMU with a hold on this CPU object, for an event opened on it:
    /// the CPU object's `fini` is refused until the hold is dropped.
    pub(crate) fn pmu_hold(&self) -> (&dyn Pmu, Hold<'_>) {
        (&self.pmu, self.users.hold())
    }
}
