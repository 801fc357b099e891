//! Behaviour specific to the SO_REUSEPORT and io_uring backends.

mod common;

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use fsdr_net_io::engine::ReuseportSpread;
use fsdr_net_io::send::{SenderConfig, StreamSender};
use fsdr_net_io::{Backend, Engine, EngineConfig, Format};

fn reuseport(threads: usize, spread: Option<ReuseportSpread>) -> Engine {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.backend = Backend::Reuseport;
    cfg.format = Format::Seq64;
    cfg.reuseport_threads = threads;
    cfg.reuseport_spread = spread;
    cfg.reorder_window = 512;
    cfg.reorder_timeout = Duration::from_millis(50);
    Engine::start(cfg).unwrap()
}

/// Drains the engine until `n` datagrams are accounted for; returns sequence numbers per
/// sender.
fn collect(engine: &mut Engine, n: u64) -> HashMap<SocketAddr, Vec<u64>> {
    let mut by_source: HashMap<SocketAddr, Vec<u64>> = HashMap::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let got = engine.recv_timeout(Duration::from_millis(100)).map(|d| {
            by_source
                .entry(d.meta().source)
                .or_default()
                .push(d.info().seq.unwrap());
        });
        if got.is_none() && engine.stats().accounted() >= n {
            break;
        }
    }
    by_source
}

