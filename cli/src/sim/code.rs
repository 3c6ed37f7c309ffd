// SPDX-License-Identifier: MIT OR Apache-2.0
//! The simulated program as real x86-64 machine code: a fixed control-flow
//! graph of functions whose basic blocks end in `jcc`, `jmp`, `call`,
//! `ret`, or an indirect `jmp`/`call` through a jump table, encoded into
//! bytes a decoder can walk (perf's Intel PT decoder reads them from the
//! ELF [`super::elf`] writes). Calls only go to functions of a deeper
//! level, so the call depth is bounded; `main` loops forever.
//!
//! The graph is fixed by the seed; what the threads do on it (branch
//! outcomes, table entries) is drawn at run time ([`super::program`]).

use crate::rng::SplitMix64;

/// Index of a block in [`Code::blocks`].
pub type BlockId = usize;
/// Index of a function in [`Code::functions`].
pub type FuncId = usize;

/// How a basic block ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Terminator {
    /// `jcc rel32`: to `taken` (in the same function) with probability
    /// `percent`, else falls through to the next block.
    Cond {
        /// The block a taken branch goes to.
        taken: BlockId,
        /// How often it is taken, in percent.
        percent: u8,
    },
    /// `jmp rel32`.
    Jump(BlockId),
    /// `call rel32`; returns to the next block.
    Call(FuncId),
    /// `jmp *table(,%rax,8)`: one of `targets`.
    IndirectJump {
        /// The jump table's address.
        table: u64,
        /// Its entries.
        targets: Vec<BlockId>,
    },
    /// `call *table(,%rax,8)`: one of `callees`; returns to the next block.
    IndirectCall {
        /// The table's address.
        table: u64,
        /// Its entries.
        callees: Vec<FuncId>,
    },
    /// `ret`.
    Ret,
    /// `iretq`: back to the interrupted code (an interrupt handler's end).
    Iret,
}

/// A basic block: straight-line instructions, then one control transfer.
#[derive(Clone, Debug)]
pub struct Block {
    /// The function it belongs to.
    pub function: FuncId,
    /// Addresses of the instructions before the terminator (none: the
    /// block is its terminator).
    pub body: Vec<u64>,
    /// The terminator's address.
    pub branch: u64,
    /// The address after the terminator (fall-through, return address).
    pub next: u64,
    /// How it ends.
    pub term: Terminator,
}

impl Block {
    /// The block's first instruction.
    pub fn start(&self) -> u64 {
        self.body.first().copied().unwrap_or(self.branch)
    }
}

/// A function: its symbol and its blocks.
#[derive(Clone, Debug)]
pub struct Function {
    /// Symbol name.
    pub name: String,
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Its first block (the entry).
    pub entry: BlockId,
    /// Call depth class: callees are of a higher level.
    pub level: u32,
}

/// The program: machine code, jump tables, functions, blocks.
#[derive(Clone, Debug)]
pub struct Code {
    /// Address of `text[0]`.
    pub text_base: u64,
    /// The machine code.
    pub text: Vec<u8>,
    /// Address of `data[0]` (after the code, 8-byte aligned).
    pub data_base: u64,
    /// Jump tables (little-endian 8-byte addresses).
    pub data: Vec<u8>,
    /// Functions, ascending.
    pub functions: Vec<Function>,
    /// Blocks, in address order.
    pub blocks: Vec<Block>,
}

/// Straight-line instructions the bodies are made of (AT&T syntax in the
/// comments); `imm` bytes after the opcode bytes are drawn at random.
const FILLERS: &[(&[u8], usize)] = &[
    (&[0x90], 0),                   // nop
    (&[0x48, 0x89, 0xc3], 0),       // mov %rax,%rbx
    (&[0x48, 0x83, 0xc0], 1),       // add $imm8,%rax
    (&[0x48, 0x8d, 0x77, 0x10], 0), // lea 0x10(%rdi),%rsi
    (&[0x31, 0xc0], 0),             // xor %eax,%eax
    (&[0xb8], 4),                   // mov $imm32,%eax
    (&[0x0f, 0x1f, 0x40, 0x00], 0), // nopl 0x0(%rax)
    (&[0x48, 0x01, 0xd8], 0),       // add %rbx,%rax
    (&[0x48, 0x8b, 0x47, 0x08], 0), // mov 0x8(%rdi),%rax
];

/// `jcc rel32` condition codes (`0f 8x`).
const JCC: &[u8] = &[0x84, 0x85, 0x8c, 0x8d, 0x8e, 0x8f, 0x82, 0x83];

