//! Receive backends: one module each, behind the [`ReceiveBackend`] trait, and the one table
//! (`backends!` below) that names them. Adding a backend touches its own module and one line
//! of that table; [`Backend::ALL`] (every CLI, the xtask's receiver list) follows.

mod blocking;
mod gro;
mod mio;
#[cfg(feature = "uring")]
mod multishot;
mod recvmmsg;
mod reuseport;
#[cfg(feature = "uring")]
mod uring;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::thread::JoinHandle;

use socket2::Socket;

use super::Shared;
use super::config::EngineConfig;
use super::slots::ReceiverEnd;
use crate::Error;
use crate::socket::{OpenedSocket, open_socket};

pub(crate) use gro::{GRO_MAX_BYTES, MAX_SEGMENTS as GRO_MAX_SEGMENTS};
pub(crate) use mio::Reader;

/// What a backend can deliver besides the datagrams themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Kernel receive timestamps (`SO_TIMESTAMPNS`) reach [`Arrival`](crate::Arrival); without
    /// them arrival times are the receive thread's CLOCK_MONOTONIC.
    pub kernel_timestamps: bool,
    /// UDP GRO receives are split into their datagrams.
    pub gro: bool,
    /// Needs io_uring (and this build's `uring` feature).
    pub io_uring: bool,
    /// May run more than one receive thread.
    pub multi_thread: bool,
}

impl Capabilities {
    /// A receive thread on a plain socket: kernel timestamps and per-datagram drop counts
    /// from the control messages, one thread, no io_uring, no GRO.
    pub const SOCKET: Capabilities = Capabilities {
        kernel_timestamps: true,
        gro: false,
        io_uring: false,
        multi_thread: false,
    };
}

/// Wakes a receive thread so that it sees the stop flag.
pub(crate) type Stopper = Box<dyn Fn() + Send + Sync>;

/// What a backend returns when it has started its threads.
pub(crate) struct Started {
    pub(crate) threads: Vec<JoinHandle<()>>,
    pub(crate) stoppers: Vec<Stopper>,
}

impl Started {
    pub(crate) fn new() -> Self {
        Started {
            threads: Vec::new(),
            stoppers: Vec::new(),
        }
    }

