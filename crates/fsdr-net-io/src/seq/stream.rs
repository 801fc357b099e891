//! [`StreamOrder`]: everything the receive side does with one stream's sequence numbers —
//! widen a short counter, restore order within a window, track gaps, duplicates, late
//! datagrams and restarts, and size each gap in bytes. The engine's consumer keeps one per
//! stream; the in-place receiver keeps one for its stream; anyone may drive one by hand.
//!
//! ```
//! use fsdr_net_io::Format;
//! use fsdr_net_io::seq::{SeqPacket, StreamOrder, Tracking};
//!
//! // VRT with sample-count timestamps, 100 samples (400 bytes) per packet, no reordering.
//! let tracking = Tracking::for_format(Format::Vrt, 1).unwrap();
//! let mut order = StreamOrder::new(tracking, 0);
//! let mut out = Vec::new();
//! for k in [0u64, 1, 18] {
//!     let p = SeqPacket { seq: k % 16, ticks: Some(100 * k), payload: 400, ..Default::default() };
//!     let w = order.widen(&p);
//!     order.push(w, &p, k, &mut out);
//! }
//! // 16 packets (6400 bytes) were lost before the third one.
//! assert_eq!(out[2].gap.frames, 16);
//! assert_eq!(out[2].gap.bytes, Some(6400));
//! ```

use std::collections::VecDeque;
use std::time::Instant;

use super::extend::Widened;
use super::{
    Released, Reorder, SeqConfig, SeqEvent, SeqExtender, SeqOffset, SeqPacket, StreamClock,
};
use crate::format::Format;

/// What sequence tracking found just before a datagram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gap {
    /// Frames missing before this datagram.
    pub frames: u64,
    /// Payload bytes missing before it: exact from the timestamps where the format has
    /// usable ones that give distances exactly (not ticks longer than half a sample,
    /// [`Ratio::inverts_exactly`](super::Ratio::inverts_exactly)) and the previous datagram
    /// did not end a burst; otherwise `frames` ×
    /// the stream's largest payload since it (re)started. `None` only when no payload size
    /// is known yet.
    pub bytes: Option<u64>,
    /// The format could not prove the count: a short counter without timestamps saw a
    /// packet whose number was behind but whose payload was not the one received there, so
    /// the loss is `frames` plus an unknown multiple of the counter's period. Or the size:
    /// a rate learnt from the stream's stamps gave the gap other than whole packets — a
    /// short packet lost, or stamps rounded at a rate near the learnt one, a tick off —
    /// which only a longer run tells apart (`bytes` is the time's); or stamps a tick off
    /// (sizing it from the packets) show it other than whole packets beyond their rounding
    /// (a short packet lost: `bytes` is the packets'); or a clock from told rates gave it
    /// other than whole packets — a short packet lost, or the rates a little off the
    /// device's, which a run of packets shows only once it spans enough of the error
    /// (`bytes` is the time's).
    pub ambiguous: bool,
}

/// A datagram ahead of the expected one ([`StreamOrder::lead`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lead {
    /// Frames it is ahead of the expected one (0: it is the expected one).
    pub frames: u64,
    /// The reorder window in force: further ahead than this, the oldest missing datagrams
    /// are given up on when it comes.
    pub window: u64,
    /// The furthest datagram held: its widened number and its frames ahead of the expected
    /// one (`None` when nothing is held).
    pub furthest: Option<(u64, u64)>,
}

/// How sequence numbers of a stream are tracked.
///
/// ```
/// use fsdr_net_io::Format;
/// use fsdr_net_io::seq::Tracking;
///
/// let t = Tracking::for_format(Format::Chdr, 1).unwrap();
/// assert_eq!((t.short_bits, t.restart_seq), (Some(16), Some(0)));
/// assert!(Tracking::for_format(Format::Raw, 1).is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tracking {
    /// Tracker rules (64-bit space).
    pub seq: SeqConfig,
    /// Width of the format's counter when it is shorter than 64 bits.
    pub short_bits: Option<u32>,
    /// The number a restarted sender begins with (for the extender of 16-bit counters).
    pub restart_seq: Option<u64>,
    /// The rates, when known: timestamps are read with them
    /// ([`StreamClock::read`]); ratios not given are learnt.
    pub clock: StreamClock,
}

