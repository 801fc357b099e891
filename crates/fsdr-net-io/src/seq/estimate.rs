//! [`RateEstimate`]: the ratio of ticks to bytes learnt from a stream's own timestamps when
//! nobody configured it, kept exact and cheap on every packet.

use super::clock::Ratio;

/// Recovers ticks per byte from consecutive packets when no
/// [`Timebase`](super::Timebase) was configured.
///
/// A run of consecutive packets (no loss, no end of burst between them) spanning `B` payload
/// bytes and `T` ticks bounds the true ratio to `[(T − 1) / B, (T + 1) / B]` (each timestamp
/// is off by less than half a tick), and so does every shorter part of the run from its
/// first packet: the run's bounds are the intersection of them all, which only narrows as
/// the run goes on. The estimate is the simplest fraction within the bounds of the longest
/// run so far. Real ratios are simple fractions (4, 1/4, 625/384), so the estimate becomes
/// exact once the run is long enough to exclude every simpler fraction, and is off by at most
/// `1/B` before; where the ratio is not a simple fraction (490.517 Msps at 200 MHz: 50000/490517
/// ticks a byte) it goes on narrowing, each estimate kept until the bounds exclude it.
/// Timestamps off by more than their rounding (a sender's jitter) leave the bounds empty:
/// they start again from the run's whole span. A pair off the longest run's bounds by more
/// than a tick and 1% (a device's time jump) is left out and ends the run (so does one
/// off by more than a tick, where [`pair`](Self::pair) is given it); judged against
/// the bounds, not the estimate, so that a stream whose packets span a fractional number
/// of ticks (41.86, stamped 41 or 42) is not cut after its first pair. Such pairs that
/// follow each other and agree (where no configured clock is checked) form a rival run,
/// which replaces the longest run once it has more pairs (at least two, at most 16; one
/// where the longest is a single pair that spanned more time, as a loss or a time jump
/// inside it makes): the longest was not the stream's rate (a time jump in the stream's
/// first pair, or on a 4-bit counter 16 packets lost there that the counter could not
/// show) or no longer is (a sender that changed its rate).
///
/// ```
/// use fsdr_net_io::seq::{RateEstimate, Ratio};
///
/// // sc16 VRT with sample-count timestamps: 100 samples in 400 bytes.
/// let mut e = RateEstimate::default();
/// e.pair(100, 400);
/// assert_eq!(e.get(), Ratio::new(1, 4));
/// ```
#[derive(Debug, Clone, Default)]
pub struct RateEstimate {
    /// The current run.
    run: Option<Run>,
    /// The longest run so far, and the estimate from its bounds.
    best: Option<Run>,
    estimate: Option<Ratio>,
    /// The estimate's parents in the Stern–Brocot tree: while the bounds hold the estimate
    /// and neither parent, it is still their simplest fraction.
    parents: [(u64, u64); 2],
    /// Consecutive pairs off the longest run's bounds that agree with each other.
    rival: Option<Run>,
    /// The rival replaced the longest run since [`take_replaced`](Self::take_replaced).
    replaced: bool,
}

/// The most consecutive pairs that agree with each other and not with the longest run
/// it takes to replace that run (fewer where it has fewer pairs, but two: one could be a
/// device's time jump): a sender's jitter does not make 16 pairs in a row agree off the
/// rate, and a sender that changed its rate is followed within 16 packets.
const RIVAL_PAIRS: u64 = 16;

/// A run of consecutive packets: ticks and bytes from its first packet to its last packet's
/// start, and the bounds on the ratio its parts from the first packet give, as fractions.
#[derive(Debug, Clone, Copy)]
struct Run {
    ticks: u64,
    bytes: u64,
    pairs: u64,
    lo: (u64, u64),
    hi: (u64, u64),
    /// Pairs left out of its span, a tick each: time jumps past a tick (within 1%) off
    /// the longest run's bounds, where a configured clock is checked
    /// ([`RateEstimate::pair_counting`]). The run goes on across them; its span is the
    /// sum of its parts, each rounded at both ends, so each hole widens its bounds by a
    /// tick.
    holes: u64,
    /// The rates every pair in it allows, `((t − 1) / b, (t + 1) / b)` each (open: each
    /// stamp is off by less than half a tick), intersected: a pair whose own excludes them
    /// all is not at the run's rate, however loose the span's bounds still are (a jump of
    /// two ticks after pairs of one tick, on packets of a sample).
    pair_lo: (u64, u64),
    pair_hi: (u64, u64),
}

