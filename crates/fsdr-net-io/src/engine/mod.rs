//! The receive engine: receive threads (one per backend thread) fill preallocated slots from
//! the socket and hand them to one consumer through lock-free rings; the consumer restores
//! order per stream, tracks sequence numbers and gets each datagram with its metadata.
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

mod blocking;
mod mio_backend;
mod multishot;
mod reuseport;
mod uring;
pub(crate) mod worker;

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::format::{Format, PacketInfo};
use crate::ring::{DatagramMeta, Notify, SlotPool};
use crate::seq::{Released, Reorder, SeqConfig, SeqEvent};
use crate::socket::{BufferReport, SocketConfig, SourceFilter, open_socket};
use crate::stats::{Counters, Stats};
pub use crate::sys::ReuseportSpread;

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The socket could not be opened, configured or bound.
    #[error("socket {addr}: {source}")]
    Socket {
        /// Bind address.
        addr: SocketAddr,
        /// Cause.
        source: io::Error,
    },
    /// Pinning a receive thread failed.
    #[error("cannot pin receive thread to CPU {cpu}: {source}")]
    Pin {
        /// Requested CPU.
        cpu: usize,
        /// Cause.
        source: io::Error,
    },
    /// SCHED_FIFO was refused.
    #[error(
        "cannot give receive thread SCHED_FIFO priority {priority}: {source} \
         (needs root, CAP_SYS_NICE, or an rtprio limit in /etc/security/limits.conf)"
    )]
    Priority {
        /// Requested priority.
        priority: i32,
        /// Cause.
        source: io::Error,
    },
    /// The configuration is inconsistent.
    #[error("invalid engine configuration: {0}")]
    Config(String),
    /// The kernel lacks a feature the backend needs.
    #[error("backend {backend} is not available here: {reason}")]
    Unsupported {
        /// The backend.
        backend: Backend,
        /// What is missing.
        reason: String,
    },
    /// A thread could not be started.
    #[error("cannot start receive thread: {0}")]
    Spawn(io::Error),
}

/// Receive backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Backend {
    /// One thread, the socket registered edge-triggered with `mio::Poll`, drained with
    /// `recvmmsg` batches until it would block.
    #[default]
    Mio,
    /// One thread doing one blocking `recvmsg` per datagram: the baseline.
    Blocking,
    /// N threads, each with its own SO_REUSEPORT socket on the same address and its own
    /// `mio::Poll`; optionally a classic-BPF program spreads one flow over the sockets.
    Reuseport,
    /// io_uring through tokio-uring on a dedicated thread, with a configurable number of
    /// receives always in flight.
    Uring,
    /// io_uring multishot `recvmsg` with a provided-buffer ring made of the engine's slots.
    UringMultishot,
}

