//! Receives N payload bytes from UDP into preallocated memory, as gr-netring's `rx_to_mem`
//! does, and prints how long it took and every counter of the engine.
//!
//! Without `--listen` it starts the built-in sender on loopback, so it runs anywhere:
//!
//! ```text
//! cargo run --release --example rx_to_mem -- --backend mio --bytes 800000000 --rate 800e6
//! cargo run --release --example rx_to_mem -- --listen 0.0.0.0:49000 --format chdr --bytes 1e9
//! cargo run --release --example rx_to_mem -- --bytes 1e8 --json   # one JSON line (docs/json.md)
//! ```
//!
//! The exit code is 1 when payload was lost (`--allow-loss`: 0).

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use fsdr_net::io::engine::ReuseportSpread;
use fsdr_net::io::send::{SenderConfig, StreamSender};
use fsdr_net::io::{Backend, Engine, EngineConfig, Format};

/// Receive N bytes of UDP payload into memory and report rate and losses.
#[derive(Parser, Debug)]
#[command(allow_negative_numbers = true)]
#[command(version)]
struct Args {
    /// Receive backend.
    #[arg(long, default_value = "mio")]
    backend: Backend,
    /// AF_XDP (`--backend xdp`, with `--interface`).
    #[command(flatten)]
    xdp: common::XdpArgs,
    /// Receive buffer to request (bytes; default the library's, 128 MiB).
    #[arg(long, default_value_t = fsdr_net::io::socket::DEFAULT_RECV_BUFFER)]
    recv_buff_size: usize,
    /// Largest datagram accepted whole (bytes); larger ones are counted as truncated.
    #[arg(long, default_value_t = 9000)]
    mtu: usize,
    /// Stop when no datagram arrives for this long (seconds).
    #[arg(long, default_value_t = 2.0)]
    timeout: f64,
    /// Payload bytes to receive (after the format's header); accepts 1e9 notation.
    #[arg(long, default_value = "1e9", value_parser = common::parse_u64)]
    bytes: u64,
    /// Receive from this address instead of starting the built-in sender.
    #[arg(long, value_parser = common::parse_addr)]
    listen: Option<SocketAddr>,
    /// Built-in sender: rate in bytes per second (unpaced when absent or 0); accepts 8e8.
    #[arg(long, value_parser = common::parse_rate)]
    rate: Option<f64>,
    /// Wire format.
    #[arg(long, default_value = "seq64")]
    format: Format,
    /// Built-in sender: datagram size in bytes, header included.
    #[arg(long, default_value_t = 8000)]
    datagram_size: usize,
    /// Datagrams per recvmmsg call.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// reuseport: receive threads (one SO_REUSEPORT socket each).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// reuseport: spread one flow over the sockets with a cBPF program (random or cpu).
    #[arg(long, value_parser = parse_spread)]
    spread: Option<ReuseportSpread>,
    /// uring: receive operations in flight.
    #[arg(long, default_value_t = 64)]
    uring_depth: usize,
    /// Pin the receive thread(s) to these CPUs (comma-separated).
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<usize>,
    /// Print the summary as one JSON object (fields in docs/json.md).
    #[arg(long)]
    json: bool,
    /// Exit code on loss.
    #[command(flatten)]
    loss: common::loss::LossArgs,
    /// Multicast: --listen 239.x.y.z:PORT joins a group.
    #[command(flatten)]
    multicast: common::multicast::RxMulticastArgs,
}

fn parse_spread(s: &str) -> Result<ReuseportSpread, String> {
    match s {
        "random" => Ok(ReuseportSpread::Random),
        "cpu" => Ok(ReuseportSpread::Cpu),
        _ => Err(format!("{s:?}: expected random or cpu")),
    }
}

