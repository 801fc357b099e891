//! [`InPlaceUdpSource`]: the zero-copy source. Its output is FutureSDR's circuit (in-place)
//! buffer; empty buffers travel to an `fsdr-net-io` in-place receive thread, which puts each
//! payload straight into them, and come back full. The block moves buffers, turns tags and
//! gaps into FutureSDR tags and messages, and sleeps when idle.

use std::net::SocketAddr;

use std::time::{Duration, Instant};

use fsdr_net_io::inplace::{Filled, InPlaceReceiver, ItemBuffer};
use fsdr_net_io::sample::Item;
use futuresdr::runtime::buffer::circuit;
use futuresdr::runtime::dev::prelude::*;

use super::{SourceStats, WorkClock, post_found, tags_of};
use crate::probe::ProbeSpec;

/// A circuit buffer lent to the receive thread.
pub struct OutBuf<T: Item>(circuit::Buffer<T>);

// SAFETY: a circuit buffer's items are a boxed slice that stays in place when the buffer
// moves; its valid length is set once, before it is lent (`InPlaceUdpSource::lend`), and not
// changed until it comes back, so `slice` returns the same memory every time.
// Checked by: `a_clean_stream_arrives_whole_without_a_copy` and
// `drops_are_zero_filled_counted_and_messaged`.
unsafe impl<T: Item> ItemBuffer<T> for OutBuf<T> {
    fn items(&mut self) -> &mut [T] {
        self.0.slice()
    }
}

/// Receives a UDP stream like [`UdpSource`](crate::UdpSource), without copying payloads:
/// the receive thread scatters each datagram's payload straight into the output buffer at
/// its sample position (`recvmmsg` iovecs); samples that need byte swapping or conversion
/// (sc16 into `Complex<f32>`) land at the end of their items' room and are decoded forward
/// there. Datagrams whose header or length differs from the stream's, that follow a gap or
/// arrive out of order take the copying path with the same accounting; gaps
/// zero-fill, tag and count exactly as in `UdpSource`. The `stats` port's `copied_bytes`
/// counts what was copied: 0 on the fast path. Built with
/// [`UdpSourceBuilder::build_in_place`](crate::UdpSourceBuilder::build_in_place).
///
/// Zero copy with no conversion at all where the items' memory is the wire's: `Complex<i16>`
/// from `sc16_chdr` (CHDR, raw USRP streams), `u8`/any item from `plain`, `Complex<i8>` from
/// `sc8_difi`, `Complex<f32>` from `fc32`; every other conversion is done in place.
///
/// # Stream Inputs
///
/// No stream inputs.
///
/// # Stream Outputs
///
/// `output`: a circuit writer (`futuresdr::runtime::buffer::circuit::Writer<T>`); the block
/// downstream reads with `circuit::Reader<T>` and the circuit must be closed
/// (`connect!(fg, src > snk; src < snk)`) so buffers come back. Tags as in `UdpSource`.
///
/// # Message Outputs
///
/// `missed`, `stats` and `context`, as in `UdpSource`.
///
/// # Usage
/// ```no_run
/// use fsdr_net::prelude::*;
/// use futuresdr::blocks::NullSink;
/// use futuresdr::num_complex::Complex;
/// use futuresdr::runtime::buffer::circuit;
/// use futuresdr::runtime::macros::connect;
/// use futuresdr::runtime::{Flowgraph, Runtime};
///
/// # fn main() -> anyhow::Result<()> {
/// let src = UdpSource::<Complex<i16>>::builder("0.0.0.0:49000")
///     .format(Format::Chdr) // sc16_chdr: the wire bytes are Complex<i16> on this host
///     .tick_rate(200e6)
///     .zero_fill_missed(true)
///     .build_in_place()?;
/// let snk = NullSink::<Complex<i16>, circuit::Reader<Complex<i16>>>::new();
/// let mut fg = Flowgraph::new();
/// connect!(fg, src > snk; src < snk);
/// Runtime::new().run(fg)?;
/// # Ok(())
/// # }
/// ```
#[derive(Block)]
#[message_outputs(missed, stats, context)]
pub struct InPlaceUdpSource<T: Item> {
    #[output]
    output: circuit::Writer<T>,
    lane: Lane<T>,
    local_addr: SocketAddr,
    final_stats: Option<SourceStats>,
    /// The worker policy, the idle clock, the `stats` timer and the timer it sleeps on.
    pub(super) clock: WorkClock,
    probe: Option<ProbeSpec>,
}

