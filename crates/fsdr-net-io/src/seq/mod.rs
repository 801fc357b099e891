//! Sequence tracking: missed frames, duplicates, late datagrams and sender restarts, for
//! sequence numbers of any width (64, 16 or 4 bits), a bounded reorder stage that restores
//! order before the tracker sees a datagram, and exact gap sizes from the timestamps.
//!
//! # What each format can tell apart
//!
//! The layer states, per format, what its packets prove and does only that; where a format
//! cannot tell two cases apart it says so (the `ambiguous` counter and flag) instead of
//! guessing silently. "Exact" below means: every delivered item in order, every lost
//! packet counted in `missed`, zero-fill of exactly the lost items, tags on the right item.
//! The property tests in `tests/model.rs` check each row against a reference model.
//!
//! | format | counter | time | loss | reorder | duplicate | restart | wrap |
//! |---|---|---|---|---|---|---|---|
//! | seq64, seq+size | 64 bits | none | exact (up to 2^20 frames; beyond: resync) | within the window; later: late | exact (history of 1024) | first number (1) out of turn, or 4 in a row far behind | never |
//! | CHDR with timestamps | 16 bits | ticks | exact, any length: time sizes it; time other than whole packets (a short packet lost, or the told rates a little off) flagged `ambiguous`; a time step ahead with the counter one on that 65 536·m lost packets of a sample could fill is that loss, flagged; a loss beside a time step (more time than the lost packets hold, no period more fits it) is the counter's count, flagged, zero-filled for the packets | within the window | exact: a copy carries the stamp and length of the packet received at its place | counter and time disagree (the time set back: behind the newest packet where it is neither a copy nor a late packet whose time fits between its neighbours'), a restart, every sample delivered; 0 out of turn after an end of burst | exact |
//! | CHDR, ticks longer than half a sample (491.52 Msps at 200 MHz) | 16 bits | ticks, each stamp up to half a tick off | counted exactly, any length; sized as lost × largest payload; a count the time raised past the counter's flagged `ambiguous`, and a loss the time shows other than whole packets beyond the rounding (a short packet lost) | within the window | exact | counter and time disagree by more than the rounding; 0 within ⌈samples per tick⌉·2 + 1 of the wrap is taken for a loss; a clock set back into the place of lost packets, or to before the stream's first two, within the rounding of fitting it is taken for a late packet | exact |
//! | CHDR without timestamps | 16 bits | none | exact below 32768 packets; sized as lost × largest payload | within the window | exact | 0 out of turn, except within 1024 ahead (the wrap); one receive thread only (with several, packets far behind are late) | exact |
//! | VRT/DIFI, sample count or picoseconds | 4 bits | samples / ps | exact, any length; with picoseconds (a told sample rate), time other than whole packets flagged as for CHDR; a time step ahead is 16·m lost packets where they could fill it (flagged) | within the window (≤ 7) | as for CHDR | as for CHDR; a clock set back to the stamp and number (mod 16) of one of the last 1024 packets received is copies of them (`duplicates`) until it passes the newest, and one set back into the place of lost packets whose numbers it repeats, late ones of them | exact |
//! | VRT, integer seconds + sample count | 4 bits | with the sample rate ([`StreamClock`]) | as above; without the rate: as without time | | | | |
//! | VRT, free-running count | 4 bits | ticks at the told tick rate (the sample rate unless told) | as for CHDR with timestamps (or ticks longer than half a sample); a 16·m loss told by the time (and a time jump within the ticks' rounding of 16·m samples taken for one, flagged; with ticks longer than half a sample, a packet late across a jump so taken may, at a tie, take the other of two numbers 16 apart) | within the window (≤ 7) | as for VRT above | as for VRT above (a clock set back: a restart, every sample delivered; with ticks longer than half a sample, set back to within the rounding of a stamp of one of the last 1024 packets with its number (mod 16): copies of them) | exact |
//! | any with timestamps, rate learnt (none told) | | ticks at the learnt ratio | as above once a run pins the ratio; time steps on consecutive packets, more of them than the pairs in a row before them (16 at most), are a rate the sender changed to; before the first consecutive pair, or where the ratio is too loose to place a packet, the counter (the stamps telling ahead from behind, the least time the ratio allows raising a 4-bit count), every such loss on a 4-bit counter flagged; a first pair that hid a time jump or 16·m lost is dropped at the next packet it cannot place, or replaced by the pairs after it: flagged, that loss not counted (or one restart); with a sample's bytes known (the blocks give them) a lost packet holds a sample at least, and ticks longer than half a sample pin no position and prove no raised count, as when told; a gap the lost packets × the largest would make longer than its time is sized by the time as the ratio shows it (within its uncertainty: a time step a period of lost packets could fill, a loss after a packet longer than the others) | a number stamped earlier than the newest one is behind, where the loose ratio puts it; before a rate, one behind by more than the 1024 positions remembered is a restart | exact (a duplicate of the newest carries its stamp) | counter and time disagree (the lost packets need more time than there is); a clock set back is a restart as when told, but one set back into the place of lost packets, or right after a time step or a burst's end, within the ratio's uncertainty of fitting there is late ones of them; before a rate, a whole period of the counter lost right after the first packet is not counted (flagged where later pairs show that first pair wrong) | |
//! | VRT without timestamps | 4 bits | none | lost mod 16 (16·m is invisible); 7–15 (mod 16) flagged `ambiguous` | within 3 | proven by the whole payload's fingerprint where no other of the last 1024 positions received it; repeating payloads (silence, a constant) prove nothing: new data after a loss, flagged | not detectable | — |
//!
//! A clock set back shows only with timestamps; a step shorter than the stamps' rounding
//! (two ticks of a told clock, a tick longer than half a sample, a learnt ratio's
//! uncertainty) is not seen. A packet from before a restart (or a clock set back) that
//! arrives after it is placed in the stream after it: a loss or another restart.
//!
//! Rules behind the table:
//! - **Time decides, the counter confirms** (formats with usable timestamps): every packet
//!   gets an exact position on the stream's timeline from its timestamp and the exact
//!   [`Ratio`] of ticks per sample ([`Timebase`], or learnt from a long run of consecutive
//!   packets by [`RateEstimate`]). A loss is the fewest packets (matching the counter) that
//!   can hold the missing time, and is zero-filled to exactly that time. A jump of time with
//!   the counter one ahead is a time discontinuity (tagged, not filled); after an end of
//!   burst the counter alone sizes a loss.
//! - **A configured clock is checked, not trusted**: one that two of the first pairs
//!   contradict at one rate (two device time steps of other sizes do not), or a run of consecutive packets later (by more than 5 ticks beyond the time jumps the
//!   run took in: an error within the stamps' rounding over one packet, a clock told 0.1%
//!   off), is dropped for the rate learnt from the stream and counted (`clock_dropped`);
//!   until then a packet it cannot place is a restart. Until a run shows it, such a
//!   clock's error over a gap is not known: a gap a told clock sizes at other than whole
//!   packets is flagged `ambiguous` (a short packet lost looks the same), and time up to
//!   two ticks a packet and 1% beyond the packets the counter says lost is theirs, not a
//!   period of the counter more. (Not so under the format's own clock, a VRT sample count
//!   ([`Timebase::counts_samples`]): no told rate can make it wrong. A free-running count
//!   told to tick at the sample rate is a told clock.)
//! - **Behind, a copy or a late packet, or the clock went back**: a packet the time puts
//!   behind the newest one is a copy of the packet received at the counter's number
//!   nearest to where the time puts it (the same stamp and length), or a late one where
//!   nothing was received there and its time lies between its received neighbours'
//!   (before the stream's first packet, within half the counter's period of it; beyond the
//!   1024 positions remembered, inside one of the last 256 gaps, at the counter's nearest
//!   number — on a 4-bit counter (VRT) none is that far: a restart, and the stream's next
//!   packet a gap of as many positions); otherwise the device's clock was set back: a
//!   restart, every sample delivered, time tagged.
//! - **Without time, the nearest number**: ahead up to half the counter's period is a gap;
//!   behind is late (position missed) or a duplicate — a duplicate only when the whole
//!   payload's [`fingerprint`] equals the one received there and no other remembered
//!   position received it (repeating payloads prove nothing). Otherwise, where something was
//!   received there, new data after a long loss: delivered, counted `ambiguous` (on CHDR's
//!   16 bits, whose half period no stream without time tells, a duplicate all the same).
//! - **Lost items**: from the timestamps where usable; otherwise lost packets × the largest
//!   payload since the stream (re)started. A rate learnt from the stream sizes from the time
//!   only where its stamps are exact as far as a run can tell (whole ticks a packet, each
//!   stamp on the ratio's grid, no consecutive pair a tick off); a gap it sizes at other
//!   than whole packets is flagged `ambiguous` (a short packet lost cannot be told from
//!   stamps rounded at a rate near the learnt one until a run shows the rounding). A gap
//!   sized from the packets while the time shows other than whole ones beyond its
//!   rounding (a short packet lost) is flagged too; under a learnt ratio so is a gap a late
//!   datagram closed, its bytes rounded to whole samples where a sample's size is known
//!   (flagged where that rounds). Where a learnt ratio is too loose to
//!   place a packet, the counter counts a loss unless the time needs more packets (a
//!   4-bit counter's 16·m more): then the time's count, flagged.
//! - A timestamp is exact to the item when ticks per item is an integer or more than 2
//!   ([`Ratio::inverts_exactly`]). Otherwise (ticks longer than half an item: an X410
//!   channel at 491.52 Msps stamped at 200 MHz) a sender's stamps, rounded to whole ticks,
//!   put positions within ⌈items per tick⌉ ([`Ratio::units_per_tick_ceil`]) of the truth:
//!   the time still places every packet and counts every loss, but a loss is sized from the
//!   packets missed, time jumps shorter than two ticks are not seen, and a time tag is due
//!   where consecutive stamps are a tick or more from where the items put them.
//!
//! ```
//! use fsdr_net_io::seq::{SeqConfig, SeqEvent, SeqTracker};
//!
//! let mut t = SeqTracker::new(SeqConfig::for_bits(16));
//! assert_eq!(t.observe(65534), SeqEvent::First);
//! assert_eq!(t.observe(65535), SeqEvent::InOrder);
//! assert_eq!(t.observe(2), SeqEvent::Gap { missed: 2 }); // 0 and 1 missed across the wrap
//! assert_eq!(t.observe(0), SeqEvent::Late);
//! assert_eq!(t.observe(2), SeqEvent::Duplicate);
//! ```

