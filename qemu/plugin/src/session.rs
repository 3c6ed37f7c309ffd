// SPDX-License-Identifier: GPL-2.0-or-later
//! The session file as the plugin maps it: aligned so that every slot's
//! AUX area is naturally aligned (the ToPA's large regions), shared with the
//! recorder and with every process the program forks.

use std::sync::atomic::Ordering;

use std::ops::Deref;

use perfaux_qemu_session::{Header, Layout, Mapped, SLOT_LIVE};

/// The mapped session.
///
/// # Invariants
/// The mapping lives for the life of the process (it is never unmapped),
/// aligned to `layout.align()`.
pub struct Session(Mapped);

// SAFETY: the mapping is shared memory that lives as long as the process;
// what threads share in it is reached through atomics (the header's
// counters, the slot table), and each slot's rings are written by the one
// thread that claimed it.
unsafe impl Sync for Session {}
// SAFETY: as for Sync: the pointer is to process-wide memory.
unsafe impl Send for Session {}

impl Deref for Session {
    type Target = Mapped;
    fn deref(&self) -> &Mapped {
        &self.0
    }
}

impl Session {
    /// Maps the session file open as `fd`, then closes `fd` (the program
    /// must not see it).
    pub fn map(fd: i32) -> Result<Session, String> {
        let mut header = std::mem::MaybeUninit::<Header>::zeroed();
        let want = std::mem::size_of::<Header>();
        // SAFETY: reads at most `want` bytes into the header's storage.
        let got = unsafe { libc::pread(fd, header.as_mut_ptr().cast(), want, 0) };
        if got != want as isize {
            return Err(format!("session fd {fd}: cannot read its header"));
        }
        // SAFETY: every field of the header is an integer or an atomic of
        // integers, valid for any bytes; all were read.
        let header = unsafe { header.assume_init() };
        let layout = Layout::of(&header).map_err(|e| e.to_string())?;
        let len = layout.file_bytes() as usize;
        let align = layout.align() as usize;
        // Reserve room to align the mapping, then map the file over it.
        // SAFETY: a fresh anonymous reservation, no existing memory named.
        let reserve = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len + align,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if reserve == libc::MAP_FAILED {
            return Err(format!("cannot reserve {len} bytes for the session"));
        }
        let aligned = (reserve as usize).next_multiple_of(align);
        // SAFETY: `aligned..aligned + len` lies in the reservation, which
        // nothing else uses.
        let base = unsafe {
            libc::mmap(
                aligned as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd,
                0,
            )
        };
        // SAFETY: closing the descriptor keeps the mapping.
        unsafe { libc::close(fd) };
        if base == libc::MAP_FAILED {
            return Err(format!("cannot map the session file ({len} bytes)"));
        }
        // The reservation's ends around the mapping go back.
        let head = aligned - reserve as usize;
        let tail = align - head;
        // SAFETY: both ranges are parts of the reservation outside the
        // file's mapping.
        unsafe {
            if head > 0 {
                libc::munmap(reserve, head);
            }
            if tail > 0 {
                libc::munmap((aligned + len) as *mut libc::c_void, tail);
            }
        }
        // SAFETY: `base` maps the whole file, shared and writable, its
        // header checked by `Layout::of`; never unmapped.
        let mapped = unsafe { Mapped::new(base.cast(), layout) };
        // INVARIANT: never unmapped, aligned.
        Ok(Session(mapped))
    }

    /// Claims the next free slot; `None` when every slot is taken (the
    /// thread runs untraced, counted).
    pub fn claim(&self) -> Option<u32> {
        let h = self.header();
        // Relaxed: the slot's state publishes its contents.
        let slot = h.next_slot.fetch_add(1, Ordering::Relaxed);
        if slot < self.layout().slots() {
            Some(slot)
        } else {
            h.untraced.fetch_add(1, Ordering::Relaxed);
            None
        }
    }

    /// Publishes slot `slot` as live for `pid`/`tid`: its user page and
    /// rings are set up.
    pub fn publish(&self, slot: u32, pid: u32, tid: u32) {
        let info = self.info(slot);
        info.pid.store(pid, Ordering::Relaxed);
        info.tid.store(tid, Ordering::Relaxed);
        // Release: pairs with the recorder's Acquire load of the state,
        // after which it reads pid, tid and the rings.
        info.state.store(SLOT_LIVE, Ordering::Release);
    }

    /// Whether the recorder still runs.
    pub fn recorder_alive(&self) -> bool {
        let pid = self.header().recorder as libc::pid_t;
        // SAFETY: signal 0 only checks that the process exists.
        pid > 0 && unsafe { libc::kill(pid, 0) } == 0
    }
}
