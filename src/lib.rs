//! # fsdr-net
//!
//! High-rate UDP streaming for [FutureSDR](https://www.futuresdr.org) flowgraphs: a
//! [`UdpSource`] that keeps a 10 GbE USRP-class stream and accounts for every datagram, a
//! [`UdpSink`], and LTTng probe blocks for latency. Everything runtime-free (sockets, receive
//! engines, packet formats, sample conversion, the USRP emulator) is the `fsdr-net-io` crate,
//! re-exported as [`io`].
//!
//! Add `fsdr-net` and `futuresdr = "=0.0.40"` to `Cargo.toml`; `use fsdr_net::prelude::*`
//! brings the blocks, [`Format`](io::Format), [`Backend`](io::Backend), the wire formats and
//! the counters into scope. `futuresdr::num_complex` is FutureSDR's own re-export of
//! `num-complex`.
//!
//! A complete program: a CHDR stream (here from the built-in USRP emulator on loopback,
//! standing in for a radio) → `UdpSource<Complex<f32>>` (sc16 converted as UHD does, missed
//! packets zero-filled and tagged) → FutureSDR's `Apply` (magnitude) → `NullSink`, with the
//! source's message ports collected, and the counters read after `run()`:
//!
//! ```
//! use std::time::Duration;
//!
//! use fsdr_net::io::emulator::{Emulator, EmulatorConfig, Faults};
//! use fsdr_net::prelude::*;
//! use futuresdr::blocks::{Apply, NullSink};
//! use futuresdr::num_complex::Complex32;
//! use futuresdr::runtime::macros::connect;
//! use futuresdr::runtime::{Flowgraph, Runtime};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     futuresdr::runtime::config::set("ctrlport_enable", false); // no web server on :1337
//!     let src = UdpSource::<Complex32>::builder("127.0.0.1:0")
//!         .format(Format::Chdr) // carries sc16_chdr, decoded to Complex<f32>
//!         .tick_rate(10e6) // CHDR timestamps count ticks of the radio's clock
//!         .sample_rate(1e6)
//!         .zero_fill_missed(true)
//!         .finish_after_idle(Duration::from_millis(300))
//!         .build()?;
//!
//!     // 0.1 s of a 1 Msps stream (1000 samples per packet) with every 10th packet lost on
//!     // the way; the last packet, with 500 samples, shows that the 100th was lost.
//!     let mut radio = EmulatorConfig::new(src.local_addr(), Format::Chdr);
//!     radio.rate = 1e6;
//!     radio.tick_rate = 10e6;
//!     radio.spp = Some(1000);
//!     radio.samples = Some(100_500);
//!     radio.faults = Faults { drop_every: Some(10), ..Faults::default() };
//!     let radio = Emulator::new(radio)?;
//!
//!     let mag = Apply::new(|x: &Complex32| x.norm());
//!     let snk = NullSink::<f32>::new();
//!     let messages = MessageCollector::new().senders(2); // `missed` and `stats`
//!     let mut fg = Flowgraph::new();
//!     connect!(fg, src > mag > snk; src.missed | messages; src.stats | messages);
//!     let running = std::thread::spawn(move || radio.run());
//!     let fg = Runtime::new().run(fg)?; // ends 300 ms after the last datagram
//!     let sent = running.join().expect("emulator thread")?;
//!
//!     let stats = fg.block(&src)?.stats();
//!     println!("{stats}");
//!     assert_eq!(stats.engine.missed, sent.dropped); // 10 packets lost, 10 missed
//!     assert_eq!(fg.block(&snk)?.n_received() as u64, 100_500); // 90 500 + 10 000 zeros
//!     // The last `stats` message holds the final counters (the per-thread split aside).
//!     let last = fg.block(&messages)?.messages().last().cloned().expect("a stats message");
//!     assert!(SourceStats::from_pmt(&last)?.fields().eq(stats.fields()));
//!     Ok(())
//! }
//! ```
//!
//! Latency against CPU is one setting: [`UdpSourceBuilder::latency_budget`] (default 2 ms:
//! under load the block is woken at most every millisecond, at once when traffic is sparse);
//! [`UdpSourceBuilder::low_latency`] is the preset for the other end (a wake-up after every
//! receive, polling idle CPUs, a real-time receive thread; needs root).
//!
//! Cargo features: `uring` (default) for the io_uring backends and sink; `lttng` for real
//! LTTng-UST tracepoints; `flow_scheduler` for FutureSDR's flow scheduler.
//!
//! ## Tags
//!
//! A tag is FutureSDR's [`Tag`] (`futuresdr::runtime::dev::Tag`, re-exported here and in
//! the prelude) on one item; its name is a `String` (`TAG_TX_TIME.to_string()`). [`UdpSink`]
//! reads the `tx_*` tags on its input, [`UdpSource`] puts the `rx_*` tags on its output;
//! [`TagSource`] puts given tags on given items and [`TagSink`] keeps what arrives.
//!
//! | tag | value | what it does | needs |
//! |---|---|---|---|
//! | [`TAG_TX_SOB`] `tx_sob` | any (`Tag::NamedUsize(_, 1)`) | a burst starts at this item: a datagram starts there | every format |
//! | [`TAG_TX_EOB`] `tx_eob` | any (`Tag::NamedUsize(_, 1)`) | the burst's last item: its datagram ends there with the end-of-burst flag | CHDR (EOB flag), VRT (trailer); other formats only cut the datagram |
//! | [`TAG_TX_TIME`] `tx_time` | `Tag::NamedUsize(_, ticks)` (`usize`), or `Tag::NamedAny(_, Box<RxTime>)` (a received `rx_time` passed on) | the device time of this item: a datagram starts there with that timestamp, later ones follow the items sent | CHDR or VRT with [`UdpSinkBuilder::timestamps`] (VRT: or [`utc_timestamps`](UdpSinkBuilder::utc_timestamps), ticks then picoseconds since the epoch); without it the tag is ignored with one warning |
//! | `tx_freq`, `tx_rate`, `tx_bandwidth`, `tx_gain` | `Tag::NamedAny(_, Box<f64>)` (also `f32`, `u64`, `usize`; `Tag::NamedF32`, `Tag::NamedUsize`): Hz, samples/s, Hz, dB | a context packet with the new setting goes before the datagram that starts at this item | VRT with [`UdpSinkBuilder::context`] (DIFI) or [`vita49_context`](UdpSinkBuilder::vita49_context); ignored otherwise |
//! | [`TAG_TIME`] `rx_time` | `Tag::NamedAny(_, Box<RxTime>)` | the device time of this item: on the first, after gaps, where the time jumps | CHDR, or VRT with timestamps; [`UdpSourceBuilder::tick_rate`] for seconds |
//! | [`TAG_EOB`] `rx_eob` | `Tag::NamedUsize(_, 1)` | the last item of a burst | CHDR's EOB, VRT's trailer |
//! | [`TAG_MISSED`] `rx_missed` | `Tag::NamedUsize(_, frames)` | the first item after missed frames (the first zero with zero-fill) | a format with sequence numbers (not raw) |
//! | [`TAG_MISSED_ITEMS`] `rx_missed_items` | `Tag::NamedUsize(_, items)` | beside `rx_missed`: the items the missed frames held | as `rx_missed` |
//! | `rx_rate`, `rx_freq`, `rx_bandwidth`, `rx_gain` | `Tag::NamedAny(_, Box<f64>)`: samples/s, Hz, Hz, dB | a setting from a context packet, on the first item it applies to; only the fields the packet states | VRT with context packets |
//!
//! Bursts with device times from [`UdpSink`] to [`UdpSource`], over loopback: the CHDR sink
//! needs [`timestamps`](UdpSinkBuilder::timestamps) for `tx_time` to do anything, and each
//! `tx_time` comes back as an `rx_time` where the time jumps.
//!
//! ```
//! use std::time::Duration;
//!
//! use fsdr_net::prelude::*;
//! use futuresdr::num_complex::Complex32;
//! use futuresdr::runtime::macros::connect;
//! use futuresdr::runtime::{Flowgraph, Runtime};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     futuresdr::runtime::config::set("ctrlport_enable", false);
//!     let src = UdpSource::<Complex32>::builder("127.0.0.1:0")
//!         .format(Format::Chdr)
//!         .tick_rate(1e6) // CHDR timestamps in ticks of 1 µs
//!         .sample_rate(1e6)
//!         .finish_after_idle(Duration::from_millis(300))
//!         .build()?;
//!     // Two bursts of 1000 samples, the second a second of device time after the first.
//!     let tag = |name: &str, value: usize| Tag::NamedUsize(name.to_string(), value);
//!     let tx = TagSource::new(
//!         vec![Complex32::new(0.5, -0.5); 2000],
//!         [
//!             (0, tag(TAG_TX_SOB, 1)),
//!             (0, tag(TAG_TX_TIME, 5_000_000)), // ticks
//!             (999, tag(TAG_TX_EOB, 1)),
//!             (1000, tag(TAG_TX_SOB, 1)),
//!             (1000, tag(TAG_TX_TIME, 6_000_000)),
//!             (1999, tag(TAG_TX_EOB, 1)),
//!         ],
//!     )?;
//!     let snk = UdpSink::<Complex32>::builder(src.local_addr())
//!         .format(Format::Chdr)
//!         .timestamps(0, 1.0) // one tick an item
//!         .build()?;
//!     let rx = TagSink::<Complex32>::new();
//!     let mut fg = Flowgraph::new();
//!     connect!(fg, tx > snk; src > rx);
//!     let fg = Runtime::new().run(fg)?;
//!     let rx = fg.block(&rx)?;
//!     assert_eq!(rx.items().len(), 2000);
//!     let ends: Vec<usize> = rx.tagged(TAG_EOB).map(|(i, _)| i).collect();
//!     assert_eq!(ends, [999, 1999]);
//!     let times: Vec<(usize, u64)> = rx
//!         .tagged(TAG_TIME)
//!         .filter_map(|(i, t)| match t {
//!             Tag::NamedAny(_, v) => v.downcast_ref::<RxTime>().map(|t| (i, t.ticks)),
//!             _ => None,
//!         })
//!         .collect();
//!     assert_eq!(times, [(0, 5_000_000), (1000, 6_000_000)]);
//!     Ok(())
//! }
//! ```
//!
//! A retune with VITA-49.2 context (only the fields set are sent, so only they come back as
//! tags): a `tx_freq` on item 300 is an `rx_freq` on item 300.
//!
//! ```
//! use std::time::Duration;
//!
//! use fsdr_net::io::format::vrt::context::IfContext;
//! use fsdr_net::prelude::*;
//! use futuresdr::num_complex::Complex32;
//! use futuresdr::runtime::macros::connect;
//! use futuresdr::runtime::{Flowgraph, Runtime};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     futuresdr::runtime::config::set("ctrlport_enable", false);
//!     let src = UdpSource::<Complex32>::builder("127.0.0.1:0")
//!         .format(Format::Vrt)
//!         .sample_rate(1e6) // VRT timestamps count samples
//!         .finish_after_idle(Duration::from_millis(300))
//!         .build()?;
//!     let retune = Tag::NamedAny("tx_freq".to_string(), Box::new(2.45e9f64));
//!     let tx = TagSource::new(vec![Complex32::new(0.25, 0.0); 1000], [(300, retune)])?;
//!     let snk = UdpSink::<Complex32>::builder(src.local_addr())
//!         .format(Format::Vrt)
//!         .sample_rate(1e6) // paced, and stated as the context's sample rate
//!         .timestamps(0, 1.0) // a sample count: the context lands on the item it names
//!         .vita49_context(IfContext { rf_ref_freq_hz: Some(2.4e9), ..Default::default() })
//!         .build()?;
//!     let rx = TagSink::<Complex32>::new();
//!     let mut fg = Flowgraph::new();
//!     connect!(fg, tx > snk; src > rx);
//!     let fg = Runtime::new().run(fg)?;
//!     let rx = fg.block(&rx)?;
//!     let freq: Vec<(usize, f64)> = rx
//!         .tagged("rx_freq")
//!         .filter_map(|(i, t)| match t {
//!             Tag::NamedAny(_, v) => v.downcast_ref::<f64>().map(|f| (i, *f)),
//!             _ => None,
//!         })
//!         .collect();
//!     assert_eq!(freq, [(0, 2.4e9), (300, 2.45e9)]);
//!     assert_eq!(rx.tagged("rx_bandwidth").count() + rx.tagged("rx_gain").count(), 0);
//!     Ok(())
//! }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

