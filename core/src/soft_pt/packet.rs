// SPDX-License-Identifier: MIT OR Apache-2.0
//! Intel PT packet encodings (Intel SDM vol. 3C, chapter "Intel Processor
//! Trace", packet definitions), as the hardware writes them: the byte
//! layouts, and the last-IP compression of TIP/TIP.PGE/TIP.PGD/FUP.
//!
//! Every function writes into a caller buffer and returns the bytes
//! written; nothing allocates.
//!
//! ```
//! use perfaux::soft_pt::packet::{IpCompressor, IpPacket, PSB, short_tnt};
//! let mut ip = IpCompressor::default();
//! let mut out = [0u8; 9];
//! let n = ip.encode(IpPacket::TipPge, Some(0x0040_1000), &mut out);
//! assert_eq!(&out[..n], &[0x51, 0x00, 0x10, 0x40, 0x00]); // bits 63:32 as the last IP (0)
//! let n = ip.encode(IpPacket::Tip, Some(0x0040_1234), &mut out);
//! assert_eq!(&out[..n], &[0x2d, 0x34, 0x12]); // only the low 16 bits changed
//! assert_eq!(short_tnt(0b101, 3), 0b1_101_0); // stop bit, T N T, header bit 0
//! assert_eq!(PSB.len(), 16);
//! ```

/// PSB: 16 bytes, `02 82` eight times; the decoder's sync point.
pub const PSB: [u8; 16] = [
    0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
];
/// PSBEND: ends the PSB+ block of status packets.
pub const PSBEND: [u8; 2] = [0x02, 0x23];
/// OVF: internal buffer overflow, packets were lost.
pub const OVF: [u8; 2] = [0x02, 0xf3];
/// PAD: one byte of nothing.
pub const PAD: u8 = 0x00;

/// The most TNT bits a short TNT packet carries.
pub const SHORT_TNT_MAX: u8 = 6;
/// The most TNT bits a long TNT packet carries.
pub const LONG_TNT_MAX: u8 = 47;

/// A long TNT's first two bytes (`02 A3`), as the low bytes of its packet.
pub(crate) const LONG_TNT_HEADER: u64 = 0xa302;

/// The packets that carry an IP, with last-IP compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpPacket {
    /// TIP: target of an indirect branch, return or far transfer.
    Tip,
    /// TIP.PGE: tracing (packet generation) enabled at this IP.
    TipPge,
    /// TIP.PGD: tracing disabled; the IP is where it would have gone.
    TipPgd,
    /// FUP: the source IP of an asynchronous event (or of a PSB+ block).
    Fup,
}

impl IpPacket {
    /// The low five bits of the header byte.
    pub const fn opcode(self) -> u8 {
        match self {
            IpPacket::Tip => 0x0d,
            IpPacket::TipPge => 0x11,
            IpPacket::TipPgd => 0x01,
            IpPacket::Fup => 0x1d,
        }
    }
}

/// How many bytes of the IP a compressed IP packet carries
/// (`IPBytes`, the header's bits 7:5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum IpBytes {
    /// 000: IP suppressed (out of context).
    Suppressed = 0,
    /// 001: bits 15:0; the rest from the last IP.
    Update16 = 1,
    /// 010: bits 31:0; the rest from the last IP.
    Update32 = 2,
    /// 011: bits 47:0, sign-extended.
    SignExtended48 = 3,
    /// 100: bits 47:0; bits 63:48 from the last IP.
    Update48 = 4,
    /// 110: the full 64-bit IP.
    Full = 6,
}

impl IpBytes {
    /// Payload bytes after the header.
    pub const fn payload_len(self) -> usize {
        match self {
            IpBytes::Suppressed => 0,
            IpBytes::Update16 => 2,
            IpBytes::Update32 => 4,
            IpBytes::SignExtended48 | IpBytes::Update48 => 6,
            IpBytes::Full => 8,
        }
    }
}

/// The last-IP state of a trace: the hardware compresses each IP against
/// the previous one it emitted, and a decoder does the reverse. A PSB resets
/// it, so that decoding can start at any PSB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IpCompressor {
    last_ip: u64,
}

impl IpCompressor {
    /// The last IP emitted.
    pub const fn last_ip(&self) -> u64 {
        self.last_ip
    }

    /// Forgets the last IP (after a PSB, the decoder's last IP is 0).
    pub fn reset(&mut self) {
        self.last_ip = 0;
    }

    /// The shortest encoding of `ip` given the last IP, as the hardware
    /// picks it.
    pub const fn choose(&self, ip: u64) -> IpBytes {
        let diff = ip ^ self.last_ip;
        if diff >> 16 == 0 {
            IpBytes::Update16
        } else if diff >> 32 == 0 {
            IpBytes::Update32
        } else if sign_extend_48(ip) == ip {
            IpBytes::SignExtended48
        } else if diff >> 48 == 0 {
            IpBytes::Update48
        } else {
            IpBytes::Full
        }
    }

