// SPDX-License-Identifier: GPL-2.0-or-later
//! Where the program's code is, for `PERF_RECORD_MMAP2`: the executable and
//! its interpreter from their ELF program headers (QEMU loads both itself,
//! so no system call shows them; the guest's `/proc/self/maps` loses their
//! exec bit), and every file the program maps executable from its `mmap`
//! and `mprotect` calls.

use std::sync::Mutex;

use object::Endianness;
use object::elf::{PF_R, PF_W, PF_X, PT_INTERP, PT_LOAD};
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};

use crate::records::Mmap;

const PAGE: u64 = 4096;

/// A loaded ELF image: its executable segments, where they are.
pub struct Image {
    /// The image's executable segments as mappings.
    pub maps: Vec<Mmap>,
    /// The entry point in the file (before the load bias).
    pub entry: u64,
    /// The interpreter it names (`PT_INTERP`), if any.
    pub interp: Option<String>,
}

/// The file's device and inode.
fn file_id(path: &str) -> ((u32, u32), u64) {
    std::fs::metadata(path)
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            let dev = m.dev();
            ((libc::major(dev), libc::minor(dev)), m.ino())
        })
        .unwrap_or(((0, 0), 0))
}

/// Reads `path`'s program headers; its mappings at load bias `bias`.
pub fn image(path: &str, bias: u64) -> Result<Image, String> {
    let data = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let elf = ElfFile64::<Endianness>::parse(&*data).map_err(|e| format!("{path}: {e}"))?;
    let endian = elf.endian();
    let (dev, ino) = file_id(path);
    let mut maps = Vec::new();
    let mut interp = None;
    for ph in elf.elf_program_headers() {
        match ph.p_type(endian) {
            PT_LOAD if ph.p_flags(endian) & PF_X != 0 => {
                let vaddr = ph.p_vaddr(endian);
                let start = (bias + vaddr) & !(PAGE - 1);
                let end = (bias + vaddr + ph.p_memsz(endian)).next_multiple_of(PAGE);
                let f = ph.p_flags(endian);
                let prot = (if f & PF_R != 0 { libc::PROT_READ } else { 0 })
                    | (if f & PF_W != 0 { libc::PROT_WRITE } else { 0 })
                    | libc::PROT_EXEC;
                maps.push(Mmap {
                    start,
                    len: end - start,
                    pgoff: ph.p_offset(endian) & !(PAGE - 1),
                    dev,
                    ino,
                    prot: prot as u32,
                    flags: libc::MAP_PRIVATE as u32,
                    path: path.to_owned(),
                });
            }
            PT_INTERP => {
                if let Ok(Some(bytes)) = ph.interpreter(endian, &*data) {
                    interp = Some(String::from_utf8_lossy(bytes).into_owned());
                }
            }
            _ => {}
        }
    }
    Ok(Image {
        maps,
        entry: elf.elf_header().e_entry(endian),
        interp,
    })
}