/// The runtime-free layer under the blocks (`fsdr-net-io`), as far as a flowgraph's author
/// needs it beside them: packet formats and sample encodings, the receive engines and their
/// settings, the sequence layer's settings, the senders, counters, the USRP emulator and the
/// loss diagnosis. fsdr-net-io's test bed (its cargo feature `testbed`) is not part of it.
pub mod io {
    pub use fsdr_net_io::{
        Arrival, Backend, Capabilities, Clocks, Coalesce, DataHeader, Datagram, DatagramMeta,
        Engine, EngineConfig, Error, Format, FormatError, Gap, Item, Notified, Notify, Overload,
        PacketClass, PacketInfo, SeqConfig, SeqEvent, Stats, StatsHandle, StreamKey,
        StreamSelector, ThreadOptions, ThreadStats, Timestamp, WireFormat, XdpConfig, XdpMode,
        XskBind, cpu_latency, depacketizer, diagnosis, emulator, engine, format, inplace, resolve,
        sample, send, seq, socket, stats,
    };
}
pub use fsdr_net_lttng as lttng;

mod error;
mod message_collector;
mod probe;
mod ramp_check;
mod sigmf_sink;
mod tag_blocks;
mod udp_sink;
mod udp_source;
mod worker_policy;

pub use error::Error;
pub use futuresdr::runtime::dev::Tag;
pub use io::sample;
pub use message_collector::MessageCollector;
pub use probe::{Probe, ProbeSink, ProbeSource, ProbeSpec};
pub use ramp_check::{RampCheck, RampSample};
pub use sigmf_sink::{SigmfItem, SigmfSink, SigmfSinkBuilder};
pub use tag_blocks::{TagSink, TagSource};
pub use udp_sink::{TAG_TX_EOB, TAG_TX_SOB, TAG_TX_TIME, UdpSink, UdpSinkBuilder};
pub use udp_source::{
    InPlaceUdpSource, MultiInPlaceUdpSource, MultiSourceStats, MultiUdpSource, RxTime, SourceStats,
    StreamStats, TAG_EOB, TAG_MISSED, TAG_MISSED_ITEMS, TAG_TIME, UdpSource, UdpSourceBuilder,
};

