//! Datagrams placed ahead of a gap. When a datagram arrives with a gap before it, its payload
//! goes to its sample position at once — behind room for the missing items — and so do the
//! datagrams after it: the receive areas of the next calls start at the *frontier* (the end
//! of the furthest one placed ahead), so the kernel puts them in place as on a clean stream.
//! The reorder stage holds them as [`Entry::Ahead`] until the gap is decided: a late
//! datagram fills its hole (copied, it landed at the frontier), or the gap is given up on and
//! its zeros fill the hole. Released in order, each is accounted where it already is
//! ([`Writer::push_placed`](crate::depacketizer::Writer::push_placed) writes the zeros).
//!
//! Only the datagram that shows the gap (and those of the same receive behind it, which
//! landed behind it) is copied. A hole with the datagram behind it lies in one buffer: the
//! current one, or a fresh one where the stream then goes on (`Current::end` marks where it
//! left the previous one), so the buffers with holes stay with the receiver until the holes
//! are decided. A hole longer than that (small buffers) takes the empty buffers behind it at
//! once (`cover_ahead`): the datagram that showed it is then written as a copy, its zeros
//! across them, and the datagrams after it land in place behind it ([`Covered`] keeps the
//! frontier while it waits). Whenever a gap comes out other than
//! expected (timestamps size it otherwise, a late datagram of another length), every
//! datagram placed ahead is copied back out first ([`Receive::evacuate`]) and written as a
//! copied one: correct always, and rare. Datagrams that came while no buffer was free for
//! them (the consumer kept every one) are held as copies; once one is free they are put at
//! their places (`place_held_copies`), so that a consumer falling behind while gaps are
//! open costs the datagrams that came meanwhile, not the rest of the stream.

use std::collections::VecDeque;

use super::ItemBuffer;
use super::current::Current;
use super::layout::Covered;
use super::receiver::{Ahead, Entry, Owned, Receive};
use super::scatter::Placement;
use crate::depacketizer::{DatagramIn, ItemTag};
use crate::format::PacketInfo;
use crate::sample::Item;
use crate::seq::{Gap, Released, SeqEvent, SeqPacket, Widened};

impl<T: Item, B: ItemBuffer<T>> Receive<T, B> {
    /// Whether `o` is the copied datagram the buffers behind its hole were taken for.
    pub(super) fn is_covered(&self, o: &Owned) -> bool {
        self.covered
            .is_some_and(|c| o.arrival_ns == c.arrival_ns && o.info.seq == c.seq)
    }

    /// Whether the current buffer may go to the consumer: no hole waits in it.
    pub(super) fn may_hand_over(&self) -> bool {
        (self.ahead_at.is_empty() && self.covered.is_none())
            || self.cur.as_ref().is_none_or(|c| c.end == Some(c.pos))
    }

    /// The stream position the next item is written at.
    pub(super) fn write_pos(&self) -> u64 {
        self.cur
            .as_ref()
            .map_or(self.next_start, |c| c.start + c.pos as u64)
    }

    /// The stream position where the next datagram in order lands: the frontier, or the
    /// write position when nothing is placed ahead.
    pub(super) fn landing(&self) -> u64 {
        self.frontier.map_or_else(|| self.write_pos(), |(f, _)| f)
    }

    /// The buffer the next datagram in order lands in: the last one taken.
    pub(super) fn landing_buffer(&mut self) -> Option<&mut Current<B>> {
        match self.ahead.back_mut() {
            Some(c) => Some(c),
            None => self.cur.as_mut(),
        }
    }

    /// Where a datagram that is ahead of the expected one goes if placed ahead: `(its
    /// stream position, the frontier before it)`. `None` when it cannot be: not the
    /// stream's layout, something waits to be written, it is not beyond everything held, or
    /// something held beyond the frontier was copied.
    pub(super) fn ahead_target(&self, w: &Widened, info: &PacketInfo) -> Option<(u64, u64)> {
        let p = self.pattern?;
        if info.payload_len as usize != p.payload
            || !self.places_ahead()
            || self.dp.pending()
            || !self.released.is_empty()
            || self.cur.is_none()
        {
            return None;
        }
        let lead = self.order.as_ref()?.lead(w)?;
        if lead.frames == 0 || lead.frames > lead.window {
            return None;
        }
        let (base, missing) = match (lead.furthest, self.frontier) {
            (None, None) => (self.write_pos(), lead.frames),
            (Some((ext, off)), Some((f, last))) if ext == last && lead.frames > off => {
                (f, lead.frames - off - 1)
            }
            _ => return None,
        };
        // The hole: what the writer puts there once the gap is given up on (zeros for the
        // missing datagrams, nothing without zero filling).
        let hole = Gap {
            frames: missing,
            bytes: Some(missing * p.payload as u64),
            ambiguous: false,
        };
        Some((base + self.dp.zeros_before(&hole, p.payload), base))
    }