impl Tracking {
    /// The defaults of `format` for `threads` receive threads (restart numbers are only
    /// trusted with one: with several, an early datagram can come out far behind its
    /// successors); `None` for formats without sequence numbers.
    pub fn for_format(format: Format, threads: usize) -> Option<Self> {
        let bits = format.seq_bits()?;
        let mut seq = SeqConfig::for_bits(64);
        // A GNU Radio sink that restarts begins again at its first number.
        if bits == 64 && threads == 1 {
            seq.restart_seq = Some(format.first_seq());
        }
        // A short counter's widening tells restarts from stragglers itself (time decides,
        // or the nearest number): far-behind runs are only a 64-bit counter's restart.
        if bits < 64 {
            seq.restart_run = None;
        }
        Some(Self {
            seq,
            short_bits: (bits < 64).then_some(bits),
            // A 16-bit counter recurs rarely enough that its first number out of turn means
            // a restart (unless just across the wrap); a 4-bit one recurs every 16 packets.
            restart_seq: ((16..64).contains(&bits) && threads == 1).then(|| format.first_seq()),
            clock: StreamClock::default(),
        })
    }

    /// With known rates.
    pub fn with_clock(mut self, clock: StreamClock) -> Self {
        self.clock = clock;
        self
    }

    /// A datagram's facts for [`StreamOrder::widen`] (without its fingerprint).
    pub fn packet(&self, info: &crate::format::PacketInfo) -> SeqPacket {
        let (ticks, timebase) = info
            .timestamp
            .and_then(|t| self.clock.read(&t))
            .map_or((None, None), |(t, tb)| (Some(t), tb));
        SeqPacket {
            seq: info.seq.unwrap_or(0),
            ticks,
            timebase,
            payload: info.payload_len as usize,
            eob: info.eob,
            fingerprint: None,
        }
    }
}

/// The timeline a datagram's position is on: the extender's, numbered anew where it
/// changes (a configured clock dropped for the learnt rate: samples become bytes, from
/// another anchor), and its bytes per unit. A gap is sized from two positions only on the
/// same timeline — a datagram held for a missing one was placed before such a change, the
/// one delivered before it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Scale {
    epoch: u32,
    unit: u64,
    /// Bytes from a learnt ratio: stamps rounded to ticks put them a byte or two off.
    learnt: bool,
}

/// A datagram inside the reorder window, with what its gap needs.
#[derive(Debug)]
struct Held<T> {
    item: T,
    start: Option<i128>,
    /// [`Widened::size`].
    size: super::GapSize,
    /// The timeline `start` is on.
    scale: Scale,
    units: i128,
    payload: usize,
    eob: bool,
    ambiguous: bool,
    /// `ambiguous` is about the gap before it only ([`Widened::gap_only`]).
    gap_only: bool,
}

/// The last datagram released for delivery.
#[derive(Debug, Clone, Copy)]
struct Last {
    end: Option<i128>,
    /// The timeline `end` is on.
    scale: Scale,
    eob: bool,
}

/// One stream's sequence handling. `T` is what travels with a datagram through the reorder
/// window (a slot index, an owned copy, a position in an output buffer).
#[derive(Debug)]
pub struct StreamOrder<T> {
    /// Widens a short counter (4 or 16 bits) to 64 bits.
    extender: Option<SeqExtender>,
    reorder: Reorder<Held<T>>,
    /// Since when the missing datagram waited for now has been missing: when a later one
    /// first showed its gap.
    held_since: Option<Instant>,
    /// The gaps still open, oldest first: the sequence number each one starts at and when
    /// the datagram that showed it came.
    gaps: VecDeque<(u64, Instant)>,
    last: Option<Last>,
    /// The largest payload released since the stream (re)started.
    nominal: usize,
    scratch: Vec<Released<Held<T>>>,
    /// The extender dropped the configured clock (once per stream), and whether
    /// [`take_clock_dropped`](Self::take_clock_dropped) has yet to say so.
    clock_reported: bool,
    clock_news: bool,
    /// Wire bytes a sample (0: not known).
    sample_bytes: u64,
}

