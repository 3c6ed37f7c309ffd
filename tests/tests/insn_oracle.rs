// SPDX-License-Identifier: MIT OR Apache-2.0
//! perfaux's x86-64 length decoder and branch classifier (`perfaux::soft_pt::insn`)
//! against iced-x86, an independent, complete decoder: for every opcode of
//! every map under many prefix, ModRM and SIB combinations, and for random
//! byte strings, every encoding iced decodes must get the same length from
//! perfaux, and the branch class perf's Intel PT decoder gives its
//! mnemonic. The other direction is checked too: what perfaux classifies as
//! a branch, iced decodes as that branch.

use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic};
use perfaux::soft_pt::insn::{Branch, InsnError, MAX_INSN_LEN, decode};

const IP: u64 = 0x7f00_0000_1000;

/// iced's view of the instruction at the start of `bytes`, if valid.
fn iced(bytes: &[u8]) -> Option<Instruction> {
    let mut d = Decoder::with_ip(64, bytes, IP, DecoderOptions::NONE);
    let insn = d.decode();
    (!insn.is_invalid()).then_some(insn)
}

/// The branch class perf's `intel_pt_insn_decoder()` gives iced's instruction.
fn expected_branch(i: &Instruction) -> Branch {
    use Mnemonic::*;
    match i.mnemonic() {
        Jo | Jno | Jb | Jae | Je | Jne | Jbe | Ja | Js | Jns | Jp | Jnp | Jl | Jge | Jle | Jg
        | Loop | Loope | Loopne | Jrcxz | Jecxz => Branch::Conditional {
            target: i.near_branch_target(),
        },
        Jmp => match i.flow_control() {
            FlowControl::UnconditionalBranch => Branch::Jump {
                target: i.near_branch_target(),
            },
            _ if is_far(i) => Branch::Far,
            _ => Branch::IndirectJump,
        },
        Call => match i.flow_control() {
            FlowControl::Call => Branch::Call {
                target: i.near_branch_target(),
            },
            _ if is_far(i) => Branch::Far,
            _ => Branch::IndirectCall,
        },
        Ret => Branch::Return,
        Retf | Iret | Iretd | Iretq => Branch::Far,
        Syscall | Sysenter | Int | Int3 | Int1 | Into => Branch::SystemCall,
        Sysret | Sysretq | Sysexit | Sysexitq => Branch::SystemReturn,
        _ => Branch::None,
    }
}

fn is_far(i: &Instruction) -> bool {
    matches!(
        i.code(),
        Code::Jmp_m1616
            | Code::Jmp_m1632
            | Code::Jmp_m1664
            | Code::Call_m1616
            | Code::Call_m1632
            | Code::Call_m1664
    )
}

/// Compares the two decoders on `bytes`: whether iced decoded it, or how
/// perfaux differs.
fn compare(bytes: &[u8]) -> Result<bool, String> {
    let ours = decode(bytes, IP);
    let Some(theirs) = iced(bytes) else {
        return Ok(false);
    };
    let code = theirs.code();
    let ours = ours.map_err(|e| {
        format!(
            "{bytes:02x?}: iced decodes {code:?} ({} bytes), perfaux: {e:?}",
            theirs.len()
        )
    })?;
    if usize::from(ours.len) != theirs.len() {
        return Err(format!(
            "{bytes:02x?}: {code:?} is {} bytes, perfaux says {}",
            theirs.len(),
            ours.len
        ));
    }
    if ours.branch != expected_branch(&theirs) {
        return Err(format!(
            "{bytes:02x?}: {code:?} is {:?}, perfaux says {:?}",
            expected_branch(&theirs),
            ours.branch
        ));
    }
    if ours.repeated && !(theirs.has_rep_prefix() || theirs.has_repne_prefix()) {
        return Err(format!("{bytes:02x?}: {code:?} marked repeated"));
    }
    Ok(true)
}

/// Runs [`compare`] over many encodings, collecting the differences (one
/// per iced instruction code) so that a failure shows all of them.
#[derive(Default)]
struct Tally {
    decoded: usize,
    differences: std::collections::BTreeMap<String, String>,
}

impl Tally {
    fn check(&mut self, bytes: &[u8]) {
        match compare(bytes) {
            Ok(decoded) => self.decoded += usize::from(decoded),
            Err(e) => {
                let code = iced(bytes)
                    .map(|i| format!("{:?}", i.code()))
                    .unwrap_or_default();
                self.differences.entry(code).or_insert(e);
            }
        }
    }

