//! The `recvmmsg` backend: the bare receive loop. One thread on a blocking socket calls
//! `recvmmsg(MSG_WAITFORONE)` and sleeps in the kernel until a datagram is queued, then takes
//! everything queued up to the batch in the same call: one system call per batch and no
//! readiness polling. `shutdown(SHUT_RD)` wakes it for shutdown.

use std::sync::Arc;

use socket2::Socket;

use super::super::receive::blocking_loop;
use super::super::slots::ReceiverEnd;
use super::super::{EngineConfig, Shared};
use super::{Capabilities, ReceiveBackend, Started, start_blocking_thread};
use crate::Error;

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
        start_blocking_thread(cfg, shared, sockets, ends, cfg.batch, blocking_loop)
    }
}
