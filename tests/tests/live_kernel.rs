// SPDX-License-Identifier: MIT OR Apache-2.0
//! The running kernel as an oracle: a corpus of attrs goes through both
//! `perf_event_open(2)` and `perfaux_attr_copy` + `perfaux_event_check`, and
//! the errno (and the `E2BIG` size write-back) must agree.
//!
//! Every case is a software `cpu-clock` event on the calling task, alone or
//! under a software `cpu-clock` leader, with `exclude_kernel`/`exclude_hv`
//! so that no permission is involved; the cases are ones Linux decides by the
//! rules perfaux implements (`perf_copy_attr`, and the AUX/group rules of
//! `sys_perf_event_open`, `perf_event_alloc`, `perf_get_aux_event`), not by permissions or PMU lookup. Where the syscall is not
//! available (seccomp, `perf_event_paranoid` 3, no perf support) the test
//! prints why and passes without comparing.

use std::ptr;

use perfaux::abi::{
    PERF_COUNT_SW_CPU_CLOCK, PERF_FLAG_FD_CLOEXEC, PERF_FLAG_FD_NO_GROUP, PERF_TYPE_SOFTWARE,
    PerfEventAttr, attr_flags as f, aux_action, branch_sample_type as br, read_format,
    sample_type as st, x86_regs,
};
use perfaux_ffi::{PERFAUX_CAP_NO_NMI, perfaux_attr_copy, perfaux_event_check};
use perfaux_tests::records::u32_at;

/// Software events (cpu-clock, task-clock) never run in NMI context.
const SW_CAPS: u32 = PERFAUX_CAP_NO_NMI;
const PAGE: usize = 4096;

/// Which leader a case opens under.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Group {
    None,
    /// A default cpu-clock leader.
    Plain,
    /// A cpu-clock leader using CLOCK_MONOTONIC.
    Monotonic,
    /// Group fd given, but with PERF_FLAG_FD_NO_GROUP.
    NoGroupFlag,
}

struct Case {
    name: &'static str,
    /// The attr's bytes as user space passes them (at least the attr's size).
    bytes: Vec<u8>,
    /// Readable bytes from the attr's start; `None`: all of `bytes`.
    readable: Option<usize>,
    group: Group,
}

fn base() -> PerfEventAttr {
    let mut a = PerfEventAttr::new(136);
    a.type_ = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.flags = f::DISABLED | f::EXCLUDE_KERNEL | f::EXCLUDE_HV;
    a
}

fn with(edit: impl FnOnce(&mut PerfEventAttr)) -> Vec<u8> {
    let mut a = base();
    edit(&mut a);
    a.to_bytes().to_vec()
}

fn case(name: &'static str, bytes: Vec<u8>) -> Case {
    Case {
        name,
        bytes,
        readable: None,
        group: Group::None,
    }
}

fn grouped(name: &'static str, group: Group, bytes: Vec<u8>) -> Case {
    Case {
        name,
        bytes,
        readable: None,
        group,
    }
}

/// The attr bytes with the size field set and extended (zero-filled) to `len`.
fn sized(size: u32, len: usize, edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = base().to_bytes().to_vec();
    b.resize(len, 0);
    b[4..8].copy_from_slice(&size.to_ne_bytes());
    edit(&mut b);
    b
}

