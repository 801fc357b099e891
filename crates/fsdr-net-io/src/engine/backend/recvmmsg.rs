//! The `recvmmsg` backend: the bare receive loop. One thread on a blocking socket calls
//! `recvmmsg(MSG_WAITFORONE)` and sleeps in the kernel until a datagram is queued, then takes
//! everything queued up to the batch in the same call: one system call per batch and no
//! readiness polling. `shutdown(SHUT_RD)` wakes it for shutdown.

use std::sync::Arc;

use socket2::Socket;

use super::super::slots::ReceiverEnd;
use super::super::worker::Worker;
use super::super::{EngineConfig, Shared};
use super::mio::recv_batch;
use super::{Capabilities, ReceiveBackend, Started, start_blocking_thread};
use crate::Error;
use crate::sys::{self, RecvBatch, Wait};

/// See the [module documentation](self).
pub(crate) struct Recvmmsg;

impl ReceiveBackend for Recvmmsg {
    fn name(&self) -> &'static str {
        "recvmmsg"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::SOCKET
    }
    fn start(
        &self,
        cfg: &EngineConfig,
        shared: Arc<Shared>,
        sockets: Vec<Socket>,
        ends: Vec<ReceiverEnd>,
    ) -> Result<Started, Error> {
        start_blocking_thread(cfg, shared, sockets, ends, cfg.batch, run)
    }
}

/// The loop of the backends that block in the kernel (`recvmmsg` with `batch`, `blocking`
/// with 1). A consumer wake-up deferred by [`Coalesce`](crate::engine::Coalesce) is kept by
/// waiting for the socket with `ppoll` until its deadline before blocking again.
pub(super) fn run(mut worker: Worker, socket: Socket, batch: usize) {
    let mut msgs = RecvBatch::new(batch);
    let mut wake_by: Option<u64> = None;
    // Once stopping, what is queued is still taken, but a sender that never pauses cannot
    // keep the thread alive.
    let mut after_stop = 0;
    while after_stop < 4096 {
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
