//! [`UringSender`]: sends batches through io_uring (tokio-uring) on a dedicated thread, with
//! every datagram of a batch in flight at once, optionally as zero-copy sends
//! (`IORING_OP_SEND_ZC`, Linux ≥ 6.0).
//!
//! ```
//! use fsdr_net_io::send::SenderConfig;
//! use fsdr_net_io::send_uring::UringSender;
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

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tokio_uring::buf::IoBuf;

use crate::send::{SendStats, SenderConfig};

/// A part of a shared buffer lent to one send operation; the `Arc` keeps the memory alive
/// until the kernel is done with it.
struct Part {
    buf: Arc<Vec<u8>>,
    start: usize,
    end: usize,
}

// SAFETY: the pointer is into a Vec owned by an Arc that this value holds, so it is stable and
// valid for `end - start` initialised bytes for as long as the operation owns the Part.
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

/// Sends through io_uring on its own thread. See the [module documentation](self).
pub struct UringSender {
    jobs: Option<SyncSender<Job>>,
    free: Receiver<Vec<u8>>,
    stats: Arc<Mutex<SendStats>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for UringSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringSender").finish_non_exhaustive()
    }
}

impl UringSender {
    /// Connects a socket to `cfg.dest` and starts the sending thread; `zero_copy` uses
    /// `send_zc`.
    pub fn new(cfg: &SenderConfig, zero_copy: bool) -> io::Result<Self> {
        let bind = cfg.bind.unwrap_or_else(|| match cfg.dest {
            SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
            SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
        });
        let socket = UdpSocket::bind(bind)?;
        socket.connect(cfg.dest)?;
        // Fail here when io_uring is not available.
        drop(tokio_uring::Runtime::new(&tokio_uring::builder())?);
        let (jobs_tx, jobs_rx) = sync_channel::<Job>(4);
        let (free_tx, free_rx) = sync_channel::<Vec<u8>>(8);
        let stats = Arc::new(Mutex::new(SendStats::default()));
        let st = stats.clone();
        let thread = std::thread::Builder::new()
            .name("fsdr-net-tx-uring".into())
            .spawn(move || {
                let mut b = tokio_uring::builder();
                b.entries(256);
                tokio_uring::start(run(socket, jobs_rx, free_tx, st, zero_copy));
            })?;
        Ok(Self {
            jobs: Some(jobs_tx),
            free: free_rx,
            stats,
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
    /// Blocks while four batches are already queued.
    pub fn submit(&mut self, buf: Vec<u8>, segment: usize) -> io::Result<()> {
        if segment == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "segment of 0 bytes",
            ));
        }
        self.jobs
            .as_ref()
            .ok_or_else(|| io::Error::other("sender closed"))?
            .send(Job { buf, segment })
            .map_err(|_| io::Error::other("sending thread ended"))
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

async fn run(
    socket: UdpSocket,
    jobs: Receiver<Job>,
    free: SyncSender<Vec<u8>>,
    stats: Arc<Mutex<SendStats>>,
    zero_copy: bool,
) {
    let socket = Rc::new(tokio_uring::net::UdpSocket::from_std(socket));
    // The channel is std's: this thread has nothing else to do while it waits.
    while let Ok(job) = jobs.recv() {
        let buf = Arc::new(job.buf);
        let len = buf.len();
        let mut tasks = Vec::with_capacity(len.div_ceil(job.segment));
        let mut start = 0;
        while start < len {
            let end = (start + job.segment).min(len);
            let part = Part {
                buf: buf.clone(),
                start,
                end,
            };
            let socket = socket.clone();
            tasks.push(tokio_uring::spawn(async move {
                let (res, _) = if zero_copy {
                    socket.send_zc(part).await
                } else {
                    socket.send(part).await
                };
                res.map(|n| (n, end - start))
            }));
            start = end;
        }
        let (mut datagrams, mut bytes, mut errors) = (0u64, 0u64, 0u64);
        for t in tasks {
            match t.await {
                Ok(Ok((n, _))) => {
                    datagrams += 1;
                    bytes += n as u64;
                }
                _ => errors += 1,
            }
        }
        {
            let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
            s.datagrams += datagrams;
            s.bytes += bytes;
            s.calls += datagrams + errors;
            s.errors += errors;
        }
        if let Ok(v) = Arc::try_unwrap(buf) {
            let _ = free.try_send(v);
        }
    }
}
