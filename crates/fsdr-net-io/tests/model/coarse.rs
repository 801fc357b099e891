//! What a scenario keeps out where the stamps cannot tell it: ticks longer than half a
//! sample (each stamp up to half a tick off), and steps within a told clock's rounding.
//! Each is a limitation the README's format table and `seq`'s state.

use super::scenario::{Back, Enc, Kind, Scenario};

impl Scenario {
    /// The stamps give every distance exactly: not so where a tick is longer than half a
    /// sample (`Ratio::inverts_exactly`; CHDR at 491.52 Msps with a 200 MHz clock).
    pub fn exact_time(&self) -> bool {
        self.kind.timed() && (!self.kind.ticked() || self.clock.ticks_per_sample.inverts_exactly())
    }

    /// The stream's timebase comes from rates the receiver is told, which could be wrong
    /// (CHDR ticks, VRT picoseconds), not the format's own (VRT sample counts).
    pub fn told_clock(&self) -> bool {
        matches!(self.kind, Kind::ChdrTicks | Kind::VrtPicos | Kind::VrtFree)
    }

    /// With ticks coarser than that, each stamp is rounded by up to half a tick, so
    /// distances are known within `q` samples (`Ratio::units_per_tick_ceil`). What no
    /// receiver can tell apart then is left out of the case: packets shorter than `2q + 1`
    /// samples (one behind the newest by less than the uncertainty, or too short for the
    /// time to place it), time jumps and gaps between bursts shorter than two ticks (inside
    /// the rounding: the stamps may not show them) or than `2q + 1` samples (the room a loss
    /// may leave within the rounding), short packets near a jump (a late one's hole and the
    /// jump could add up to within the rounding of a loss), packets that arrive after their
    /// successor short by fewer than `2q + 1` samples (a loss of less than whole packets,
    /// flagged, to the successor: within the rounding it may not show), and a counter
    /// restarted within `2q + 1` numbers of its wrap (the numbers it skipped could be as
    /// many short packets lost inside the rounding), and on a 4-bit counter a jump within
    /// `2q + 1` samples of 16·m (as many lost packets could hold it). And the stream begins (and restarts) with a full packet: lost
    /// packets larger than any seen leave room that is more than as many of the largest
    /// only within the rounding (a restart to an exact receiver, a loss to one that allows
    /// for the rounding; the fuzzer found it: short packets, then a full one lost).
    ///
    /// Under any told clock, jumps are two ticks at least: one within a tick a pair is the
    /// stamps' rounding to a receiver, and a run of them reads as the clock off, which rule
    /// 5 drops (the fuzzer found eight 1-tick jumps in a row on 1-sample packets).
    pub fn coarse(mut self) -> Self {
        let tpi = self.clock.ticks_per_sample;
        if self.told_clock() {
            let two_ticks = (2 * tpi.den()).div_ceil(tpi.num());
            for op in self.ops.iter_mut() {
                if op.jump > 0 {
                    op.jump = op.jump.max(two_ticks);
                }
                // So is a clock set back.
                if let Some(Back::By(x)) = op.back.as_mut() {
                    *x = (*x).max(two_ticks);
                }
            }
        }
        if !self.kind.ticked() || tpi.inverts_exactly() {
            return self;
        }
        let q = tpi.units_per_tick_ceil() as usize;
        let least = 2 * q + 1;
        // Two ticks in samples, rounded up (so that the stamps show it), and more than the
        // uncertainty of the distance on both sides (so that it is not taken for the room
        // a loss leaves).
        let visible = (2 * tpi.den()).div_ceil(tpi.num()).max(least as u64);
        let even = self.enc == Enc::Sc8;
        self.spp = self.spp.max(least + 2);
        if even {
            self.spp = (self.spp + 1) & !1;
        }
        // Around a jump (or a gap between bursts) no short packets: one that arrives late
        // leaves a hole of less than the stream's size, and the jump beside it could fill
        // the rest to within the rounding of a loss's room.
        let jumps: Vec<usize> = (0..self.ops.len())
            .filter(|&i| self.ops[i].jump > 0 || self.ops[i].eob_gap.is_some_and(|g| g > 0))
            .collect();
        let n = self.ops.len();
        for &j in &jumps {
            for o in &mut self.ops[j.saturating_sub(14)..(j + 14).min(n)] {
                o.short = 0;
                o.long = 0;
            }
        }
        // Nor a loss (or a late packet's hole) across a jump: the time then exceeds the
        // packets lost, and within two ticks a packet and 1% a told clock's error could
        // make that (`seq::extend`: the count stays the counter's) — where the stamps'
        // rounding puts it against that bound is no fact of the stream.
        for j in jumps {
            // The step is before op j (a jump) or after it (the end of a burst).
            let after = if self.ops[j].jump > 0 { j } else { j + 1 };
            if after < n {
                self.ops[after].lose = 0;
                self.ops[after].delay = 0;
            }
            if after > 0 {
                self.ops[after - 1].delay = 0;
            }
            // Nor, on a 4-bit counter, a late packet across a jump: the jump read as 16·m
            // lost moves where the time puts it by as much, and a tie between two numbers
            // 16 apart is then the stamps' rounding's (props: one late by 8 across two
            // such jumps, the model's tie to the nearer number, the receiver's the other).
            if self.kind.period() == 16 {
                for i in 0..after.min(n) {
                    if i + self.ops[i].delay >= after {
                        self.ops[i].delay = 0;
                    }
                }
            }
        }
        let period = self.kind.period();
        let restart_at = self.kind.format().first_seq();
        let mut counter = self.first_seq;
        for op in &mut self.ops {
            op.short = op.short.min(self.spp - least);
            if even {
                op.short &= !1;
            }
            // A short packet that arrives after its successor is a loss of less than whole
            // packets to that one: told (and flagged) only where it is short by more than
            // the rounding on both sides.
            if op.delay > 0 && op.short < least {
                op.short = 0;
            }
            // No longer one: a loss after it (sized from the packets × the largest) is
            // within two ticks a packet of a told clock's allowance or a period more of
            // the counter, where only the stamps' rounding decides.
            op.long = 0;
            // A clock set back by less than two ticks (or the rounding) is inside it.
            if let Some(Back::By(x)) = op.back.as_mut() {
                *x = (*x).max(visible);
            }
            if op.jump > 0 {
                op.jump = op.jump.max(visible);
                // On a 4-bit counter (VRT) a jump is a loss of 16·m packets where they can
                // hold it (a sample each at least): within the rounding of 16·m samples the
                // stamps cannot tell which, so the case keeps out of it.
                let m = (op.jump + 8) / 16;
                if period == 16 && m > 0 && op.jump.abs_diff(16 * m) <= least as u64 {
                    op.jump = 16 * m + least as u64 + 1;
                }
            }
            if let Some(g) = op.eob_gap.as_mut()
                && *g > 0
            {
                *g = (*g).max(visible);
            }
            counter = counter.wrapping_add(op.lose);
            if op.restart {
                // The newest number is the one before: the restart number is `d` ahead.
                let d = restart_at.wrapping_sub(counter.wrapping_sub(1)) % period;
                if (2..=least as u64).contains(&d) {
                    op.restart = false;
                } else {
                    counter = restart_at;
                }
            }
            if op.restart || op.back.is_some() {
                op.short = 0;
            }
            counter = counter.wrapping_add(1);
        }
        if let Some(o) = self.ops.first_mut() {
            o.short = 0;
        }
        // A clock set back into the place of lost packets, its counter on a number of
        // theirs, is a late one of them where its time fits their place; within the
        // rounding only, the model, which knows the time exactly, cannot say: no step back
        // after a loss (or a jump, which a 4-bit counter may read as 16·m lost, or a
        // counter restart or a burst's end, which may read as lost packets), nor to before
        // the stream's start.
        let mut lost = false;
        for o in &mut self.ops {
            lost |= o.lose > 0 || o.jump > 0 || o.restart || o.eob_gap.is_some();
            if lost {
                o.back = None;
            }
        }
        self.no_step_before_the_start();
        if period == 16 {
            self.no_step_back_beside_a_copy(least as u64);
        }
        self
    }

    /// On a 4-bit counter, no clock set back to within `least` samples (the rounding) of a
    /// packet of the same number (mod 16) among the last 1024 sent but not onto it: the
    /// stamps and the number are then those of a copy of it (props: set back by 16 packets
    /// and a sample at 0.41 ticks a sample).
    fn no_step_back_beside_a_copy(&mut self, least: u64) {
        for i in 0..self.ops.len() {
            if self.ops[i].back.is_none() {
                continue;
            }
            let stream = self.stream();
            let sent: Vec<&super::scenario::Sent> = stream.iter().filter(|p| p.sent).collect();
            let Some(&p) = sent.get(i) else { continue };
            let beside = stream[p.index.saturating_sub(1024)..p.index]
                .iter()
                .any(|e| {
                    e.counter % 16 == p.counter % 16
                        && (1..=least).contains(&e.time.abs_diff(p.time))
                });
            if beside {
                self.ops[i].back = None;
            }
        }
    }
}
