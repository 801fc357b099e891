//! With `recvmmsg`, a look into the socket's queue before a receive, while gaps are about.
//!
//! A `recvmmsg` call lands its datagrams back to back before any header is read, so when one
//! of them shows a gap, it and the rest of the call sit where the missing items belong and
//! are copied to their places. After a gap the receiver therefore reads, for the next
//! [`SPAN`] datagrams, the headers of queued datagrams first (`sys::peek`: by byte offset
//! in the queue, all datagrams being the stream's size): the one the last receive's count
//! says is likely the last queued, and the last the call has room for. When they continue
//! the stream the call reads as before; when one does not, a bisection over the queue finds
//! the first datagram that does not, and the call reads up to and including it. That one
//! lands where the next in order would and is copied to its place behind room for the
//! missing items; the ones behind it come in the next call (at once) and land behind it in
//! place, as over AF_XDP. With nothing queued the call takes one datagram, and the next
//! looks at what came behind it.
//!
//! A look only decides how many datagrams a call reads: whatever comes out other than the
//! headers said (another sender, a datagram of another size, a duplicate) goes the usual
//! way, placed or copied by the header the receive brought, so exactness never depends on
//! it. Each look is two cheap system calls (counted as `peeks`); a clean stream makes none.

use super::ItemBuffer;
use super::receiver::{HEAD_CAP, Pattern, Receive, StreamMark};
use super::xdp::stream_mark;
use crate::sample::Item;
use crate::sys::peek;

/// Datagrams read with a look first after the last gap: a few calls. Looks cost about a
/// microsecond each, a copied 8000-byte datagram about as much; they pay while gaps come
/// within a few calls of each other, not for a loss in a thousand.
pub(super) const SPAN: u64 = 128;

/// What a look found at a place in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    /// The stream's next datagram but so many, of its size.
    Continues,
    /// A datagram that does not continue the stream there (a gap, another size or stream).
    Breaks,
    /// The queue ends before it.
    Absent,
}

/// How many datagrams the next receive reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Probed {
    pub(super) count: usize,
    /// It ends in front of datagrams that are queued: read on at once.
    pub(super) more: bool,
}

impl<T: Item, B: ItemBuffer<T>> Receive<T, B> {
    /// How many of the call's `n` datagram positions to read: `n`, or while gaps are about
    /// the queued datagrams up to and including the first one that does not continue the
    /// stream (it lands where the next in order would and is copied to its place; those
    /// behind it come in the next call, behind it in place).
    pub(super) fn probed(&mut self, n: usize, fast: Option<Pattern>, per_entry: usize) -> Probed {
        let all = Probed {
            count: n,
            more: false,
        };
        let (Some(p), Some(last)) = (fast, self.probe.last) else {
            return all;
        };
        if n <= 1
            || per_entry != 1
            || self.probe.left == 0
            || self.xdp.is_some()
            || p.head > HEAD_CAP
            || self.probe.off
            || !peek::supported()
        {
            return all;
        }
        let Some(bits) = self.format.seq_bits() else {
            return all;
        };
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1 << bits) - 1
        };
        let size = p.head + p.payload;
        let (format, stream, socket) = (self.format, self.stream, &self.socket);
        let mut head = [0u8; HEAD_CAP];
        let (mut peeks, mut failed) = (0u64, false);
        let mut look = |j: usize| {
            peeks += 1;
            let got = match peek::peek_at(socket, j * size, &mut head[..p.head]) {
                Ok(Some(got)) => got,
                Ok(None) => return Look::Absent,
                Err(_) => {
                    failed = true;
                    return Look::Absent;
                }
            };
            let next = StreamMark {
                stream: last.stream,
                counter: last.counter.wrapping_add(1 + j as u64) & mask,
            };
            match stream_mark(format, stream, &head[..got.copied], got.len) {
                Some(m) if got.len == size && m == next => Look::Continues,
                _ => Look::Breaks,
            }
        };
        // The likely depth first (what the last whole receive brought), then the last
        // position; between them and below the first a bisection finds where the run of
        // datagrams that continue the stream ends: 0..lo continue, and at hi is `end`.
        let guess = (self.probe.depth + self.probe.depth / 4 + 1).clamp(1, n);
        let (mut lo, mut hi, mut end) = match look(guess - 1) {
            Look::Continues if guess == n => (n, n, Look::Absent),
            Look::Continues => match look(n - 1) {
                Look::Continues => (n, n, Look::Absent),
                found => (guess, n - 1, found),
            },
            found => (0, guess - 1, found),
        };
        while lo < hi {
            let mid = (lo + hi) / 2;
            match look(mid) {
                Look::Continues => lo = mid + 1,
                found => (hi, end) = (mid, found),
            }
        }
        self.counts.peeks += peeks;
        if failed {
            // This socket does not take looks: read as without them from now on.
            self.probe.off = true;
            return all;
        }
        match end {
            Look::Breaks => Probed {
                count: lo + 1,
                more: true,
            },
            // Nothing queued: the receive waits for one, and the next looks at what came
            // behind it.
            _ if lo == 0 => Probed {
                count: 1,
                more: true,
            },
            _ => Probed {
                count: lo,
                more: false,
            },
        }
    }

    /// After a receive: where the last datagram of the stream stood, how many a whole
    /// receive brought, and whether a gap (`gap`: one of them was not the stream's next)
    /// starts or prolongs the looks.
    pub(super) fn note_probe(&mut self, fast: Option<Pattern>, probed: Probed, gap: bool) {
        let Some(p) = fast else { return };
        let count = self.units.len();
        if !probed.more {
            self.probe.depth = count;
        }
        self.probe.left = if gap {
            SPAN
        } else {
            self.probe.left.saturating_sub(count as u64)
        };
        if self.probe.left == 0 || self.format.seq_bits().is_none() {
            self.probe.last = None;
            return;
        }
        let (format, stream) = (self.format, self.stream);
        let heads = &self.heads;
        let mark = self.units.iter().rev().find_map(|u| {
            let slot = u.place?;
            let head = heads.get(slot * HEAD_CAP..slot * HEAD_CAP + p.head)?;
            stream_mark(format, stream, head, u.meta.len)
        });
        if mark.is_some() {
            self.probe.last = mark;
        }
    }
}