impl<T: Item> InPlaceUdpSource<T> {
    pub(super) fn new(
        rx: InPlaceReceiver<T, OutBuf<T>>,
        buffers: usize,
        buffer_items: usize,
        stats_interval: Option<Duration>,
        idle_finish: Option<(Duration, Duration)>,
        probe: Option<ProbeSpec>,
    ) -> Self {
        let mut output = circuit::Writer::<T>::new();
        output.inject_buffers_with_items(buffers, buffer_items);
        Self {
            output,
            local_addr: rx.local_addr(),
            lane: Lane::new(rx, buffer_items),
            final_stats: None,
            clock: WorkClock::new(stats_interval, idle_finish),
            probe,
        }
    }

    /// The bound address (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Every counter: live while running, final after the source ended.
    pub fn stats(&self) -> SourceStats {
        if let Some(s) = &self.final_stats {
            return s.clone();
        }
        self.lane.stats()
    }

    /// The pipe this source starts when built with a probe: build its
    /// [`ProbeSink`](crate::ProbeSink) from it.
    pub fn probe_spec(&self) -> Option<ProbeSpec> {
        self.probe
    }

    /// Puts a filled buffer downstream and posts its gaps and contexts.
    async fn put(
        &mut self,
        f: Filled<OutBuf<T>>,
        mo: &mut MessageOutputs,
        now: Instant,
    ) -> Result<()> {
        let h = self.lane.hand_down(&mut self.output, f);
        post_found(mo, &h.gaps, &h.contexts).await?;
        if h.data {
            self.clock.data(now);
        }
        Ok(())
    }
}

#[doc(hidden)]
impl<T: Item> Kernel for InPlaceUdpSource<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let call = self.clock.begin();
        let now = call.now;
        if self.lane.rx.is_none() {
            io.finished = true;
            return Ok(());
        }
        self.lane.lend(&mut self.output);
        while let Some(f) = self.lane.rx.as_mut().and_then(|rx| rx.take()) {
            self.put(f, mo, now).await?;
        }
        self.lane.lend(&mut self.output);
        if self.clock.stats_due(call) {
            mo.post("stats", self.stats().to_pmt()).await?;
        }
        if self.clock.idle_over(now) {
            // The stream is over: stop the receive thread, pass on what it still had, and
            // say so with the final counters.
            let (stats, rest) = self.lane.shutdown().expect("receiver present");
            for f in rest {
                self.put(f, mo, now).await?;
            }
            self.final_stats = Some(stats);
            mo.post("stats", self.stats().to_pmt()).await?;
            io.finished = true;
            return Ok(());
        }
        self.clock
            .sleep(io, self.lane.notified(), [self.clock.idle_end()], now);
        Ok(())
    }

    async fn deinit(&mut self, _mo: &mut MessageOutputs, _meta: &mut BlockMeta) -> Result<()> {
        if let Some((stats, _)) = self.lane.shutdown() {
            tracing::debug!(stats = %stats.engine, "InPlaceUdpSource stopped");
            self.final_stats = Some(stats);
        }
        Ok(())
    }
}

/// One output of an in-place source and the receiver that fills it: empty buffers go to the
/// receiver, filled ones downstream.
pub(super) struct Lane<T: Item> {
    /// The receiver (`None` once shut down).
    pub(super) rx: Option<InPlaceReceiver<T, OutBuf<T>>>,
    /// Items of every buffer.
    buffer_items: usize,
    /// Buffers the receive thread had no room for yet.
    spare: Vec<circuit::Buffer<T>>,
    /// The receiver's counters, also after it shut down.
    handle: fsdr_net_io::StatsHandle,
}

