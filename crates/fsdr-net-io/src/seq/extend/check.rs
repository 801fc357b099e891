//! The extender's checks of a configured clock against the stream (rule 5 on
//! [`SeqExtender`]): a pair that contradicts it before any confirmed it, a long run after.

use super::super::clock::Timebase;
use super::super::estimate::RunSpan;
use super::{Newest, SeqExtender};
use crate::seq::SeqPacket;

/// What a pair that contradicts a configured clock (or the learnt ratio) did to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Contradiction {
    /// The clock was dropped for the learnt rate (or the learnt rate replaced by the
    /// stream's): the packet follows the newest one.
    Dropped,
    /// The clock stands: the packet restarts the stream (`run_goes_on`: the pair was
    /// taken into the learnt rate's run).
    Restart { run_goes_on: bool },
}

impl SeqExtender {
    /// Whether positions come from a learnt ratio (bytes; no configured clock in force).
    pub(crate) fn rate_learnt(&self) -> bool {
        self.timeline.fixed.is_none() && self.timeline.learnt.get().is_some()
    }

    /// A consecutive pair `dt` ticks apart whose first packet held `units` contradicted the
    /// configured clock `tb` before any pair confirmed it. A wrong clock shows one other
    /// rate in every pair; a device's time jump, a pair off by the jump. So the clock is
    /// dropped for the rate learnt from the stream (positions going on from the pair's
    /// first packet, at `t0`) where this pair and the one that contradicted it before show
    /// one rate within the stamps' rounding ([`one_rate`]); otherwise this pair is kept to
    /// be compared with the next. True when dropped.
    pub(super) fn contradicted(&mut self, tb: Timebase, dt: u64, units: i128, t0: u64) -> bool {
        match self.timeline.contradicted.replace((dt, units)) {
            Some(before) if one_rate(before, (dt, units)) => {
                self.drop_clock(tb, dt, units, t0);
                true
            }
            _ => false,
        }
    }

    /// Whether the longest run of consecutive packets contradicts a configured clock that a
    /// pair confirmed. One pair shows a clock's error only where it exceeds the stamps'
    /// rounding over one packet: told 491.52 Msps at 200 MHz for a 477.8 Msps stream of
    /// 100-sample packets, a pair is 1.2 ticks off, within the rounding; told 200 Msps for
    /// a stream 0.1% slower, a 100-sample pair is a tick off one time in ten. Such a clock
    /// would size a gap wrong by its error over the gap (30 samples short over 300
    /// packets), and every tick the stamps drift from it makes a packet look like a
    /// restart or a time jump. A run adds the error up: the longest, once it spans 16
    /// pairs and 1024 ticks, then each time it has doubled; the run going on, at each pair
    /// off the clock (`at_once`). It contradicts the clock when the ticks it spans and
    /// those the clock gives its samples differ by more than 5 ticks and its holes. What a
    /// right clock's run can be off by stays below that: less than a tick for the stamps'
    /// rounding at each end of each of its parts — a device time jump past a tick off the
    /// run's bounds is left out of its span, a hole
    /// ([`RateEstimate`](crate::seq::RateEstimate)) — and jumps within a tick of those
    /// bounds, which takes several of them in one run.
    pub(super) fn run_contradicts(&mut self, tb: Timebase, at_once: bool) -> Option<RunSpan> {
        const FIRST_PAIRS: u64 = 16;
        const FIRST_TICKS: u64 = 1024;
        let run = if at_once {
            self.timeline.learnt.current_run()?
        } else {
            let run = self.timeline.learnt.longest_run()?;
            if run.pairs < FIRST_PAIRS || run.ticks < self.timeline.next_check.max(FIRST_TICKS) {
                return None;
            }
            self.timeline.next_check = run.ticks.saturating_mul(2);
            run
        };
        let r = tb.ticks_per_unit;
        let told = run.bytes as f64 * r.num() as f64 / (r.den() as f64 * f64::from(tb.unit_bytes));
        let ticks = run.ticks as f64;
        let units = i128::from(run.bytes / u64::from(tb.unit_bytes.max(1)));
        // A wrong clock's stream has one rate, the one the confirming pair showed too (that
        // pair agreed with the clock only within its rounding): a run at a rate that pair
        // excludes is time jumps on consecutive packets (a sample or two each on packets
        // of a sample), not the clock.
        let one_stream = self
            .timeline
            .confirmed
            .is_none_or(|by| run_agrees(by, (run.ticks, units), run.holes));
        ((ticks - told).abs() > 5.0 + run.holes as f64 && one_stream).then_some(run)
    }

    /// Drops the configured clock `tb` that the stream contradicted (`ticks` ticks for
    /// `units` units where it showed: a pair or a run) for the rate learnt from the stream, positions going
    /// on from the packet at `t0`.
    pub(super) fn drop_clock(&mut self, tb: Timebase, ticks: u64, units: i128, t0: u64) {
        tracing::warn!(
            configured = %tb.ticks_per_unit,
            ticks,
            samples = units,
            "the stream's timestamps do not follow the configured tick and sample rates: \
             gaps are sized from the rate learnt from the stream instead"
        );
        self.timeline.fixed = None;
        self.timeline.anchor = Some((t0, 0));
        self.timeline.clock_dropped = true;
        self.timeline.epoch = self.timeline.epoch.wrapping_add(1);
    }