impl Run {
    /// The run of one pair.
    fn new(ticks: u64, bytes: u64) -> Self {
        Self::spanning(ticks, bytes, 0)
    }

    /// A run of one pair's span, or (`holes` > 0) of parts that many pairs apart.
    fn spanning(ticks: u64, bytes: u64, holes: u64) -> Self {
        let (lo, hi) = bounds(ticks, bytes, holes);
        Run {
            ticks,
            bytes,
            pairs: 1,
            lo,
            hi,
            holes,
            pair_lo: (ticks.saturating_sub(1), bytes),
            pair_hi: (ticks.saturating_add(1), bytes),
        }
    }

    /// The rates every pair of the run and one more of `ticks` for `bytes` allow: the
    /// intersection of their open ranges `((t − 1) / b, (t + 1) / b)`.
    fn pair_rates_with(&self, ticks: u64, bytes: u64) -> ((u64, u64), (u64, u64)) {
        let lo = (ticks.saturating_sub(1), bytes);
        let hi = (ticks.saturating_add(1), bytes);
        (
            if at_most(self.pair_lo, lo) {
                lo
            } else {
                self.pair_lo
            },
            if at_most(self.pair_hi, hi) {
                self.pair_hi
            } else {
                hi
            },
        )
    }

    /// Whether the rates a pair of `ticks` for `bytes` allows meet those every pair of the
    /// run allows.
    fn admits(&self, ticks: u64, bytes: u64) -> bool {
        let (lo, hi) = self.pair_rates_with(ticks, bytes);
        !at_most(hi, lo)
    }

    /// The run with one more pair: its bounds narrowed by the new span's, or that span's
    /// alone if they exclude each other.
    fn then(self, ticks: u64, bytes: u64) -> Self {
        let mut next = Run::spanning(self.ticks + ticks, self.bytes + bytes, self.holes);
        next.pairs = self.pairs + 1;
        (next.pair_lo, next.pair_hi) = self.pair_rates_with(ticks, bytes);
        let lo = if at_most(self.lo, next.lo) {
            next.lo
        } else {
            self.lo
        };
        let hi = if at_most(self.hi, next.hi) {
            self.hi
        } else {
            next.hi
        };
        if at_most(lo, hi) {
            (next.lo, next.hi) = (lo, hi);
        }
        next
    }

    /// The run with a pair left out of its span (a time jump): it goes on across it.
    /// (Its bounds so far still hold: the next part's widen by the hole's tick.)
    fn hole(mut self) -> Self {
        self.holes = self.holes.saturating_add(1);
        self
    }

    /// Whether a pair of `ticks` for `bytes` lies off this run's bounds by more than a
    /// tick and 1%, and the ticks beyond a tick it lies off each bound ([`beyond`]).
    fn far(&self, ticks: u64, bytes: u64) -> (bool, i128, i128) {
        let (below, far_below) = beyond(self.lo, ticks, bytes, false);
        let (above, far_above) = beyond(self.hi, ticks, bytes, true);
        (far_below || far_above, below, above)
    }

    fn span(self) -> RunSpan {
        RunSpan {
            ticks: self.ticks,
            bytes: self.bytes,
            pairs: self.pairs,
            holes: self.holes,
        }
    }
}

/// A run of consecutive packets (no loss, no end of burst, no pair off the estimate by more
/// than a tick and 1%): from its first packet to its last one's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunSpan {
    pub(crate) ticks: u64,
    pub(crate) bytes: u64,
    /// Consecutive pairs in it.
    pub(crate) pairs: u64,
    /// Pairs left out of its span (time jumps past a tick, within 1%): each a tick more
    /// its span may be off the stream's rate by.
    pub(crate) holes: u64,
}

