//! The PT-style PMU (spec §F), in progress: [`packet`], the Intel PT packet
//! encodings a software tracer writes, with the hardware's IP compression;
//! [`topa`], the output tables over the AUX pages and the output position.

pub mod packet;
pub mod topa;
