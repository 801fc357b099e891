//! Loopback tests of the receive engine: exact accounting per backend, ordering, drops,
//! rejection, truncation (the socket's own behaviour is `socket.rs`'s).

mod common;

use std::net::UdpSocket;
use std::time::Duration;

use common::*;
use fsdr_net_io::engine::Overload;
use fsdr_net_io::socket::SourceFilter;
use fsdr_net_io::{Backend, DataHeader, Engine, EngineConfig, Error, Format, SeqEvent, Stats};

const N: u64 = 100_000;

fn accounting(backend: Backend) {
    accounting_of(engine(backend, Format::Seq64));
}

fn accounting_of(engine: Engine) {
    let backend = format!(
        "{}{}",
        engine.backend(),
        if engine.is_inline() { ", inline" } else { "" }
    );
    // 1000-byte datagrams at 100 MB/s: 100k datagrams a second.
    let sender = send(&engine, Format::Seq64, N, 1000, Some(100e6));
    let r = consume_until_accounted(engine, N, Duration::from_secs(60));
    let sent = sender.join().unwrap();
    assert_eq!(sent, N, "the sender sent everything");
    let s = &r.stats;
    println!("{backend}: {s}");
    assert_eq!(
        s.accounted(),
        N,
        "delivered + every drop counter == sent\n{s}"
    );
    assert_eq!(s.delivered, r.seqs.len() as u64);
    assert!(r.seqs.windows(2).all(|w| w[0] < w[1]), "delivered in order");
    let span = r.seqs.last().unwrap() - r.seqs.first().unwrap() + 1;
    assert_eq!(s.missed, span - s.delivered, "missed frames match the gaps");
    if s.accounted() == s.delivered {
        let expected: Vec<u64> = (1..=N).collect();
        assert_eq!(r.seqs, expected, "nothing dropped: the exact sent sequence");
        assert_eq!(s.missed, 0);
    }
    assert_eq!(s.delivered_bytes, s.delivered * 992);
    assert_eq!(s.bytes, s.received * 1000);
}

#[test]
fn mio_accounts_for_every_datagram() {
    accounting(Backend::Mio);
}

#[test]
fn polling_under_load_accounts_for_every_datagram() {
    // Read every 500 µs while datagrams keep coming (`poll_interval`), on both backends
    // that poll; with a small receive buffer (not root) the interval is bounded to nothing
    // and the test runs the plain path.
    for backend in [Backend::Mio, Backend::Reuseport] {
        let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.backend = backend;
        cfg.format = Format::Seq64;
        cfg.poll_interval = Some(Duration::from_micros(500));
        accounting_of(Engine::start(cfg).expect("engine starts"));
    }
}

/// An engine received inline, on the consumer's thread.
fn inline(backend: Backend, edit: impl FnOnce(&mut EngineConfig)) -> Engine {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.backend = backend;
    cfg.format = Format::Seq64;
    edit(&mut cfg);
    Engine::start_inline(cfg).expect("inline engine starts")
}

#[test]
fn inline_reception_accounts_for_every_datagram() {
    for backend in [Backend::Mio, Backend::Recvmmsg, Backend::Blocking] {
        accounting_of(inline(backend, |_| {}));
    }
    accounting_of(inline(Backend::Mio, |c| c.socket.gro = true));
}

/// Inline, nothing reads the socket while the consumer does not call: a stalled consumer
/// costs no receive at all, and the kernel's buffer holds the stream (or drops what does not
/// fit, counted, and the sequence numbers show those with a successor).
#[test]
fn inline_reception_reads_only_when_the_consumer_calls() {
    let stalled = |s: &Stats, ctx: &str| {
        assert_eq!((s.received, s.recv_calls), (0, 0), "{ctx}");
        assert_eq!(s.wakeups, 0, "{ctx}");
    };
    for (recv_buffer, s, seqs) in stall_then_drain(Engine::start_inline, stalled) {
        let ctx = format!("buffer {recv_buffer}: {s}");
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{ctx}");
        assert_eq!((s.paused, s.wakeups), (0, 0), "{ctx}");
        if recv_buffer <= 1 << 20 {
            let span = seqs.last().unwrap() - seqs.first().unwrap() + 1;
            assert_eq!(s.missed, span - s.delivered, "{ctx}");
        }
    }
}

