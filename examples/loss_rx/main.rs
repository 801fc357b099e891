//! One receiver of the loss harness (`cargo xtask loss`): binds, prints `listening on ADDR`,
//! receives one stream until it has been idle for `--idle` seconds, and prints one line of JSON
//! with what it delivered, what was lost where, and the CPU time this process used (in all, by
//! `getrusage`, and by the threads' roles: receive threads, FutureSDR workers, main thread).
//!
//! Receivers:
//! * `flowgraph`: fsdr-net's `UdpSource` as its builder makes it by default (bytes are the
//!   wire's: received in place into the output buffer, `zero_copy`) → counting sink in a
//!   FutureSDR flowgraph; `flowgraph-<backend>`: the same with that backend (the engine);
//!   `flowgraph-fc32`: its `UdpSource<Complex32>` by default, the sc16 samples converted
//!   where each payload lands (the main job's source, `usrp_rx` without flags);
//!   `flowgraph-multi`: its `MultiUdpSource`, one output and sink per channel of a
//!   `--channels N` stream (`usrp_sim --channels N` to the same port), and
//!   `flowgraph-multi-inplace` its zero-copy `MultiInPlaceUdpSource`; `flowgraph-inplace`:
//!   its zero-copy `InPlaceUdpSource` (recvmmsg), `flowgraph-inplace-xdp` the same over
//!   AF_XDP (with `--interface`);
//! * `engine-<backend>`: the fsdr-net receive engine alone, its consumer on the main thread;
//!   `engine-inline`: the same engine (mio backend) received inline, on that thread;
//! * `inplace`, `inplace-inline`: fsdr-net's in-place receiver alone (bytes as items), its
//!   consumer on the main thread; `inline` runs the receive loop on that thread too;
//! * `futuresdr`: FutureSDR's own `futuresdr::blocks::UdpSource` (defaults) → counting sink;
//! * `recvmmsg`: a plain `recvmmsg` loop on one thread, the ceiling reference.
//!
//! ```text
//! cargo run --release --example loss_rx -- --receiver flowgraph-mio --format chdr
//! cargo run --release --example usrp_sim -- --dest 127.0.0.1:PORT --format chdr --duration 5
//! ```

#[path = "../common/mod.rs"]
mod common;
mod multi;
mod ports;
mod receivers;

use receivers::*;

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Parser;
use fsdr_net::io::{Backend, Format};

/// Receive one stream and report what was delivered and what it cost.
#[derive(Parser, Debug)]
#[command(allow_negative_numbers = true)]
#[command(version)]
struct Args {
    /// flowgraph[-<backend>], flowgraph-fc32, flowgraph-inplace[-xdp], flowgraph-multi[-inplace],
    /// engine-<backend>, engine-inline, inplace, inplace-inline, futuresdr or recvmmsg.
    #[arg(long, default_value = "flowgraph-mio")]
    receiver: String,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1:0", value_parser = common::parse_addr)]
    bind: SocketAddr,
    /// Wire format of the stream.
    #[arg(long, default_value = "chdr")]
    format: Format,
    /// Datagram size in bytes, header included.
    #[arg(long, default_value_t = 8000)]
    size: usize,
    /// End after this many seconds without a datagram (once the first has arrived).
    #[arg(long, default_value_t = 0.5)]
    idle: f64,
    /// Runtime and engine tuning of the fsdr-net receivers.
    #[command(flatten)]
    tuning: common::TuningArgs,
    /// End after this many seconds in any case.
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
    /// Run the fsdr-net flowgraphs on FutureSDR's flow scheduler with every block pinned to
    /// its first worker (instead of the default runtime): a hand-over then wakes one worker.
    #[arg(long)]
    flow_pinned: bool,
    /// Channels of the stream (`usrp_sim --channels N`: stream ID or CHDR destination
    /// endpoint c): `flowgraph-multi` gives each its own output; `recvmmsg` counts every
    /// datagram whatever its channel; the other receivers take one stream and so only 1.
    #[arg(long, default_value_t = 1)]
    channels: usize,
    /// Ports: N streams, one to each of N consecutive ports from the one announced (the
    /// harness starts a sender per port); `flowgraph-<backend>` and `flowgraph-inplace` run
    /// a source per port in one flowgraph, `recvmmsg` a loop per port, each on its thread.
    #[arg(long, default_value_t = 1)]
    ports: usize,
    /// `recvmmsg` only: above 1, receive into a ring of this many batches' slots (64 of
    /// 9000 B each), each call into the slots after the last datagram received, so that
    /// every slot is written in turn as a consumer's buffer is, instead of reusing one
    /// batch's first slots (which stay in the core's cache, as no receiver's that keeps the
    /// data for a consumer can): what cache residency is worth to the reference.
    #[arg(long, default_value_t = 1)]
    loop_sets: usize,
    /// Multicast: --bind 239.x.y.z:PORT joins a group.
    #[command(flatten)]
    multicast: common::multicast::RxMulticastArgs,
}

