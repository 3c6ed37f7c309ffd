// SPDX-License-Identifier: MIT OR Apache-2.0
//! `struct perf_event_attr` through `PERF_ATTR_SIZE_VER8` (`include/uapi/linux/perf_event.h`).

use static_assertions::const_assert_eq;

/// `PERF_ATTR_SIZE_VER0`: the first published attr (and what `size == 0` means).
pub const PERF_ATTR_SIZE_VER0: u32 = 64;
/// `PERF_ATTR_SIZE_VER1`: adds `config2`.
pub const PERF_ATTR_SIZE_VER1: u32 = 72;
/// `PERF_ATTR_SIZE_VER2`: adds `branch_sample_type`.
pub const PERF_ATTR_SIZE_VER2: u32 = 80;
/// `PERF_ATTR_SIZE_VER3`: adds `sample_regs_user`, `sample_stack_user` (and `clockid`).
pub const PERF_ATTR_SIZE_VER3: u32 = 96;
/// `PERF_ATTR_SIZE_VER4`: adds `sample_regs_intr`.
pub const PERF_ATTR_SIZE_VER4: u32 = 104;
/// `PERF_ATTR_SIZE_VER5`: adds `aux_watermark` (and `sample_max_stack`).
pub const PERF_ATTR_SIZE_VER5: u32 = 112;
/// `PERF_ATTR_SIZE_VER6`: adds `aux_sample_size` (Linux 5.5, the AUX sampling feature).
pub const PERF_ATTR_SIZE_VER6: u32 = 120;
/// `PERF_ATTR_SIZE_VER7`: adds `sig_data`.
pub const PERF_ATTR_SIZE_VER7: u32 = 128;
/// `PERF_ATTR_SIZE_VER8`: adds `config3` (Linux 6.3).
pub const PERF_ATTR_SIZE_VER8: u32 = 136;

/// The attr size this engine implements (the kernel's `sizeof(struct perf_event_attr)`).
pub const PERF_ATTR_SIZE: u32 = PERF_ATTR_SIZE_VER8;

/// `PERF_TYPE_HARDWARE`.
pub const PERF_TYPE_HARDWARE: u32 = 0;
/// `PERF_TYPE_SOFTWARE`.
pub const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_TRACEPOINT`.
pub const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_TYPE_HW_CACHE`.
pub const PERF_TYPE_HW_CACHE: u32 = 3;
/// `PERF_TYPE_RAW`.
pub const PERF_TYPE_RAW: u32 = 4;
/// `PERF_TYPE_BREAKPOINT`.
pub const PERF_TYPE_BREAKPOINT: u32 = 5;

/// `PERF_COUNT_SW_CPU_CLOCK` (config of a software event).
pub const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
/// `PERF_COUNT_SW_TASK_CLOCK`.
pub const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
/// `PERF_COUNT_SW_DUMMY`.
pub const PERF_COUNT_SW_DUMMY: u64 = 9;

/// `perf_event_open` flag `PERF_FLAG_FD_NO_GROUP`.
pub const PERF_FLAG_FD_NO_GROUP: u64 = 1 << 0;
/// `perf_event_open` flag `PERF_FLAG_FD_OUTPUT`.
pub const PERF_FLAG_FD_OUTPUT: u64 = 1 << 1;
/// `perf_event_open` flag `PERF_FLAG_PID_CGROUP`.
pub const PERF_FLAG_PID_CGROUP: u64 = 1 << 2;
/// `perf_event_open` flag `PERF_FLAG_FD_CLOEXEC`.
pub const PERF_FLAG_FD_CLOEXEC: u64 = 1 << 3;

