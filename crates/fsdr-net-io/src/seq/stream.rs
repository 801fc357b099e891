//! [`StreamOrder`]: everything the receive side does with one stream's sequence numbers —
//! widen a short counter, restore order within a window, track gaps, duplicates, late
//! datagrams and restarts, and size a gap in bytes from the timestamps. The engine's consumer
//! keeps one per stream; the in-place receiver keeps one for its stream.

use std::time::Instant;

use super::{Released, Reorder, SeqConfig, SeqEvent, SeqExtender, SeqOffset};
use crate::engine::Gap;

/// How sequence numbers of a format are tracked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tracking {
    /// Tracker rules (64-bit space).
    pub(crate) seq: SeqConfig,
    /// Width of the format's counter when it is shorter than 64 bits.
    pub(crate) short_bits: Option<u32>,
    /// The number a restarted sender begins with (for the extender of 16-bit counters).
    pub(crate) restart_seq: Option<u64>,
}

/// One stream's sequence handling. `T` is what travels with a datagram through the reorder
/// window (a slot index, an owned copy, a position in an output buffer).
pub(crate) struct StreamOrder<T> {
    /// Widens a short counter (4 or 16 bits) to 64 bits.
    extender: Option<SeqExtender>,
    reorder: Reorder<T>,
    /// Since when datagrams have been held for a missing one.
    held_since: Option<Instant>,
    /// Timestamp and payload length of the last datagram delivered, to size a gap in bytes.
    last_delivered: Option<(u64, usize)>,
}

impl<T> StreamOrder<T> {
    /// A stream tracked as `tracking` says, reordering within `window` datagrams (bounded by
    /// half the period of a short counter: without timestamps the extender can only tell
    /// ahead from behind within that).
    pub(crate) fn new(tracking: Tracking, window: usize) -> Self {
        Self {
            extender: tracking
                .short_bits
                .map(|b| SeqExtender::new(b, tracking.restart_seq)),
            reorder: Reorder::new(
                tracking.seq,
                match tracking.short_bits {
                    Some(b) => window.min((1usize << (b - 1)) - 1),
                    None => window,
                },
            ),
            held_since: None,
            last_delivered: None,
        }
    }

    /// Widens a sequence number of the format to the 64-bit space the tracker works in.
    pub(crate) fn widen(&mut self, seq: u64, ticks: Option<u64>, payload: usize) -> u64 {
        match self.extender.as_mut() {
            Some(x) => x.extend(seq, ticks, payload),
            None => seq,
        }
    }

    /// Whether a widened `seq` would go out at once, in order, with no gap and nothing held.
    pub(crate) fn is_next(&self, seq: u64) -> bool {
        self.reorder.held() == 0 && self.reorder.tracker().offset(seq) == SeqOffset::Expected
    }

    /// Takes in a datagram with a widened `seq`; appends what can be released to `out`, and
    /// returns how many datagrams were put back in order by this call.
    pub(crate) fn push(&mut self, seq: u64, item: T, out: &mut Vec<Released<T>>) -> u64 {
        let before = self.reorder.restored();
        self.reorder.push(seq, item, out);
        self.note_held();
        self.reorder.restored() - before
    }

    fn note_held(&mut self) {
        if self.reorder.held() == 0 {
            self.held_since = None;
        } else if self.held_since.is_none() {
            self.held_since = Some(Instant::now());
        }
    }

    /// Since when datagrams have been held for a missing one.
    pub(crate) fn held_since(&self) -> Option<Instant> {
        self.held_since
    }

    /// Gives up on the oldest missing datagram(s); returns whether anything was held.
    pub(crate) fn flush_oldest(&mut self, out: &mut Vec<Released<T>>) -> bool {
        let any = self.reorder.flush_oldest(out);
        self.held_since = (self.reorder.held() > 0).then(Instant::now);
        any
    }

    /// Releases everything held, in order.
    pub(crate) fn flush_all(&mut self, out: &mut Vec<Released<T>>) {
        self.reorder.flush_all(out);
        self.held_since = None;
    }

    /// The gap before a datagram that is delivered now (`event` from its release), sized in
    /// bytes from the timestamps when the format's counter is short and timestamps count
    /// samples; remembers the datagram for the next gap.
    pub(crate) fn gap_before(
        &mut self,
        event: SeqEvent,
        ticks: Option<u64>,
        payload: usize,
    ) -> Gap {
        let mut gap = Gap::default();
        if let SeqEvent::Gap { missed } = event {
            gap.frames = missed;
            if let (Some(t), Some((t0, p0)), Some(tpb)) = (
                ticks,
                self.last_delivered,
                self.extender.as_ref().and_then(|x| x.ticks_per_byte()),
            ) {
                // Bytes between the end of the previous datagram and this one.
                let missing = t.wrapping_sub(t0) as i64 as f64 / tpb - p0 as f64;
                gap.bytes = Some(missing.round().max(0.0) as u64);
            }
        }
        self.last_delivered = ticks.map(|t| (t, payload));
        gap
    }
}
