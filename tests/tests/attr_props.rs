// SPDX-License-Identifier: MIT OR Apache-2.0
//! Property tests of attr copy-in through the C entry point: for random
//! buffers, sizes and readable lengths it never panics, never reads past
//! what is readable (the buffer is exactly that long), and agrees with a
//! small model of size negotiation (`perf_copy_attr`). The event checks are compared
//! with an independent model of the AUX/group rules.

use perfaux::Error;
use perfaux::PmuCaps;
use perfaux::abi::{PerfEventAttr, attr_flags as f, aux_action};
use perfaux::attr::{CopyPolicy, GroupLeader, check_event, validate_attr};
use perfaux_ffi::{perfaux_attr_copy, perfaux_event_check};
use perfaux_tests::records::u32_at;
use proptest::prelude::*;

/// What size negotiation alone decides.
#[derive(Debug, PartialEq)]
enum Expect {
    Err(Error, /* size field written back */ bool),
    /// Copied: the kernel-side image before the post-copy checks.
    Copied(Box<[u8; 136]>),
}

fn model(user: &[u8]) -> Expect {
    if user.len() < 8 {
        return Expect::Err(Error::Fault, false);
    }
    let mut size = u32_at(user, 4) as usize;
    if size == 0 {
        size = 64;
    }
    if !(64..=4096).contains(&size) {
        return Expect::Err(Error::TooBig, true);
    }
    if size > 136 {
        let visible = user.get(136..size.min(user.len())).unwrap_or(&[]);
        if visible.iter().any(|&b| b != 0) {
            return Expect::Err(Error::TooBig, true);
        }
    }
    if size > user.len() {
        return Expect::Err(Error::Fault, false);
    }
    let mut image = [0u8; 136];
    let n = size.min(136);
    image[..n].copy_from_slice(&user[..n]);
    image[4..8].copy_from_slice(&(size as u32).to_ne_bytes());
    Expect::Copied(Box::new(image))
}