/// `struct perf_event_attr` as Linux 6.3+ lays it out (VER8, 136 bytes).
///
/// Unions of the C struct are single fields here, named after their most
/// general member; the other members are accessor methods
/// ([`sample_freq`](Self::sample_freq), [`wakeup_watermark`](Self::wakeup_watermark),
/// [`bp_addr`](Self::bp_addr), [`bp_len`](Self::bp_len)). The C bit-fields
/// are the [`flags`](Self::flags) word (bits in [`attr_flags`](super::attr_flags))
/// and the [`aux_action`](Self::aux_action) word (bits in
/// [`aux_action`](super::aux_action)).
///
/// All fields are native-endian, exactly as in memory.
///
/// ```
/// use perfaux::abi::{attr_flags, PerfEventAttr, PERF_ATTR_SIZE_VER8};
/// let mut attr = PerfEventAttr::new(PERF_ATTR_SIZE_VER8);
/// attr.flags |= attr_flags::DISABLED | attr_flags::EXCLUDE_KERNEL;
/// assert!(attr.disabled() && attr.exclude_kernel() && !attr.inherit());
/// assert_eq!(PerfEventAttr::from_bytes(&attr.to_bytes()), attr);
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PerfEventAttr {
    /// Major type: hardware, software, tracepoint, ... or a dynamic PMU type.
    pub type_: u32,
    /// Size of the attr as the caller knows it (in/out: `perf_copy_attr` writes its own
    /// size back on `E2BIG`).
    pub size: u32,
    /// Type-specific configuration.
    pub config: u64,
    /// Union `sample_period` / `sample_freq` (the latter when `freq` is set).
    pub sample_period: u64,
    /// `PERF_SAMPLE_*` bits: what a sample record carries.
    pub sample_type: u64,
    /// `PERF_FORMAT_*` bits: what a read returns.
    pub read_format: u64,
    /// The bit-field word at offset 40 (`disabled` ... `sigtrap`, reserved 38..63).
    pub flags: u64,
    /// Union `wakeup_events` / `wakeup_watermark` (the latter when `watermark` is set).
    pub wakeup_events: u32,
    /// Breakpoint type.
    pub bp_type: u32,
    /// Union `bp_addr` / `kprobe_func` / `uprobe_path` / `config1`.
    pub config1: u64,
    /// Union `bp_len` / `kprobe_addr` / `probe_offset` / `config2`.
    pub config2: u64,
    /// `PERF_SAMPLE_BRANCH_*` bits.
    pub branch_sample_type: u64,
    /// Register mask for `PERF_SAMPLE_REGS_USER`.
    pub sample_regs_user: u64,
    /// Size of the user stack dump for `PERF_SAMPLE_STACK_USER`.
    pub sample_stack_user: u32,
    /// Clock for time fields when `use_clockid` is set (a `clockid_t`).
    pub clockid: i32,
    /// Register mask for `PERF_SAMPLE_REGS_INTR`.
    pub sample_regs_intr: u64,
    /// Wakeup watermark of the AUX area in bytes (0: half the AUX area).
    pub aux_watermark: u32,
    /// Maximum callchain depth (0: the system's `perf_event_max_stack`).
    pub sample_max_stack: u16,
    /// Reserved, must be zero.
    pub reserved_2: u16,
    /// Bytes of AUX data each sample asks for (`PERF_SAMPLE_AUX`).
    pub aux_sample_size: u32,
    /// The `aux_action` word (Linux 6.13+): `aux_start_paused`, `aux_pause`,
    /// `aux_resume`, and 29 reserved bits (`__reserved_3` before 6.13).
    pub aux_action: u32,
    /// User data passed with `sigtrap` signals.
    pub sig_data: u64,
    /// Extension of `config2`.
    pub config3: u64,
}

const_assert_eq!(
    core::mem::size_of::<PerfEventAttr>(),
    PERF_ATTR_SIZE as usize
);
const_assert_eq!(core::mem::align_of::<PerfEventAttr>(), 8);

/// Byte offsets of every field (the uapi header's), asserted against the struct.
pub mod attr_offsets {
    #![allow(missing_docs)]
    pub const TYPE: usize = 0;
    pub const SIZE: usize = 4;
    pub const CONFIG: usize = 8;
    pub const SAMPLE_PERIOD: usize = 16;
    pub const SAMPLE_TYPE: usize = 24;
    pub const READ_FORMAT: usize = 32;
    pub const FLAGS: usize = 40;
    pub const WAKEUP_EVENTS: usize = 48;
    pub const BP_TYPE: usize = 52;
    pub const CONFIG1: usize = 56;
    pub const CONFIG2: usize = 64;
    pub const BRANCH_SAMPLE_TYPE: usize = 72;
    pub const SAMPLE_REGS_USER: usize = 80;
    pub const SAMPLE_STACK_USER: usize = 88;
    pub const CLOCKID: usize = 92;
    pub const SAMPLE_REGS_INTR: usize = 96;
    pub const AUX_WATERMARK: usize = 104;
    pub const SAMPLE_MAX_STACK: usize = 108;
    pub const RESERVED_2: usize = 110;
    pub const AUX_SAMPLE_SIZE: usize = 112;
    pub const AUX_ACTION: usize = 116;
    pub const SIG_DATA: usize = 120;
    pub const CONFIG3: usize = 128;
}