/// Inline, a datagram held for a missing predecessor comes out once the reorder timeout
/// expires, although nothing else arrives (the wait for the socket ends at that deadline);
/// `try_recv` receives without waiting.
#[test]
fn inline_reception_releases_held_datagrams_at_the_reorder_timeout() {
    let mut engine = inline(Backend::Recvmmsg, |c| {
        c.reorder_timeout = Duration::from_millis(20);
    });
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for s in [1u64, 2, 4, 5] {
        tx.send_to(&s.to_le_bytes(), engine.local_addr()).unwrap();
    }
    let start = std::time::Instant::now();
    let mut seqs = Vec::new();
    while seqs.len() < 4 && start.elapsed() < Duration::from_secs(10) {
        if let Some(d) = engine.try_recv() {
            seqs.push(d.info().seq.unwrap());
        }
        if seqs.len() == 2 {
            // 4 and 5 wait for 3; only the timeout lets them go.
            if let Some(d) = engine.recv_timeout(Duration::from_secs(5)) {
                seqs.push(d.info().seq.unwrap());
            }
        }
    }
    assert_eq!(seqs, [1, 2, 4, 5]);
    assert!(start.elapsed() >= Duration::from_millis(20));
    // With nothing to come, a long wait (in the receive itself) and a short one (in ppoll)
    // both end empty-handed after their timeout.
    for wait in [Duration::from_millis(60), Duration::from_millis(5)] {
        let t = std::time::Instant::now();
        assert!(engine.recv_timeout(wait).is_none());
        assert!(t.elapsed() >= wait && t.elapsed() < Duration::from_secs(5));
    }
    let s = engine.shutdown();
    assert_eq!((s.missed, s.delivered, s.wakeups), (1, 4, 0), "{s}");
}

/// Backends with several sockets, io_uring or thread options cannot be received inline:
/// a clear error, no panic.
#[test]
fn inline_reception_refuses_what_needs_receive_threads() {
    for &backend in Backend::ALL {
        let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.backend = backend;
        let r = Engine::start_inline(cfg);
        match backend {
            Backend::Mio | Backend::Recvmmsg | Backend::Blocking => assert!(r.is_ok()),
            _ => assert!(
                matches!(r, Err(Error::Unsupported { .. })),
                "{backend}: {r:?}"
            ),
        }
    }
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.threads.cpus = vec![0];
    let e = Engine::start_inline(cfg).unwrap_err();
    assert!(e.to_string().contains("caller's thread"), "{e}");
}

#[test]
fn blocking_accounts_for_every_datagram() {
    accounting(Backend::Blocking);
}

#[test]
fn reuseport_accounts_for_every_datagram() {
    accounting(Backend::Reuseport);
}

#[test]
fn uring_accounts_for_every_datagram() {
    accounting(Backend::Uring);
}

#[test]
fn uring_multishot_accounts_for_every_datagram() {
    accounting(Backend::UringMultishot);
}

