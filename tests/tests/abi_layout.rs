// SPDX-License-Identifier: MIT OR Apache-2.0
//! perfaux's ABI layouts against the C compiler's: bindgen runs on the
//! system's `<linux/perf_event.h>` (see `build.rs`) and every field offset,
//! field size, flag bit and constant is compared. The system header is
//! Linux 6.1 (128-byte attr); what came later (`config3`, the `aux_action`
//! bits) is checked against a table of the uapi header's offsets instead.

use std::mem::{offset_of, size_of};

use perfaux::abi::*;
use perfaux_tests::records::u64_at;

#[cfg(perf_event_bindings)]
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unsafe_op_in_unsafe_fn
)]
#[allow(
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    clippy::multiple_unsafe_ops_per_block
)]
mod sys {
    include!(concat!(env!("OUT_DIR"), "/perf_event_sys.rs"));
}

/// Size of a field, from an accessor closure (`offset_of!`'s companion).
fn field_size<T, F>(_: impl Fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// The uapi header: (field, offset, size) of `perf_event_attr` through VER8.
const SPEC_ATTR: [(&str, usize, usize); 23] = [
    ("type", 0, 4),
    ("size", 4, 4),
    ("config", 8, 8),
    ("sample_period", 16, 8),
    ("sample_type", 24, 8),
    ("read_format", 32, 8),
    ("flags", 40, 8),
    ("wakeup_events", 48, 4),
    ("bp_type", 52, 4),
    ("config1", 56, 8),
    ("config2", 64, 8),
    ("branch_sample_type", 72, 8),
    ("sample_regs_user", 80, 8),
    ("sample_stack_user", 88, 4),
    ("clockid", 92, 4),
    ("sample_regs_intr", 96, 8),
    ("aux_watermark", 104, 4),
    ("sample_max_stack", 108, 2),
    ("__reserved_2", 110, 2),
    ("aux_sample_size", 112, 4),
    ("aux_action", 116, 4),
    ("sig_data", 120, 8),
    ("config3", 128, 8),
];

/// perfaux's (field, offset, size), in the order of [`SPEC_ATTR`].
fn our_attr_fields() -> [(&'static str, usize, usize); 23] {
    type A = PerfEventAttr;
    macro_rules! f {
        ($name:literal, $field:ident) => {
            ($name, offset_of!(A, $field), field_size(|a: &A| &a.$field))
        };
    }
    [
        f!("type", type_),
        f!("size", size),
        f!("config", config),
        f!("sample_period", sample_period),
        f!("sample_type", sample_type),
        f!("read_format", read_format),
        f!("flags", flags),
        f!("wakeup_events", wakeup_events),
        f!("bp_type", bp_type),
        f!("config1", config1),
        f!("config2", config2),
        f!("branch_sample_type", branch_sample_type),
        f!("sample_regs_user", sample_regs_user),
        f!("sample_stack_user", sample_stack_user),
        f!("clockid", clockid),
        f!("sample_regs_intr", sample_regs_intr),
        f!("aux_watermark", aux_watermark),
        f!("sample_max_stack", sample_max_stack),
        f!("__reserved_2", reserved_2),
        f!("aux_sample_size", aux_sample_size),
        f!("aux_action", aux_action),
        f!("sig_data", sig_data),
        f!("config3", config3),
    ]
}

#[test]
fn attr_matches_the_spec_table() {
    assert_eq!(our_attr_fields(), SPEC_ATTR);
    assert_eq!(size_of::<PerfEventAttr>(), 136);
    let sizes = [
        PERF_ATTR_SIZE_VER0,
        PERF_ATTR_SIZE_VER1,
        PERF_ATTR_SIZE_VER2,
        PERF_ATTR_SIZE_VER3,
        PERF_ATTR_SIZE_VER4,
        PERF_ATTR_SIZE_VER5,
        PERF_ATTR_SIZE_VER6,
        PERF_ATTR_SIZE_VER7,
        PERF_ATTR_SIZE_VER8,
    ];
    assert_eq!(sizes, [64, 72, 80, 96, 104, 112, 120, 128, 136]);
    // Each VER ends where the spec says its last field ends.
    assert_eq!(
        offset_of!(PerfEventAttr, config2) as u32,
        PERF_ATTR_SIZE_VER0
    );
    assert_eq!(
        offset_of!(PerfEventAttr, aux_sample_size) as u32,
        PERF_ATTR_SIZE_VER5
    );
    assert_eq!(
        offset_of!(PerfEventAttr, sig_data) as u32 + 8,
        PERF_ATTR_SIZE_VER7
    );
    assert_eq!(
        aux_action::START_PAUSED | aux_action::PAUSE | aux_action::RESUME,
        0b111
    );
    assert_eq!(aux_action::RESERVED, !0b111);
}

#[cfg(not(perf_event_bindings))]
#[test]
fn system_header_comparison() {
    // build.rs fails the build instead when PERFAUX_REQUIRE_BINDGEN=1 (CI).
    if let Some(why) = option_env!("PERFAUX_REQUIRE_BINDGEN").filter(|v| *v == "1") {
        panic!("bindings required ({why}) but not generated");
    }
    perfaux_tests::skipped(
        "8 ABI comparisons with <linux/perf_event.h>: bindgen could not run at build time (apt-get install libclang-dev)",
    );
}

#[cfg(perf_event_bindings)]
mod against_system_header {
    use super::*;
    use sys::perf_event_attr as C;

    /// The bytes of a bindgen struct.
    fn bytes_of<T>(value: &T) -> &[u8] {
        // SAFETY: `value` is a live, initialized bindgen struct of plain
        // integers (no padding in these uapi structs: their sizes equal the
        // sum of their fields, asserted below), viewed as bytes for its
        // exact size while the borrow lasts.
        unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }
    }

    #[test]
    fn attr_fields_match_bindgen() {
        assert_eq!(sys::UNAVAILABLE, None);
        assert_eq!(
            size_of::<C>(),
            PERF_ATTR_SIZE_VER7 as usize,
            "the system header is VER7 (6.1)"
        );
        macro_rules! c {
            ($name:literal, $($path:ident).+) => {
                ($name, offset_of!(C, $($path).+), field_size(|a: &C| &a.$($path).+))
            };
        }
        let theirs = [
            c!("type", type_),
            c!("size", size),
            c!("config", config),
            c!("sample_period", __bindgen_anon_1),
            c!("sample_type", sample_type),
            c!("read_format", read_format),
            c!("flags", _bitfield_1),
            c!("wakeup_events", __bindgen_anon_2),
            c!("bp_type", bp_type),
            c!("config1", __bindgen_anon_3),
            c!("config2", __bindgen_anon_4),
            c!("branch_sample_type", branch_sample_type),
            c!("sample_regs_user", sample_regs_user),
            c!("sample_stack_user", sample_stack_user),
            c!("clockid", clockid),
            c!("sample_regs_intr", sample_regs_intr),
            c!("aux_watermark", aux_watermark),
            c!("sample_max_stack", sample_max_stack),
            c!("__reserved_2", __reserved_2),
            c!("aux_sample_size", aux_sample_size),
            c!("aux_action", __reserved_3),
            c!("sig_data", sig_data),
        ];
        let ours = our_attr_fields();
        for (i, t) in theirs.iter().enumerate() {
            assert_eq!(&ours[i], t, "field {}", t.0);
        }
        let sum: usize = theirs.iter().map(|f| f.2).sum();
        assert_eq!(sum, size_of::<C>(), "no padding in the C struct");
    }

    #[test]
    fn every_flag_bit_matches_bindgen() {
        macro_rules! bit {
            ($setter:ident, $ours:expr, $value:expr) => {{
                let mut a = C::default();
                a.$setter($value);
                let word = u64_at(&bytes_of(&a), 40);
                assert_eq!(word, $ours, stringify!($setter));
                let outside = bytes_of(&a)
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !(40..48).contains(i));
                assert!(
                    outside.clone().all(|(_, &b)| b == 0),
                    "only the flag word changes"
                );
            }};
        }
        use attr_flags as f;
        bit!(set_disabled, f::DISABLED, 1);
        bit!(set_inherit, f::INHERIT, 1);
        bit!(set_pinned, f::PINNED, 1);
        bit!(set_exclusive, f::EXCLUSIVE, 1);
        bit!(set_exclude_user, f::EXCLUDE_USER, 1);
        bit!(set_exclude_kernel, f::EXCLUDE_KERNEL, 1);
        bit!(set_exclude_hv, f::EXCLUDE_HV, 1);
        bit!(set_exclude_idle, f::EXCLUDE_IDLE, 1);
        bit!(set_mmap, f::MMAP, 1);
        bit!(set_comm, f::COMM, 1);
        bit!(set_freq, f::FREQ, 1);
        bit!(set_inherit_stat, f::INHERIT_STAT, 1);
        bit!(set_enable_on_exec, f::ENABLE_ON_EXEC, 1);
        bit!(set_task, f::TASK, 1);
        bit!(set_watermark, f::WATERMARK, 1);
        bit!(set_precise_ip, f::PRECISE_IP_MASK, 3);
        bit!(set_mmap_data, f::MMAP_DATA, 1);
        bit!(set_sample_id_all, f::SAMPLE_ID_ALL, 1);
        bit!(set_exclude_host, f::EXCLUDE_HOST, 1);
        bit!(set_exclude_guest, f::EXCLUDE_GUEST, 1);
        bit!(set_exclude_callchain_kernel, f::EXCLUDE_CALLCHAIN_KERNEL, 1);
        bit!(set_exclude_callchain_user, f::EXCLUDE_CALLCHAIN_USER, 1);
        bit!(set_mmap2, f::MMAP2, 1);
        bit!(set_comm_exec, f::COMM_EXEC, 1);
        bit!(set_use_clockid, f::USE_CLOCKID, 1);
        bit!(set_context_switch, f::CONTEXT_SWITCH, 1);
        bit!(set_write_backward, f::WRITE_BACKWARD, 1);
        bit!(set_namespaces, f::NAMESPACES, 1);
        bit!(set_ksymbol, f::KSYMBOL, 1);
        bit!(set_bpf_event, f::BPF_EVENT, 1);
        bit!(set_aux_output, f::AUX_OUTPUT, 1);
        bit!(set_cgroup, f::CGROUP, 1);
        bit!(set_text_poke, f::TEXT_POKE, 1);
        bit!(set_build_id, f::BUILD_ID, 1);
        bit!(set_inherit_thread, f::INHERIT_THREAD, 1);
        bit!(set_remove_on_exec, f::REMOVE_ON_EXEC, 1);
        bit!(set_sigtrap, f::SIGTRAP, 1);
        bit!(set___reserved_1, f::RESERVED, (1 << 26) - 1);
    }

    #[test]
    fn flag_getters_read_what_c_writes() {
        let mut a = C::default();
        a.set_sigtrap(1);
        a.set_aux_output(1);
        a.set_precise_ip(2);
        a.aux_sample_size = 4096;
        let ours = PerfEventAttr::from_bytes(&{
            let mut b = [0u8; 136];
            b[..128].copy_from_slice(bytes_of(&a));
            b
        });
        assert!(ours.sigtrap() && ours.aux_output() && !ours.inherit());
        assert_eq!(ours.precise_ip(), 2);
        assert_eq!(ours.aux_sample_size, 4096);
    }

    #[test]
    fn mmap_page_matches_bindgen() {
        type M = sys::perf_event_mmap_page;
        type P = PerfEventMmapPage;
        assert_eq!(size_of::<M>(), size_of::<P>());
        assert_eq!(size_of::<P>(), PERF_MMAP_PAGE_SIZE);
        macro_rules! same {
            ($ours:ident, $($theirs:ident).+) => {
                assert_eq!(
                    (offset_of!(P, $ours), field_size(|p: &P| &p.$ours)),
                    (offset_of!(M, $($theirs).+), field_size(|m: &M| &m.$($theirs).+)),
                    stringify!($ours)
                );
            };
        }
        same!(version, version);
        same!(compat_version, compat_version);
        same!(lock, lock);
        same!(index, index);
        same!(offset, offset);
        same!(time_enabled, time_enabled);
        same!(time_running, time_running);
        same!(capabilities, __bindgen_anon_1);
        same!(pmc_width, pmc_width);
        same!(time_shift, time_shift);
        same!(time_mult, time_mult);
        same!(time_offset, time_offset);
        same!(time_zero, time_zero);
        same!(size, size);
        same!(reserved_1, __reserved_1);
        same!(time_cycles, time_cycles);
        same!(time_mask, time_mask);
        same!(reserved, __reserved);
        same!(data_head, data_head);
        same!(data_tail, data_tail);
        same!(data_offset, data_offset);
        same!(data_size, data_size);
        same!(aux_head, aux_head);
        same!(aux_tail, aux_tail);
        same!(aux_offset, aux_offset);
        same!(aux_size, aux_size);
        assert_eq!(offset_of!(P, data_head), 1024);
        assert_eq!(offset_of!(P, aux_size), 1080);
        assert_eq!(offset_of!(P, reserved) as u32, PERF_MMAP_PAGE_HEADER_SIZE);

        macro_rules! cap {
            ($setter:ident, $ours:expr) => {{
                let mut m = M::default();
                // SAFETY: writing the bit-field view of a zeroed u64 union.
                unsafe { m.__bindgen_anon_1.__bindgen_anon_1.$setter(1) };
                // SAFETY: reading the u64 view of the same union.
                let word = unsafe { m.__bindgen_anon_1.capabilities };
                assert_eq!(word, $ours, stringify!($setter));
            }};
        }
        cap!(set_cap_bit0, mmap_caps::BIT0);
        cap!(set_cap_bit0_is_deprecated, mmap_caps::BIT0_IS_DEPRECATED);
        cap!(set_cap_user_rdpmc, mmap_caps::USER_RDPMC);
        cap!(set_cap_user_time, mmap_caps::USER_TIME);
        cap!(set_cap_user_time_zero, mmap_caps::USER_TIME_ZERO);
        cap!(set_cap_user_time_short, mmap_caps::USER_TIME_SHORT);
    }

    #[test]
    fn header_matches_bindgen() {
        type H = sys::perf_event_header;
        assert_eq!(size_of::<H>(), size_of::<PerfEventHeader>());
        assert_eq!(offset_of!(H, type_), offset_of!(PerfEventHeader, type_));
        assert_eq!(offset_of!(H, misc), offset_of!(PerfEventHeader, misc));
        assert_eq!(offset_of!(H, size), offset_of!(PerfEventHeader, size));
    }

    #[test]
    fn constants_match_bindgen() {
        use sys as s;
        let pairs: &[(&str, u64, u64)] = &[
            (
                "VER0",
                PERF_ATTR_SIZE_VER0.into(),
                s::PERF_ATTR_SIZE_VER0.into(),
            ),
            (
                "VER1",
                PERF_ATTR_SIZE_VER1.into(),
                s::PERF_ATTR_SIZE_VER1.into(),
            ),
            (
                "VER2",
                PERF_ATTR_SIZE_VER2.into(),
                s::PERF_ATTR_SIZE_VER2.into(),
            ),
            (
                "VER3",
                PERF_ATTR_SIZE_VER3.into(),
                s::PERF_ATTR_SIZE_VER3.into(),
            ),
            (
                "VER4",
                PERF_ATTR_SIZE_VER4.into(),
                s::PERF_ATTR_SIZE_VER4.into(),
            ),
            (
                "VER5",
                PERF_ATTR_SIZE_VER5.into(),
                s::PERF_ATTR_SIZE_VER5.into(),
            ),
            (
                "VER6",
                PERF_ATTR_SIZE_VER6.into(),
                s::PERF_ATTR_SIZE_VER6.into(),
            ),
            (
                "VER7",
                PERF_ATTR_SIZE_VER7.into(),
                s::PERF_ATTR_SIZE_VER7.into(),
            ),
            (
                "TYPE_HARDWARE",
                PERF_TYPE_HARDWARE.into(),
                s::PERF_TYPE_HARDWARE.into(),
            ),
            (
                "TYPE_SOFTWARE",
                PERF_TYPE_SOFTWARE.into(),
                s::PERF_TYPE_SOFTWARE.into(),
            ),
            (
                "TYPE_TRACEPOINT",
                PERF_TYPE_TRACEPOINT.into(),
                s::PERF_TYPE_TRACEPOINT.into(),
            ),
            (
                "TYPE_HW_CACHE",
                PERF_TYPE_HW_CACHE.into(),
                s::PERF_TYPE_HW_CACHE.into(),
            ),
            ("TYPE_RAW", PERF_TYPE_RAW.into(), s::PERF_TYPE_RAW.into()),
            (
                "TYPE_BREAKPOINT",
                PERF_TYPE_BREAKPOINT.into(),
                s::PERF_TYPE_BREAKPOINT.into(),
            ),
            (
                "SW_CPU_CLOCK",
                PERF_COUNT_SW_CPU_CLOCK,
                s::PERF_COUNT_SW_CPU_CLOCK.into(),
            ),
            (
                "SW_TASK_CLOCK",
                PERF_COUNT_SW_TASK_CLOCK,
                s::PERF_COUNT_SW_TASK_CLOCK.into(),
            ),
            (
                "SW_DUMMY",
                PERF_COUNT_SW_DUMMY,
                s::PERF_COUNT_SW_DUMMY.into(),
            ),
            (
                "FD_NO_GROUP",
                PERF_FLAG_FD_NO_GROUP,
                s::PERF_FLAG_FD_NO_GROUP.into(),
            ),
            (
                "FD_OUTPUT",
                PERF_FLAG_FD_OUTPUT,
                s::PERF_FLAG_FD_OUTPUT.into(),
            ),
            (
                "PID_CGROUP",
                PERF_FLAG_PID_CGROUP,
                s::PERF_FLAG_PID_CGROUP.into(),
            ),
            (
                "FD_CLOEXEC",
                PERF_FLAG_FD_CLOEXEC,
                s::PERF_FLAG_FD_CLOEXEC.into(),
            ),
            (
                "AUX_FLAG_TRUNCATED",
                aux_flags::TRUNCATED,
                s::PERF_AUX_FLAG_TRUNCATED.into(),
            ),
            (
                "AUX_FLAG_OVERWRITE",
                aux_flags::OVERWRITE,
                s::PERF_AUX_FLAG_OVERWRITE.into(),
            ),
            (
                "AUX_FLAG_PARTIAL",
                aux_flags::PARTIAL,
                s::PERF_AUX_FLAG_PARTIAL.into(),
            ),
            (
                "AUX_FLAG_COLLISION",
                aux_flags::COLLISION,
                s::PERF_AUX_FLAG_COLLISION.into(),
            ),
            (
                "AUX_FLAG_FORMAT_MASK",
                aux_flags::PMU_FORMAT_TYPE_MASK,
                s::PERF_AUX_FLAG_PMU_FORMAT_TYPE_MASK.into(),
            ),
            (
                "AUX_FLAG_CS_CS",
                aux_flags::CORESIGHT_FORMAT_CORESIGHT,
                s::PERF_AUX_FLAG_CORESIGHT_FORMAT_CORESIGHT.into(),
            ),
            (
                "AUX_FLAG_CS_RAW",
                aux_flags::CORESIGHT_FORMAT_RAW,
                s::PERF_AUX_FLAG_CORESIGHT_FORMAT_RAW.into(),
            ),
            (
                "MISC_CPUMODE_MASK",
                misc::CPUMODE_MASK.into(),
                s::PERF_RECORD_MISC_CPUMODE_MASK.into(),
            ),
            (
                "MISC_KERNEL",
                misc::KERNEL.into(),
                s::PERF_RECORD_MISC_KERNEL.into(),
            ),
            (
                "MISC_USER",
                misc::USER.into(),
                s::PERF_RECORD_MISC_USER.into(),
            ),
            (
                "MISC_HYPERVISOR",
                misc::HYPERVISOR.into(),
                s::PERF_RECORD_MISC_HYPERVISOR.into(),
            ),
            (
                "MISC_GUEST_KERNEL",
                misc::GUEST_KERNEL.into(),
                s::PERF_RECORD_MISC_GUEST_KERNEL.into(),
            ),
            (
                "MISC_GUEST_USER",
                misc::GUEST_USER.into(),
                s::PERF_RECORD_MISC_GUEST_USER.into(),
            ),
            (
                "MISC_PROC_MAP_PARSE_TIMEOUT",
                misc::PROC_MAP_PARSE_TIMEOUT.into(),
                s::PERF_RECORD_MISC_PROC_MAP_PARSE_TIMEOUT.into(),
            ),
            (
                "MISC_MMAP_DATA",
                misc::BIT13.into(),
                s::PERF_RECORD_MISC_MMAP_DATA.into(),
            ),
            (
                "MISC_EXACT_IP",
                misc::EXACT_IP.into(),
                s::PERF_RECORD_MISC_EXACT_IP.into(),
            ),
            (
                "MISC_EXT_RESERVED",
                misc::EXT_RESERVED.into(),
                s::PERF_RECORD_MISC_EXT_RESERVED.into(),
            ),
            (
                "FORMAT_TOTAL_TIME_ENABLED",
                read_format::TOTAL_TIME_ENABLED,
                s::PERF_FORMAT_TOTAL_TIME_ENABLED.into(),
            ),
            (
                "FORMAT_TOTAL_TIME_RUNNING",
                read_format::TOTAL_TIME_RUNNING,
                s::PERF_FORMAT_TOTAL_TIME_RUNNING.into(),
            ),
            ("FORMAT_ID", read_format::ID, s::PERF_FORMAT_ID.into()),
            (
                "FORMAT_GROUP",
                read_format::GROUP,
                s::PERF_FORMAT_GROUP.into(),
            ),
            ("FORMAT_LOST", read_format::LOST, s::PERF_FORMAT_LOST.into()),
            ("FORMAT_MAX", read_format::MAX, s::PERF_FORMAT_MAX.into()),
            (
                "MAX_STACK_DEPTH",
                u64::from(perfaux::attr::CopyPolicy::DEFAULT_MAX_STACK),
                s::PERF_MAX_STACK_DEPTH.into(),
            ),
        ];
        for (name, ours, theirs) in pairs {
            assert_eq!(ours, theirs, "{name}");
        }
    }

    #[test]
    fn sample_type_bits_match_bindgen() {
        use sample_type as st;
        use sys as s;
        let pairs: [(u64, u64); 26] = [
            (st::IP, s::PERF_SAMPLE_IP.into()),
            (st::TID, s::PERF_SAMPLE_TID.into()),
            (st::TIME, s::PERF_SAMPLE_TIME.into()),
            (st::ADDR, s::PERF_SAMPLE_ADDR.into()),
            (st::READ, s::PERF_SAMPLE_READ.into()),
            (st::CALLCHAIN, s::PERF_SAMPLE_CALLCHAIN.into()),
            (st::ID, s::PERF_SAMPLE_ID.into()),
            (st::CPU, s::PERF_SAMPLE_CPU.into()),
            (st::PERIOD, s::PERF_SAMPLE_PERIOD.into()),
            (st::STREAM_ID, s::PERF_SAMPLE_STREAM_ID.into()),
            (st::RAW, s::PERF_SAMPLE_RAW.into()),
            (st::BRANCH_STACK, s::PERF_SAMPLE_BRANCH_STACK.into()),
            (st::REGS_USER, s::PERF_SAMPLE_REGS_USER.into()),
            (st::STACK_USER, s::PERF_SAMPLE_STACK_USER.into()),
            (st::WEIGHT, s::PERF_SAMPLE_WEIGHT.into()),
            (st::DATA_SRC, s::PERF_SAMPLE_DATA_SRC.into()),
            (st::IDENTIFIER, s::PERF_SAMPLE_IDENTIFIER.into()),
            (st::TRANSACTION, s::PERF_SAMPLE_TRANSACTION.into()),
            (st::REGS_INTR, s::PERF_SAMPLE_REGS_INTR.into()),
            (st::PHYS_ADDR, s::PERF_SAMPLE_PHYS_ADDR.into()),
            (st::AUX, s::PERF_SAMPLE_AUX.into()),
            (st::CGROUP, s::PERF_SAMPLE_CGROUP.into()),
            (st::DATA_PAGE_SIZE, s::PERF_SAMPLE_DATA_PAGE_SIZE.into()),
            (st::CODE_PAGE_SIZE, s::PERF_SAMPLE_CODE_PAGE_SIZE.into()),
            (st::WEIGHT_STRUCT, s::PERF_SAMPLE_WEIGHT_STRUCT.into()),
            (st::MAX, s::PERF_SAMPLE_MAX.into()),
        ];
        for (i, (ours, theirs)) in pairs.iter().enumerate() {
            assert_eq!(ours, theirs, "sample bit {i}");
            assert_eq!(*ours, 1 << i, "bit {i} in order");
        }
    }

    #[test]
    fn branch_bits_match_bindgen() {
        use branch_sample_type as b;
        use sys as s;
        let pairs: [(u64, u64); 19] = [
            (b::USER, s::PERF_SAMPLE_BRANCH_USER.into()),
            (b::KERNEL, s::PERF_SAMPLE_BRANCH_KERNEL.into()),
            (b::HV, s::PERF_SAMPLE_BRANCH_HV.into()),
            (b::ANY, s::PERF_SAMPLE_BRANCH_ANY.into()),
            (b::ANY_CALL, s::PERF_SAMPLE_BRANCH_ANY_CALL.into()),
            (b::ANY_RETURN, s::PERF_SAMPLE_BRANCH_ANY_RETURN.into()),
            (b::IND_CALL, s::PERF_SAMPLE_BRANCH_IND_CALL.into()),
            (b::ABORT_TX, s::PERF_SAMPLE_BRANCH_ABORT_TX.into()),
            (b::IN_TX, s::PERF_SAMPLE_BRANCH_IN_TX.into()),
            (b::NO_TX, s::PERF_SAMPLE_BRANCH_NO_TX.into()),
            (b::COND, s::PERF_SAMPLE_BRANCH_COND.into()),
            (b::CALL_STACK, s::PERF_SAMPLE_BRANCH_CALL_STACK.into()),
            (b::IND_JUMP, s::PERF_SAMPLE_BRANCH_IND_JUMP.into()),
            (b::CALL, s::PERF_SAMPLE_BRANCH_CALL.into()),
            (b::NO_FLAGS, s::PERF_SAMPLE_BRANCH_NO_FLAGS.into()),
            (b::NO_CYCLES, s::PERF_SAMPLE_BRANCH_NO_CYCLES.into()),
            (b::TYPE_SAVE, s::PERF_SAMPLE_BRANCH_TYPE_SAVE.into()),
            (b::HW_INDEX, s::PERF_SAMPLE_BRANCH_HW_INDEX.into()),
            (b::PRIV_SAVE, s::PERF_SAMPLE_BRANCH_PRIV_SAVE.into()),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours, theirs);
        }
        // 6.8 added COUNTERS at the 6.1 header's MAX; our MAX is one bit on.
        assert_eq!(b::COUNTERS, u64::from(s::PERF_SAMPLE_BRANCH_MAX));
        assert_eq!(b::MAX, b::COUNTERS << 1);
    }

    #[test]
    fn record_types_match_bindgen() {
        use record_type as r;
        use sys as s;
        let pairs: [(u32, u32); 21] = [
            (r::MMAP, s::PERF_RECORD_MMAP),
            (r::LOST, s::PERF_RECORD_LOST),
            (r::COMM, s::PERF_RECORD_COMM),
            (r::EXIT, s::PERF_RECORD_EXIT),
            (r::THROTTLE, s::PERF_RECORD_THROTTLE),
            (r::UNTHROTTLE, s::PERF_RECORD_UNTHROTTLE),
            (r::FORK, s::PERF_RECORD_FORK),
            (r::READ, s::PERF_RECORD_READ),
            (r::SAMPLE, s::PERF_RECORD_SAMPLE),
            (r::MMAP2, s::PERF_RECORD_MMAP2),
            (r::AUX, s::PERF_RECORD_AUX),
            (r::ITRACE_START, s::PERF_RECORD_ITRACE_START),
            (r::LOST_SAMPLES, s::PERF_RECORD_LOST_SAMPLES),
            (r::SWITCH, s::PERF_RECORD_SWITCH),
            (r::SWITCH_CPU_WIDE, s::PERF_RECORD_SWITCH_CPU_WIDE),
            (r::NAMESPACES, s::PERF_RECORD_NAMESPACES),
            (r::KSYMBOL, s::PERF_RECORD_KSYMBOL),
            (r::BPF_EVENT, s::PERF_RECORD_BPF_EVENT),
            (r::CGROUP, s::PERF_RECORD_CGROUP),
            (r::TEXT_POKE, s::PERF_RECORD_TEXT_POKE),
            (r::AUX_OUTPUT_HW_ID, s::PERF_RECORD_AUX_OUTPUT_HW_ID),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours, theirs);
        }
        assert_eq!(r::MAX, s::PERF_RECORD_MAX);
    }
}

#[test]
fn record_bodies_match_the_spec() {
    // The uapi record layouts: base header.size of each fixed record.
    assert_eq!(size_of::<LostRecord>(), 24);
    assert_eq!(size_of::<AuxRecord>(), 32);
    assert_eq!(size_of::<ItraceStartRecord>(), 16);
    assert_eq!(size_of::<AuxOutputHwIdRecord>(), 16);
    assert_eq!(size_of::<LostSamplesRecord>(), 16);
    assert_eq!(offset_of!(AuxRecord, flags), 24);
    assert_eq!(offset_of!(ItraceStartRecord, tid), 12);
}