/// The bounds `[(T − 1 − h) / B, (T + 1 + h) / B]` of a span of `T` ticks and `B` bytes
/// in `h + 1` parts.
fn bounds(ticks: u64, bytes: u64, holes: u64) -> ((u64, u64), (u64, u64)) {
    let r = holes.saturating_add(1);
    (
        (ticks.saturating_sub(r).max(1), bytes),
        (ticks.saturating_add(r), bytes),
    )
}

/// How far `ticks` for `bytes` lies beyond the ratio `bound` (above it when `above`, below
/// otherwise) past a tick, in ticks times the bound's denominator (≤ 0: within a tick),
/// and whether that is past 1% too.
fn beyond(bound: (u64, u64), ticks: u64, bytes: u64, above: bool) -> (i128, bool) {
    let want = i128::from(bound.0) * i128::from(bytes);
    let got = i128::from(ticks) * i128::from(bound.1);
    // got − want > den + ⌊want / 100⌋ (or want − got, below) without the division (a
    // library call for 128 bits, on every packet): with excess = the difference − den,
    // that is excess ≥ 1 and want < 100 × excess.
    let excess = if above { got - want } else { want - got } - i128::from(bound.1);
    (excess, excess > 0 && want < excess.saturating_mul(100))
}

/// `a ≤ b` for fractions given as (numerator, denominator), `(1, 0)` being infinity.
fn at_most(a: (u64, u64), b: (u64, u64)) -> bool {
    u128::from(a.0) * u128::from(b.1) <= u128::from(b.0) * u128::from(a.1)
}

/// `lo ≤ x ≤ hi`.
fn within(x: (u64, u64), lo: (u64, u64), hi: (u64, u64)) -> bool {
    at_most(lo, x) && at_most(x, hi)
}

impl RateEstimate {
    /// The estimate, once two consecutive packets were seen.
    pub fn get(&self) -> Option<Ratio> {
        self.estimate
    }

    /// Two consecutive packets: the first carried `bytes` payload bytes, the second started
    /// `ticks` ticks after it. Returns true when the estimate changed.
    pub fn pair(&mut self, ticks: u64, bytes: u64) -> bool {
        self.pair_counting(ticks, bytes, false)
    }

    /// [`pair`](Self::pair), where a configured clock is checked against the runs (`clock`):
    /// a time jump within 1% then leaves a hole in the run instead of ending it
    /// ([`RunSpan::holes`]).
    pub(crate) fn pair_counting(&mut self, ticks: u64, bytes: u64, clock: bool) -> bool {
        if ticks == 0 || bytes == 0 {
            self.run = None;
            return false;
        }
        // A pair off the ratios the longest run allows by more than a tick and 1% is not the
        // stream's rate (a device time jump): it starts a new run. (Against the run's
        // bounds, not the estimate: after one pair of a stream with ticks coarser than a
        // packet's rounding — 41.86 ticks a packet stamped 41 or 42 — the simplest fraction
        // there is 40 ticks, and every 42 would break the run, which then never grows.)
        // Past a tick but within 1% is a time jump too: left out of the run's span, so that
        // the bounds stay the stream's. Under a configured clock the run goes on across it
        // (a hole: a configured clock's checks need the long runs a wrong clock shows in);
        // where none is, it ends the run (12 ticks in 1104 a packet carried into the
        // bounds made 276/277 ticks a byte 1432/1437, and later gaps whole packets long
        // were flagged).
        if let Some(best) = self.best {
            let (far, below, above) = best.far(ticks, bytes);
            if far {
                self.run = None;
                // Under a configured clock such pairs are the device's time jumps, which
                // the clock's checks judge: no rival.
                return !clock && self.rival(ticks, bytes);
            }
            self.rival = None;
            // Under a configured clock, also a pair whose rates exclude those of every
            // pair in the run going on.
            let excluded = clock && self.run.is_some_and(|r| !r.admits(ticks, bytes));
            if below > 0 || above > 0 || excluded {
                self.run = if clock { self.run.map(Run::hole) } else { None };
                return false;
            }
        }
        let run = match self.run {
            Some(run) => run.then(ticks, bytes),
            None => Run::new(ticks, bytes),
        };
        self.run = Some(run);
        if self.best.is_some_and(|best| best.bytes >= run.bytes) {
            return false;
        }
        self.best = Some(run);
        let (lo, hi) = (run.lo, run.hi);
        // Every fraction strictly between the estimate's parents but the estimate is less
        // simple than it: while the bounds hold the estimate and neither parent, it is still
        // the simplest fraction there. As the bounds only narrow, that saves the walk (u128
        // divisions) on nearly every packet, also where the estimate goes on narrowing.
        if let Some(e) = self.estimate
            && within((e.num(), e.den()), lo, hi)
            && self.parents.iter().all(|&p| !within(p, lo, hi))
        {
            return false;
        }
        self.walk(lo, hi)
    }

