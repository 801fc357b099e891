//! The stream's timeline: timestamps to positions (units of the timebase, bytes when the
//! ratio is learnt), and how far a position may be off — the ratio's uncertainty and the
//! stamps' own rounding to whole ticks.

use std::cell::Cell;

use super::super::RateEstimate;
use super::super::clock::{Ratio, Timebase};

/// Where a timestamp puts a packet on the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Place {
    /// In units of the timebase (bytes when the ratio is learnt).
    pub(super) pos: i128,
    /// The stamp lies where the ratio puts a whole unit, as far as a right ratio's
    /// rounding lets it ([`exact`]); always with a configured timebase.
    pub(super) exact: bool,
}

/// Whether `dt` ticks from the anchor lie where the learnt ratio `r` (ticks per byte) puts
/// a whole byte, as far as the ratio's own rounding of a stamp lets them: exactly, where a
/// tick spans a byte or more (there a stamp a tick off its fellows — rounded by a ratio
/// only near the stream's — still lies within half a tick of some byte); within half a
/// tick, where it spans half a byte to a byte (a right ratio's stamp rounded to the tick;
/// one a whole tick off is not, up to two thirds of a byte a tick); always, below (a tick
/// off rounds away).
/// (`units`: `dt` in bytes, rounded.)
fn exact(r: Ratio, dt: i128, units: i128) -> bool {
    let (num, den) = (i128::from(r.num()), i128::from(r.den()));
    if 2 * den < num {
        return true;
    }
    // Ticks (times den) the stamp lies off where the ratio puts `units` bytes.
    let off = dt * den - units * num;
    if den >= num {
        off == 0
    } else {
        2 * off.abs() <= den
    }
}

/// The stream's timeline: ticks to positions.
#[derive(Debug, Clone, Default)]
pub(super) struct Timeline {
    pub(super) fixed: Option<Timebase>,
    pub(super) learnt: RateEstimate,
    /// A timestamp and the position it stands for.
    pub(super) anchor: Option<(u64, i128)>,
    /// Two consecutive packets agreed with the configured timebase: the pair's ticks and
    /// the units of its first packet.
    pub(super) confirmed: Option<(u64, i128)>,
    /// The last pair that contradicted it before any agreed (a device's time jump makes
    /// one): its ticks and the units of its first packet.
    pub(super) contradicted: Option<(u64, i128)>,
    /// Numbers the timeline: changed where positions start from another anchor or in
    /// other units (`SeqExtender::epoch`).
    pub(super) epoch: u32,
    /// Ticks the longest run of consecutive packets must span before a confirmed
    /// configured timebase is checked against it again (`SeqExtender::run_contradicts`).
    pub(super) next_check: u64,
    /// The configured timebase was dropped for the learnt rate (the stream contradicted it).
    pub(super) clock_dropped: bool,
    /// Wire bytes a sample, where known (0: not): the least a packet holds under a
    /// learnt ratio, which is per byte ([`Timeline::least_packet`]).
    pub(super) sample_bytes: u32,
    /// A learnt ratio under which a consecutive pair of full packets spanned other than the
    /// whole ticks it gives them ([`Timeline::saw_pair`]): the stream's stamps are rounded,
    /// the ratio only near the stream's, and no position pins while it is the estimate.
    rounded: Option<Ratio>,
    /// What the learnt ratio gives, kept until it changes (divisions, on every packet
    /// otherwise): the ratio, [`Timeline::quantum`], [`Timeline::least`].
    per_ratio: Cell<Option<(Ratio, i128, i128)>>,
    /// Whether a packet of `nominal` units spans whole ticks, for the ratio and `nominal`
    /// last asked about.
    whole: Cell<Option<(Ratio, i128, bool)>>,
    /// Ticks from the anchor recently turned into places (and which entry goes next): a
    /// steady stream's anchor moves along with every packet, so the same few distances
    /// come again.
    recent: [Cell<Option<(Ratio, i128, Place)>>; 4],
    next_recent: Cell<usize>,
}

impl Timeline {
    /// Ticks per unit and bytes per unit.
    pub(super) fn rate(&self) -> Option<(Ratio, usize)> {
        match self.fixed {
            Some(tb) => Some((tb.ticks_per_unit, tb.unit_bytes as usize)),
            None => self.learnt.get().map(|r| (r, 1)),
        }
    }

    /// Whether `units` span less than a tick under the ratio in force: the next packet may
    /// carry the same stamp.
    pub(super) fn under_a_tick(&self, units: i128) -> bool {
        self.rate()
            .is_some_and(|(r, _)| units.saturating_mul(i128::from(r.num())) < i128::from(r.den()))
    }