    /// The fast path for a datagram that is not simply the next one: when it is right behind
    /// the furthest one placed ahead of a gap and landed there, it is placed ahead where it
    /// is. Coming beyond the reorder window it gives up on the oldest gap, and what that
    /// releases is written at the next hand-over; if any of it would not be written where
    /// it lies (a gap sized otherwise than assumed), `full: false` sends the rest of the
    /// call down the copying path before anything is written where it landed.
    pub(super) fn hold_in_place(
        &mut self,
        w: Widened,
        packet: SeqPacket,
        info: &PacketInfo,
        l: super::layout::Layout,
        arrival_ns: u64,
    ) -> Placement {
        let Some((at, last)) = self.frontier else {
            return Placement::Refused {
                seq: Some((w, packet)),
            };
        };
        let consecutive = self
            .pattern
            .is_some_and(|p| info.payload_len as usize == p.payload)
            && w.ext == last.wrapping_add(1)
            && self
                .order
                .as_ref()
                .and_then(|o| o.lead(&w))
                .is_some_and(|l| l.furthest.is_none_or(|(ext, _)| ext == last));
        // Samples that need conversion are decoded where they landed first (`convert.rs`).
        if !consecutive || !self.places_ahead() || !self.decode_landed(l, info.payload_len as usize)
        {
            return Placement::Refused {
                seq: Some((w, packet)),
            };
        }
        let items = self.dp.decoder().items_in(info.payload_len as usize) as u64;
        let entry = Entry::Ahead(Ahead {
            at,
            info: *info,
            arrival_ns,
        });
        self.placed_ahead(at, items, w.ext, arrival_ns);
        let o = self.order.as_mut().expect("sequence tracking");
        let before = self.released.len();
        let restored = o.push(w, &packet, entry, &mut self.released);
        self.shared.engine.counters.consumer.reordered.add(restored);
        Placement::Placed {
            full: self.released.len() == before || self.releases_in_place(),
        }
    }

    /// Whether everything released and not written yet was placed ahead and goes out where
    /// it lies: each one's gap fills exactly the hole before it.
    fn releases_in_place(&self) -> bool {
        if self.dp.pending() {
            return self.released.is_empty();
        }
        let mut pos = self.write_pos();
        for r in &self.released {
            // Placed ahead, or the copied one the buffers behind its hole were taken for.
            let (at, info) = match &r.item {
                Entry::Ahead(a) => (a.at, a.info),
                Entry::Owned(o) if self.is_covered(o) => (self.covered.map_or(0, |c| c.at), o.info),
                _ => return false,
            };
            let payload = info.payload_len as usize;
            if !r.deliver || pos + self.dp.zeros_before(&r.gap, payload) != at {
                return false;
            }
            pos = at + self.dp.decoder().items_in(payload) as u64;
        }
        true
    }

    /// Notes a datagram of `items` items placed ahead at `at`, widened number `ext`, that
    /// arrived at `arrival_ns`.
    pub(super) fn placed_ahead(&mut self, at: u64, items: u64, ext: u64, arrival_ns: u64) {
        self.ahead_at.push_back((at, arrival_ns));
        self.frontier = Some((at + items, ext));
    }

    /// Copies a payload that landed elsewhere to stream position `at` (`base`: the frontier
    /// before it), in the buffer the frontier is in or, when it does not fit there, in a
    /// fresh one where the stream goes on from `base`. False when neither can take it.
    pub(super) fn put_ahead(&mut self, at: u64, base: u64, payload: &[u8]) -> bool {
        let dec = *self.dp.decoder();
        let items = dec.items_in(payload.len()) as u64;
        let fits = |c: &mut Current<B>| {
            let len = c.buffer.items().len() as u64;
            c.end.is_none() && at >= c.start + c.pos as u64 && at + items <= c.start + len
        };
        let here = self.landing_buffer().is_some_and(fits);
        let taken = here || (self.open_ahead(base) && self.landing_buffer().is_some_and(fits));
        if !taken {
            self.close_unused_ahead();
            return false;
        }
        let c = self.landing_buffer().expect("a buffer");
        let from = (at - c.start) as usize;
        let to = &mut c.buffer.items()[from..from + items as usize];
        dec.decode(payload, to);
        self.dp.count_copied(payload.len() as u64);
        true
    }

