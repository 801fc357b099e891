//! The `reuseport` backend: N receive threads, each with its own SO_REUSEPORT socket bound to
//! the same address and its own edge-triggered `mio::Poll` drained with `recvmmsg`.
//!
//! The kernel picks the socket by hashing the 4-tuple, so one sender's flow lands on one
//! socket: this backend spreads *many* senders or streams over cores. With
//! [`ReuseportSpread`](crate::sys::ReuseportSpread) a classic-BPF program spreads even one
//! flow (randomly or by CPU); the consumer's reorder stage then restores stream order from
//! the sequence numbers within its window. On a machine with fewer free cores than threads it
//! cannot help: the threads only share the cores the consumer also needs.

use std::sync::Arc;

use socket2::Socket;

use super::super::slots::ReceiverEnd;
use super::super::{EngineConfig, Shared};
use super::{Capabilities, ReceiveBackend, Started};
use crate::Error;
use crate::sys;

/// See the [module documentation](self).
pub(crate) struct Reuseport;

impl ReceiveBackend for Reuseport {
    fn name(&self) -> &'static str {
        "reuseport"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            multi_thread: true,
            gro: true,
            ..Capabilities::SOCKET
        }
    }
    fn threads(&self, cfg: &EngineConfig) -> usize {
        cfg.reuseport_threads
    }
    fn validate(&self, cfg: &EngineConfig) -> Result<(), Error> {
        if !(1..=64).contains(&cfg.reuseport_threads) {
            return Err(Error::config(format!(
                "reuseport threads {} outside 1..=64",
                cfg.reuseport_threads
            )));
        }
        Ok(())
    }
    fn start(
        &self,
        cfg: &EngineConfig,
        shared: Arc<Shared>,
        sockets: Vec<Socket>,
        ends: Vec<ReceiverEnd>,
    ) -> Result<Started, Error> {
        if let Some(spread) = cfg.reuseport_spread {
            // The program belongs to the group; attaching it through any member is enough.
            sys::attach_reuseport_cbpf(&sockets[0], spread, sockets.len() as u32).map_err(|e| {
                Error::Unsupported {
                    backend: cfg.backend,
                    reason: format!("SO_ATTACH_REUSEPORT_CBPF: {e}"),
                }
            })?;
        }
        // Then one receive thread per socket on the epoll loop the mio backend runs too.
        super::epoll::start_threads(cfg, shared, sockets, ends)
    }
}
