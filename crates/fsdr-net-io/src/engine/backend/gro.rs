//! UDP GRO receive for the `mio` and `reuseport` backends: one `recvmmsg` entry takes a
//! coalesced receive of up to 64 KiB (`UDP_GRO`), which this module splits into its datagrams
//! without copying them.
//!
//! The kernel writes a coalesced receive as its datagrams back to back, each `segment` bytes
//! long (the last may be shorter; the size comes in the `UDP_GRO` control message). Each entry
//! is therefore scattered over `K` slots with one iovec of `segment` bytes per slot: datagram
//! `j` lands at the start of the entry's `j`-th slot, exactly where an ordinary receive puts a
//! datagram, and goes to the consumer from there. `K` is enough slots for 64 KiB (at most
//! [`MAX_SEGMENTS`]).
//!
//! The segment size is learnt from the stream: until the first coalesced receive (and again
//! after the sender changes its size) the iovecs do not line up with the datagrams; that
//! receive is gathered into a scratch buffer and copied into place (counted as `gro_fixups`),
//! and the next call uses the new size. A datagram that came alone and is longer than the
//! iovec is gathered into its first slot. Every datagram of a coalesced receive is counted
//! and classified exactly as if it had come alone, and also counted as `gro_datagrams`.

use std::io;

use socket2::Socket;

use super::super::meta::Clocks;
use super::super::worker::Worker;
use crate::sys::{RecvBatch, RecvMeta, Wait};

/// The largest coalesced receive: the IPv4/IPv6 UDP payload limit.
pub(crate) const GRO_MAX_BYTES: usize = 65_535;
/// The most datagrams one coalesced receive holds: the kernel's `UDP_MAX_SEGMENTS` for a
/// GSO sender's packets passed through whole (GRO itself stops at 64).
pub(crate) const MAX_SEGMENTS: usize = 128;
/// Slots one call may tie up: bounds the entries per call when datagrams are small.
const SLOTS_PER_CALL: usize = 512;

/// Slots (iovecs) one entry needs for coalesced receives of `segment`-byte datagrams.
fn slots_per_entry(segment: usize) -> usize {
    GRO_MAX_BYTES
        .div_ceil(segment.max(1))
        .clamp(1, MAX_SEGMENTS)
}

/// What one call did.
pub(crate) enum Outcome {
    /// Receives came back; `more` when the socket may hold more (a full call).
    Received { more: bool },
    /// No room, and the policy is to pause.
    NoRoom,
}

/// The GRO receive state of one receive thread.
pub(crate) struct GroReader {
    msgs: RecvBatch,
    batch: usize,
    /// Bytes per iovec: the segment size expected.
    segment: usize,
    /// Largest datagram delivered (the engine's slot size).
    max_datagram: usize,
    /// A coalesced receive gathered in one piece (fix-ups, and discarding without room).
    scratch: Box<[u8]>,
    /// Per entry, room for what its slots' iovecs cannot take when they cover less than
    /// 64 KiB (small segments); allocated when first needed.
    spill: Vec<u8>,
    /// Which stash positions of the call went to the consumer.
    consumed: Vec<bool>,
}

impl GroReader {
    /// A reader for up to `batch` receives per call into slots of `max_datagram` bytes.
    pub(crate) fn new(batch: usize, max_datagram: usize) -> Self {
        // Until a coalesced receive says otherwise, expect whole slots.
        let segment = max_datagram;
        GroReader {
            msgs: RecvBatch::with_iovecs(batch, MAX_SEGMENTS + 1),
            batch,
            segment,
            max_datagram,
            scratch: vec![0u8; GRO_MAX_BYTES + 1].into_boxed_slice(),
            spill: Vec::new(),
            consumed: Vec::new(),
        }
    }

    /// Free slots a call needs before it can receive (one entry's).
    pub(crate) fn min_free(&self) -> usize {
        slots_per_entry(self.segment)
    }

    /// Bytes of spill area each entry needs behind its `k` iovecs of `segment` bytes.
    fn spill_per_entry(k: usize, segment: usize) -> usize {
        (GRO_MAX_BYTES + 1).saturating_sub(k * segment)
    }