fn corpus() -> Vec<Case> {
    let mut c = vec![
        case("valid VER8", with(|_| {})),
        case("size 0 is VER0", sized(0, 136, |_| {})),
        case("VER0", sized(64, 64, |_| {})),
        case(
            "VER5 with junk past the size",
            sized(112, 136, |b| b[112..136].fill(0xa5)),
        ),
        case(
            "size 114 ends inside aux_sample_size",
            sized(114, 114, |_| {}),
        ),
        case("size 63", sized(63, 136, |_| {})),
        case("size 1", sized(1, 136, |_| {})),
        case("size 4097", sized(4097, 4200, |_| {})),
        case("size 144, zero tail", sized(144, 144, |_| {})),
        case("size 144, non-zero tail", sized(144, 144, |b| b[143] = 1)),
        case("size 4096, zero tail", sized(4096, 4096, |_| {})),
        case(
            "size 4096, non-zero last byte",
            sized(4096, 4096, |b| b[4095] = 0x80),
        ),
        case("flag bit 38", with(|a| a.flags |= 1 << 38)),
        case("flag bit 63", with(|a| a.flags |= 1 << 63)),
        case("__reserved_2", with(|a| a.reserved_2 = 1)),
        case("aux_action bit 3", with(|a| a.aux_action = 1 << 3)),
        case("aux_action bit 31", with(|a| a.aux_action = 1 << 31)),
        case("sample_type bit 25", with(|a| a.sample_type = 1 << 25)),
        case("sample_type bit 63", with(|a| a.sample_type = 1 << 63)),
        case(
            "sample_type every defined bit but the checked ones",
            with(|a| {
                a.sample_type = st::KNOWN
                    & !(st::BRANCH_STACK | st::REGS_USER | st::REGS_INTR | st::STACK_USER)
                    & !(st::WEIGHT | st::PHYS_ADDR | st::CGROUP | st::READ | st::CALLCHAIN);
            }),
        ),
        case("read_format bit 5", with(|a| a.read_format = 1 << 5)),
        case(
            "read_format every defined bit",
            with(|a| a.read_format = read_format::KNOWN),
        ),
        case(
            "branch stack without a branch type",
            with(|a| {
                a.sample_type = st::BRANCH_STACK;
                a.branch_sample_type = br::USER;
            }),
        ),
        case(
            "branch stack with bit 20",
            with(|a| {
                a.sample_type = st::BRANCH_STACK;
                a.branch_sample_type = br::ANY | br::MAX;
            }),
        ),
        case(
            "regs_user empty mask",
            with(|a| a.sample_type = st::REGS_USER),
        ),
        case(
            "regs_user DS",
            with(|a| {
                a.sample_type = st::REGS_USER;
                a.sample_regs_user = 1 << x86_regs::DS;
            }),
        ),
        case(
            "regs_user reserved bit 24",
            with(|a| {
                a.sample_type = st::REGS_USER;
                a.sample_regs_user = 1 << 24;
            }),
        ),
        case(
            "regs_user valid",
            with(|a| {
                a.sample_type = st::REGS_USER;
                a.sample_regs_user = 0xff_0fff;
            }),
        ),
        case(
            "regs_intr GS",
            with(|a| {
                a.sample_type = st::REGS_INTR;
                a.sample_regs_intr = 1 << x86_regs::GS;
            }),
        ),
        case(
            "regs_intr empty mask, weight struct later",
            with(|a| {
                a.sample_type = st::REGS_INTR | st::WEIGHT_TYPE;
            }),
        ),
        case(
            "stack_user 65535",
            with(|a| {
                a.sample_type = st::STACK_USER;
                a.sample_stack_user = 65535;
            }),
        ),
        case(
            "stack_user 12",
            with(|a| {
                a.sample_type = st::STACK_USER;
                a.sample_stack_user = 12;
            }),
        ),
        case(
            "stack_user 8",
            with(|a| {
                a.sample_type = st::STACK_USER;
                a.sample_stack_user = 8;
            }),
        ),
        case(
            "weight and weight_struct",
            with(|a| a.sample_type = st::WEIGHT_TYPE),
        ),
        case(
            "inherit_thread without inherit",
            with(|a| a.flags |= f::INHERIT_THREAD),
        ),
        case(
            "inherit_thread with inherit",
            with(|a| a.flags |= f::INHERIT_THREAD | f::INHERIT),
        ),
        case(
            "remove_on_exec with enable_on_exec",
            with(|a| {
                a.flags |= f::REMOVE_ON_EXEC | f::ENABLE_ON_EXEC;
            }),
        ),
        case(
            "sigtrap without remove_on_exec",
            with(|a| a.flags |= f::SIGTRAP),
        ),
        case(
            "sigtrap with remove_on_exec",
            with(|a| a.flags |= f::SIGTRAP | f::REMOVE_ON_EXEC),
        ),
        case(
            "aux_output on a software PMU",
            with(|a| a.flags |= f::AUX_OUTPUT),
        ),
        case(
            "aux_start_paused on a software PMU",
            with(|a| a.aux_action = aux_action::START_PAUSED),
        ),
        case(
            "aux_pause with aux_resume",
            with(|a| a.aux_action = aux_action::PAUSE | aux_action::RESUME),
        ),
        case(
            "aux_pause without a leader",
            with(|a| a.aux_action = aux_action::PAUSE),
        ),
        case(
            "aux_resume without a leader",
            with(|a| a.aux_action = aux_action::RESUME),
        ),
        case(
            "aux_sample_size without a leader",
            with(|a| a.aux_sample_size = 4096),
        ),
        case(
            "aux_sample_size u32::MAX without a leader",
            with(|a| a.aux_sample_size = u32::MAX),
        ),
        case(
            "PERF_SAMPLE_AUX with aux_sample_size 0",
            with(|a| {
                a.sample_type = st::AUX | st::TID;
                a.sample_period = 100_000;
            }),
        ),
        case(
            "aux_output and aux_sample_size",
            with(|a| {
                a.flags |= f::AUX_OUTPUT;
                a.aux_sample_size = 64;
            }),
        ),
        case("pinned alone", with(|a| a.flags |= f::PINNED)),
        case("exclusive alone", with(|a| a.flags |= f::EXCLUSIVE)),
        case(
            "CLOCK_REALTIME on a software PMU",
            with(|a| {
                a.flags |= f::USE_CLOCKID;
                a.clockid = 0;
            }),
        ),
        case(
            "CLOCK_TAI on a software PMU",
            with(|a| {
                a.flags |= f::USE_CLOCKID;
                a.clockid = 11;
            }),
        ),
        case(
            "unknown clockid",
            with(|a| {
                a.flags |= f::USE_CLOCKID;
                a.clockid = 99;
            }),
        ),
        case(
            "clockid ignored without use_clockid",
            with(|a| a.clockid = 99),
        ),
        grouped("sibling", Group::Plain, with(|_| {})),
        grouped(
            "aux_sample_size under a software leader",
            Group::Plain,
            with(|a| {
                a.sample_type = st::AUX;
                a.aux_sample_size = 4096;
            }),
        ),
        grouped(
            "aux_sample_size with FD_NO_GROUP",
            Group::NoGroupFlag,
            with(|a| a.aux_sample_size = 8),
        ),
        grouped(
            "aux_pause under a software leader",
            Group::Plain,
            with(|a| a.aux_action = aux_action::PAUSE),
        ),
        grouped(
            "aux_resume under a software leader",
            Group::Plain,
            with(|a| a.aux_action = aux_action::RESUME),
        ),
        grouped(
            "aux_output and aux_sample_size under a leader",
            Group::Plain,
            with(|a| {
                a.flags |= f::AUX_OUTPUT;
                a.aux_sample_size = 64;
            }),
        ),
        grouped(
            "aux_pause and aux_output under a leader",
            Group::Plain,
            with(|a| {
                a.flags |= f::AUX_OUTPUT;
                a.aux_action = aux_action::PAUSE;
            }),
        ),
        grouped(
            "pinned sibling",
            Group::Plain,
            with(|a| a.flags |= f::PINNED),
        ),
        grouped(
            "exclusive sibling",
            Group::Plain,
            with(|a| a.flags |= f::EXCLUSIVE),
        ),
        grouped(
            "sibling with another clock",
            Group::Plain,
            with(|a| {
                a.flags |= f::USE_CLOCKID;
                a.clockid = 1;
            }),
        ),
        grouped(
            "sibling with the leader's clock",
            Group::Monotonic,
            with(|a| {
                a.flags |= f::USE_CLOCKID;
                a.clockid = 1;
            }),
        ),
        grouped(
            "default-clock sibling of a monotonic leader",
            Group::Monotonic,
            with(|_| {}),
        ),
        grouped(
            "unknown clock beats the group clock",
            Group::Monotonic,
            with(|a| {
                a.flags |= f::USE_CLOCKID;
                a.clockid = 3;
            }),
        ),
        grouped(
            "FD_NO_GROUP sibling may be pinned",
            Group::NoGroupFlag,
            with(|a| a.flags |= f::PINNED),
        ),
    ];

    // Unreadable memory: the attr ends `readable` bytes into the mapping.
    let fault = |name, bytes: Vec<u8>, readable| Case {
        name,
        bytes,
        readable: Some(readable),
        group: Group::None,
    };
    c.push(fault("size field unreadable", with(|_| {}), 6));
    c.push(fault("attr cut at 135 of 136", with(|_| {}), 135));
    c.push(fault("attr cut at 64 of 136", with(|_| {}), 64));
    c.push(fault(
        "size 200, zero tail cut at 150",
        sized(200, 200, |_| {}),
        150,
    ));
    c.push(fault(
        "size 200, non-zero tail before the cut",
        sized(200, 200, |b| b[140] = 1),
        150,
    ));
    c.push(fault(
        "size 4096, tail cut at 1024",
        sized(4096, 4096, |_| {}),
        1024,
    ));
    c.push(fault("VER5 exactly readable", sized(112, 136, |_| {}), 112));
    c
}

