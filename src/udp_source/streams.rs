//! The builders of the sources for several streams on one port: [`MultiUdpSource`] (one
//! engine, a consumer that sorts datagrams to outputs) and [`MultiInPlaceUdpSource`] (the
//! kernel sorts them to one in-place receiver per stream).

use fsdr_net_io::depacketizer::Depacketizer;
use fsdr_net_io::inplace::InPlaceReceiver;
use fsdr_net_io::sample::Item;
use fsdr_net_io::{Engine, Format, StreamSelector};

use super::builder::Parts;
use super::{MultiInPlaceUdpSource, MultiUdpSource, UdpSourceBuilder, limits};
use crate::Error;

impl<T: Item> UdpSourceBuilder<T> {
    /// Opens the socket and starts the engine for a [`MultiUdpSource`]: one output per
    /// selector, in the order given, each with the settings of this builder (format, wire
    /// format, rates, zero-fill, …). Probe marks are per stream and not supported here.
    pub fn build_streams(
        self,
        streams: impl IntoIterator<Item = StreamSelector>,
    ) -> Result<MultiUdpSource<T>, Error> {
        let selectors = self.check_selectors(streams)?;
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
        let streams = selectors
            .into_iter()
            .map(|s| (s, Depacketizer::new(decoder, dp_cfg.clone())))
            .collect();
        // A stream's reorder window is released at once when a gap is declared: each output
        // holds at least that, so one stream's burst does not stall the others behind it.
        let buffer = self
            .buffer_datagrams
            .unwrap_or(16)
            .max(cfg.reorder_window.saturating_mul(2));
        limits::output_items(buffer, &decoder, cfg.slot_size)?;
        let engine = Engine::start(cfg.clone())?;
        let mut src = MultiUdpSource::new(
            engine,
            streams,
            cfg.slot_size,
            buffer,
            cfg.latency_budget
                .map_or(super::multi::HOLD_UNBOUNDED, |b| b / 2),
            self.idle_finish
                .map(|idle| (idle, self.first_wait.unwrap_or(idle))),
        );
        src.batch_workers = self.batch_workers;
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
        let ids = selectors
            .iter()
            .map(|s| match s {
                StreamSelector::Id(id) => Ok(*id),
                other => Err(Error::config(format!(
                    "stream selector {other}: the kernel steers by stream ID alone, so the \
                     in-place multi-stream source takes StreamSelector::Id only"
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
        let mut src = MultiInPlaceUdpSource::new(
            rxs,
            selectors,
            p.buffers,
            p.items,
            p.stats_interval,
            p.idle_finish,
        );
        src.batch_workers = p.batch_workers;
        Ok(src)
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
