// SPDX-License-Identifier: MIT OR Apache-2.0
//! An x86-64 instruction length decoder and branch classifier, for a tracer
//! that watches a program one instruction at a time (a single-step tracer):
//! it tells how long the instruction that just retired was and what kind of
//! control transfer it is, the two things an Intel PT packet stream depends
//! on. The classes are those of Linux perf's Intel PT decoder
//! (`tools/perf/util/intel-pt-decoder/intel-pt-insn-decoder.c`), so that the
//! packets a tracer writes are the ones that decoder expects when it walks
//! the same bytes.
//!
//! No allocation, no panic, 64-bit mode only. Every length is checked
//! against the iced-x86 decoder over every opcode and random encodings
//! (`tests/insn_oracle.rs`).
//!
//! ```
//! use perfaux::soft_pt::insn::{decode, Branch};
//! // jne +0x10 (rel8): two bytes, a conditional branch.
//! let jne = decode(&[0x75, 0x10], 0x1000).unwrap();
//! assert_eq!((jne.len, jne.branch), (2, Branch::Conditional { target: 0x1012 }));
//! // call *%r8 (REX.B + 0xff /2): an indirect call.
//! assert_eq!(decode(&[0x41, 0xff, 0xd0], 0).unwrap().branch, Branch::IndirectCall);
//! // An add with a SIB byte and a 32-bit displacement is not a branch.
//! let add = decode(&[0x48, 0x01, 0x84, 0x24, 0x00, 0x01, 0x00, 0x00], 0).unwrap();
//! assert_eq!((add.len, add.branch), (8, Branch::None));
//! ```

mod tables;

use tables::{
    ONE_BYTE_IMM8, ONE_BYTE_IMMZ, ONE_BYTE_INVALID_64, ONE_BYTE_MODRM, TWO_BYTE_IMM8,
    TWO_BYTE_INVALID, TWO_BYTE_NO_MODRM, VEX_MAP1_IMM8,
};

/// The architectural limit on an instruction's length (longer is #GP).
pub const MAX_INSN_LEN: usize = 15;

/// What kind of control transfer an instruction is, as perf's Intel PT
/// decoder classifies it (`enum intel_pt_insn_op` and `_branch`), with the
/// target of the direct ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Branch {
    /// Not a branch: execution goes on at the next instruction.
    None,
    /// Jcc, LOOP/LOOPE/LOOPNE, JRCXZ (a TNT bit); `target` if taken.
    Conditional {
        /// The target when taken.
        target: u64,
    },
    /// A direct near JMP (no packet).
    Jump {
        /// The target.
        target: u64,
    },
    /// A direct near CALL (no packet; the return address is pushed).
    Call {
        /// The callee.
        target: u64,
    },
    /// An indirect near JMP (through a register or memory): a TIP.
    IndirectJump,
    /// An indirect near CALL: a TIP.
    IndirectCall,
    /// A near RET (with or without an immediate): a TIP, or a TNT bit when
    /// return compression applies.
    Return,
    /// A far transfer within user code: far JMP/CALL through memory, far
    /// RET, IRET. A TIP.
    Far,
    /// A transfer into the kernel: SYSCALL, SYSENTER, INT n, INT3, INT1.
    /// The kernel runs next (a TIP, or TIP.PGD when it is not traced).
    SystemCall,
    /// A return from the kernel: SYSRET, SYSEXIT (kernel code only).
    SystemReturn,
}

impl Branch {
    /// Whether execution may continue anywhere else than at the next
    /// instruction.
    pub const fn is_branch(self) -> bool {
        !matches!(self, Branch::None)
    }
}

/// One decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Insn {
    /// Its length in bytes, 1 to [`MAX_INSN_LEN`].
    pub len: u8,
    /// Its control transfer.
    pub branch: Branch,
    /// Whether it is a string instruction with a REP/REPE/REPNE prefix,
    /// which a single-step trap interrupts after each iteration (the
    /// instruction pointer stays on it until the last one).
    pub repeated: bool,
}

