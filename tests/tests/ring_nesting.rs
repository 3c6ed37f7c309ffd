// SPDX-License-Identifier: MIT OR Apache-2.0
//! The deterministic nesting harness (design.md): a hook at every
//! interruption point of begin/copy/skip/end runs a complete nested write
//! right there, for every point, with up to three contexts (task, IRQ, NMI).
//! After each run a reader must see only complete records, in reservation
//! order, none missing; `data_head` must never move backwards as a reader
//! sees it, and must end at the ring's head; the records refused must be
//! exactly the lost count reported (PERF_RECORD_LOST plus pending).
//!
//! The same harness run against two deliberate bugs (no missed-update
//! re-check; `nest` dropped before `data_head` is stored, as before Linux
//! commit 1b038c6e05ff) must report violations: the harness can fail.

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

use perfaux::Error;
use perfaux::abi::record_type;
use perfaux::ring::{Mutation, NestHook, Point, Ring, RingConfig, read_header};
use perfaux_tests::mem::RingMemory;
use perfaux_tests::records::{check_test_record, u64_at, write_test_record};

/// Chooses the code under test: correct, or one of the deliberate bugs.
trait Variant {
    const MUTATION: Mutation;
}
struct Correct;
impl Variant for Correct {
    const MUTATION: Mutation = Mutation::None;
}
struct NoRecheck;
impl Variant for NoRecheck {
    const MUTATION: Mutation = Mutation::NoRecheck;
}
struct NestDropFirst;
impl Variant for NestDropFirst {
    const MUTATION: Mutation = Mutation::NestDropBeforePublish;
}

/// How the writers of one run behave.
#[derive(Clone, Copy, Debug)]
struct Scenario {
    name: &'static str,
    /// Record size per depth (task, IRQ, NMI).
    sizes: [usize; 3],
    /// Records of `prefill_size` written (and not consumed) before the run.
    prefill: usize,
    prefill_size: usize,
    /// Consume the prefill, so that only the ring's position moves.
    consume_prefill: bool,
    /// Refuse one record before the run, so the task writer starts with a LOST.
    pending_lost: bool,
}

const SCENARIOS: [Scenario; 4] = [
    Scenario {
        name: "roomy",
        sizes: [64, 48, 32],
        prefill: 0,
        prefill_size: 0,
        consume_prefill: false,
        pending_lost: false,
    },
    Scenario {
        name: "across the ring end",
        sizes: [200, 160, 96],
        prefill: 31,
        prefill_size: 128,
        consume_prefill: true,
        pending_lost: false,
    },
    Scenario {
        name: "lost record first",
        sizes: [64, 48, 32],
        prefill: 5,
        prefill_size: 64,
        consume_prefill: false,
        pending_lost: true,
    },
    // 4096 - 3840 = 256 bytes free (255 usable): the task record fits, the
    // nested ones compete for what is left and some are refused.
    Scenario {
        name: "nearly full",
        sizes: [128, 120, 112],
        prefill: 30,
        prefill_size: 128,
        consume_prefill: false,
        pending_lost: false,
    },
];

struct Harness<V: Variant> {
    /// Point index (1-based, counted within the writer at that depth) at
    /// which the next deeper writer starts; `None`: never.
    triggers: [Option<usize>; 2],
    depth: Cell<usize>,
    points_seen: [Cell<usize>; 3],
    sizes: [usize; 3],
    next_seq: Cell<u64>,
    writing: [Cell<u64>; 3],
    /// Sequence numbers in the order their space was reserved.
    reserved: RefCell<Vec<u64>>,
    refused: Cell<u64>,
    last_head: Cell<u64>,
    violations: RefCell<Vec<String>>,
    _v: PhantomData<V>,
}

impl<V: Variant> NestHook for Harness<V> {
    const MUTATION: Mutation = V::MUTATION;

    fn at(&self, ring: &Ring<'_, Self>, point: Point) {
        self.observe_head(ring, point);
        let depth = self.depth.get();
        if depth == 0 {
            return; // set-up writes, not under test
        }
        let d = depth - 1;
        if point == Point::BeginReserved {
            self.reserved.borrow_mut().push(self.writing[d].get());
        }
        let seen = self.points_seen[d].get() + 1;
        self.points_seen[d].set(seen);
        if d < 2 && self.triggers[d] == Some(seen) {
            self.write(ring);
        }
    }
}

