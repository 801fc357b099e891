//! The send side: [`Sender`] sends batches with `sendmmsg` (and UDP GSO where the kernel has
//! it); [`Pacer`] holds a byte rate without sleeping per datagram; [`Framer`] writes any
//! format's headers; [`StreamSender`] is the built-in paced stream generator that examples,
//! tests and the emulator use; and [`UringSender`] sends through io_uring on its own thread
//! (feature `uring`).
//!
//! ```
//! use fsdr_net_io::send::{StreamSender, SenderConfig};
//! use fsdr_net_io::Format;
//!
//! let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
//! let report = StreamSender::new(SenderConfig::new(rx.local_addr().unwrap()), Format::Seq64)
//!     .datagram_size(100)
//!     .count(3)
//!     .run()
//!     .unwrap();
//! assert_eq!(report.datagrams, 3);
//! let mut buf = [0u8; 200];
//! let (n, _) = rx.recv_from(&mut buf).unwrap();
//! assert_eq!((n, buf[0]), (100, 1)); // GNU Radio's first sequence number is 1
//! ```

mod context;
mod framer;
mod pacer;
mod stream;
#[cfg(feature = "uring")]
mod uring;

use std::io;
use std::net::{IpAddr, SocketAddr};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

pub use context::{ContextSender, SETTING_TAGS};
pub use framer::Framer;
pub use pacer::{Pacer, SampleClock};
pub use stream::{SendReport, StreamSender};
#[cfg(feature = "uring")]
pub use uring::{Submit, UringSender};

use crate::Error;
use crate::sys::{self, GSO_MAX_BYTES, GSO_MAX_SEGMENTS, SendBatch};

/// Opens, binds, configures (send buffer, multicast) and connects a sending socket as `cfg`
/// says; every sender builds its socket here.
pub(crate) fn open_send_socket(cfg: &SenderConfig) -> Result<Socket, Error> {
    let addr = cfg.dest;
    let sock_err = |source: io::Error| Error::Socket { addr, source };
    let socket = Socket::new(
        Domain::for_address(cfg.dest),
        Type::DGRAM,
        Some(Protocol::UDP),
    )
    .map_err(sock_err)?;
    socket
        .set_send_buffer_size(cfg.send_buffer)
        .map_err(sock_err)?;
    let bind = cfg.bind.unwrap_or_else(|| match cfg.dest {
        SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
    });
    socket.bind(&SockAddr::from(bind)).map_err(sock_err)?;
    if cfg.dest.ip().is_multicast() {
        match cfg.dest.ip() {
            IpAddr::V4(_) => {
                socket
                    .set_multicast_ttl_v4(cfg.multicast_ttl)
                    .map_err(sock_err)?;
                socket.set_multicast_loop_v4(true).map_err(sock_err)?;
                if let Some(IpAddr::V4(i)) = cfg.multicast_if {
                    socket.set_multicast_if_v4(&i).map_err(sock_err)?;
                }
            }
            IpAddr::V6(_) => {
                socket
                    .set_multicast_hops_v6(cfg.multicast_ttl)
                    .map_err(sock_err)?;
                socket.set_multicast_loop_v6(true).map_err(sock_err)?;
                if let Some(i) = cfg.multicast_if_v6 {
                    socket.set_multicast_if_v6(i).map_err(sock_err)?;
                }
            }
        }
    }
    socket
        .connect(&SockAddr::from(cfg.dest))
        .map_err(sock_err)?;
    Ok(socket)
}

/// Where and how to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SenderConfig {
    /// Destination (unicast or multicast, IPv4 or IPv6).
    pub dest: SocketAddr,
    /// Local address to bind; `None` binds the unspecified address of the destination's family.
    pub bind: Option<SocketAddr>,
    /// Use UDP GSO when the kernel has it.
    pub gso: bool,
    /// Messages per `sendmmsg` call (1..=1024, Linux's `UIO_MAXIOV`).
    pub batch: usize,
    /// Send buffer to request.
    pub send_buffer: usize,
    /// Multicast hop limit.
    pub multicast_ttl: u32,
    /// Multicast: IPv4 interface address or IPv6 interface index to send from.
    pub multicast_if: Option<IpAddr>,
    /// IPv6 multicast interface index.
    pub multicast_if_v6: Option<u32>,
    /// io_uring sender: send operations in flight at most (the ring's size).
    pub uring_depth: usize,
}

impl SenderConfig {
    /// Defaults for `dest`: GSO when available, batches of 32, 4 MiB send buffer.
    pub fn new(dest: SocketAddr) -> Self {
        Self {
            dest,
            bind: None,
            gso: true,
            batch: 32,
            send_buffer: 4 << 20,
            multicast_ttl: 1,
            multicast_if: None,
            multicast_if_v6: None,
            uring_depth: 256,
        }
    }
}

/// Counters of a [`Sender`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendStats {
    /// Datagrams sent.
    pub datagrams: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// Send syscalls made.
    pub calls: u64,
    /// Send errors (each error loses the datagrams of that call).
    pub errors: u64,
    /// Padding bytes added after payloads (VRT's 32-bit words).
    pub pad_bytes: u64,
    /// Datagrams the destination refused: the kernel's report (an ICMP "port unreachable")
    /// that an earlier datagram found nobody listening. Those were sent, and lost there.
    pub refused: u64,
    /// Items clipped at the wire format's full scale when encoded (a block that encodes,
    /// such as `fsdr_net::UdpSink`, counts them: `Encoder::encode_counting`).
    pub clipped: u64,
}

/// The largest UDP payload over IPv4: 65535 − 8 (UDP header) − 20 (IP header).
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// The most messages one `sendmmsg` call takes (Linux's `UIO_MAXIOV`).
pub const MAX_BATCH: usize = 1024;

