//! Matching start and end events by (pipe, boundary) and the latency statistics.
//!
//! Events are fed one at a time in any order ([`Matcher::push`]); only events still waiting
//! for their partner are held, so a trace of millions of events needs memory for the latency
//! samples (8 bytes each) and the in-flight boundaries only.
//!
//! ```
//! use fsdr_net_trace::analysis::{Matcher, Pairing};
//! use fsdr_net_trace::event::{Event, Kind};
//!
//! let ev = |ts, kind, seq| Event { ts, kind, block: 0, seq, arrival_ns: 0 };
//! let mut m = Matcher::new(Pairing::TxRx);
//! m.push(ev(100, Kind::Tx, 0));
//! m.push(ev(250, Kind::Rx, 0));
//! m.push(ev(300, Kind::Rx, 1)); // its tx is missing
//! let report = m.finish();
//! assert_eq!(report.overall.count, 1);
//! assert_eq!(report.overall.min_ns, 150);
//! assert_eq!(report.overall.unmatched_end, 1);
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::event::{Event, Kind};

/// Which events start and end a latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pairing {
    /// Source `tx` to sink `rx`.
    TxRx,
    /// Source `tx` to a pass-through `probe`.
    TxProbe,
    /// Pass-through `probe` to sink `rx`.
    ProbeRx,
    /// Network arrival (the `arrival_ns` field of a `UdpSource`'s `arrival` event, when the
    /// datagram left the kernel) to sink `rx`.
    NetworkRx,
    /// `UdpSource` handing the boundary over (the `arrival` event's own time) to sink `rx`.
    SourceRx,
    /// Per datagram, from its arrival (`arrival_ns` of a `packet` event: the kernel's
    /// timestamp when the socket has them, else the receive thread's read) to `UdpSource`
    /// taking it (the event's own time). One event holds both ends.
    NetworkSource,
}

impl Pairing {
    /// Every pairing, for command-line parsing.
    pub const ALL: [Pairing; 6] = [
        Pairing::TxRx,
        Pairing::TxProbe,
        Pairing::ProbeRx,
        Pairing::NetworkRx,
        Pairing::SourceRx,
        Pairing::NetworkSource,
    ];

    /// Short name: `tx-rx`, `tx-probe`, `probe-rx`, `network-rx`, `source-rx`,
    /// `network-source`.
    pub fn name(self) -> &'static str {
        match self {
            Pairing::TxRx => "tx-rx",
            Pairing::TxProbe => "tx-probe",
            Pairing::ProbeRx => "probe-rx",
            Pairing::NetworkRx => "network-rx",
            Pairing::SourceRx => "source-rx",
            Pairing::NetworkSource => "network-source",
        }
    }

    /// The start time an event gives, if it is a start event of this pairing.
    fn start(self, e: &Event) -> Option<u64> {
        match (self, e.kind) {
            (Pairing::TxRx | Pairing::TxProbe, Kind::Tx) => Some(e.ts),
            (Pairing::ProbeRx, Kind::Probe) => Some(e.ts),
            (Pairing::NetworkRx, Kind::Arrival) => Some(e.arrival_ns),
            (Pairing::SourceRx, Kind::Arrival) => Some(e.ts),
            (Pairing::NetworkSource, Kind::Packet) => Some(e.arrival_ns),
            _ => None,
        }
    }

    fn is_end(self, e: &Event) -> bool {
        match self {
            Pairing::TxProbe => e.kind == Kind::Probe,
            Pairing::NetworkSource => e.kind == Kind::Packet,
            _ => e.kind == Kind::Rx,
        }
    }
}

impl std::str::FromStr for Pairing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Pairing::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Pairing::ALL.iter().map(|p| p.name()).collect();
                format!(
                    "unknown pairing {s:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// One matched pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Pipe id.
    pub block: u64,
    /// Boundary index.
    pub seq: u64,
    /// Start time (ns).
    pub start_ns: u64,
    /// End time (ns).
    pub end_ns: u64,
}

