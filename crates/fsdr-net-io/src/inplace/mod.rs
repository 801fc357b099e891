//! In-place reception: a receive loop that writes samples straight into the consumer's
//! output buffers, with no copy after the kernel's. It runs on a thread of its own
//! ([`InPlaceReceiver::start`]) or on the consumer's, inside [`InPlaceReceiver::receive`]
//! ([`InPlaceReceiver::start_inline`]: no hand-over between threads at all, the bare loop's
//! structure).
//!
//! The consumer lends empty buffers ([`InPlaceReceiver::give`]); the receive thread scatters
//! each datagram with `recvmmsg` iovecs — the header into a small per-datagram area, the
//! payload at its sample position in the buffer, anything longer into a spill area — and
//! hands full buffers back ([`InPlaceReceiver::take`]) with their tags and gaps. A datagram
//! that does not fit that pattern takes the copying path of the
//! [`Depacketizer`](crate::depacketizer::Depacketizer) with the same accounting: one whose
//! header or payload length differs from the stream's, one out of order. Samples that need
//! byte swapping or conversion (sc16 into `Complex<f32>`) land at the end of the room their
//! items take and are decoded forward there
//! ([`Decoder::decode_in_place`](crate::sample::Decoder::decode_in_place), `convert.rs`): no
//! copy either. The datagram that shows a gap
//! is copied to its sample position behind room for the missing items, and the receives
//! after it land behind it in place until the gap is decided (`ahead.rs`). A `recvmmsg` call
//! lands its datagrams before any header is read, so for a while after a gap the receiver
//! first looks at the queued headers (`peeks`, `probe.rs`) and ends a call in front of the
//! next datagram that shows a gap: that one comes alone and only it is copied. Counters are those of
//! the [`Engine`](crate::Engine), and the depacketizer's `copied_bytes` counts every payload
//! byte that was copied: 0 on the fast path.
//!
//! One stream per receiver: the first stream ID seen (CHDR destination endpoint, VRT stream
//! ID); datagrams of other streams are `skipped`. The receive loop is the `recvmmsg` backend's:
//! one blocking `recvmmsg(MSG_WAITFORONE)` per batch, woken for shutdown by `SHUT_RD`.
//! Buffers are filled most recently returned first, so the memory the kernel copies into is
//! still in the CPU's cache.
//! With UDP GRO on (`engine.socket.gro`), a coalesced receive's datagrams land in place too:
//! after one coalesced receive the next call sets its entry up as a run of header and
//! payload areas, one pair per datagram of the stream's size, so the kernel's single copy
//! puts each payload at its sample position. A coalesced receive that does not line up (the
//! first, or one of another datagram size) is split and copied (`gro_fixups`); every
//! datagram of one is counted and classified as if it had come alone (`gro_datagrams`).
//! When the consumer returns no empty buffer, the thread stops reading (`paused`) and the
//! kernel's buffer absorbs or drops: the buffers in circulation bound the queue in front of
//! the consumer.
//!
//! ```
//! use fsdr_net_io::depacketizer::DepacketizerConfig;
//! use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
//! use fsdr_net_io::sample::{Decoder, WireFormat};
//! use fsdr_net_io::{Backend, EngineConfig, Format};
//! use std::time::Duration;
//!
//! let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
//! engine.backend = Backend::Recvmmsg;
//! engine.format = Format::Seq64;
//! let cfg = InPlaceConfig {
//!     engine,
//!     decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
//!     depacketizer: DepacketizerConfig::default(),
//!     buffers: 4,
//! };
//! let mut rx = InPlaceReceiver::<u8, Vec<u8>>::start(cfg).unwrap();
//! for _ in 0..4 {
//!     rx.give(vec![0u8; 64 * 1024]).unwrap();
//! }
//! let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
//! for seq in 1..=3u64 {
//!     let mut dg = seq.to_le_bytes().to_vec();
//!     dg.extend_from_slice(&[seq as u8; 100]);
//!     tx.send_to(&dg, rx.local_addr()).unwrap();
//! }
//! let mut items = Vec::new();
//! while items.len() < 300 {
//!     rx.notifier().wait_timeout(Duration::from_millis(100));
//!     while let Some(f) = rx.take() {
//!         items.extend_from_slice(&f.buffer[..f.items]);
//!         rx.give(f.buffer).unwrap();
//!     }
//! }
//! let (stats, dp, _) = rx.shutdown();
//! assert_eq!((stats.delivered, dp.items), (3, 300));
//! assert_eq!(&items[..3], &[1, 1, 1]);
//! assert_eq!(&items[297..], &[3, 3, 3]);
//! ```

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::Socket;