impl Terminator {
    fn len(&self) -> u64 {
        match self {
            Terminator::Cond { .. } => 6,
            Terminator::Jump(_) | Terminator::Call(_) => 5,
            Terminator::IndirectJump { .. } | Terminator::IndirectCall { .. } => 7,
            Terminator::Ret => 1,
            Terminator::Iret => 2,
        }
    }
}

/// The shape of a program to generate.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Where the code starts.
    pub text_base: u64,
    /// Functions (the first is the entry: `main`, or the handler).
    pub functions: usize,
    /// Deepest call level.
    pub levels: u32,
    /// Name prefix of the symbols.
    pub prefix: &'static str,
    /// The entry function ends in `iretq` (an interrupt handler) instead
    /// of jumping back to its start (`main`).
    pub handler: bool,
    /// Indirect jumps and calls through tables (they need an absolute
    /// 32-bit table address: user code only).
    pub tables: bool,
    /// Direct `jmp`s (packetless: an interrupt handler whose trace is
    /// split by a TSC must not have them, see `Programs::generate`).
    pub jumps: bool,
}

/// A block before layout: body instruction encodings and terminator.
struct Draft {
    body: Vec<Vec<u8>>,
    term: Terminator,
}

impl Code {
    /// The program of `shape`, drawn from `rng`.
    pub fn generate(shape: Shape, rng: &mut SplitMix64) -> Code {
        let levels: Vec<u32> = (0..shape.functions)
            .map(|f| {
                if f == 0 {
                    0
                } else {
                    1 + (f as u32 - 1) % shape.levels
                }
            })
            .collect();
        // Every function but the entry gets a caller one level up, which
        // calls it from its first blocks (straight-line: each call returns
        // to the next block), so that whenever the entry runs, every
        // function runs: no seed leaves most of its program dead.
        let mut must_call: Vec<Vec<FuncId>> = vec![Vec::new(); shape.functions];
        for g in 1..shape.functions {
            // Never empty: function g - 1 is one level up, or the entry is.
            let callers: Vec<FuncId> = (0..g).filter(|&p| levels[p] + 1 == levels[g]).collect();
            if !callers.is_empty() {
                must_call[callers[rng.below(callers.len() as u64) as usize]].push(g);
            }
        }
        // Blocks per function (room for the calls it must make and a last
        // block), then each function's drafts.
        let sizes: Vec<usize> = (0..shape.functions)
            .map(|f| (3 + rng.below(8) as usize).max(must_call[f].len() + 2))
            .collect();
        let mut drafts: Vec<Vec<Draft>> = Vec::new();
        let mut first_block = Vec::new();
        let mut next_block = 0;
        for (f, &n) in sizes.iter().enumerate() {
            first_block.push(next_block);
            // Callees: mostly of the next level, so that calls nest deep.
            let next: Vec<FuncId> = (0..shape.functions)
                .filter(|&g| levels[g] == levels[f] + 1)
                .collect();
            let deeper: Vec<FuncId> = (0..shape.functions)
                .filter(|&g| levels[g] > levels[f])
                .collect();
            let mut blocks = Vec::new();
            for i in 0..n {
                let body = (0..rng.below(9))
                    .map(|_| {
                        let (op, imm) = FILLERS[rng.below(FILLERS.len() as u64) as usize];
                        let mut bytes = op.to_vec();
                        bytes.extend((0..imm).map(|_| rng.below(256) as u8));
                        bytes
                    })
                    .collect();
                let here = next_block + i;
                let last = next_block + n - 1;
                let term = if i == n - 1 {
                    match (f, shape.handler) {
                        (0, true) => Terminator::Iret,
                        (0, false) => Terminator::Jump(next_block),
                        _ => Terminator::Ret,
                    }
                } else if let Some(&callee) = must_call[f].get(i) {
                    Terminator::Call(callee)
                } else {
                    let callees = if rng.chance(75) && !next.is_empty() {
                        &next
                    } else {
                        &deeper
                    };
                    Self::draw_terminator(rng, here, last, next_block, callees, shape)
                };
                blocks.push(Draft { body, term });
            }
            next_block += n;
            drafts.push(blocks);
        }
        Self::lay_out(shape, drafts, levels, rng)
    }

