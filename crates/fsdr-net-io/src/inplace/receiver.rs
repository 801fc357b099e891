//! The in-place receive loop: one `step` at a time — take a buffer, write what waits, hand
//! a full buffer over, wait for data and receive one batch (`scatter.rs` lays the batch out
//! and takes the datagrams that landed in place, `copying.rs` the rest).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use socket2::Socket;

use super::current::{Current, layout_buffer};
pub(super) use super::layout::{Area, Layout, Part, Probe, StreamMark, Unit};
pub(super) use super::step::{Polled, Polling, Ready, Step, Until};
use super::{Filled, InShared, ItemBuffer};
use crate::depacketizer::{Depacketizer, DepacketizerConfig, ItemTag};
use crate::engine::receive::Pass;
use crate::engine::{
    Coalesce, EngineConfig, GRO_MAX_BYTES, GRO_MAX_SEGMENTS, Recycled, WakeSchedule,
};
use crate::format::vrt::context::ContextTracker;
use crate::format::{Format, PacketInfo};
use crate::sample::{Decoder, Item};
use crate::seq::{Released, StreamOrder};
use crate::socket::SourceFilter;
use crate::stats::LocalCounts;
use crate::sys::{self, RecvBatch, Wait};

/// Header bytes a datagram's head area holds: the largest header the fast path places.
pub(super) const HEAD_CAP: usize = 64;
/// How often a thread without an empty buffer looks again.
const PAUSE_CHECK: Duration = Duration::from_micros(250);
/// Consecutive copied datagrams with the same header and payload length that make them the
/// stream's new pattern.
pub(super) const RELEARN: u32 = 4;
/// Calls in a row that bring the stream's datagrams only one by one and end GRO's coalesced
/// layout (a single one is the remainder of a sender's run).
pub(super) const SINGLES: u32 = 4;

/// The header and payload length of the stream's datagrams, which the fast path expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pattern {
    pub(super) head: usize,
    pub(super) payload: usize,
}

/// A datagram copied out of the scatter areas, for the copying path.
pub(super) struct Owned {
    pub(super) bytes: Vec<u8>,
    pub(super) info: PacketInfo,
    pub(super) arrival_ns: u64,
}

/// A datagram placed ahead of a gap (`ahead.rs`): its payload is at its sample position,
/// stream item `at`, while the items before it are still missing.
pub(super) struct Ahead {
    pub(super) at: u64,
    pub(super) info: PacketInfo,
    pub(super) arrival_ns: u64,
}

/// What travels through the reorder window.
pub(super) enum Entry {
    /// Its payload is in the output buffer at the write position.
    Placed,
    /// Its payload is in an output buffer, ahead of the write position.
    Ahead(Ahead),
    /// Copied out.
    Owned(Owned),
}

