// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perf record -z`: records packed into `PERF_RECORD_COMPRESSED` (81),
//! whose payloads are one zstd stream across all of them (perf flushes, it
//! does not end, a frame per record, so a record may straddle two). This
//! unpacks them in place: the file image comes back with every compressed
//! record replaced by the records it holds, the header's data size and the
//! feature table's offsets moved to match, so the reader sees a plain file.

use super::reader::FormatError;
use super::user_record;

/// `PERF_RECORD_COMPRESSED`.
pub const COMPRESSED: u32 = 81;

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The file image with its compressed records unpacked, or `None` when it
/// has none (or is not a file this can rewrite: the reader says why).
pub fn inflate(bytes: &[u8]) -> Result<Option<Vec<u8>>, FormatError> {
    const HEADER: usize = 104;
    if bytes.len() < HEADER || &bytes[..8] != b"PERFILE2" {
        return Ok(None);
    }
    let (data_off, data_size) = (u64_at(bytes, 40) as usize, u64_at(bytes, 48) as usize);
    let Some(data_end) = data_off
        .checked_add(data_size)
        .filter(|&e| e <= bytes.len())
    else {
        return Ok(None);
    };
    let data = &bytes[data_off..data_end];
    // Walk the records once: any compressed ones?
    let mut records = Vec::new();
    let mut at = 0;
    while at + 8 <= data.len() {
        let type_ = u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
        let size = u16::from_le_bytes([data[at + 6], data[at + 7]]) as usize;
        let mut end = at + size;
        if size < 8 || end > data.len() {
            return Ok(None); // malformed: the reader reports it
        }
        if type_ == user_record::AUXTRACE && size >= 16 {
            end = end
                .saturating_add(u64_at(data, at + 8) as usize)
                .min(data.len());
        }
        records.push((type_, at, size, end));
        at = end;
    }
    if !records.iter().any(|r| r.0 == COMPRESSED) {
        return Ok(None);
    }
    let mut dctx = zstd_safe::DCtx::create();
    let mut out = Vec::with_capacity(data.len() * 4);
    for &(type_, start, size, end) in &records {
        if type_ != COMPRESSED {
            out.extend_from_slice(&data[start..end]);
            continue;
        }
        let mut input = zstd_safe::InBuffer::around(&data[start + 8..start + size]);
        while input.pos < input.src.len() {
            let mut chunk = vec![0u8; 1 << 16];
            let mut output = zstd_safe::OutBuffer::around(chunk.as_mut_slice());
            dctx.decompress_stream(&mut output, &mut input)
                .map_err(|code| {
                    FormatError(format!(
                        "the compressed record at {:#x} does not decompress: {}",
                        data_off + start,
                        zstd_safe::get_error_name(code)
                    ))
                })?;
            let n = output.pos();
            out.extend_from_slice(&chunk[..n]);
        }
    }
    // The new image: header and attrs as they were, the unpacked data, then
    // the feature table and sections, moved by the change of size.
    let delta = out.len() as i64 - data_size as i64;
    let mut image = Vec::with_capacity(bytes.len() + out.len());
    image.extend_from_slice(&bytes[..data_off]);
    image.extend_from_slice(&out);
    image.extend_from_slice(&bytes[data_end..]);
    image[48..56].copy_from_slice(&(out.len() as u64).to_le_bytes());
    let table = data_off + out.len();
    let bits = (0..256u32)
        .filter(|b| bytes[HEADER - 32 + *b as usize / 8] & (1 << (b % 8)) != 0)
        .count();
    for i in 0..bits {
        let at = table + 16 * i;
        if at + 16 > image.len() {
            break; // the reader reports the short table
        }
        let off = u64_at(&image, at);
        if off as usize >= data_end {
            let moved = (off as i64 + delta) as u64;
            image[at..at + 8].copy_from_slice(&moved.to_le_bytes());
        }
    }
    Ok(Some(image))
}
