//! The batch's scatter layout — each datagram position's header area, its payload at its
//! sample position in the current buffer, and a spill area — and the fast path that only
//! accounts for payloads the kernel put in place; everything else is copied out for
//! `copying.rs`.

use super::ItemBuffer;
use super::receiver::{
    Area, Entry, HEAD_CAP, Layout, Part, Pattern, Polling, Receive, SINGLES, Unit,
};
use crate::depacketizer::{DatagramIn, ItemTag, TagKind};
use crate::format::PacketClass;
use crate::sample::Item;
use crate::seq::{SeqEvent, SeqPacket, Widened};
use crate::sys::{self, RecvMeta, Wait};

impl<T: Item, B: ItemBuffer<T>> Receive<T, B> {
    /// One `recvmmsg` call and everything it brought. Returns false once the socket was
    /// shut down.
    ///
    /// On the fast path each datagram position of the call has three areas in a row: its
    /// header's (`HEAD_CAP` bytes at most), its payload's in the current buffer right behind
    /// the previous position's, and after an entry's last position its spill area for
    /// anything longer. Without GRO an entry is one position. With GRO the kernel writes a
    /// coalesced receive's datagrams back to back, so an entry of `k` positions takes `k`
    /// datagrams of the stream's size each into place. After a coalesced receive the call
    /// is one such entry (later entries could not know where the previous one ends); after
    /// `SINGLES` calls in a row that brought the stream's datagrams only one by one, it is a
    /// batch of one-position entries again.
    pub(super) fn receive(&mut self, wait: Wait) -> std::io::Result<bool> {
        self.place_held_copies();
        let fast = self.pattern.filter(|p| {
            p.head <= HEAD_CAP && self.places() && !self.dp.pending() && self.released.is_empty()
        });
        let size = std::mem::size_of::<T>();
        // With datagrams placed ahead of a gap the next ones land behind the furthest (in a
        // fresh buffer when the last one has no room for another).
        if let (Some(p), Some((f, _))) = (fast, self.frontier) {
            let room = self.landing_buffer().map_or(0, |c| {
                (c.start + c.buffer.items().len() as u64).saturating_sub(f)
            });
            if room < self.dp.decoder().items_in(p.payload) as u64 {
                self.open_ahead(f);
            }
        }
        let landing = self.landing();
        let (pos, base, len, start, id) = {
            let c = self.landing_buffer().expect("a current buffer");
            let (start, id) = (c.start, c.id);
            let at = (landing - start) as usize;
            let items = c.buffer.items();
            (
                at * size,
                items.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(items),
                start,
                id,
            )
        };
        (self.layout_start, self.layout_id) = (start, id);
        // Datagram positions per entry, and entries.
        // A position's items take `region` bytes; its body area lies at their end, `skew`
        // bytes in (samples that need conversion are decoded forward from there).
        let region = fast.map_or(0, |p| self.region(p));
        let skew = fast.map_or(0, |p| region - p.payload.min(region));
        let (per_entry, n) = match fast {
            Some(p) => {
                let fit = ((len - pos) / region.max(1)).max(1);
                match self.positions(p) {
                    1 => (1, self.batch.min(fit)),
                    k => (k.min(fit), 1),
                }
            }
            // Until the stream's layout is known, one datagram at a time, so that only the
            // first one is copied.
            None if self.pattern.is_none() && self.places() => (0, 1),
            None => (0, self.batch),
        };
        self.slots.clear();
        self.parts.clear();
        self.entry_parts.clear();
        for i in 0..n {
            let first = self.parts.len();
            let mut used = 0;
            if let Some(p) = fast {
                for _ in 0..per_entry {
                    let slot = self.slots.len();
                    let items_at = (pos + slot * region).min(len);
                    let at = (items_at + skew).min(len);
                    let body = p.payload.min(len - at);
                    self.slots.push(Layout { at, body, items_at });
                    self.parts.push(Part {
                        area: Area::Head(slot),
                        len: p.head,
                    });
                    self.parts.push(Part {
                        area: Area::Body(at),
                        len: body,
                    });
                    used += p.head + body;
                }
            }
            self.parts.push(Part {
                area: Area::Spill(i),
                len: self.entry_room.saturating_sub(used),
            });
            let heads = self.heads.as_mut_ptr();
            let spill = self.spill.as_mut_ptr();
            let room = self.entry_room;
            let iovecs = self.parts[first..].iter().map(|part| {
                // SAFETY: every area lies inside its allocation: head slots are fewer than
                // `heads` holds positions, spill entries fewer than `batch`, and body
                // offsets were clamped to the current buffer's length.
                // Checked by: `a_clean_stream_lands_in_place_without_a_copy`,
                // `drops_are_zero_filled_and_counted_exactly_in_place` and
                // `coalesced_receives_of_changing_sizes_land_whole_and_in_order` under ASan.
                let at = unsafe {
                    match part.area {
                        Area::Head(slot) => heads.add(slot * HEAD_CAP),
                        Area::Body(at) => base.add(at),
                        Area::Spill(entry) => spill.add(entry * room),
                    }
                };
                (at, part.len)
            });
            // SAFETY: the head, body and spill areas are valid for writes of the given
            // lengths (bodies lie inside the current buffer: at + body ≤ its length in
            // bytes; a spill area's length is at most `entry_room`); the buffer and the areas
            // are owned by this thread and neither read nor written until recv returns.
            // Checked by: `a_clean_stream_lands_in_place_without_a_copy`,
            // `drops_are_zero_filled_and_counted_exactly_in_place` and
            // `coalesced_receives_of_changing_sizes_land_whole_and_in_order` under ASan.
            unsafe { self.msgs.set_iovecs(i, iovecs) };
            self.entry_parts.push(first..self.parts.len());
        }
        // After gaps, only up to the first datagram that does not continue the stream.
        let probed = self.probed(n, fast, per_entry);
        self.counts.recv_calls += 1;
        let mut m = self.recv_entries(probed.count, wait)?;
        self.polling = match m {
            _ if self.poll_ns == 0 => Polling::Off,
            0 => Polling::Off,
            // A full call, or one that ended in front of a gap: more is likely queued;
            // take it before sleeping.
            m if m == n || (probed.more && m == probed.count) => Polling::Drain,
            _ => Polling::Sleep,
        };
        let arrival_ns = sys::monotonic_ns();
        let mut shut_down = false;
        // Whether the stream comes coalesced: any coalesced receive says yes; calls that
        // bring only datagrams of the stream's size alone, SINGLES in a row, say no (one
        // alone is a sender's remainder after a full run); anything else (a context packet
        // between coalesced runs) leaves it as it was.
        let mut coalesced = None;
        self.units.clear();
        for i in 0..m {
            let meta = self.msgs.meta(i);
            if meta.len == 0 && meta.source.is_none() && !meta.truncated {
                // shutdown(SHUT_RD): the queue is empty and the receiver is stopping.
                shut_down = true;
                m = i;
                break;
            }
            if self.split(i, meta, fast, per_entry) > 1 {
                coalesced = Some(true);
            } else if self.pattern.is_some_and(|p| p.head + p.payload == meta.len) {
                coalesced.get_or_insert(false);
            }
        }
        if m > 0 {
            match coalesced {
                Some(true) => (self.coalesced, self.singles) = (true, 0),
                Some(false) => {
                    self.singles += 1;
                    if self.singles >= SINGLES {
                        self.coalesced = false;
                    }
                }
                None => {}
            }
            // One entry of several positions, all taken by one coalesced receive.
            self.read_on = per_entry > 1 && m == 1 && self.units.len() >= per_entry;
        }
        // The fast path, while payloads land where they belong.
        let count = self.units.len();
        let mut first_copied = count;
        let (mut widened, mut refused) = (None, false);
        if let Some(p) = fast {
            for u in 0..count {
                match self.try_place(u, p, arrival_ns) {
                    Placement::Placed { full: true } => {}
                    Placement::Placed { full: false } => {
                        first_copied = u + 1;
                        break;
                    }
                    Placement::Refused { seq } => {
                        first_copied = u;
                        widened = seq;
                        refused = true;
                        break;
                    }
                }
            }
        } else {
            first_copied = 0;
        }
        self.note_probe(fast, probed, refused);
        if first_copied < count {
            tracing::trace!(
                copied = count - first_copied,
                of = count,
                refused,
                fast = fast.is_some(),
                "in-place: datagrams of a call take the copying path"
            );
            // Copy every later datagram out before anything is written where they landed.
            let mut owned = Vec::with_capacity(count - first_copied);
            for u in first_copied..count {
                owned.push(self.copy_out(u));
            }
            for (k, bytes) in owned.into_iter().enumerate() {
                let u = first_copied + k;
                let seq = if k == 0 { widened } else { None };
                self.copied(u, bytes, seq, arrival_ns);
            }
        }
        if let Some(c) = self.cur.as_mut()
            && c.first_ns == 0
            && c.pos > 0
        {
            c.first_ns = arrival_ns;
        }
        Ok(!shut_down)
    }

