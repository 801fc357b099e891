//! The sequence extender: short counters widened to 64 bits (rules on [`SeqExtender`]).

use super::clock::{Ratio, Timebase};
pub use counter::fingerprint;
use history::{History, Seen};
use placement::Placement;
use timeline::Timeline;

mod check;
mod counter;
mod history;
mod placement;
mod time;
mod timeline;

/// Counter periods a restart jumps ahead: far beyond any gap the tracker accepts (2^20
/// frames), so it is always a `Resync`.
const RESTART_PERIODS: u64 = 1 << 24;

/// One packet as the extender needs it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeqPacket {
    /// The counter as carried (its low bits are used).
    pub seq: u64,
    /// The timestamp on a linear scale of the stream's ticks, when usable.
    pub ticks: Option<u64>,
    /// The timebase of the timestamp's scale, when the rates give it
    /// ([`StreamClock::read`](super::StreamClock::read)); learnt otherwise.
    pub timebase: Option<Timebase>,
    /// Payload bytes.
    pub payload: usize,
    /// The packet ends a burst.
    pub eob: bool,
    /// [`fingerprint`] of the payload: asked for ([`SeqExtender::needs_fingerprint`]) on
    /// streams without timestamps.
    pub fingerprint: Option<u64>,
}

/// What the extender made of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Widened {
    /// The 64-bit sequence number.
    pub ext: u64,
    /// Where the packet starts on the stream's timeline, in units of the timebase (bytes
    /// when the rate is learnt), when its timestamp is usable.
    pub start: Option<i128>,
    /// How the gap before it is sized.
    pub size: GapSize,
    /// The format could not prove this placement (a short counter without timestamps), or
    /// the size of the gap before it (the time gives it other than whole packets where it
    /// cannot size it exactly, or from a told clock: [`SeqExtender`]'s rules 1 and 5).
    pub ambiguous: bool,
    /// What `ambiguous` says is the count or size of the gap before it only: where late
    /// packets fill that gap before this one is released, nothing is left unproven.
    pub gap_only: bool,
    /// The sender restarted here.
    pub restart: bool,
}

/// How a gap before a packet is sized ([`Widened::size`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GapSize {
    /// From the positions of the packets on either side where the timeline pins both,
    /// otherwise the packets missed × the stream's largest.
    #[default]
    Positions,
    /// The packets missed × the stream's largest: the gap lies beside a time jump, whose
    /// time is no loss.
    Packets,
    /// As the time shows it, `units` of the timeline ([`SeqExtender::rate`]) for a gap of
    /// `frames` packets, where those packets × the stream's largest would be longer than
    /// the time allows and the timeline pins no position (for that gap only: where late
    /// packets fill part of it, as [`Positions`](Self::Positions)).
    Time {
        /// The gap in units of the timeline.
        units: i128,
        /// The packets missed it spans.
        frames: u64,
    },
}

#[derive(Debug, Clone, Copy)]
struct Newest {
    ext: u64,
    ticks: Option<u64>,
    start: Option<i128>,
    /// `start` where the timeline pins it ([`Widened::start`]).
    pinned: Option<i128>,
    /// Units the packet held (payload bytes / unit bytes).
    units: i128,
    payload: usize,
    eob: bool,
}