/// The path of the file open as `fd` in this process.
fn fd_path(fd: i64) -> Option<String> {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// The file mappings of the process, for `mprotect` (what a range maps).
static FILE_MAPS: Mutex<Vec<Mmap>> = Mutex::new(Vec::new());

/// `mmap(addr, len, prot, flags, fd, off)` returned `start`: the mapping,
/// remembered; returned if it is of a file and executable (an MMAP2).
pub fn mapped(start: u64, len: u64, prot: u64, flags: u64, fd: i64, off: u64) -> Option<Mmap> {
    let end = start + len.next_multiple_of(PAGE);
    let mut maps = FILE_MAPS.lock().unwrap_or_else(|e| e.into_inner());
    forget(&mut maps, start, end);
    if flags & libc::MAP_ANONYMOUS as u64 != 0 || fd < 0 {
        return None;
    }
    let path = fd_path(fd)?;
    let (dev, ino) = file_id(&path);
    let map = Mmap {
        start,
        len: end - start,
        pgoff: off,
        dev,
        ino,
        prot: prot as u32,
        flags: flags as u32,
        path,
    };
    maps.push(map.clone());
    (prot & libc::PROT_EXEC as u64 != 0).then_some(map)
}

/// `munmap(start, len)`.
pub fn unmapped(start: u64, len: u64) {
    let mut maps = FILE_MAPS.lock().unwrap_or_else(|e| e.into_inner());
    forget(&mut maps, start, start + len.next_multiple_of(PAGE));
}

/// `mprotect(start, len, prot)` succeeded: the parts of file mappings it
/// made executable (MMAP2s).
pub fn protected(start: u64, len: u64, prot: u64) -> Vec<Mmap> {
    let end = start + len.next_multiple_of(PAGE);
    let mut maps = FILE_MAPS.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = Vec::new();
    for m in maps.iter_mut() {
        let (s, e) = (m.start.max(start), (m.start + m.len).min(end));
        if s >= e {
            continue;
        }
        if prot & libc::PROT_EXEC as u64 != 0 && m.prot & libc::PROT_EXEC as u32 == 0 {
            out.push(Mmap {
                start: s,
                len: e - s,
                pgoff: m.pgoff + (s - m.start),
                prot: prot as u32,
                ..m.clone()
            });
        }
    }
    // The range's protection changes (a part is taken for the whole).
    for m in maps.iter_mut() {
        if m.start >= start && m.start + m.len <= end {
            m.prot = prot as u32;
        }
    }
    out
}

/// Drops what `[start, end)` maps from `maps`, keeping the parts outside.
fn forget(maps: &mut Vec<Mmap>, start: u64, end: u64) {
    let mut kept = Vec::with_capacity(maps.len());
    for m in maps.drain(..) {
        let m_end = m.start + m.len;
        if m_end <= start || m.start >= end {
            kept.push(m);
            continue;
        }
        if m.start < start {
            kept.push(Mmap {
                len: start - m.start,
                ..m.clone()
            });
        }
        if m_end > end {
            kept.push(Mmap {
                start: end,
                len: m_end - end,
                pgoff: m.pgoff + (end - m.start),
                ..m
            });
        }
    }
    *maps = kept;
}

/// Reads what the program has at `addr` (guest addresses are the
/// process's own in QEMU user mode) into `buf`, with `process_vm_readv`,
/// so a bad address is a short read, not a fault: the bytes read.
fn read_guest(addr: u64, buf: &mut [u8]) -> usize {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: reads at most `buf.len()` bytes of this process into `buf`;
    // the kernel checks the remote range (a read stops at a bad page).
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    n.max(0) as usize
}

/// The 8 bytes the program has at `addr`.
pub fn guest_u64(addr: u64) -> Option<u64> {
    let mut word = [0u8; 8];
    (read_guest(addr, &mut word) == 8).then(|| u64::from_le_bytes(word))
}

/// The NUL-terminated string the program has at `addr`, if it ends within
/// `max` bytes.
pub fn guest_str(addr: u64, max: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; max];
    let n = read_guest(addr, &mut buf);
    buf.truncate(n);
    let end = buf.iter().position(|&b| b == 0)?;
    buf.truncate(end);
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forget_keeps_the_parts_outside() {
        let m = Mmap {
            start: 0x1000,
            len: 0x4000,
            pgoff: 0x10000,
            dev: (0, 0),
            ino: 1,
            prot: 5,
            flags: 2,
            path: "/x".into(),
        };
        let mut maps = vec![m];
        forget(&mut maps, 0x2000, 0x3000);
        assert_eq!(maps.len(), 2);
        assert_eq!((maps[0].start, maps[0].len), (0x1000, 0x1000));
        assert_eq!(
            (maps[1].start, maps[1].len, maps[1].pgoff),
            (0x3000, 0x2000, 0x12000)
        );
    }

    #[test]
    fn guest_strings_are_read_safely() {
        let s = b"/usr/bin/env\0";
        assert_eq!(guest_str(s.as_ptr() as u64, 64).unwrap(), b"/usr/bin/env");
        assert_eq!(guest_str(0, 64), None);
        assert_eq!(guest_str(8, 64), None);
        let word = 0x1122_3344_5566_7788u64;
        assert_eq!(guest_u64(std::ptr::from_ref(&word) as u64), Some(word));
        assert_eq!(guest_u64(8), None);
    }

    #[test]
    fn the_test_binary_has_executable_segments() {
        let exe = std::env::current_exe().unwrap();
        let img = image(exe.to_str().unwrap(), 0).unwrap();
        assert!(!img.maps.is_empty());
        assert!(
            img.maps
                .iter()
                .all(|m| m.prot & libc::PROT_EXEC as u32 != 0)
        );
    }
}