    /// Entry `i`'s datagrams as units: one, or each of a coalesced receive's. A datagram
    /// keeps its position's layout when it landed exactly there (a coalesced receive of
    /// datagrams of the stream's size, one per position, or one datagram alone), and goes
    /// the copying path otherwise. Returns how many datagrams the entry held.
    pub(super) fn split(
        &mut self,
        i: usize,
        meta: RecvMeta,
        fast: Option<Pattern>,
        per_entry: usize,
    ) -> usize {
        let datagrams = meta.datagrams();
        let k = datagrams.len();
        let step = meta.gro_segment.map_or(meta.len, usize::from);
        let lines_up = fast.is_some_and(|p| k == 1 || step == p.head + p.payload);
        if k > 1 {
            if step != self.segment {
                (self.segment, self.segments) = (step, 0);
            }
            self.segments = self.segments.max(k);
            self.counts.gro_datagrams += k as u64;
            if !lines_up || k > per_entry {
                self.counts.gro_fixups += 1;
            }
        }
        for (j, (offset, mut d)) in datagrams.enumerate() {
            self.counts.received += 1;
            self.counts.bytes += d.len as u64;
            // Longer than a slot: as if the receive had been cut there.
            d.truncated |= d.len > self.slot_size;
            let place = (lines_up && j < per_entry).then_some(i * per_entry + j);
            self.units.push(Unit {
                entry: i,
                offset,
                meta: d,
                place,
            });
        }
        k
    }

