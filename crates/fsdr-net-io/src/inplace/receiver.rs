//! The in-place receive loop: scatter layout per batch, the fast path that only accounts
//! for payloads the kernel put in place, and the copying path for everything else.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use socket2::Socket;

use super::{Filled, InShared, ItemBuffer};
use crate::depacketizer::{DatagramIn, Depacketizer, DepacketizerConfig, GapEvent, ItemTag};
use crate::engine::{
    Coalesce, EngineConfig, GRO_MAX_BYTES, GRO_MAX_SEGMENTS, Recycled, WakeSchedule,
};
use crate::format::vrt::context::{ContextTracker, IfContext};
use crate::format::{Format, PacketClass, PacketInfo};
use crate::sample::{Decoder, Item};
use crate::seq::{Gap, Released, SeqEvent, SeqPacket, StreamOrder, Widened};
use crate::socket::SourceFilter;
use crate::stats::LocalCounts;
use crate::sys::{self, RecvBatch, RecvMeta, Wait};

/// Header bytes a datagram's head area holds: the largest header the fast path places.
const HEAD_CAP: usize = 64;
/// How often a thread without an empty buffer looks again.
const PAUSE_CHECK: Duration = Duration::from_micros(250);
/// Consecutive copied datagrams with the same header and payload length that make them the
/// stream's new pattern.
const RELEARN: u32 = 4;
/// Calls in a row that bring the stream's datagrams only one by one and end GRO's coalesced
/// layout (a single one is the remainder of a sender's run).
const SINGLES: u32 = 4;

/// The header and payload length of the stream's datagrams, which the fast path expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pattern {
    head: usize,
    payload: usize,
}

/// A datagram copied out of the scatter areas, for the copying path.
struct Owned {
    bytes: Vec<u8>,
    info: PacketInfo,
    arrival_ns: u64,
}

/// What travels through the reorder window.
enum Entry {
    /// Its payload is in the output buffer at the write position.
    Placed,
    /// Copied out.
    Owned(Owned),
}

/// The buffer being filled.
struct Current<B> {
    buffer: B,
    /// Items written.
    pos: usize,
    tags: Vec<ItemTag>,
    gaps: Vec<GapEvent>,
    /// Contexts that changed a setting while it was filled.
    contexts: Vec<IfContext>,
    /// Datagrams in it, and when the first of them arrived.
    datagrams: usize,
    first_ns: u64,
}

/// The receive thread's state.
pub(super) struct Receive<T, B> {
    shared: Arc<InShared>,
    socket: Socket,
    format: Format,
    filter: SourceFilter,
    batch: usize,
    slot_size: usize,
    reorder_timeout: Duration,
    coalesce: Coalesce,
    /// Empty buffers, the most recently returned first.
    empty: Recycled<B>,
    full: rtrb::Producer<Filled<B>>,
    dp: Depacketizer<T>,
    order: Option<StreamOrder<Entry>>,
    /// The stream this receiver follows (stream ID of the first data packet).
    stream: Option<Option<u32>>,
    pattern: Option<Pattern>,
    candidate: Option<(Pattern, u32)>,
    cur: Option<Current<B>>,
    msgs: RecvBatch,
    /// Header areas, `HEAD_CAP` bytes per datagram position of a call.
    heads: Box<[u8]>,
    /// Spill areas, `entry_room` bytes per entry.
    spill: Box<[u8]>,
    /// Bytes one entry can take: the slot size, or a whole coalesced receive with UDP GRO.
    entry_room: usize,
    /// UDP GRO is on: an entry may bring several datagrams back to back.
    gro: bool,
    /// The last receive was coalesced: the next call sets one entry up for many datagrams.
    coalesced: bool,
    /// The most datagrams a coalesced receive of `segment`-byte datagrams brought: the
    /// positions a call sets up, and the room a buffer needs for the next receive.
    segments: usize,
    segment: usize,
    /// The last call's coalesced receive filled every position it had: more is likely
    /// queued right behind it, so the next call reads at once, before any hand-over (as a
    /// full batch does without GRO).
    read_on: bool,
    /// Calls in a row that brought the stream's datagrams only alone.
    singles: u32,
    counts: LocalCounts,
    released: Vec<Released<Entry>>,
    spare: Vec<Vec<u8>>,
    /// The call's datagram positions: where each one's header and payload go.
    slots: Vec<Layout>,
    /// The iovecs of the call's entries, in order, and which of them each entry has.
    parts: Vec<Part>,
    entry_parts: Vec<std::ops::Range<usize>>,
    /// The datagrams the call brought, in order.
    units: Vec<Unit>,
    last_handover_ns: u64,
    paused: bool,
    deliver_context: bool,
    contexts: ContextTracker,
    /// How the stream's sequence numbers and timestamps are read.
    tracking: Option<crate::seq::Tracking>,
}