/// [`SeqExtender`]: widens a short sequence number (VITA-49's 4 bits, CHDR's 16) to 64 bits,
/// so that the tracker and the reorder stage work in a space where a lost packet can never
/// look like a duplicate — as far as the format lets anyone tell.
///
/// The rules, in order (the module documentation of [`seq`](crate::seq) states what each
/// format can tell apart):
///
/// 1. **A usable timestamp decides** (CHDR ticks, VRT sample counts, picoseconds or
///    free-running counts, with a
///    known or learnt rate). Every packet gets an exact position on the stream's timeline.
///    A packet that starts `a` units after the end of the newest one follows the loss of
///    `k − 1` packets, where `k` is the smallest number with the counter's low bits that
///    the lost packets can hold: each holds at most the stream's largest payload (and,
///    under a told clock, its error: rule 5) and at least one unit (under a learnt ratio,
///    per byte, a sample where [`with_sample_bytes`](Self::with_sample_bytes) told its
///    bytes). No such `k`: with the counter one ahead it is a time jump without
///    loss (a device overflow, a burst's gap; tagged, not filled); with the counter
///    further ahead, where only a period more was too many for the time, the counter's
///    count beside a time jump (or lost packets longer than any seen), flagged, its gap
///    sized from the packets ([`GapSize::Packets`]); otherwise the sender restarted. A
///    packet that starts behind the newest one is, at the counter's number nearest to
///    where the time puts it, a copy of the packet received there (its stamp and length)
///    or a late one (nothing received there, its time between its received neighbours';
///    beyond the positions remembered, inside one of the last 256 gaps, at the counter's
///    nearest number: never on a 4-bit counter);
///    neither: the device's clock went back, a restart. A count the time raised past the
///    counter's is proven only where the time is whole packets and a learnt ratio is sure
///    of it within a unit beyond the stamps' rounding; otherwise flagged.
///    A learnt ratio gives a position for sizing a gap ([`Widened::start`]) only where a
///    packet spans whole ticks under it and the stamp lies on its grid, until a consecutive
///    pair shows its stamps rounded (a ratio only near the stream's: 24.007 ticks a packet
///    learnt as 24); a gap it sizes at other than whole packets is flagged `ambiguous` (a
///    short packet lost, or such rounding where nothing showed it yet), and so is a gap
///    sized from the packets (stamps a tick off) whose time is other than whole packets
///    by more than the stamps' rounding (a short packet lost, sized as a full one), and
///    one a told clock sizes at other than whole packets (rule 5). A gap the packets
///    missed × the largest would make longer than its time is sized by the time
///    ([`GapSize::Time`]). A flag on a gap only ([`Widened::gap_only`]) is withdrawn
///    where late packets fill it.
/// 2. **After an end of burst** the next burst may start at any time: the counter alone
///    sizes a loss there. So it does before a rate is learnt (the first consecutive pair)
///    and where a learnt ratio is not pinned well enough to place a packet (its
///    uncertainty over the distance reaches half a packet) — unless the time, at the least
///    it can be (also at the ratio's bound of most ticks a byte), needs more packets than
///    the counter's number: then rule 1's count within that uncertainty, flagged (a 4-bit
///    counter's 16·m more), or fewer than the counter's number can hold (a restart). The
///    stamps still tell ahead from behind: a number behind stamped later is a loss of half
///    a period or more, flagged; one stamped earlier is behind, at the counter's value
///    nearest to where the loose ratio puts it (flagged where that is not the nearest
///    number); and on a 4-bit counter every loss so counted is flagged. A ratio learnt from one pair that cannot place a
///    packet is forgotten (that pair spanned a time jump, or 16·m lost), the packet
///    counted so and flagged; one a run of pairs contradicts is replaced
///    ([`RateEstimate`](crate::seq::RateEstimate)), flagged. Past a gap, a learnt
///    ratio's positions go on from the packet after it.
/// 3. **Without a timestamp** the counter alone: the nearest number ahead or behind. A
///    number behind (or equal) is a duplicate only when the whole payload's fingerprint
///    equals the one received at that position and no other of the last positions
///    received it (repeating payloads — silence, a constant — prove nothing); otherwise,
///    where something was received there, it is new data after a loss longer than half
///    the counter's period, delivered and flagged `ambiguous` — except on a counter whose
///    half period is more than the positions remembered (CHDR's 16 bits), where it is a
///    duplicate all the same: such a loss is beyond what the stream tells. A number
///    behind whose position was never received is late.
/// 4. **A restart number** (CHDR's 0) out of turn restarts the stream where the time does
///    not place it (also after an end of burst) and its payload does not prove it a copy
///    (rule 3), except just across the counter's wrap
///    (within [`HISTORY`](super::HISTORY) ahead), where it is the counter's own
///    continuation, and where the stamps put it behind the newest one.
/// 5. **A configured clock** ([`SeqPacket::timebase`]) **is checked against the stream**:
///    two consecutive pairs that contradict it at one rate (within the stamps' rounding)
///    before any pair confirmed it drop it for the rate learnt from the stream ([`clock_dropped`](Self::clock_dropped)); after one did,
///    a run of consecutive packets drops it where the ticks it spans and those the clock
///    gives its samples differ by more than 5 ticks and the time jumps the run took in
///    (the longest run, checked from 16 pairs and 1024 ticks on, then each time it has
///    doubled; the run going on, at each pair the clock does not agree with) — a clock
///    wrong by less than the stamps' rounding over one packet, which a pair can confirm.
///    Such a run's rate is the one the confirming pair showed within both's rounding (a
///    wrong clock's stream has one rate): a run at a rate that pair excludes is time
///    jumps on consecutive packets, and the clock stays. A pair of a packet of a sample or
///    a few confirms within a tick over those only: a time jump right after it may make a
///    run that drops the clock. Until then a packet such a clock cannot place is a restart, as rule 1 says; a gap
///    it sizes at other than whole packets is flagged (its error over the gap is not
///    known), and the lost packets may hold up to two ticks a packet and 1% more time
///    than the stream's largest (the clock's error, not a period of the counter more).
///    The format's own clock (a VRT sample count, [`Timebase::counts_samples`]) is exact:
///    neither applies. A free-running count told to tick at the sample rate is told.
///
/// ```
/// use fsdr_net_io::seq::{SeqExtender, SeqPacket};
///
/// // VRT: 4-bit counter, 100 samples (400 bytes) per packet, TSF = sample count.
/// let mut x = SeqExtender::new(4, None);
/// let p = |seq, t| SeqPacket { seq, ticks: Some(t), payload: 400, ..Default::default() };
/// assert_eq!(x.extend(&p(0, 0)).ext, 0);
/// assert_eq!(x.extend(&p(1, 100)).ext, 1);
/// // 16 packets lost: the counter says 1 ahead, the timestamp says 17.
/// assert_eq!(x.extend(&p(2, 1_800)).ext, 18);
/// ```
#[derive(Debug, Clone)]
pub struct SeqExtender {
    bits: u32,
    mask: u64,
    period: u64,
    restart_seq: Option<u64>,
    newest: Option<Newest>,
    timeline: Timeline,
    /// The largest payload since the stream (re)started: what a lost packet held at most.
    nominal: usize,
    /// The packets placed at recent positions.
    history: History,
}

