//! [`MultiUdpSource`]: one port, several streams (the channels of a multi-channel radio,
//! DIFI streams told apart by stream ID), one output each.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use std::time::{Duration, Instant};

use fsdr_net_io::depacketizer::{DatagramIn, Depacketizer, GapEvent, ItemTag, TagKind};
use fsdr_net_io::format::vrt::context::ContextTracker;
use fsdr_net_io::format::{PacketClass, PacketInfo};
use fsdr_net_io::sample::Item;
use fsdr_net_io::seq::Gap;
use fsdr_net_io::{Engine, Stats, StatsHandle, StreamSelector};
use futuresdr::runtime::dev::prelude::*;

use super::window::WindowLane;
use super::{MultiSourceStats, Stop, StreamStats, WorkClock, context_pmt, gap_pmt, tags_of};

/// How long a full output holds the reading of every stream when the engine's queue has no
/// latency budget (half the default one).
pub(super) const HOLD_UNBOUNDED: Duration = Duration::from_millis(10);

/// A datagram its output had no room for, copied out of the engine's slot.
struct Waiting {
    bytes: Vec<u8>,
    info: PacketInfo,
    gap: Gap,
    restart: bool,
    arrival_ns: u64,
}

impl Waiting {
    fn input(&self) -> DatagramIn<'_> {
        DatagramIn {
            payload: &self.bytes[self.info.payload()],
            gap: self.gap,
            restart: self.restart,
            timestamp: self.info.timestamp,
            eob: self.info.eob,
            seq: self.info.seq,
            arrival_ns: self.arrival_ns,
        }
    }
}

/// One output's state (its selector is `selectors[i]`).
struct Output<T> {
    dp: Depacketizer<T>,
    datagrams: u64,
    missed: u64,
    overflow: u64,
    /// Datagrams waiting for this output's reader, oldest first.
    backlog: VecDeque<Waiting>,
    /// Dropped datagrams (and the gaps before them) not yet given to the depacketizer:
    /// added to the next datagram's gap, so the stream's timeline stays exact.
    dropped: Gap,
    /// A dropped datagram restarted the stream: the next one does.
    dropped_restart: bool,
    /// Since when this output's backlog has not been empty (its reader is late).
    late_since: Option<Instant>,
}

/// `d` with what was dropped before it added to its gap (`dropped`, `restart`: an
/// output's [`Output::dropped`] and [`Output::dropped_restart`]).
fn with_dropped<'a>(
    dropped: &mut Gap,
    restart: &mut bool,
    mut d: DatagramIn<'a>,
) -> DatagramIn<'a> {
    let p = std::mem::take(dropped);
    d.restart |= std::mem::take(restart);
    if p.frames > 0 {
        let own = d.gap.bytes.unwrap_or(d.gap.frames * d.payload.len() as u64);
        d.gap = Gap {
            frames: d.gap.frames + p.frames,
            bytes: Some(own + p.bytes.unwrap_or(0)),
            ambiguous: d.gap.ambiguous || p.ambiguous,
        };
    }
    d
}

/// Notes `d` as dropped behind its reader: its gap and its payload become part of the next
/// datagram's gap (a dropped restart makes the next one a restart).
fn note_dropped(dropped: &mut Gap, restart: &mut bool, d: &DatagramIn<'_>) {
    if d.restart {
        *dropped = Gap::default();
        *restart = true;
        return;
    }
    let own = d.gap.bytes.unwrap_or(d.gap.frames * d.payload.len() as u64);
    *dropped = Gap {
        frames: dropped.frames + d.gap.frames + 1,
        bytes: Some(dropped.bytes.unwrap_or(0) + own + d.payload.len() as u64),
        ambiguous: dropped.ambiguous || d.gap.ambiguous,
    };
}

