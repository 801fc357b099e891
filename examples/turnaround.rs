//! Turnaround: receives a CHDR stream, passes it through a flowgraph
//! (`UdpSource → Apply → UdpSink`) and sends it on, datagram for datagram (the same samples
//! per datagram, timestamps from the first item on), as a radio host that answers what it
//! receives. `cargo xtask turnaround` sends the stream, receives the answers and reports the
//! time from each packet's arrival to its answer's departure; `--bare` runs the floor to
//! compare with instead of the flowgraph: `recvmmsg` straight into `sendmmsg`.
//!
//! ```text
//! cargo run --release --example turnaround -- --listen 127.0.0.1:47500 --dest 127.0.0.1:47501
//! cargo run --release --example turnaround -- --bare --json
//! cargo run --release --example turnaround -- --coalesce-us 0 --cpu-latency-us 0 --rx-priority 50
//! ```
//!
//! It ends after `--idle` seconds without data (once data came), and prints one JSON line
//! with `--json` (docs/json.md). The exit code is 1 when samples were lost (`--allow-loss`: 0).

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use fsdr_net::io::Format;
use fsdr_net::{UdpSink, UdpSource};
use fsdr_net_io::turnaround::bare_loop;
use futuresdr::blocks::Apply;
use futuresdr::runtime::Flowgraph;
use futuresdr::runtime::dev::prelude::*;
use num_complex::Complex;
use serde_json::json;

/// Receive a CHDR stream, pass it through a flowgraph and send it on.
#[derive(Parser, Debug)]
#[command(allow_negative_numbers = true)]
#[command(version)]
struct Args {
    /// Where the stream comes in.
    #[arg(long, default_value = "127.0.0.1:47500", value_parser = common::parse_addr)]
    listen: SocketAddr,
    /// Where it goes out.
    #[arg(long, default_value = "127.0.0.1:47501", value_parser = common::parse_addr)]
    dest: SocketAddr,
    /// Samples per datagram of the stream (the answers carry as many).
    #[arg(long, default_value_t = 2000)]
    spp: usize,
    /// The floor instead of the flowgraph: recvmmsg straight into sendmmsg.
    #[arg(long)]
    bare: bool,
    /// Seconds without data (once data came) that end the run.
    #[arg(long, default_value_t = 1.0, value_parser = common::parse_f64)]
    idle: f64,
    /// Seconds to wait for the first datagram.
    #[arg(long, default_value_t = 60.0, value_parser = common::parse_f64)]
    first_within: f64,
    /// Print the summary as one JSON object (fields in docs/json.md).
    #[arg(long)]
    json: bool,
    /// Exit code on loss.
    #[command(flatten)]
    loss: common::loss::LossArgs,
    /// Engine and runtime tuning.
    #[command(flatten)]
    tuning: common::TuningArgs,
}

/// What a run did.
struct Summary {
    mode: &'static str,
    received: u64,
    sent: u64,
    missed: u64,
    kernel_drops: u64,
    seconds: f64,
}

fn flowgraph(args: &Args) -> Result<Summary> {
    let src = args
        .tuning
        .source(
            UdpSource::<Complex<i16>>::builder(args.listen)
                .format(Format::Chdr)
                .time_tags(false)
                .finish_after_idle(common::seconds(args.idle))
                .first_datagram_within(common::seconds(args.first_within)),
        )
        .build()
        .context("building the source")?;
    eprintln!("listening on {}", src.local_addr());
    // The answer: the same samples, conjugated (a stand-in for the host's processing).
    let apply = Apply::new(|x: &Complex<i16>| x.conj());
    let snk = UdpSink::<Complex<i16>>::builder(args.dest)
        .format(Format::Chdr)
        .payload_bytes(4 * args.spp)
        .timestamps(0, 1.0)
        .batch_workers(!args.tuning.normal_workers)
        .build()
        .context("building the sink")?;
    let mut fg = Flowgraph::new();
    connect!(fg, src > apply > snk);
    let start = Instant::now();
    let fg = args.tuning.runtime().run(fg)?;
    let seconds = start.elapsed().as_secs_f64();
    let s = fg.block(&src)?.stats();
    let sink = fg.block(&snk)?;
    Ok(Summary {
        mode: "flowgraph",
        received: s.stream.items,
        sent: sink.items_sent(),
        missed: s.stream.missed_items,
        kernel_drops: s.engine.kernel_drops,
        seconds,
    })
}

fn bare(args: &Args) -> Result<Summary> {
    let rx = UdpSocket::bind(args.listen).context("binding")?;
    eprintln!("listening on {}", rx.local_addr()?);
    let watch = rx.try_clone()?;
    let stop = AtomicBool::new(false);
    let passed = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let looped = s.spawn(|| bare_loop(rx, args.dest, &stop, &passed));
        // Ends after `idle` seconds without a datagram, once one came.
        let (mut seen, mut last) = (0, None);
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let now = passed.load(Ordering::Relaxed);
            if now != seen {
                (seen, last) = (now, Some(Instant::now()));
            }
            let quiet = match last {
                Some(l) => l.elapsed().as_secs_f64() >= args.idle,
                None => start.elapsed().as_secs_f64() >= args.first_within,
            };
            if quiet || looped.is_finished() {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        looped.join().expect("bare loop")?;
        Ok(())
    })?;
    let samples = passed.load(Ordering::Relaxed) * args.spp as u64;
    Ok(Summary {
        mode: "bare",
        received: samples,
        sent: samples,
        missed: 0,
        kernel_drops: u64::from(fsdr_net_io::sys::socket_drops(&watch).unwrap_or(0)),
        seconds: start.elapsed().as_secs_f64(),
    })
}

fn main() -> Result<()> {
    common::init_logging();
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let args = Args::parse();
    args.tuning.place()?;
    let s = if args.bare {
        bare(&args)?
    } else {
        flowgraph(&args)?
    };
    if args.json {
        println!(
            "{}",
            json!({
                "mode": s.mode,
                "received": s.received,
                "sent": s.sent,
                "missed": s.missed,
                "kernel_drops": s.kernel_drops,
                "seconds": s.seconds,
            })
        );
    } else {
        println!(
            "{}: received {} samples, sent {}, missed {}, kernel drops {}, {:.1} s",
            s.mode, s.received, s.sent, s.missed, s.kernel_drops, s.seconds
        );
    }
    args.loss
        .exit_on_loss(s.missed + s.kernel_drops, "samples (or datagrams)");
    Ok(())
}
