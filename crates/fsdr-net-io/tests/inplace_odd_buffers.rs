//! In-place reception into buffers of odd sizes: buffers of no item, of fewer items than a
//! datagram carries, and of sizes that are no multiple of it, mixed with ordinary ones,
//! under a stream with gaps, reorders and duplicates. Every item the stream carried lands
//! at its place (zeros where datagrams were missed), and nothing is read from or written
//! to memory that is not the buffer it belongs to.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use fsdr_net_io::depacketizer::DepacketizerConfig;
use fsdr_net_io::inplace::{Filled, InPlaceConfig, InPlaceReceiver};
use fsdr_net_io::sample::{Decoder, WireFormat};
use fsdr_net_io::{Backend, EngineConfig, Format};

const PAY: usize = 992;

type Rx = InPlaceReceiver<u8, Vec<u8>>;

fn start(gro: bool, buffers: usize) -> Rx {
    let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    engine.backend = Backend::Recvmmsg;
    engine.format = Format::Seq64;
    engine.batch = 16;
    engine.slot_size = 2048;
    engine.socket.gro = gro;
    engine.reorder_timeout = Duration::from_millis(200);
    Rx::start(InPlaceConfig {
        engine,
        decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
        depacketizer: DepacketizerConfig {
            zero_fill: true,
            ..Default::default()
        },
        buffers,
    })
    .unwrap()
}

/// Payload byte `i` of datagram `seq`.
fn byte(seq: u64, i: usize) -> u8 {
    (seq.wrapping_mul(7) as usize + i) as u8
}

fn datagram(seq: u64) -> Vec<u8> {
    let mut d = vec![0u8; 8 + PAY];
    d[..8].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in d[8..].iter_mut().enumerate() {
        *b = byte(seq, i);
    }
    d
}

/// Sends `order` (sequence numbers, as they go on the wire) in bursts of `burst`.
fn send(to: SocketAddr, order: &[u64], burst: usize) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    for chunk in order.chunks(burst) {
        for &seq in chunk {
            s.send_to(&datagram(seq), to).unwrap();
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Takes filled buffers until `want` items came (or 5 s passed), giving each back as the
/// next of `sizes` (cycled); returns the items in order.
fn collect(rx: &mut Rx, want: usize, sizes: &[usize], mut k: usize) -> Vec<u8> {
    let mut items = Vec::new();
    let t0 = Instant::now();
    while items.len() < want && t0.elapsed() < Duration::from_secs(5) {
        rx.notifier().wait_timeout(Duration::from_millis(5));
        while let Some(Filled {
            buffer, items: n, ..
        }) = rx.take()
        {
            items.extend_from_slice(&buffer[..n]);
            k += 1;
            let _ = rx.give(vec![0u8; sizes[k % sizes.len()]]);
        }
    }
    items
}

fn expected(first: u64, last: u64, missed: &[u64]) -> Vec<u8> {
    let mut v = Vec::new();
    for seq in first..=last {
        for i in 0..PAY {
            v.push(if missed.contains(&seq) {
                0
            } else {
                byte(seq, i)
            });
        }
    }
    v
}

fn check(got: &[u8], want: &[u8], ctx: &str) {
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "{ctx}: item {i} (datagram {}, byte {}) is {} where {} belongs",
            i / PAY,
            i % PAY,
            got[i],
            want[i]
        );
    }
    assert_eq!(got.len(), want.len(), "{ctx}: items");
}

#[test]
fn a_buffer_of_no_item_is_handed_back_and_the_stream_goes_on() {
    for gro in [false, true] {
        let mut rx = start(gro, 3);
        rx.give(vec![0u8; PAY * 8]).unwrap();
        rx.give(vec![0u8; PAY * 8]).unwrap();
        rx.give(Vec::new()).unwrap(); // returned last: filled first
        let order: Vec<u64> = (1..=40).collect();
        send(rx.local_addr(), &order, 8);
        let got = collect(&mut rx, 40 * PAY, &[PAY * 8, 0, PAY * 3 + 5], 0);
        check(&got, &expected(1, 40, &[]), &format!("gro {gro}"));
    }
}

/// The wire order of `1..=n` with `missed` never sent, each pair in `swapped` sent in
/// reverse, and each of `twice` sent twice.
fn wire(n: u64, missed: &[u64], swapped: &[u64], twice: &[u64]) -> Vec<u64> {
    let mut v = Vec::new();
    let mut seq = 1;
    while seq <= n {
        if missed.contains(&seq) {
            seq += 1;
            continue;
        }
        if swapped.contains(&seq) && seq < n && !missed.contains(&(seq + 1)) {
            v.extend([seq + 1, seq]);
            seq += 2;
            continue;
        }
        v.push(seq);
        if twice.contains(&seq) {
            v.push(seq);
        }
        seq += 1;
    }
    v
}

/// Gaps (datagrams placed ahead of a hole, holes wider than a buffer), reorders and
/// duplicates while buffers of no item, of one item, of less than a datagram and of odd
/// sizes come and go among ordinary ones: every item at its place, zeros for the missed.
#[test]
fn gaps_and_odd_buffers_keep_every_item_in_place() {
    let size_sets: [&[usize]; 5] = [
        &[PAY * 8, PAY * 8, PAY * 8],
        &[0, PAY * 8, PAY * 8],
        &[PAY * 16, 0, 1, PAY * 4, 0],
        &[991, 992, 5000, 0, PAY * 16, 7],
        &[0, 0, PAY * 2, PAY * 16 + 3],
    ];
    let patterns: [(&[u64], &[u64], &[u64]); 6] = [
        (&[30], &[], &[]),
        (&[6], &[], &[]),
        (
            &[
                6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
            ],
            &[],
            &[],
        ),
        (&[3, 30, 31], &[10, 50], &[12, 40]),
        (&[13, 26, 39, 52], &[17, 34, 51], &[29, 58]),
        (&[2, 4, 9, 10, 11], &[20, 23], &[5, 6, 21]),
    ];
    for gro in [false, true] {
        for (s, sizes) in size_sets.iter().enumerate() {
            for (p, (missed, swapped, twice)) in patterns.iter().enumerate() {
                let n = 64;
                let mut rx = start(gro, sizes.len());
                for &b in sizes.iter() {
                    rx.give(vec![0u8; b]).unwrap();
                }
                let order = wire(n, missed, swapped, twice);
                send(rx.local_addr(), &order, 16);
                let want = expected(1, n, missed);
                let got = collect(&mut rx, want.len(), sizes, s);
                let (stats, _, _) = rx.shutdown();
                check(
                    &got,
                    &want,
                    &format!("gro {gro}, sizes {sizes:?}, pattern {p}"),
                );
                assert_eq!(
                    stats.missed,
                    missed.len() as u64,
                    "gro {gro}, sizes {sizes:?}, pattern {p}: missed"
                );
            }
        }
    }
}
