//! The one table of receive backends: variant, command-line name, implementation, cargo
//! feature. `config.rs` makes the [`Backend`](crate::Backend) enum of it and `mod.rs` the
//! dispatch to each implementation; this file imports nothing, so neither depends on the
//! other through it.

/// Calls `$then!` with the table.
macro_rules! backend_list {
    ($then:ident) => {
        $then! {
            /// One thread, the socket registered edge-triggered with `mio::Poll`, drained with
            /// `recvmmsg` batches.
            #[default]
            Mio = "mio" => mio::Mio;
            /// One thread doing one blocking `recvmsg` per datagram: the baseline that shows what
            /// batching buys.
            Blocking = "blocking" => blocking::Blocking;
            /// The bare loop: one thread blocked in `recvmmsg(MSG_WAITFORONE)`, woken for shutdown
            /// by `shutdown(SHUT_RD)`; no readiness polling at all.
            Recvmmsg = "recvmmsg" => recvmmsg::Recvmmsg;
            /// N threads, each with its own SO_REUSEPORT socket on the same address and its own
            /// `mio::Poll`; optionally a classic-BPF program spreads one flow over the sockets.
            Reuseport = "reuseport" => reuseport::Reuseport;
            /// io_uring through tokio-uring on a dedicated thread, with a configurable number of
            /// receives always in flight.
            Uring = "uring" => uring::Uring, feature "uring";
            /// io_uring multishot `recvmsg` with a provided-buffer ring made of the engine's slots.
            UringMultishot = "uring-multishot" => multishot::Multishot, feature "uring";
            /// AF_XDP: an XDP program steers the stream's UDP destination on one interface
            /// queue to a user-space ring (copy or zero-copy), the rest goes on to the kernel.
            Xdp = "xdp" => xdp::Xdp;
        }
    };
}
pub(crate) use backend_list;
