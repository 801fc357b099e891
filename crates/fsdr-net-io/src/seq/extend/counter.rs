//! The extender's counter rules (2, 3 and 4 on [`SeqExtender`]): where the time does not
//! place a packet — an end of burst, no rate yet, a learnt ratio too loose — the counter's
//! number, the stamps' order, what the time still bounds, the restart number, and payload
//! fingerprints where there are no stamps.

use super::{Newest, SeqExtender};
use crate::seq::SeqPacket;

/// A 64-bit fingerprint of a whole payload: equal for a packet received twice, and for
/// different samples only by chance (about 2^−64) — or where the samples repeat (silence, a
/// constant), which the extender checks before it takes equal fingerprints for a copy.
///
/// ```
/// use fsdr_net_io::seq::fingerprint;
///
/// let a: Vec<u8> = (0..1000u32).flat_map(|i| i.to_le_bytes()).collect();
/// let mut b = a.clone();
/// b[2000] ^= 1; // one bit in the middle
/// assert_eq!(fingerprint(&a), fingerprint(&a.clone()));
/// assert_ne!(fingerprint(&a), fingerprint(&b));
/// ```
pub fn fingerprint(payload: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    // Four lanes of 8 bytes, each word folded in with a multiply (a bijection of the lane
    // for each word), then the lanes, the length and the tail.
    let mut lanes = [K, K.rotate_left(16), K.rotate_left(32), K.rotate_left(48)];
    let mut chunks = payload.chunks_exact(32);
    for c in &mut chunks {
        for (i, lane) in lanes.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&c[8 * i..8 * i + 8]);
            *lane = (*lane ^ u64::from_le_bytes(w))
                .wrapping_mul(K)
                .rotate_left(29);
        }
    }
    let mut h = (payload.len() as u64).wrapping_mul(K);
    for lane in lanes {
        h = (h ^ lane).wrapping_mul(K).rotate_left(31);
    }
    for c in chunks.remainder().chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(23);
    }
    h ^ (h >> 29)
}

impl SeqExtender {
    /// Rule 4: the number a restarted sender begins with, out of turn (not just across
    /// the counter's wrap).
    pub(super) fn restart_number(&self, seq: u64, plain: i64) -> bool {
        let wrap = (super::super::HISTORY as i64).min(self.period as i64 / 2 - 1);
        self.restart_seq == Some(seq) && !(1..=wrap).contains(&plain)
    }

    /// Where the time does not place a packet (`placed`: where a loose ratio puts it, and
    /// how far off): the count the time raises past the counter's, else the stamps' order;
    /// `None`: no count holds the time — the lost packets, a sample each at least, would
    /// need more than it spans (a counter restarted with no time lost, on 1-sample
    /// packets), or a packet stamped earlier is neither a copy nor a late one (the clock
    /// went back).
    pub(super) fn by_counter(
        &self,
        d: u64,
        plain: i64,
        placed: Option<(i128, i128)>,
        nominal: i128,
        p: &SeqPacket,
        n: &Newest,
    ) -> Option<(i64, bool)> {
        let ahead = match (placed, n.start) {
            (Some((s, tol)), Some(ns)) if !n.eob => Some((s - (ns + n.units), tol)),
            _ => None,
        };
        let raised = ahead.and_then(|(a, tol)| self.raised_by_time(plain, a, tol, nominal, p, n));
        let (k, amb) = match raised {
            Some(k) => (k, true),
            None => self.by_order(d, plain, p, n)?,
        };
        match ahead {
            Some((a, tol))
                if k > 1 && i128::from(k - 1) > (a + tol) / self.timeline.least_packet() =>
            {
                None
            }
            _ => Some((k, amb)),
        }
    }

