//! UDP GRO on receive (`SocketConfig::gro`, mio and reuseport backends). On loopback a sender
//! with UDP GSO reaches a socket with `UDP_GRO` as whole coalesced receives, so these tests
//! see the kernel's real coalesced buffers and `UDP_GRO` control messages.

mod common;

use std::time::Duration;

use fsdr_net_io::format::seq64::Seq64Packet;
use fsdr_net_io::send::{Sender, SenderConfig};
use fsdr_net_io::{Backend, Engine, EngineConfig, Error, Format, Stats};

use common::{consume_until_accounted, send};

fn gro_engine(backend: Backend, format: Format, edit: impl FnOnce(&mut EngineConfig)) -> Engine {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.backend = backend;
    cfg.format = format;
    cfg.socket.gro = true;
    edit(&mut cfg);
    Engine::start(cfg).expect("engine starts")
}

/// Datagram `i` of `size` bytes: its index, then its index's low byte repeated.
fn datagram(i: u64, size: usize) -> Vec<u8> {
    let mut d = vec![i as u8; size];
    d[..8].copy_from_slice(&i.to_le_bytes());
    d
}

/// Sends `count` datagrams of `size` bytes, numbered from `first`, as GSO super-packets.
fn send_run(tx: &mut Sender, first: u64, count: u64, size: usize) {
    let buf: Vec<u8> = (first..first + count)
        .flat_map(|i| datagram(i, size))
        .collect();
    tx.send_segments(&buf, size).unwrap();
}

/// Receives datagram `i` of `sizes[i]` bytes for every `i`, whole and in order, then shuts the
/// engine down and returns its stats.
fn drain_in_order(engine: Engine, sizes: &[usize]) -> Stats {
    let (got, s) = drain(engine, sizes.len());
    assert_eq!(got.len(), sizes.len(), "{s}");
    for (i, (d, &size)) in got.iter().zip(sizes).enumerate() {
        assert_eq!(
            d,
            &datagram(i as u64, size),
            "datagram {i} of {size} B: {s}"
        );
    }
    s
}

/// Receives until `n` datagrams came or nothing more comes; returns them and the stats.
fn drain(mut engine: Engine, n: usize) -> (Vec<Vec<u8>>, Stats) {
    let mut got = Vec::new();
    while got.len() < n {
        match engine.recv_timeout(Duration::from_secs(2)) {
            Some(d) => got.push(d.payload().to_vec()),
            None => break,
        }
    }
    (got, engine.shutdown())
}

#[test]
fn coalesced_receives_arrive_as_their_datagrams_whole_and_in_order_when_sizes_change() {
    let engine = gro_engine(Backend::Mio, Format::Raw, |_| {});
    let mut tx = Sender::new(&SenderConfig::new(engine.local_addr())).unwrap();
    assert!(tx.gso(), "the kernel has UDP GSO");
    // Larger, smaller, tiny, then larger than anything learnt so far: every change of size
    // is a receive that does not line up with the slots and must be copied into place.
    let runs = [
        (300, 8000),
        (300, 1472),
        (300, 64),
        (100, 9000),
        (300, 8000),
    ];
    let mut sizes = Vec::new();
    let mut first = 0;
    for (count, size) in runs {
        send_run(&mut tx, first, count, size);
        sizes.extend(std::iter::repeat_n(size, count as usize));
        first += count;
    }
    let s = drain_in_order(engine, &sizes);
    let ctx = format!("{s}");
    assert_eq!((s.received, s.delivered), (1300, 1300), "{ctx}");
    assert_eq!(s.truncated + s.overflow + s.kernel_drops, 0, "{ctx}");
    assert!(
        s.gro_datagrams >= 1000,
        "the receives were coalesced: {ctx}"
    );
    assert!(s.recv_calls < 200, "one call takes many datagrams: {ctx}");
    // Copies only where the size changed: the receives of the one call that was set up for
    // the old size (at most a batch of them), never per datagram of a steady stream.
    assert!(
        (1..=runs.len() as u64 * 32).contains(&s.gro_fixups),
        "{ctx}"
    );
}

