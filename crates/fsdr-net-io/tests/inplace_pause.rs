//! Gaps received in place, sent in steps with pauses between them so that each step is read
//! before the next is sent: which datagrams are copied is then exact. Only the first datagram
//! (it teaches the stream's layout), the one that shows a gap and a late one (it landed where
//! the next in order would) are copied; the datagrams after a gap land behind its hole in
//! place — also when the hole is longer than the room left in a buffer — and stay there
//! whether a late datagram fills the hole or the reorder timeout gives it up.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use fsdr_net_io::depacketizer::{DepacketizerConfig, DepacketizerStats};
use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver, Progress};
use fsdr_net_io::sample::{Decoder, WireFormat};
use fsdr_net_io::{Backend, EngineConfig, Format, Stats};

/// Payload bytes per datagram; datagram `seq` carries `seq` in every byte.
const PAYLOAD: usize = 100;

fn send(tx: &UdpSocket, to: std::net::SocketAddr, seqs: &[u64]) {
    for &seq in seqs {
        let mut dg = seq.to_le_bytes().to_vec();
        dg.extend_from_slice(&[seq as u8; PAYLOAD]);
        tx.send_to(&dg, to).unwrap();
    }
}

/// What a receiver with `buffers` buffers of `buffer_datagrams` datagrams each made of
/// `steps`, sent one after the other with 20 ms between them, then a pause.
struct Run {
    items: Vec<u8>,
    stats: Stats,
    dp: DepacketizerStats,
}

/// A receiver of `u8` items for seq64 datagrams (zeros for a loss) with `buffers` buffers of
/// `buffer_datagrams` datagrams' payloads each, on a thread of its own or inline.
fn receiver(
    inline: bool,
    buffers: usize,
    buffer_datagrams: usize,
    reorder_timeout: Duration,
) -> InPlaceReceiver<u8, Vec<u8>> {
    let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    engine.backend = Backend::Recvmmsg;
    engine.format = Format::Seq64;
    engine.reorder_timeout = reorder_timeout;
    let cfg = InPlaceConfig {
        engine,
        decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
        depacketizer: DepacketizerConfig {
            zero_fill: true,
            ..Default::default()
        },
        buffers,
    };
    let mut rx = if inline {
        InPlaceReceiver::<u8, Vec<u8>>::start_inline(cfg).unwrap()
    } else {
        InPlaceReceiver::<u8, Vec<u8>>::start(cfg).unwrap()
    };
    for _ in 0..buffers {
        rx.give(vec![0u8; buffer_datagrams * PAYLOAD]).unwrap();
    }
    rx
}

/// For `ms` milliseconds: receives, takes what is filled and gives it back.
fn pump(rx: &mut InPlaceReceiver<u8, Vec<u8>>, items: &mut Vec<u8>, ms: u64) {
    let until = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < until {
        rx.receive(Duration::from_millis(5));
        while let Some(f) = rx.take() {
            items.extend_from_slice(&f.buffer[..f.items]);
            rx.give(f.buffer).unwrap();
        }
    }
}

fn run(inline: bool, buffers: usize, buffer_datagrams: usize, steps: &[&[u64]]) -> Run {
    let mut rx = receiver(inline, buffers, buffer_datagrams, Duration::from_millis(50));
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = rx.local_addr();
    let mut items = Vec::new();
    let last = steps
        .iter()
        .flat_map(|s| s.iter())
        .max()
        .copied()
        .unwrap_or(0);
    for step in steps {
        send(&tx, to, step);
        pump(&mut rx, &mut items, 20);
    }
    let started = Instant::now();
    while items.len() < last as usize * PAYLOAD && started.elapsed() < Duration::from_secs(5) {
        pump(&mut rx, &mut items, 10);
    }
    let (stats, dp, rest) = rx.shutdown();
    for f in rest {
        items.extend_from_slice(&f.buffer[..f.items]);
    }
    Run { items, stats, dp }
}

/// Every datagram at its place, zeros where one never came.
fn check_items(r: &Run, last: u64, lost: &[u64], ctx: &str) {
    assert_eq!(r.items.len(), last as usize * PAYLOAD, "{ctx}");
    for (k, chunk) in r.items.chunks(PAYLOAD).enumerate() {
        let seq = k as u64 + 1;
        let want = if lost.contains(&seq) { 0 } else { seq as u8 };
        assert!(chunk.iter().all(|&b| b == want), "datagram {seq}: {ctx}");
    }
    assert_eq!(r.dp.zeros_inserted, (lost.len() * PAYLOAD) as u64, "{ctx}");
}

