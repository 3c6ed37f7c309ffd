// SPDX-License-Identifier: MIT OR Apache-2.0
//! `perf-event-data` parses samples carrying every field Linux has, and the
//! AUX bytes it returns are exactly what the test PMU's area holds.

use perf_event_data::Record;
use perf_event_data::endian::Native;
use perf_event_data::parse::{ParseConfig, Parser};
use perfaux::abi::{PerfEventAttr, branch_sample_type as br, read_format as rf, sample_type as st};
use perfaux::aux::AuxConfig;
use perfaux::ring::{FixedEvent, RingConfig};
use perfaux::sample::{
    AuxSampling, BranchStack, NoIrqMask, ReadGroupEntry, ReadValues, Regs, SampleData, StackUser,
    write_sample,
};
use perfaux_tests::mem::{AuxMemory, RingMemory};
use perfaux_tests::pmu::TestPmu;

/// Every sample field but WEIGHT_STRUCT (it excludes WEIGHT).
const ALL: u64 = st::KNOWN & !st::WEIGHT_STRUCT;

fn parse_config(a: &PerfEventAttr) -> ParseConfig<Native> {
    let mut attr = perf_event_open_sys::bindings::perf_event_attr::default();
    attr.sample_type = a.sample_type;
    attr.read_format = a.read_format;
    attr.branch_sample_type = a.branch_sample_type;
    attr.sample_regs_user = a.sample_regs_user;
    attr.sample_regs_intr = a.sample_regs_intr;
    ParseConfig::from(attr)
}

#[test]
fn every_field_and_the_aux_bytes_parse_back() {
    let mem = RingMemory::new(8, 0);
    let ring = mem.ring(RingConfig::default());
    let aux = AuxMemory::new(4, 2);
    let area = mem.aux_area(
        &aux,
        AuxConfig {
            overwrite: true,
            ..AuxConfig::default()
        },
    );
    let pmu = TestPmu::new(&area);
    let trace: Vec<u8> = (0..30_000u32).map(|i| (i * 7 % 256) as u8).collect();
    pmu.trace(&aux, &trace);
    let sampling = AuxSampling {
        area: &area,
        pmu: &pmu,
        active_here: true,
    };

    let mut a = PerfEventAttr::new(136);
    a.sample_type = ALL;
    a.read_format = rf::KNOWN;
    a.branch_sample_type = br::ANY | br::USER | br::HW_INDEX;
    a.sample_regs_user = 0b1011;
    a.sample_regs_intr = 0b11;
    a.sample_stack_user = 64;
    let group = [
        ReadGroupEntry {
            value: 100,
            id: 1,
            lost: 0,
        },
        ReadGroupEntry {
            value: 200,
            id: 2,
            lost: 3,
        },
    ];
    let chain = [0xffff_ffff_ffff_fe00, 0x401000, 0x402000];
    let raw = [1u8, 2, 3, 4, 5];
    let entries = [[0x10, 0x20, 0], [0x30, 0x40, 0]];
    let user_regs = [11, 12, 13];
    let intr_regs = [21, 22];
    let stack: Vec<u8> = (0..100).collect();
    for aux_sample_size in [4096u32, 4099, 9000, 16384, 1 << 20] {
        let d = SampleData {
            misc: 2,
            ip: 0x401234,
            pid: 7,
            tid: 8,
            time: 1_000_000,
            addr: 0xdead_0000,
            id: 42,
            stream_id: 43,
            cpu: 1,
            period: 10_000,
            read: ReadValues {
                time_enabled: 500,
                time_running: 400,
                this: ReadGroupEntry::default(),
                group: &group,
            },
            callchain: &chain,
            raw: Some(&raw),
            branch_stack: Some(BranchStack {
                hw_index: 9,
                entries: &entries,
                counters: &[],
            }),
            regs_user: Regs {
                abi: 2,
                values: &user_regs,
            },
            stack_user: StackUser {
                stack: Some(&stack),
            },
            weight: 77,
            data_src: 0x1234,
            transaction: 5,
            regs_intr: Regs {
                abi: 2,
                values: &intr_regs,
            },
            phys_addr: 0x1_0000_0000,
            cgroup: 99,
            data_page_size: 4096,
            code_page_size: 2 << 20,
        };
        a.aux_sample_size = aux_sample_size;
        let layout = write_sample(
            &ring,
            &mut FixedEvent::default(),
            &a,
            &d,
            Some(&sampling),
            &NoIrqMask,
        )
        .unwrap();
        let mut c = mem.consumer();
        c.refresh();
        let mut scratch = vec![0u8; 65536];
        let bytes = c.next_record(&mut scratch).unwrap().unwrap().to_vec();
        c.commit();
        assert_eq!(bytes.len(), usize::from(layout.size));

        let record: Record<'_> = Parser::new(&bytes[..], parse_config(&a))
            .parse()
            .expect("perf-event-data parses the sample");
        let Record::Sample(s) = record else {
            panic!("a sample")
        };
        assert_eq!(
            (s.id(), s.ip(), s.pid(), s.tid(), s.time()),
            (Some(42), Some(0x401234), Some(7), Some(8), Some(1_000_000))
        );
        assert_eq!(
            (s.addr(), s.stream_id(), s.cpu(), s.period()),
            (Some(0xdead_0000), Some(43), Some(1), Some(10_000))
        );
        let values = s.values().unwrap();
        assert_eq!(
            (values.time_enabled(), values.time_running(), values.len()),
            (Some(500), Some(400), 2)
        );
        let e: Vec<_> = values
            .entries()
            .map(|e| (e.value(), e.id(), e.lost()))
            .collect();
        assert_eq!(e, [(100, Some(1), Some(0)), (200, Some(2), Some(3))]);
        assert_eq!(s.callchain(), Some(&chain[..]));
        assert_eq!(&s.raw().unwrap()[..5], &raw);
        assert_eq!(s.lbr_hw_index(), Some(9));
        let lbr: Vec<_> = s
            .lbr()
            .unwrap()
            .iter()
            .map(|b| (b.from(), b.to()))
            .collect();
        assert_eq!(lbr, [(0x10, 0x20), (0x30, 0x40)]);
        assert_eq!(&s.regs_user().unwrap().regs[..], &user_regs);
        assert_eq!(s.stack_user(), Some(&stack[..64]));
        assert_eq!(s.weight(), Some(77));
        assert_eq!(&s.regs_intr().unwrap().regs[..], &intr_regs);
        assert_eq!(
            (
                s.phys_addr(),
                s.cgroup(),
                s.data_page_size(),
                s.code_page_size()
            ),
            (Some(0x1_0000_0000), Some(99), Some(4096), Some(2 << 20))
        );
        let aux_bytes = s.aux().unwrap();
        assert_eq!(aux_bytes.len() as u64, layout.aux_size);
        let want: Vec<u8> = (0..layout.aux_size)
            .map(|i| aux.byte((30_000 - layout.aux_size + i) as usize))
            .collect();
        assert!(
            aux_bytes == &want[..],
            "AUX bytes for aux_sample_size {aux_sample_size}"
        );
    }
}