    /// The estimate from the bounds `lo..=hi` (the Stern–Brocot walk); true when it changed.
    fn walk(&mut self, lo: (u64, u64), hi: (u64, u64)) -> bool {
        let new = Ratio::simplest_with_neighbours(lo, hi);
        let changed = new.map(|(r, _)| r) != self.estimate;
        self.estimate = new.map(|(r, _)| r);
        if let Some((_, parents)) = new {
            self.parents = parents;
        }
        changed
    }

    /// A pair off the longest run's bounds: taken into the rival run where it agrees with
    /// it (else it starts one); with more pairs than the longest run (at least two, at
    /// most [`RIVAL_PAIRS`]), or where that is one pair that spanned more time, the rival
    /// becomes the longest run and the run going on. True when that changed the estimate.
    fn rival(&mut self, ticks: u64, bytes: u64) -> bool {
        let rival = match self.rival {
            Some(r) if !r.far(ticks, bytes).0 => r.then(ticks, bytes),
            _ => Run::new(ticks, bytes),
        };
        let need = match self.best {
            // A loss or a time jump forward only adds time to a pair: of two single pairs
            // the one that spans less is the stream's.
            Some(b) if b.pairs == 1 && at_most(rival.hi, b.lo) => 1,
            b => (b.map_or(0, |b| b.pairs) + 1).clamp(2, RIVAL_PAIRS),
        };
        if rival.pairs < need {
            self.rival = Some(rival);
            return false;
        }
        self.rival = None;
        self.replaced = true;
        self.best = Some(rival);
        self.run = Some(rival);
        self.walk(rival.lo, rival.hi)
    }

    /// The most ticks a byte the longest run allows, `(T + 1) / B` as (numerator,
    /// denominator): the fewest bytes a span of ticks can hold.
    pub(crate) fn most_ticks_per_byte(&self) -> Option<(u64, u64)> {
        self.best.map(|best| best.hi)
    }

    /// Ticks spanned by the longest run of consecutive packets the estimate comes from: the
    /// true ratio lies within `2 / (ticks − 1)` of the estimate, relatively.
    pub fn span_ticks(&self) -> Option<u64> {
        self.best.map(|best| best.ticks)
    }

    /// The longest run of consecutive packets so far: what the estimate comes from, and
    /// what a configured clock is checked against once it is long.
    pub(crate) fn longest_run(&self) -> Option<RunSpan> {
        self.best.map(Run::span)
    }

    /// The run going on (the last pair was taken into it), if any.
    pub(crate) fn current_run(&self) -> Option<RunSpan> {
        self.run.map(Run::span)
    }

    /// Whether a run is going on: the last pair was taken into it (or into the rival run).
    pub(crate) fn in_run(&self) -> bool {
        self.run.is_some() || self.rival.is_some()
    }

    /// Forgets the current run and the rival one (a loss, an end of burst, a restart): the
    /// next pair starts a new one.
    pub fn break_run(&mut self) {
        self.run = None;
        self.rival = None;
    }

    /// Whether a rival run replaced the longest one since the last call: positions from
    /// before came from a rate that was not the stream's.
    pub(crate) fn take_replaced(&mut self) -> bool {
        std::mem::take(&mut self.replaced)
    }