    pub(super) fn unit_bytes(&self) -> usize {
        self.fixed.map_or(1, |tb| tb.unit_bytes as usize)
    }

    /// A configured timebase whose stamps do not [invert exactly](Ratio::inverts_exactly):
    /// a tick longer than half a sample.
    /// So is a learnt ratio, where a sample's bytes are known (a tick of 0.61 samples:
    /// before, a count the time raised was proven or not by the rounding's luck).
    pub(super) fn coarse(&self) -> bool {
        match (self.fixed, self.learnt.get()) {
            (Some(tb), _) => !tb.ticks_per_unit.inverts_exactly(),
            (None, Some(r)) if self.sample_bytes > 0 => {
                // Ticks a sample, `n / d` ([`Ratio::inverts_exactly`] unreduced; where `n`
                // overflows, many).
                let d = r.den();
                u64::from(self.sample_bytes)
                    .checked_mul(r.num())
                    .is_some_and(|n| n % d != 0 && d.checked_mul(2).is_none_or(|dd| n <= dd))
            }
            _ => false,
        }
    }

    /// The units of a learnt ratio per tick, rounded down and up: `⌊den / num⌋` and
    /// `⌈den / num⌉` (one division per change of the estimate).
    fn per_ratio(&self, r: Ratio) -> (i128, i128) {
        if let Some((cached, quantum, least)) = self.per_ratio.get()
            && cached == r
        {
            return (quantum, least);
        }
        let (n, d) = (r.num(), r.den());
        let (q, rem) = (d / n, d % n);
        let quantum = i128::from(q + u64::from(rem != 0));
        let least = i128::from(q.max(1));
        self.per_ratio.set(Some((r, quantum, least)));
        (quantum, least)
    }

    /// How far a position may be off beyond its stamp's own rounding
    /// ([`Timeline::quantum`]): nothing with a configured timebase; with a learnt ratio, a byte plus the
    /// ratio's uncertainty (`2 / (T − 1)` for a run of `T` ticks) over the distance from the
    /// anchor — without bound until the run spans 2 ticks.
    pub(super) fn tolerance(&self, pos: i128) -> i128 {
        let e = self.error(pos).ceil();
        // The same value as `e as i128` (whole, and in range), without the library call.
        if e < 9e18 {
            e as i64 as i128
        } else {
            e as i128
        }
    }

    /// The bound behind [`Timeline::tolerance`], in units: half a unit of rounding plus the
    /// ratio's uncertainty over the distance.
    fn error(&self, pos: i128) -> f64 {
        match (self.fixed, self.learnt.span_ticks(), self.anchor) {
            (Some(_), ..) => 0.0,
            (None, Some(t), Some((_, p0))) if t >= 2 => {
                // `as f64` of the distance, which rounds the same from 64 bits as from 128
                // (where a conversion from 128 is a library call).
                let dist = match (i64::try_from(pos), i64::try_from(p0)) {
                    (Ok(a), Ok(b)) if a.checked_sub(b).is_some() => (a - b).unsigned_abs() as f64,
                    _ => (pos - p0).unsigned_abs() as f64,
                };
                0.5 + 2.0 * dist / (t - 1) as f64
            }
            _ => 1e18,
        }
    }

    /// How far a timestamp's own rounding moves a position, in units: the units one tick
    /// spans (a sender's stamps are whole ticks, so two of them are apart by up to a tick
    /// more or less than the packets' true distance) — with a learnt ratio, and with a
    /// configured one whose stamps do not [invert exactly](Ratio::inverts_exactly) (a tick
    /// longer than half a sample); nothing with a configured timebase that does.
    pub(super) fn quantum(&self) -> i128 {
        match (self.fixed, self.learnt.get()) {
            (Some(tb), _) if !tb.ticks_per_unit.inverts_exactly() => {
                self.per_ratio(tb.ticks_per_unit).0
            }
            (None, Some(tpu)) => self.per_ratio(tpu).0,
            _ => 0,
        }
    }