/// Runs of random sizes and lengths, some sent as GSO super-packets and some one datagram per
/// send, in one stream: whatever the kernel coalesces and however the learnt segment size
/// lags behind, every datagram arrives whole, once, in order.
#[test]
fn random_runs_of_sizes_arrive_whole_and_in_order() {
    let engine = gro_engine(Backend::Mio, Format::Raw, |_| {});
    let mut tx = Sender::new(&SenderConfig::new(engine.local_addr())).unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut sizes = Vec::new();
    let mut first = 0u64;
    for _ in 0..40 {
        let size = 16 + next(9000) as usize;
        let count = 1 + next(60);
        if next(4) == 0 {
            let one: Vec<Vec<u8>> = (first..first + count).map(|i| datagram(i, size)).collect();
            let refs: Vec<&[u8]> = one.iter().map(|d| d.as_slice()).collect();
            tx.send_datagrams(&refs).unwrap();
        } else {
            send_run(&mut tx, first, count, size);
        }
        sizes.extend(std::iter::repeat_n(size, count as usize));
        first += count;
    }
    let s = drain_in_order(engine, &sizes);
    let ctx = format!("{s}");
    assert_eq!(s.received, sizes.len() as u64, "{ctx}");
    assert_eq!(s.truncated + s.overflow + s.kernel_drops, 0, "{ctx}");
    assert!(s.gro_datagrams > 0, "{ctx}");
}

#[test]
fn datagrams_larger_than_a_slot_are_truncated_one_by_one() {
    let engine = gro_engine(Backend::Mio, Format::Raw, |c| c.slot_size = 1024);
    let mut tx = Sender::new(&SenderConfig::new(engine.local_addr())).unwrap();
    send_run(&mut tx, 0, 10, 2000);
    send_run(&mut tx, 10, 40, 500);
    let (got, s) = drain(engine, 40);
    let ctx = format!("{s}");
    assert_eq!(
        s.truncated, 10,
        "each oversized datagram counted once: {ctx}"
    );
    assert_eq!(got.len(), 40, "{ctx}");
    for (k, d) in got.iter().enumerate() {
        assert_eq!(d, &datagram(10 + k as u64, 500), "{ctx}");
    }
    assert_eq!(s.accounted(), 50, "{ctx}");
}

#[test]
fn reuseport_splits_coalesced_receives_and_tracks_sequence_numbers() {
    let engine = gro_engine(Backend::Reuseport, Format::Seq64, |c| {
        c.reuseport_threads = 2;
    });
    let n = 5_000;
    let sent = send(&engine, Format::Seq64, n, 1472, Some(50e6))
        .join()
        .unwrap();
    let r = consume_until_accounted(engine, sent, Duration::from_secs(20));
    let s = &r.stats;
    assert_eq!((s.delivered, s.missed, s.duplicates), (n, 0, 0), "{s}");
    assert!(s.gro_datagrams > n / 2, "{s}");
    assert!(r.seqs.windows(2).all(|w| w[1] == w[0] + 1), "in order");
}

