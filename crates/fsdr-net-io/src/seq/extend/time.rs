//! Rule 1 on [`SeqExtender`]: where a usable timestamp puts a packet against the newest one
//! — ahead, the fewest packets with the counter's bits the time holds, a time jump, or a
//! loss beside one; behind, a copy or a late packet where its stamp fits, else a restart.

use super::{Newest, SeqExtender};
use crate::seq::SeqPacket;

/// What the time proved of a packet it placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Proof {
    /// Its place and the gap before it.
    Exact,
    /// Its place, not the count or size of the gap before it (flagged).
    GapUnproven,
    /// The counter's count where the time is more than the lost packets can hold and no
    /// period of the counter more fits it: the loss beside a time jump (or lost packets
    /// longer than any seen), flagged, sized from the packets (the rest is the jump's).
    BesideJump,
}

impl Proof {
    pub(super) fn unproven_if(unproven: bool) -> Self {
        if unproven {
            Self::GapUnproven
        } else {
            Self::Exact
        }
    }
}

impl SeqExtender {
    /// The offset of a packet with a usable timestamp at `s` against the newest at `ns`,
    /// and what the time proved of it; `None`: a restart. Positions are known
    /// within the timeline's tolerance.
    pub(super) fn by_time(
        &self,
        d: u64,
        plain: i64,
        (s, tol): (i128, i128),
        ns: i128,
        p: &SeqPacket,
        n: &Newest,
    ) -> Option<(i64, Proof)> {
        let nominal = self.units(self.nominal).max(1);
        let end = ns + n.units;
        let period = self.period as i128;
        if s >= end - tol {
            let ahead = (s - end).max(0);
            if n.eob {
                // A new burst starts whenever the sender likes: the counter alone, nearest
                // ahead (a loss of half a period or more cannot be told from a shorter one),
                // and rule 4.
                if self.restart_number(n.ext.wrapping_add(d) & self.mask, plain) {
                    return None;
                }
                let k = if d == 0 { period } else { d as i128 };
                return Some((k as i64, Proof::unproven_if(plain <= 0)));
            }
            // k − 1 lost packets hold `ahead` units: at most `nominal` each, and at least
            // what one tick resolves.
            // (No division where the answer is known: a packet that starts where the newest
            // one ends, or within the tolerance of it, needs no lost one.)
            let lo = match ahead - tol {
                ..=0 => 1,
                x => (x + nominal - 1) / nominal + 1,
            };
            let k0 = if d == 0 { period } else { d as i128 };
            let k = if k0 >= lo || self.within_clock_error(k0, ahead - tol, nominal) {
                k0
            } else {
                k0 + period * ((lo - k0 + period - 1) / period)
            };
            // `hi` is at least 1 (ahead, tol ≥ 0): the next packet always fits.
            if k == 1 || k <= (ahead + tol) / self.timeline.least_packet() + 1 {
                // Proven when the missing time is k − 1 packets of the stream's size, which
                // stamps a tick off (a configured tick longer than half a sample) cannot
                // show, nor a learnt ratio unsure of it by more than a unit beyond the
                // stamps' rounding (a jump of 159.99 packets' time read as 160 under a
                // ratio two pairs old); a count the time had to raise past the counter's
                // without that is a guess.
                let ambiguous = k != i128::from(plain)
                    && !(ahead == (k - 1) * nominal
                        && (self.timeline.fixed.is_some() || tol <= self.timeline.quantum() + 1)
                        && !self.timeline.coarse());
                return Some((i64::try_from(k).ok()?, Proof::unproven_if(ambiguous)));
            }
            // Time jumped without a loss the counter could hold: a device's discontinuity.
            if plain == 1 {
                return Some((1, Proof::Exact));
            }
            // With the counter further ahead, where only a period more was too many for
            // the time: the counter's count, flagged (a time jump beside the loss, or lost
            // packets longer than any seen), sized from the packets.
            if k > k0 && k0 - 1 <= (ahead + tol) / self.timeline.least_packet() {
                return Some((i64::try_from(k0).ok()?, Proof::BesideJump));
            }
            return None;
        }
        // Behind the newest one's end: of the numbers the counter allows that leave every
        // packet between at least what one tick resolves, the one nearest to what the time
        // says in packets of the stream's size (time may have jumped between them, so that
        // is only an estimate) where the packet is a copy of the one received there (its
        // stamp and length) or a late one (nothing received there, its time between its
        // neighbours'); none such: the clock went back, a restart.
        let rel = s - ns;
        // Inside the newest packet, or at its start with its number but not its stamp: a
        // restart. Within the rounding of its start with another number: a short packet
        // behind it.
        if rel > 0 || (rel >= -tol && d == 0) {
            return None;
        }
        let max_back = (-rel + tol) / self.timeline.least_packet();
        let est = (rel as f64 / nominal as f64, tol as f64 / nominal as f64);
        let k = self.find_behind(d, est, max_back, p, n)?;
        Some((i64::try_from(k).ok()?, Proof::Exact))
    }
}
