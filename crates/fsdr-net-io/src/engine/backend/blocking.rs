//! The `blocking` backend: one thread, one blocking receive per datagram (the `recvmmsg`
//! loop with a batch of 1), woken for shutdown by `shutdown(SHUT_RD)`. It exists to show what
//! batching buys.

use std::sync::Arc;

use socket2::Socket;

use super::super::receive::blocking_loop;
use super::super::slots::ReceiverEnd;
use super::super::{EngineConfig, Shared};
use super::{Capabilities, ReceiveBackend, Started, start_blocking_thread};
use crate::Error;

/// See the [module documentation](self).
pub(crate) struct Blocking;

impl ReceiveBackend for Blocking {
    fn name(&self) -> &'static str {
        "blocking"
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
        // The bare loop with one datagram per call.
        start_blocking_thread(cfg, shared, sockets, ends, 1, blocking_loop)
    }
}