    /// Copies the `len` bytes of the entry whose slots start at stash position `base` into
    /// the scratch buffer, in order: `segment` bytes from each slot, then the spill area.
    fn gather(&mut self, worker: &Worker, base: usize, k: usize, entry: usize, len: usize) {
        let seg = self.segment;
        let mut done = 0;
        for &slot in &worker.stash[base..base + k] {
            if done >= len {
                return;
            }
            let chunk = (len - done).min(seg);
            // SAFETY: this thread owns the slot; the kernel wrote `chunk` bytes at its start
            // (iovecs are filled in order).
            // Checked by: `random_runs_of_sizes_arrive_whole_and_in_order` and
            // `datagrams_larger_than_a_slot_are_truncated_one_by_one` under ASan.
            // Kernel writes (freed memory poisoned and watched):
            // `socket_engines_stop_under_traffic_without_a_write_after_free`.
            let src = unsafe { worker.pool().bytes(slot, 0, chunk) };
            self.scratch[done..done + chunk].copy_from_slice(src);
            done += chunk;
        }
        if done < len {
            let per = Self::spill_per_entry(k, seg);
            let rest = len - done;
            self.scratch[done..len].copy_from_slice(&self.spill[entry * per..entry * per + rest]);
        }
    }

    /// One `recvmmsg` call (waiting as `wait` says), each entry scattered over `K` free
    /// slots.
    pub(crate) fn recv(
        &mut self,
        worker: &mut Worker,
        socket: &Socket,
        wait: Wait,
    ) -> io::Result<Outcome> {
        let k = slots_per_entry(self.segment);
        let entries_max = (SLOTS_PER_CALL / k).clamp(1, self.batch);
        let usable = worker.fill_stash(entries_max * k);
        let mut entries = usable / k;
        // The latency budget is a soft bound: with any room at all, one whole entry may go.
        if entries == 0 && usable > 0 && worker.stash.len() >= k {
            entries = 1;
        }
        if entries == 0 {
            if worker.pauses() {
                return Ok(Outcome::NoRoom);
            }
            return self.discard(worker, socket);
        }
        let seg = self.segment;
        let per = Self::spill_per_entry(k, seg);
        if self.spill.len() < entries * per {
            self.spill.resize(entries * per, 0);
        }
        for e in 0..entries {
            let pool = worker.pool();
            let spill = self.spill[e * per..(e + 1) * per].as_mut_ptr();
            let parts = worker.stash[e * k..(e + 1) * k]
                .iter()
                .map(|&slot| (pool.buf_ptr(slot), seg))
                .chain((per > 0).then_some((spill, per)));
            // SAFETY: the slots in the stash are owned by this thread and stay untouched by
            // others until the call returns; each iovec is `seg` <= slot size bytes of one;
            // the spill area is private to this thread and not resized during the call.
            // Checked by: `random_runs_of_sizes_arrive_whole_and_in_order` and
            // `datagrams_larger_than_a_slot_are_truncated_one_by_one` under ASan.
            unsafe { self.msgs.set_iovecs(e, parts) };
        }
        worker.counts.recv_calls += 1;
        let n = self.msgs.recv(socket, entries, wait)?;
        let at = Clocks::now();
        self.consumed.clear();
        self.consumed.resize(entries * k, false);
        let mut learnt = None;
        for e in 0..n {
            let meta = self.msgs.meta(e);
            if let Some(s) = self.split(worker, e, k, &meta, at) {
                learnt = Some(s);
            }
        }
        let consumed = &self.consumed;
        worker.retire_batch(entries * k, |i| consumed[i]);
        if let Some(s) = learnt {
            self.segment = s;
        }
        Ok(Outcome::Received { more: n == entries })
    }

