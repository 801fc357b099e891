//! # fsdr-net
//!
//! High-rate UDP streaming for FutureSDR flowgraphs. The receive engines, packet formats and
//! statistics live in [`io`] (the `fsdr-net-io` crate, usable without FutureSDR).

pub use fsdr_net_io as io;
