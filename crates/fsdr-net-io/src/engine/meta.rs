//! The metadata a receive thread records with each datagram: [`DatagramMeta`] (length,
//! sender, [`Arrival`] time, parsed header), the [`Clocks`] it is read against, and the
//! [`StreamKey`] that tells streams apart. The slots store it; [`Datagram`](super::Datagram)
//! lends it.

use std::net::SocketAddr;

use crate::format::PacketInfo;
use crate::sys;

/// CLOCK_MONOTONIC and CLOCK_REALTIME read together, once per receive batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clocks {
    /// CLOCK_MONOTONIC in ns.
    pub monotonic_ns: u64,
    /// CLOCK_REALTIME in ns since the Unix epoch.
    pub realtime_ns: u64,
}

impl Clocks {
    /// Both clocks, now.
    pub fn now() -> Self {
        Clocks {
            monotonic_ns: sys::monotonic_ns(),
            realtime_ns: sys::realtime_ns(),
        }
    }
}

/// When a datagram arrived, on both clocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Arrival {
    /// CLOCK_MONOTONIC ns (LTTng's clock): the kernel timestamp converted with the clock
    /// offset read in the same batch when the socket has kernel timestamps, otherwise the
    /// time the receive thread got the datagram.
    pub monotonic_ns: u64,
    /// The kernel's receive timestamp (`SO_TIMESTAMPNS`, CLOCK_REALTIME ns since the epoch),
    /// when the socket has them.
    pub kernel_realtime_ns: Option<u64>,
}

impl Arrival {
    /// The arrival of a datagram received in a batch whose clocks were read at `at`, with the
    /// kernel's timestamp when there is one. The offset between the clocks is taken from `at`
    /// every time, so a step of the wall clock (NTP, PTP) never shifts later arrivals.
    pub fn new(kernel_realtime_ns: Option<u64>, at: Clocks) -> Self {
        let monotonic_ns = match kernel_realtime_ns {
            // How long before the clocks were read the kernel stamped it (never negative).
            Some(k) => at
                .monotonic_ns
                .saturating_sub(at.realtime_ns.saturating_sub(k)),
            None => at.monotonic_ns,
        };
        Arrival {
            monotonic_ns,
            kernel_realtime_ns,
        }
    }
}

/// Metadata of a received datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramMeta {
    /// Datagram length in bytes.
    pub len: usize,
    /// Where the datagram starts in its slot (io_uring multishot puts a header first).
    pub offset: usize,
    /// Sender.
    pub source: SocketAddr,
    /// Arrival time.
    pub arrival: Arrival,
    /// Index of the receive thread that got it.
    pub thread: u16,
    /// What the format parser found.
    pub info: PacketInfo,
}

impl Default for DatagramMeta {
    fn default() -> Self {
        Self {
            len: 0,
            offset: 0,
            source: SocketAddr::from(([0, 0, 0, 0], 0)),
            arrival: Arrival::default(),
            thread: 0,
            info: PacketInfo::data(0..0),
        }
    }
}

/// Identifies one stream among the datagrams of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamKey {
    /// Sender.
    pub source: SocketAddr,
    /// Format's stream identifier (VRT stream ID, CHDR destination endpoint).
    pub stream_id: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offset is read per batch: after the wall clock steps by an hour, a kernel stamp
    /// taken 5 µs before the batch still maps to 5 µs before the batch's monotonic time.
    #[test]
    fn arrival_follows_a_wall_clock_step() {
        let before = Clocks {
            monotonic_ns: 1_000_000,
            realtime_ns: 1_700_000_000_000_000_000,
        };
        let a = Arrival::new(Some(before.realtime_ns - 5_000), before);
        assert_eq!(a.monotonic_ns, 1_000_000 - 5_000);
        let stepped = Clocks {
            monotonic_ns: 2_000_000,
            realtime_ns: before.realtime_ns + 3_600 * 1_000_000_000,
        };
        let b = Arrival::new(Some(stepped.realtime_ns - 5_000), stepped);
        assert_eq!(b.monotonic_ns, 2_000_000 - 5_000);
        // A stamp from the future (clock stepped back between stamp and read) is clamped.
        let c = Arrival::new(Some(stepped.realtime_ns + 10), stepped);
        assert_eq!(c.monotonic_ns, stepped.monotonic_ns);
        assert_eq!(
            Arrival::new(None, stepped).monotonic_ns,
            stepped.monotonic_ns
        );
    }
}