impl Backend {
    /// Every backend.
    pub const ALL: &'static [Backend] = &[
        Backend::Mio,
        Backend::Blocking,
        Backend::Reuseport,
        Backend::Uring,
        Backend::UringMultishot,
    ];

    /// Name as used on command lines.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Mio => "mio",
            Backend::Blocking => "blocking",
            Backend::Reuseport => "reuseport",
            Backend::Uring => "uring",
            Backend::UringMultishot => "uring-multishot",
        }
    }

    /// Extra bytes a slot needs beyond the largest datagram for this backend.
    fn slot_overhead(&self) -> usize {
        match self {
            // One spare byte tells a truncated datagram from one that fills the slot.
            Backend::Uring => 1,
            Backend::UringMultishot => multishot::HEADER_SPACE,
            _ => 0,
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Backend::ALL
            .iter()
            .copied()
            .find(|b| b.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<_> = Backend::ALL.iter().map(|b| b.name()).collect();
                format!(
                    "unknown backend {s:?} (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

/// Pinning and priority of receive threads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadOptions {
    /// CPUs to pin receive threads to, round-robin (empty: no pinning).
    pub cpus: Vec<usize>,
    /// SCHED_FIFO priority (1..=99) for receive threads.
    pub fifo_priority: Option<i32>,
}

/// Everything the engine needs to start.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// The socket.
    pub socket: SocketConfig,
    /// Which backend.
    pub backend: Backend,
    /// Wire format of the datagrams.
    pub format: Format,
    /// Datagrams per `recvmmsg` call.
    pub batch: usize,
    /// Slots per receive thread: how many datagrams may wait for the consumer.
    pub slots: usize,
    /// Bytes per slot: the largest datagram accepted whole (larger ones are `truncated`).
    pub slot_size: usize,
    /// Pinning and priority.
    pub threads: ThreadOptions,
    /// Datagrams held back per stream to restore order (0 disables reordering).
    pub reorder_window: usize,
    /// How long a held datagram waits for a missing predecessor.
    pub reorder_timeout: Duration,
    /// Sequence rules; `None` uses the format's defaults.
    pub seq: Option<SeqConfig>,
    /// `reuseport`: number of receive threads (and sockets).
    pub reuseport_threads: usize,
    /// `reuseport`: spread datagrams over the sockets with a classic-BPF program instead of
    /// the kernel's 4-tuple hash (which sends one flow to one socket).
    pub reuseport_spread: Option<ReuseportSpread>,
    /// `uring`: receive operations kept in flight.
    pub uring_depth: usize,
    /// `uring-multishot`: overflow buffers put in the provided-buffer ring when the consumer
    /// holds every slot (datagrams landing there are counted as `overflow`); `None` means
    /// `batch`. With 0 the ring runs dry instead, the multishot receive ends, and the kernel's
    /// queue absorbs (or drops) datagrams until slots come back and it is re-armed.
    pub uring_overflow_buffers: Option<usize>,
}

/// Default bytes per slot: a 9000-byte jumbo frame's UDP payload, rounded up.
pub const DEFAULT_SLOT_SIZE: usize = 9216;

impl EngineConfig {
    /// Defaults for a socket bound to `bind`: mio backend, raw format, batches of 32,
    /// 8192 slots of 9216 bytes (80 ms of a 100k datagram/s stream), reorder window 64.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            socket: SocketConfig::new(bind),
            backend: Backend::default(),
            format: Format::Raw,
            batch: 32,
            slots: 8192,
            slot_size: DEFAULT_SLOT_SIZE,
            threads: ThreadOptions::default(),
            reorder_window: 64,
            reorder_timeout: Duration::from_millis(5),
            seq: None,
            reuseport_threads: 2,
            reuseport_spread: None,
            uring_depth: 64,
            uring_overflow_buffers: None,
        }
    }

    /// Receive threads this configuration starts.
    pub fn thread_count(&self) -> usize {
        match self.backend {
            Backend::Reuseport => self.reuseport_threads,
            _ => 1,
        }
    }

    /// The sequence rules in force for this format.
    pub fn seq_config(&self) -> Option<SeqConfig> {
        let bits = self.format.seq_bits()?;
        Some(self.seq.unwrap_or_else(|| {
            let mut cfg = SeqConfig::for_bits(bits);
            // A device or GNU Radio sink that restarts begins again at its first number;
            // with 4-bit counters that number recurs every 16 packets, so no such rule.
            if bits >= 16 {
                cfg.restart_seq = Some(self.format.first_seq());
            }
            cfg
        }))
    }

    fn validate(&self) -> Result<(), EngineError> {
        if self.batch == 0 || self.batch > 1024 {
            return Err(EngineError::Config(format!(
                "batch {} outside 1..=1024",
                self.batch
            )));
        }
        if self.slot_size < 16 || self.slot_size > 65_536 {
            return Err(EngineError::Config(format!(
                "slot size {} outside 16..=65536",
                self.slot_size
            )));
        }
        if self.slots < self.batch {
            return Err(EngineError::Config(format!(
                "{} slots cannot hold a batch of {}",
                self.slots, self.batch
            )));
        }
        if self.backend == Backend::Reuseport && !(1..=64).contains(&self.reuseport_threads) {
            return Err(EngineError::Config(format!(
                "reuseport threads {} outside 1..=64",
                self.reuseport_threads
            )));
        }
        if self.backend == Backend::Uring && !(1..=4096).contains(&self.uring_depth) {
            return Err(EngineError::Config(format!(
                "uring depth {} outside 1..=4096",
                self.uring_depth
            )));
        }
        if self.backend == Backend::UringMultishot && self.slots > 32_768 - 1024 {
            return Err(EngineError::Config(format!(
                "uring-multishot takes at most {} slots (16-bit buffer IDs in a ring of 32768)",
                32_768 - 1024
            )));
        }
        if self.reorder_window >= self.slots {
            return Err(EngineError::Config(format!(
                "reorder window {} needs more than {} slots",
                self.reorder_window, self.slots
            )));
        }
        Ok(())
    }
}

/// State shared by the receive threads and the consumer.
pub(crate) struct Shared {
    pub(crate) pools: Vec<SlotPool>,
    pub(crate) counters: Counters,
    pub(crate) notify: Arc<Notify>,
    pub(crate) stop: AtomicBool,
    pub(crate) format: Format,
    pub(crate) filter: SourceFilter,
}

