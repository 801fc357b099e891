//! [`UringSender`]: sends batches through io_uring (tokio-uring) on a dedicated thread, with up
//! to `uring_depth` sends in flight, UDP GSO where the kernel has it (one `sendmsg` with a
//! `UDP_SEGMENT` control message per super-datagram), optionally as zero-copy sends
//! (`IORING_OP_SEND_ZC`/`SENDMSG_ZC`, Linux ≥ 6.0). The socket is configured like every
//! sender's (bind, send buffer, multicast) by the same function. Submitting never blocks: a
//! full queue hands the buffer back, and [`UringSender::notifier`] says when to try again.
//!
//! ```
//! use fsdr_net_io::send::{SenderConfig, UringSender};
//!
//! let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
//! let mut tx = UringSender::new(&SenderConfig::new(rx.local_addr().unwrap()), false).unwrap();
//! let mut buf = tx.buffer();
//! buf.extend_from_slice(&[7u8; 300]);
//! tx.submit(buf, 100).unwrap(); // three datagrams of 100 bytes
//! let stats = tx.close();
//! assert_eq!(stats.datagrams, 3);
//! let mut b = [0u8; 200];
//! assert_eq!(rx.recv(&mut b).unwrap(), 100);
//! ```

use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::rc::Rc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tokio_uring::buf::IoBuf;

use super::{SendStats, SenderConfig, open_send_socket};
use crate::Error;
use crate::lent;
use crate::notify::Notify;
use crate::sys::cmsg::{cmsg_space, write_cmsg};
use crate::sys::{self, GSO_MAX_BYTES, GSO_MAX_SEGMENTS};

/// Batches queued for the sending thread at most.
const QUEUE: usize = 4;

/// A part of a shared buffer lent to one send operation; the `Arc` keeps the memory alive
/// until the kernel is done with it.
struct Part {
    buf: Arc<Vec<u8>>,
    start: usize,
    end: usize,
}

// SAFETY: the pointer is into a Vec owned by an Arc that this value holds, so it is stable and
// valid for `end - start` initialised bytes for as long as the operation owns the Part, which
// tokio-uring drops only after the send's completion (and a zero-copy send's notification):
// every send is awaited, and a runtime with a send that was not (a panicked task, a panic on
// the thread) is kept for good, never dropped.
// Checked by: `uring_sender_stops_with_sends_in_flight_without_touching_freed_memory` and
// `a_panic_in_the_uring_sender_keeps_the_lent_memory` (freed memory poisoned and watched).
unsafe impl IoBuf for Part {
    fn stable_ptr(&self) -> *const u8 {
        self.buf[self.start..].as_ptr()
    }
    fn bytes_init(&self) -> usize {
        self.end - self.start
    }
    fn bytes_total(&self) -> usize {
        self.end - self.start
    }
}

struct Job {
    buf: Vec<u8>,
    segment: usize,
}

/// Why [`UringSender::submit`] did not take a buffer.
#[derive(Debug)]
pub enum Submit {
    /// The queue is full: here is the buffer back; try again after the notifier fires.
    Full(Vec<u8>),
    /// The sender is closed or its thread ended.
    Closed,
    /// A segment of 0 bytes.
    Invalid,
}

impl std::fmt::Display for Submit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Submit::Full(_) => f.write_str("io_uring send queue full"),
            Submit::Closed => f.write_str("io_uring sender closed"),
            Submit::Invalid => f.write_str("segment of 0 bytes"),
        }
    }
}

impl std::error::Error for Submit {}

/// Sends through io_uring on its own thread (see the `send` module for the other senders).
pub struct UringSender {
    jobs: Option<SyncSender<Job>>,
    free: Receiver<Vec<u8>>,
    stats: Arc<Mutex<SendStats>>,
    done: Arc<Notify>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for UringSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringSender").finish_non_exhaustive()
    }
}