/// `perf_event_open(attr, pid 0, cpu -1, group_fd, flags)`: an fd or -errno.
fn perf_event_open(attr: *const u8, group_fd: i32, flags: u64) -> i64 {
    // SAFETY: perf_event_open reads the attr through a user pointer and
    // faults cleanly (EFAULT) on unreadable memory; the other arguments are
    // plain integers.
    let r = unsafe { libc::syscall(libc::SYS_perf_event_open, attr, 0, -1, group_fd, flags) };
    if r < 0 {
        -i64::from(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        r
    }
}

fn close(fd: i64) {
    if fd >= 0 {
        // SAFETY: `fd` is a descriptor this test opened and owns.
        unsafe { libc::close(fd as i32) };
    }
}

/// Two pages, the second inaccessible; `place` copies bytes so that exactly
/// `readable` of them are readable, ending at the guard page.
struct GuardedPage {
    base: *mut u8,
}

impl GuardedPage {
    fn new() -> GuardedPage {
        // SAFETY: an anonymous private mapping with no address hint.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let guard = base.cast::<u8>().wrapping_add(PAGE);
        // SAFETY: `guard` is the second page of the mapping just made.
        let rc = unsafe { libc::mprotect(guard.cast(), PAGE, libc::PROT_NONE) };
        assert_eq!(rc, 0);
        GuardedPage { base: base.cast() }
    }

    fn place(&self, bytes: &[u8], readable: usize) -> *mut u8 {
        assert!(readable <= PAGE && readable <= bytes.len());
        let dst = self.base.wrapping_add(PAGE - readable);
        // SAFETY: `dst..dst+readable` lies in the first (writable) page, and
        // `bytes` holds at least `readable` bytes (asserted).
        unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), dst, readable) };
        dst
    }

    fn size_field(&self, at: *const u8) -> u32 {
        // SAFETY: only called for attrs whose size field (4 bytes at offset 4) is readable.
        unsafe { ptr::read_unaligned(at.wrapping_add(4).cast::<u32>()) }
    }
}

