//! [`UdpSourceBuilder`]: every option of a [`UdpSource`], resolved at [`build`](UdpSourceBuilder::build)
//! whatever order they were given in.
//!
//! long: every setter of the four source blocks in one place (the latency budget and
//! zero copy included), so that a reader finds each option where the others are; the
//! builds of each block are beside its block.

use std::marker::PhantomData;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use fsdr_net_io::depacketizer::{Depacketizer, DepacketizerConfig};
use fsdr_net_io::engine::ReuseportSpread;
use fsdr_net_io::sample::{Decoder, Item, WireFormat};
use fsdr_net_io::socket::{Multicast, SourceFilter};
use fsdr_net_io::{Backend, Coalesce, Engine, EngineConfig, Format};
use fsdr_net_lttng::Marks;

use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};

use super::{InPlaceUdpSource, UdpSource, limits};
use crate::Error;
use crate::probe::ProbeSpec;

/// Builds a [`UdpSource`]; every option of the receive engine is reachable. Settings are
/// resolved at [`build`](Self::build), so their order does not matter.
#[derive(Debug, Clone)]
pub struct UdpSourceBuilder<T> {
    bind: Result<SocketAddr, String>,
    pub(super) cfg: EngineConfig,
    wire: Option<WireFormat>,
    zero_fill: bool,
    stats_interval: Option<Duration>,
    pub(super) buffer_datagrams: Option<usize>,
    tick_rate: Option<f64>,
    sample_rate: Option<f64>,
    time_tags: bool,
    pub(super) idle_finish: Option<Duration>,
    pub(super) first_wait: Option<Duration>,
    probe_granularity: Option<u64>,
    pub(super) batch_workers: bool,
    pub(super) backend_set: bool,
    /// `reuseport` / `uring_depth` were given: they name their backend.
    reuseport_set: bool,
    uring_depth_set: bool,
    /// As set (`None`: 32, and 8 windows for `zero_copy`).
    pub(super) in_place_buffers: Option<usize>,
    pub(super) stream_threads: Option<usize>,
    /// `coalesce` was given (or changed through `configure`): it wins over the budget.
    pub(super) coalesce_set: bool,
    /// `poll_interval` was changed through `configure`: it wins over the budget.
    pub(super) poll_set: bool,
    pub(super) low_latency: bool,
    /// `zero_copy` as set (`None`: by default).
    pub(super) zero_copy: Option<bool>,
    /// The latency budget given, if any (checked at build).
    pub(super) budget: Option<Duration>,
    _items: PhantomData<T>,
}

impl<T: Item> UdpSourceBuilder<T> {
    pub(super) fn new(bind: impl ToSocketAddrs + std::fmt::Debug) -> Self {
        Self {
            bind: fsdr_net_io::resolve(bind).map_err(|e| e.to_string()),
            cfg: EngineConfig {
                coalesce: Coalesce::for_latency_budget(Self::DEFAULT_LATENCY_BUDGET),
                poll_interval: Self::poll_interval_for(Self::DEFAULT_LATENCY_BUDGET),
                ..EngineConfig::new(SocketAddr::from(([0, 0, 0, 0], 0)))
            },
            wire: None,
            zero_fill: false,
            stats_interval: Some(Duration::from_secs(1)),
            buffer_datagrams: None,
            tick_rate: None,
            sample_rate: None,
            time_tags: true,
            idle_finish: None,
            first_wait: None,
            probe_granularity: None,
            batch_workers: true,
            backend_set: false,
            reuseport_set: false,
            uring_depth_set: false,
            in_place_buffers: None,
            stream_threads: None,
            coalesce_set: false,
            poll_set: false,
            low_latency: false,
            zero_copy: None,
            budget: None,
            _items: PhantomData,
        }
    }

