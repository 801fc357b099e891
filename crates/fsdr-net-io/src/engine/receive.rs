//! What every socket backend's receive loop shares: one `recvmmsg` into free slots (the
//! overflow buffers when the consumer is behind and the policy discards), and the one rule
//! for stopping — once the engine stops, a receive thread takes what is queued without
//! waiting, for at most [`DRAIN_CALLS`] calls (a short batch ends it sooner), so that a
//! sender that never pauses cannot keep `Engine::stop` from returning.

use socket2::Socket;

use super::meta::Clocks;
use super::worker::Worker;
use crate::sys::{self, RecvBatch, Wait};

/// Receive calls a thread makes after the engine stopped, at most: what is queued is still
/// taken, but a sender that never pauses cannot keep the thread alive.
pub(crate) const DRAIN_CALLS: usize = 4096;

/// The poll interval a receive thread keeps (`EngineConfig::poll_interval`, in ns; 0: read
/// on every arrival): at most a quarter of the time its socket's receive buffer (as the
/// kernel reports it) takes to fill at 100 Gb/s, so that sleeping never costs a drop however
/// fast the stream (128 MiB: 5 ms; Linux's default 208 KiB: 9 µs, which turns the sleeping
/// off); below 20 µs a sleep is not worth a pass of its own.
pub(crate) fn poll_ns(interval_ns: u64, socket: &Socket) -> u64 {
    let bound = socket
        .recv_buffer_size()
        .map_or(0, |bytes| (bytes as u64 * 2 / 25) / 4);
    let ns = interval_ns.min(bound);
    if ns >= MIN_POLL_NS { ns } else { 0 }
}

/// Sleeps shorter than this are not worth a pass of their own.
const MIN_POLL_NS: u64 = 20_000;

/// One `recvmmsg` call into free slots. When the consumer is behind: with the pause policy
/// none is made (`Ok(None)`); with the discard policy the rest of the batch goes into
/// overflow buffers. Returns the datagrams received, full batch or not (`n == batch` means
/// more may be queued).
pub(crate) fn recv_batch(
    worker: &mut Worker,
    msgs: &mut RecvBatch,
    socket: &Socket,
    batch: usize,
    wait: Wait,
) -> std::io::Result<Option<usize>> {
    let slots = worker.fill_stash(batch);
    let pause = worker.pauses();
    if slots == 0 && pause {
        return Ok(None);
    }
    // Pausing: receive only into slots the consumer has room for; discarding, the rest of
    // the batch into overflow buffers, as many as the worker has (a worker made for
    // single receives, io_uring's, has one when its socket is drained in batches).
    let want = if pause {
        slots
    } else {
        batch.min(worker.scratch_slots()).max(slots)
    };
    for i in 0..want {
        let ptr = if i < slots {
            worker.pool().buf_ptr(worker.stash[i])
        } else {
            worker.scratch_ptr(i)
        };
        let len = worker.pool().slot_size();
        // SAFETY: slot buffers in the stash are owned by this thread, and scratch buffers are
        // private to it; both stay valid and untouched by others until the call returns.
        // Checked by: `blocking_accounts_for_every_datagram` and
        // `stalled_consumer_with_discard_overflows_are_counted_and_stream_resumes` under ASan.
        unsafe { msgs.set_buffer(i, ptr, len) };
    }
    worker.counts.recv_calls += 1;
    let n = msgs.recv(socket, want, wait)?;
    let at = Clocks::now();
    let used = n.min(slots);
    let mut consumed = [0u64; 16]; // bitmap for up to 1024 entries
    for i in 0..n {
        let meta = msgs.meta(i);
        if i < slots {
            if worker.complete(worker.stash[i], &meta, at) {
                consumed[i / 64] |= 1 << (i % 64);
            }
        } else {
            worker.overflowed(&meta);
        }
    }
    worker.retire_batch(used, |i| consumed[i / 64] >> (i % 64) & 1 == 1);
    // A short batch because the room was short is not a drained socket.
    Ok(Some(if n == want && want < batch { batch } else { n }))
}

/// What one pass of a receive loop did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Received (or handed over, or acted on a deadline); `more`: more may be queued (a
    /// full batch).
    Took { more: bool },
    /// No memory to receive into: the consumer has to give some back.
    NoRoom,
    /// Nothing within the wait.
    Idle,
    /// The socket was shut down, or (stopping) its queue is empty.
    Drained,
}

