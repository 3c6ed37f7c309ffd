// SPDX-License-Identifier: GPL-2.0-or-later
//! The plugin's translated blocks and the program's signal handlers.
//!
//! Every translation of the same code shares one [`Code`], never freed, so
//! the pointer a block callback gets never dangles. A block that starts
//! where the program installed a signal handler (`rt_sigaction`) is marked:
//! when such a block follows one whose exit could have gone anywhere, the
//! kernel may have delivered a signal between the two, and the flow waits
//! for the handler's return to learn where it interrupted the thread
//! ([`BlockFlow::deliver`](perfaux::soft_pt::blocks::BlockFlow::deliver)).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use perfaux::soft_pt::blocks::Block;

/// A translated block and whether a signal handler starts there.
pub struct Code {
    /// The block.
    pub block: Block,
    /// A signal handler of the program starts at the block (Relaxed: a
    /// hint set by `rt_sigaction`, read on every block start; a block
    /// entered just as its handler is installed is simply taken as not
    /// one).
    pub handler: AtomicBool,
}

/// The blocks by their code, and the handlers' addresses.
struct Registry {
    blocks: HashMap<Block, &'static Code>,
    handlers: HashSet<u64>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// Runs `f` on the registry (made on first use).
fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut r = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    f(r.get_or_insert_with(|| Registry {
        blocks: HashMap::new(),
        handlers: HashSet::new(),
    }))
}

/// The shared `Code` of `block` (a translation of code seen before gets
/// the same one).
pub fn intern(block: Block) -> &'static Code {
    with(|r| {
        let handler = r.handlers.contains(&block.start());
        *r.blocks.entry(block).or_insert_with(|| {
            Box::leak(Box::new(Code {
                block,
                handler: AtomicBool::new(handler),
            }))
        })
    })
}

/// The program installed a signal handler at `addr`.
pub fn add_handler(addr: u64) {
    with(|r| {
        if r.handlers.insert(addr) {
            for code in r.blocks.values().filter(|c| c.block.start() == addr) {
                code.handler.store(true, Ordering::Relaxed);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handlers_mark_blocks_translated_before_and_after() {
        let before = intern(Block::new(0x5000, 1, 0x5000, &[0x90]).unwrap());
        assert!(!before.handler.load(Ordering::Relaxed));
        add_handler(0x5000);
        assert!(before.handler.load(Ordering::Relaxed));
        let again = intern(Block::new(0x5000, 1, 0x5000, &[0x90]).unwrap());
        assert!(std::ptr::eq(before, again), "one Code per block");
        let after = intern(Block::new(0x5000, 2, 0x5001, &[0xc3]).unwrap());
        assert!(after.handler.load(Ordering::Relaxed));
        let other = intern(Block::new(0x6000, 1, 0x6000, &[0x90]).unwrap());
        assert!(!other.handler.load(Ordering::Relaxed));
    }
}
