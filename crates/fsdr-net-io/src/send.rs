//! The send side: a [`Sender`] that sends batches with `sendmmsg` (and UDP GSO where the
//! kernel has it), a token-bucket [`Pacer`] that holds a byte rate without sleeping per
//! datagram, a [`Framer`] that writes any format's headers, and [`StreamSender`], the built-in
//! paced stream generator that examples, tests and the emulator use.
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

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::format::{Format, FormatError};
use crate::sys::{self, GSO_MAX_BYTES, GSO_MAX_SEGMENTS, SendBatch};

/// Holds a byte rate: a token bucket over virtual time. Each `acquire(bytes)` moves the
/// schedule on by `bytes / rate`; the caller sleeps only when it is ahead of the schedule by
/// more than the burst allowance, so pacing costs one sleep per batch, not per datagram.
///
/// ```
/// use fsdr_net_io::send::Pacer;
/// let mut p = Pacer::new(1e9, 64 * 1024);
/// let t = std::time::Instant::now();
/// for _ in 0..100 { p.acquire(100_000); } // 10 MB at 1 GB/s
/// assert!(t.elapsed() >= std::time::Duration::from_millis(9));
/// ```
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: f64,
    burst: Duration,
    /// When the bytes acquired so far are due.
    due: Instant,
}

impl Pacer {
    /// A pacer for `bytes_per_s` allowing bursts of `burst_bytes`.
    pub fn new(bytes_per_s: f64, burst_bytes: usize) -> Self {
        let rate = bytes_per_s.max(1.0);
        sys::set_timer_slack_ns(1_000);
        Self {
            rate,
            burst: Duration::from_secs_f64(burst_bytes as f64 / rate),
            due: Instant::now(),
        }
    }

    /// The rate in bytes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Waits until `bytes` more may be sent.
    pub fn acquire(&mut self, bytes: usize) {
        let wait = self.delay(bytes);
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }

    /// Books `bytes` and returns how long the caller should wait before sending more (for
    /// callers that must not block, such as an async task arming a timer).
    pub fn delay(&mut self, bytes: usize) -> Duration {
        let now = Instant::now();
        // Never bank more than one burst of unused time.
        if self.due + self.burst < now {
            self.due = now - self.burst;
        }
        self.due += Duration::from_secs_f64(bytes as f64 / self.rate);
        self.due
            .saturating_duration_since(now)
            .saturating_sub(self.burst)
    }
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
    /// Messages per `sendmmsg` call.
    pub batch: usize,
    /// Send buffer to request.
    pub send_buffer: usize,
    /// Multicast hop limit.
    pub multicast_ttl: u32,
    /// Multicast: IPv4 interface address or IPv6 interface index to send from.
    pub multicast_if: Option<IpAddr>,
    /// IPv6 multicast interface index.
    pub multicast_if_v6: Option<u32>,
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
}

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
    /// Opens, configures and connects the socket.
    pub fn new(cfg: &SenderConfig) -> io::Result<Self> {
        let socket = Socket::new(
            Domain::for_address(cfg.dest),
            Type::DGRAM,
            Some(Protocol::UDP),
        )?;
        let _ = socket.set_send_buffer_size(cfg.send_buffer);
        let bind = cfg.bind.unwrap_or_else(|| match cfg.dest {
            SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
            SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
        });
        socket.bind(&SockAddr::from(bind))?;
        if cfg.dest.ip().is_multicast() {
            match cfg.dest.ip() {
                IpAddr::V4(_) => {
                    socket.set_multicast_ttl_v4(cfg.multicast_ttl)?;
                    socket.set_multicast_loop_v4(true)?;
                    if let Some(IpAddr::V4(i)) = cfg.multicast_if {
                        socket.set_multicast_if_v4(&i)?;
                    }
                }
                IpAddr::V6(_) => {
                    socket.set_multicast_hops_v6(cfg.multicast_ttl)?;
                    socket.set_multicast_loop_v6(true)?;
                    if let Some(i) = cfg.multicast_if_v6 {
                        socket.set_multicast_if_v6(i)?;
                    }
                }
            }
        }
        socket.connect(&SockAddr::from(cfg.dest))?;
        Ok(Self {
            socket,
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
        let fd = self.socket.as_raw_fd();
        let mut done = 0;
        let mut refused_retry = true;
        while done < n {
            // SAFETY: the messages were set from buffers the caller still borrows.
            let r = unsafe { self.batch.send_from(fd, done, n - done) };
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
                    refused_retry = false;
                }
                Err(e) => {
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
        let cap = self.batch.capacity().min(1024);
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
        let cap = self.batch.capacity().min(1024);
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

/// Writes headers of one format with consecutive sequence numbers and timestamps.
///
/// ```
/// use fsdr_net_io::send::Framer;
/// use fsdr_net_io::Format;
///
/// let mut f = Framer::new(Format::Chdr).timestamps(1000, 250);
/// let mut dg = [0u8; 64];
/// let h = f.frame(&mut dg).unwrap();
/// assert_eq!(h, 16);
/// let info = Format::Chdr.parse(&dg).unwrap();
/// assert_eq!((info.seq, info.timestamp.unwrap().ticks(1.0)), (Some(0), Some(1000)));
/// f.frame(&mut dg).unwrap();
/// assert_eq!(Format::Chdr.parse(&dg).unwrap().timestamp.unwrap().ticks(1.0), Some(1250));
/// ```
#[derive(Debug, Clone)]
pub struct Framer {
    format: Format,
    seq: u64,
    timestamp: Option<u64>,
    ticks_per_datagram: u64,
}

impl Framer {
    /// Starts at the format's first sequence number, without timestamps.
    pub fn new(format: Format) -> Self {
        Self {
            format,
            seq: format.first_seq(),
            timestamp: None,
            ticks_per_datagram: 0,
        }
    }

    /// Adds timestamps starting at `start`, advancing by `per_datagram` ticks.
    pub fn timestamps(mut self, start: u64, per_datagram: u64) -> Self {
        self.timestamp = Some(start);
        self.ticks_per_datagram = per_datagram;
        self
    }

    /// Sets the next sequence number (for restarts and fault injection).
    pub fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// The next sequence number (unreduced).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Header length of every datagram this framer writes.
    pub fn header_len(&self) -> usize {
        self.format.header_len(self.timestamp.is_some())
    }

    /// Writes the header of the next datagram (the whole of `datagram` is the datagram) and
    /// moves on; returns the header length.
    pub fn frame(&mut self, datagram: &mut [u8]) -> Result<usize, FormatError> {
        let h = self
            .format
            .emit_header(datagram, self.seq, self.timestamp, false)?;
        self.skip(1);
        Ok(h)
    }

    /// Moves on by `n` datagrams without writing (a sender-side loss).
    pub fn skip(&mut self, n: u64) {
        self.seq = self.seq.wrapping_add(n);
        if let Some(t) = self.timestamp.as_mut() {
            *t = t.wrapping_add(self.ticks_per_datagram * n);
        }
    }
}

/// What a [`StreamSender`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SendReport {
    /// Datagrams sent.
    pub datagrams: u64,
    /// Bytes sent (headers included).
    pub bytes: u64,
    /// Payload bytes sent.
    pub payload_bytes: u64,
    /// Wall time from first to last send.
    pub elapsed: Duration,
    /// Send errors.
    pub errors: u64,
}

impl SendReport {
    /// Achieved rate in bytes per second.
    pub fn rate(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

type Fill = Box<dyn FnMut(u64, &mut [u8]) + Send>;

/// The built-in stream generator: datagrams of one size and format, paced to a byte rate,
/// until a count, a byte total, a duration or a stop flag says enough.
pub struct StreamSender {
    cfg: SenderConfig,
    format: Format,
    datagram_size: usize,
    count: Option<u64>,
    payload_bytes: Option<u64>,
    duration: Option<Duration>,
    rate: Option<f64>,
    fill: Option<Fill>,
    stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl std::fmt::Debug for StreamSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamSender")
            .field("dest", &self.cfg.dest)
            .field("format", &self.format)
            .field("datagram_size", &self.datagram_size)
            .finish_non_exhaustive()
    }
}

impl StreamSender {
    /// 8000-byte datagrams of `format`, unpaced, until stopped.
    pub fn new(cfg: SenderConfig, format: Format) -> Self {
        Self {
            cfg,
            format,
            datagram_size: 8000,
            count: None,
            payload_bytes: None,
            duration: None,
            rate: None,
            fill: None,
            stop: None,
        }
    }

    /// Bytes per datagram, header included.
    pub fn datagram_size(mut self, bytes: usize) -> Self {
        self.datagram_size = bytes;
        self
    }

    /// Stop after `n` datagrams.
    pub fn count(mut self, n: u64) -> Self {
        self.count = Some(n);
        self
    }

    /// Stop once this many payload bytes are sent.
    pub fn payload_bytes(mut self, n: u64) -> Self {
        self.payload_bytes = Some(n);
        self
    }

    /// Stop after this long.
    pub fn duration(mut self, d: Duration) -> Self {
        self.duration = Some(d);
        self
    }

    /// Pace to `bytes_per_s` (whole datagrams, headers included).
    pub fn rate(mut self, bytes_per_s: Option<f64>) -> Self {
        self.rate = bytes_per_s;
        self
    }

    /// Fills each payload: called with the datagram index (from 0) and the payload.
    pub fn fill(mut self, f: impl FnMut(u64, &mut [u8]) + Send + 'static) -> Self {
        self.fill = Some(Box::new(f));
        self
    }

    /// Stops when the flag becomes true.
    pub fn stop_flag(mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.stop = Some(flag);
        self
    }

    /// Sends on the calling thread.
    pub fn run(mut self) -> io::Result<SendReport> {
        let mut sender = Sender::new(&self.cfg)?;
        let mut framer = Framer::new(self.format);
        let size = self.datagram_size;
        let header = framer.header_len();
        if size <= header {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("datagram size {size} leaves no payload after a {header}-byte header"),
            ));
        }
        let per_call = (256 * 1024 / size).clamp(1, 256);
        let mut buf = vec![0u8; per_call * size];
        let mut pacer = self
            .rate
            .map(|r| Pacer::new(r, (per_call * size).max(64 * 1024)));
        let start = Instant::now();
        let mut index = 0u64;
        let mut payload_sent = 0u64;
        let mut errors = 0u64;
        let stopped = |s: &Option<std::sync::Arc<std::sync::atomic::AtomicBool>>| {
            s.as_ref()
                .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
        };
        loop {
            let mut n = per_call as u64;
            if let Some(c) = self.count {
                n = n.min(c - index);
            }
            if let Some(b) = self.payload_bytes {
                let left = b.saturating_sub(payload_sent);
                n = n.min(left.div_ceil((size - header) as u64));
            }
            if n == 0 || stopped(&self.stop) || self.duration.is_some_and(|d| start.elapsed() >= d)
            {
                break;
            }
            for k in 0..n as usize {
                let dg = &mut buf[k * size..(k + 1) * size];
                framer
                    .frame(dg)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                if let Some(f) = self.fill.as_mut() {
                    f(index + k as u64, &mut dg[header..]);
                }
            }
            let bytes = n as usize * size;
            if let Some(p) = pacer.as_mut() {
                p.acquire(bytes);
            }
            if let Err(e) = sender.send_segments(&buf[..bytes], size) {
                errors += 1;
                tracing::debug!(error = %e, "send failed");
            }
            index += n;
            payload_sent += n * (size - header) as u64;
        }
        let s = sender.stats();
        Ok(SendReport {
            datagrams: s.datagrams,
            bytes: s.bytes,
            payload_bytes: s.datagrams * (size - header) as u64,
            elapsed: start.elapsed(),
            errors: errors.max(s.errors),
        })
    }

    /// Sends on a new thread.
    pub fn spawn(self) -> std::thread::JoinHandle<io::Result<SendReport>> {
        std::thread::Builder::new()
            .name("fsdr-net-tx".into())
            .spawn(move || self.run())
            .expect("spawning the sender thread")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacer_holds_rate_within_a_few_percent() {
        let mut p = Pacer::new(50e6, 64 * 1024);
        let t = Instant::now();
        for _ in 0..200 {
            p.acquire(25_000);
        }
        // 5 MB at 50 MB/s = 100 ms (minus one burst allowance).
        let e = t.elapsed().as_secs_f64();
        assert!(e > 0.09, "{e}");
    }

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