mod clock;
mod estimate;
mod extend;
mod reorder;
mod stream;

pub use clock::{Ratio, StreamClock, Timebase};
pub use estimate::RateEstimate;
pub use extend::{GapSize, SeqExtender, SeqPacket, Widened, fingerprint};
pub use reorder::{Released, Reorder};
pub use stream::{Gap, Lead, StreamOrder, Tracking};

/// How many recent positions the tracker remembers to tell late datagrams from duplicates.
pub const HISTORY: u64 = 1024;

/// Consecutive sequence numbers that must arrive far behind the stream (beyond [`HISTORY`])
/// before the tracker takes them for a restarted sender; fewer are late stragglers.
pub const RESTART_RUN: u32 = 4;

/// How far behind the tracker still knows which positions were missed: a number there
/// whose position was missed is a late straggler, never part of a restart run (a receive
/// thread of several, starved by the scheduler, delivers its backlog thousands behind the
/// others').
pub const STRAGGLERS: u64 = 65_536;

/// Rules for a [`SeqTracker`]. Start from [`SeqConfig::for_bits`] and change fields: more
/// rules may come (`#[non_exhaustive]`).
///
/// ```
/// use fsdr_net_io::seq::SeqConfig;
///
/// let mut cfg = SeqConfig::for_bits(16); // CHDR's counter
/// cfg.restart_seq = Some(0);
/// assert_eq!(cfg.max_gap, 32_767);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SeqConfig {
    /// Width of the sequence numbers in bits (1..=64).
    pub bits: u32,
    /// A jump ahead of more than this many frames is a resync, not a gap.
    pub max_gap: u64,
    /// A datagram carrying this sequence number where another was expected is a sender
    /// restart (resync). `None` disables the rule (needed for short sequence spaces, where
    /// every number recurs often).
    pub restart_seq: Option<u64>,
    /// Consecutive sequence numbers far behind the stream (beyond [`HISTORY`]) that make a
    /// restart ([`RESTART_RUN`] by default). `None` disables the rule: where the numbers
    /// were widened from a short counter, the widening has already placed every packet (by
    /// its timestamp, or as the nearest number) and told restarts from stragglers.
    pub restart_run: Option<u32>,
}