impl Sample {
    /// End minus start, in nanoseconds (negative if the clocks of two CPUs disagreed).
    pub fn latency_ns(&self) -> i64 {
        self.end_ns as i64 - self.start_ns as i64
    }
}

/// Latency statistics of one pipe or of all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Matched pairs.
    pub count: u64,
    /// Start events that found no end.
    pub unmatched_start: u64,
    /// End events that found no start.
    pub unmatched_end: u64,
    /// Events seen a second time for the same (pipe, boundary), ignored.
    pub duplicates: u64,
    /// Pairs whose end came before their start (kept in the statistics).
    pub negative: u64,
    /// Smallest latency (ns).
    pub min_ns: i64,
    /// 5th percentile (ns).
    pub p5_ns: i64,
    /// Median (ns).
    pub p50_ns: i64,
    /// 95th percentile (ns).
    pub p95_ns: i64,
    /// 99th percentile (ns).
    pub p99_ns: i64,
    /// Largest latency (ns).
    pub max_ns: i64,
    /// Mean latency (ns).
    pub mean_ns: f64,
}

/// The `q`-quantile (0..=1) of ascending `sorted` by nearest rank; 0 when empty.
///
/// ```
/// use fsdr_net_trace::analysis::percentile;
/// let v: Vec<i64> = (1..=100).collect();
/// assert_eq!(percentile(&v, 0.5), 50);
/// assert_eq!(percentile(&v, 0.99), 99);
/// assert_eq!(percentile(&v, 1.0), 100);
/// ```
pub fn percentile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Stats {
    fn from_sorted(sorted: &[i64]) -> Stats {
        if sorted.is_empty() {
            return Stats::default();
        }
        let sum: f64 = sorted.iter().map(|&v| v as f64).sum();
        Stats {
            count: sorted.len() as u64,
            negative: sorted.iter().take_while(|&&v| v < 0).count() as u64,
            min_ns: sorted[0],
            p5_ns: percentile(sorted, 0.05),
            p50_ns: percentile(sorted, 0.50),
            p95_ns: percentile(sorted, 0.95),
            p99_ns: percentile(sorted, 0.99),
            max_ns: sorted[sorted.len() - 1],
            mean_ns: sum / sorted.len() as f64,
            ..Stats::default()
        }
    }
}

/// The result of a matching pass.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Per pipe id.
    pub pipes: BTreeMap<u64, Stats>,
    /// All pipes together.
    pub overall: Stats,
    /// Latencies per pipe, ascending (for plots).
    pub sorted: BTreeMap<u64, Vec<i64>>,
}

#[derive(Default)]
struct Pipe {
    starts: HashMap<u64, u64>,
    ends: HashMap<u64, u64>,
    latencies: Vec<i64>,
    duplicates: u64,
    /// Every boundary below this one is matched.
    matched_below: u64,
    /// Matched boundaries above `matched_below` (as many as events run out of order).
    matched_ahead: BTreeSet<u64>,
}

impl Pipe {
    fn is_matched(&self, seq: u64) -> bool {
        seq < self.matched_below || self.matched_ahead.contains(&seq)
    }

    fn mark_matched(&mut self, seq: u64) {
        if seq == self.matched_below {
            self.matched_below += 1;
            while self.matched_ahead.remove(&self.matched_below) {
                self.matched_below += 1;
            }
        } else if seq > self.matched_below {
            self.matched_ahead.insert(seq);
        }
    }
}

/// Called for every matched pair.
type SampleFn = Box<dyn FnMut(&Sample)>;

/// Pairs start and end events of one [`Pairing`] by (pipe, boundary).
pub struct Matcher {
    pairing: Pairing,
    pipes: BTreeMap<u64, Pipe>,
    on_sample: Option<SampleFn>,
}

impl Matcher {
    /// A matcher for `pairing`.
    pub fn new(pairing: Pairing) -> Self {
        Matcher {
            pairing,
            pipes: BTreeMap::new(),
            on_sample: None,
        }
    }