impl Drop for GuardedPage {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.base.cast(), 2 * PAGE) };
    }
}

struct Outcome {
    result: i64,
    size_after: Option<u32>,
}

fn run_kernel(case: &Case, page: &GuardedPage, leaders: &Leaders) -> Outcome {
    let (group_fd, flags) = match case.group {
        Group::None => (-1, 0),
        Group::Plain => (leaders.plain.0, 0),
        Group::Monotonic => (leaders.monotonic.0, 0),
        Group::NoGroupFlag => (leaders.plain.0, PERF_FLAG_FD_NO_GROUP),
    };
    let readable = case.readable.unwrap_or(case.bytes.len()).min(PAGE);
    let mut owned = case.bytes.clone();
    let at = if case.readable.is_some() {
        page.place(&case.bytes, readable)
    } else {
        owned.as_mut_ptr()
    };
    let fd = perf_event_open(at, group_fd as i32, flags | PERF_FLAG_FD_CLOEXEC);
    let size_after =
        (readable >= 8).then(|| page_or_owned_size(page, at, &owned, case.readable.is_some()));
    close(fd);
    Outcome {
        result: fd.min(0),
        size_after,
    }
}

fn page_or_owned_size(page: &GuardedPage, at: *const u8, owned: &[u8], guarded: bool) -> u32 {
    if guarded {
        page.size_field(at)
    } else {
        u32_at(owned, 4)
    }
}

