//! The consumer side of the engine: takes published slots from the receive threads (merged by
//! arrival time when there are several), widens short sequence numbers, restores order per
//! stream, tracks sequence numbers, and lends each deliverable datagram to the caller.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Shared;
use super::datagram::Datagram;
use super::meta::StreamKey;
use super::slots::{ConsumerEnd, SlotPool};
use crate::seq::{Gap, Released, SeqEvent, StreamOrder, Tracking};
use crate::stats::{ConsumerCounters, StreamSpan};

/// A datagram in a slot, as the consumer sees it before delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SlotRef {
    thread: u16,
    slot: u32,
}

struct StreamState {
    key: StreamKey,
    order: StreamOrder<SlotRef>,
    last_used: u64,
}

/// At most this many streams are tracked at once; the least recently used one is forgotten
/// (releasing what it held) when a new one appears.
const MAX_STREAMS: usize = 64;

/// A slot ready to be delivered, with what the tracker made of it.
struct Ready {
    slot: SlotRef,
    event: SeqEvent,
    gap: Gap,
}

impl Ready {
    fn untracked(slot: SlotRef) -> Self {
        Ready {
            slot,
            event: SeqEvent::InOrder,
            gap: Gap::default(),
        }
    }
}

/// Counts what the tracker made of a released datagram.
pub(crate) fn count_released<T>(c: &ConsumerCounters, r: &Released<T>) {
    if r.ambiguous {
        c.ambiguous.add(1);
    }
    match r.event {
        SeqEvent::Gap { missed } => c.missed.add(missed),
        SeqEvent::Duplicate => c.duplicates.add(1),
        SeqEvent::Late => c.late.add(1),
        SeqEvent::Resync => c.resyncs.add(1),
        SeqEvent::First | SeqEvent::InOrder => {}
    }
}

pub(crate) struct Consumer {
    shared: Arc<Shared>,
    pools: Vec<Arc<SlotPool>>,
    ends: Vec<ConsumerEnd>,
    tracking: Option<Tracking>,
    window: usize,
    timeout: Duration,
    streams: Vec<StreamState>,
    uses: u64,
    released: VecDeque<Released<SlotRef>>,
    scratch: Vec<Released<SlotRef>>,
    /// A datagram found ready by `has_ready` and not yet delivered.
    pending: Option<Ready>,
    /// Slots of each receive thread held back for reordering, and the value last published
    /// to that thread (stored only when it changes: an in-order datagram costs no atomic).
    reorder_held: Vec<(usize, usize)>,
    pub(crate) stopped: bool,
    /// The delivered stream's span in arrival time.
    span: StreamSpan,
}

impl Consumer {
    pub(crate) fn new(
        shared: Arc<Shared>,
        ends: Vec<ConsumerEnd>,
        tracking: Option<Tracking>,
        window: usize,
        timeout: Duration,
    ) -> Self {
        let threads = shared.resume.len();
        Self {
            pools: shared.pools.clone(),
            shared,
            ends,
            tracking,
            window,
            timeout,
            streams: Vec::new(),
            uses: 0,
            released: VecDeque::new(),
            scratch: Vec::new(),
            pending: None,
            reorder_held: vec![(0, 0); threads],
            stopped: false,
            span: StreamSpan::default(),
        }
    }

    #[cfg(all(test, feature = "uring"))]
    pub(crate) fn pool(&self, i: usize) -> &Arc<SlotPool> {
        &self.pools[i]
    }

