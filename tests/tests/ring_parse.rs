// SPDX-License-Identifier: MIT OR Apache-2.0
//! An independent parser (`perf-event-data`) reads every record the ring
//! carries: the LOST records the ring writes itself (with their sample_id
//! trailer) and hand-encoded SAMPLE (with an AUX block), AUX, ITRACE_START
//! and LOST_SAMPLES records, many of them crossing chunk boundaries and the
//! ring's end.

use perf_event_data::Record;
use perf_event_data::endian::Native;
use perf_event_data::parse::{ParseConfig, Parser};
use perfaux::Error;
use perfaux::abi::{PerfEventHeader, aux_flags, record_type, sample_type as st};
use perfaux::ring::{FixedEvent, RingConfig, SampleId};
use perfaux_tests::mem::RingMemory;
use perfaux_tests::records::header_bytes;

const SAMPLE_TYPE: u64 =
    st::IDENTIFIER | st::IP | st::TID | st::TIME | st::CPU | st::PERIOD | st::AUX;

fn parse_config() -> ParseConfig<Native> {
    let mut attr = perf_event_open_sys::bindings::perf_event_attr::default();
    attr.sample_type = SAMPLE_TYPE;
    attr.set_sample_id_all(1);
    ParseConfig::from(attr)
}

fn sample_id(i: u64) -> SampleId {
    SampleId {
        sample_type: SAMPLE_TYPE,
        pid: 100,
        tid: 101,
        time: 1000 + i,
        id: 42,
        stream_id: 42,
        cpu: 1,
    }
}

fn record(type_: u32, body: &[u8], trailer: Option<SampleId>) -> Vec<u8> {
    let mut t = [0u8; 48];
    let n = trailer.map_or(0, |s| s.encode(&mut t));
    let size = 8 + body.len() + n;
    let mut out = header_bytes(PerfEventHeader {
        type_,
        misc: 0,
        size: size as u16,
    })
    .to_vec();
    out.extend_from_slice(body);
    out.extend_from_slice(&t[..n]);
    out
}

fn sample(i: u64, aux: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for w in [42u64, 0xffff_8000_0000_0000 + i] {
        body.extend_from_slice(&w.to_ne_bytes()); // IDENTIFIER, IP
    }
    body.extend_from_slice(&100u32.to_ne_bytes());
    body.extend_from_slice(&101u32.to_ne_bytes()); // TID
    body.extend_from_slice(&(1000 + i).to_ne_bytes()); // TIME
    body.extend_from_slice(&1u32.to_ne_bytes());
    body.extend_from_slice(&0u32.to_ne_bytes()); // CPU
    body.extend_from_slice(&10_000u64.to_ne_bytes()); // PERIOD
    body.extend_from_slice(&(aux.len() as u64).to_ne_bytes()); // AUX size
    body.extend_from_slice(aux);
    record(record_type::SAMPLE, &body, None)
}

#[test]
fn perf_event_data_parses_every_record() {
    let mem = RingMemory::new(1, 0);
    let ring = mem.ring(RingConfig::default());
    let mut consumer = mem.consumer();
    let mut scratch = vec![0u8; 65536];
    let config = parse_config();
    let mut seen = [0usize; 6];
    let mut expected_lost = 0;

    for i in 0..400u64 {
        // perf-event-data 0.1.8 cannot parse an AUX block of size 0 at the
        // end of a sample (its parse_bytes(0) reports Eof on an exhausted
        // buffer), though Linux writes exactly that (`perf_output_sample` writes the u64 size 0): keep
        // the AUX sizes non-zero here.
        let aux: Vec<u8> = (0..(i % 40 + 1) * 8).map(|b| (b ^ i) as u8).collect();
        let bytes = match i % 5 {
            0 | 1 => sample(i, &aux),
            2 => {
                let mut body = Vec::new();
                for w in [i * 4096, 4096, aux_flags::OVERWRITE | aux_flags::PARTIAL] {
                    body.extend_from_slice(&w.to_ne_bytes());
                }
                record(record_type::AUX, &body, Some(sample_id(i)))
            }
            3 => {
                let mut body = 100u32.to_ne_bytes().to_vec();
                body.extend_from_slice(&101u32.to_ne_bytes());
                record(record_type::ITRACE_START, &body, Some(sample_id(i)))
            }
            _ => record(
                record_type::LOST_SAMPLES,
                &(i * 3).to_ne_bytes(),
                Some(sample_id(i)),
            ),
        };
        let mut source = FixedEvent {
            id: 42,
            sample_id: Some(sample_id(i)),
        };
        match ring.begin(bytes.len(), &mut source) {
            Ok(mut h) => {
                assert_eq!(h.copy(&bytes), 0);
                h.end();
            }
            Err(Error::NoSpace) => expected_lost += 1,
            Err(e) => panic!("{e}"),
        }
        // Consume only now and then, so that the ring fills and drops.
        if i % 50 != 49 {
            continue;
        }
        consumer.refresh();
        while let Some(r) = consumer.next_record(&mut scratch) {
            let r = r.unwrap();
            let parsed: Record<'_> = Parser::new(r, config.clone()).parse().unwrap_or_else(|e| {
                panic!("{e:?} on {:?} {:02x?}", perfaux::ring::read_header(r), r)
            });
            match parsed {
                Record::Sample(s) => {
                    seen[0] += 1;
                    assert_eq!(
                        (s.id(), s.pid(), s.tid(), s.cpu(), s.period()),
                        (Some(42), Some(100), Some(101), Some(1), Some(10_000))
                    );
                    let t = s.time().unwrap() - 1000;
                    assert_eq!(s.ip(), Some(0xffff_8000_0000_0000 + t));
                    let aux: Vec<u8> = (0..(t % 40 + 1) * 8).map(|b| (b ^ t) as u8).collect();
                    assert_eq!(s.aux(), Some(&aux[..]));
                }
                Record::Aux(a) => {
                    seen[1] += 1;
                    assert_eq!(a.aux_size, 4096);
                    assert!(a.flags.contains(perf_event_data::AuxFlags::OVERWRITE));
                }
                Record::ITraceStart(t) => {
                    seen[2] += 1;
                    assert_eq!((t.pid, t.tid), (100, 101));
                }
                Record::LostSamples(l) => {
                    seen[3] += 1;
                    assert_eq!(l.lost % 3, 0);
                }
                Record::Lost(l) => {
                    seen[4] += 1;
                    assert_eq!(l.id, 42);
                    expected_lost -= l.lost;
                }
                other => panic!("unexpected record {other:?}"),
            }
            seen[5] += 1;
        }
        consumer.commit();
    }
    assert_eq!(
        expected_lost,
        ring.pending_lost(),
        "every refused record is reported or pending"
    );
    assert!(
        seen[..5].iter().all(|&n| n > 0),
        "every kind was parsed: {seen:?}"
    );
    println!("parsed {} records: {seen:?}", seen[5]);
}