    /// Puts the copies held ahead of a gap at the end of the chain placed ahead at their
    /// places, so that the next datagrams land in place behind them again. Copies are held
    /// there when no buffer was free for them (the consumer kept every one); with gaps
    /// coming within a reorder window of each other the hold never empties, and without this
    /// every later datagram would be copied for the rest of the stream. Stops at the first
    /// one that cannot be placed (another length, no buffer yet: tried again next call).
    pub(super) fn place_held_copies(&mut self) {
        let Some(p) = self.pattern else { return };
        let stranded = self.order.as_ref().is_some_and(|o| {
            matches!(o.furthest_item(), Some(Entry::Owned(c))
                if c.info.payload_len as usize == p.payload)
        });
        if !stranded
            || !self.places_ahead()
            || self.dp.pending()
            || !self.released.is_empty()
            || self.cur.is_none()
            || self.covered.is_some()
        {
            return;
        }
        // Where the chain ends: behind the furthest datagram placed ahead, or at the write
        // position with the expected datagram (0 frames ahead) missing.
        let (mut base, mut next) = match self.frontier {
            Some((f, last)) => {
                let o = self.order.as_mut().expect("sequence tracking");
                match o.held_at_mut().find(|h| h.1 == last) {
                    Some((frames, ..)) => (f, frames + 1),
                    None => return,
                }
            }
            None if self.ahead_at.is_empty() => (self.write_pos(), 0),
            None => return,
        };
        let items = self.dp.decoder().items_in(p.payload) as u64;
        loop {
            let o = self.order.as_mut().expect("sequence tracking");
            let Some((frames, ext, entry)) = o.held_at_mut().find(|h| h.0 >= next) else {
                return;
            };
            if !matches!(entry, Entry::Owned(c) if c.info.payload_len as usize == p.payload) {
                return;
            }
            let Entry::Owned(copy) = std::mem::replace(entry, Entry::Placed) else {
                unreachable!("an owned copy")
            };
            let hole = Gap {
                frames: frames - next,
                bytes: Some((frames - next) * p.payload as u64),
                ambiguous: false,
            };
            let at = base + self.dp.zeros_before(&hole, p.payload);
            let placed = self.put_ahead(at, base, &copy.bytes[copy.info.payload()]);
            let o = self.order.as_mut().expect("sequence tracking");
            let (_, _, slot) = o.held_at_mut().find(|h| h.0 == frames).expect("held");
            if !placed {
                *slot = Entry::Owned(copy);
                return;
            }
            *slot = Entry::Ahead(Ahead {
                at,
                info: copy.info,
                arrival_ns: copy.arrival_ns,
            });
            self.placed_ahead(at, items, ext, copy.arrival_ns);
            self.spare.push(copy.bytes);
            (base, next) = (at + items, frames + 1);
        }
    }

    /// Takes a fresh buffer for the stream from stream position `at` on, the frontier in the
    /// last buffer; false when there is none, or the last buffer would give up nothing.
    pub(super) fn open_ahead(&mut self, at: u64) -> bool {
        let Some(last) = self.landing_buffer() else {
            return false;
        };
        let from = at.saturating_sub(last.start) as usize;
        if at < last.start + last.pos as u64 || from == 0 || last.end.is_some() {
            return false;
        }
        let len = last.buffer.items().len();
        if from > len {
            return false;
        }
        // An in-order buffer's rest is where the stream goes on; otherwise a fresh one.
        let rest = if from < len && self.room_to_split(0) {
            let last = self.landing_buffer().expect("a buffer");
            let rest = last.buffer.split_off(from);
            if rest.is_some() {
                self.count_split();
            }
            rest
        } else {
            None
        };
        let Some(buffer) = rest.or_else(|| self.empty.take()) else {
            return false;
        };
        self.landing_buffer().expect("a buffer").end = Some(from);
        self.ahead.push_back(Current::fresh(buffer, at, None));
        true
    }

