//! The counters of a multi-stream source ([`MultiUdpSource`](super::MultiUdpSource),
//! [`MultiInPlaceUdpSource`](super::MultiInPlaceUdpSource)): the port's, each output's and
//! the streams no output asked for.

use std::collections::{BTreeMap, HashMap};

use fsdr_net_io::Stats;
use fsdr_net_io::depacketizer::DepacketizerStats;
use futuresdr::runtime::Pmt;
use serde::Serialize;

/// The counters of one output of a [`MultiUdpSource`](super::MultiUdpSource).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StreamStats {
    /// Which datagrams the output takes.
    pub selector: String,
    /// Datagrams delivered to this output.
    pub datagrams: u64,
    /// Frames missing from this stream, from its own sequence numbers.
    pub missed: u64,
    /// Datagrams dropped because this output's reader fell behind while the other outputs
    /// were served (its backlog of waiting datagrams was full); zero-filled like a gap.
    pub overflow: u64,
    /// Items, zeros, gaps and copies of this output.
    #[serde(flatten)]
    pub stream: DepacketizerStats,
}

/// Every counter of a [`MultiUdpSource`](super::MultiUdpSource): the engine's (for the port), each output's, and the
/// datagrams of streams no output asked for, per stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MultiSourceStats {
    /// The receive engine's counters for the whole port.
    pub engine: Stats,
    /// One entry per output, in output order.
    pub streams: Vec<StreamStats>,
    /// Datagrams of streams no output selected ("skipped" per stream key).
    pub skipped_by_stream: BTreeMap<String, u64>,
}

impl MultiSourceStats {
    /// The counters of a source with one receiver (socket) per output: `engine` adds up
    /// theirs (`Stats::combined`), each output's `datagrams` are the data datagrams its
    /// receiver's depacketizer took (its `delivered` counts the stream's VRT context
    /// packets too, which `MultiUdpSource` does not count in an output's `datagrams`), its
    /// `missed` the receiver's (none dropped behind a reader: `overflow` 0).
    pub(super) fn of_receivers(
        selectors: &[fsdr_net_io::StreamSelector],
        each: impl IntoIterator<Item = super::SourceStats>,
        skipped: impl Iterator<Item = (String, u64)>,
    ) -> Self {
        let mut skipped_by_stream = BTreeMap::new();
        for (key, n) in skipped {
            *skipped_by_stream.entry(key).or_default() += n;
        }
        let each: Vec<_> = each.into_iter().collect();
        MultiSourceStats {
            engine: Stats::combined(each.iter().map(|s| &s.engine)),
            streams: selectors
                .iter()
                .zip(&each)
                .map(|(sel, s)| StreamStats {
                    selector: sel.to_string(),
                    datagrams: s.stream.datagrams,
                    missed: s.engine.missed,
                    overflow: 0,
                    stream: s.stream,
                })
                .collect(),
            skipped_by_stream,
        }
    }

    /// As a `Pmt::MapStrPmt`: every engine counter under its own name, each output's as
    /// `"<output>.<name>"` (`0.missed`, `1.items`, …), and `skipped.<stream key>`.
    pub fn to_pmt(&self) -> Pmt {
        let mut m: HashMap<String, Pmt> = self
            .engine
            .fields()
            .map(|(k, v)| (k.to_string(), Pmt::U64(v)))
            .collect();
        for (i, s) in self.streams.iter().enumerate() {
            m.insert(format!("{i}.datagrams"), Pmt::U64(s.datagrams));
            m.insert(format!("{i}.missed"), Pmt::U64(s.missed));
            m.insert(format!("{i}.overflow"), Pmt::U64(s.overflow));
            for (k, v) in s.stream.fields() {
                m.insert(format!("{i}.{k}"), Pmt::U64(v));
            }
        }
        for (k, v) in &self.skipped_by_stream {
            m.insert(format!("skipped.{k}"), Pmt::U64(*v));
        }
        Pmt::MapStrPmt(m)
    }
}

impl std::fmt::Display for MultiSourceStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.engine)?;
        for (i, s) in self.streams.iter().enumerate() {
            writeln!(
                f,
                "output {i} ({}): {} datagrams, {} missed frames, {} dropped behind its reader, \
                 {} items ({} zeros)",
                s.selector,
                s.datagrams,
                s.missed,
                s.overflow,
                s.stream.items,
                s.stream.zeros_inserted
            )?;
        }
        for (k, v) in &self.skipped_by_stream {
            writeln!(f, "skipped ({k}): {v} datagrams")?;
        }
        Ok(())
    }
}