impl<V: Variant> Harness<V> {
    fn new(sizes: [usize; 3], triggers: [Option<usize>; 2], first_seq: u64) -> Self {
        Harness {
            triggers,
            depth: Cell::new(0),
            points_seen: Default::default(),
            sizes,
            next_seq: Cell::new(first_seq),
            writing: Default::default(),
            reserved: RefCell::new(Vec::new()),
            refused: Cell::new(0),
            last_head: Cell::new(0),
            violations: RefCell::new(Vec::new()),
            _v: PhantomData,
        }
    }

    /// One complete write, one context deeper than the current one.
    fn write(&self, ring: &Ring<'_, Self>) {
        let d = self.depth.get();
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        self.writing[d].set(seq);
        self.points_seen[d].set(0);
        self.depth.set(d + 1);
        match write_test_record(ring, seq, self.sizes[d]) {
            Ok(()) => {}
            Err(Error::NoSpace) => self.refused.set(self.refused.get() + 1),
            Err(e) => self
                .violations
                .borrow_mut()
                .push(format!("unexpected error {e}")),
        }
        self.depth.set(d);
    }

    /// What a reader on another CPU can see at this instant.
    fn observe_head(&self, ring: &Ring<'_, Self>, point: Point) {
        let head = ring.published_head();
        if head < self.last_head.get() {
            self.violations.borrow_mut().push(format!(
                "data_head went back from {} to {head} at {point:?}",
                self.last_head.get()
            ));
        }
        self.last_head.set(head);
    }
}

/// Runs one scenario with the given triggers; returns the violations and
/// the number of points each depth's writer passed.
fn run<V: Variant>(s: &Scenario, triggers: [Option<usize>; 2]) -> (Vec<String>, [usize; 3]) {
    let (violations, points, _) = run_counting::<V>(s, triggers);
    (violations, points)
}

/// [`run`], also returning (records refused, lost reported by PERF_RECORD_LOST).
fn run_counting<V: Variant>(
    s: &Scenario,
    triggers: [Option<usize>; 2],
) -> (Vec<String>, [usize; 3], (u64, u64)) {
    let mem = RingMemory::new(1, 0);
    let first_seq = 1000;
    let ring = mem.ring_with_hook(
        RingConfig::default(),
        Harness::<V>::new(s.sizes, triggers, first_seq),
    );
    let h = ring.hook();
    for i in 0..s.prefill {
        write_test_record(&ring, i as u64, s.prefill_size).unwrap();
    }
    let mut c = mem.consumer();
    if s.consume_prefill {
        c.refresh();
        let mut scratch = vec![0u8; 65536];
        while c.next_record(&mut scratch).is_some() {}
        c.commit();
    }
    let mut refused_before = 0;
    if s.pending_lost {
        assert_eq!(write_test_record(&ring, 999, 4000), Err(Error::NoSpace));
        refused_before = 1;
    }
    h.last_head.set(ring.published_head());

    h.write(&ring); // the task-level writer, interrupted per the triggers

    let mut violations = h.violations.borrow().clone();
    if ring.published_head() != ring.head() {
        violations.push(format!(
            "data_head {} is not the head {} after every writer ended",
            ring.published_head(),
            ring.head()
        ));
    }

    // Read everything back.
    c.refresh();
    let mut scratch = vec![0u8; 65536];
    let mut seqs = Vec::new();
    let mut lost_reported = 0;
    while let Some(r) = c.next_record(&mut scratch) {
        let Ok(r) = r else {
            violations.push("malformed record".into());
            break;
        };
        if read_header(r).unwrap().type_ == record_type::LOST {
            lost_reported += u64_at(r, 16);
            continue;
        }
        match check_test_record(r) {
            Ok(seq) if seq >= first_seq => seqs.push(seq),
            Ok(_) => {}
            Err(e) => violations.push(e),
        }
    }
    let reserved = h.reserved.borrow().clone();
    if seqs != reserved {
        violations.push(format!("read {seqs:?}, reserved in order {reserved:?}"));
    }
    let refused = h.refused.get() + refused_before;
    if lost_reported + ring.pending_lost() != refused {
        violations.push(format!(
            "{refused} refused, {lost_reported} reported lost + {} pending",
            ring.pending_lost()
        ));
    }
    let points = [
        h.points_seen[0].get(),
        h.points_seen[1].get(),
        h.points_seen[2].get(),
    ];
    (violations, points, (refused, lost_reported))
}

