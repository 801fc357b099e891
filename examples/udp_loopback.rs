//! Sends a tone through loopback with `UdpSink` and receives it with `UdpSource` in one
//! FutureSDR flowgraph, then prints the rate and what was lost.
//!
//! ```text
//! cargo run --release --example udp_loopback -- --samples 50e6 --rate 25e6 --format chdr
//! ```

mod common;

use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Parser;
use fsdr_net::io::WireFormat;
use fsdr_net::io::{Backend, Format};
use fsdr_net::{UdpSink, UdpSource};
use futuresdr::blocks::{Head, NullSink, Source};
use futuresdr::runtime::macros::connect;
use futuresdr::runtime::{Flowgraph, Runtime};
use num_complex::Complex32;

/// Tone → UdpSink → loopback → UdpSource → NullSink.
#[derive(Parser, Debug)]
#[command(allow_negative_numbers = true)]
struct Args {
    /// Samples to send; accepts 1e7 notation.
    #[arg(long, default_value = "2e7", value_parser = common::parse_f64)]
    samples: f64,
    /// Sample rate to pace the sink to (samples/s); 0 sends unpaced.
    #[arg(long, default_value = "10e6", value_parser = common::parse_f64)]
    rate: f64,
    /// Wire format.
    #[arg(long, default_value = "chdr")]
    format: Format,
    /// Receive backend.
    #[arg(long, default_value = "mio")]
    backend: Backend,
    /// Sink path: mmsg (sendmmsg + GSO), uring, uring-zc (io_uring zero-copy).
    #[arg(long, default_value = "mmsg")]
    sink: String,
    /// Payload bytes per datagram.
    #[arg(long, default_value_t = 7968)]
    payload: usize,
}

fn main() -> Result<()> {
    let args = Args::parse();
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let samples = args.samples as u64;
    let src = UdpSource::<Complex32>::builder("127.0.0.1:0")
        .backend(args.backend)
        .format(args.format)
        .wire_format(WireFormat::Sc16Chdr)
        .time_tags(false)
        .zero_fill_missed(true)
        .finish_after_idle(Duration::from_millis(500))
        .build()?;
    let stats = src.stats_handle();
    let mut sink = UdpSink::<Complex32>::builder(src.local_addr().to_string())
        .format(args.format)
        .payload_bytes(args.payload)
        .wire_format(WireFormat::Sc16Chdr);
    if args.rate > 0.0 {
        sink = sink.sample_rate(args.rate);
    }
    sink = match args.sink.as_str() {
        "mmsg" => sink,
        "uring" => sink.uring(false),
        "uring-zc" => sink.uring(true),
        other => anyhow::bail!("--sink {other:?}: expected mmsg, uring or uring-zc"),
    };
    let sink = sink.build()?;
    let mut phase = 0.0f32;
    let step = 2.0 * std::f32::consts::PI * 0.01;
    let tone = Source::<_, Complex32>::new(move || {
        phase = (phase + step) % (2.0 * std::f32::consts::PI);
        Complex32::from_polar(0.5, phase)
    });
    let head = Head::<Complex32>::new(samples);
    let null = NullSink::<Complex32>::new();
    let mut fg = Flowgraph::new();
    connect!(fg, tone > head > sink);
    connect!(fg, src > null);
    let start = Instant::now();
    let fg = Runtime::new().run(fg)?;
    let elapsed = start.elapsed().as_secs_f64() - 0.5;
    let received = fg.block(&null)?.n_received();
    let s = stats.snapshot();
    println!(
        "sent {samples} samples, received {received} ({:.3}% of sent) in {elapsed:.2} s: {:.1} Msps",
        received as f64 / samples as f64 * 100.0,
        received as f64 / elapsed / 1e6
    );
    println!("{s}");
    let sent = fg.block(&sink)?.send_stats();
    println!(
        "sink: {} datagrams, {} bytes, {} send calls, {} errors",
        sent.datagrams, sent.bytes, sent.calls, sent.errors
    );
    Ok(())
}
