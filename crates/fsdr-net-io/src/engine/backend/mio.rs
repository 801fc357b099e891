//! The `mio` backend: one receive thread, the socket registered edge-triggered with
//! `mio::Poll`, drained with `recvmmsg` batches (the loop is [`epoll`](super::epoll)'s, which
//! the `reuseport` backend runs once per socket).

use std::sync::Arc;

use socket2::Socket;

use super::super::slots::ReceiverEnd;
use super::super::{EngineConfig, Shared};
use super::{Capabilities, ReceiveBackend, Started};
use crate::Error;

/// See the [module documentation](self).
pub(crate) struct Mio;

impl ReceiveBackend for Mio {
    fn name(&self) -> &'static str {
        "mio"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            gro: true,
            ..Capabilities::SOCKET
        }
    }
    fn start(
        &self,
        cfg: &EngineConfig,
        shared: Arc<Shared>,
        sockets: Vec<Socket>,
        ends: Vec<ReceiverEnd>,
    ) -> Result<Started, Error> {
        super::epoll::start_threads(cfg, shared, sockets, ends)
    }
}