/// Every interruption point at every depth, for every scenario; returns
/// (runs, violations).
fn sweep<V: Variant>() -> (usize, Vec<String>) {
    let mut runs = 0;
    let mut all = Vec::new();
    for s in &SCENARIOS {
        let (v, [task_points, ..]) = run::<V>(s, [None, None]);
        runs += 1;
        all.extend(
            v.into_iter()
                .map(|v| format!("{} / uninterrupted: {v}", s.name)),
        );
        assert!(
            task_points >= 8,
            "{}: the task writer passes {task_points} points",
            s.name
        );
        for i in 1..=task_points {
            // Task interrupted at point i by an IRQ writer...
            let (v, [_, irq_points, _]) = run::<V>(s, [Some(i), None]);
            runs += 1;
            all.extend(v.into_iter().map(|v| format!("{} / task@{i}: {v}", s.name)));
            // ...which is itself interrupted at each of its points by an NMI writer.
            for j in 1..=irq_points {
                let (v, _) = run::<V>(s, [Some(i), Some(j)]);
                runs += 1;
                all.extend(
                    v.into_iter()
                        .map(|v| format!("{} / task@{i} irq@{j}: {v}", s.name)),
                );
            }
        }
    }
    (runs, all)
}

#[test]
fn every_point_at_every_depth_keeps_the_invariants() {
    let (runs, violations) = sweep::<Correct>();
    assert!(
        violations.is_empty(),
        "{} violations in {runs} runs:\n{}",
        violations.len(),
        violations.join("\n")
    );
    assert!(runs > 250, "{runs} runs");
    println!("{runs} nested runs, no violation");
}

#[test]
fn the_harness_catches_a_missing_recheck() {
    let (runs, violations) = sweep::<NoRecheck>();
    assert!(
        violations.iter().any(|v| v.contains("is not the head")),
        "{runs} runs, but the missed update went unnoticed: {violations:?}"
    );
}

/// Linux commit 1b038c6e05ff: an interrupt between dropping the nest count
/// and storing `data_head` publishes a newer head that the interrupted
/// writer's store then takes back.
#[test]
fn linux_1b038c6e05ff_nest_dropped_before_data_head_is_stored() {
    let s = &SCENARIOS[0];
    // Find the task writer's EndNestDropped point under each variant.
    let (v, _) = run::<NestDropFirst>(s, [None, None]);
    assert!(v.is_empty(), "uninterrupted, the bug is invisible: {v:?}");
    let (runs, violations) = sweep::<NestDropFirst>();
    assert!(
        violations
            .iter()
            .any(|v| v.contains("data_head went back") && v.contains("EndPublished")),
        "{runs} runs, but data_head never went back: {violations:?}"
    );
    // The fixed order has no such window.
    let (_, fixed) = sweep::<Correct>();
    assert!(fixed.is_empty());
}

#[test]
fn the_scenarios_exercise_lost_records() {
    // Nearly full: some nested writers are refused, and the count shows up.
    let mut refused = 0;
    for i in 1..=20 {
        for j in 1..=20 {
            refused += run_counting::<Correct>(&SCENARIOS[3], [Some(i), Some(j)])
                .2
                .0;
        }
    }
    assert!(refused > 0, "no nested writer was ever refused");
    // Lost first: the task writer emits the PERF_RECORD_LOST.
    let (v, _, (refused, reported)) = run_counting::<Correct>(&SCENARIOS[2], [None, None]);
    assert!(v.is_empty());
    assert_eq!((refused, reported), (1, 1));
}
