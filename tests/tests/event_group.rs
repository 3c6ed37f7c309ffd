// SPDX-License-Identifier: MIT OR Apache-2.0
//! The event layer: groups with an AUX leader, the overflow flow, states
//! and CPUs, output redirection, the leader going away
//!, inherited children writing through their parents, two
//! samplers in one NMI, ITRACE_START, and AUX pause/resume (`perf_event_aux_pause`).

use std::cell::{Cell, RefCell};

use perfaux::abi::{PerfEventAttr, attr_flags, aux_action, record_type, sample_type as st};
use perfaux::attr::Rule;
use perfaux::aux::{AuxArea, AuxConfig};
use perfaux::event::{Buffer, Event, EventConfig, EventState};
use perfaux::pmu::{EventInfo, Platform, Pmu, ef};
use perfaux::ring::{OutputSink, Ring, RingConfig, read_header};
use perfaux::sample::{IrqMask, SampleData, SnapshotAux};
use perfaux::{Error, PmuCaps};
use perfaux_tests::group::{open, open_child, try_open};
use perfaux_tests::mem::{AuxMemory, RingMemory};
use perfaux_tests::pmu::TestPmu;
use perfaux_tests::records::{sample_aux, u64_at};

struct TestPlatform {
    cpu: Cell<u32>,
    clock: Cell<u64>,
    masked: Cell<u32>,
}

impl IrqMask for TestPlatform {
    fn save(&self) -> usize {
        self.masked.set(self.masked.get() + 1);
        0
    }
    fn restore(&self, _: usize) {}
}

impl Platform for TestPlatform {
    fn cpu(&self) -> u32 {
        self.cpu.get()
    }
    fn clock(&self) -> u64 {
        self.clock.set(self.clock.get() + 1);
        self.clock.get()
    }
    fn current(&self) -> (u32, u32) {
        (100, 101)
    }
}

fn platform() -> TestPlatform {
    TestPlatform {
        cpu: Cell::new(0),
        clock: Cell::new(1000),
        masked: Cell::new(0),
    }
}

/// A software PMU (cpu-clock-like).
#[derive(Default)]
struct SwPmu;

