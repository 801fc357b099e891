//! [`UdpSink`]: sends a stream as datagrams in any format of `fsdr-net-io`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fsdr_net_io::Format;
use fsdr_net_io::send::{Framer, Pacer, SendStats, Sender, SenderConfig};
use fsdr_net_io::send_uring::UringSender;
use futuresdr::runtime::Timer;
use futuresdr::runtime::dev::prelude::*;
use num_complex::Complex32;

use crate::sample::{IqOrder, PlainItem, Sc16, as_bytes};

/// How a sink turns items into payload bytes.
#[derive(Debug, Clone, Copy)]
struct Encoder<T> {
    wire_bytes: usize,
    encode: fn(&[T], &mut [u8]) -> usize,
}

fn copy_plain<T: PlainItem>(items: &[T], wire: &mut [u8]) -> usize {
    let b = as_bytes(items);
    wire[..b.len()].copy_from_slice(b);
    b.len()
}

/// Builds a [`UdpSink`].
#[derive(Debug, Clone)]
pub struct UdpSinkBuilder<T> {
    dest: String,
    cfg: Option<SenderConfig>,
    bind: Option<SocketAddr>,
    format: Format,
    payload_bytes: usize,
    batch: usize,
    gso: bool,
    sample_rate: Option<f64>,
    timestamps: Option<(u64, f64)>,
    encoder: Encoder<T>,
    uring: Option<bool>,
}

/// Where a sink's datagrams go out.
enum Out {
    /// `sendmmsg` (with UDP GSO where available) on the scheduler's thread.
    Mmsg(Sender),
    /// io_uring on a dedicated thread; `None` once closed.
    Uring(Option<UringSender>, SendStats),
}

impl<T: PlainItem> UdpSinkBuilder<T> {
    /// Send through io_uring (tokio-uring) on a dedicated thread instead of `sendmmsg`;
    /// `zero_copy` uses `IORING_OP_SEND_ZC` (Linux ≥ 6.0).
    pub fn uring(mut self, zero_copy: bool) -> Self {
        self.uring = Some(zero_copy);
        self
    }

    /// Wire format (default raw).
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }
    /// Payload bytes per datagram, after the header (default 8000 less the header);
    /// rounded down to whole items.
    pub fn payload_bytes(mut self, bytes: usize) -> Self {
        self.payload_bytes = bytes;
        self
    }
    /// Datagrams per `sendmmsg` call (default 32).
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = n.max(1);
        self
    }
    /// Use UDP GSO when the kernel has it (default on).
    pub fn gso(mut self, on: bool) -> Self {
        self.gso = on;
        self
    }
    /// Local address to send from.
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = Some(addr);
        self
    }
    /// Pace to this many items per second (token bucket; unpaced when not set).
    pub fn sample_rate(mut self, sps: f64) -> Self {
        self.sample_rate = Some(sps);
        self
    }
    /// CHDR/VRT timestamps: first datagram at `start` ticks, `ticks_per_item` after that.
    pub fn timestamps(mut self, start: u64, ticks_per_item: f64) -> Self {
        self.timestamps = Some((start, ticks_per_item));
        self
    }
    /// Full control over the sending socket (destination taken from the builder).
    pub fn sender_config(mut self, cfg: SenderConfig) -> Self {
        self.cfg = Some(cfg);
        self
    }

    /// Opens and connects the socket.
    pub fn build(self) -> std::io::Result<UdpSink<T>> {
        let dest: SocketAddr = self.dest.parse().map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("destination {:?}: {e}", self.dest),
            )
        })?;
        let mut cfg = self.cfg.unwrap_or_else(|| SenderConfig::new(dest));
        cfg.dest = dest;
        cfg.batch = self.batch;
        cfg.gso = self.gso;
        if self.bind.is_some() {
            cfg.bind = self.bind;
        }
        let out = match self.uring {
            Some(zero_copy) => Out::Uring(
                Some(UringSender::new(&cfg, zero_copy)?),
                SendStats::default(),
            ),
            None => Out::Mmsg(Sender::new(&cfg)?),
        };
        let payload_items = (self.payload_bytes / self.encoder.wire_bytes).max(1);
        let mut framer = Framer::new(self.format);
        if let Some((start, tpi)) = self.timestamps {
            framer = framer.timestamps(start, (payload_items as f64 * tpi).round() as u64);
        }
        let header = framer.header_len();
        let datagram = header + payload_items * self.encoder.wire_bytes;
        if self.format == Format::Vrt && !datagram.is_multiple_of(4) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "VRT datagrams must be a multiple of 4 bytes: choose another payload size",
            ));
        }
        let mut input = DefaultCpuReader::<T>::default();
        input.set_min_buffer_size_in_items(payload_items * self.batch);
        let pacer = self
            .sample_rate
            .map(|sps| Pacer::new(sps * self.encoder.wire_bytes as f64, datagram * self.batch));
        Ok(UdpSink {
            input,
            out,
            framer,
            encoder: self.encoder,
            payload_items,
            header,
            staging: vec![0u8; datagram * self.batch],
            batch: self.batch,
            pacer,
            not_before: None,
            items_sent: 0,
        })
    }
}

impl UdpSinkBuilder<Complex32> {
    /// Send `Complex<f32>` as USRP sc16 in `order`, scaled as UHD does.
    pub fn sc16(mut self, order: IqOrder) -> Self {
        fn iq(s: &[Complex32], w: &mut [u8]) -> usize {
            Sc16 { order: IqOrder::IQ }.encode(s, w)
        }
        fn qi(s: &[Complex32], w: &mut [u8]) -> usize {
            Sc16 { order: IqOrder::QI }.encode(s, w)
        }
        self.encoder = Encoder {
            wire_bytes: Sc16::WIRE_BYTES,
            encode: match order {
                IqOrder::IQ => iq,
                IqOrder::QI => qi,
            },
        };
        self
    }
}