    /// Calls `f` for every matched pair as it is found (for writing a CSV while reading).
    pub fn on_sample(mut self, f: impl FnMut(&Sample) + 'static) -> Self {
        self.on_sample = Some(Box::new(f));
        self
    }

    fn matched(&mut self, block: u64, seq: u64, start_ns: u64, end_ns: u64) {
        self.record(block, seq, start_ns, end_ns);
        let pipe = self.pipes.get_mut(&block).expect("pipe exists");
        pipe.mark_matched(seq);
    }

    /// Counts one latency sample.
    fn record(&mut self, block: u64, seq: u64, start_ns: u64, end_ns: u64) {
        let s = Sample {
            block,
            seq,
            start_ns,
            end_ns,
        };
        if let Some(f) = self.on_sample.as_mut() {
            f(&s);
        }
        let pipe = self.pipes.entry(block).or_default();
        pipe.latencies.push(s.latency_ns());
    }

    /// Feeds one event; events of other kinds are ignored.
    pub fn push(&mut self, e: Event) {
        let start = self.pairing.start(&e);
        let end = self.pairing.is_end(&e);
        if start.is_none() && !end {
            return;
        }
        if let (Some(t), true) = (start, end) {
            // Both ends in one event: nothing to match, and its number (a datagram's wire
            // counter) may wrap, so a repeat is no duplicate.
            self.record(e.block, e.seq, t, e.ts);
            return;
        }
        let pipe = self.pipes.entry(e.block).or_default();
        if pipe.is_matched(e.seq) {
            pipe.duplicates += 1;
            return;
        }
        if let Some(t) = start {
            if let Some(end_ns) = pipe.ends.remove(&e.seq) {
                self.matched(e.block, e.seq, t, end_ns);
            } else if pipe.starts.insert(e.seq, t).is_some() {
                pipe.duplicates += 1;
            }
        } else if let Some(start_ns) = pipe.starts.remove(&e.seq) {
            self.matched(e.block, e.seq, start_ns, e.ts);
        } else if pipe.ends.insert(e.seq, e.ts).is_some() {
            pipe.duplicates += 1;
        }
    }

    /// Statistics per pipe and overall; events still waiting count as unmatched.
    pub fn finish(self) -> Report {
        let mut report = Report::default();
        let mut all = Vec::new();
        let (mut us, mut ue, mut dup) = (0, 0, 0);
        for (block, mut pipe) in self.pipes {
            pipe.latencies.sort_unstable();
            let mut s = Stats::from_sorted(&pipe.latencies);
            s.unmatched_start = pipe.starts.len() as u64;
            s.unmatched_end = pipe.ends.len() as u64;
            s.duplicates = pipe.duplicates;
            us += s.unmatched_start;
            ue += s.unmatched_end;
            dup += s.duplicates;
            all.extend_from_slice(&pipe.latencies);
            report.pipes.insert(block, s);
            report.sorted.insert(block, pipe.latencies);
        }
        all.sort_unstable();
        report.overall = Stats::from_sorted(&all);
        report.overall.unmatched_start = us;
        report.overall.unmatched_end = ue;
        report.overall.duplicates = dup;
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, kind: Kind, block: u64, seq: u64) -> Event {
        Event {
            ts,
            kind,
            block,
            seq,
            arrival_ns: 0,
        }
    }

    #[test]
    fn matches_per_pipe_in_any_order() {
        let mut events = Vec::new();
        for block in 0..3u64 {
            for seq in 0..100u64 {
                let t = 1_000 * seq + block;
                events.push(ev(t, Kind::Tx, block, seq));
                events.push(ev(t + 10 * (block + 1) + seq % 5, Kind::Rx, block, seq));
            }
        }
        // Out of order: reversed, then interleaved.
        events.reverse();
        let (a, b) = events.split_at(events.len() / 2);
        let mixed: Vec<Event> = a.iter().zip(b).flat_map(|(x, y)| [*y, *x]).collect();
        let mut m = Matcher::new(Pairing::TxRx);
        for e in mixed {
            m.push(e);
        }
        let r = m.finish();
        assert_eq!(r.overall.count, 300);
        assert_eq!(r.overall.unmatched_start + r.overall.unmatched_end, 0);
        for (block, s) in &r.pipes {
            let base = 10 * (*block as i64 + 1);
            assert_eq!(s.count, 100);
            assert_eq!((s.min_ns, s.max_ns), (base, base + 4));
            assert_eq!(s.p50_ns, base + 2);
        }
    }