    /// The fast path for datagram `u` of the call: its header says it is the stream's next
    /// datagram with the expected layout, so its payload is already in place and only
    /// needs accounting.
    pub(super) fn try_place(&mut self, u: usize, p: Pattern, arrival_ns: u64) -> Placement {
        let refused = Placement::Refused { seq: None };
        let Unit { meta, place, .. } = self.units[u];
        let Some(slot) = place else { return refused };
        let l = self.slots[slot];
        if meta.truncated || !self.filter.accepts(meta.source) {
            return refused;
        }
        // Its payload must sit where the next items go (behind the furthest one placed
        // ahead of a gap, if any).
        let size = std::mem::size_of::<T>();
        if self.cur.is_none()
            || !l.items_at.is_multiple_of(size)
            || self.layout_start + (l.items_at / size) as u64 != self.landing()
        {
            return refused;
        }
        let head = &self.heads[slot * HEAD_CAP..slot * HEAD_CAP + p.head];
        let parsed = if self.format.trailer_unseen(head) {
            // A trailer (VRT's end of burst, a burst's last packet) is read from the whole
            // datagram, gathered from its areas; the payload stays where it landed.
            let whole = self.copy_out(u);
            let info = self.format.parse(&whole);
            self.spare.push(whole);
            info
        } else {
            self.format.parse_head(head, meta.len)
        };
        let Ok(info) = parsed else {
            return refused;
        };
        let payload = info.payload_len as usize;
        if info.class != PacketClass::Data
            || info.payload_offset as usize != p.head
            || payload > l.body
            || self.stream.is_some_and(|s| s != info.stream_id)
        {
            return refused;
        }
        let mut packet = self.seq_packet(&info);
        // Its widened number, when tracked (kept apart from `packet`: moving the two as one
        // tuple cost a stalled copy per datagram).
        let widened = match (self.order.is_some(), info.seq) {
            (true, Some(_)) => {
                if self.order.as_ref().is_some_and(|o| o.needs_fingerprint()) {
                    // The payload's area [l.at, l.at + payload) of the layout's buffer
                    // (payload ≤ l.body, clamped to the buffer when the layout was set).
                    let Some(c) = self.layout_buffer() else {
                        return refused;
                    };
                    let items: &[T] = c.buffer.items();
                    let bytes: &[u8] = bytemuck::cast_slice(items);
                    let Some(payload_bytes) = bytes.get(l.at..l.at + payload) else {
                        return refused;
                    };
                    packet.fingerprint = Some(crate::seq::fingerprint(payload_bytes));
                }
                let o = self.order.as_mut().expect("sequence tracking");
                let w = o.widen(&packet);
                if o.take_clock_dropped() {
                    self.shared.engine.counters.consumer.clock_dropped.add(1);
                }
                // Behind datagrams placed ahead of a gap, or released ones not written yet,
                // the writer's position is not where it landed.
                if !o.is_next(&w) || self.frontier.is_some() || !self.released.is_empty() {
                    return self.hold_in_place(w, packet, &info, l, arrival_ns);
                }
                Some(w)
            }
            _ => None,
        };
        let c = self.cur.as_mut().expect("a current buffer");
        // In order it is accounted in the current buffer: it must have landed there.
        if c.id != self.layout_id {
            return Placement::Refused {
                seq: widened.map(|w| (w, packet)),
            };
        }
        let pos = c.pos;
        let room = c.buffer.items().len() - pos;
        // Samples that need conversion are decoded where they landed first (`convert.rs`).
        if !self.dp.can_place(payload, room) || !self.decode_landed(l, payload) {
            return Placement::Refused {
                seq: widened.map(|w| (w, packet)),
            };
        }
        let c = self.cur.as_mut().expect("a current buffer");
        let mut event = SeqEvent::InOrder;
        // What the format could not prove about its place (with no gap before it, a flag
        // on the gap only is none).
        let mut ambiguous = false;
        if let (Some(o), Some(w)) = (self.order.as_mut(), widened) {
            // is_next held: it goes out at once, in order, with no gap and nothing else.
            match o.push_next(w, &packet) {
                Some(e) => {
                    event = e;
                    ambiguous = w.ambiguous && !w.gap_only;
                }
                None => {
                    o.push(w, &packet, Entry::Placed, &mut self.released);
                    if let Some(r) = self.released.pop() {
                        event = r.event;
                        ambiguous = r.ambiguous;
                    }
                }
            }
        }
        let d = DatagramIn {
            payload: &[],
            gap: Default::default(),
            restart: matches!(event, SeqEvent::First | SeqEvent::Resync),
            timestamp: info.timestamp,
            eob: info.eob,
            seq: info.seq,
            arrival_ns,
        };
        let n = match self.dp.push_placed_plain(&d, payload, room) {
            Some((n, time)) => {
                if let Some(t) = time {
                    c.tags.push(ItemTag {
                        index: pos,
                        kind: TagKind::Time(t),
                    });
                }
                n
            }
            None => {
                let mut w = self.dp.writer(&mut c.buffer.items()[pos..]);
                w.push_placed(&d, payload);
                let (n, tags) = w.finish();
                c.tags.extend(tags.into_iter().map(|t| ItemTag {
                    index: t.index + pos,
                    kind: t.kind,
                }));
                n
            }
        };
        c.pos += n;
        c.datagrams += 1;
        self.stream.get_or_insert(info.stream_id);
        let counters = &self.shared.engine.counters.consumer;
        counters.delivered.add(1);
        counters.delivered_bytes.add(payload as u64);
        if ambiguous {
            counters.ambiguous.add(1);
        }
        self.span.delivered(arrival_ns, counters);
        Placement::Placed {
            full: payload == p.payload,
        }
    }