    fn draw_terminator(
        rng: &mut SplitMix64,
        here: BlockId,
        last: BlockId,
        first: BlockId,
        deeper: &[FuncId],
        shape: Shape,
    ) -> Terminator {
        let tables = shape.tables;
        let forward = |rng: &mut SplitMix64, from: BlockId| {
            from + rng.below((last - from + 1) as u64) as usize
        };
        let kind = rng.below(100);
        if shape.jumps && kind < 10 && here + 2 <= last {
            return Terminator::Jump(forward(rng, here + 2));
        }
        if kind < 35 && !deeper.is_empty() {
            return Terminator::Call(deeper[rng.below(deeper.len() as u64) as usize]);
        }
        if tables && kind < 41 && here < last {
            let n = 2 + rng.below(3) as usize;
            let targets = (0..n).map(|_| forward(rng, here + 1)).collect();
            return Terminator::IndirectJump { table: 0, targets };
        }
        if tables && kind < 47 && !deeper.is_empty() {
            let n = 2 + rng.below(2) as usize;
            let callees = (0..n)
                .map(|_| deeper[rng.below(deeper.len() as u64) as usize])
                .collect();
            return Terminator::IndirectCall { table: 0, callees };
        }
        // A conditional branch: forward past the next block, or (one in
        // five, and always in the block before the last) a loop back to
        // this block or one before it, taken at most half the time. Never
        // to the next block: a `jcc` to its own fall-through (rel32 0) is
        // one no compiler emits, and its two outcomes are one path that no
        // decoder can tell apart.
        if rng.chance(20) || here + 2 > last {
            let taken = first + rng.below((here - first + 1) as u64) as usize;
            Terminator::Cond {
                taken,
                percent: 10 + rng.below(40) as u8,
            }
        } else {
            Terminator::Cond {
                taken: forward(rng, here + 2),
                percent: 20 + rng.below(60) as u8,
            }
        }
    }

    /// Gives every instruction its address, the tables theirs, and encodes.
    fn lay_out(
        shape: Shape,
        drafts: Vec<Vec<Draft>>,
        levels: Vec<u32>,
        rng: &mut SplitMix64,
    ) -> Code {
        let mut at = shape.text_base;
        let mut functions = Vec::new();
        let mut blocks = Vec::new();
        let mut encodings = Vec::new();
        for (f, fblocks) in drafts.into_iter().enumerate() {
            at = at.next_multiple_of(16);
            let start = at;
            let entry = blocks.len();
            for d in fblocks {
                let mut body = Vec::new();
                for insn in &d.body {
                    body.push(at);
                    at += insn.len() as u64;
                }
                let branch = at;
                at += d.term.len();
                blocks.push(Block {
                    function: f,
                    body,
                    branch,
                    next: at,
                    term: d.term,
                });
                encodings.push(d.body);
            }
            functions.push(Function {
                name: if f == 0 {
                    if shape.handler {
                        format!("{}_entry", shape.prefix)
                    } else {
                        "main".into()
                    }
                } else {
                    format!("{}_f{f}", shape.prefix)
                },
                start,
                end: at,
                entry,
                level: levels[f],
            });
        }
        let data_base = at.next_multiple_of(8);
        let mut data = Vec::new();
        for b in &mut blocks {
            let entries: Vec<u64> = match &b.term {
                Terminator::IndirectJump { targets, .. } => {
                    targets.iter().map(|&t| t as u64).collect()
                }
                Terminator::IndirectCall { callees, .. } => {
                    callees.iter().map(|&c| c as u64).collect()
                }
                _ => continue,
            };
            let table = data_base + data.len() as u64;
            match &mut b.term {
                Terminator::IndirectJump { table: t, .. }
                | Terminator::IndirectCall { table: t, .. } => *t = table,
                _ => {}
            }
            data.resize(data.len() + 8 * entries.len(), 0);
        }
        let mut code = Code {
            text_base: shape.text_base,
            text: Vec::new(),
            data_base,
            data,
            functions,
            blocks,
        };
        code.encode(encodings, rng);
        code
    }

