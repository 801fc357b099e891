//! The receive engine: receive threads (one per backend thread) fill preallocated slots from
//! the socket and hand them to one consumer through lock-free rings; the consumer restores
//! order per stream, tracks sequence numbers and gets each datagram with its metadata.
//!
//! | module | holds |
//! |---|---|
//! | `config` | [`EngineConfig`], [`ThreadOptions`] |
//! | `backend` | [`Backend`], the backend trait and one module per backend |
//! | `worker` | what every receive thread does with a received datagram |
//! | `slots` | the slot pools and their index rings |
//! | `consumer` | ordering, sequence tracking and delivery |
//! | `datagram` | [`Datagram`], [`DatagramMeta`], [`Arrival`] |
//!
//! ```
//! use std::time::Duration;
//! use fsdr_net_io::{Backend, Engine, EngineConfig, Format};
//!
//! let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
//! cfg.backend = Backend::Mio;
//! cfg.format = Format::Seq64;
//! let mut engine = Engine::start(cfg).unwrap();
//!
//! let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
//! let mut dg = 1u64.to_le_bytes().to_vec();
//! dg.extend_from_slice(b"samples");
//! tx.send_to(&dg, engine.local_addr()).unwrap();
//!
//! let d = engine.recv_timeout(Duration::from_secs(5)).expect("a datagram");
//! assert_eq!(d.payload(), b"samples");
//! assert_eq!(d.info().seq, Some(1));
//! drop(d);
//! let stats = engine.shutdown();
//! assert_eq!(stats.delivered, 1);
//! ```

mod backend;
mod budget;
pub(crate) mod classify;
mod config;
mod consumer;
mod datagram;
mod inline;
mod meta;
pub(crate) mod receive;
mod slots;
mod worker;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::Socket;

pub use crate::seq::Gap;
pub use crate::sys::ReuseportSpread;
pub use crate::sys::xsk::XskBind;

/// Moves the calling thread to `SCHED_BATCH` (unless it runs under a real-time policy); true
/// when it was moved. For threads that only consume what receive threads hand over (the
/// blocks' FutureSDR workers): the scheduler then preempts them less for other wake-ups.
///
/// ```
/// let _moved = fsdr_net_io::engine::set_batch_policy();
/// ```
pub fn set_batch_policy() -> std::io::Result<bool> {
    crate::sys::sched::set_batch_policy()
}
pub use backend::{Backend, Capabilities, MAX_SETTING_DURATION, UnknownBackend};
pub(crate) use backend::{GRO_MAX_BYTES, GRO_MAX_SEGMENTS, XdpRx};
pub(crate) use config::WakeSchedule;
pub use config::{
    Coalesce, DEFAULT_SLOT_SIZE, EngineConfig, Overload, ThreadOptions, XdpConfig, XdpMode,
};
pub(crate) use consumer::count_released;
pub use datagram::Datagram;
pub use meta::{Arrival, Clocks, DatagramMeta, StreamKey};
pub(crate) use slots::Recycled;
pub(crate) use worker::{setup_thread, spawn_receive_thread};

/// How every receive thread's name starts (`fsdr-net-rx0`, `fsdr-net-rx1`, …; the in-place
/// receiver's too): what `ps -L`, `perf --per-thread` and
/// the test bed's `host::ThreadCpuMeter` (feature `testbed`) show for them.
///
/// ```
/// assert_eq!(fsdr_net_io::engine::RECEIVE_THREAD_PREFIX, "fsdr-net-rx");
/// ```
pub const RECEIVE_THREAD_PREFIX: &str = "fsdr-net-rx";

use backend::Stopper;
use consumer::Consumer;
use inline::Inline;
use slots::SlotPool;

use crate::Error;
use crate::format::Format;
use crate::notify::Notify;
use crate::socket::{BufferReport, SourceFilter};
use crate::stats::{Counters, Stats};
use crate::sys;

/// How a paused receive thread learns that the consumer made room.
#[derive(Debug, Default)]
pub(crate) struct ResumeSignal {
    /// The receive thread waits for room.
    pub(crate) paused: AtomicBool,
    pub(crate) notify: Notify,
    /// Slots of this thread the consumer holds back to restore order: they wait for more
    /// datagrams, so they must not count against the latency budget (a paused thread would
    /// then wait for the reorder timeout while the kernel drops).
    pub(crate) reorder_held: std::sync::atomic::AtomicUsize,
}

