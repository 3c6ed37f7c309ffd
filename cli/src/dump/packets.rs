// SPDX-License-Identifier: MIT OR Apache-2.0
//! The Intel PT packets of an AUX payload, counted by an independent
//! decoder (`iptr-decoder`), not perfaux's own.

use std::collections::BTreeMap;

/// The 16 bytes of a PSB packet.
pub const PSB: [u8; 16] = [
    0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
];

/// The packets of one AUX payload, as `iptr-decoder` reads them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PacketSummary {
    /// Offset of the first PSB (where decoding starts), if any.
    pub psb_at: Option<usize>,
    /// Packets decoded, by kind.
    pub counts: BTreeMap<&'static str, u64>,
    /// TSC values in stream order.
    pub tscs: Vec<u64>,
    /// Why decoding stopped early, if it did.
    pub error: Option<String>,
}

impl PacketSummary {
    /// Packets decoded in all.
    pub fn packets(&self) -> u64 {
        self.counts.values().sum()
    }
}

struct Counter<'s>(&'s mut PacketSummary);

impl Counter<'_> {
    fn add(&mut self, kind: &'static str) -> Result<(), std::convert::Infallible> {
        *self.0.counts.entry(kind).or_default() += 1;
        Ok(())
    }
}

type Ctx = iptr_decoder::DecoderContext;
type Res = Result<(), std::convert::Infallible>;

impl iptr_decoder::HandlePacket for Counter<'_> {
    type Error = std::convert::Infallible;
    fn at_decode_begin(&mut self) -> Res {
        Ok(())
    }
    fn on_short_tnt_packet(&mut self, _: &Ctx, _: std::num::NonZero<u8>, _: u32) -> Res {
        self.add("TNT")
    }
    fn on_long_tnt_packet(&mut self, _: &Ctx, _: std::num::NonZero<u64>, _: u32) -> Res {
        self.add("TNT")
    }
    fn on_tip_packet(&mut self, _: &Ctx, _: iptr_decoder::IpReconstructionPattern) -> Res {
        self.add("TIP")
    }
    fn on_tip_pgd_packet(&mut self, _: &Ctx, _: iptr_decoder::IpReconstructionPattern) -> Res {
        self.add("TIP.PGD")
    }
    fn on_tip_pge_packet(&mut self, _: &Ctx, _: iptr_decoder::IpReconstructionPattern) -> Res {
        self.add("TIP.PGE")
    }
    fn on_fup_packet(&mut self, _: &Ctx, _: iptr_decoder::IpReconstructionPattern) -> Res {
        self.add("FUP")
    }
    fn on_pad_packet(&mut self, _: &Ctx) -> Res {
        self.add("PAD")
    }
    fn on_mode_packet(&mut self, _: &Ctx, _: u8, _: u8) -> Res {
        self.add("MODE")
    }
    fn on_mtc_packet(&mut self, _: &Ctx, _: u8) -> Res {
        self.add("MTC")
    }
    fn on_tsc_packet(&mut self, _: &Ctx, tsc: u64) -> Res {
        self.0.tscs.push(tsc);
        self.add("TSC")
    }
    fn on_cbr_packet(&mut self, _: &Ctx, _: u8) -> Res {
        self.add("CBR")
    }
    fn on_cyc_packet(&mut self, _: &Ctx, _: &[u8]) -> Res {
        self.add("CYC")
    }
    fn on_ovf_packet(&mut self, _: &Ctx) -> Res {
        self.add("OVF")
    }
    fn on_psb_packet(&mut self, _: &Ctx) -> Res {
        self.add("PSB")
    }
    fn on_psbend_packet(&mut self, _: &Ctx) -> Res {
        self.add("PSBEND")
    }
}

/// Decodes `bytes` from their first PSB on and counts the packets.
pub fn summarize(bytes: &[u8]) -> PacketSummary {
    let mut s = PacketSummary {
        psb_at: bytes.windows(PSB.len()).position(|w| w == PSB),
        ..PacketSummary::default()
    };
    if s.psb_at.is_none() {
        return s;
    }
    let result = iptr_decoder::decode(
        bytes,
        iptr_decoder::DecodeOptions::default(),
        &mut Counter(&mut s),
    );
    if let Err(e) = result {
        s.error = Some(e.to_string());
    }
    s
}

impl std::fmt::Display for PacketSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.psb_at {
            None => write!(f, "no PSB"),
            Some(at) => {
                write!(f, "PSB at +{at}, {} packets (", self.packets())?;
                let mut first = true;
                for (kind, n) in &self.counts {
                    if !first {
                        write!(f, ", ")?;
                    }
                    first = false;
                    write!(f, "{kind} {n}")?;
                }
                write!(f, ")")?;
                if let Some(e) = &self.error {
                    write!(f, "; decoding stopped: {e}")?;
                }
                Ok(())
            }
        }
    }
}
