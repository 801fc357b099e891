//! Turnaround latency: the time from a datagram's arrival at a receiving socket to the
//! departure of the datagram made from it — what a radio host that answers a received burst
//! must keep short (the kernel-bypass talk among the project's sources reports about 300 µs
//! through the kernel and 80 µs with DPDK in UHD).
//!
//! A [`Probe`] sends a paced CHDR stream (timestamp of packet `k` = `k × spp`, so every
//! packet says which it is) to the program under test and receives what that program sends
//! back; a packet's turnaround is the kernel's receive stamp of the answer (`SO_TIMESTAMPNS`)
//! minus the kernel's software transmit stamp of the question (`SO_TIMESTAMPING`, read from
//! the socket's error queue). On loopback and veth the transmit stamp is taken as the datagram
//! is handed to the receiving side, in the same softirq: it is the arrival at the receiving
//! socket to within the loopback's own microsecond. [`bare_loop`] is the floor to compare
//! with: `recvmmsg` straight into `sendmmsg`, no flowgraph.
//!
//! ```no_run
//! use std::time::Duration;
//! use fsdr_net_io::turnaround::{Probe, bare_loop};
//!
//! let stop = std::sync::atomic::AtomicBool::new(false);
//! let passed = std::sync::atomic::AtomicU64::new(0);
//! let rx = std::net::UdpSocket::bind("127.0.0.1:47500").unwrap();
//! std::thread::scope(|s| {
//!     s.spawn(|| bare_loop(rx, "127.0.0.1:47501".parse().unwrap(), &stop, &passed));
//!     let report = Probe::new("127.0.0.1:47500".parse().unwrap(), "127.0.0.1:47501".parse().unwrap())
//!         .rate(10e6)
//!         .duration(Duration::from_millis(500))
//!         .run()
//!         .unwrap();
//!     println!("p99 {} ns", report.percentile_ns(0.99).unwrap());
//!     stop.store(true, std::sync::atomic::Ordering::Relaxed);
//! });
//! ```

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::socket::{
    ControlMessageOwned, MsgFlags, SockaddrStorage, TimestampingFlag, recvmsg, setsockopt, sockopt,
};
use serde::Serialize;

use crate::format::Format;
use crate::send::{Framer, Pacer, Sender, SenderConfig};
use crate::sys::{RecvBatch, Wait};

/// Datagrams per receive call of the probe and the bare loop.
const BATCH: usize = 64;
/// Largest datagram either takes.
const MAX_DATAGRAM: usize = 9000;

/// Sends a paced CHDR stream to a program under test and measures each packet's turnaround.
#[derive(Debug, Clone)]
pub struct Probe {
    to: SocketAddr,
    listen: SocketAddr,
    rate: f64,
    spp: usize,
    duration: Duration,
    linger: Duration,
}

/// What a [`Probe`] measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProbeReport {
    /// Packets sent.
    pub sent: u64,
    /// Answers received (datagrams whose timestamp names a packet sent).
    pub answered: u64,
    /// Received datagrams that name no packet sent (not CHDR, no timestamp, out of range).
    pub foreign: u64,
    /// Packets sent whose transmit stamp the kernel did not report.
    pub unstamped: u64,
    /// Turnaround of every answered and stamped packet, in ns, in the order sent.
    #[serde(skip)]
    pub turnaround_ns: Vec<u64>,
}

impl ProbeReport {
    /// The `q` quantile (0..=1) of the turnarounds, in ns (nearest rank).
    pub fn percentile_ns(&self, q: f64) -> Option<u64> {
        let mut v = self.turnaround_ns.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let rank = ((q.clamp(0.0, 1.0) * v.len() as f64).ceil() as usize).clamp(1, v.len());
        Some(v[rank - 1])
    }

    /// Packets sent but not answered.
    pub fn unanswered(&self) -> u64 {
        self.sent.saturating_sub(self.answered)
    }
}

impl Probe {
    /// Sends to `to` and expects the answers on `listen`; 10 Msps, 2000 samples (8000 B
    /// sc16) a packet, for one second by default.
    pub fn new(to: SocketAddr, listen: SocketAddr) -> Self {
        Self {
            to,
            listen,
            rate: 10e6,
            spp: 2000,
            duration: Duration::from_secs(1),
            linger: Duration::from_millis(300),
        }
    }

    /// Sample rate of the stream (4-byte samples; a positive number).
    pub fn rate(mut self, sps: f64) -> Self {
        self.rate = sps;
        self
    }

    /// Samples per packet (4 bytes each; the datagram within UDP's 65507 bytes, or
    /// [`run`](Self::run) fails).
    pub fn samples_per_packet(mut self, spp: usize) -> Self {
        self.spp = spp.max(1);
        self
    }

    /// How long to send.
    pub fn duration(mut self, d: Duration) -> Self {
        self.duration = d;
        self
    }