use crate::depacketizer::{DepacketizerConfig, DepacketizerStats, GapEvent, ItemTag};
use crate::engine::{Backend, EngineConfig, ResumeSignal, Shared, StatsHandle};
use crate::notify::Notify;
use crate::sample::{Decoder, Item};
use crate::socket::BufferReport;
use crate::stats::{Counters, Stats};
use crate::{Error, sys};

mod ahead;
mod buffer;
mod convert;
mod copying;
mod current;
mod group;
mod group_thread;
mod layout;
mod probe;
mod receiver;
mod scatter;
mod step;
mod wait;
mod xdp;

pub use buffer::ItemBuffer;

/// A buffer the receive thread handed back.
#[derive(Debug)]
pub struct Filled<B> {
    /// The buffer.
    pub buffer: B,
    /// Items written from its start.
    pub items: usize,
    /// Tags, with indices into the buffer.
    pub tags: Vec<ItemTag>,
    /// Gaps found while it was filled (for `missed` messages).
    pub gaps: Vec<GapEvent>,
    /// VRT/DIFI contexts that changed a setting while it was filled (for `context`
    /// messages; their setting tags are in `tags`).
    pub contexts: Vec<crate::format::vrt::context::IfContext>,
}

/// Everything an [`InPlaceReceiver`] needs.
#[derive(Debug, Clone)]
pub struct InPlaceConfig<T> {
    /// Socket, format, batch, slot size (the largest datagram), reorder window and timeout,
    /// thread options and wake-up moderation. The backend must be
    /// [`Backend::Recvmmsg`]: in-place reception is that loop.
    pub engine: EngineConfig,
    /// How payload bytes become items.
    pub decoder: Decoder<T>,
    /// Zero-fill, time tags and probe marks.
    pub depacketizer: DepacketizerConfig,
    /// The most buffers that will be in circulation at once (the capacity of the rings
    /// between consumer and receive thread).
    pub buffers: usize,
}

/// Where the receive loop runs.
enum Runner<T, B> {
    /// On its own thread (`None` once joined).
    Thread(Option<JoinHandle<()>>),
    /// On the caller's thread, in [`InPlaceReceiver::receive`]; the thread options are
    /// applied on the first call.
    Inline {
        rx: Box<receiver::Receive<T, B>>,
        setup: Option<crate::engine::ThreadOptions>,
    },
    /// On a receive thread that serves other receivers of its group too
    /// ([`group_thread`]); `done` says when that thread has finished this one.
    Shared {
        done: std::sync::mpsc::Receiver<()>,
        _thread: Arc<group_thread::GroupThread>,
    },
}

/// What [`InPlaceReceiver::receive`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A filled buffer is ready: [`InPlaceReceiver::take`] it.
    Ready,
    /// Every lent buffer is filled or being filled: [`give`](InPlaceReceiver::give) one
    /// back (until then the socket is not read and the kernel's buffer absorbs the stream).
    NeedBuffers,
    /// Nothing arrived within the wait.
    Idle,
}

/// What the receive thread shares with the consumer.
pub(crate) struct InShared {
    pub(crate) engine: Arc<Shared>,
    pub(crate) dp_stats: Mutex<DepacketizerStats>,
    /// Items of the stream's datagrams once their layout is learnt (0 before).
    pub(crate) datagram_items: std::sync::atomic::AtomicUsize,
    /// In-order buffers split in two by the receive thread (`ItemBuffer::split_off`), each
    /// one more buffer lent; counted before the piece handed over is pushed.
    pub(crate) splits: std::sync::atomic::AtomicUsize,
}

/// A running in-place receiver (its own thread, or inline). See the
/// [module documentation](self).
pub struct InPlaceReceiver<T, B> {
    shared: Arc<InShared>,
    empty: rtrb::Producer<B>,
    full: rtrb::Consumer<Filled<B>>,
    /// Buffers given and not taken back yet (a split one counts twice).
    lent: usize,
    /// `InShared::splits` as last seen.
    splits_seen: usize,
    /// The most that may be lent ([`InPlaceConfig::buffers`]).
    limit: usize,
    runner: Runner<T, B>,
    stop_socket: Socket,
    local_addr: SocketAddr,
    buffer: BufferReport,
    /// Held while the receiver lives ([`EngineConfig::cpu_latency`](crate::EngineConfig)).
    _cpu_latency: Option<crate::cpu_latency::CpuLatencyRequest>,
    /// A receiver of a group ([`group`]): every socket of the group, kept open until the
    /// last receiver of the group is dropped, so that one closed early does not renumber
    /// the `SO_REUSEPORT` group the steering program indexes.
    _group: Option<Arc<Vec<Socket>>>,
    _items: PhantomData<fn() -> T>,
}