    /// Stops and joins the threads of a start that failed half-way.
    pub(crate) fn abort(self, shared: &Shared) {
        shared
            .stop
            .store(true, std::sync::atomic::Ordering::Release);
        for s in &self.stoppers {
            s();
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// One receive backend: how many threads and sockets, what a slot needs, and the receive
/// loop itself.
pub(crate) trait ReceiveBackend: Sync {
    /// The name on command lines.
    fn name(&self) -> &'static str;
    /// What it delivers.
    fn capabilities(&self) -> Capabilities;
    /// Receive threads (and sockets) this configuration starts.
    fn threads(&self, _cfg: &EngineConfig) -> usize {
        1
    }
    /// Extra bytes a slot needs beyond the largest datagram.
    fn slot_overhead(&self) -> usize {
        0
    }
    /// Checks the settings only this backend reads.
    fn validate(&self, _cfg: &EngineConfig) -> Result<(), Error> {
        Ok(())
    }
    /// Opens the socket(s): one per thread, a `SO_REUSEPORT` group when there are several.
    fn open(&self, cfg: &EngineConfig) -> Result<Vec<OpenedSocket>, Error> {
        let n = self.threads(cfg);
        let sock_err = |addr, source| Error::Socket { addr, source };
        let first = open_socket(&cfg.socket, n > 1).map_err(|e| sock_err(cfg.socket.bind, e))?;
        // The other sockets of a SO_REUSEPORT group bind to the port the first one got.
        let mut more = cfg.socket.clone();
        more.bind.set_port(first.local_addr.port());
        let mut all = vec![first];
        for _ in 1..n {
            all.push(open_socket(&more, true).map_err(|e| sock_err(more.bind, e))?);
        }
        Ok(all)
    }
    /// Starts the receive thread(s), one per socket and ring end.
    fn start(
        &self,
        cfg: &EngineConfig,
        shared: Arc<Shared>,
        sockets: Vec<Socket>,
        ends: Vec<ReceiverEnd>,
    ) -> Result<Started, Error>;
}

/// The one socket and ring end of a single-thread backend.
pub(crate) fn single(
    mut sockets: Vec<Socket>,
    mut ends: Vec<ReceiverEnd>,
) -> (Socket, ReceiverEnd) {
    (sockets.swap_remove(0), ends.swap_remove(0))
}

/// Starts the one receive thread of a backend that blocks in the kernel (`blocking`,
/// `recvmmsg`): the socket goes to blocking mode, and `shutdown(SHUT_RD)` wakes the thread for
/// the stop.
pub(crate) fn start_blocking_thread(
    cfg: &EngineConfig,
    shared: Arc<Shared>,
    sockets: Vec<Socket>,
    ends: Vec<ReceiverEnd>,
    batch: usize,
    run: fn(super::worker::Worker, Socket, usize),
) -> Result<Started, Error> {
    let worker_cfg = cfg.clone();
    let (socket, end) = single(sockets, ends);
    let addr = cfg.socket.bind;
    socket
        .set_nonblocking(false)
        .map_err(|source| Error::Socket { addr, source })?;
    let stop_handle = socket.try_clone().map_err(Error::Spawn)?;
    let handle = super::worker::spawn_receive_thread(0, &cfg.threads, move || {
        run(
            super::worker::Worker::new(0, shared, end, &worker_cfg, batch),
            socket,
            batch,
        )
    })?;
    let mut started = Started::new();
    started.threads.push(handle);
    started.stoppers.push(Box::new(move || {
        crate::sys::shutdown_read(std::os::fd::AsFd::as_fd(&stop_handle))
    }));
    Ok(started)
}

/// A backend this build leaves out (the `uring` feature is off).
#[cfg_attr(feature = "uring", allow(dead_code))]
struct Unavailable(&'static str);

impl ReceiveBackend for Unavailable {
    fn name(&self) -> &'static str {
        self.0
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            kernel_timestamps: false,
            gro: false,
            io_uring: true,
            multi_thread: false,
        }
    }
    fn validate(&self, cfg: &EngineConfig) -> Result<(), Error> {
        Err(Error::Unsupported {
            backend: cfg.backend,
            reason: "this build of fsdr-net-io has no `uring` feature".into(),
        })
    }
    fn start(
        &self,
        cfg: &EngineConfig,
        _: Arc<Shared>,
        _: Vec<Socket>,
        _: Vec<ReceiverEnd>,
    ) -> Result<Started, Error> {
        Err(self.validate(cfg).unwrap_err())
    }
}

/// The implementation of a table entry: the type itself, or [`Unavailable`] when its cargo
/// feature is off.
macro_rules! implementation {
    ($name:literal, $imp:path) => {
        &$imp
    };
    ($name:literal, $imp:path, $feature:literal) => {{
        #[cfg(feature = $feature)]
        let imp: &'static dyn ReceiveBackend = &$imp;
        #[cfg(not(feature = $feature))]
        let imp: &'static dyn ReceiveBackend = &Unavailable($name);
        imp
    }};
}

/// The registry: one line per backend (variant, name, implementation, cargo feature).
macro_rules! backends {
    ($( $(#[$attr:meta])* $variant:ident = $name:literal => $imp:path $(, feature $feature:literal)?; )*) => {
        /// Receive backends. See each one's documentation, and the README's table for when to
        /// pick which.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[non_exhaustive]
        pub enum Backend {
            $( $(#[$attr])* $variant, )*
        }

        impl Backend {
            /// Every backend of this build, in table order (io_uring ones only with the
            /// `uring` feature).
            pub const ALL: &'static [Backend] = &[
                $( $(#[cfg(feature = $feature)])? Backend::$variant, )*
            ];

            /// Every backend name, including those this build leaves out.
            const EVERY: &'static [Backend] = &[ $( Backend::$variant, )* ];

            pub(crate) fn imp(self) -> &'static dyn ReceiveBackend {
                match self {
                    $( Backend::$variant => implementation!($name, $imp $(, $feature)?), )*
                }
            }
        }
    };
}

backends! {
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
}

impl Backend {
    /// Name as used on command lines.
    pub fn name(&self) -> &'static str {
        self.imp().name()
    }

    /// What this backend delivers besides datagrams.
    pub fn capabilities(&self) -> Capabilities {
        self.imp().capabilities()
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error for an unknown backend name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend {0:?} (expected one of {names})", names = Backend::EVERY.iter().map(|b| b.name()).collect::<Vec<_>>().join(", "))]
pub struct UnknownBackend(pub String);

impl FromStr for Backend {
    type Err = UnknownBackend;
    fn from_str(s: &str) -> Result<Self, UnknownBackend> {
        Backend::EVERY
            .iter()
            .copied()
            .find(|b| b.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_parse_back() {
        for b in Backend::EVERY {
            assert_eq!(b.name().parse::<Backend>().unwrap(), *b);
            assert_eq!(
                Backend::EVERY
                    .iter()
                    .filter(|o| o.name() == b.name())
                    .count(),
                1
            );
        }
        assert!(
            "bogus"
                .parse::<Backend>()
                .unwrap_err()
                .to_string()
                .contains("mio")
        );
        assert_eq!(Backend::default(), Backend::Mio);
    }
}
