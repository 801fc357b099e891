//! The zero-copy path end to end: a USRP CHDR stream (the built-in emulator's ramp, or a
//! device with `--listen`) into an `InPlaceUdpSource<Complex<i16>>`, whose receive thread
//! puts every payload straight into FutureSDR's circuit buffers, then a `RampCheck` that
//! verifies each sample in the same buffer (no copy on the way) and sends the buffer back
//! around the closed circuit. Prints one JSON line: what arrived, the payload bytes copied
//! after the kernel (0 on the fast path), and the ramp's discontinuities.
//!
//! ```text
//! cargo run --release --example inplace_rx                       # 200 Msps for 5 s
//! cargo run --release --example inplace_rx -- --drop-every 1000  # gaps take the copying path
//! cargo run --release --example inplace_rx -- --listen 0.0.0.0:49000 --duration 10
//! ```
//!
//! The JSON's fields are documented in docs/json.md. The exit code is 1 when samples were
//! lost (`--allow-loss`: 0).

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use common::parse_f64;
use fsdr_net::io::emulator::{Emulator, EmulatorConfig, Faults, Signal};
use fsdr_net::prelude::*;
use fsdr_net::{InPlaceUdpSource, RampCheck};
use futuresdr::num_complex::Complex;
use futuresdr::runtime::Flowgraph;
use futuresdr::runtime::buffer::circuit;
use futuresdr::runtime::macros::connect;

/// Receive a CHDR stream without copying its payloads and check every sample.
#[derive(Parser, Debug)]
#[command(allow_negative_numbers = true)]
struct Args {
    /// Receive from a device on this address instead of the built-in emulator.
    #[arg(long, value_parser = common::parse_addr)]
    listen: Option<SocketAddr>,
    /// Sample rate (samples/s) of the emulator, and of the device for timestamps.
    #[arg(long, default_value = "200e6", value_parser = common::parse_rate)]
    rate: f64,
    /// The device's tick rate (Hz).
    #[arg(long, default_value = "200e6", value_parser = common::parse_rate)]
    tick_rate: f64,
    /// Seconds of stream.
    #[arg(long, default_value = "5", value_parser = parse_f64)]
    duration: f64,
    /// Emulator: drop every N-th packet.
    #[arg(long)]
    drop_every: Option<u64>,
    /// Accepted for symmetry with the other examples: the summary is always one JSON line.
    #[arg(long)]
    json: bool,
    /// Exit code on loss.
    #[command(flatten)]
    loss: common::loss::LossArgs,
    /// Runtime and engine tuning.
    #[command(flatten)]
    tuning: common::TuningArgs,
    /// Multicast: --listen 239.x.y.z:PORT joins a group.
    #[command(flatten)]
    multicast: common::multicast::RxMulticastArgs,
}

fn main() -> Result<()> {
    common::init_logging();
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let args = Args::parse();
    args.tuning.place()?;
    let group = args.multicast.group(args.listen)?;
    let bind = args
        .listen
        .unwrap_or_else(|| "127.0.0.1:0".parse().unwrap());
    // sc16_chdr is the memory layout of Complex<i16> on this host: the fast path applies.
    let b = UdpSource::<Complex<i16>>::builder(bind)
        .format(Format::Chdr)
        .tick_rate(args.tick_rate)
        .sample_rate(args.rate)
        .zero_fill_missed(true)
        .stats_interval(None)
        .finish_after_idle(Duration::from_secs(1))
        .first_datagram_within(common::seconds(args.duration + 30.0))
        .configure(|c| c.socket.multicast_source = args.multicast.source)
        .configure(|c| c.socket.multicast = group);
    let src: InPlaceUdpSource<Complex<i16>> = args
        .tuning
        .source(b)
        .build_in_place()
        .context("building the in-place source")?;
    let dest = src.local_addr();
    eprintln!("listening on {dest}");
    let check =
        RampCheck::<Complex<i16>, circuit::Reader<Complex<i16>>>::new(args.listen.is_none());
    let mut fg = Flowgraph::new();
    connect!(fg, src > check; src < check);
    let emulator = args.listen.is_none().then(|| {
        let mut cfg = EmulatorConfig::new(dest, Format::Chdr);
        cfg.rate = args.rate;
        cfg.tick_rate = args.tick_rate;
        cfg.duration = Some(common::seconds(args.duration));
        cfg.signal = Signal::Ramp;
        cfg.faults = Faults {
            drop_every: args.drop_every,
            ..Faults::default()
        };
        std::thread::spawn(move || Emulator::new(cfg).and_then(|e| e.run()))
    });
    let start = Instant::now();
    let load = fsdr_net_io::diagnosis::LoadMeter::start();
    let fg = args.tuning.runtime().run(fg)?;
    let load = load.finish();
    let seconds = start.elapsed().as_secs_f64();
    let sent = match emulator {
        Some(t) => Some(t.join().expect("emulator thread")?),
        None => None,
    };
    let s = fg.block(&src)?.stats();
    let check = fg.block(&check)?;
    let samples_sent = sent.as_ref().map(|r| r.samples_sent);
    let samples_dropped = sent.as_ref().map(|r| r.dropped_samples);
    let emulator_dropped = sent.as_ref().map(|r| r.dropped);
    let emulator_rate = sent.as_ref().map(|r| (r.rate, r.rate_asked));
    let gb = s.delivered_bytes as f64 / 1e9;
    let e = &s.engine;
    let received = check.items() - s.stream.zeros_inserted;
    // What the radio produced (the emulator's dropped packets included); from a device,
    // what arrived plus the gaps the sequence numbers show.
    let sent = sent.as_ref().map(|r| r.samples_sent + r.dropped_samples);
    let lost = sent.map_or(s.stream.missed_items, |n| n.saturating_sub(received));
    let expected = sent.unwrap_or(received + lost).max(1);
    let stream_seconds = e.stream_seconds();
    let rate = if e.delivered > 1 && stream_seconds > 0.0 {
        received as f64 * (e.delivered - 1) as f64 / e.delivered as f64 / stream_seconds
    } else {
        0.0
    };
    let injected = emulator_dropped.unwrap_or(0);
    let mut words = fsdr_net::io::diagnosis::explain(e, injected, load.as_ref());
    let failure = args.loss.judge(&common::loss::Capture {
        arrived: common::loss::arrived(e),
        received,
        lost,
        end_lost: false,
        rate: emulator_rate,
    });
    let source = if args.listen.is_some() {
        "the sender"
    } else {
        "the built-in emulator"
    };
    if let Some(w) = failure
        .as_ref()
        .and_then(|f| common::loss::sentence(f, source))
    {
        words.push(w);
    }
    let summary = serde_json::json!({
        "items": check.items(),
        "samples_sent": samples_sent,
        "samples_dropped_by_emulator": samples_dropped,
        "discontinuities": check.discontinuities(),
        "copied_bytes": s.stream.copied_bytes,
        "copied_bytes_per_gb": if gb > 0.0 { s.stream.copied_bytes as f64 / gb } else { 0.0 },
        "zeros_inserted": s.stream.zeros_inserted,
        "seconds": seconds,
        "stats": s,
        "sent": sent,
        "received": received,
        "missed": e.missed,
        "kernel_drops": e.kernel_drops,
        "overflows": e.overflow,
        "success_rate": received as f64 / expected as f64,
        "lost_samples": lost,
        "stream_seconds": stream_seconds,
        "rate_sps": rate,
        "load": load,
        "explanation": words,
        "failure": failure.as_ref().map(common::loss::Failure::name),
    });
    println!("{summary}");
    args.loss.exit_on(failure.as_ref(), "samples were");
    Ok(())
}
