// SPDX-License-Identifier: MIT OR Apache-2.0
//! The recorder's side of the session file: created (a memfd), laid out
//! and filled with the run's parameters before the emulator starts, mapped
//! for the drain, handed to the plugin as a descriptor.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use std::ops::Deref;

use perfaux::abi::PerfEventAttr;
use perfaux_qemu_session::{Header, Layout, MAGIC, Mapped, VERSION};

/// A created session.
///
/// # Invariants
/// `mapped` maps all of `fd`'s bytes until drop.
pub struct Session {
    fd: OwnedFd,
    mapped: Mapped,
}

impl Deref for Session {
    type Target = Mapped;
    fn deref(&self) -> &Mapped {
        &self.mapped
    }
}

impl Session {
    /// A session of `layout` whose threads open `leader` and, when its
    /// period is not 0, `sampler`.
    pub fn create(
        layout: Layout,
        leader: PerfEventAttr,
        sampler: PerfEventAttr,
    ) -> Result<Session, String> {
        // SAFETY: a fresh memfd from a static name.
        let raw = unsafe { libc::memfd_create(c"perfaux-session".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = layout.file_bytes();
        // SAFETY: sizes our own memfd (sparse: pages come when touched).
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(format!(
                "sizing the session ({len} bytes): {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: maps our own memfd whole; nothing else is named.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "mapping the session: {}",
                std::io::Error::last_os_error()
            ));
        }
        let header = Header {
            magic: MAGIC,
            version: VERSION,
            slots: layout.slots(),
            data_pages: layout.data_pages() as u32,
            aux_pages: layout.aux_pages() as u32,
            mode: layout.mode() as u32,
            recorder: std::process::id(),
            leader_attr: leader,
            sampler_attr: sampler,
            next_slot: 0.into(),
            untraced: 0.into(),
            instructions: 0.into(),
        };
        // SAFETY: the mapping starts with room for the header, page
        // aligned, and no one else sees it yet.
        unsafe { base.cast::<Header>().write(header) };
        // SAFETY: `base` maps the whole memfd, shared and writable, the
        // header written; unmapped only when the session drops.
        let mapped = unsafe { Mapped::new(base.cast(), layout) };
        // INVARIANT: as just said.
        Ok(Session { fd, mapped })
    }

    /// The descriptor the plugin maps (`session=FD`).
    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Slots claimed so far.
    pub fn claimed(&self) -> u32 {
        // Relaxed: each slot's state says whether it is ready.
        self.header()
            .next_slot
            .load(Ordering::Relaxed)
            .min(self.layout().slots())
    }

    /// Gives slot `slot`'s pages back to the system (it was drained to its
    /// end): the memory of a run stays bounded by its live threads.
    pub fn release(&self, slot: u32) {
        let (start, len) = self.layout().slot_range(slot);
        // SAFETY: punches our own memfd's range; the slot is drained and
        // no thread writes it any more (SLOT_DONE).
        unsafe {
            libc::fallocate(
                self.fd.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                start as libc::off_t,
                len as libc::off_t,
            );
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `create`; nothing borrowed
        // from it outlives `self` (the accessors borrow `self`).
        unsafe { libc::munmap(self.base().cast(), self.layout().file_bytes() as usize) };
    }
}
