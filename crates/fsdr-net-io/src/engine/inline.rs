//! Inline reception ([`Engine::start_inline`](super::Engine::start_inline)): no receive
//! thread; the consumer's own `recv_timeout`/`try_recv` run the receive loop on its thread
//! when nothing is ready.
//!
//! That is the bare loop's structure — one thread, which sleeps in the kernel until the
//! socket has data and then takes a whole batch with one `recvmmsg(MSG_WAITFORONE)` — with
//! everything the threaded engine does to each datagram: classification, source filtering,
//! sequence tracking, reordering, the latency budget and every counter. There is no
//! hand-over between threads, so no wake-up and no second thread's share of the cache. The
//! price: the consumer must keep calling, since nothing reads the socket while it does other
//! work (the kernel's receive buffer holds the stream meanwhile, and drops what does not
//! fit, counted).

use std::time::{Duration, Instant};

use socket2::Socket;

use super::backend::{Backend, Reader};
use super::config::{EngineConfig, ThreadOptions};
use super::receive::{Pass, ReceiveSide, drain_and_finish};
use super::slots::ReceiverEnd;
use super::worker::Worker;
use super::{Shared, backend};
use crate::Error;
use crate::sys::{self, Wait};

/// How long an inline receive waits when the consumer holds every slot it may (only expired
/// reorder holds can free one then).
const NO_ROOM_WAIT: Duration = Duration::from_micros(250);
/// How long a receive error keeps the loop from trying again (as the receive threads do).
const ERROR_WAIT: Duration = Duration::from_millis(10);
/// Waits at least this long block in `recvmmsg` itself (its timeout, `SO_RCVTIMEO`, counts in
/// the kernel's ticks); shorter ones wait in `ppoll`, which keeps to the nanosecond.
const MIN_BLOCKING_WAIT: Duration = Duration::from_millis(20);
/// How far `SO_RCVTIMEO` may overshoot: the kernel rounds it up to a tick (4 ms at 250 Hz).
const TICK_SLACK: Duration = Duration::from_millis(5);

/// The receive side of an inline engine: its one socket, the per-datagram work and the
/// batch headers.
pub(crate) struct Inline {
    worker: Worker,
    socket: Socket,
    reader: Reader,
    /// The last receive filled its batch: more may be queued, so the next one reads at once
    /// instead of waiting for the socket first. After a short batch the socket is drained,
    /// and the next receive waits (no call that would only return `EAGAIN`).
    more: bool,
    /// The socket's receive timeout as last set (`SO_RCVTIMEO`): a blocking receive waits
    /// that long at most.
    timeout: Option<Duration>,
}

impl Inline {
    /// Checks that `cfg` can be received inline: one plain socket, no receive thread
    /// options.
    pub(crate) fn validate(cfg: &EngineConfig) -> Result<(), Error> {
        if !matches!(
            cfg.backend,
            Backend::Mio | Backend::Recvmmsg | Backend::Blocking
        ) {
            return Err(Error::Unsupported {
                backend: cfg.backend,
                reason: "inline reception reads one plain socket on the caller's thread: \
                         backends mio, recvmmsg and blocking"
                    .into(),
            });
        }
        if cfg.threads != ThreadOptions::default() {
            return Err(Error::config(
                "thread pinning and priority apply to receive threads; an inline engine \
                 receives on the caller's thread (pin that one)",
            ));
        }
        Ok(())
    }

    /// The receive side on the engine's one socket and ring end.
    pub(crate) fn new(
        cfg: &EngineConfig,
        shared: std::sync::Arc<Shared>,
        sockets: Vec<Socket>,
        ends: Vec<ReceiverEnd>,
    ) -> Result<Self, Error> {
        let (socket, end) = backend::single(sockets, ends);
        // A long wait blocks in the receive itself (one system call, as in the bare loop); a
        // receive that must not wait says so per call (`MSG_DONTWAIT`).
        socket
            .set_nonblocking(false)
            .map_err(|source| Error::Socket {
                addr: cfg.socket.bind,
                source,
            })?;
        let batch = if cfg.backend == Backend::Blocking {
            1
        } else {
            cfg.batch
        };
        Ok(Inline {
            worker: Worker::new(0, shared, end, cfg, batch).for_inline(),
            socket,
            reader: Reader::new(cfg, batch),
            // Datagrams may be queued before the first call.
            more: true,
            timeout: None,
        })
    }