/// A connected UDP sender with batched sends.
pub struct Sender {
    socket: Socket,
    batch: SendBatch,
    gso: bool,
    stats: SendStats,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("gso", &self.gso)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Sender {
    /// Opens, configures and connects the socket. A `batch` outside 1..=1024 is an error.
    pub fn new(cfg: &SenderConfig) -> Result<Self, Error> {
        if !(1..=MAX_BATCH).contains(&cfg.batch) {
            return Err(Error::config(format!(
                "send batch {} outside 1..={MAX_BATCH}",
                cfg.batch
            )));
        }
        Ok(Self {
            socket: open_send_socket(cfg)?,
            batch: SendBatch::new(cfg.batch),
            gso: cfg.gso && sys::udp_gso_supported(),
            stats: SendStats::default(),
        })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("no IP address"))
    }

    /// Whether sends use UDP GSO.
    pub fn gso(&self) -> bool {
        self.gso
    }

    /// Counters so far.
    pub fn stats(&self) -> SendStats {
        self.stats
    }

    /// Sends messages `0..n` of the batch, retrying partial sends; counts datagrams. On error
    /// returns how many messages had gone out before it.
    fn flush(
        &mut self,
        n: usize,
        datagrams: &[u64],
        bytes: &[u64],
    ) -> Result<(), (usize, io::Error)> {
        let mut done = 0;
        let mut refused_retry = true;
        while done < n {
            // SAFETY: the messages were set from buffers the caller still borrows.
            // Checked by: `send_segments_delivers_every_datagram_with_and_without_gso` under ASan.
            let r = unsafe { self.batch.send_from(&self.socket, done, n - done) };
            self.stats.calls += 1;
            match r {
                Ok(k) => {
                    for i in done..done + k {
                        self.stats.datagrams += datagrams[i];
                        self.stats.bytes += bytes[i];
                    }
                    done += k;
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && refused_retry => {
                    // An ICMP error from an earlier datagram; this call sent nothing.
                    self.stats.refused += 1;
                    refused_retry = false;
                }
                Err(e) => {
                    if e.kind() == io::ErrorKind::ConnectionRefused {
                        self.stats.refused += 1;
                    }
                    self.stats.errors += 1;
                    return Err((done, e));
                }
            }
        }
        Ok(())
    }

    /// Sends `buf` as consecutive datagrams of `segment` bytes (the last may be shorter),
    /// with GSO when available, else one message per datagram, in `sendmmsg` batches. When the
    /// kernel refuses GSO for this path (a segment larger than the MTU, a device without
    /// segmentation), it falls back to plain datagrams for good, resending nothing twice.
    pub fn send_segments(&mut self, buf: &[u8], segment: usize) -> io::Result<()> {
        if segment == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "segment of 0 bytes",
            ));
        }
        let cap = self.batch.capacity().min(MAX_BATCH);
        let mut counts = [0u64; 1024];
        let mut bytes = [0u64; 1024];
        let mut at = 0;
        while at < buf.len() {
            let per_msg = if self.gso && segment <= GSO_MAX_BYTES {
                (GSO_MAX_BYTES / segment).clamp(1, GSO_MAX_SEGMENTS)
            } else {
                1
            };
            let chunk = per_msg * segment;
            let mut n = 0;
            let mut end = at;
            while n < cap && end < buf.len() {
                let take = chunk.min(buf.len() - end);
                let dgs = take.div_ceil(segment);
                let seg = (dgs > 1).then_some(segment as u16);
                self.batch.set(n, &buf[end..end + take], seg);
                counts[n] = dgs as u64;
                bytes[n] = take as u64;
                end += take;
                n += 1;
            }
            match self.flush(n, &counts, &bytes) {
                Ok(()) => at = end,
                Err((sent, e))
                    if self.gso
                        && per_msg > 1
                        && matches!(
                            e.raw_os_error(),
                            Some(libc::EIO | libc::EINVAL | libc::EMSGSIZE)
                        ) =>
                {
                    tracing::warn!(error = %e, segment, "UDP GSO refused on this path; sending without it");
                    self.gso = false;
                    at += bytes[..sent].iter().sum::<u64>() as usize;
                }
                Err((_, e)) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sends each slice as one datagram, in `sendmmsg` batches.
    pub fn send_datagrams(&mut self, datagrams: &[&[u8]]) -> io::Result<()> {
        let cap = self.batch.capacity().min(MAX_BATCH);
        let ones = [1u64; 1024];
        let mut bytes = [0u64; 1024];
        for group in datagrams.chunks(cap) {
            for (i, d) in group.iter().enumerate() {
                self.batch.set(i, d, None);
                bytes[i] = d.len() as u64;
            }
            self.flush(group.len(), &ones, &bytes).map_err(|(_, e)| e)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn send_segments_delivers_every_datagram_with_and_without_gso() {
        for gso in [true, false] {
            let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut cfg = SenderConfig::new(rx.local_addr().unwrap());
            cfg.gso = gso;
            let mut s = Sender::new(&cfg).unwrap();
            let buf: Vec<u8> = (0..10 * 1000 + 500).map(|i| (i / 1000) as u8).collect();
            s.send_segments(&buf, 1000).unwrap();
            assert_eq!(s.stats().datagrams, 11);
            let mut got = Vec::new();
            let mut b = [0u8; 2000];
            rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            for _ in 0..11 {
                let n = rx.recv(&mut b).unwrap();
                got.push((n, b[0]));
            }
            let want: Vec<(usize, u8)> = (0..11)
                .map(|i| (if i == 10 { 500 } else { 1000 }, i as u8))
                .collect();
            assert_eq!(got, want, "gso {gso}");
        }
    }
}
