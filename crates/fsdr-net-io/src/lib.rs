//! # fsdr-net-io
//!
//! Runtime-free building blocks for streaming radio samples over UDP at 10 GbE rates. This
//! crate knows nothing of FutureSDR; the blocks of the `fsdr-net` crate sit on it.
//!
//! | module | holds |
//! |---|---|
//! | [`socket`] | binding (IPv4/IPv6/dual-stack), multicast, large receive buffers, kernel drop reporting, timestamps, source allow-lists |
//! | [`engine`] | [`Engine`]: receive threads (one backend each) that fill preallocated slots and hand them to one consumer without locks; every datagram delivered or counted |
//! | [`format`](mod@format) | raw, GNU Radio sequence headers, Ettus CHDR, VITA-49/DIFI: zero-copy views and emitters |
//! | [`seq`] | sequence tracking (gaps, duplicates, late, restarts), widening of short counters, reordering |
//! | [`sample`] | items and wire sample encodings (`sc16_chdr`, `sc16_item32_be`, …), converted as UHD does |
//! | [`depacketizer`] | datagrams to items: zero-fill, staging, partial items, tags |
//! | [`send`] | batched, GSO-capable, paced sending; framing; io_uring sender |
//! | [`emulator`] | a USRP in remote-streaming mode, with fault injection |
//! | [`stats`] | the counters, declared once |
//! | [`host`] | what the host did to a measurement: steal time, wake-up lateness, CPU per thread |
//! | [`cpu_latency`] | a CPU wake-up latency request (`/dev/cpu_dma_latency`) held while a receiver runs |
//! | [`sys`] | every syscall, one module per concern |
//! | [`netns`] | two network namespaces joined by a veth pair, for tests that need a real link |
//!
//! Cargo feature `uring` (default): the io_uring backends and sender; without it neither
//! io-uring nor tokio-uring is built.
//!
//! ```
//! use std::time::Duration;
//! use fsdr_net_io::{Engine, EngineConfig, Format};
//! use fsdr_net_io::send::{SenderConfig, StreamSender};
//!
//! let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
//! cfg.format = Format::Chdr;
//! let mut engine = Engine::start(cfg).unwrap();
//! let sender = StreamSender::new(SenderConfig::new(engine.local_addr()), Format::Chdr)
//!     .datagram_size(8000)
//!     .count(100)
//!     .spawn();
//! let mut payload = 0;
//! while let Some(d) = engine.recv_timeout(Duration::from_secs(5)) {
//!     payload += d.payload().len();
//!     if payload == 100 * (8000 - 8) { break; }
//! }
//! sender.join().unwrap().unwrap();
//! let stats = engine.shutdown();
//! assert_eq!(stats.delivered + stats.kernel_drops + stats.overflow, 100);
//! ```

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod cpu_latency;
pub mod depacketizer;
pub mod diagnosis;
pub mod emulator;
pub mod engine;
mod error;
pub mod format;
pub mod host;
pub mod inplace;
pub mod lent;
pub mod netns;
mod notify;
pub mod sample;
mod select;
pub mod send;
pub mod seq;
pub mod socket;
pub mod stats;
pub mod sys;
#[cfg(test)]
mod testing;
pub mod turnaround;

pub use engine::{
    Arrival, Backend, Capabilities, Clocks, Coalesce, Datagram, DatagramMeta, Engine, EngineConfig,
    Gap, Overload, StatsHandle, StreamKey, ThreadOptions, XdpConfig, XdpMode,
};
pub use error::{Error, resolve};
pub use format::{DataHeader, Format, FormatError, PacketClass, PacketInfo, Timestamp};
pub use notify::{Notified, Notify};
pub use sample::{Item, WireFormat};
pub use select::StreamSelector;
pub use seq::{SeqConfig, SeqEvent};
pub use stats::{Stats, ThreadStats};