impl SeqConfig {
    /// Defaults for a sequence space of `bits` bits: gaps up to half the space (at most
    /// 2^20 frames) are gaps, and no restart rule.
    pub fn for_bits(bits: u32) -> Self {
        let bits = bits.clamp(1, 64);
        let half = 1u64 << (bits - 1);
        Self {
            bits,
            max_gap: (half - 1).clamp(1, 1 << 20),
            restart_seq: None,
            restart_run: Some(RESTART_RUN),
        }
    }

    fn mask(&self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }
}

/// What one observed sequence number means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqEvent {
    /// The first datagram of the stream.
    First,
    /// The expected next datagram.
    InOrder,
    /// `missed` frames are missing before this datagram, which is then in order.
    Gap {
        /// Number of frames never seen.
        missed: u64,
    },
    /// A datagram already seen (or never missed) arrives again: drop it.
    Duplicate,
    /// A datagram that was counted as missed arrives after its successors: too late to
    /// deliver in order.
    Late,
    /// The sequence jumped too far (or restarted): the stream starts over here.
    Resync,
}

/// Where a sequence number stands relative to the expected one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqOffset {
    /// No datagram seen yet.
    First,
    /// The expected one.
    Expected,
    /// `n` frames ahead of the expected one (n ≥ 1).
    Ahead(u64),
    /// `n` frames behind the expected one (1 ≤ n ≤ [`HISTORY`]).
    Behind(u64),
    /// More than [`HISTORY`] frames behind: a straggler (late where its position was missed,
    /// within [`STRAGGLERS`]), or (after [`SeqConfig::restart_run`] in a row of others) a
    /// restarted sender.
    FarBehind,
    /// A restart or a jump beyond `max_gap`.
    Resync,
}

