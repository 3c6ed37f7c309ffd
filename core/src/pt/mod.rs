//! The PT-style PMU (spec §F). So far: [`packet`], the Intel PT packet
//! encodings a software tracer writes, with the hardware's IP compression.

pub mod packet;
