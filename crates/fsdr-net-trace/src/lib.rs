//! Latency analysis of LTTng traces recorded from fsdr-net's tracepoints (`fsdr-net-lttng`).
//!
//! * [`event`]: reads a trace through babeltrace2, one event at a time.
//! * [`analysis`]: pairs start and end events by (pipe, boundary) and computes count,
//!   unmatched events, min, p5, p50, p95, p99 and max per pipe and overall.
//! * [`plot`]: PNG charts (latency CDFs, loss against rate).
//! * [`analyze`]: the whole pass from a trace folder to a report, a CSV of every sample and a
//!   PNG, as the `fsdr-net-trace` command runs it.
//!
//! ```no_run
//! use fsdr_net_trace::{AnalyzeOptions, analyze};
//! use fsdr_net_trace::analysis::Pairing;
//!
//! let out = analyze(&AnalyzeOptions::new("/tmp/trace".into(), Pairing::TxRx)).unwrap();
//! println!("{}", out.table());
//! ```

pub mod analysis;
pub mod event;
pub mod plot;

mod run;

pub use run::{AnalyzeError, AnalyzeOptions, Analyzed, analyze, analyze_pairings};
