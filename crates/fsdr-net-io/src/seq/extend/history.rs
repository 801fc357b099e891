//! What the extender remembers of the packets it placed: the last [`REMEMBERED`]
//! positions, each with its stamp, length and (without stamps) payload fingerprint. A
//! packet behind the newest one is a copy of what was received at its position only where
//! that proves it, and a late one only where nothing was received there and its time lies
//! between its neighbours'; otherwise (with stamps) the clock went back: a restart.

use super::{Newest, SeqExtender};
use crate::seq::SeqPacket;

/// Positions remembered.
pub(super) const REMEMBERED: usize = 1024;

/// Gaps remembered (their positions, beyond the [`REMEMBERED`] ones too).
const GAPS: usize = 256;

/// A widened number as a position: numbers a wrapping subtraction took below 0 (a late
/// packet from before a stream that began at 0) are negative.
pub(super) fn pos(ext: u64) -> i128 {
    i128::from(ext as i64)
}

/// A packet placed at a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) ext: u64,
    pub(super) ticks: Option<u64>,
    pub(super) payload: usize,
    pub(super) print: Option<u64>,
}

/// The last [`REMEMBERED`] positions placed since the stream (re)started.
#[derive(Debug, Clone, Default)]
pub(super) struct History {
    seen: Vec<Option<Seen>>,
    /// The number the stream (re)started with.
    first: u64,
    /// The stream started (not restarted) there: a packet before it may be a late one of
    /// the stream's (after a restart it would be one from before the restart).
    started: bool,
    /// The last [`GAPS`] runs of positions missed, `[from, to)`, oldest first: beyond the
    /// positions remembered, a packet is late only inside one of them.
    gaps: std::collections::VecDeque<(i128, i128)>,
}

impl History {
    /// The number the stream (re)started with.
    pub(super) fn first(&self) -> u64 {
        self.first
    }

    /// The stream starts (`started`) or restarts at `ext`: nothing before it was received.
    pub(super) fn restart(&mut self, ext: u64, started: bool) {
        self.first = ext;
        self.started = started;
        self.seen.iter_mut().for_each(|s| *s = None);
        self.gaps.clear();
    }

    /// Positions `[from, to)` were missed (a gap before the packet at `to`).
    pub(super) fn missed(&mut self, from: i128, to: i128) {
        if from >= to {
            return;
        }
        if self.gaps.len() == GAPS {
            self.gaps.pop_front();
        }
        self.gaps.push_back((from, to));
    }

    /// Takes position `q` out of the gap remembered it lies in, if any (a late packet filled
    /// it: a second one there is no late one).
    pub(super) fn fill_missed(&mut self, q: i128) {
        let Some(i) = self.gaps.iter().position(|&(a, b)| (a..b).contains(&q)) else {
            return;
        };
        let (a, b) = self.gaps[i];
        match (a == q, q + 1 == b) {
            (true, true) => {
                self.gaps.remove(i);
            }
            (true, false) => self.gaps[i].0 = q + 1,
            (false, true) => self.gaps[i].1 = q,
            (false, false) => {
                self.gaps[i].1 = q;
                self.gaps.insert(i + 1, (q + 1, b));
            }
        }
    }

    /// Whether position `q` lies in a gap remembered.
    fn was_missed(&self, q: i128) -> bool {
        self.gaps.iter().any(|&(a, b)| (a..b).contains(&q))
    }

    pub(super) fn remember(&mut self, s: Seen) {
        if self.seen.is_empty() {
            self.seen = vec![None; REMEMBERED];
        }
        self.seen[s.ext as usize % REMEMBERED] = Some(s);
    }

    /// Whether position `q` lies within what is remembered behind `newest`.
    fn within(q: i128, newest: u64) -> bool {
        let back = pos(newest) - q;
        (0..REMEMBERED as i128).contains(&back)
    }

    /// What was received at position `q` (within what is remembered behind `newest`).
    pub(super) fn at(&self, q: i128, newest: u64) -> Option<Seen> {
        if !Self::within(q, newest) {
            return None;
        }
        let s = (*self.seen.get(q as u64 as usize % REMEMBERED)?)?;
        (pos(s.ext) == q).then_some(s)
    }

    /// The nearest position received before `q` (within what is remembered).
    fn before(&self, q: i128, newest: u64) -> Option<Seen> {
        let oldest = pos(newest) - REMEMBERED as i128 + 1;
        (oldest.max(pos(self.first))..q)
            .rev()
            .find_map(|r| self.at(r, newest))
    }

    /// The nearest position received after `q`, up to the newest one.
    fn after(&self, q: i128, newest: u64) -> Option<Seen> {
        (q + 1..=pos(newest)).find_map(|r| self.at(r, newest))
    }

    /// Whether a position other than `q` remembered behind `newest` received a payload with
    /// the fingerprint `print`: the stream's payloads repeat, and equal bytes prove no copy.
    fn print_elsewhere(&self, q: i128, newest: u64, print: u64) -> bool {
        self.seen.iter().flatten().any(|s| {
            let e = pos(s.ext);
            e != q && Self::within(e, newest) && s.print == Some(print)
        })
    }
}