/// A UDP source for several streams on one port: each datagram goes to the output whose
/// [`StreamSelector`] matches it (VRT stream ID, CHDR destination endpoint, or sender), and
/// each output has its own sequence tracking, zero-fill, gap, time, end-of-burst and
/// context tags and counters, exactly as a [`UdpSource`](crate::UdpSource) of that stream
/// alone. Datagrams no output asked for are counted per stream key
/// ([`MultiSourceStats::skipped_by_stream`]) and dropped. Built with
/// [`UdpSourceBuilder::build_streams`](crate::UdpSourceBuilder::build_streams); every
/// backend works.
///
/// Each output is filled in its stream's order, independently of the others. When one
/// output's reader falls behind, the source first stops reading, as a lone
/// [`UdpSource`](crate::UdpSource) does, and lets the engine's queue hold the datagrams of
/// every stream — for at most half the engine's queue bound,
/// [`latency_budget`](crate::io::EngineConfig::latency_budget) (10 ms by default, and without
/// a bound) — so that a reader late by a scheduling hiccup loses nothing. A reader still behind after
/// that no longer holds the others up: its datagrams wait in a backlog of its own (as many
/// as [`buffer_datagrams`](crate::UdpSourceBuilder::buffer_datagrams)), and beyond that are
/// dropped, counted in that stream's [`StreamStats::overflow`] and zero-filled like a gap;
/// the other streams go on losing nothing. Reading stops for good only when every output is
/// blocked.
///
/// **Zero copy** ([`zero_copy`](crate::UdpSourceBuilder::zero_copy); by default where the
/// items are the wire's bytes or decoded where they land, e.g. sc16 CHDR as `Complex<i16>` or
/// `Complex<f32>`, the selectors are stream IDs
/// and no backend is chosen): each output is filled in place by an in-place receiver of its
/// own, as in [`MultiInPlaceUdpSource`](crate::MultiInPlaceUdpSource) — a socket per stream,
/// the kernel steering each datagram to its stream's — lending windows of the output's
/// buffer; the outputs, tags and messages are the same. A late reader then holds up its own
/// stream alone: its receiver stops reading, its socket's buffer absorbs the wait
/// ([`recv_buffer`](crate::UdpSourceBuilder::recv_buffer)), and beyond that the kernel
/// drops its datagrams (counted in `kernel_drops`, zero-filled and tagged like any gap once
/// the next datagram arrives); [`StreamStats::overflow`] stays 0.
///
/// # Stream Outputs
///
/// `outputs[0]`, `outputs[1]`, …: the samples of each selected stream, with tags.
///
/// # Message Outputs
///
/// `missed`: one `MapStrPmt` per gap (`output`, `frames`, `items`, `seq`). `context`: the
/// VRT/DIFI context of a stream when it changes (with `stream_id`). `stats`: the final
/// counters when the source ends ([`MultiSourceStats::to_pmt`]).
///
/// # Usage
/// ```no_run
/// use fsdr_net::prelude::*;
/// use fsdr_net::io::StreamSelector;
/// use futuresdr::blocks::NullSink;
/// use futuresdr::num_complex::Complex32;
/// use futuresdr::runtime::macros::connect;
/// use futuresdr::runtime::{Flowgraph, Runtime};
///
/// # fn main() -> anyhow::Result<()> {
/// let src = UdpSource::<Complex32>::builder("0.0.0.0:49000")
///     .format(Format::Vrt)
///     .sample_rate(50e6)
///     .build_streams([StreamSelector::Id(0), StreamSelector::Id(1)])?; // channels 0 and 1
/// let (a, b) = (NullSink::<Complex32>::new(), NullSink::<Complex32>::new());
/// let mut fg = Flowgraph::new();
/// connect!(fg, src.outputs[0] > a; src.outputs[1] > b);
/// Runtime::new().run(fg)?;
/// # Ok(())
/// # }
/// ```
#[derive(Block)]
#[message_outputs(missed, stats, context)]
pub struct MultiUdpSource<T: Item> {
    /// Zero copy: one in-place receiver per output, writing into its memory (declared
    /// first, so that they are dropped, their threads joined, before the writers); empty
    /// when the engine feeds the outputs.
    pub(super) windows: Vec<WindowLane<T>>,
    #[output]
    pub(super) outputs: Vec<DefaultCpuWriter<T>>,
    /// Which datagrams each output takes.
    pub(super) selectors: Vec<StreamSelector>,
    /// Each output's state when the engine feeds them (empty with zero copy).
    streams: Vec<Output<T>>,
    engine: Option<Engine>,
    stats_handle: StatsHandle,
    local_addr: SocketAddr,
    final_stats: Option<Stats>,
    max_datagram: usize,
    /// The worker policy, the idle clock and the timer it sleeps on (no periodic `stats`).
    pub(super) clock: WorkClock,
    /// Datagrams an output may keep waiting for its reader.
    backlog_cap: usize,
    /// How long a full output may stop the reading of every stream.
    hold: Duration,
    /// When the hold for a late reader ends, if `fill` stopped for one.
    hold_end: Option<Instant>,
    /// Byte buffers of datagrams that waited, for the next ones to wait (no allocation per
    /// waiting datagram once a backlog has been this deep).
    spare: Vec<Vec<u8>>,
    /// Datagrams of unselected streams by (stream ID, sender); named only when read.
    skipped: HashMap<(Option<u32>, SocketAddr), u64>,
    contexts: ContextTracker,
}