impl<T> StreamOrder<T> {
    /// A stream tracked as `tracking` says, reordering within `window` datagrams (bounded by
    /// half the period of a short counter: the extender can only tell ahead from behind
    /// within that).
    pub fn new(tracking: Tracking, window: usize) -> Self {
        Self {
            extender: tracking.short_bits.map(|b| {
                SeqExtender::new(b, tracking.restart_seq)
                    .with_sample_bytes(tracking.clock.bytes_per_sample)
            }),
            reorder: Reorder::new(
                tracking.seq,
                match tracking.short_bits {
                    Some(b) => window.min((1usize << (b - 1)) - 1),
                    None => window,
                },
            ),
            held_since: None,
            gaps: VecDeque::new(),
            last: None,
            nominal: 0,
            scratch: Vec::new(),
            clock_reported: false,
            clock_news: false,
            sample_bytes: u64::from(tracking.clock.bytes_per_sample),
        }
    }

    /// True once, after the [`widen`](Self::widen) that dropped the configured clock for
    /// the rate learnt from the stream ([`SeqExtender::clock_dropped`]): for the
    /// `clock_dropped` counter.
    pub fn take_clock_dropped(&mut self) -> bool {
        std::mem::take(&mut self.clock_news)
    }

    /// Whether [`widen`](Self::widen) wants the payload's
    /// [`fingerprint`](super::fingerprint) (a short counter without timestamps).
    pub fn needs_fingerprint(&self) -> bool {
        self.extender
            .as_ref()
            .is_some_and(|x| x.needs_fingerprint())
    }

    /// Widens the datagram's sequence number to the 64-bit space the tracker works in.
    pub fn widen(&mut self, p: &SeqPacket) -> Widened {
        match self.extender.as_mut() {
            Some(x) => {
                let w = x.extend(p);
                if !self.clock_reported && x.clock_dropped() {
                    self.clock_reported = true;
                    self.clock_news = true;
                }
                w
            }
            None => Widened {
                ext: p.seq,
                start: None,
                size: super::GapSize::Positions,
                ambiguous: false,
                gap_only: false,
                restart: false,
            },
        }
    }

    /// Whether a widened datagram would go out at once, in order, with no gap and nothing
    /// held.
    pub fn is_next(&self, w: &Widened) -> bool {
        !w.restart
            && self.reorder.held() == 0
            && self.reorder.tracker().offset(w.ext) == SeqOffset::Expected
    }

    /// Where a widened datagram stands when it is the expected one or ahead of it (a gap
    /// before it, or missing ones held) and not a restart: `None` otherwise.
    pub fn lead(&self, w: &Widened) -> Option<Lead> {
        if w.restart {
            return None;
        }
        let frames = match self.reorder.tracker().offset(w.ext) {
            SeqOffset::Expected => 0,
            SeqOffset::Ahead(n) => n,
            _ => return None,
        };
        Some(Lead {
            frames,
            furthest: self.reorder.furthest(),
            window: self.reorder.window() as u64,
        })
    }

    /// Gives up on the oldest missing datagrams until `w` is within the window, as
    /// [`push`](Self::push) would before taking it; appends what that releases to `out`.
    pub fn make_room(&mut self, w: &Widened, out: &mut Vec<Released<T>>) {
        let mut scratch = std::mem::take(&mut self.scratch);
        while self.lead(w).is_some_and(|l| l.frames > l.window)
            && self.reorder.flush_oldest(&mut scratch)
        {}
        self.release(&mut scratch, out);
        self.scratch = scratch;
        self.note_held();
    }

