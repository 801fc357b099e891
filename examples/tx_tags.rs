//! The transmit tags end to end, as an application uses them: a `TagSource` puts bursts on a
//! stream — `tx_sob` and `tx_time` on each burst's first item, `tx_eob` on its last, and in
//! VRT a `tx_freq` retune — `UdpSink` sends it (CHDR or VRT, with timestamps), `UdpSource`
//! receives it, and a `TagSink` keeps the `rx_*` tags that came back, on their items. Prints
//! them (one JSON line with `--json`), and how many samples the sink clipped at sc16's full
//! scale (`--amplitude` above 1).
//!
//! ```text
//! cargo run --example tx_tags                         # CHDR: rx_time and rx_eob per burst
//! cargo run --example tx_tags -- --format vrt --json  # VRT: also rx_rate, rx_freq
//! cargo run --example tx_tags -- --amplitude 1.5      # every sample clipped, counted
//! ```

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use clap::Parser;
use fsdr_net::io::format::vrt::context::IfContext;
use fsdr_net::prelude::*;
use futuresdr::num_complex::Complex32;
use futuresdr::runtime::macros::connect;
use futuresdr::runtime::{Flowgraph, Runtime};

/// Bursts with device times (and a retune) through UdpSink and UdpSource, tags shown.
#[derive(Parser, Debug)]
#[command(allow_negative_numbers = true)]
struct Args {
    /// chdr or vrt.
    #[arg(long, default_value = "chdr")]
    format: Format,
    /// Where the receiving source listens (`HOST:PORT`, a name or an IP address).
    #[arg(long, default_value = "127.0.0.1:0", value_parser = common::parse_addr)]
    listen: SocketAddr,
    /// Where the sink sends (`HOST:PORT`; default: the source's address).
    #[arg(long, value_parser = common::parse_addr)]
    dest: Option<SocketAddr>,
    /// Bursts to send, a second of device time apart.
    #[arg(long, default_value_t = 2, value_parser = common::parse_count)]
    bursts: usize,
    /// Samples in each burst.
    #[arg(long, default_value_t = 1000, value_parser = common::parse_count)]
    burst_samples: usize,
    /// The samples' amplitude (sc16's full scale is 1: above it they clip).
    #[arg(long, default_value = "0.5", value_parser = common::parse_f64)]
    amplitude: f64,
    /// Sample rate (samples/s): the pacing, and one timestamp tick a sample.
    #[arg(long, default_value = "1e6", value_parser = common::parse_rate)]
    rate: f64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Exit code on loss.
    #[command(flatten)]
    loss: common::loss::LossArgs,
}

/// A tag's value as a number: counts, settings, and an `rx_time`'s ticks.
fn value(tag: &Tag) -> Option<f64> {
    match tag {
        Tag::NamedUsize(_, v) => Some(*v as f64),
        Tag::NamedF32(_, v) => Some(f64::from(*v)),
        Tag::NamedAny(_, v) => v
            .downcast_ref::<f64>()
            .copied()
            .or_else(|| v.downcast_ref::<RxTime>().map(|t| t.ticks as f64)),
        _ => None,
    }
}

fn name(tag: &Tag) -> &str {
    match tag {
        Tag::NamedUsize(n, _) | Tag::NamedF32(n, _) | Tag::NamedAny(n, _) => n,
        Tag::String(s) => s,
        _ => "",
    }
}

fn main() -> Result<()> {
    common::init_logging();
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let args = Args::parse();
    if !matches!(args.format, Format::Chdr | Format::Vrt) {
        common::usage_error::<Args>(format!(
            "--format {}: tx_time needs a format with timestamps (chdr or vrt)",
            args.format
        ));
    }
    let src = UdpSource::<Complex32>::builder(args.listen)
        .format(args.format)
        .tick_rate(args.rate)
        .sample_rate(args.rate)
        .finish_after_idle(Duration::from_millis(300))
        .first_datagram_within(Duration::from_secs(5))
        .build()?;
    let listening = src.local_addr();
    eprintln!("listening on {listening}");

    let (n, b) = (args.bursts, args.burst_samples);
    let tag = |name: &str, v: usize| Tag::NamedUsize(name.to_string(), v);
    let mut tags = Vec::new();
    for k in 0..n {
        tags.push((k * b, tag(TAG_TX_SOB, 1)));
        // Burst k starts k seconds of device time after the first: one tick a sample.
        tags.push((k * b, tag(TAG_TX_TIME, k * args.rate as usize)));
        tags.push((k * b + b - 1, tag(TAG_TX_EOB, 1)));
    }
    let a = args.amplitude as f32;
    let mut sink = UdpSink::<Complex32>::builder(args.dest.unwrap_or(listening))
        .format(args.format)
        .sample_rate(args.rate)
        .timestamps(0, 1.0);
    if args.format == Format::Vrt {
        // A retune halfway through the first burst; VITA-49.2 context states what is set.
        tags.push((
            b / 2,
            Tag::NamedAny("tx_freq".to_string(), Box::new(2.45e9f64)),
        ));
        sink = sink.vita49_context(IfContext {
            rf_ref_freq_hz: Some(2.4e9),
            ..IfContext::default()
        });
    }
    let tx = TagSource::new(vec![Complex32::new(a, -a); n * b], tags)?;
    let snk = sink.build()?;
    let rx = TagSink::<Complex32>::new();
    let mut fg = Flowgraph::new();
    connect!(fg, tx > snk; src > rx);
    let fg = Runtime::new().run(fg)?;
    let snk = fg.block(&snk)?;
    let rx = fg.block(&rx)?;
    let stats = fg.block(&src)?.stats();

    let sent = snk.items_sent();
    let received = rx.items().len() as u64 - stats.stream.zeros_inserted;
    let got: Vec<(usize, &str, Option<f64>)> = rx
        .tags()
        .iter()
        .map(|(at, t)| (*at, name(t), value(t)))
        .collect();
    let failure = args.loss.judge(&common::loss::Capture {
        arrived: common::loss::arrived(&stats.engine),
        received,
        lost: sent.saturating_sub(received),
        ..Default::default()
    });
    if args.json {
        let json = serde_json::json!({
            "format": args.format.name(),
            "sent": sent,
            "received": received,
            "clipped": snk.clipped(),
            "tags": got
                .iter()
                .map(|(at, name, v)| serde_json::json!({ "item": at, "name": name, "value": v }))
                .collect::<Vec<_>>(),
            "failure": failure.as_ref().map(common::loss::Failure::name),
        });
        println!("{json}");
    } else {
        println!("sent {sent} samples, received {received}");
        println!(
            "clipped {} samples at sc16's full scale (--amplitude above 1)",
            snk.clipped()
        );
        for (at, name, v) in &got {
            match v {
                Some(v) => println!("item {at:>8}  {name:<16} {v}"),
                None => println!("item {at:>8}  {name}"),
            }
        }
        if let Some(w) = failure
            .as_ref()
            .and_then(|f| common::loss::sentence(f, "the sink"))
        {
            println!("{w}");
        }
    }
    args.loss.exit_on(failure.as_ref(), "samples were");
    Ok(())
}
