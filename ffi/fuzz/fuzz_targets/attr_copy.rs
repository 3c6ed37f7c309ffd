// SPDX-License-Identifier: MIT OR Apache-2.0
//! Fuzzes `perfaux_attr_copy` and `perfaux_event_check` with arbitrary user
//! memory: the input is the readable attr bytes (so any read past them is
//! caught by the sanitizer), followed by nothing. Invariants: no crash, the
//! result is 0 or a known negative errno, `out` is written only on success,
//! and only the size field of the input changes (only on -E2BIG).
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfaux_ffi::{perfaux_attr_copy, perfaux_event_check};

fuzz_target!(|data: &[u8]| {
    let mut user = data.to_vec();
    let mut out = [0x5au8; 136];
    // SAFETY: `user` holds exactly `user.len()` bytes, `out` 136; both are ours.
    let rc = unsafe { perfaux_attr_copy(user.as_mut_ptr().cast(), user.len(), out.as_mut_ptr().cast(), out.len()) };
    assert!(rc <= 0);
    assert!(matches!(-rc, 0 | 7 | 13 | 14 | 22 | 38), "errno {rc}");
    if rc != 0 {
        assert_eq!(out, [0x5au8; 136]);
    }
    for (i, (a, b)) in user.iter().zip(data).enumerate() {
        assert!(a == b || (rc == -7 && (4..8).contains(&i)), "byte {i} changed");
    }
    if rc == 0 {
        let caps = data.first().copied().unwrap_or(0) as u32 & 0x7ff;
        // SAFETY: `out` holds a 136-byte attr; the leader is the same attr.
        let rc = unsafe { perfaux_event_check(out.as_ptr().cast(), caps, out.as_ptr().cast(), caps) };
        assert!(matches!(-rc, 0 | 22 | 95), "errno {rc}");
    }
});
