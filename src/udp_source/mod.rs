//! [`UdpSource`]: a FutureSDR source fed by the `fsdr-net-io` receive engine (or, zero copy,
//! by an in-place receiver: `window.rs`). The block is a thin wrapper: the engine receives,
//! the [`Depacketizer`] turns datagrams into items and tags, and the block lends it output
//! buffers, posts messages and sleeps when idle.

mod builder;
mod inplace;
mod limits;
mod multi;
mod multi_inplace;
mod multi_stats;
mod multi_window;
mod stats;
mod streams;
mod timing;
mod window;

use std::net::{SocketAddr, ToSocketAddrs};

use std::time::{Duration, Instant};

use fsdr_net_io::depacketizer::{DatagramIn, Depacketizer, GapEvent, ItemTag, TagKind};
use fsdr_net_io::format::PacketClass;
use fsdr_net_io::format::vrt::context::{ContextTracker, IfContext};
use fsdr_net_io::sample::Item;
use fsdr_net_io::{Datagram, Engine, Stats, StatsHandle};
use futuresdr::runtime::dev::prelude::*;

pub use builder::UdpSourceBuilder;
pub use fsdr_net_io::depacketizer::RxTime;
pub use inplace::InPlaceUdpSource;
pub use multi::MultiUdpSource;
pub use multi_inplace::MultiInPlaceUdpSource;
pub use multi_stats::{MultiSourceStats, StreamStats};
pub use stats::SourceStats;

use crate::probe::ProbeSpec;
use timing::{Call, WorkClock};

/// Tag name at the first item after missed frames (or at the first inserted zero):
/// `Tag::NamedUsize(TAG_MISSED, frames)`.
pub const TAG_MISSED: &str = "rx_missed";
/// Tag name beside [`TAG_MISSED`], at the same item: the items the missed frames held
/// (zero-filled when zero-fill is on): `Tag::NamedUsize(TAG_MISSED_ITEMS, items)`.
pub const TAG_MISSED_ITEMS: &str = "rx_missed_items";
/// Tag name for packet timestamps: `Tag::NamedAny(TAG_TIME, Box<RxTime>)`.
pub const TAG_TIME: &str = "rx_time";
/// Tag name on the last item of a burst (CHDR EOB): `Tag::NamedUsize(TAG_EOB, 1)`.
pub const TAG_EOB: &str = "rx_eob";

/// Receives a UDP stream (raw, GNU Radio headers, CHDR or VRT) through the `fsdr-net-io`
/// engine: receive threads drain the socket in batches off the scheduler, the block decodes
/// payloads into its output (sc16 and sc8 converted as UHD does), fills missed frames with
/// zeros if asked, and tags gaps, timestamps and bursts. Where the items are the wire's
/// bytes (sc16 CHDR as `Complex<i16>`, plain bytes) and no backend is chosen, the receive
/// thread instead puts each payload straight into the output buffer
/// ([`zero_copy`](UdpSourceBuilder::zero_copy)); the output, tags and messages are the same.
///
/// # Stream Inputs
///
/// No stream inputs.
///
/// # Stream Outputs
///
/// `output`: the payload items. A payload that is not a whole number of samples carries its
/// partial sample into the next datagram. Tags: [`TAG_MISSED`] (frames) and [`TAG_MISSED_ITEMS`] (items) where frames were missed,
/// [`TAG_TIME`] ([`RxTime`]) on the first item of the stream, after gaps and where
/// timestamps jump, [`TAG_EOB`] on the last item of a burst. VRT/DIFI: `rx_rate`,
/// `rx_freq`, `rx_bandwidth` and `rx_gain` (`Tag::NamedAny(name, Box<f64>)`: samples/s, Hz,
/// Hz, dB; GNU Radio's UHD source names) from context packets, on the first sample after
/// the context packet that set or changed them.
///
/// # Message Outputs
///
/// `missed`: one `Pmt::MapStrPmt` per gap: `frames` and `items` (`Pmt::U64`), and `seq`
/// (the sequence number after the gap) when the format has one.
///
/// `context` (VRT/DIFI): each context packet that changed a setting of its stream, as a
/// `Pmt::MapStrPmt` of the fields it carries in SI units (`sample_rate`, `rf_freq`,
/// `bandwidth`, `if_freq`, `rf_offset`, `if_band_offset`, `reference_level`, `gain`,
/// `temperature` as `F64`; `stream_id`, `integer_seconds`, `sample_count`,
/// `reference_point_id`, `over_range_count`, `state_indicators`, `payload_format`,
/// `timestamp_adjustment_fs` as `U64`; `changed` as `Bool`). Repeats of the same settings
/// are not posted.
///
/// `stats`: every counter ([`SourceStats`], keys [`SourceStats::KEYS`]) at the configured
/// interval, and a final one when the source ends by itself
/// ([`finish_after_idle`](UdpSourceBuilder::finish_after_idle)). Connect the ports to a
/// block that ends when its inputs finish, such as [`MessageCollector`](crate::MessageCollector);
/// after `run()`, [`UdpSource::stats`] has the final counters whatever ended the graph.
///
/// # Usage
/// ```no_run
/// use fsdr_net::prelude::*;
/// use futuresdr::blocks::NullSink;
/// use futuresdr::num_complex::Complex32;
/// use futuresdr::runtime::{Flowgraph, Runtime};
/// use futuresdr::runtime::macros::connect;
///
/// # fn main() -> anyhow::Result<()> {
/// futuresdr::runtime::config::set("ctrlport_enable", false);
/// let src = UdpSource::<Complex32>::builder("0.0.0.0:49000")
///     .backend(Backend::Mio)
///     .format(Format::Chdr) // sc16_chdr → Complex<f32>, scaled as UHD does
///     .tick_rate(200e6)
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
#[message_outputs(missed, stats, context)]
pub struct UdpSource<T: Item> {
    /// The in-place receiver of a [`zero_copy`](UdpSourceBuilder::zero_copy) source, which
    /// writes into `output`'s memory: declared first, so that it is dropped (its thread
    /// joined) before the writer.
    window: Option<window::WindowLane<T>>,
    #[output]
    output: DefaultCpuWriter<T>,
    engine: Option<Engine>,
    stats_handle: StatsHandle,
    local_addr: SocketAddr,
    final_stats: Option<Stats>,
    dp: Depacketizer<T>,
    /// Largest datagram the engine accepts (bytes).
    max_datagram: usize,
    /// The worker policy, the idle clock, the `stats` timer and the timer it sleeps on.
    clock: WorkClock,
    work_calls: u64,
    /// Pipe id of this source (the `block` field of its LTTng events).
    trace_block: u64,
    packets: u64,
    /// Radio settings per stream, from VRT/DIFI context packets.
    contexts: ContextTracker,
}

