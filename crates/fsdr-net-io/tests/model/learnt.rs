//! Streams nobody told the rates: the receiver learns ticks per byte from the stamps
//! (`seq::RateEstimate`), and knows a sample's bytes from the encoding, as the blocks do.
//! What the model keeps out of such a case, and why.

use super::scenario::{Kind, Scenario};

/// Clean packets a learnt stream begins with: the ratio is learnt from its first
/// consecutive pairs, which no loss, reorder or jump may hide (`seq::extend` rule 2: a
/// first pair spanning a loss its counter cannot show is not the stream's rate; its own
/// property, `seq::stream::learnt_tests`, covers that start).
const WARM_UP: usize = 16;

/// Ticks a full packet of a learnt stream spans at least.
const MIN_TICKS: u64 = 8;

impl Kind {
    /// Whether a receiver may learn its rates instead of being told them: a format whose
    /// time is in ticks of a clock a receiver is told (CHDR, VRT picoseconds or a
    /// free-running count).
    pub fn learnable(self) -> bool {
        matches!(self, Kind::ChdrTicks | Kind::VrtPicos | Kind::VrtFree)
    }
}

impl Scenario {
    /// Whether the receiver learns the rates (not told them): the blocks' clock without
    /// rates, a sample's bytes from the encoding.
    pub fn learns(&self) -> bool {
        !self.clock.configured
    }

    /// A learnt stream's case. The learnt ratio is the stream's own clock: no told clock's
    /// error lets time beyond the lost packets be theirs (rule 5's allowance), so a loss
    /// across a jump is a restart, as for a VRT sample count; and where the ratio does not
    /// pin the stamps (whole ticks a packet) it sizes a loss from the packets, not the
    /// time. So the case begins with `WARM_UP` clean packets; a packet that arrives late is
    /// a full one (a short one leaves a hole of less than a packet); no loss nor hole spans
    /// a device time jump or a gap between bursts; and what a stamp's rounding under a
    /// ratio per byte (up to a tick's bytes, and a byte) could hide is kept out, as
    /// `Scenario::coarse` does for coarse ticks: a counter restarted a few numbers on with
    /// no time lost (as many packets of a sample lost), and on a 4-bit counter a jump that
    /// 16·m lost packets could hold (a loss, flagged; sized from the packets).
    pub fn learnt(self) -> Self {
        let mut sc = self.learnt_case();
        super::scenario::calm_first_pair(&mut sc.ops);
        sc
    }

