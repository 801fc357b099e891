//! The reference model: from what the sender made and the order things arrived in, what an
//! exact receiver delivers — every item (a sender's sample or a zero), every tag and every
//! counter — as far as the format lets anyone know. It works on the sender's own positions
//! and timeline, not on the receiver's data structures (long: the three steps below are one
//! reading, top to bottom, of what the format allows):
//!
//! 1. **Perception**: where the format says each arriving packet belongs. With a usable
//!    timestamp that is its true place (the rules of `seq::extend` for what a counter and a
//!    time can tell, under the rates told, or learnt from the stream, which allows for no
//!    told clock's error; a 4-bit counter's long loss with short packets in it is the
//!    fewest packets the counter allows; where stamps a tick off size a loss from the
//!    packets, one whose time is other than whole packets is flagged; behind the newest
//!    packet, a copy carries the stamp received at its place and a late one fits between
//!    its neighbours' times, else the clock went back: a restart); without one, the
//!    nearest number
//!    to the newest, a position behind being a duplicate only if it brings the same bytes
//!    as were received there.
//! 2. **Order**: a window of `window` packets restores order; a packet beyond it declares the
//!    oldest missing ones lost; a packet behind is late (its place was declared lost, or it
//!    is beyond the history) or a duplicate; for a 64-bit counter, which nothing else can
//!    tell a restart by, a run of consecutive ones far behind restarts the stream.
//! 3. **Output**: zeros for each loss — exactly the missing time where the format has one
//!    (and its stamps give distances exactly: not with ticks longer than half a sample),
//!    otherwise lost packets × the largest packet since the stream (re)started — then the
//!    packet's samples; tags where the depacketizer documents them.

use std::collections::{BTreeMap, BTreeSet};

use super::scenario::{Kind, Scenario, Sent};

/// What an item of the output should be.
pub type Item = Option<u64>; // the sender's sample index, or a zero

/// A tag the output should carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tag {
    Missed { frames: u64, items: u64 },
    Time,
    Eob,
}

/// Counters the engine's `Stats` should show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub delivered: u64,
    pub missed: u64,
    pub duplicates: u64,
    pub late: u64,
    pub resyncs: u64,
    pub reordered: u64,
    pub ambiguous: u64,
}

/// The expected outcome.
#[derive(Debug, Clone, Default)]
pub struct Expected {
    pub items: Vec<Item>,
    pub tags: Vec<(usize, Tag)>,
    pub counts: Counts,
}

/// Where the format says a packet is: a position in a 64-bit space (epochs apart after a
/// restart), and what it could not prove.
#[derive(Debug, Clone, Copy)]
struct Perceived {
    pos: i128,
    ambiguous: bool,
    /// What `ambiguous` says is the count or size of the gap before it only: not counted
    /// where late packets fill that gap before it is delivered.
    gap: bool,
    /// A loss beside a time jump: the gap is sized from the packets.
    beside: bool,
    restart: bool,
}

/// The newest packet perceived.
#[derive(Debug, Clone, Copy)]
struct Newest {
    pos: i128,
    counter: u64,
    /// The device's time at its first sample.
    start: u64,
    samples: u64,
    eob: bool,
}

/// A packet received at a position (formats with time): its time and samples.
#[derive(Debug, Clone, Copy)]
struct Received {
    time: u64,
    samples: u64,
}

const EPOCH: i128 = 1 << 60;
const HISTORY: i128 = 1024;
const MAX_GAP: i128 = 1 << 20;
/// How far behind the tracker knows the positions missed (`seq::STRAGGLERS`).
const STRAGGLERS: i128 = 65_536;

/// Consecutive numbers far behind (beyond `HISTORY`) that restart a 64-bit counter's stream.
const RESTART_RUN: u32 = 4;

