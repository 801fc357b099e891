//! Settings and waits at the edges of their types: a setting beyond reason is a clear error
//! at start, a wait of `Duration::MAX` is a wait for ever — never a panic or an overflow.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use fsdr_net_io::depacketizer::DepacketizerConfig;
use fsdr_net_io::engine::MAX_SETTING_DURATION;
use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver, Progress};
use fsdr_net_io::sample::{Decoder, WireFormat};
use fsdr_net_io::send::{MAX_BATCH, Sender, SenderConfig};
use fsdr_net_io::{Backend, Coalesce, Engine, EngineConfig, Format, Notify};

fn config() -> EngineConfig {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.format = Format::Seq64;
    cfg
}

/// Sets one timing setting of a configuration.
type Set = fn(&mut EngineConfig, Duration);

#[test]
fn timing_settings_over_a_day_are_errors_that_name_them() {
    let long = MAX_SETTING_DURATION + Duration::from_secs(1);
    let cases: [(&str, Set); 4] = [
        ("latency budget", |c, d| c.latency_budget = Some(d)),
        ("coalesce time", |c, d| {
            c.coalesce = Coalesce::Adaptive {
                frames: 64,
                time: d,
            }
        }),
        ("reorder timeout", |c, d| c.reorder_timeout = d),
        ("poll interval", |c, d| c.poll_interval = Some(d)),
    ];
    for (name, set) in cases {
        for d in [long, Duration::MAX] {
            let mut cfg = config();
            set(&mut cfg, d);
            let e = Engine::start(cfg.clone())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(name) && e.contains("24 hours"), "{name}: {e}");
            let e = Engine::start_inline(cfg)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(name), "{name}: {e}");
        }
        // A day itself is allowed.
        let mut cfg = config();
        set(&mut cfg, MAX_SETTING_DURATION);
        assert!(Engine::start(cfg).is_ok(), "{name}");
    }
}

#[test]
fn a_send_batch_beyond_sendmmsg_is_an_error() {
    for batch in [0, MAX_BATCH + 1, usize::MAX] {
        let mut cfg = SenderConfig::new("127.0.0.1:9".parse().unwrap());
        cfg.batch = batch;
        let e = Sender::new(&cfg)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("batch") && e.contains(&batch.to_string()), "{e}");
    }
}

#[test]
fn waits_of_duration_max_wait_for_ever_and_return_with_data() {
    // A notifier woken later.
    let n = Arc::new(Notify::new());
    let waker = n.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        waker.notify();
    });
    assert!(n.wait_timeout(Duration::MAX));
    t.join().unwrap();
    // Engines with a receive thread and inline.
    for inline in [false, true] {
        let mut e = if inline {
            Engine::start_inline(config()).unwrap()
        } else {
            engine(Backend::Mio, Format::Seq64)
        };
        let sent = send(&e, Format::Seq64, 3, 200, None);
        for _ in 0..3 {
            assert!(e.recv_timeout(Duration::MAX).is_some(), "inline {inline}");
        }
        assert_eq!(sent.join().unwrap(), 3);
    }
    // In-place receivers, on a thread of their own and inline.
    for inline in [false, true] {
        let mut engine = config();
        engine.backend = Backend::Recvmmsg;
        let cfg = InPlaceConfig {
            engine,
            decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
            depacketizer: DepacketizerConfig::default(),
            buffers: 2,
        };
        let mut rx = if inline {
            InPlaceReceiver::<u8, Vec<u8>>::start_inline(cfg).unwrap()
        } else {
            InPlaceReceiver::<u8, Vec<u8>>::start(cfg).unwrap()
        };
        for _ in 0..2 {
            rx.give(vec![0u8; 600]).unwrap();
        }
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for seq in 1..=3u64 {
            let mut dg = seq.to_le_bytes().to_vec();
            dg.extend_from_slice(&[seq as u8; 200]);
            tx.send_to(&dg, rx.local_addr()).unwrap();
        }
        let mut items = 0;
        while items < 600 {
            match rx.receive(Duration::MAX) {
                Progress::Ready => {
                    while let Some(f) = rx.take() {
                        items += f.items;
                        rx.give(f.buffer).unwrap();
                    }
                }
                Progress::Idle => {}
                Progress::NeedBuffers => panic!("inline {inline}: every buffer held"),
            }
        }
        assert_eq!(items, 600, "inline {inline}");
        let (stats, _, _) = rx.shutdown();
        assert_eq!(stats.delivered, 3, "inline {inline}");
    }
}

/// The error of a `StreamSender` of two seq64 datagrams set up by `set`.
fn sender_error(
    set: impl FnOnce(fsdr_net_io::send::StreamSender) -> fsdr_net_io::send::StreamSender,
) -> String {
    let cfg = SenderConfig::new("127.0.0.1:9".parse().unwrap());
    set(fsdr_net_io::send::StreamSender::new(cfg, Format::Seq64).count(2))
        .run()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

/// The error of a 10 ms turnaround probe set up by `set`.
fn probe_error(
    set: impl FnOnce(fsdr_net_io::turnaround::Probe) -> fsdr_net_io::turnaround::Probe,
) -> String {
    let probe = fsdr_net_io::turnaround::Probe::new(
        "127.0.0.1:9".parse().unwrap(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .duration(Duration::from_millis(10))
    .linger(Duration::ZERO);
    set(probe)
        .run()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

#[test]
fn datagrams_beyond_udp_are_errors_for_the_senders() {
    use fsdr_net_io::send::MAX_UDP_PAYLOAD;
    for size in [0, 8, MAX_UDP_PAYLOAD + 1, usize::MAX] {
        let e = sender_error(|s| s.datagram_size(size));
        assert!(e.contains("datagram size"), "{size}: {e}");
    }
    for spp in [MAX_UDP_PAYLOAD / 4, usize::MAX] {
        let e = probe_error(|p| p.samples_per_packet(spp));
        assert!(e.contains("samples per packet"), "{spp}: {e}");
    }
    // Rates that are not a positive number: an error, not a sender asleep for ever.
    for rate in [0.0, -1.0, f64::NAN] {
        let e = sender_error(|s| s.rate(Some(rate)));
        assert!(e.contains("rate"), "{rate}: {e}");
        let e = probe_error(|p| p.rate(rate));
        assert!(e.contains("rate"), "{rate}: {e}");
    }
}
