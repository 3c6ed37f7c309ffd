// SPDX-License-Identifier: MIT OR Apache-2.0
//! What the engine asks of the platform it runs on (the kernel, a
//! hypervisor, the host simulator): interrupt masking, the CPU, clock and
//! task, and waking a consumer. A leaf: it uses nothing of the crate, and
//! every layer may use it (the ring for [`Wakeup`], the sample layer for
//! [`IrqMask`], the AUX output and the event layer for [`Platform`]).
//! Everything here may be called from PMI (NMI) context: nothing may block,
//! lock or allocate.

/// Masks local interrupts around `snapshot_aux` (Linux `local_irq_save`),
/// supplied by the platform. NMIs can still arrive.
pub trait IrqMask {
    /// Masks interrupts; returns the state to restore.
    fn save(&self) -> usize;
    /// Restores the state `save` returned.
    fn restore(&self, state: usize);
}

/// For callers that already run with interrupts masked (or have none).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoIrqMask;

impl IrqMask for NoIrqMask {
    #[inline(always)]
    fn save(&self) -> usize {
        0
    }
    #[inline(always)]
    fn restore(&self, _state: usize) {}
}

/// Services of the platform the engine runs on (the kernel, a hypervisor,
/// the host simulator). Called from PMI context: nothing here may block.
pub trait Platform: IrqMask {
    /// The current CPU.
    fn cpu(&self) -> u32;
    /// The perf clock now (the event's clock).
    fn clock(&self) -> u64;
    /// Process and thread id of the current task.
    fn current(&self) -> (u32, u32);
}

/// Wakes the consumer of a ring (Linux: `perf_output_wakeup` queues an
/// irq_work that wakes the poll waiters). Called from the outermost writer's
/// `end`, so possibly from NMI context: it must not block, lock or allocate.
pub trait Wakeup {
    /// The consumer has data to read.
    fn wakeup(&self);
}