/// Tracks one stream's sequence numbers. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct SeqTracker {
    cfg: SeqConfig,
    mask: u64,
    /// Next expected sequence number (reduced), once started.
    next: Option<u64>,
    /// Position (unwrapped count) of `next`.
    position: u64,
    /// Position of the stream's first datagram since it (re)started: one behind it was
    /// never part of the stream, late (not a duplicate).
    start: u64,
    /// Bit per recent position ([`STRAGGLERS`] of them): set when that position was missed
    /// and has not arrived.
    missed: Box<[u64]>,
    /// The last far-behind sequence number and how many consecutive ones led to it.
    far_run: Option<(u64, u32)>,
}

impl SeqTracker {
    /// A tracker with the given rules.
    pub fn new(cfg: SeqConfig) -> Self {
        Self {
            mask: cfg.mask(),
            cfg,
            next: None,
            position: 0,
            start: 0,
            missed: vec![0; (STRAGGLERS / 64) as usize].into_boxed_slice(),
            far_run: None,
        }
    }

    /// The rules in force.
    pub fn config(&self) -> &SeqConfig {
        &self.cfg
    }

    /// The next expected sequence number, once the stream has started.
    pub fn expected(&self) -> Option<u64> {
        self.next
    }

    /// Classifies `seq` without changing state.
    pub fn offset(&self, seq: u64) -> SeqOffset {
        let Some(next) = self.next else {
            return SeqOffset::First;
        };
        let seq = seq & self.mask;
        if seq == next {
            return SeqOffset::Expected;
        }
        if self.cfg.restart_seq == Some(seq) {
            return SeqOffset::Resync;
        }
        let ahead = seq.wrapping_sub(next) & self.mask;
        let half = 1u64 << (self.cfg.bits - 1);
        if ahead < half {
            if ahead > self.cfg.max_gap {
                SeqOffset::Resync
            } else {
                SeqOffset::Ahead(ahead)
            }
        } else {
            let behind = next.wrapping_sub(seq) & self.mask;
            if behind > HISTORY {
                SeqOffset::FarBehind
            } else {
                SeqOffset::Behind(behind)
            }
        }
    }

    fn bit(&mut self, position: u64, missed: bool) {
        let i = (position % STRAGGLERS) as usize;
        let (word, bit) = (i / 64, i % 64);
        if missed {
            self.missed[word] |= 1 << bit;
        } else {
            self.missed[word] &= !(1 << bit);
        }
    }

    fn is_missed(&self, position: u64) -> bool {
        let i = (position % STRAGGLERS) as usize;
        self.missed[i / 64] >> (i % 64) & 1 == 1
    }

    /// Whether a far-behind `seq` completes a run that means the sender restarted.
    pub fn completes_restart_run(&self, seq: u64) -> bool {
        let seq = seq & self.mask;
        matches!((self.far_run, self.cfg.restart_run), (Some((last, n)), Some(run))
            if last.wrapping_add(1) & self.mask == seq && n + 1 >= run)
    }

    /// The position of `seq`, more than [`HISTORY`] behind, where it lies within
    /// [`STRAGGLERS`] of the stream at a position since its (re)start that was missed.
    fn missed_far_behind(&self, seq: u64) -> Option<u64> {
        let behind = self.next?.wrapping_sub(seq & self.mask) & self.mask;
        (behind < STRAGGLERS && behind <= self.position - self.start)
            .then(|| self.position - behind)
            .filter(|&p| self.is_missed(p))
    }