    /// For a datagram that showed a gap and does not fit behind its hole in one buffer (a
    /// hole longer than the room left, or small buffers): takes empty buffers behind the
    /// current one until they reach `end`, where the datagram would end at `at`, so that
    /// the datagrams after it land in place (the frontier is `end`). It is copied, and once
    /// released written with its zeros across those buffers like any copied datagram. False,
    /// with nothing taken, when something is placed ahead already or the empty buffers do
    /// not reach that far.
    pub(super) fn cover_ahead(&mut self, at: u64, end: u64, ext: u64, o: &Owned) -> bool {
        if self.frontier.is_some() || self.covered.is_some() || !self.ahead.is_empty() {
            return false;
        }
        let Some(c) = self.cur.as_mut().filter(|c| c.end.is_none()) else {
            return false;
        };
        let len = c.buffer.items().len();
        let mut reach = c.start + len as u64;
        let mut taken = std::collections::VecDeque::new();
        while reach < end {
            let Some(mut b) = self.empty.take() else {
                break;
            };
            let n = b.items().len();
            taken.push_back(Current::fresh(b, reach, Some(n)));
            if n == 0 {
                break;
            }
            reach += n as u64;
        }
        if reach < end || taken.is_empty() {
            self.empty.put_back(taken.into_iter().map(|c| c.buffer));
            return false;
        }
        self.cur.as_mut().expect("a current buffer").end = Some(len);
        // The stream goes on behind the last one's end only once it is full.
        taken.back_mut().expect("a buffer").end = None;
        self.ahead = taken;
        self.frontier = Some((end, ext));
        self.covered = Some(Covered {
            at,
            arrival_ns: o.arrival_ns,
            seq: o.info.seq,
        });
        true
    }

    /// Gives back a last buffer taken ahead that holds nothing placed.
    fn close_unused_ahead(&mut self) {
        let Some(last) = self.ahead.back() else {
            return;
        };
        if self
            .ahead_at
            .back()
            .is_some_and(|&(at, _)| at >= last.start)
            || self.frontier.is_some_and(|(f, _)| f > last.start)
        {
            return;
        }
        let c = self.ahead.pop_back().expect("a buffer");
        self.empty.put_back(std::iter::once(c.buffer));
        if let Some(prev) = self.landing_buffer() {
            prev.end = None;
        }
    }

    /// Writes the zeros of its gap in front of a released datagram placed ahead and accounts
    /// its payload where it is. False, with nothing of it written, when the gap did not
    /// come out as its place assumed: the caller evacuates and writes it as a copy.
    pub(super) fn write_ahead(&mut self, a: &Ahead, event: SeqEvent, gap: Gap) -> bool {
        if !self.catch_up() {
            return false;
        }
        let payload = a.info.payload_len as usize;
        if self.write_pos() + self.dp.zeros_before(&gap, payload) != a.at {
            return false;
        }
        let d = DatagramIn {
            payload: &[],
            gap,
            restart: matches!(event, SeqEvent::First | SeqEvent::Resync),
            timestamp: a.info.timestamp,
            eob: a.info.eob,
            seq: a.info.seq,
            arrival_ns: a.arrival_ns,
        };
        let c = self.cur.as_mut().expect("a current buffer");
        let pos = c.pos;
        let mut w = self.dp.writer(c.out());
        if !w.push_placed(&d, payload) {
            return false;
        }
        let gaps = w.take_gaps();
        let (n, tags) = w.finish();
        c.gaps.extend(gaps);
        c.tags.extend(tags.into_iter().map(|t| ItemTag {
            index: t.index + pos,
            kind: t.kind,
        }));
        c.pos += n;
        c.datagrams += 1;
        debug_assert_eq!(self.ahead_at.front().map(|f| f.0), Some(a.at));
        self.ahead_at.pop_front();
        let counters = &self.shared.engine.counters.consumer;
        counters.delivered.add(1);
        counters.delivered_bytes.add(payload as u64);
        self.span.delivered(a.arrival_ns, counters);
        true
    }

