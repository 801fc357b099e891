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

#![cfg_attr(docsrs, feature(doc_cfg))]

pub use fsdr_net_io as io;
pub use fsdr_net_lttng as lttng;

mod error;
mod message_collector;
mod probe;
mod ramp_check;
mod sigmf_sink;
mod udp_sink;
mod udp_source;
mod worker_policy;

pub use error::Error;
pub use io::sample;
pub use message_collector::MessageCollector;
pub use probe::{Probe, ProbeSink, ProbeSource, ProbeSpec};
pub use ramp_check::{RampCheck, RampSample};
pub use sigmf_sink::{SigmfItem, SigmfSink, SigmfSinkBuilder};
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
        TAG_MISSED_ITEMS, TAG_TIME, TAG_TX_EOB, TAG_TX_SOB, TAG_TX_TIME, UdpSink, UdpSinkBuilder,
        UdpSource, UdpSourceBuilder,
    };
}
