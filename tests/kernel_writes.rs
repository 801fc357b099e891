//! The blocks' share of the kernel-write check (fsdr-net-io's `tests/kernel_writes.rs` holds
//! the instrument and the receivers' share): a `UdpSource` on every feed — in place into
//! FutureSDR's buffer (over a socket and over AF_XDP), an engine of each backend, and the
//! `InPlaceUdpSource` — runs in FutureSDR's default runtime under traffic and is stopped, 40
//! rounds each; freed memory is poisoned and kept, unmapped memory made inaccessible, and
//! each round looks for a write into either.
//!
//! Alone in its own test binary: the allocator is this binary's.

#[path = "../crates/fsdr-net-io/tests/kernel_writes/quarantine.rs"]
mod quarantine;
#[path = "../crates/fsdr-net-io/tests/kernel_writes/rounds.rs"]
mod rounds;

use std::time::Duration;

use fsdr_net::io::{Backend, Format};
use fsdr_net::{RampCheck, UdpSource};
use fsdr_net_io::netns::TestLink;
use futuresdr::blocks::NullSink;
use futuresdr::num_complex::Complex;
use futuresdr::runtime::buffer::circuit;
use futuresdr::runtime::dev::prelude::*;
use rounds::{ROUNDS, SIZE, Traffic, check_round, serial};

#[global_allocator]
static ALLOC: quarantine::Quarantine = quarantine::Quarantine;

/// Which source, fed how.
#[derive(Debug, Clone, Copy)]
enum Feed {
    /// `build()` with no backend chosen: windows of FutureSDR's buffer lent to an in-place
    /// receiver (over AF_XDP on the `xdp` link).
    ZeroCopy,
    /// `backend(b).build()`: an engine of that backend.
    Engine,
    /// `build_in_place()`: `InPlaceUdpSource`.
    InPlace,
}

/// Reads what a source received, from the flowgraph it ran in.
type Received = Box<dyn Fn(&Flowgraph) -> Result<u64>>;

/// Builds the source, runs it for a few milliseconds under traffic, stops the flowgraph.
fn round(link: &TestLink, feed: Feed, round: usize) -> Result<()> {
    let builder = || {
        let b = UdpSource::<u8>::builder(link.bind())
            .configure(|c| link.apply(c))
            .slots(128)
            .max_datagram(SIZE)
            .format(Format::Seq64)
            .stats_interval(None);
        match feed {
            Feed::Engine => b.backend(link.backend()),
            _ => b,
        }
    };
    let mut fg = Flowgraph::new();
    let snk = NullSink::<u8>::new();
    let (to, received): (_, Received) = match feed {
        Feed::InPlace => {
            // Its output is a circuit of buffers that go round: a block that hands them back.
            let src = link.receive(|| {
                UdpSource::<Complex<i16>>::builder(link.bind())
                    .configure(|c| link.apply(c))
                    .max_datagram(SIZE)
                    .format(Format::Seq64)
                    .stats_interval(None)
                    .build_in_place()
            })?;
            let to = src.local_addr();
            let check = RampCheck::<Complex<i16>, circuit::Reader<Complex<i16>>>::new(false);
            connect!(fg, src > check; src < check);
            drop(snk);
            (to, Box::new(move |fg| Ok(fg.block(&src)?.stats().received)))
        }
        _ => {
            let src = link.receive(|| builder().build())?;
            let to = src.local_addr();
            connect!(fg, src > snk);
            (to, Box::new(move |fg| Ok(fg.block(&src)?.stats().received)))
        }
    };
    let running = Runtime::new().start(fg)?;
    let traffic = Traffic::start(link, to);
    traffic.wait_sent(100);
    std::thread::sleep(Duration::from_millis(1 + (round % 4) as u64 * 4));
    let fg = futuresdr::futures::executor::block_on(running.stop_and_wait())?;
    std::thread::sleep(Duration::from_millis(10));
    traffic.stop();
    let got = received(&fg)?;
    assert!(
        got > 0,
        "{feed:?}, {}, round {round}: nothing received",
        link.backend()
    );
    Ok(())
}

fn rounds(backend: Backend, feed: Feed) -> Result<()> {
    let _one = serial();
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let logs = quarantine::LogLines::install();
    let Some(link) = TestLink::for_backend(backend) else {
        return Ok(());
    };
    let what = format!("UdpSource, {feed:?} feed, {backend}");
    let first = quarantine::mark();
    let mut mark = first;
    for r in 0..ROUNDS {
        let round_mark = quarantine::mark();
        round(&link, feed, r)?;
        check_round(&what, r, mark, &logs);
        mark = round_mark;
    }
    check_round(&what, ROUNDS, first, &logs);
    Ok(())
}

#[test]
fn zero_copy_source_stops_under_traffic_without_a_write_after_free() -> Result<()> {
    rounds(Backend::Recvmmsg, Feed::ZeroCopy)?;
    rounds(Backend::Xdp, Feed::ZeroCopy)
}

#[test]
fn in_place_source_stops_under_traffic_without_a_write_after_free() -> Result<()> {
    rounds(Backend::Recvmmsg, Feed::InPlace)
}

#[test]
fn engine_sources_stop_under_traffic_without_a_write_after_free() -> Result<()> {
    for &backend in Backend::ALL {
        rounds(backend, Feed::Engine)?;
    }
    Ok(())
}
