// SPDX-License-Identifier: MIT OR Apache-2.0
//! Full-trace mode byte for byte: every byte of every PERF_RECORD_AUXTRACE
//! equals what the CPU's tracer wrote at that AUX offset.

use std::io::Cursor;

use perfaux_cli::perfdata::{PerfData, user_record};
use perfaux_cli::sim::{self, Config, Counter, Mode, Stop};

fn config(aux_pages: usize) -> Config {
    Config {
        cpus: 2,
        stop: Stop::Duration(2_000_000),
        period: 100_000,
        freq: None,
        aux_sample_size: 4096,
        aux_pages,
        data_pages: 128,
        seed: 3,
        mode: Mode::Full,
        counters: vec![Counter::Cycles],
        cmdline: vec![],
        kernel: false,
        truth: true,
        binary: "/nonexistent/perfaux-demo".into(),
        branches: None,
    }
}

/// (records checked, mismatches as "cpu offset: why"). A record covers
/// the stream up to where the next one of its CPU starts (or, for the
/// last, its whole data); past that it may hold up to 7 bytes of zero
/// padding, as `perf record` pads.
fn check(aux_pages: usize) -> (usize, Vec<String>) {
    let (_, out, outputs) = sim::record(&config(aux_pages), Cursor::new(Vec::new()), &mut |_| {
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    let bytes = out.into_inner();
    let file = PerfData::parse(&bytes).unwrap();
    let mut per_cpu: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); outputs.streams.len()];
    for r in file.records() {
        let r = r.unwrap();
        if r.header.type_ == user_record::AUXTRACE {
            let word = |at: usize| u64::from_le_bytes(r.bytes[at..at + 8].try_into().unwrap());
            per_cpu[word(40) as u32 as usize].push((word(16), r.payload.to_vec()));
        }
    }
    let mut bad = Vec::new();
    let mut n = 0;
    for (cpu, records) in per_cpu.iter().enumerate() {
        let stream = &outputs.streams[cpu];
        let mut expect_at = 0;
        for (i, (offset, data)) in records.iter().enumerate() {
            n += 1;
            let offset = *offset;
            if offset != expect_at {
                bad.push(format!(
                    "cpu {cpu}: a record at {offset:#x}, the stream is at {expect_at:#x}"
                ));
            }
            let covered = records
                .get(i + 1)
                .map_or(data.len() as u64, |next| next.0 - offset)
                as usize;
            let end = (offset as usize + covered).min(stream.len());
            let want = stream.get(offset as usize..end).unwrap_or_default();
            if covered > data.len() || data[..want.len()] != *want {
                bad.push(format!(
                    "cpu {cpu} offset {offset:#x} size {:#x}: not the tracer's bytes",
                    data.len()
                ));
            } else if data.len() - want.len() > 7 || data[want.len()..].iter().any(|&b| b != 0) {
                bad.push(format!(
                    "cpu {cpu} offset {offset:#x}: more than zero padding past the stream"
                ));
            }
            expect_at = offset + covered as u64;
        }
        if expect_at < stream.len() as u64 {
            bad.push(format!(
                "cpu {cpu}: the records end at {expect_at:#x}, the tracer wrote {:#x}",
                stream.len()
            ));
        }
    }
    (n, bad)
}

/// Every AUX area size a writable area can have here (2 pages up, powers
/// of two), with a consumer that keeps up at 8 pages and up and falls
/// behind below (TRUNCATED records): the records' bytes are the tracer's,
/// at every offset, back to back, and nothing the tracer wrote is missing.
#[test]
fn auxtrace_data_is_what_the_tracer_wrote() {
    for pages in [2, 4, 8, 16, 32, 64, 128] {
        let (n, bad) = check(pages);
        assert!(n >= 2, "{pages} pages: {n} AUXTRACE records");
        assert!(
            bad.is_empty(),
            "{pages} pages: {} of {n} records differ: {:?}",
            bad.len(),
            &bad[..bad.len().min(3)]
        );
    }
}