impl UringSender {
    /// Opens and connects a socket as `cfg` says (bind, send buffer, multicast) and starts the
    /// sending thread with a ring of `cfg.uring_depth` entries; GSO as `cfg.gso` asks (when
    /// the kernel has it); `zero_copy` uses the zero-copy send operations.
    pub fn new(cfg: &SenderConfig, zero_copy: bool) -> Result<Self, Error> {
        if !(1..=4096).contains(&cfg.uring_depth) {
            return Err(Error::config(format!(
                "io_uring send depth {} outside 1..=4096",
                cfg.uring_depth
            )));
        }
        let socket: std::net::UdpSocket = open_send_socket(cfg)?.into();
        let mut builder = tokio_uring::builder();
        builder.entries(cfg.uring_depth.next_power_of_two() as u32);
        // Fail here when io_uring is not available.
        drop(tokio_uring::Runtime::new(&builder)?);
        let (jobs_tx, jobs_rx) = sync_channel::<Job>(QUEUE);
        let (free_tx, free_rx) = sync_channel::<Vec<u8>>(QUEUE * 2);
        let stats = Arc::new(Mutex::new(SendStats::default()));
        let done = Arc::new(Notify::new());
        let plan = Plan {
            depth: cfg.uring_depth,
            gso: cfg.gso && sys::udp_gso_supported(),
            zero_copy,
        };
        let (st, dn) = (stats.clone(), done.clone());
        let port = cfg.dest.port();
        let thread = std::thread::Builder::new()
            .name("fsdr-net-tx-uring".into())
            .spawn(move || {
                // Dropped only once no send is in flight: an unwind out of `block_on` keeps
                // it, with every send's memory (tokio-uring frees the data of operations still
                // in flight before it cancels them).
                let rt = match tokio_uring::Runtime::new(&builder) {
                    Ok(rt) => ManuallyDrop::new(rt),
                    Err(e) => return tracing::error!(error = %e, "tokio-uring runtime failed"),
                };
                match rt.block_on(run(socket, jobs_rx, free_tx, st, dn, plan, port)) {
                    None => drop(ManuallyDrop::into_inner(rt)),
                    Some(panic) => {
                        lent::keep_for_good(rt, "io_uring sender");
                        std::panic::resume_unwind(panic);
                    }
                }
            })
            .map_err(Error::Spawn)?;
        Ok(Self {
            jobs: Some(jobs_tx),
            free: free_rx,
            stats,
            done,
            thread: Some(thread),
        })
    }

