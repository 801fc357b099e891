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