    /// Writes what waits (zeros, staged data) and moves on to the next buffer taken ahead
    /// while the current one is written up to where the stream leaves it. False when
    /// something still waits.
    fn catch_up(&mut self) -> bool {
        loop {
            if self.cur.is_none() {
                return false;
            }
            self.flush_pending();
            let c = self.cur.as_ref().expect("a current buffer");
            if c.end == Some(c.pos) && !self.ahead.is_empty() {
                self.hand_over();
                continue;
            }
            return !self.dp.pending();
        }
    }

    /// Whether a copied datagram, written at the write position after its gap, stays clear
    /// of the datagrams placed ahead.
    pub(super) fn clear_of_ahead(&mut self, info: PacketInfo, len: usize, gap: &Gap) -> bool {
        if self.ahead_at.is_empty() {
            return true;
        }
        if !self.catch_up() {
            return false;
        }
        let payload = (info.payload_len as usize).min(len);
        let need = self.dp.zeros_before(gap, payload) + self.dp.items_after(gap, payload) as u64;
        self.ahead_at
            .front()
            .is_some_and(|&(next, _)| self.write_pos() + need <= next)
    }

    /// Turns every datagram placed ahead and not written yet — held in the reorder stage or
    /// released in `rest` — into a copied one, and gives back the buffers taken for them.
    pub(super) fn evacuate(&mut self, rest: &mut [Released<Entry>]) {
        let (cur, ahead) = (&mut self.cur, &mut self.ahead);
        let (dec, reencode) = (*self.dp.decoder(), self.reencode.as_ref());
        let mut moved = 0u64;
        let mut convert = |e: &mut Entry| {
            if let Entry::Ahead(a) = e {
                let o = read_out::<T, B>(cur, ahead, a, &dec, reencode);
                moved += 1;
                *e = Entry::Owned(o);
            }
        };
        if let Some(o) = self.order.as_mut() {
            o.held_mut().for_each(&mut convert);
        }
        rest.iter_mut().for_each(|r| convert(&mut r.item));
        tracing::trace!(moved, "in-place: datagrams placed ahead copied back out");
        self.ahead_at.clear();
        self.reset_frontier();
    }

    /// Hands the current buffer over because it is due: datagrams placed ahead in it are
    /// copied back out first (it may not wait longer for its hole).
    pub(super) fn hand_over_now(&mut self) {
        if !self.released.is_empty() {
            self.deliver_released();
        }
        if !self.may_hand_over() {
            let mut rest = std::mem::take(&mut self.released);
            self.evacuate(&mut rest);
            self.released = rest;
        }
        self.hand_over();
    }

    /// Once nothing placed ahead waits: the next datagram in order lands at the write
    /// position again, and buffers taken ahead that hold nothing go back.
    pub(super) fn settle(&mut self) {
        if self.ahead_at.is_empty()
            && self.covered.is_none()
            && (self.frontier.is_some() || !self.ahead.is_empty())
        {
            self.reset_frontier();
        }
    }

    fn reset_frontier(&mut self) {
        self.frontier = None;
        self.covered = None;
        while let Some(c) = self.ahead.pop_back() {
            self.empty.put_back(std::iter::once(c.buffer));
        }
        if let Some(c) = self.cur.as_mut() {
            c.end = None;
        }
    }
}

/// A datagram placed ahead, copied back out of its buffer.
fn read_out<T: Item, B: ItemBuffer<T>>(
    cur: &mut Option<Current<B>>,
    ahead: &mut VecDeque<Current<B>>,
    a: &Ahead,
    dec: &crate::sample::Decoder<T>,
    reencode: Option<&crate::sample::Encoder<T>>,
) -> Owned {
    let payload = a.info.payload_len as usize;
    let items = dec.items_in(payload);
    let c = cur
        .iter_mut()
        .chain(ahead.iter_mut())
        .find_map(|c| {
            // The stream's part of the buffer: up to where it goes on in the next one.
            let span = c.end.unwrap_or(c.buffer.items().len()) as u64;
            (c.start <= a.at && a.at + items as u64 <= c.start + span).then_some(c)
        })
        .expect("a datagram placed ahead lies in a buffer taken for it");
    let from = (a.at - c.start) as usize;
    // Decoded where it lies: encoded back into the wire's bytes (`convert.rs`).
    let bytes =
        super::convert::wire_bytes(&c.buffer.items()[from..from + items], reencode, payload);
    Owned {
        bytes,
        info: PacketInfo {
            payload_offset: 0,
            ..a.info
        },
        arrival_ns: a.arrival_ns,
    }
}