/// With the pause policy and a stalled consumer, a coalesced receive is taken only when a
/// whole entry of slots is free. What the kernel cannot hold it drops whole: its drop counter
/// then counts coalesced receives, not datagrams (each holds up to 64), so the exact count of
/// what was lost comes from the sequence numbers once a datagram follows the loss.
#[test]
fn a_stalled_consumer_pauses_and_the_sequence_numbers_count_every_datagram_lost() {
    for recv_buffer in [25_000_000usize, 256 * 1024] {
        let mut engine = gro_engine(Backend::Mio, Format::Seq64, |c| {
            c.slots = 512;
            c.batch = 8;
            c.reorder_window = 0;
            c.socket.recv_buffer = recv_buffer;
            c.socket.force_recv_buffer = true;
        });
        let mut tx = Sender::new(&SenderConfig::new(engine.local_addr())).unwrap();
        let n = 6_000u64;
        let seq64 = |i: u64| {
            let mut d = vec![0u8; 200];
            Seq64Packet::new_unchecked(&mut d[..]).set_seq(i);
            d
        };
        let stream: Vec<u8> = (1..=n).flat_map(seq64).collect();
        tx.send_segments(&stream, 200).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let stalled = engine.stats();
        let ctx = format!("buffer {recv_buffer}: {stalled}");
        assert!(
            stalled.received <= 512,
            "no more than the slots hold: {ctx}"
        );
        assert!(stalled.paused >= 1, "{ctx}");
        let mut delivered = 0;
        while engine.recv_timeout(Duration::from_millis(300)).is_some() {
            delivered += 1;
        }
        // One more datagram after the loss: the gap before it is counted.
        tx.send_segments(&seq64(n + 1), 200).unwrap();
        while engine.recv_timeout(Duration::from_millis(300)).is_some() {
            delivered += 1;
        }
        let s = engine.shutdown();
        let ctx = format!("buffer {recv_buffer}: {s}");
        assert_eq!(s.delivered, delivered, "{ctx}");
        assert_eq!((s.overflow, s.duplicates, s.late), (0, 0, 0), "{ctx}");
        assert_eq!(s.delivered + s.missed, n + 1, "every datagram sent: {ctx}");
        if recv_buffer > 1 << 20 {
            assert_eq!((s.kernel_drops, s.missed), (0, 0), "{ctx}");
        } else {
            assert!(s.kernel_drops > 0, "{ctx}");
            assert!(
                s.kernel_drops <= s.missed && s.missed <= 128 * s.kernel_drops,
                "the kernel counts coalesced receives: {ctx}"
            );
        }
    }
}

/// A coalesced receive needs a whole entry of free slots (8 for 9216-byte slots). When the
/// consumer's reorder window holds all but a few slots, the receive side pauses instead of
/// reading — on its thread and inline alike — and once the reorder timeout releases the hold,
/// nothing is lost beyond the one datagram never sent.
#[test]
fn reorder_holds_that_leave_less_than_an_entry_pause_the_receive_side() {
    for inline in [false, true] {
        let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.format = Format::Seq64;
        cfg.socket.gro = true;
        cfg.slots = 256;
        cfg.batch = 8;
        cfg.reorder_window = 250;
        cfg.reorder_timeout = Duration::from_millis(100);
        // Only the slots bound the queue here.
        cfg.latency_budget = None;
        let engine = if inline {
            Engine::start_inline(cfg).unwrap()
        } else {
            Engine::start(cfg).unwrap()
        };
        let to = engine.local_addr();
        let sender = std::thread::spawn(move || {
            let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let send = |i: u64| {
                let mut d = vec![0u8; 64];
                Seq64Packet::new_unchecked(&mut d[..]).set_seq(i);
                tx.send_to(&d, to).unwrap();
            };
            // Seq 2 never comes: 249 datagrams wait behind it, 7 slots stay free.
            send(1);
            for i in 3..=251 {
                send(i);
            }
            // One more while the hold lasts: the receive side has too few slots for it.
            std::thread::sleep(Duration::from_millis(30));
            send(252);
        });
        let r = consume_until_accounted(engine, 251, Duration::from_secs(10));
        sender.join().unwrap();
        let s = &r.stats;
        let ctx = format!("inline {inline}: {s}");
        assert!(s.paused >= 1, "{ctx}");
        assert_eq!((s.delivered, s.missed), (251, 1), "{ctx}");
        assert_eq!((s.kernel_drops, s.overflow), (0, 0), "{ctx}");
        let expected: Vec<u64> = [1].into_iter().chain(3..=252).collect();
        assert_eq!(r.seqs, expected, "{ctx}");
    }
}

#[test]
fn gro_is_refused_where_it_would_not_be_split() {
    for &backend in Backend::ALL {
        let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.backend = backend;
        cfg.socket.gro = true;
        let started = Engine::start(cfg);
        if backend.capabilities().gro {
            assert!(started.is_ok(), "{backend}");
        } else {
            assert!(
                matches!(started, Err(Error::Unsupported { .. })),
                "{backend}: {started:?}"
            );
        }
    }
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.socket.gro = true;
    cfg.slots = 100;
    let e = Engine::start(cfg).unwrap_err().to_string();
    assert!(e.contains("slots"), "{e}");
}
