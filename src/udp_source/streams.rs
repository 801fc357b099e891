//! The builders of the sources for several streams on one port: [`MultiUdpSource`] (one
//! engine, a consumer that sorts datagrams to outputs) and [`MultiInPlaceUdpSource`] (the
//! kernel sorts them to one in-place receiver per stream).

use fsdr_net_io::depacketizer::Depacketizer;
use fsdr_net_io::inplace::{InPlaceReceiver, ItemBuffer};
use fsdr_net_io::sample::Item;
use fsdr_net_io::{Engine, Format, StreamSelector};

use super::builder::{InPlaceParts, Parts};
use super::multi::MultiFeed;
use super::window::{WindowLane, ZERO_COPY_WINDOWS};
use super::{MultiInPlaceUdpSource, MultiUdpSource, UdpSourceBuilder, limits};
use crate::Error;

impl<T: Item> UdpSourceBuilder<T> {
    /// Opens the socket and starts the engine for a [`MultiUdpSource`]: one output per
    /// selector, in the order given, each with the settings of this builder (format, wire
    /// format, rates, zero-fill, …). Probe marks are per stream and not supported here.
    ///
    /// With [`zero_copy`](Self::zero_copy) — by default where the items are the wire's
    /// bytes, every selector a [`StreamSelector::Id`], no backend chosen, the pause policy
    /// under overload and no UDP GRO — each output is filled in place instead, by the
    /// receivers of [`build_streams_in_place`](Self::build_streams_in_place) lending windows
    /// of the output's default buffer (8 by default,
    /// [`in_place_buffers`](Self::in_place_buffers)).
    ///
    /// ```
    /// # use fsdr_net::prelude::*;
    /// use fsdr_net::io::StreamSelector;
    /// let ids = [StreamSelector::Id(0), StreamSelector::Id(1)];
    /// let b = || {
    ///     UdpSource::<num_complex::Complex<i16>>::builder("127.0.0.1:0")
    ///         .format(Format::Chdr)
    ///         .tick_rate(200e6)
    /// };
    /// assert!(b().build_streams(ids)?.zero_copy());
    /// assert!(!b().zero_copy(false).build_streams(ids)?.zero_copy());
    /// # Ok::<(), fsdr_net::Error>(())
    /// ```
    pub fn build_streams(
        self,
        streams: impl IntoIterator<Item = StreamSelector>,
    ) -> Result<MultiUdpSource<T>, Error> {
        let selectors = self.check_selectors(streams)?;
        let zero_copy = match self.zero_copy {
            Some(on) => on,
            None => {
                let Parts { cfg, decoder, .. } = self.parts()?;
                let ids = selectors.iter().all(|s| matches!(s, StreamSelector::Id(_)));
                ids && !cfg.socket.gro
                    && super::window::by_default(&cfg, &decoder, self.backend_set)
            }
        };
        if zero_copy {
            return self.build_streams_zero_copy(selectors);
        }
        let Parts {
            cfg,
            decoder,
            dp_cfg,
            block: _,
        } = self.parts()?;
        if dp_cfg.marks.is_some() {
            return Err(Error::config(
                "probe marks are not supported on a multi-stream source",
            ));
        }
        let dps: Vec<_> = selectors
            .iter()
            .map(|_| Depacketizer::new(decoder, dp_cfg.clone()))
            .collect();
        // A stream's reorder window is released at once when a gap is declared: each output
        // holds at least that, so one stream's burst does not stall the others behind it.
        let buffer = self
            .buffer_datagrams
            .unwrap_or(16)
            .max(cfg.reorder_window.saturating_mul(2));
        limits::output_items(buffer, &decoder, cfg.slot_size)?;
        let engine = Engine::start(cfg.clone())?;
        let items = buffer * dps[0].max_items(cfg.slot_size);
        let feed = MultiFeed::Engine {
            engine,
            dps,
            max_datagram: cfg.slot_size,
        };
        let mut src = MultiUdpSource::new(
            feed,
            selectors,
            items,
            buffer,
            cfg.latency_budget
                .map_or(super::multi::HOLD_UNBOUNDED, |b| b / 2),
            self.idle_finish
                .map(|idle| (idle, self.first_wait.unwrap_or(idle))),
        );
        src.clock.set_batch_workers(self.batch_workers);
        Ok(src)
    }

