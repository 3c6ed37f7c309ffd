// SPDX-License-Identifier: MIT OR Apache-2.0
//! The build-id cache `perf record` fills at the end of a run
//! (`build_id_cache__add_s` in perf's `util/build-id.c`): each binary the
//! recording names is kept under `$PERF_BUILDID_DIR` (default `~/.debug`)
//! as `<dir>/<path>/<build-id>/elf`, with `<dir>/.build-id/<xx>/<rest>`
//! linking to it, so that perf finds the code a recording ran by its
//! build-id after the file on disk was replaced or moved.

use std::path::{Path, PathBuf};

/// The cache directory: `$PERF_BUILDID_DIR`, else `~/.debug`.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("PERF_BUILDID_DIR") {
        return Some(PathBuf::from(d));
    }
    std::env::var_os("HOME").map(|h| Path::new(&h).join(".debug"))
}

/// Lower-case hex of `id`.
fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Adds `path`, whose build-id is `id`, to the cache at `dir`; `Ok(false)`
/// if it was there already.
pub fn add(dir: &Path, path: &str, id: &[u8]) -> std::io::Result<bool> {
    let sid = hex(id);
    if sid.len() < 3 || !path.starts_with('/') {
        return Ok(false);
    }
    // `<dir>/<path>/<build-id>`: the path kept whole under the cache.
    let entry = dir.join(path.trim_start_matches('/')).join(&sid);
    let elf = entry.join("elf");
    let link_dir = dir.join(".build-id").join(&sid[..2]);
    let link = link_dir.join(&sid[2..]);
    if elf.is_file() && link.symlink_metadata().is_ok() {
        return Ok(false);
    }
    std::fs::create_dir_all(&entry)?;
    if !elf.is_file() {
        // A hard link when the cache is on the same file system (perf's
        // first choice), else a copy.
        if std::fs::hard_link(path, &elf).is_err() {
            let tmp = entry.join(".elf.tmp");
            std::fs::copy(path, &tmp)?;
            std::fs::rename(&tmp, &elf)?;
        }
    }
    std::fs::create_dir_all(&link_dir)?;
    // Relative, as perf makes it: ../../<path>/<build-id>.
    let target = Path::new("../..")
        .join(path.trim_start_matches('/'))
        .join(&sid);
    match std::os::unix::fs::symlink(&target, &link) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(true),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_is_kept_under_its_path_and_linked_by_its_build_id() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("prog");
        std::fs::write(&bin, b"not really an ELF").unwrap();
        let cache = dir.path().join("cache");
        let id = [0xab, 0xcd, 0xef, 0x01];
        assert!(add(&cache, bin.to_str().unwrap(), &id).unwrap());
        assert!(!add(&cache, bin.to_str().unwrap(), &id).unwrap(), "once");
        let by_id = cache.join(".build-id/ab/cdef01/elf");
        assert_eq!(std::fs::read(by_id).unwrap(), b"not really an ELF");
        // The recording outlives the file.
        std::fs::remove_file(&bin).unwrap();
        assert!(cache.join(".build-id/ab/cdef01/elf").is_file());
    }
}