    fn learnt_case(mut self) -> Self {
        if !self.learns() {
            return self;
        }
        // Packets of a few ticks teach a ratio too loose to tell a packet far behind (a
        // copy after a long loss) from one a period nearer within the warm-up's span.
        let tpi = self.clock.ticks_per_sample;
        let least = (MIN_TICKS * tpi.den()).div_ceil(tpi.num()) as usize;
        self.spp = self.spp.max(least);
        if self.enc == super::scenario::Enc::Sc8 && self.kind.format() == fsdr_net_io::Format::Chdr
        {
            self.spp = (self.spp + 1) & !1;
        }
        let n = self.ops.len();
        // Before a run of pairs pins the ratio, losses, late packets and copies among the
        // first packets keep what the counter alone tells: no loss of half the counter's
        // period or more (16·m, 65 536·m are invisible before a rate; not counted, flagged
        // where later pairs show the first one wrong: the README's format table), no
        // time step, burst end, restart, packet size other than the stream's or clock set
        // back (a ratio learnt across one is wrong until the pairs after it replace it).
        // Packets lost or late there skip fewer than half the counter's period less one
        // between two arrivals (the counter steps less than half its period), and fewer
        // than the 1024 positions remembered: without a rate, a packet late across more
        // is placed by nothing (a restart, the README says).
        // The warm-up lasts until two pairs in a row, the first run (a ratio from one pair
        // sizes no gap: losses and late packets in the first packets can leave none for
        // long; the fuzzer found 65 536 lost at packet 17, every packet before late).
        let run = (2..n)
            .find(|&i| {
                super::scenario::pair_at(&self.ops, i - 1) && super::scenario::pair_at(&self.ops, i)
            })
            .map_or(n, |i| i + 1);
        let mut skip = (self.kind.period() / 2 - 2).min(1000);
        for o in self.ops.iter_mut().take(WARM_UP.max(run)) {
            let (lose, delay, dup) = (o.lose.min(skip), o.delay, o.dup);
            *o = Default::default();
            skip -= lose;
            o.lose = lose;
            if delay > 0 && skip > 0 {
                (o.delay, skip) = (delay, skip - 1);
            }
            o.dup = dup;
        }
        // A copy or late packet of the warm-up arriving after it crosses the losses on
        // its way too: fewer than the positions remembered in all (props 1M: a copy of
        // packet 10 after 1000 lost in the warm-up and 31 after it, a restart).
        let warm = WARM_UP.max(run).min(n);
        let crosses = |ops: &[super::scenario::Op], i: usize, d: usize| {
            let lost: u64 = ops[i + 1..(i + d + 1).min(n)].iter().map(|o| o.lose).sum();
            d > 0 && lost + d as u64 >= 1000
        };
        for i in 0..warm {
            if crosses(&self.ops, i, self.ops[i].delay) {
                self.ops[i].delay = 0;
            }
            if crosses(&self.ops, i, self.ops[i].dup) {
                self.ops[i].dup = 0;
            }
        }
        for o in &mut self.ops {
            if o.delay > 0 {
                o.short = 0;
            }
            // A packet longer than the others makes the losses after it, sized from the
            // packets where the ratio pins no position, longer than the time: sized by
            // the time as the learnt ratio shows it, within its uncertainty (flagged).
            o.long = 0;
        }
        // Samples a stamp's rounding may hide, and a restart's skipped numbers: the two
        // stamps' rounding (a tick) and the receiver's allowance for it (a tick more, and
        // the ratio's uncertainty: props 1M found a restart 2 on across the wrap, no time
        // lost, taken for 1 lost fc32 sample at 5/2 ticks a sample — 2 bytes measured, 6
        // allowed).
        let bytes = self.enc.bytes_per_sample() as u64;
        let per_tick = (bytes * tpi.den()).div_ceil(tpi.num());
        let hidden = 1 + (2 + 2 * per_tick) / bytes;
        let q = if self.kind.ticked() && !tpi.inverts_exactly() {
            tpi.units_per_tick_ceil()
        } else {
            0
        };
        let (period, restart_at) = (self.kind.period(), self.kind.format().first_seq());
        for o in &mut self.ops {
            if period == 16 && o.jump + 2 * q + hidden >= 16 {
                o.jump = 0;
            }
            // A step a period of lost packets could hold (a sample each) is that loss,
            // flagged, and zero-filled with the time as the learnt ratio shows it, within
            // its uncertainty over the step (the README's format table): not drawn, nor
            // one within that uncertainty (a few hundredths) of it. Moved to a quarter to
            // three quarters of a period: far beyond what a stamp's rounding hides (the
            // remainder alone could be a sample, which ticks of 2.4 samples do not show).
            if period > 16 && o.jump + o.jump / 32 + 2 * q + hidden >= period {
                o.jump = period / 4 + o.jump % (period / 2);
            }
            // A clock set back by less than a stamp's rounding is inside it.
            if let Some(super::scenario::Back::By(x)) = o.back.as_mut() {
                *x = (*x).max(hidden + 2 * q + 1);
            }
        }
        // A clock set back into a run of lost packets, its counter on a number of theirs,
        // is a late one of them where its time fits their place (as when told); where it
        // fits within the learnt ratio's uncertainty only, the model, which knows the
        // time exactly, cannot say: no step back after a loss.
        // (Nor a step back to a time the stream had passed, which after an earlier step
        // back is one ahead, long enough for 16·m lost.)
        // Nor right after a jump or a burst's end, where the ratio's positions come from
        // before the step, as far off as its uncertainty over it.
        let mut lost = false;
        for i in 0..n {
            lost |= self.ops[i].lose > 0;
            let stepped = i > 0 && (self.ops[i - 1].jump > 0 || self.ops[i - 1].eob_gap.is_some());
            let o = &mut self.ops[i];
            if lost
                || stepped
                || o.jump > 0
                || !matches!(o.back, Some(super::scenario::Back::By(_)))
            {
                o.back = None;
            }
        }
        self.no_step_before_the_start();
        // Steps on consecutive packets agree with each other and not with the stream's
        // run: as many in a row as the pairs before them (up to 16) are a rate the sender
        // changed to (`seq::RateEstimate`'s rival run), which no receiver that learns the
        // rate can tell from steps: no step right after a step.
        // So are clocks set back on consecutive packets, each by as much.
        for i in 1..n {
            if self.ops[i - 1].jump > 0 || self.ops[i - 1].back.is_some() {
                self.ops[i].jump = 0;
                self.ops[i].back = None;
            }
        }
        let steps: Vec<usize> = (0..n)
            .filter_map(|i| {
                let o = &self.ops[i];
                if o.jump > 0 {
                    Some(i)
                } else {
                    o.eob_gap.map(|_| i + 1)
                }
            })
            .filter(|&after| after < n)
            .collect();
        for after in steps {
            self.ops[after].lose = 0;
            self.ops[after].delay = 0;
            // Nor a counter restarted there: the ratio's uncertainty over the step leaves
            // room for as many lost packets of a sample as it skipped.
            self.ops[after].restart = false;
            if after + 1 < n {
                self.ops[after + 1].restart = false;
            }
            for i in 0..after {
                if i + self.ops[i].delay >= after {
                    self.ops[i].delay = 0;
                }
            }
        }
        // After the steps' losses are gone: what counts for a restart is its distance from
        // the number before it (`Scenario::coarse` keeps `2q + 1` out for coarse ticks).
        let hidden = if q > 0 { hidden.max(2 * q + 1) } else { hidden };
        let mut counter = self.first_seq;
        for o in &mut self.ops {
            counter = counter.wrapping_add(o.lose);
            if o.restart {
                let d = restart_at.wrapping_sub(counter.wrapping_sub(1)) % period;
                if (2..=hidden).contains(&d) {
                    o.restart = false;
                } else {
                    counter = restart_at;
                }
            }
            counter = counter.wrapping_add(1);
        }
        self
    }
}