macro_rules! assert_offsets {
    ($ty:ty { $($field:ident => $off:path),* $(,)? }) => {
        $( const_assert_eq!(core::mem::offset_of!($ty, $field), $off); )*
    };
}

assert_offsets!(PerfEventAttr {
    type_ => attr_offsets::TYPE,
    size => attr_offsets::SIZE,
    config => attr_offsets::CONFIG,
    sample_period => attr_offsets::SAMPLE_PERIOD,
    sample_type => attr_offsets::SAMPLE_TYPE,
    read_format => attr_offsets::READ_FORMAT,
    flags => attr_offsets::FLAGS,
    wakeup_events => attr_offsets::WAKEUP_EVENTS,
    bp_type => attr_offsets::BP_TYPE,
    config1 => attr_offsets::CONFIG1,
    config2 => attr_offsets::CONFIG2,
    branch_sample_type => attr_offsets::BRANCH_SAMPLE_TYPE,
    sample_regs_user => attr_offsets::SAMPLE_REGS_USER,
    sample_stack_user => attr_offsets::SAMPLE_STACK_USER,
    clockid => attr_offsets::CLOCKID,
    sample_regs_intr => attr_offsets::SAMPLE_REGS_INTR,
    aux_watermark => attr_offsets::AUX_WATERMARK,
    sample_max_stack => attr_offsets::SAMPLE_MAX_STACK,
    reserved_2 => attr_offsets::RESERVED_2,
    aux_sample_size => attr_offsets::AUX_SAMPLE_SIZE,
    aux_action => attr_offsets::AUX_ACTION,
    sig_data => attr_offsets::SIG_DATA,
    config3 => attr_offsets::CONFIG3,
});

pub(crate) use assert_offsets;

