//! Review defect 10: `Engine::stop` returns while a sender that never pauses is still
//! sending, on every backend, with the consumer taking nothing and the read-and-discard
//! policy (the receive side never runs out of room, so only the stop rule can end it): once
//! stopped, a receive thread takes what is queued for a bounded number of calls and ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fsdr_net_io::netns::TestLink;
use fsdr_net_io::send::{SenderConfig, StreamSender};
use fsdr_net_io::{Backend, Engine, Format, Overload};

#[test]
fn stop_returns_while_a_sender_that_never_pauses_goes_on() {
    for &backend in Backend::ALL {
        let Some(link) = TestLink::for_backend(backend) else {
            continue;
        };
        let mut cfg = link.config();
        cfg.format = Format::Seq64;
        cfg.overload = Overload::Discard;
        cfg.slots = 256;
        cfg.latency_budget = None;
        let mut engine = match link.receive(|| Engine::start(cfg)) {
            Ok(e) => e,
            Err(e) => panic!("{backend}: {e}"),
        };
        let stop = Arc::new(AtomicBool::new(false));
        // Two senders of small datagrams (with GSO): more than one receive thread takes.
        let to = engine.local_addr();
        let senders: Vec<_> = link.send(|| {
            (0..2)
                .map(|_| {
                    StreamSender::new(SenderConfig::new(to), Format::Seq64)
                        .datagram_size(64)
                        .duration(Duration::from_secs(60))
                        .stop_flag(stop.clone())
                        .spawn()
                })
                .collect()
        });
        std::thread::sleep(Duration::from_millis(300));
        engine.stop();
        let still_sending = senders.iter().all(|s| !s.is_finished());
        stop.store(true, Ordering::Relaxed);
        for s in senders {
            s.join().unwrap().unwrap();
        }
        assert!(
            still_sending,
            "{backend}: stop returned only after the senders stopped"
        );
        let stats = engine.shutdown();
        assert!(stats.received > 0, "{backend}: {stats}");
    }
}

/// Datagrams sent to a receiver whose consumer holds every slot: the receive side pauses
/// (the default policy) and the kernel's queue holds the rest.
const HELD: u64 = 300;

/// Sends `HELD` seq64 datagrams of 100 payload bytes to `to`, one send each.
fn send_held(to: std::net::SocketAddr) {
    let tx = std::net::UdpSocket::bind(if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).unwrap();
    for seq in 0..HELD {
        let mut dg = seq.to_le_bytes().to_vec();
        dg.extend_from_slice(&[7u8; 100]);
        tx.send_to(&dg, to).unwrap();
    }
}

/// A stop while the consumer holds every slot and the kernel still holds datagrams: the
/// stop reads them into memory it throws away and counts them (`overflow`: the consumer held
/// every slot), so that the counters account for every datagram sent — none is freed unseen
/// when the socket closes. Every backend.
#[test]
fn what_the_kernel_holds_at_a_stop_with_every_slot_taken_is_counted() {
    for &backend in Backend::ALL {
        let Some(link) = TestLink::for_backend(backend) else {
            continue;
        };
        let mut cfg = link.config();
        cfg.format = Format::Seq64;
        cfg.slots = 128;
        cfg.batch = 8;
        let engine = match link.receive(|| Engine::start(cfg)) {
            Ok(e) => e,
            Err(e) => panic!("{backend}: {e}"),
        };
        let to = engine.local_addr();
        link.send(|| send_held(to));
        // Until the receive side has filled its slots and stopped reading (what it took
        // stays the same for a while).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut last = (0, std::time::Instant::now());
        loop {
            let now = engine.stats().received;
            if now != last.0 || now == 0 {
                last = (now, std::time::Instant::now());
            } else if last.1.elapsed() > Duration::from_millis(200) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{backend}: {}",
                engine.stats()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            engine.stats().received < HELD,
            "{backend}: {}",
            engine.stats()
        );
        let stats = engine.shutdown();
        let ctx = format!("{backend}: {stats}");
        assert_eq!(stats.accounted(), HELD, "{ctx}");
        assert_eq!(stats.received + stats.kernel_drops, HELD, "{ctx}");
        assert_eq!(stats.delivered, 0, "{ctx}");
    }
}