    /// Datagram `u` of the call as one contiguous copy, gathered from the areas its entry's
    /// bytes landed in.
    pub(super) fn copy_out(&mut self, u: usize) -> Vec<u8> {
        let Unit {
            entry,
            mut offset,
            meta,
            ..
        } = self.units[u];
        let mut want = meta.len;
        // The layout's buffer, found by its id (its start may be another's too); every
        // buffer taken stays held until the call's datagrams are accounted.
        let body: &[u8] =
            match super::current::layout_buffer(&mut self.cur, &mut self.ahead, self.layout_id) {
                Some(c) => {
                    let items: &[T] = c.buffer.items();
                    bytemuck::cast_slice(items)
                }
                None => &[],
            };
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.clear();
        for part in &self.parts[self.entry_parts[entry].clone()] {
            if want == 0 {
                break;
            }
            if offset >= part.len {
                offset -= part.len;
                continue;
            }
            let n = (part.len - offset).min(want);
            match part.area {
                Area::Head(slot) => {
                    let at = slot * HEAD_CAP + offset;
                    bytes.extend_from_slice(&self.heads[at..at + n]);
                }
                Area::Body(at) => {
                    // Inside the buffer: body offsets were clamped to its length when the
                    // layout was set. Were it ever not, the datagram comes out short and
                    // the copying path counts it so; nothing is read from elsewhere.
                    let Some(src) = body.get(at + offset..at + offset + n) else {
                        debug_assert!(false, "a body area outside the layout's buffer");
                        tracing::error!(at, offset, n, "in-place: body area outside its buffer");
                        break;
                    };
                    bytes.extend_from_slice(src);
                }
                Area::Spill(e) => {
                    let at = e * self.entry_room + offset;
                    bytes.extend_from_slice(&self.spill[at..at + n]);
                }
            }
            want -= n;
            offset = 0;
        }
        bytes
    }
}

