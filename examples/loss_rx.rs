//! One receiver of the loss harness (`cargo xtask loss`): binds, prints `listening on ADDR`,
//! receives one stream until it has been idle for `--idle` seconds, and prints one line of JSON
//! with what it delivered, what was lost where, and the CPU time this process used (in all, by
//! `getrusage`, and by the threads' roles: receive threads, FutureSDR workers, main thread).
//!
//! Receivers:
//! * `flowgraph-<backend>`: fsdr-net's `UdpSource` → counting sink in a FutureSDR flowgraph;
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

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use fsdr_net::io::socket::{SocketConfig, open_socket};
use fsdr_net::io::sys::{RecvBatch, Wait, socket_drops};
use fsdr_net::io::{Backend, Engine, EngineConfig, Format};
use fsdr_net::{SourceStats, UdpSource, UdpSourceBuilder};
use futuresdr::blocks::NullSink;
use futuresdr::runtime::Flowgraph;
use futuresdr::runtime::buffer::circuit;
use futuresdr::runtime::dev::prelude::*;
use futuresdr::runtime::macros::connect;

/// Receive one stream and report what was delivered and what it cost.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// flowgraph-<backend>, flowgraph-inplace, engine-<backend>, engine-inline, inplace,
    /// inplace-inline, futuresdr or recvmmsg.
    #[arg(long, default_value = "flowgraph-mio")]
    receiver: String,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1:0")]
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
    // Logs go to stderr: stdout carries the address line and the JSON result.
    common::init_logging();
    futuresdr::runtime::config::set("ctrlport_enable", false);
    // Every 100 ms is enough: the run ends after `--idle` seconds without a datagram, so a
    // thread that ends with it used next to nothing after its last sample.
    let meter = fsdr_net::io::host::ThreadCpuMeter::start(Duration::from_millis(100))?;
    let (kind, backend) = match args.receiver.split_once('-') {
        Some(("flowgraph", "inplace")) => ("flowgraph-inplace", None),
        Some(("inplace", "inline")) => ("inplace-inline", None),
        Some(("engine", "inline")) => ("engine-inline", None),
        Some((k, b)) => (k, Some(b.parse::<Backend>().map_err(anyhow::Error::msg)?)),
        None => (args.receiver.as_str(), None),
    };
    let outcome = match (kind, backend) {
        ("flowgraph-inplace", None) => flowgraph_in_place(&args)?,
        ("inplace", None) => in_place(&args, false)?,
        ("inplace-inline", None) => in_place(&args, true)?,
        ("flowgraph", Some(b)) => flowgraph(&args, b)?,
        ("engine", Some(b)) => engine(&args, b, false)?,
        ("engine-inline", None) => engine(&args, Backend::Mio, true)?,
        ("futuresdr", None) => futuresdr_source(&args)?,
        ("recvmmsg", None) => reference(&args)?,
        _ => bail!(
            "unknown receiver {:?}: flowgraph-<backend>, flowgraph-inplace, engine-<backend>, engine-inline, inplace, inplace-inline, futuresdr or recvmmsg",
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
    fn of(threads: &[fsdr_net::io::host::ThreadCpu], reader: &'static str) -> ThreadSplit {
        let pid = std::process::id() as i32;
        let mut split = ThreadSplit {
            reader,
            ..ThreadSplit::default()
        };
        for t in threads {
            tracing::debug!(tid = t.tid, name = %t.name, seconds = t.seconds, "thread CPU");
            let role = if t.tid == pid {
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
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn header_len(args: &Args) -> usize {
    args.format
        .header_len(matches!(args.format, Format::Chdr | Format::Vrt))
}

/// The builder both flowgraph receivers start from.
fn source_builder(args: &Args) -> UdpSourceBuilder<u8> {
    let b = UdpSource::<u8>::builder(args.bind.to_string())
        .format(args.format)
        .time_tags(false)
        .max_datagram(args.size.max(9000))
        .stats_interval(None)
        .finish_after_idle(Duration::from_secs_f64(args.idle))
        .first_datagram_within(Duration::from_secs_f64(args.timeout));
    args.tuning.source(b)
}

/// Runs a flowgraph of `blocks` until it ends (or the timeout stops it), after announcing
/// its address.
fn run_flowgraph(
    args: &Args,
    fg: Flowgraph,
    local: SocketAddr,
    blocks: Vec<futuresdr::runtime::BlockId>,
) -> Result<Flowgraph> {
    if args.flow_pinned {
        use futuresdr::runtime::Runtime;
        use futuresdr::runtime::scheduler::FlowScheduler;
        let rt = Runtime::with_scheduler(FlowScheduler::with_pinned_blocks(vec![blocks]));
        return run_on(args, rt.start(fg)?, local);
    }
    run_on(args, args.tuning.runtime().start(fg)?, local)
}

fn run_on(
    args: &Args,
    running: futuresdr::runtime::RunningFlowgraph,
    local: SocketAddr,
) -> Result<Flowgraph> {
    announce(local);
    let handle = running.handle();
    let timeout = Duration::from_secs_f64(args.timeout);
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(timeout);
        let _ = futuresdr::futures::executor::block_on(handle.stop());
    });
    let fg = running.wait()?;
    drop(watchdog);
    Ok(fg)
}

/// What a flowgraph receiver delivered: `bytes` at the sink, the source's counters.
fn flowgraph_outcome(args: &Args, bytes: u64, s: SourceStats) -> Outcome {
    let payload = (args.size - header_len(args)) as u64;
    Outcome {
        delivered: bytes / payload,
        bytes,
        kernel_drops: s.kernel_drops,
        overflows: s.overflow,
        malformed: s.malformed,
        copied_bytes: Some(s.stream.copied_bytes),
        stats: Some(s.engine),
    }
}

fn flowgraph(args: &Args, backend: Backend) -> Result<Outcome> {
    let src = source_builder(args).backend(backend).build()?;
    let local = src.local_addr();
    let sink = NullSink::<u8>::new();
    let mut fg = Flowgraph::new();
    connect!(fg, src > sink);
    let blocks = vec![src.id(), sink.id()];
    let fg = run_flowgraph(args, fg, local, blocks)?;
    let bytes = fg.block(&sink)?.n_received() as u64;
    Ok(flowgraph_outcome(args, bytes, fg.block(&src)?.stats()))
}

/// The zero-copy source into a sink that reads the circuit buffer in place.
fn flowgraph_in_place(args: &Args) -> Result<Outcome> {
    let src = source_builder(args).build_in_place()?;
    let local = src.local_addr();
    let sink = NullSink::<u8, circuit::Reader<u8>>::new();
    let mut fg = Flowgraph::new();
    connect!(fg, src > sink; src < sink);
    let blocks = vec![src.id(), sink.id()];
    let fg = run_flowgraph(args, fg, local, blocks)?;
    let bytes = fg.block(&sink)?.n_received() as u64;
    Ok(flowgraph_outcome(args, bytes, fg.block(&src)?.stats()))
}

/// The in-place receiver alone: payload bytes land in 32 buffers of 64 datagrams each (or
/// `--buffer-datagrams`), which the main thread takes and gives straight back.
fn in_place(args: &Args, inline: bool) -> Result<Outcome> {
    use fsdr_net::io::depacketizer::DepacketizerConfig;
    use fsdr_net::io::inplace::{InPlaceConfig, InPlaceReceiver, Progress};
    use fsdr_net::io::sample::{Decoder, WireFormat};
    let mut engine = EngineConfig::new(args.bind);
    engine.backend = Backend::Recvmmsg;
    engine.format = args.format;
    engine.slot_size = args.size.max(9000);
    args.tuning.apply(&mut engine);
    const BUFFERS: usize = 32;
    let per_buffer = args.tuning.buffer_datagrams.unwrap_or(64);
    if per_buffer == 0 {
        bail!("--buffer-datagrams must be at least 1");
    }
    let buffer_bytes = per_buffer * engine.slot_size;
    let cfg = InPlaceConfig {
        engine,
        decoder: Decoder::<u8>::new(WireFormat::Plain)?,
        depacketizer: DepacketizerConfig::default(),
        buffers: BUFFERS,
    };
    let mut rx = if inline {
        InPlaceReceiver::<u8, Vec<u8>>::start_inline(cfg)?
    } else {
        InPlaceReceiver::<u8, Vec<u8>>::start(cfg)?
    };
    for _ in 0..BUFFERS {
        rx.give(vec![0u8; buffer_bytes])
            .map_err(|_| anyhow::anyhow!("buffer refused"))?;
    }
    announce(rx.local_addr());
    let mut out = Outcome::default();
    let mut end = StreamEnd::new(args);
    loop {
        if rx.receive(Duration::from_millis(50)) == Progress::Ready {
            end.data();
            while let Some(f) = rx.take() {
                out.bytes += f.items as u64;
                rx.give(f.buffer)
                    .map_err(|_| anyhow::anyhow!("buffer refused"))?;
            }
        } else if end.reached() {
            break;
        }
    }
    let (s, dp, rest) = rx.shutdown();
    out.bytes += rest.iter().map(|f| f.items as u64).sum::<u64>();
    out.delivered = s.delivered;
    out.kernel_drops = s.kernel_drops;
    out.overflows = s.overflow;
    out.malformed = s.malformed;
    out.copied_bytes = Some(dp.copied_bytes);
    out.stats = Some(s);
    Ok(out)
}

fn engine(args: &Args, backend: Backend, inline: bool) -> Result<Outcome> {
    let mut cfg = EngineConfig::new(args.bind);
    cfg.backend = backend;
    cfg.format = args.format;
    cfg.slot_size = args.size.max(9000);
    args.tuning.apply(&mut cfg);
    let mut engine = if inline {
        Engine::start_inline(cfg)?
    } else {
        Engine::start(cfg)?
    };
    announce(engine.local_addr());
    let mut out = Outcome::default();
    let mut end = StreamEnd::new(args);
    // The end clock is read when a wait comes back empty, not per datagram (as the reference
    // reads it per batch): a clock read per datagram was 1.6% of the engine's profile at
    // 1472 B.
    let mut fresh = false;
    loop {
        if let Some(d) = engine.recv_timeout(Duration::from_millis(50)) {
            fresh = true;
            out.delivered += 1;
            out.bytes += d.payload().len() as u64;
        } else {
            if std::mem::take(&mut fresh) {
                end.data();
            }
            if end.reached() {
                break;
            }
        }
    }
    let s = engine.shutdown();
    out.kernel_drops = s.kernel_drops;
    out.overflows = s.overflow;
    out.malformed = s.malformed;
    out.stats = Some(s);
    Ok(out)
}

/// When a receiver stops: once no data came for `--idle` after the first, or after
/// `--timeout` whatever came.
struct StreamEnd {
    start: Instant,
    last: Option<Instant>,
    idle: Duration,
    timeout: Duration,
}

impl StreamEnd {
    fn new(args: &Args) -> Self {
        StreamEnd {
            start: Instant::now(),
            last: None,
            idle: Duration::from_secs_f64(args.idle),
            timeout: Duration::from_secs_f64(args.timeout),
        }
    }

    /// Data arrived now.
    fn data(&mut self) {
        self.last = Some(Instant::now());
    }

    fn reached(&self) -> bool {
        self.last.is_some_and(|l| l.elapsed() >= self.idle) || self.start.elapsed() >= self.timeout
    }
}

fn reference(args: &Args) -> Result<Outcome> {
    // The same socket setup as the engine's (receive buffer forced up), then one plain loop.
    let opened = open_socket(&SocketConfig::new(args.bind), false)?;
    announce(opened.local_addr);
    const BATCH: usize = 64;
    let slot = args.size.max(9000);
    let mut batch = RecvBatch::new(BATCH);
    let mut bufs = vec![0u8; BATCH * slot];
    let mut out = Outcome::default();
    let mut end = StreamEnd::new(args);
    // The bare loop: one blocking recvmmsg(MSG_WAITFORONE) per batch; the receive timeout
    // only serves to notice the end of the stream.
    opened.socket.set_nonblocking(false)?;
    opened
        .socket
        .set_read_timeout(Some(Duration::from_millis(50)))?;
    loop {
        for (i, chunk) in bufs.chunks_mut(slot).enumerate() {
            // SAFETY: the buffers outlive the call and nothing else uses them meanwhile.
            unsafe { batch.set_buffer(i, chunk.as_mut_ptr(), chunk.len()) };
        }
        match batch.recv(&opened.socket, BATCH, Wait::ForOne) {
            Ok(n) => {
                end.data();
                for (i, chunk) in bufs.chunks(slot).take(n).enumerate() {
                    out.count(args.format, &chunk[..batch.meta(i).len.min(slot)]);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if end.reached() {
                    break;
                }
            }
            Err(e) => return Err(e).context("recvmmsg"),
        }
    }
    out.kernel_drops = socket_drops(&opened.socket).unwrap_or(0) as u64;
    Ok(out)
}

/// Counts what FutureSDR's `UdpSource` delivers: that block writes each datagram whole into
/// its output, so the stream is cut into `size`-byte chunks and each chunk's header parsed.
/// Ends once no data came for `idle` after the first.
#[derive(Block)]
struct CountSink {
    #[input]
    input: DefaultCpuReader<u8>,
    format: Format,
    size: usize,
    idle: Duration,
    carry: Vec<u8>,
    out: Outcome,
    last: Option<Instant>,
    finished: Arc<AtomicBool>,
}

impl Kernel for CountSink {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let data = self.input.slice();
        let n = data.len();
        if n > 0 {
            self.last = Some(Instant::now());
            let mut rest = data;
            // A datagram split across calls is completed in `carry`; whole ones are parsed
            // in place, so counting copies nothing (the block under test should pay for its
            // own copies only).
            if !self.carry.is_empty() {
                let take = (self.size - self.carry.len()).min(rest.len());
                self.carry.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if self.carry.len() == self.size {
                    self.out.count(self.format, &self.carry);
                    self.carry.clear();
                }
            }
            while rest.len() >= self.size {
                self.out.count(self.format, &rest[..self.size]);
                rest = &rest[self.size..];
            }
            self.carry.extend_from_slice(rest);
            self.input.consume(n);
        }
        match self.last {
            Some(t) if t.elapsed() >= self.idle => {
                io.finished = true;
                self.finished.store(true, Ordering::Relaxed);
            }
            Some(t) => io.block_on(futuresdr::runtime::Timer::after(
                self.idle.saturating_sub(t.elapsed()),
            )),
            None => io.block_on(futuresdr::runtime::Timer::after(Duration::from_millis(100))),
        }
        Ok(())
    }
}

/// Kernel drops of the UDP socket bound to `port` on loopback, from /proc/net/udp (FutureSDR's
/// block keeps its socket to itself).
fn proc_udp_drops(port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    let want = format!(":{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        (cols.get(1)?.ends_with(&want)).then(|| cols.last()?.parse().ok())?
    })
}

fn futuresdr_source(args: &Args) -> Result<Outcome> {
    // The block binds in init(); pick a free port first so the address can be announced.
    let port = match args.bind.port() {
        0 => std::net::UdpSocket::bind(args.bind)?.local_addr()?.port(),
        p => p,
    };
    let addr = SocketAddr::new(args.bind.ip(), port);
    let src = futuresdr::blocks::UdpSource::<u8>::new(addr.to_string(), args.size);
    let finished = Arc::new(AtomicBool::new(false));
    let sink = CountSink {
        input: Default::default(),
        format: args.format,
        size: args.size,
        idle: Duration::from_secs_f64(args.idle),
        carry: Vec::with_capacity(args.size),
        out: Outcome::default(),
        last: None,
        finished: finished.clone(),
    };
    let mut fg = Flowgraph::new();
    connect!(fg, src > sink);
    let running = args.tuning.runtime().start(fg)?;
    // Wait until the block has bound its socket.
    let bound = Instant::now();
    while proc_udp_drops(port).is_none() {
        if bound.elapsed() > Duration::from_secs(10) {
            bail!("FutureSDR's UdpSource did not bind {addr}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    announce(addr);
    let handle = running.handle();
    // The block awaits recv_from inside work() and so never sees that its sink finished; empty
    // datagrams, sent once the sink is done, wake it so that it can end. The same thread keeps
    // the socket's last drop count, read before the block closes it (and before any wake-up
    // datagram could add to it).
    let drops = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let side = {
        let (drops, done, finished) = (drops.clone(), done.clone(), finished.clone());
        let timeout = Duration::from_secs_f64(args.timeout);
        std::thread::spawn(move || {
            let start = Instant::now();
            let kick = std::net::UdpSocket::bind((addr.ip(), 0)).ok();
            while !done.load(Ordering::Relaxed) {
                if finished.load(Ordering::Relaxed) {
                    if let Some(k) = &kick {
                        let _ = k.send_to(&[], addr);
                    }
                } else if let Some(d) = proc_udp_drops(port) {
                    drops.store(d, Ordering::Relaxed);
                }
                if start.elapsed() > timeout {
                    let _ = futuresdr::futures::executor::block_on(handle.stop());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let mut fg = running.wait()?;
    done.store(true, Ordering::Relaxed);
    let _ = side.join();
    let mut out = std::mem::take(&mut fg.block_mut(&sink)?.out);
    out.kernel_drops = drops.load(Ordering::Relaxed);
    Ok(out)
}