struct Model<'a> {
    sc: &'a Scenario,
    stream: &'a [Sent],
    period: i128,
    newest: Option<Newest>,
    epoch: i128,
    /// The largest packet (samples) since the stream (re)started, in arrival order.
    nominal_seen: u64,
    /// Bytes received at each position (streams without time).
    prints: BTreeMap<i128, &'a [u8]>,
    /// What was received at each position (streams with time), since the stream's
    /// (re)start at `first`.
    received: BTreeMap<i128, Received>,
    first: i128,
    // Order.
    next: Option<i128>,
    /// Where the stream (re)started: a position before it was never part of it (late).
    order_first: i128,
    held: BTreeMap<i128, (usize, (bool, bool))>,
    missed: BTreeSet<i128>,
    /// The last far-behind position the order stage judged, and how many consecutive ones
    /// led to it (anything else judged in between ends the run).
    far_run: Option<(i128, u32)>,
    // Output.
    out: Expected,
    /// End of the last delivered packet on the sender's timeline, and whether it ended a
    /// burst; the largest packet delivered since the (re)start.
    last_end: Option<(u64, bool)>,
    nominal_out: u64,
}

/// The positions the model perceives, arrival by arrival (for tracing a failure).
pub fn perceived(sc: &Scenario, stream: &[Sent], arrivals: &[usize]) -> Vec<(i128, bool, bool)> {
    let mut m = model(sc, stream);
    arrivals
        .iter()
        .map(|&i| {
            let p = m.perceive(&stream[i]);
            m.arrive(p, i);
            (p.pos, p.ambiguous, p.restart)
        })
        .collect()
}

fn model<'a>(sc: &'a Scenario, stream: &'a [Sent]) -> Model<'a> {
    Model {
        sc,
        stream,
        period: sc.kind.period() as i128,
        newest: None,
        epoch: 0,
        nominal_seen: 0,
        prints: BTreeMap::new(),
        received: BTreeMap::new(),
        first: 0,
        next: None,
        order_first: 0,
        held: BTreeMap::new(),
        missed: BTreeSet::new(),
        far_run: None,
        out: Expected::default(),
        last_end: None,
        nominal_out: 0,
    }
}

/// The expected outcome of `sc`.
pub fn expect(sc: &Scenario, stream: &[Sent], arrivals: &[usize]) -> Expected {
    let mut m = model(sc, stream);
    for &i in arrivals {
        let p = m.perceive(&stream[i]);
        m.arrive(p, i);
    }
    m.flush_all();
    m.out
}

impl<'a> Model<'a> {
    fn perceive(&mut self, s: &'a Sent) -> Perceived {
        let samples = s.samples as u64;
        let Some(n) = self.newest else {
            self.nominal_seen = samples;
            return self.begin(s, self.epoch + s.counter as i128, false);
        };
        self.nominal_seen = self.nominal_seen.max(samples);
        if self.period == 0 {
            // 64 bits: the number itself; the first number out of turn is a restart.
            let first = self.sc.kind.format().first_seq();
            if s.counter == first && Some(self.epoch + s.counter as i128) != self.next {
                self.epoch += EPOCH;
                self.nominal_seen = samples;
                return self.begin(s, self.epoch + s.counter as i128, true);
            }
            let pos = self.epoch + s.counter as i128;
            if pos > n.pos {
                self.set_newest(s, pos);
            }
            return Perceived {
                pos,
                ambiguous: false,
                gap: false,
                beside: false,
                restart: false,
            };
        }
        let period = self.period;
        let d = (s.counter as i128 - n.counter as i128).rem_euclid(period);
        let plain = if d < period / 2 { d } else { d - period };
        let decided = if self.sc.kind.timed() {
            self.by_time(s, &n, d, plain)
        } else {
            self.by_counter(s, &n, plain)
        };
        let Some((k, ambiguous, beside)) = decided else {
            self.epoch += EPOCH;
            self.nominal_seen = samples;
            let pos = self.epoch + s.counter as i128;
            return self.begin(s, pos, true);
        };
        let pos = n.pos + k;
        if !self.sc.kind.timed() {
            self.prints.entry(pos).or_insert(&s.bytes);
        } else {
            self.received.entry(pos).or_insert(Received {
                time: s.time,
                samples,
            });
        }
        if k > 0 {
            self.set_newest(s, pos);
        }
        Perceived {
            pos,
            ambiguous,
            // With time, every flag is about the gap before the packet.
            gap: self.sc.kind.timed(),
            beside,
            restart: false,
        }
    }