/// What fills a [`UdpSource`]: the engine, or in place an in-place receiver.
// Passed once to `UdpSource::new`, which takes it apart: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Feed<T: Item> {
    Engine(Engine),
    Window(window::WindowLane<T>),
}

/// Why one pass of `work` stopped.
enum Stop {
    /// The output has no room: wait for downstream to consume.
    OutputFull,
    /// The engine has nothing: sleep until it signals.
    Idle,
}

/// The FutureSDR tags of one depacketizer tag (a gap gives two: frames and items).
fn tags_of(kind: TagKind) -> impl Iterator<Item = Tag> {
    let (first, second) = match kind {
        TagKind::Missed { frames, items } => (
            Tag::NamedUsize(TAG_MISSED.into(), frames as usize),
            Some(Tag::NamedUsize(TAG_MISSED_ITEMS.into(), items as usize)),
        ),
        TagKind::Time(t) => (Tag::NamedAny(TAG_TIME.into(), Box::new(t)), None),
        TagKind::Eob => (Tag::NamedUsize(TAG_EOB.into(), 1), None),
        TagKind::Setting { name, value } => (Tag::NamedAny(name.into(), Box::new(value)), None),
    };
    std::iter::once(first).chain(second)
}

/// A context as a `Pmt::MapStrPmt`: every field present, in SI units (`F64`/`U64`).
pub(crate) fn context_pmt(c: &IfContext) -> Pmt {
    let mut m = std::collections::HashMap::new();
    let mut f = |k: &str, v: Option<f64>| {
        if let Some(v) = v {
            m.insert(k.to_string(), Pmt::F64(v));
        }
    };
    f("sample_rate", c.sample_rate_sps);
    f("rf_freq", c.rf_ref_freq_hz);
    f("bandwidth", c.bandwidth_hz);
    f("if_freq", c.if_ref_freq_hz);
    f("rf_offset", c.rf_offset_hz);
    f("if_band_offset", c.if_band_offset_hz);
    f("reference_level", c.reference_level_dbm.map(f64::from));
    f("gain", c.gain_total_db());
    f("temperature", c.temperature_c.map(f64::from));
    let mut u = |k: &str, v: Option<u64>| {
        if let Some(v) = v {
            m.insert(k.to_string(), Pmt::U64(v));
        }
    };
    u("stream_id", c.stream_id.map(u64::from));
    u("integer_seconds", c.integer_seconds.map(u64::from));
    u("sample_count", c.sample_count);
    u("reference_point_id", c.reference_point_id.map(u64::from));
    u("over_range_count", c.over_range_count.map(u64::from));
    u("state_indicators", c.state_indicators.map(u64::from));
    u("payload_format", c.payload_format);
    u(
        "timestamp_adjustment_fs",
        c.timestamp_adjustment_fs.map(|v| v as u64),
    );
    m.insert("changed".to_string(), Pmt::Bool(c.changed));
    Pmt::MapStrPmt(m)
}

