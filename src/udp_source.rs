//! [`UdpSource`]: a FutureSDR source fed by the `fsdr-net-io` receive engine.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fsdr_net_io::engine::ReuseportSpread;
use fsdr_net_io::socket::{Multicast, SourceFilter};
use fsdr_net_io::{
    Backend, Engine, EngineConfig, EngineError, Format, SeqEvent, Stats, StatsHandle,
};
use futuresdr::runtime::dev::prelude::*;
use num_complex::Complex32;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::probe::ProbeSpec;
use crate::sample::{Decoder, IqOrder, PlainItem};
use fsdr_net_io::ArrivalClock;
use fsdr_net_lttng::Marks;

/// Tag name at the first item after missed frames (or at the first inserted zero):
/// `Tag::NamedUsize(TAG_MISSED, frames)`.
pub const TAG_MISSED: &str = "rx_missed";
/// Tag name for packet timestamps: `Tag::NamedAny(TAG_TIME, Box<RxTime>)`.
pub const TAG_TIME: &str = "rx_time";
/// Tag name on the last item of a burst (CHDR EOB): `Tag::NamedUsize(TAG_EOB, 1)`.
pub const TAG_EOB: &str = "rx_eob";

/// The value of an `rx_time` tag.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RxTime {
    /// Device ticks (CHDR timestamp; VRT converted to ticks of the tick rate).
    pub ticks: u64,
    /// Seconds: ticks divided by the tick rate.
    pub seconds: f64,
}

/// Builds a [`UdpSource`]; every option of the receive engine is reachable.
#[derive(Debug, Clone)]
pub struct UdpSourceBuilder<T> {
    bind: String,
    cfg: EngineConfig,
    decoder: Decoder<T>,
    zero_fill: bool,
    stats_interval: Option<Duration>,
    buffer_datagrams: usize,
    tick_rate: f64,
    ticks_per_item: Option<f64>,
    idle_finish: Option<Duration>,
    probe_granularity: Option<u64>,
}

impl<T: PlainItem> UdpSourceBuilder<T> {
    /// Fire `fsdr_net:arrival` at every `granularity`-th output item, with the time its
    /// datagram left the kernel, so that a [`ProbeSink`](crate::ProbeSink) built from
    /// [`UdpSource::probe_spec`] measures network-arrival-to-sink latency. (The per-datagram
    /// `fsdr_net:packet` event fires whenever tracing is compiled in.)
    pub fn probe(mut self, granularity: u64) -> Self {
        self.probe_granularity = Some(granularity.max(1));
        self
    }