    /// How to wait `left` for data: in the receive itself when the socket's timeout can be
    /// kept within it (set anew only when it no longer fits: a consumer that calls with the
    /// same timeout sets it once), else `None`.
    fn blocking_wait(&mut self, left: Duration) -> Option<Wait> {
        if left < MIN_BLOCKING_WAIT {
            return None;
        }
        let fits = |t: Duration| t + TICK_SLACK <= left && t >= left / 2;
        if self.timeout.is_some_and(fits) {
            return Some(Wait::ForOne);
        }
        // A tick of slack more than needed, so that the next call with the same timeout,
        // a few microseconds later, still fits.
        let t = left - 2 * TICK_SLACK;
        match self.socket.set_read_timeout(Some(t)) {
            Ok(()) => {
                self.timeout = Some(t);
                Some(Wait::ForOne)
            }
            Err(_) => None,
        }
    }

    /// One receive: waits for the socket until `until` (not at all with `None`) unless more
    /// is known to be queued, then makes one receive call and hands what it brought to the
    /// consumer side.
    pub(crate) fn step(&mut self, until: Option<Instant>) {
        let mut wait = Wait::No;
        if !self.more
            && let Some(until) = until
        {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            match self.blocking_wait(left) {
                Some(w) => wait = w,
                None => {
                    if !sys::readable_within(&self.socket, left.as_nanos() as u64) {
                        return;
                    }
                }
            }
        }
        match self.reader.read(&mut self.worker, &self.socket, wait) {
            Ok(Some(more)) => self.more = more,
            Ok(None) => {
                // The consumer holds every slot it may (its reorder windows hold them; with
                // GRO a receive needs a whole entry): counted as a pause. Only expiring
                // holds free slots, so wait a little rather than spin.
                self.worker.counts.paused += 1;
                nap(until, NO_ROOM_WAIT);
            }
            // Nothing came within the wait (or a signal ended it).
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) =>
            {
                self.more = false
            }
            Err(e) => {
                tracing::warn!(error = %e, "recvmmsg failed");
                self.more = false;
                nap(until, ERROR_WAIT);
            }
        }
        self.worker.publish(sys::monotonic_ns());
    }

    /// At stop: the engine's one stop rule (`receive::drain_and_finish`): what is queued is
    /// taken without waiting, for at most `DRAIN_CALLS` receives; when the consumer holds
    /// every slot, into overflow buffers, counted as `overflow`; then the final drop count.
    pub(crate) fn finish(&mut self) {
        drain_and_finish(self);
    }
}

/// The inline engine as a side of the one stop rule: a pass at a stop is one receive that
/// does not wait.
impl ReceiveSide for Inline {
    fn stopping(&self) -> bool {
        self.worker.stopping()
    }

    fn pass(&mut self, _stopping: bool) -> Pass {
        match self.reader.read(&mut self.worker, &self.socket, Wait::No) {
            Ok(Some(more)) => Pass::Took { more },
            Ok(None) => Pass::NoRoom,
            Err(_) => Pass::Drained,
        }
    }

    fn wait_for_room(&mut self) {
        // Not reached: the inline engine runs no loop of its own, only the stop rule.
    }

    fn finish(&mut self) {
        self.worker.publish(sys::monotonic_ns());
        self.worker.refresh_kernel_drops();
    }

    fn discard_pass(&mut self) -> Pass {
        self.worker.discard_from_now();
        self.pass(true)
    }
}

/// Sleeps `most` at most, and not past `until` (not at all without one: `try_recv` never
/// waits).
fn nap(until: Option<Instant>, most: Duration) {
    if let Some(until) = until {
        std::thread::sleep(until.saturating_duration_since(Instant::now()).min(most));
    }
}
