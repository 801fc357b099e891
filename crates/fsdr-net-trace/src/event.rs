//! Events of the `fsdr_net` LTTng provider, parsed from babeltrace2's text output one line at a
//! time, and the reader that runs babeltrace2 on a trace folder.
//!
//! babeltrace2 (the reference CTF reader) is run as
//! `babeltrace2 TRACE -c sink.text.pretty -p no-delta=yes,clock-cycles=yes,…`, which prints one
//! line per event with the raw clock value (CLOCK_MONOTONIC nanoseconds for LTTng-UST):
//!
//! ```text
//! timestamp = 00000002389698666361, name = fsdr_net:tx, stream.packet.context = { cpu_id = 0 }, event.fields = { block = 0, seq = 0 }
//! ```
//!
//! ```
//! use fsdr_net_trace::event::{Event, Kind};
//! let line = "timestamp = 00000000000000001500, name = fsdr_net:rx, \
//!             stream.packet.context = { cpu_id = 1 }, event.fields = { block = 2, seq = 7 }";
//! let e = Event::parse(line).unwrap().unwrap();
//! assert_eq!((e.ts, e.kind, e.block, e.seq), (1500, Kind::Rx, 2, 7));
//! ```

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// Which event of the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `fsdr_net:tx`: a source produced a boundary.
    Tx,
    /// `fsdr_net:rx`: a sink consumed a boundary.
    Rx,
    /// `fsdr_net:probe`: a boundary passed a probe.
    Probe,
    /// `fsdr_net:arrival`: a network source produced a boundary (carries `arrival_ns`).
    Arrival,
    /// `fsdr_net:packet`: a network source handed over a datagram.
    Packet,
}

impl Kind {
    fn from_name(name: &str) -> Option<Kind> {
        Some(match name.strip_prefix("fsdr_net:")? {
            "tx" => Kind::Tx,
            "rx" => Kind::Rx,
            "probe" => Kind::Probe,
            "arrival" => Kind::Arrival,
            "packet" => Kind::Packet,
            _ => return None,
        })
    }
}

/// One event: its clock value, kind and the fields the analysis uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Clock value in nanoseconds (CLOCK_MONOTONIC for LTTng-UST's default clock).
    pub ts: u64,
    /// Which event.
    pub kind: Kind,
    /// Pipe id.
    pub block: u64,
    /// Boundary index (or datagram sequence number for `packet`).
    pub seq: u64,
    /// `arrival` and `packet`: when the datagram left the kernel (CLOCK_MONOTONIC ns), else 0.
    pub arrival_ns: u64,
}

/// A line that looked like an event of this provider but could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable event line ({what}): {line}")]
pub struct ParseError {
    /// What was missing or malformed.
    pub what: &'static str,
    /// The line, shortened.
    pub line: String,
}

fn field(fields: &str, key: &str) -> Option<u64> {
    fields.split(", ").find_map(|kv| {
        let (k, v) = kv.split_once(" = ")?;
        (k.trim() == key).then(|| v.trim().parse().ok())?
    })
}