/// Why bytes do not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InsnError {
    /// The bytes end inside the instruction: `needed` bytes would decode it.
    Truncated {
        /// How many bytes were needed at least (more may turn out to be).
        needed: usize,
    },
    /// No valid 64-bit instruction starts with these bytes, or it would be
    /// longer than [`MAX_INSN_LEN`].
    Invalid,
}

/// A cursor over the instruction's bytes that fails, rather than panics,
/// past the end of what the caller gave.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Result<u8, InsnError> {
        match self.bytes.get(self.at) {
            Some(&b) => Ok(b),
            None if self.at >= MAX_INSN_LEN => Err(InsnError::Invalid),
            None => Err(InsnError::Truncated {
                needed: self.at + 1,
            }),
        }
    }

    fn next(&mut self) -> Result<u8, InsnError> {
        let b = self.peek()?;
        self.at += 1;
        Ok(b)
    }

    fn skip(&mut self, n: usize) {
        self.at += n;
    }
}

/// The prefixes in front of the opcode.
#[derive(Clone, Copy, Default)]
struct Prefixes {
    /// 0x66.
    operand_size: bool,
    /// 0x67.
    address_size: bool,
    /// 0xf2 or 0xf3, the last one given.
    rep: Option<u8>,
    /// A REX prefix right before the opcode.
    rex: bool,
    /// Its W bit (64-bit operand size).
    rex_w: bool,
}

/// The opcode map an opcode byte belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Map {
    /// One-byte opcodes.
    One,
    /// 0x0f xx.
    Two,
    /// 0x0f 0x38 xx.
    Three38,
    /// 0x0f 0x3a xx.
    Three3a,
}

/// Decodes the instruction at the start of `bytes`, which sits at address
/// `ip` (for the targets of relative branches). `bytes` may be longer than
/// the instruction; give [`MAX_INSN_LEN`] bytes when you can.
pub fn decode(bytes: &[u8], ip: u64) -> Result<Insn, InsnError> {
    let mut c = Cursor { bytes, at: 0 };
    let mut p = Prefixes::default();

    // Legacy prefixes, then at most one REX right before the opcode (a REX
    // followed by a legacy prefix is ignored, as the CPU ignores it).
    let mut opcode = loop {
        let b = c.next()?;
        match b {
            0x66 => p.operand_size = true,
            0x67 => p.address_size = true,
            0xf2 | 0xf3 => p.rep = Some(b),
            0xf0 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65 => {}
            0x40..=0x4f => {
                let next = c.peek()?;
                if is_legacy_prefix(next) || (0x40..=0x4f).contains(&next) {
                    // Not the last prefix: this REX does nothing.
                    continue;
                }
                p.rex = true;
                p.rex_w = b & 0x08 != 0;
                break c.next()?;
            }
            _ => break b,
        }
    };

    let map = match opcode {
        0x0f => match c.next()? {
            0x38 => {
                opcode = c.next()?;
                Map::Three38
            }
            0x3a => {
                opcode = c.next()?;
                Map::Three3a
            }
            0x0f => {
                // 3DNow!: ModRM, then the opcode as an 8-bit suffix.
                modrm(&mut c)?;
                c.skip(1);
                return finish(&c, Branch::None, false);
            }
            second => {
                opcode = second;
                Map::Two
            }
        },
        // VEX (2 and 3 bytes), EVEX and, on AMD, XOP: always those in 64-bit mode.
        0xc5 => {
            let _rvvvvlpp = c.next()?;
            return vex_like(&mut c, &p, 1);
        }
        0xc4 => {
            let m = c.next()? & 0x1f;
            let _wvvvvlpp = c.next()?;
            return vex_like(&mut c, &p, m);
        }
        0x62 => {
            let m = c.next()? & 0x07;
            let _p1 = c.next()?;
            let _p2 = c.next()?;
            return evex(&mut c, &p, m);
        }
        0x8f if (c.peek()? & 0x1f) >= 8 => {
            let m = c.next()? & 0x1f;
            let _wvvvvlpp = c.next()?;
            return xop(&mut c, &p, m);
        }
        _ => Map::One,
    };

    match map {
        Map::One => one_byte(&mut c, &p, opcode, ip),
        Map::Two => two_byte(&mut c, &p, opcode, ip),
        Map::Three38 => {
            modrm(&mut c)?;
            finish(&c, Branch::None, false)
        }
        Map::Three3a => {
            modrm(&mut c)?;
            c.skip(1);
            finish(&c, Branch::None, false)
        }
    }
}