/// What a packet behind the newest one is at a position (its number widened).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Behind {
    /// A copy of the packet received there: the same stamp and length (with stamps), the
    /// same payload that no other position received (without).
    Copy,
    /// Nothing was received there (since the stream's start, within what is remembered),
    /// and its time fits between its neighbours': late.
    Late,
    /// Something else was received there, or its time does not fit.
    Not,
}

impl SeqExtender {
    /// What a packet with a usable stamp placed at `q` behind the newest one `n` is there:
    /// a copy carries the stamp and length of the packet received there; a late one, where
    /// nothing was, starts after its received predecessor's end and ends before its
    /// received successor's start, each packet between holding what one unit resolves at
    /// least (before the stream's first packet, within as many of the stream's largest
    /// packets of it: a clock set back before the stream's start is no late packet).
    pub(super) fn behind_timed(&self, q: i128, p: &SeqPacket, n: &Newest) -> Behind {
        if !History::within(q, n.ext) {
            return Behind::Not;
        }
        if let Some(s) = self.history.at(q, n.ext) {
            return if s.ticks == p.ticks && s.payload == p.payload {
                Behind::Copy
            } else {
                Behind::Not
            };
        }
        let Some(place) = p.ticks.and_then(|t| self.timeline.place(t)) else {
            return self.behind_by_order(q, p, n);
        };
        // Positions, and how far off each may be (the ratio's uncertainty, the stamps'
        // rounding).
        let slack = |pos: i128| self.timeline.tolerance(pos) + self.timeline.quantum();
        let at = |s: &Seen| {
            s.ticks
                .and_then(|t| self.timeline.place(t))
                .map(|pl| pl.pos)
        };
        let start = place.pos;
        let end = start + self.units(p.payload);
        let least = self.timeline.least_packet();
        let after = self.history.after(q, n.ext);
        let fits_before = if q < pos(self.history.first()) {
            let nominal = self.units(self.nominal).max(1);
            after.is_some_and(|a| {
                at(&a).is_some_and(|s| {
                    start + slack(start) + slack(s) >= s - (pos(a.ext) - q) * nominal
                })
            })
        } else {
            self.history.before(q, n.ext).is_none_or(|b| {
                at(&b).is_some_and(|s| {
                    let b_end = s + self.units(b.payload);
                    start + slack(start) + slack(s) >= b_end + (q - pos(b.ext) - 1) * least
                })
            })
        };
        let fits_after = after.is_none_or(|a| {
            at(&a)
                .is_some_and(|s| end + (pos(a.ext) - q - 1) * least <= s + slack(start) + slack(s))
        });
        if fits_before && fits_after {
            Behind::Late
        } else {
            Behind::Not
        }
    }

    /// [`behind_timed`](Self::behind_timed) where no rate places the packet: a late one's
    /// stamp lies between its received neighbours' (before the stream's first packet, it
    /// is earlier than the first one's).
    fn behind_by_order(&self, q: i128, p: &SeqPacket, n: &Newest) -> Behind {
        let Some(t) = p.ticks else {
            return Behind::Not;
        };
        // Whether stamp `a` is earlier than `b` (on the wrapping tick scale).
        let earlier = |a: Option<u64>, b: u64| a.is_some_and(|a| (b.wrapping_sub(a) as i64) > 0);
        let after = self.history.after(q, n.ext);
        let fits_before = if q < pos(self.history.first()) {
            after.is_some()
        } else {
            self.history
                .before(q, n.ext)
                .is_none_or(|b| earlier(b.ticks, t))
        };
        let fits_after = after.is_none_or(|a| a.ticks.is_some_and(|at| earlier(Some(t), at)));
        if fits_before && fits_after {
            Behind::Late
        } else {
            Behind::Not
        }
    }

    /// Where a packet stamped earlier than the newest one `n` (or at its stamp with another
    /// number, `d` ahead by the counter) belongs: the counter's value behind at which it is a
    /// copy of what was received there or a late packet — nearest to where the time puts it
    /// where a rate places it, else to the counter's nearest number — each packet between
    /// holding what one unit resolves at least. `None`: none such (the clock went back) or
    /// not stamped earlier.
    pub(super) fn behind_place(
        &self,
        d: u64,
        plain: i64,
        p: &SeqPacket,
        n: &Newest,
    ) -> Option<i128> {
        let dt = p.ticks?.wrapping_sub(n.ticks?) as i64;
        if dt > 0 || (dt == 0 && d == 0) {
            return None;
        }
        let nominal = self.units(self.nominal).max(1);
        let (est, max_back) = match (self.timeline.place(p.ticks?), n.start) {
            (Some(s), Some(ns)) => {
                let (rel, tol) = (
                    s.pos - ns,
                    self.timeline.tolerance(s.pos) + self.timeline.quantum(),
                );
                (
                    (rel as f64 / nominal as f64, tol as f64 / nominal as f64),
                    (-rel + tol) / self.timeline.least_packet(),
                )
            }
            // No rate: the counter's nearest number first.
            _ => {
                let near = i128::from(plain) - if plain > 0 { self.period as i128 } else { 0 };
                ((near as f64, 0.0), REMEMBERED as i128)
            }
        };
        self.find_behind(d, est, max_back, p, n)
    }

