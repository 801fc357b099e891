//! `fsdr-net-trace`: latency distributions from an LTTng trace of fsdr-net's tracepoints.
//!
//! ```text
//! fsdr-net-trace /tmp/fsdr-net-trace-1 --csv target/fsdr-net/latency.csv --png target/fsdr-net/latency.png
//! fsdr-net-trace TRACE --pairing network-rx     # UdpSource arrival to sink
//! fsdr-net-trace TRACE --pairing network-source # each datagram's arrival to UdpSource
//! ```

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use fsdr_net_trace::analysis::Pairing;
use fsdr_net_trace::{AnalyzeOptions, analyze};

/// Match start/end tracepoints by pipe and boundary and report latency percentiles.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The trace: the session output folder (or one holding `metadata`).
    trace: PathBuf,
    /// Which events to pair: tx-rx, tx-probe, probe-rx, network-rx (datagram arrival to
    /// sink), source-rx (UdpSource hand-over to sink) or network-source (each datagram's
    /// arrival to UdpSource taking it, from `packet` events).
    #[arg(long, default_value = "tx-rx")]
    pairing: Pairing,
    /// Write every matched sample to this CSV.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write the latency CDF to this PNG.
    #[arg(long)]
    png: Option<PathBuf>,
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = Args::parse();
    let out = analyze(&AnalyzeOptions {
        trace: args.trace,
        pairing: args.pairing,
        csv: args.csv,
        png: args.png,
    })?;
    print!("{}", out.table());
    if let Some(csv) = &out.csv {
        println!("CSV: {}", csv.display());
    }
    match &out.png {
        Some(Ok(p)) => println!("PNG: {}", p.display()),
        Some(Err(e)) => println!("PNG: not written: {e}"),
        None => {}
    }
    Ok(())
}