    fn encode(&mut self, bodies: Vec<Vec<Vec<u8>>>, rng: &mut SplitMix64) {
        let len = (self.data_base - self.text_base) as usize;
        // Padding between functions: int3.
        let mut text = vec![0xcc; len];
        let rel32 = |from_next: u64, to: u64| ((to as i64 - from_next as i64) as i32).to_le_bytes();
        for (b, body) in self.blocks.iter().zip(bodies) {
            for (addr, insn) in b.body.iter().zip(body) {
                let o = (addr - self.text_base) as usize;
                text[o..o + insn.len()].copy_from_slice(&insn);
            }
            let o = (b.branch - self.text_base) as usize;
            let bytes: Vec<u8> = match &b.term {
                Terminator::Cond { taken, .. } => {
                    let cc = JCC[rng.below(JCC.len() as u64) as usize];
                    let mut v = vec![0x0f, cc];
                    v.extend(rel32(b.next, self.blocks[*taken].start()));
                    v
                }
                Terminator::Jump(t) => {
                    [&[0xe9][..], &rel32(b.next, self.blocks[*t].start())].concat()
                }
                Terminator::Call(f) => {
                    [&[0xe8][..], &rel32(b.next, self.functions[*f].start)].concat()
                }
                Terminator::IndirectJump { table, .. } => {
                    [&[0xff, 0x24, 0xc5][..], &(*table as u32).to_le_bytes()].concat()
                }
                Terminator::IndirectCall { table, .. } => {
                    [&[0xff, 0x14, 0xc5][..], &(*table as u32).to_le_bytes()].concat()
                }
                Terminator::Ret => vec![0xc3],
                Terminator::Iret => vec![0x48, 0xcf],
            };
            text[o..o + bytes.len()].copy_from_slice(&bytes);
        }
        // The tables' entries.
        let mut data = std::mem::take(&mut self.data);
        for b in &self.blocks {
            let (table, addrs): (u64, Vec<u64>) = match &b.term {
                Terminator::IndirectJump { table, targets } => (
                    *table,
                    targets.iter().map(|&t| self.blocks[t].start()).collect(),
                ),
                Terminator::IndirectCall { table, callees } => (
                    *table,
                    callees.iter().map(|&c| self.functions[c].start).collect(),
                ),
                _ => continue,
            };
            for (i, a) in addrs.iter().enumerate() {
                let o = (table - self.data_base) as usize + 8 * i;
                data[o..o + 8].copy_from_slice(&a.to_le_bytes());
            }
        }
        self.data = data;
        self.text = text;
    }

    /// The function's first block.
    pub fn entry(&self, f: FuncId) -> BlockId {
        self.functions[f].entry
    }

    /// One past the last byte of code and tables.
    pub fn end(&self) -> u64 {
        self.data_base + self.data.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_shape() -> Shape {
        Shape {
            text_base: 0x40_1000,
            functions: 40,
            levels: 6,
            prefix: "fn",
            handler: false,
            tables: true,
            jumps: true,
        }
    }

    fn user() -> Code {
        Code::generate(user_shape(), &mut SplitMix64::new(7))
    }

    #[test]
    fn branches_encode_their_targets() {
        let code = user();
        let at = |a: u64| (a - code.text_base) as usize;
        let rel = |b: &Block| {
            let o = at(b.next) - 4;
            b.next.wrapping_add(
                i32::from_le_bytes(code.text[o..o + 4].try_into().unwrap()) as i64 as u64,
            )
        };
        for b in &code.blocks {
            match &b.term {
                Terminator::Cond { taken, .. } => {
                    assert_eq!(code.text[at(b.branch)], 0x0f);
                    assert_eq!(rel(b), code.blocks[*taken].start());
                }
                Terminator::Jump(t) => assert_eq!(rel(b), code.blocks[*t].start()),
                Terminator::Call(f) => {
                    assert_eq!(rel(b), code.functions[*f].start);
                    assert!(code.functions[*f].level > code.functions[b.function].level);
                }
                Terminator::IndirectJump { table, targets } => {
                    let o = (*table - code.data_base) as usize;
                    let first = u64::from_le_bytes(code.data[o..o + 8].try_into().unwrap());
                    assert_eq!(first, code.blocks[targets[0]].start());
                }
                Terminator::Ret => assert_eq!(code.text[at(b.branch)], 0xc3),
                _ => {}
            }
        }
        assert_eq!(code.functions[0].name, "main");
        assert!(
            code.blocks
                .iter()
                .any(|b| matches!(b.term, Terminator::IndirectCall { .. }))
        );
    }

    /// No `jcc` targets its own fall-through (a rel32 of 0), for any of
    /// 100 seeds: no compiler emits one, and a decoder cannot tell its
    /// outcomes apart.
    #[test]
    fn no_conditional_branch_targets_its_fall_through() {
        for seed in 0..100 {
            let shape = Shape {
                functions: 48,
                ..user_shape()
            };
            let code = Code::generate(shape, &mut SplitMix64::new(seed));
            for b in &code.blocks {
                if let Terminator::Cond { taken, .. } = b.term {
                    let rel = &code.text[(b.next - code.text_base) as usize - 4..][..4];
                    assert_ne!(rel, [0; 4], "seed {seed}: jcc at {:#x}", b.branch);
                    assert_ne!(code.blocks[taken].start(), b.next);
                }
            }
        }
    }

    #[test]
    fn the_same_seed_makes_the_same_code() {
        assert_eq!(user().text, user().text);
    }
}