fn main() -> Result<()> {
    common::init_logging();
    let args = Args::parse();
    // Preallocated and touched before anything starts, so that page faults do not count
    // against reception.
    let mut memory = vec![1u8; args.bytes as usize];
    let bind = args
        .listen
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let mut cfg = EngineConfig::new(bind);
    cfg.backend = args.backend;
    cfg.format = args.format;
    cfg.socket.recv_buffer = args.recv_buff_size;
    cfg.slot_size = args.mtu;
    cfg.batch = args.batch;
    cfg.threads.cpus = args.cpus.clone();
    cfg.reuseport_threads = args.threads;
    cfg.reuseport_spread = args.spread;
    cfg.uring_depth = args.uring_depth;
    args.multicast
        .check(args.listen, args.backend == Backend::Xdp)?;
    args.multicast.apply(args.listen, &mut cfg.socket)?;
    args.multicast.apply_xdp(&mut cfg);
    args.xdp.apply(&mut cfg);
    let mut engine =
        Engine::start(cfg).with_context(|| format!("starting the {} engine", args.backend))?;
    // Installed before saying so: a Ctrl-C from then on prints the final figures.
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))?;
    }
    eprintln!(
        "listening on {} ({} backend, {} format, receive buffer {} bytes)",
        engine.local_addr(),
        engine.backend(),
        args.format,
        engine.recv_buffer().effective
    );

    let sender = if args.listen.is_none() {
        if args.datagram_size > args.mtu {
            bail!(
                "--datagram-size {} exceeds --mtu {}",
                args.datagram_size,
                args.mtu
            );
        }
        let s = StreamSender::new(SenderConfig::new(engine.local_addr()), args.format)
            .datagram_size(args.datagram_size)
            .payload_bytes(args.bytes)
            .rate(args.rate.filter(|r| *r > 0.0));
        Some(s.spawn())
    } else {
        None
    };

    let load = fsdr_net_io::diagnosis::LoadMeter::start();
    let mut filled = 0usize;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let idle = common::seconds(args.timeout);
    let mut waiting_since = Instant::now();
    while filled < memory.len() {
        if interrupted.load(Ordering::Relaxed) {
            eprintln!("interrupted; stopping");
            break;
        }
        // Short waits, so that Ctrl-C is noticed promptly.
        let got = engine
            .recv_timeout(idle.min(Duration::from_millis(100)))
            .map(|d| {
                let p = d.payload();
                let n = p.len().min(memory.len() - filled);
                memory[filled..filled + n].copy_from_slice(&p[..n]);
                filled += n;
            });
        let now = Instant::now();
        if got.is_none() {
            if now.duration_since(waiting_since) >= idle {
                eprintln!("no datagram for {:.1} s; stopping", args.timeout);
                break;
            }
            continue;
        }
        waiting_since = now;
        first.get_or_insert(now);
        last = now;
    }
    let seconds = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    let stats = engine.shutdown();
    let load = load.finish();
    let report = match sender {
        Some(s) => Some(s.join().expect("sender thread")?),
        None => None,
    };
    std::hint::black_box(&memory);
    // Payload taken from the engine (the last datagram may hold more than the memory had
    // room for).
    let received = stats.delivered_bytes;
    // Payload lost: what the built-in sender sent and did not arrive; receiving from a
    // device, the frames the counters show (bytes unknown).
    let sent = report.map(|r| r.payload_bytes);
    let lost_frames = stats
        .missed
        .max(stats.kernel_drops + stats.overflow + stats.truncated + stats.malformed);
    let lost = match sent {
        Some(n) => n.saturating_sub(received),
        None => lost_frames,
    };
    let success = sent.map_or(if lost_frames == 0 { 1.0 } else { 0.0 }, |n| {
        received as f64 / n.max(1) as f64
    });
    let rate = if seconds > 0.0 {
        received as f64 / seconds
    } else {
        0.0
    };
    let mut words = fsdr_net::io::diagnosis::explain(&stats, 0, load.as_ref());
    let failure = args.loss.judge(&common::loss::Capture {
        arrived: common::loss::arrived(&stats),
        received,
        lost,
        ..Default::default()
    });
    let source = if sent.is_some() {
        "the built-in sender"
    } else {
        "the sender"
    };
    if let Some(w) = failure
        .as_ref()
        .and_then(|f| common::loss::sentence(f, source))
    {
        words.push(w);
    }
    if args.json {
        let json = serde_json::json!({
            "backend": args.backend.name(),
            "format": args.format.name(),
            "sent": sent,
            "received": received,
            "missed": stats.missed,
            "kernel_drops": stats.kernel_drops,
            "overflows": stats.overflow,
            "success_rate": success,
            "datagrams": stats.delivered,
            "seconds": seconds,
            "rate_bytes_per_s": rate,
            "stats": stats,
            "sender": report.map(|r| serde_json::json!({
                "datagrams": r.datagrams,
                "bytes": r.bytes,
                "payload_bytes": r.payload_bytes,
                "seconds": r.elapsed.as_secs_f64(),
                "errors": r.errors,
            })),
            "load": load,
            "explanation": words,
            "failure": failure.as_ref().map(common::loss::Failure::name),
        });
        println!("{json}");
    } else {
        println!("Received {filled} bytes in {:.0} ms", seconds * 1e3);
        if seconds > 0.0 {
            println!(
                "rate {:.1} MB/s, {:.0} datagrams/s (first datagram to last)",
                rate / 1e6,
                stats.delivered as f64 / seconds
            );
        }
        println!("{stats}");
        if let Some(report) = report {
            println!(
                "sender: {} datagrams, {} bytes in {:.0} ms ({:.1} MB/s)",
                report.datagrams,
                report.bytes,
                report.elapsed.as_secs_f64() * 1e3,
                report.rate() / 1e6
            );
        }
        if let Some(l) = &load {
            println!("machine CPU time: {l}");
        }
        for w in &words {
            println!("{w}");
        }
    }
    let what = if sent.is_some() {
        "payload bytes were"
    } else {
        "frames were"
    };
    args.loss.exit_on(failure.as_ref(), what);
    Ok(())
}
