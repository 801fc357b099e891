//! The extender's counter rules (2, 3 and 4 on [`SeqExtender`]): where the time does not
//! place a packet — an end of burst, no rate yet, a learnt ratio too loose — the counter's
//! number, the stamps' order, what the time still bounds, the restart number, and payload
//! fingerprints where there are no stamps.

use super::{Newest, PRINTS, SeqExtender};
use crate::seq::SeqPacket;

/// The value `≡ d (mod period)` between `−max_back` and −1 nearest to `est` (on a tie the
/// one nearer 0); `None` when no value of the counter is that near.
pub(super) fn nearest_behind(d: i128, period: i128, est: f64, max_back: i128) -> Option<i128> {
    let k0 = if d == 0 { -period } else { d - period };
    if -k0 > max_back {
        return None;
    }
    // The candidates are k0 − m·period for m in 0..=steps.
    let steps = (max_back + k0) / period;
    let at = |m: i128| k0 - m * period;
    let m = ((k0 as f64 - est) / period as f64)
        .floor()
        .clamp(0.0, steps as f64) as i128;
    let (near, far) = (at(m), at((m + 1).min(steps)));
    Some(if (far as f64 - est).abs() < (near as f64 - est).abs() {
        far
    } else {
        near
    })
}

/// A 64-bit fingerprint of a payload (its length and its first and last 64 bytes): equal
/// for a packet received twice, different for different samples unless they repeat.
pub fn fingerprint(payload: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (payload.len() as u64).wrapping_mul(K);
    let head = &payload[..payload.len().min(64)];
    let tail = &payload[payload.len().saturating_sub(64)..];
    for chunk in head.chunks(8).chain(tail.chunks(8)) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(w)).wrapping_mul(K);
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
    /// packets: before, 10 lost, flagged).
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
        let (k, amb) = raised.map_or_else(|| self.by_order(d, plain, p, n), |k| (k, true));
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
    /// loss is not known). Before, the packet restarted the stream, and so did each after
    /// it until a consecutive pair.
    pub(super) fn forget_first_pair(
        &mut self,
        d: u64,
        plain: i64,
        p: &SeqPacket,
        n: &Newest,
    ) -> i64 {
        self.timeline.learnt.reset();
        self.timeline.epoch = self.timeline.epoch.wrapping_add(1);
        self.by_order(d, plain, p, n).0
    }

    /// Where no rate places a packet (a learnt one before the first consecutive pair, or
    /// one too loose), the counter alone, but the stamps still tell ahead from behind: a
    /// number behind or equal stamped later than the newest one is new data after a loss
    /// of half the counter's period or more (before: 8 lost on a 4-bit counter took the
    /// next 8 packets for stragglers and the one after for a duplicate, and the pair after
    /// that taught the ratio 17 packets' time for one packet's bytes). Flagged where the
    /// counter alone cannot prove it: such a count, and any loss on a counter of fewer
    /// than 16 bits (VRT's 4: no rate yet shows 16·m more).
    /// A number stamped earlier than the newest one is behind: the counter's value nearest
    /// to where a loose ratio puts it, where that tells the values apart (before, on a
    /// 4-bit counter a packet 76 late was taken for new data 4 ahead, unflagged: 3 phantom
    /// lost and old samples out of order; a copy of one 33 back was late at 1 back).
    pub(super) fn by_order(&self, d: u64, plain: i64, p: &SeqPacket, n: &Newest) -> (i64, bool) {
        let dt = match (p.ticks, n.ticks) {
            (Some(t), Some(t0)) => t.wrapping_sub(t0) as i64,
            _ => 0,
        };
        if dt < 0 {
            let period = self.period as i128;
            let k = self.behind_by_stamp(d, p, n);
            let k = k.unwrap_or(i128::from(plain) - if plain > 0 { period } else { 0 });
            let k = i64::try_from(k).unwrap_or(plain);
            return (k, k != plain);
        }
        if dt <= 0 || plain > 0 && n.eob {
            return (plain, false);
        }
        let k = if d == 0 { self.period } else { d } as i64;
        (k, k != plain || (k > 1 && self.bits < 16 && !n.eob))
    }

    /// Where a loose ratio puts a packet stamped earlier than the newest one, as the
    /// counter's nearest value behind, where the ratio tells the values apart.
    pub(super) fn behind_by_stamp(&self, d: u64, p: &SeqPacket, n: &Newest) -> Option<i128> {
        let dt = p.ticks?.wrapping_sub(n.ticks?) as i64;
        let (s, ns) = (self.timeline.place(p.ticks?)?.pos, n.start?);
        let (period, nominal) = (self.period as i128, self.units(self.nominal).max(1));
        let (rel, tol) = (s - ns, self.timeline.tolerance(s) + self.timeline.quantum());
        let back = (-rel + tol) / self.timeline.least_packet();
        (dt < 0 && 2 * tol <= period * nominal)
            .then(|| nearest_behind(d as i128, period, rel as f64 / nominal as f64, back))?
    }

    /// A number behind (or equal to) the newest one, on a stream without timestamps: a
    /// duplicate when its fingerprint matches the one received there, late when nothing was
    /// received there, new data after a long loss otherwise.
    pub(super) fn by_print(&self, newest: u64, plain: i64, fp: u64) -> (i64, bool) {
        let cand = newest.wrapping_add(plain as u64);
        match self.prints.get(cand as usize % PRINTS) {
            Some(&Some((e, f))) if e == cand && f != fp => (plain + self.period as i64, true),
            // The same bytes again, or a position never received (late, by the nearest
            // number rule).
            _ => (plain, false),
        }
    }

    pub(super) fn remember_print(&mut self, ext: u64, fp: Option<u64>) {
        let Some(fp) = fp else { return };
        if self.prints.is_empty() {
            self.prints = vec![None; PRINTS];
        }
        self.prints[ext as usize % PRINTS] = Some((ext, fp));
    }
}
