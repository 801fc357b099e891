//! `NullSource` → `Head` → `UdpSink` send rate for each way out: `sendmmsg` batches, `sendmmsg`
//! with UDP GSO, io_uring (tokio-uring) and io_uring `SEND_ZC`. 8000-byte raw datagrams to a
//! loopback socket that a thread drains. One iteration is `PER_ITER` datagrams sent, so a new
//! flowgraph's start is negligible; what the receiver keeps is not measured here (see
//! `receive` and `flowgraph`). `cargo bench --bench sink`.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fsdr_net::UdpSink;
use fsdr_net::io::Format;
use futuresdr::blocks::{Head, NullSource};
use futuresdr::runtime::macros::connect;
use futuresdr::runtime::{Flowgraph, Runtime};

const PAYLOAD: usize = 8000;
/// Datagrams per iteration.
const PER_ITER: u64 = 1000;

/// The ways a `UdpSink` can send.
#[derive(Clone, Copy)]
enum Mode {
    Mmsg,
    Gso,
    Uring,
    UringZc,
}

impl Mode {
    const ALL: [Mode; 4] = [Mode::Mmsg, Mode::Gso, Mode::Uring, Mode::UringZc];

    fn name(self) -> &'static str {
        match self {
            Mode::Mmsg => "sendmmsg",
            Mode::Gso => "sendmmsg-gso",
            Mode::Uring => "uring",
            Mode::UringZc => "uring-send-zc",
        }
    }
}

/// A socket drained by a thread, so that the sink's datagrams have somewhere to go.
struct Drain {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drain {
    fn start() -> std::io::Result<Drain> {
        let rx = UdpSocket::bind("127.0.0.1:0")?;
        rx.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = rx.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            while !flag.load(Ordering::Relaxed) {
                let _ = rx.recv(&mut buf);
            }
        });
        Ok(Drain {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn send(mode: Mode, to: SocketAddr, datagrams: u64) -> anyhow::Result<Duration> {
    let mut b = UdpSink::<u8>::builder(to.to_string())
        .format(Format::Raw)
        .payload_bytes(PAYLOAD);
    b = match mode {
        Mode::Mmsg => b.gso(false),
        Mode::Gso => b.gso(true),
        Mode::Uring => b.uring(false),
        Mode::UringZc => b.uring(true),
    };
    let snk = b.build()?;
    let src = NullSource::<u8>::new();
    let head = Head::<u8>::new(datagrams * PAYLOAD as u64);
    let mut fg = Flowgraph::new();
    connect!(fg, src > head > snk);
    let start = Instant::now();
    Runtime::new().run(fg)?;
    Ok(start.elapsed())
}

fn sink(c: &mut Criterion) {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let drain = Drain::start().expect("drain socket");
    let mut group = c.benchmark_group(format!("sink/{PAYLOAD}B"));
    group.throughput(Throughput::Bytes(PER_ITER * PAYLOAD as u64));
    for mode in Mode::ALL {
        group.bench_function(mode.name(), |b| {
            b.iter_custom(|n| send(mode, drain.addr, n * PER_ITER).expect("sink flowgraph"))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10);
    targets = sink
}
criterion_main!(benches);