/// Random user memory: a size drawn around the interesting boundaries,
/// sparse non-zero bytes (so that valid attrs are common), a readable length.
fn user_memory() -> impl Strategy<Value = Vec<u8>> {
    let size = prop_oneof![
        Just(0u32),
        1u32..64,
        64u32..=136,
        137u32..=200,
        4090u32..=4100,
        any::<u32>(),
    ];
    (
        size,
        proptest::collection::vec((0usize..4200, any::<u8>()), 0..6),
        0usize..4300,
    )
        .prop_map(|(size, pokes, len)| {
            let mut b = vec![0u8; 4300];
            for (at, v) in pokes {
                b[at] = v;
            }
            b[4..8].copy_from_slice(&size.to_ne_bytes());
            b.truncate(len);
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn attr_copy_matches_the_size_model(user in user_memory()) {
        let expected = model(&user);
        let mut mem = user.clone();
        let mut out = [0xeeu8; 136];
        // SAFETY: `mem` holds exactly `mem.len()` readable and writable bytes, `out` 136.
        let rc = unsafe { perfaux_attr_copy(mem.as_mut_ptr().cast(), mem.len(), out.as_mut_ptr().cast(), out.len()) };
        match expected {
            Expect::Err(e, written_back) => {
                prop_assert_eq!(rc, e.errno());
                prop_assert_eq!(out, [0xeeu8; 136], "out untouched on failure");
                if written_back {
                    prop_assert_eq!(&mem[4..8], &136u32.to_ne_bytes());
                    prop_assert_eq!(&mem[8..], &user[8..]);
                } else {
                    prop_assert_eq!(&mem, &user);
                }
            }
            Expect::Copied(image) => {
                prop_assert_eq!(&mem, &user, "nothing written on a good size");
                let mut attr = PerfEventAttr::from_bytes(&image);
                let checked = validate_attr(&mut attr, &CopyPolicy::default());
                match checked {
                    Ok(()) => {
                        prop_assert_eq!(rc, 0);
                        prop_assert_eq!(PerfEventAttr::from_bytes(&out), attr);
                        // Only sample_max_stack and branch_sample_type may differ from the copy.
                        for (i, (a, b)) in out.iter().zip(image.iter()).enumerate() {
                            if a != b {
                                prop_assert!((108..110).contains(&i) || (72..80).contains(&i), "byte {} changed", i);
                            }
                        }
                    }
                    Err(rule) => {
                        prop_assert_eq!(rc, rule.error().errno());
                        prop_assert_eq!(out, [0xeeu8; 136]);
                    }
                }
            }
        }
    }
}

/// An independent statement of the AUX/group rules (`perf_event_alloc`, `perf_get_aux_event`)
/// for attrs that differ only in the AUX-related fields.
fn aux_model(a: &PerfEventAttr, caps: PmuCaps, leader: Option<PmuCaps>) -> Result<(), Error> {
    let (output, pause, resume, start_paused) = (
        a.flags & f::AUX_OUTPUT != 0,
        a.aux_action & aux_action::PAUSE != 0,
        a.aux_action & aux_action::RESUME != 0,
        a.aux_action & aux_action::START_PAUSED != 0,
    );
    let has = |c: PmuCaps, bit: PmuCaps| c.bits() & bit.bits() == bit.bits();
    if output && !has(caps, PmuCaps::AUX_OUTPUT) {
        return Err(Error::NotSupported);
    }
    if output && (pause || resume) {
        return Err(Error::NotSupported);
    }
    if pause && resume {
        return Err(Error::Invalid);
    }
    if start_paused && !has(caps, PmuCaps::AUX_PAUSE) {
        return Err(Error::NotSupported);
    }
    let sibling_ok = !(leader.is_some() && a.flags & (f::PINNED | f::EXCLUSIVE) != 0);
    if !sibling_ok {
        return Err(Error::Invalid);
    }
    let needs = output || a.aux_sample_size != 0 || pause || resume;
    if !needs {
        return Ok(());
    }
    let Some(l) = leader else {
        return Err(Error::Invalid);
    };
    let leader_is_tracer = has(l, PmuCaps::AUX) && has(l, PmuCaps::ITRACE);
    let refused = (output && (a.aux_sample_size != 0 || !leader_is_tracer))
        || ((pause || resume) && !has(l, PmuCaps::AUX_PAUSE))
        || (a.aux_sample_size != 0 && !has(l, PmuCaps::SNAPSHOT_AUX));
    if refused { Err(Error::Invalid) } else { Ok(()) }
}

fn caps() -> impl Strategy<Value = PmuCaps> {
    // Only the capabilities the AUX rules read; NO_NMI keeps clocks out of it.
    (0u32..32).prop_map(|bits| {
        let pick = [
            PmuCaps::AUX,
            PmuCaps::SNAPSHOT_AUX,
            PmuCaps::AUX_PAUSE,
            PmuCaps::AUX_OUTPUT,
            PmuCaps::ITRACE,
        ];
        pick.iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .fold(PmuCaps::NO_NMI, |c, (_, p)| c | *p)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn event_check_matches_the_aux_model(
        flags in prop::sample::subsequence(vec![f::AUX_OUTPUT, f::PINNED, f::EXCLUSIVE], 0..=3),
        action in 0u32..8,
        sample_size in prop_oneof![Just(0u32), any::<u32>()],
        caps in caps(),
        leader in prop::option::of(caps()),
    ) {
        let mut a = PerfEventAttr::new(136);
        a.flags = flags.iter().fold(0, |acc, b| acc | b);
        a.aux_action = action;
        a.aux_sample_size = sample_size;
        let leader_attr = PerfEventAttr::new(136);
        let want = aux_model(&a, caps, leader);
        let got = check_event(&a, caps, leader.map(|c| GroupLeader::new(&leader_attr, c))).map_err(Error::from);
        prop_assert_eq!(got, want);
        // The C entry point agrees.
        let bytes = a.to_bytes();
        let leader_bytes = leader_attr.to_bytes();
        let leader_ptr = if leader.is_some() { leader_bytes.as_ptr().cast() } else { std::ptr::null() };
        // SAFETY: both pointers are null or point at 136 readable bytes.
        let rc = unsafe { perfaux_event_check(bytes.as_ptr().cast(), caps.bits(), leader_ptr, leader.unwrap_or_default().bits()) };
        prop_assert_eq!(rc, want.map_or_else(|e| e.errno(), |()| 0));
    }

    #[test]
    fn event_check_never_panics_on_any_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 136),
        leader in proptest::option::of(proptest::collection::vec(any::<u8>(), 136)),
        caps in any::<u32>(),
        leader_caps in any::<u32>(),
    ) {
        let leader_ptr = leader.as_ref().map_or(std::ptr::null(), |l| l.as_ptr().cast());
        // SAFETY: both pointers are null or point at 136 readable bytes.
        let rc = unsafe { perfaux_event_check(bytes.as_ptr().cast(), caps, leader_ptr, leader_caps) };
        prop_assert!(rc == 0 || Error::from_errno(rc).is_some());
        if PmuCaps::from_bits(caps).is_none() || PmuCaps::from_bits(leader_caps).is_none() {
            prop_assert_eq!(rc, Error::Invalid.errno());
        }
    }
}

/// `perfaux_attr_copy` for callers passing null or valid pointers.
fn copy(uattr: *mut u8, readable: usize, out: *mut u8, out_len: usize) -> i32 {
    // SAFETY: every caller below passes null or pointers valid for the lengths given.
    unsafe { perfaux_attr_copy(uattr.cast(), readable, out.cast(), out_len) }
}

/// `perfaux_event_check` for callers passing null or 136-byte attrs.
fn check(attr: *const u8, caps: u32, leader: *const u8, leader_caps: u32) -> i32 {
    // SAFETY: every caller below passes null or pointers to 136 readable bytes.
    unsafe { perfaux_event_check(attr.cast(), caps, leader.cast(), leader_caps) }
}

#[test]
fn c_entry_points_refuse_bad_arguments() {
    let mut attr = PerfEventAttr::new(136).to_bytes();
    let mut out = [0u8; 136];
    let (null, cnull) = (std::ptr::null_mut::<u8>(), std::ptr::null::<u8>());
    let a = attr.as_mut_ptr();
    let o = out.as_mut_ptr();
    assert_eq!(copy(null, 136, o, 136), Error::Fault.errno());
    assert_eq!(copy(a, 7, o, 136), Error::Fault.errno());
    assert_eq!(copy(a, 136, null, 136), Error::Invalid.errno());
    assert_eq!(copy(a, 136, o, 135), Error::Invalid.errno());
    assert_eq!(
        copy(a, 136, a.wrapping_add(8), 136),
        Error::Invalid.errno(),
        "out overlaps the attr"
    );
    assert_eq!(copy(a, 136, o, 136), 0);
    // A huge readable length is clamped to one page, never turned into a slice past it.
    let mut big = vec![0u8; 4096];
    big[4..8].copy_from_slice(&136u32.to_ne_bytes());
    assert_eq!(copy(big.as_mut_ptr(), 4096, o, 136), 0);

    assert_eq!(check(cnull, 0, cnull, 0), Error::Invalid.errno());
    assert_eq!(check(o, 1 << 31, cnull, 0), Error::Invalid.errno());
    assert_eq!(check(o, 0, cnull, 1 << 20), Error::Invalid.errno());
    // An attr that did not go through perfaux_attr_copy is checked again.
    let mut raw = PerfEventAttr::new(136);
    raw.reserved_2 = 1;
    assert_eq!(
        check(raw.to_bytes().as_ptr(), 0, cnull, 0),
        Error::Invalid.errno()
    );
    // So is a leader attr.
    assert_eq!(
        check(o, 0, raw.to_bytes().as_ptr(), 0),
        Error::Invalid.errno()
    );
    // Unaligned attrs are fine.
    let mut shifted = [0u8; 137];
    shifted[1..].copy_from_slice(&out);
    assert_eq!(check(shifted.as_ptr().wrapping_add(1), 0, cnull, 0), 0);
}