    /// Move the FutureSDR worker threads this block runs on to `SCHED_BATCH` (default: yes),
    /// so that a woken worker does not preempt one that holds the lock of FutureSDR's
    /// circular buffer and spin on it for a scheduler tick; without it a 800 MB/s stream
    /// loses data in the default runtime on a machine with two cores. Real-time workers are
    /// left alone. See `docs/PERFORMANCE.md` ("Two workers spinning on one lock").
    ///
    /// ```
    /// # use fsdr_net::UdpSource;
    /// # use futuresdr::num_complex::Complex32;
    /// let src = UdpSource::<Complex32>::builder("127.0.0.1:0")
    ///     .batch_workers(false)
    ///     .build()?;
    /// # Ok::<(), fsdr_net::Error>(())
    /// ```
    pub fn batch_workers(mut self, on: bool) -> Self {
        self.batch_workers = on;
        self
    }

    /// Fire `fsdr_net:arrival` at every `granularity`-th output item, with the time its
    /// datagram left the kernel, so that a [`ProbeSink`](crate::ProbeSink) built from
    /// [`UdpSource::probe_spec`] measures network-arrival-to-sink latency. (The per-datagram
    /// `fsdr_net:packet` event fires whenever tracing is compiled in.)
    pub fn probe(mut self, granularity: u64) -> Self {
        self.probe_granularity = Some(granularity.max(1));
        self
    }

