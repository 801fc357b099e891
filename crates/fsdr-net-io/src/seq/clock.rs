//! Exact time arithmetic for a stream's timestamps: [`Ratio`] (ticks per item as a fraction
//! of integers, never a float learnt from one packet pair), [`Timebase`] (ticks per unit and
//! bytes per unit), and [`RateEstimate`](super::RateEstimate), which recovers the ratio from a long run of
//! consecutive packets when nobody configured it.
//!
//! A sender stamps the packet that starts after `n` items with `t0 + round(n × tpi)` (UHD,
//! DIFI devices, this crate's [`Framer`](crate::send::Framer)). Inverting that with the exact
//! ratio, `round((t − t0) / tpi)`, gives `n` back whenever the rounding error of both
//! timestamps (at most half a tick each) is under half an item: always for an integer
//! `tpi`, and for any `tpi` above 2 ticks. A float `tpi` learnt from one pair is off by up to
//! a tick per packet, which grows over a long gap (32 samples over 1000 packets at 200 MHz /
//! 30.72 Msps).
//!
//! ```
//! use fsdr_net_io::seq::Ratio;
//!
//! // 200 MHz ticks, 30.72 Msps: 625/96 ticks per sample.
//! let tpi = Ratio::of_rates(200e6, 30.72e6).unwrap();
//! assert_eq!((tpi.num(), tpi.den()), (625, 96));
//! // 1000 packets of 364 samples later, the timestamp says exactly 364 000 samples.
//! let ticks = tpi.ticks_rounded(364_000);
//! assert_eq!(tpi.units_rounded(ticks as i128), 364_000);
//! ```

use std::cmp::Ordering;

