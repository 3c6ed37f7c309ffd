// SPDX-License-Identifier: MIT OR Apache-2.0
//! The `sample_id` trailer of non-sample records (`perf_event__output_id_sample`), and what a
//! `PERF_RECORD_LOST` needs to know about the event it is written for.

use crate::abi::sample_type as st;

/// The values of a `sample_id` trailer, and which of them are present
/// (`sample_type` of the emitting event).
///
/// ```
/// use perfaux::abi::sample_type as st;
/// use perfaux::ring::SampleId;
/// let id = SampleId { sample_type: st::TID | st::TIME | st::IDENTIFIER, pid: 1, tid: 2, time: 3, id: 9, ..SampleId::default() };
/// assert_eq!(id.size(), 24);
/// let mut out = [0u8; 24];
/// id.encode(&mut out);
/// assert_eq!(&out[16..], &9u64.to_ne_bytes(), "IDENTIFIER is always last");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleId {
    /// The event's `sample_type`; only TID, TIME, ID, STREAM_ID, CPU and
    /// IDENTIFIER matter here.
    pub sample_type: u64,
    /// Process id (TID).
    pub pid: u32,
    /// Thread id (TID).
    pub tid: u32,
    /// Timestamp (TIME).
    pub time: u64,
    /// Event id (ID and IDENTIFIER): the primary (parent's) id.
    pub id: u64,
    /// Stream id (STREAM_ID): the emitting event's own id.
    pub stream_id: u64,
    /// CPU number (CPU).
    pub cpu: u32,
}

/// The largest trailer: six 8-byte fields.
pub const MAX_SAMPLE_ID_SIZE: usize = 48;

impl SampleId {
    /// `id_header_size`: the trailer's size in bytes.
    pub const fn size(&self) -> usize {
        let t = self.sample_type;
        let mut n = 0;
        let mut bit = 0;
        let fields = [
            st::TID,
            st::TIME,
            st::ID,
            st::STREAM_ID,
            st::CPU,
            st::IDENTIFIER,
        ];
        while bit < fields.len() {
            if t & fields[bit] != 0 {
                n += 8;
            }
            bit += 1;
        }
        n
    }

    /// Writes the trailer into `out[..self.size()]`, in the kernel's order
    /// (TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER); returns its size.
    /// `out` shorter than [`size`](Self::size) gets only what fits.
    pub fn encode(&self, out: &mut [u8]) -> usize {
        let t = self.sample_type;
        let mut buf = [0u8; MAX_SAMPLE_ID_SIZE];
        let mut n = 0;
        let mut put = |word: [u8; 8]| {
            // At most six words: always room (MAX_SAMPLE_ID_SIZE).
            if let Some(slot) = buf.get_mut(n..n + 8) {
                slot.copy_from_slice(&word);
                n += 8;
            }
        };
        if t & st::TID != 0 {
            put(pair_ne(self.pid, self.tid));
        }
        if t & st::TIME != 0 {
            put(self.time.to_ne_bytes());
        }
        if t & st::ID != 0 {
            put(self.id.to_ne_bytes());
        }
        if t & st::STREAM_ID != 0 {
            put(self.stream_id.to_ne_bytes());
        }
        if t & st::CPU != 0 {
            put(pair_ne(self.cpu, 0));
        }
        if t & st::IDENTIFIER != 0 {
            put(self.id.to_ne_bytes());
        }
        let len = n.min(out.len()).min(buf.len());
        let (dst, _) = out.split_at_mut(len);
        let (src, _) = buf.split_at(len);
        dst.copy_from_slice(src);
        n
    }
}

/// Two u32 fields as they lie in memory (`pid` then `tid`).
fn pair_ne(first: u32, second: u32) -> [u8; 8] {
    let mut w = [0u8; 8];
    w[..4].copy_from_slice(&first.to_ne_bytes());
    w[4..].copy_from_slice(&second.to_ne_bytes());
    w
}

/// The event a side-band record is written for: its id and its sample_id
/// trailer. `begin` needs it for the `PERF_RECORD_LOST` it may write first
/// (`__perf_output_begin`), the AUX area for `PERF_RECORD_AUX`.
pub trait OutputEvent {
    /// `event->id` of the output event (the parent's, for inherited events).
    fn id(&self) -> u64;

    /// `id_header_size` of the output event: 0 without `sample_id_all`.
    fn id_header_size(&self) -> usize;

    /// `perf_event_header__init_id`: refresh the sample_id values now (the
    /// kernel re-reads the clock and sets `stream_id` to the output event's
    /// id; after a LOST record the sample written next carries them) and
    /// return them; `None` without `sample_id_all`.
    fn sample_id(&mut self) -> Option<SampleId>;
}

/// An [`OutputEvent`] with fixed values: an event id, and the trailer to
/// append when the event has `sample_id_all` (refreshing changes nothing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FixedEvent {
    /// `event->id`.
    pub id: u64,
    /// The trailer, when `sample_id_all`.
    pub sample_id: Option<SampleId>,
}

impl OutputEvent for FixedEvent {
    fn id(&self) -> u64 {
        self.id
    }
    fn id_header_size(&self) -> usize {
        self.sample_id.map_or(0, |s| s.size())
    }
    fn sample_id(&mut self) -> Option<SampleId> {
        self.sample_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailer_order_and_size() {
        let all = st::TID | st::TIME | st::ID | st::STREAM_ID | st::CPU | st::IDENTIFIER;
        let s = SampleId {
            sample_type: all | st::IP,
            pid: 1,
            tid: 2,
            time: 3,
            id: 4,
            stream_id: 5,
            cpu: 6,
        };
        assert_eq!(s.size(), 48);
        let mut out = [0u8; 48];
        assert_eq!(s.encode(&mut out), 48);
        let words: [u64; 6] =
            core::array::from_fn(|i| u64::from_ne_bytes(out[i * 8..i * 8 + 8].try_into().unwrap()));
        let pid_tid = u64::from_ne_bytes(pair_ne(1, 2));
        assert_eq!(
            words,
            [pid_tid, 3, 4, 5, u64::from_ne_bytes(pair_ne(6, 0)), 4]
        );
        assert_eq!(SampleId::default().size(), 0);
    }
}