/// Defines the flag-word bit constants and one getter per bit, from one list,
/// so that a bit's name, number and accessor can never disagree.
macro_rules! attr_flag_bits {
    ($($(#[$doc:meta])* $getter:ident => $konst:ident = $bit:expr;)*) => {
        /// Bits of the flag word at offset 40 of `perf_event_attr` (its bitfields, in uapi order).
        pub mod attr_flags {
            $( $(#[$doc])* pub const $konst: u64 = 1 << $bit; )*
            /// `precise_ip`, a 2-bit field at bits 15..16.
            pub const PRECISE_IP_SHIFT: u32 = 15;
            /// Mask of the `precise_ip` field.
            pub const PRECISE_IP_MASK: u64 = 0b11 << PRECISE_IP_SHIFT;
            /// Every bit Linux defines (0..=37); the rest is `__reserved_1`.
            pub const KNOWN: u64 = (1 << 38) - 1;
            /// `__reserved_1`: bits 38..63, must be zero.
            pub const RESERVED: u64 = !KNOWN;
            /// Every one-bit flag with its C name (`precise_ip` is separate).
            pub const NAMES: &[(&str, u64)] = &[$((stringify!($getter), $konst)),*];
        }

        impl PerfEventAttr {
            $(
                $(#[$doc])*
                #[inline]
                pub const fn $getter(&self) -> bool {
                    self.flags & attr_flags::$konst != 0
                }
            )*
        }
    };
}

attr_flag_bits! {
    /// `disabled`: the event starts off.
    disabled => DISABLED = 0;
    /// `inherit`: children inherit the event.
    inherit => INHERIT = 1;
    /// `pinned`: must always be on the PMU.
    pinned => PINNED = 2;
    /// `exclusive`: the only group on the PMU.
    exclusive => EXCLUSIVE = 3;
    /// `exclude_user`: do not count user mode.
    exclude_user => EXCLUDE_USER = 4;
    /// `exclude_kernel`: do not count kernel mode.
    exclude_kernel => EXCLUDE_KERNEL = 5;
    /// `exclude_hv`: do not count the hypervisor.
    exclude_hv => EXCLUDE_HV = 6;
    /// `exclude_idle`: do not count when idle.
    exclude_idle => EXCLUDE_IDLE = 7;
    /// `mmap`: emit mmap records.
    mmap => MMAP = 8;
    /// `comm`: emit comm records.
    comm => COMM = 9;
    /// `freq`: `sample_freq`, not `sample_period`.
    freq => FREQ = 10;
    /// `inherit_stat`: per-task counts.
    inherit_stat => INHERIT_STAT = 11;
    /// `enable_on_exec`: enable at the next exec.
    enable_on_exec => ENABLE_ON_EXEC = 12;
    /// `task`: emit fork/exit records.
    task => TASK = 13;
    /// `watermark`: `wakeup_watermark`, not `wakeup_events`.
    watermark => WATERMARK = 14;
    /// `mmap_data`: emit non-exec mmap records.
    mmap_data => MMAP_DATA = 17;
    /// `sample_id_all`: every record carries the sample_id trailer.
    sample_id_all => SAMPLE_ID_ALL = 18;
    /// `exclude_host`: do not count in the host.
    exclude_host => EXCLUDE_HOST = 19;
    /// `exclude_guest`: do not count in guests.
    exclude_guest => EXCLUDE_GUEST = 20;
    /// `exclude_callchain_kernel`.
    exclude_callchain_kernel => EXCLUDE_CALLCHAIN_KERNEL = 21;
    /// `exclude_callchain_user`.
    exclude_callchain_user => EXCLUDE_CALLCHAIN_USER = 22;
    /// `mmap2`: extended mmap records.
    mmap2 => MMAP2 = 23;
    /// `comm_exec`: flag comm records caused by exec.
    comm_exec => COMM_EXEC = 24;
    /// `use_clockid`: time fields use `clockid`.
    use_clockid => USE_CLOCKID = 25;
    /// `context_switch`: emit context-switch records.
    context_switch => CONTEXT_SWITCH = 26;
    /// `write_backward`: the ring is written from the end.
    write_backward => WRITE_BACKWARD = 27;
    /// `namespaces`: emit namespace records.
    namespaces => NAMESPACES = 28;
    /// `ksymbol`: emit ksymbol records.
    ksymbol => KSYMBOL = 29;
    /// `bpf_event`: emit bpf records.
    bpf_event => BPF_EVENT = 30;
    /// `aux_output`: this event's output goes into the AUX leader's trace.
    aux_output => AUX_OUTPUT = 31;
    /// `cgroup`: emit cgroup records.
    cgroup => CGROUP = 32;
    /// `text_poke`: emit text-poke records.
    text_poke => TEXT_POKE = 33;
    /// `build_id`: mmap2 records carry a build id.
    build_id => BUILD_ID = 34;
    /// `inherit_thread`: inherit to threads only.
    inherit_thread => INHERIT_THREAD = 35;
    /// `remove_on_exec`: the event goes away at exec.
    remove_on_exec => REMOVE_ON_EXEC = 36;
    /// `sigtrap`: send SIGTRAP on overflow.
    sigtrap => SIGTRAP = 37;
}

/// Bits of the `aux_action` word at offset 116 (Linux 6.13+: `aux_start_paused`,
/// `aux_pause`, `aux_resume`).
pub mod aux_action {
    /// `aux_start_paused`: the AUX event starts with its trace paused.
    pub const START_PAUSED: u32 = 1 << 0;
    /// `aux_pause`: this event's overflow pauses the AUX leader's trace.
    pub const PAUSE: u32 = 1 << 1;
    /// `aux_resume`: this event's overflow resumes the AUX leader's trace.
    pub const RESUME: u32 = 1 << 2;
    /// `__reserved_3`: bits 3..31, must be zero.
    pub const RESERVED: u32 = !0b111;
}

impl PerfEventAttr {
    /// An all-zero attr whose `size` field says `size`.
    pub const fn new(size: u32) -> Self {
        PerfEventAttr {
            type_: 0,
            size,
            config: 0,
            sample_period: 0,
            sample_type: 0,
            read_format: 0,
            flags: 0,
            wakeup_events: 0,
            bp_type: 0,
            config1: 0,
            config2: 0,
            branch_sample_type: 0,
            sample_regs_user: 0,
            sample_stack_user: 0,
            clockid: 0,
            sample_regs_intr: 0,
            aux_watermark: 0,
            sample_max_stack: 0,
            reserved_2: 0,
            aux_sample_size: 0,
            aux_action: 0,
            sig_data: 0,
            config3: 0,
        }
    }

    /// `precise_ip` (bits 15..16 of the flag word).
    #[inline]
    pub const fn precise_ip(&self) -> u8 {
        ((self.flags & attr_flags::PRECISE_IP_MASK) >> attr_flags::PRECISE_IP_SHIFT) as u8
    }

    /// `sample_freq`, the other member of the `sample_period` union.
    #[inline]
    pub const fn sample_freq(&self) -> u64 {
        self.sample_period
    }

    /// `wakeup_watermark`, the other member of the `wakeup_events` union.
    #[inline]
    pub const fn wakeup_watermark(&self) -> u32 {
        self.wakeup_events
    }

    /// `bp_addr`, a member of the `config1` union.
    #[inline]
    pub const fn bp_addr(&self) -> u64 {
        self.config1
    }

    /// `bp_len`, a member of the `config2` union.
    #[inline]
    pub const fn bp_len(&self) -> u64 {
        self.config2
    }

    /// `aux_start_paused` (bit 0 of `aux_action`).
    #[inline]
    pub const fn aux_start_paused(&self) -> bool {
        self.aux_action & aux_action::START_PAUSED != 0
    }

    /// `aux_pause` (bit 1 of `aux_action`).
    #[inline]
    pub const fn aux_pause(&self) -> bool {
        self.aux_action & aux_action::PAUSE != 0
    }

    /// `aux_resume` (bit 2 of `aux_action`).
    #[inline]
    pub const fn aux_resume(&self) -> bool {
        self.aux_action & aux_action::RESUME != 0
    }

    /// Sets or clears flag-word bits (`mask` from [`attr_flags`](super::attr_flags)).
    #[inline]
    pub fn set_flags(&mut self, mask: u64, on: bool) {
        if on {
            self.flags |= mask;
        } else {
            self.flags &= !mask;
        }
    }

    /// The attr as the 136 bytes C sees (native endian).
    pub fn to_bytes(&self) -> [u8; PERF_ATTR_SIZE as usize] {
        let mut out = [0u8; PERF_ATTR_SIZE as usize];
        let mut w = FieldWriter { buf: &mut out };
        use attr_offsets as o;
        w.put(o::TYPE, &self.type_.to_ne_bytes());
        w.put(o::SIZE, &self.size.to_ne_bytes());
        w.put(o::CONFIG, &self.config.to_ne_bytes());
        w.put(o::SAMPLE_PERIOD, &self.sample_period.to_ne_bytes());
        w.put(o::SAMPLE_TYPE, &self.sample_type.to_ne_bytes());
        w.put(o::READ_FORMAT, &self.read_format.to_ne_bytes());
        w.put(o::FLAGS, &self.flags.to_ne_bytes());
        w.put(o::WAKEUP_EVENTS, &self.wakeup_events.to_ne_bytes());
        w.put(o::BP_TYPE, &self.bp_type.to_ne_bytes());
        w.put(o::CONFIG1, &self.config1.to_ne_bytes());
        w.put(o::CONFIG2, &self.config2.to_ne_bytes());
        w.put(
            o::BRANCH_SAMPLE_TYPE,
            &self.branch_sample_type.to_ne_bytes(),
        );
        w.put(o::SAMPLE_REGS_USER, &self.sample_regs_user.to_ne_bytes());
        w.put(o::SAMPLE_STACK_USER, &self.sample_stack_user.to_ne_bytes());
        w.put(o::CLOCKID, &self.clockid.to_ne_bytes());
        w.put(o::SAMPLE_REGS_INTR, &self.sample_regs_intr.to_ne_bytes());
        w.put(o::AUX_WATERMARK, &self.aux_watermark.to_ne_bytes());
        w.put(o::SAMPLE_MAX_STACK, &self.sample_max_stack.to_ne_bytes());
        w.put(o::RESERVED_2, &self.reserved_2.to_ne_bytes());
        w.put(o::AUX_SAMPLE_SIZE, &self.aux_sample_size.to_ne_bytes());
        w.put(o::AUX_ACTION, &self.aux_action.to_ne_bytes());
        w.put(o::SIG_DATA, &self.sig_data.to_ne_bytes());
        w.put(o::CONFIG3, &self.config3.to_ne_bytes());
        out
    }

    /// The attr from the 136 bytes C sees (native endian). Every bit pattern is
    /// a valid `PerfEventAttr`; validation is [`crate::attr`]'s job.
    pub fn from_bytes(bytes: &[u8; PERF_ATTR_SIZE as usize]) -> Self {
        let r = FieldReader { buf: bytes };
        use attr_offsets as o;
        PerfEventAttr {
            type_: r.u32(o::TYPE),
            size: r.u32(o::SIZE),
            config: r.u64(o::CONFIG),
            sample_period: r.u64(o::SAMPLE_PERIOD),
            sample_type: r.u64(o::SAMPLE_TYPE),
            read_format: r.u64(o::READ_FORMAT),
            flags: r.u64(o::FLAGS),
            wakeup_events: r.u32(o::WAKEUP_EVENTS),
            bp_type: r.u32(o::BP_TYPE),
            config1: r.u64(o::CONFIG1),
            config2: r.u64(o::CONFIG2),
            branch_sample_type: r.u64(o::BRANCH_SAMPLE_TYPE),
            sample_regs_user: r.u64(o::SAMPLE_REGS_USER),
            sample_stack_user: r.u32(o::SAMPLE_STACK_USER),
            clockid: r.u32(o::CLOCKID) as i32,
            sample_regs_intr: r.u64(o::SAMPLE_REGS_INTR),
            aux_watermark: r.u32(o::AUX_WATERMARK),
            sample_max_stack: r.u16(o::SAMPLE_MAX_STACK),
            reserved_2: r.u16(o::RESERVED_2),
            aux_sample_size: r.u32(o::AUX_SAMPLE_SIZE),
            aux_action: r.u32(o::AUX_ACTION),
            sig_data: r.u64(o::SIG_DATA),
            config3: r.u64(o::CONFIG3),
        }
    }
}

/// Writes fields at fixed offsets of a byte image; the offsets are the
/// compile-time-checked constants above, so the slicing cannot fail.
struct FieldWriter<'a> {
    buf: &'a mut [u8; PERF_ATTR_SIZE as usize],
}

impl FieldWriter<'_> {
    #[inline]
    fn put(&mut self, off: usize, bytes: &[u8]) {
        self.buf[off..off + bytes.len()].copy_from_slice(bytes);
    }
}

/// Reads fields at fixed offsets of a byte image.
struct FieldReader<'a> {
    buf: &'a [u8; PERF_ATTR_SIZE as usize],
}

impl FieldReader<'_> {
    #[inline]
    fn array<const N: usize>(&self, off: usize) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&self.buf[off..off + N]);
        a
    }
    #[inline]
    fn u16(&self, off: usize) -> u16 {
        u16::from_ne_bytes(self.array(off))
    }
    #[inline]
    fn u32(&self, off: usize) -> u32 {
        u32::from_ne_bytes(self.array(off))
    }
    #[inline]
    fn u64(&self, off: usize) -> u64 {
        u64::from_ne_bytes(self.array(off))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_puts_each_field_at_its_offset() {
        let mut a = PerfEventAttr::new(PERF_ATTR_SIZE_VER8);
        a.type_ = 0x0102_0304;
        a.clockid = -5;
        a.aux_sample_size = 0xdead_beef;
        a.aux_action = aux_action::PAUSE;
        a.sample_max_stack = 0x1234;
        a.config3 = u64::MAX;
        let b = a.to_bytes();
        assert_eq!(&b[0..4], &0x0102_0304u32.to_ne_bytes());
        assert_eq!(&b[4..8], &136u32.to_ne_bytes());
        assert_eq!(&b[92..96], &(-5i32).to_ne_bytes());
        assert_eq!(&b[108..110], &0x1234u16.to_ne_bytes());
        assert_eq!(&b[112..116], &0xdead_beefu32.to_ne_bytes());
        assert_eq!(&b[116..120], &2u32.to_ne_bytes());
        assert_eq!(&b[128..136], &[0xff; 8]);
        assert_eq!(PerfEventAttr::from_bytes(&b), a);
    }

    #[test]
    fn flag_getters_match_their_bits() {
        let mut a = PerfEventAttr {
            flags: attr_flags::SIGTRAP
                | attr_flags::AUX_OUTPUT
                | (3 << attr_flags::PRECISE_IP_SHIFT),
            ..PerfEventAttr::default()
        };
        assert!(a.sigtrap() && a.aux_output() && !a.disabled());
        assert_eq!(a.precise_ip(), 3);
        assert_eq!(attr_flags::SIGTRAP, 1 << 37);
        assert_eq!(attr_flags::AUX_OUTPUT, 1 << 31);
        assert_eq!(attr_flags::RESERVED, !((1u64 << 38) - 1));
        a.set_flags(attr_flags::SIGTRAP, false);
        assert!(!a.sigtrap());
    }
}