/// Wakes a receive thread so that it sees the stop flag.
pub(crate) type Stopper = Box<dyn Fn() + Send + Sync>;

/// What a backend returns when it has started its threads.
pub(crate) struct Started {
    pub(crate) threads: Vec<JoinHandle<()>>,
    pub(crate) stoppers: Vec<Stopper>,
}

impl Started {
    /// Stops and joins the threads of a start that failed half-way.
    pub(crate) fn abort(self, shared: &Shared) {
        shared.stop.store(true, Ordering::Release);
        for s in &self.stoppers {
            s();
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// A datagram in a slot, as the consumer sees it before delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotRef {
    thread: u16,
    slot: u32,
}

/// Identifies one stream among the datagrams of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamKey {
    /// Sender.
    pub source: SocketAddr,
    /// Format's stream identifier (VRT stream ID, CHDR destination endpoint).
    pub stream_id: Option<u32>,
}

struct StreamState {
    key: StreamKey,
    reorder: Reorder<SlotRef>,
    held_since: Option<Instant>,
    last_used: u64,
}

/// At most this many streams are tracked at once; the least recently used one is forgotten
/// when a new one appears.
pub const MAX_STREAMS: usize = 64;

struct Ready {
    slot: SlotRef,
    event: SeqEvent,
}

/// A running receive engine and its single consumer. See the [module documentation](self).
pub struct Engine {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    stoppers: Vec<Stopper>,
    local_addr: SocketAddr,
    buffer: BufferReport,
    backend: Backend,
    seq: Option<SeqConfig>,
    reorder_window: usize,
    reorder_timeout: Duration,
    streams: Vec<StreamState>,
    uses: u64,
    released: VecDeque<Released<SlotRef>>,
    scratch: Vec<Released<SlotRef>>,
    stopped: bool,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("backend", &self.backend)
            .field("local_addr", &self.local_addr)
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Opens the socket(s) and starts the receive threads.
    pub fn start(cfg: EngineConfig) -> Result<Engine, EngineError> {
        cfg.validate()?;
        let n_threads = cfg.thread_count();
        let sock_err = |addr, source| EngineError::Socket { addr, source };
        let reuse = cfg.backend == Backend::Reuseport;
        let first = open_socket(&cfg.socket, reuse).map_err(|e| sock_err(cfg.socket.bind, e))?;
        let local_addr = first.local_addr;
        let buffer = first.buffer;
        let mut sockets = vec![first.socket];
        // The other sockets of a SO_REUSEPORT group bind to the port the first one got.
        let mut more = cfg.socket.clone();
        more.bind.set_port(local_addr.port());
        for _ in 1..n_threads {
            let s = open_socket(&more, true).map_err(|e| sock_err(more.bind, e))?;
            sockets.push(s.socket);
        }
        let pool_slot = cfg.slot_size + cfg.backend.slot_overhead();
        let shared = Arc::new(Shared {
            pools: (0..n_threads)
                .map(|_| SlotPool::new(cfg.slots, pool_slot))
                .collect(),
            counters: Counters::new(n_threads),
            notify: Arc::new(Notify::new()),
            stop: AtomicBool::new(false),
            format: cfg.format,
            filter: cfg.socket.filter.clone(),
        });
        let started = if cfg.backend == Backend::Reuseport {
            reuseport::start(&cfg, shared.clone(), sockets)
        } else {
            let socket = sockets.pop().expect("one socket");
            match cfg.backend {
                Backend::Blocking => blocking::start(&cfg, shared.clone(), socket),
                Backend::Uring => uring::start(&cfg, shared.clone(), socket),
                Backend::UringMultishot => multishot::start(&cfg, shared.clone(), socket),
                _ => mio_backend::start(&cfg, shared.clone(), socket),
            }
        };
        let started = match started {
            Ok(s) => s,
            Err(e) => {
                shared.stop.store(true, Ordering::Release);
                return Err(e);
            }
        };
        tracing::debug!(backend = %cfg.backend, %local_addr, "receive engine started");
        Ok(Engine {
            shared,
            threads: started.threads,
            stoppers: started.stoppers,
            local_addr,
            buffer,
            backend: cfg.backend,
            seq: cfg.seq_config(),
            reorder_window: cfg.reorder_window,
            reorder_timeout: cfg.reorder_timeout,
            streams: Vec::new(),
            uses: 0,
            released: VecDeque::new(),
            scratch: Vec::new(),
            stopped: false,
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

    /// Number of receive threads.
    pub fn threads(&self) -> usize {
        self.shared.pools.len()
    }

    /// A snapshot of every counter, readable while reception goes on.
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
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
        self.streams
            .iter()
            .filter_map(|s| s.held_since)
            .min()
            .map(|t| t + self.reorder_timeout)
    }

    /// The next datagram, if one is ready. Never blocks.
    pub fn try_recv(&mut self) -> Option<Datagram<'_>> {
        let ready = self.next_ready()?;
        Some(self.deliver(ready))
    }

    /// The next datagram, waiting up to `timeout` (without spinning).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Datagram<'_>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(ready) = self.next_ready() {
                return Some(self.deliver(ready));
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            let mut wake = deadline;
            if let Some(d) = self.next_deadline() {
                wake = wake.min(d);
            }
            if self.stopped {
                return None;
            }
            self.shared
                .notify
                .wait_timeout(wake.saturating_duration_since(now));
        }
    }

