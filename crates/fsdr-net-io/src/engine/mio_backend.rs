//! The `mio` backend: one receive thread, the socket registered edge-triggered with
//! `mio::Poll`; on readiness it drains the socket with `recvmmsg` batches until the kernel
//! has nothing more.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use socket2::Socket;

use super::worker::{Worker, spawn_receive_thread};
use super::{EngineConfig, EngineError, Shared, Started};
use crate::sys::{self, RecvBatch};

const SOCKET: Token = Token(0);
const WAKE: Token = Token(1);
/// How often an idle thread refreshes the kernel drop counter.
const IDLE_POLL: Duration = Duration::from_millis(100);

pub(super) fn start(
    cfg: &EngineConfig,
    shared: Arc<Shared>,
    socket: Socket,
) -> Result<Started, EngineError> {
    let (thread, stopper) = spawn_thread(0, cfg, shared, socket)?;
    Ok(Started {
        threads: vec![thread],
        stoppers: vec![stopper],
    })
}

/// Starts one mio receive thread on `socket` (used by the single-thread and the
/// per-thread-socket backends).
pub(crate) fn spawn_thread(
    index: usize,
    cfg: &EngineConfig,
    shared: Arc<Shared>,
    socket: Socket,
) -> Result<(std::thread::JoinHandle<()>, super::Stopper), EngineError> {
    let poll = Poll::new().map_err(EngineError::Spawn)?;
    let fd = socket.as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&fd), SOCKET, Interest::READABLE)
        .map_err(EngineError::Spawn)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE).map_err(EngineError::Spawn)?);
    let batch = cfg.batch;
    let handle = spawn_receive_thread(index, &cfg.threads, move || {
        run(index, shared, socket, poll, batch)
    })?;
    let stopper: super::Stopper = Box::new(move || {
        let _ = waker.wake();
    });
    Ok((handle, stopper))
}

fn run(index: usize, shared: Arc<Shared>, socket: Socket, mut poll: Poll, batch: usize) {
    let fd = socket.as_raw_fd();
    let mut worker = Worker::new(index, shared, batch);
    let mut msgs = RecvBatch::new(batch);
    let mut events = Events::with_capacity(8);
    // Datagrams may already be queued before the first edge.
    drain(&mut worker, &mut msgs, fd, batch);
    while !worker.stopping() {
        if let Err(e) = poll.poll(&mut events, Some(IDLE_POLL))
            && e.kind() != std::io::ErrorKind::Interrupted
        {
            tracing::error!(thread = index, error = %e, "poll failed; receive thread stops");
            break;
        }
        if worker.stopping() {
            break;
        }
        if events.is_empty() {
            worker.refresh_kernel_drops(fd);
            continue;
        }
        if events.iter().any(|e| e.token() == SOCKET) {
            drain(&mut worker, &mut msgs, fd, batch);
        }
    }
    // Take whatever is still queued, then read the final drop count.
    drain(&mut worker, &mut msgs, fd, batch);
    worker.refresh_kernel_drops(fd);
}

/// Receives batches until the socket would block.
pub(crate) fn drain(worker: &mut Worker, msgs: &mut RecvBatch, fd: RawFd, batch: usize) {
    loop {
        match recv_batch(worker, msgs, fd, batch) {
            Ok(n) if n == batch => continue,
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => {
                tracing::warn!(thread = worker.index, error = %e, "recvmmsg failed");
                break;
            }
        }
    }
    worker.publish();
}

/// One `recvmmsg` call into free slots (and overflow buffers when the consumer is behind).
pub(crate) fn recv_batch(
    worker: &mut Worker,
    msgs: &mut RecvBatch,
    fd: RawFd,
    batch: usize,
) -> std::io::Result<usize> {
    let slots = worker.fill_stash(batch);
    for i in 0..batch {
        let ptr = if i < slots {
            worker.pool().buf_ptr(worker.stash[i])
        } else {
            worker.scratch_ptr(i)
        };
        let len = worker.pool().slot_size();
        // SAFETY: slot buffers in the stash are owned by this thread, and scratch buffers are
        // private to it; both stay valid and untouched by others until the call returns.
        unsafe { msgs.set_buffer(i, ptr, len) };
    }
    let n = msgs.recv_mmsg(fd, batch)?;
    let now = sys::monotonic_ns();
    let used = n.min(slots);
    let mut consumed = [0u64; 16]; // bitmap for up to 1024 entries
    for i in 0..n {
        let meta = msgs.meta(i);
        if i < slots {
            if worker.complete(worker.stash[i], &meta, now) {
                consumed[i / 64] |= 1 << (i % 64);
            }
        } else {
            worker.overflowed(&meta);
        }
    }
    worker.retire_batch(used, |i| consumed[i / 64] >> (i % 64) & 1 == 1);
    Ok(n)
}