    /// End the stream (the block finishes) once no datagram has arrived for this long: after
    /// the last datagram, or, when none ever came, this long after the flowgraph started
    /// (see [`first_datagram_within`](Self::first_datagram_within) for a different wait for
    /// the first one). Default: never.
    pub fn finish_after_idle(mut self, idle: Duration) -> Self {
        self.idle_finish = Some(idle);
        self
    }
    /// With [`finish_after_idle`](Self::finish_after_idle): how long to wait for the first
    /// datagram before ending (default: the idle time itself). A radio that takes a while to
    /// start streaming needs more than the silence that ends its stream.
    pub fn first_datagram_within(mut self, wait: Duration) -> Self {
        self.first_wait = Some(wait);
        self
    }
    /// Receive backend (default mio).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend_set = true;
        self.cfg.backend = backend;
        self
    }
    /// Packet format (default raw).
    pub fn format(mut self, format: Format) -> Self {
        self.cfg.format = format;
        self
    }
    /// Wire sample encoding (default: the format's for complex items, see
    /// [`WireFormat::default_for`]); an encoding that does not produce `T` is an error at
    /// build.
    pub fn wire_format(mut self, wire: WireFormat) -> Self {
        self.wire = Some(wire);
        self
    }
    /// Receive buffer to request in bytes (default
    /// [`DEFAULT_RECV_BUFFER`](fsdr_net_io::socket::DEFAULT_RECV_BUFFER), 128 MiB).
    pub fn recv_buffer(mut self, bytes: usize) -> Self {
        self.cfg.socket.recv_buffer = bytes;
        self
    }
    /// Insert zeros for missed frames so the sample timeline stays aligned (default off).
    pub fn zero_fill_missed(mut self, on: bool) -> Self {
        self.zero_fill = on;
        self
    }
    /// Largest datagram accepted whole (default 9216 bytes; 16..=65536).
    pub fn max_datagram(mut self, bytes: usize) -> Self {
        self.cfg.slot_size = bytes;
        self
    }
    /// Datagrams per `recvmmsg` call (1..=1024).
    pub fn batch(mut self, n: usize) -> Self {
        self.cfg.batch = n;
        self
    }
    /// Slots per receive thread (datagrams that may wait for the flowgraph).
    pub fn slots(mut self, n: usize) -> Self {
        self.cfg.slots = n;
        self
    }
    /// Pin receive threads to these CPUs.
    pub fn pin(mut self, cpus: Vec<usize>) -> Self {
        self.cfg.threads.cpus = cpus;
        self
    }
    /// SCHED_FIFO priority for receive threads.
    pub fn fifo_priority(mut self, priority: i32) -> Self {
        self.cfg.threads.fifo_priority = Some(priority);
        self
    }
    /// While the source runs, ask that idle CPUs wake within `max` (`Duration::ZERO`: keep
    /// them polling); needs root. Takes the idle wake-up out of each hand-over, at the cost
    /// of idle CPUs spinning (see [`fsdr_net_io::cpu_latency`]).
    pub fn cpu_latency(mut self, max: Duration) -> Self {
        self.cfg.cpu_latency = Some(max);
        self
    }
    /// Reorder window in datagrams and how long to wait for a missing one (from the arrival
    /// that showed it missing).
    pub fn reorder(mut self, window: usize, timeout: Duration) -> Self {
        self.cfg.reorder_window = window;
        self.cfg.reorder_timeout = timeout;
        self
    }
    /// Who may send.
    pub fn filter(mut self, filter: SourceFilter) -> Self {
        self.cfg.socket.filter = filter;
        self
    }
    /// Accept only this sender.
    pub fn peer(self, peer: SocketAddr) -> Self {
        self.filter(SourceFilter::peer(peer))
    }
    /// Join a multicast group.
    pub fn multicast(mut self, m: Multicast) -> Self {
        self.cfg.socket.multicast = Some(m);
        self
    }
    /// With [`multicast`](Self::multicast): a source-specific join (IGMPv3), so that only
    /// `source`'s datagrams to the group reach this socket (IPv4 groups).
    pub fn multicast_source(mut self, source: std::net::IpAddr) -> Self {
        self.cfg.socket.multicast_source = Some(source);
        self
    }
    /// Kernel receive timestamps.
    pub fn kernel_timestamps(mut self, on: bool) -> Self {
        self.cfg.socket.timestamps = on;
        self
    }
    /// UDP GRO on receive (default off; `mio` and `reuseport` backends, and the in-place
    /// source): the kernel hands over up to 64 KiB of consecutive datagrams per receive,
    /// which the engine splits again in place (the in-place source scatters them straight
    /// into its output buffer). See [`SocketConfig::gro`](fsdr_net_io::socket::SocketConfig::gro).
    pub fn udp_gro(mut self, on: bool) -> Self {
        self.cfg.socket.gro = on;
        self
    }
    /// How often the receive side wakes the block under load, given explicitly (it wins over
    /// [`latency_budget`](Self::latency_budget), whose 2 ms default gives
    /// `Coalesce::Adaptive { frames: 64, time: 1 ms }`: at once when traffic is sparse, at
    /// most every 0.5–1 ms under load).
    ///
    /// For the in-place source at high rates, a time long enough that a *full buffer*
    /// decides each hand-over is the cheapest setting measured (UDP GRO on, about 1.2 MB per
    /// buffer, 4 ms; docs/PERFORMANCE.md, "Hand-overs of whole buffers"): a buffer then
    /// waits the time it takes to fill (1.3 ms at 800 MB/s); when the stream slows down, up
    /// to 2 ms (the adaptive rule wakes on a receive after half the time), and 4 ms when
    /// nothing more arrives.
    ///
    /// ```
    /// # use fsdr_net::UdpSource;
    /// # use fsdr_net::io::{Coalesce, Format};
    /// # use futuresdr::num_complex::Complex;
    /// # use std::time::Duration;
    /// let src = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
    ///     .format(Format::Chdr)
    ///     .tick_rate(200e6)
    ///     .udp_gro(true)
    ///     .buffer_datagrams(128) // room for 128 datagrams of up to 9216 B: 1.2 MB per buffer
    ///     .coalesce(Coalesce::Adaptive {
    ///         frames: usize::MAX, // the buffer's room decides, not a datagram count
    ///         time: Duration::from_millis(4),
    ///     })
    ///     .build_in_place()?;
    /// # Ok::<(), fsdr_net::Error>(())
    /// ```
    pub fn coalesce(mut self, coalesce: Coalesce) -> Self {
        self.cfg.coalesce = coalesce;
        self.coalesce_set = true;
        self
    }

    /// The default [`latency_budget`](Self::latency_budget): 2 ms from arrival to the
    /// block's output under load.
    pub const DEFAULT_LATENCY_BUDGET: Duration = Duration::from_millis(2);
    /// SCHED_FIFO priority of the receive thread with [`low_latency`](Self::low_latency).
    pub const LOW_LATENCY_PRIORITY: i32 = 50;

    /// The one setting that trades CPU for latency: how long a datagram may take from its
    /// arrival to the block's output under load (default 2 ms). The receive side wakes the
    /// block at most every half of it while datagrams keep coming (sooner when 64 wait; the
    /// in-place source when a buffer is full), and at once when traffic is sparse
    /// ([`Coalesce::for_latency_budget`]); under load the receive threads (`mio`,
    /// `reuseport`, in place) read the socket every quarter of it rather than on every arrival
    /// ([`EngineConfig::poll_interval`](fsdr_net_io::EngineConfig::poll_interval)). Each
    /// wake-up saved spares FutureSDR's workers 20–30 µs on a 2-vCPU VM. Measured
    /// (docs/PERFORMANCE.md, "The latency budget"): with the 2 ms default `UdpSource` costs
    /// about half the CPU per GB of the former 50 µs wake-ups at 800 MB/s (0.32 against 0.61
    /// CPU-s/GB), 0.87× at 393 MB/s of 1472 B; arrival to sink at 200 Msps, p99: 0.9 ms in
    /// place, 1.3 ms through the engine (11-28). `Duration::ZERO` wakes after
    /// every receive; see [`low_latency`](Self::low_latency) for the preset. An explicit
    /// [`coalesce`](Self::coalesce) (or a poll interval set through
    /// [`configure`](Self::configure)) wins. (Not the engine's
    /// [`EngineConfig::latency_budget`](fsdr_net_io::EngineConfig::latency_budget), which
    /// bounds the queue when the flowgraph falls behind.)
    ///
    /// ```
    /// # use fsdr_net::UdpSource;
    /// # use futuresdr::num_complex::Complex32;
    /// # use std::time::Duration;
    /// let src = UdpSource::<Complex32>::builder("127.0.0.1:0")
    ///     .latency_budget(Duration::from_micros(200))
    ///     .build()?;
    /// # Ok::<(), fsdr_net::Error>(())
    /// ```
    pub fn latency_budget(mut self, budget: Duration) -> Self {
        self.budget = Some(budget);
        if !self.coalesce_set {
            self.cfg.coalesce = Coalesce::for_latency_budget(budget);
        }
        if !self.poll_set {
            self.cfg.poll_interval = Self::poll_interval_for(budget);
        }
        self
    }

    /// The low-latency preset: a zero [`latency_budget`](Self::latency_budget) (a wake-up
    /// after every receive, the socket read on every arrival), idle CPUs kept polling while
    /// it runs ([`cpu_latency`](Self::cpu_latency) zero) and the receive thread at
    /// SCHED_FIFO priority [`LOW_LATENCY_PRIORITY`](Self::LOW_LATENCY_PRIORITY) unless set
    /// otherwise. Needs root (or CAP_SYS_NICE and access to `/dev/cpu_dma_latency`):
    /// building fails with a clear error otherwise. Measured: arrival to sink p99 59–81 µs
    /// at 200 Msps on a 2-vCPU VM with the sender on the other CPU (`cargo xtask latency
    /// --usrp --rate 200e6 --pin -- --low-latency`; 64–146 µs beside it, 34–41 µs at 50
    /// Msps), at the cost of the most wake-ups and idle CPUs that spin.
    pub fn low_latency(mut self) -> Self {
        self.low_latency = true;
        self.latency_budget(Duration::ZERO)
    }

    /// How often a receive thread reads the socket under `budget`: a quarter of it (none
    /// below 80 µs, where the sleep would be too short to save a wake-up). An eighth cost
    /// the zero-copy source 1.25x the bare loop's CPU per GB at the X410's rate, a quarter
    /// 1.19x, for 60 µs more at p99 (docs/measurements/2026-11-28.md).
    pub(super) fn poll_interval_for(budget: Duration) -> Option<Duration> {
        let every = budget / 4;
        (every >= Duration::from_micros(20)).then_some(every)
    }

    /// Receive straight into the output buffer, FutureSDR's default one: the in-place
    /// receive thread of [`build_in_place`](Self::build_in_place) puts each payload at its
    /// sample position in windows of the buffer's free space, and downstream blocks read it
    /// as usual. By default on where it can be: items that are the wire's bytes (sc16 CHDR
    /// as `Complex<i16>`, sc8 DIFI as `Complex<i8>`, fc32 as `Complex<f32>`, plain bytes) or
    /// that are decoded where the payload landed (sc16 or sc8 as `Complex<f32>`, UHD's item32
    /// layouts: the payload lands at the end of its items' room and is converted forward,
    /// [`Decoder::decodes_in_place`](crate::io::sample::Decoder::decodes_in_place)), no
    /// [`backend`](Self::backend) chosen, and the pause policy under overload; off, the
    /// engine's receive thread and a copy into the buffer (any backend).
    /// Receives with `recvmmsg` (or [`Backend::Xdp`]); what `build_in_place` says of
    /// gaps, GRO and copies holds here too (`copied_bytes`).
    ///
    /// ```
    /// # use fsdr_net::prelude::*;
    /// let src = UdpSource::<num_complex::Complex<i16>>::builder("127.0.0.1:0")
    ///     .format(Format::Chdr)
    ///     .tick_rate(200e6)
    ///     .build()?;
    /// assert_eq!(src.backend(), Some((Backend::Recvmmsg, 1)));
    /// let src = UdpSource::<num_complex::Complex<i16>>::builder("127.0.0.1:0")
    ///     .format(Format::Chdr)
    ///     .tick_rate(200e6)
    ///     .zero_copy(false)
    ///     .build()?;
    /// assert_eq!(src.backend(), Some((Backend::Mio, 1)));
    /// // Converted to Complex<f32> where it lands: in place too.
    /// let src = UdpSource::<num_complex::Complex32>::builder("127.0.0.1:0")
    ///     .format(Format::Chdr)
    ///     .tick_rate(200e6)
    ///     .build()?;
    /// assert_eq!(src.backend(), Some((Backend::Recvmmsg, 1)));
    /// # Ok::<(), fsdr_net::Error>(())
    /// ```
    pub fn zero_copy(mut self, on: bool) -> Self {
        self.zero_copy = Some(on);
        self
    }
    /// `reuseport` threads and optional cBPF spreading. Without [`backend`](Self::backend)
    /// this chooses [`Backend::Reuseport`]; with another backend it is an error at build
    /// (never a setting silently ignored).
    pub fn reuseport(mut self, threads: usize, spread: Option<ReuseportSpread>) -> Self {
        self.cfg.reuseport_threads = threads;
        self.cfg.reuseport_spread = spread;
        self.reuseport_set = true;
        self
    }
    /// `uring` receive operations in flight. Without [`backend`](Self::backend) this
    /// chooses [`Backend::Uring`] (the `uring` feature); with another backend it is an
    /// error at build.
    pub fn uring_depth(mut self, depth: usize) -> Self {
        self.cfg.uring_depth = depth;
        self.uring_depth_set = true;
        self
    }
    /// The backend chosen, by [`backend`](Self::backend) or by a setting that only one
    /// backend has; `None`: the default.
    fn chosen_backend(&self) -> Result<Option<Backend>, Error> {
        limits::chosen_backend(
            self.backend_set.then_some(self.cfg.backend),
            self.reuseport_set,
            self.uring_depth_set,
        )
    }
    /// Any other engine option.
    pub fn configure(mut self, f: impl FnOnce(&mut EngineConfig)) -> Self {
        let before = (self.cfg.coalesce, self.cfg.poll_interval);
        f(&mut self.cfg);
        self.coalesce_set |= self.cfg.coalesce != before.0;
        self.poll_set |= self.cfg.poll_interval != before.1;
        self
    }
    /// Send all counters on the `stats` port this often (`None`: only the final message;
    /// default 1 s).
    pub fn stats_interval(mut self, every: Option<Duration>) -> Self {
        self.stats_interval = every;
        self
    }
    /// Size the output buffer for at least this many maximum-size datagrams (at least 1;
    /// default 16, and for the in-place source, whose buffers go downstream whole — fewer,
    /// larger hand-overs — 64 per buffer of items that are the wire's bytes, as many wire
    /// bytes' worth of converted ones: 32 of sc16 as `Complex<f32>`).
    pub fn buffer_datagrams(mut self, n: usize) -> Self {
        self.buffer_datagrams = Some(n);
        self
    }
    /// Device tick rate in Hz: CHDR timestamps count its ticks (an X310 runs at 200e6). For
    /// VRT sample-count timestamps it defaults to the sample rate.
    pub fn tick_rate(mut self, hz: f64) -> Self {
        self.tick_rate = Some(hz);
        self
    }
    /// Sample rate in items per second; with it, `rx_time` is also tagged wherever the
    /// timestamps jump, not only at the start and after gaps.
    pub fn sample_rate(mut self, sps: f64) -> Self {
        self.sample_rate = Some(sps);
        self
    }
    /// Tag packet timestamps as `rx_time` (default on). A format with timestamps (CHDR, VRT)
    /// then needs the tick rate (CHDR) or the sample rate (VRT); turn it off to take the
    /// stream without time.
    pub fn time_tags(mut self, on: bool) -> Self {
        self.time_tags = on;
        self
    }

    /// The tick rate and ticks per item in force, or why they are missing.
    fn timing(&self) -> Result<(Option<f64>, Option<f64>), Error> {
        let positive = |what: &str, v: Option<f64>| match v {
            Some(x) if !(x.is_finite() && x > 0.0) => Err(Error::config(format!(
                "{what} {x} must be a positive number"
            ))),
            _ => Ok(()),
        };
        positive("tick rate", self.tick_rate)?;
        positive("sample rate", self.sample_rate)?;
        if !self.time_tags {
            return Ok((None, None));
        }
        let tick_rate = match (self.cfg.format, self.tick_rate, self.sample_rate) {
            (_, Some(t), _) => Some(t),
            (Format::Vrt, None, Some(sps)) => Some(sps),
            (Format::Chdr, None, _) => {
                return Err(Error::config(
                    "CHDR timestamps count ticks of the radio's clock: set .tick_rate(hz) \
                     (X310: 200e6; N3xx/X410: the master clock rate), or .time_tags(false)",
                ));
            }
            (Format::Vrt, None, None) => {
                return Err(Error::config(
                    "VRT timestamps count samples: set .sample_rate(sps) (or .tick_rate(hz) \
                     for a free-running or picosecond timestamp), or .time_tags(false)",
                ));
            }
            _ => None,
        };
        let ticks_per_item = tick_rate.zip(self.sample_rate).map(|(t, s)| t / s);
        Ok((tick_rate, ticks_per_item))
    }

    /// Everything both sources are built from, checked.
    pub(super) fn parts(&self) -> Result<Parts<T>, Error> {
        let mut cfg = self.cfg.clone();
        if let Some(b) = self.chosen_backend()? {
            cfg.backend = b;
        }
        cfg.socket.bind = self.bind.clone().map_err(Error::Config)?;
        // VRT/DIFI context packets become setting tags and `context` messages.
        cfg.deliver_context |= cfg.format == Format::Vrt;
        if self.low_latency {
            cfg.cpu_latency.get_or_insert(Duration::ZERO);
            cfg.threads
                .fifo_priority
                .get_or_insert(Self::LOW_LATENCY_PRIORITY);
        }
        if self.buffer_datagrams == Some(0) {
            return Err(Error::config("buffer_datagrams must be at least 1"));
        }
        // The format carries samples of its own encoding: items that are not complex would
        // get those bytes reinterpreted, so that takes an explicit `plain`.
        let wire = match self.wire {
            Some(w) => w,
            None => WireFormat::for_items::<T>(cfg.format)?,
        };
        let decoder = Decoder::<T>::new(wire)?;
        let (tick_rate, ticks_per_item) = self.timing()?;
        // Gaps are sized from the timestamps with the exact ratio of the rates given (VRT
        // streams given only a tick rate count samples at it).
        cfg.clock = fsdr_net_io::seq::StreamClock {
            tick_rate: tick_rate.or(self.tick_rate),
            sample_rate: self.sample_rate.or(match cfg.format {
                Format::Vrt => self.tick_rate,
                _ => None,
            }),
            bytes_per_sample: (decoder.unit_bytes() / decoder.items_per_unit()) as u32,
        };
        // What is sized from the settings below is sized from checked ones: those every
        // backend shares (the backend's own, and GRO's slot count, which the in-place
        // receiver does not need, are checked when it starts).
        limits::check_durations(&[
            ("latency_budget", self.budget),
            ("stats_interval", self.stats_interval),
            ("finish_after_idle", self.idle_finish),
            ("first_datagram_within", self.first_wait),
        ])?;
        let mut shared = cfg.clone();
        shared.socket.gro = false;
        shared.validate()?;
        let block = fsdr_net_lttng::next_block_id();
        Ok(Parts {
            cfg,
            decoder,
            dp_cfg: DepacketizerConfig {
                zero_fill: self.zero_fill,
                tick_rate,
                ticks_per_item,
                marks: self.probe_granularity.map(|g| Marks::new(block, g)),
            },
            block,
        })
    }

    /// Buffers of the in-place source ([`build_in_place`](Self::build_in_place)) in
    /// circulation between it, the receive thread and downstream (default 32; each holds
    /// [`buffer_datagrams`](Self::buffer_datagrams) of the largest datagrams), and the
    /// windows a [`zero_copy`](Self::zero_copy) `UdpSource` lends at once (default 8). They
    /// bound the queue in front of the flowgraph: when none is free the receive thread
    /// stops reading.
    pub fn in_place_buffers(mut self, n: usize) -> Self {
        self.in_place_buffers = Some(n);
        self
    }

    /// Receive threads of the in-place multi-stream source
    /// ([`build_streams_in_place`](Self::build_streams_in_place)): with one per stream each
    /// blocks in its own socket; with fewer, a thread serves several streams' sockets, which
    /// costs fewer wake-ups on a loaded CPU while one core can read them all. Default: one
    /// per stream, up to half the CPUs (the rest is the flowgraph's), at least one.
    ///
    /// ```
    /// use fsdr_net::prelude::*;
    /// use fsdr_net::io::StreamSelector;
    /// let src = UdpSource::<num_complex::Complex<i16>>::builder("127.0.0.1:0")
    ///     .format(Format::Chdr)
    ///     .tick_rate(250e6)
    ///     .stream_threads(1)
    ///     .build_streams_in_place([StreamSelector::Id(0), StreamSelector::Id(1)])?;
    /// assert_eq!(src.streams(), 2);
    /// # Ok::<(), fsdr_net::Error>(())
    /// ```
    pub fn stream_threads(mut self, n: usize) -> Self {
        self.stream_threads = Some(n);
        self
    }

    /// Builds the zero-copy [`InPlaceUdpSource`]: its output is FutureSDR's circuit
    /// (in-place) buffer, and the receive thread puts payloads straight into it. Every other
    /// setting means what it means for [`build`](Self::build). It receives with `recvmmsg`
    /// (the default), or with AF_XDP ([`Backend::Xdp`], one copy from the UMEM into the
    /// output buffer); another backend set on this builder is an error.
    pub fn build_in_place(self) -> Result<InPlaceUdpSource<T>, Error> {
        let (p, cfg) = self.in_place_parts()?;
        let rx = InPlaceReceiver::start(cfg)?;
        let mut src = InPlaceUdpSource::new(
            rx,
            p.buffers,
            p.items,
            p.stats_interval,
            p.idle_finish,
            p.marks,
        );
        src.clock.set_batch_workers(p.batch_workers);
        Ok(src)
    }

    /// What every in-place source is built from: the receivers' configuration and the
    /// block's settings.
    pub(super) fn in_place_parts(self) -> Result<(InPlaceParts, InPlaceConfig<T>), Error> {
        let chosen = self.chosen_backend()?;
        let xdp = chosen == Some(Backend::Xdp);
        if let Some(b) = chosen.filter(|b| !xdp && *b != Backend::Recvmmsg) {
            return Err(Error::config(format!(
                "the in-place source receives with recvmmsg or AF_XDP; backend {b} cannot be used"
            )));
        }
        let Parts {
            mut cfg,
            decoder,
            dp_cfg,
            block: _,
        } = self.parts()?;
        cfg.backend = if xdp { Backend::Xdp } else { Backend::Recvmmsg };
        // In place a full buffer is the unit handed over: the budget's time alone decides.
        if let (false, Coalesce::Adaptive { time, .. }) = (self.coalesce_set, cfg.coalesce) {
            cfg.coalesce = Coalesce::Adaptive {
                frames: usize::MAX,
                time,
            };
        }
        let datagrams = self
            .buffer_datagrams
            .unwrap_or_else(|| limits::in_place_datagrams(&decoder));
        let items = limits::output_items(datagrams, &decoder, cfg.slot_size)?;
        let buffers = self.in_place_buffers.unwrap_or(32);
        limits::check_in_place(buffers, items * std::mem::size_of::<T>())?;
        let marks = dp_cfg.marks.as_ref().map(|m| ProbeSpec {
            block: m.block(),
            granularity: m.granularity(),
        });
        let parts = InPlaceParts {
            buffers,
            items,
            stats_interval: self.stats_interval,
            idle_finish: self
                .idle_finish
                .map(|idle| (idle, self.first_wait.unwrap_or(idle))),
            marks,
            batch_workers: self.batch_workers,
            backend: cfg.backend,
        };
        let cfg = InPlaceConfig {
            engine: cfg,
            decoder,
            depacketizer: dp_cfg,
            buffers,
        };
        Ok((parts, cfg))
    }

    /// Opens the socket and starts the receive engine (datagrams arriving before the
    /// flowgraph runs wait in the engine's slots).
    pub fn build(self) -> Result<UdpSource<T>, Error> {
        let Parts {
            cfg,
            decoder,
            dp_cfg,
            block,
        } = self.parts()?;
        let by_default = || super::window::by_default(&cfg, &decoder, self.backend_set);
        if self.zero_copy.unwrap_or_else(by_default) {
            return self.build_zero_copy();
        }
        limits::output_items(self.buffer_datagrams.unwrap_or(16), &decoder, cfg.slot_size)?;
        let dp = Depacketizer::new(decoder, dp_cfg);
        let engine = Engine::start(cfg.clone())?;
        let items = self.buffer_datagrams.unwrap_or(16) * dp.max_items(cfg.slot_size);
        let mut src = UdpSource::new(
            super::Feed::Engine(engine),
            dp,
            cfg.slot_size,
            items,
            self.stats_interval,
            self.idle_finish
                .map(|idle| (idle, self.first_wait.unwrap_or(idle))),
            block,
        );
        src.clock.set_batch_workers(self.batch_workers);
        Ok(src)
    }
}

/// The block's settings of an in-place source ([`UdpSourceBuilder::in_place_parts`]).
pub(super) struct InPlaceParts {
    /// Buffers in circulation per output.
    pub(super) buffers: usize,
    /// Items of each buffer.
    pub(super) items: usize,
    pub(super) stats_interval: Option<Duration>,
    pub(super) idle_finish: Option<(Duration, Duration)>,
    pub(super) marks: Option<ProbeSpec>,
    pub(super) batch_workers: bool,
    /// What the receivers receive with.
    pub(super) backend: Backend,
}

/// What [`UdpSourceBuilder::parts`] checks and builds.
pub(super) struct Parts<T> {
    pub(super) cfg: EngineConfig,
    pub(super) decoder: Decoder<T>,
    pub(super) dp_cfg: DepacketizerConfig,
    pub(super) block: u64,
}