    /// Builds a [`MultiInPlaceUdpSource`]: one zero-copy output per stream ID, in the order
    /// given, each filled by an in-place receiver of its own (a `SO_REUSEPORT` socket each,
    /// the kernel steering every datagram to its stream's socket, read by
    /// [`stream_threads`](Self::stream_threads) receive threads;
    /// [`InPlaceReceiver::start_streams`](fsdr_net_io::inplace::InPlaceReceiver::start_streams)).
    /// Every other setting means what it means for
    /// [`build_in_place`](Self::build_in_place), per output. CHDR or VRT, selected by
    /// [`StreamSelector::Id`] only, received with `recvmmsg` without UDP GRO.
    pub fn build_streams_in_place(
        self,
        streams: impl IntoIterator<Item = StreamSelector>,
    ) -> Result<MultiInPlaceUdpSource<T>, Error> {
        let selectors = self.check_selectors(streams)?;
        let (p, rxs) = self.start_stream_receivers(&selectors)?;
        let mut src = MultiInPlaceUdpSource::new(
            rxs,
            selectors,
            p.buffers,
            p.items,
            p.stats_interval,
            p.idle_finish,
        );
        src.clock.set_batch_workers(p.batch_workers);
        Ok(src)
    }

    /// [`build_streams`](Self::build_streams) with zero copy.
    fn build_streams_zero_copy(
        mut self,
        selectors: Vec<StreamSelector>,
    ) -> Result<MultiUdpSource<T>, Error> {
        self.in_place_buffers.get_or_insert(ZERO_COPY_WINDOWS);
        let (p, rxs) = self.start_stream_receivers(&selectors)?;
        let lanes = rxs
            .into_iter()
            .map(|rx| WindowLane::new(rx, p.backend, p.buffers, p.items))
            .collect();
        let mut src = MultiUdpSource::new(
            MultiFeed::Windows(lanes),
            selectors,
            p.buffers * p.items,
            p.buffers,
            super::multi::HOLD_UNBOUNDED,
            p.idle_finish,
        );
        src.clock.set_batch_workers(p.batch_workers);
        Ok(src)
    }

    /// The in-place receivers of one port's streams, one per selector (stream IDs only),
    /// and the settings of their outputs.
    fn start_stream_receivers<B: ItemBuffer<T>>(
        self,
        selectors: &[StreamSelector],
    ) -> Result<(InPlaceParts, Vec<InPlaceReceiver<T, B>>), Error> {
        let ids = selectors
            .iter()
            .map(|s| match s {
                StreamSelector::Id(id) => Ok(*id),
                other => Err(Error::config(format!(
                    "stream selector {other}: the kernel steers by stream ID alone, so the \
                     in-place multi-stream sources take StreamSelector::Id only"
                ))),
            })
            .collect::<Result<Vec<u32>, Error>>()?;
        let threads = self.stream_threads;
        let (p, cfg) = self.in_place_parts()?;
        if p.marks.is_some() {
            return Err(Error::config(
                "probe marks are not supported on a multi-stream source",
            ));
        }
        let rxs = match threads {
            Some(n) => InPlaceReceiver::start_streams_on(cfg, &ids, n)?,
            None => InPlaceReceiver::start_streams(cfg, &ids)?,
        };
        Ok((p, rxs))
    }

    /// The selectors of a multi-stream source, checked: at least one, not too many, none
    /// twice, a stream ID only in a format that carries one.
    fn check_selectors(
        &self,
        streams: impl IntoIterator<Item = StreamSelector>,
    ) -> Result<Vec<StreamSelector>, Error> {
        let selectors: Vec<StreamSelector> = streams.into_iter().collect();
        if !matches!(self.cfg.format, Format::Chdr | Format::Vrt)
            && let Some(s) = selectors
                .iter()
                .find(|s| matches!(s, StreamSelector::Id(_) | StreamSelector::IdFrom(..)))
        {
            return Err(Error::config(format!(
                "stream selector {s} picks a stream ID, which {} datagrams do not carry \
                 (only CHDR and VRT do): select by sender (StreamSelector::Sender) instead",
                self.cfg.format
            )));
        }
        if selectors.is_empty() {
            return Err(Error::config(
                "build_streams needs at least one stream selector",
            ));
        }
        if selectors.len() > limits::MAX_STREAMS {
            return Err(Error::config(format!(
                "build_streams takes at most {} stream selectors, not {}",
                limits::MAX_STREAMS,
                selectors.len()
            )));
        }
        if let Some(dup) = selectors
            .iter()
            .enumerate()
            .find(|(i, s)| selectors[..*i].contains(s))
        {
            return Err(Error::config(format!(
                "stream selector {} is given twice",
                dup.1
            )));
        }
        Ok(selectors)
    }
}
