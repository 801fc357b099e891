//! The receivers `loss_rx` runs: fsdr-net's flowgraph sources, in-place receivers and
//! engines, the bare recvmmsg loop (the reference), and FutureSDR's own UdpSource.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use fsdr_net::io::sample::{Item, WireFormat};
use fsdr_net::io::socket::{OpenedSocket, SocketConfig, open_socket};
use fsdr_net::io::{Backend, Engine, EngineConfig, Format};
use fsdr_net::{SourceStats, UdpSource, UdpSourceBuilder};
use fsdr_net_io::sys::{RecvBatch, Wait, socket_drops};
use futuresdr::blocks::NullSink;
use futuresdr::runtime::buffer::circuit;
use futuresdr::runtime::dev::prelude::*;
use futuresdr::runtime::macros::connect;
use futuresdr::runtime::{BlockRef, Flowgraph};

use super::ports::{LOOP_THREAD, on_ports};
use super::{Args, Outcome, announce};

pub(crate) fn header_len(args: &Args) -> usize {
    args.format
        .header_len(matches!(args.format, Format::Chdr | Format::Vrt))
}

/// The builder every flowgraph receiver of bytes starts from, bound to `bind`: bytes are
/// counted, not decoded.
pub(crate) fn source_builder(args: &Args, bind: SocketAddr) -> UdpSourceBuilder<u8> {
    items_builder(args, bind, WireFormat::Plain)
}

/// The builder of a source of `T` decoded from `wire`, bound to `bind`.
fn items_builder<T: Item>(args: &Args, bind: SocketAddr, wire: WireFormat) -> UdpSourceBuilder<T> {
    let b = UdpSource::<T>::builder(bind.to_string())
        .format(args.format)
        .wire_format(wire)
        .time_tags(false)
        .max_datagram(args.size.max(9000))
        .stats_interval(None)
        .finish_after_idle(crate::common::seconds(args.idle))
        .first_datagram_within(crate::common::seconds(args.timeout))
        .configure(|c| {
            // Checked in main before any receiver starts.
            let _ = args.multicast.apply(Some(args.bind), &mut c.socket);
        });
    args.tuning.source(b)
}

/// Runs a flowgraph of `blocks` until it ends (or the timeout stops it), after announcing
/// its address.
pub(crate) fn run_flowgraph(
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

pub(crate) fn run_on(
    args: &Args,
    running: futuresdr::runtime::RunningFlowgraph,
    local: SocketAddr,
) -> Result<Flowgraph> {
    announce(local);
    let handle = running.handle();
    let timeout = crate::common::seconds(args.timeout);
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(timeout);
        let _ = futuresdr::futures::executor::block_on(handle.stop());
    });
    let fg = running.wait()?;
    drop(watchdog);
    Ok(fg)
}

