//! Command-line pieces shared by the examples.
#![allow(dead_code)]

use fsdr_net::io::Format;
use fsdr_net::io::emulator::{Faults, Signal};

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings).
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// Parses numbers written as `200e6` as well as `200000000`.
pub fn parse_f64(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{s:?} must be a non-negative number"))
    }
}

/// Parses counts written as `1e6` as well as `1000000`.
pub fn parse_u64(s: &str) -> Result<u64, String> {
    parse_f64(s).map(|v| v as u64)
}

/// UHD remote-streaming mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[allow(non_camel_case_types)]
pub enum Mode {
    /// Samples only, no header: gaps cannot be seen.
    #[value(name = "raw_payload", alias = "raw-payload")]
    raw_payload,
    /// CHDR packets with sequence numbers and timestamps.
    #[value(name = "full_packet", alias = "full-packet")]
    full_packet,
}

/// The wire format for a mode, unless a format is named.
pub fn format_for(mode: Mode, format: Option<Format>) -> Format {
    format.unwrap_or(match mode {
        Mode::raw_payload => Format::Raw,
        Mode::full_packet => Format::Chdr,
    })
}

/// The emulated signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SignalArg {
    /// A tone at 1% of the sample rate.
    Tone,
    /// A counter a receiver can verify sample by sample.
    Ramp,
}

impl From<SignalArg> for Signal {
    fn from(s: SignalArg) -> Signal {
        match s {
            SignalArg::Tone => Signal::Tone {
                cycles_per_sample: 0.01,
            },
            SignalArg::Ramp => Signal::Ramp,
        }
    }
}

/// Fault injection flags of the emulator.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct FaultArgs {
    /// Drop every N-th packet.
    #[arg(long)]
    pub drop_every: Option<u64>,
    /// Send every N-th packet after its successor.
    #[arg(long)]
    pub reorder_every: Option<u64>,
    /// Send every N-th packet twice.
    #[arg(long)]
    pub duplicate_every: Option<u64>,
    /// Start the sequence numbers over after N packets.
    #[arg(long)]
    pub restart_after: Option<u64>,
}

impl From<FaultArgs> for Faults {
    fn from(f: FaultArgs) -> Faults {
        Faults {
            drop_every: f.drop_every,
            reorder_every: f.reorder_every,
            duplicate_every: f.duplicate_every,
            restart_after: f.restart_after,
        }
    }
}
