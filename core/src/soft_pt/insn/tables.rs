// SPDX-License-Identifier: MIT OR Apache-2.0
//! Per-opcode properties of the x86-64 opcode maps that decide an
//! instruction's length: whether a ModRM byte follows the opcode, and the
//! size of the immediate. Each table is a 256-bit set, one bit per opcode
//! byte, written as four `u64` words (opcodes 0x00-0x3f, 0x40-0x7f,
//! 0x80-0xbf, 0xc0-0xff). The encodings are the Intel SDM's opcode maps
//! (vol. 2, appendix A), the same ones `arch/x86/lib/x86-opcode-map.txt`
//! lists for the kernel's decoder.

/// A 256-bit opcode set.
#[derive(Clone, Copy)]
pub(super) struct OpcodeSet([u64; 4]);

impl OpcodeSet {
    /// Whether `opcode` is in the set.
    #[inline]
    pub(super) const fn contains(&self, opcode: u8) -> bool {
        (self.0[(opcode >> 6) as usize] >> (opcode & 63)) & 1 != 0
    }

    /// The set of the opcodes listed (a `const` builder for the tables).
    const fn of(list: &[u8]) -> OpcodeSet {
        let mut words = [0u64; 4];
        let mut i = 0;
        while i < list.len() {
            let op = list[i];
            words[(op >> 6) as usize] |= 1 << (op & 63);
            i += 1;
        }
        OpcodeSet(words)
    }

    /// The set of the opcodes in `first..=last`, added to `self`.
    const fn with_range(self, first: u8, last: u8) -> OpcodeSet {
        let mut words = self.0;
        let mut op = first as usize;
        while op <= last as usize {
            words[op >> 6] |= 1 << (op & 63);
            op += 1;
        }
        OpcodeSet(words)
    }
}

/// One-byte map: opcodes followed by a ModRM byte.
pub(super) const ONE_BYTE_MODRM: OpcodeSet = OpcodeSet::of(&[
    0x62, 0x63, 0x69, 0x6b, 0xc0, 0xc1, 0xc4, 0xc5, 0xc6, 0xc7, 0xd0, 0xd1, 0xd2, 0xd3, 0xf6, 0xf7,
    0xfe, 0xff,
])
// ALU r/m forms: 00-03, 08-0b, ... 38-3b.
.with_range(0x00, 0x03)
.with_range(0x08, 0x0b)
.with_range(0x10, 0x13)
.with_range(0x18, 0x1b)
.with_range(0x20, 0x23)
.with_range(0x28, 0x2b)
.with_range(0x30, 0x33)
.with_range(0x38, 0x3b)
.with_range(0x80, 0x8f)
.with_range(0xd8, 0xdf);

/// One-byte map: opcodes with an 8-bit immediate (or rel8).
pub(super) const ONE_BYTE_IMM8: OpcodeSet = OpcodeSet::of(&[
    0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3c, 0x6a, 0x6b, 0x80, 0x82, 0x83, 0xa8, 0xc0, 0xc1,
    0xc6, 0xcd, 0xd4, 0xd5, 0xeb,
])
.with_range(0x70, 0x7f)
.with_range(0xb0, 0xb7)
.with_range(0xe0, 0xe7);

/// One-byte map: opcodes with an immediate of the operand size, 16 or 32
/// bits (`Iz`: 2 bytes with a 0x66 prefix, else 4), or rel32 for the near
/// branches (which ignore 0x66 in 64-bit mode, as Intel CPUs do).
pub(super) const ONE_BYTE_IMMZ: OpcodeSet = OpcodeSet::of(&[
    0x05, 0x0d, 0x15, 0x1d, 0x25, 0x2d, 0x35, 0x3d, 0x68, 0x69, 0x81, 0xa9, 0xc7,
]);

/// One-byte map: opcodes invalid in 64-bit mode (`i64` in the opcode map).
/// 0x62, 0xc4 and 0xc5 are EVEX and VEX there and are handled first.
pub(super) const ONE_BYTE_INVALID_64: OpcodeSet = OpcodeSet::of(&[
    0x06, 0x07, 0x0e, 0x16, 0x17, 0x1e, 0x1f, 0x27, 0x2f, 0x37, 0x3f, 0x60, 0x61, 0x82, 0x9a, 0xce,
    0xd4, 0xd5, 0xd6, 0xea,
]);

/// Two-byte map (0x0f xx): opcodes with NO ModRM byte (every other
/// opcode of the map has one).
pub(super) const TWO_BYTE_NO_MODRM: OpcodeSet = OpcodeSet::of(&[
    0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0e, 0x77, 0xa0, 0xa1, 0xa2, 0xa8, 0xa9,
    0xaa,
])
.with_range(0x30, 0x3f)
.with_range(0x80, 0x8f)
.with_range(0xc8, 0xcf);

/// Two-byte map: opcodes with an 8-bit immediate.
pub(super) const TWO_BYTE_IMM8: OpcodeSet = OpcodeSet::of(&[
    0x70, 0x71, 0x72, 0x73, 0xa4, 0xac, 0xba, 0xc2, 0xc4, 0xc5, 0xc6,
]);

/// Two-byte map: opcodes that do not exist in 64-bit mode (reserved, or
/// escapes handled before the table: 0x0f 0x38 and 0x0f 0x3a).
pub(super) const TWO_BYTE_INVALID: OpcodeSet = OpcodeSet::of(&[
    0x04, 0x0a, 0x0c, 0x24, 0x25, 0x26, 0x27, 0x36, 0x39, 0x3b, 0x3c, 0x3d, 0x3e, 0x3f, 0x7a, 0x7b,
]);

/// VEX and EVEX map 1 (0x0f): opcodes with an 8-bit immediate.
pub(super) const VEX_MAP1_IMM8: OpcodeSet =
    OpcodeSet::of(&[0x70, 0x71, 0x72, 0x73, 0xc2, 0xc4, 0xc5, 0xc6]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_hold_exactly_what_they_list() {
        let set = OpcodeSet::of(&[0x00, 0x3f, 0x40, 0xff]).with_range(0x80, 0x82);
        let members: [u8; 7] = [0x00, 0x3f, 0x40, 0x80, 0x81, 0x82, 0xff];
        for op in 0..=255u8 {
            assert_eq!(set.contains(op), members.contains(&op), "opcode {op:#x}");
        }
    }

    #[test]
    fn the_branch_opcodes_have_the_encodings_the_sdm_gives() {
        // Jcc rel8, JMP rel8, LOOP/JRCXZ rel8: an 8-bit immediate, no ModRM.
        for op in (0x70..=0x7f).chain([0xeb, 0xe0, 0xe1, 0xe2, 0xe3]) {
            assert!(ONE_BYTE_IMM8.contains(op) && !ONE_BYTE_MODRM.contains(op));
        }
        // Jcc rel32 (0x0f 0x80-0x8f): no ModRM, no table immediate (rel32
        // is handled with the near branches).
        for op in 0x80..=0x8f {
            assert!(TWO_BYTE_NO_MODRM.contains(op) && !TWO_BYTE_IMM8.contains(op));
        }
        // Group 5 (0xff: indirect CALL and JMP) has a ModRM and no immediate.
        assert!(ONE_BYTE_MODRM.contains(0xff) && !ONE_BYTE_IMM8.contains(0xff));
    }
}
