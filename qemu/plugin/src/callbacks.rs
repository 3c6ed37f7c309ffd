// SPDX-License-Identifier: GPL-2.0-or-later
//! The plugin's entry points: what QEMU calls (`qemu_plugin_install`, the
//! translation, block, system call and exit callbacks) and the QEMU API
//! calls the plugin makes. Each callback finds the calling guest thread's
//! [`Thread`] by its vCPU index (one vCPU per guest thread in user mode).

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::ptr::null_mut;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use perfaux::soft_pt::blocks::Block;
use qemu_plugin_sys::{
    qemu_info_t, qemu_plugin_cb_flags, qemu_plugin_id_t, qemu_plugin_insn_data,
    qemu_plugin_insn_size, qemu_plugin_insn_vaddr, qemu_plugin_path_to_binary,
    qemu_plugin_register_atexit_cb, qemu_plugin_register_vcpu_syscall_cb,
    qemu_plugin_register_vcpu_syscall_ret_cb, qemu_plugin_register_vcpu_tb_exec_cb,
    qemu_plugin_register_vcpu_tb_trans_cb, qemu_plugin_start_code, qemu_plugin_tb,
    qemu_plugin_tb_get_insn, qemu_plugin_tb_n_insns, qemu_plugin_tb_vaddr,
};

use crate::blocks::{self, Code};
use crate::maps;
use crate::records::Mmap;
use crate::session::Session;
use crate::thread::{Origin, Thread};

/// The plugin API version this plugin is built for (QEMU 7.2's).
#[unsafe(no_mangle)]
pub static qemu_plugin_version: c_int = qemu_plugin_sys::QEMU_PLUGIN_VERSION as c_int;

/// vCPU indexes with a thread slot (QEMU reuses the index of a thread that
/// ended).
const MAX_VCPUS: usize = 4096;

/// The thread of each vCPU index: null before its first block, [`UNTRACED`]
/// when it runs untraced, else a `Box<Thread>` only that vCPU's host thread
/// uses (the atexit callback takes them all once the others stopped).
static THREADS: [AtomicPtr<Thread>; MAX_VCPUS] = [const { AtomicPtr::new(null_mut()) }; MAX_VCPUS];

/// Set while vCPU `i`'s host thread is inside a system call callback (the
/// only callbacks that may still run when the process's exit callback
/// takes every thread: QEMU stops the vCPUs' blocks first, not their
/// system calls). A handshake with [`EXITING`]: each side stores its flag,
/// then reads the other's (SeqCst: the store is ordered before the load on
/// both sides, so at least one sees the other).
static IN_SYSCALL: [AtomicBool; MAX_VCPUS] = [const { AtomicBool::new(false) }; MAX_VCPUS];

/// Set once the process's exit callback runs: no callback touches a
/// thread after it.
static EXITING: AtomicBool = AtomicBool::new(false);

/// A system call callback's hold on its vCPU's thread (see
/// [`IN_SYSCALL`]); `None` once the process is exiting.
struct InSyscall(&'static AtomicBool);

impl InSyscall {
    fn enter(vcpu: c_uint) -> Option<InSyscall> {
        let flag = IN_SYSCALL.get(vcpu as usize)?;
        // SeqCst: pairs with on_exit's store of EXITING and load of this
        // flag (the handshake's two store-then-load sides).
        flag.store(true, Ordering::SeqCst);
        if EXITING.load(Ordering::SeqCst) {
            flag.store(false, Ordering::SeqCst);
            return None;
        }
        Some(InSyscall(flag))
    }
}

impl Drop for InSyscall {
    fn drop(&mut self) {
        // SeqCst: pairs with on_exit's load, after which it takes the
        // thread: everything this callback did to it is before.
        self.0.store(false, Ordering::SeqCst);
    }
}

/// The mark of a thread that runs untraced (no slot was free).
const UNTRACED: *mut Thread = std::ptr::dangling_mut();

static SESSION: OnceLock<Session> = OnceLock::new();

/// The program QEMU loaded: its name, and its and its interpreter's
/// executable segments (known at the first block: where the interpreter
/// was loaded is where the first block is, its entry).
static PROGRAM: OnceLock<(&'static str, &'static [Mmap])> = OnceLock::new();

/// Blocks whose last instruction does not decode: they run unseen (the
/// trace skips them: an asynchronous exit and a re-enable after).
static UNDECODED: AtomicU64 = AtomicU64::new(0);

fn getpid() -> u32 {
    std::process::id()
}

fn gettid() -> u32 {
    // SAFETY: gettid takes no argument and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// Installs the plugin: `session=FD` names the session file's descriptor.
///
/// # Safety
/// Called by QEMU with `argc` valid NUL-terminated strings in `argv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    _info: *const qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    let mut fd = None;
    let mut idle = false;
    for i in 0..argc.max(0) as usize {
        // SAFETY: QEMU passes `argc` valid C strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(i)) }.to_string_lossy();
        match arg.split_once('=') {
            Some(("session", v)) => fd = v.parse::<i32>().ok(),
            Some(("idle", v)) => idle = v == "on",
            Some(("truth", dir)) => {
                let _ = crate::truth::DIR.set(dir.into());
            }
            _ => {
                eprintln!("perfaux plugin: unknown argument {arg:?}");
                return -1;
            }
        }
    }
    if idle {
        // `idle=on`: a callback on every block that does nothing, for the
        // benchmark's "QEMU with the plugin, not tracing".
        // SAFETY: registering a callback with the id QEMU gave.
        unsafe { qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_translate_idle)) };
        return 0;
    }
    let Some(fd) = fd else {
        eprintln!(
            "perfaux plugin: no session=FD argument (run it with `perfaux record -- PROGRAM`)"
        );
        return -1;
    };
    match Session::map(fd) {
        Ok(s) => {
            let _ = SESSION.set(s);
        }
        Err(e) => {
            eprintln!("perfaux plugin: {e}");
            return -1;
        }
    }
    // SAFETY: registering callbacks with the id QEMU gave, from install.
    unsafe {
        qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_translate));
        qemu_plugin_register_vcpu_syscall_cb(id, Some(on_syscall));
        qemu_plugin_register_vcpu_syscall_ret_cb(id, Some(on_syscall_ret));
        qemu_plugin_register_atexit_cb(id, Some(on_exit), null_mut());
    }
    0
}

