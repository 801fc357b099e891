//! # fsdr-net-io
//!
//! Runtime-free building blocks for streaming radio samples over UDP at 10 GbE rates:
//!
//! * [`socket`]: binding (IPv4/IPv6/dual-stack), multicast, large receive buffers, kernel
//!   drop reporting, receive timestamps, source allow-lists.
//! * [`Engine`]: receive threads that drain the socket in batches into preallocated slots and
//!   hand them to one consumer without locks; every datagram is delivered or counted.
//! * [`format`]: raw, GNU Radio sequence headers, Ettus CHDR and VITA-49/DIFI, as zero-copy
//!   views with emitters.
//! * [`seq`]: sequence tracking (gaps, duplicates, late, restarts) and reordering.
//! * [`send`]: batched, GSO-capable, paced sending.
//! * [`stats`]: the counters.
//!
//! This crate knows nothing of FutureSDR; the blocks in the `fsdr-net` crate sit on it.
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

pub mod emulator;
pub mod engine;
pub mod format;
mod ring;
pub mod send;
pub mod send_uring;
pub mod seq;
pub mod socket;
pub mod stats;
pub mod sys;

pub use engine::{
    Backend, Datagram, Engine, EngineConfig, EngineError, StatsHandle, StreamKey, ThreadOptions,
};
pub use format::{Format, FormatError, PacketClass, PacketInfo, Timestamp};
pub use ring::{Arrival, ArrivalClock, DatagramMeta, Notified, Notify};
pub use seq::{SeqConfig, SeqEvent};
pub use stats::{Stats, ThreadStats};
