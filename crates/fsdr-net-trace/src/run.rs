//! One analysis pass: trace folder → matched samples (CSV) → statistics → PNG.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::rc::Rc;

use crate::analysis::{Matcher, Pairing, Report, Stats};
use crate::event::{ReadError, ReadSummary, read_trace};
use crate::plot::{Chart, PlotError, Series, cdf_points, line_chart};

/// What to analyse and where to write.
#[derive(Debug, Clone)]
pub struct AnalyzeOptions {
    /// Trace folder (the session output, or a folder holding `metadata`).
    pub trace: PathBuf,
    /// Which events start and end a latency.
    pub pairing: Pairing,
    /// Write every matched sample here (`block,seq,start_ns,end_ns,latency_ns`).
    pub csv: Option<PathBuf>,
    /// Write the latency CDF (one line per pipe) here.
    pub png: Option<PathBuf>,
}

impl AnalyzeOptions {
    /// Analyse `trace` for `pairing`, writing no files.
    pub fn new(trace: PathBuf, pairing: Pairing) -> Self {
        AnalyzeOptions {
            trace,
            pairing,
            csv: None,
            png: None,
        }
    }
}

/// Why an analysis failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnalyzeError {
    /// The trace could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The CSV could not be written.
    #[error("writing {path}: {source}")]
    Csv {
        /// The CSV file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The outcome of [`analyze`].
#[derive(Debug)]
pub struct Analyzed {
    /// Statistics per pipe and overall.
    pub report: Report,
    /// Events read, and events the tracer discarded.
    pub read: ReadSummary,
    /// The CSV written, if asked for.
    pub csv: Option<PathBuf>,
    /// The PNG written, or why it was not, if asked for.
    pub png: Option<Result<PathBuf, PlotError>>,
}

fn us(ns: i64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

fn row(out: &mut String, name: &str, s: &Stats) {
    let _ = writeln!(
        out,
        "| {name} | {} | {} / {} | {} | {} | {} | {} | {} | {} |",
        s.count,
        s.unmatched_start,
        s.unmatched_end,
        us(s.min_ns),
        us(s.p5_ns),
        us(s.p50_ns),
        us(s.p95_ns),
        us(s.p99_ns),
        us(s.max_ns)
    );
}

impl Analyzed {
    /// A markdown table: one row per pipe and one for all, latencies in microseconds.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| pipe | matched | unmatched start / end | min µs | p5 µs | p50 µs | p95 µs | p99 µs | max µs |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (block, s) in &self.report.pipes {
            row(&mut out, &block.to_string(), s);
        }
        if self.report.pipes.len() != 1 {
            row(&mut out, "all", &self.report.overall);
        }
        let o = &self.report.overall;
        let _ = writeln!(
            out,
            "\n{} events read; tracer discarded {} events and lost {} packets; {} duplicate and {} negative pairs",
            self.read.events, self.read.discarded, self.read.lost_packets, o.duplicates, o.negative
        );
        out
    }
}

/// Reads `trace` once for several pairings (statistics only, no files): one
/// [`Analyzed`] per pairing, in order.
///
/// ```no_run
/// use fsdr_net_trace::analysis::Pairing;
/// let [handover, taken] = fsdr_net_trace::analyze_pairings(
///     "target/fsdr-net/trace".as_ref(),
///     [Pairing::SourceRx, Pairing::NetworkSource],
/// )?;
/// print!("{}{}", handover.table(), taken.table());
/// # Ok::<(), fsdr_net_trace::AnalyzeError>(())
/// ```
pub fn analyze_pairings<const N: usize>(
    trace: &std::path::Path,
    pairings: [Pairing; N],
) -> Result<[Analyzed; N], AnalyzeError> {
    let mut matchers = pairings.map(Matcher::new);
    let read = read_trace(trace, |e| matchers.iter_mut().for_each(|m| m.push(e)))?;
    Ok(matchers.map(|m| Analyzed {
        report: m.finish(),
        read: read.clone(),
        csv: None,
        png: None,
    }))
}

/// Reads the trace once, matching as it goes, writes the CSV and PNG if asked for, and
/// returns the statistics.
pub fn analyze(opts: &AnalyzeOptions) -> Result<Analyzed, AnalyzeError> {
    let csv_err = |path: &PathBuf, source| AnalyzeError::Csv {
        path: path.clone(),
        source,
    };
    let writer = match &opts.csv {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| csv_err(path, e))?;
            }
            let f = std::fs::File::create(path).map_err(|e| csv_err(path, e))?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
            writeln!(w, "block,seq,start_ns,end_ns,latency_ns").map_err(|e| csv_err(path, e))?;
            Some(Rc::new(RefCell::new((w, None::<std::io::Error>))))
        }
        None => None,
    };
    let mut matcher = Matcher::new(opts.pairing);
    if let Some(w) = writer.clone() {
        matcher = matcher.on_sample(move |s| {
            let mut g = w.borrow_mut();
            if g.1.is_none()
                && let Err(e) = writeln!(
                    g.0,
                    "{},{},{},{},{}",
                    s.block,
                    s.seq,
                    s.start_ns,
                    s.end_ns,
                    s.latency_ns()
                )
            {
                g.1 = Some(e);
            }
        });
    }
    let read = read_trace(&opts.trace, |e| matcher.push(e))?;
    let report = matcher.finish();
    if let (Some(w), Some(path)) = (writer, &opts.csv) {
        let mut g = w.borrow_mut();
        if let Some(e) = g.1.take() {
            return Err(csv_err(path, e));
        }
        g.0.flush().map_err(|e| csv_err(path, e))?;
    }
    let png = opts.png.as_ref().map(|path| {
        let series: Vec<Series> = report
            .sorted
            .iter()
            .map(|(block, v)| {
                let us: Vec<f64> = v.iter().map(|&ns| ns as f64 / 1e3).collect();
                Series::new(format!("pipe {block}"), cdf_points(&us, 2000))
            })
            .collect();
        let mut chart = Chart::new(
            &format!(
                "Latency CDF ({}, {} pairs)",
                opts.pairing.name(),
                report.overall.count
            ),
            "latency (µs, log scale)",
            "fraction of boundaries",
        );
        chart.y_range = Some((0.0, 1.0));
        chart.log_x = report.overall.min_ns > 0;
        chart.legend_upper_left = true;
        line_chart(path, &chart, &series).map(|_| path.clone())
    });
    Ok(Analyzed {
        report,
        read,
        csv: opts.csv.clone(),
        png,
    })
}