    /// Of the counter's values behind the newest one `n` (`d` ahead of it by the counter)
    /// down to `max_back`, the one nearest to `est` (packets behind, and how far off that
    /// may be) where `p` is a copy or a late packet.
    /// Before the stream's first packet nothing bounds a late one's place but the time's
    /// estimate: only the nearest number may lie there, less than half the counter's period
    /// before it (a clock set back before the stream's start is no late packet), and only
    /// before the stream's start, not its restart.
    pub(super) fn find_behind(
        &self,
        d: u64,
        (est, spread): (f64, f64),
        max_back: i128,
        p: &SeqPacket,
        n: &Newest,
    ) -> Option<i128> {
        let (period, newest) = (self.period as i128, pos(n.ext));
        let first = pos(self.history.first());
        candidates_behind(d as i128, period, est, max_back)
            .enumerate()
            .find(|&(i, k)| {
                let q = newest + k;
                if q < first {
                    i == 0
                        && first - q < period / 2
                        && self.history.started
                        && self.behind_timed(q, p, n) != Behind::Not
                } else if !History::within(q, n.ext) {
                    // Beyond the positions remembered: a straggler where the time puts it
                    // (within the estimate's uncertainty: a learnt ratio's over the
                    // distance), in a gap remembered (else, where something was received
                    // or nothing is known, the clock went back).
                    (k as f64 - est).abs() < 1.0 + spread && self.history.was_missed(q)
                } else {
                    self.behind_timed(q, p, n) != Behind::Not
                }
            })
            .map(|(_, k)| k)
    }

    /// What a packet without a usable stamp placed at `q` behind the newest one `n` is
    /// there: a copy where the payload received there had its fingerprint and no other
    /// position remembered had it (repeating payloads — silence, a constant — prove
    /// nothing); late where nothing was received there.
    pub(super) fn behind_untimed(&self, q: i128, print: u64, n: &Newest) -> Behind {
        match self.history.at(q, n.ext) {
            None => Behind::Late,
            Some(s) if s.print == Some(print) && !self.history.print_elsewhere(q, n.ext, print) => {
                Behind::Copy
            }
            Some(_) => Behind::Not,
        }
    }

    /// Remembers the packet placed at `ext`, unless something was received there, and the
    /// gap before it (ahead of the newest one), or that it filled a gap's position (behind:
    /// late, once).
    pub(super) fn remember(&mut self, ext: u64, p: &SeqPacket) {
        if let Some(n) = self.newest {
            let (q, last) = (pos(ext), pos(n.ext));
            if q > last + 1 {
                self.history.missed(last + 1, q);
            } else if q < last {
                self.history.fill_missed(q);
            }
        }
        let newest = self
            .newest
            .map_or(ext, |n| if pos(ext) > pos(n.ext) { ext } else { n.ext });
        if self.history.at(pos(ext), newest).is_some() {
            return;
        }
        self.history.remember(Seen {
            ext,
            ticks: p.ticks,
            payload: p.payload,
            print: p.fingerprint.filter(|_| p.ticks.is_none()),
        });
    }
}

/// The values `≡ d (mod period)` between `−max_back` and −1, nearest to `est` first (on a
/// tie the one nearer 0), at most as far back as what is remembered (or the nearest).
pub(super) fn candidates_behind(
    d: i128,
    period: i128,
    est: f64,
    max_back: i128,
) -> impl Iterator<Item = i128> {
    let k0 = if d == 0 { -period } else { d - period };
    // Beyond what is remembered only the nearest one can be a straggler.
    let max_back = max_back.min((REMEMBERED as i128).max(-k0));
    // The candidates are k0 − m·period for m in 0..=steps (none when k0 is too far).
    let steps = if -k0 > max_back {
        -1
    } else {
        (max_back + k0) / period
    };
    let at = move |m: i128| k0 - m * period;
    // The nearest one, then outward: `near` towards 0 (m decreasing), `far` away from it.
    let m = ((k0 as f64 - est) / period as f64)
        .floor()
        .clamp(0.0, steps.max(0) as f64) as i128;
    let (mut near, mut far) = (m, m + 1);
    std::iter::from_fn(move || {
        let n_ok = near >= 0 && near <= steps;
        let f_ok = far >= 0 && far <= steps;
        let take_near = match (n_ok, f_ok) {
            (false, false) => return None,
            (true, false) => true,
            (false, true) => false,
            (true, true) => (at(near) as f64 - est).abs() <= (at(far) as f64 - est).abs(),
        };
        if take_near {
            near -= 1;
            Some(at(near + 1))
        } else {
            far += 1;
            Some(at(far - 1))
        }
    })
}