/// A positive fraction `num / den` of two integers, in lowest terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ratio {
    num: u64,
    den: u64,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Ratio {
    /// `num / den` in lowest terms; `None` when either is zero.
    pub fn new(num: u64, den: u64) -> Option<Self> {
        if num == 0 || den == 0 {
            return None;
        }
        let g = gcd(num, den);
        Some(Self {
            num: num / g,
            den: den / g,
        })
    }

    /// The integer `n`.
    pub fn integer(n: u64) -> Option<Self> {
        Self::new(n, 1)
    }

    /// Numerator.
    pub fn num(&self) -> u64 {
        self.num
    }

    /// Denominator.
    pub fn den(&self) -> u64 {
        self.den
    }

    /// As a float (for display and tags).
    pub fn to_f64(&self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// Whether the ratio is a whole number.
    pub fn is_integer(&self) -> bool {
        self.den == 1
    }

    /// `self / d` (for ticks per byte from ticks per item and bytes per item).
    pub fn div_int(&self, d: u64) -> Option<Self> {
        Self::new(self.num, self.den.checked_mul(d)?)
    }

    /// The exact ratio `a / b` of two rates given in Hz (or samples/s). Rates are whole
    /// numbers in practice (200e6, 30.72e6, 491.52e6); a rate with up to six decimals is
    /// scaled to an integer first; anything else goes through [`Ratio::from_f64`].
    pub fn of_rates(a: f64, b: f64) -> Option<Self> {
        // Receivers read every timestamp with the stream's rates: the last answer is kept
        // per thread (the function is pure), which saves the search and the gcd's
        // divisions on every packet.
        thread_local! {
            static LAST: std::cell::Cell<Option<(u64, u64, Option<Ratio>)>> =
                const { std::cell::Cell::new(None) };
        }
        let key = (a.to_bits(), b.to_bits());
        if let Some((x, y, r)) = LAST.get()
            && (x, y) == key
        {
            return r;
        }
        let r = Self::of_rates_uncached(a, b);
        LAST.set(Some((key.0, key.1, r)));
        r
    }

    fn of_rates_uncached(a: f64, b: f64) -> Option<Self> {
        if !(a.is_finite() && b.is_finite() && a > 0.0 && b > 0.0) {
            return None;
        }
        let mut scale = 1.0;
        for _ in 0..=6 {
            let (x, y) = (a * scale, b * scale);
            if x.fract() == 0.0 && y.fract() == 0.0 && x < 9e15 && y < 9e15 {
                return Self::new(x as u64, y as u64);
            }
            scale *= 10.0;
        }
        Self::from_f64(a / b)
    }

    /// The simplest fraction within a relative 1e-12 of `x` (continued fractions), with a
    /// denominator of at most 2^32.
    pub fn from_f64(x: f64) -> Option<Self> {
        if !(x.is_finite() && x > 0.0 && x < 1.8e19) {
            return None;
        }
        // Convergents h/k of the continued fraction of x.
        let (mut h0, mut h1) = (0u128, 1u128);
        let (mut k0, mut k1) = (1u128, 0u128);
        let mut rest = x;
        let mut best = None;
        for _ in 0..64 {
            let a = rest.floor();
            if a > 1.8e19 {
                break;
            }
            let a = a as u128;
            let (h2, k2) = (a * h1 + h0, a * k1 + k0);
            if k2 > 1 << 32 || h2 > u64::MAX as u128 {
                break;
            }
            (h0, h1, k0, k1) = (h1, h2, k1, k2);
            best = Self::new(h1 as u64, k1 as u64);
            if ((h1 as f64 / k1 as f64) - x).abs() <= x * 1e-12 {
                break;
            }
            let f = rest - rest.floor();
            if f < 1e-15 {
                break;
            }
            rest = 1.0 / f;
        }
        best
    }

    /// The simplest fraction `p/q` (smallest `q`, then `p`) with `lo ≤ p/q ≤ hi`, for two
    /// bounds given as fractions `lo = (ln, ld)`, `hi = (hn, hd)` with `0 < lo ≤ hi`: the
    /// Stern–Brocot walk. `None` for bad bounds.
    pub fn simplest_between(lo: (u64, u64), hi: (u64, u64)) -> Option<Self> {
        Self::simplest_with_neighbours(lo, hi).map(|(r, _)| r)
    }

    /// [`simplest_between`](Self::simplest_between), with the fraction's two parents in the
    /// Stern–Brocot tree as `(num, den)` (`(1, 0)` is infinity): the closest fractions on
    /// either side that are simpler, with nothing as simple between them but the fraction
    /// itself, so that it is the simplest fraction of every interval that holds it and
    /// neither parent.
    pub(crate) fn simplest_with_neighbours(
        lo: (u64, u64),
        hi: (u64, u64),
    ) -> Option<(Self, [(u64, u64); 2])> {
        let (ln, ld) = (u128::from(lo.0), u128::from(lo.1));
        let (hn, hd) = (u128::from(hi.0), u128::from(hi.1));
        if ld == 0 || hd == 0 || ln == 0 || ln * hd > hn * ld {
            return None;
        }
        // The continued fraction of both bounds, as far as they agree: x = a + 1/x', with
        // x' the simplest fraction in [1/(hi − a), 1/(lo − a)]. The terms are collected and
        // folded back at the end.
        let (mut ln, mut ld, mut hn, mut hd) = (ln, ld, hn, hd);
        // Convergents p/q of a_0 + 1/(a_1 + 1/(…)), kept as they go (p_k = a_k p_{k−1} +
        // p_{k−2}), so nothing is allocated.
        let (mut p0, mut p1) = (0u128, 1u128);
        let (mut q0, mut q1) = (1u128, 0u128);
        let mut terms = 0;
        let last = loop {
            let a = ln / ld;
            if a * ld == ln {
                break a; // lo itself is a whole number
            }
            if (a + 1) * hd <= hn {
                break a + 1; // a whole number lies in (lo, hi]
            }
            terms += 1;
            if terms > 128 {
                return None;
            }
            (p0, p1) = (p1, a.checked_mul(p1)?.checked_add(p0)?);
            (q0, q1) = (q1, a.checked_mul(q1)?.checked_add(q0)?);
            (ln, ld, hn, hd) = (hd, hn - a * hd, ld, ln - a * ld);
        };
        let p = last.checked_mul(p1)?.checked_add(p0)?;
        let q = last.checked_mul(q1)?.checked_add(q0)?;
        if p > u128::from(u64::MAX) || q > u128::from(u64::MAX) {
            return None;
        }
        // The parents of [a_0; …, a_k] are [a_0; …, a_(k−1)] and [a_0; …, a_k − 1] (the
        // convergent before it when a_k is 1); neither is larger than p/q.
        let (pm, qm) = (
            last.saturating_sub(1) * p1 + p0,
            last.saturating_sub(1) * q1 + q0,
        );
        let parents = [(p1 as u64, q1 as u64), (pm as u64, qm as u64)];
        Some((Self::new(p as u64, q as u64)?, parents))
    }

    /// `round(n × self)`, halves rounded up: the ticks `n` units after a reference, as a
    /// sender stamps them.
    pub fn ticks_rounded(&self, n: u64) -> u64 {
        let x = u128::from(n) * u128::from(self.num);
        ((2 * x + u128::from(self.den)) / (2 * u128::from(self.den))) as u64
    }

    /// `round(ticks / self)`, halves away from zero: the units that `ticks` ticks hold.
    pub fn units_rounded(&self, ticks: i128) -> i128 {
        let x = ticks * i128::from(self.den);
        let n = i128::from(self.num);
        let q = (2 * x.abs() + n) / (2 * n);
        if x < 0 { -q } else { q }
    }

    /// Compares `ticks` with `units × self` and says whether they agree within what a
    /// sender's rounding can explain: less than one tick, and, where stamps
    /// [invert exactly](Self::inverts_exactly), less than half a unit (so a jump of one unit
    /// is never taken for rounding). Where a tick is longer than that (491.52 Msps stamped
    /// at 200 MHz: 0.41 ticks a sample), two rounded stamps are up to a tick apart from
    /// where the units put them, and a jump shorter than a tick cannot be told from that.
    ///
    /// ```
    /// use fsdr_net_io::seq::Ratio;
    ///
    /// // 200 MHz ticks, 491.52 Msps: 1996 samples are 812.17 ticks, stamped 812 or 813.
    /// let tpi = Ratio::of_rates(200e6, 491.52e6).unwrap();
    /// assert!(tpi.agrees(812, 1996) && tpi.agrees(813, 1996));
    /// assert!(!tpi.agrees(814, 1996));
    /// ```
    pub fn agrees(&self, ticks: i128, units: i128) -> bool {
        // |ticks × den − units × num| < min(den, num / 2) (or < den), all times 2 to stay
        // integral.
        let dev = (ticks * i128::from(self.den) - units * i128::from(self.num)).abs();
        let tol2 = if self.inverts_exactly() {
            (2 * i128::from(self.den)).min(i128::from(self.num))
        } else {
            2 * i128::from(self.den)
        };
        2 * dev < tol2
    }

    /// Whether stamps rounded to whole ticks give every distance in units back exactly
    /// ([`units_rounded`](Self::units_rounded) of the difference of two stamps): where a
    /// unit is a whole number of ticks, or more than two ticks. Otherwise a distance is
    /// known within [`units_per_tick_ceil`](Self::units_per_tick_ceil) units.
    ///
    /// ```
    /// use fsdr_net_io::seq::Ratio;
    ///
    /// assert!(Ratio::of_rates(200e6, 30.72e6).unwrap().inverts_exactly()); // 6.5 ticks
    /// assert!(!Ratio::of_rates(200e6, 491.52e6).unwrap().inverts_exactly()); // 0.41
    /// ```
    pub fn inverts_exactly(&self) -> bool {
        self.den == 1 || u128::from(self.num) > 2 * u128::from(self.den)
    }

    /// The units one tick spans, rounded up (`⌈den / num⌉`): how far apart from the truth
    /// the distance between two rounded stamps can put two positions.
    pub fn units_per_tick_ceil(&self) -> u64 {
        self.den.div_ceil(self.num)
    }
}

impl PartialOrd for Ratio {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ratio {
    fn cmp(&self, other: &Self) -> Ordering {
        (u128::from(self.num) * u128::from(other.den))
            .cmp(&(u128::from(other.num) * u128::from(self.den)))
    }
}

impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

/// How a stream's timestamps relate to its payload: `ticks_per_unit` ticks per unit of
/// `unit_bytes` payload bytes (a sample, when the rates are known; a byte, when learnt).
///
/// ```
/// use fsdr_net_io::seq::{Ratio, Timebase};
///
/// // CHDR at 200 MHz ticks, 50 Msps sc16: 4 ticks per 4-byte sample.
/// let tb = Timebase::of_rates(200e6, 50e6, 4).unwrap();
/// assert_eq!(tb.ticks_per_unit, Ratio::integer(4).unwrap());
/// assert_eq!(tb.unit_bytes, 4);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timebase {
    /// Ticks per unit.
    pub ticks_per_unit: Ratio,
    /// Payload bytes per unit (bytes per sample on the wire).
    pub unit_bytes: u32,
    /// The ticks are the format's own count of samples (VRT TSF 1,
    /// [`sample_count`](Self::sample_count)), which no rate a receiver was told can make
    /// wrong: a gap they size at other than whole packets is a short packet lost, exactly.
    /// `false` for rates a receiver was told ([`of_rates`](Self::of_rates): CHDR ticks,
    /// VRT picoseconds, a VRT free-running count — even one told to tick at the sample
    /// rate, whose clock may be a few ppm off): such a gap is flagged ambiguous.
    pub counts_samples: bool,
}

impl Timebase {
    /// From the device's tick rate and sample rate and the bytes per sample on the wire.
    pub fn of_rates(tick_rate: f64, sample_rate: f64, bytes_per_sample: u32) -> Option<Self> {
        (bytes_per_sample > 0).then_some(())?;
        Some(Self {
            ticks_per_unit: Ratio::of_rates(tick_rate, sample_rate)?,
            unit_bytes: bytes_per_sample,
            counts_samples: false,
        })
    }

    /// The timebase of a sample count (VRT TSF 1): one tick a sample of
    /// `bytes_per_sample` wire bytes, the format's own ([`counts_samples`](Self::counts_samples)).
    ///
    /// ```
    /// use fsdr_net_io::seq::{Ratio, Timebase};
    ///
    /// let tb = Timebase::sample_count(4).unwrap();
    /// assert_eq!(tb.ticks_per_unit, Ratio::integer(1).unwrap());
    /// assert!(tb.counts_samples);
    /// // The same ratio from told rates is not the format's own.
    /// assert!(!Timebase::of_rates(1e6, 1e6, 4).unwrap().counts_samples);
    /// ```
    pub fn sample_count(bytes_per_sample: u32) -> Option<Self> {
        (bytes_per_sample > 0).then_some(())?;
        Some(Self {
            ticks_per_unit: Ratio::integer(1)?,
            unit_bytes: bytes_per_sample,
            counts_samples: true,
        })
    }

    /// Whole units in `bytes` payload bytes.
    pub fn units_in(&self, bytes: usize) -> i128 {
        (bytes / self.unit_bytes as usize) as i128
    }
}

/// What the receive side knows of a stream's clock: the device's tick rate and the sample
/// rate (when given) and the bytes one sample takes on the wire. It puts every kind of
/// timestamp on its own linear scale with that scale's exact [`Timebase`]: CHDR ticks
/// (tick rate / sample rate per sample), VRT sample counts (one per sample, integer seconds
/// times the sample rate), VRT picoseconds (10^12 / sample rate per sample), VRT
/// free-running counts (tick rate / sample rate).
///
/// ```
/// use fsdr_net_io::format::Timestamp;
/// use fsdr_net_io::seq::{Ratio, StreamClock};
///
/// let clock = StreamClock { tick_rate: Some(200e6), sample_rate: Some(30.72e6), bytes_per_sample: 4 };
/// let (ticks, tb) = clock.read(&Timestamp::Ticks(1000)).unwrap();
/// assert_eq!(ticks, 1000);
/// assert_eq!(tb.unwrap().ticks_per_unit, Ratio::new(625, 96).unwrap());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StreamClock {
    /// The device's tick rate in Hz (CHDR timestamps, VRT free-running counts).
    pub tick_rate: Option<f64>,
    /// Samples per second.
    pub sample_rate: Option<f64>,
    /// Wire bytes per sample (0: unknown; the ratio is then learnt per byte).
    pub bytes_per_sample: u32,
}