    /// Whether a place is pinned to the tick (so a gap can be sized from it): with a
    /// learnt ratio, once it is tight enough, and only where a packet of `nominal` units
    /// spans a whole number of ticks — otherwise every stamp is rounded to a tick and a gap
    /// sized from two of them could be off by that much (it is sized from the packets
    /// missed instead). A learnt ratio of whole ticks a packet may also be only near the
    /// stream's (an X410 channel in 59-sample packets spans 24.007 ticks of 200 MHz, learnt
    /// as 24 until a run of some 300 packets excludes it): its stamps are then rounded, and
    /// now and then one is a tick off the others. So a place pins only where its stamp is
    /// [exact](Place::exact) and no consecutive pair has shown the ratio's stamps rounded
    /// ([`Timeline::saw_pair`]).
    pub(super) fn pinned(&self, place: Place, nominal: i128) -> bool {
        // A configured timebase pins every position where its stamps invert exactly; where
        // a tick is longer than half a sample, none (a gap is sized from the packets
        // missed, the stamps being a tick off either way).
        if let Some(tb) = self.fixed {
            return tb.ticks_per_unit.inverts_exactly();
        }
        let Some(r) = self.learnt.get() else {
            return false;
        };
        // Nor, where a sample's bytes are known, one longer than half a sample (before, an
        // X310 clock at 122.88 Msps learnt as whole ticks a packet pinned positions 11
        // bytes off).
        place.exact
            && !self.coarse()
            && self.rounded != Some(r)
            && self.whole_ticks(r, nominal)
            // `least` comes from 64 bits: converted from them (from 128 it is a library call).
            && 2.0 * self.error(place.pos) < self.least() as u64 as f64
    }

    /// Whether a packet of `nominal` units spans a whole number of ticks under `r`.
    fn whole_ticks(&self, r: Ratio, nominal: i128) -> bool {
        match self.whole.get() {
            Some((cr, cn, whole)) if cr == r && cn == nominal => whole,
            _ => {
                let whole = (i128::from(r.num()) * nominal) % i128::from(r.den()) == 0;
                self.whole.set(Some((r, nominal, whole)));
                whole
            }
        }
    }

    /// A consecutive pair under a learnt ratio: its first packet held `bytes` of the
    /// stream's `nominal`, the second started `ticks` after it. A pair of full packets the
    /// ratio gives whole ticks that spans one tick more or less shows the stream's stamps
    /// rounded (the ratio is only near the stream's): no position pins while that ratio is
    /// the estimate. (A device's time jump of one tick does the same; gaps are then sized
    /// from the packets missed, exact where they were full. Longer jumps show nothing.)
    pub(super) fn saw_pair(&mut self, ticks: u64, bytes: u64, nominal: u64) {
        let Some(r) = self.learnt.get() else {
            return;
        };
        if bytes != nominal || self.rounded == Some(r) {
            return;
        }
        // In ticks times den: the pair's span, and the whole ticks the ratio gives it.
        let (den, whole) = (u128::from(r.den()), u128::from(r.num()) * u128::from(bytes));
        let span = u128::from(ticks) * den;
        if whole % den == 0 && (span == whole + den || span + den == whole) {
            self.rounded = Some(r);
        }
    }

    /// The least a packet can hold, in units: one unit (a sample) with a timebase; with a
    /// learnt ratio per byte, what one tick resolves (4 bytes for sc16 sample counts).
    pub(super) fn least(&self) -> i128 {
        match (self.fixed, self.learnt.get()) {
            (None, Some(tpb)) => self.per_ratio(tpb).1,
            _ => 1,
        }
    }

    /// The least a packet holds, in units: [`Timeline::least`], and under a learnt ratio a
    /// sample where its bytes are known (a jump of 4 samples on VRT's 4-bit counter is no
    /// room for 16 lost packets of sc16, as 16 bytes would be).
    pub(super) fn least_packet(&self) -> i128 {
        match self.fixed {
            Some(_) => 1,
            None => self.least().max(i128::from(self.sample_bytes)),
        }
    }

    /// Where a timestamp puts a packet: its position, and whether the stamp is exact.
    pub(super) fn place(&self, ticks: u64) -> Option<Place> {
        let (r, _) = self.rate()?;
        let (t0, p0) = self.anchor?;
        let dt = i128::from(ticks.wrapping_sub(t0) as i64);
        let known = self.recent.iter().find_map(|m| match m.get() {
            Some((mr, mt, place)) if mr == r && mt == dt => Some(place),
            _ => None,
        });
        let place = known.unwrap_or_else(|| {
            let units = r.units_rounded(dt);
            let place = Place {
                pos: units,
                exact: self.fixed.is_some() || exact(r, dt, units),
            };
            let i = self.next_recent.get();
            self.recent[i].set(Some((r, dt, place)));
            self.next_recent.set((i + 1) % self.recent.len());
            place
        });
        Some(Place {
            pos: p0 + place.pos,
            ..place
        })
    }
}
