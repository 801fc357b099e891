//! [`MultiInPlaceUdpSource`]: one port, several streams, one zero-copy output each — the
//! kernel sorts the datagrams to one in-place receiver per stream.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fsdr_net_io::inplace::InPlaceReceiver;
use fsdr_net_io::sample::Item;
use fsdr_net_io::{Notify, StreamSelector};
use futuresdr::runtime::buffer::circuit;
use futuresdr::runtime::dev::prelude::*;

use super::inplace::{HandedDown, Lane, OutBuf};
use super::{MultiSourceStats, WorkClock, context_pmt, gap_pmt};

/// Receives several streams of one port — the channels of a multi-channel radio (CHDR
/// destination endpoints), DIFI/VITA-49 streams (stream IDs) — each into an output of its
/// own without copying payloads, as an [`InPlaceUdpSource`](crate::InPlaceUdpSource) of
/// that stream alone would: one `SO_REUSEPORT` socket and in-place receiver per stream, a
/// classic-BPF program on the port that makes the kernel deliver each datagram to its
/// stream's socket, and
/// [`stream_threads`](crate::UdpSourceBuilder::stream_threads) receive threads for the
/// receivers (by default one per stream up to half the CPUs; on 2 CPUs one thread serves
/// every stream). Each output has its own sequence tracking, zero-fill,
/// gap, time, end-of-burst and context tags and counters; a late reader of one output holds
/// up only its own stream (its receiver stops reading and its socket's buffer absorbs).
/// Datagrams of any other stream go to the first output's receiver and are counted in its
/// `skipped` (the engine counters of [`MultiSourceStats::engine`]) and per stream in
/// [`MultiSourceStats::skipped_by_stream`], as [`MultiUdpSource`](crate::MultiUdpSource)
/// counts them. Built with
/// [`UdpSourceBuilder::build_streams_in_place`](crate::UdpSourceBuilder::build_streams_in_place):
/// CHDR or VRT, [`StreamSelector::Id`], `recvmmsg`, no UDP GRO.
///
/// A sender that uses UDP GSO must send each stream's datagrams in sends of their own (a GSO
/// send reaches the socket of its first datagram's stream); a radio sends datagrams one by
/// one, and `usrp_sim` sends each channel's separately.
///
/// # Stream Outputs
///
/// `outputs[0]`, `outputs[1]`, …: circuit writers, one per stream, each closed with its
/// reader (`connect!(fg, src.outputs[0] > a; src.outputs[0] < a)`). Tags as in `UdpSource`.
///
/// # Message Outputs
///
/// `missed`: one `MapStrPmt` per gap (`output`, `frames`, `items`, `seq`). `context`: the
/// VRT/DIFI context of a stream when it changes. `stats`: every `stats_interval` and when the
/// source ends ([`MultiSourceStats::to_pmt`]).
///
/// # Usage
/// ```no_run
/// use fsdr_net::prelude::*;
/// use fsdr_net::io::StreamSelector;
/// use futuresdr::blocks::NullSink;
/// use futuresdr::num_complex::Complex;
/// use futuresdr::runtime::buffer::circuit;
/// use futuresdr::runtime::macros::connect;
/// use futuresdr::runtime::{Flowgraph, Runtime};
///
/// # fn main() -> anyhow::Result<()> {
/// let src = UdpSource::<Complex<i16>>::builder("0.0.0.0:49000")
///     .format(Format::Chdr)
///     .tick_rate(250e6)
///     .zero_fill_missed(true)
///     .build_streams_in_place([StreamSelector::Id(0), StreamSelector::Id(1)])?;
/// let a = NullSink::<Complex<i16>, circuit::Reader<Complex<i16>>>::new();
/// let b = NullSink::<Complex<i16>, circuit::Reader<Complex<i16>>>::new();
/// let mut fg = Flowgraph::new();
/// connect!(fg, src.outputs[0] > a; src.outputs[0] < a; src.outputs[1] > b; src.outputs[1] < b);
/// Runtime::new().run(fg)?;
/// # Ok(())
/// # }
/// ```
#[derive(Block)]
#[message_outputs(missed, stats, context)]
pub struct MultiInPlaceUdpSource<T: Item> {
    #[output]
    outputs: Vec<circuit::Writer<T>>,
    /// One per output, in output order.
    lanes: Vec<Lane<T>>,
    selectors: Vec<StreamSelector>,
    /// What every receiver signals.
    notify: Arc<Notify>,
    local_addr: SocketAddr,
    final_stats: Option<MultiSourceStats>,
    /// The worker policy, the idle clock, the `stats` timer and the timer it sleeps on.
    pub(super) clock: WorkClock,
}

