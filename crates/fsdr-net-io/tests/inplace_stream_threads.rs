//! Several in-place receivers of a port on one receive thread
//! (`InPlaceReceiver::start_streams_on` with fewer threads than streams): a receiver whose
//! consumer lends no buffer holds up only its own stream, one that is shut down leaves the
//! others running, and a deadline (the reorder timeout) is kept with no datagram to wake the
//! thread.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use fsdr_net_io::depacketizer::DepacketizerConfig;
use fsdr_net_io::format::{DataHeader, Format};
use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
use fsdr_net_io::sample::{Decoder, WireFormat};
use fsdr_net_io::{Backend, EngineConfig, Error};

type Rx = InPlaceReceiver<u8, Vec<u8>>;

const PAYLOAD: usize = 100;
const BUFFER: usize = 4096;

fn config() -> InPlaceConfig<u8> {
    let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    engine.backend = Backend::Recvmmsg;
    engine.format = Format::Vrt;
    InPlaceConfig {
        engine,
        decoder: Decoder::new(WireFormat::Plain).unwrap(),
        depacketizer: DepacketizerConfig::default(),
        buffers: 4,
    }
}

/// The payload of stream `id`'s datagram `seq`: every byte says which it is.
fn payload(id: u32, seq: u64) -> Vec<u8> {
    (0..PAYLOAD)
        .map(|i| (id as u64 * 31 + seq * 7 + i as u64) as u8)
        .collect()
}

