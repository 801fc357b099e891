//! Receive backends: one module each, behind the [`ReceiveBackend`] trait, and the one table
//! that names them (`list.rs`). Adding a backend touches its own module and one line of that
//! table; [`Backend`] and [`Backend::ALL`] (every CLI, the xtask's receiver list) follow.

mod blocking;
mod epoll;
mod gro;
pub(crate) mod list;
mod mio;
#[cfg(feature = "uring")]
mod multishot;
mod recvmmsg;
mod reuseport;
#[cfg(feature = "uring")]
mod uring;
mod xdp;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::thread::JoinHandle;

use socket2::Socket;

use super::Shared;
pub use super::config::Backend;
use super::config::{Coalesce, EngineConfig};
use super::slots::ReceiverEnd;
use crate::Error;
use crate::socket::{OpenedSocket, open_socket};

pub(crate) use epoll::Reader;
pub(crate) use gro::{GRO_MAX_BYTES, MAX_SEGMENTS as GRO_MAX_SEGMENTS};
pub(crate) use xdp::XdpRx;

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
    /// Receives on loopback; false: needs a real interface with XDP (`xdp`, which tests run
    /// over a veth pair between two namespaces, `netns::TestLink`).
    pub loopback: bool,
}

impl Capabilities {
    /// A receive thread on a plain socket: kernel timestamps and per-datagram drop counts
    /// from the control messages, one thread, no io_uring, no GRO.
    pub const SOCKET: Capabilities = Capabilities {
        kernel_timestamps: true,
        gro: false,
        io_uring: false,
        multi_thread: false,
        loopback: true,
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
            loopback: true,
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

// The dispatch from each backend to its implementation, from the one table.
macro_rules! dispatch {
    ($( $(#[$attr:meta])* $variant:ident = $name:literal => $imp:path $(, feature $feature:literal)?; )*) => {
        impl Backend {
            pub(crate) fn imp(self) -> &'static dyn ReceiveBackend {
                match self {
                    $( Backend::$variant => implementation!($name, $imp $(, $feature)?), )*
                }
            }
        }
    };
}
list::backend_list!(dispatch);

/// The longest a timing setting of an [`EngineConfig`] may be (coalesce time, reorder
/// timeout, latency budget, poll interval): a day. Timings are kept in nanoseconds, and
/// nothing a receiver waits for takes longer.
pub const MAX_SETTING_DURATION: std::time::Duration = std::time::Duration::from_secs(86_400);

/// What a configuration asks of its backend.
impl EngineConfig {
    /// Receive threads this configuration starts.
    pub fn thread_count(&self) -> usize {
        self.backend.imp().threads(self)
    }

    /// Bytes each slot of the pool takes: the largest datagram plus what the backend needs.
    pub(crate) fn pool_slot_size(&self) -> usize {
        self.slot_size + self.backend.imp().slot_overhead()
    }

    /// Checks the settings every backend shares, then the backend's own — what
    /// [`Engine::start`](crate::Engine::start) checks before it opens anything, for callers
    /// that size buffers from the configuration first.
    ///
    /// ```
    /// use fsdr_net_io::EngineConfig;
    ///
    /// let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    /// assert!(cfg.validate().is_ok());
    /// cfg.slot_size = usize::MAX;
    /// assert!(cfg.validate().unwrap_err().to_string().contains("slot size"));
    /// ```
    pub fn validate(&self) -> Result<(), Error> {
        if self.batch == 0 || self.batch > 1024 {
            return Err(Error::config(format!(
                "batch {} outside 1..=1024",
                self.batch
            )));
        }
        if self.slot_size < 16 || self.slot_size > 65_536 {
            return Err(Error::config(format!(
                "slot size {} outside 16..=65536",
                self.slot_size
            )));
        }
        if self.slots < self.batch {
            return Err(Error::config(format!(
                "{} slots cannot hold a batch of {}",
                self.slots, self.batch
            )));
        }
        if let Coalesce::Fixed { frames: 0, .. } | Coalesce::Adaptive { frames: 0, .. } =
            self.coalesce
        {
            return Err(Error::config("coalesce frames must be at least 1"));
        }
        if self.latency_budget.is_some_and(|b| b.is_zero()) {
            return Err(Error::config("a latency budget of 0 would drop everything"));
        }
        let coalesce = match self.coalesce {
            Coalesce::Off => None,
            Coalesce::Fixed { time, .. } | Coalesce::Adaptive { time, .. } => Some(time),
        };
        for (name, d) in [
            ("latency budget", self.latency_budget),
            ("coalesce time", coalesce),
            ("reorder timeout", Some(self.reorder_timeout)),
            ("poll interval", self.poll_interval),
        ] {
            if let Some(d) = d.filter(|d| *d > MAX_SETTING_DURATION) {
                return Err(Error::config(format!(
                    "{name} {d:?} is over {} hours, the longest any timing setting may be",
                    MAX_SETTING_DURATION.as_secs() / 3600
                )));
            }
        }
        if self.reorder_window >= self.slots {
            return Err(Error::config(format!(
                "reorder window {} needs more than {} slots",
                self.reorder_window, self.slots
            )));
        }
        if self.socket.gro && !self.backend.capabilities().gro {
            return Err(Error::Unsupported {
                backend: self.backend,
                reason: "UDP GRO is split into datagrams by the mio and reuseport backends and by \
                         in-place receivers only"
                    .into(),
            });
        }
        if self.socket.gro && self.slots < 2 * GRO_MAX_SEGMENTS {
            return Err(Error::config(format!(
                "UDP GRO needs at least {} slots ({} datagrams per coalesced receive, twice), not {}",
                2 * GRO_MAX_SEGMENTS,
                GRO_MAX_SEGMENTS,
                self.slots
            )));
        }
        self.backend.imp().validate(self)
    }
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