    /// The shortest encoding of `ip` ([`choose`](Self::choose)), which
    /// becomes the last IP: for a packet about to be written.
    #[inline(always)]
    pub(crate) fn compress(&mut self, ip: u64) -> IpBytes {
        let bytes = self.choose(ip);
        self.last_ip = ip;
        bytes
    }

    /// Writes `kind` with `ip` (`None`: suppressed) into `out` and returns
    /// its length (1 to 9 bytes).
    pub fn encode(&mut self, kind: IpPacket, ip: Option<u64>, out: &mut [u8; 9]) -> usize {
        let (packet, n) = self.encode_packed(kind, ip);
        out.copy_from_slice(&packet[..9]);
        n
    }

    /// [`encode`](Self::encode) into the first bytes of a 16-byte array
    /// (the rest zero), returned with the packet's length. The packet is
    /// built in a register and stored once, so a copy of its bytes reads
    /// back one store (several byte stores read back as one word would
    /// stall the CPU's store forwarding).
    #[inline]
    pub fn encode_packed(&mut self, kind: IpPacket, ip: Option<u64>) -> ([u8; 16], usize) {
        let Some(ip) = ip else {
            return (u128::from(kind.opcode()).to_le_bytes(), 1);
        };
        let bytes = self.compress(ip);
        Self::packed(kind, ip, bytes)
    }

    /// [`encode_packed`](Self::encode_packed) with the whole IP, whatever
    /// the last IP: 48 bits sign-extended (all 64 where the IP is not
    /// canonical). For the FUP of a PSB+: a decoder that looks ahead into
    /// a PSB+ for its FUP before it takes the PSB (Linux perf's
    /// `intel_pt_fup_in_psb`, to walk to the FUP first) reads it against
    /// the last IP before the PSB, not the reset one, and only a whole IP
    /// means the same to both.
    pub fn encode_whole(&mut self, kind: IpPacket, ip: u64) -> ([u8; 16], usize) {
        let bytes = if sign_extend_48(ip) == ip {
            IpBytes::SignExtended48
        } else {
            IpBytes::Full
        };
        self.last_ip = ip;
        Self::packed(kind, ip, bytes)
    }

    /// `kind` with `ip` in `bytes`' encoding, packed.
    #[inline(always)]
    fn packed(kind: IpPacket, ip: u64, bytes: IpBytes) -> ([u8; 16], usize) {
        let n = bytes.payload_len();
        let header = ((bytes as u8) << 5) | kind.opcode();
        // The payload: the low `n` bytes of the IP (n is 0, 2, 4, 6 or 8).
        let payload = if n >= 8 {
            ip
        } else {
            ip & ((1u64 << (8 * n)) - 1)
        };
        (
            (u128::from(header) | (u128::from(payload) << 8)).to_le_bytes(),
            1 + n,
        )
    }
}

/// Bits 47:0 of `ip`, sign-extended from bit 47.
pub const fn sign_extend_48(ip: u64) -> u64 {
    (((ip << 16) as i64) >> 16) as u64
}

/// A short TNT packet with `count` (1..=6) branch outcomes; `bits` holds
/// them with the oldest in the most significant of the `count` low bits
/// (1: taken). Layout: the stop bit above the outcomes, header bit 0 clear.
/// `count` outside 1..=6 is clamped.
pub const fn short_tnt(bits: u8, count: u8) -> u8 {
    let n = if count == 0 {
        1
    } else if count > SHORT_TNT_MAX {
        SHORT_TNT_MAX
    } else {
        count
    };
    let mask = (1u8 << n) - 1;
    (1 << (n + 1)) | ((bits & mask) << 1)
}

/// A long TNT packet (`02 A3` + 6 payload bytes) with `count` (1..=47)
/// outcomes, oldest most significant, the stop bit above them.
/// `count` outside 1..=47 is clamped.
pub const fn long_tnt(bits: u64, count: u8) -> [u8; 8] {
    let n = if count == 0 {
        1
    } else if count > LONG_TNT_MAX {
        LONG_TNT_MAX
    } else {
        count
    };
    let payload = (1u64 << n) | (bits & ((1u64 << n) - 1));
    // One word (no byte-wise assembly: see `IpCompressor::encode_packed`).
    (LONG_TNT_HEADER | (payload << 16)).to_le_bytes()
}

/// TSC: `19` + the low 56 bits of the timestamp counter.
pub const fn tsc(value: u64) -> [u8; 8] {
    (0x19 | (value << 8)).to_le_bytes()
}

/// MTC: `59` + 8 bits of the crystal clock counter.
pub const fn mtc(ctc: u8) -> [u8; 2] {
    [0x59, ctc]
}

