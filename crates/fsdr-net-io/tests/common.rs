//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use fsdr_net_io::send::{SenderConfig, StreamSender};
use fsdr_net_io::{Backend, Engine, EngineConfig, Format, Stats};

/// An engine on an ephemeral loopback port.
pub fn engine(backend: Backend, format: Format) -> Engine {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.backend = backend;
    cfg.format = format;
    Engine::start(cfg).expect("engine starts")
}

/// Checks that the receiver `start` returns (configured with `cpu_latency: Some(ZERO)`) holds
/// a CPU wake-up latency request of 0 from start to drop. Where the request is not permitted
/// (not root), `start` must fail with `Error::CpuLatency`, whose message says so.
pub fn check_holds_cpu_latency<T>(start: impl FnOnce() -> Result<T, fsdr_net_io::Error>) {
    use fsdr_net_io::cpu_latency::current;
    // The request is the machine's: two receivers holding one at once (tests run in
    // parallel) would each see the other's.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Ok(before) = current() else {
        return fsdr_net_io::netns::unavailable("cpu_latency", "no /dev/cpu_dma_latency here");
    };
    match start() {
        Ok(receiver) => {
            assert_eq!(
                current().unwrap(),
                Duration::ZERO,
                "idle CPUs poll while it runs"
            );
            drop(receiver);
            assert_eq!(
                current().unwrap(),
                before,
                "the request ends with the receiver"
            );
        }
        Err(e @ fsdr_net_io::Error::CpuLatency { .. }) => {
            assert!(e.to_string().contains("root"), "{e}");
            fsdr_net_io::netns::unavailable("cpu_latency", &e.to_string());
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// What a consumer saw.
pub struct Received {
    pub seqs: Vec<u64>,
    pub payload_bytes: u64,
    pub stats: Stats,
}

/// Consumes until every one of `sent` datagrams is accounted for (or `limit` passes), then
/// shuts the engine down.
pub fn consume_until_accounted(mut engine: Engine, sent: u64, limit: Duration) -> Received {
    let start = Instant::now();
    let mut seqs = Vec::with_capacity(sent as usize);
    let mut payload_bytes = 0;
    while start.elapsed() < limit {
        let got = engine.recv_timeout(Duration::from_millis(50)).map(|d| {
            if let Some(s) = d.info().seq {
                seqs.push(s);
            }
            payload_bytes += d.payload().len() as u64;
        });
        if got.is_none() && engine.stats().accounted() >= sent {
            break;
        }
    }
    let stats = engine.shutdown();
    Received {
        seqs,
        payload_bytes,
        stats,
    }
}

/// Sends `count` datagrams of `size` bytes to `engine`, paced, and returns how many went out.
pub fn send(
    engine: &Engine,
    format: Format,
    count: u64,
    size: usize,
    rate: Option<f64>,
) -> std::thread::JoinHandle<u64> {
    let sender = StreamSender::new(SenderConfig::new(engine.local_addr()), format)
        .datagram_size(size)
        .count(count)
        .rate(rate);
    std::thread::spawn(move || sender.run().expect("sender runs").datagrams)
}

/// Threads of this process.
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// When a test's stream is over: the emulator thread has ended and a round brought nothing,
/// and either every datagram it sent is accounted for (the usual end, at once) or nothing
/// has come for 300 ms (a datagram no counter shows then fails the test's own checks).
/// What the receiver still holds comes with its shutdown.
pub struct StreamEnd {
    sender: Option<std::thread::JoinHandle<fsdr_net_io::emulator::EmulatorReport>>,
    report: Option<fsdr_net_io::emulator::EmulatorReport>,
    quiet_since: Option<Instant>,
}

impl StreamEnd {
    pub fn new(sender: std::thread::JoinHandle<fsdr_net_io::emulator::EmulatorReport>) -> Self {
        Self {
            sender: Some(sender),
            report: None,
            quiet_since: None,
        }
    }

    /// Whether the stream is over, after a round that brought something (`any`) or not;
    /// `accounted` reads the receivers' `Stats::accounted` (summed over a group).
    pub fn over(&mut self, any: bool, accounted: impl FnOnce() -> u64) -> bool {
        if self.sender.as_ref().is_some_and(|s| s.is_finished()) {
            let sender = self.sender.take().unwrap();
            self.report = Some(sender.join().expect("the emulator ends"));
        }
        let Some(report) = self.report else {
            return false;
        };
        if any {
            self.quiet_since = None;
            return false;
        }
        if accounted() >= report.packets_sent + report.duplicated + report.context_sent {
            return true;
        }
        let since = *self.quiet_since.get_or_insert_with(Instant::now);
        since.elapsed() > Duration::from_millis(300)
    }

    /// The emulator's report (after [`StreamEnd::over`] said so).
    pub fn report(self) -> fsdr_net_io::emulator::EmulatorReport {
        match (self.report, self.sender) {
            (Some(r), _) => r,
            (None, Some(s)) => s.join().expect("the emulator ends"),
            (None, None) => unreachable!(),
        }
    }
}

/// Log events written to memory, down to `TRACE`: to look for a line, or to show with a
/// failure (the test's own thread: `tracing::subscriber::with_default(log.subscriber(), ..)`).
#[derive(Clone, Default)]
pub struct TraceLog(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl TraceLog {
    /// A subscriber that writes every event, down to `TRACE`, into this log.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + use<> {
        let log = self.clone();
        tracing_subscriber::fmt()
            .with_writer(move || log.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .finish()
    }

    /// What was written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl std::io::Write for TraceLog {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