/// What one receiver run reports.
#[derive(Default, Debug)]
struct Outcome {
    /// Datagrams handed to the consumer (the flowgraph's sink, the engine's consumer, the
    /// reference loop), counted by their parsed headers.
    delivered: u64,
    /// Payload bytes that reached the consumer.
    bytes: u64,
    /// Datagrams the kernel dropped at the socket (receive buffer full).
    kernel_drops: u64,
    /// Datagrams the receiver dropped after the kernel (its own ring full).
    overflows: u64,
    /// Delivered chunks whose header did not parse (misaligned or corrupt output).
    malformed: u64,
    /// fsdr-net receivers: every engine counter (receive calls, wake-ups, pauses, …).
    stats: Option<fsdr_net::io::Stats>,
    /// fsdr-net flowgraph receivers: payload bytes copied after the kernel.
    copied_bytes: Option<u64>,
}

impl Outcome {
    /// Counts one datagram handed to the consumer, by its parsed header.
    fn count(&mut self, format: Format, datagram: &[u8]) {
        match format.parse(datagram) {
            Ok(info) => {
                self.delivered += 1;
                self.bytes += info.payload_len as u64;
            }
            Err(_) => self.malformed += 1,
        }
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    args.tuning.place()?;
    args.multicast
        .check(Some(args.bind), args.receiver.ends_with("-xdp"))?;
    // Logs go to stderr: stdout carries the address line and the JSON result.
    common::init_logging();
    futuresdr::runtime::config::set("ctrlport_enable", false);
    // Every 100 ms is enough: the run ends after `--idle` seconds without a datagram, so a
    // thread that ends with it used next to nothing after its last sample.
    let meter = fsdr_net_io::host::ThreadCpuMeter::start(Duration::from_millis(100))?;
    let (kind, backend) = match args.receiver.split_once('-') {
        Some(("flowgraph", "fc32")) => ("flowgraph-fc32", None),
        Some(("flowgraph", "inplace")) => ("flowgraph-inplace", None),
        Some(("flowgraph", "inplace-xdp")) => ("flowgraph-inplace", Some(Backend::Xdp)),
        Some(("flowgraph", "multi")) => ("flowgraph-multi", None),
        Some(("flowgraph", "multi-inplace")) => ("flowgraph-multi-inplace", None),
        Some(("inplace", "inline")) => ("inplace-inline", None),
        Some(("engine", "inline")) => ("engine-inline", None),
        Some((k, b)) => (k, Some(b.parse::<Backend>().map_err(anyhow::Error::msg)?)),
        None => (args.receiver.as_str(), None),
    };
    if args.channels == 0
        || (args.channels > 1
            && !matches!(
                kind,
                "flowgraph-multi" | "flowgraph-multi-inplace" | "recvmmsg"
            ))
    {
        bail!(
            "--channels {}: only flowgraph-multi[-inplace] and recvmmsg receive several channels (and \
             every receiver at least one)",
            args.channels
        );
    }
    if args.ports == 0
        || (args.ports > 1
            && (args.channels > 1
                || args.bind.ip().is_multicast()
                || !matches!(
                    kind,
                    "flowgraph" | "flowgraph-fc32" | "flowgraph-inplace" | "recvmmsg"
                )))
    {
        bail!(
            "--ports {}: only flowgraph-<backend>, flowgraph-inplace and recvmmsg receive on \
             several ports, unicast and one channel each (and every receiver on at least one)",
            args.ports
        );
    }
    let outcome = match (kind, backend) {
        ("flowgraph-inplace", b) => flowgraph_in_place(&args, b)?,
        ("flowgraph-multi", None) => multi::flowgraph_multi(&args)?,
        ("flowgraph-multi-inplace", None) => multi::flowgraph_multi_in_place(&args)?,
        ("inplace", None) => in_place(&args, false)?,
        ("inplace-inline", None) => in_place(&args, true)?,
        ("flowgraph", b) => flowgraph(&args, b)?,
        ("flowgraph-fc32", None) => flowgraph_fc32(&args)?,
        ("engine", Some(b)) => engine(&args, b, false)?,
        ("engine-inline", None) => engine(&args, Backend::Mio, true)?,
        ("futuresdr", None) => futuresdr_source(&args)?,
        ("recvmmsg", None) => reference(&args)?,
        _ => bail!(
            "unknown receiver {:?}: flowgraph[-<backend>], flowgraph-fc32, flowgraph-inplace[-xdp], flowgraph-multi[-inplace], engine-<backend>, engine-inline, inplace, inplace-inline, futuresdr or recvmmsg",
            args.receiver
        ),
    };
    // Which thread reads the socket: its own receive thread, or the consumer's (the inline
    // receivers and the reference), or FutureSDR's workers (its own source).
    let reader = match kind {
        "engine-inline" | "inplace-inline" | "recvmmsg" => "main",
        "futuresdr" => "workers",
        _ => "receive",
    };
    let threads = ThreadSplit::of(&meter.finish(), reader);
    let cpu = cpu_seconds();
    println!(
        "{}",
        serde_json::json!({
            "receiver": args.receiver,
            "delivered": outcome.delivered,
            "bytes": outcome.bytes,
            "kernel_drops": outcome.kernel_drops,
            "overflows": outcome.overflows,
            "malformed": outcome.malformed,
            "cpu_seconds": cpu,
            "stats": outcome.stats,
            "copied_bytes": outcome.copied_bytes,
            "threads": threads,
        })
    );
    Ok(())
}

/// Where the process's CPU time went, in CPU seconds by the threads' roles.
#[derive(Debug, Default, serde::Serialize)]
struct ThreadSplit {
    /// fsdr-net's receive threads (`fsdr-net-rx*`).
    receive: f64,
    /// FutureSDR's smol workers (`smol-*`).
    workers: f64,
    /// The main thread: the consumer of the engine and in-place receivers, and the whole
    /// receive loop of the inline receivers and of the recvmmsg reference.
    main: f64,
    /// Every other thread (the runtime's helpers, the meter itself).
    other: f64,
    /// Which of these reads the socket: `receive`, `main` or `workers`.
    reader: &'static str,
}

impl ThreadSplit {
    fn of(threads: &[fsdr_net_io::host::ThreadCpu], reader: &'static str) -> ThreadSplit {
        let pid = std::process::id() as i32;
        let mut split = ThreadSplit {
            reader,
            ..ThreadSplit::default()
        };
        for t in threads {
            tracing::debug!(tid = t.tid, name = %t.name, seconds = t.seconds, "thread CPU");
            let role = if t.tid == pid || t.name.starts_with(ports::LOOP_THREAD) {
                &mut split.main
            } else if t
                .name
                .starts_with(fsdr_net::io::engine::RECEIVE_THREAD_PREFIX)
            {
                &mut split.receive
            } else if t.name.starts_with("smol-") {
                &mut split.workers
            } else {
                &mut split.other
            };
            *role += t.seconds;
        }
        split
    }
}

/// Announces the bound address on stdout; the harness starts the sender when it reads it.
fn announce(addr: SocketAddr) {
    use std::io::Write;
    println!("listening on {addr}");
    let _ = std::io::stdout().flush();
}

/// User plus system CPU time of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    // Checked by: `every_loss_harness_receiver_accounts_for_every_datagram`.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
