//! The program a FutureSDR user writes around fsdr-net: a radio's UDP stream → `UdpSource`
//! → FutureSDR processing (here: magnitude, then a decimating average) → a file or a null
//! sink; the source's `missed` and `stats` ports printed as they arrive; the counters read
//! after `run()`; exit code 1 when samples were lost (`--allow-loss`: 0).
//!
//! Without `--listen`, the built-in USRP emulator streams 1 s of a 10 Msps CHDR stream to it
//! on loopback (with `--drop-every N` to see the loss handling).
//!
//! ```text
//! cargo run --release --example embed
//! cargo run --release --example embed -- --drop-every 500      # exits 1: samples were lost
//! cargo run --release --example embed -- --listen 0.0.0.0:49000 --tick-rate 200e6 --rate 20e6
//! ```

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use fsdr_net::io::emulator::{Emulator, EmulatorConfig, Faults};
use fsdr_net::prelude::*;
use futuresdr::blocks::{Apply, FileSink, MovingAvg, NullSink};
use futuresdr::num_complex::Complex32;
use futuresdr::runtime::macros::connect;
use futuresdr::runtime::{Flowgraph, Pmt, Runtime};

/// Receive a CHDR stream into a FutureSDR flowgraph and report what arrived.
#[derive(Parser, Debug)]
#[command(allow_negative_numbers = true)]
struct Args {
    /// Receive from a device on this address instead of the built-in emulator.
    #[arg(long, value_parser = common::parse_addr)]
    listen: Option<SocketAddr>,
    /// Sample rate (samples/s).
    #[arg(long, default_value = "10e6", value_parser = common::parse_rate)]
    rate: f64,
    /// The device's tick rate (Hz): CHDR timestamps count its ticks.
    #[arg(long, default_value = "200e6", value_parser = common::parse_rate)]
    tick_rate: f64,
    /// Emulator: drop every N-th packet.
    #[arg(long)]
    drop_every: Option<u64>,
    /// Write the averaged magnitude (f32) here instead of discarding it.
    #[arg(long)]
    output: Option<std::path::PathBuf>,
    /// Exit code on loss.
    #[command(flatten)]
    loss: common::loss::LossArgs,
    /// Multicast: --listen 239.x.y.z:PORT joins a group.
    #[command(flatten)]
    multicast: common::multicast::RxMulticastArgs,
}

fn print_message(port: &'static str) -> impl Fn(&Pmt) + Send + Sync + 'static {
    move |m| match port {
        "stats" => match SourceStats::from_pmt(m) {
            Ok(s) => eprintln!(
                "stats: {} datagrams, {} items, {} missed frames",
                s.delivered, s.stream.items, s.missed
            ),
            Err(e) => eprintln!("stats: {e}"),
        },
        _ => eprintln!("{port}: {m:?}"),
    }
}

fn main() -> Result<()> {
    common::init_logging();
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let args = Args::parse();
    let group = args.multicast.group(args.listen)?;
    let bind = args
        .listen
        .unwrap_or_else(|| "127.0.0.1:0".parse().unwrap());
    let src = UdpSource::<Complex32>::builder(bind)
        .format(Format::Chdr)
        .tick_rate(args.tick_rate)
        .sample_rate(args.rate)
        .zero_fill_missed(true)
        .stats_interval(Some(Duration::from_millis(500)))
        .finish_after_idle(Duration::from_secs(1))
        .first_datagram_within(Duration::from_secs(30))
        .configure(|c| c.socket.multicast_source = args.multicast.source)
        .configure(|c| c.socket.multicast = group)
        .build()
        .context("building the source")?;
    eprintln!("listening on {}", src.local_addr());

    let emulator = match args.listen {
        Some(_) => None,
        None => {
            let mut cfg = EmulatorConfig::new(src.local_addr(), Format::Chdr);
            cfg.rate = args.rate;
            cfg.tick_rate = args.tick_rate;
            cfg.duration = Some(Duration::from_secs(1));
            cfg.faults = Faults {
                drop_every: args.drop_every,
                ..Faults::default()
            };
            let emu = Emulator::new(cfg)?;
            Some(std::thread::spawn(move || emu.run()))
        }
    };

    let mag = Apply::new(|x: &Complex32| x.norm());
    let avg = MovingAvg::<1000>::new(0.1, 3);
    let missed = MessageCollector::new().on_message(print_message("missed"));
    let stats = MessageCollector::new().on_message(print_message("stats"));
    let mut fg = Flowgraph::new();
    connect!(fg, src > mag > avg; src.missed | missed; src.stats | stats);
    let snk = match &args.output {
        Some(path) => {
            let file = FileSink::<f32>::new(path);
            let file = fg.add(file);
            fg.stream_dyn(avg.id(), "output", file.id(), "input")?;
            None
        }
        None => {
            let null = NullSink::<f32>::new();
            connect!(fg, avg > null);
            Some(null)
        }
    };
    let fg = Runtime::new().run(fg)?;

    let sent = match emulator {
        Some(t) => Some(t.join().expect("emulator thread")?),
        None => None,
    };
    let s = fg.block(&src)?.stats();
    println!("{s}");
    if let Some(null) = snk {
        println!("sink received {} averages", fg.block(&null)?.n_received());
    }
    if let Some(r) = sent {
        println!(
            "emulator sent {} samples, dropped {} packets",
            r.samples_sent, r.dropped
        );
    }
    for w in fsdr_net::io::diagnosis::explain(&s.engine, sent.map_or(0, |r| r.dropped), None) {
        println!("{w}");
    }
    let lost = s.stream.missed_items + (s.kernel_drops + s.overflow).saturating_sub(s.missed);
    let failure = args.loss.judge(&common::loss::Capture {
        arrived: common::loss::arrived(&s.engine),
        // Datagrams delivered stand for what arrived (the averages are not samples).
        received: s.engine.delivered,
        lost: lost.max(s.missed),
        ..Default::default()
    });
    if let Some(w) = failure
        .as_ref()
        .and_then(|f| common::loss::sentence(f, "the sender"))
    {
        println!("{w}");
    }
    args.loss
        .exit_on(failure.as_ref(), "samples (or frames) were");
    Ok(())
}
