// SPDX-License-Identifier: MIT OR Apache-2.0
//! Output files replaced whole or not at all: written to a temporary file
//! beside the target, renamed over it once complete (keeping the previous
//! file as `<path>.old` where `perf record` does).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// The mode of a recording: `perf record` and `perf inject` create
/// perf.data `S_IRUSR | S_IWUSR` (a recording shows what ran).
pub const RECORDING: u32 = 0o600;
/// The mode of any other output, as `File::create` gives it (the umask
/// applies).
pub const PLAIN: u32 = 0o666;

/// A temporary file beside `path` (same directory, so the final rename
/// stays on one file system) created with `mode` (less the umask),
/// removed if it is dropped unplaced.
pub fn staged(path: &Path, mode: u32) -> Result<NamedTempFile, String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", path.display()))?;
    tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .suffix(".tmp")
        // open(2) applies the umask, as to the final file's creation.
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(|e| {
            // The OS's words, without the temporary name tempfile adds
            // (` at path "..."`, a Rust debug string of a name the user
            // never chose).
            let cause = e.raw_os_error().map_or_else(
                || {
                    let text = e.to_string();
                    text.split(" at path ")
                        .next()
                        .unwrap_or_default()
                        .to_owned()
                },
                |n| std::io::Error::from_raw_os_error(n).to_string(),
            );
            format!("cannot create {}: {cause}", path.display())
        })
}

/// Renames the finished `file` to `path`; with `backup`, an existing
/// non-empty `path` is first renamed to `<path>.old`, which is returned.
pub fn place(file: NamedTempFile, path: &Path, backup: bool) -> Result<Option<PathBuf>, String> {
    let mut old = None;
    if backup && std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0) {
        let mut name = path.as_os_str().to_owned();
        name.push(".old");
        let name = PathBuf::from(name);
        std::fs::rename(path, &name).map_err(|e| {
            format!(
                "cannot move {} to {}: {e} (the new recording is not written)",
                path.display(),
                name.display()
            )
        })?;
        old = Some(name);
    }
    file.persist(path).map_err(|e| {
        format!(
            "cannot rename the finished file to {}: {}",
            path.display(),
            e.error
        )
    })?;
    Ok(old)
}