    fn deliver(&mut self, ready: Ready) -> Datagram<'_> {
        let pool = &self.shared.pools[ready.slot.thread as usize];
        // SAFETY: the consumer owns the slot (popped from the ready ring, not yet freed).
        let meta = unsafe { pool.meta(ready.slot.slot) };
        let c = &self.shared.counters.consumer;
        c.delivered.add(1);
        c.delivered_bytes.add(u64::from(meta.info.payload_len));
        Datagram {
            shared: &self.shared,
            slot: ready.slot,
            event: ready.event,
        }
    }

    fn free(&self, slot: SlotRef) {
        let pushed = self.shared.pools[slot.thread as usize].free.push(slot.slot);
        debug_assert!(pushed, "free ring sized for every slot");
    }

    /// Pops one slot from the receive threads. With several threads, the one whose oldest
    /// datagram arrived first: the streams they share then come out close to kernel arrival
    /// order, and a thread that fell behind drains its backlog before newer datagrams.
    fn pull(&mut self) -> Option<SlotRef> {
        let pools = &self.shared.pools;
        if pools.len() == 1 {
            return pools[0].ready.pop().map(|slot| SlotRef { thread: 0, slot });
        }
        let mut best: Option<(u64, usize)> = None;
        for (t, pool) in pools.iter().enumerate() {
            if let Some(slot) = pool.ready.peek() {
                // SAFETY: a published slot belongs to the consumer until it is freed.
                let ns = unsafe { pool.meta(slot) }.arrival.ns;
                if best.is_none_or(|(b, _)| ns < b) {
                    best = Some((ns, t));
                }
            }
        }
        let (_, t) = best?;
        let slot = pools[t].ready.pop()?;
        Some(SlotRef {
            thread: t as u16,
            slot,
        })
    }

    fn stream_index(&mut self, key: StreamKey, cfg: SeqConfig) -> usize {
        self.uses += 1;
        if let Some(i) = self.streams.iter().position(|s| s.key == key) {
            self.streams[i].last_used = self.uses;
            return i;
        }
        let state = StreamState {
            key,
            reorder: Reorder::new(cfg, self.reorder_window),
            held_since: None,
            last_used: self.uses,
        };
        if self.streams.len() < MAX_STREAMS {
            self.streams.push(state);
            return self.streams.len() - 1;
        }
        let lru = (0..self.streams.len())
            .min_by_key(|&i| self.streams[i].last_used)
            .unwrap_or(0);
        // Forgetting a stream releases what it held.
        self.streams[lru].reorder.flush_all(&mut self.scratch);
        self.released.extend(self.scratch.drain(..));
        self.streams[lru] = state;
        lru
    }

    fn count_event(&self, event: SeqEvent) {
        let c = &self.shared.counters.consumer;
        match event {
            SeqEvent::Gap { missed } => c.missed.add(missed),
            SeqEvent::Duplicate => c.duplicates.add(1),
            SeqEvent::Late => c.late.add(1),
            SeqEvent::Resync => c.resyncs.add(1),
            SeqEvent::First | SeqEvent::InOrder => {}
        }
    }

    /// Gives up on held datagrams whose wait has expired (or all of them once stopped).
    fn expire_held(&mut self) -> bool {
        let now = Instant::now();
        let mut any = false;
        for s in &mut self.streams {
            let Some(since) = s.held_since else { continue };
            if self.stopped || now.duration_since(since) >= self.reorder_timeout {
                s.reorder.flush_oldest(&mut self.scratch);
                s.held_since = (s.reorder.held() > 0).then_some(now);
                any = true;
            }
        }
        self.released.extend(self.scratch.drain(..));
        any
    }

    fn next_ready(&mut self) -> Option<Ready> {
        loop {
            while let Some(rel) = self.released.pop_front() {
                self.count_event(rel.event);
                if rel.deliver {
                    return Some(Ready {
                        slot: rel.item,
                        event: rel.event,
                    });
                }
                self.free(rel.item);
            }
            let Some(slot) = self.pull() else {
                if self.expire_held() {
                    continue;
                }
                return None;
            };
            let (seq, key) = {
                // SAFETY: the consumer owns the slot it just popped.
                let meta = unsafe { self.shared.pools[slot.thread as usize].meta(slot.slot) };
                (
                    meta.info.seq,
                    StreamKey {
                        source: meta.source,
                        stream_id: meta.info.stream_id,
                    },
                )
            };
            let (Some(seq), Some(cfg)) = (seq, self.seq) else {
                return Some(Ready {
                    slot,
                    event: SeqEvent::InOrder,
                });
            };
            let i = self.stream_index(key, cfg);
            let s = &mut self.streams[i];
            let before = s.reorder.restored();
            s.reorder.push(seq, slot, &mut self.scratch);
            self.shared
                .counters
                .consumer
                .reordered
                .add(s.reorder.restored() - before);
            if s.reorder.held() == 0 {
                s.held_since = None;
            } else if s.held_since.is_none() {
                s.held_since = Some(Instant::now());
            }
            self.released.extend(self.scratch.drain(..));
        }
    }

    /// Stops and joins the receive threads. Datagrams already received stay available to
    /// [`Engine::try_recv`], held ones are released at once.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.shared.stop.store(true, Ordering::Release);
        for s in &self.stoppers {
            s();
        }
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                tracing::error!("a receive thread panicked");
            }
        }
        self.stopped = true;
    }

    /// Stops the threads, discards what the consumer did not take (counted as
    /// `unconsumed`), and returns the final counters.
    pub fn shutdown(mut self) -> Stats {
        self.stop();
        let mut left = 0;
        while let Some(r) = self.next_ready() {
            self.free(r.slot);
            left += 1;
        }
        self.shared.counters.consumer.unconsumed.add(left);
        self.stats()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads an engine's counters from any thread.
#[derive(Clone)]
pub struct StatsHandle(Arc<Shared>);

impl StatsHandle {
    /// A snapshot of every counter.
    pub fn snapshot(&self) -> Stats {
        self.0.counters.snapshot()
    }
}

impl fmt::Debug for StatsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("StatsHandle").finish()
    }
}