fn gap_pmt(g: &GapEvent) -> Pmt {
    let mut m = std::collections::HashMap::new();
    m.insert("frames".to_string(), Pmt::U64(g.frames));
    m.insert("items".to_string(), Pmt::U64(g.items));
    if let Some(s) = g.seq {
        m.insert("seq".to_string(), Pmt::U64(s));
    }
    Pmt::MapStrPmt(m)
}

/// Posts what one hand-over found: a `missed` message per gap, a `context` message per
/// context that changed a setting.
async fn post_found(
    mo: &mut MessageOutputs,
    gaps: &[GapEvent],
    contexts: &[IfContext],
) -> Result<()> {
    for g in gaps {
        mo.post("missed", gap_pmt(g)).await?;
    }
    for c in contexts {
        mo.post("context", context_pmt(c)).await?;
    }
    Ok(())
}

/// The `fsdr_net:packet` tracepoint for a datagram (when a session records it).
fn trace_packet(block: u64, packets: &mut u64, d: &Datagram<'_>) {
    *packets += 1;
    if fsdr_net_lttng::packet_enabled() {
        let a = d.meta().arrival;
        let seq = d.info().seq.unwrap_or(*packets - 1);
        fsdr_net_lttng::packet(
            block,
            seq,
            d.payload().len() as u64,
            a.monotonic_ns,
            a.kernel_realtime_ns.unwrap_or(0),
        );
    }
}

impl<T: Item> UdpSource<T> {
    /// A builder for a source bound to `bind`: anything [`ToSocketAddrs`] takes
    /// (`"0.0.0.0:49000"`, `"[::]:49000"`, `"localhost:49000"`, a `SocketAddr`), resolved
    /// once; an address that does not resolve is an error at `build()`.
    pub fn builder(bind: impl ToSocketAddrs + std::fmt::Debug) -> UdpSourceBuilder<T> {
        UdpSourceBuilder::new(bind)
    }

    fn new(
        feed: Feed<T>,
        dp: Depacketizer<T>,
        max_datagram: usize,
        buffer_items: usize,
        stats_interval: Option<Duration>,
        idle_finish: Option<(Duration, Duration)>,
        trace_block: u64,
    ) -> Self {
        let mut output = DefaultCpuWriter::<T>::default();
        output.set_min_buffer_size_in_items(buffer_items);
        let (engine, window, stats_handle, local_addr) = match feed {
            Feed::Engine(e) => {
                let (h, a) = (e.stats_handle(), e.local_addr());
                (Some(e), None, h, a)
            }
            Feed::Window(w) => {
                let (h, a) = (w.stats_handle(), w.local_addr());
                (None, Some(w), h, a)
            }
        };
        Self {
            window,
            output,
            stats_handle,
            local_addr,
            engine,
            final_stats: None,
            dp,
            max_datagram,
            clock: WorkClock::new(stats_interval, idle_finish),
            work_calls: 0,
            trace_block,
            packets: 0,
            contexts: ContextTracker::default(),
        }
    }

    /// The pipe this source starts when built with
    /// [`probe`](UdpSourceBuilder::probe): build its [`ProbeSink`](crate::ProbeSink) from it.
    pub fn probe_spec(&self) -> Option<ProbeSpec> {
        self.dp.marks().map(|m| ProbeSpec {
            block: m.block(),
            granularity: m.granularity(),
        })
    }

    /// The bound address (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The receive backend in use, and its receive threads (`None` once the flowgraph
    /// ended and the engine stopped).
    ///
    /// ```
    /// use fsdr_net::UdpSource;
    ///
    /// let src = UdpSource::<u8>::builder("127.0.0.1:0").reuseport(2, None).build()?;
    /// assert_eq!(src.backend(), Some((fsdr_net::io::Backend::Reuseport, 2)));
    /// # Ok::<(), fsdr_net::Error>(())
    /// ```
    pub fn backend(&self) -> Option<(fsdr_net_io::Backend, usize)> {
        if let Some(w) = &self.window {
            return w.rx.as_ref().map(|_| (w.backend(), 1));
        }
        self.engine.as_ref().map(|e| (e.backend(), e.threads()))
    }

    /// Every counter: live while running, final after the flowgraph ended.
    pub fn stats(&self) -> SourceStats {
        if let Some(w) = &self.window {
            let (engine, stream) = w.stats();
            return SourceStats { engine, stream };
        }
        SourceStats {
            engine: self
                .final_stats
                .clone()
                .unwrap_or_else(|| self.stats_handle.snapshot()),
            stream: self.dp.stats(),
        }
    }