    /// Starts the stream over at `seq` (a restart decided by the caller).
    pub fn restart_at(&mut self, seq: u64) -> SeqEvent {
        self.start_at(seq & self.mask);
        SeqEvent::Resync
    }

    fn start_at(&mut self, seq: u64) {
        self.far_run = None;
        self.missed.fill(0);
        self.next = Some(seq.wrapping_add(1) & self.mask);
        self.start = self.position;
        self.position = self.position.wrapping_add(1);
    }

    /// Records `seq` and says what it means.
    pub fn observe(&mut self, seq: u64) -> SeqEvent {
        let seq = seq & self.mask;
        let offset = self.offset(seq);
        if offset != SeqOffset::FarBehind {
            // A restart run must arrive back to back: anything else in between ends it.
            self.far_run = None;
        }
        match offset {
            SeqOffset::First => {
                self.start_at(seq);
                SeqEvent::First
            }
            SeqOffset::Resync => {
                self.start_at(seq);
                SeqEvent::Resync
            }
            SeqOffset::FarBehind if let Some(p) = self.missed_far_behind(seq) => {
                // A straggler into a gap still known: late, and its place no longer missed.
                self.far_run = None;
                self.bit(p, false);
                SeqEvent::Late
            }
            SeqOffset::FarBehind => {
                let restart = self.completes_restart_run(seq);
                let run = match self.far_run {
                    Some((last, n)) if last.wrapping_add(1) & self.mask == seq => n + 1,
                    _ => 1,
                };
                if restart {
                    self.start_at(seq);
                    SeqEvent::Resync
                } else {
                    self.far_run = Some((seq, run));
                    SeqEvent::Late
                }
            }
            SeqOffset::Expected => {
                self.bit(self.position, false);
                self.position += 1;
                self.next = Some(seq.wrapping_add(1) & self.mask);
                SeqEvent::InOrder
            }
            SeqOffset::Ahead(n) => {
                if n >= STRAGGLERS {
                    self.missed.fill(u64::MAX);
                } else {
                    for p in self.position..self.position + n {
                        self.bit(p, true);
                    }
                }
                self.position += n;
                self.bit(self.position, false);
                self.position += 1;
                self.next = Some(seq.wrapping_add(1) & self.mask);
                SeqEvent::Gap { missed: n }
            }
            SeqOffset::Behind(n) => {
                let p = self.position - n.min(self.position);
                if n > self.position - self.start {
                    SeqEvent::Late
                } else if self.is_missed(p) {
                    self.bit(p, false);
                    SeqEvent::Late
                } else {
                    SeqEvent::Duplicate
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(t: &mut SeqTracker, seqs: &[u64]) -> Vec<SeqEvent> {
        seqs.iter().map(|&s| t.observe(s)).collect()
    }

    #[test]
    fn in_order_and_gap() {
        let mut t = SeqTracker::new(SeqConfig::for_bits(64));
        use SeqEvent::*;
        assert_eq!(
            run(&mut t, &[1, 2, 3, 7, 8]),
            [First, InOrder, InOrder, Gap { missed: 3 }, InOrder]
        );
    }

    #[test]
    fn wrap_at_2_16() {
        let mut t = SeqTracker::new(SeqConfig::for_bits(16));
        use SeqEvent::*;
        assert_eq!(
            run(&mut t, &[65533, 65534, 65535, 0, 1, 3]),
            [First, InOrder, InOrder, InOrder, InOrder, Gap { missed: 1 }]
        );
        // A gap across the wrap.
        let mut t = SeqTracker::new(SeqConfig::for_bits(16));
        assert_eq!(run(&mut t, &[65530, 4]), [First, Gap { missed: 9 }]);
    }

    #[test]
    fn wrap_at_16() {
        let mut t = SeqTracker::new(SeqConfig::for_bits(4));
        use SeqEvent::*;
        let seqs: Vec<u64> = (0..40).map(|i| i % 16).collect();
        let ev = run(&mut t, &seqs);
        assert_eq!(ev[0], First);
        assert!(ev[1..].iter().all(|e| *e == InOrder));
        // 14 -> 1 skips 15 and 0.
        let mut t = SeqTracker::new(SeqConfig::for_bits(4));
        assert_eq!(
            run(&mut t, &[13, 14, 1]),
            [First, InOrder, Gap { missed: 2 }]
        );
    }

    #[test]
    fn duplicate_and_reorder() {
        let mut t = SeqTracker::new(SeqConfig::for_bits(64));
        use SeqEvent::*;
        assert_eq!(
            run(&mut t, &[1, 2, 2, 4, 3, 3, 5]),
            [
                First,
                InOrder,
                Duplicate,
                Gap { missed: 1 },
                Late,
                Duplicate,
                InOrder
            ]
        );
    }

    #[test]
    fn restart_is_one_resync() {
        let mut cfg = SeqConfig::for_bits(64);
        cfg.restart_seq = Some(1);
        let mut t = SeqTracker::new(cfg);
        for s in 1..=crate::testing::sweep(100_000, 2_000) {
            t.observe(s);
        }
        use SeqEvent::*;
        assert_eq!(run(&mut t, &[1, 2, 3]), [Resync, InOrder, InOrder]);
        // Without the rule, a run of datagrams far behind the history is a restart too (the
        // first few of the new run are counted late).
        let mut t = SeqTracker::new(SeqConfig::for_bits(64));
        for s in 1..=crate::testing::sweep(100_000, 2_000) {
            t.observe(s);
        }
        assert_eq!(
            run(&mut t, &[2, 3, 4, 5, 6]),
            [Late, Late, Late, Resync, InOrder]
        );
        // A huge jump ahead is a resync, not billions of missed frames.
        assert_eq!(run(&mut t, &[1 << 40, (1 << 40) + 1]), [Resync, InOrder]);
    }

    #[test]
    fn a_straggler_far_behind_is_late_not_a_restart() {
        let mut t = SeqTracker::new(SeqConfig::for_bits(64));
        use SeqEvent::*;
        for s in 1..=5_000u64 {
            t.observe(s);
        }
        // One datagram 3000 behind (a descheduled receive thread), then the stream goes on.
        assert_eq!(
            run(&mut t, &[2_000, 5_001, 2_001, 5_002]),
            [Late, InOrder, Late, InOrder]
        );
        let mut r = Reorder::new(SeqConfig::for_bits(64), 8);
        let mut out = Vec::new();
        for s in (1..=3_000u64).chain([10, 3_001]) {
            r.push(s, s, &mut out);
        }
        let delivered: Vec<u64> = out.iter().filter(|d| d.deliver).map(|d| d.item).collect();
        assert!(delivered.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(delivered.len(), 3_001);
    }

    #[test]
    fn stale_runs_interleaved_with_the_stream_are_not_a_restart() {
        let mut t = SeqTracker::new(SeqConfig::for_bits(64));
        for s in 1..=5_000u64 {
            t.observe(s);
        }
        // A stale backlog 2..=9 drained alternately with the live stream 5001..
        let mut events = Vec::new();
        for k in 0..8u64 {
            events.push(t.observe(2 + k));
            events.push(t.observe(5_001 + k));
        }
        assert!(!events.contains(&SeqEvent::Resync), "{events:?}");
    }

    #[test]
    fn chdr_restart_with_rule() {
        let mut cfg = SeqConfig::for_bits(16);
        cfg.restart_seq = Some(0);
        let mut t = SeqTracker::new(cfg);
        for s in 0..500u64 {
            t.observe(s);
        }
        use SeqEvent::*;
        assert_eq!(run(&mut t, &[0, 1, 2]), [Resync, InOrder, InOrder]);
    }

    /// A receive thread of several (SO_REUSEPORT), starved by the scheduler, delivers a run
    /// of consecutive numbers thousands behind the others': stragglers into the gap they
    /// left, late — not a restarted sender, whose restart would count the thousands between
    /// as lost when the next number in order came (the phantom losses of
    /// `reuseport_cbpf_spreads_one_flow_and_order_is_restored` under load).
    #[test]
    fn a_starved_threads_backlog_is_late_not_a_restart() {
        let mut t = SeqTracker::new(SeqConfig::for_bits(64));
        for s in (1..5000).filter(|s| !(2000..2004).contains(s)) {
            t.observe(s);
        }
        let backlog: Vec<_> = (2000..2004).map(|s| t.observe(s)).collect();
        assert_eq!(backlog, [SeqEvent::Late; 4]);
        assert_eq!(t.observe(5000), SeqEvent::InOrder);
        // Received ones far behind in a row still restart (a sender started over).
        let again: Vec<_> = (100..104).map(|s| t.observe(s)).collect();
        assert_eq!(again.last(), Some(&SeqEvent::Resync), "{again:?}");
    }
}
