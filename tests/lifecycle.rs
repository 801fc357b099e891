//! Starting and stopping a `UdpSource` 200 times — built and dropped, and run in flowgraphs
//! until the stream ends — leaves no thread and no file descriptor behind. Alone in its own
//! test binary so that no other test's threads disturb the counts.

use std::time::Duration;

use fsdr_net::UdpSource;
use fsdr_net::io::{Backend, Format};
use fsdr_net_io::netns::TestLink;
use futuresdr::blocks::NullSink;
use futuresdr::runtime::dev::prelude::*;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// A small slot pool: the default one (8192 slots, written at start so that the first
/// datagrams find their pages) takes tens of milliseconds to start, and what is checked here
/// is what a start leaves behind.
const SLOTS: usize = 256;

fn run_once(link: &TestLink) -> Result<()> {
    let backend = link.backend();
    let src = link.receive(|| {
        UdpSource::<u8>::builder(link.bind())
            .configure(|c| link.apply(c))
            .slots(SLOTS)
            .format(Format::Seq64)
            .stats_interval(None)
            .finish_after_idle(Duration::from_millis(50))
            // A loaded machine may start the sender late: wait for the first datagram.
            .first_datagram_within(Duration::from_secs(10))
            .build()
    })?;
    let to = src.local_addr();
    let snk = NullSink::<u8>::new();
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk);
    let tx = link.send(|| std::net::UdpSocket::bind("0.0.0.0:0"))?;
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        for seq in 1..=3u64 {
            tx.send_to(&seq.to_le_bytes(), to).unwrap();
        }
    });
    let fg = Runtime::new().run(fg)?;
    sender.join().unwrap();
    let stats = fg.block(&src)?.stats();
    assert_eq!(stats.delivered, 3, "{backend:?}: {stats:?}");
    Ok(())
}

#[test]
fn start_and_stop_a_source_200_times_leaves_nothing_behind() -> Result<()> {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    // One link a backend, made before the counts: the xdp backend over a veth pair between
    // two namespaces (made once: what is checked is the source, not the pair); the others on
    // loopback.
    let links: Vec<TestLink> = Backend::ALL
        .iter()
        .filter_map(|&b| TestLink::for_backend(b))
        .collect();
    // Warm up process-wide state (FutureSDR's reactor and logger, GSO detection).
    run_once(&links[0])?;
    let (t0, f0) = (threads(), fds());
    for i in 0..200 {
        let link = &links[i % links.len()];
        if i % 10 == 0 {
            run_once(link)?;
        } else {
            let src = link.receive(|| {
                UdpSource::<u8>::builder(link.bind())
                    .configure(|c| link.apply(c))
                    .slots(SLOTS)
                    .build()
            })?;
            drop(src);
        }
    }
    // Runtime worker threads end asynchronously after run() returns; give them a moment.
    for _ in 0..50 {
        if threads() <= t0 && fds() <= f0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(threads(), t0, "threads left behind");
    assert_eq!(fds(), f0, "file descriptors left behind");
    Ok(())
}