impl Pmu for SwPmu {
    fn caps(&self) -> PmuCaps {
        PmuCaps::NO_NMI
    }
    fn add(&self, _: &EventInfo<'_>, _: u32) -> perfaux::Result<()> {
        Ok(())
    }
    fn del(&self, _: &EventInfo<'_>, _: u32) {}
    fn start(&self, _: &EventInfo<'_>, _: u32) {}
    fn stop(&self, _: &EventInfo<'_>, _: u32) {}
}

/// A PT-like AUX PMU around the test PMU's snapshot.
struct AuxPmu<'x, 'a> {
    tracer: TestPmu<'x, 'a>,
    calls: RefCell<Vec<&'static str>>,
}

impl Pmu for AuxPmu<'_, '_> {
    fn caps(&self) -> PmuCaps {
        PmuCaps::AUX
            | PmuCaps::SNAPSHOT_AUX
            | PmuCaps::ITRACE
            | PmuCaps::EXCLUSIVE
            | PmuCaps::AUX_PAUSE
    }
    fn add(&self, info: &EventInfo<'_>, flags: u32) -> perfaux::Result<()> {
        self.calls
            .borrow_mut()
            .push(match (flags & ef::START != 0, info.aux_paused) {
                (true, false) => "add+start",
                (true, true) => "add+start (paused)",
                (false, _) => "add",
            });
        Ok(())
    }
    fn del(&self, _: &EventInfo<'_>, _: u32) {
        self.calls.borrow_mut().push("del");
    }
    fn start(&self, _: &EventInfo<'_>, flags: u32) {
        self.calls.borrow_mut().push(if flags & ef::RESUME != 0 {
            "resume"
        } else {
            "start"
        });
    }
    fn stop(&self, _: &EventInfo<'_>, flags: u32) {
        self.calls.borrow_mut().push(if flags & ef::PAUSE != 0 {
            "pause"
        } else {
            "stop"
        });
    }
    fn snapshot_aux(
        &self,
        _: &EventInfo<'_>,
        sink: &mut dyn OutputSink,
        size: u64,
    ) -> perfaux::Result<u64> {
        self.calls.borrow_mut().push("snapshot");
        self.tracer.snapshot_aux(sink, size)
    }
}

fn pt_attr() -> PerfEventAttr {
    let mut a = PerfEventAttr::new(136);
    a.type_ = 8;
    a.sample_type = st::TID | st::TIME | st::IDENTIFIER;
    a.flags = attr_flags::SAMPLE_ID_ALL;
    a
}

fn sampler_attr(aux_sample_size: u32) -> PerfEventAttr {
    let mut a = PerfEventAttr::new(136);
    a.type_ = 1;
    a.sample_period = 10_000;
    a.sample_type = st::TID | st::TIME | st::AUX;
    a.aux_sample_size = aux_sample_size;
    a
}

fn data(time: u64) -> SampleData<'static> {
    SampleData {
        pid: 100,
        tid: 101,
        time,
        ..SampleData::default()
    }
}

fn samples(mem: &RingMemory) -> Vec<Vec<u8>> {
    mem.records()
        .into_iter()
        .filter(|r| read_header(r).unwrap().type_ == record_type::SAMPLE)
        .collect()
}

/// The AUX size word of a TID|TIME|AUX sample, and the bytes after it.
fn aux_of(r: &[u8]) -> (u64, &[u8]) {
    sample_aux(r, st::TID | st::TIME | st::AUX)
}

struct World {
    mem: RingMemory,
    aux: AuxMemory,
}

impl World {
    fn new() -> World {
        World {
            mem: RingMemory::new(8, 0),
            aux: AuxMemory::new(4, 0),
        }
    }
    fn ring(&self) -> Ring<'_> {
        self.mem.ring(RingConfig::default())
    }
    fn area(&self) -> AuxArea<'_> {
        self.mem.aux_area(
            &self.aux,
            AuxConfig {
                overwrite: true,
                ..AuxConfig::default()
            },
        )
    }
    fn newest(&self, end: u64, n: u64) -> Vec<u8> {
        (0..n)
            .map(|i| self.aux.byte((end - n + i) as usize))
            .collect()
    }
}

#[test]
fn aux_sampling_through_a_group() {
    let w = World::new();
    let ring = w.ring();
    let area = w.area();
    let pt = AuxPmu {
        tracer: TestPmu::new(&area),
        calls: RefCell::new(Vec::new()),
    };
    pt.tracer.trace(
        &w.aux,
        &(0..10_000u32).map(|i| (i % 253) as u8).collect::<Vec<_>>(),
    );
    let sw = SwPmu;
    let buffer = Buffer {
        ring: &ring,
        aux: Some(&area),
    };
    let p = platform();

    let leader = open(pt_attr(), &pt, 1, None);
    leader.set_buffer(&buffer);
    let sampler = open(sampler_attr(4096), &sw, 2, Some(&leader));
    sampler.join_group();
    assert!(
        std::ptr::eq(sampler.aux_event().unwrap(), &leader),
        "linked to its AUX leader"
    );
    sampler.set_output(&leader).unwrap();
    assert_eq!(
        sampler.set_output(&leader),
        Err(Error::Invalid),
        "already redirected"
    );

    leader.sched_in(&p).unwrap();
    assert_eq!(
        (leader.state(), sampler.state(), sampler.oncpu()),
        (EventState::Active, EventState::Active, 0)
    );
    assert_eq!(*pt.calls.borrow(), ["add+start"]);

    let layout = sampler.overflow(&p, &data(1)).unwrap();
    assert_eq!(layout.aux_size, 4096);
    assert_eq!(p.masked.get(), 1, "snapshot_aux ran with interrupts masked");
    let recs = w.mem.records();
    assert_eq!(
        read_header(&recs[0]).unwrap().type_,
        record_type::ITRACE_START,
        "emitted before the PT event's first add"
    );
    let sample = &recs[1];
    assert_eq!(aux_of(sample).0, 4096);
    assert!(aux_of(sample).1 == w.newest(10_000, 4096));

    // Scheduled out and in again: no second ITRACE_START.
    leader.sched_out();
    assert_eq!(sampler.state(), EventState::Inactive);
    leader.sched_in(&p).unwrap();
    assert!(w.mem.records().is_empty());
}