#[test]
fn a_gap_before_a_pause_is_given_up_on_in_place() {
    for inline in [false, true] {
        // 1..=9 in order, then 11 alone (it shows the gap: placed ahead of the hole), then
        // 12..=20, which land behind it in place; then nothing.
        let r = run(
            inline,
            4,
            655,
            &[&[1, 2, 3, 4, 5, 6, 7, 8, 9], &[11], &seqs(12..=20)],
        );
        let ctx = format!("inline: {inline}: {}\n{:?}", r.stats, r.dp);
        assert_eq!((r.stats.delivered, r.stats.missed), (19, 1), "{ctx}");
        check_items(&r, 20, &[10], &ctx);
        // The first datagram and the one that showed the gap; not 12..=20 as well.
        assert_eq!(r.dp.copied_bytes, 2 * PAYLOAD as u64, "{ctx}");
    }
}

#[test]
fn a_hole_longer_than_a_buffer_keeps_the_datagrams_after_it_in_place() {
    for inline in [false, true] {
        // Buffers of 4 datagrams; 4..=9 lost: a hole of 6 datagrams behind 3. The buffers
        // behind the hole are taken at once, so 11..=20 land in place behind 10.
        let r = run(inline, 8, 4, &[&[1, 2, 3], &[10], &seqs(11..=20)]);
        let ctx = format!("inline: {inline}: {}\n{:?}", r.stats, r.dp);
        assert_eq!((r.stats.delivered, r.stats.missed), (14, 6), "{ctx}");
        check_items(&r, 20, &[4, 5, 6, 7, 8, 9], &ctx);
        // 1, and 10 twice: its zeros run into the next buffer, so its payload waits staged
        // (counted when staged and when written). Not 11..=20 (before: all of them).
        assert_eq!(r.dp.copied_bytes, 3 * PAYLOAD as u64, "{ctx}");
    }
}

#[test]
fn a_late_datagram_that_fills_its_hole_leaves_the_rest_in_place() {
    for (inline, buffer_datagrams) in [(false, 64), (true, 64), (false, 4), (true, 4)] {
        // 4 is late: 5 shows the gap, 6..=10 land behind it, then 4 fills the hole exactly
        // (copied: it landed where 11 would), and nothing placed behind it moves.
        let r = run(
            inline,
            8,
            buffer_datagrams,
            &[&[1, 2, 3], &[5], &seqs(6..=10), &[4], &seqs(11..=14)],
        );
        let ctx = format!(
            "inline: {inline}, {buffer_datagrams}: {}\n{:?}",
            r.stats, r.dp
        );
        assert_eq!((r.stats.delivered, r.stats.missed), (14, 0), "{ctx}");
        assert_eq!(r.stats.reordered, 1, "{ctx}");
        check_items(&r, 14, &[], &ctx);
        // 1 (the layout), 5 (the gap) and 4 (late).
        assert_eq!(r.dp.copied_bytes, 3 * PAYLOAD as u64, "{ctx}");
    }
}

fn seqs(r: std::ops::RangeInclusive<u64>) -> Vec<u64> {
    r.collect()
}

/// A stop while the consumer holds every buffer and the kernel still holds datagrams: the
/// stop reads them into memory it throws away and counts them (`overflow`), so that the
/// counters account for every datagram sent, on a receive thread and inline.
#[test]
fn what_the_kernel_holds_at_a_stop_with_every_buffer_taken_is_counted() {
    const SENT: u64 = 300;
    for inline in [false, true] {
        let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        engine.backend = Backend::Recvmmsg;
        engine.format = Format::Seq64;
        let cfg = InPlaceConfig {
            engine,
            decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
            depacketizer: DepacketizerConfig::default(),
            buffers: 1,
        };
        let mut rx = if inline {
            InPlaceReceiver::<u8, Vec<u8>>::start_inline(cfg).unwrap()
        } else {
            InPlaceReceiver::<u8, Vec<u8>>::start(cfg).unwrap()
        };
        // One buffer of ten datagrams' payloads, never given back.
        rx.give(vec![0u8; 1000]).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for seq in 0..SENT {
            let mut dg = seq.to_le_bytes().to_vec();
            dg.extend_from_slice(&[7u8; 100]);
            tx.send_to(&dg, rx.local_addr()).unwrap();
        }
        // Until the receiver has no buffer left (the filled one is kept, not given back).
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut held = Vec::new();
        loop {
            assert!(Instant::now() < deadline, "inline {inline}: {}", rx.stats());
            let progress = rx.receive(Duration::from_millis(20));
            held.extend(std::iter::from_fn(|| rx.take()));
            if progress == Progress::NeedBuffers || rx.stats().paused > 0 {
                break;
            }
        }
        let (stats, _, _) = rx.shutdown();
        let ctx = format!("inline {inline}: {stats}");
        assert_eq!(stats.accounted(), SENT, "{ctx}");
        assert_eq!(stats.received + stats.kernel_drops, SENT, "{ctx}");
        assert!(stats.overflow > 0, "{ctx}");
    }
}