    /// Fails on any difference, or when fewer than `min` encodings were
    /// valid (a decoder that refused everything would compare nothing).
    fn assert_agrees(&self, min: usize) {
        let list: Vec<&String> = self.differences.values().collect();
        assert!(list.is_empty(), "{} differences:\n{:#?}", list.len(), list);
        assert!(
            self.decoded >= min,
            "only {} encodings decoded",
            self.decoded
        );
    }
}

/// A deterministic xorshift generator: the runs are reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn fill(&mut self, out: &mut [u8]) {
        for b in out {
            *b = self.next() as u8;
        }
    }
}

const PREFIXES: &[&[u8]] = &[
    &[],
    &[0x66],
    &[0x67],
    &[0xf2],
    &[0xf3],
    &[0x48],
    &[0x41],
    &[0x66, 0x48],
    &[0xf3, 0x48],
    &[0x66, 0xf2],
    &[0x2e],
    &[0x64, 0x67, 0x4c],
    &[0x48, 0x66], // a REX that is not last
];

/// ModRM/SIB/displacement shapes: register, [reg], SIB, SIB with no base,
/// RIP-relative, disp8, disp32.
const MODRM_TAILS: &[&[u8]] = &[
    &[0xc1],
    &[0x01],
    &[0x04, 0x24],
    &[0x04, 0x25, 1, 2, 3, 4],
    &[0x05, 1, 2, 3, 4],
    &[0x41, 0x10],
    &[0x84, 0x88, 1, 2, 3, 4],
    &[0x14, 0x85, 1, 2, 3, 4],
];

#[test]
fn every_opcode_of_every_map_under_prefixes_and_addressing_forms() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let escapes: &[&[u8]] = &[&[], &[0x0f], &[0x0f, 0x38], &[0x0f, 0x3a]];
    let mut tally = Tally::default();
    for prefix in PREFIXES {
        for escape in escapes {
            for op in 0..=255u8 {
                for tail in MODRM_TAILS {
                    // All group extensions (ModRM reg 0..7) of each shape.
                    for reg in 0..8u8 {
                        let mut bytes = Vec::with_capacity(32);
                        bytes.extend_from_slice(prefix);
                        bytes.extend_from_slice(escape);
                        bytes.push(op);
                        let start = bytes.len();
                        bytes.extend_from_slice(tail);
                        bytes[start] = (bytes[start] & 0xc7) | (reg << 3);
                        let mut filler = [0u8; 16];
                        rng.fill(&mut filler);
                        bytes.extend_from_slice(&filler);
                        tally.check(&bytes);
                    }
                }
            }
        }
    }
    tally.assert_agrees(100_000);
}

#[test]
fn vex_evex_and_xop_encodings() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut tally = Tally::default();
    for _ in 0..400_000 {
        let mut bytes = [0u8; 24];
        rng.fill(&mut bytes);
        // A VEX2, VEX3, EVEX or XOP lead byte, with the map fields made
        // plausible half the time so that most encodings are valid.
        let lead = [0xc5, 0xc4, 0x62, 0x8f][(rng.next() % 4) as usize];
        bytes[0] = lead;
        if rng.next() % 2 == 0 {
            match lead {
                0xc4 => bytes[1] = (bytes[1] & 0xe0) | (1 + (rng.next() % 3) as u8),
                0x62 => {
                    bytes[1] = (bytes[1] & 0xf0) | [1, 2, 3, 5, 6][(rng.next() % 5) as usize];
                    bytes[2] |= 0x04;
                }
                0x8f => bytes[1] = (bytes[1] & 0xe0) | (8 + (rng.next() % 3) as u8),
                _ => {}
            }
        }
        tally.check(&bytes);
    }
    tally.assert_agrees(20_000);
}

#[test]
fn random_byte_strings() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    let mut tally = Tally::default();
    for _ in 0..2_000_000 {
        let mut bytes = [0u8; 20];
        rng.fill(&mut bytes);
        tally.check(&bytes);
    }
    tally.assert_agrees(500_000);
}

#[test]
fn truncated_input_asks_for_more_and_never_panics() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..200_000 {
        let mut bytes = [0u8; 20];
        rng.fill(&mut bytes);
        let Some(full) = iced(&bytes) else { continue };
        // Every strict prefix of a valid instruction is too short.
        for cut in 0..full.len() {
            match decode(&bytes[..cut], IP) {
                Err(InsnError::Truncated { needed }) => {
                    assert!(
                        needed > cut && needed <= MAX_INSN_LEN,
                        "{bytes:02x?}[..{cut}]"
                    )
                }
                other => panic!("{bytes:02x?}[..{cut}]: {other:?}"),
            }
        }
    }
}