impl SeqExtender {
    /// An extender for `bits`-bit counters (1..=63). `restart_seq`: the number a restarted
    /// sender begins with (CHDR: 0). Ticks per unit of payload come with the packets
    /// ([`SeqPacket::timebase`]) or are learnt from consecutive ones
    /// ([`RateEstimate`](super::RateEstimate)).
    pub fn new(bits: u32, restart_seq: Option<u64>) -> Self {
        let bits = bits.clamp(1, 63);
        Self {
            bits,
            mask: (1u64 << bits) - 1,
            period: 1u64 << bits,
            restart_seq,
            newest: None,
            timeline: Timeline::default(),
            nominal: 0,
            history: History::default(),
        }
    }

    /// Wire bytes a sample, where known (the blocks know them from the sample encoding):
    /// under a learnt ratio, which is per byte, a lost packet holds a sample at least.
    ///
    /// ```
    /// use fsdr_net_io::seq::{SeqExtender, SeqPacket};
    ///
    /// // VRT, no rates told: 100 sc16 samples a packet, stamped in ps at 10 Msps.
    /// let mut x = SeqExtender::new(4, None).with_sample_bytes(4);
    /// let p = |k: u64, t| SeqPacket { seq: k % 16, ticks: Some(t), payload: 400, ..Default::default() };
    /// for k in 0..16 {
    ///     x.extend(&p(k, k * 10_000_000));
    /// }
    /// // The device's time jumps by 4 samples: no room for 16 lost packets of a sample each.
    /// assert_eq!(x.extend(&p(16, 160_400_000)).ext, 16);
    /// ```
    pub fn with_sample_bytes(mut self, bytes: u32) -> Self {
        self.timeline.sample_bytes = bytes;
        self
    }