impl StreamClock {
    /// A timestamp on its linear scale, with the scale's timebase when the rates give it;
    /// `None` when the timestamp has no usable fractional part.
    pub fn read(&self, ts: &crate::format::Timestamp) -> Option<(u64, Option<Timebase>)> {
        use crate::format::Timestamp;
        use crate::format::vrt::Tsf;
        let tb = |per_sample: Option<Ratio>| {
            let bps = self.bytes_per_sample;
            per_sample.filter(|_| bps > 0).map(|r| Timebase {
                ticks_per_unit: r,
                unit_bytes: bps,
                counts_samples: false,
            })
        };
        let rates = |a: Option<f64>| {
            a.zip(self.sample_rate)
                .and_then(|(a, s)| Ratio::of_rates(a, s))
        };
        match ts {
            Timestamp::Ticks(t) => Some((*t, tb(rates(self.tick_rate)))),
            Timestamp::Vrt(v) => match v.tsf {
                Tsf::SampleCount => Some((
                    ts.linear_at(self.sample_rate)?,
                    Timebase::sample_count(self.bytes_per_sample),
                )),
                Tsf::RealTime => Some((ts.linear()?, tb(rates(Some(1e12))))),
                Tsf::FreeRunning => Some((ts.linear()?, tb(rates(self.tick_rate)))),
                Tsf::None => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_become_exact_fractions() {
        let r = Ratio::of_rates(200e6, 70e6).unwrap();
        assert_eq!((r.num(), r.den()), (20, 7));
        let r = Ratio::of_rates(1e12, 30.72e6).unwrap();
        assert_eq!((r.num(), r.den()), (390_625, 12));
        let r = Ratio::of_rates(245.76e6, 245.76e6).unwrap();
        assert_eq!(r, Ratio::integer(1).unwrap());
        assert_eq!(
            Ratio::from_f64(200.0 / 30.72).unwrap(),
            Ratio::new(625, 96).unwrap()
        );
        assert!(Ratio::of_rates(0.0, 1.0).is_none());
        assert!(Ratio::of_rates(f64::NAN, 1.0).is_none());
    }

    #[test]
    fn rounding_round_trips_for_every_count() {
        for tpi in [
            Ratio::new(625, 96).unwrap(),
            Ratio::new(20, 7).unwrap(),
            Ratio::new(5, 2).unwrap(),
            Ratio::integer(1).unwrap(),
            Ratio::integer(4).unwrap(),
            Ratio::new(390_625, 12).unwrap(),
        ] {
            for n in 0..crate::testing::sweep(5_000, 100) {
                let t = tpi.ticks_rounded(n) as i128;
                assert_eq!(tpi.units_rounded(t), n as i128, "{tpi} n {n}");
                assert!(tpi.agrees(t, n as i128), "{tpi} n {n}");
                if n > 0 {
                    assert!(!tpi.agrees(t, n as i128 - 1), "{tpi} n {n}");
                }
                // Relative to a rounded reference (a receiver that joins late).
                let r = tpi.ticks_rounded(777) as i128;
                let rel = tpi.ticks_rounded(777 + n) as i128 - r;
                if tpi.to_f64() > 2.0 || tpi.is_integer() {
                    assert_eq!(tpi.units_rounded(rel), n as i128, "{tpi} +{n}");
                    assert!(tpi.agrees(rel, n as i128), "{tpi} +{n}");
                }
            }
        }
    }

    #[test]
    fn simplest_fraction_in_an_interval() {
        let s = |lo, hi| Ratio::simplest_between(lo, hi).unwrap();
        assert_eq!(s((99, 400), (101, 400)), Ratio::new(1, 4).unwrap());
        assert_eq!(s((7, 2), (9, 2)), Ratio::integer(4).unwrap());
        assert_eq!(s((3, 1), (3, 1)), Ratio::integer(3).unwrap());
        assert_eq!(s((1, 3), (1, 2)), Ratio::new(1, 2).unwrap());
        // 625/384 ticks per byte (625/96 per 4-byte sample) from 1000 packets of 1456 B.
        let tpb = Ratio::new(625, 384).unwrap();
        let bytes = 1_456_000u64;
        let t = tpb.ticks_rounded(bytes);
        assert_eq!(s((t - 1, bytes), (t + 1, bytes)), tpb);
        assert!(Ratio::simplest_between((2, 1), (1, 1)).is_none());
    }

    #[test]
    fn nothing_as_simple_lies_between_the_parents() {
        // What keeps `RateEstimate` from walking on every packet: every fraction strictly
        // between the two parents is less simple than the walk's result (a larger
        // denominator, or above an integer the same one and a larger numerator).
        let lt = |a: (u64, u64), b: (u64, u64)| {
            u128::from(a.0) * u128::from(b.1) < u128::from(b.0) * u128::from(a.1)
        };
        for lo in (1..=9).flat_map(|n| (1..=9).map(move |d| (n, d))) {
            for hi in (1..=9).flat_map(|n| (1..=9).map(move |d| (n, d))) {
                let Some((e, [a, b])) = Ratio::simplest_with_neighbours(lo, hi) else {
                    assert!(lt(hi, lo));
                    continue;
                };
                let e2 = (e.num(), e.den());
                let (l, r) = if lt(a, b) { (a, b) } else { (b, a) };
                assert!(lt(l, e2) && lt(e2, r), "{lo:?} {hi:?}: {l:?} < {e} < {r:?}");
                for x in (0..=100).flat_map(|n| (1..=e.den()).map(move |d| (n, d))) {
                    if lt(l, x) && lt(x, r) {
                        let Some(x) = Ratio::new(x.0, x.1) else {
                            continue;
                        };
                        let simpler = (x.den(), x.num()) < (e.den(), e.num());
                        assert!(!simpler, "{lo:?} {hi:?}: {x} between {l:?} and {r:?}");
                    }
                }
            }
        }
    }

    /// VRT stamps as the blocks read them, 4-bit counter, 1000 sc16 samples a packet, a
    /// device whose stamps run 200 ppm slow of the count told (a free-running count's own
    /// oscillator), 6 packets lost after 10 (within the counter's reach, which proves the
    /// count): the time gives 5 999 samples where 6 000 were lost, and no run is long
    /// enough to show 200 ppm (5 ticks take 25 packets). `(frames, bytes, ambiguous)` of
    /// the gap.
    fn vrt_gap(tsf: crate::format::vrt::Tsf) -> (u64, Option<u64>, bool) {
        use crate::format::Format;
        use crate::format::vrt::{Tsi, VrtRepr, VrtTimestamp};
        use crate::seq::{SeqEvent, StreamOrder, Tracking};
        let clock = StreamClock {
            tick_rate: Some(10e6),
            sample_rate: Some(10e6),
            bytes_per_sample: 4,
        };
        let tracking = Tracking::for_format(Format::Vrt, 1)
            .unwrap()
            .with_clock(clock);
        let mut order = StreamOrder::<u64>::new(tracking, 8);
        let mut out = Vec::new();
        for k in (0..30u64).filter(|k| !(10..16).contains(k)) {
            let stamp = (k as f64 * 999.8).round() as u64;
            let repr = VrtRepr {
                packet_type: 1,
                stream_id: Some(1),
                class_id: None,
                trailer: None,
                timestamp: Some(VrtTimestamp {
                    tsi: Tsi::None,
                    integer: None,
                    tsf,
                    fractional: Some(stamp),
                }),
                packet_count: (k % 16) as u8,
                size_words: 0,
            };
            let mut dg = vec![0u8; repr.header_len() + 4000];
            let size_words = (dg.len() / 4) as u16;
            VrtRepr { size_words, ..repr }.emit(&mut dg);
            let p = tracking.packet(&Format::Vrt.parse(&dg).unwrap());
            let w = order.widen(&p);
            order.push(w, &p, k, &mut out);
        }
        order.flush_all(&mut out);
        let gaps: Vec<_> = out
            .iter()
            .filter(|r| matches!(r.event, SeqEvent::Gap { .. }))
            .map(|r| (r.gap.frames, r.gap.bytes, r.gap.ambiguous))
            .collect();
        assert_eq!(gaps.len(), 1, "{gaps:?}");
        gaps[0]
    }

    /// A sample count is the format's own clock: a gap it gives at other than whole
    /// packets is a short packet lost, exactly, unflagged (the same stamps as a sample
    /// count: 5 999 samples). A free-running count told to tick at the sample rate is a
    /// told clock: before, it was taken for a sample count, and the 200 ppm its oscillator
    /// was off made 6 lost packets 5 999 samples of zeros, unflagged — every later sample
    /// one early; now the gap is flagged (`ambiguous`), its size still the time's.
    #[test]
    fn a_free_running_count_told_the_sample_rate_is_a_told_clock() {
        use crate::format::vrt::Tsf;
        assert_eq!(vrt_gap(Tsf::SampleCount), (6, Some(4 * 5_999), false));
        assert_eq!(vrt_gap(Tsf::FreeRunning), (6, Some(4 * 5_999), true));
    }
}
