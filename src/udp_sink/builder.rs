//! [`UdpSinkBuilder`]: the options of a [`UdpSink`], checked at [`build`](UdpSinkBuilder::build).

use std::marker::PhantomData;
use std::net::{SocketAddr, ToSocketAddrs};

use fsdr_net_io::Format;
use fsdr_net_io::format::vrt::context::IfContext;
use fsdr_net_io::format::vrt::context::version::VersionInfo;
use fsdr_net_io::sample::{Encoder, Item, WireFormat};
use fsdr_net_io::send::{ContextSender, Framer, Pacer, Sender, SenderConfig};
use futuresdr::runtime::dev::prelude::*;

use super::{Framing, Out, UdpSink};
use crate::Error;

/// Builds a [`UdpSink`]. Settings are checked at [`build`](Self::build): a payload smaller
/// than one item or not a whole number of items, a batch of 0, or a wire format that does not
/// encode the items is an error there.
#[derive(Debug, Clone)]
pub struct UdpSinkBuilder<T> {
    dest: Result<SocketAddr, String>,
    cfg: Option<SenderConfig>,
    bind: Option<Result<SocketAddr, String>>,
    format: Format,
    wire: Option<WireFormat>,
    payload_bytes: Option<usize>,
    batch: usize,
    gso: bool,
    sample_rate: Option<f64>,
    timestamps: Option<(u64, f64)>,
    utc: Option<(u32, u64)>,
    stream_id: Option<u32>,
    uring: Option<bool>,
    batch_workers: bool,
    /// The context to send, and whether as DIFI's standard context packets.
    context: Option<(IfContext, bool)>,
    context_every: u64,
    difi_version: Option<VersionInfo>,
    _items: PhantomData<T>,
}

impl<T: Item> UdpSinkBuilder<T> {
    pub(super) fn new(dest: impl ToSocketAddrs + std::fmt::Debug) -> Self {
        Self {
            dest: fsdr_net_io::resolve(dest).map_err(|e| e.to_string()),
            cfg: None,
            bind: None,
            format: Format::Raw,
            wire: None,
            payload_bytes: None,
            batch: 32,
            gso: true,
            sample_rate: None,
            timestamps: None,
            utc: None,
            stream_id: None,
            uring: None,
            batch_workers: true,
            context: None,
            context_every: 0,
            difi_version: None,
            _items: PhantomData,
        }
    }

    /// Move the FutureSDR worker threads this block runs on to `SCHED_BATCH` (default: yes);
    /// see [`UdpSourceBuilder::batch_workers`](crate::UdpSourceBuilder::batch_workers).
    pub fn batch_workers(mut self, on: bool) -> Self {
        self.batch_workers = on;
        self
    }