    /// The datagrams held for a missing one, in order, to change in place.
    pub fn held_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.reorder.held_mut().map(|h| &mut h.item)
    }

    /// The datagrams held for a missing one, in order, each with its frames ahead of the
    /// expected one and its widened number.
    pub fn held_at_mut(&mut self) -> impl Iterator<Item = (u64, u64, &mut T)> {
        let held = self.reorder.held_at_mut();
        held.map(|(frames, ext, h)| (frames, ext, &mut h.item))
    }

    /// The furthest datagram held.
    pub fn furthest_item(&self) -> Option<&T> {
        self.reorder.furthest_item().map(|h| &h.item)
    }

    /// The timeline the extender places datagrams on now.
    fn scale(&self) -> Scale {
        let x = self.extender.as_ref();
        Scale {
            epoch: x.map_or(0, |x| x.epoch()),
            unit: x.and_then(|x| x.rate()).map_or(1, |(_, u)| u as u64),
            learnt: x.is_some_and(|x| x.rate_learnt()),
        }
    }

    fn units(&self, payload: usize) -> i128 {
        let unit = self
            .extender
            .as_ref()
            .and_then(|x| x.rate())
            .map_or(1, |(_, u)| u);
        (payload / unit) as i128
    }

    /// Takes in a widened datagram (`p` as given to [`widen`](Self::widen)); appends what
    /// can be released to `out`, each with its [`Gap`], and returns how many datagrams were
    /// put back in order by this call.
    pub fn push(&mut self, w: Widened, p: &SeqPacket, item: T, out: &mut Vec<Released<T>>) -> u64 {
        let before = self.reorder.restored();
        // The first number a datagram may carry without showing a gap.
        let frontier = match self.reorder.furthest() {
            Some((seq, _)) => Some(seq + 1),
            None => self.reorder.tracker().expected(),
        };
        let held = Held {
            item,
            start: w.start,
            size: w.size,
            scale: self.scale(),
            units: self.units(p.payload),
            payload: p.payload,
            eob: p.eob,
            ambiguous: w.ambiguous,
            gap_only: w.gap_only,
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        // A restart's number lies far beyond any gap: the tracker resyncs on it.
        self.reorder.push(w.ext, held, &mut scratch);
        self.release(&mut scratch, out);
        self.scratch = scratch;
        if let Some(f) = frontier
            && !w.restart
            && w.ext > f
            && self.reorder.held() > 0
        {
            self.gaps.push_back((f, Instant::now()));
        }
        self.note_held();
        self.reorder.restored() - before
    }

    /// Takes a widened datagram that [`is_next`](Self::is_next): it goes out at once, in
    /// order, with no gap — the same as [`push`](Self::push) with the one datagram it would
    /// release, without a release list (the in-place receiver's path for a datagram whose
    /// payload already landed where it belongs). Returns its event (`InOrder`), or `None`,
    /// changing nothing, when it is not the next one.
    ///
    /// ```
    /// use fsdr_net_io::Format;
    /// use fsdr_net_io::seq::{SeqEvent, SeqPacket, StreamOrder, Tracking};
    ///
    /// let mut order = StreamOrder::<()>::new(Tracking::for_format(Format::Seq64, 1).unwrap(), 4);
    /// let p = |seq| SeqPacket { seq, payload: 100, ..Default::default() };
    /// let w = order.widen(&p(1));
    /// order.push(w, &p(1), (), &mut Vec::new()); // the first one
    /// let w = order.widen(&p(2));
    /// assert_eq!(order.push_next(w, &p(2)), Some(SeqEvent::InOrder));
    /// let w = order.widen(&p(4)); // 3 is missing
    /// assert_eq!(order.push_next(w, &p(4)), None);
    /// ```
    pub fn push_next(&mut self, w: Widened, p: &SeqPacket) -> Option<SeqEvent> {
        if w.restart {
            return None;
        }
        let event = self.reorder.take_expected(w.ext)?;
        // `release` of the one datagram: delivered, in order.
        self.nominal = self.nominal.max(p.payload);
        self.last = Some(Last {
            end: w.start.map(|s| s + self.units(p.payload)),
            scale: self.scale(),
            eob: p.eob,
        });
        // `note_held` with nothing held.
        self.gaps.clear();
        self.held_since = None;
        Some(event)
    }

    /// Sizes the gap of each released datagram, in release (= delivery) order.
    fn release(&mut self, from: &mut Vec<Released<Held<T>>>, out: &mut Vec<Released<T>>) {
        for r in from.drain(..) {
            let h = r.item;
            let mut gap = Gap::default();
            // A flag on the gap before it only: withdrawn where late datagrams filled it.
            let gapped = r.deliver && matches!(r.event, SeqEvent::Gap { .. });
            let mut ambiguous = h.ambiguous && (gapped || !h.gap_only);
            if r.deliver {
                match r.event {
                    SeqEvent::First | SeqEvent::Resync => self.nominal = h.payload,
                    _ => self.nominal = self.nominal.max(h.payload),
                }
                if let SeqEvent::Gap { missed } = r.event {
                    let by_time = match (h.start, self.last) {
                        (
                            Some(s),
                            Some(Last {
                                end: Some(e),
                                scale,
                                eob: false,
                            }),
                        ) if s >= e && scale == h.scale => Some((s - e) as u64 * scale.unit),
                        _ => None,
                    };
                    let mut packets = missed * self.nominal as u64;
                    // Beside a time jump, the packets'; the time's where the packets would be
                    // longer (for the gap the extender saw, not where late datagrams filled
                    // part of it), to whole samples.
                    let by_time = match h.size {
                        super::GapSize::Packets => None,
                        super::GapSize::Time { units, frames } if frames == missed => {
                            let unit = self.sample_bytes.max(1);
                            let bytes = units.max(0) as u64 * h.scale.unit;
                            packets = packets.min((bytes + unit / 2) / unit * unit);
                            None
                        }
                        _ => by_time,
                    };
                    // Bytes a learnt ratio gives: to whole samples, flagged where that rounds
                    // or where they are other than whole packets — as the extender flags a
                    // gap it sees, here also one a late datagram closed, which it never
                    // sized.
                    let by_time = match by_time {
                        Some(b) if h.scale.learnt => {
                            let unit = self.sample_bytes.max(1);
                            let whole = (b + unit / 2) / unit * unit;
                            ambiguous |= whole != b || whole != packets;
                            Some(whole)
                        }
                        b => b,
                    };
                    gap = Gap {
                        frames: missed,
                        bytes: by_time.or_else(|| (self.nominal > 0).then_some(packets)),
                        ambiguous,
                    };
                }
                self.last = Some(Last {
                    end: h.start.map(|s| s + h.units),
                    scale: h.scale,
                    eob: h.eob,
                });
            }
            out.push(Released {
                event: r.event,
                deliver: r.deliver,
                item: h.item,
                gap,
                ambiguous,
            });
        }
    }

    /// Keeps `held_since` the time the gap waited for now was first seen: the reorder
    /// timeout of each gap counts from the arrival that showed it, so that several gaps
    /// held at once (a stall, the end of a stream) are given up one timeout after they
    /// were seen, not one timeout after another.
    fn note_held(&mut self) {
        let expected = self.reorder.tracker().expected();
        let (Some(e), true) = (expected, self.reorder.held() > 0) else {
            self.gaps.clear();
            self.held_since = None;
            return;
        };
        // The gap waited for is the last one seen that starts at or before `e`.
        while self.gaps.len() > 1 && self.gaps[1].0 <= e {
            self.gaps.pop_front();
        }
        if self.gaps.front().is_none_or(|&(start, _)| start > e) {
            // A gap no arrival showed here (datagrams held across a restart): from now.
            self.gaps.push_front((e, Instant::now()));
        }
        self.held_since = self.gaps.front().map(|&(_, t)| t);
    }

    /// Since when datagrams have been held for a missing one.
    pub fn held_since(&self) -> Option<Instant> {
        self.held_since
    }

    /// Datagrams held for a missing one.
    pub fn held(&self) -> usize {
        self.reorder.held()
    }

    /// Gives up on the oldest missing datagram(s); returns whether anything was held.
    pub fn flush_oldest(&mut self, out: &mut Vec<Released<T>>) -> bool {
        let mut scratch = std::mem::take(&mut self.scratch);
        let any = self.reorder.flush_oldest(&mut scratch);
        self.release(&mut scratch, out);
        self.scratch = scratch;
        self.note_held();
        any
    }

    /// Releases everything held, in order.
    pub fn flush_all(&mut self, out: &mut Vec<Released<T>>) {
        let mut scratch = std::mem::take(&mut self.scratch);
        self.reorder.flush_all(&mut scratch);
        self.release(&mut scratch, out);
        self.scratch = scratch;
        self.note_held();
    }
}

#[cfg(test)]
mod learnt_tests;
#[cfg(test)]
mod tests;