/// `idle=on`: every block gets a callback that does nothing (the cost of
/// the callback alone).
unsafe extern "C" fn on_translate_idle(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    // SAFETY: `tb` is being translated.
    unsafe {
        qemu_plugin_register_vcpu_tb_exec_cb(
            tb,
            Some(on_block_idle),
            qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
            null_mut(),
        );
    }
}

/// A block starts running, and nothing happens.
unsafe extern "C" fn on_block_idle(_vcpu: c_uint, _userdata: *mut c_void) {}

/// A block was translated: its [`Block`], and a callback each time it runs.
unsafe extern "C" fn on_translate(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    // SAFETY: `tb` is the block QEMU is translating, valid in this call.
    let (n, start) = unsafe { (qemu_plugin_tb_n_insns(tb), qemu_plugin_tb_vaddr(tb)) };
    if n == 0 {
        return;
    }
    // SAFETY: `n - 1` is the block's last instruction; its data and size
    // are valid during the translation.
    let (at, bytes) = unsafe {
        let insn = qemu_plugin_tb_get_insn(tb, n - 1);
        let data = qemu_plugin_insn_data(insn).cast::<u8>();
        let size = qemu_plugin_insn_size(insn);
        (
            qemu_plugin_insn_vaddr(insn),
            std::slice::from_raw_parts(data, size),
        )
    };
    let Ok(block) = Block::new(start, n as u32, at, bytes) else {
        UNDECODED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let code: &'static Code = blocks::intern(block);
    // SAFETY: `tb` is being translated; the userdata is a `&'static Code`.
    unsafe {
        qemu_plugin_register_vcpu_tb_exec_cb(
            tb,
            Some(on_block),
            qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
            std::ptr::from_ref(code).cast_mut().cast(),
        );
    }
}

/// The thread of vCPU `vcpu`, if it is traced.
fn thread(vcpu: c_uint) -> Option<&'static mut Thread> {
    let p = THREADS.get(vcpu as usize)?.load(Ordering::Relaxed);
    if p.is_null() || p == UNTRACED {
        return None;
    }
    // SAFETY: a non-null, non-UNTRACED entry is a leaked Box<Thread> that
    // only this vCPU's host thread uses (the calling one).
    Some(unsafe { &mut *p })
}

/// A block starts running on `vcpu`.
unsafe extern "C" fn on_block(vcpu: c_uint, userdata: *mut c_void) {
    // SAFETY: registered with a `&'static Code` as the userdata.
    let block: &'static Code = unsafe { &*userdata.cast::<Code>() };
    if let Some(t) = thread(vcpu) {
        t.block(block);
        return;
    }
    first_block(vcpu, block);
}

