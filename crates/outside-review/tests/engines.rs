//! The receive engine on every socket backend (uring, uring-multishot, mio, recvmmsg,
//! blocking, reuseport; xdp is in xdp.rs), under a flood that goes on after the engine ends:
//!
//! * `end_under_traffic`: many rounds of start → take some datagrams (holding one across a
//!   sleep and checking its bytes did not change under the borrow) → stall so every slot is
//!   held → end by `shutdown`, `stop`+`try_recv`+drop, plain drop, or `mem::forget`, with odd
//!   configurations (uring_depth above slots, 1 slot, overflow buffers 0/None/Some, pause and
//!   discard). Then the flood goes on; the quarantine allocator must show no freed block
//!   written, and every payload seen must carry its own pattern.
//! * `receive_thread_panics`: `lent::panic_receive_thread_on(port)` under the flood on each
//!   backend, then the consumer goes on and ends; same checks.
mod common;

use fsdr_net_io::{Backend, Engine, EngineConfig, Format, Overload};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const SIZE: usize = 1000;

#[derive(Clone, Copy, Debug)]
enum End {
    Shutdown,
    StopThenDrain,
    Drop,
    Forget,
}

fn payload_ok(d: &[u8]) -> bool {
    if d.len() != SIZE {
        return false;
    }
    let seq = u64::from_le_bytes(d[..8].try_into().unwrap());
    d[8..]
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (seq.wrapping_mul(7) as usize + i) as u8)
}

struct Tally {
    bad: u64,
    changed_under_borrow: u64,
    delivered: u64,
}

fn one_round(mut cfg: EngineConfig, end: End, hold: Duration, t: &mut Tally) {
    cfg.format = Format::Seq64;
    let backend = cfg.backend;
    let mut engine = match Engine::start(cfg) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{backend:?}: start failed: {e}");
            return;
        }
    };
    let to = engine.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let flood = common::seq64_flood(to, SIZE, stop.clone());
    let t0 = Instant::now();
    let mut n = 0;
    while t0.elapsed() < Duration::from_millis(15) {
        if let Some(d) = engine.recv_timeout(Duration::from_millis(5)) {
            // the whole datagram, header included
            let bytes = d.bytes().to_vec();
            if !payload_ok(&bytes) {
                t.bad += 1;
            }
            if n % 97 == 0 {
                std::thread::sleep(Duration::from_micros(500));
                if d.bytes() != &bytes[..] {
                    t.changed_under_borrow += 1;
                }
            }
            n += 1;
        }
    }
    t.delivered += n;
    // stall: every slot fills (pause / discard / overflow buffers)
    std::thread::sleep(hold);
    match end {
        End::Shutdown => {
            engine.shutdown();
        }
        End::StopThenDrain => {
            engine.stop();
            while let Some(d) = engine.try_recv() {
                if !payload_ok(d.bytes()) {
                    t.bad += 1;
                }
            }
            drop(engine);
        }
        End::Drop => drop(engine),
        End::Forget => std::mem::forget(engine),
    }
    // the flood goes on into the port the engine had
    std::thread::sleep(Duration::from_millis(10));
    // churn so that freed memory would be in use now
    let v: Vec<Vec<u8>> = (0..32).map(|_| vec![3u8; 20000]).collect();
    drop(v);
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
}

fn configs(backend: Backend) -> Vec<EngineConfig> {
    let mut out = Vec::new();
    let base = |slots: usize| {
        let mut c = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        c.backend = backend;
        c.slots = slots;
        c.slot_size = 2048;
        c.batch = 16;
        c.socket.recv_buffer = 1 << 20;
        c.reorder_window = if slots > 16 { 8 } else { 0 };
        c
    };
    let mut c = base(64);
    out.push(c.clone());
    c.overload = Overload::Discard;
    out.push(c.clone());
    let mut c = base(16);
    c.uring_depth = 256; // more receives in flight than slots
    out.push(c.clone());
    c.uring_overflow_buffers = Some(0);
    out.push(c.clone());
    c.uring_overflow_buffers = Some(64);
    c.overload = Overload::Discard;
    out.push(c.clone());
    let mut c = base(1);
    c.uring_depth = 1;
    c.batch = 1;
    out.push(c.clone());
    let mut c = base(64);
    c.slot_size = 600; // every datagram truncated
    out.push(c);
    if backend == Backend::Reuseport {
        for c in &mut out {
            c.reuseport_threads = 2;
        }
    }
    out
}

