//! sender → source → `Head` → `NullSink` in a FutureSDR flowgraph: fsdr-net's `UdpSource` for
//! each backend, and FutureSDR's own `futuresdr::blocks::UdpSource`, in one criterion group and
//! fed by the same sender (8000-byte raw datagrams on loopback, its own thread).
//!
//! One iteration is `PER_ITER` datagrams' payload reaching the sink (enough to make a new
//! flowgraph's first wake-up negligible). The sender keeps at most
//! `WINDOW` datagrams in flight beyond what the sink has counted (and sends on after `STALL`
//! without progress, so a source that loses datagrams pays for them in time rather than
//! hanging the run). It thus runs as fast as the flowgraph drains, instead of flooding two
//! cores with datagrams nobody can take (`cargo xtask loss` measures that overload case).
//! Each sample builds a new flowgraph; the time runs from the sender's start to the moment
//! the sink has every byte (the flowgraph's start and teardown are not timed).
//! `cargo bench --bench flowgraph`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fsdr_net::UdpSource;
use fsdr_net::io::send::Sender;
use fsdr_net::io::send::SenderConfig;
use fsdr_net::io::{Backend, Format};
use futuresdr::blocks::Head;
use futuresdr::runtime::dev::prelude::*;
use futuresdr::runtime::{Flowgraph, Runtime};

const SIZE: usize = 8000;
/// Datagrams the sender may have in flight beyond what the sink counted (16 MB).
const WINDOW: u64 = 2048;
/// After this long without progress at the sink, the sender sends on regardless.
const STALL: Duration = Duration::from_millis(2);
/// Datagrams per iteration.
const PER_ITER: u64 = 1000;
/// Datagrams per send call.
const BATCH: usize = 32;

/// What the sink has consumed, and when it reached the run's target.
struct Progress {
    bytes: AtomicU64,
    target: u64,
    reached: OnceLock<Instant>,
}

/// A null sink that publishes how many bytes it consumed, and the moment it had them all.
#[derive(Block)]
struct CountingSink {
    #[input]
    input: DefaultCpuReader<u8>,
    progress: Arc<Progress>,
}

impl Kernel for CountingSink {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let n = self.input.slice().len();
        self.input.consume(n);
        let p = &self.progress;
        if p.bytes.fetch_add(n as u64, Ordering::Relaxed) + n as u64 >= p.target {
            p.reached.get_or_init(Instant::now);
        }
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}

/// Sends raw datagrams to `to`, at most `WINDOW` ahead of the sink's count, until the
/// flag is set; returns when it started (or `None` if it could not open its socket).
fn sender(
    to: SocketAddr,
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Option<Instant>> {
    std::thread::spawn(move || {
        let mut tx = Sender::new(&SenderConfig::new(to)).ok()?;
        let start = Instant::now();
        let buf = vec![0x11u8; SIZE * BATCH];
        let (mut sent, mut seen, mut progress_at) = (0u64, 0u64, Instant::now());
        while !stop.load(Ordering::Relaxed) {
            let bytes = progress.bytes.load(Ordering::Relaxed);
            if bytes >= progress.target {
                // FutureSDR's UdpSource awaits `recv_from` inside `work()` and sees Head end
                // only after its next datagram: keep a trickle going until the graph is over.
                let _ = tx.send_segments(&buf[..SIZE], SIZE);
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            let delivered = bytes / SIZE as u64;
            if delivered != seen {
                (seen, progress_at) = (delivered, Instant::now());
            }
            if sent < delivered + WINDOW || progress_at.elapsed() > STALL {
                if tx.send_segments(&buf, SIZE).is_ok() {
                    sent += BATCH as u64;
                }
                if progress_at.elapsed() > STALL {
                    progress_at = Instant::now();
                }
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        Some(start)
    })
}

/// Completes `fg` (holding the source `src`) with `→ Head → CountingSink` and runs it while
/// the sender streams to `to`; returns the time from the sender's start until the sink had
/// `datagrams` datagrams (the flowgraph's start and teardown are not timed).
fn run_with_sender(
    mut fg: Flowgraph,
    src: BlockId,
    to: SocketAddr,
    datagrams: u64,
) -> anyhow::Result<Duration> {
    let target = datagrams * SIZE as u64;
    let progress = Arc::new(Progress {
        bytes: AtomicU64::new(0),
        target,
        reached: OnceLock::new(),
    });
    let head = fg.add(Head::<u8>::new(target));
    let sink = fg.add(CountingSink {
        input: Default::default(),
        progress: progress.clone(),
    });
    fg.stream_dyn(src, "output", head.id(), "input")?;
    fg.stream_dyn(head.id(), "output", sink.id(), "input")?;
    let running = Runtime::new().start(fg)?;
    let stop = Arc::new(AtomicBool::new(false));
    let tx = sender(to, progress.clone(), stop.clone());
    running.wait()?;
    stop.store(true, Ordering::Relaxed);
    // The sink notes the moment it has the target; the sender may see the stop flag before
    // it sees that count (the flowgraph can end on datagrams already in flight).
    let start = tx
        .join()
        .ok()
        .flatten()
        .ok_or_else(|| anyhow::anyhow!("the sender could not open its socket"))?;
    let reached = progress
        .reached
        .get()
        .ok_or_else(|| anyhow::anyhow!("the sink did not receive every byte Head let through"))?;
    Ok(reached.saturating_duration_since(start))
}

fn fsdr_net_source(backend: Backend, datagrams: u64) -> anyhow::Result<Duration> {
    let src = UdpSource::<u8>::builder("127.0.0.1:0")
        .backend(backend)
        .format(Format::Raw)
        .stats_interval(None)
        .build()?;
    let to = src.local_addr();
    let mut fg = Flowgraph::new();
    let src = fg.add(src).id();
    run_with_sender(fg, src, to, datagrams)
}

fn futuresdr_source(datagrams: u64) -> anyhow::Result<Duration> {
    // The block binds in init(): reserve a free port for it. The sender keeps sending until
    // the graph ends, which also wakes the block's pending recv_from so that it sees Head end.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let to: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut fg = Flowgraph::new();
    let src = fg
        .add(futuresdr::blocks::UdpSource::<u8>::new(
            to.to_string(),
            SIZE,
        ))
        .id();
    run_with_sender(fg, src, to, datagrams)
}

fn flowgraph(c: &mut Criterion) {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let mut group = c.benchmark_group(format!("flowgraph/{SIZE}B"));
    group.throughput(Throughput::Bytes(PER_ITER * SIZE as u64));
    // On loopback: the xdp backend needs a real link (`cargo xtask loss --netns`).
    for &backend in Backend::ALL.iter().filter(|b| b.capabilities().loopback) {
        group.bench_function(format!("fsdr-net-{}", backend.name()), |b| {
            b.iter_custom(|n| fsdr_net_source(backend, n * PER_ITER).expect("fsdr-net flowgraph"))
        });
    }
    group.bench_function("futuresdr-UdpSource", |b| {
        b.iter_custom(|n| futuresdr_source(n * PER_ITER).expect("FutureSDR flowgraph"))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .sample_size(10);
    targets = flowgraph
}
criterion_main!(benches);
