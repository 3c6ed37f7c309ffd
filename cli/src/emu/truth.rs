// SPDX-License-Identifier: MIT OR Apache-2.0
//! The ground truth of a program's recording (`record --truth FILE --
//! PROGRAM`), from what the plugin logged per thread: every branch a
//! decoder reports, in order, and each sample's history. Text, one fact a
//! line (addresses in hex):
//!
//! ```text
//! thread <slot> <pid> <tid> <instructions> <ended|cut>
//! branch <slot> <from> <to>
//! sample <slot> <ip> <n> <from>/<to> ...     (the n <= 64 newest branches, newest first)
//! ```
//!
//! A `cut` thread did not end by itself (a fatal signal, an exec, the end
//! of the recording): its trace and truth end at its last batch.

use std::fmt::Write as _;
use std::path::Path;

use perfaux_qemu_session::truth;

use super::drain::ThreadEnd;

/// The most branches a sample's history lists (perf's `--itrace=L64`).
pub const HISTORY: usize = 64;

/// Renders the truth of `threads` from the plugin's files in `dir`.
pub fn render(dir: &Path, threads: &[ThreadEnd]) -> Result<String, String> {
    let mut out = String::new();
    for t in threads {
        let _ = writeln!(
            out,
            "thread {} {} {} {} {}",
            t.slot,
            t.pid,
            t.tid,
            t.instructions,
            if t.ended { "ended" } else { "cut" }
        );
    }
    for t in threads {
        let path = dir.join(truth::file_name(t.slot));
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut history: Vec<(u64, u64)> = Vec::new();
        for entry in bytes.chunks_exact(24) {
            let word = |i: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&entry[8 * i..8 * i + 8]);
                u64::from_le_bytes(w)
            };
            match word(0) {
                truth::BRANCH => {
                    let _ = writeln!(out, "branch {} {:x} {:x}", t.slot, word(1), word(2));
                    history.push((word(1), word(2)));
                }
                truth::SAMPLE => {
                    let n = history.len().min(HISTORY);
                    let _ = write!(out, "sample {} {:x} {n}", t.slot, word(1));
                    for (from, to) in history.iter().rev().take(n) {
                        let _ = write!(out, " {from:x}/{to:x}");
                    }
                    out.push('\n');
                }
                other => return Err(format!("{}: an entry of kind {other}", path.display())),
            }
        }
    }
    Ok(out)
}