fn run_backend(backend: Backend, rounds: usize) {
    let mut t = Tally {
        bad: 0,
        changed_under_borrow: 0,
        delivered: 0,
    };
    let ends = [End::Shutdown, End::StopThenDrain, End::Drop, End::Forget];
    let mut k = 0;
    for cfg in configs(backend) {
        for r in 0..rounds {
            let end = ends[k % ends.len()];
            k += 1;
            let hold = Duration::from_millis([0, 3, 12][r % 3]);
            one_round(cfg.clone(), end, hold, &mut t);
        }
    }
    let rep = common::report(&format!("{backend:?}"));
    eprintln!(
        "{backend:?}: delivered {} bad payloads {} changed under borrow {}",
        t.delivered, t.bad, t.changed_under_borrow
    );
    assert!(t.delivered > 0, "nothing delivered");
    assert!(rep.clean(), "{backend:?}: {rep:?}");
    // truncated datagrams are never delivered as if whole: bad counts only whole ones
    assert_eq!(t.changed_under_borrow, 0);
}

#[test]
fn end_under_traffic_uring() {
    run_backend(Backend::Uring, 12);
}

#[test]
fn end_under_traffic_uring_multishot() {
    run_backend(Backend::UringMultishot, 12);
}

#[test]
fn end_under_traffic_socket_backends() {
    for b in [
        Backend::Mio,
        Backend::Recvmmsg,
        Backend::Blocking,
        Backend::Reuseport,
    ] {
        run_backend(b, 4);
    }
}

#[test]
fn receive_thread_panics() {
    let mut t = Tally {
        bad: 0,
        changed_under_borrow: 0,
        delivered: 0,
    };
    for backend in [
        Backend::Uring,
        Backend::UringMultishot,
        Backend::Mio,
        Backend::Recvmmsg,
    ] {
        for (i, cfg) in configs(backend).into_iter().enumerate() {
            let mut cfg = cfg;
            cfg.format = Format::Seq64;
            // bind to a fixed free port so the hook can be armed before start
            let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let port = probe.local_addr().unwrap().port();
            drop(probe);
            cfg.socket.bind = format!("127.0.0.1:{port}").parse().unwrap();
            fsdr_net_io::lent::panic_receive_thread_on(port);
            let stop = Arc::new(AtomicBool::new(false));
            let flood = common::seq64_flood(cfg.socket.bind, SIZE, stop.clone());
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut engine = Engine::start(cfg)?;
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_millis(30) {
                    if let Some(d) = engine.recv_timeout(Duration::from_millis(5)) {
                        if !payload_ok(d.bytes()) {
                            t.bad += 1;
                        }
                        t.delivered += 1;
                    }
                }
                let s = if i % 2 == 0 {
                    Some(engine.shutdown())
                } else {
                    drop(engine);
                    None
                };
                Ok::<_, fsdr_net_io::Error>(s)
            }));
            std::thread::sleep(Duration::from_millis(10));
            stop.store(true, Ordering::Relaxed);
            flood.join().unwrap();
            let armed = fsdr_net_io::lent::receive_panic_armed();
            fsdr_net_io::lent::panic_receive_thread_on(0);
            match r {
                Ok(Ok(Some(s))) => eprintln!(
                    "{backend:?}#{i}: fired={} delivered {} kept {}",
                    armed == 0,
                    s.delivered,
                    fsdr_net_io::lent::kept()
                ),
                Ok(Ok(None)) => eprintln!(
                    "{backend:?}#{i}: fired={} dropped, kept {}",
                    armed == 0,
                    fsdr_net_io::lent::kept()
                ),
                Ok(Err(e)) => eprintln!("{backend:?}#{i}: error {e}"),
                Err(_) => eprintln!("{backend:?}#{i}: panic reached the consumer"),
            }
        }
    }
    let rep = common::report("panics");
    eprintln!("panics: delivered {} bad {}", t.delivered, t.bad);
    assert!(rep.clean(), "{rep:?}");
}
