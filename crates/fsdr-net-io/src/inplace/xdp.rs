//! The in-place receiver over AF_XDP (`Backend::Xdp`): each frame's UDP payload is copied
//! from the UMEM into the same areas a `recvmmsg` call would have filled — the header area,
//! the payload's sample position in the output buffer, the spill area — so the one copy is
//! UMEM → output buffer, and everything after (placement, the copying path, tracking) is the
//! same as for the socket — with one difference: a frame's header is read before its payload
//! is written, so a receive ends in front of a frame that shows a gap, and that frame is read
//! alone. Only it is copied (to its place behind room for the missing items); the frames
//! behind it land behind it in place, where over a socket the rest of its `recvmmsg` call
//! would have landed at the wrong place and been copied too. What the XDP program passes to
//! the kernel (IP fragments, frames of another queue) and the stop's `shutdown` arrive on the
//! UDP socket and are read from it.

use std::io;

use super::ItemBuffer;
use super::receiver::{Receive, StreamMark};
use crate::format::{Format, PacketClass};
use crate::sample::Item;
use crate::sys::{self, Wait};

/// The longest a blocking receive waits for frames before its step ends (and is made again).
const WAIT_NS: u64 = 100_000_000;

impl<T: Item, B: ItemBuffer<T>> Receive<T, B> {
    /// Fills up to `n` of the entries set up for this call: one `recvmmsg`, or with AF_XDP
    /// the packets waiting in the ring (`WouldBlock` when there are none after the wait).
    pub(super) fn recv_entries(&mut self, n: usize, wait: Wait) -> io::Result<usize> {
        let Some(x) = self.xdp.as_mut() else {
            return self.msgs.recv(&self.socket, n, wait);
        };
        if x.ready() == 0 {
            let timeout = if wait == Wait::ForOne { WAIT_NS } else { 0 };
            let (_, socket) = x.poll(&self.socket, timeout).unwrap_or((false, false));
            if socket {
                let got = self.msgs.recv(&self.socket, n, Wait::No)?;
                let real = (0..got)
                    .filter(|&i| self.msgs.meta(i).source.is_some())
                    .count();
                self.counts.xdp_via_kernel += real as u64;
                return Ok(got);
            }
            if x.ready() == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        } else if x.wake_kernel() {
            self.counts.recv_calls += 1;
        }
        let (mut bad, mut taken, mut stop) = (0u64, 0usize, false);
        let (format, stream, mut last) = (self.format, self.stream, self.xdp_last);
        let got = self.msgs.fill_from(n, |w| {
            let mut source = None;
            while source.is_none() && !stop {
                let took = x.take(1, |f| {
                    let Some(u) = f.udp() else {
                        // Steered here, yet not a UDP datagram for us: counted.
                        bad += 1;
                        return true;
                    };
                    let mark = stream_mark(format, stream, f.payload_head(&u), u.len);
                    let gap = shows_gap(format, last, mark);
                    if gap && taken > 0 {
                        // It goes first in the next receive, alone.
                        stop = true;
                        return false;
                    }
                    if f.payload(&u, |b| w.write(b)) {
                        source = Some(u.source);
                        taken += 1;
                        last = mark.or(last);
                        stop = gap;
                    } else {
                        bad += 1;
                    }
                    true
                });
                if took == 0 {
                    break;
                }
            }
            source
        });
        self.xdp_last = last;
        self.counts.received += bad;
        self.counts.malformed += bad;
        got
    }

    /// Whether data is there within `ns`: the socket, or with AF_XDP the ring or the socket.
    pub(super) fn readable_within(&self, ns: u64) -> bool {
        match &self.xdp {
            None => sys::readable_within(&self.socket, ns),
            Some(x) => x.ready() > 0 || x.poll(&self.socket, ns).is_some_and(|(any, _)| any),
        }
    }

    /// Reads the AF_XDP socket's statistics into the counters; returns its drops (0 without
    /// AF_XDP).
    pub(super) fn xdp_drops(&mut self) -> u64 {
        let Some(s) = self.xdp.as_ref().and_then(|x| x.stats()) else {
            return 0;
        };
        let c = &mut self.counts;
        c.xdp_rx_dropped = s.rx_dropped;
        c.xdp_rx_ring_full = s.rx_ring_full;
        c.xdp_fill_ring_empty = s.rx_fill_ring_empty_descs;
        c.xdp_invalid_descs = s.rx_invalid_descs;
        s.rx_dropped + s.rx_ring_full
    }
}

/// A data frame's mark, when it belongs to the stream followed (any stream before the first
/// data packet) and its header carries a counter.
pub(super) fn stream_mark(
    format: Format,
    stream: Option<Option<u32>>,
    head: &[u8],
    len: usize,
) -> Option<StreamMark> {
    let info = format.parse_head(head, len).ok()?;
    if info.class != PacketClass::Data || stream.is_some_and(|s| s != info.stream_id) {
        return None;
    }
    Some(StreamMark {
        stream: info.stream_id,
        counter: info.seq?,
    })
}

/// Whether a frame marked `mark` does not directly follow the one marked `last` of the same
/// stream: a gap (or a late or repeated frame), which the receiver cannot place with the
/// frames behind it.
fn shows_gap(format: Format, last: Option<StreamMark>, mark: Option<StreamMark>) -> bool {
    let (Some(last), Some(mark), Some(bits)) = (last, mark, format.seq_bits()) else {
        return false;
    };
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    };
    last.stream == mark.stream && mark.counter != last.counter.wrapping_add(1) & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_is_a_counter_that_does_not_follow_in_the_same_stream() {
        let m = |s, c| {
            Some(StreamMark {
                stream: Some(s),
                counter: c,
            })
        };
        assert!(!shows_gap(Format::Chdr, m(1, 5), m(1, 6)));
        assert!(shows_gap(Format::Chdr, m(1, 5), m(1, 8)));
        assert!(shows_gap(Format::Chdr, m(1, 5), m(1, 5)));
        assert!(!shows_gap(Format::Chdr, m(1, 0xffff), m(1, 0)));
        assert!(!shows_gap(Format::Vrt, m(1, 15), m(1, 0)));
        assert!(shows_gap(Format::Vrt, m(1, 15), m(1, 1)));
        assert!(!shows_gap(Format::Seq64, m(0, u64::MAX), m(0, 0)));
        // Another stream, no counter, no earlier frame, or a format without counters.
        assert!(!shows_gap(Format::Chdr, m(1, 5), m(2, 9)));
        assert!(!shows_gap(Format::Chdr, m(1, 5), None));
        assert!(!shows_gap(Format::Chdr, None, m(1, 9)));
        assert!(!shows_gap(Format::Raw, m(1, 5), m(1, 9)));
    }
}