/// What a flowgraph receiver delivered: `bytes` at the sink, the source's counters.
pub(crate) fn flowgraph_outcome(args: &Args, bytes: u64, s: SourceStats) -> Outcome {
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

/// fsdr-net's `UdpSource` of bytes into a sink; with `--ports N` one source and sink per
/// port.
pub(crate) fn flowgraph(args: &Args, backend: Option<Backend>) -> Result<Outcome> {
    flowgraph_of::<u8>(args, backend, WireFormat::Plain)
}

/// `flowgraph-fc32`: fsdr-net's `UdpSource<Complex32>` as its builder makes it by default,
/// the samples (sc16, as a USRP sends them) converted where each payload lands — the main
/// job's (`usrp_rx`'s) source; with `--ports N` one source and sink per port.
pub(crate) fn flowgraph_fc32(args: &Args) -> Result<Outcome> {
    let wire = fsdr_net::io::emulator::EmulatorConfig::default_wire(args.format);
    flowgraph_of::<num_complex::Complex32>(args, None, wire)
}

/// `UdpSource<T>` decoding `wire` into a sink that counts items; what it delivered is
/// counted in wire bytes.
fn flowgraph_of<T: Item>(
    args: &Args,
    backend: Option<Backend>,
    wire: WireFormat,
) -> Result<Outcome> {
    let wire_per_item = {
        let (unit, items) = wire.unit(std::mem::size_of::<T>());
        move |n: usize| n / items * unit
    };
    let srcs = on_ports(
        args,
        |bind| {
            let b = items_builder::<T>(args, bind, wire);
            let b = match backend {
                Some(backend) => b.backend(backend),
                None => b,
            };
            // After the backend: the xdp backend's interface.
            Ok(b.configure(|c| args.multicast.apply_xdp(c)).build()?)
        },
        |s| s.local_addr(),
    )?;
    let local = srcs[0].local_addr();
    per_port(
        args,
        srcs,
        local,
        |mut fg, src| {
            let sink = NullSink::<T>::new();
            connect!(fg, src > sink);
            Ok((src, sink))
        },
        |fg, (src, sink)| {
            let items = fg.block(sink)?.n_received();
            Ok((wire_per_item(items), fg.block(src)?.stats()))
        },
    )
}

/// A source per port, each added to one flowgraph with its sink by `add`; runs it and adds
/// up what each delivered (`each`: a sink's byte count and its source's counters).
fn per_port<S: Kernel + 'static, K: Kernel + 'static>(
    args: &Args,
    srcs: Vec<S>,
    local: SocketAddr,
    add: impl Fn(&mut Flowgraph, S) -> Result<(BlockRef<S>, BlockRef<K>)>,
    each: impl Fn(&Flowgraph, &(BlockRef<S>, BlockRef<K>)) -> Result<(usize, SourceStats)>,
) -> Result<Outcome> {
    let mut fg = Flowgraph::new();
    let mut pairs = Vec::with_capacity(srcs.len());
    let mut blocks = Vec::new();
    for src in srcs {
        let (src, sink) = add(&mut fg, src)?;
        blocks.extend([src.id(), sink.id()]);
        pairs.push((src, sink));
    }
    let fg = run_flowgraph(args, fg, local, blocks)?;
    let mut out = Outcome::default();
    for p in &pairs {
        let (bytes, stats) = each(&fg, p)?;
        out.merge(flowgraph_outcome(args, bytes as u64, stats));
    }
    Ok(out)
}

/// The zero-copy source into a sink that reads the circuit buffer in place (over AF_XDP
/// with `backend`: `Backend::Xdp`); with `--ports N` one source and sink per port.
pub(crate) fn flowgraph_in_place(args: &Args, backend: Option<Backend>) -> Result<Outcome> {
    let srcs = on_ports(
        args,
        |bind| {
            let b = source_builder(args, bind);
            let b = match backend {
                // After the backend: the xdp backend's interface.
                Some(k) => b.backend(k).configure(|c| args.multicast.apply_xdp(c)),
                None => b,
            };
            Ok(b.build_in_place()?)
        },
        |s| s.local_addr(),
    )?;
    let local = srcs[0].local_addr();
    per_port(
        args,
        srcs,
        local,
        |mut fg, src| {
            let sink = NullSink::<u8, circuit::Reader<u8>>::new();
            connect!(fg, src > sink; src < sink);
            Ok((src, sink))
        },
        |fg, (src, sink)| Ok((fg.block(sink)?.n_received(), fg.block(src)?.stats())),
    )
}

/// The in-place receiver alone: payload bytes land in 32 buffers of 64 datagrams each (or
/// `--buffer-datagrams`), which the main thread takes and gives straight back.
pub(crate) fn in_place(args: &Args, inline: bool) -> Result<Outcome> {
    use fsdr_net::io::depacketizer::DepacketizerConfig;
    use fsdr_net::io::inplace::{InPlaceConfig, InPlaceReceiver, Progress};
    use fsdr_net::io::sample::Decoder;
    let mut engine = EngineConfig::new(args.bind);
    engine.backend = Backend::Recvmmsg;
    engine.format = args.format;
    engine.slot_size = args.size.max(9000);
    args.tuning.apply(&mut engine);
    args.multicast.apply(Some(args.bind), &mut engine.socket)?;
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

pub(crate) fn engine(args: &Args, backend: Backend, inline: bool) -> Result<Outcome> {
    let mut cfg = EngineConfig::new(args.bind);
    cfg.backend = backend;
    cfg.format = args.format;
    cfg.slot_size = args.size.max(9000);
    args.tuning.apply(&mut cfg);
    args.multicast.apply(Some(args.bind), &mut cfg.socket)?;
    args.multicast.apply_xdp(&mut cfg);
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
            idle: crate::common::seconds(args.idle),
            timeout: crate::common::seconds(args.timeout),
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

pub(crate) fn reference(args: &Args) -> Result<Outcome> {
    // The same socket setup as the engine's (receive buffer forced up), then one plain loop
    // per port (`--ports`), each on a thread of its own.
    let sockets = on_ports(
        args,
        |bind| {
            let mut socket = SocketConfig::new(bind);
            args.multicast.apply(Some(bind), &mut socket)?;
            Ok(open_socket(&socket, false)?)
        },
        |o| o.local_addr,
    )?;
    announce(sockets[0].local_addr);
    std::thread::scope(|s| {
        let loops: Vec<_> = sockets
            .iter()
            .skip(1)
            .enumerate()
            .map(|(c, o)| {
                std::thread::Builder::new()
                    .name(format!("{LOOP_THREAD}{}", c + 1))
                    .spawn_scoped(s, move || reference_loop(args, o))
            })
            .collect::<std::io::Result<_>>()?;
        let mut out = reference_loop(args, &sockets[0])?;
        for l in loops {
            out.merge(
                l.join()
                    .map_err(|_| anyhow::anyhow!("a reference loop panicked"))??,
            );
        }
        Ok(out)
    })
}

/// The bare loop on one socket: one blocking recvmmsg(MSG_WAITFORONE) per batch, each
/// datagram counted by its header.
fn reference_loop(args: &Args, opened: &OpenedSocket) -> Result<Outcome> {
    let socket = &opened.socket;
    const BATCH: usize = 64;
    let slot = args.size.max(9000);
    let mut batch = RecvBatch::new(BATCH);
    // `--loop-sets N`: above 1, the loop's buffers are a ring of N batches' slots, and each
    // call receives into the slots after the last datagram received, so that every slot is
    // written in turn, as a consumer's buffer would be. (Until 2026-11-30 each call took
    // the next set from its first slot: as a call mostly brings a datagram or two, the few
    // first slots of each set were all that was written, and they stayed in the cache.)
    let ring = BATCH * args.loop_sets.max(1);
    // A non-zero fill writes every page now, not on the first receive into it.
    let mut all = vec![0x5au8; ring * slot];
    let mut next = 0usize;
    let mut out = Outcome::default();
    let mut end = StreamEnd::new(args);
    // The receive timeout only serves to notice the end of the stream.
    socket.set_nonblocking(false)?;
    socket.set_read_timeout(Some(Duration::from_millis(50)))?;
    loop {
        // One set (N = 1) is reused from its first slot on every call.
        let first = if ring > BATCH { next } else { 0 };
        let at = |i: usize| (first + i) % ring * slot;
        for i in 0..BATCH {
            // SAFETY: the slot is inside `all`, which outlives the call, and nothing else
            // uses it meanwhile; the batch's slots are distinct (BATCH ≤ ring).
            // Checked by: `every_loss_harness_receiver_accounts_for_every_datagram`.
            unsafe { batch.set_buffer(i, all.as_mut_ptr().add(at(i)), slot) };
        }
        match batch.recv(socket, BATCH, Wait::ForOne) {
            Ok(n) => {
                end.data();
                for i in 0..n {
                    let chunk = &all[at(i)..at(i) + batch.meta(i).len.min(slot)];
                    out.count(args.format, chunk);
                }
                next = (next + n) % ring;
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
    out.kernel_drops = socket_drops(socket).unwrap_or(0) as u64;
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
pub(crate) fn proc_udp_drops(port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    let want = format!(":{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        (cols.get(1)?.ends_with(&want)).then(|| cols.last()?.parse().ok())?
    })
}

pub(crate) fn futuresdr_source(args: &Args) -> Result<Outcome> {
    if args.bind.ip().is_multicast() {
        bail!("FutureSDR's UdpSource cannot join a multicast group");
    }
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
        idle: crate::common::seconds(args.idle),
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
        let timeout = crate::common::seconds(args.timeout);
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
