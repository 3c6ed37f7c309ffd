//! The PT-style PMU (spec §F), in progress: [`packet`], the Intel PT packet
//! encodings, with the hardware's IP compression; [`stream`], the packets a
//! tracer emits for trace events, PSB+ blocks included; [`topa`], the
//! output tables over the AUX pages and the output position.

pub mod packet;
pub mod stream;
pub mod topa;
