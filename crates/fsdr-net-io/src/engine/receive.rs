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

/// After the stop: takes what the socket has queued, without waiting, in batches of
/// `batch`, for at most [`DRAIN_CALLS`] calls.
#[cfg_attr(not(feature = "uring"), allow(dead_code))]
pub(crate) fn drain_after_stop(worker: &mut Worker, socket: &Socket, batch: usize) {
    let mut msgs = RecvBatch::new(batch);
    for _ in 0..DRAIN_CALLS {
        match recv_batch(worker, &mut msgs, socket, batch, Wait::No) {
            Ok(Some(n)) if n == batch && !worker.shut_down => {}
            _ => break,
        }
    }
    worker.publish(crate::sys::monotonic_ns());
}

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
    // Pausing: receive only into slots the consumer has room for.
    let want = if pause { slots } else { batch };
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
    Ok(Some(if pause && n == want && want < batch {
        batch
    } else {
        n
    }))
}

/// The loop of the backends that block in the kernel (`recvmmsg` with `batch`, `blocking`
/// with 1). A consumer wake-up deferred by [`Coalesce`](crate::engine::Coalesce) is kept by
/// waiting for the socket with `ppoll` until its deadline before blocking again.
pub(crate) fn blocking_loop(mut worker: Worker, socket: Socket, batch: usize) {
    let mut msgs = RecvBatch::new(batch);
    let mut wake_by: Option<u64> = None;
    // Once stopping, what is queued is still taken, but a sender that never pauses cannot
    // keep the thread alive.
    let mut after_stop = 0;
    while after_stop < DRAIN_CALLS {
        let stopping = worker.stopping();
        after_stop += usize::from(stopping);
        if let Some(d) = wake_by
            && !stopping
        {
            let now = sys::monotonic_ns();
            if now >= d || !sys::readable_within(&socket, d - now) {
                worker.wake(sys::monotonic_ns());
                wake_by = None;
            }
        }
        // Once stopping, take what is queued without waiting; a short batch ends it.
        let wait = if stopping { Wait::No } else { Wait::ForOne };
        match recv_batch(&mut worker, &mut msgs, &socket, batch, wait) {
            Ok(Some(n)) => {
                wake_by = worker.publish(sys::monotonic_ns());
                if worker.shut_down || (stopping && n < batch) {
                    break;
                }
            }
            Ok(None) => {
                if stopping {
                    break;
                }
                worker.wait_for_room();
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && stopping => break,
            Err(e) => {
                if worker.stopping() {
                    continue;
                }
                tracing::warn!(error = %e, "recvmmsg failed");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
    worker.wake(sys::monotonic_ns());
    worker.refresh_kernel_drops();
}