    #[test]
    fn unmatched_duplicate_and_negative_events_are_counted() {
        let mut m = Matcher::new(Pairing::TxRx);
        m.push(ev(100, Kind::Tx, 0, 0));
        m.push(ev(150, Kind::Rx, 0, 0));
        m.push(ev(160, Kind::Rx, 0, 0)); // duplicate of a matched boundary
        m.push(ev(200, Kind::Tx, 0, 1)); // never received
        m.push(ev(300, Kind::Rx, 0, 2)); // never sent
        m.push(ev(400, Kind::Tx, 0, 3));
        m.push(ev(400, Kind::Tx, 0, 3)); // duplicate start
        m.push(ev(390, Kind::Rx, 0, 3)); // clocks disagree
        m.push(ev(10, Kind::Probe, 0, 9)); // not part of tx-rx
        let r = m.finish();
        let s = &r.pipes[&0];
        assert_eq!(s.count, 2);
        assert_eq!((s.unmatched_start, s.unmatched_end), (1, 1));
        assert_eq!(s.duplicates, 2);
        assert_eq!(s.negative, 1);
        assert_eq!((s.min_ns, s.max_ns), (-10, 50));
    }

    #[test]
    fn network_pairing_uses_the_arrival_field() {
        let mut m = Matcher::new(Pairing::NetworkRx);
        m.push(Event {
            ts: 500,
            kind: Kind::Arrival,
            block: 4,
            seq: 0,
            arrival_ns: 420,
        });
        m.push(ev(900, Kind::Rx, 4, 0));
        let r = m.finish();
        assert_eq!(r.overall.min_ns, 480);
        let mut m = Matcher::new(Pairing::SourceRx);
        m.push(Event {
            ts: 500,
            kind: Kind::Arrival,
            block: 4,
            seq: 0,
            arrival_ns: 420,
        });
        m.push(ev(900, Kind::Rx, 4, 0));
        assert_eq!(m.finish().overall.min_ns, 400);
    }

    #[test]
    fn network_source_pairs_each_packet_event_with_itself() {
        let packet = |ts, seq, arrival_ns| Event {
            ts,
            kind: Kind::Packet,
            block: 2,
            seq,
            arrival_ns,
        };
        let mut m = Matcher::new(Pairing::NetworkSource);
        m.push(packet(500, 0, 420));
        m.push(packet(700, 1, 460));
        m.push(ev(900, Kind::Rx, 2, 0)); // not this pairing's
        m.push(packet(800, 1, 470)); // a wire counter that wrapped: another datagram
        let r = m.finish();
        assert_eq!(r.overall.count, 3);
        assert_eq!((r.overall.min_ns, r.overall.max_ns), (80, 330));
        assert_eq!(r.overall.duplicates, 0);
        assert_eq!((r.overall.unmatched_start, r.overall.unmatched_end), (0, 0));
    }

    #[test]
    fn samples_are_reported_as_found() {
        use std::sync::{Arc, Mutex};
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let mut m = Matcher::new(Pairing::TxRx).on_sample(move |s| s2.lock().unwrap().push(*s));
        m.push(ev(1, Kind::Tx, 0, 0));
        m.push(ev(5, Kind::Rx, 0, 0));
        drop(m.finish());
        assert_eq!(seen.lock().unwrap()[0].latency_ns(), 4);
    }

    #[test]
    fn percentiles_of_empty_and_single() {
        assert_eq!(percentile(&[], 0.5), 0);
        assert_eq!(percentile(&[7], 0.01), 7);
        assert_eq!(Stats::from_sorted(&[]).count, 0);
    }
}