/// The first block of the thread of `vcpu`: its slot and engine (or the
/// mark that it runs untraced).
#[cold]
#[inline(never)]
fn first_block(vcpu: c_uint, block: &'static Code) {
    let Some(entry) = THREADS.get(vcpu as usize) else {
        return;
    };
    if entry.load(Ordering::Relaxed) == UNTRACED {
        return;
    }
    // The thread's first block.
    let Some(session) = SESSION.get() else {
        return;
    };
    let (pid, tid) = (getpid(), gettid());
    let origin = if pid == tid && PROGRAM.get().is_none() {
        let program = PROGRAM.get_or_init(|| program(block.block.start()));
        Origin::Exec {
            comm: program.0,
            maps: program.1,
        }
    } else {
        Origin::Fork((pid, pid))
    };
    match Thread::start(session, pid, tid, origin) {
        Some(mut t) => {
            t.block(block);
            entry.store(Box::into_raw(Box::new(t)), Ordering::Relaxed);
        }
        None => entry.store(UNTRACED, Ordering::Relaxed),
    }
}

/// The program's name and its executable segments and the interpreter's,
/// the interpreter's entry being at `first` when there is one.
fn program(first: u64) -> (&'static str, &'static [Mmap]) {
    // SAFETY: QEMU returns the path of the binary it runs (or null).
    let exe = unsafe {
        let p = qemu_plugin_path_to_binary();
        if p.is_null() {
            String::new()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    };
    let exe = std::fs::canonicalize(&exe)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or(exe);
    let comm: &'static str = Box::leak(
        exe.rsplit('/')
            .next()
            .unwrap_or("")
            .chars()
            .take(15)
            .collect::<String>()
            .into_boxed_str(),
    );
    let mut maps = Vec::new();
    // SAFETY: a plain query: the lowest address of the executable's code
    // (QEMU's `info->start_code`, its first executable segment, load bias
    // added; `entry_code` is the interpreter's entry when there is one).
    let start_code = unsafe { qemu_plugin_start_code() };
    match maps::image(&exe, 0) {
        Ok(img) => {
            let first_code = img.maps.iter().map(|m| m.start).min().unwrap_or(0);
            let bias = (start_code & !0xfff).wrapping_sub(first_code);
            if let Ok(img) = maps::image(&exe, bias) {
                maps.extend(img.maps);
            }
            if let Some(interp) = img.interp {
                let interp = std::fs::canonicalize(&interp)
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or(interp);
                if let Ok(i) = maps::image(&interp, 0) {
                    let bias = first.wrapping_sub(i.entry);
                    if let Ok(i) = maps::image(&interp, bias) {
                        maps.extend(i.maps);
                    }
                }
            }
        }
        Err(e) => eprintln!("perfaux plugin: {e}"),
    }
    (comm, Box::leak(maps.into_boxed_slice()))
}

/// x86-64 system call numbers the plugin watches.
mod nr {
    pub const MMAP: i64 = 9;
    pub const RT_SIGACTION: i64 = 13;
    pub const RT_SIGRETURN: i64 = 15;
    pub const MPROTECT: i64 = 10;
    pub const MUNMAP: i64 = 11;
    pub const CLONE: i64 = 56;
    pub const FORK: i64 = 57;
    pub const VFORK: i64 = 58;
    pub const EXECVE: i64 = 59;
    pub const EXIT: i64 = 60;
    pub const PRCTL: i64 = 157;
    pub const EXECVEAT: i64 = 322;
    pub const CLONE3: i64 = 435;
}

/// `vcpu` enters the kernel with system call `num`.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn on_syscall(
    _id: qemu_plugin_id_t,
    vcpu: c_uint,
    num: i64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
    a6: u64,
    _a7: u64,
    _a8: u64,
) {
    let Some(_held) = InSyscall::enter(vcpu) else {
        return;
    };
    let Some(t) = thread(vcpu) else {
        return;
    };
    t.system_call();
    t.syscall = (num, [a1, a2, a3, a4, a5, a6]);
    match num {
        nr::EXIT => {
            // The thread ends in this call.
            if let Some(entry) = THREADS.get(vcpu as usize) {
                let p = entry.swap(null_mut(), Ordering::Relaxed);
                // SAFETY: `p` was this vCPU's Box<Thread>, taken out of the
                // table: nothing else refers to it.
                unsafe { Box::from_raw(p) }.end();
            }
        }
        nr::RT_SIGRETURN => t.sigreturn(),
        nr::EXECVE | nr::EXECVEAT => {
            // The program may be replaced (not followed): what it traced
            // so far is published first, and the slot names the program.
            t.publish();
            let path = if num == nr::EXECVE { a1 } else { a2 };
            t.exec(Some(&maps::guest_str(path, 4096).unwrap_or_default()));
        }
        _ => {}
    }
}

/// Whether clone flags `flags` make a new process (not a thread).
fn forks(flags: u64) -> bool {
    flags & libc::CLONE_THREAD as u64 == 0
}

