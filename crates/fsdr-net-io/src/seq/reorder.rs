//! [`Reorder`]: a bounded stage that restores order before the tracker sees a datagram.

use std::collections::VecDeque;

use super::{HISTORY, SeqConfig, SeqEvent, SeqOffset, SeqTracker};

/// One datagram leaving a [`Reorder`] stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released<T> {
    /// What the tracker made of it.
    pub event: SeqEvent,
    /// Whether it should be delivered (false for duplicates and late datagrams).
    pub deliver: bool,
    /// The datagram (or its handle).
    pub item: T,
    /// The gap before it, sized ([`StreamOrder`](super::StreamOrder) fills it in; a bare
    /// `Reorder` leaves it empty and the frames are in `event`).
    pub gap: super::Gap,
    /// The format could not prove where this datagram belongs ([`super::Gap::ambiguous`]).
    pub ambiguous: bool,
}

impl<T> Released<T> {
    /// A released datagram with no gap sized and nothing ambiguous.
    pub fn new(event: SeqEvent, deliver: bool, item: T) -> Self {
        Self {
            event,
            deliver,
            item,
            gap: super::Gap::default(),
            ambiguous: false,
        }
    }
}

/// Restores order within a window of `window` datagrams before sequence tracking.
///
/// A datagram ahead of the expected one by at most `window` frames is held until the missing
/// ones arrive, until a later datagram no longer fits the window, or until the caller
/// [flushes](Reorder::flush_oldest) it (for example after a timeout). With `window == 0` it is a
/// plain tracker.
///
/// ```
/// use fsdr_net_io::seq::{Reorder, SeqConfig, SeqEvent};
///
/// let mut r = Reorder::new(SeqConfig::for_bits(64), 8);
/// let mut out = Vec::new();
/// for seq in [1, 3, 2, 4] {
///     r.push(seq, seq, &mut out);
/// }
/// let order: Vec<u64> = out.iter().filter(|d| d.deliver).map(|d| d.item).collect();
/// assert_eq!(order, [1, 2, 3, 4]);
/// assert!(out.iter().all(|d| !matches!(d.event, SeqEvent::Gap { .. })));
/// ```
#[derive(Debug)]
pub struct Reorder<T> {
    tracker: SeqTracker,
    window: usize,
    /// `held[i]` is the datagram `i + 1` frames ahead of the expected one.
    held: VecDeque<Option<(u64, T)>>,
    held_count: usize,
    restored: u64,
}

impl<T> Reorder<T> {
    /// A reorder stage with a window of `window` datagrams.
    pub fn new(cfg: SeqConfig, window: usize) -> Self {
        // Held datagrams and the next arrival (a few more may be lost) must all stay within
        // half the sequence space ahead of the expected one, or ahead and behind could not be
        // told apart: the window is at most a quarter of the space, less one.
        let bound = if cfg.bits >= 64 {
            usize::MAX
        } else {
            ((1u64 << cfg.bits.saturating_sub(2)) as usize).saturating_sub(1)
        };
        let window = window.min(HISTORY as usize / 2).min(bound);
        Self {
            tracker: SeqTracker::new(cfg),
            window,
            held: VecDeque::with_capacity(window),
            held_count: 0,
            restored: 0,
        }
    }

    /// The tracker behind the stage.
    pub fn tracker(&self) -> &SeqTracker {
        &self.tracker
    }

    /// The window in force (bounded by half the sequence space).
    pub fn window(&self) -> usize {
        self.window
    }

    /// Number of datagrams held back, waiting for a missing one.
    pub fn held(&self) -> usize {
        self.held_count
    }

    /// The furthest datagram held: its sequence number and how many frames ahead of the
    /// expected one it is.
    pub fn furthest(&self) -> Option<(u64, u64)> {
        match self.held.back() {
            Some(Some((seq, _))) => Some((*seq, self.held.len() as u64)),
            _ => None,
        }
    }

