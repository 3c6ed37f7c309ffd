// SPDX-License-Identifier: MIT OR Apache-2.0
//! Where the PT driver puts a writable buffer's STOP marker
//! (`pt_buffer_reset_markers`), for every head and space a transaction can
//! have: the tracer never writes past the space the transaction has (which
//! would overwrite the consumer's unread data), and stops less than a page
//! short of it. A scripted AUX output hands the driver each transaction.

use std::cell::Cell;
use std::ptr::NonNull;

use perfaux::Result;
use perfaux::abi::aux_flags;
use perfaux::aux::{AuxOutput, AuxTransaction};
use perfaux::pmu::ef;
use perfaux::pt::buffer::PtBuffer;
use perfaux::pt::pmu::PtPmu;
use perfaux::pt::topa::{IdentityMap, TopaTable};
use perfaux::soft_pt::stream::TraceEvent;
use perfaux::soft_pt::tracer::SoftTracer;
use perfaux_tests::mem::AuxMemory;
use proptest::prelude::*;

/// An AUX output whose one transaction is `txn`, over `buffer`.
struct Scripted<'x> {
    buffer: &'x PtBuffer<'x>,
    txn: AuxTransaction,
    flags: Cell<u64>,
}

// SAFETY: `buffer` outlives the output; one transaction at a time (the
// driver's calls never nest, and the test opens one).
unsafe impl<'x> AuxOutput for Scripted<'x> {
    type Buffer = PtBuffer<'x>;

    fn begin(&self) -> Result<(AuxTransaction, NonNull<PtBuffer<'x>>)> {
        Ok((self.txn, NonNull::from(self.buffer)))
    }

    fn flag(&self, flags: u64) {
        self.flags.set(self.flags.get() | flags);
    }

    fn end(&self, _: u64, _: Option<u64>) {}
}

/// Opens a transaction at `head` with `space` bytes free (the wakeup past
/// the end) on the single-page regions of `aux` and traces until the tracer
/// stops. Returns (bytes written, TRUNCATED flagged, refused).
fn fill(aux: &AuxMemory, head: u64, space: u64) -> (u64, bool, bool) {
    let mut tables = vec![TopaTable::new(); 1];
    // SAFETY: `aux` outlives the buffer; only the tracer writes it.
    let buffer = unsafe { PtBuffer::new(&mut tables, aux.pages(), false, &IdentityMap) }.unwrap();
    let tracer = SoftTracer::new(&IdentityMap, 1 << 16);
    let output = Scripted {
        buffer: &buffer,
        txn: AuxTransaction {
            head,
            space,
            wakeup: head + space + 1,
        },
        flags: Cell::new(0),
    };
    let pt = PtPmu::with_output(&tracer, &IdentityMap, &output);
    let refused = pt.add(1, 0, false, ef::START).is_err();
    tracer.trace(TraceEvent::Enable(0x40_0000));
    let mut ip = 0x40_0000;
    // Indirect branches make 3-byte TIPs (the low 16 bits change); far
    // more bytes than the buffer holds unless a STOP ends the write.
    for _ in 0..2 * aux.size() {
        if !tracer.generating() {
            break;
        }
        ip = 0x40_0000 + (ip + 0x135) % 0xf000;
        tracer.trace(TraceEvent::Indirect { target: ip });
    }
    let written = tracer.written();
    let truncated = output.flags.get() & aux_flags::TRUNCATED != 0;
    (written, truncated, refused)
}

const PAGES: usize = 8;
const SIZE: u64 = (PAGES * 4096) as u64;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any head, any space the region it is in can be filled with: the
    /// tracer writes at most `space` bytes, and more than `space` minus
    /// a page.
    #[test]
    fn the_stop_is_never_past_the_consumers_data(head in 0..4 * SIZE, space in 0..SIZE) {
        let aux = AuxMemory::scattered(PAGES);
        let (written, truncated, refused) = fill(&aux, head, space);
        let region_left = 4096 - head % 4096;
        if space + 1 < region_left {
            // pt_buffer_reset_markers: "can't stop in the middle of an
            // output region".
            prop_assert!(refused && truncated);
            prop_assert!(written == 0);
        } else {
            prop_assert!(!refused);
            prop_assert!(written <= space + 1, "head {head:#x} space {space:#x}: wrote {written:#x}");
            prop_assert!(written + 4096 > space + 1, "head {head:#x} space {space:#x}: wrote only {written:#x}");
        }
    }
}

/// The case Linux's page count gets wrong: a head a PMI's skid left just
/// past a page boundary, less than a page free.
#[test]
fn a_head_past_a_page_boundary_with_under_a_page_free_stops_at_the_page_end() {
    let aux = AuxMemory::scattered(PAGES);
    let (written, truncated, refused) = fill(&aux, 0x4400a, 0xff9);
    assert!(!refused && !truncated);
    assert_eq!(written, 0x1000 - 0xa, "to the end of the head's region");
}