    /// An empty buffer to fill (a recycled one when available).
    pub fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.free.try_recv().unwrap_or_default();
        b.clear();
        b
    }

    /// Queues `buf` to go out as datagrams of `segment` bytes (the last may be shorter).
    /// Never blocks: with four batches already queued it returns the buffer in
    /// [`Submit::Full`].
    pub fn submit(&mut self, buf: Vec<u8>, segment: usize) -> Result<(), Submit> {
        if segment == 0 {
            return Err(Submit::Invalid);
        }
        let jobs = self.jobs.as_ref().ok_or(Submit::Closed)?;
        match jobs.try_send(Job { buf, segment }) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(job)) => Err(Submit::Full(job.buf)),
            Err(TrySendError::Disconnected(_)) => Err(Submit::Closed),
        }
    }

    /// Signalled whenever the sending thread finishes a batch (room in the queue).
    pub fn notifier(&self) -> Arc<Notify> {
        self.done.clone()
    }

    /// Counters so far.
    pub fn stats(&self) -> SendStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends what is queued, stops the thread and returns the final counters.
    pub fn close(mut self) -> SendStats {
        self.shutdown();
        self.stats()
    }

    fn shutdown(&mut self) {
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for UringSender {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[derive(Clone, Copy)]
struct Plan {
    depth: usize,
    gso: bool,
    zero_copy: bool,
}

/// One send operation's outcome: (datagrams, bytes) sent, or an error for `datagrams`.
type Outcome = Result<(u64, usize), u64>;

async fn send_one(
    socket: Rc<tokio_uring::net::UdpSocket>,
    part: Part,
    segment: Option<u16>,
    datagrams: u64,
    zero_copy: bool,
    port: u16,
) -> Outcome {
    if lent::send_panic_due(port) {
        // Tests: a panic with this send (its first datagram) in flight, submitted by the
        // first poll.
        let part = match segment {
            Some(seg) => Part {
                end: part.start + usize::from(seg),
                ..part
            },
            None => part,
        };
        let mut op = std::pin::pin!(socket.send(part));
        std::future::poll_fn(|cx| {
            let _ = op.as_mut().poll(cx);
            std::task::Poll::Ready(())
        })
        .await;
        panic!("injected panic in an io_uring send task (tests)");
    }
    let res = match segment {
        Some(seg) => {
            let mut control = vec![0u8; cmsg_space(2)];
            write_cmsg(
                &mut control,
                libc::SOL_UDP,
                libc::UDP_SEGMENT,
                &seg.to_ne_bytes(),
            )
            .expect("room for one UDP_SEGMENT message");
            let (r, _, _) = if zero_copy {
                socket.sendmsg_zc(vec![part], None, Some(control)).await
            } else {
                socket.sendmsg(vec![part], None, Some(control)).await
            };
            r
        }
        None if zero_copy => socket.send_zc(part).await.0,
        None => socket.send(part).await.0,
    };
    res.map(|n| (datagrams, n)).map_err(|_| datagrams)
}

fn tally(o: Outcome, s: &mut SendStats) {
    s.calls += 1;
    match o {
        Ok((d, n)) => {
            s.datagrams += d;
            s.bytes += n as u64;
        }
        Err(d) => {
            s.errors += 1;
            tracing::debug!(datagrams = d, "io_uring send failed");
        }
    }
}

/// What a finished send task gives: its outcome, or the panic that ended it.
fn joined(
    r: Result<Outcome, tokio::task::JoinError>,
    panic: &mut Option<Box<dyn std::any::Any + Send>>,
) -> Outcome {
    match r {
        Ok(o) => o,
        Err(e) => {
            if e.is_panic() {
                panic.get_or_insert(e.into_panic());
            }
            Err(0)
        }
    }
}

/// The sending thread's loop; returns the panic of a send task, if one panicked (its send
/// may still be in flight: the runtime must then be kept).
async fn run(
    socket: std::net::UdpSocket,
    jobs: Receiver<Job>,
    free: SyncSender<Vec<u8>>,
    stats: Arc<Mutex<SendStats>>,
    done: Arc<Notify>,
    plan: Plan,
    port: u16,
) -> Option<Box<dyn std::any::Any + Send>> {
    let socket = Rc::new(tokio_uring::net::UdpSocket::from_std(socket));
    let mut gso = plan.gso;
    let mut panic = None;
    // The channel is std's: this thread has nothing else to do while it waits.
    while let Ok(job) = jobs.recv() {
        let buf = Arc::new(job.buf);
        let len = buf.len();
        let seg = job.segment;
        let per_op = if gso && seg <= GSO_MAX_BYTES {
            (GSO_MAX_BYTES / seg).clamp(1, GSO_MAX_SEGMENTS)
        } else {
            1
        };
        let mut inflight = VecDeque::with_capacity(plan.depth);
        let mut sums = SendStats::default();
        let mut start = 0;
        let mut gso_refused = false;
        while start < len {
            let end = (start + per_op * seg).min(len);
            let datagrams = (end - start).div_ceil(seg) as u64;
            let segment = (gso && datagrams > 1).then_some(seg as u16);
            let part = Part {
                buf: buf.clone(),
                start,
                end,
            };
            inflight.push_back(tokio_uring::spawn(send_one(
                socket.clone(),
                part,
                segment,
                datagrams,
                plan.zero_copy,
                port,
            )));
            if inflight.len() >= plan.depth
                && let Some(t) = inflight.pop_front()
            {
                let o = joined(t.await, &mut panic);
                gso_refused |= o.is_err() && gso;
                tally(o, &mut sums);
            }
            start = end;
        }
        for t in inflight {
            let o = joined(t.await, &mut panic);
            gso_refused |= o.is_err() && gso;
            tally(o, &mut sums);
        }
        if gso_refused {
            tracing::warn!("UDP GSO send failed on this path; sending without it from now on");
            gso = false;
        }
        {
            let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
            s.datagrams += sums.datagrams;
            s.bytes += sums.bytes;
            s.calls += sums.calls;
            s.errors += sums.errors;
        }
        if let Ok(v) = Arc::try_unwrap(buf) {
            let _ = free.try_send(v);
        }
        done.notify();
        if panic.is_some() {
            return panic;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rx() -> std::net::UdpSocket {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        // Room for the whole test stream (the 208 KiB default holds about 90 of them).
        socket2::SockRef::from(&rx)
            .set_recv_buffer_size(4 << 20)
            .unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        rx
    }

    /// The configured depth, send buffer and GSO reach the sending thread; before, the socket
    /// was a plain std socket and every datagram one `send`.
    #[test]
    fn honours_depth_send_buffer_and_gso() {
        for gso in [false, true] {
            let rx = rx();
            let mut cfg = SenderConfig::new(rx.local_addr().unwrap());
            cfg.gso = gso;
            cfg.uring_depth = 2;
            cfg.send_buffer = 1 << 20;
            let mut tx = UringSender::new(&cfg, false).unwrap();
            let mut buf = tx.buffer();
            buf.extend((0..100 * 1000).map(|i| (i / 1000) as u8));
            tx.submit(buf, 1000).unwrap();
            let s = tx.close();
            assert_eq!(s.datagrams, 100, "gso {gso}: {s:?}");
            if gso && sys::udp_gso_supported() {
                assert!(s.calls < 10, "GSO sends super-datagrams: {s:?}");
            } else {
                assert_eq!(s.calls, 100);
            }
            let mut b = [0u8; 2000];
            let recv = |b: &mut [u8]| loop {
                match rx.recv(b) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    r => break r.unwrap(),
                }
            };
            for i in 0..100u8 {
                let n = recv(&mut b);
                assert_eq!((n, b[0]), (1000, i));
            }
        }
        let mut cfg = SenderConfig::new("127.0.0.1:9".parse().unwrap());
        cfg.uring_depth = 0;
        assert!(matches!(
            UringSender::new(&cfg, false),
            Err(Error::Config(_))
        ));
    }

    #[test]
    fn a_full_queue_hands_the_buffer_back_instead_of_blocking() {
        let rx = rx();
        let mut tx = UringSender::new(&SenderConfig::new(rx.local_addr().unwrap()), false).unwrap();
        let start = std::time::Instant::now();
        let mut full = 0;
        for _ in 0..64 {
            match tx.submit(vec![1u8; 60_000], 1000) {
                Ok(()) => {}
                Err(Submit::Full(b)) => {
                    assert_eq!(b.len(), 60_000);
                    full += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        assert!(full > 0, "64 large batches never filled a queue of {QUEUE}");
        assert!(
            tx.notifier()
                .wait_timeout(std::time::Duration::from_secs(5))
        );
        drop(tx);
    }
}