/// The discard policy: the receive thread keeps reading while nobody consumes and drops in
/// its overflow buffers, counted; what the consumer holds is bounded by the slots.
#[test]
fn stalled_consumer_with_discard_overflows_are_counted_and_stream_resumes() {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.format = Format::Seq64;
    cfg.slots = 64;
    cfg.batch = 8;
    cfg.reorder_window = 0;
    cfg.overload = Overload::Discard;
    // No latency budget: only the slots bound what the consumer holds. With one, a sender
    // slowed by a loaded host gives a low measured rate, and the budget's shorter queue
    // discards sooner (CI at bd88a7c: 37 held, not 64; counted, but not what this checks).
    cfg.latency_budget = None;
    let mut engine = Engine::start(cfg).unwrap();
    let n = 2_000;
    // Nobody consumes while these arrive.
    send(&engine, Format::Seq64, n, 200, Some(20e6))
        .join()
        .unwrap();
    // The receive thread keeps draining the socket although nobody consumes.
    let start = std::time::Instant::now();
    while engine.stats().received + engine.stats().kernel_drops < n
        && start.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = engine.stats();
    assert!(s.overflow > 0, "{s}");
    assert_eq!(s.received, n - s.kernel_drops, "{s}");
    let (mut gaps, mut got) = (0, 0);
    // The 64 held in the slots (a receive thread starved by a loaded host may publish them
    // late), then whatever else comes within 200 ms: nothing.
    while let Some(d) = engine.recv_timeout(if got < 64 {
        Duration::from_secs(10)
    } else {
        Duration::from_millis(200)
    }) {
        got += 1;
        if d.missed_before() > 0 {
            gaps += 1;
        }
    }
    let s = engine.shutdown();
    assert_eq!(s.accounted(), n, "{s}");
    assert_eq!(s.delivered, 64);
    assert_eq!(s.overflow + s.kernel_drops, n - 64);
    assert_eq!(s.paused, 0);
    // The first 64 are delivered in order; the overflowed tail leaves no successor, so no gap.
    assert_eq!(gaps, 0);
}

/// Datagrams sent while the consumer stalls: 2,000 of 200 B (seq64) into 64 slots, batches
/// of 8, no reordering, and no latency budget (only the slots bound what is read: with a
/// budget, a sender slowed by a loaded host gives a low measured rate and a queue at the
/// budget's floor of 2 batches), once with a receive buffer that holds the stream and once
/// with one that does not. `stalled` checks the counters while the consumer stalls; then
/// everything is consumed and what holds for every receiver is checked: every datagram
/// accounted, none read only to be thrown away, and with the small buffer the kernel's drops
/// make up the rest. Returns, per buffer size, the final counters and the sequence numbers
/// delivered.
fn stall_then_drain(
    start: fn(EngineConfig) -> Result<Engine, Error>,
    stalled: impl Fn(&Stats, &str),
) -> Vec<(usize, Stats, Vec<u64>)> {
    let mut out = Vec::new();
    for recv_buffer in [25_000_000usize, 64 * 1024] {
        let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.format = Format::Seq64;
        cfg.slots = 64;
        cfg.batch = 8;
        cfg.reorder_window = 0;
        cfg.socket.recv_buffer = recv_buffer;
        cfg.socket.force_recv_buffer = recv_buffer > 1 << 20;
        cfg.latency_budget = None;
        let mut engine = start(cfg).unwrap();
        let n = 2_000;
        send(&engine, Format::Seq64, n, 200, Some(20e6))
            .join()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let s = engine.stats();
        stalled(&s, &format!("buffer {recv_buffer}: {s}"));
        let mut seqs = Vec::new();
        while let Some(d) = engine.recv_timeout(Duration::from_millis(300)) {
            seqs.push(d.info().seq.unwrap());
        }
        let s = engine.shutdown();
        let ctx = format!("buffer {recv_buffer}: {s}");
        assert_eq!(s.accounted(), n, "{ctx}");
        assert_eq!(s.delivered, seqs.len() as u64, "{ctx}");
        assert_eq!(s.overflow, 0, "{ctx}");
        if recv_buffer > 1 << 20 {
            // The kernel held everything the slots could not.
            assert_eq!((s.delivered, s.kernel_drops, s.missed), (n, 0, 0), "{ctx}");
        } else {
            assert!(s.kernel_drops > 0, "{ctx}");
            assert_eq!(s.delivered + s.kernel_drops, n, "{ctx}");
        }
        out.push((recv_buffer, s, seqs));
    }
    out
}

