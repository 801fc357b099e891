//! The platform layer: every syscall of the crate, one module per concern, each with only the
//! `unsafe` it needs. Calls that `nix` or `socket2` already wrap safely go through them; raw
//! `libc` remains only for the batched calls (`recvmmsg`, `sendmmsg`), `SO_MEMINFO`, `SO_PEEK_OFF` and
//! `pthread_setschedparam`.
//!
//! | module | holds |
//! |---|---|
//! | [`recv`] | [`RecvBatch`] (`recvmmsg`/`recvmsg`), `SO_MEMINFO` drops, `SHUT_RD` |
//! | [`peek`] | one queued datagram's head by its place in the queue (`SO_PEEK_OFF`) |
//! | [`send`] | [`SendBatch`] (`sendmmsg`, UDP GSO), GSO detection |
//! | [`cmsg`] | the bounds-checked control-message iterator and writer |
//! | [`sockaddr`] | socket addresses from kernel bytes |
//! | [`sched`] | affinity, SCHED_FIFO, timer slack |
//! | [`bpf`] | the `SO_REUSEPORT` programs: spreading one flow, steering streams by ID |
//! | [`ifaddrs`] | interface addresses |
//! | [`xsk`] | AF_XDP sockets: UMEM, fill and RX rings, bind, statistics |
//! | [`ebpf`] | `bpf()`: the XSK map, the XDP program that steers one UDP destination, its link |
//!
//! Metadata of a received datagram travels in [`RecvMeta`].

pub mod bpf;
pub mod cmsg;
pub mod ebpf;
pub mod ifaddrs;
pub mod peek;
pub mod poll;
pub mod recv;
pub mod sched;
pub mod send;
pub mod sockaddr;
pub mod xsk;

use std::net::SocketAddr;

pub use bpf::{ReuseportSpread, StreamIdField, attach_reuseport_by_stream, attach_reuseport_cbpf};
pub use cmsg::parse_control;
pub use ifaddrs::{InterfaceAddr, interface_addrs};
pub use poll::{readable_among, readable_within};
pub use recv::{CONTROL_SPACE, RecvBatch, Wait, shutdown_read, socket_drops};
pub use sched::{pin_current_thread, set_fifo_priority, set_timer_slack_ns};
pub use send::{GSO_MAX_BYTES, GSO_MAX_SEGMENTS, SendBatch, udp_gso_supported};
pub use sockaddr::sockaddr_from_bytes;

/// What the kernel told us about one received datagram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes written into the buffer(s) (at most their size).
    pub len: usize,
    /// The datagram was larger than the buffer (`MSG_TRUNC`).
    pub truncated: bool,
    /// Sender address.
    pub source: Option<SocketAddr>,
    /// The socket's cumulative drop counter (`SO_RXQ_OVFL`), when the kernel sent it (only to
    /// a socket that asked for it: fsdr-net's own read the counter with [`socket_drops`]).
    pub kernel_drops: Option<u32>,
    /// Kernel receive timestamp (`SO_TIMESTAMPNS`, CLOCK_REALTIME) in ns since the epoch.
    pub timestamp_ns: Option<u64>,
    /// UDP GRO: the buffer holds several datagrams of this many bytes (the last may be
    /// shorter).
    pub gro_segment: Option<u16>,
    /// The control messages were cut short (`MSG_CTRUNC`) or one was malformed; whatever
    /// could be read was read.
    pub control_malformed: bool,
}

impl RecvMeta {
    /// The datagrams this receive holds, in order, each as its byte offset in the buffer and
    /// its own metadata: one (itself), or each of a UDP GRO coalesced receive, `gro_segment`
    /// bytes long (the last may be shorter), with `gro_segment` cleared and `truncated` only
    /// on the last. Every receive holds at least one.
    ///
    /// ```
    /// use fsdr_net_io::sys::RecvMeta;
    ///
    /// let coalesced = RecvMeta {
    ///     len: 3000,
    ///     gro_segment: Some(1472),
    ///     truncated: true,
    ///     ..RecvMeta::default()
    /// };
    /// let parts: Vec<_> = coalesced
    ///     .datagrams()
    ///     .map(|(at, d)| (at, d.len, d.truncated, d.gro_segment))
    ///     .collect();
    /// assert_eq!(
    ///     parts,
    ///     [(0, 1472, false, None), (1472, 1472, false, None), (2944, 56, true, None)]
    /// );
    /// let alone = RecvMeta { len: 100, ..RecvMeta::default() };
    /// assert_eq!(alone.datagrams().collect::<Vec<_>>(), [(0, alone)]);
    /// ```
    pub fn datagrams(&self) -> impl ExactSizeIterator<Item = (usize, RecvMeta)> + use<> {
        let meta = *self;
        let step = meta
            .gro_segment
            .map(usize::from)
            .filter(|&s| s > 0)
            .unwrap_or(meta.len.max(1));
        let count = meta.len.div_ceil(step).max(1);
        (0..count).map(move |j| {
            let at = j * step;
            let last = j + 1 == count;
            let d = RecvMeta {
                len: meta.len.saturating_sub(at).min(step),
                truncated: last && meta.truncated,
                gro_segment: None,
                ..meta
            };
            (at, d)
        })
    }
}

fn clock_ns(clock: nix::time::ClockId) -> u64 {
    match nix::time::clock_gettime(clock) {
        Ok(ts) => ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64,
        Err(_) => 0,
    }
}

/// `now + wait`, or a century from now where that would overflow: a caller's wait that long
/// (`Duration::MAX`) is a wait for ever, not a panic.
pub(crate) fn deadline(now: std::time::Instant, wait: std::time::Duration) -> std::time::Instant {
    now.checked_add(wait)
        .unwrap_or_else(|| now + std::time::Duration::from_secs(100 * 365 * 86_400))
}

/// Monotonic clock in nanoseconds (CLOCK_MONOTONIC, LTTng's clock).
pub fn monotonic_ns() -> u64 {
    clock_ns(nix::time::ClockId::CLOCK_MONOTONIC)
}

/// Wall clock in nanoseconds since the Unix epoch (CLOCK_REALTIME, the kernel timestamps'
/// clock).
pub fn realtime_ns() -> u64 {
    clock_ns(nix::time::ClockId::CLOCK_REALTIME)
}