    /// The datagrams held, in order, to change in place (a handle that becomes another).
    pub fn held_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.held.iter_mut().flatten().map(|(_, item)| item)
    }

    /// The datagrams held, in order, each with how many frames ahead of the expected one it
    /// is and its sequence number, to change in place.
    pub fn held_at_mut(&mut self) -> impl Iterator<Item = (u64, u64, &mut T)> {
        let held = self.held.iter_mut().enumerate();
        held.filter_map(|(i, h)| h.as_mut().map(|(seq, item)| (i as u64 + 1, *seq, item)))
    }

    /// The furthest datagram held.
    pub fn furthest_item(&self) -> Option<&T> {
        self.held.back()?.as_ref().map(|(_, item)| item)
    }

    /// Number of datagrams that arrived after a later datagram of their stream (overtaken)
    /// and were put back in order.
    pub fn restored(&self) -> u64 {
        self.restored
    }

    /// After the expected datagram went out, the front of `held` is the new expected one:
    /// release it and its successors while they are present, then restore the invariant that
    /// `held[0]` is one frame ahead of the expected datagram.
    fn release_following(&mut self, out: &mut Vec<Released<T>>) {
        while let Some(Some(_)) = self.held.front() {
            let (seq, item) = self.held.pop_front().flatten().expect("front is Some");
            self.held_count -= 1;
            self.observe_and_release(seq, item, out);
        }
        if let Some(None) = self.held.front() {
            self.held.pop_front();
        }
    }

    /// Gives up on the oldest missing datagram(s): releases the first held datagram (the
    /// tracker counts the gap before it) and whatever follows it contiguously. Returns false
    /// when nothing is held.
    pub fn flush_oldest(&mut self, out: &mut Vec<Released<T>>) -> bool {
        if self.held_count == 0 {
            self.held.clear();
            return false;
        }
        while let Some(None) = self.held.front() {
            self.held.pop_front();
        }
        let (seq, item) = self.held.pop_front().flatten().expect("a datagram is held");
        self.held_count -= 1;
        self.observe_and_release(seq, item, out);
        self.release_following(out);
        true
    }

    /// Hands `item` to the tracker and releases it, for delivery unless the tracker calls it a
    /// duplicate or late.
    fn observe_and_release(&mut self, seq: u64, item: T, out: &mut Vec<Released<T>>) {
        let event = self.tracker.observe(seq);
        let deliver = !matches!(event, SeqEvent::Duplicate | SeqEvent::Late);
        out.push(Released::new(event, deliver, item));
    }

    /// Takes the expected datagram while nothing is held: what [`push`](Self::push) does
    /// with it (it goes out at once, in order), without a release list. Returns `None`, and
    /// changes nothing, when `seq` is not the expected one or a datagram is held.
    pub fn take_expected(&mut self, seq: u64) -> Option<SeqEvent> {
        if self.held_count > 0 || self.tracker.offset(seq) != SeqOffset::Expected {
            return None;
        }
        let event = self.tracker.observe(seq);
        // What `release_following` leaves with nothing held: the slot of the one taken.
        if let Some(None) = self.held.front() {
            self.held.pop_front();
        }
        Some(event)
    }

    /// Releases everything held, in order.
    pub fn flush_all(&mut self, out: &mut Vec<Released<T>>) {
        while self.flush_oldest(out) {}
        self.held.clear();
    }

    /// Takes in one datagram and appends whatever can be released to `out`.
    pub fn push(&mut self, seq: u64, item: T, out: &mut Vec<Released<T>>) {
        let offset = self.tracker.offset(seq);
        // Overtaken: a later datagram is already held (`held.len()` is the furthest held
        // offset while anything is held).
        let overtaken = self.held_count > 0
            && match offset {
                SeqOffset::Expected => true,
                SeqOffset::Ahead(n) => (n as usize) < self.held.len(),
                _ => false,
            };
        let is_new = |h: &VecDeque<Option<(u64, T)>>| match offset {
            SeqOffset::Ahead(n) => h.get(n as usize - 1).is_none_or(|e| e.is_none()),
            _ => true,
        };
        if overtaken && is_new(&self.held) {
            self.restored += 1;
        }
        match offset {
            SeqOffset::Ahead(n) if self.window > 0 => {
                let mut n = n as usize;
                while n > self.window && self.flush_oldest(out) {
                    n = match self.tracker.offset(seq) {
                        SeqOffset::Ahead(m) => m as usize,
                        _ => 0,
                    };
                }
                if n == 0 || n > self.window {
                    // Everything held went out; it is now the expected one or a plain gap.
                    self.observe_and_release(seq, item, out);
                    self.release_following(out);
                    return;
                }
                if self.held.len() < n {
                    self.held.resize_with(n, || None);
                }
                if self.held[n - 1].is_some() {
                    out.push(Released::new(SeqEvent::Duplicate, false, item));
                } else {
                    self.held[n - 1] = Some((seq, item));
                    self.held_count += 1;
                }
            }
            SeqOffset::Expected => {
                self.observe_and_release(seq, item, out);
                self.release_following(out);
            }
            SeqOffset::FarBehind if self.tracker.completes_restart_run(seq) => {
                // Decided before the flush: releasing held datagrams ends the run.
                self.flush_all(out);
                let event = self.tracker.restart_at(seq);
                out.push(Released::new(event, true, item));
            }
            SeqOffset::First => {
                self.flush_all(out);
                self.observe_and_release(seq, item, out);
            }
            SeqOffset::Resync => {
                // Decided before the flush, from the next expected position: releasing the
                // datagrams held past a hole must not turn it into a gap of `max_gap`.
                self.flush_all(out);
                let event = self.tracker.restart_at(seq);
                out.push(Released::new(event, true, item));
            }
            SeqOffset::Ahead(_) | SeqOffset::Behind(_) | SeqOffset::FarBehind => {
                let event = self.tracker.observe(seq);
                let deliver = matches!(event, SeqEvent::Gap { .. } | SeqEvent::InOrder);
                out.push(Released::new(event, deliver, item));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seq::{SeqConfig, SeqEvent};

    fn reorder(window: usize, seqs: &[u64]) -> (Vec<u64>, Vec<SeqEvent>) {
        let mut r = Reorder::new(SeqConfig::for_bits(16), window);
        let mut out = Vec::new();
        for &s in seqs {
            r.push(s, s, &mut out);
        }
        r.flush_all(&mut out);
        let delivered = out.iter().filter(|d| d.deliver).map(|d| d.item).collect();
        (delivered, out.into_iter().map(|d| d.event).collect())
    }

    #[test]
    fn reorder_restores_swaps_within_window() {
        let (d, ev) = reorder(4, &[0, 2, 1, 3, 6, 5, 4, 7]);
        assert_eq!(d, (0..8).collect::<Vec<_>>());
        assert!(
            ev.iter()
                .all(|e| matches!(e, SeqEvent::First | SeqEvent::InOrder))
        );
    }

    #[test]
    fn a_datagram_beyond_the_gap_limit_from_a_hole_resyncs_after_the_held_ones() {
        // 1 is lost, 2 and 3 are held; 32 770 is 32 769 past the hole (more than the
        // 16-bit space's limit of 32 767) and 32 766 past 3: a resync all the same.
        let mut cfg = SeqConfig::for_bits(64);
        cfg.max_gap = 32_767;
        let mut r = Reorder::new(cfg, 3);
        let mut out = Vec::new();
        for s in [0, 2, 3, 32_770] {
            r.push(s, s, &mut out);
        }
        let ev: Vec<_> = out.iter().map(|d| d.event).collect();
        assert_eq!(
            ev,
            [
                SeqEvent::First,
                SeqEvent::Gap { missed: 1 },
                SeqEvent::InOrder,
                SeqEvent::Resync
            ]
        );
        assert!(out.iter().all(|d| d.deliver));
    }

    #[test]
    fn reorder_declares_gap_when_window_overflows() {
        // 1 is lost; window 2: 2 and 3 are held, 4 does not fit so 1 is given up.
        let (d, ev) = reorder(2, &[0, 2, 3, 4, 5]);
        assert_eq!(d, [0, 2, 3, 4, 5]);
        assert_eq!(ev[1], SeqEvent::Gap { missed: 1 });
        // A late arrival after that is counted late and not delivered.
        let (d, ev) = reorder(2, &[0, 2, 3, 4, 1, 5]);
        assert_eq!(d, [0, 2, 3, 4, 5]);
        assert!(ev.contains(&SeqEvent::Late));
    }

    /// Found by `cargo xtask fuzz` (target seq_tracker).
    #[test]
    fn fuzz_finding_reorder_delivers_in_order() {
        let seqs = [
            11782u64, 1000, 65512, 255, 65282, 65535, 65535, 767, 65280, 65535, 0, 1, 2, 3,
        ];
        let mut r = Reorder::new(SeqConfig::for_bits(64), 55);
        let mut out = Vec::new();
        for s in seqs {
            r.push(s, s, &mut out);
        }
        r.flush_all(&mut out);
        let d: Vec<(u64, SeqEvent)> = out
            .iter()
            .filter(|d| d.deliver)
            .map(|d| (d.item, d.event))
            .collect();
        let mut last: Option<u64> = None;
        for &(item, event) in &d {
            if !matches!(event, SeqEvent::Resync | SeqEvent::First)
                && let Some(l) = last
            {
                assert!(item > l, "{d:?}");
            }
            last = Some(item);
        }
    }

    #[test]
    fn reorder_counts_every_overtaken_datagram() {
        // 2 overtaken by 3; 5 overtaken by 6 while 4 is still missing.
        let mut r = Reorder::new(SeqConfig::for_bits(16), 8);
        let mut out = Vec::new();
        for s in [0, 1, 3, 2, 6, 5, 4, 7] {
            r.push(s, s, &mut out);
        }
        assert_eq!(r.restored(), 3); // 2, 5 and 4
        let d: Vec<u64> = out.iter().filter(|d| d.deliver).map(|d| d.item).collect();
        assert_eq!(d, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn reorder_drops_duplicates_held_and_delivered() {
        let (d, ev) = reorder(4, &[0, 2, 2, 1, 1, 3]);
        assert_eq!(d, [0, 1, 2, 3]);
        assert_eq!(ev.iter().filter(|e| **e == SeqEvent::Duplicate).count(), 2);
    }

    #[test]
    fn reorder_window_zero_is_plain_tracking() {
        let (d, ev) = reorder(0, &[0, 2, 1, 3]);
        assert_eq!(d, [0, 2, 3]);
        assert_eq!(ev[1], SeqEvent::Gap { missed: 1 });
        assert_eq!(ev[2], SeqEvent::Late);
    }

    /// With a 4-bit sequence space the window is bounded to 3: a larger one made packets
    /// 16 apart indistinguishable (VRT drops counted as duplicates).
    #[test]
    fn window_is_bounded_by_the_sequence_space() {
        let r: Reorder<u64> = Reorder::new(SeqConfig::for_bits(4), 64);
        assert_eq!(r.window(), 3);
        let mut r = Reorder::new(SeqConfig::for_bits(4), 64);
        let mut out = Vec::new();
        // Drop every 7th of 200 packets.
        for k in (0..200u64).filter(|k| (k + 1) % 7 != 0) {
            r.push(k % 16, k, &mut out);
        }
        r.flush_all(&mut out);
        let missed: u64 = out
            .iter()
            .map(|d| match d.event {
                SeqEvent::Gap { missed } => missed,
                _ => 0,
            })
            .sum();
        assert_eq!(missed, 28);
        assert!(out.iter().all(|d| d.event != SeqEvent::Duplicate));
    }

    #[test]
    fn reorder_far_jump_flushes_and_gaps() {
        let (d, ev) = reorder(4, &[0, 2, 100, 101]);
        assert_eq!(d, [0, 2, 100, 101]);
        assert_eq!(ev[1], SeqEvent::Gap { missed: 1 });
        assert_eq!(ev[2], SeqEvent::Gap { missed: 97 });
    }
}