/// The pause policy (the default): the receive thread stops reading while nobody consumes;
/// the kernel's buffer holds the stream, and nothing is read only to be thrown away.
#[test]
fn stalled_consumer_with_pause_reads_nothing_it_cannot_hand_over() {
    let stalled = |s: &Stats, ctx: &str| {
        assert_eq!(s.received, 64, "only what the slots hold: {ctx}");
        assert_eq!(s.overflow, 0, "{ctx}");
        assert!(s.paused >= 1, "{ctx}");
    };
    for (recv_buffer, s, _) in stall_then_drain(Engine::start, stalled) {
        if recv_buffer <= 1 << 20 {
            // The sequence numbers show the dropped datagrams that have a successor (with
            // the whole stream sent while stalled, the dropped ones are its tail and have
            // none).
            assert!(s.missed <= s.kernel_drops, "buffer {recv_buffer}: {s}");
        }
    }
}

#[test]
fn reordered_datagrams_are_restored_and_duplicates_dropped() {
    let engine = engine(Backend::Mio, Format::Seq64);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let order = [1u64, 3, 2, 4, 4, 6, 5, 7];
    for s in order {
        let mut dg = s.to_le_bytes().to_vec();
        dg.extend_from_slice(&[0u8; 32]);
        tx.send_to(&dg, engine.local_addr()).unwrap();
    }
    let r = consume_until_accounted(engine, order.len() as u64, Duration::from_secs(10));
    assert_eq!(r.seqs, [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(r.stats.duplicates, 1);
    assert_eq!(r.stats.reordered, 2);
    assert_eq!(r.stats.missed, 0);
}

/// Datagrams held back for reordering do not count against the latency budget: a gap with a
/// reorder window filling behind it must not pause the receive thread. (Before: with the
/// budget at its floor of 48 slots, the 64 held datagrams paused it until the reorder
/// timeout, while the kernel dropped what kept coming.)
#[test]
fn a_held_reorder_window_does_not_pause_the_receive_thread() {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.format = Format::Seq64;
    cfg.slots = 256;
    // The budget's floor is 2 batches (48 slots): below the 64 a full window holds, and far
    // above what a consumer woken under the default coalescing has waiting.
    cfg.batch = 24;
    cfg.reorder_window = 64;
    cfg.reorder_timeout = Duration::from_secs(2);
    // A budget so small that the queue in front of the consumer is held at its floor once
    // the rate has been measured.
    cfg.latency_budget = Some(Duration::from_nanos(1));
    let engine = Engine::start(cfg).unwrap();
    let to = engine.local_addr();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sender = std::thread::spawn(move || {
        let send = |s: u64| {
            let mut dg = s.to_le_bytes().to_vec();
            dg.extend_from_slice(&[0u8; 32]);
            tx.send_to(&dg, to).unwrap();
        };
        send(0);
        // The first rate window closes: the budget drops to its floor.
        std::thread::sleep(Duration::from_millis(30));
        // Seq 1 never comes; 99 datagrams behind it, slowly enough that a consumer under
        // AddressSanitizer keeps up while the other tests run beside it (at 1 ms a pace
        // CI's ASan run once saw a 48 ms stall, a pause; held datagrams counted against
        // the budget would pause the thread at any pace: 64 held are more than the
        // budget's floor of 48).
        for s in 2..=100 {
            send(s);
            std::thread::sleep(Duration::from_millis(3));
        }
    });
    let r = consume_until_accounted(engine, 100, Duration::from_secs(10));
    sender.join().unwrap();
    assert_eq!(r.seqs.len(), 100, "{}", r.stats);
    assert_eq!(
        (r.stats.missed, r.stats.kernel_drops),
        (1, 0),
        "{}",
        r.stats
    );
    assert_eq!(r.stats.paused, 0, "{}", r.stats);
}

#[test]
fn late_datagrams_are_counted_not_delivered() {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.format = Format::Seq64;
    cfg.reorder_window = 0;
    let engine = Engine::start(cfg).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for s in [1u64, 3, 2, 4] {
        tx.send_to(&s.to_le_bytes(), engine.local_addr()).unwrap();
    }
    let r = consume_until_accounted(engine, 4, Duration::from_secs(10));
    assert_eq!(r.seqs, [1, 3, 4]);
    assert_eq!((r.stats.late, r.stats.missed), (1, 1), "{}", r.stats);
}

#[test]
fn datagrams_left_at_shutdown_are_counted_unconsumed() {
    let engine = engine(Backend::Mio, Format::Raw);
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..10u8 {
        tx.send_to(&[i], engine.local_addr()).unwrap();
    }
    let start = std::time::Instant::now();
    while engine.stats().received < 10 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = engine.shutdown();
    assert_eq!((s.unconsumed, s.delivered), (10, 0), "{s}");
    assert_eq!(s.accounted(), 10);
}

#[test]
fn sender_restart_is_one_resync() {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.format = Format::Seq64;
    cfg.slots = 8192; // everything is sent before anything is consumed
    let mut engine = Engine::start(cfg).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for s in (1..=5000u64).chain(1..=10) {
        tx.send_to(&s.to_le_bytes(), engine.local_addr()).unwrap();
        if s % 500 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let mut events = Vec::new();
    while let Some(d) = engine.recv_timeout(Duration::from_millis(300)) {
        events.push(d.seq_event());
    }
    let s = engine.shutdown();
    assert_eq!(s.kernel_drops, 0, "{s}");
    assert_eq!(s.resyncs, 1, "{s}");
    assert_eq!(s.missed, 0);
    assert_eq!(events.iter().filter(|e| **e == SeqEvent::Resync).count(), 1);
    assert_eq!(s.delivered, 5010);
}

#[test]
fn truncated_malformed_and_non_data_are_counted_not_delivered() {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.format = Format::Chdr;
    cfg.slot_size = 1024;
    let engine = Engine::start(cfg).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = engine.local_addr();
    let mut good = vec![0u8; 64];
    Format::Chdr
        .emit_header(&mut good, &DataHeader::default())
        .unwrap();
    tx.send_to(&good, to).unwrap();
    // Larger than a slot.
    let mut big = vec![0u8; 2000];
    Format::Chdr
        .emit_header(
            &mut big,
            &DataHeader {
                seq: 1,
                ..Default::default()
            },
        )
        .unwrap();
    tx.send_to(&big, to).unwrap();
    // Length field disagrees.
    let mut bad = good.clone();
    bad.truncate(40);
    tx.send_to(&bad, to).unwrap();
    // Control packet (type 4).
    let mut ctrl = good.clone();
    ctrl[6] = (ctrl[6] & !0xe0) | (4 << 5);
    tx.send_to(&ctrl, to).unwrap();
    let r = consume_until_accounted(engine, 4, Duration::from_secs(10));
    let s = r.stats;
    assert_eq!(
        (s.delivered, s.truncated, s.malformed, s.skipped),
        (1, 1, 1, 1),
        "{s}"
    );
}

#[test]
fn datagrams_from_outside_the_allow_list_are_rejected() {
    let allowed = UdpSocket::bind("127.0.0.1:0").unwrap();
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.socket.filter = SourceFilter::peer(allowed.local_addr().unwrap());
    let mut engine = Engine::start(cfg).unwrap();
    for i in 0..50u8 {
        allowed.send_to(&[i; 10], engine.local_addr()).unwrap();
        other.send_to(&[0xff; 10], engine.local_addr()).unwrap();
    }
    let mut got = Vec::new();
    while let Some(d) = engine.recv_timeout(Duration::from_millis(300)) {
        assert_eq!(d.meta().source, allowed.local_addr().unwrap());
        got.push(d.payload()[0]);
    }
    let s = engine.shutdown();
    assert_eq!(got, (0..50).collect::<Vec<u8>>());
    assert_eq!(s.rejected, 50);
    assert_eq!(s.accounted(), 100);
}

#[test]
fn bad_configuration_is_an_error_not_a_panic() {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.batch = 0;
    assert!(matches!(Engine::start(cfg), Err(Error::Config(_))));
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.reorder_window = cfg.slots;
    assert!(matches!(Engine::start(cfg), Err(Error::Config(_))));
    // Address in use.
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let cfg = EngineConfig::new(taken.local_addr().unwrap());
    assert!(matches!(Engine::start(cfg), Err(Error::Socket { .. })));
}

#[test]
fn kernel_timestamps_when_enabled() {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.socket.timestamps = true;
    let mut engine = Engine::start(cfg).unwrap();
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .send_to(b"t", engine.local_addr())
        .unwrap();
    let d = engine.recv_timeout(Duration::from_secs(5)).unwrap();
    let arrival = d.meta().arrival;
    let kernel = arrival.kernel_realtime_ns.expect("a kernel timestamp");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let age = now.saturating_sub(kernel);
    assert!(
        age < 60_000_000_000,
        "kernel timestamp is recent: {age} ns old"
    );
    // On the monotonic clock, the arrival precedes the delivery by about the same age.
    let mono_age = fsdr_net_io::sys::monotonic_ns().saturating_sub(arrival.monotonic_ns);
    assert!(mono_age < 60_000_000_000, "{mono_age}");
}

/// `stream_ns` spans the stream's arrivals, not the wait before it or the idle time after it:
/// the rate a summary divides by it is the stream's.
#[test]
fn the_stream_span_runs_from_the_first_arrival_to_the_last() {
    use fsdr_net_io::send::Framer;
    for &backend in Backend::ALL {
        let Some(link) = fsdr_net_io::netns::TestLink::for_backend(backend) else {
            continue;
        };
        // Kernel receive timestamps: a datagram's arrival is when the kernel queued it, not
        // when a (possibly late) receive thread took it.
        let mut cfg = link.config();
        cfg.format = Format::Seq64;
        cfg.socket.timestamps = true;
        let engine = link
            .receive(|| Engine::start(cfg.clone()))
            .unwrap_or_else(|e| {
                // tokio-uring has no control messages: arrival is when the receive completed.
                println!("{backend}: {e}; arrival read by the receive thread");
                cfg.socket.timestamps = false;
                link.receive(|| Engine::start(cfg.clone())).unwrap()
            });
        let to = engine.local_addr();
        // Idle before the stream: not part of it. Then 50 datagrams, each sent at least
        // 2 ms after the one before.
        let started = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(100));
        let sender = link.send(|| {
            std::thread::spawn(move || {
                let tx = UdpSocket::bind("0.0.0.0:0").unwrap();
                let mut framer = Framer::new(Format::Seq64);
                let mut dg = [0u8; 1000];
                for _ in 0..50 {
                    framer.frame(&mut dg, 992, 0).unwrap();
                    tx.send_to(&dg, to).unwrap();
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        });
        let r = consume_until_accounted(engine, 50, Duration::from_secs(60));
        let wall = started.elapsed().as_secs_f64() - 0.1;
        sender.join().unwrap();
        let s = &r.stats;
        assert_eq!(s.delivered, 50, "{backend}: {s}");
        // At least 49 intervals of 2 ms between the kernel's arrivals; the 100 ms before
        // the stream left out.
        let span = s.stream_seconds();
        if cfg.socket.timestamps {
            assert!(span >= 0.098, "{backend}: {span} s: {s}");
        }
        assert!(
            span > 0.0 && span < wall,
            "{backend}: {span} s of {wall} s: {s}"
        );
        let rate = s.stream_bytes_per_second();
        assert!(
            (rate * span - 992.0 * 49.0).abs() < 1e-6 * rate,
            "{backend}: {rate} B/s over {span} s"
        );
    }
}
