// SPDX-License-Identifier: MIT OR Apache-2.0
//! Records as tests write and read them: self-checking test records (every
//! byte a function of the record's sequence number and size, so a reader
//! can tell a complete record from a torn or stale one), and the fields of
//! the records the engine writes ([`u64_at`], [`u32_at`], [`sample_aux`]).

use perfaux::abi::PerfEventHeader;
use perfaux::ring::{FixedEvent, NestHook, OutputHandle, Ring, read_header};

/// Record type of test records (beyond the kernel's and perf's types).
pub const TEST_RECORD: u32 = 0x5445_5354;

/// The bytes of test record `seq` of `size` bytes (a multiple of 8, >= 16):
/// header, the sequence number, then words derived from both.
pub fn test_record(seq: u64, size: usize) -> Vec<u8> {
    assert!(size >= 16 && size % 8 == 0 && size <= 65528);
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&TEST_RECORD.to_ne_bytes());
    out.extend_from_slice(&0u16.to_ne_bytes());
    out.extend_from_slice(&(size as u16).to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    for i in 2..size / 8 {
        out.extend_from_slice(&(seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i as u64).to_ne_bytes());
    }
    out
}

/// The sequence number of a complete test record, or why it is not one.
pub fn check_test_record(bytes: &[u8]) -> Result<u64, String> {
    let h = read_header(bytes).ok_or("short record")?;
    if h.type_ != TEST_RECORD {
        return Err(format!("type {:#x}", h.type_));
    }
    let seq = u64::from_ne_bytes(bytes[8..16].try_into().map_err(|_| "short record")?);
    if test_record(seq, h.size as usize) != bytes {
        return Err(format!("record {seq} of {} bytes is torn", h.size));
    }
    Ok(seq)
}

/// Writes test record `seq` of `size` bytes through `begin`/`copy`/`end`.
pub fn write_test_record<H: NestHook>(
    ring: &Ring<'_, H>,
    seq: u64,
    size: usize,
) -> Result<(), perfaux::Error> {
    let bytes = test_record(seq, size);
    let mut h: OutputHandle<'_, '_, H> = ring.begin(
        size,
        &mut FixedEvent {
            id: 7,
            sample_id: None,
        },
    )?;
    assert_eq!(h.copy(&bytes), 0);
    h.end();
    Ok(())
}

/// A header as bytes.
pub fn header_bytes(h: PerfEventHeader) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&h.type_.to_ne_bytes());
    b[4..6].copy_from_slice(&h.misc.to_ne_bytes());
    b[6..].copy_from_slice(&h.size.to_ne_bytes());
    b
}

/// The AUX block of a sample of `sample_type` written by perfaux: its size
/// word and the bytes after it (the data, then any padding). The fields
/// before it are found by `sample_type`, in `perf_output_sample`'s order;
/// only the fixed 8-byte fields are supported (a test with READ, CALLCHAIN,
/// RAW, BRANCH_STACK, REGS or STACK fields parses its own samples).
#[track_caller]
pub fn sample_aux(record: &[u8], sample_type: u64) -> (u64, &[u8]) {
    use perfaux::abi::sample_type as st;
    let fixed = st::IDENTIFIER
        | st::IP
        | st::TID
        | st::TIME
        | st::ADDR
        | st::ID
        | st::STREAM_ID
        | st::CPU
        | st::PERIOD
        | st::WEIGHT
        | st::DATA_SRC
        | st::TRANSACTION
        | st::PHYS_ADDR
        | st::CGROUP
        | st::DATA_PAGE_SIZE
        | st::CODE_PAGE_SIZE;
    assert!(
        sample_type & st::AUX != 0,
        "the sample carries no AUX block"
    );
    assert!(
        sample_type & !(fixed | st::AUX) == 0,
        "sample_aux reads fixed-size fields only: {sample_type:#x}"
    );
    let at = 8 + 8 * (sample_type & fixed).count_ones() as usize;
    (u64_at(record, at), &record[at + 8..])
}

/// The native-endian `u64` at byte `offset` of a record (a field, as
/// `perf_output_put` wrote it).
#[track_caller]
pub fn u64_at(record: &[u8], offset: usize) -> u64 {
    let bytes = record
        .get(offset..offset + 8)
        .unwrap_or_else(|| panic!("no u64 at {offset} of a {}-byte record", record.len()));
    u64::from_ne_bytes(bytes.try_into().unwrap())
}

/// The native-endian `u32` at byte `offset` of a record.
#[track_caller]
pub fn u32_at(record: &[u8], offset: usize) -> u32 {
    let bytes = record
        .get(offset..offset + 4)
        .unwrap_or_else(|| panic!("no u32 at {offset} of a {}-byte record", record.len()));
    u32::from_ne_bytes(bytes.try_into().unwrap())
}