/// What feeds a [`MultiUdpSource`]: the engine and a depacketizer per output, or with zero
/// copy an in-place receiver per output.
// Passed once to `MultiUdpSource::new`, which takes it apart: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(super) enum MultiFeed<T: Item> {
    Engine {
        engine: Engine,
        /// One per output.
        dps: Vec<Depacketizer<T>>,
        /// The largest datagram the engine takes.
        max_datagram: usize,
    },
    Windows(Vec<WindowLane<T>>),
}

impl<T: Item> MultiUdpSource<T> {
    /// `buffer_items`: the least items of each output's buffer.
    pub(super) fn new(
        feed: MultiFeed<T>,
        selectors: Vec<StreamSelector>,
        buffer_items: usize,
        buffer_datagrams: usize,
        hold: Duration,
        idle_finish: Option<(Duration, Duration)>,
    ) -> Self {
        let outputs = selectors
            .iter()
            .map(|_| {
                let mut o = DefaultCpuWriter::<T>::default();
                o.set_min_buffer_size_in_items(buffer_items);
                o
            })
            .collect();
        let (engine, windows, max_datagram, streams) = match feed {
            MultiFeed::Engine {
                engine,
                dps,
                max_datagram,
            } => {
                let streams = dps
                    .into_iter()
                    .map(|dp| Output {
                        dp,
                        datagrams: 0,
                        missed: 0,
                        overflow: 0,
                        backlog: VecDeque::new(),
                        dropped: Gap::default(),
                        dropped_restart: false,
                        late_since: None,
                    })
                    .collect();
                (Some(engine), Vec::new(), max_datagram, streams)
            }
            MultiFeed::Windows(lanes) => (None, lanes, 0, Vec::new()),
        };
        let (stats_handle, local_addr) = match (&engine, windows.first()) {
            (Some(e), _) => (e.stats_handle(), e.local_addr()),
            (None, Some(lane)) => (lane.stats_handle(), lane.local_addr()),
            (None, None) => unreachable!("a multi-stream source has an output"),
        };
        Self {
            windows,
            outputs,
            selectors,
            streams,
            stats_handle,
            local_addr,
            engine,
            final_stats: None,
            max_datagram,
            clock: WorkClock::new(None, idle_finish),
            backlog_cap: buffer_datagrams.max(1),
            hold,
            hold_end: None,
            spare: Vec::new(),
            skipped: HashMap::new(),
            contexts: ContextTracker::default(),
        }
    }

    /// The bound address (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// How many outputs (streams) the source has.
    pub fn streams(&self) -> usize {
        self.selectors.len()
    }

    /// Every counter: live while running, final after the flowgraph ended.
    pub fn stats(&self) -> MultiSourceStats {
        if !self.windows.is_empty() {
            return self.windows_stats();
        }
        MultiSourceStats {
            engine: self
                .final_stats
                .clone()
                .unwrap_or_else(|| self.stats_handle.snapshot()),
            streams: self
                .selectors
                .iter()
                .zip(&self.streams)
                .map(|(sel, s)| StreamStats {
                    selector: sel.to_string(),
                    datagrams: s.datagrams,
                    missed: s.missed,
                    overflow: s.overflow,
                    stream: s.dp.stats(),
                })
                .collect(),
            skipped_by_stream: self
                .skipped
                .iter()
                .map(|(&(id, from), &n)| (StreamSelector::key_of(id, from), n))
                .collect(),
        }
    }