/// CBR: `02 03` + the core:bus ratio + a reserved zero byte.
pub const fn cbr(ratio: u8) -> [u8; 4] {
    [0x02, 0x03, ratio, 0]
}

/// CYC: the cycles since the last CYC, 5 bits in the header byte (`xxxxxE11`)
/// and 7 in each byte after it (`xxxxxxxE`), each `E` saying another byte
/// follows: returns the bytes and how many of them are the packet (1 to 10).
pub const fn cyc(cycles: u64) -> ([u8; 10], usize) {
    let mut out = [0u8; 10];
    let mut rest = cycles >> 5;
    out[0] = ((cycles as u8 & 0x1f) << 3) | 0b11 | if rest != 0 { 0b100 } else { 0 };
    let mut n = 1;
    while rest != 0 && n < out.len() {
        let more = rest >> 7 != 0;
        out[n] = ((rest as u8 & 0x7f) << 1) | more as u8;
        rest >>= 7;
        n += 1;
    }
    (out, n)
}

/// The execution mode a MODE.Exec packet reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExecMode {
    /// 16-bit code (CS.L = 0, CS.D = 0).
    Bits16,
    /// 32-bit code (CS.D = 1).
    Bits32,
    /// 64-bit code (CS.L = 1).
    Bits64,
}

/// MODE.Exec: `99` + the leaf (bits 7:5 = 000) with CS.D in bit 1 and CS.L
/// in bit 0.
pub const fn mode_exec(mode: ExecMode) -> [u8; 2] {
    let payload = match mode {
        ExecMode::Bits16 => 0b00,
        ExecMode::Bits32 => 0b10,
        ExecMode::Bits64 => 0b01,
    };
    [0x99, payload]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_compression_picks_the_shortest_form() {
        let mut c = IpCompressor::default();
        let mut out = [0u8; 9];
        assert_eq!(c.choose(0xffff_8000_0000_1000), IpBytes::SignExtended48);
        assert_eq!(
            c.encode(IpPacket::Fup, Some(0xffff_8000_0000_1000), &mut out),
            7
        );
        assert_eq!(c.choose(0xffff_8000_0000_2000), IpBytes::Update16);
        assert_eq!(c.choose(0xffff_8000_1000_2000), IpBytes::Update32);
        assert_eq!(c.choose(0x0000_7fff_0000_0000), IpBytes::SignExtended48);
        assert_eq!(c.choose(0x1234_8000_0000_0000), IpBytes::Full);
        assert_eq!(c.encode(IpPacket::TipPgd, None, &mut out), 1);
        assert_eq!(out[0], 0x01);
        c.reset();
        assert_eq!(c.last_ip(), 0);
    }

    #[test]
    fn fixed_packets() {
        assert_eq!(long_tnt(0b1, 1), [0x02, 0xa3, 0b11, 0, 0, 0, 0, 0]);
        assert_eq!(short_tnt(0, 6), 0x80);
        assert_eq!(
            tsc(0x0011_2233_4455_6677),
            [0x19, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]
        );
        assert_eq!(mode_exec(ExecMode::Bits64), [0x99, 0x01]);
        assert_eq!(cbr(42), [0x02, 0x03, 42, 0]);
    }

    #[test]
    fn cyc_takes_as_many_bytes_as_its_count_needs() {
        let bytes = |c| {
            let (p, n) = cyc(c);
            p[..n].to_vec()
        };
        assert_eq!(bytes(0), [0x03]);
        assert_eq!(bytes(31), [0xfb]);
        // 32: 5 low bits 0, then 1 in the next 7 (the SDM's 2-byte form).
        assert_eq!(bytes(32), [0x07, 0x02]);
        assert_eq!(bytes(4095), [0xff, 0xfe]);
        assert_eq!(bytes(4096), [0x07, 0x01, 0x02]);
        // The widest: 64 bits need 5 + 7 * 9 bits, ten bytes.
        assert_eq!(bytes(u64::MAX).len(), 10);
        // Decoded as perf's intel_pt_get_cyc decodes it.
        for c in [
            0,
            1,
            31,
            32,
            1000,
            4095,
            4096,
            1 << 40,
            (1 << 56) - 1,
            u64::MAX,
        ] {
            let b = bytes(c);
            let mut payload = u64::from(b[0] >> 3);
            let mut shift = 5;
            let mut i = 0;
            let mut more = b[0] & 0b100 != 0;
            while more {
                i += 1;
                payload |= u64::from(b[i] >> 1).checked_shl(shift).unwrap_or(0);
                more = b[i] & 1 != 0;
                shift += 7;
            }
            assert_eq!((payload, i + 1), (c, b.len()), "{c:#x}");
        }
    }
}
