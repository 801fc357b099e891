//! The depacketizer's clock: which items get a time tag, and where a timestamped setting
//! (a VRT/DIFI context packet) lands. Timestamps are compared on their own linear scale
//! (CHDR ticks, VRT sample counts or picoseconds) with the exact ratio of that scale's units
//! per item, so a non-integer ratio never makes a continuous stream look like it jumped.

use super::{DepacketizerConfig, RxTime, TagKind};
use crate::format::Timestamp;
use crate::format::vrt::Tsf;
use crate::seq::Ratio;

/// A setting waiting for the item it applies from.
#[derive(Debug, Clone, Copy)]
pub(super) struct PendingSetting {
    pub(super) kind: TagKind,
    /// The time it applies from, on the linear scale of its timestamp's kind; `None`: the
    /// next datagram's first item.
    pub(super) at: Option<(Scale, u64)>,
}

/// The kind of linear scale a timestamp is on (values of different scales never compare).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scale {
    Ticks,
    Samples,
    Picoseconds,
}

#[derive(Debug, Clone)]
pub(super) struct Timing {
    tick_rate: Option<f64>,
    /// Ticks per item (from the configuration).
    ticks_per_item: Option<Ratio>,
    /// Picoseconds per item.
    ps_per_item: Option<Ratio>,
    /// A timestamp on the linear scale and the items since it: what the next one should be.
    reference: Option<(Scale, u64, u64)>,
    /// Without a ratio: the last timestamp in ticks, to tag only discontinuities.
    seen: bool,
    /// The sample rate changed (a context packet's `rx_rate`): the next timestamp is tagged.
    retuned: bool,
    /// The scale of the stream's timestamps, once one was read.
    scale: Option<Scale>,
}

impl Timing {
    pub(super) fn new(cfg: &DepacketizerConfig) -> Self {
        let tpi = cfg.ticks_per_item.and_then(|t| match cfg.tick_rate {
            Some(rate) => Ratio::of_rates(rate, rate / t)
                .filter(|r| (r.to_f64() - t).abs() <= t * 1e-9)
                .or_else(|| Ratio::from_f64(t)),
            None => Ratio::from_f64(t),
        });
        let sample_rate = cfg.tick_rate.zip(cfg.ticks_per_item).map(|(r, t)| r / t);
        Self {
            tick_rate: cfg.tick_rate,
            ticks_per_item: tpi,
            ps_per_item: sample_rate.and_then(|s| Ratio::of_rates(1e12, s)),
            reference: None,
            seen: false,
            retuned: false,
            scale: None,
        }
    }

    /// The stream's sample rate changed to `sps` (from a context packet): ticks per item
    /// follow it, a VRT sample count counts at it, and the next time tag says so.
    pub(super) fn set_sample_rate(&mut self, sps: f64) {
        if !(sps.is_finite() && sps > 0.0) {
            return;
        }
        // Sample counts (VRT) count at the new rate; device ticks (CHDR) stay and hold a
        // different number per sample.
        if self.scale == Some(Scale::Samples) {
            self.tick_rate = Some(sps);
        } else if let Some(t) = self.tick_rate {
            self.ticks_per_item = Ratio::of_rates(t, sps);
        }
        self.ps_per_item = Ratio::of_rates(1e12, sps);
        self.retuned = true;
    }

    /// The timestamp on its linear scale, and that scale's units per item when known.
    pub(super) fn linear(&self, ts: Timestamp) -> Option<(Scale, u64, Option<Ratio>)> {
        match ts {
            Timestamp::Ticks(t) => Some((Scale::Ticks, t, self.ticks_per_item)),
            Timestamp::Vrt(v) => match (v.tsf, v.fractional) {
                (Tsf::SampleCount, Some(_)) => {
                    // Integer seconds count at the sample rate (the tick rate the blocks
                    // give VRT streams).
                    let t = ts.linear_at(self.tick_rate)?;
                    Some((Scale::Samples, t, Ratio::integer(1)))
                }
                (Tsf::RealTime, Some(_)) => {
                    Some((Scale::Picoseconds, ts.linear()?, self.ps_per_item))
                }
                (Tsf::FreeRunning, Some(_)) => Some((
                    Scale::Ticks,
                    ts.linear_at(self.tick_rate)?,
                    self.ticks_per_item,
                )),
                _ => None,
            },
        }
    }

    /// The time tag of a datagram of `items` items stamped `ts`: on the first datagram,
    /// after a discontinuity (gap, restart), and wherever the timestamp is not where the
    /// items before it say (with a known ratio, within what a sender's rounding explains).
    pub(super) fn tag(
        &mut self,
        ts: Option<Timestamp>,
        discontinuity: bool,
        items: usize,
    ) -> Option<RxTime> {
        let tick_rate = self.tick_rate?;
        let ts = ts?;
        let ticks = ts.ticks(tick_rate)?;
        let lin = self.linear(ts);
        self.scale = lin.map(|(s, ..)| s).or(self.scale);
        // Taken whatever else made this a discontinuity (not short-circuited away).
        let retuned = std::mem::take(&mut self.retuned);
        let discontinuity = discontinuity || retuned;
        let tag = match lin {
            Some((scale, l, Some(r))) => {
                let continuous = !discontinuity
                    && self.reference.is_some_and(|(s0, l0, n)| {
                        s0 == scale
                            && r.agrees(i128::from(l.wrapping_sub(l0) as i64), i128::from(n))
                    });
                if !continuous {
                    self.reference = Some((scale, l, 0));
                }
                !continuous
            }
            // Without a ratio the next timestamp is unknown: only at discontinuities.
            _ => discontinuity || !self.seen,
        };
        self.seen = true;
        if let Some(r) = self.reference.as_mut() {
            r.2 += items as u64;
        }
        tag.then(|| RxTime {
            ticks,
            seconds: ts.seconds(tick_rate).unwrap_or(ticks as f64 / tick_rate),
            tick_rate,
        })
    }

    /// Where a setting applies relative to a datagram stamped `ts`: its offset in items from
    /// the datagram's first item (negative: before it), or `None` when they cannot be put on
    /// one scale.
    pub(super) fn offset(&self, at: (Scale, u64), ts: Option<Timestamp>) -> Option<i128> {
        let (scale, l, r) = self.linear(ts?)?;
        (scale == at.0).then_some(())?;
        Some(r?.units_rounded(i128::from(at.1.wrapping_sub(l) as i64)))
    }

    /// The anchor of a setting carried by a packet stamped `ts`.
    pub(super) fn anchor(&self, ts: Option<Timestamp>) -> Option<(Scale, u64)> {
        self.linear(ts?).map(|(s, l, _)| (s, l))
    }
}