impl<T: Item> MultiInPlaceUdpSource<T> {
    pub(super) fn new(
        rxs: Vec<InPlaceReceiver<T, OutBuf<T>>>,
        selectors: Vec<StreamSelector>,
        buffers: usize,
        buffer_items: usize,
        stats_interval: Option<Duration>,
        idle_finish: Option<(Duration, Duration)>,
    ) -> Self {
        let notify = rxs[0].notifier();
        let local_addr = rxs[0].local_addr();
        let outputs = rxs
            .iter()
            .map(|_| {
                let mut o = circuit::Writer::<T>::new();
                o.inject_buffers_with_items(buffers, buffer_items);
                o
            })
            .collect();
        Self {
            outputs,
            lanes: rxs
                .into_iter()
                .map(|rx| Lane::new(rx, buffer_items))
                .collect(),
            selectors,
            notify,
            local_addr,
            final_stats: None,
            clock: WorkClock::new(stats_interval, idle_finish),
        }
    }

    /// The bound address (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// How many outputs (streams) the source has.
    pub fn streams(&self) -> usize {
        self.lanes.len()
    }

    /// Every counter: live while running, final after the source ended. `engine` adds up
    /// the receivers' counters (one socket each: `Stats::combined`); each output's
    /// `datagrams` are the data datagrams its receiver took (not the stream's context
    /// packets, as `MultiUdpSource` counts them), `missed` its receiver's.
    pub fn stats(&self) -> MultiSourceStats {
        if let Some(s) = &self.final_stats {
            return s.clone();
        }
        Self::stats_of(
            &self.selectors,
            &self.lanes,
            self.lanes.iter().map(Lane::stats),
        )
    }

    fn stats_of(
        selectors: &[StreamSelector],
        lanes: &[Lane<T>],
        each: impl IntoIterator<Item = super::SourceStats>,
    ) -> MultiSourceStats {
        MultiSourceStats::of_receivers(
            selectors,
            each,
            lanes.iter().flat_map(Lane::skipped_by_stream),
        )
    }

    /// Posts what a hand-over of output `i` left: its gaps (with the output) and contexts.
    async fn post(mo: &mut MessageOutputs, i: usize, h: HandedDown) -> Result<()> {
        for g in &h.gaps {
            let mut pmt = gap_pmt(g);
            if let Pmt::MapStrPmt(m) = &mut pmt {
                m.insert("output".to_string(), Pmt::U64(i as u64));
            }
            mo.post("missed", pmt).await?;
        }
        for c in &h.contexts {
            mo.post("context", context_pmt(c)).await?;
        }
        Ok(())
    }

    /// Stops every receiver, passes on what they still had, and keeps the final counters.
    async fn finish(&mut self, mo: &mut MessageOutputs, now: Instant) -> Result<()> {
        let mut each = Vec::with_capacity(self.lanes.len());
        for (i, (lane, out)) in self.lanes.iter_mut().zip(&mut self.outputs).enumerate() {
            let Some((stats, rest)) = lane.shutdown() else {
                continue;
            };
            for f in rest {
                let h = lane.hand_down(out, f);
                if h.data {
                    self.clock.data(now);
                }
                Self::post(mo, i, h).await?;
            }
            each.push(stats);
        }
        self.final_stats = Some(Self::stats_of(&self.selectors, &self.lanes, each));
        Ok(())
    }
}

#[doc(hidden)]
impl<T: Item> Kernel for MultiInPlaceUdpSource<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let call = self.clock.begin();
        let now = call.now;
        if self.final_stats.is_some() {
            io.finished = true;
            return Ok(());
        }
        for (i, (lane, out)) in self.lanes.iter_mut().zip(&mut self.outputs).enumerate() {
            lane.lend(out);
            while let Some(f) = lane.rx.as_mut().and_then(|rx| rx.take()) {
                let h = lane.hand_down(out, f);
                if h.data {
                    self.clock.data(now);
                }
                Self::post(mo, i, h).await?;
            }
            lane.lend(out);
        }
        if self.clock.stats_due(call) {
            mo.post("stats", self.stats().to_pmt()).await?;
        }
        if self.clock.idle_over(now) {
            // Every stream is over: stop the receivers and say so with the final counters.
            self.finish(mo, now).await?;
            mo.post("stats", self.stats().to_pmt()).await?;
            io.finished = true;
            return Ok(());
        }
        self.clock
            .sleep(io, self.notify.notified(), [self.clock.idle_end()], now);
        Ok(())
    }

    async fn deinit(&mut self, mo: &mut MessageOutputs, _meta: &mut BlockMeta) -> Result<()> {
        if self.final_stats.is_none() {
            self.finish(mo, Instant::now()).await?;
            tracing::debug!(stats = %self.stats().engine, "MultiInPlaceUdpSource stopped");
        }
        Ok(())
    }
}