/// A consumer that keeps every buffer for a while, with a gap open all along (one loss in 50
/// is inside the reorder window of 64; no timeout gives one up): what came while no buffer
/// was free is copied, and once the buffers are back the stream lands in place again — the
/// copies held ahead of the open gaps are put at their places, so the datagrams after them
/// land behind them instead of every later one being copied for the rest of the stream.
#[test]
fn after_a_pause_with_gaps_open_the_stream_lands_in_place_again() {
    const LAST: u64 = 1070;
    let lost = |s: u64| s.is_multiple_of(50) && s <= 1000;
    let seqs_from = |r: std::ops::RangeInclusive<u64>| r.filter(|&s| !lost(s)).collect::<Vec<_>>();
    for inline in [false, true] {
        let mut rx = receiver(inline, 8, 16, Duration::from_secs(10));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr();
        let mut items = Vec::new();
        send(&tx, to, &seqs(1..=10));
        pump(&mut rx, &mut items, 20);
        // The consumer keeps what it takes.
        send(&tx, to, &seqs_from(11..=300));
        let mut kept = Vec::new();
        let until = Instant::now() + Duration::from_millis(100);
        while Instant::now() < until {
            rx.receive(Duration::from_millis(5));
            kept.extend(std::iter::from_fn(|| rx.take()));
        }
        for f in kept {
            items.extend_from_slice(&f.buffer[..f.items]);
            rx.give(f.buffer).unwrap();
        }
        pump(&mut rx, &mut items, 20);
        let paused = rx.stats().paused;
        assert!(
            paused > 0,
            "inline: {inline}: the receiver ran out of buffers"
        );
        let before = rx.depacketizer_stats().copied_bytes;
        for chunk in seqs_from(301..=LAST).chunks(50) {
            send(&tx, to, chunk);
            pump(&mut rx, &mut items, 5);
        }
        let started = Instant::now();
        while items.len() < LAST as usize * PAYLOAD && started.elapsed() < Duration::from_secs(5) {
            pump(&mut rx, &mut items, 10);
        }
        let after = rx.depacketizer_stats().copied_bytes;
        let paused = rx.stats().paused - paused;
        let batch = rx_batch();
        let (stats, dp, rest) = rx.shutdown();
        for f in rest {
            items.extend_from_slice(&f.buffer[..f.items]);
        }
        let ctx = format!("inline: {inline}: {stats}\n{dp:?}");
        let lost: Vec<u64> = (1..=LAST).filter(|&s| lost(s)).collect();
        let r = Run { items, stats, dp };
        check_items(&r, LAST, &lost, &ctx);
        // After the buffers came back: the copies held during the pause, put at their places
        // with the first receive after it (a window at most), and the datagram that shows
        // each gap (twice for a window passed in the middle of a call) — not the 756
        // datagrams sent (all of them were copied before). Should this consumer fall behind
        // again on a loaded machine, each pause may cost a window and a call's datagrams.
        let gaps = (301..=LAST).filter(|&s| lost.contains(&s)).count() as u64;
        let bound = 64 + 1 + 2 * gaps + paused * (64 + batch);
        let copied = (after - before) / PAYLOAD as u64;
        assert!(copied <= bound, "copied {copied} > {bound}: {ctx}");
    }
}

/// Datagrams a receive call takes by default.
fn rx_batch() -> u64 {
    EngineConfig::new("127.0.0.1:0".parse().unwrap()).batch as u64
}
