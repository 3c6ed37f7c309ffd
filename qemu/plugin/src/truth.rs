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
    file: Option<BufWriter<File>>,
    pending: Vec<[u64; 3]>,
}

/// The truth of slot `slot`, if the run keeps one (and the file opens).
pub fn open(slot: u32) -> Option<Truth> {
    let dir = DIR.get()?;
    let path = dir.join(truth::file_name(slot));
    match File::create(&path) {
        Ok(f) => Some(Truth {
            file: Some(BufWriter::new(f)),
            pending: Vec::new(),
        }),
        Err(e) => {
            eprintln!("perfaux plugin: {}: {e}", path.display());
            None
        }
    }
}

impl Truth {
    /// Entries gathered apart, to be inserted into a thread's
    /// ([`insert_all`](Self::insert_all)); never written.
    pub fn detached() -> Truth {
        Truth {
            file: None,
            pending: Vec::new(),
        }
    }

    /// Takes the entries gathered.
    pub fn take(&mut self) -> Vec<[u64; 3]> {
        std::mem::take(&mut self.pending)
    }

    /// Puts `entries` at index `at` of the pending entries.
    pub fn insert_all(&mut self, at: usize, entries: Vec<[u64; 3]>) {
        let at = at.min(self.pending.len());
        self.pending.splice(at..at, entries);
    }

    /// Adds an entry.
    pub fn push(&mut self, entry: [u64; 3]) {
        self.pending.push(entry);
    }

    /// Entries not written yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Puts `entry` at index `at` of the pending entries (as many as
    /// [`pending`](Self::pending) said then: an entry that goes before
    /// others made since).
    pub fn insert(&mut self, at: usize, entry: [u64; 3]) {
        let at = at.min(self.pending.len());
        self.pending.insert(at, entry);
    }

    /// Writes what is pending (after each batch: a thread that dies keeps
    /// its truth up to its last batch, as its trace).
    pub fn flush(&mut self) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        for e in self.pending.drain(..) {
            for w in e {
                let _ = file.write_all(&w.to_le_bytes());
            }
        }
        let _ = file.flush();
    }
}
