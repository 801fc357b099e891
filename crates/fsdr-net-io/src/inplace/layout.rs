//! Where the iovecs of one receive call point: each datagram position's areas, and the
//! datagrams the call brought (types shared by `receiver.rs`, `scatter.rs`, `ahead.rs`,
//! `probe.rs` and `xdp.rs`).

use crate::sys::RecvMeta;

/// The body area set for one datagram position of a call (position `k`'s head area is the
/// `k`-th of `heads`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    /// Byte offset of the body area in the buffer the call lays out in (the current one, or
    /// with datagrams placed ahead of a gap the last one taken), and its length.
    pub(super) at: usize,
    pub(super) body: usize,
    /// Byte offset of the room its items take: the body area lies at its end (the same
    /// offset, where no conversion makes items longer than their wire bytes).
    pub(super) items_at: usize,
}

/// Where one iovec of an entry points.
#[derive(Debug, Clone, Copy)]
pub(super) enum Area {
    /// The head area of a datagram position.
    Head(usize),
    /// The current buffer, from this byte offset.
    Body(usize),
    /// The spill area of an entry.
    Spill(usize),
}

/// One iovec of an entry.
#[derive(Debug, Clone, Copy)]
pub(super) struct Part {
    pub(super) area: Area,
    pub(super) len: usize,
}

/// One datagram a call brought: a whole entry, or one datagram of a coalesced receive.
#[derive(Debug, Clone, Copy)]
pub(super) struct Unit {
    /// Its entry, and where in the entry's bytes it starts.
    pub(super) entry: usize,
    pub(super) offset: usize,
    /// Its own length and flags (for a coalesced receive's datagram, the receive's
    /// source and control messages).
    pub(super) meta: RecvMeta,
    /// The position (index in `slots`) it landed in exactly, if it did.
    pub(super) place: Option<usize>,
}

/// The datagram that showed a gap too long for one buffer (`ahead.rs`, `cover_ahead`): it is
/// copied, and the datagrams after it land in place behind it. Known by its arrival and
/// number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Covered {
    /// Its stream position, had its gap come out as assumed.
    pub(super) at: u64,
    pub(super) arrival_ns: u64,
    pub(super) seq: Option<u64>,
}

/// Where a data frame stands in its stream, read from its header before its payload is
/// written (with AF_XDP, `xdp.rs`; with `recvmmsg`, peeked, `probe.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StreamMark {
    /// VRT stream ID, CHDR destination endpoint.
    pub(super) stream: Option<u32>,
    /// Its sequence counter, in the format's sequence space.
    pub(super) counter: u64,
}

/// The socket path's look into the queue before a receive, after gaps (`probe.rs`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Probe {
    /// Datagrams still to be read with a look first: set by a gap, counted down by reads.
    pub(super) left: u64,
    /// Where the last datagram read of the stream stood (in arrival order).
    pub(super) last: Option<StreamMark>,
    /// Datagrams the last receive brought: the likely depth of the queue at the next.
    pub(super) depth: usize,
    /// A look failed on this socket: no more looks.
    pub(super) off: bool,
}