    /// End the stream (the block finishes) once no datagram has arrived for this long, after
    /// the first one (default: never).
    pub fn finish_after_idle(mut self, idle: Duration) -> Self {
        self.idle_finish = Some(idle);
        self
    }
    /// Receive backend (default mio).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.cfg.backend = backend;
        self
    }
    /// Wire format (default raw).
    pub fn format(mut self, format: Format) -> Self {
        self.cfg.format = format;
        self
    }
    /// Receive buffer to request in bytes (default 25 MB).
    pub fn recv_buffer(mut self, bytes: usize) -> Self {
        self.cfg.socket.recv_buffer = bytes;
        self
    }
    /// Insert zeros for missed frames so the sample timeline stays aligned (default off).
    pub fn zero_fill_missed(mut self, on: bool) -> Self {
        self.zero_fill = on;
        self
    }
    /// Largest datagram accepted whole (default 9216 bytes).
    pub fn max_datagram(mut self, bytes: usize) -> Self {
        self.cfg.slot_size = bytes;
        self
    }
    /// Datagrams per `recvmmsg` call.
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
    /// Reorder window in datagrams and how long to wait for a missing one.
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
    /// Kernel receive timestamps.
    pub fn kernel_timestamps(mut self, on: bool) -> Self {
        self.cfg.socket.timestamps = on;
        self
    }
    /// `reuseport` threads and optional cBPF spreading.
    pub fn reuseport(mut self, threads: usize, spread: Option<ReuseportSpread>) -> Self {
        self.cfg.reuseport_threads = threads;
        self.cfg.reuseport_spread = spread;
        self
    }
    /// `uring` receive operations in flight.
    pub fn uring_depth(mut self, depth: usize) -> Self {
        self.cfg.uring_depth = depth;
        self
    }
    /// Any other engine option.
    pub fn configure(mut self, f: impl FnOnce(&mut EngineConfig)) -> Self {
        f(&mut self.cfg);
        self
    }
    /// Send all counters on the `stats` port this often (`None`: never; default 1 s).
    pub fn stats_interval(mut self, every: Option<Duration>) -> Self {
        self.stats_interval = every;
        self
    }
    /// Size the output buffer for at least this many maximum-size datagrams (default 16).
    pub fn buffer_datagrams(mut self, n: usize) -> Self {
        self.buffer_datagrams = n.max(1);
        self
    }
    /// Device tick rate in Hz, for `rx_time` seconds (default 1: ticks are seconds).
    pub fn tick_rate(mut self, hz: f64) -> Self {
        self.tick_rate = hz;
        self
    }
    /// Sample rate in items per second; with it, `rx_time` is also tagged wherever the
    /// timestamps are discontinuous, not only at the start and after gaps.
    pub fn sample_rate(mut self, sps: f64) -> Self {
        self.ticks_per_item = Some(self.tick_rate / sps);
        self
    }

    /// Opens the socket and starts the receive engine (datagrams arriving before the
    /// flowgraph runs wait in the engine's slots).
    pub fn build(self) -> Result<UdpSource<T>, EngineError> {
        let mut cfg = self.cfg;
        cfg.socket.bind = self
            .bind
            .parse()
            .map_err(|e| EngineError::Config(format!("bind address {:?}: {e}", self.bind)))?;
        let max_items = cfg.slot_size / self.decoder.wire_bytes + 1;
        let engine = Engine::start(cfg)?;
        let block = fsdr_net_lttng::next_block_id();
        let mut output = DefaultCpuWriter::<T>::default();
        output.set_min_buffer_size_in_items(self.buffer_datagrams * max_items);
        Ok(UdpSource {
            output,
            stats_handle: engine.stats_handle(),
            local_addr: engine.local_addr(),
            engine: Some(engine),
            final_stats: None,
            stats_interval: self.stats_interval,
            next_stats: Instant::now() + self.stats_interval.unwrap_or(Duration::ZERO),
            idle_finish: self.idle_finish,
            deadline: Arc::new(Mutex::new(Deadline::new())),
            st: SourceState {
                decoder: self.decoder,
                max_items,
                zero_fill: self.zero_fill,
                carry: Vec::with_capacity(16),
                zeros_pending: 0,
                staged: Vec::new(),
                staged_pos: 0,
                staged_tags: Vec::new(),
                tick_rate: self.tick_rate,
                ticks_per_item: self.ticks_per_item,
                next_ticks: None,
                work_calls: 0,
                items_out: 0,
                zeros_inserted: 0,
                missed_items: 0,
                last_data: None,
                trace: TraceState {
                    block,
                    marks: self.probe_granularity.map(|g| Marks::new(block, g)),
                    staged_arrival: 0,
                    packets: 0,
                    realtime_minus_monotonic: realtime_minus_monotonic(),
                },
            },
        })
    }
}

impl UdpSourceBuilder<Complex32> {
    /// The payload is USRP sc16 (in `order`), converted to `Complex<f32>` as UHD scales it.
    pub fn sc16(mut self, order: IqOrder) -> Self {
        self.decoder = Decoder::sc16(order);
        self
    }
}