#[test]
fn leader_inactive_elsewhere_or_closed() {
    let w = World::new();
    let ring = w.ring();
    let area = w.area();
    let pt = AuxPmu {
        tracer: TestPmu::new(&area),
        calls: RefCell::new(Vec::new()),
    };
    pt.tracer.trace(&w.aux, &[7u8; 9000]);
    let sw = SwPmu;
    let buffer = Buffer {
        ring: &ring,
        aux: Some(&area),
    };
    let p = platform();
    let leader = open(pt_attr(), &pt, 1, None);
    leader.set_buffer(&buffer);
    let sampler = open(sampler_attr(512), &sw, 2, Some(&leader));
    sampler.join_group();
    sampler.set_output(&leader).unwrap();

    // Not scheduled: the leader is not ACTIVE.
    assert_eq!(sampler.overflow(&p, &data(1)).unwrap().aux_size, 0);
    leader.sched_in(&p).unwrap();
    // Active, but on CPU 0 while the PMI runs on CPU 1.
    p.cpu.set(1);
    assert_eq!(sampler.overflow(&p, &data(2)).unwrap().aux_size, 0);
    p.cpu.set(0);
    assert_eq!(sampler.overflow(&p, &data(3)).unwrap().aux_size, 512);
    assert_eq!(
        pt.calls
            .borrow()
            .iter()
            .filter(|c| **c == "snapshot")
            .count(),
        1,
        "the PMU was asked once"
    );

    // The leader closes; the sampler goes to ERROR and loses the link.
    leader.close();
    assert_eq!(sampler.state(), EventState::Error);
    assert!(sampler.aux_event().is_none());
    sampler.enable();
    assert_eq!(sampler.state(), EventState::Inactive);
    assert_eq!(
        sampler.overflow(&p, &data(4)).unwrap().aux_size,
        0,
        "runs unlinked: AUX size 0"
    );
}

#[test]
fn aux_sample_size_needs_the_leader_at_open() {
    let sw = SwPmu;
    let e = try_open(sampler_attr(8), &sw, 1, None);
    assert_eq!(e.err(), Some(Rule::AuxEventWithoutLeader));
    let plain = open(sampler_attr(0), &sw, 1, None);
    let under_sw = try_open(sampler_attr(8), &sw, 2, Some(&plain));
    assert_eq!(under_sw.err(), Some(Rule::AuxLeaderWithoutSnapshot));
}

#[test]
fn set_output_rules() {
    let w = World::new();
    let ring = w.ring();
    let area = w.area();
    let pt1 = AuxPmu {
        tracer: TestPmu::new(&area),
        calls: RefCell::new(Vec::new()),
    };
    let w2 = World::new();
    let area2 = w2.area();
    let pt2 = AuxPmu {
        tracer: TestPmu::new(&area2),
        calls: RefCell::new(Vec::new()),
    };
    let sw = SwPmu;
    let buffer = Buffer {
        ring: &ring,
        aux: Some(&area),
    };
    let a = open(pt_attr(), &pt1, 1, None);
    a.set_buffer(&buffer);
    let b = open(pt_attr(), &pt2, 2, None);
    assert_eq!(
        b.set_output(&a),
        Err(Error::Invalid),
        "two AUX events of different PMUs"
    );
    let same_pmu = open(pt_attr(), &pt1, 3, None);
    assert_eq!(same_pmu.set_output(&a), Ok(()));
    assert_eq!(a.set_output(&a), Err(Error::Invalid), "itself");
    let other_cpu = Event::open(EventConfig {
        attr: sampler_attr(0),
        pmu: &sw,
        id: 4,
        cpu: 1,
        leader: None,
        parent: None,
    })
    .unwrap();
    assert_eq!(other_cpu.set_output(&a), Err(Error::Invalid), "another CPU");
    let mut backward = sampler_attr(0);
    backward.flags |= attr_flags::WRITE_BACKWARD;
    let bw = open(backward, &sw, 5, None);
    assert_eq!(
        bw.set_output(&a),
        Err(Error::Invalid),
        "mixed write_backward"
    );
    let mut clocked = sampler_attr(0);
    clocked.flags |= attr_flags::USE_CLOCKID;
    clocked.clockid = 1;
    let ck = open(clocked, &sw, 6, None);
    assert_eq!(ck.set_output(&a), Err(Error::Invalid), "another clock");
    let no_buffer = open(sampler_attr(0), &sw, 7, None);
    let c = open(sampler_attr(0), &sw, 8, None);
    assert_eq!(
        c.set_output(&no_buffer),
        Err(Error::Invalid),
        "target without a buffer"
    );
}

