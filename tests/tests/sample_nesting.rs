// SPDX-License-Identifier: MIT OR Apache-2.0
//! The nesting harness over sample output: a nested sample (with its own AUX
//! block) at every interruption point of an outer sample's write, including
//! every piece of the outer snapshot's copy, at IRQ and NMI depth. A nested
//! sample that lands inside the outer `snapshot_aux` must carry no AUX data
//! (`perf_prepare_sample_aux`'s `aux_in_sampling` check); every other sample carries the newest AUX bytes; every
//! record is complete and in reservation order.

use std::cell::{Cell, RefCell};

use perfaux::abi::{PerfEventAttr, record_type, sample_type as st};
use perfaux::aux::AuxConfig;
use perfaux::ring::{FixedEvent, NestHook, Point, Ring, RingConfig, read_header};
use perfaux::sample::{AuxSampling, NoIrqMask, SampleData, write_sample};
use perfaux_tests::mem::{AuxMemory, RingMemory};
use perfaux_tests::pmu::TestPmu;
use perfaux_tests::records::u64_at;

const TRACED: u64 = 20_000;

struct SampleHook<'x, 'a, 'p> {
    sampling: &'x AuxSampling<'x, 'a, TestPmu<'p, 'a>>,
    /// Point (1-based, per depth) at which the next deeper sample starts.
    triggers: [Option<usize>; 2],
    depth: Cell<usize>,
    seen: [Cell<usize>; 3],
    next_time: Cell<u64>,
    /// (time, inside a snapshot when it started) of every sample started.
    started: RefCell<Vec<(u64, bool)>>,
}

impl NestHook for SampleHook<'_, '_, '_> {
    fn at(&self, ring: &Ring<'_, Self>, _point: Point) {
        let d = self.depth.get();
        if d == 0 {
            return;
        }
        let n = self.seen[d - 1].get() + 1;
        self.seen[d - 1].set(n);
        if d < 3 && self.triggers[d - 1] == Some(n) {
            self.sample(ring);
        }
    }
}

impl SampleHook<'_, '_, '_> {
    fn sample(&self, ring: &Ring<'_, Self>) {
        let d = self.depth.get();
        let time = self.next_time.get();
        self.next_time.set(time + 1);
        self.started
            .borrow_mut()
            .push((time, self.sampling.area.in_sampling()));
        self.seen[d].set(0);
        self.depth.set(d + 1);
        let mut attr = PerfEventAttr::new(136);
        attr.sample_type = st::TID | st::TIME | st::AUX;
        attr.aux_sample_size = [2048, 1024, 512][d];
        let data = SampleData {
            pid: 1,
            tid: 2,
            time,
            ..SampleData::default()
        };
        write_sample(
            ring,
            &mut FixedEvent::default(),
            &attr,
            &data,
            Some(self.sampling),
            &NoIrqMask,
        )
        .expect("room");
        self.depth.set(d);
    }
}

/// Runs one outer sample with the triggers; returns violations and the
/// number of points each depth passed.
fn run(triggers: [Option<usize>; 2]) -> (Vec<String>, [usize; 3], usize) {
    let mem = RingMemory::new(4, 0);
    let aux = AuxMemory::new(2, 0);
    let area = mem.aux_area(
        &aux,
        AuxConfig {
            overwrite: true,
            ..AuxConfig::default()
        },
    );
    let pmu = TestPmu::new(&area);
    let trace: Vec<u8> = (0..TRACED as u32).map(|i| (i * 13 % 256) as u8).collect();
    pmu.trace(&aux, &trace);
    let sampling = AuxSampling {
        area: &area,
        pmu: &pmu,
        active_here: true,
    };
    let hook = SampleHook {
        sampling: &sampling,
        triggers,
        depth: Cell::new(0),
        seen: Default::default(),
        next_time: Cell::new(0),
        started: RefCell::new(Vec::new()),
    };
    let ring = mem.ring_with_hook(RingConfig::default(), hook);
    // Move the ring's head near its end so records wrap.
    let mut c = mem.consumer();
    let mut h = ring.begin(16000, &mut FixedEvent::default()).unwrap();
    h.skip(16000);
    h.end();
    c.refresh();
    c.skip_to_head();
    c.commit();

    ring.hook().sample(&ring);

    let mut violations = Vec::new();
    if ring.published_head() != ring.head() {
        violations.push("data_head is not the head".to_owned());
    }
    let started = ring.hook().started.borrow().clone();
    c.refresh();
    let mut scratch = vec![0u8; 65536];
    let mut times = Vec::new();
    while let Some(r) = c.next_record(&mut scratch) {
        let r = r.unwrap();
        let h = read_header(r).unwrap();
        if h.type_ != record_type::SAMPLE {
            violations.push(format!("record type {}", h.type_));
            continue;
        }
        let time = u64_at(r, 16);
        let aux_size = u64_at(r, 24);
        times.push(time);
        let in_snapshot = started
            .iter()
            .find(|s| s.0 == time)
            .map(|s| s.1)
            .unwrap_or(false);
        let want_size = if in_snapshot {
            0
        } else {
            [2048, 1024, 512][depth_of(time, &started)]
        };
        if aux_size != want_size || r.len() as u64 != 32 + aux_size {
            violations.push(format!(
                "sample {time}: aux size {aux_size}, record {}, want {want_size}",
                r.len()
            ));
            continue;
        }
        let want: Vec<u8> = (0..aux_size)
            .map(|i| aux.byte((TRACED - aux_size + i) as usize))
            .collect();
        if r[32..] != want[..] {
            violations.push(format!("sample {time}: AUX bytes differ"));
        }
    }
    if times.len() != started.len() {
        violations.push(format!(
            "{} samples started, {} read",
            started.len(),
            times.len()
        ));
    }
    if area.in_sampling() {
        violations.push("the in_sampling guard was left up".to_owned());
    }
    let h = ring.hook();
    let inside = started.iter().filter(|s| s.1).count();
    (
        violations,
        [h.seen[0].get(), h.seen[1].get(), h.seen[2].get()],
        inside,
    )
}

/// Samples are numbered in the order they start: 0 is the task's, the next
/// the IRQ's, the next the NMI's.
fn depth_of(time: u64, started: &[(u64, bool)]) -> usize {
    started.iter().position(|s| s.0 == time).unwrap_or(0).min(2)
}

#[test]
fn a_nested_sample_at_every_point_of_a_sample_write() {
    let (v, [outer_points, ..], _) = run([None, None]);
    assert!(v.is_empty(), "{v:?}");
    assert!(
        outer_points > 10,
        "the outer sample passes {outer_points} points"
    );
    let mut runs = 1;
    let mut inside_snapshot = 0;
    let mut all = Vec::new();
    for i in 1..=outer_points {
        let (v, [_, irq_points, _], inside) = run([Some(i), None]);
        runs += 1;
        inside_snapshot += inside;
        all.extend(v.into_iter().map(|v| format!("task@{i}: {v}")));
        for j in 1..=irq_points {
            let (v, _, inside) = run([Some(i), Some(j)]);
            runs += 1;
            inside_snapshot += inside;
            all.extend(v.into_iter().map(|v| format!("task@{i} irq@{j}: {v}")));
        }
    }
    assert!(
        all.is_empty(),
        "{} violations in {runs} runs:\n{}",
        all.len(),
        all.join("\n")
    );
    assert!(
        inside_snapshot > 0,
        "some nested samples arrived inside a snapshot"
    );
    println!(
        "{runs} nested sample runs ({inside_snapshot} samples inside a snapshot), no violation"
    );
}