/// Receives a UDP stream (raw, GNU Radio headers, CHDR or VRT) through the `fsdr-net-io`
/// engine: receive threads drain the socket in batches off the scheduler, the block copies
/// payloads into its output, fills missed frames with zeros if asked, and tags gaps,
/// timestamps and bursts.
///
/// # Stream Inputs
///
/// No stream inputs.
///
/// # Stream Outputs
///
/// `output`: the payload items. A payload that is not a multiple of the item size carries its
/// partial item into the next datagram. Tags: [`TAG_MISSED`] where frames were missed,
/// [`TAG_TIME`] ([`RxTime`]) on the first item of the stream, after gaps and where timestamps
/// jump, [`TAG_EOB`] on the last item of a burst.
///
/// # Message Outputs
///
/// `missed`: one `Pmt::MapStrPmt` per gap: `frames`, `items` (zeros inserted or items
/// lost), `seq` (sequence number after the gap).
///
/// `stats`: every counter of the engine as a `Pmt::MapStrPmt` of `Pmt::U64`, at the configured
/// interval.
///
/// # Usage
/// ```no_run
/// use fsdr_net::UdpSource;
/// use fsdr_net::io::{Backend, Format};
/// use fsdr_net::sample::IqOrder;
/// use futuresdr::blocks::NullSink;
/// use futuresdr::runtime::{Flowgraph, Runtime};
/// use futuresdr::runtime::macros::connect;
/// use num_complex::Complex32;
///
/// # fn main() -> anyhow::Result<()> {
/// futuresdr::runtime::config::set("ctrlport_enable", false);
/// let src = UdpSource::<Complex32>::builder("0.0.0.0:49000")
///     .backend(Backend::Mio)
///     .format(Format::Chdr)
///     .sc16(IqOrder::IQ)
///     .zero_fill_missed(true)
///     .build()?;
/// let snk = NullSink::<Complex32>::new();
/// let mut fg = Flowgraph::new();
/// connect!(fg, src > snk);
/// Runtime::new().run(fg)?;
/// # Ok(())
/// # }
/// ```
#[derive(Block)]
#[message_outputs(missed, stats)]
pub struct UdpSource<T: PlainItem> {
    #[output]
    output: DefaultCpuWriter<T>,
    engine: Option<Engine>,
    stats_handle: StatsHandle,
    local_addr: SocketAddr,
    final_stats: Option<Stats>,
    stats_interval: Option<Duration>,
    next_stats: Instant,
    idle_finish: Option<Duration>,
    deadline: Arc<Mutex<Deadline>>,
    st: SourceState<T>,
}

/// One timer kept across `work` calls. Creating a timer per idle wait costs a round trip to
/// async-io's reactor thread each time: at 20 k wake-ups a second that thread alone took most
/// of a core (found with `cargo xtask loss` and evenly paced packets). The timer is re-armed
/// only when the wanted deadline is earlier than the armed one or the armed one has passed;
/// when it fires early, `work` looks again and re-arms once.
struct Deadline {
    timer: async_io::Timer,
    at: Option<Instant>,
}

impl Deadline {
    fn new() -> Self {
        Deadline {
            timer: async_io::Timer::never(),
            at: None,
        }
    }

    /// Makes sure the timer fires no later than `at`.
    fn arm(&mut self, at: Instant, now: Instant) {
        if self.at.is_none_or(|cur| at < cur || cur <= now) {
            self.timer.set_at(at);
            self.at = Some(at);
        }
    }
}

/// Completes when the shared timer fires.
struct DeadlineWait(Arc<Mutex<Deadline>>);

