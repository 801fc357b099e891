//! The extender's counter rules (2 and 3 on [`SeqExtender`]): where the time does not
//! place a packet — an end of burst, no rate yet, a learnt ratio too loose — the counter's
//! number, the stamps' order, what the time still bounds, and payload fingerprints where
//! there are no stamps.

use super::{Newest, PRINTS, SeqExtender};
use crate::seq::SeqPacket;

impl SeqExtender {
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
        (least > 0 && plain < lo && k <= (a + tol) / self.timeline.least() + 1 && k <= dt + 1)
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
    pub(super) fn by_order(&self, d: u64, plain: i64, p: &SeqPacket, n: &Newest) -> (i64, bool) {
        let later =
            matches!((p.ticks, n.ticks), (Some(t), Some(t0)) if (t.wrapping_sub(t0) as i64) > 0);
        if !later || plain > 0 && n.eob {
            return (plain, false);
        }
        let k = if d == 0 { self.period } else { d } as i64;
        (k, k != plain || (k > 1 && self.bits < 16 && !n.eob))
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