impl<T: Item, B: ItemBuffer<T>> Receive<T, B> {
    pub(super) fn new(
        cfg: &EngineConfig,
        shared: Arc<InShared>,
        socket: Socket,
        decoder: Decoder<T>,
        dp_cfg: DepacketizerConfig,
        empty: rtrb::Consumer<B>,
        full: rtrb::Producer<Filled<B>>,
    ) -> Self {
        let gro = cfg.socket.gro;
        // With GRO one entry may take a whole coalesced receive, split over up to
        // GRO_MAX_SEGMENTS datagram positions.
        let entry_room = if gro {
            GRO_MAX_BYTES + 1
        } else {
            cfg.slot_size
        };
        let head_positions = if gro {
            cfg.batch.max(GRO_MAX_SEGMENTS)
        } else {
            cfg.batch
        };
        Self {
            shared,
            socket,
            format: cfg.format,
            filter: cfg.socket.filter.clone(),
            batch: cfg.batch,
            slot_size: cfg.slot_size,
            reorder_timeout: cfg.reorder_timeout,
            coalesce: cfg.coalesce,
            empty: Recycled::new(empty),
            full,
            dp: Depacketizer::new(decoder, dp_cfg),
            order: cfg
                .tracking()
                .map(|t| StreamOrder::new(t, cfg.reorder_window)),
            stream: None,
            pattern: None,
            candidate: None,
            cur: None,
            msgs: if gro {
                RecvBatch::with_iovecs(cfg.batch, 2 * GRO_MAX_SEGMENTS + 1)
            } else {
                RecvBatch::new(cfg.batch)
            },
            heads: vec![0u8; head_positions * HEAD_CAP].into_boxed_slice(),
            spill: vec![0u8; cfg.batch * entry_room].into_boxed_slice(),
            entry_room,
            gro,
            coalesced: false,
            segments: 0,
            segment: 0,
            read_on: false,
            singles: 0,
            counts: LocalCounts::default(),
            released: Vec::new(),
            spare: Vec::new(),
            slots: Vec::with_capacity(head_positions),
            parts: Vec::new(),
            entry_parts: Vec::with_capacity(cfg.batch),
            units: Vec::with_capacity(head_positions),
            last_handover_ns: 0,
            paused: false,
            deliver_context: cfg.deliver_context,
            contexts: ContextTracker::default(),
            tracking: cfg.tracking(),
        }
    }

    fn stopping(&self) -> bool {
        self.shared.engine.stop.load(Ordering::Acquire)
    }

    /// The receive thread: steps until stopped, then drains and finishes.
    pub(super) fn run(mut self) {
        sys::set_timer_slack_ns(5_000);
        while !self.stopping() {
            match self.step(false, None) {
                Step::NoBuffer => {
                    self.shared.engine.resume[0]
                        .notify
                        .wait_timeout(PAUSE_CHECK);
                }
                Step::Drained => break,
                Step::Busy | Step::Idle => {}
            }
        }
        self.drain_and_finish();
    }

    /// Once stopping: takes what is queued without waiting (a sender that never pauses
    /// cannot keep it going for ever), then finishes.
    pub(super) fn drain_and_finish(&mut self) {
        for _ in 0..crate::engine::DRAIN_CALLS {
            match self.step(true, None) {
                Step::Busy | Step::Idle => {}
                Step::NoBuffer | Step::Drained => break,
            }
        }
        self.finish();
    }

