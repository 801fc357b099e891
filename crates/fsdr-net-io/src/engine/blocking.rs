//! The `blocking` backend: one thread, one blocking `recvmsg` per datagram. It exists to show
//! what batching and readiness-driven draining buy.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use socket2::Socket;

use super::worker::{Worker, spawn_receive_thread};
use super::{EngineConfig, EngineError, Shared, Started};
use crate::sys::{self, RecvBatch};

/// The receive timeout after which the thread checks the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(50);

pub(super) fn start(
    cfg: &EngineConfig,
    shared: Arc<Shared>,
    socket: Socket,
) -> Result<Started, EngineError> {
    let addr = cfg.socket.bind;
    let sock_err = |source| EngineError::Socket { addr, source };
    socket.set_nonblocking(false).map_err(sock_err)?;
    socket
        .set_read_timeout(Some(STOP_CHECK))
        .map_err(sock_err)?;
    let handle = spawn_receive_thread(0, &cfg.threads, move || run(shared, socket))?;
    Ok(Started {
        threads: vec![handle],
        // The thread notices the stop flag within one receive timeout.
        stoppers: vec![Box::new(|| {})],
    })
}

fn run(shared: Arc<Shared>, socket: Socket) {
    let fd = socket.as_raw_fd();
    let mut worker = Worker::new(0, shared, 1);
    let mut msg = RecvBatch::new(1);
    let len = worker.pool().slot_size();
    while !worker.stopping() {
        let have_slot = worker.fill_stash(1) == 1;
        let ptr = if have_slot {
            worker.pool().buf_ptr(worker.stash[0])
        } else {
            worker.scratch_ptr(0)
        };
        // SAFETY: the slot (or scratch buffer) is owned by this thread and stays valid and
        // untouched by others until recv_one returns.
        unsafe { msg.set_buffer(0, ptr, len) };
        match msg.recv_one(fd) {
            Ok(()) => {
                let meta = msg.meta(0);
                if have_slot {
                    let consumed = worker.complete(worker.stash[0], &meta, sys::monotonic_ns());
                    worker.retire_batch(1, |_| consumed);
                } else {
                    worker.overflowed(&meta);
                }
                worker.publish();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                worker.refresh_kernel_drops(fd);
            }
            Err(e) => {
                tracing::warn!(error = %e, "recvmsg failed");
                std::thread::sleep(STOP_CHECK);
            }
        }
    }
    worker.refresh_kernel_drops(fd);
}