/// What a receive loop asks of the side it runs for: the engine's worker with its slots
/// ([`SocketSide`]) or the in-place receiver with the output buffers it lends
/// (`inplace::receiver`). The loop itself — passes until the engine stops, then the one rule
/// for stopping — is [`run_loop`] and [`drain_and_finish`], the same for both.
pub(crate) trait ReceiveSide {
    /// The engine was asked to stop.
    fn stopping(&self) -> bool;
    /// One pass: (unless `stopping`) wait for data or the next deadline and act on a passed
    /// deadline, then (`stopping`: without waiting) one receive call into lent memory.
    fn pass(&mut self, stopping: bool) -> Pass;
    /// No memory to receive into: wait for the consumer.
    fn wait_for_room(&mut self);
    /// After the last pass: wake the consumer, publish the final counters.
    fn finish(&mut self);
    /// At a stop with no memory left to receive into (the consumer holds all of it): one
    /// receive call into memory thrown away, its datagrams counted as `overflow`, so that
    /// what the kernel still holds is counted, not freed unseen when the socket closes. A
    /// side that cannot answers `NoRoom`.
    fn discard_pass(&mut self) -> Pass {
        Pass::NoRoom
    }
}

/// The receive loop of the threads that block in the kernel (the `recvmmsg` and `blocking`
/// backends, and the in-place receiver's thread): passes until the engine stops, then
/// [`drain_and_finish`].
pub(crate) fn run_loop(side: &mut impl ReceiveSide) {
    while !side.stopping() {
        match side.pass(false) {
            Pass::NoRoom => side.wait_for_room(),
            Pass::Drained => break,
            Pass::Took { .. } | Pass::Idle => {}
        }
    }
    drain_and_finish(side);
}

/// The one rule for stopping: what is queued is still taken, without waiting, for at most
/// [`DRAIN_CALLS`] passes (a short batch or an empty queue ends it sooner), so that a sender
/// that never pauses cannot keep the loop alive; when the consumer holds every slot, what is
/// queued is read into memory thrown away and counted (`ReceiveSide::discard_pass`); then
/// the side finishes. The in-place
/// receiver run inline on the consumer's thread stops with it too.
pub(crate) fn drain_and_finish(side: &mut impl ReceiveSide) {
    let mut discarding = false;
    for _ in 0..DRAIN_CALLS {
        let pass = if discarding {
            side.discard_pass()
        } else {
            side.pass(true)
        };
        match pass {
            Pass::Took { more: true } | Pass::Idle => {}
            // The consumer holds every slot: the rest is read and counted as dropped.
            Pass::NoRoom if !discarding => discarding = true,
            Pass::Took { more: false } | Pass::NoRoom | Pass::Drained => break,
        }
    }
    side.finish();
}

/// The engine's side of [`run_loop`] for a socket read with `recvmmsg` (`batch` at a time;
/// the `blocking` backend: 1). A consumer wake-up deferred by
/// [`Coalesce`](crate::engine::Coalesce) is kept by waiting for the socket with `ppoll` until
/// its deadline before blocking again.
struct SocketSide {
    worker: Worker,
    socket: Socket,
    msgs: RecvBatch,
    batch: usize,
    wake_by: Option<u64>,
}

impl ReceiveSide for SocketSide {
    fn stopping(&self) -> bool {
        self.worker.stopping()
    }

    fn pass(&mut self, stopping: bool) -> Pass {
        if let Some(d) = self.wake_by
            && !stopping
        {
            let now = sys::monotonic_ns();
            if now >= d || !sys::readable_within(&self.socket, d - now) {
                self.worker.wake(sys::monotonic_ns());
                self.wake_by = None;
            }
        }
        let wait = if stopping { Wait::No } else { Wait::ForOne };
        let w = &mut self.worker;
        match recv_batch(w, &mut self.msgs, &self.socket, self.batch, wait) {
            Ok(Some(n)) => {
                self.wake_by = w.publish(sys::monotonic_ns());
                if w.shut_down {
                    Pass::Drained
                } else {
                    Pass::Took {
                        more: n == self.batch,
                    }
                }
            }
            Ok(None) => Pass::NoRoom,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && stopping => Pass::Drained,
            Err(e) => {
                if !w.stopping() {
                    tracing::warn!(error = %e, "recvmmsg failed");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Pass::Idle
            }
        }
    }

    fn wait_for_room(&mut self) {
        self.worker.wait_for_room();
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

/// After the `uring` backend's operations ended: what the socket still has queued, taken by
/// [`drain_and_finish`] (`recvmmsg` in batches of `batch`, without waiting), the same stop
/// rule as every loop.
#[cfg_attr(not(feature = "uring"), allow(dead_code))]
pub(crate) fn drain_socket(worker: Worker, socket: Socket, batch: usize) {
    drain_and_finish(&mut SocketSide {
        worker,
        socket,
        msgs: RecvBatch::new(batch),
        batch,
        wake_by: None,
    });
}

/// The thread of the backends that block in the kernel (`recvmmsg` with `batch`, `blocking`
/// with 1): [`run_loop`] over the engine's slots.
pub(crate) fn blocking_loop(worker: Worker, socket: Socket, batch: usize) {
    run_loop(&mut SocketSide {
        worker,
        socket,
        msgs: RecvBatch::new(batch),
        batch,
        wake_by: None,
    });
}