const fn is_legacy_prefix(b: u8) -> bool {
    matches!(
        b,
        0x66 | 0x67 | 0xf2 | 0xf3 | 0xf0 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65
    )
}

/// The one-byte map.
fn one_byte(c: &mut Cursor<'_>, p: &Prefixes, op: u8, ip: u64) -> Result<Insn, InsnError> {
    if ONE_BYTE_INVALID_64.contains(op) {
        return Err(InsnError::Invalid);
    }
    let mut ext = 0;
    if ONE_BYTE_MODRM.contains(op) {
        ext = modrm(c)?;
    }
    // Iz: 16 bits with 0x66, unless REX.W (which wins) makes it 32.
    let imm_z = if p.operand_size && !p.rex_w { 2 } else { 4 };
    match op {
        // The near branches with rel32 ignore 0x66 in 64-bit mode.
        0xe8 | 0xe9 => c.skip(4),
        0xb8..=0xbf => c.skip(if p.rex_w { 8 } else { imm_z }),
        // MOV AL/rAX <-> moffs: an address-sized offset.
        0xa0..=0xa3 => c.skip(if p.address_size { 4 } else { 8 }),
        0xc2 | 0xca => c.skip(2),
        0xc8 => c.skip(3),
        // TEST r/m, imm (group 3 /0 and /1).
        0xf6 if ext <= 1 => c.skip(1),
        0xf7 if ext <= 1 => c.skip(imm_z),
        _ if ONE_BYTE_IMM8.contains(op) => c.skip(1),
        _ if ONE_BYTE_IMMZ.contains(op) => c.skip(imm_z),
        _ => {}
    }
    // Group 4/5 (0xfe, 0xff): only /0, /1 on 0xfe; /7 on 0xff is reserved.
    if (op == 0xfe && ext > 1) || (op == 0xff && ext == 7) {
        return Err(InsnError::Invalid);
    }
    let branch = match op {
        0x70..=0x7f | 0xe0..=0xe3 => Branch::Conditional {
            target: rel_target(c, ip, 1),
        },
        0xeb => Branch::Jump {
            target: rel_target(c, ip, 1),
        },
        0xe9 => Branch::Jump {
            target: rel_target(c, ip, 4),
        },
        0xe8 => Branch::Call {
            target: rel_target(c, ip, 4),
        },
        0xc2 | 0xc3 => Branch::Return,
        0xca | 0xcb | 0xcf => Branch::Far,
        0xcc | 0xcd | 0xf1 => Branch::SystemCall,
        0xff => match ext {
            2 => Branch::IndirectCall,
            4 => Branch::IndirectJump,
            3 | 5 => Branch::Far,
            _ => Branch::None,
        },
        _ => Branch::None,
    };
    // MOVS, CMPS, STOS, LODS, SCAS, INS, OUTS.
    let string = matches!(op, 0x6c..=0x6f | 0xa4..=0xa7 | 0xaa..=0xaf);
    finish(c, branch, string && p.rep.is_some())
}

