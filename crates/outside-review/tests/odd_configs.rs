//! Configurations the docs exclude, tried anyway under a flood, then ended by drop:
//! * `Engine::start_inline` with uring, uring-multishot, reuseport (docs: mio, recvmmsg,
//!   blocking only): refused, or if accepted, `stop()` then `try_recv`/`recv_timeout` on the
//!   stopped inline engine (does it still lend slots to the kernel?), then drop.
//! * `InPlaceReceiver` with a backend other than recvmmsg (docs: must be recvmmsg), with the
//!   consumer's Vecs lent; then dropped under traffic.
//!
//! Each checks the quarantine allocator afterwards.
mod common;

use fsdr_net_io::depacketizer::DepacketizerConfig;
use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
use fsdr_net_io::sample::{Decoder, WireFormat};
use fsdr_net_io::{Backend, Engine, EngineConfig, Format};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[test]
fn inline_engine_with_other_backends() {
    for b in [
        Backend::Uring,
        Backend::UringMultishot,
        Backend::Reuseport,
        Backend::Mio,
        Backend::Recvmmsg,
    ] {
        let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.backend = b;
        cfg.format = Format::Seq64;
        cfg.slots = 64;
        cfg.reorder_window = 8;
        cfg.slot_size = 2048;
        match Engine::start_inline(cfg) {
            Err(e) => eprintln!("{b:?} inline: refused: {e}"),
            Ok(mut e) => {
                let stop = Arc::new(AtomicBool::new(false));
                let f = common::seq64_flood(e.local_addr(), 1000, stop.clone());
                let t0 = Instant::now();
                let mut n = 0;
                while t0.elapsed() < Duration::from_millis(30) {
                    if e.recv_timeout(Duration::from_millis(2)).is_some() {
                        n += 1;
                    }
                }
                e.stop();
                let mut after = 0;
                for _ in 0..50 {
                    if e.try_recv().is_some() {
                        after += 1;
                    }
                    if e.recv_timeout(Duration::from_millis(1)).is_some() {
                        after += 1;
                    }
                }
                eprintln!("{b:?} inline: accepted; delivered {n}, after stop {after}");
                drop(e);
                std::thread::sleep(Duration::from_millis(10));
                stop.store(true, Ordering::Relaxed);
                f.join().unwrap();
            }
        }
    }
    let r = common::report("inline");
    assert!(r.clean(), "{r:?}");
}

#[test]
fn in_place_receiver_with_other_backends() {
    for b in [
        Backend::Uring,
        Backend::UringMultishot,
        Backend::Mio,
        Backend::Xdp,
        Backend::Blocking,
    ] {
        let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        engine.backend = b;
        engine.format = Format::Seq64;
        let cfg = InPlaceConfig {
            engine,
            decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
            depacketizer: DepacketizerConfig::default(),
            buffers: 4,
        };
        match InPlaceReceiver::<u8, Vec<u8>>::start(cfg) {
            Err(e) => eprintln!("{b:?} in place: refused: {e}"),
            Ok(mut rx) => {
                for _ in 0..4 {
                    rx.give(vec![0u8; 64 * 1024]).unwrap();
                }
                let stop = Arc::new(AtomicBool::new(false));
                let f = common::seq64_flood(rx.local_addr(), 1000, stop.clone());
                std::thread::sleep(Duration::from_millis(20));
                eprintln!(
                    "{b:?} in place: accepted; delivered {}",
                    rx.stats().delivered
                );
                drop(rx);
                std::thread::sleep(Duration::from_millis(10));
                stop.store(true, Ordering::Relaxed);
                f.join().unwrap();
            }
        }
    }
    let r = common::report("in place backends");
    assert!(r.clean(), "{r:?}");
}