/// The receive thread's state.
pub(super) struct Receive<T, B> {
    pub(super) shared: Arc<InShared>,
    pub(super) socket: Socket,
    /// With `Backend::Xdp`: the AF_XDP receive the datagrams come from (`xdp.rs`).
    pub(super) xdp: Option<crate::engine::XdpRx>,
    /// With `Backend::Xdp`: where the last frame read of the stream stood (`xdp.rs`).
    pub(super) xdp_last: Option<StreamMark>,
    /// With `recvmmsg`: the look into the queue before a receive after gaps (`probe.rs`).
    pub(super) probe: Probe,
    pub(super) format: Format,
    pub(super) filter: SourceFilter,
    pub(super) batch: usize,
    pub(super) slot_size: usize,
    pub(super) reorder_timeout: Duration,
    pub(super) coalesce: Coalesce,
    /// Empty buffers, the most recently returned first.
    pub(super) empty: Recycled<B>,
    pub(super) full: rtrb::Producer<Filled<B>>,
    pub(super) dp: Depacketizer<T>,
    /// Where samples are converted: the items of one copied back out of its place become
    /// wire bytes again (`convert.rs`).
    pub(super) reencode: Option<crate::sample::Encoder<T>>,
    pub(super) order: Option<StreamOrder<Entry>>,
    /// The stream this receiver follows (stream ID of the first data packet).
    pub(super) stream: Option<Option<u32>>,
    pub(super) pattern: Option<Pattern>,
    pub(super) candidate: Option<(Pattern, u32)>,
    pub(super) cur: Option<Current<B>>,
    /// Buffers after the current one that datagrams placed ahead of a gap went into, in
    /// stream order (`ahead.rs`).
    pub(super) ahead: std::collections::VecDeque<Current<B>>,
    /// The stream positions of the datagrams placed ahead and not released yet, in order,
    /// and when each arrived.
    pub(super) ahead_at: std::collections::VecDeque<(u64, u64)>,
    /// With datagrams placed ahead: where the next one in order goes (the end of the
    /// furthest one), and that one's widened sequence number.
    pub(super) frontier: Option<(u64, u64)>,
    /// A copied datagram whose gap did not fit one buffer, while it waits (`ahead.rs`,
    /// `cover_ahead`): the buffers behind its hole are taken.
    pub(super) covered: Option<super::layout::Covered>,
    /// The stream position where the next buffer taken starts.
    pub(super) next_start: u64,
    /// The stream position of the first item of the buffer the call's body areas are in.
    pub(super) layout_start: u64,
    /// That buffer's [`Current::id`].
    pub(super) layout_id: u64,
    pub(super) msgs: RecvBatch,
    /// Header areas, `HEAD_CAP` bytes per datagram position of a call.
    pub(super) heads: Box<[u8]>,
    /// Spill areas, `entry_room` bytes per entry.
    pub(super) spill: Box<[u8]>,
    /// Bytes one entry can take: the slot size, or a whole coalesced receive with UDP GRO.
    pub(super) entry_room: usize,
    /// UDP GRO is on: an entry may bring several datagrams back to back.
    pub(super) gro: bool,
    /// The last receive was coalesced: the next call sets one entry up for many datagrams.
    pub(super) coalesced: bool,
    /// The most datagrams a coalesced receive of `segment`-byte datagrams brought: the
    /// positions a call sets up, and the room a buffer needs for the next receive.
    pub(super) segments: usize,
    pub(super) segment: usize,
    /// The last call's coalesced receive filled every position it had: more is likely
    /// queued right behind it, so the next call reads at once, before any hand-over (as a
    /// full batch does without GRO).
    pub(super) read_on: bool,
    /// Calls in a row that brought the stream's datagrams only alone.
    pub(super) singles: u32,
    /// Under load, read at most this often (`EngineConfig::poll_interval`, bounded by the
    /// socket's receive buffer; ns); 0: on every arrival.
    pub(super) poll_ns: u64,
    /// With `poll_ns`: what the last receive found, which says when the next one comes.
    pub(super) polling: Polling,
    /// A group's receive thread found the socket readable (`Until::Polled`): the next wait
    /// takes that instead of asking the kernel.
    pub(super) readable: bool,
    pub(super) counts: LocalCounts,
    pub(super) released: Vec<Released<Entry>>,
    pub(super) spare: Vec<Vec<u8>>,
    /// The call's datagram positions: where each one's header and payload go.
    pub(super) slots: Vec<Layout>,
    /// The iovecs of the call's entries, in order, and which of them each entry has.
    pub(super) parts: Vec<Part>,
    pub(super) entry_parts: Vec<std::ops::Range<usize>>,
    /// The datagrams the call brought, in order.
    pub(super) units: Vec<Unit>,
    pub(super) last_handover_ns: u64,
    pub(super) paused: bool,
    pub(super) deliver_context: bool,
    pub(super) contexts: ContextTracker,
    /// How the stream's sequence numbers and timestamps are read.
    pub(super) tracking: Option<crate::seq::Tracking>,
    /// The delivered stream's span in arrival time.
    pub(super) span: crate::stats::StreamSpan,
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
        let poll_ns = crate::engine::receive::poll_ns(
            cfg.poll_interval.map_or(0, |d| d.as_nanos() as u64),
            &socket,
        );
        Self {
            shared,
            socket,
            xdp: None,
            xdp_last: None,
            probe: Probe::default(),
            format: cfg.format,
            filter: cfg.socket.filter.clone(),
            batch: cfg.batch,
            slot_size: cfg.slot_size,
            reorder_timeout: cfg.reorder_timeout,
            coalesce: cfg.coalesce,
            empty: if B::IN_ORDER {
                Recycled::in_order(empty)
            } else {
                Recycled::new(empty)
            },
            full,
            reencode: Self::reencoder(&decoder),
            dp: {
                // Samples that need conversion are decoded where they landed (`try_place`).
                let mut dp = Depacketizer::new(decoder, dp_cfg);
                dp.place_decoded();
                dp
            },
            order: cfg
                .tracking()
                .map(|t| StreamOrder::new(t, cfg.reorder_window)),
            stream: None,
            pattern: None,
            candidate: None,
            cur: None,
            ahead: Default::default(),
            ahead_at: Default::default(),
            frontier: None,
            covered: None,
            next_start: 0,
            layout_start: 0,
            layout_id: 0,
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
            poll_ns,
            polling: Polling::Off,
            readable: false,
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
            span: Default::default(),
        }
    }

    pub(super) fn stopping(&self) -> bool {
        self.shared.engine.stop.load(Ordering::Acquire)
    }

    /// The receive thread: the engine's receive loop
    /// ([`run_loop`](crate::engine::receive::run_loop)) over this receiver's passes.
    pub(super) fn run(mut self) {
        sys::set_timer_slack_ns(5_000);
        crate::engine::receive::run_loop(&mut self);
    }

    /// Once stopping (inline: on the consumer's thread): the engine's one rule for stopping
    /// ([`drain_and_finish`](crate::engine::receive::drain_and_finish)).
    pub(super) fn drain_and_finish(&mut self) {
        crate::engine::receive::drain_and_finish(self);
    }

    /// One pass of the receive loop: takes a buffer, writes what waits for room, hands a
    /// full buffer over, or waits for data (as `until` says) and receives one batch.
    pub(super) fn step(&mut self, stopping: bool, until: Until) -> Step {
        if self.cur.is_none() && !self.next_buffer() {
            return Step::NoBuffer;
        }
        self.flush_pending();
        // A buffer that cannot take another datagram goes to the consumer (a fresh one
        // smaller than a datagram is written anyway: the depacketizer stages the rest), and
        // one with no room at all (a buffer of no item) at once — unless datagrams placed
        // ahead of a gap wait in it.
        let room = self.room();
        if (room == 0 || (room < self.need() && self.cur.as_ref().is_some_and(|c| c.pos > 0)))
            && self.may_hand_over()
        {
            self.hand_over();
            return Step::Busy;
        }
        // Copied datagrams that waited for a buffer go out before anything new.
        if !self.released.is_empty() {
            self.deliver_released();
            return Step::Busy;
        }
        let read_on = std::mem::take(&mut self.read_on);
        let mut wait = if stopping || read_on {
            Wait::No
        } else {
            Wait::ForOne
        };
        // Under load (the last receive brought data) on its own thread: sleep (unless more
        // is queued), then read.
        let polling = std::mem::replace(&mut self.polling, Polling::Off);
        if wait == Wait::ForOne && polling != Polling::Off && until == Until::Data {
            match self.poll_sleep(polling == Polling::Sleep) {
                Polled::HandedOver => return Step::Busy,
                Polled::Slept => wait = Wait::No,
                Polled::Due => {}
            }
        }
        if wait == Wait::ForOne {
            match self.wait_for_data(until) {
                Ready::Now => {}
                Ready::Acted => return Step::Busy,
                Ready::Nothing => return Step::Idle,
            }
        }
        if until == Until::Polled {
            // The group's thread serves other sockets too: it never blocks in one.
            wait = Wait::No;
        }
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
    pub(super) fn finish(&mut self) {
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
        // Buffers taken for datagrams placed ahead that could not be written out.
        while self.cur.is_some() {
            self.hand_over();
        }
        let xdp = self.xdp_drops();
        if let Ok(d) = sys::socket_drops(&self.socket) {
            self.counts.kernel_drops = self.counts.kernel_drops.max(u64::from(d) + xdp);
        }
        self.publish();
    }

    /// The buffer the call's body areas were laid out in (`layout_id`), while it is held.
    pub(super) fn layout_buffer(&mut self) -> Option<&mut Current<B>> {
        layout_buffer(&mut self.cur, &mut self.ahead, self.layout_id)
    }

    /// Takes an empty buffer (the one returned last); when there is none, counts a pause.
    pub(super) fn next_buffer(&mut self) -> bool {
        match self.empty.take() {
            Some(buffer) => {
                self.paused = false;
                self.cur = Some(Current::fresh(buffer, self.next_start, None));
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

    pub(super) fn room(&mut self) -> usize {
        let c = self.cur.as_mut().expect("a current buffer");
        c.out::<T>().len()
    }

    /// Room a datagram needs: the stream's payload, or the largest one before it is known.
    pub(super) fn need(&self) -> usize {
        let dec = self.dp.decoder();
        match self.pattern {
            Some(p) => dec.items_in(p.payload).max(1) * self.positions(p),
            None => self.dp.max_items(self.slot_size),
        }
    }

    /// Datagram positions the next call sets up in its entry: one, or with GRO after a
    /// coalesced receive of the stream's datagrams, as many as such a receive brought.
    pub(super) fn positions(&self, p: Pattern) -> usize {
        let size = p.head + p.payload;
        if self.gro && self.coalesced && self.segment == size {
            self.segments
                .clamp(1, (GRO_MAX_BYTES / size).clamp(1, GRO_MAX_SEGMENTS))
        } else {
            1
        }
    }

    /// Writes zeros and staged data that wait for room into the current buffer, if any (at a
    /// stop the last one may have just been handed over: the next one takes them).
    pub(super) fn flush_pending(&mut self) {
        let Some(c) = self.cur.as_mut().filter(|_| self.dp.pending()) else {
            return;
        };
        let pos = c.pos;
        let mut w = self.dp.writer(c.out());
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
    pub(super) fn hand_over(&mut self) {
        let Some(mut c) = self.cur.take() else { return };
        tracing::trace!(
            items = c.pos,
            of = c.buffer.items().len(),
            holes = self.ahead_at.len(),
            "in-place: buffer handed over"
        );
        self.next_start = c.start + c.pos as u64;
        // The stream goes on in the buffer taken for datagrams placed ahead, if any, or in
        // an in-order buffer's rest.
        self.cur = self.ahead.pop_front();
        if self.cur.is_none()
            && c.end.is_none()
            && c.pos > 0
            && c.pos < c.buffer.items().len()
            && self.ahead_at.is_empty()
            && self.frontier.is_none()
            && self.covered.is_none()
            && self.room_to_split(1)
            && let Some(rest) = c.buffer.split_off(c.pos)
        {
            self.count_split();
            self.cur = Some(Current::fresh(rest, self.next_start, None));
        }
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

    /// Whether an in-order buffer may be split in two (counted in `InShared::splits`): the
    /// hand-over ring must keep room for every buffer the thread holds, `handing_over`
    /// being handed over now and not held any more, and as many as the consumer may still
    /// lend (its limit; it counts the pieces as lent).
    pub(super) fn room_to_split(&self, handing_over: usize) -> bool {
        let held = usize::from(self.cur.is_some()) + self.ahead.len() + self.empty.len();
        B::IN_ORDER && self.full.slots() > held + handing_over + self.empty.capacity()
    }

    /// Counts a buffer split (before either piece is handed over).
    pub(super) fn count_split(&self) {
        self.shared
            .splits
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    pub(super) fn publish(&mut self) {
        self.counts.flush(&self.shared.engine.counters.threads[0]);
    }

    /// When the current buffer must go to the consumer even if not full (wake-up
    /// moderation), if it holds anything.
    pub(super) fn hand_over_due(&self) -> Option<WakeSchedule> {
        let c = self.cur.as_ref()?;
        (c.pos > 0).then(|| {
            let mut due =
                self.coalesce
                    .schedule(c.datagrams as u64, c.first_ns, self.last_handover_ns);
            if !self.ahead_at.is_empty() || self.covered.is_some() {
                // A hole waits for its gap to be decided: within the reorder window, or the
                // reorder timeout after the datagram behind it came (a slow stream). Only if
                // it is not decided even then does the buffer go, the datagrams placed ahead
                // copied back out first (`ahead.rs`).
                let behind_ns = self.covered.map_or_else(
                    || self.ahead_at.front().map_or(0, |&(_, arrival)| arrival),
                    |c| c.arrival_ns,
                );
                let held_ns = behind_ns.saturating_add(self.reorder_timeout.as_nanos() as u64);
                due.on_receive = u64::MAX;
                due.at_latest = due.at_latest.max(held_ns);
            }
            due
        })
    }
}

impl<T: Item, B: ItemBuffer<T>> crate::engine::receive::ReceiveSide for Receive<T, B> {
    fn stopping(&self) -> bool {
        Receive::stopping(self)
    }

    fn pass(&mut self, stopping: bool) -> Pass {
        match self.step(stopping, Until::Data) {
            Step::Busy => Pass::Took { more: true },
            Step::NoBuffer => Pass::NoRoom,
            Step::Idle => Pass::Idle,
            Step::Drained => Pass::Drained,
        }
    }

    fn wait_for_room(&mut self) {
        self.shared.engine.resume[0]
            .notify
            .wait_timeout(PAUSE_CHECK);
    }

    fn finish(&mut self) {
        Receive::finish(self);
    }

    fn discard_pass(&mut self) -> Pass {
        let pass = match self.discard_queued() {
            Ok(Some(n)) => Pass::Took {
                more: n == self.batch,
            },
            Ok(None) | Err(_) => Pass::Drained,
        };
        self.publish();
        pass
    }
}