    /// Ticks per unit in force (configured or learnt) and bytes per unit.
    pub fn rate(&self) -> Option<(Ratio, usize)> {
        self.timeline.rate()
    }

    /// Whether the configured tick and sample rates were dropped because the stream's
    /// timestamps contradicted them (two consecutive pairs at one rate before any agreed;
    /// a warning names both): gaps are then sized from the rate learnt from the stream
    /// ([`rate`](Self::rate) gives it per byte).
    pub fn clock_dropped(&self) -> bool {
        self.timeline.clock_dropped
    }

    /// The number of the timeline positions ([`Widened::start`]) are on: it changes where
    /// positions from before cannot be compared with positions after (a configured clock
    /// dropped, a restart).
    pub(crate) fn epoch(&self) -> u32 {
        self.timeline.epoch
    }

    /// The largest payload since the stream (re)started.
    pub fn nominal(&self) -> usize {
        self.nominal
    }

    /// Whether the timebase in force is the format's own, one that no told rate can make
    /// wrong: a VRT sample count ([`Timebase::counts_samples`]). A gap it sizes at other
    /// than whole packets is a short packet lost, exactly; under any other (rates a
    /// receiver was told — a free-running count told to tick at the sample rate too — or
    /// learnt) it may as well be the clock's error over the gap, which no check sees where
    /// the runs are too short to show it: flagged (rule 1).
    fn own_clock(&self) -> bool {
        self.timeline.fixed.is_some_and(|tb| tb.counts_samples)
    }

    /// Whether packets need a [`fingerprint`]: the stream has no usable timestamps.
    pub fn needs_fingerprint(&self) -> bool {
        self.newest.is_none_or(|n| n.ticks.is_none())
    }

    fn units(&self, payload: usize) -> i128 {
        match self.timeline.unit_bytes() {
            1 => payload as i128,
            u => (payload / u) as i128,
        }
    }

    /// The plain distance of counter `d` (0..period): ahead `1..period/2`, else behind or 0.
    fn plain(&self, d: u64) -> i64 {
        if d < self.period / 2 {
            d as i64
        } else {
            d as i64 - self.period as i64
        }
    }