impl<T, B> std::fmt::Debug for InPlaceReceiver<T, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InPlaceReceiver")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl<T: Item, B: ItemBuffer<T>> InPlaceReceiver<T, B> {
    /// Opens the socket and starts the receive thread.
    pub fn start(cfg: InPlaceConfig<T>) -> Result<Self, Error> {
        Self::open(cfg, false)
    }

    /// Opens the socket without starting a thread: the receive loop runs on the caller's
    /// thread, inside [`InPlaceReceiver::receive`]. For a consumer that has a thread of its
    /// own to give (a FutureSDR blocking block): each filled buffer then reaches it with no
    /// hand-over between threads. [`InPlaceConfig::engine`]'s thread options apply to the
    /// thread that first calls `receive`.
    ///
    /// ```
    /// use fsdr_net_io::depacketizer::DepacketizerConfig;
    /// use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver, Progress};
    /// use fsdr_net_io::sample::{Decoder, WireFormat};
    /// use fsdr_net_io::{Backend, EngineConfig, Format};
    /// use std::time::Duration;
    ///
    /// let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    /// engine.backend = Backend::Recvmmsg;
    /// engine.format = Format::Seq64;
    /// let cfg = InPlaceConfig {
    ///     engine,
    ///     decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
    ///     depacketizer: DepacketizerConfig::default(),
    ///     buffers: 2,
    /// };
    /// let mut rx = InPlaceReceiver::<u8, Vec<u8>>::start_inline(cfg).unwrap();
    /// rx.give(vec![0u8; 4096]).unwrap();
    /// rx.give(vec![0u8; 4096]).unwrap();
    /// let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let mut dg = 1u64.to_le_bytes().to_vec();
    /// dg.extend_from_slice(&[7u8; 100]);
    /// tx.send_to(&dg, rx.local_addr()).unwrap();
    /// // Receives on this thread until the datagram is handed over (wake-up moderation
    /// // decides when).
    /// while rx.receive(Duration::from_millis(10)) != Progress::Ready {}
    /// let f = rx.take().unwrap();
    /// assert_eq!(&f.buffer[..f.items], &[7u8; 100][..]);
    /// let (stats, _, _) = rx.shutdown();
    /// assert_eq!(stats.delivered, 1);
    /// ```
    pub fn start_inline(cfg: InPlaceConfig<T>) -> Result<Self, Error> {
        Self::open(cfg, true)
    }

    fn open(cfg: InPlaceConfig<T>, inline: bool) -> Result<Self, Error> {
        Self::open_as(cfg, inline, group::Member::default())
    }

    /// Starts a receiver on `member`'s socket and notifier (a group's, [`group`]) or on its
    /// own.
    fn open_as(cfg: InPlaceConfig<T>, inline: bool, member: group::Member) -> Result<Self, Error> {
        let InPlaceConfig {
            engine: ecfg,
            decoder,
            depacketizer,
            buffers,
        } = cfg;
        depacketizer.check()?;
        if !matches!(ecfg.backend, Backend::Recvmmsg | Backend::Xdp) {
            return Err(Error::Unsupported {
                backend: ecfg.backend,
                reason: "in-place reception scatters recvmmsg's datagrams (Backend::Recvmmsg) \
                         or AF_XDP's (Backend::Xdp) into the output buffers; choose one of them"
                    .into(),
            });
        }
        if buffers == 0 {
            return Err(Error::config(
                "in-place reception needs at least one buffer",
            ));
        }
        // The receive loop splits UDP GRO receives itself (no backend does it here): check
        // everything else as for any recvmmsg engine.
        let mut check = ecfg.clone();
        check.socket.gro = false;
        check.validate()?;
        let cpu_latency = crate::cpu_latency::request(ecfg.cpu_latency)?;
        let addr = ecfg.socket.bind;
        let sock_err = |source| Error::Socket { addr, source };
        let opened = match member.socket {
            Some(opened) => opened,
            None => crate::socket::open_socket(&ecfg.socket, false).map_err(sock_err)?,
        };
        let socket = opened.socket;
        socket.set_nonblocking(false).map_err(sock_err)?;
        let stop_socket = socket.try_clone().map_err(sock_err)?;
        // AF_XDP: attached here, on the caller's thread (in the interface's namespace), so
        // that a failure is this call's error.
        let xdp = match ecfg.backend {
            Backend::Xdp => Some(crate::engine::XdpRx::open(&ecfg, &socket)?),
            _ => None,
        };
        let probe = socket.try_clone().map_err(sock_err)?;
        let engine = Arc::new(Shared {
            pools: Vec::new(),
            counters: Counters::new(1),
            notify: member.notify.unwrap_or_else(|| Arc::new(Notify::new())),
            stop: AtomicBool::new(false),
            format: ecfg.format,
            filter: ecfg.socket.filter.clone(),
            resume: vec![ResumeSignal::default()],
            probes: vec![probe],
            skipped_streams: Default::default(),
        });
        let shared = Arc::new(InShared {
            engine,
            dp_stats: Mutex::new(DepacketizerStats::default()),
            datagram_items: Default::default(),
            splits: Default::default(),
        });
        let (empty, empty_rx) = rtrb::RingBuffer::new(buffers);
        // In-order buffers may come back in more pieces than were lent (`split_off`): the
        // receive thread splits one only while this ring has room for every piece.
        let full_cap = if B::IN_ORDER { 4 * buffers } else { buffers };
        let (full_tx, full) = rtrb::RingBuffer::new(full_cap);
        let mut rx = receiver::Receive::new(
            &ecfg,
            shared.clone(),
            socket,
            decoder,
            depacketizer,
            empty_rx,
            full_tx,
        );
        if xdp.is_some() {
            // What arrives during a sleep waits in the AF_XDP rings, which the socket's
            // receive buffer does not bound: no polling there.
            rx.poll_ns = 0;
        }
        rx.xdp = xdp;
        if let Some(id) = member.stream {
            rx.stream = Some(Some(id));
        }
        let runner = if inline {
            Runner::Inline {
                rx: Box::new(rx),
                setup: Some(ecfg.threads.clone()),
            }
        } else {
            Runner::Thread(Some(crate::engine::spawn_receive_thread(
                0,
                &ecfg.threads,
                move || rx.run(),
            )?))
        };
        tracing::debug!(local_addr = %opened.local_addr, "in-place receiver started");
        Ok(Self {
            shared,
            empty,
            full,
            lent: 0,
            splits_seen: 0,
            limit: buffers,
            runner,
            stop_socket,
            local_addr: opened.local_addr,
            buffer: opened.buffer,
            _cpu_latency: cpu_latency,
            _group: None,
            _items: PhantomData,
        })
    }

    /// Lends an empty buffer to the receive thread; gives it back when more buffers are out
    /// than [`InPlaceConfig::buffers`] allows.
    pub fn give(&mut self, buffer: B) -> Result<(), B> {
        if self.lent >= self.limit {
            return Err(buffer);
        }
        match self.empty.push(buffer) {
            Ok(()) => {
                self.lent += 1;
                self.shared.engine.resume[0].notify.notify();
                Ok(())
            }
            Err(rtrb::PushError::Full(b)) => Err(b),
        }
    }

    /// Items a datagram of the stream carries, once the receive thread has learnt the
    /// stream's layout from its first datagrams; `None` before, or when its payloads cannot
    /// be placed. Buffers whose size is a multiple of it end where a datagram ends.
    pub fn datagram_items(&self) -> Option<usize> {
        match self.shared.datagram_items.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    /// A buffer the receive thread filled, if one is ready. Never blocks.
    pub fn take(&mut self) -> Option<Filled<B>> {
        let f = self.full.pop().ok()?;
        // A buffer split by the receive thread comes back as two: the split was counted
        // before the piece was pushed, so it is seen here.
        let splits = self.shared.splits.load(Ordering::Acquire);
        self.lent += splits - self.splits_seen;
        self.splits_seen = splits;
        self.lent = self.lent.saturating_sub(1);
        Some(f)
    }

    /// Waits up to `max_wait` for a filled buffer. A receiver started with
    /// [`start_inline`](Self::start_inline) runs the receive loop meanwhile, on this thread;
    /// one with its own thread waits for it to signal.
    pub fn receive(&mut self, max_wait: Duration) -> Progress {
        if !self.full.is_empty() {
            return Progress::Ready;
        }
        let end = crate::sys::deadline(Instant::now(), max_wait);
        match &mut self.runner {
            Runner::Thread(_) | Runner::Shared { .. } => {
                self.shared.engine.notify.wait_timeout(max_wait);
                if self.full.is_empty() {
                    Progress::Idle
                } else {
                    Progress::Ready
                }
            }
            Runner::Inline { rx, setup } => {
                if let Some(opts) = setup.take()
                    && let Err(e) = crate::engine::setup_thread(&opts, 0)
                {
                    tracing::warn!(error = %e, "in-place receive: thread options not applied");
                }
                loop {
                    let left = end.saturating_duration_since(Instant::now());
                    let step = rx.step(false, receiver::Until::Within(left));
                    if !self.full.is_empty() {
                        return Progress::Ready;
                    }
                    match step {
                        receiver::Step::NoBuffer => return Progress::NeedBuffers,
                        receiver::Step::Idle | receiver::Step::Drained => return Progress::Idle,
                        receiver::Step::Busy if left.is_zero() => return Progress::Idle,
                        receiver::Step::Busy => {}
                    }
                }
            }
        }
    }

    /// Signalled whenever a filled buffer is handed back: an async consumer awaits
    /// `notifier().notified()` when [`InPlaceReceiver::take`] returns `None`.
    pub fn notifier(&self) -> Arc<Notify> {
        self.shared.engine.notify.clone()
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// What the kernel made of the receive-buffer request.
    pub fn recv_buffer(&self) -> BufferReport {
        self.buffer
    }

    /// A snapshot of the engine counters.
    pub fn stats(&self) -> Stats {
        self.shared.engine.snapshot()
    }

    /// A handle that reads the engine counters from anywhere.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.shared.engine.clone())
    }

    /// The depacketizer's counters (items, zeros, copied bytes), as of the last hand-over.
    pub fn depacketizer_stats(&self) -> DepacketizerStats {
        *self
            .shared
            .dp_stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Stops the receive thread after it took what is queued, and returns the final
    /// counters and every buffer it still had filled (the last one partly).
    pub fn shutdown(mut self) -> (Stats, DepacketizerStats, Vec<Filled<B>>) {
        self.stop();
        let mut rest = Vec::new();
        while let Some(f) = self.take() {
            rest.push(f);
        }
        (self.stats(), self.depacketizer_stats(), rest)
    }

    fn stop(&mut self) {
        self.shared.engine.stop.store(true, Ordering::Release);
        match &mut self.runner {
            Runner::Thread(thread) => {
                self.shared.engine.resume[0].notify.notify();
                sys::shutdown_read(std::os::fd::AsFd::as_fd(&self.stop_socket));
                if let Some(t) = thread.take()
                    && t.join().is_err()
                {
                    tracing::error!("in-place receive thread panicked");
                }
            }
            Runner::Inline { rx, .. } => {
                // What is queued is still taken, as the thread would.
                rx.drain_and_finish();
                // A second stop (drop after shutdown) finds nothing to do.
                self.runner = Runner::Thread(None);
            }
            Runner::Shared { done, .. } => {
                self.shared.engine.resume[0].notify.notify();
                // Wakes the group's thread if it waits for this socket.
                sys::shutdown_read(std::os::fd::AsFd::as_fd(&self.stop_socket));
                // The thread finishes this receiver as its own thread would, then says so
                // (or hung up: it panicked).
                if done.recv().is_err() {
                    tracing::error!("in-place group receive thread ended early");
                }
                self.runner = Runner::Thread(None);
            }
        }
    }
}

impl<T, B> Drop for InPlaceReceiver<T, B> {
    fn drop(&mut self) {
        let shared = matches!(self.runner, Runner::Shared { .. });
        if let Runner::Thread(thread) = &mut self.runner
            && let Some(t) = thread.take()
        {
            self.shared.engine.stop.store(true, Ordering::Release);
            self.shared.engine.resume[0].notify.notify();
            sys::shutdown_read(std::os::fd::AsFd::as_fd(&self.stop_socket));
            let _ = t.join();
        }
        if shared {
            // The group's thread finishes this receiver; the last receiver of the group
            // joins the thread (`GroupThread`'s drop).
            self.shared.engine.stop.store(true, Ordering::Release);
            sys::shutdown_read(std::os::fd::AsFd::as_fd(&self.stop_socket));
            if let Runner::Shared { done, .. } = &self.runner {
                let _ = done.recv();
            }
        }
    }
}