#[test]
fn inherited_children_write_through_their_parents() {
    let w = World::new();
    let ring = w.ring();
    let area = w.area();
    let pt = AuxPmu {
        tracer: TestPmu::new(&area),
        calls: RefCell::new(Vec::new()),
    };
    pt.tracer.trace(
        &w.aux,
        &(0..7000u32).map(|i| (i % 241) as u8).collect::<Vec<_>>(),
    );
    let sw = SwPmu;
    let buffer = Buffer {
        ring: &ring,
        aux: Some(&area),
    };
    let p = platform();
    let mut inherit_pt = pt_attr();
    inherit_pt.flags |= attr_flags::INHERIT;
    let mut inherit_sampler = sampler_attr(1024);
    inherit_sampler.flags |= attr_flags::INHERIT;
    inherit_sampler.sample_type |= st::STREAM_ID;
    let parent_leader = open(inherit_pt, &pt, 1, None);
    parent_leader.set_buffer(&buffer);
    let parent_sampler = open(inherit_sampler, &sw, 2, Some(&parent_leader));
    parent_sampler.join_group();
    parent_sampler.set_output(&parent_leader).unwrap();
    // The child group, linked to the child leader, owning no buffer.
    let child_leader = open_child(inherit_pt, &pt, 11, None, &parent_leader);
    let child_sampler = open_child(
        inherit_sampler,
        &sw,
        12,
        Some(&child_leader),
        &parent_sampler,
    );
    child_sampler.join_group();
    assert!(std::ptr::eq(
        child_sampler.aux_event().unwrap(),
        &child_leader
    ));
    child_leader.sched_in(&p).unwrap();
    w.mem.records(); // drop the ITRACE_START
    let layout = child_sampler.overflow(&p, &data(5)).unwrap();
    assert_eq!(layout.aux_size, 1024);
    let s = samples(&w.mem);
    assert_eq!(s.len(), 1, "the child's sample is in the parent's ring");
    // TID|TIME|STREAM_ID|AUX: the AUX size word is after the stream id.
    let aux_size = u64_at(&s[0], 32);
    assert_eq!(aux_size, 1024);
    assert!(
        s[0][40..] == w.newest(7000, 1024)[..],
        "the same bytes as without inheritance"
    );
}