impl Future for DeadlineWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut d = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if d.at.is_none() {
            return Poll::Pending;
        }
        match Pin::new(&mut d.timer).poll(cx) {
            Poll::Ready(_) => {
                d.at = None;
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Everything `work` changes besides the output and the engine.
struct SourceState<T> {
    decoder: Decoder<T>,
    max_items: usize,
    zero_fill: bool,
    /// Bytes of an item split across datagrams.
    carry: Vec<u8>,
    /// Zeros still to write for a gap.
    zeros_pending: usize,
    /// A datagram's payload waiting behind those zeros, and its tags.
    staged: Vec<u8>,
    staged_pos: usize,
    staged_tags: Vec<Tag>,
    tick_rate: f64,
    ticks_per_item: Option<f64>,
    next_ticks: Option<u64>,
    work_calls: u64,
    items_out: u64,
    zeros_inserted: u64,
    /// Items lost at gaps (frames × the payload of the datagram after the gap).
    missed_items: u64,
    /// When the last datagram was taken (None before the first).
    last_data: Option<Instant>,
    trace: TraceState,
}

/// What the tracepoints of a source need.
struct TraceState {
    /// Pipe id of this source (the `block` field of its events).
    block: u64,
    /// Marks of output items, when `probe` was asked for.
    marks: Option<Marks>,
    /// Arrival time (CLOCK_MONOTONIC ns) of the staged datagram.
    staged_arrival: u64,
    /// Datagrams handed over (the `seq` of `packet` events for formats without numbers).
    packets: u64,
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, to express kernel timestamps on LTTng's clock.
    realtime_minus_monotonic: i128,
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC in nanoseconds, read now.
fn realtime_minus_monotonic() -> i128 {
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    real - fsdr_net_io::sys::monotonic_ns() as i128
}

impl TraceState {
    /// (arrival on CLOCK_MONOTONIC, kernel timestamp on CLOCK_REALTIME or 0) of a datagram.
    fn times(&self, d: &fsdr_net_io::Datagram<'_>) -> (u64, u64) {
        let a = d.meta().arrival;
        match a.clock {
            ArrivalClock::Monotonic => (a.ns, 0),
            ArrivalClock::Kernel => {
                let mono = a.ns as i128 - self.realtime_minus_monotonic;
                (mono.max(0) as u64, a.ns)
            }
        }
    }

    /// `n` output items that came from no datagram (zeros for a gap): counted, not marked.
    fn skip(&mut self, n: usize) {
        if let Some(m) = self.marks.as_mut() {
            m.advance(n as u64, |_, _| {});
        }
    }

    /// `n` output items from a datagram that arrived at `arrival_ns`.
    fn items(&mut self, n: usize, arrival_ns: u64) {
        if let Some(m) = self.marks.as_mut() {
            m.advance(n as u64, |block, seq| {
                fsdr_net_lttng::arrival(block, seq, arrival_ns)
            });
        }
    }

    /// A datagram handed over: the `packet` event (when a session records it).
    fn packet(&mut self, d: &fsdr_net_io::Datagram<'_>) {
        self.packets += 1;
        if fsdr_net_lttng::packet_enabled() {
            let (arrival, kernel) = self.times(d);
            let seq = d.info().seq.unwrap_or(self.packets - 1);
            fsdr_net_lttng::packet(self.block, seq, d.payload().len() as u64, arrival, kernel);
        }
    }
}

impl<T: PlainItem> UdpSource<T> {
    /// A builder for a source bound to `bind` (e.g. `"0.0.0.0:49000"`, `"[::]:49000"`).
    pub fn builder(bind: impl Into<String>) -> UdpSourceBuilder<T> {
        UdpSourceBuilder {
            bind: bind.into(),
            cfg: EngineConfig::new(SocketAddr::from(([0, 0, 0, 0], 0))),
            decoder: Decoder::plain(),
            zero_fill: false,
            stats_interval: Some(Duration::from_secs(1)),
            buffer_datagrams: 16,
            tick_rate: 1.0,
            ticks_per_item: None,
            idle_finish: None,
            probe_granularity: None,
        }
    }

    /// The pipe this source starts when built with
    /// [`probe`](UdpSourceBuilder::probe): build its [`ProbeSink`](crate::ProbeSink) from it.
    pub fn probe_spec(&self) -> Option<ProbeSpec> {
        self.st.trace.marks.as_ref().map(|m| ProbeSpec {
            block: m.block(),
            granularity: m.granularity(),
        })
    }

    /// The bound address (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Every counter: live while running, final after the flowgraph ended.
    pub fn stats(&self) -> Stats {
        self.final_stats
            .clone()
            .unwrap_or_else(|| self.stats_handle.snapshot())
    }

    /// A handle that reads the counters from another thread while the flowgraph runs.
    pub fn stats_handle(&self) -> StatsHandle {
        self.stats_handle.clone()
    }

    /// How often `work()` ran (a diagnostic: a source that sleeps runs rarely when idle).
    pub fn work_calls(&self) -> u64 {
        self.st.work_calls
    }

    /// Items produced so far, zeros included.
    pub fn items_produced(&self) -> u64 {
        self.st.items_out
    }

    /// Zero items inserted for missed frames.
    pub fn zeros_inserted(&self) -> u64 {
        self.st.zeros_inserted
    }

    /// Items lost at gaps, whether or not they were zero-filled (missed frames times the
    /// payload of the datagram after each gap).
    pub fn missed_items(&self) -> u64 {
        self.st.missed_items
    }

    fn stats_pmt(&self) -> Pmt {
        let s = self.stats();
        let fields = [
            ("received", s.received),
            ("bytes", s.bytes),
            ("delivered", s.delivered),
            ("delivered_bytes", s.delivered_bytes),
            ("kernel_drops", s.kernel_drops),
            ("overflow", s.overflow),
            ("truncated", s.truncated),
            ("rejected", s.rejected),
            ("malformed", s.malformed),
            ("skipped", s.skipped),
            ("missed", s.missed),
            ("duplicates", s.duplicates),
            ("late", s.late),
            ("reordered", s.reordered),
            ("resyncs", s.resyncs),
            ("rearms", s.rearms),
            ("items", self.st.items_out),
            ("zeros_inserted", self.st.zeros_inserted),
            ("missed_items", self.st.missed_items),
        ];
        Pmt::MapStrPmt(
            fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), Pmt::U64(v)))
                .collect::<HashMap<_, _>>(),
        )
    }
}