/// Everything an application embedding the blocks usually needs.
///
/// ```
/// use fsdr_net::prelude::*;
/// use futuresdr::num_complex::Complex32;
///
/// let _ = (Format::Chdr, Backend::Mio, WireFormat::Sc16Chdr, StreamSelector::Id(1));
/// let _ = (TAG_MISSED, TAG_MISSED_ITEMS, TAG_TIME, TAG_EOB);
/// let _ = (TAG_TX_SOB, TAG_TX_EOB, TAG_TX_TIME);
/// // The four sources (one builder) and the sink are all here, without further imports.
/// let _: fn(UdpSourceBuilder<Complex32>) -> Result<InPlaceUdpSource<Complex32>, Error> =
///     UdpSourceBuilder::build_in_place;
/// let _: Option<MultiUdpSource<Complex32>> = None;
/// let _: Option<MultiInPlaceUdpSource<Complex32>> = None;
/// let _ = UdpSource::<Complex32>::builder("127.0.0.1:0");
/// let _ = UdpSink::<Complex32>::builder("127.0.0.1:9");
/// ```
pub mod prelude {
    pub use crate::io::depacketizer::DepacketizerStats;
    pub use crate::io::sample::{Item, WireFormat};
    pub use crate::io::{Backend, Format, Stats, StreamSelector};
    pub use crate::{
        Error, InPlaceUdpSource, MessageCollector, MultiInPlaceUdpSource, MultiUdpSource,
        ProbeSink, ProbeSource, RxTime, SigmfSink, SourceStats, TAG_EOB, TAG_MISSED,
        TAG_MISSED_ITEMS, TAG_TIME, TAG_TX_EOB, TAG_TX_SOB, TAG_TX_TIME, Tag, TagSink, TagSource,
        UdpSink, UdpSinkBuilder, UdpSource, UdpSourceBuilder,
    };
}
