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

/// Where the cache at `dir` keeps the binary `path` of build-id `id`:
/// `<dir>/<path>/<build-id>/elf`.
pub fn entry(dir: &Path, path: &str, id: &[u8]) -> PathBuf {
    dir.join(path.trim_start_matches('/'))
        .join(hex(id))
        .join("elf")
}

/// Adds `path`, whose build-id is `id`, to the cache at `dir`; `Ok(false)`
/// if it was there already.
pub fn add(dir: &Path, path: &str, id: &[u8]) -> std::io::Result<bool> {
    add_with(dir, path, id, |elf| {
        // A hard link when the cache is on the same file system (perf's
        // first choice), else a copy.
        if std::fs::hard_link(path, elf).is_ok() {
            return Ok(());
        }
        replace_with(elf, |tmp| std::fs::copy(path, tmp).map(drop))
    })
}

/// Adds the binary `bytes`, named `path` in the recording (which need not
/// exist: a recording written to a pipe names its program without writing
/// it anywhere else), with build-id `id`, to the cache at `dir`;
/// `Ok(false)` if it was there already.
pub fn add_bytes(dir: &Path, path: &str, id: &[u8], bytes: &[u8]) -> std::io::Result<bool> {
    add_with(dir, path, id, |elf| {
        replace_with(elf, |tmp| std::fs::write(tmp, bytes))
    })
}

/// Fills `file` through a temporary file beside it, renamed into place:
/// a reader (or a concurrent run adding the same binary) never sees half
/// a file.
fn replace_with(
    file: &Path,
    fill: impl FnOnce(&Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = file.with_file_name(format!(".elf.{}.tmp", std::process::id()));
    let filled = fill(&tmp).and_then(|()| std::fs::rename(&tmp, file));
    if filled.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    filled
}

/// The cache entry of `path` (its `elf` filled by `fill` unless present)
/// and the `.build-id/<xx>/<rest>` link to it.
fn add_with(
    dir: &Path,
    path: &str,
    id: &[u8],
    fill: impl FnOnce(&Path) -> std::io::Result<()>,
) -> std::io::Result<bool> {
    let sid = hex(id);
    if sid.len() < 3 || !path.starts_with('/') {
        return Ok(false);
    }
    let elf = entry(dir, path, id);
    let link_dir = dir.join(".build-id").join(&sid[..2]);
    let link = link_dir.join(&sid[2..]);
    if elf.is_file() && link.symlink_metadata().is_ok() {
        return Ok(false);
    }
    if let Some(parent) = elf.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if !elf.is_file() {
        fill(&elf)?;
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

    #[test]
    fn bytes_are_kept_under_a_path_that_need_not_exist() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let id = [0x12, 0x34, 0x56];
        assert!(add_bytes(&cache, "/nowhere/prog", &id, b"code").unwrap());
        assert!(!add_bytes(&cache, "/nowhere/prog", &id, b"code").unwrap());
        assert_eq!(
            std::fs::read(cache.join(".build-id/12/3456/elf")).unwrap(),
            b"code"
        );
        assert_eq!(
            entry(&cache, "/nowhere/prog", &id),
            cache.join("nowhere/prog/123456/elf")
        );
        assert!(!Path::new("/nowhere/prog").exists());
        // Nothing half-written is left beside it.
        let names: Vec<_> = std::fs::read_dir(cache.join("nowhere/prog/123456"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["elf"]);
    }
}