    /// One pass of the receive loop: takes a buffer, writes what waits for room, hands a
    /// full buffer over, or waits for data (until a deadline, or `max_wait` when given) and
    /// receives one batch.
    pub(super) fn step(&mut self, stopping: bool, max_wait: Option<Duration>) -> Step {
        if self.cur.is_none() && !self.next_buffer() {
            return Step::NoBuffer;
        }
        self.flush_pending();
        // A buffer that cannot take another datagram goes to the consumer (a fresh one
        // smaller than a datagram is written anyway: the depacketizer stages the rest).
        if self.room() < self.need() && self.cur.as_ref().is_some_and(|c| c.pos > 0) {
            self.hand_over();
            return Step::Busy;
        }
        // Copied datagrams that waited for a buffer go out before anything new.
        if !self.released.is_empty() {
            self.deliver_released();
            return Step::Busy;
        }
        let read_on = std::mem::take(&mut self.read_on);
        if !stopping && !read_on {
            match self.wait_for_data(max_wait) {
                Ready::Now => {}
                Ready::Acted => return Step::Busy,
                Ready::Nothing => return Step::Idle,
            }
        }
        let wait = if stopping || read_on {
            Wait::No
        } else {
            Wait::ForOne
        };
        let step = match self.receive(wait) {
            Ok(true) => Step::Busy,
            Ok(false) => Step::Drained,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if stopping {
                    Step::Drained
                } else {
                    Step::Busy
                }
            }
            Err(e) => {
                if !self.stopping() {
                    tracing::warn!(error = %e, "recvmmsg failed");
                    std::thread::sleep(Duration::from_millis(10));
                }
                Step::Busy
            }
        };
        self.publish();
        step
    }

    /// After the last step: whatever waits for a missing predecessor goes out, the last
    /// buffer is handed over, and the final counters are published.
    fn finish(&mut self) {
        if let Some(o) = self.order.as_mut() {
            o.flush_all(&mut self.released);
        }
        while !self.released.is_empty() || self.dp.pending() {
            if self.cur.is_none() && !self.next_buffer() {
                break;
            }
            self.deliver_released();
            self.flush_pending();
            if self.dp.pending() || !self.released.is_empty() {
                self.hand_over();
            }
        }
        // No buffer left to write into.
        for r in std::mem::take(&mut self.released) {
            crate::engine::count_released(&self.shared.engine.counters.consumer, &r);
            if r.deliver {
                self.shared.engine.counters.consumer.unconsumed.add(1);
            }
        }
        self.hand_over();
        if let Ok(d) = sys::socket_drops(&self.socket) {
            self.counts.kernel_drops = self.counts.kernel_drops.max(u64::from(d));
        }
        self.publish();
    }

    /// Takes an empty buffer (the one returned last); when there is none, counts a pause.
    fn next_buffer(&mut self) -> bool {
        match self.empty.take() {
            Some(buffer) => {
                self.paused = false;
                self.cur = Some(Current {
                    buffer,
                    pos: 0,
                    tags: Vec::new(),
                    gaps: Vec::new(),
                    contexts: Vec::new(),
                    datagrams: 0,
                    first_ns: 0,
                });
                true
            }
            None => {
                if !self.paused && !self.stopping() {
                    self.paused = true;
                    self.counts.paused += 1;
                    self.publish();
                }
                false
            }
        }
    }

    fn room(&mut self) -> usize {
        let c = self.cur.as_mut().expect("a current buffer");
        c.buffer.items().len() - c.pos
    }

    /// Room a datagram needs: the stream's payload, or the largest one before it is known.
    fn need(&self) -> usize {
        let dec = self.dp.decoder();
        match self.pattern {
            Some(p) => dec.items_in(p.payload).max(1) * self.positions(p),
            None => self.dp.max_items(self.slot_size),
        }
    }

    /// Datagram positions the next call sets up in its entry: one, or with GRO after a
    /// coalesced receive of the stream's datagrams, as many as such a receive brought.
    fn positions(&self, p: Pattern) -> usize {
        let size = p.head + p.payload;
        if self.gro && self.coalesced && self.segment == size {
            self.segments
                .clamp(1, (GRO_MAX_BYTES / size).clamp(1, GRO_MAX_SEGMENTS))
        } else {
            1
        }
    }

    /// Writes zeros and staged data that wait for room.
    fn flush_pending(&mut self) {
        if !self.dp.pending() {
            return;
        }
        let c = self.cur.as_mut().expect("a current buffer");
        let pos = c.pos;
        let mut w = self.dp.writer(&mut c.buffer.items()[pos..]);
        let gaps = w.take_gaps();
        let (n, tags) = w.finish();
        c.gaps.extend(gaps);
        c.tags.extend(tags.into_iter().map(|t| ItemTag {
            index: t.index + pos,
            kind: t.kind,
        }));
        c.pos += n;
    }

    /// Hands the current buffer to the consumer and wakes it.
    fn hand_over(&mut self) {
        let Some(c) = self.cur.take() else { return };
        let filled = Filled {
            buffer: c.buffer,
            items: c.pos,
            tags: c.tags,
            gaps: c.gaps,
            contexts: c.contexts,
        };
        // The rings hold every buffer in circulation, so this cannot be full.
        if self.full.push(filled).is_err() {
            tracing::error!("in-place hand-over ring full: more buffers given than configured");
        }
        self.last_handover_ns = sys::monotonic_ns();
        self.counts.wakeups += 1;
        *self
            .shared
            .dp_stats
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = self.dp.stats();
        self.publish();
        self.shared.engine.notify.notify();
    }

    fn publish(&mut self) {
        self.counts.flush(&self.shared.engine.counters.threads[0]);
    }

    /// When the current buffer must go to the consumer even if not full (wake-up
    /// moderation), if it holds anything.
    fn hand_over_due(&self) -> Option<WakeSchedule> {
        let c = self.cur.as_ref()?;
        (c.pos > 0).then(|| {
            self.coalesce
                .schedule(c.datagrams as u64, c.first_ns, self.last_handover_ns)
        })
    }

    /// Waits until the socket is readable or a deadline (hand-over, reorder timeout)
    /// passes, and acts on the deadline; with `max_wait`, waits that long at most.
    fn wait_for_data(&mut self, max_wait: Option<Duration>) -> Ready {
        let reorder = self
            .order
            .as_ref()
            .and_then(|o| o.held_since())
            .map(|since| {
                let waited = since.elapsed();
                sys::monotonic_ns() + self.reorder_timeout.saturating_sub(waited).as_nanos() as u64
            });
        let due = self.hand_over_due();
        // Right after a receive: hand over now if that receive made it due.
        if due.is_some_and(|d| sys::monotonic_ns() >= d.on_receive) {
            self.hand_over();
            return Ready::Acted;
        }
        let limit = max_wait.map(|w| sys::monotonic_ns() + w.as_nanos() as u64);
        let deadline = [due.map(|d| d.at_latest), reorder]
            .into_iter()
            .flatten()
            .min();
        let Some(d) = deadline.or(limit) else {
            return Ready::Now;
        };
        let d = limit.map_or(d, |l| l.min(d));
        let now = sys::monotonic_ns();
        if now < d && sys::readable_within(&self.socket, d - now) {
            return Ready::Now;
        }
        // A deadline passed with nothing to read.
        let mut acted = false;
        if let Some(o) = self.order.as_mut()
            && o.held_since()
                .is_some_and(|since| since.elapsed() >= self.reorder_timeout)
        {
            o.flush_oldest(&mut self.released);
            self.deliver_released();
            acted = true;
        }
        if self
            .hand_over_due()
            .is_some_and(|due| sys::monotonic_ns() >= due.at_latest)
        {
            self.hand_over();
            acted = true;
        }
        if acted || limit.is_none() {
            Ready::Acted
        } else {
            Ready::Nothing
        }
    }

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
    fn receive(&mut self, wait: Wait) -> std::io::Result<bool> {
        let fast = self.pattern.filter(|p| {
            p.head <= HEAD_CAP
                && self.dp.decoder().is_copy()
                && !self.dp.pending()
                && self.released.is_empty()
        });
        let size = std::mem::size_of::<T>();
        let (pos, base, len) = {
            let c = self.cur.as_mut().expect("a current buffer");
            let items = c.buffer.items();
            (
                c.pos * size,
                items.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(items),
            )
        };
        // Datagram positions per entry, and entries.
        let (per_entry, n) = match fast {
            Some(p) => {
                let fit = ((len - pos) / p.payload).max(1);
                match self.positions(p) {
                    1 => (1, self.batch.min(fit)),
                    k => (k.min(fit), 1),
                }
            }
            // Until the stream's layout is known, one datagram at a time, so that only the
            // first one is copied.
            None if self.pattern.is_none() && self.dp.decoder().is_copy() => (0, 1),
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
                    let at = (pos + slot * p.payload).min(len);
                    let body = p.payload.min(len - at);
                    self.slots.push(Layout { at, body });
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
            unsafe { self.msgs.set_iovecs(i, iovecs) };
            self.entry_parts.push(first..self.parts.len());
        }
        self.counts.recv_calls += 1;
        let mut m = self.msgs.recv(&self.socket, n, wait)?;
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
        let mut widened = None;
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
                        break;
                    }
                }
            }
        } else {
            first_copied = 0;
        }
        if first_copied < count {
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
    fn split(
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
    fn try_place(&mut self, u: usize, p: Pattern, arrival_ns: u64) -> Placement {
        let refused = Placement::Refused { seq: None };
        let Unit { meta, place, .. } = self.units[u];
        let Some(slot) = place else { return refused };
        let l = self.slots[slot];
        if meta.truncated || !self.filter.accepts(meta.source) {
            return refused;
        }
        // Its payload must sit where the next items go.
        let written = self.cur.as_ref().map(|c| c.pos * std::mem::size_of::<T>());
        if written != Some(l.at) {
            return refused;
        }
        let head = &self.heads[slot * HEAD_CAP..slot * HEAD_CAP + p.head];
        let Ok(info) = self.format.parse_head(head, meta.len) else {
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
        let seq = match (self.order.as_mut(), info.seq) {
            (Some(o), Some(_)) => {
                if o.needs_fingerprint() {
                    let c = self.cur.as_mut().expect("a current buffer");
                    let base = c.buffer.items().as_mut_ptr().cast::<u8>();
                    // SAFETY: the payload's area [l.at, l.at + payload) lies inside the
                    // current buffer (payload ≤ l.body, clamped to the buffer when the
                    // layout was set), which this thread owns; the kernel finished writing.
                    let bytes = unsafe { std::slice::from_raw_parts(base.add(l.at), payload) };
                    packet.fingerprint = Some(crate::seq::fingerprint(bytes));
                }
                let w = o.widen(&packet);
                if !o.is_next(&w) {
                    return Placement::Refused {
                        seq: Some((w, packet)),
                    };
                }
                Some((w, packet))
            }
            _ => None,
        };
        let c = self.cur.as_mut().expect("a current buffer");
        let pos = c.pos;
        let mut w = self.dp.writer(&mut c.buffer.items()[pos..]);
        if !w.can_place(payload) {
            return Placement::Refused { seq };
        }
        let mut event = SeqEvent::InOrder;
        if let (Some(o), Some((w, packet))) = (self.order.as_mut(), seq) {
            o.push(w, &packet, Entry::Placed, &mut self.released);
            // is_next held: it went out at once, in order, with no gap and nothing else.
            if let Some(r) = self.released.pop() {
                event = r.event;
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
        w.push_placed(&d, payload);
        let (n, tags) = w.finish();
        c.tags.extend(tags.into_iter().map(|t| ItemTag {
            index: t.index + pos,
            kind: t.kind,
        }));
        c.pos += n;
        c.datagrams += 1;
        self.stream.get_or_insert(info.stream_id);
        let counters = &self.shared.engine.counters.consumer;
        counters.delivered.add(1);
        counters.delivered_bytes.add(payload as u64);
        Placement::Placed {
            full: payload == p.payload,
        }
    }

    /// Datagram `u` of the call as one contiguous copy, gathered from the areas its entry's
    /// bytes landed in.
    fn copy_out(&mut self, u: usize) -> Vec<u8> {
        let Unit {
            entry,
            mut offset,
            meta,
            ..
        } = self.units[u];
        let mut want = meta.len;
        // The buffer's memory taken afresh: a pointer from an earlier `items()` call may not
        // be used once `items()` was called again (the fast path did).
        let base = self.cur.as_mut().map_or(std::ptr::null_mut(), |c| {
            c.buffer.items().as_mut_ptr().cast::<u8>()
        });
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
                    // SAFETY: [at + offset, at + offset + n) lies inside the area set for
                    // this part, inside the current buffer, which this thread owns; `base`
                    // is from this buffer's latest `items()`, the memory the iovecs pointed
                    // at (the `ItemBuffer` contract); the kernel finished writing it and
                    // nothing has written it since.
                    let src = unsafe { std::slice::from_raw_parts(base.add(at + offset), n) };
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

    /// The copying path for datagram `u` of the call (`seq`: its sequence number if already
    /// widened).
    fn copied(
        &mut self,
        u: usize,
        bytes: Vec<u8>,
        seq: Option<(Widened, SeqPacket)>,
        arrival_ns: u64,
    ) {
        let meta = self.units[u].meta;
        if meta.truncated {
            self.counts.truncated += 1;
            self.spare.push(bytes);
            return;
        }
        if !self.filter.accepts(meta.source) {
            self.counts.rejected += 1;
            self.spare.push(bytes);
            return;
        }
        let info = match self.format.parse(&bytes) {
            Ok(info) => info,
            Err(e) => {
                tracing::trace!(error = %e, "malformed datagram");
                self.counts.malformed += 1;
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
                let restored = o.push(w, &packet, Entry::Owned(owned), &mut self.released);
                self.shared.engine.counters.consumer.reordered.add(restored);
            }
            _ => self
                .released
                .push(Released::new(SeqEvent::InOrder, true, Entry::Owned(owned))),
        }
        self.deliver_released();
    }

    /// What the sequence layer needs of a datagram (its fingerprint is added when asked).
    fn seq_packet(&self, info: &PacketInfo) -> SeqPacket {
        self.tracking
            .as_ref()
            .map_or_else(SeqPacket::default, |t| t.packet(info))
    }

    /// Takes the copied datagrams' header and payload length as the stream's pattern: at
    /// once for the first, after a few in a row when the stream changes.
    fn learn(&mut self, info: &PacketInfo) {
        let size = std::mem::size_of::<T>();
        let unit = self.dp.decoder().unit_bytes();
        let p = Pattern {
            head: info.payload_offset as usize,
            payload: info.payload_len as usize,
        };
        if p.payload == 0 || !p.payload.is_multiple_of(size) || !p.payload.is_multiple_of(unit) {
            return;
        }
        if self.pattern.is_none() || self.pattern == Some(p) {
            self.pattern = Some(p);
            self.candidate = None;
            return;
        }
        let n = match self.candidate {
            Some((c, n)) if c == p => n + 1,
            _ => 1,
        };
        self.candidate = Some((p, n));
        if n >= RELEARN {
            self.pattern = Some(p);
            self.candidate = None;
        }
    }

    /// Writes what the reorder stage released, in order, as far as there are buffers;
    /// what is left waits in `released` for the next buffer.
    fn deliver_released(&mut self) {
        let mut batch = std::mem::take(&mut self.released);
        {
            let mut entries = batch.drain(..);
            while let Some(r) = entries.next() {
                if let Entry::Owned(o) = &r.item
                    && r.deliver
                    && !self.write_owned(o, r.event, r.gap)
                {
                    // No buffer: this one and the rest wait, ahead of anything released later.
                    self.released.push(r);
                    self.released.extend(entries);
                    break;
                }
                crate::engine::count_released(&self.shared.engine.counters.consumer, &r);
                // Placed datagrams go out at once on the fast path, never through here.
                if let Entry::Owned(o) = r.item {
                    self.spare.push(o.bytes);
                }
            }
        }
        if self.released.is_empty() {
            // Keep the allocation: this runs for every copied datagram.
            self.released = batch;
        }
    }

    /// Writes one copied datagram; false when no buffer is free for it (nothing changed).
    fn write_owned(&mut self, o: &Owned, event: SeqEvent, gap: Gap) -> bool {
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
        let mut w = self.dp.writer(&mut c.buffer.items()[pos..]);
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
        true
    }
}

/// What one [`Receive::step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Received, handed over, or acted on a deadline.
    Busy,
    /// No empty buffer: the consumer has to return one.
    NoBuffer,
    /// Nothing arrived within the wait.
    Idle,
    /// Stopping and the socket's queue is empty (or shut down).
    Drained,
}

/// What [`Receive::wait_for_data`] found.
enum Ready {
    /// The socket is readable (or there is no deadline: the receive itself waits).
    Now,
    /// A deadline came first and was acted on.
    Acted,
    /// Nothing within the caller's wait.
    Nothing,
}

/// The body area set for one datagram position of a call (position `k`'s head area is the
/// `k`-th of `heads`).
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Byte offset of the body area in the current buffer, and its length.
    at: usize,
    body: usize,
}

/// Where one iovec of an entry points.
#[derive(Debug, Clone, Copy)]
enum Area {
    /// The head area of a datagram position.
    Head(usize),
    /// The current buffer, from this byte offset.
    Body(usize),
    /// The spill area of an entry.
    Spill(usize),
}

/// One iovec of an entry.
#[derive(Debug, Clone, Copy)]
struct Part {
    area: Area,
    len: usize,
}

/// One datagram a call brought: a whole entry, or one datagram of a coalesced receive.
#[derive(Debug, Clone, Copy)]
struct Unit {
    /// Its entry, and where in the entry's bytes it starts.
    entry: usize,
    offset: usize,
    /// Its own length and flags (for a coalesced receive's datagram, the receive's
    /// source and control messages).
    meta: RecvMeta,
    /// The position (index in `slots`) it landed in exactly, if it did.
    place: Option<usize>,
}

/// What the fast path made of a datagram.
enum Placement {
    /// Accounted in place; `full` when its payload filled its area (the next datagram's
    /// area starts where it ends).
    Placed { full: bool },
    /// Not for the fast path; `seq` is its widened sequence number when already computed.
    Refused { seq: Option<(Widened, SeqPacket)> },
}
