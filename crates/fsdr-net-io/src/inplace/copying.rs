//! The copying path: datagrams that did not land in place (another layout, a gap, out of
//! order, samples that need conversion) are parsed, ordered and depacketized from a copy,
//! with the same accounting as the fast path.

use super::ItemBuffer;
use super::receiver::{Ahead, Entry, Owned, Pattern, RELEARN, Receive};
use crate::depacketizer::{DatagramIn, ItemTag};
use crate::engine::classify;
use crate::format::{PacketClass, PacketInfo};
use crate::sample::Item;
use crate::seq::{Gap, Released, SeqEvent, SeqPacket, Widened};

impl<T: Item, B: ItemBuffer<T>> Receive<T, B> {
    /// The copying path for datagram `u` of the call (`seq`: its sequence number if already
    /// widened).
    pub(super) fn copied(
        &mut self,
        u: usize,
        bytes: Vec<u8>,
        seq: Option<(Widened, SeqPacket)>,
        arrival_ns: u64,
    ) {
        let meta = self.units[u].meta;
        let info = match classify::admit(&meta, &self.filter, self.format, &bytes) {
            Ok(info) => info,
            Err(refused) => {
                refused.count(&mut self.counts);
                self.spare.push(bytes);
                return;
            }
        };
        let other_stream = self.stream.is_some_and(|s| s != info.stream_id);
        if info.class == PacketClass::Context && self.deliver_context && !other_stream {
            // The stream's own context (it may come before its first data packet, and then
            // chooses the stream), applied from the sample time it states.
            self.stream.get_or_insert(info.stream_id);
            for (name, value) in self.contexts.take(&bytes) {
                let setting = crate::depacketizer::TagKind::Setting { name, value };
                self.dp.tag_at(setting, info.timestamp);
            }
            let new = self.contexts.drain_new();
            if let Some(c) = self.cur.as_mut() {
                c.contexts.extend(new);
            }
            self.shared.engine.counters.consumer.delivered.add(1);
            self.spare.push(bytes);
            return;
        }
        if info.class != PacketClass::Data || other_stream {
            self.counts.skipped += 1;
            if other_stream {
                let key = crate::StreamKey {
                    // Unknown only where the kernel gave no address: 0.0.0.0:0, as the
                    // engine's metadata says then.
                    source: meta.source.unwrap_or(([0, 0, 0, 0], 0).into()),
                    stream_id: info.stream_id,
                };
                let engine = &self.shared.engine;
                let mut by_stream = engine.skipped_streams.lock();
                let by_stream = by_stream.as_mut().unwrap_or_else(|e| e.get_mut());
                *by_stream.entry(key).or_default() += 1;
            }
            self.spare.push(bytes);
            return;
        }
        self.stream.get_or_insert(info.stream_id);
        self.learn(&info);
        let owned = Owned {
            bytes,
            info,
            arrival_ns,
        };
        let mut packet = self.seq_packet(&info);
        match (self.order.as_mut(), info.seq) {
            (Some(o), Some(_)) => {
                let (w, packet) = seq.unwrap_or_else(|| {
                    if o.needs_fingerprint() {
                        packet.fingerprint =
                            Some(crate::seq::fingerprint(&owned.bytes[info.payload()]));
                    }
                    (o.widen(&packet), packet)
                });
                if o.take_clock_dropped() {
                    self.shared.engine.counters.consumer.clock_dropped.add(1);
                }
                // Beyond the window the oldest gaps are given up on first (as `push` would),
                // so that it can go ahead of what is still missing.
                if o.lead(&w).is_some_and(|l| l.frames > l.window) {
                    o.make_room(&w, &mut self.released);
                    self.deliver_released();
                }
                // Ahead of the expected one: to its sample position at once (`ahead.rs`),
                // so that the datagrams after it land in place.
                let entry = match self.ahead_target(&w, &info) {
                    Some((at, base)) if self.put_ahead(at, base, &owned.bytes[info.payload()]) => {
                        let items = self.dp.decoder().items_in(info.payload_len as usize) as u64;
                        self.placed_ahead(at, items, w.ext, arrival_ns);
                        self.spare.push(owned.bytes);
                        Entry::Ahead(Ahead {
                            at,
                            info,
                            arrival_ns,
                        })
                    }
                    Some((at, _)) => {
                        let items = self.dp.decoder().items_in(info.payload_len as usize) as u64;
                        // Too long a hole for one buffer: copied, the buffers behind it taken.
                        self.cover_ahead(at, at + items, w.ext, &owned);
                        Entry::Owned(owned)
                    }
                    None => Entry::Owned(owned),
                };
                let o = self.order.as_mut().expect("sequence tracking");
                let restored = o.push(w, &packet, entry, &mut self.released);
                self.shared.engine.counters.consumer.reordered.add(restored);
            }
            _ => self
                .released
                .push(Released::new(SeqEvent::InOrder, true, Entry::Owned(owned))),
        }
        self.deliver_released();
    }

    /// What the sequence layer needs of a datagram (its fingerprint is added when asked).
    pub(super) fn seq_packet(&self, info: &PacketInfo) -> SeqPacket {
        self.tracking
            .as_ref()
            .map_or_else(SeqPacket::default, |t| t.packet(info))
    }