    /// A handle that reads the engine's counters from another thread while the flowgraph
    /// runs.
    pub fn stats_handle(&self) -> StatsHandle {
        self.stats_handle.clone()
    }

    /// The wire sample encoding in force.
    pub fn wire_format(&self) -> fsdr_net_io::WireFormat {
        self.dp.decoder().wire()
    }

    /// Payload bytes per output item on the wire.
    pub fn bytes_per_item(&self) -> usize {
        let d = self.dp.decoder();
        d.unit_bytes() / d.items_per_unit()
    }

    /// How often `work()` ran (a diagnostic: a source that sleeps runs rarely when idle).
    pub fn work_calls(&self) -> u64 {
        self.work_calls
    }

    /// Items produced so far, zeros included.
    pub fn items_produced(&self) -> u64 {
        self.stats().stream.items
    }

    /// Zero items inserted for missed frames.
    pub fn zeros_inserted(&self) -> u64 {
        self.stats().stream.zeros_inserted
    }

    /// Items lost at gaps, whether or not they were zero-filled.
    pub fn missed_items(&self) -> u64 {
        self.stats().stream.missed_items
    }

    /// One pass: fills the output from pending zeros, staged data and the engine.
    fn fill(&mut self, gaps: &mut Vec<GapEvent>, now: Instant) -> Stop {
        let Some(mut engine) = self.engine.take() else {
            return Stop::Idle;
        };
        let (out, mut tags) = self.output.slice_with_tags();
        let mut w = self.dp.writer(out);
        let mut stop = Stop::Idle;
        loop {
            if !w.fits(self.max_datagram) {
                stop = Stop::OutputFull;
                break;
            }
            let Some(d) = engine.try_recv() else { break };
            self.clock.data(now);
            if d.info().class == PacketClass::Context {
                // Settings apply from the sample time the context packet states.
                let at = d.info().timestamp;
                for (name, value) in self.contexts.take(d.bytes()) {
                    w.tag_at(TagKind::Setting { name, value }, at);
                }
                continue;
            }
            w.push(&DatagramIn::from_datagram(&d));
            trace_packet(self.trace_block, &mut self.packets, &d);
        }
        gaps.extend(w.take_gaps());
        let (n, item_tags) = w.finish();
        for ItemTag { index, kind } in item_tags {
            for t in tags_of(kind) {
                tags.add_tag(index, t);
            }
        }
        self.output.produce(n);
        self.engine = Some(engine);
        stop
    }
}

#[doc(hidden)]
impl<T: Item> Kernel for UdpSource<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        self.work_calls += 1;
        let call = self.clock.begin();
        if self.window.is_some() {
            return self.work_window(io, mo, call).await;
        }
        let now = call.now;
        if self.engine.is_none() {
            io.finished = true;
            return Ok(());
        }
        let mut gaps = Vec::new();
        let stop = self.fill(&mut gaps, now);
        for g in &gaps {
            mo.post("missed", gap_pmt(g)).await?;
        }
        for c in self.contexts.drain_new() {
            mo.post("context", context_pmt(&c)).await?;
        }
        if self.clock.stats_due(call) {
            mo.post("stats", self.stats().to_pmt()).await?;
        }
        if let Stop::Idle = stop {
            let engine = self.engine.as_ref().expect("engine present");
            let idle_end = self.clock.idle_end();
            if self.clock.idle_over(now) && engine.next_deadline().is_none() && !self.dp.pending() {
                // The stream is over: stop the engine and say so with the final counters.
                let engine = self.engine.take().expect("engine present");
                self.final_stats = Some(engine.shutdown());
                mo.post("stats", self.stats().to_pmt()).await?;
                io.finished = true;
                return Ok(());
            }
            // An idle end that has passed waits for what the engine still holds (its
            // deadline): it is no wake-up of its own (before, it woke `work` at once on
            // every call until then: a core spun for the reorder timeout).
            let deadlines = [engine.next_deadline(), idle_end.filter(|&end| end > now)];
            self.clock
                .sleep(io, engine.notifier().notified(), deadlines, now);
        }
        Ok(())
    }

    async fn deinit(&mut self, _mo: &mut MessageOutputs, _meta: &mut BlockMeta) -> Result<()> {
        if let Some(w) = self.window.as_mut() {
            w.shutdown(None);
        }
        if let Some(engine) = self.engine.take() {
            let stats = engine.shutdown();
            tracing::debug!(%stats, "UdpSource stopped");
            self.final_stats = Some(stats);
        }
        Ok(())
    }
}
