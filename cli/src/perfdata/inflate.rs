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
    for r in &records {
        if r.header.type_ != COMPRESSED {
            out.extend_from_slice(r.bytes);
            out.extend_from_slice(r.payload);
            continue;
        }
        unpack(&mut dctx, &r.bytes[8..], &mut out).map_err(|code| {
            FormatError(format!(
                "the compressed record at {:#x} does not decompress: {}",
                r.offset,
                zstd_safe::get_error_name(code)
            ))
        })?;
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

/// Feeds one record's payload to the stream's decoder and appends all it
/// gives back. The decoder may hold output past the end of its input (a
/// block larger than the chunk it was given), so it is drained until a call
/// leaves room in the chunk, as perf's `zstd_decompress_stream()` drains
/// into a buffer it sizes to never fill: stopping when the input runs out
/// lost the end of a record's records (seen: 51 of 1677 samples).
fn unpack(
    dctx: &mut zstd_safe::DCtx<'_>,
    payload: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), zstd_safe::ErrorCode> {
    let mut chunk = [0u8; 1 << 16];
    let mut input = zstd_safe::InBuffer::around(payload);
    loop {
        let mut output = zstd_safe::OutBuffer::around(&mut chunk[..]);
        dctx.decompress_stream(&mut output, &mut input)?;
        let (n, full) = (output.pos(), output.pos() == output.capacity());
        out.extend_from_slice(&chunk[..n]);
        if input.pos >= input.src.len() && !full {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::unpack;

    /// A stream flushed (not ended) per record, as perf writes it, whose
    /// records each unpack to more than the decoder's chunk: every byte
    /// comes back, in order, split wherever the records split it.
    #[test]
    fn every_byte_of_a_flushed_stream_comes_back() {
        let data: Vec<u8> = (0..600_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8 & 0x0f)
            .collect();
        let mut cctx = zstd_safe::CCtx::create();
        let mut records = Vec::new();
        for piece in data.chunks(200_000) {
            let mut packed = vec![0u8; zstd_safe::compress_bound(piece.len()) + 64];
            let mut output = zstd_safe::OutBuffer::around(packed.as_mut_slice());
            let mut input = zstd_safe::InBuffer::around(piece);
            while input.pos < piece.len() {
                cctx.compress_stream(&mut output, &mut input).unwrap();
            }
            while cctx.flush_stream(&mut output).unwrap() != 0 {}
            let n = output.pos();
            packed.truncate(n);
            records.push(packed);
        }
        let mut dctx = zstd_safe::DCtx::create();
        let mut out = Vec::new();
        for (i, record) in records.iter().enumerate() {
            unpack(&mut dctx, record, &mut out).unwrap();
            assert_eq!(out, data[..out.len()], "record {i}");
            assert_eq!(out.len(), 200_000 * (i + 1), "record {i} came back whole");
        }
    }
}