    /// The 64-bit number of a packet, where it starts, and whether the format could prove it.
    pub fn extend(&mut self, p: &SeqPacket) -> Widened {
        let seq = p.seq & self.mask;
        if p.payload > self.nominal {
            self.nominal = p.payload;
        }
        let Some(n) = self.newest else {
            return self.begin(seq, p, seq);
        };
        let d = seq.wrapping_sub(n.ext) & self.mask;
        let plain = self.plain(d);
        // The timestamp decides only where it resolves a packet: a learnt ratio's
        // uncertainty grows with the distance from where it was pinned.
        let nominal = self.units(self.nominal).max(1);
        // Where it starts and how far off that may be: the ratio's uncertainty and the
        // stamps' own rounding to whole ticks (which, when a tick spans several units, moves
        // a packet's position by up to a tick's worth).
        let placed = p.ticks.and_then(|t| self.timeline.place(t)).map(|s| {
            (
                s.pos,
                self.timeline.tolerance(s.pos) + self.timeline.quantum(),
            )
        });
        let timed = placed.filter(|&(_, tol)| 2 * tol < nominal);
        // A ratio learnt from one pair sizes no gap by the time: the pair may have spanned
        // a device time jump, which the packet after the gap is the first to show.
        let one_pair = self.first_pair_only();
        let placement = self.classify(seq, d, plain, timed, placed, nominal, p, &n);
        let Some(offset) = placement.offset() else {
            let run_goes_on = matches!(placement, Placement::Restart { run_goes_on: true });
            return self.restart(seq, p, run_goes_on);
        };
        // What the rule leaves unproven: the place, or the count or size of the gap before it.
        let mut ambiguous = placement.place_unproven();
        let mut gap_ambiguous = placement.gap_unproven();
        // A loss beside a time jump: the gap is the packets', the rest a jump.
        let beside_jump = placement.beside_jump();
        // The configured clock was dropped on this packet: it is the next one, and the pair
        // has been learnt from.
        let dropped = placement == Placement::ClockDropped;
        let ext = n.ext.wrapping_add(offset as u64);
        if !dropped {
            // Off the clock: the packet is not where the newest one's end puts it (beyond
            // the stamps' rounding).
            let off = matches!((timed, n.start), (Some((s, tol)), Some(ns)) if (s - (ns + n.units)).abs() > tol);
            // A time jump where the ratio comes from one pair: the jump may be that pair's
            // (or, on a 4-bit counter, 16·m lost here): flagged.
            ambiguous |= off && offset == 1 && self.first_pair_only();
            self.learn(&n, offset, p, off);
        }
        // The learnt rate was replaced by the stream's (its first pair spanned a time jump,
        // or a loss its counter could not show): flagged where positions came from it.
        ambiguous |= self.timeline.learnt.take_replaced() && self.timeline.fixed.is_none();
        let place = p.ticks.and_then(|t| self.timeline.place(t));
        let start = place.map(|s| s.pos);
        // Where it starts, for sizing a gap before it: only where the timeline pins it.
        let pinned = place
            .filter(|&s| self.timeline.pinned(s, nominal))
            .map(|s| s.pos);
        // A gap the time does not size exactly, where the time and the packets lost
        // disagree: flagged. Sized by the time (a learnt ratio that pins both ends), other
        // than whole packets: a short packet lost, or stamps rounded at a rate near the
        // learnt one (a tick off where the rounding moved one), which only a longer run
        // tells apart. Sized from the packets (stamps a tick off: ticks longer than half a
        // sample, a learnt ratio not pinned), by more than the stamps' rounding: a short
        // packet lost, sized as a full one.
        // Sized from the packets, a gap is never longer than its time allows: where the
        // packets missed would make it so (a count the time raised past the counter's, of
        // packets a sample each at least), it is sized by the time.
        let mut size = GapSize::Positions;
        if offset > 1 && !n.eob {
            let lost = i128::from(offset - 1) * nominal;
            // Beside a time jump the gap is the packets' (the rest is the jump's).
            if beside_jump {
                size = GapSize::Packets;
            }
            gap_ambiguous |= match (pinned, n.pinned, placed, n.start) {
                (Some(s), Some(ns), ..) => !self.own_clock() && s - (ns + n.units) != lost,
                (.., Some((s, tol)), Some(ns)) => {
                    let ahead = s - (ns + n.units);
                    // (Not from stamps a tick off, whose gaps are sized from the packets.)
                    if lost > ahead + tol && !self.timeline.coarse() && !one_pair {
                        size = GapSize::Time {
                            units: ahead.max(0),
                            frames: offset as u64 - 1,
                        };
                    }
                    (ahead - lost).abs() > tol
                }
                _ => false,
            };
        }
        // Past a gap, a learnt ratio's positions go on from this packet: its uncertainty
        // grows with the distance from the anchor, and the gap's span (a long loss, a time
        // jump) is no part of the next gap's.
        if offset > 1
            && self.timeline.fixed.is_none()
            && let (Some(t), Some(s)) = (p.ticks, start)
        {
            self.timeline.anchor = Some((t, s));
        }
        self.remember(ext, p);
        if offset > 0 {
            self.newest = Some(Newest {
                ext,
                ticks: p.ticks,
                start,
                pinned,
                units: self.units(p.payload),
                payload: p.payload,
                eob: p.eob,
            });
        }
        Widened {
            ext,
            start: pinned,
            size,
            ambiguous: ambiguous || gap_ambiguous,
            gap_only: gap_ambiguous && !ambiguous,
            restart: false,
        }
    }

