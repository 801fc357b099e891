//! [`Error`]: the one error type of the crate's public API.

use std::io;
use std::net::SocketAddr;

use crate::engine::Backend;

/// Why an engine, a sender or the emulator could not start or go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The socket could not be opened, configured or bound.
    #[error("socket {addr}: {source}")]
    Socket {
        /// Bind (or destination) address.
        addr: SocketAddr,
        /// Cause.
        source: io::Error,
    },
    /// An address could not be resolved, or resolved to nothing.
    #[error("address {addr:?}: {reason}")]
    Address {
        /// The address as given.
        addr: String,
        /// What went wrong.
        reason: String,
    },
    /// Pinning a receive thread failed.
    #[error("cannot pin receive thread to CPU {cpu}: {source}")]
    Pin {
        /// Requested CPU.
        cpu: usize,
        /// Cause.
        source: io::Error,
    },
    /// SCHED_FIFO was refused.
    #[error(
        "cannot give receive thread SCHED_FIFO priority {priority}: {source} \
         (needs root, CAP_SYS_NICE, or an rtprio limit in /etc/security/limits.conf)"
    )]
    Priority {
        /// Requested priority.
        priority: i32,
        /// Cause.
        source: io::Error,
    },
    /// The CPU wake-up latency request was refused.
    #[error(
        "cannot request a CPU wake-up latency of {max:?} through /dev/cpu_dma_latency: {source} (needs root)"
    )]
    CpuLatency {
        /// Requested latency.
        max: std::time::Duration,
        /// Cause.
        source: io::Error,
    },
    /// The configuration is inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The kernel (or this build) lacks a feature the backend needs.
    #[error("backend {backend} is not available here: {reason}")]
    Unsupported {
        /// The backend.
        backend: Backend,
        /// What is missing.
        reason: String,
    },
    /// A thread could not be started.
    #[error("cannot start a thread: {0}")]
    Spawn(io::Error),
    /// Any other I/O error.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl Error {
    /// Shorthand for [`Error::Config`].
    pub fn config(msg: impl Into<String>) -> Self {
        Error::Config(msg.into())
    }
}

/// Resolves `addr` once (host names included) to its first address.
///
/// ```
/// let a = fsdr_net_io::resolve("localhost:49000").unwrap();
/// assert_eq!(a.port(), 49000);
/// assert!(a.ip().is_loopback());
/// ```
pub fn resolve(addr: impl std::net::ToSocketAddrs + std::fmt::Debug) -> Result<SocketAddr, Error> {
    let shown = format!("{addr:?}");
    let mut all = addr.to_socket_addrs().map_err(|e| Error::Address {
        addr: shown.clone(),
        reason: e.to_string(),
    })?;
    all.next().ok_or(Error::Address {
        addr: shown,
        reason: "resolves to no address".into(),
    })
}