impl<T: PlainItem> UdpSource<T> {
    /// One pass: fills the output from pending zeros, staged data and the engine.
    fn fill(&mut self, missed_msgs: &mut Vec<Pmt>) -> Stop {
        let Self {
            output, engine, st, ..
        } = self;
        let engine = engine.as_mut().expect("engine present while running");
        let wb = st.decoder.wire_bytes;
        let (out, mut tags) = output.slice_with_tags();
        let mut written = 0;
        let mut stop = Stop::Idle;
        'fill: {
            if st.zeros_pending > 0 {
                let n = st.zeros_pending.min(out.len());
                out[..n].fill(T::default());
                st.trace.skip(n);
                written += n;
                st.zeros_pending -= n;
                if st.zeros_pending > 0 {
                    stop = Stop::OutputFull;
                    break 'fill;
                }
            }
            if st.staged_pos < st.staged.len() {
                for t in st.staged_tags.drain(..) {
                    tags.add_tag(written, t);
                }
                if out.len() == written {
                    stop = Stop::OutputFull;
                    break 'fill;
                }
                let staged = std::mem::take(&mut st.staged);
                let rest = &staged[st.staged_pos..];
                // Feed at most what fits; the carry takes care of split items.
                let fit = ((out.len() - written) * wb).min(rest.len());
                let fit = fit - fit % wb;
                let take = if fit == 0 { rest.len().min(wb) } else { fit };
                let n = st.decode_into(&rest[..take], &mut out[written..]);
                st.trace.items(n, st.trace.staged_arrival);
                written += n;
                st.staged_pos += take;
                st.staged = staged;
                if st.staged_pos < st.staged.len() {
                    stop = Stop::OutputFull;
                    break 'fill;
                }
                st.staged.clear();
                st.staged_pos = 0;
            }
            loop {
                if out.len() - written < st.max_items {
                    stop = Stop::OutputFull;
                    break;
                }
                let Some(d) = engine.try_recv() else {
                    break;
                };
                st.last_data = Some(Instant::now());
                let missed = d.missed_before();
                let restart = matches!(d.seq_event(), SeqEvent::First | SeqEvent::Resync);
                let payload = d.payload();
                let mut at = written;
                if missed > 0 {
                    st.carry.clear();
                    let items = missed as usize * payload.len() / wb;
                    st.missed_items += items as u64;
                    tags.add_tag(at, Tag::NamedUsize(TAG_MISSED.into(), missed as usize));
                    let mut m = HashMap::new();
                    m.insert("frames".to_string(), Pmt::U64(missed));
                    m.insert("items".to_string(), Pmt::U64(items as u64));
                    if let Some(s) = d.info().seq {
                        m.insert("seq".to_string(), Pmt::U64(s));
                    }
                    missed_msgs.push(Pmt::MapStrPmt(m));
                    if st.zero_fill {
                        st.zeros_inserted += items as u64;
                        let n = items.min(out.len() - written);
                        out[written..written + n].fill(T::default());
                        st.trace.skip(n);
                        written += n;
                        at = written;
                        // The datagram must fit after the zeros; otherwise it waits, staged.
                        let room_after = out.len() - written;
                        if n < items || room_after < payload.len() / wb + 1 {
                            // The rest of the zeros, then this datagram, once there is room.
                            st.zeros_pending = items - n;
                            st.staged.clear();
                            st.staged.extend_from_slice(payload);
                            st.staged_pos = 0;
                            st.trace.staged_arrival = st.trace.times(&d).0;
                            st.trace.packet(&d);
                            let n_items = payload.len() / wb;
                            st.staged_tags = st.time_tags(&d, true, n_items);
                            stop = Stop::OutputFull;
                            break;
                        }
                    }
                }
                let n = st.decode_into(payload, &mut out[written..]);
                st.trace.packet(&d);
                if st.trace.marks.is_some() {
                    let arrival = st.trace.times(&d).0;
                    st.trace.items(n, arrival);
                }
                for t in st.time_tags(&d, missed > 0 || restart, n) {
                    tags.add_tag(at, t);
                }
                if d.info().eob && n > 0 {
                    tags.add_tag(written + n - 1, Tag::NamedUsize(TAG_EOB.into(), 1));
                }
                written += n;
            }
        }
        output.produce(written);
        st.items_out += written as u64;
        stop
    }
}