    /// Hands the datagrams of entry `entry` (slots `entry * k ..`) to the consumer. Returns
    /// the segment size to expect from now on when this receive taught a new one.
    fn split(
        &mut self,
        worker: &mut Worker,
        entry: usize,
        k: usize,
        meta: &RecvMeta,
        at: Clocks,
    ) -> Option<usize> {
        let base = entry * k;
        let one = |len: usize, truncated: bool| RecvMeta {
            len,
            truncated,
            gro_segment: None,
            ..*meta
        };
        let Some(segment) = meta.gro_segment.map(usize::from) else {
            // One datagram. Longer than the iovec: gather it into its first slot.
            if meta.len > self.segment && !meta.truncated && meta.len <= self.max_datagram {
                worker.counts.gro_fixups += 1;
                self.gather(worker, base, k, entry, meta.len);
                // SAFETY: this thread owns the slot, which has room for `meta.len` <= slot
                // size bytes; the scratch is private to this thread.
                // Checked by: `random_runs_of_sizes_arrive_whole_and_in_order` and
                // `datagrams_larger_than_a_slot_are_truncated_one_by_one` under ASan.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.scratch.as_ptr(),
                        worker.pool().buf_ptr(worker.stash[base]),
                        meta.len,
                    )
                };
            }
            let truncated = meta.truncated || meta.len > self.max_datagram;
            let m = one(meta.len.min(self.max_datagram), truncated);
            self.consumed[base] = worker.complete(worker.stash[base], &m, at);
            return None;
        };
        let datagrams = meta.datagrams();
        let count = datagrams.len();
        worker.counts.gro_datagrams += count as u64;
        let aligned = segment == self.segment && count <= k;
        if !aligned {
            // The iovecs do not line up with the datagrams: gather, then copy each into place.
            worker.counts.gro_fixups += 1;
            self.gather(worker, base, k, entry, meta.len);
        }
        for (j, (start, d)) in datagrams.enumerate() {
            let len = d.len;
            let truncated = d.truncated || len > self.max_datagram;
            let m = one(len.min(self.max_datagram), truncated);
            if aligned {
                // Already in place: datagram j is at the start of the entry's slot j.
                self.consumed[base + j] = worker.complete(worker.stash[base + j], &m, at);
                continue;
            }
            let (slot, own) = if j < k {
                (Some(worker.stash[base + j]), true)
            } else {
                (worker.take_free(), false)
            };
            let Some(slot) = slot else {
                // More datagrams than slots at hand (only while the size is being learnt).
                worker.overflowed(&m);
                continue;
            };
            if !truncated {
                let bytes = &self.scratch[start..start + len];
                // SAFETY: this thread owns `slot`, which has room for `len` <= slot size
                // bytes; the scratch is private to this thread.
                // Checked by: `random_runs_of_sizes_arrive_whole_and_in_order` and
                // `datagrams_larger_than_a_slot_are_truncated_one_by_one` under ASan.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), worker.pool().buf_ptr(slot), len)
                };
            }
            let went = worker.complete(slot, &m, at);
            if own {
                self.consumed[base + j] = went;
            } else if !went {
                worker.stash.push(slot);
            }
        }
        (!aligned).then_some(segment.min(self.max_datagram))
    }

    /// Without room and with the discard policy: one receive into the scratch buffer, every
    /// datagram in it counted as `overflow`.
    fn discard(&mut self, worker: &mut Worker, socket: &Socket) -> io::Result<Outcome> {
        // SAFETY: the scratch buffer is private to this thread and outlives the call.
        // Checked by: `random_runs_of_sizes_arrive_whole_and_in_order` and
        // `datagrams_larger_than_a_slot_are_truncated_one_by_one` under ASan.
        unsafe {
            self.msgs
                .set_buffer(0, self.scratch.as_mut_ptr(), self.scratch.len())
        };
        worker.counts.recv_calls += 1;
        let n = self.msgs.recv(socket, 1, Wait::No)?;
        for e in 0..n {
            let meta = self.msgs.meta(e);
            let datagrams = meta.datagrams();
            if meta.gro_segment.is_some() {
                worker.counts.gro_datagrams += datagrams.len() as u64;
            }
            for (_, d) in datagrams {
                worker.overflowed(&d);
            }
        }
        Ok(Outcome::Received { more: n == 1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_covers_the_largest_coalesced_receive() {
        for s in [1, 64, 512, 1472, 8000, 9216, 65_535] {
            let k = slots_per_entry(s);
            assert!(k * s >= GRO_MAX_BYTES || k == MAX_SEGMENTS, "{s}");
            assert!(k <= MAX_SEGMENTS);
        }
        assert_eq!(slots_per_entry(8000), 9);
        assert_eq!(slots_per_entry(1472), 45);
    }
}