    /// When held datagrams must be given up on if nothing else arrives.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.streams
            .iter()
            .filter_map(|s| s.order.held_since())
            .min()
            .map(|t| t + self.timeout)
    }

    /// Whether a datagram is ready (it is then delivered by the next `try_recv`).
    pub(crate) fn has_ready(&mut self) -> bool {
        if self.pending.is_none() {
            self.pending = self.next_ready();
        }
        self.pending.is_some()
    }

    /// The next datagram, if one is ready. Never blocks.
    pub(crate) fn try_recv(&mut self) -> Option<Datagram<'_>> {
        let ready = match self.pending.take() {
            Some(r) => r,
            None => self.next_ready()?,
        };
        Some(self.deliver(ready))
    }

    fn deliver(&mut self, ready: Ready) -> Datagram<'_> {
        let t = ready.slot.thread as usize;
        let pool = &*self.pools[t];
        // SAFETY: the consumer owns the slot (popped from the ready ring, not yet freed).
        // Checked by: `reordered_datagrams_are_restored_and_duplicates_dropped` and
        // `mio_accounts_for_every_datagram` under ASan.
        let meta = unsafe { pool.meta(ready.slot.slot) };
        let c = &self.shared.counters.consumer;
        c.delivered.add(1);
        c.delivered_bytes.add(u64::from(meta.info.payload_len));
        self.span.delivered(meta.arrival.monotonic_ns, c);
        Datagram {
            pool,
            free: &mut self.ends[t].free,
            slot: ready.slot.slot,
            event: ready.event,
            gap: ready.gap,
        }
    }

    fn free(&mut self, slot: SlotRef) {
        let pushed = self.ends[slot.thread as usize].free.push(slot.slot);
        debug_assert!(pushed.is_ok(), "free ring sized for every slot");
    }

    /// Pops one slot from the receive threads. With several threads, the one whose oldest
    /// datagram arrived first: the streams they share then come out close to kernel arrival
    /// order, and a thread that fell behind drains its backlog before newer datagrams.
    fn pull(&mut self) -> Option<SlotRef> {
        if self.ends.len() == 1 {
            return self.ends[0]
                .ready
                .pop()
                .ok()
                .map(|slot| SlotRef { thread: 0, slot });
        }
        let mut best: Option<(u64, usize)> = None;
        for (t, end) in self.ends.iter().enumerate() {
            if let Ok(&slot) = end.ready.peek() {
                // SAFETY: a published slot belongs to the consumer until it is freed.
                // Checked by: `reordered_datagrams_are_restored_and_duplicates_dropped` and
                // `mio_accounts_for_every_datagram` under ASan.
                let ns = unsafe { self.pools[t].meta(slot) }.arrival.monotonic_ns;
                if best.is_none_or(|(b, _)| ns < b) {
                    best = Some((ns, t));
                }
            }
        }
        let (_, t) = best?;
        let slot = self.ends[t].ready.pop().ok()?;
        Some(SlotRef {
            thread: t as u16,
            slot,
        })
    }

    /// Moves what the reorder windows released into the delivery queue; those slots are no
    /// longer held back for reordering.
    fn take_scratch(&mut self) {
        for r in self.scratch.drain(..) {
            self.reorder_held[r.item.thread as usize].0 -= 1;
            self.released.push_back(r);
        }
        for (t, (held, published)) in self.reorder_held.iter_mut().enumerate() {
            if held != published {
                *published = *held;
                self.shared.resume[t]
                    .reorder_held
                    .store(*held, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    fn stream_index(&mut self, key: StreamKey, tracking: Tracking) -> usize {
        self.uses += 1;
        if let Some(i) = self.streams.iter().position(|s| s.key == key) {
            self.streams[i].last_used = self.uses;
            return i;
        }
        let state = StreamState {
            key,
            order: StreamOrder::new(tracking, self.window),
            last_used: self.uses,
        };
        if self.streams.len() < MAX_STREAMS {
            self.streams.push(state);
            return self.streams.len() - 1;
        }
        let lru = (0..self.streams.len())
            .min_by_key(|&i| self.streams[i].last_used)
            .unwrap_or(0);
        // Forgetting a stream releases what it held.
        self.streams[lru].order.flush_all(&mut self.scratch);
        self.take_scratch();
        self.streams[lru] = state;
        lru
    }

    /// Gives up on held datagrams whose wait has expired (or all of them once stopped).
    fn expire_held(&mut self) -> bool {
        // The clock is read only when something is held (it is asked after every batch).
        let mut now = None;
        let mut any = false;
        for s in &mut self.streams {
            let Some(since) = s.order.held_since() else {
                continue;
            };
            let now = *now.get_or_insert_with(Instant::now);
            if self.stopped || now.duration_since(since) >= self.timeout {
                s.order.flush_oldest(&mut self.scratch);
                any = true;
            }
        }
        self.take_scratch();
        any
    }

    fn next_ready(&mut self) -> Option<Ready> {
        loop {
            while let Some(rel) = self.released.pop_front() {
                count_released(&self.shared.counters.consumer, &rel);
                if rel.deliver {
                    return Some(Ready {
                        slot: rel.item,
                        event: rel.event,
                        gap: rel.gap,
                    });
                }
                self.free(rel.item);
            }
            let Some(slot) = self.pull() else {
                if self.expire_held() {
                    continue;
                }
                // Starving: a receive thread paused for lack of room reads again at once.
                for r in &self.shared.resume {
                    if r.paused.load(std::sync::atomic::Ordering::Acquire) {
                        r.notify.notify();
                    }
                }
                return None;
            };
            let (seq, key, packet) = {
                // SAFETY: the consumer owns the slot it just popped.
                // Checked by: `reordered_datagrams_are_restored_and_duplicates_dropped` and
                // `mio_accounts_for_every_datagram` under ASan.
                let meta = unsafe { self.pools[slot.thread as usize].meta(slot.slot) };
                if meta.info.class == crate::format::PacketClass::Context {
                    // Context packets count in their own sequence: not tracked here.
                    return Some(Ready::untracked(slot));
                }
                let Some(tracking) = self.tracking.as_ref() else {
                    return Some(Ready::untracked(slot));
                };
                (
                    meta.info.seq,
                    StreamKey {
                        source: meta.source,
                        stream_id: meta.info.stream_id,
                    },
                    tracking.packet(&meta.info),
                )
            };
            let (Some(_), Some(tracking)) = (seq, self.tracking) else {
                return Some(Ready::untracked(slot));
            };
            let i = self.stream_index(key, tracking);
            let mut packet = packet;
            if self.streams[i].order.needs_fingerprint() {
                // SAFETY: as above.
                // Checked by: `reordered_datagrams_are_restored_and_duplicates_dropped` and
                // `mio_accounts_for_every_datagram` under ASan.
                let meta = unsafe { self.pools[slot.thread as usize].meta(slot.slot) };
                // SAFETY: as above; the bytes of a published slot are the datagram's.
                // Checked by: `reordered_datagrams_are_restored_and_duplicates_dropped` and
                // `mio_accounts_for_every_datagram` under ASan.
                let bytes = unsafe { self.pools[slot.thread as usize].data(slot.slot) };
                let payload = &bytes[meta.info.payload().start.min(bytes.len())
                    ..meta.info.payload().end.min(bytes.len())];
                packet.fingerprint = Some(crate::seq::fingerprint(payload));
            }
            let s = &mut self.streams[i];
            let w = s.order.widen(&packet);
            if s.order.take_clock_dropped() {
                self.shared.counters.consumer.clock_dropped.add(1);
            }
            self.reorder_held[slot.thread as usize].0 += 1;
            let restored = s.order.push(w, &packet, slot, &mut self.scratch);
            self.shared.counters.consumer.reordered.add(restored);
            self.take_scratch();
        }
    }

    /// Frees everything still waiting (after the receive threads stopped); returns how many
    /// datagrams that was.
    pub(crate) fn discard_rest(&mut self) -> u64 {
        let mut left = 0;
        while let Some(r) = self.pending.take().or_else(|| self.next_ready()) {
            self.free(r.slot);
            left += 1;
        }
        left
    }
}