/// The two-byte map (0x0f xx).
fn two_byte(c: &mut Cursor<'_>, p: &Prefixes, op: u8, ip: u64) -> Result<Insn, InsnError> {
    if TWO_BYTE_INVALID.contains(op) {
        return Err(InsnError::Invalid);
    }
    if !TWO_BYTE_NO_MODRM.contains(op) {
        match op {
            // MOV to/from CRn/DRn: the mod field is ignored, the operand is
            // always a register (no SIB, no displacement).
            0x20..=0x23 => c.skip(1),
            _ => {
                let ext = modrm(c)?;
                // EXTRQ/INSERTQ (AMD SSE4a): two 8-bit immediates.
                if op == 0x78 && ((p.operand_size && ext == 0) || p.rep == Some(0xf2)) {
                    c.skip(2);
                }
            }
        }
    }
    if TWO_BYTE_IMM8.contains(op) {
        c.skip(1);
    }
    if (0x80..=0x8f).contains(&op) {
        // Jcc rel32 (0x66 ignored in 64-bit mode).
        c.skip(4);
    }
    let branch = match op {
        0x80..=0x8f => Branch::Conditional {
            target: rel_target(c, ip, 4),
        },
        0x05 | 0x34 => Branch::SystemCall,
        0x07 | 0x35 => Branch::SystemReturn,
        _ => Branch::None,
    };
    finish(c, branch, false)
}

/// The rest of a VEX-encoded instruction after its prefix, in opcode map
/// `m` (1: 0x0f, 2: 0x0f38, 3: 0x0f3a).
fn vex_like(c: &mut Cursor<'_>, p: &Prefixes, m: u8) -> Result<Insn, InsnError> {
    vex_prefix_allowed(p)?;
    let op = c.next()?;
    match m {
        // VZEROUPPER/VZEROALL: no ModRM.
        1 if op == 0x77 => {}
        1 => {
            modrm(c)?;
            if VEX_MAP1_IMM8.contains(op) {
                c.skip(1);
            }
        }
        2 => {
            modrm(c)?;
        }
        3 => {
            modrm(c)?;
            c.skip(1);
        }
        _ => return Err(InsnError::Invalid),
    }
    finish(c, Branch::None, false)
}

/// The rest of an EVEX-encoded instruction in opcode map `m`.
fn evex(c: &mut Cursor<'_>, p: &Prefixes, m: u8) -> Result<Insn, InsnError> {
    vex_prefix_allowed(p)?;
    let op = c.next()?;
    modrm(c)?;
    match m {
        1 if VEX_MAP1_IMM8.contains(op) => c.skip(1),
        1 | 2 | 5 | 6 => {}
        3 => c.skip(1),
        _ => return Err(InsnError::Invalid),
    }
    finish(c, Branch::None, false)
}

/// The rest of an XOP-encoded instruction (AMD) in opcode map `m` (8, 9
/// or 10).
fn xop(c: &mut Cursor<'_>, p: &Prefixes, m: u8) -> Result<Insn, InsnError> {
    vex_prefix_allowed(p)?;
    let _op = c.next()?;
    modrm(c)?;
    match m {
        8 => c.skip(1),
        9 => {}
        10 => c.skip(4),
        _ => return Err(InsnError::Invalid),
    }
    finish(c, Branch::None, false)
}

/// VEX, EVEX and XOP are #UD after a 0x66, 0xf2, 0xf3 or REX prefix.
fn vex_prefix_allowed(p: &Prefixes) -> Result<(), InsnError> {
    if p.operand_size || p.rep.is_some() || p.rex {
        return Err(InsnError::Invalid);
    }
    Ok(())
}

/// Reads a ModRM byte and skips the SIB and displacement it implies;
/// returns its `reg` field (the opcode extension of group opcodes).
fn modrm(c: &mut Cursor<'_>) -> Result<u8, InsnError> {
    let m = c.next()?;
    let (md, reg, rm) = (m >> 6, (m >> 3) & 7, m & 7);
    if md == 3 {
        return Ok(reg);
    }
    // 64- and 32-bit addressing (0x67 picks 32-bit; 16-bit addressing does
    // not exist in 64-bit mode): the same ModRM/SIB rules.
    let mut disp = match md {
        1 => 1,
        2 => 4,
        _ if rm == 5 => 4, // RIP-relative
        _ => 0,
    };
    if rm == 4 {
        let sib = c.next()?;
        if md == 0 && sib & 7 == 5 {
            disp = 4;
        }
    }
    c.skip(disp);
    Ok(reg)
}

