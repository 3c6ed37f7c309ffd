// SPDX-License-Identifier: MIT OR Apache-2.0
//! What feeds the software tracer from C: `perfaux_trace_event`, the
//! things that happen on the traced CPU, and how many bytes it has written.

use core::ffi::c_int;

use perfaux::Error;
use perfaux::soft_pt::packet::ExecMode;
use perfaux::soft_pt::stream::{TraceEvent, tsc_ratio};
use perfaux::soft_pt::tick::Tick;

use super::cpu::{cpu_ref, perfaux_pt_cpu};
use crate::storage::read_in;

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
/// The core:bus ratio is `value`, 1 to 255 (CBR, and in every PSB+ after
/// it); 0 is no ratio known and writes nothing. No CBR is written before
/// the first non-zero ratio.
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
    b.tracer().trace(event);
    b.tracer().take_pmi().min(i32::MAX as u32) as c_int
}

/// Feeds the software tracer `count` events at once, in order, as
/// `perfaux_pt_trace` would one by one (each event's packets reach the
/// buffer before the next event, so a PMI between two events sees the
/// same), but faster: the tracer takes its packet generator and write
/// window once for the run. Returns the number of ToPA PMIs the writes
/// raised (call `perfaux_pt_handle_pmi` for them), or `-EINVAL`, with
/// nothing traced, for a bad `cpu`, `events` NULL with a `count` other
/// than 0, or any event `perfaux_pt_trace` would refuse.
///
/// # Safety
/// `cpu` NULL or PT CPU storage; `events` NULL or readable for `count`
/// events; on the PMU's CPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_trace_all(
    cpu: *mut perfaux_pt_cpu,
    events: *const perfaux_trace_event,
    count: usize,
) -> c_int {
    // SAFETY: as in `perfaux_pt_trace`.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    if count > 0 && events.is_null() {
        return Error::Invalid.errno();
    }
    let event_at = |i: usize| {
        if i >= count {
            return None;
        }
        // SAFETY: `events` is readable for `count` events (the caller's
        // contract), and `i < count`.
        unsafe { read_in(events.add(i)) }.and_then(|e| trace_event(&e))
    };
    // All or nothing: a malformed event anywhere refuses the call before
    // any is traced.
    if (0..count).any(|i| event_at(i).is_none()) {
        return Error::Invalid.errno();
    }
    // In pieces through a stack buffer (no allocation here); where the
    // pieces end makes no difference to the trace (`trace_all`'s contract).
    const PIECE: usize = 64;
    let mut piece = [TraceEvent::Pad; PIECE];
    let mut done = 0;
    while done < count {
        let n = PIECE.min(count - done);
        for (k, slot) in piece.iter_mut().take(n).enumerate() {
            *slot = event_at(done + k).unwrap_or(TraceEvent::Pad);
        }
        b.tracer().trace_all(piece.get(..n).unwrap_or_default());
        done += n;
    }
    b.tracer().take_pmi().min(i32::MAX as u32) as c_int
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

/// What one tick of a kernel module's ticker found (`perfaux_pt_tick`): a
/// periodic interrupt on the CPU, while an AUX transaction is open for the
/// event there.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct perfaux_tick {
    /// The interrupted instruction pointer (`instruction_pointer(regs)`).
    pub ip: u64,
    /// The TSC at the tick (`rdtsc_ordered()`).
    pub tsc: u64,
    /// Where the interrupt went: the TIP target when the kernel is traced.
    pub handler: u64,
    /// 1: the interrupted context ran in user mode (`user_mode(regs)`).
    pub user: u8,
    /// The event's `attr.exclude_user`, 0 or 1.
    pub exclude_user: u8,
    /// The event's `attr.exclude_kernel`, 0 or 1.
    pub exclude_kernel: u8,
    /// Zero.
    pub reserved: [u8; 5],
}

const _: () = assert!(core::mem::size_of::<perfaux_tick>() == 32);
const _: () = assert!(core::mem::offset_of!(perfaux_tick, ip) == 0);
const _: () = assert!(core::mem::offset_of!(perfaux_tick, tsc) == 8);
const _: () = assert!(core::mem::offset_of!(perfaux_tick, handler) == 16);
const _: () = assert!(core::mem::offset_of!(perfaux_tick, user) == 24);
const _: () = assert!(core::mem::offset_of!(perfaux_tick, exclude_user) == 25);
const _: () = assert!(core::mem::offset_of!(perfaux_tick, exclude_kernel) == 26);
const _: () = assert!(core::mem::offset_of!(perfaux_tick, reserved) == 27);

/// One tick of a kernel module's ticker (`perfaux::soft_pt::tick`): the
/// trace events the interrupt makes as hardware would trace it (TSC,
/// TIP.PGE if tracing was off, FUP + TIP into the handler and back, or
/// FUP + TIP.PGD and TIP.PGE around an untraced kernel; a TIP.PGD once in
/// an excluded context) go to the tracer, and the ToPA PMIs each one's
/// writes raise are handled right after it (`perfaux_pt_handle_pmi`).
/// Returns 0, or `-EINVAL` for a bad `cpu`, a NULL tick, a flag that is
/// not 0 or 1, or non-zero reserved bytes.
///
/// # Safety
/// `cpu` NULL or PT CPU storage, `tick` NULL or readable; called on the
/// CPU in a hard interrupt (or with interrupts off).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_tick(
    cpu: *mut perfaux_pt_cpu,
    tick: *const perfaux_tick,
) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    // SAFETY: NULL or readable (the caller's contract).
    let Some(t) = (unsafe { read_in(tick) }) else {
        return Error::Invalid.errno();
    };
    if t.user > 1 || t.exclude_user > 1 || t.exclude_kernel > 1 || t.reserved != [0; 5] {
        return Error::Invalid.errno();
    }
    let tick = Tick {
        ip: t.ip,
        user: t.user != 0,
        tsc: t.tsc,
        handler: t.handler,
        exclude_user: t.exclude_user != 0,
        exclude_kernel: t.exclude_kernel != 0,
    };
    b.ticks.tick(&tick, |e| b.trace_and_handle(e));
    0
}

/// An event came to or left the CPU (`pmu->add`, `pmu->del`): the ticker's
/// next traced tick starts with TIP.PGE. Returns 0 or `-EINVAL`.
///
/// # Safety
/// `cpu` NULL or PT CPU storage; called on the CPU with interrupts off.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_tick_reset(cpu: *mut perfaux_pt_cpu) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    b.ticks.reset();
    0
}

/// The timestamp counter of `cpu` runs at `tsc_khz` kHz (the kernel's
/// `tsc_khz`): the traces started on it after this carry the core:bus
/// ratio of that frequency in every PSB+ (a CBR of
/// `perfaux::soft_pt::stream::tsc_ratio`), the one perf's decoder
/// converts the cycles of cycle-accurate mode (`intel_pt/cyc/`, counted in
/// TSC ticks) with, 1:1. 0: none known, no CBR. Returns 0 or `-EINVAL`.
///
/// # Safety
/// `cpu` NULL or PT CPU storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn perfaux_pt_set_tsc_khz(cpu: *mut perfaux_pt_cpu, tsc_khz: u32) -> c_int {
    // SAFETY: `cpu` is NULL or `struct perfaux_pt_cpu` storage (this function's `# Safety`),
    // which is what `cpu_ref` needs.
    let Some(b) = (unsafe { cpu_ref(cpu) }) else {
        return Error::Invalid.errno();
    };
    b.tracer().set_ratio(tsc_ratio(tsc_khz));
    0
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
        Some(b) => b.tracer().written().min(i64::MAX as u64) as i64,
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
