//! How a packet's number is decided, one variant per rule of [`SeqExtender`]:
//! [`classify`](SeqExtender::classify) picks the rule, and [`Placement`]'s predicates say
//! what that rule leaves unproven. `extend` applies it.

use super::check::Contradiction;
use super::history::{self, Behind};
use super::time::Proof;
use super::{Newest, SeqExtender};
use crate::seq::SeqPacket;

/// The rule that placed a packet, with what it found (rule numbers as on [`SeqExtender`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Placement {
    /// The newest one again: its number and its stamp (under any rule).
    Newest,
    /// Rule 1: the timestamp placed it `offset` packets on, with what the time proved.
    ByTime { offset: i64, proof: Proof },
    /// Rule 2: a ratio learnt from one pair could not place it, so that pair spanned a time
    /// jump or a loss its counter could not show: the ratio is forgotten and the packet
    /// counted as before any rate.
    FirstPairForgotten { offset: i64 },
    /// Rule 5: the counter one on, where a configured clock puts the packet inside or
    /// behind the newest one: the clock, contradicted, was dropped; it is the next one.
    ClockDropped,
    /// Rule 3: no timestamp, a number behind (or equal): what its payload's fingerprint
    /// says it is at `offset` (`Behind::Not`: new data after a loss of half the counter's
    /// period or more, a period on).
    ByFingerprint { offset: i64, behind: Behind },
    /// Rules 2 and 3: the counter (and the stamps' order, where they cannot place it).
    /// `unproven`: the count of the gap before it (ahead), or its place (behind).
    ByCounter { offset: i64, unproven: bool },
    /// Rule 4, or nothing places it: the sender restarted here (`run_goes_on`: the pair
    /// before it went into the learnt rate's run, which goes on across it).
    Restart { run_goes_on: bool },
}

impl Placement {
    /// Packets on from the newest one (`None`: a restart).
    pub(super) fn offset(self) -> Option<i64> {
        match self {
            Self::Newest => Some(0),
            Self::ByTime { offset, .. }
            | Self::FirstPairForgotten { offset }
            | Self::ByFingerprint { offset, .. }
            | Self::ByCounter { offset, .. } => Some(offset),
            Self::ClockDropped => Some(1),
            Self::Restart { .. } => None,
        }
    }

    /// The format could not prove where the packet goes: a ratio forgotten under it, new
    /// data where a copy's number was, a number behind the counter alone placed unsure.
    pub(super) fn place_unproven(self) -> bool {
        match self {
            Self::FirstPairForgotten { .. } => true,
            Self::ByFingerprint { behind, .. } => behind == Behind::Not,
            Self::ByCounter { offset, unproven } => offset <= 0 && unproven,
            _ => false,
        }
    }

    /// Its place is proven, the count or size of the gap before it not (withdrawn where
    /// late packets fill that gap: [`Widened::gap_only`](super::Widened::gap_only)).
    pub(super) fn gap_unproven(self) -> bool {
        match self {
            Self::ByTime { proof, .. } => proof != Proof::Exact,
            Self::ByCounter { offset, unproven } => offset > 0 && unproven,
            _ => false,
        }
    }

    /// The gap before it lies beside a time jump: its packets' size, the rest the jump's.
    pub(super) fn beside_jump(self) -> bool {
        matches!(
            self,
            Self::ByTime {
                proof: Proof::BesideJump,
                ..
            }
        )
    }
}

impl SeqExtender {
    /// The rule that places packet `p` against the newest one `n`: `d` its counter's
    /// distance ahead (modulo the period), `plain` the same as a signed distance, `timed`
    /// its position and tolerance where the timeline resolves it, `placed` where it does
    /// at all, `nominal` the largest packet in units.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn classify(
        &mut self,
        seq: u64,
        d: u64,
        plain: i64,
        timed: Option<(i128, i128)>,
        placed: Option<(i128, i128)>,
        nominal: i128,
        p: &SeqPacket,
        n: &Newest,
    ) -> Placement {
        let restart = Placement::Restart { run_goes_on: false };
        // The newest one again (its number and stamp), also where it is shorter than the
        // stamps' rounding or the ratio too loose to place it.
        if d == 0 && p.ticks.is_some() && p.ticks == n.ticks {
            return Placement::Newest;
        }
        if let (Some(at), Some(ns)) = (timed, n.start) {
            if let Some((offset, proof)) = self.by_time(d, plain, at, ns, p, n) {
                return Placement::ByTime { offset, proof };
            }
            // The counter goes on by one, but the time says the packet starts inside or
            // behind the newest one: a clock configured slower than the stream's (a
            // receiver told 200 Msps for a 491.52 Msps stream) makes every packet look so.
            // Checked against the configured clock like any pair `learn` sees; a restart
            // until it is dropped. A ratio learnt from one pair that cannot place the packet
            // is forgotten first.
            if self.first_pair_only() {
                // Rule 4 first: the restart number out of turn restarts (CHDR's 0 twice in
                // a row, the ratio learnt from the pair before the first: not 65 535 lost).
                if self.restart_number(seq, plain) && self.behind_place(d, plain, p, n).is_none() {
                    return restart;
                }
                return match self.forget_first_pair(d, plain, p, n) {
                    Some(offset) => Placement::FirstPairForgotten { offset },
                    None => restart,
                };
            }
            if plain == 1 && !n.eob {
                return match self.contradicts_clock(n, p) {
                    Contradiction::Dropped => Placement::ClockDropped,
                    Contradiction::Restart { run_goes_on } => Placement::Restart { run_goes_on },
                };
            }
            return restart;
        }
        // Without a stamp, what the payload says of a number behind (or equal).
        let untimed = match (plain <= 0, p.fingerprint, p.ticks) {
            (true, Some(print), None) => {
                let q = history::pos(n.ext) + i128::from(plain);
                Some(self.behind_untimed(q, print, n))
            }
            _ => None,
        };
        // A restart number out of turn restarts the stream — not where the stamps put it
        // behind the newest one (a late copy of the packet numbered 0, which a learnt ratio
        // too loose to place it made a restart), nor where its payload proves it a copy of
        // the packet received at its number (CHDR without stamps: packet 0 sent twice).
        if self.restart_number(seq, plain)
            && untimed != Some(Behind::Copy)
            && self.behind_place(d, plain, p, n).is_none()
        {
            return restart;
        }
        if let Some(behind) = untimed {
            return match behind {
                Behind::Copy | Behind::Late => Placement::ByFingerprint {
                    offset: plain,
                    behind,
                },
                // A long counter (CHDR's 16 bits): a copy, whether or not its payload proves
                // it (silence, a constant) — new data there would follow a loss of half the
                // counter's period, beyond what such a stream tells (`seq`'s table).
                Behind::Not if self.period / 2 > history::REMEMBERED as u64 => {
                    Placement::ByFingerprint {
                        offset: plain,
                        behind: Behind::Copy,
                    }
                }
                Behind::Not => Placement::ByFingerprint {
                    offset: plain + self.period as i64,
                    behind,
                },
            };
        }
        match self.by_counter(d, plain, placed, nominal, p, n) {
            Some((offset, unproven)) => Placement::ByCounter { offset, unproven },
            None => restart,
        }
    }
}