fn run_perfaux(case: &Case, leaders: &Leaders) -> Outcome {
    let mut user = case.bytes.clone();
    let readable = case.readable.unwrap_or(user.len());
    let mut out = [0u8; 136];
    // SAFETY: `user` holds at least `readable` bytes and `out` 136; both are
    // exclusively ours for the call.
    let rc = unsafe {
        perfaux_attr_copy(
            user.as_mut_ptr().cast(),
            readable,
            out.as_mut_ptr().cast(),
            out.len(),
        )
    };
    let size_after = (readable >= 8).then(|| u32_at(&user, 4));
    if rc != 0 {
        return Outcome {
            result: i64::from(rc),
            size_after,
        };
    }
    let leader = match case.group {
        Group::None | Group::NoGroupFlag => None,
        Group::Plain => Some(&leaders.plain.1),
        Group::Monotonic => Some(&leaders.monotonic.1),
    };
    let leader_ptr = leader.map_or(ptr::null(), |l| l.as_ptr().cast());
    // SAFETY: both pointers are null or point at 136 readable bytes.
    let rc = unsafe { perfaux_event_check(out.as_ptr().cast(), SW_CAPS, leader_ptr, SW_CAPS) };
    Outcome {
        result: i64::from(rc),
        size_after,
    }
}

/// Leader fds opened in the kernel, with their normalized attrs for perfaux.
struct Leaders {
    plain: (i64, [u8; 136]),
    monotonic: (i64, [u8; 136]),
}

fn open_leader(attr: PerfEventAttr) -> Result<(i64, [u8; 136]), String> {
    let bytes = attr.to_bytes();
    let fd = perf_event_open(bytes.as_ptr(), -1, PERF_FLAG_FD_CLOEXEC);
    if fd < 0 {
        return Err(format!(
            "perf_event_open of a software cpu-clock event failed: errno {}",
            -fd
        ));
    }
    let mut user = bytes;
    let mut out = [0u8; 136];
    // SAFETY: both buffers are 136 bytes and ours.
    let rc =
        unsafe { perfaux_attr_copy(user.as_mut_ptr().cast(), 136, out.as_mut_ptr().cast(), 136) };
    assert_eq!(rc, 0);
    Ok((fd, out))
}

fn errno_name(r: i64) -> String {
    match perfaux::Error::from_errno(r as i32) {
        _ if r == 0 => "0".into(),
        Some(e) => format!("-{}", e.name()),
        None => format!("{r}"),
    }
}

#[test]
fn kernel_and_perfaux_agree_on_every_case() {
    let plain = match open_leader(base()) {
        Ok(l) => l,
        Err(why) => {
            // CI sets PERFAUX_REQUIRE_LIVE_KERNEL: there the comparison
            // cannot pass by being skipped.
            assert!(
                std::env::var_os("PERFAUX_REQUIRE_LIVE_KERNEL").is_none(),
                "PERFAUX_REQUIRE_LIVE_KERNEL is set but the kernel refuses perf_event_open: {why}"
            );
            perfaux_tests::skipped(&format!(
                "live-kernel comparison: {why} (seccomp, perf_event_paranoid 3, or no perf support)"
            ));
            return;
        }
    };
    let mut mono = base();
    mono.flags |= f::USE_CLOCKID;
    mono.clockid = 1;
    let monotonic =
        open_leader(mono).expect("a monotonic-clock leader opens where a plain one does");
    let leaders = Leaders { plain, monotonic };
    let page = GuardedPage::new();

    let cases = corpus();
    let mut mismatches = Vec::new();
    for case in &cases {
        let k = run_kernel(case, &page, &leaders);
        let p = run_perfaux(case, &leaders);
        let line = format!(
            "{:<55} kernel {:<12} perfaux {:<12} size after: kernel {:?} perfaux {:?}",
            case.name,
            errno_name(k.result),
            errno_name(p.result),
            k.size_after,
            p.size_after
        );
        println!("{line}");
        if k.result != p.result || k.size_after != p.size_after {
            mismatches.push(line);
        }
    }
    close(leaders.plain.0);
    close(leaders.monotonic.0);
    assert!(
        mismatches.is_empty(),
        "{} of {} cases disagree:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
    println!("{} cases agree with the running kernel", cases.len());
}
