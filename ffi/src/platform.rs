// SPDX-License-Identifier: MIT OR Apache-2.0
//! The platform ABIs: the services the engine asks of its host (interrupt
//! masking, CPU id, clock, current task: `struct perfaux_platform`) and the
//! virtual/physical translation of the ToPA tables (`struct
//! perfaux_phys_map`), with the engine-side types that call them.

use core::ffi::c_void;
use core::ptr;

use perfaux::pmu::Platform;
use perfaux::pt::topa::PhysMap;
use perfaux::sample::IrqMask;

use crate::storage::read_in;

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

/// A C phys map as the engine's [`PhysMap`].
pub(crate) struct CPhysMap(pub(crate) perfaux_phys_map);

impl CPhysMap {
    /// The map C gave (NULL: identity); `None` if only one of its two
    /// callbacks is set.
    ///
    /// # Safety
    /// `phys` NULL or readable.
    pub(crate) unsafe fn read(phys: *const perfaux_phys_map) -> Option<CPhysMap> {
        // SAFETY: NULL or readable (the caller's contract).
        let phys = unsafe { read_in(phys) }.unwrap_or(perfaux_phys_map {
            to_phys: None,
            to_virt: None,
            ctx: ptr::null_mut(),
        });
        (phys.to_phys.is_some() == phys.to_virt.is_some()).then_some(CPhysMap(phys))
    }
}

impl PhysMap for CPhysMap {
    fn to_phys(&self, virt: *const u8) -> u64 {
        match self.0.to_phys {
            // SAFETY: the translation callback C registered, which takes
            // any address (the `perfaux_phys_map` contract).
            Some(f) => unsafe { f(self.0.ctx, virt.cast()) },
            None => virt as u64,
        }
    }
    fn to_virt(&self, phys: u64) -> *mut u8 {
        match self.0.to_virt {
            // SAFETY: as in `to_phys`.
            Some(f) => unsafe { f(self.0.ctx, phys) }.cast(),
            None => phys as usize as *mut u8,
        }
    }
}

/// A C platform as the engine's [`Platform`] and [`IrqMask`].
pub(crate) struct CPlatform(pub(crate) perfaux_platform);

impl IrqMask for CPlatform {
    fn save(&self) -> usize {
        match self.0.irq_save {
            // SAFETY: the callback C registered, callable from any context
            // (the `perfaux_platform` contract).
            Some(f) => unsafe { f(self.0.ctx) },
            None => 0,
        }
    }
    fn restore(&self, state: usize) {
        if let Some(f) = self.0.irq_restore {
            // SAFETY: as in `save`; `state` is what `save` returned.
            unsafe { f(self.0.ctx, state) }
        }
    }
}

impl Platform for CPlatform {
    fn cpu(&self) -> u32 {
        // SAFETY: the callback C registered (the `perfaux_platform` contract).
        self.0.cpu.map_or(0, |f| unsafe { f(self.0.ctx) })
    }
    fn clock(&self) -> u64 {
        // SAFETY: as in `cpu`.
        self.0.clock.map_or(0, |f| unsafe { f(self.0.ctx) })
    }
    fn current(&self) -> (u32, u32) {
        let (mut pid, mut tid) = (0, 0);
        if let Some(f) = self.0.current_task {
            // SAFETY: as in `cpu`; both pointers are to locals.
            unsafe { f(self.0.ctx, &mut pid, &mut tid) };
        }
        (pid, tid)
    }
}

/// Reads a C platform, NULL meaning none of its services.
///
/// # Safety
/// `p` NULL or readable.
pub(crate) unsafe fn read_platform(p: *const perfaux_platform) -> Option<CPlatform> {
    // SAFETY: NULL or readable (the caller's contract).
    unsafe { read_in(p) }.map(CPlatform)
}
