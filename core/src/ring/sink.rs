// SPDX-License-Identifier: MIT OR Apache-2.0
//! [`OutputSink`]: where `copy_aux` and a PMU's `snapshot_aux` put bytes
//! (Linux: the `perf_output_handle` of the record being written), and
//! [`SliceSink`], one over a plain buffer.

use crate::sync::copy_to_memory;

/// Where copied bytes go: a record being written. `copy_aux` and a PMU's
/// `snapshot_aux` write through it, so the same driver code serves perfaux's
/// own [`OutputHandle`](super::OutputHandle) and, in the kernel module,
/// Linux's `struct perf_output_handle` behind a C callback.
pub trait OutputSink {
    /// Copies `bytes` into the record; returns how many were **not** copied.
    fn copy(&mut self, bytes: &[u8]) -> usize;
}

/// A sink over a caller's buffer: bytes go one after the other from its
/// start, and what does not fit is not copied (and reported so). It copies
/// as an [`OutputHandle`](super::OutputHandle) does, so a snapshot into it
/// costs what one into a ring costs: small pieces inline, large ones to
/// `memcpy` in pieces of at most 2 KiB where it is glibc's (its `rep movsb`,
/// from 2112 bytes, stalls where the destination lies just past the source
/// modulo 4 KiB), whole elsewhere.
///
/// ```
/// use perfaux::ring::{OutputSink, SliceSink};
/// let mut buf = [0u8; 6];
/// let mut sink = SliceSink::new(&mut buf);
/// assert_eq!(sink.copy(b"abcd"), 0);
/// assert_eq!(sink.copy(b"efgh"), 2); // two bytes did not fit
/// assert_eq!(sink.len(), 6);
/// assert_eq!(&buf, b"abcdef");
/// ```
#[derive(Debug)]
pub struct SliceSink<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl<'b> SliceSink<'b> {
    /// An empty sink over `buf`.
    pub fn new(buf: &'b mut [u8]) -> Self {
        SliceSink { buf, len: 0 }
    }

    /// Bytes copied so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was copied yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Starts over at the buffer's start.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The bytes copied so far.
    pub fn written(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

impl OutputSink for SliceSink<'_> {
    #[inline]
    fn copy(&mut self, bytes: &[u8]) -> usize {
        let Some(free) = self.buf.get_mut(self.len..) else {
            return bytes.len();
        };
        let n = bytes.len().min(free.len());
        let (now, _) = bytes.split_at(n);
        // SAFETY: `free` holds at least `n` bytes, and it is this sink's
        // buffer (a `&mut`), which `bytes` cannot overlap.
        unsafe { copy_to_memory(free.as_mut_ptr(), now) };
        self.len += n;
        bytes.len() - n
    }
}
