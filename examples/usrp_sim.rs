//! Emulates a USRP (UHD ≥ 4.4) in remote-streaming mode: sc16 samples to `--dest`, as
//! `raw_payload` or `full_packet` (CHDR), or as VRT/DIFI or GNU Radio seq64 packets, paced to
//! `--rate`, with fault injection. Prints one line of JSON when done.
//!
//! ```text
//! cargo run --release --example usrp_sim -- --dest 127.0.0.1:49000 --rate 200e6 --duration 10
//! cargo run --release --example usrp_sim -- --dest 127.0.0.1:49000 --signal ramp --drop-every 1000
//! ```

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use common::{ContextArgs, FaultArgs, Mode, SignalArg, format_for, parse_f64, parse_u64};
use fsdr_net::io::Format;
use fsdr_net::io::emulator::{Emulator, EmulatorConfig};
use fsdr_net::io::sample::WireFormat;

/// A USRP in UHD remote-streaming mode, in software.
#[derive(Parser, Debug)]
#[command(allow_negative_numbers = true)]
struct Args {
    /// Where to stream (UHD's dest_addr:dest_port).
    #[arg(long, value_parser = common::parse_addr)]
    dest: SocketAddr,
    /// Sample rate (samples/s).
    #[arg(long, default_value = "200e6", value_parser = common::parse_rate)]
    rate: f64,
    /// Samples per packet (default: the most that fit an 8000-byte datagram).
    #[arg(long)]
    spp: Option<usize>,
    /// raw_payload (samples only) or full_packet (CHDR).
    #[arg(long, value_enum, default_value = "full_packet")]
    mode: Mode,
    /// Other packet formats: vrt (VITA-49/DIFI) or seq64 (GNU Radio); overrides --mode.
    #[arg(long)]
    format: Option<Format>,
    /// Device tick rate (Hz) for timestamps.
    #[arg(long, default_value = "200e6", value_parser = common::parse_rate)]
    tick_rate: f64,
    /// Stream for this long (seconds).
    #[arg(long, value_parser = parse_f64)]
    duration: Option<f64>,
    /// Stream this many samples.
    #[arg(long, value_parser = parse_u64)]
    samples: Option<u64>,
    /// The signal.
    #[arg(long, value_enum, default_value = "tone")]
    signal: SignalArg,
    #[command(flatten)]
    faults: FaultArgs,
    #[command(flatten)]
    context: ContextArgs,
    /// Wire sample encoding, an sc16 one (default: sc16_item32_be in VRT, sc16_chdr
    /// otherwise): sc16_chdr, sc16_item32_le, sc16_item32_be.
    #[arg(long)]
    wire_format: Option<WireFormat>,
    /// Send as fast as possible instead of at --rate.
    #[arg(long)]
    unpaced: bool,
    /// Paced: microseconds of stream sent back to back per call (0: one packet per call).
    #[arg(long, default_value_t = 100.0)]
    burst_us: f64,
    /// Channels, interleaved packet by packet on the one destination: channel c is VRT
    /// stream ID c or CHDR destination endpoint c, each at --rate (`usrp_rx --channels N`
    /// takes them apart).
    #[arg(long, default_value_t = 1)]
    channels: usize,
    /// Multicast: --dest 239.x.y.z:PORT sends to a group.
    #[command(flatten)]
    multicast: common::multicast::TxMulticastArgs,
    /// Run the whole process on these CPUs (comma-separated: its affinity, set before any
    /// thread starts, as `taskset -c` does). FutureSDR's default runtime then makes one
    /// worker per CPU given.
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<usize>,
}

fn main() -> Result<()> {
    common::init_logging();
    let args = Args::parse();
    if !args.cpus.is_empty() {
        fsdr_net_io::sys::sched::set_thread_cpus(&args.cpus)
            .with_context(|| format!("--cpus {:?}", args.cpus))?;
    }
    let mut cfg = EmulatorConfig::new(args.dest, format_for(args.mode, args.format));
    cfg.rate = args.rate;
    cfg.spp = args.spp;
    cfg.tick_rate = args.tick_rate;
    cfg.samples = args.samples;
    cfg.duration = args.duration.map(common::seconds);
    if cfg.samples.is_none() && cfg.duration.is_none() {
        cfg.duration = Some(Duration::from_secs(10));
    }
    cfg.signal = args.signal.into();
    cfg.faults = args.faults.into();
    cfg.context = args.context.plan(args.rate);
    if let Some(w) = args.wire_format {
        cfg.wire = w;
    }
    cfg.unpaced = args.unpaced;
    cfg.channels = args.channels;
    cfg.burst = common::seconds(args.burst_us.max(0.0) * 1e-6);
    (cfg.multicast_if, cfg.multicast_if_v6, cfg.multicast_ttl) =
        args.multicast.sending(args.dest)?;
    let emulator = Emulator::new(cfg)?;
    let stop = emulator.stop_flag();
    ctrlc::set_handler(move || stop.store(true, std::sync::atomic::Ordering::Relaxed))?;
    let report = emulator.run()?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
