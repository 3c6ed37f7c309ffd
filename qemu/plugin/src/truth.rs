// SPDX-License-Identifier: GPL-2.0-or-later
//! The ground truth of a thread (`truth=DIR`): every branch its flow
//! reported and where its samples were, in order, for the tests that hold
//! perf's decode to it. Not kept unless asked for.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::PathBuf;
use std::sync::OnceLock;

use perfaux_qemu_session::truth;

/// Where truth files go (the plugin's `truth=DIR`).
pub static DIR: OnceLock<PathBuf> = OnceLock::new();

/// One thread's truth file and the entries not written yet.
pub struct Truth {
    file: BufWriter<File>,
    pending: Vec<[u64; 3]>,
}

/// The truth of slot `slot`, if the run keeps one (and the file opens).
pub fn open(slot: u32) -> Option<Truth> {
    let dir = DIR.get()?;
    let path = dir.join(truth::file_name(slot));
    match File::create(&path) {
        Ok(f) => Some(Truth {
            file: BufWriter::new(f),
            pending: Vec::new(),
        }),
        Err(e) => {
            eprintln!("perfaux plugin: {}: {e}", path.display());
            None
        }
    }
}

impl Truth {
    /// The entries not written yet, in order: the flow adds to them, and
    /// an entry that goes before others made since (a sample, a signal's
    /// resolution) is put at the count its place had.
    pub fn pending(&mut self) -> &mut Vec<[u64; 3]> {
        &mut self.pending
    }

    /// Writes what is pending (after each batch: a thread that dies keeps
    /// its truth up to its last batch, as its trace).
    pub fn flush(&mut self) {
        for e in self.pending.drain(..) {
            for w in e {
                let _ = self.file.write_all(&w.to_le_bytes());
            }
        }
        let _ = self.file.flush();
    }
}