#[test]
fn two_samplers_in_one_nmi_take_two_snapshots() {
    let w = World::new();
    let ring = w.ring();
    let area = w.area();
    let pt = AuxPmu {
        tracer: TestPmu::new(&area),
        calls: RefCell::new(Vec::new()),
    };
    pt.tracer.trace(
        &w.aux,
        &(0..5000u32).map(|i| (i % 199) as u8).collect::<Vec<_>>(),
    );
    let sw = SwPmu;
    let buffer = Buffer {
        ring: &ring,
        aux: Some(&area),
    };
    let p = platform();
    let leader = open(pt_attr(), &pt, 1, None);
    leader.set_buffer(&buffer);
    let s1 = open(sampler_attr(256), &sw, 2, Some(&leader));
    let s2 = open(sampler_attr(2048), &sw, 3, Some(&leader));
    s1.join_group();
    s2.join_group();
    s1.set_output(&leader).unwrap();
    s2.set_output(&leader).unwrap();
    leader.sched_in(&p).unwrap();
    w.mem.records();
    // One NMI, both counters overflowed.
    s1.overflow(&p, &data(1)).unwrap();
    s2.overflow(&p, &data(2)).unwrap();
    assert_eq!(
        pt.calls
            .borrow()
            .iter()
            .filter(|c| **c == "snapshot")
            .count(),
        2
    );
    let s = samples(&w.mem);
    assert_eq!((aux_of(&s[0]).0, aux_of(&s[1]).0), (256, 2048));
    assert!(aux_of(&s[0]).1 == w.newest(5000, 256));
    assert!(aux_of(&s[1]).1 == w.newest(5000, 2048));
}

#[test]
fn aux_pause_and_resume_around_the_sample() {
    let w = World::new();
    let ring = w.ring();
    let area = w.area();
    let pt = AuxPmu {
        tracer: TestPmu::new(&area),
        calls: RefCell::new(Vec::new()),
    };
    let sw = SwPmu;
    let buffer = Buffer {
        ring: &ring,
        aux: Some(&area),
    };
    let p = platform();
    let leader = open(pt_attr(), &pt, 1, None);
    leader.set_buffer(&buffer);
    let mut pausing = sampler_attr(64);
    pausing.aux_action = aux_action::PAUSE;
    let mut resuming = sampler_attr(0);
    resuming.sample_type = st::TID;
    resuming.aux_action = aux_action::RESUME;
    let pauser = open(pausing, &sw, 2, Some(&leader));
    let resumer = open(resuming, &sw, 3, Some(&leader));
    pauser.join_group();
    resumer.join_group();
    pauser.set_output(&leader).unwrap();
    resumer.set_output(&leader).unwrap();
    leader.sched_in(&p).unwrap();
    pt.calls.borrow_mut().clear();
    pauser.overflow(&p, &data(1)).unwrap();
    assert_eq!(
        *pt.calls.borrow(),
        ["pause", "snapshot"],
        "paused before the sample"
    );
    pauser.overflow(&p, &data(2)).unwrap();
    assert_eq!(
        *pt.calls.borrow(),
        ["pause", "snapshot", "snapshot"],
        "already paused: no second stop"
    );
    resumer.overflow(&p, &data(3)).unwrap();
    assert_eq!(
        pt.calls.borrow().last(),
        Some(&"resume"),
        "resumed after the sample"
    );
    // aux_start_paused: the leader is added and started as any other (as
    // `event_sched_in`), but paused: the PMU must leave the trace off.
    let mut start_paused = pt_attr();
    start_paused.aux_action = aux_action::START_PAUSED;
    let w2 = World::new();
    let area2 = w2.area();
    let pt2 = AuxPmu {
        tracer: TestPmu::new(&area2),
        calls: RefCell::new(Vec::new()),
    };
    let l2 = open(start_paused, &pt2, 9, None);
    l2.sched_in(&p).unwrap();
    assert_eq!(*pt2.calls.borrow(), ["add+start (paused)"]);
}