/// State shared by the receive threads, the consumer and stats handles.
pub(crate) struct Shared {
    pub(crate) pools: Vec<Arc<SlotPool>>,
    pub(crate) counters: Counters,
    pub(crate) notify: Arc<Notify>,
    pub(crate) stop: AtomicBool,
    pub(crate) format: Format,
    pub(crate) filter: SourceFilter,
    /// One per receive thread.
    pub(crate) resume: Vec<ResumeSignal>,
    /// A second descriptor of each receive socket, to read its drop counter at any time.
    pub(crate) probes: Vec<Socket>,
    /// Datagrams of other streams an in-place receiver skipped, per stream (an engine
    /// delivers every stream: empty there).
    pub(crate) skipped_streams: std::sync::Mutex<std::collections::HashMap<StreamKey, u64>>,
}

impl Shared {
    /// Every counter, with the kernel's drop counter read now.
    pub(crate) fn snapshot(&self) -> Stats {
        let mut s = self.counters.snapshot();
        let mut total = 0;
        for (t, probe) in s.per_thread.iter_mut().zip(&self.probes) {
            if let Ok(d) = sys::socket_drops(probe) {
                t.counts.kernel_drops = t.counts.kernel_drops.max(u64::from(d));
            }
            total += t.counts.kernel_drops;
        }
        s.kernel_drops = total;
        s
    }
}

/// A running receive engine and its single consumer. See the [module documentation](self).
pub struct Engine {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    stoppers: Vec<Stopper>,
    local_addr: SocketAddr,
    buffer: BufferReport,
    backend: Backend,
    consumer: Consumer,
    /// The receive side when the consumer's thread receives ([`Engine::start_inline`]).
    inline: Option<Inline>,
    /// Held while the engine lives ([`EngineConfig::cpu_latency`]).
    _cpu_latency: Option<crate::cpu_latency::CpuLatencyRequest>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("backend", &self.backend)
            .field("local_addr", &self.local_addr)
            .field("threads", &self.threads.len())
            .field("inline", &self.inline.is_some())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Opens the socket(s) and starts the receive threads.
    pub fn start(cfg: EngineConfig) -> Result<Engine, Error> {
        Self::launch(cfg, false)
    }

    /// Opens the socket without a receive thread: [`Engine::recv_timeout`] and
    /// [`Engine::try_recv`] receive on the calling thread whenever nothing is ready.
    ///
    /// This is the bare `recvmmsg` loop's structure (one thread that sleeps in the kernel
    /// until data comes, then takes a batch) with everything the engine does to each
    /// datagram; it saves the hand-over between threads and its wake-ups. For a consumer
    /// with a thread of its own that does little besides taking datagrams. Nothing reads the
    /// socket between calls: the kernel's receive buffer holds the stream meanwhile (and
    /// drops what does not fit, counted as `kernel_drops`). Backends `mio` (with or without
    /// UDP GRO), `recvmmsg` and `blocking`; [`ThreadOptions`] do not apply (pin the calling
    /// thread instead). [`Engine::notifier`] is never signalled.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fsdr_net_io::{Engine, EngineConfig, Format};
    ///
    /// let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    /// cfg.format = Format::Seq64;
    /// let mut engine = Engine::start_inline(cfg).unwrap();
    ///
    /// let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// tx.send_to(&7u64.to_le_bytes(), engine.local_addr()).unwrap();
    ///
    /// // This call waits for the socket and receives on this thread.
    /// let d = engine.recv_timeout(Duration::from_secs(5)).expect("a datagram");
    /// assert_eq!(d.info().seq, Some(7));
    /// drop(d);
    /// assert_eq!(engine.shutdown().delivered, 1);
    /// ```
    pub fn start_inline(cfg: EngineConfig) -> Result<Engine, Error> {
        Self::launch(cfg, true)
    }