#[test]
fn reuseport_four_threads_four_senders_each_stream_in_order() {
    let mut engine = reuseport(4, None);
    let to = engine.local_addr();
    // The kernel hashes each sender's 4-tuple to one socket: pick four source ports that land
    // on four different threads, using a probe datagram (sequence number 0) from each.
    let mut senders: Vec<(UdpSocket, u16)> = Vec::new();
    let mut probes = 0u64;
    while senders.len() < 4 && probes < 400 {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.send_to(&0u64.to_le_bytes(), to).unwrap();
        probes += 1;
        let d = engine
            .recv_timeout(Duration::from_secs(2))
            .expect("probe arrives");
        let thread = d.meta().thread;
        drop(d);
        if senders.iter().all(|(_, t)| *t != thread) {
            senders.push((s, thread));
        }
    }
    assert_eq!(senders.len(), 4, "four source ports on four sockets");
    let per_sender = 5_000u64;
    let sources: Vec<SocketAddr> = senders
        .iter()
        .map(|(s, _)| s.local_addr().unwrap())
        .collect();
    let handles: Vec<_> = senders
        .into_iter()
        .map(|(s, _)| {
            std::thread::spawn(move || {
                for seq in 1..=per_sender {
                    let mut dg = seq.to_le_bytes().to_vec();
                    dg.resize(200, 0);
                    s.send_to(&dg, to).unwrap();
                    if seq % 200 == 0 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let before = engine.stats().accounted();
    let by_source = collect(&mut engine, before + 4 * per_sender);
    let stats = engine.shutdown();
    println!("{stats}");
    assert_eq!(stats.accounted(), probes + 4 * per_sender, "{stats}");
    for t in &stats.per_thread {
        assert!(
            t.received > per_sender,
            "thread {} received {}",
            t.thread,
            t.received
        );
    }
    for src in sources {
        let seqs = &by_source[&src];
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{src} in order");
        if stats.kernel_drops + stats.overflow == 0 {
            let expected: Vec<u64> = (1..=per_sender).collect();
            assert_eq!(
                seqs[seqs.len() - per_sender as usize..],
                expected[..],
                "{src}"
            );
        }
    }
}

#[test]
fn reuseport_cbpf_spreads_one_flow_and_order_is_restored() {
    let engine = reuseport(2, Some(ReuseportSpread::Random));
    let n = 20_000u64;
    let sender = StreamSender::new(SenderConfig::new(engine.local_addr()), Format::Seq64)
        .datagram_size(500)
        .count(n)
        .rate(Some(10e6))
        .spawn();
    let mut engine = engine;
    let by_source = collect(&mut engine, n);
    sender.join().unwrap().unwrap();
    let stats = engine.shutdown();
    println!("{stats}");
    assert_eq!(stats.accounted(), n, "{stats}");
    let busy = stats.per_thread.iter().filter(|t| t.received > 0).count();
    assert!(
        busy > 1,
        "one flow spread over more than one thread: {stats}"
    );
    let seqs = by_source.values().next().unwrap();
    let bad: Vec<_> = seqs.windows(2).filter(|w| w[0] >= w[1]).take(5).collect();
    assert!(bad.is_empty(), "delivered in stream order: {bad:?} {stats}");
    if stats.accounted() == stats.delivered {
        assert_eq!(*seqs, (1..=n).collect::<Vec<_>>());
    }
}

#[test]
fn multishot_ring_running_dry_is_rearmed_loss_counted_and_reception_continues() {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.backend = Backend::UringMultishot;
    cfg.format = Format::Seq64;
    cfg.slots = 64;
    cfg.batch = 8;
    cfg.reorder_window = 0;
    cfg.uring_overflow_buffers = Some(0);
    cfg.socket.recv_buffer = 64 * 1024;
    cfg.socket.force_recv_buffer = false;
    let mut engine = Engine::start(cfg).unwrap();
    // Stalled consumer: 3000 datagrams arrive while nothing is consumed. One socket sends
    // the whole stream (a new source address would be a new stream).
    let n = 3_000u64;
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut dg = vec![0u8; 1000];
    for seq in 1..=n {
        dg[..8].copy_from_slice(&seq.to_le_bytes());
        tx.send_to(&dg, engine.local_addr()).unwrap();
        // Paced so that the receive thread keeps up until its ring runs dry (a burst would
        // overflow the 64 KiB socket buffer before the ring had taken its 64 slots).
        if seq % 16 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let stalled = engine.stats();
    assert!(
        stalled.kernel_drops > 0,
        "the kernel queue overflowed: {stalled}"
    );
    // The consumer catches up: slots return, the receive is re-armed.
    let mut delivered = 0;
    while engine.recv_timeout(Duration::from_millis(300)).is_some() {
        delivered += 1;
    }
    let s = engine.stats();
    assert!(s.rearms >= 1, "multishot re-armed: {s}");
    assert_eq!(s.accounted(), n, "{s}");
    assert_eq!(delivered, s.delivered);
    // Reception continues.
    for seq in n + 1..=n + 100 {
        tx.send_to(&seq.to_le_bytes(), engine.local_addr()).unwrap();
    }
    let mut more = 0;
    while engine.recv_timeout(Duration::from_millis(300)).is_some() {
        more += 1;
    }
    assert_eq!(more, 100);
    let s = engine.shutdown();
    assert_eq!(s.accounted(), n + 100, "{s}");
    // Receive-buffer pressure: what the kernel dropped is exactly what the sequence numbers
    // say is missing, now that the stream went on after the drops.
    assert_eq!(s.missed, s.kernel_drops, "{s}");
}

#[test]
fn io_uring_backends_detect_truncation_and_reject_sources() {
    for backend in [Backend::Uring, Backend::UringMultishot] {
        let allowed = UdpSocket::bind("127.0.0.1:0").unwrap();
        let other = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.backend = backend;
        cfg.slot_size = 1000;
        cfg.socket.filter = fsdr_net_io::socket::SourceFilter::peer(allowed.local_addr().unwrap());
        let mut engine = Engine::start(cfg).unwrap();
        let to = engine.local_addr();
        allowed.send_to(&[1u8; 1000], to).unwrap(); // exactly a slot: whole
        allowed.send_to(&[2u8; 1001], to).unwrap(); // one byte too many: truncated
        other.send_to(&[3u8; 10], to).unwrap(); // rejected
        let d = engine
            .recv_timeout(Duration::from_secs(2))
            .expect("whole datagram");
        assert_eq!(d.bytes(), &[1u8; 1000][..], "{backend}");
        drop(d);
        assert!(engine.recv_timeout(Duration::from_millis(300)).is_none());
        let s = engine.shutdown();
        assert_eq!(
            (s.delivered, s.truncated, s.rejected),
            (1, 1, 1),
            "{backend}: {s}"
        );
    }
}

/// More `uring` receives in flight than slots (`uring_depth` 1024, 64 slots): a receive with
/// no slot waits for one instead of receiving into its overflow buffer while the consumer
/// keeps up, so with the pause policy every datagram is delivered. (Tasks that each woke on a
/// timer of their own kept tokio-uring from parking, which is when it submits: the engine
/// delivered nothing until it stopped, and then counted every datagram as `overflow`.)
#[test]
fn uring_depth_beyond_the_slots_delivers_every_datagram() {
    for overload in [fsdr_net_io::Overload::Pause, fsdr_net_io::Overload::Discard] {
        let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.backend = Backend::Uring;
        cfg.format = Format::Seq64;
        cfg.slots = 64;
        cfg.uring_depth = 1024;
        cfg.overload = overload;
        cfg.reorder_window = 16;
        let mut engine = Engine::start(cfg).unwrap();
        let to = engine.local_addr();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (mut got, mut seqs) = (0u64, Vec::new());
        let sent = 3_000u64;
        for seq in 1..=sent {
            let mut dg = seq.to_le_bytes().to_vec();
            dg.resize(1_000, seq as u8);
            tx.send_to(&dg, to).unwrap();
            if seq % 10 == 0 {
                // The consumer keeps up: at most ten datagrams wait for it.
                let until = Instant::now() + Duration::from_secs(5);
                while got < seq && Instant::now() < until {
                    if let Some(d) = engine.recv_timeout(Duration::from_millis(1)) {
                        seqs.push(d.info().seq.unwrap());
                        got += 1;
                    }
                }
            }
        }
        let stats = engine.shutdown();
        assert_eq!(got, sent, "{overload:?}: {stats}");
        assert_eq!(seqs, (1..=sent).collect::<Vec<_>>(), "{overload:?}");
        assert_eq!(
            (stats.overflow, stats.missed),
            (0, 0),
            "{overload:?}: {stats}"
        );
    }
}