    /// Takes the copied datagrams' header and payload length as the stream's pattern: at
    /// once for the first, after a few in a row when the stream changes.
    pub(super) fn learn(&mut self, info: &PacketInfo) {
        let size = std::mem::size_of::<T>();
        let unit = self.dp.decoder().unit_bytes();
        let p = Pattern {
            head: info.payload_offset as usize,
            payload: info.payload_len as usize,
        };
        // Whole units, and where payloads land as they are, whole items.
        let items = self.dp.decoder().is_copy() && !p.payload.is_multiple_of(size);
        if p.payload == 0 || items || !p.payload.is_multiple_of(unit) {
            return;
        }
        if self.pattern.is_none() || self.pattern == Some(p) {
            self.set_pattern(p);
            self.candidate = None;
            return;
        }
        let n = match self.candidate {
            Some((c, n)) if c == p => n + 1,
            _ => 1,
        };
        self.candidate = Some((p, n));
        if n >= RELEARN {
            self.set_pattern(p);
            self.candidate = None;
        }
    }

    /// Takes `p` as the stream's layout and says how many items its datagrams carry.
    fn set_pattern(&mut self, p: Pattern) {
        self.pattern = Some(p);
        if self.places() {
            let items = self.dp.decoder().items_in(p.payload);
            self.shared
                .datagram_items
                .store(items, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Writes what the reorder stage released, in order, as far as there are buffers;
    /// what is left waits in `released` for the next buffer.
    pub(super) fn deliver_released(&mut self) {
        let mut batch = std::mem::take(&mut self.released);
        let mut done = 0;
        while done < batch.len() {
            if batch[done].deliver {
                if !self.write_released(&mut batch[done..]) {
                    // No buffer: this one and the rest wait, ahead of anything released later.
                    break;
                }
            } else if matches!(batch[done].item, Entry::Ahead(_)) {
                // Placed ahead, then not delivered after all: its place stays empty.
                self.evacuate(&mut batch[done..]);
            } else if let Entry::Owned(o) = &batch[done].item
                && self.is_covered(o)
            {
                // Its hole will not be there: what was placed behind it is copied out.
                self.evacuate(&mut batch[done..]);
            }
            crate::engine::count_released(&self.shared.engine.counters.consumer, &batch[done]);
            done += 1;
        }
        for r in batch.drain(..done) {
            if let Entry::Owned(o) = r.item {
                self.spare.push(o.bytes);
            }
        }
        // What waits, or nothing (the allocation kept: this runs for every copied datagram).
        self.released = batch;
        self.settle();
    }

    /// Writes the first of `rest`, released for delivery; false when no buffer is free for
    /// it. Placed datagrams went out on the fast path already. One placed ahead whose gap
    /// did not come out as its place assumed, or a copied one that would run into one placed
    /// ahead, first turns every datagram placed ahead into a copied one (`evacuate`).
    fn write_released(&mut self, rest: &mut [Released<Entry>]) -> bool {
        let (event, gap) = (rest[0].event, rest[0].gap);
        let evacuate = match &rest[0].item {
            Entry::Placed => return true,
            Entry::Ahead(a) => {
                let a = Ahead { ..*a };
                if self.write_ahead(&a, event, gap) {
                    return true;
                }
                true
            }
            Entry::Owned(o) => {
                if self.is_covered(o) {
                    // Written now: where it lands, the datagrams after it check.
                    self.covered = None;
                }
                let (info, len) = (o.info, o.bytes.len());
                !self.clear_of_ahead(info, len, &gap)
            }
        };
        if evacuate {
            self.evacuate(rest);
        }
        match &rest[0].item {
            Entry::Owned(o) => self.write_owned(o, event, gap),
            _ => unreachable!("evacuated: a copy"),
        }
    }

    /// Writes one copied datagram; false when no buffer is free for it (nothing changed).
    pub(super) fn write_owned(&mut self, o: &Owned, event: SeqEvent, gap: Gap) -> bool {
        let payload = o.info.payload_len as usize;
        // Room first: nothing may be pushed while zeros or a staged datagram wait.
        loop {
            if self.cur.is_none() && !self.next_buffer() {
                return false;
            }
            self.flush_pending();
            if !self.dp.pending() {
                break;
            }
            self.hand_over();
        }
        let d = DatagramIn {
            payload: &o.bytes[o.info.payload()],
            gap,
            restart: matches!(event, SeqEvent::First | SeqEvent::Resync),
            timestamp: o.info.timestamp,
            eob: o.info.eob,
            seq: o.info.seq,
            arrival_ns: o.arrival_ns,
        };
        let c = self.cur.as_mut().expect("a current buffer");
        let pos = c.pos;
        let mut w = self.dp.writer(c.out());
        w.push(&d);
        let gaps = w.take_gaps();
        let (n, tags) = w.finish();
        c.gaps.extend(gaps);
        c.tags.extend(tags.into_iter().map(|t| ItemTag {
            index: t.index + pos,
            kind: t.kind,
        }));
        c.pos += n;
        c.datagrams += 1;
        let counters = &self.shared.engine.counters.consumer;
        counters.delivered.add(1);
        counters.delivered_bytes.add(payload as u64);
        self.span.delivered(o.arrival_ns, counters);
        true
    }
}