    fn launch(cfg: EngineConfig, inline: bool) -> Result<Engine, Error> {
        if inline {
            Inline::validate(&cfg)?;
        }
        cfg.validate()?;
        let cpu_latency = crate::cpu_latency::request(cfg.cpu_latency)?;
        let imp = cfg.backend.imp();
        let opened = imp.open(&cfg)?;
        let local_addr = opened[0].local_addr;
        let buffer = opened[0].buffer;
        let sockets: Vec<Socket> = opened.into_iter().map(|o| o.socket).collect();
        let probes = sockets
            .iter()
            .map(|s| s.try_clone())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| Error::Socket {
                addr: local_addr,
                source,
            })?;
        let (mut pools, mut receiver_ends, mut consumer_ends) = (vec![], vec![], vec![]);
        for _ in 0..sockets.len() {
            let (pool, r, c) = SlotPool::new(cfg.slots, cfg.pool_slot_size());
            pools.push(pool);
            receiver_ends.push(r);
            consumer_ends.push(c);
        }
        let shared = Arc::new(Shared {
            counters: Counters::new(pools.len()),
            pools,
            notify: Arc::new(Notify::new()),
            stop: AtomicBool::new(false),
            format: cfg.format,
            filter: cfg.socket.filter.clone(),
            resume: (0..sockets.len())
                .map(|_| ResumeSignal::default())
                .collect(),
            probes,
            skipped_streams: Default::default(),
        });
        let launched = if inline {
            Inline::new(&cfg, shared.clone(), sockets, receiver_ends)
                .map(|i| (backend::Started::new(), Some(i)))
        } else {
            imp.start(&cfg, shared.clone(), sockets, receiver_ends)
                .map(|s| (s, None))
        };
        let (started, inline) = match launched {
            Ok(l) => l,
            Err(e) => {
                shared.stop.store(true, Ordering::Release);
                return Err(e);
            }
        };
        let tracking = cfg.tracking();
        tracing::debug!(backend = %cfg.backend, %local_addr, inline = inline.is_some(), "receive engine started");
        Ok(Engine {
            consumer: Consumer::new(
                shared.clone(),
                consumer_ends,
                tracking,
                cfg.reorder_window,
                cfg.reorder_timeout,
            ),
            shared,
            threads: started.threads,
            stoppers: started.stoppers,
            local_addr,
            buffer,
            backend: cfg.backend,
            inline,
            _cpu_latency: cpu_latency,
        })
    }

    /// The bound address (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The receive buffer the kernel granted.
    pub fn recv_buffer(&self) -> BufferReport {
        self.buffer
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Number of receive threads (or sockets: an inline engine has one, read by the
    /// caller's thread).
    pub fn threads(&self) -> usize {
        self.shared.pools.len()
    }

    /// Whether the caller's thread receives ([`Engine::start_inline`]).
    pub fn is_inline(&self) -> bool {
        self.inline.is_some()
    }

    /// A snapshot of every counter, readable while reception goes on (the kernel's drop
    /// counter is read at the moment of the call).
    pub fn stats(&self) -> Stats {
        self.shared.snapshot()
    }

    /// A handle that reads the counters from another thread.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.shared.clone())
    }

    /// The notifier the receive threads signal after publishing datagrams. An async consumer
    /// awaits `notifier().notified()` when [`Engine::try_recv`] returns `None`.
    pub fn notifier(&self) -> Arc<Notify> {
        self.shared.notify.clone()
    }

    /// When held datagrams must be given up on if nothing else arrives: a consumer that
    /// sleeps should wake by then and call [`Engine::try_recv`].
    pub fn next_deadline(&self) -> Option<Instant> {
        self.consumer.next_deadline()
    }

    /// The next datagram, if one is ready. Never blocks (an inline engine makes one receive
    /// call without waiting when nothing is ready).
    pub fn try_recv(&mut self) -> Option<Datagram<'_>> {
        if !self.consumer.stopped
            && !self.consumer.has_ready()
            && let Some(inline) = self.inline.as_mut()
        {
            inline.step(None);
        }
        self.consumer.try_recv()
    }

    /// The next datagram, waiting up to `timeout` (without spinning; an inline engine waits
    /// for the socket and receives meanwhile).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Datagram<'_>> {
        // The clock is read only when there is something to wait for: under load nearly
        // every call finds a datagram ready.
        let mut deadline = None;
        loop {
            // Polonius would accept returning the borrow from inside the loop; today's borrow
            // checker needs the check and the return to be separate calls.
            if self.consumer.has_ready() {
                return self.consumer.try_recv();
            }
            let now = Instant::now();
            let deadline = *deadline.get_or_insert_with(|| crate::sys::deadline(now, timeout));
            if now >= deadline || self.consumer.stopped {
                return None;
            }
            let mut wake = deadline;
            if let Some(d) = self.consumer.next_deadline() {
                wake = wake.min(d);
            }
            match self.inline.as_mut() {
                Some(inline) => inline.step(Some(wake)),
                None => {
                    self.shared
                        .notify
                        .wait_timeout(wake.saturating_duration_since(now));
                }
            }
        }
    }

    /// Stops and joins the receive threads. Datagrams already received stay available to
    /// [`Engine::try_recv`], held ones are released at once.
    pub fn stop(&mut self) {
        if self.consumer.stopped {
            return;
        }
        self.shared.stop.store(true, Ordering::Release);
        if let Some(inline) = self.inline.as_mut() {
            inline.finish();
        }
        for s in &self.stoppers {
            s();
        }
        for r in &self.shared.resume {
            r.notify.notify();
        }
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                tracing::error!("a receive thread panicked");
            }
        }
        self.consumer.stopped = true;
    }

    /// Stops the threads, discards what the consumer did not take (counted as
    /// `unconsumed`), and returns the final counters.
    pub fn shutdown(mut self) -> Stats {
        self.stop();
        let left = self.consumer.discard_rest();
        self.shared.counters.consumer.unconsumed.add(left);
        self.stats()
    }

    #[cfg(all(test, feature = "uring"))]
    pub(crate) fn pool_for_tests(&self, i: usize) -> std::sync::Weak<SlotPool> {
        Arc::downgrade(self.consumer.pool(i))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads an engine's counters from any thread.
#[derive(Clone)]
pub struct StatsHandle(pub(crate) Arc<Shared>);

impl StatsHandle {
    /// A snapshot of every counter.
    pub fn snapshot(&self) -> Stats {
        self.0.snapshot()
    }

    /// The datagrams of other streams an in-place receiver counted `skipped`, per stream
    /// (sender and stream ID): what reached a receiver of one stream and was not its own.
    /// Empty for an [`Engine`], which delivers every stream. Final once the receiver has
    /// shut down (the handle outlives it).
    ///
    /// ```
    /// use fsdr_net_io::depacketizer::DepacketizerConfig;
    /// use fsdr_net_io::format::{DataHeader, Format};
    /// use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
    /// use fsdr_net_io::sample::{Decoder, WireFormat};
    /// use fsdr_net_io::{Backend, EngineConfig, StreamKey};
    /// use std::time::{Duration, Instant};
    ///
    /// let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    /// engine.backend = Backend::Recvmmsg;
    /// engine.format = Format::Vrt;
    /// let cfg = InPlaceConfig {
    ///     engine,
    ///     decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
    ///     depacketizer: DepacketizerConfig::default(),
    ///     buffers: 1,
    /// };
    /// let mut rx = InPlaceReceiver::<u8, Vec<u8>>::start(cfg).unwrap();
    /// rx.give(vec![0u8; 4096]).unwrap();
    /// let stats = rx.stats_handle();
    /// // Stream 7 comes first and is the receiver's; then a datagram of stream 9.
    /// let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// for (seq, id) in [(0, 7), (0, 9)] {
    ///     let h = DataHeader { seq, stream_id: Some(id), ..Default::default() };
    ///     let mut dg = vec![0u8; h.header_len(Format::Vrt) + 100];
    ///     Format::Vrt.emit_header(&mut dg, &h).unwrap();
    ///     tx.send_to(&dg, rx.local_addr()).unwrap();
    /// }
    /// let start = Instant::now();
    /// while stats.snapshot().skipped == 0 && start.elapsed() < Duration::from_secs(10) {
    ///     rx.receive(Duration::from_millis(10));
    ///     while let Some(f) = rx.take() {
    ///         rx.give(f.buffer).unwrap();
    ///     }
    /// }
    /// rx.shutdown();
    /// let key = StreamKey { source: tx.local_addr().unwrap(), stream_id: Some(9) };
    /// assert_eq!(stats.skipped_by_stream().get(&key), Some(&1));
    /// ```
    pub fn skipped_by_stream(&self) -> std::collections::HashMap<StreamKey, u64> {
        self.0
            .skipped_streams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl fmt::Debug for StatsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("StatsHandle").finish()
    }
}