    /// Learns the rate from consecutive packets, checks a configured one against them (a
    /// receiver told the wrong sample rate would otherwise size every gap wrong: two pairs
    /// that contradict it at one rate, before any pair confirmed it, drop it for the learnt
    /// one),
    /// and keeps positions continuous when the estimate changes. `off`: the packet is not
    /// where the newest one's end puts it.
    fn learn(&mut self, n: &Newest, offset: i64, p: &SeqPacket, off: bool) {
        let (Some(t), Some(t0)) = (p.ticks, n.ticks) else {
            return;
        };
        if offset != 1 || n.eob {
            if offset > 0 {
                self.timeline.learnt.break_run();
            }
            return;
        }
        let dt = t.wrapping_sub(t0);
        if (dt as i64) <= 0 {
            return;
        }
        let fixed = self.timeline.fixed.is_some();
        let changed = self
            .timeline
            .learnt
            .pair_counting(dt, n.payload as u64, fixed);
        if self.timeline.fixed.is_none() && !changed {
            self.timeline
                .saw_pair(dt, n.payload as u64, self.nominal as u64);
        }
        // The format's own clock is never dropped: a pair off it is the device's time.
        if self.own_clock() {
            return;
        }
        match self.timeline.fixed {
            Some(tb) if self.timeline.confirmed.is_none() => {
                if tb.ticks_per_unit.agrees(i128::from(dt), n.units) {
                    self.timeline.confirmed = Some((dt, n.units));
                } else {
                    self.contradicted(tb, dt, n.units, t0);
                }
            }
            Some(tb) => {
                // A pair off the clock (a time jump, or a tick the stamps drifted from a
                // wrong clock) has the run going on checked at once.
                if let Some(run) = self.run_contradicts(tb, off) {
                    let units = i128::from(run.bytes / u64::from(tb.unit_bytes.max(1)));
                    self.drop_clock(tb, run.ticks, units, t0);
                }
            }
            None => {
                // Positions go on from the newest packet's (under the new rate, when it
                // changed): the learnt ratio's uncertainty grows with the distance from the
                // anchor, so it moves along with every consecutive pair.
                match n.start {
                    Some(ns) => self.timeline.anchor = Some((t0, ns)),
                    None if changed => self.timeline.anchor = Some((t0, 0)),
                    None => {}
                }
            }
        }
    }

    fn begin(&mut self, seq: u64, p: &SeqPacket, ext: u64) -> Widened {
        if p.timebase.is_some() && self.timeline.confirmed.is_none() {
            self.timeline.fixed = p.timebase;
        }
        self.timeline.anchor = p.ticks.map(|t| (t, 0));
        self.timeline.epoch = self.timeline.epoch.wrapping_add(1);
        let start = p.ticks.map(|_| 0);
        self.history.restart(ext, self.newest.is_none());
        self.history.remember(Seen {
            ext,
            ticks: p.ticks,
            payload: p.payload,
            print: p.fingerprint.filter(|_| p.ticks.is_none()),
        });
        self.newest = Some(Newest {
            ext,
            ticks: p.ticks,
            start,
            pinned: start,
            units: self.units(p.payload),
            payload: p.payload,
            eob: p.eob,
        });
        let _ = seq;
        Widened {
            ext,
            start,
            size: GapSize::Positions,
            ambiguous: false,
            gap_only: false,
            restart: false,
        }
    }

    /// The sender restarted at this packet. `run_goes_on`: the pair before it was taken
    /// into the learnt rate's run, which goes on across it.
    fn restart(&mut self, seq: u64, p: &SeqPacket, run_goes_on: bool) -> Widened {
        let base = self.newest.map_or(0, |n| n.ext >> self.bits);
        let ext = ((base + RESTART_PERIODS) << self.bits) | seq;
        self.nominal = p.payload;
        if !run_goes_on {
            self.timeline.learnt.break_run();
        }
        let mut w = self.begin(seq, p, ext);
        w.restart = true;
        w
    }
}

#[cfg(test)]
mod tests;