/// The target of a relative branch at `ip` whose `n`-byte displacement
/// (1 or 4) ends the instruction read so far: the next instruction's
/// address plus the sign-extended displacement. Bytes past the input read
/// as 0; `finish` refuses such an instruction anyway.
fn rel_target(c: &Cursor<'_>, ip: u64, n: usize) -> u64 {
    let end = c.at;
    let mut v: i64 = 0;
    for i in (0..n).rev() {
        let byte = end.checked_sub(n - i).and_then(|at| c.bytes.get(at));
        v = (v << 8) | i64::from(*byte.unwrap_or(&0));
    }
    let shift = 64 - 8 * n as u32;
    ip.wrapping_add(end as u64)
        .wrapping_add(((v << shift) >> shift) as u64)
}

/// The decoded instruction, if all its bytes are there and it is not too long.
fn finish(c: &Cursor<'_>, branch: Branch, repeated: bool) -> Result<Insn, InsnError> {
    if c.at > MAX_INSN_LEN {
        return Err(InsnError::Invalid);
    }
    if c.at > c.bytes.len() {
        return Err(InsnError::Truncated { needed: c.at });
    }
    Ok(Insn {
        len: c.at as u8,
        branch,
        repeated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn len(bytes: &[u8]) -> u8 {
        decode(bytes, 0).unwrap().len
    }

    #[test]
    fn the_branches_of_perf_s_classifier() {
        let ip = 0x40_1000;
        let cases: &[(&[u8], Branch)] = &[
            (&[0x74, 0xfe], Branch::Conditional { target: ip }),
            (
                &[0x0f, 0x85, 0x00, 0x01, 0x00, 0x00],
                Branch::Conditional { target: ip + 0x106 },
            ),
            (&[0xe2, 0x00], Branch::Conditional { target: ip + 2 }),
            (&[0xe3, 0x10], Branch::Conditional { target: ip + 0x12 }),
            (
                &[0xeb, 0x80],
                Branch::Jump {
                    target: ip + 2 - 0x80,
                },
            ),
            (&[0xe9, 0xfb, 0xff, 0xff, 0xff], Branch::Jump { target: ip }),
            (
                &[0xe8, 0x00, 0x00, 0x00, 0x00],
                Branch::Call { target: ip + 5 },
            ),
            (&[0xff, 0xd0], Branch::IndirectCall),
            (&[0xff, 0x15, 0, 0, 0, 0], Branch::IndirectCall),
            (&[0x3e, 0xff, 0xe0], Branch::IndirectJump), // notrack jmp *%rax
            (&[0x41, 0xff, 0x24, 0x24], Branch::IndirectJump),
            (&[0xff, 0x1c, 0x24], Branch::Far),
            (&[0xc3], Branch::Return),
            (&[0xf3, 0xc3], Branch::Return), // rep ret
            (&[0xf2, 0xc3], Branch::Return), // bnd ret
            (&[0xc2, 0x08, 0x00], Branch::Return),
            (&[0x48, 0xcf], Branch::Far), // iretq
            (&[0x48, 0xcb], Branch::Far),
            (&[0x0f, 0x05], Branch::SystemCall),
            (&[0xcd, 0x80], Branch::SystemCall),
            (&[0xcc], Branch::SystemCall),
            (&[0x48, 0x0f, 0x07], Branch::SystemReturn),
            (&[0xff, 0xc0], Branch::None),             // inc %eax
            (&[0xf3, 0x0f, 0x1e, 0xfa], Branch::None), // endbr64
            (&[0x0f, 0x1f, 0x44, 0x00, 0x00], Branch::None),
        ];
        for (bytes, branch) in cases {
            let insn = decode(bytes, ip).unwrap();
            assert_eq!(insn.branch, *branch, "{bytes:x?}");
            assert_eq!(usize::from(insn.len), bytes.len(), "{bytes:x?}");
        }
    }

    #[test]
    fn lengths_of_awkward_encodings() {
        assert_eq!(len(&[0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8]), 10); // movabs $imm64
        assert_eq!(len(&[0x66, 0xb8, 1, 2]), 4);
        assert_eq!(len(&[0xa1, 1, 2, 3, 4, 5, 6, 7, 8]), 9); // mov moffs64
        assert_eq!(len(&[0x67, 0xa1, 1, 2, 3, 4]), 6);
        assert_eq!(len(&[0xf7, 0x05, 0, 0, 0, 0, 1, 0, 0, 0]), 10); // test $imm32, rip-rel
        assert_eq!(len(&[0xf7, 0x15, 0, 0, 0, 0]), 6); // not rip-rel
        assert_eq!(len(&[0xc8, 0x10, 0x00, 0x01]), 4); // enter
        assert_eq!(len(&[0x0f, 0x20, 0xc0]), 3); // mov %cr0, %rax
        assert_eq!(len(&[0x0f, 0x20, 0x04]), 3); // mod ignored: no SIB
        assert_eq!(len(&[0xc5, 0xf8, 0x77]), 3); // vzeroupper
        assert_eq!(len(&[0xc4, 0xe3, 0x79, 0x0f, 0xc1, 0x08]), 6); // vpalignr
        assert_eq!(len(&[0x62, 0xf1, 0x7c, 0x48, 0x10, 0x44, 0x24, 0x01]), 8); // vmovups
        assert_eq!(len(&[0x66, 0x0f, 0x3a, 0x0f, 0xc1, 0x08]), 6); // palignr
        assert_eq!(len(&[0x0f, 0x0f, 0xc1, 0x9e]), 4); // pfadd (3DNow!)
        assert_eq!(len(&[0x8f, 0xc0]), 2); // pop %rax (8f /0)
        assert_eq!(len(&[0x44, 0x8b, 0x44, 0x8d, 0x80]), 5);
    }

    #[test]
    fn a_rex_before_a_legacy_prefix_is_dropped() {
        // 0x48 0x66 0xb8 iw: the REX.W does not reach the MOV.
        assert_eq!(len(&[0x48, 0x66, 0xb8, 1, 2]), 5);
    }

    #[test]
    fn rep_string_instructions_are_marked() {
        assert!(decode(&[0xf3, 0xa4], 0).unwrap().repeated); // rep movsb
        assert!(decode(&[0xf3, 0x48, 0xab], 0).unwrap().repeated); // rep stosq
        assert!(!decode(&[0xa4], 0).unwrap().repeated);
        assert!(!decode(&[0xf3, 0x90], 0).unwrap().repeated); // pause
    }

    #[test]
    fn short_and_invalid_input_is_an_error_not_a_panic() {
        assert_eq!(decode(&[], 0), Err(InsnError::Truncated { needed: 1 }));
        assert_eq!(decode(&[0x0f], 0), Err(InsnError::Truncated { needed: 2 }));
        assert_eq!(
            decode(&[0xe8, 0, 0], 0),
            Err(InsnError::Truncated { needed: 5 })
        );
        assert_eq!(decode(&[0x06], 0), Err(InsnError::Invalid)); // push %es
        assert_eq!(decode(&[0x66; 16], 0), Err(InsnError::Invalid)); // > 15 bytes
        let mut long = [0x66u8; 15];
        long[14] = 0x90;
        assert_eq!(len(&long), 15);
        long[14] = 0x05; // add $imm16, %ax: 17 bytes
        assert_eq!(decode(&long, 0), Err(InsnError::Invalid));
    }
}
