//! A stream that pauses right after a gap, received in place: nothing comes to decide the
//! gap, so the reorder timeout gives it up. The zeros go into the room left for the missing
//! datagram, and the datagrams placed ahead of it stay where they landed — only the first
//! datagram (it teaches the stream's layout) and the one that showed the gap are copied.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use fsdr_net_io::depacketizer::DepacketizerConfig;
use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
use fsdr_net_io::sample::{Decoder, WireFormat};
use fsdr_net_io::{Backend, EngineConfig, Format};

/// Payload bytes per datagram; datagram `seq` carries `seq` in every byte.
const PAYLOAD: usize = 100;

fn send(tx: &UdpSocket, to: std::net::SocketAddr, seqs: impl IntoIterator<Item = u64>) {
    for seq in seqs {
        let mut dg = seq.to_le_bytes().to_vec();
        dg.extend_from_slice(&[seq as u8; PAYLOAD]);
        tx.send_to(&dg, to).unwrap();
    }
}

#[test]
fn a_gap_before_a_pause_is_given_up_on_in_place() {
    for inline in [false, true] {
        let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        engine.backend = Backend::Recvmmsg;
        engine.format = Format::Seq64;
        engine.reorder_timeout = Duration::from_millis(50);
        let cfg = InPlaceConfig {
            engine,
            decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
            depacketizer: DepacketizerConfig {
                zero_fill: true,
                ..Default::default()
            },
            buffers: 4,
        };
        let mut rx = if inline {
            InPlaceReceiver::<u8, Vec<u8>>::start_inline(cfg).unwrap()
        } else {
            InPlaceReceiver::<u8, Vec<u8>>::start(cfg).unwrap()
        };
        for _ in 0..4 {
            rx.give(vec![0u8; 64 * 1024]).unwrap();
        }
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr();
        let mut items = Vec::new();
        let pump = |rx: &mut InPlaceReceiver<u8, Vec<u8>>, items: &mut Vec<u8>, ms: u64| {
            let until = Instant::now() + Duration::from_millis(ms);
            while Instant::now() < until {
                rx.receive(Duration::from_millis(5));
                while let Some(f) = rx.take() {
                    items.extend_from_slice(&f.buffer[..f.items]);
                    rx.give(f.buffer).unwrap();
                }
            }
        };
        // 1..=9 in order, then 11 alone (it shows the gap: placed ahead of the hole), then
        // 12..=20, which land behind it in place; then nothing.
        send(&tx, to, 1..=9);
        pump(&mut rx, &mut items, 20);
        send(&tx, to, [11]);
        pump(&mut rx, &mut items, 20);
        send(&tx, to, 12..=20);
        let started = Instant::now();
        while items.len() < 20 * PAYLOAD && started.elapsed() < Duration::from_secs(5) {
            pump(&mut rx, &mut items, 10);
        }
        let (stats, dp, rest) = rx.shutdown();
        for f in rest {
            items.extend_from_slice(&f.buffer[..f.items]);
        }
        let ctx = format!("inline: {inline}: {stats}\n{dp:?}");
        assert_eq!((stats.delivered, stats.missed), (19, 1), "{ctx}");
        assert_eq!(items.len(), 20 * PAYLOAD, "{ctx}");
        for (k, chunk) in items.chunks(PAYLOAD).enumerate() {
            let seq = k as u8 + 1;
            let want = if seq == 10 { 0 } else { seq };
            assert!(chunk.iter().all(|&b| b == want), "datagram {seq}: {ctx}");
        }
        assert_eq!(dp.zeros_inserted, PAYLOAD as u64, "{ctx}");
        // The first datagram and the one that showed the gap; not 12..=20 as well.
        assert_eq!(dp.copied_bytes, 2 * PAYLOAD as u64, "{ctx}");
    }
}
