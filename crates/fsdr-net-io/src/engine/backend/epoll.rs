//! The edge-triggered epoll receive loop that the `mio` and `reuseport` backends share: per
//! socket one receive thread with the socket registered edge-triggered in a `mio::Poll`; on
//! readiness it drains the socket with `recvmmsg` batches until a batch comes back short (an
//! edge-triggered socket reports the next datagram with a new event, so no extra call that
//! would only return `EAGAIN`). With `SocketConfig::gro` each entry takes a coalesced
//! receive, split into its datagrams in place ([`gro`](super::gro)). The loop itself, and its
//! one rule for stopping, is the engine's `run_loop` (engine/receive.rs).

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use ::mio::unix::SourceFd;
use ::mio::{Events, Interest, Poll, Token, Waker};
use socket2::Socket;

use super::super::receive::{Pass, ReceiveSide, poll_ns, recv_batch, run_loop};
use super::super::slots::ReceiverEnd;
use super::super::worker::{Worker, spawn_receive_thread};
use super::super::{EngineConfig, Shared};
use super::gro::{GroReader, Outcome};
use super::{Started, Stopper};
use crate::Error;
use crate::sys::{self, RecvBatch, Wait};

const SOCKET: Token = Token(0);
const WAKE: Token = Token(1);
/// How often an idle thread refreshes the kernel drop counter.
const IDLE_POLL: Duration = Duration::from_millis(100);

/// Starts one receive thread per socket, each with its own `mio::Poll`: the `mio` backend
/// (one socket) and the `reuseport` backend (its group) both run on this loop.
pub(super) fn start_threads(
    cfg: &EngineConfig,
    shared: Arc<Shared>,
    sockets: Vec<Socket>,
    ends: Vec<ReceiverEnd>,
) -> Result<Started, Error> {
    let mut started = Started::new();
    for (index, (socket, end)) in sockets.into_iter().zip(ends).enumerate() {
        match spawn_mio_thread(index, cfg, shared.clone(), socket, end) {
            Ok((thread, stopper)) => {
                started.threads.push(thread);
                started.stoppers.push(stopper);
            }
            Err(e) => {
                started.abort(&shared);
                return Err(e);
            }
        }
    }
    Ok(started)
}

/// Starts one mio receive thread on `socket`.
fn spawn_mio_thread(
    index: usize,
    cfg: &EngineConfig,
    shared: Arc<Shared>,
    socket: Socket,
    end: ReceiverEnd,
) -> Result<(std::thread::JoinHandle<()>, Stopper), Error> {
    let poll = Poll::new().map_err(Error::Spawn)?;
    let fd = socket.as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&fd), SOCKET, Interest::READABLE)
        .map_err(Error::Spawn)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE).map_err(Error::Spawn)?);
    let batch = cfg.batch;
    let worker_cfg = cfg.clone();
    let handle = spawn_receive_thread(index, &cfg.threads, move || {
        let worker = Worker::new(index, shared, end, &worker_cfg, batch);
        let poll_interval = worker_cfg.poll_interval.map_or(0, |d| d.as_nanos() as u64);
        run(
            worker,
            socket,
            poll,
            Reader::new(&worker_cfg, batch),
            poll_interval,
        )
    })?;
    let stopper: Stopper = Box::new(move || {
        let _ = waker.wake();
    });
    Ok((handle, stopper))
}

/// How a receive loop reads: one datagram per entry, or coalesced (GRO) receives.
pub(crate) enum Reader {
    Plain(RecvBatch, usize),
    Gro(GroReader),
}

impl Reader {
    /// The reader `cfg` asks for, `batch` receives per call.
    pub(crate) fn new(cfg: &EngineConfig, batch: usize) -> Self {
        if cfg.socket.gro {
            Reader::Gro(GroReader::new(batch, cfg.slot_size))
        } else {
            Reader::Plain(RecvBatch::new(batch), batch)
        }
    }

    /// Free slots a receive call needs.
    fn min_free(&self) -> usize {
        match self {
            Reader::Plain(..) => 1,
            Reader::Gro(gro) => gro.min_free(),
        }
    }

    /// One receive call (waiting as `wait` says): `Some(true)` when the socket may hold
    /// more, `Some(false)` when it is drained, `None` when the consumer has no room and the
    /// policy is to pause.
    pub(crate) fn read(
        &mut self,
        worker: &mut Worker,
        socket: &Socket,
        wait: Wait,
    ) -> std::io::Result<Option<bool>> {
        match self {
            Reader::Plain(msgs, batch) => {
                Ok(recv_batch(worker, msgs, socket, *batch, wait)?.map(|n| n == *batch))
            }
            Reader::Gro(gro) => Ok(match gro.recv(worker, socket, wait)? {
                Outcome::Received { more } => Some(more),
                Outcome::NoRoom => None,
            }),
        }
    }
}

/// The thread: the engine's receive loop ([`run_loop`]) over an [`EpollSide`].
fn run(worker: Worker, socket: Socket, poll: Poll, reader: Reader, poll_interval: u64) {
    let poll_ns = poll_ns(poll_interval, &socket);
    run_loop(&mut EpollSide {
        worker,
        socket,
        poll,
        events: Events::with_capacity(8),
        reader,
        wake_by: None,
        primed: false,
        poll_ns,
        polling: false,
    });
}