/// What [`Lane::hand_down`] leaves to the block: the messages of a filled buffer.
pub(super) struct HandedDown {
    pub(super) gaps: Vec<fsdr_net_io::depacketizer::GapEvent>,
    pub(super) contexts: Vec<fsdr_net_io::format::vrt::context::IfContext>,
    /// The buffer held items (and went downstream).
    pub(super) data: bool,
}

impl<T: Item> Lane<T> {
    pub(super) fn new(rx: InPlaceReceiver<T, OutBuf<T>>, buffer_items: usize) -> Self {
        Self {
            handle: rx.stats_handle(),
            rx: Some(rx),
            buffer_items,
            spare: Vec::new(),
        }
    }

    /// Datagrams of other streams the receiver skipped, per stream key (live, and final
    /// after the shutdown).
    pub(super) fn skipped_by_stream(&self) -> impl Iterator<Item = (String, u64)> + use<T> {
        skipped_keys(&self.handle)
    }

    /// Fires when the receiver hands a buffer back (it must still run).
    pub(super) fn notified(&self) -> fsdr_net_io::Notified {
        let rx = self.rx.as_ref().expect("receiver present");
        rx.notifier().notified()
    }

    /// Every counter of the receiver (default once it is shut down).
    pub(super) fn stats(&self) -> SourceStats {
        match &self.rx {
            Some(rx) => SourceStats {
                engine: rx.stats(),
                stream: rx.depacketizer_stats(),
            },
            None => SourceStats::default(),
        }
    }

    /// Lends every empty buffer of `output` to the receive thread.
    pub(super) fn lend(&mut self, output: &mut circuit::Writer<T>) {
        let Some(rx) = self.rx.as_mut() else { return };
        loop {
            let b = match self.spare.pop() {
                Some(b) => b,
                None => match output.get_empty_buffer() {
                    Some(mut b) => {
                        // Buffers made anew by the writer start empty: use all of them.
                        b.set_valid(self.buffer_items);
                        b
                    }
                    None => return,
                },
            };
            if let Err(OutBuf(b)) = rx.give(OutBuf(b)) {
                self.spare.push(b);
                return;
            }
        }
    }

    /// Puts a filled buffer downstream with its tags (an empty one back to the spares).
    pub(super) fn hand_down(
        &mut self,
        output: &mut circuit::Writer<T>,
        f: Filled<OutBuf<T>>,
    ) -> HandedDown {
        let Filled {
            buffer: OutBuf(mut b),
            items,
            tags,
            gaps,
            contexts,
        } = f;
        let data = items > 0;
        if data {
            b.set_valid(items);
            let (_, out_tags) = b.slice_with_tags();
            out_tags.extend(tags.into_iter().flat_map(|t| {
                tags_of(t.kind).map(move |tag| futuresdr::runtime::dev::ItemTag {
                    index: t.index,
                    tag,
                })
            }));
            output.put_full_buffer(b);
        } else {
            // Downstream would never consume an empty buffer and so never return it.
            b.set_valid(self.buffer_items);
            self.spare.push(b);
        }
        HandedDown {
            gaps,
            contexts,
            data,
        }
    }

    /// Stops the receiver: its final counters and the buffers it still had filled.
    pub(super) fn shutdown(&mut self) -> Option<(SourceStats, Vec<Filled<OutBuf<T>>>)> {
        let (engine, stream, rest) = self.rx.take()?.shutdown();
        Some((SourceStats { engine, stream }, rest))
    }
}

/// The datagrams of other streams a receiver skipped (its counters' `handle`), per stream
/// key (live, and final after the shutdown).
pub(super) fn skipped_keys(
    handle: &fsdr_net_io::StatsHandle,
) -> impl Iterator<Item = (String, u64)> + use<> {
    handle.skipped_by_stream().into_iter().map(|(k, n)| {
        (
            fsdr_net_io::StreamSelector::key_of(k.stream_id, k.source),
            n,
        )
    })
}