/// `vcpu`'s system call `num` returns `ret`.
unsafe extern "C" fn on_syscall_ret(_id: qemu_plugin_id_t, vcpu: c_uint, num: i64, ret: i64) {
    let Some(_held) = InSyscall::enter(vcpu) else {
        return;
    };
    let Some(t) = thread(vcpu) else {
        return;
    };
    let (called, a) = t.syscall;
    if called != num {
        return;
    }
    if matches!(num, nr::EXECVE | nr::EXECVEAT) {
        // It returned: it failed, the program goes on traced.
        t.exec(None);
    }
    if (-4095..0).contains(&ret) {
        return;
    }
    match num {
        nr::MMAP => {
            let fd = a[4] as i32 as i64;
            if let Some(map) = maps::mapped(ret as u64, a[1], a[2], a[3], fd, a[5]) {
                t.mmap(&map);
            }
        }
        nr::MPROTECT => {
            for map in maps::protected(a[0], a[1], a[2]) {
                t.mmap(&map);
            }
        }
        nr::MUNMAP => maps::unmapped(a[0], a[1]),
        nr::RT_SIGACTION if a[1] != 0 => {
            // The new action's handler (struct sigaction starts with it),
            // as the kernel read it; SIG_DFL and SIG_IGN are no code.
            if let Some(handler) = maps::guest_u64(a[1]) {
                if handler > 1 {
                    blocks::add_handler(handler);
                }
            }
        }
        nr::PRCTL if a[0] == libc::PR_SET_NAME as u64 => {
            // The thread's new name, cut at 15 bytes as the kernel's
            // strncpy_from_user cuts it: a COMM.
            if let Some(mut name) = maps::guest_str(a[1], 4096) {
                name.truncate(15);
                t.rename(&String::from_utf8_lossy(&name));
            }
        }
        nr::FORK | nr::VFORK if ret == 0 => forked(vcpu),
        nr::CLONE if ret == 0 && forks(a[0]) => forked(vcpu),
        nr::CLONE3 if ret == 0 => {
            // SAFETY: a1 is the clone_args the kernel just read (flags
            // first), in the process's memory (guest addresses are host
            // addresses in user mode).
            let flags = unsafe { std::ptr::read_unaligned(a[0] as *const u64) };
            if forks(flags) {
                forked(vcpu);
            }
        }
        _ => {}
    }
}

/// The calling thread is the child of a fork: the parent's threads are
/// not in this process (their states are left alone: their slots are the
/// parent's), and this one starts over in a slot of its own.
fn forked(vcpu: c_uint) {
    let Some(parent) = thread(vcpu).map(|t| (t.pid, t.tid)) else {
        return;
    };
    for (v, (entry, busy)) in THREADS.iter().zip(&IN_SYSCALL).enumerate() {
        // The parent's threads: forgotten, not ended (that would write to
        // the parent's slots). Their host threads are not in the child:
        // none holds a system call callback here, whatever the parent's
        // flags said (this thread's own is held by this callback).
        entry.store(null_mut(), Ordering::Relaxed);
        if v != vcpu as usize {
            busy.store(false, Ordering::SeqCst);
        }
    }
    let Some(session) = SESSION.get() else {
        return;
    };
    let Some(entry) = THREADS.get(vcpu as usize) else {
        return;
    };
    let child = Thread::start(session, getpid(), gettid(), Origin::Fork(parent));
    entry.store(
        child.map_or(UNTRACED, |t| Box::into_raw(Box::new(t))),
        Ordering::Relaxed,
    );
}

/// The process ends (`exit_group`, the last thread's `exit`, a fatal
/// signal): QEMU stopped the other vCPUs' blocks and callbacks; every
/// thread of this process ends here.
unsafe extern "C" fn on_exit(_id: qemu_plugin_id_t, _userdata: *mut c_void) {
    // SeqCst: the handshake with InSyscall::enter.
    EXITING.store(true, Ordering::SeqCst);
    for (entry, busy) in THREADS.iter().zip(&IN_SYSCALL) {
        // A thread still in a system call callback finishes it first (it
        // runs a bounded amount of work and takes no lock this waits on).
        while busy.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let p = entry.swap(null_mut(), Ordering::Relaxed);
        if !p.is_null() && p != UNTRACED {
            // SAFETY: taken out of the table; its vCPU runs no more block
            // callbacks (QEMU stopped them) and no system call callback
            // holds it or will (the handshake above).
            unsafe { Box::from_raw(p) }.end();
        }
    }
    let undecoded = UNDECODED.load(Ordering::Relaxed);
    if undecoded > 0 {
        eprintln!(
            "perfaux: {undecoded} blocks ended in an instruction the tracer cannot decode: the trace skips them"
        );
    }
}