/// The epoll side of the engine's receive loop: a pass sleeps until the socket has more (or
/// a deferred wake-up of the consumer is due), then drains it; once stopping, a pass is one
/// receive call without waiting, so that the loop's one rule bounds the calls.
struct EpollSide {
    worker: Worker,
    socket: Socket,
    poll: Poll,
    events: Events,
    reader: Reader,
    /// When the consumer must be woken at the latest.
    wake_by: Option<u64>,
    /// The first pass drained: datagrams may be queued before the first edge.
    primed: bool,
    /// Under load, read at most this often (`EngineConfig::poll_interval`, bounded by the
    /// socket's receive buffer); 0: on every arrival.
    poll_ns: u64,
    /// The last drain brought datagrams: the next pass sleeps `poll_ns` and drains again
    /// instead of waiting for the socket.
    polling: bool,
}

impl EpollSide {
    /// A pass under load with a poll interval: sleep it (or until the consumer's deferred
    /// wake-up), take the socket's readiness without waiting (its edges during the sleep),
    /// and drain. An empty drain ends the polling: the next pass waits for the socket again.
    fn poll_pass(&mut self) -> Pass {
        let now = sys::monotonic_ns();
        let until = self
            .wake_by
            .map_or(now + self.poll_ns, |d| d.min(now + self.poll_ns));
        if until > now {
            std::thread::sleep(Duration::from_nanos(until - now));
        }
        let _ = self.poll.poll(&mut self.events, Some(Duration::ZERO));
        let w = &mut self.worker;
        if w.stopping() {
            return Pass::Idle;
        }
        (self.wake_by, self.polling) = drain(w, &mut self.reader, &self.socket);
        if let Some(d) = self.wake_by {
            let now = sys::monotonic_ns();
            if now >= d {
                w.wake(now);
                self.wake_by = None;
            }
        }
        Pass::Took { more: false }
    }
}

impl ReceiveSide for EpollSide {
    fn stopping(&self) -> bool {
        self.worker.stopping()
    }

    fn pass(&mut self, stopping: bool) -> Pass {
        let w = &mut self.worker;
        if stopping {
            let pass = match self.reader.read(w, &self.socket, Wait::No) {
                Ok(Some(more)) => Pass::Took { more },
                Ok(None) => Pass::NoRoom,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Pass::Drained,
                Err(e) => {
                    tracing::warn!(thread = w.index, error = %e, "recvmmsg failed");
                    Pass::Drained
                }
            };
            w.publish(sys::monotonic_ns());
            return pass;
        }
        if !std::mem::replace(&mut self.primed, true) {
            (self.wake_by, self.polling) = drain(w, &mut self.reader, &self.socket);
            return Pass::Took { more: false };
        }
        if self.polling && self.poll_ns > 0 {
            return self.poll_pass();
        }
        // Sleep until the socket has more, or until a deferred wake-up of the consumer is due.
        let timeout = self.wake_by.map_or(IDLE_POLL, |d| {
            Duration::from_nanos(d.saturating_sub(sys::monotonic_ns())).min(IDLE_POLL)
        });
        if let Err(e) = self.poll.poll(&mut self.events, Some(timeout))
            && e.kind() != std::io::ErrorKind::Interrupted
        {
            tracing::error!(thread = w.index, error = %e, "poll failed; receive thread stops");
            return Pass::Drained;
        }
        if w.stopping() {
            return Pass::Idle;
        }
        if self.events.iter().any(|e| e.token() == SOCKET) {
            (self.wake_by, self.polling) = drain(w, &mut self.reader, &self.socket);
            return Pass::Took { more: false };
        }
        if let Some(d) = self.wake_by {
            let now = sys::monotonic_ns();
            if now >= d {
                w.wake(now);
                self.wake_by = None;
            }
        } else if self.events.is_empty() {
            w.refresh_kernel_drops();
        }
        Pass::Idle
    }

    fn wait_for_room(&mut self) {
        self.worker.wait_for_room_and_free(self.reader.min_free());
    }

    fn finish(&mut self) {
        self.worker.wake(sys::monotonic_ns());
        self.worker.refresh_kernel_drops();
    }

    fn discard_pass(&mut self) -> Pass {
        self.worker.discard_from_now();
        self.pass(true)
    }
}

/// Receives batches until one comes back short (the socket is drained: an edge-triggered
/// socket reports the next datagram with a new event, so no call that would only say
/// `EAGAIN`), pausing while the consumer is behind if that is the policy, or until the
/// engine stops (the loop's stop rule takes over). Returns when the consumer must be woken
/// at the latest, and whether anything was received.
fn drain(worker: &mut Worker, msgs: &mut Reader, socket: &Socket) -> (Option<u64>, bool) {
    let mut got = false;
    while !worker.stopping() {
        match msgs.read(worker, socket, Wait::No) {
            Ok(Some(more)) => {
                got = true;
                if !more {
                    break;
                }
            }
            Ok(None) if worker.stopping() => break,
            Ok(None) => worker.wait_for_room_and_free(msgs.min_free()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => {
                tracing::warn!(thread = worker.index, error = %e, "recvmmsg failed");
                break;
            }
        }
    }
    (worker.publish(sys::monotonic_ns()), got)
}
