// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perf record -z`: records packed into `PERF_RECORD_COMPRESSED` (81),
//! whose payloads are one zstd stream across all of them (perf flushes, it
//! does not end, a frame per record, so a record may straddle two). This
//! unpacks them in place: the file image comes back with every compressed
//! record replaced by the records it holds, the header's data size and the
//! feature table's offsets moved to match (a pipe-format stream has none),
//! so the reader sees a plain file.

use super::reader::{FormatError, PerfData, u64_at};

/// `PERF_RECORD_COMPRESSED`.
pub const COMPRESSED: u32 = 81;

/// The file image with its compressed records unpacked, or `None` when it
/// has none (or is not a whole file this can rewrite: the reader, run on
/// it as it is, says why).
pub fn inflate(bytes: &[u8]) -> Result<Option<Vec<u8>>, FormatError> {
    const HEADER: usize = 104;
    let Ok(file) = PerfData::parse(bytes) else {
        return Ok(None);
    };
    if file.truncated.is_some() {
        return Ok(None);
    }
    let Ok(records) = file.records().collect::<Result<Vec<_>, _>>() else {
        return Ok(None);
    };
    if !records.iter().any(|r| r.header.type_ == COMPRESSED) {
        return Ok(None);
    }
    let (data_off, data_size) = (file.data_offset as usize, file.data.len());
    let data_end = data_off + data_size;
    let mut dctx = zstd_safe::DCtx::create();
    let mut out = Vec::with_capacity(data_size * 4);
    let mut chunk = vec![0u8; 1 << 16];
    for r in &records {
        if r.header.type_ != COMPRESSED {
            out.extend_from_slice(r.bytes);
            out.extend_from_slice(r.payload);
            continue;
        }
        let mut input = zstd_safe::InBuffer::around(&r.bytes[8..]);
        while input.pos < input.src.len() {
            let mut output = zstd_safe::OutBuffer::around(chunk.as_mut_slice());
            dctx.decompress_stream(&mut output, &mut input)
                .map_err(|code| {
                    FormatError(format!(
                        "the compressed record at {:#x} does not decompress: {}",
                        r.offset,
                        zstd_safe::get_error_name(code)
                    ))
                })?;
            let n = output.pos();
            out.extend_from_slice(&chunk[..n]);
        }
    }
    if file.pipe {
        // A stream: its header, then the records.
        let mut image = bytes[..data_off].to_vec();
        image.extend_from_slice(&out);
        return Ok(Some(image));
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