/// Sends its input as UDP datagrams of a fixed payload size, in any format of `fsdr-net-io`
/// (raw, GNU Radio sequence headers, CHDR with or without timestamps, VRT), in `sendmmsg`
/// batches (with UDP GSO where available), optionally paced to a sample rate by a token
/// bucket. When the input ends, the remaining items go out in a last, shorter datagram.
///
/// # Stream Inputs
///
/// `input`: items to send.
///
/// # Stream Outputs
///
/// No stream outputs.
///
/// # Usage
/// ```no_run
/// use fsdr_net::UdpSink;
/// use fsdr_net::io::Format;
///
/// let sink = UdpSink::<f32>::builder("127.0.0.1:49000")
///     .format(Format::Seq64)
///     .payload_bytes(8000)
///     .sample_rate(1e6)
///     .build()
///     .unwrap();
/// ```
#[derive(Block)]
pub struct UdpSink<T: PlainItem> {
    #[input]
    input: DefaultCpuReader<T>,
    out: Out,
    framer: Framer,
    encoder: Encoder<T>,
    payload_items: usize,
    header: usize,
    staging: Vec<u8>,
    batch: usize,
    pacer: Option<Pacer>,
    /// Paced: no datagram before this instant. FutureSDR also wakes a block when upstream
    /// produces, so a timer alone would not hold the rate.
    not_before: Option<Instant>,
    items_sent: u64,
}

impl<T: PlainItem> UdpSink<T> {
    /// A builder for a sink sending to `dest` (e.g. `"127.0.0.1:49000"`).
    pub fn builder(dest: impl Into<String>) -> UdpSinkBuilder<T> {
        UdpSinkBuilder {
            dest: dest.into(),
            cfg: None,
            bind: None,
            format: Format::Raw,
            payload_bytes: 8000,
            batch: 32,
            gso: true,
            sample_rate: None,
            timestamps: None,
            uring: None,
            encoder: Encoder {
                wire_bytes: std::mem::size_of::<T>(),
                encode: copy_plain::<T>,
            },
        }
    }

    /// Items sent so far.
    pub fn items_sent(&self) -> u64 {
        self.items_sent
    }

    /// The sender's counters (datagrams, bytes, syscalls, errors).
    pub fn send_stats(&self) -> SendStats {
        match &self.out {
            Out::Mmsg(s) => s.stats(),
            Out::Uring(Some(u), _) => u.stats(),
            Out::Uring(None, last) => *last,
        }
    }
}

#[doc(hidden)]
impl<T: PlainItem> Kernel for UdpSink<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        if let Some(at) = self.not_before {
            let now = Instant::now();
            if now < at {
                io.block_on(async move {
                    Timer::after(at - now).await;
                });
                return Ok(());
            }
            self.not_before = None;
        }
        let finished = self.input.finished();
        let items = self.input.slice();
        let per = self.payload_items;
        let mut n_dg = (items.len() / per).min(self.batch);
        let mut last = 0;
        if n_dg == 0 && finished && !items.is_empty() {
            last = items.len().min(per);
        }
        if n_dg == 0 && last == 0 {
            if finished {
                io.finished = true;
            }
            return Ok(());
        }
        let wb = self.encoder.wire_bytes;
        let dg_len = self.header + per * wb;
        if last > 0 {
            n_dg = 1;
        }
        let total = if last > 0 {
            self.header + last * wb
        } else {
            n_dg * dg_len
        };
        let mut target = match &mut self.out {
            Out::Uring(Some(u), _) => u.buffer(),
            _ => std::mem::take(&mut self.staging),
        };
        target.resize(total.max(target.len()), 0);
        let mut bytes = 0;
        for k in 0..n_dg {
            let count = if last > 0 { last } else { per };
            let len = self.header + count * wb;
            let dg = &mut target[k * dg_len..k * dg_len + len];
            self.framer
                .frame(dg)
                .map_err(|e| anyhow::anyhow!("framing a datagram: {e}"))?;
            (self.encoder.encode)(&items[k * per..k * per + count], &mut dg[self.header..]);
            bytes += len;
        }
        let sent_items = if last > 0 { last } else { n_dg * per };
        let segment = if last > 0 { bytes } else { dg_len };
        let sent = match &mut self.out {
            Out::Mmsg(sender) => {
                let r = sender.send_segments(&target[..bytes], segment);
                self.staging = target;
                r
            }
            Out::Uring(Some(u), _) => {
                target.truncate(bytes);
                u.submit(target, segment)
            }
            Out::Uring(None, _) => Err(std::io::Error::other("sink closed")),
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, "UdpSink: send failed; {} items lost", sent_items);
        }
        self.input.consume(sent_items);
        self.items_sent += sent_items as u64;
        let wait = self
            .pacer
            .as_mut()
            .map_or(Duration::ZERO, |p| p.delay(bytes));
        if wait > Duration::ZERO {
            self.not_before = Some(Instant::now() + wait);
            io.block_on(async move {
                Timer::after(wait).await;
            });
        } else {
            io.call_again = true;
        }
        Ok(())
    }

    async fn deinit(&mut self, _mo: &mut MessageOutputs, _meta: &mut BlockMeta) -> Result<()> {
        // Everything queued for the io_uring thread goes out before the flowgraph ends.
        if let Out::Uring(u, last) = &mut self.out
            && let Some(u) = u.take()
        {
            *last = u.close();
        }
        Ok(())
    }
}