impl<T: PlainItem> SourceState<T> {
    /// Decodes `payload` (after any carried partial item) into `out`; returns items written.
    fn decode_into(&mut self, mut payload: &[u8], out: &mut [T]) -> usize {
        let wb = self.decoder.wire_bytes;
        let mut n = 0;
        if !self.carry.is_empty() {
            let take = (wb - self.carry.len()).min(payload.len());
            self.carry.extend_from_slice(&payload[..take]);
            payload = &payload[take..];
            if self.carry.len() < wb {
                return 0;
            }
            n += (self.decoder.decode)(&self.carry, &mut out[..1]);
            self.carry.clear();
        }
        // Callers leave room for every whole item; only a partial item is carried.
        let whole = payload.len() / wb;
        debug_assert!(
            whole <= out.len() - n,
            "decode_into without room for the payload"
        );
        let whole = whole.min(out.len() - n);
        n += (self.decoder.decode)(&payload[..whole * wb], &mut out[n..]);
        let rest = &payload[whole * wb..];
        self.carry
            .extend_from_slice(&rest[..rest.len().min(wb - 1)]);
        n
    }

    /// `rx_time` tags for a datagram of `items` items.
    fn time_tags(
        &mut self,
        d: &fsdr_net_io::Datagram<'_>,
        discontinuity: bool,
        items: usize,
    ) -> Vec<Tag> {
        let Some(ticks) = d.info().timestamp.and_then(|ts| ts.ticks(self.tick_rate)) else {
            return Vec::new();
        };
        let first = self.next_ticks.is_none();
        let jumped = self.next_ticks.is_some_and(|t| t != ticks);
        // Without a sample rate the next timestamp is unknown: tag only at discontinuities.
        self.next_ticks = Some(
            self.ticks_per_item
                .map_or(ticks, |tpi| ticks + (items as f64 * tpi).round() as u64),
        );
        let jumped = jumped && self.ticks_per_item.is_some();
        if discontinuity || first || jumped {
            vec![Tag::NamedAny(
                TAG_TIME.into(),
                Box::new(RxTime {
                    ticks,
                    seconds: ticks as f64 / self.tick_rate,
                }),
            )]
        } else {
            Vec::new()
        }
    }
}

/// Why one pass of `work` stopped.
enum Stop {
    /// The output has no room: wait for downstream to consume.
    OutputFull,
    /// The engine has nothing: sleep until it signals.
    Idle,
}

#[doc(hidden)]
impl<T: PlainItem> Kernel for UdpSource<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        self.st.work_calls += 1;
        if self.engine.is_none() {
            io.finished = true;
            return Ok(());
        }
        let mut missed_msgs = Vec::new();
        let stop = self.fill(&mut missed_msgs);
        for m in missed_msgs {
            mo.post("missed", m).await?;
        }
        let now = Instant::now();
        if let Some(every) = self.stats_interval
            && now >= self.next_stats
        {
            self.next_stats = now + every;
            mo.post("stats", self.stats_pmt()).await?;
        }
        if let Stop::Idle = stop {
            let engine = self.engine.as_ref().expect("engine present");
            let idle_end = self.idle_finish.zip(self.st.last_data).map(|(i, t)| t + i);
            if idle_end.is_some_and(|end| now >= end) && engine.next_deadline().is_none() {
                io.finished = true;
                return Ok(());
            }
            let notified = engine.notifier().notified();
            let mut deadline = engine.next_deadline();
            for d in [self.stats_interval.map(|_| self.next_stats), idle_end]
                .into_iter()
                .flatten()
            {
                deadline = Some(deadline.map_or(d, |x| x.min(d)));
            }
            match deadline {
                Some(at) => {
                    self.deadline
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .arm(at, now);
                    let wait = DeadlineWait(self.deadline.clone());
                    io.block_on(async move {
                        futuresdr::futures::future::select(notified, wait).await;
                    });
                }
                None => io.block_on(notified),
            }
        }
        Ok(())
    }

    async fn deinit(&mut self, _mo: &mut MessageOutputs, _meta: &mut BlockMeta) -> Result<()> {
        if let Some(engine) = self.engine.take() {
            let stats = engine.shutdown();
            tracing::debug!(%stats, "UdpSource stopped");
            self.final_stats = Some(stats);
        }
        Ok(())
    }
}