fn send(tx: &UdpSocket, to: SocketAddr, id: u32, seqs: std::ops::Range<u64>) {
    for seq in seqs {
        let h = DataHeader {
            seq,
            stream_id: Some(id),
            ..Default::default()
        };
        let mut dg = vec![0u8; h.header_len(Format::Vrt)];
        dg.extend_from_slice(&payload(id, seq));
        Format::Vrt.emit_header(&mut dg, &h).unwrap();
        tx.send_to(&dg, to).unwrap();
        // Loopback does not drop, but the receive buffer is finite: pace a little.
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// Takes what `rx` hands over until it has `items` items (or 10 s pass), lending each
/// buffer back.
fn collect(rx: &mut Rx, items: usize, out: &mut Vec<u8>) {
    let end = Instant::now() + Duration::from_secs(10);
    while out.len() < items && Instant::now() < end {
        rx.receive(Duration::from_millis(20));
        while let Some(f) = rx.take() {
            out.extend_from_slice(&f.buffer[..f.items]);
            rx.give(f.buffer).unwrap();
        }
    }
}

fn expected(id: u32, seqs: std::ops::Range<u64>) -> Vec<u8> {
    seqs.flat_map(|seq| payload(id, seq)).collect()
}

#[test]
fn a_receiver_without_buffers_holds_up_only_its_own_stream_on_a_shared_thread() {
    const N: u64 = 20;
    let mut rxs = Rx::start_streams_on(config(), &[7, 9], 1).unwrap();
    let to = rxs[0].local_addr();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..2 {
        rxs[0].give(vec![0u8; BUFFER]).unwrap();
    }
    // Stream 9's receiver has no buffer: it stops reading, its socket's buffer absorbs.
    send(&tx, to, 9, 0..N);
    send(&tx, to, 7, 0..N);
    let mut got7 = Vec::new();
    collect(&mut rxs[0], N as usize * PAYLOAD, &mut got7);
    assert_eq!(got7, expected(7, 0..N), "stream 7 while stream 9 waits");
    let end = Instant::now() + Duration::from_secs(10);
    while rxs[1].stats().paused == 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(rxs[1].stats().paused > 0, "{}", rxs[1].stats());
    assert!(rxs[1].take().is_none());
    // Given buffers, it takes what waited, in order.
    for _ in 0..2 {
        rxs[1].give(vec![0u8; BUFFER]).unwrap();
    }
    let mut got9 = Vec::new();
    collect(&mut rxs[1], N as usize * PAYLOAD, &mut got9);
    assert_eq!(got9, expected(9, 0..N), "stream 9 after the wait");
    // Stream 7's receiver ends; stream 9's goes on on the same thread.
    let mut rest = rxs.into_iter();
    let (first, mut second) = (rest.next().unwrap(), rest.next().unwrap());
    let (s7, _, left7) = first.shutdown();
    assert_eq!((s7.delivered, s7.missed), (N, 0), "{s7}");
    assert!(
        left7.iter().all(|f| f.items == 0),
        "everything was handed over"
    );
    send(&tx, to, 9, N..N + 5);
    collect(&mut second, (N + 5) as usize * PAYLOAD, &mut got9);
    assert_eq!(
        got9,
        expected(9, 0..N + 5),
        "stream 9 after stream 7's receiver ended"
    );
    let (s9, _, _) = second.shutdown();
    assert_eq!((s9.delivered, s9.missed, s9.skipped), (N + 5, 0, 0), "{s9}");
}

#[test]
fn a_group_needs_a_receive_thread() {
    match Rx::start_streams_on(config(), &[1, 2], 0) {
        Err(Error::Config(msg)) => assert!(msg.contains("receive thread"), "{msg}"),
        other => panic!("not refused: {other:?}"),
    }
}

/// A gap at the end of what arrived is decided by the reorder timeout on the shared thread,
/// with no later datagram to wake it: what came behind the gap is handed over and the gap
/// counted while the stream is silent, before any shutdown.
#[test]
fn the_reorder_timeout_decides_a_gap_on_a_shared_thread_without_more_data() {
    let mut cfg = config();
    cfg.engine.reorder_window = 64;
    cfg.engine.reorder_timeout = Duration::from_millis(20);
    let mut rxs = Rx::start_streams_on(cfg, &[7, 9], 1).unwrap();
    for rx in &mut rxs {
        for _ in 0..2 {
            rx.give(vec![0u8; BUFFER]).unwrap();
        }
    }
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = rxs[0].local_addr();
    send(&tx, to, 9, 0..2);
    send(&tx, to, 9, 3..4);
    let mut got = Vec::new();
    collect(&mut rxs[1], 3 * PAYLOAD, &mut got);
    let mut want = expected(9, 0..2);
    want.extend(expected(9, 3..4));
    assert_eq!(got, want, "{}", rxs[1].stats());
    assert_eq!(rxs[1].stats().missed, 1, "{}", rxs[1].stats());
    assert_eq!(rxs[0].stats().delivered, 0);
}

/// A receiver of a group shut down while the others run leaves their steering as it was: each
/// remaining stream still reaches its own receiver, from any sender port (the kernel's
/// fallback for a socket index it does not have would pick one by the flow's hash).
#[test]
fn shutting_one_receiver_down_leaves_the_others_streams_where_they_were() {
    const N: u64 = 10;
    for threads in [3, 1] {
        let mut rxs = Rx::start_streams_on(config(), &[5, 6, 7], threads).unwrap();
        let to = rxs[0].local_addr();
        for rx in &mut rxs[1..] {
            for _ in 0..2 {
                rx.give(vec![0u8; BUFFER]).unwrap();
            }
        }
        let mut rest = rxs.into_iter();
        let (first, _, _) = rest.next().unwrap().shutdown();
        assert_eq!(first.delivered, 0);
        let mut rest: Vec<Rx> = rest.collect();
        // Several senders: several flow hashes.
        let senders: Vec<UdpSocket> = (0..8)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        for (k, tx) in senders.iter().enumerate() {
            let seqs = k as u64 * N..(k as u64 + 1) * N;
            send(tx, to, 6, seqs.clone());
            send(tx, to, 7, seqs);
        }
        let total = senders.len() as u64 * N;
        for (rx, id) in rest.iter_mut().zip([6, 7]) {
            let mut got = Vec::new();
            collect(rx, total as usize * PAYLOAD, &mut got);
            assert_eq!(
                got,
                expected(id, 0..total),
                "stream {id}, {threads} threads: {}",
                rx.stats()
            );
        }
        for rx in rest {
            let (s, _, _) = rx.shutdown();
            assert_eq!(
                (s.delivered, s.skipped, s.missed),
                (total, 0, 0),
                "{threads} threads: {s}"
            );
        }
    }
}