/// A received datagram, lent to the consumer; its slot returns to the receive thread when it
/// is dropped.
pub struct Datagram<'a> {
    shared: &'a Shared,
    slot: SlotRef,
    event: SeqEvent,
}

impl Datagram<'_> {
    fn pool(&self) -> &SlotPool {
        &self.shared.pools[self.slot.thread as usize]
    }

    /// The whole datagram, header included.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the consumer owns the slot while the Datagram lives.
        unsafe { self.pool().data(self.slot.slot) }
    }

    /// The payload after the format's header.
    pub fn payload(&self) -> &[u8] {
        &self.bytes()[self.info().payload()]
    }

    /// Length, sender, arrival time, receiving thread and parsed header.
    pub fn meta(&self) -> &DatagramMeta {
        // SAFETY: the consumer owns the slot while the Datagram lives.
        unsafe { self.pool().meta(self.slot.slot) }
    }

    /// The parsed header.
    pub fn info(&self) -> &PacketInfo {
        &self.meta().info
    }

    /// What sequence tracking made of this datagram (`InOrder` for formats without sequence
    /// numbers).
    pub fn seq_event(&self) -> SeqEvent {
        self.event
    }

    /// Frames missing from this datagram's stream just before it.
    pub fn missed_before(&self) -> u64 {
        match self.event {
            SeqEvent::Gap { missed } => missed,
            _ => 0,
        }
    }
}

impl Drop for Datagram<'_> {
    fn drop(&mut self) {
        let pushed = self.pool().free.push(self.slot.slot);
        debug_assert!(pushed, "free ring sized for every slot");
    }
}

impl fmt::Debug for Datagram<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Datagram")
            .field("meta", self.meta())
            .field("event", &self.event)
            .finish()
    }
}