    /// Where a ratio too loose to place a packet leaves the count to the counter: the time,
    /// `a ± tol` units after the newest one's end, may need more packets than the
    /// counter's nearest number (a 4-bit counter's 16·m more: 1745 lost were 1, unflagged).
    /// Then rule 1's count where the time holds it (flagged by the caller); `None`: the
    /// counter's number holds the time, or no count does (a time jump) — also in ticks,
    /// which no ratio's looseness widens: the packets from the newest one on, each at
    /// least a tick, within the ticks between the two stamps (before, a 16-bit counter
    /// took a jump of 39 320 ticks for 65 536 packets lost, two ticks each).
    pub(super) fn raised_by_time(
        &self,
        plain: i64,
        a: i128,
        tol: i128,
        nominal: i128,
        p: &SeqPacket,
        n: &Newest,
    ) -> Option<i64> {
        let dt = i128::from(p.ticks?.wrapping_sub(n.ticks?) as i64);
        // The least time lost: `a − tol`, and under a learnt ratio the bytes the ticks hold
        // at its bound of the most ticks a byte, less the newest packet's (where the
        // ratio's uncertainty is large, tighter than the linear `tol`: one pair of 2
        // ticks a packet leaves 34 ticks at least 10 packets, not nothing).
        let mut least = a - tol;
        if let (None, Some((num, den))) = (
            self.timeline.fixed,
            self.timeline.learnt.most_ticks_per_byte(),
        ) {
            let bytes = (dt - 1).max(0) * i128::from(den) / i128::from(num.max(1));
            least = least.max(bytes - n.payload as i128);
        }
        let lo = (least + nominal - 1) / nominal + 1;
        let (plain, period) = (i128::from(plain), self.period as i128);
        let k = plain + period * ((lo - plain + period - 1) / period);
        (least > 0
            && plain < lo
            && k <= (a + tol) / self.timeline.least_packet() + 1
            && k <= dt + 1)
            .then(|| i64::try_from(k).ok())?
    }

    /// Whether the rate in force was learnt from one consecutive pair, that nothing has
    /// confirmed.
    pub(super) fn first_pair_only(&self) -> bool {
        self.timeline.fixed.is_none()
            && self
                .timeline
                .learnt
                .longest_run()
                .is_some_and(|r| r.pairs == 1)
    }

    /// A packet that a ratio learnt from one pair cannot place: the pair spanned a time
    /// jump or (on a 4-bit counter) a loss the counter could not show. The ratio is
    /// forgotten and the packet counted as before any rate (flagged by the caller: that
    /// loss is not known); `None`: the clock went back ([`by_order`](Self::by_order)).
    pub(super) fn forget_first_pair(
        &mut self,
        d: u64,
        plain: i64,
        p: &SeqPacket,
        n: &Newest,
    ) -> Option<i64> {
        self.timeline.learnt.reset();
        self.timeline.epoch = self.timeline.epoch.wrapping_add(1);
        Some(self.by_order(d, plain, p, n)?.0)
    }

    /// Where no rate places a packet (a learnt one before the first consecutive pair, or
    /// one too loose), the counter alone, but the stamps still tell ahead from behind: a
    /// number behind or equal stamped later than the newest one is new data after a loss
    /// of half the counter's period or more. Flagged where the
    /// counter alone cannot prove it: such a count, and any loss on a counter of fewer
    /// than 16 bits (VRT's 4: no rate yet shows 16·m more).
    /// A number stamped earlier than the newest one (or at its stamp with another number)
    /// is behind, a copy or a late packet ([`behind_place`](Self::behind_place)), flagged
    /// where that is not the counter's nearest number; `None`: neither, the clock went
    /// back (a restart).
    pub(super) fn by_order(
        &self,
        d: u64,
        plain: i64,
        p: &SeqPacket,
        n: &Newest,
    ) -> Option<(i64, bool)> {
        let dt = match (p.ticks, n.ticks) {
            (Some(t), Some(t0)) => t.wrapping_sub(t0) as i64,
            _ => 0,
        };
        // The newest one's stamp with another number is behind it — unless the newest
        // packet spans less than a tick (a sample or two at 491.52 Msps with a 200 MHz
        // clock), when the next one may start in the same tick.
        let same_tick_on = dt == 0 && plain > 0 && self.timeline.under_a_tick(n.units);
        if dt < 0 || (dt == 0 && d != 0 && p.ticks.is_some() && !same_tick_on) {
            let k = i64::try_from(self.behind_place(d, plain, p, n)?).ok()?;
            return Some((k, k != plain));
        }
        if dt <= 0 || plain > 0 && n.eob {
            return Some((plain, false));
        }
        let k = if d == 0 { self.period } else { d } as i64;
        Some((k, k != plain || (k > 1 && self.bits < 16 && !n.eob)))
    }
}