    /// A format with usable time: its true place, told with the counter's help.
    fn by_time(&self, s: &Sent, n: &Newest, d: i128, plain: i128) -> Option<(i128, bool, bool)> {
        let period = self.period;
        let nominal = self.nominal_seen as i128;
        let (start, end) = (s.time as i128, (n.start + n.samples) as i128);
        if start >= end {
            let ahead = start - end;
            if n.eob {
                // The time tells nothing across it: CHDR's restart number restarts.
                if self.restart_number(s, plain) {
                    return None;
                }
                let k = if d == 0 { period } else { d };
                return Some((k, plain <= 0, false));
            }
            let lo = (ahead + nominal - 1) / nominal + 1;
            let k0 = if d == 0 { period } else { d };
            // A told clock may be off by two ticks a packet and 1%: time that much beyond
            // the counter's packets is theirs (and flagged below), not a period more.
            // (Where stamps are a tick off, no loss spans a time jump: `coarse`.)
            let per_tick = match self.sc.kind {
                Kind::ChdrTicks | Kind::VrtFree => {
                    self.sc.clock.ticks_per_sample.units_per_tick_ceil().max(1)
                }
                _ => 1,
            } as i128;
            let told = self.sc.told_clock()
                && self.sc.clock.configured
                && k0 >= 2
                && ahead <= (k0 - 1) * (nominal + 2 * per_tick) + ahead / 100;
            let k = if k0 >= lo || told {
                k0
            } else {
                k0 + period * ((lo - k0 + period - 1) / period)
            };
            if k <= ahead + 1 {
                // Stamps a tick off (ticks longer than half a sample) prove no count.
                let exact =
                    self.sc.exact_time() && ahead % nominal == 0 && ahead / nominal + 1 == k;
                // Nor a size: a loss they size from the packets while the time shows
                // other than whole ones (a short packet among them) is flagged; so is one
                // a told clock sizes (it may be the clock's error over the gap).
                let unproven = (!self.sc.exact_time() || self.sc.told_clock())
                    && k > 1
                    && ahead != (k - 1) * nominal;
                return Some((k, (k != plain && !exact) || unproven, false));
            }
            // No count the time holds: with the counter one ahead a time jump; with the
            // counter further ahead, where only a period more was too many for the time,
            // the counter's count, flagged (a jump beside the loss, or lost packets longer
            // than any seen), sized from the packets (the rest is the jump's).
            if plain == 1 {
                return Some((1, false, false));
            }
            return (k > k0 && k0 - 1 <= ahead).then_some((k0, true, true));
        }
        // Behind: of the counter's values that leave each packet between a sample at least,
        // the one nearest to the time's estimate in packets where that is a copy of what was
        // received there (the same time) or a packet never received whose time fits
        // between its neighbours' — a late one. None such: the clock went back (or the
        // counter and the time disagree otherwise), a restart.
        let rel = start - n.start as i128;
        if rel == 0 {
            return (d == 0).then_some((0, false, false));
        }
        if rel > 0 {
            return None;
        }
        let est = rel as f64 / nominal as f64;
        let mut ks = Vec::new();
        let k0 = if d == 0 { -period } else { d - period };
        let mut k = k0;
        // (Beyond what the receiver remembers only the nearest one.)
        while -k <= (-rel).min(HISTORY.max(-k0)) {
            ks.push(k);
            k -= period;
        }
        // Nearest first; on a tie the one nearer 0.
        ks.sort_by(|a, b| {
            let (da, db) = ((*a as f64 - est).abs(), (*b as f64 - est).abs());
            da.partial_cmp(&db).unwrap().then(b.cmp(a))
        });
        // Before the stream's first packet nothing bounds a late one's place but the time's
        // estimate: only the nearest number may lie there, less than half the counter's
        // period before it, and only before the stream's start (not a restart).
        ks.into_iter()
            .enumerate()
            .find(|&(i, k)| {
                let q = n.pos + k;
                if q < self.first {
                    i == 0 && self.first - q < period / 2 && self.epoch == 0 && self.fits(q, s)
                } else if n.pos - q >= HISTORY {
                    // Beyond what is remembered: a straggler where the time puts it.
                    (k as f64 - est).abs() < 1.0
                } else {
                    self.fits(q, s)
                }
            })
            .map(|(_, k)| (k, false, false))
    }