    /// Send through io_uring (tokio-uring) on a dedicated thread instead of `sendmmsg`;
    /// `zero_copy` uses `IORING_OP_SEND_ZC` (Linux ≥ 6.0). Needs the `uring` feature.
    pub fn uring(mut self, zero_copy: bool) -> Self {
        self.uring = Some(zero_copy);
        self
    }
    /// Packet format (default raw).
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }
    /// Wire sample encoding (default: the format's for complex items, see
    /// [`WireFormat::default_for`]).
    pub fn wire_format(mut self, wire: WireFormat) -> Self {
        self.wire = Some(wire);
        self
    }
    /// Payload bytes per datagram, after the header: a whole number of items (default: the
    /// most items that fit 8000 bytes with the header).
    pub fn payload_bytes(mut self, bytes: usize) -> Self {
        self.payload_bytes = Some(bytes);
        self
    }
    /// Datagrams per `sendmmsg` call (default 32; 1..=1024).
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = n;
        self
    }
    /// Use UDP GSO when the kernel has it (default on).
    pub fn gso(mut self, on: bool) -> Self {
        self.gso = on;
        self
    }
    /// Local address to send from (anything `ToSocketAddrs` takes).
    pub fn bind(mut self, addr: impl ToSocketAddrs + std::fmt::Debug) -> Self {
        self.bind = Some(fsdr_net_io::resolve(addr).map_err(|e| e.to_string()));
        self
    }
    /// Pace to this many items per second (token bucket; unpaced when not set).
    pub fn sample_rate(mut self, sps: f64) -> Self {
        self.sample_rate = Some(sps);
        self
    }
    /// CHDR/VRT timestamps: the first item at `start` ticks, `ticks_per_item` (a positive
    /// number) after that. Other formats have no timestamp: an error at build.
    pub fn timestamps(mut self, start: u64, ticks_per_item: f64) -> Self {
        self.timestamps = Some((start, ticks_per_item));
        self
    }
    /// VRT: DIFI's timestamps — integer UTC seconds and picoseconds, the first item at
    /// `epoch_seconds`, every later one exact for `sample_rate` samples per second (integer
    /// arithmetic; a `tx_time` tag then counts picoseconds since the epoch). Instead of
    /// [`timestamps`](Self::timestamps), whose sample count VITA-49 allows but DIFI does not.
    pub fn utc_timestamps(mut self, epoch_seconds: u32, sample_rate: u64) -> Self {
        self.utc = Some((epoch_seconds, sample_rate));
        self
    }
    /// Stream identifier: VRT stream ID, CHDR destination endpoint (16 bits; default 0,
    /// channel 0 as the emulator numbers channels: `fsdr_net::io::emulator::channel_stream_id`).
    /// Other formats have none: an error at build.
    pub fn stream_id(mut self, id: u32) -> Self {
        self.stream_id = Some(id);
        self
    }
    /// VRT: send DIFI standard context packets stating `ctx`; setting tags change it (see
    /// [`UdpSink`]). Without it a VRT stream carries data packets only. DIFI requires every
    /// field of its packet: each must be set in `ctx` (an error at build names those that
    /// are not, [`IfContext::difi_missing`]) but three the sink states itself when `ctx`
    /// does not: the sample rate (the builder's [`sample_rate`](Self::sample_rate)), the
    /// payload format (the wire format's, `WireFormat::vita49_payload_format`) and the state
    /// and event indicators (none valid: 0, their enable bits clear). A sender that does not
    /// know a field sends VITA-49.2 context instead ([`vita49_context`](Self::vita49_context)).
    ///
    /// ```
    /// use fsdr_net::UdpSink;
    /// use fsdr_net::io::Format;
    /// use fsdr_net::io::format::vrt::context::IfContext;
    /// use futuresdr::num_complex::Complex;
    ///
    /// let radio = IfContext {
    ///     rf_ref_freq_hz: Some(2.4e9),
    ///     bandwidth_hz: Some(8e6),
    ///     gain_db: Some((20.0, 0.0)), // stage 1, stage 2
    ///     reference_level_dbm: Some(-10.0),
    ///     if_ref_freq_hz: Some(0.0), // baseband
    ///     if_band_offset_hz: Some(0.0),
    ///     reference_point_id: Some(0),
    ///     timestamp_adjustment_fs: Some(0),
    ///     timestamp_cal_time: Some(0),
    ///     ..Default::default()
    /// };
    /// let sink = UdpSink::<Complex<f32>>::builder("127.0.0.1:49000")
    ///     .format(Format::Vrt)
    ///     .sample_rate(10e6)
    ///     .timestamps(0, 1.0)
    ///     .context(radio.clone())
    ///     .context_every(1000)
    ///     .build();
    /// assert!(sink.is_ok());
    /// // A field DIFI requires and nobody set is an error, not a zero on the wire.
    /// let e = UdpSink::<Complex<f32>>::builder("127.0.0.1:49000")
    ///     .format(Format::Vrt)
    ///     .sample_rate(10e6)
    ///     .context(IfContext { gain_db: None, ..radio })
    ///     .build()
    ///     .err()
    ///     .unwrap();
    /// assert!(e.to_string().contains("gain_db"), "{e}");
    /// ```
    pub fn context(mut self, ctx: IfContext) -> Self {
        self.context = Some((ctx, true));
        self
    }
    /// VRT: send VITA-49.2 IF context packets (no DIFI class ID) stating the fields `ctx`
    /// sets and no others — a field not set is not in the packet (its CIF0 bit clear), so a
    /// receiver tags nothing for it; setting tags change it as with
    /// [`context`](Self::context) (the sample rate defaults to the builder's).
    ///
    /// ```
    /// use fsdr_net::UdpSink;
    /// use fsdr_net::io::Format;
    /// use fsdr_net::io::format::vrt::context::IfContext;
    /// use futuresdr::num_complex::Complex;
    ///
    /// let sink = UdpSink::<Complex<f32>>::builder("127.0.0.1:49000")
    ///     .format(Format::Vrt)
    ///     .sample_rate(1e6)
    ///     .vita49_context(IfContext { rf_ref_freq_hz: Some(2.4e9), ..Default::default() })
    ///     .build();
    /// assert!(sink.is_ok());
    /// ```
    pub fn vita49_context(mut self, ctx: IfContext) -> Self {
        self.context = Some((ctx, false));
        self
    }
    /// VRT with [`context`](Self::context): repeat the context every `n` data packets, as
    /// DIFI asks of a stream a receiver may join late (default 0: on start and on changes).
    pub fn context_every(mut self, n: u64) -> Self {
        self.context_every = n;
        self
    }
    /// VRT with [`context`](Self::context): also send DIFI 1.1 version packets with this
    /// version and build code (with the first context packet and its repeats).
    pub fn difi_version(mut self, v: VersionInfo) -> Self {
        self.difi_version = Some(v);
        self
    }
    /// Full control over the sending socket (destination, batch and GSO taken from the
    /// builder).
    pub fn sender_config(mut self, cfg: SenderConfig) -> Self {
        self.cfg = Some(cfg);
        self
    }

    /// Checks the settings, opens and connects the socket.
    pub fn build(self) -> Result<UdpSink<T>, Error> {
        let dest = self.dest.clone().map_err(Error::Config)?;
        if self
            .sample_rate
            .is_some_and(|r| !(r.is_finite() && r > 0.0))
        {
            return Err(Error::config("sample_rate must be a positive number"));
        }
        if !(1..=fsdr_net_io::send::MAX_BATCH).contains(&self.batch) {
            return Err(Error::config(format!(
                "batch {} outside 1..={}",
                self.batch,
                fsdr_net_io::send::MAX_BATCH
            )));
        }
        if let Some((_, tpi)) = self.timestamps
            && !(tpi.is_finite() && tpi > 0.0)
        {
            return Err(Error::config(format!(
                "timestamps: {tpi} ticks per item must be a positive number"
            )));
        }
        // Header fields the format has no room for are an error, never dropped or truncated.
        let fields = matches!(self.format, Format::Chdr | Format::Vrt);
        if !fields && (self.timestamps.is_some() || self.stream_id.is_some()) {
            return Err(Error::config(format!(
                "timestamps and stream_id are CHDR and VRT header fields; {} datagrams have none",
                self.format
            )));
        }
        if let Some(id) = self
            .stream_id
            .filter(|&id| self.format == Format::Chdr && id > 0xffff)
        {
            return Err(Error::config(format!(
                "stream_id {id} does not fit CHDR's 16-bit destination endpoint"
            )));
        }
        // As the source: items that are not complex are not a CHDR or VRT stream's samples
        // unless `plain` is asked for.
        let wire = match self.wire {
            Some(w) => w,
            None => WireFormat::for_items::<T>(self.format)?,
        };
        let encoder = Encoder::<T>::new(wire)?;
        if (self.context_every > 0 || self.difi_version.is_some()) && self.context.is_none() {
            return Err(Error::config(
                "context_every and difi_version need context (the IfContext to send)",
            ));
        }
        if self.context.is_some() && self.format != Format::Vrt {
            return Err(Error::config(format!(
                "context packets are VRT's; the format is {}",
                self.format
            )));
        }
        if self.difi_version.is_some() && matches!(self.context, Some((_, false))) {
            return Err(Error::config(
                "difi_version goes with DIFI's context (context), not vita49_context",
            ));
        }
        let context = match self.context.clone() {
            None => None,
            Some((mut ctx, difi)) => {
                let id = self.stream_id.unwrap_or(0);
                ctx.sample_rate_sps = ctx.sample_rate_sps.or(self.sample_rate);
                let mut c = if difi {
                    ctx.payload_format = ctx.payload_format.or(wire.vita49_payload_format());
                    ctx.state_indicators = ctx.state_indicators.or(Some(0));
                    let missing = ctx.difi_missing();
                    if !missing.is_empty() {
                        return Err(Error::config(format!(
                            "context: DIFI standard context packets state every field DIFI \
                             requires; not set: {} (set them in the IfContext, or send \
                             VITA-49.2 context with only the fields set: vita49_context)",
                            missing.join(", ")
                        )));
                    }
                    ContextSender::new(ctx, id)
                } else {
                    ContextSender::vita49(ctx, id)
                };
                c = c.every(self.context_every);
                if let Some(v) = self.difi_version {
                    c = c.version(v);
                }
                Some(c)
            }
        };
        let mut framer = Framer::new(self.format);
        if let Some((start, tpi)) = self.timestamps {
            framer = framer.timestamps(start, tpi);
        }
        if let Some((epoch, rate)) = self.utc {
            if self.format != Format::Vrt || self.timestamps.is_some() || rate == 0 {
                return Err(Error::config(
                    "utc_timestamps are VRT's, instead of timestamps, with a sample rate above 0",
                ));
            }
            framer = framer.utc_timestamps(epoch, rate);
        }
        if let Some(id) = self.stream_id {
            framer = framer.stream_id(id);
        }
        let wb = encoder.bytes_per_item();
        let header = framer.header_len();
        let payload_bytes = self
            .payload_bytes
            .unwrap_or_else(|| (8000usize.saturating_sub(header) / wb / 4 * 4).max(1) * wb);
        if payload_bytes < wb || !payload_bytes.is_multiple_of(wb) {
            return Err(Error::config(format!(
                "payload_bytes {payload_bytes} is not a whole number (≥ 1) of {wb}-byte {} items",
                T::NAME
            )));
        }
        let payload_items = payload_bytes / wb;
        let max = fsdr_net_io::send::MAX_UDP_PAYLOAD;
        if payload_bytes > max {
            return Err(Error::config(format!(
                "payload_bytes {payload_bytes} exceed UDP's {max}"
            )));
        }
        let datagram = header + payload_bytes + framer.pad_for(payload_bytes);
        if datagram > max {
            return Err(Error::config(format!(
                "a datagram of {datagram} bytes exceeds UDP's {max}"
            )));
        }
        let mut cfg = self.cfg.clone().unwrap_or_else(|| SenderConfig::new(dest));
        cfg.dest = dest;
        cfg.batch = self.batch;
        cfg.gso = self.gso;
        if let Some(b) = self.bind.clone() {
            cfg.bind = Some(b.map_err(Error::Config)?);
        }
        let out = match self.uring {
            #[cfg(feature = "uring")]
            Some(zero_copy) => Out::Uring(
                Some(fsdr_net_io::send::UringSender::new(&cfg, zero_copy)?),
                Default::default(),
            ),
            #[cfg(not(feature = "uring"))]
            Some(_) => {
                return Err(Error::config(
                    "UdpSink::uring needs the `uring` feature of fsdr-net",
                ));
            }
            None => Out::Mmsg(Sender::new(&cfg)?),
        };
        let mut input = DefaultCpuReader::<T>::default();
        input.set_min_buffer_size_in_items(payload_items * self.batch);
        let pacer = self
            .sample_rate
            .map(|sps| Pacer::new(sps * wb as f64, datagram * self.batch));
        Ok(UdpSink {
            input,
            out,
            framing: Framing {
                framer,
                encoder,
                payload_items,
                pad_bytes: 0,
                clipped: 0,
            },
            staging: vec![0u8; datagram * self.batch],
            batch: self.batch,
            pacer,
            not_before: None,
            items_sent: 0,
            batch_workers: self.batch_workers,
            eob_flag: matches!(self.format, Format::Chdr | Format::Vrt),
            open_burst: false,
            warned_time: false,
            warned_clipped: false,
            context,
        })
    }
}