/// What the fast path made of a datagram.
pub(super) enum Placement {
    /// Accounted in place; `full` when its payload filled its area (the next datagram's
    /// area starts where it ends).
    Placed { full: bool },
    /// Not for the fast path; `seq` is its widened sequence number when already computed.
    Refused { seq: Option<(Widened, SeqPacket)> },
}

impl<T: Item, B: ItemBuffer<T>> Receive<T, B> {
    /// At a stop with no empty buffer left: one receive call into the spill area, whose
    /// datagrams are dropped and counted (`overflow`: the consumer held every buffer), so
    /// that what the kernel still holds is counted, not freed unseen when the socket closes.
    /// Returns the entries taken, `None` once the queue is empty (or shut down). Over AF_XDP
    /// the frames are the UMEM's and stay there: `None`.
    pub(super) fn discard_queued(&mut self) -> std::io::Result<Option<usize>> {
        if self.xdp.is_some() {
            return Ok(None);
        }
        let (n, room) = (self.batch, self.entry_room);
        for i in 0..n {
            let at = self.spill[i * room..(i + 1) * room].as_mut_ptr();
            // SAFETY: entry i's part of the spill area belongs to this thread and nothing
            // reads or writes it until the receive returns.
            // Checked by: `what_the_kernel_holds_at_a_stop_with_every_buffer_taken_is_counted`
            // under ASan; kernel writes (freed memory poisoned and watched):
            // `inplace_receiver_stops_under_traffic_without_a_write_after_free`.
            unsafe { self.msgs.set_buffer(i, at, room) };
        }
        self.counts.recv_calls += 1;
        let m = self.msgs.recv(&self.socket, n, Wait::No)?;
        for i in 0..m {
            let meta = self.msgs.meta(i);
            if meta.len == 0 && meta.source.is_none() && !meta.truncated {
                // shutdown(SHUT_RD): the queue is empty.
                return Ok(None);
            }
            // A coalesced receive (UDP GRO) holds several datagrams.
            let datagrams =
                meta.gro_segment
                    .filter(|&s| s > 0)
                    .map_or(1, |s| meta.len.div_ceil(usize::from(s)).max(1)) as u64;
            self.counts.received += datagrams;
            self.counts.bytes += meta.len as u64;
            self.counts.overflow += datagrams;
        }
        Ok(Some(m))
    }
}
