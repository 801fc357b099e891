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
//! | [`cpu_latency`] | a CPU wake-up latency request (`/dev/cpu_dma_latency`) held while a receiver runs |
//! | [`diagnosis`] | a receiver's counters and the machine's load in sentences |
//!
//! Cargo features:
//! - `uring` (default): the io_uring backends and sender; without it neither io-uring nor
//!   tokio-uring is built.
//! - `testbed`: what this project's own tests, benches, fuzz targets and measurement tools
//!   use, not an API to build on: `sys` (every system call), `netns` (network namespaces
//!   joined by a veth pair), `host` (steal time, wake-up lateness, CPU per thread, the
//!   machine), `turnaround` (the turnaround probe and the bare forwarding loop) and `lent`
//!   (hooks that inject a panic where memory is lent to the kernel). Without it they are
//!   private or absent.
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
pub mod inplace;
mod notify;
pub mod sample;
mod select;
pub mod send;
pub mod seq;
pub mod socket;
pub mod stats;
#[cfg(test)]
mod testing;

// The test bed (cargo feature `testbed`): public with it, private or absent without.
#[cfg(feature = "testbed")]
pub mod host;
#[cfg(feature = "testbed")]
pub mod lent;
#[cfg(not(feature = "testbed"))]
#[allow(dead_code)]
mod lent;
#[cfg(any(test, feature = "testbed"))]
pub mod netns;
#[cfg(feature = "testbed")]
pub mod sys;
#[cfg(not(feature = "testbed"))]
#[allow(dead_code, unused_imports)]
mod sys;
#[cfg(feature = "testbed")]
pub mod turnaround;

pub use engine::{
    Arrival, Backend, Capabilities, Clocks, Coalesce, Datagram, DatagramMeta, Engine, EngineConfig,
    Gap, Overload, StatsHandle, StreamKey, ThreadOptions, XdpConfig, XdpMode, XskBind,
};
pub use error::{Error, resolve};
pub use format::{DataHeader, Format, FormatError, PacketClass, PacketInfo, Timestamp};
pub use notify::{Notified, Notify};
pub use sample::{Item, WireFormat};
pub use select::StreamSelector;
pub use seq::{SeqConfig, SeqEvent};
pub use stats::{Stats, ThreadStats};
