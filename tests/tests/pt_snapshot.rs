// SPDX-License-Identifier: MIT OR Apache-2.0
//! The PT-style PMU end to end in snapshot mode: a software tracer writes a
//! random program's packets through ToPA tables into the AUX area; a
//! sampling event in the PT leader's group takes samples at random points;
//! every sample's AUX bytes equal the newest bytes of the whole stream (a
//! model that keeps everything), wrapping windows and windows larger than
//! what was written included; every large enough snapshot holds a PSB and
//! decodes; stopping the leader publishes the position with a PERF_RECORD_AUX.

use perfaux::abi::{PerfEventAttr, aux_flags, record_type, sample_type as st};
use perfaux::event::Buffer;
use perfaux::ring::{FixedEvent, read_header};
use perfaux::sample::SampleData;
use perfaux::soft_pt::packet::PSB;
use perfaux::soft_pt::stream::TraceEvent;
use perfaux_tests::group::{open, try_open};
use perfaux_tests::mem::{AuxMemory, RingMemory};
use perfaux_tests::records::u64_at;
use perfaux_tests::shims::{CountingPmu, Cpu0, decodes, with_pt};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    Trace(TraceEvent),
    Sample(u32),
}

fn step() -> impl Strategy<Value = Step> {
    let addr = (0u64..0x4000).prop_map(|o| 0x40_0000 + o * 16);
    prop_oneof![
        20 => any::<bool>().prop_map(|b| Step::Trace(TraceEvent::Conditional { taken: b, next: 0x40_0000 })),
        6 => addr.clone().prop_map(|a| Step::Trace(TraceEvent::Indirect { target: a })),
        1 => (addr.clone(), addr).prop_map(|(from, to)| Step::Trace(TraceEvent::Async { from, to: Some(to) })),
        1 => (0u64..1 << 40).prop_map(|t| Step::Trace(TraceEvent::Time(t))),
        1 => prop_oneof![Just(64u32), Just(4096), Just(5000), Just(16384), Just(70_000), Just(1 << 20)].prop_map(Step::Sample),
    ]
}

const PSB_PERIOD: u64 = 1024;

