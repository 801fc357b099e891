//! [`StreamSender`]: the built-in stream generator (datagrams of one size and format, paced
//! to a byte rate) that examples, tests and benchmarks use.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Framer, MAX_UDP_PAYLOAD, Pacer, Sender, SenderConfig};
use crate::Error;
use crate::format::Format;

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
    stop: Option<Arc<AtomicBool>>,
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

    /// Bytes per datagram, header included (more than the header, at most 65507).
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

    /// Pace to `bytes_per_s` (a positive number; whole datagrams, headers included).
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
    pub fn stop_flag(mut self, flag: Arc<AtomicBool>) -> Self {
        self.stop = Some(flag);
        self
    }

    /// Sends on the calling thread.
    pub fn run(mut self) -> Result<SendReport, Error> {
        let mut sender = Sender::new(&self.cfg)?;
        let mut framer = Framer::new(self.format);
        let size = self.datagram_size;
        let header = framer.header_len();
        if let Some(r) = self.rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
            return Err(Error::config(format!(
                "rate {r} bytes/s must be a positive number (None: unpaced)"
            )));
        }
        if size <= header || size > MAX_UDP_PAYLOAD {
            return Err(Error::config(format!(
                "datagram size {size}: a payload after the {header}-byte header, and at most \
                 UDP's {MAX_UDP_PAYLOAD} bytes"
            )));
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
        let stopped =
            |s: &Option<Arc<AtomicBool>>| s.as_ref().is_some_and(|f| f.load(Ordering::Relaxed));
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
                    .frame(dg, (size - header) as u64, 0)
                    .map_err(|e| Error::Io(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
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
    pub fn spawn(self) -> std::thread::JoinHandle<Result<SendReport, Error>> {
        std::thread::Builder::new()
            .name("fsdr-net-tx".into())
            .spawn(move || self.run())
            .expect("spawning the sender thread")
    }
}