    /// How long to wait for answers after the last packet went out.
    pub fn linger(mut self, d: Duration) -> Self {
        self.linger = d;
        self
    }

    /// Sends, receives, matches.
    pub fn run(&self) -> io::Result<ProbeReport> {
        let rx = UdpSocket::bind(self.listen)?;
        setsockopt(&rx, sockopt::ReceiveTimestampns, &true).map_err(io::Error::from)?;
        // Forced where allowed: at the default net.core.rmem_max (208 KiB) a receiving thread
        // descheduled for a millisecond lost answers, which the report would then show as
        // packets the forwarder did not answer.
        let size: usize = 64 << 20;
        if setsockopt(&rx, sockopt::RcvBufForce, &size).is_err() {
            setsockopt(&rx, sockopt::RcvBuf, &size).map_err(io::Error::from)?;
        }
        rx.set_read_timeout(Some(Duration::from_millis(20)))?;
        let tx = UdpSocket::bind(match self.to {
            SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
            SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
        })?;
        tx.connect(self.to)?;
        let flags = TimestampingFlag::SOF_TIMESTAMPING_TX_SOFTWARE
            | TimestampingFlag::SOF_TIMESTAMPING_SOFTWARE
            | TimestampingFlag::SOF_TIMESTAMPING_OPT_ID
            | TimestampingFlag::SOF_TIMESTAMPING_OPT_TSONLY;
        setsockopt(&tx, sockopt::Timestamping, &flags).map_err(io::Error::from)?;
        let done = AtomicBool::new(false);
        let spp = self.spp as u64;
        let (sent, tx_ns) = std::thread::scope(|s| {
            let receiver = s.spawn(|| receive_answers(&rx, spp, &done));
            let sent = self.send(&tx);
            std::thread::sleep(self.linger);
            done.store(true, Ordering::Relaxed);
            let answers = receiver.join().expect("probe receiver");
            sent.map(|(n, stamps)| ((n, answers), stamps))
        })?;
        let ((sent, answers), mut tx_ns) = (sent, tx_ns);
        read_tx_stamps(&tx, &mut tx_ns)?;
        let (rx_ns, foreign) = answers?;
        let mut report = ProbeReport {
            sent,
            foreign,
            ..Default::default()
        };
        for (k, rx) in rx_ns.iter().enumerate().take(sent as usize) {
            let Some(rx) = *rx else { continue };
            report.answered += 1;
            match tx_ns.get(k).copied().flatten() {
                Some(tx) => report.turnaround_ns.push(rx.saturating_sub(tx)),
                None => report.unstamped += 1,
            }
        }
        Ok(report)
    }

    /// Sends the paced stream; returns the packets sent and the transmit stamps read so far
    /// (indexed by packet).
    fn send(&self, tx: &UdpSocket) -> io::Result<(u64, Vec<Option<u64>>)> {
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("probe rate {} must be a positive number", self.rate),
            ));
        }
        let mut framer = Framer::new(Format::Chdr).timestamps(0, 1.0);
        let len = self
            .spp
            .checked_mul(4)
            .and_then(|p| p.checked_add(framer.header_len()))
            .filter(|&l| l <= crate::send::MAX_UDP_PAYLOAD)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} samples per packet do not fit one UDP datagram",
                        self.spp
                    ),
                )
            })?;
        let mut dg = vec![0u8; len];
        // Bursts of up to 8 packets between two sleeps: one sleep per packet would cost the
        // sender more than the rate leaves at 100 000 packets a second.
        let mut pacer = Pacer::new(self.rate * 4.0, 8 * len);
        let mut stamps = Vec::new();
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed() < self.duration {
            framer
                .frame(&mut dg, self.spp as u64, 0)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            tx.send(&dg)?;
            sent += 1;
            if sent.is_multiple_of(16) {
                read_tx_stamps(tx, &mut stamps)?;
            }
            let wait = pacer.delay(len);
            if wait > Duration::ZERO {
                std::thread::sleep(wait);
            }
        }
        Ok((sent, stamps))
    }
}