fn run(aux_pages: usize, aux_order: u32, steps: &[Step]) -> std::result::Result<(), TestCaseError> {
    let mem = RingMemory::new(64, 0);
    let aux = AuxMemory::new(aux_pages, aux_order);
    with_pt(
        &mem,
        &aux,
        true,
        PSB_PERIOD,
        FixedEvent {
            id: 1,
            sample_id: None,
        },
        |p| {
            let (area, tracer, model, pt) = (p.area, p.tracer, p.model, p.pmu);
            let counter = CountingPmu;
            let buffer = Buffer {
                ring: p.ring,
                aux: Some(p.area),
            };
            let mut leader_attr = PerfEventAttr::new(136);
            leader_attr.type_ = 8;
            let leader = open(leader_attr, pt, 1, None);
            leader.set_buffer(&buffer);
            let mut attr = PerfEventAttr::new(136);
            attr.sample_period = 1000;
            attr.sample_type = st::TIME | st::AUX;
            attr.aux_sample_size = 64;
            let mut samplers = Vec::new();
            for size in [64u32, 4096, 5000, 16384, 70_000, 1 << 20] {
                attr.aux_sample_size = size;
                samplers.push(open(attr, &counter, u64::from(size), Some(&leader)));
            }
            for s in &samplers {
                s.join_group();
                s.set_output(&leader).unwrap();
            }
            let p = Cpu0;
            leader.sched_in(&p).unwrap();
            tracer.trace(TraceEvent::Enable(0x40_0000));
            let bufsize = area.size() as usize;

            for (i, step) in steps.iter().enumerate() {
                match step {
                    Step::Trace(e) => tracer.trace(*e),
                    Step::Sample(size) => {
                        let sampler = samplers
                            .iter()
                            .find(|s| s.attr().aux_sample_size == *size)
                            .unwrap();
                        let layout = sampler
                            .overflow(
                                &p,
                                &SampleData {
                                    time: i as u64,
                                    ..SampleData::default()
                                },
                            )
                            .unwrap();
                        let records = mem.records();
                        let r = records
                            .iter()
                            .find(|r| read_header(r).unwrap().type_ == record_type::SAMPLE)
                            .unwrap();
                        let aux_size = u64_at(r, 16) as usize;
                        let want_size = ((*size as usize).min(65535 - 24) & !7).min(bufsize);
                        prop_assert_eq!(aux_size, want_size);
                        prop_assert_eq!(layout.aux_size as usize, want_size);
                        let got = &r[24..];
                        // The model: the last `aux_size` bytes ever written, zeros
                        // before the first byte (the pages start zeroed).
                        let stream = &model.borrow().0;
                        let want: Vec<u8> = if stream.len() >= aux_size {
                            stream[stream.len() - aux_size..].to_vec()
                        } else {
                            let mut v = vec![0u8; aux_size - stream.len()];
                            v.extend_from_slice(stream);
                            v
                        };
                        prop_assert!(
                            got == &want[..],
                            "sample {} of {} bytes after {} written",
                            i,
                            aux_size,
                            stream.len()
                        );
                        if aux_size as u64 >= PSB_PERIOD + 256 && stream.len() >= aux_size {
                            prop_assert!(
                                got.windows(16).any(|w| w == PSB),
                                "a snapshot of {} bytes holds a PSB",
                                aux_size
                            );
                            prop_assert!(decodes(got), "and decodes");
                        }
                    }
                }
            }
            // Stopping the leader publishes the write position.
            leader.sched_out();
            let written = model.borrow().0.len();
            let position = (written % bufsize) as u64;
            let records = mem.records();
            let aux_record = records
                .iter()
                .find(|r| read_header(r).unwrap().type_ == record_type::AUX)
                .unwrap();
            let words: Vec<u64> = (0..3).map(|k| u64_at(aux_record, 8 + 8 * k)).collect();
            prop_assert_eq!(words, vec![position, bufsize as u64, aux_flags::OVERWRITE]);
            prop_assert_eq!(area.head(), position);
            Ok(())
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn samples_carry_the_newest_bytes_of_the_trace(
        geometry in prop_oneof![Just((1usize, 0u32)), Just((4, 0)), Just((4, 2)), Just((16, 1))],
        steps in proptest::collection::vec(step(), 1..3000),
    ) {
        run(geometry.0, geometry.1, &steps)?;
    }
}

/// `pt_buffer_setup_aux`: a 1-page snapshot buffer uses single-range output; the
/// positions are the output offset, and the output wraps at the page end.
#[test]
fn one_page_snapshot_buffer_uses_single_range_output() {
    use perfaux::pt::hw::TraceHw;
    let mem = RingMemory::new(4, 0);
    let aux = AuxMemory::new(1, 0);
    with_pt(&mem, &aux, true, 512, FixedEvent::default(), |p| {
        let (area, tracer, pt) = (p.area, p.tracer, p.pmu);
        pt.add(1, 0, false, perfaux::pmu::ef::START).unwrap();
        assert!(!tracer.uses_topa());
        let (base, mask) = tracer.output();
        assert_eq!((base, mask), (aux.pages()[0] as u64, 0xfff));
        tracer.trace(TraceEvent::Enable(0x40_0000));
        for i in 0..3000u64 {
            tracer.trace(TraceEvent::Indirect {
                target: 0x40_0000 + (i % 7) * 0x1_0000,
            });
        }
        let written = tracer.written();
        assert!(written > 4096, "the range wrapped");
        assert_eq!(
            tracer.output().1 >> 32,
            written % 4096,
            "the position is the output offset"
        );
        pt.del();
        assert_eq!(area.head(), written % 4096);
    })
}

/// `pt_event_init`: a PT event whose `attr.config` asks for what the
/// tracer does not offer is refused at open (EINVAL), one it offers opens
/// and its bits reach the tracer when the event starts.
#[test]
fn the_pt_config_is_checked_at_open_and_programmed_at_start() {
    use perfaux::attr::Rule;
    use perfaux::pt::config::bits;
    let mem = RingMemory::new(4, 0);
    let aux = AuxMemory::new(4, 0);
    with_pt(&mem, &aux, true, 2048, FixedEvent::default(), |p| {
        let open = |config: u64| {
            let mut attr = PerfEventAttr::new(136);
            attr.type_ = 8;
            attr.config = config;
            try_open(attr, p.pmu, 1, None)
        };
        for bad in [
            bits::MTC,
            bits::PTW,
            bits::BRANCH,
            9 << bits::PSB_PERIOD_SHIFT,
            1 << 2,
        ] {
            assert_eq!(open(bad).err(), Some(Rule::PmuRefusedConfig), "{bad:#x}");
            assert_eq!(Rule::PmuRefusedConfig.error().errno(), -22);
        }
        let config = bits::TSC
            | bits::NORETCOMP
            | bits::CYC
            | (2 << bits::CYC_THRESH_SHIFT)
            | (1 << bits::PSB_PERIOD_SHIFT);
        let leader = open(config).expect("tsc,noretcomp,cyc,cyc_thresh=2,psb_period=1 opens");
        let ring = p.ring;
        let buffer = Buffer {
            ring,
            aux: Some(p.area),
        };
        leader.set_buffer(&buffer);
        leader.sched_in(&Cpu0).expect("scheduled");
        let c = p.tracer.config();
        assert!(c.tsc && !c.return_compression && c.branches && c.psb_freq == 1);
        assert!(c.cyc && c.cyc_thresh == 2);
        leader.sched_out();
    });
}

/// `pt_read_offset`: the table `OUTPUT_BASE` names is found in a buffer of
/// several tables (1024 single pages: three), wherever the trace is, and a
/// snapshot there holds the newest bytes the tracer wrote, across the
/// table boundaries it crossed.
#[test]
fn a_snapshot_finds_its_table_in_a_buffer_of_several() {
    use perfaux::pt::hw::TraceHw;
    use perfaux::ring::SliceSink;
    let mem = RingMemory::new(4, 0);
    let aux = AuxMemory::new(1024, 0);
    assert_eq!(perfaux::pt::topa::tables_for_pages(1024), 3);
    with_pt(&mem, &aux, true, 2048, FixedEvent::default(), |p| {
        let (tracer, pt, model) = (p.tracer, p.pmu, p.model);
        pt.add(1, 0, false, perfaux::pmu::ef::START).unwrap();
        tracer.trace(TraceEvent::Enable(0x40_0000));
        let mut bases = std::collections::BTreeSet::new();
        let mut out = vec![0u8; 65536];
        // Over 4 MiB: the trace passes through every table and wraps.
        while tracer.written() < 4 * 1024 * 1024 + 300_000 {
            for i in 0..4096u64 {
                // Targets 4 GiB apart: TIPs of 7 bytes.
                tracer.trace(TraceEvent::Indirect {
                    target: 0x40_0000 + (i % 2) * (1 << 32),
                });
            }
            bases.insert(tracer.output().0);
            let mut sink = SliceSink::new(&mut out);
            assert_eq!(pt.snapshot_aux(&mut sink, 65536), Ok(65536));
            let all = &model.borrow().0;
            if let Some(newest) = all.len().checked_sub(65536).map(|from| &all[from..]) {
                assert_eq!(sink.written(), newest);
            }
        }
        assert_eq!(bases.len(), 3, "snapshots in each of the three tables");
        pt.del();
    })
}