    /// Forgets everything (a restart).
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_converges_on_a_long_run() {
        let tpb = Ratio::new(625, 384).unwrap();
        let mut e = RateEstimate::default();
        let mut sent = 0u64;
        for _ in 0..2000 {
            let t0 = tpb.ticks_rounded(sent);
            sent += 1456;
            e.pair(tpb.ticks_rounded(sent) - t0, 1456);
        }
        assert_eq!(e.get(), Some(tpb));
        // VRT sample counts, sc16: one pair suffices.
        let mut e = RateEstimate::default();
        e.pair(100, 400);
        assert_eq!(e.get(), Ratio::new(1, 4));
        // A device time jump does not spoil it.
        assert!(!e.pair(5_000, 400));
        assert_eq!(e.get(), Ratio::new(1, 4));
    }

    /// Pairs off the longest run replace it once more of them agree than it has (two at
    /// least, 16 at most; one against a single pair that spanned more); one alone, or
    /// pairs that disagree, do not.
    #[test]
    fn agreeing_pairs_off_the_longest_run_replace_it() {
        // A first pair across a time jump: the next pair, spanning less, is the rate.
        let mut e = RateEstimate::default();
        e.pair(49_200, 400);
        assert!(e.pair(100, 400));
        assert!(e.take_replaced() && !e.take_replaced());
        assert_eq!(e.get(), Ratio::new(1, 4));
        // A first pair that spans less: two pairs that agree replace it.
        let mut e = RateEstimate::default();
        e.pair(100, 400);
        assert!(!e.pair(300, 400));
        assert!(e.pair(300, 400));
        assert_eq!(e.get(), Ratio::new(3, 4));
        // A long run, then a sender at twice the rate: 16 pairs replace it.
        for _ in 0..100 {
            e.pair(100, 400);
        }
        for i in 1..=16 {
            assert_eq!(e.pair(50, 400), i == 16, "pair {i}");
        }
        assert_eq!(e.get(), Ratio::new(1, 8));
        // Jumps that disagree with each other, or one among the rate's pairs, do not.
        for i in 0..40 {
            let ticks = if i % 2 == 0 { 500 } else { 50 };
            assert!(!e.pair(ticks + 100 * (i % 3), 400), "pair {i}");
        }
        assert_eq!(e.get(), Ratio::new(1, 8));
    }

    #[test]
    fn the_estimate_is_always_the_simplest_fraction_of_its_longest_run() {
        // Kept without the walk once the bounds are narrow: must equal a fresh walk every time.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        // The last two are no simple fractions: the estimate goes on narrowing, kept by its
        // parents between the walks.
        let ratios = [
            (625, 384),
            (20, 7),
            (1, 4),
            (390_625, 12),
            (3, 1),
            (50_000, 490_517),
            (141_421_356, 100_000_000),
        ];
        for (num, den) in ratios {
            let r = Ratio::new(num, den).unwrap();
            let mut e = RateEstimate::default();
            let mut sent = 0u64;
            for _ in 0..20_000 {
                let bytes = 64 + next(9000);
                let t0 = r.ticks_rounded(sent);
                sent += bytes;
                // Jitter of a tick either way now and then, as a sender's rounding may give.
                let ticks = (r.ticks_rounded(sent) - t0 + next(3)).saturating_sub(1);
                e.pair(ticks, bytes);
                let best = e.best.unwrap();
                let fresh = Ratio::simplest_between(best.lo, best.hi);
                assert_eq!(e.get(), fresh, "{num}/{den}");
            }
        }
    }

    /// A sender that rounds its timestamps: the bounds always hold the true ratio, and
    /// the estimate of a ratio that is no simple fraction changes as seldom as it
    /// narrows, not on every packet.
    #[test]
    fn the_bounds_hold_the_ratio_and_the_estimate_only_narrows() {
        for (num, den) in [(50_000, 490_517), (625, 1536), (141_421_356, 100_000_000)] {
            let r = Ratio::new(num, den).unwrap();
            let mut e = RateEstimate::default();
            let (mut sent, mut changes) = (0u64, 0);
            for _ in 0..200_000 {
                let t0 = r.ticks_rounded(sent);
                sent += 7984;
                changes += u32::from(e.pair(r.ticks_rounded(sent) - t0, 7984));
                let best = e.best.unwrap();
                let r = (r.num(), r.den());
                assert!(within(r, best.lo, best.hi), "{num}/{den}: {best:?}");
            }
            assert!(changes < 100, "{num}/{den}: {changes} changes");
        }
    }
}