/// Reads the transmit stamps the kernel queued on `tx`'s error queue into `stamps` (index:
/// the datagram's number since timestamping was turned on, `SOF_TIMESTAMPING_OPT_ID`).
fn read_tx_stamps(tx: &UdpSocket, stamps: &mut Vec<Option<u64>>) -> io::Result<()> {
    let mut cmsg = nix::cmsg_space!(
        nix::sys::socket::Timestamps,
        libc::sock_extended_err,
        libc::sockaddr_in6
    );
    let mut byte = [0u8; 1];
    loop {
        let mut iov = [IoSliceMut::new(&mut byte)];
        let msg = match recvmsg::<SockaddrStorage>(
            tx.as_raw_fd(),
            &mut iov,
            Some(cmsg.as_mut_slice()),
            MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(m) => m,
            Err(nix::errno::Errno::EAGAIN) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let (mut ns, mut id) = (None, None);
        for c in msg.cmsgs().map_err(io::Error::from)? {
            match c {
                ControlMessageOwned::ScmTimestampsns(t) => {
                    let s = t.system;
                    ns = Some(s.tv_sec() as u64 * 1_000_000_000 + s.tv_nsec() as u64);
                }
                ControlMessageOwned::Ipv4RecvErr(e, _) | ControlMessageOwned::Ipv6RecvErr(e, _)
                    if e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING =>
                {
                    id = Some(e.ee_data as usize);
                }
                _ => {}
            }
        }
        if let (Some(ns), Some(id)) = (ns, id) {
            if stamps.len() <= id {
                stamps.resize(id + 1, None);
            }
            stamps[id] = Some(ns);
        }
    }
}

/// Receives answers until `done`: the kernel receive stamp of each packet, indexed by the
/// packet its timestamp names; and the datagrams that name none.
fn receive_answers(
    rx: &UdpSocket,
    spp: u64,
    done: &AtomicBool,
) -> io::Result<(Vec<Option<u64>>, u64)> {
    let mut batch = RecvBatch::new(BATCH);
    let mut bufs = vec![[0u8; MAX_DATAGRAM]; BATCH];
    let mut rx_ns: Vec<Option<u64>> = Vec::new();
    let mut foreign = 0;
    while !done.load(Ordering::Relaxed) {
        for (i, b) in bufs.iter_mut().enumerate() {
            // SAFETY: the buffers live in this function and nothing else touches them until
            // the receive call below returns; the batch forgets them after it.
            // Checked by: `the_probe_measures_the_bare_loop_packet_by_packet` under ASan.
            unsafe { batch.set_buffer(i, b.as_mut_ptr(), b.len()) };
        }
        let n = match batch.recv(rx, BATCH, Wait::ForOne) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        for (i, b) in bufs.iter().enumerate().take(n) {
            let meta = batch.meta(i);
            let k = Format::Chdr
                .parse(&b[..meta.len.min(b.len())])
                .ok()
                .and_then(|info| info.timestamp)
                .and_then(|t| t.ticks(1.0))
                .filter(|t| t % spp == 0)
                .map(|t| (t / spp) as usize);
            match (k, meta.timestamp_ns) {
                (Some(k), Some(ns)) if k < 1 << 28 => {
                    if rx_ns.len() <= k {
                        rx_ns.resize(k + 1, None);
                    }
                    rx_ns[k] = Some(ns);
                }
                _ => foreign += 1,
            }
        }
    }
    Ok((rx_ns, foreign))
}

/// The floor: receives on `rx` with `recvmmsg` and sends each batch on to `dest` with
/// `sendmmsg`, unchanged, until `stop` (and then what is queued); counts the datagrams
/// passed on in `passed`.
pub fn bare_loop(
    rx: UdpSocket,
    dest: SocketAddr,
    stop: &AtomicBool,
    passed: &AtomicU64,
) -> io::Result<()> {
    rx.set_read_timeout(Some(Duration::from_millis(20)))?;
    // The receive buffer the sources ask for (forced where allowed), so that the floor and
    // the flowgraph meet the same kernel.
    let size = crate::socket::DEFAULT_RECV_BUFFER;
    if setsockopt(&rx, sockopt::RcvBufForce, &size).is_err() {
        setsockopt(&rx, sockopt::RcvBuf, &size).map_err(io::Error::from)?;
    }
    let mut cfg = SenderConfig::new(dest);
    cfg.gso = false;
    cfg.batch = BATCH;
    let mut sender = Sender::new(&cfg).map_err(io::Error::other)?;
    let mut batch = RecvBatch::new(BATCH);
    let mut bufs = vec![[0u8; MAX_DATAGRAM]; BATCH];
    // Once stopped, what is queued still goes on (without waiting for more).
    let mut stopping = false;
    loop {
        stopping |= stop.load(Ordering::Relaxed);
        for (i, b) in bufs.iter_mut().enumerate() {
            // SAFETY: the buffers live in this function and nothing else touches them until
            // the receive call below returns; the batch forgets them after it.
            // Checked by: `the_probe_measures_the_bare_loop_packet_by_packet` under ASan.
            unsafe { batch.set_buffer(i, b.as_mut_ptr(), b.len()) };
        }
        let wait = if stopping { Wait::No } else { Wait::ForOne };
        let n = match batch.recv(&rx, BATCH, wait) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if stopping {
                    break;
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        let out: Vec<&[u8]> = (0..n)
            .map(|i| &bufs[i][..batch.meta(i).len.min(MAX_DATAGRAM)])
            .collect();
        sender.send_datagrams(&out)?;
        passed.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(())
}