    /// Whether packet `s` belongs at position `q` behind the newest one (within the last
    /// `HISTORY` positions): a copy of the one received there (its time and length), or one
    /// never received whose time lies between its received neighbours' (among those
    /// positions), each packet between a sample at least — before the stream's first
    /// packet, within as many of the largest packets of it.
    fn fits(&self, q: i128, s: &Sent) -> bool {
        let newest = self.newest.map_or(q, |n| n.pos);
        if newest - q >= HISTORY {
            return false;
        }
        if let Some(r) = self.received.get(&q) {
            return r.time == s.time && r.samples == s.samples as u64;
        }
        let (t, end) = (s.time as i128, (s.time + s.samples as u64) as i128);
        let oldest = newest - HISTORY + 1;
        let after = self.received.range(q + 1..).next();
        let fits_before = if q < self.first {
            let nominal = self.nominal_seen as i128;
            after.is_some_and(|(&b, r)| t >= r.time as i128 - (b - q) * nominal)
        } else {
            let before = self.received.range(oldest.max(self.first)..q).next_back();
            before.is_none_or(|(&a, r)| t >= (r.time + r.samples) as i128 + (q - a - 1))
        };
        fits_before && after.is_none_or(|(&b, r)| end + (b - q - 1) <= r.time as i128)
    }

    /// A short counter without time: the nearest number; behind, a duplicate only when the
    /// payload proves it — the same bytes as were received there, and no other position
    /// remembered (the last `HISTORY`) received them too (repeating payloads prove
    /// nothing): otherwise, where something was received there, new data after a loss of
    /// half the counter's period or more, flagged — on a counter whose half period is more
    /// than `HISTORY` (CHDR's 16 bits) a duplicate all the same, such a loss being beyond
    /// what the format tells. `None`: the restart number out of turn, unless its payload
    /// proves it a copy.
    fn by_counter(&self, s: &Sent, n: &Newest, plain: i128) -> Option<(i128, bool, bool)> {
        // Behind: whether something was received there, and whether the payload proves a copy.
        let there = (plain <= 0)
            .then(|| {
                let q = n.pos + plain;
                self.prints
                    .get(&q)
                    .filter(|_| n.pos - q < HISTORY)
                    .map(|b| {
                        let mine = self.payload(&s.bytes);
                        self.payload(b) == mine
                            && !self
                                .prints
                                .range(n.pos - HISTORY + 1..=n.pos)
                                .any(|(&o, b)| o != q && self.payload(b) == mine)
                    })
            })
            .flatten();
        if self.restart_number(s, plain) && there != Some(true) {
            return None;
        }
        if there == Some(false) && self.period / 2 <= HISTORY {
            return Some((plain + self.period, true, false));
        }
        Some((plain, false, false))
    }