impl Event {
    /// Parses one line of babeltrace2's text output. `Ok(None)` for events of other providers
    /// (and lines that are not events); an error for an `fsdr_net` event that cannot be read.
    pub fn parse(line: &str) -> Result<Option<Event>, ParseError> {
        let err = |what| ParseError {
            what,
            line: line.chars().take(200).collect(),
        };
        let Some(rest) = line.strip_prefix("timestamp = ") else {
            return Ok(None);
        };
        let (ts, rest) = rest.split_once(", ").ok_or_else(|| err("timestamp"))?;
        let Some(rest) = rest.strip_prefix("name = ") else {
            return Ok(None);
        };
        let name = rest.split(", ").next().unwrap_or("");
        let Some(kind) = Kind::from_name(name) else {
            return Ok(None);
        };
        let ts: u64 = ts.trim().parse().map_err(|_| err("timestamp value"))?;
        let fields = rest
            .split_once("event.fields = { ")
            .map(|(_, f)| f.trim_end().trim_end_matches('}').trim_end())
            .ok_or_else(|| err("event.fields"))?;
        let block = field(fields, "block").ok_or_else(|| err("block"))?;
        let seq = field(fields, "seq").ok_or_else(|| err("seq"))?;
        let arrival_ns = match kind {
            Kind::Arrival | Kind::Packet => {
                field(fields, "arrival_ns").ok_or_else(|| err("arrival_ns"))?
            }
            _ => 0,
        };
        Ok(Some(Event {
            ts,
            kind,
            block,
            seq,
            arrival_ns,
        }))
    }
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// babeltrace2 could not be started.
    #[error("running babeltrace2 (install Debian's babeltrace2): {0}")]
    Spawn(std::io::Error),
    /// babeltrace2 failed.
    #[error("babeltrace2 failed ({status}): {stderr}")]
    Failed {
        /// Its exit status.
        status: std::process::ExitStatus,
        /// What it printed on stderr.
        stderr: String,
    },
    /// Reading its output failed.
    #[error("reading babeltrace2's output: {0}")]
    Io(#[from] std::io::Error),
    /// An event line could not be parsed.
    #[error(transparent)]
    Parse(#[from] ParseError),
}

/// What a reading pass saw besides the events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSummary {
    /// `fsdr_net` events read.
    pub events: u64,
    /// Events the tracer reported as discarded (ring buffer full in discard mode).
    pub discarded: u64,
    /// Packets the tracer reported as lost.
    pub lost_packets: u64,
}

/// Sums the counts of babeltrace2's "Tracer discarded N events" / "Tracer lost N trace
/// packets" warnings.
pub fn parse_warnings(stderr: &str, summary: &mut ReadSummary) {
    for line in stderr.lines() {
        let count = |word: &str| {
            line.split_once(word)
                .and_then(|(_, r)| r.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
        };
        if line.contains("events")
            && let Some(n) = count("discarded ")
        {
            summary.discarded += n;
        }
        if line.contains("packets")
            && let Some(n) = count("lost ")
        {
            summary.lost_packets += n;
        }
    }
}

/// Reads events from babeltrace2-style text, calling `each` per `fsdr_net` event, line by
/// line (nothing but the current line is held).
pub fn read_text(
    input: impl BufRead,
    mut each: impl FnMut(Event),
) -> Result<ReadSummary, ReadError> {
    let mut summary = ReadSummary::default();
    for line in input.lines() {
        if let Some(e) = Event::parse(&line?)? {
            summary.events += 1;
            each(e);
        }
    }
    Ok(summary)
}

/// Runs babeltrace2 on `trace` (a session folder or one holding `metadata`) and streams its
/// events to `each`.
pub fn read_trace(trace: &Path, each: impl FnMut(Event)) -> Result<ReadSummary, ReadError> {
    let mut child = Command::new("babeltrace2")
        .arg(trace)
        .args(["-c", "sink.text.pretty", "-p"])
        .arg("no-delta=yes,clock-cycles=yes,field-default=hide,name-default=show,color=\"never\"")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(ReadError::Spawn)?;
    let stderr = child.stderr.take().expect("piped stderr");
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
        s
    });
    let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped stdout"));
    let result = read_text(stdout, each);
    if result.is_err() {
        let _ = child.kill();
    }
    let status = child.wait()?;
    let stderr = err_thread.join().unwrap_or_default();
    let mut summary = result?;
    if !status.success() {
        return Err(ReadError::Failed {
            status,
            stderr: stderr.trim().to_string(),
        });
    }
    parse_warnings(&stderr, &mut summary);
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_kind_and_skips_other_providers() {
        let text = "\
timestamp = 00000000000000000100, name = fsdr_net:tx, stream.packet.context = { cpu_id = 0 }, event.fields = { block = 1, seq = 0 }
timestamp = 00000000000000000150, name = other:thing, stream.packet.context = { cpu_id = 0 }, event.fields = { x = 1 }
timestamp = 00000000000000000200, name = fsdr_net:arrival, stream.packet.context = { cpu_id = 1 }, event.fields = { block = 1, seq = 0, arrival_ns = 90 }
timestamp = 00000000000000000300, name = fsdr_net:packet, stream.packet.context = { cpu_id = 1 }, event.fields = { block = 1, seq = 5, bytes = 8000, arrival_ns = 95, kernel_ns = 0 }
not an event line
timestamp = 00000000000000000400, name = fsdr_net:rx, stream.packet.context = { cpu_id = 0 }, event.fields = { block = 1, seq = 0 }
";
        let mut got = Vec::new();
        let s = read_text(text.as_bytes(), |e| got.push(e)).unwrap();
        assert_eq!(s.events, 4);
        let kinds: Vec<Kind> = got.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [Kind::Tx, Kind::Arrival, Kind::Packet, Kind::Rx]);
        assert_eq!(got[1].arrival_ns, 90);
        assert_eq!(got[2].seq, 5);
        assert_eq!(got[3].ts, 400);
    }

    #[test]
    fn a_damaged_event_line_is_an_error_not_a_panic() {
        for bad in [
            "timestamp = x, name = fsdr_net:tx, event.fields = { block = 1, seq = 0 }",
            "timestamp = 1, name = fsdr_net:tx, event.fields = { block = 1 }",
            "timestamp = 1, name = fsdr_net:rx",
            "timestamp = 1, name = fsdr_net:arrival, event.fields = { block = 1, seq = 2 }",
        ] {
            assert!(Event::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn warnings_are_summed() {
        let mut s = ReadSummary::default();
        parse_warnings(
            "WARNING: Tracer discarded 12 events between [a] and [b] in trace \"x\"\n\
             WARNING: Tracer discarded 3 events between [c] and [d]\n\
             WARNING: Tracer lost 2 trace packets between [e] and [f]\n",
            &mut s,
        );
        assert_eq!((s.discarded, s.lost_packets), (15, 2));
    }
}
