//! # fsdr-net
//!
//! High-rate UDP streaming for FutureSDR flowgraphs: [`UdpSource`] and [`UdpSink`] on the
//! receive and send engines of [`io`] (the `fsdr-net-io` crate, usable without FutureSDR).

pub use fsdr_net_io as io;
pub use fsdr_net_lttng as lttng;

mod probe;
mod ramp_check;
pub mod sample;
mod udp_sink;
mod udp_source;

pub use probe::{Probe, ProbeSink, ProbeSource, ProbeSpec};
pub use ramp_check::{RampCheck, RampSample};
pub use udp_sink::{UdpSink, UdpSinkBuilder};
pub use udp_source::{RxTime, TAG_EOB, TAG_MISSED, TAG_TIME, UdpSource, UdpSourceBuilder};