#[test]
fn a_refused_sample_counts_lost_and_spares_the_pmu() {
    let w = World {
        mem: RingMemory::new(1, 0),
        aux: AuxMemory::new(4, 0),
    };
    let ring = w.ring();
    let area = w.area();
    let pt = AuxPmu {
        tracer: TestPmu::new(&area),
        calls: RefCell::new(Vec::new()),
    };
    let sw = SwPmu;
    let buffer = Buffer {
        ring: &ring,
        aux: Some(&area),
    };
    let p = platform();
    let leader = open(pt_attr(), &pt, 1, None);
    leader.set_buffer(&buffer);
    let sampler = open(sampler_attr(3000), &sw, 2, Some(&leader));
    sampler.join_group();
    sampler.set_output(&leader).unwrap();
    leader.sched_in(&p).unwrap();
    sampler.overflow(&p, &data(1)).unwrap();
    assert_eq!(sampler.overflow(&p, &data(2)).err(), Some(Error::NoSpace));
    assert_eq!(sampler.lost_samples(), 1);
    assert_eq!(
        pt.calls
            .borrow()
            .iter()
            .filter(|c| **c == "snapshot")
            .count(),
        1
    );
    // An event without any buffer: ENOSPC, nothing counted.
    let lone = open(sampler_attr(0), &sw, 3, None);
    assert_eq!(lone.overflow(&p, &data(3)).err(), Some(Error::NoSpace));
    assert_eq!(lone.lost_samples(), 0);
}

#[test]
fn group_membership() {
    let w = World::new();
    let ring = w.ring();
    let area = w.area();
    let pt = AuxPmu {
        tracer: TestPmu::new(&area),
        calls: RefCell::new(Vec::new()),
    };
    pt.tracer.trace(&w.aux, &[1u8; 4096]);
    let sw = SwPmu;
    let buffer = Buffer {
        ring: &ring,
        aux: Some(&area),
    };
    let p = platform();
    let leader = open(pt_attr(), &pt, 1, None);
    leader.set_buffer(&buffer);
    let sibling = open(sampler_attr(0), &sw, 2, Some(&leader));
    sibling.join_group();
    // Group_fd names a sibling.
    let r = try_open(sampler_attr(0), &sw, 3, Some(&sibling));
    assert_eq!(r.err(), Some(Rule::LeaderNotGroupLeader));
    // ... and that comes before the AUX leader link's own refusal.
    let r = try_open(sampler_attr(64), &sw, 3, Some(&sibling));
    assert_eq!(r.err(), Some(Rule::LeaderNotGroupLeader));
    // Another CPU; the clock is checked first.
    let r = Event::open(EventConfig {
        attr: sampler_attr(64),
        pmu: &sw,
        id: 4,
        cpu: 1,
        leader: Some(&leader),
        parent: None,
    });
    assert_eq!(r.err(), Some(Rule::GroupCpuMismatch));
    let mut clocked = sampler_attr(64);
    clocked.flags |= attr_flags::USE_CLOCKID;
    clocked.clockid = 1;
    let r = Event::open(EventConfig {
        attr: clocked,
        pmu: &sw,
        id: 4,
        cpu: 1,
        leader: Some(&leader),
        parent: None,
    });
    assert_eq!(r.err(), Some(Rule::GroupClockMismatch));
    // aux_sample_size without PERF_SAMPLE_AUX opens and links; the
    // samples carry no AUX field.
    let mut no_aux_bit = sampler_attr(4096);
    no_aux_bit.sample_type = st::TID | st::TIME;
    let s = open(no_aux_bit, &sw, 5, Some(&leader));
    s.join_group();
    s.set_output(&leader).unwrap();
    assert!(s.aux_event().is_some());
    leader.sched_in(&p).unwrap();
    w.mem.records();
    assert_eq!(s.overflow(&p, &data(1)).unwrap().size, 24);
    assert_eq!(
        pt.calls
            .borrow()
            .iter()
            .filter(|c| **c == "snapshot")
            .count(),
        0
    );
}

/// An AUX PMU that needs one contiguous block.
struct NoSgPmu {
    setups: Cell<u32>,
}

