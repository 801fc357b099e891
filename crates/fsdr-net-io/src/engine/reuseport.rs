//! The `reuseport` backend: N receive threads, each with its own SO_REUSEPORT socket bound to
//! the same address and its own edge-triggered `mio::Poll` drained with `recvmmsg`.
//!
//! The kernel picks the socket by hashing the 4-tuple, so one sender's flow lands on one
//! socket: this backend spreads *many* senders or streams over cores. With
//! [`ReuseportSpread`](super::ReuseportSpread) a classic-BPF program spreads even one flow
//! (randomly or by CPU); the consumer's reorder stage then restores stream order from the
//! sequence numbers within its window. On a machine with fewer free cores than threads it
//! cannot help: the threads only share the cores the consumer also needs.

use std::os::fd::AsRawFd;
use std::sync::Arc;

use socket2::Socket;

use super::{EngineConfig, EngineError, Shared, Started, mio_backend};
use crate::sys;

pub(super) fn start(
    cfg: &EngineConfig,
    shared: Arc<Shared>,
    sockets: Vec<Socket>,
) -> Result<Started, EngineError> {
    if let Some(spread) = cfg.reuseport_spread {
        // The program belongs to the group; attaching it through any member is enough.
        sys::attach_reuseport_cbpf(sockets[0].as_raw_fd(), spread, sockets.len() as u32).map_err(
            |e| EngineError::Unsupported {
                backend: cfg.backend,
                reason: format!("SO_ATTACH_REUSEPORT_CBPF: {e}"),
            },
        )?;
    }
    let mut started = Started {
        threads: Vec::new(),
        stoppers: Vec::new(),
    };
    for (index, socket) in sockets.into_iter().enumerate() {
        match mio_backend::spawn_thread(index, cfg, shared.clone(), socket) {
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