    /// One pass: each output takes what waits for it, then every datagram the engine has
    /// goes to its output, or into that output's backlog when its reader is behind, or —
    /// backlog full — is dropped and counted for that stream alone. Reading stops only when
    /// every output is blocked, so one slow reader never makes the other streams lose data.
    ///
    /// `ending`: the stream is over; datagrams dropped at its very end (with no successor to
    /// carry their gap) are zero-filled now.
    fn fill(&mut self, gaps: &mut Vec<(usize, GapEvent)>, now: Instant, ending: bool) -> Stop {
        let Some(mut engine) = self.engine.take() else {
            return Stop::Idle;
        };
        let max = self.max_datagram;
        let cap = self.backlog_cap;
        let mut bufs: Vec<_> = self
            .outputs
            .iter_mut()
            .map(|o| o.slice_with_tags())
            .collect();
        let mut writers: Vec<_> = Vec::with_capacity(self.streams.len());
        let mut outs: Vec<_> = Vec::with_capacity(self.streams.len());
        for (s, (out, _)) in self.streams.iter_mut().zip(bufs.iter_mut()) {
            let Output {
                dp,
                datagrams,
                missed,
                overflow,
                backlog,
                dropped,
                dropped_restart,
                late_since,
            } = s;
            writers.push(dp.writer(out));
            outs.push((
                datagrams,
                missed,
                overflow,
                backlog,
                dropped,
                dropped_restart,
                late_since,
            ));
        }
        let mut stop = Stop::Idle;
        // What waited for room goes first, in order.
        for (w, o) in writers.iter_mut().zip(outs.iter_mut()) {
            while let Some(front) = o.3.front() {
                if !w.fits(front.info.payload_len as usize) {
                    break;
                }
                let front = o.3.pop_front().expect("a waiting datagram");
                w.push(&front.input());
                if self.spare.len() < cap {
                    self.spare.push(front.bytes);
                }
            }
        }
        for o in outs.iter_mut().filter(|o| o.3.is_empty()) {
            *o.6 = None;
        }
        // A reader late for less than the hold keeps every stream in the engine's queue: read
        // nothing until it has taken what waits for it.
        self.hold_end = outs
            .iter()
            .filter_map(|o| o.6.map(|late| late + self.hold))
            .filter(|&end| now < end)
            .min();
        if self.hold_end.is_some() {
            stop = Stop::OutputFull;
        }
        while self.hold_end.is_none() {
            // An output with room has an empty backlog (drained above): only full backlogs
            // block, and only all of them stop reading.
            if outs.iter().all(|o| o.3.len() >= cap) {
                stop = Stop::OutputFull;
                break;
            }
            let Some(d) = engine.try_recv() else { break };
            self.clock.data(now);
            let (id, source) = (d.info().stream_id, d.meta().source);
            let Some(i) = self.selectors.iter().position(|s| s.matches(id, source)) else {
                *self.skipped.entry((id, source)).or_default() += 1;
                continue;
            };
            if d.info().class == PacketClass::Context {
                let at = d.info().timestamp;
                for (name, value) in self.contexts.take(d.bytes()) {
                    writers[i].tag_at(TagKind::Setting { name, value }, at);
                }
                continue;
            }
            let o = &mut outs[i];
            *o.0 += 1;
            *o.1 += d.gap().frames;
            let input = DatagramIn::from_datagram(&d);
            if o.3.len() >= cap {
                *o.2 += 1;
                note_dropped(o.4, o.5, &input);
                continue;
            }
            // What was dropped just before it is part of its gap.
            let input = with_dropped(o.4, o.5, input);
            if o.3.is_empty() && writers[i].fits(max) {
                writers[i].push(&input);
            } else {
                let mut bytes = self.spare.pop().unwrap_or_default();
                bytes.clear();
                bytes.extend_from_slice(d.bytes());
                o.3.push_back(Waiting {
                    bytes,
                    info: *d.info(),
                    gap: input.gap,
                    restart: input.restart,
                    arrival_ns: input.arrival_ns,
                });
                // Its reader is behind: hold every stream in the engine's queue for a while
                // (the reader may only be late) rather than fill the backlog and drop.
                let end = *o.6.get_or_insert(now) + self.hold;
                if now < end {
                    self.hold_end = Some(end);
                    stop = Stop::OutputFull;
                    break;
                }
            }
        }
        if ending {
            for (w, o) in writers.iter_mut().zip(outs.iter_mut()) {
                if o.3.is_empty() && o.4.frames > 0 && !w.pending() {
                    let mut last = DatagramIn::new(&[]);
                    last.gap.frames = 0;
                    w.push(&with_dropped(o.4, o.5, last));
                }
            }
        }
        let done: Vec<_> = writers
            .into_iter()
            .enumerate()
            .map(|(i, mut w)| {
                gaps.extend(w.take_gaps().into_iter().map(|g| (i, g)));
                w.finish()
            })
            .collect();
        drop(outs);
        let mut produced = Vec::with_capacity(done.len());
        for ((n, item_tags), (_, tags)) in done.into_iter().zip(bufs.iter_mut()) {
            for ItemTag { index, kind } in item_tags {
                for t in tags_of(kind) {
                    tags.add_tag(index, t);
                }
            }
            produced.push(n);
        }
        drop(bufs);
        for (o, n) in self.outputs.iter_mut().zip(produced) {
            o.produce(n);
        }
        self.engine = Some(engine);
        stop
    }