    /// The payload of a datagram of the scenario's format.
    fn payload<'b>(&self, bytes: &'b [u8]) -> &'b [u8] {
        let info = self.sc.kind.format().parse(bytes).unwrap();
        &bytes[info.payload()]
    }

    /// CHDR's restart number (0) out of turn, not just across the wrap.
    fn restart_number(&self, s: &Sent, plain: i128) -> bool {
        self.sc.kind.format() == fsdr_net_io::Format::Chdr
            && s.counter & 0xffff == self.sc.kind.format().first_seq()
            && !(1..=HISTORY.min(self.period / 2 - 1)).contains(&plain)
    }

    fn set_newest(&mut self, s: &Sent, pos: i128) {
        self.newest = Some(Newest {
            pos,
            counter: s.counter % self.period.max(1) as u64,
            start: s.time,
            samples: s.samples as u64,
            eob: s.eob,
        });
    }

    fn begin(&mut self, s: &'a Sent, pos: i128, restart: bool) -> Perceived {
        self.prints.clear();
        self.received.clear();
        self.first = pos;
        if self.sc.kind.timed() {
            self.received.insert(
                pos,
                Received {
                    time: s.time,
                    samples: s.samples as u64,
                },
            );
        }
        if !self.sc.kind.timed() && self.period > 0 {
            self.prints.insert(pos, &s.bytes);
        }
        self.set_newest(s, pos);
        if self.period == 0 {
            // Counters are kept unmasked for 64 bits.
            if let Some(n) = self.newest.as_mut() {
                n.counter = s.counter;
            }
        }
        Perceived {
            pos,
            ambiguous: false,
            gap: false,
            beside: false,
            restart,
        }
    }

    // ---- Order ----

    fn arrive(&mut self, p: Perceived, i: usize) {
        let c = &mut self.out.counts;
        if p.ambiguous && !p.gap {
            c.ambiguous += 1;
        }
        let flag = (p.ambiguous && p.gap, p.beside);
        let Some(next) = self.next else {
            self.next = Some(p.pos + 1);
            self.order_first = p.pos;
            self.deliver(i, 0, true, false);
            return;
        };
        if p.restart || p.pos - next > MAX_GAP {
            self.resync(p.pos, i);
            return;
        }
        if p.pos < next {
            // Within `STRAGGLERS`, one into a gap the stream knows is late (a starved
            // reuseport thread's backlog), never part of a restart run.
            if next - p.pos > HISTORY
                && next - p.pos < STRAGGLERS
                && p.pos >= self.order_first
                && self.missed.remove(&p.pos)
            {
                self.far_run = None;
                self.out.counts.late += 1;
                return;
            }
            if next - p.pos > HISTORY {
                // A straggler; for a 64-bit counter (no time, no widening to place it) the
                // last of a run of consecutive ones is a restarted sender.
                let run = match self.far_run {
                    Some((last, n)) if last + 1 == p.pos => n + 1,
                    _ => 1,
                };
                if self.period == 0 && run >= RESTART_RUN {
                    self.resync(p.pos, i);
                    return;
                }
                self.far_run = Some((p.pos, run));
                self.out.counts.late += 1;
                return;
            }
            self.far_run = None;
            if p.pos < self.order_first || self.missed.remove(&p.pos) {
                self.out.counts.late += 1;
            } else {
                self.out.counts.duplicates += 1;
            }
            return;
        }
        let window = self.window() as i128;
        let overtaken = self.held.keys().next_back().is_some_and(|&h| h > p.pos);
        if overtaken && !self.held.contains_key(&p.pos) {
            self.out.counts.reordered += 1;
        }
        if p.pos == next {
            self.release(p.pos, i, flag);
            return;
        }
        if window > 0 {
            while p.pos - self.next.unwrap() > window && !self.held.is_empty() {
                self.flush_oldest();
            }
            let next = self.next.unwrap();
            if p.pos == next {
                self.release(p.pos, i, flag);
                return;
            }
            if p.pos - next <= window {
                match self.held.entry(p.pos) {
                    std::collections::btree_map::Entry::Vacant(e) => {
                        e.insert((i, flag));
                    }
                    std::collections::btree_map::Entry::Occupied(_) => {
                        self.out.counts.duplicates += 1;
                    }
                }
                return;
            }
        }
        self.release(p.pos, i, flag);
    }

    fn window(&self) -> usize {
        let w = self.sc.window.min(512);
        match self.sc.kind.period() {
            0 => w,
            p => w.min(p as usize / 2 - 1),
        }
    }

    /// The stream starts over at `pos` with packet `i`, after what is held.
    fn resync(&mut self, pos: i128, i: usize) {
        self.flush_all();
        self.missed.clear();
        self.far_run = None;
        self.next = Some(pos + 1);
        self.order_first = pos;
        self.out.counts.resyncs += 1;
        self.deliver(i, 0, true, false);
    }

    /// Releases the packet at `pos` (a gap before it if it is ahead of the next expected)
    /// and whatever held follows it contiguously.
    fn release(&mut self, pos: i128, i: usize, (flag, beside): (bool, bool)) {
        self.far_run = None;
        let next = self.next.unwrap();
        let frames = (pos - next) as u64;
        for q in next..pos {
            if pos - q <= HISTORY {
                self.missed.insert(q);
            }
        }
        self.next = Some(pos + 1);
        if flag && frames > 0 {
            self.out.counts.ambiguous += 1;
        }
        self.deliver(i, frames, false, beside);
        while let Some((i, _)) = self.held.remove(&self.next.unwrap()) {
            let p = self.next.unwrap();
            self.next = Some(p + 1);
            self.deliver(i, 0, false, false);
        }
    }

    fn flush_oldest(&mut self) {
        if let Some((&pos, &(i, flag))) = self.held.iter().next() {
            self.held.remove(&pos);
            self.release(pos, i, flag);
        }
    }

    fn flush_all(&mut self) {
        while !self.held.is_empty() {
            self.flush_oldest();
        }
    }

    // ---- Output ----

    /// Delivers packet `i` after `frames` lost (sized from the packets where `beside`: a
    /// loss beside a time jump), or as the stream's (re)start.
    fn deliver(&mut self, i: usize, frames: u64, restart: bool, beside: bool) {
        let s = &self.stream[i];
        let samples = s.samples as u64;
        let c = &mut self.out.counts;
        c.delivered += 1;
        c.missed += frames;
        if restart {
            self.nominal_out = samples;
        } else {
            self.nominal_out = self.nominal_out.max(samples);
        }
        let first_ever = self.last_end.is_none();
        let index = self.out.items.len();
        if frames > 0 {
            let zeros = match self.last_end {
                Some((end, false)) if self.sc.exact_time() && !beside && s.time >= end => {
                    s.time - end
                }
                _ => frames * self.nominal_out,
            };
            self.out.tags.push((
                index,
                Tag::Missed {
                    frames,
                    items: zeros,
                },
            ));
            // A case the generator must keep within memory (`strategy.rs`, `tidy`): told
            // here, where proptest can shrink it, rather than by the allocator.
            assert!(
                zeros < 1 << 27,
                "the case fills {zeros} zeros after packet {i}: more than a case may hold"
            );
            self.out
                .items
                .extend(std::iter::repeat_n(None, zeros as usize));
        }
        let start = self.out.items.len();
        let continuous = self.last_end.is_some_and(|(end, _)| end == s.time);
        if self.sc.kind.timed() && (first_ever || restart || frames > 0 || !continuous) {
            self.out.tags.push((start, Tag::Time));
        }
        self.out
            .items
            .extend((s.first..s.first + samples).map(Some));
        if s.eob && samples > 0 {
            self.out.tags.push((start + s.samples - 1, Tag::Eob));
        }
        self.last_end = Some((s.time + samples, s.eob));
    }
}