    /// [`learn`](Self::learn)'s check of a configured clock for a consecutive pair that
    /// [`by_time`](Self::by_time) could not place (the time went forward less than the
    /// newest packet's length, or back). Before a pair confirmed the clock, the pair counts
    /// as a contradiction ([`contradicted`](Self::contradicted)) where it contradicts the
    /// clock. After, such a pair is a device's time jump back — or a clock whose error the
    /// stamps' rounding hid from the pair that confirmed it, which then makes them now and
    /// then, whether the pair shows the error or only the packet's rounded position does:
    /// the pair goes to the run of the learnt rate (which takes it where it fits the run:
    /// a clock the rounding hid, not a jump) and the run decides
    /// ([`run_contradicts`](Self::run_contradicts)).
    ///
    /// Under a learnt ratio the pair goes to the learnt rate, which a run of such pairs
    /// replaces (the ratio came from a pair across a time jump): where the estimate
    /// changed, the packet follows the newest one, positions going on from it. The
    /// format's own clock is never contradicted: such a pair is a restart.
    pub(super) fn contradicts_clock(&mut self, n: &Newest, p: &SeqPacket) -> Contradiction {
        let restart = Contradiction::Restart { run_goes_on: false };
        let (Some(t), Some(t0)) = (p.ticks, n.ticks) else {
            return restart;
        };
        let dt = t.wrapping_sub(t0);
        if (dt as i64) <= 0 {
            return restart;
        }
        // The format's own clock (a VRT sample count) no told rate can make wrong: a pair
        // that contradicts it is the device's time set back.
        if self.own_clock() {
            return restart;
        }
        let Some(tb) = self.timeline.fixed else {
            if self.timeline.learnt.pair(dt, n.payload as u64) {
                self.timeline.anchor = Some((t0, n.start.unwrap_or(0)));
                return Contradiction::Dropped;
            }
            return Contradiction::Restart {
                run_goes_on: self.timeline.learnt.in_run(),
            };
        };
        if self.timeline.confirmed.is_some() {
            self.timeline
                .learnt
                .pair_counting(dt, n.payload as u64, true);
            let Some(run) = self.run_contradicts(tb, true) else {
                return Contradiction::Restart {
                    run_goes_on: self.timeline.learnt.in_run(),
                };
            };
            let units = i128::from(run.bytes / u64::from(tb.unit_bytes.max(1)));
            self.drop_clock(tb, run.ticks, units, t0);
            return Contradiction::Dropped;
        }
        if tb.ticks_per_unit.agrees(i128::from(dt), n.units)
            || !self.contradicted(tb, dt, n.units, t0)
        {
            return restart;
        }
        self.timeline
            .learnt
            .pair_counting(dt, n.payload as u64, true);
        Contradiction::Dropped
    }

    /// Whether `k0 − 1` lost packets of at most `nominal` units each hold `ahead` units
    /// within the error of a configured clock not yet dropped: two ticks a packet (what a
    /// pair that confirmed it hides) and 1% of the time (a rate told that far off shows
    /// in the first pairs, and is dropped at the second). A clock told 0.1% fast makes
    /// 1000 packets lost look like 1001; before, that took the counter a period further
    /// (66 536 frames, flagged). The gap is flagged (rule 1: time other than whole
    /// packets), and sized by the time. Not under the format's own clock, which is exact:
    /// the time then holds more packets, a period of the counter further. (`ahead`: the
    /// least the time can be, where stamps are a tick off.)
    pub(super) fn within_clock_error(&self, k0: i128, ahead: i128, nominal: i128) -> bool {
        let Some(tb) = self.timeline.fixed else {
            return false;
        };
        if k0 < 2 || self.own_clock() {
            return false;
        }
        // Two ticks a packet, in units: 2 where a unit spans a tick or more.
        let per_tick = i128::from(tb.ticks_per_unit.units_per_tick_ceil().max(1));
        ahead <= (k0 - 1) * (nominal + 2 * per_tick) + ahead / 100
    }
}

/// Whether two pairs, `(ticks, units)` each, show one rate: each pair's ticks are its
/// packet's units at that rate to within a tick (both stamps rounded to whole ticks), so
/// `|t₁/u₁ − t₂/u₂| < 1/u₁ + 1/u₂`. Two device time jumps of different sizes show two.
fn one_rate(a: (u64, i128), b: (u64, i128)) -> bool {
    a.1 > 0 && b.1 > 0 && run_agrees(a, b, 0)
}

/// Whether a run of `ticks` for `units` (in `holes + 1` parts, each rounded at both ends)
/// shows the rate of the pair `(t, u)` within both's rounding:
/// `|ticks/units − t/u| < 1/u + (1 + holes)/units`.
fn run_agrees((t, u): (u64, i128), (ticks, units): (u64, i128), holes: u64) -> bool {
    if u <= 0 || units <= 0 {
        return true;
    }
    let holes = i128::from(holes.min(u64::from(u32::MAX)));
    (i128::from(ticks) * u - i128::from(t) * units).abs() < units + (1 + holes) * u
}

#[cfg(test)]
mod one_rate_tests {
    use super::one_rate;

    #[test]
    fn pairs_at_one_rate_within_the_rounding_agree_and_jumps_of_other_sizes_do_not() {
        // 24.4 ticks a 100-unit packet, stamps rounded: 24 or 25 ticks a pair.
        assert!(one_rate((24, 100), (25, 100)));
        assert!(one_rate((24, 100), (12, 50)));
        // Two jumps of 3 and 6 samples on 5-sample packets at 625/384 ticks a sample.
        assert!(!one_rate((13, 5), (18, 5)));
        assert!(!one_rate((13, 0), (13, 0)));
    }
}