    fn pending(&self) -> bool {
        self.streams
            .iter()
            .any(|s| s.dp.pending() || !s.backlog.is_empty() || s.dropped.frames > 0)
    }
}

#[doc(hidden)]
impl<T: Item> Kernel for MultiUdpSource<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let now = self.clock.begin().now;
        if !self.windows.is_empty() {
            return self.work_windows(io, mo, now).await;
        }
        if self.engine.is_none() {
            io.finished = true;
            return Ok(());
        }
        let mut gaps = Vec::new();
        let ending = self.clock.idle_over(now)
            && self
                .engine
                .as_ref()
                .is_some_and(|e| e.next_deadline().is_none());
        let stop = self.fill(&mut gaps, now, ending);
        for (i, g) in &gaps {
            let mut pmt = gap_pmt(g);
            if let Pmt::MapStrPmt(m) = &mut pmt {
                m.insert("output".to_string(), Pmt::U64(*i as u64));
            }
            mo.post("missed", pmt).await?;
        }
        for c in self.contexts.drain_new() {
            mo.post("context", context_pmt(&c)).await?;
        }
        if let (Stop::OutputFull, Some(end)) = (&stop, self.hold_end) {
            // Held for a late reader: its consumption calls `work` again; if it does not
            // come, the end of the hold does, and the other streams are read on.
            self.clock.hold_until(io, end, now);
        }
        if let Stop::Idle = stop {
            let engine = self.engine.as_ref().expect("engine present");
            let idle_end = self.clock.idle_end();
            if self.clock.idle_over(now) && engine.next_deadline().is_none() && !self.pending() {
                let engine = self.engine.take().expect("engine present");
                self.final_stats = Some(engine.shutdown());
                mo.post("stats", self.stats().to_pmt()).await?;
                io.finished = true;
                return Ok(());
            }
            // A passed idle end waits for the engine's deadline (as `UdpSource`'s).
            let deadlines = [engine.next_deadline(), idle_end.filter(|&end| end > now)];
            self.clock
                .sleep(io, engine.notifier().notified(), deadlines, now);
        }
        Ok(())
    }

    async fn deinit(&mut self, _mo: &mut MessageOutputs, _meta: &mut BlockMeta) -> Result<()> {
        for lane in &mut self.windows {
            lane.shutdown(None);
        }
        if let Some(engine) = self.engine.take() {
            self.final_stats = Some(engine.shutdown());
        }
        Ok(())
    }
}