impl Pmu for NoSgPmu {
    fn caps(&self) -> PmuCaps {
        PmuCaps::AUX | PmuCaps::AUX_NO_SG
    }
    fn add(&self, _: &EventInfo<'_>, _: u32) -> perfaux::Result<()> {
        Ok(())
    }
    fn del(&self, _: &EventInfo<'_>, _: u32) {}
    fn start(&self, _: &EventInfo<'_>, _: u32) {}
    fn stop(&self, _: &EventInfo<'_>, _: u32) {}
    fn setup_aux(&self, _: &EventInfo<'_>, _: &[*mut u8], _: bool) -> perfaux::Result<()> {
        self.setups.set(self.setups.get() + 1);
        Ok(())
    }
}

#[test]
fn setup_aux_rules() {
    let sw = SwPmu;
    let e = open(sampler_attr(0), &sw, 1, None);
    let pages = AuxMemory::new(4, 2);
    assert_eq!(
        e.setup_aux(pages.pages(), true),
        Err(Error::NotSupported),
        "no AUX area on a software PMU"
    );
    let nosg = NoSgPmu {
        setups: Cell::new(0),
    };
    let e = open(pt_attr(), &nosg, 2, None);
    assert_eq!(
        e.setup_aux(pages.pages(), true),
        Ok(()),
        "one block of 4 pages"
    );
    // The same pages out of order: not one block.
    let p = pages.pages();
    let scattered = [p[0], p[2], p[1], p[3]];
    assert_eq!(
        e.setup_aux(&scattered, true),
        Err(Error::NoMemory),
        "not one block in overwrite mode"
    );
    assert_eq!(
        e.setup_aux(&scattered, false),
        Ok(()),
        "writable mode may be scattered"
    );
    assert_eq!(nosg.setups.get(), 2);
}

#[test]
fn a_sample_names_its_task_time_ids_and_cpu_as_perf_prepare_sample() {
    // TID, TIME, ID, STREAM_ID, CPU and IDENTIFIER come from the event and
    // the platform, whatever the PMI's SampleData says: an inherited child
    // writes its parent's id as ID/IDENTIFIER and its own as STREAM_ID.
    let w = World::new();
    let ring = w.ring();
    let sw = SwPmu;
    let buffer = Buffer {
        ring: &ring,
        aux: None,
    };
    let p = platform();
    p.cpu.set(0);
    let mut attr = PerfEventAttr::new(136);
    attr.type_ = 1;
    attr.sample_period = 1;
    attr.flags = attr_flags::INHERIT;
    attr.sample_type =
        st::IDENTIFIER | st::TID | st::TIME | st::ID | st::STREAM_ID | st::CPU | st::PERIOD;
    let parent = open(attr, &sw, 40, None);
    parent.set_buffer(&buffer);
    let child = open_child(attr, &sw, 41, None, &parent);
    child.sched_in(&p).unwrap();
    let lies = SampleData {
        pid: 1,
        tid: 2,
        time: 3,
        id: 4,
        stream_id: 5,
        cpu: 6,
        period: 777,
        ..SampleData::default()
    };
    child.overflow(&p, &lies).unwrap();
    let s = samples(&w.mem);
    let word = |i: usize| u64_at(&s[0], 8 + 8 * i);
    assert_eq!(word(0), 40, "IDENTIFIER: the primary (parent's) id");
    assert_eq!(word(1), 100 | (101 << 32), "TID: the platform's task");
    assert!(word(2) > 1000, "TIME: the platform's clock");
    assert_eq!(word(3), 40, "ID: the primary id");
    assert_eq!(word(4), 41, "STREAM_ID: the event's own id");
    assert_eq!(word(5), 0, "CPU: the platform's");
    assert_eq!(word(6), 777, "PERIOD: the PMI's");
}

#[test]
fn a_closed_sibling_leaves_the_group() {
    // `perf_group_detach`: the group is scheduled without it afterwards,
    // whatever its position in the sibling list.
    let w = World::new();
    let ring = w.ring();
    let area = w.area();
    let pt = AuxPmu {
        tracer: TestPmu::new(&area),
        calls: RefCell::new(Vec::new()),
    };
    struct Counter {
        calls: RefCell<Vec<u64>>,
    }
    impl Pmu for Counter {
        fn caps(&self) -> PmuCaps {
            PmuCaps::NO_NMI
        }
        fn add(&self, e: &EventInfo<'_>, _: u32) -> perfaux::Result<()> {
            self.calls.borrow_mut().push(e.id);
            Ok(())
        }
        fn del(&self, _: &EventInfo<'_>, _: u32) {}
        fn start(&self, _: &EventInfo<'_>, _: u32) {}
        fn stop(&self, _: &EventInfo<'_>, _: u32) {}
    }
    let counter = Counter {
        calls: RefCell::new(Vec::new()),
    };
    let buffer = Buffer {
        ring: &ring,
        aux: Some(&area),
    };
    let p = platform();
    let leader = open(pt_attr(), &pt, 1, None);
    leader.set_buffer(&buffer);
    let open = |id| open(sampler_attr(0), &counter, id, Some(&leader));
    let (a, b, c) = (open(2), open(3), open(4));
    for e in [&a, &b, &c] {
        e.join_group();
    }
    leader.sched_in(&p).unwrap();
    assert_eq!(
        *counter.calls.borrow(),
        [2, 3, 4],
        "the siblings added in the order they joined (list_add_tail)"
    );
    leader.sched_out();
    b.close(); // the middle of the list
    counter.calls.borrow_mut().clear();
    leader.sched_in(&p).unwrap();
    assert_eq!(
        *counter.calls.borrow(),
        [2, 4],
        "the closed sibling stays off"
    );
    assert_eq!(b.state(), EventState::Off);
    leader.sched_out();
    c.close(); // the tail of the list (joined last)
    a.close(); // the head
    counter.calls.borrow_mut().clear();
    leader.sched_in(&p).unwrap();
    assert!(counter.calls.borrow().is_empty(), "no sibling left");
}

/// `group_sched_in`: a group runs whole or not at all. A sibling the PMU
/// refuses takes the siblings scheduled before it and the leader off again
/// (each `add` undone by a `del`), the siblings after it are never added,
/// and once the PMU accepts, the whole group runs.
#[test]
fn a_refused_sibling_takes_the_whole_group_off() {
    struct Picky {
        refuse: Cell<Option<u64>>,
        calls: RefCell<Vec<(&'static str, u64)>>,
    }
    impl Pmu for Picky {
        fn caps(&self) -> PmuCaps {
            PmuCaps::NO_NMI
        }
        fn add(&self, e: &EventInfo<'_>, _: u32) -> perfaux::Result<()> {
            if self.refuse.get() == Some(e.id) {
                return Err(Error::NoSpace);
            }
            self.calls.borrow_mut().push(("add", e.id));
            Ok(())
        }
        fn del(&self, e: &EventInfo<'_>, _: u32) {
            self.calls.borrow_mut().push(("del", e.id));
        }
        fn start(&self, _: &EventInfo<'_>, _: u32) {}
        fn stop(&self, _: &EventInfo<'_>, _: u32) {}
    }
    let pmu = Picky {
        refuse: Cell::new(Some(3)),
        calls: RefCell::new(Vec::new()),
    };
    let p = platform();
    let leader: Event<'_> = open(sampler_attr(0), &pmu, 1, None);
    let (a, b, c) = (
        open(sampler_attr(0), &pmu, 2, Some(&leader)),
        open(sampler_attr(0), &pmu, 3, Some(&leader)),
        open(sampler_attr(0), &pmu, 4, Some(&leader)),
    );
    for e in [&a, &b, &c] {
        e.join_group();
    }
    assert_eq!(leader.sched_in(&p), Err(Error::NoSpace));
    assert_eq!(
        *pmu.calls.borrow(),
        [("add", 1), ("add", 2), ("del", 2), ("del", 1)],
        "the sibling before the refused one, then the leader, undone"
    );
    for e in [&leader, &a, &b, &c] {
        assert_eq!(e.state(), EventState::Inactive);
    }
    pmu.calls.borrow_mut().clear();
    pmu.refuse.set(None);
    leader.sched_in(&p).unwrap();
    assert_eq!(
        *pmu.calls.borrow(),
        [("add", 1), ("add", 2), ("add", 3), ("add", 4)]
    );
    for e in [&leader, &a, &b, &c] {
        assert_eq!(e.state(), EventState::Active);
    }
}
