//! Memory the kernel may write is owned until the kernel lets go: start and stop every
//! receiver under traffic, 40 rounds each, and look for a write into memory after it was
//! released (`kernel_writes/quarantine.rs`: freed heap poisoned and kept, unmapped memory
//! replaced by an inaccessible reservation). A receive the kernel completes into a freed
//! slot, overflow buffer or io_uring `msghdr` shows as a block that is no longer poison; a
//! send that reads freed memory shows as poison in a datagram that arrives.
//!
//! Alone in its own test binary: the allocator is this binary's. Not built under
//! AddressSanitizer (`cargo xtask asan` sets `--cfg asan`), whose runtime has its own
//! allocator and `munmap`.

#![cfg(not(asan))]

#[path = "kernel_writes/quarantine.rs"]
mod quarantine;
#[path = "kernel_writes/rounds.rs"]
mod rounds;

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fsdr_net_io::depacketizer::DepacketizerConfig;
use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
use fsdr_net_io::netns::TestLink;
use fsdr_net_io::sample::{Decoder, WireFormat};
#[cfg(feature = "uring")]
use fsdr_net_io::send::UringSender;
use fsdr_net_io::send::{Sender, SenderConfig};
use fsdr_net_io::{Backend, Engine, EngineConfig, Format, Overload, lent};
use rounds::{End, ROUNDS, SIZE, Traffic, check_round, serial};

#[global_allocator]
static ALLOC: quarantine::Quarantine = quarantine::Quarantine;

fn engine_config(link: &TestLink) -> EngineConfig {
    let mut cfg = link.config();
    cfg.format = Format::Seq64;
    cfg.slots = 64;
    cfg.batch = 8;
    cfg.slot_size = SIZE + 1;
    cfg.reorder_window = 8;
    cfg.uring_depth = 256;
    cfg
}

/// 40 rounds of: start, traffic, take a few datagrams (and hold some), end the engine one
/// of three ways, traffic for 10 ms more, then look.
fn engine_rounds(backend: Backend, overload: Overload) {
    let logs = quarantine::LogLines::install();
    let Some(link) = TestLink::for_backend(backend) else {
        return;
    };
    let what = format!("{backend} ({overload:?})");
    let first = quarantine::mark();
    let mut mark = first;
    for round in 0..ROUNDS {
        let round_mark = quarantine::mark();
        let mut cfg = engine_config(&link);
        cfg.overload = overload;
        let mut engine = link.receive(|| Engine::start(cfg)).expect("engine starts");
        let traffic = Traffic::start(&link, engine.local_addr());
        traffic.wait_sent(50);
        // Take some, then none for a while: the receive side runs out of free slots
        // (overflow buffers, or a pause) while operations are in flight.
        let until = Instant::now() + Duration::from_millis(2 + (round % 4) as u64 * 3);
        let mut got = 0u32;
        while Instant::now() < until || got == 0 {
            got += engine.recv_timeout(Duration::from_millis(1)).is_some() as u32;
            assert!(
                Instant::now() < until + Duration::from_secs(10),
                "{what}, round {round}: nothing received"
            );
        }
        std::thread::sleep(Duration::from_millis(5));
        match End::of(round) {
            End::Shutdown => drop(engine.shutdown()),
            End::Stop => {
                engine.stop();
                drop(engine);
            }
            End::Drop => drop(engine),
        }
        std::thread::sleep(Duration::from_millis(10));
        traffic.stop();
        check_round(&what, round, mark, &logs);
        mark = round_mark;
    }
    check_round(&what, ROUNDS, first, &logs);
}

#[test]
#[cfg(feature = "uring")]
fn uring_engine_stops_under_traffic_without_a_write_after_free() {
    let _one = serial();
    engine_rounds(Backend::Uring, Overload::Discard);
    engine_rounds(Backend::Uring, Overload::Pause);
}

#[test]
#[cfg(feature = "uring")]
fn uring_multishot_engine_stops_under_traffic_without_a_write_after_free() {
    let _one = serial();
    engine_rounds(Backend::UringMultishot, Overload::Discard);
    engine_rounds(Backend::UringMultishot, Overload::Pause);
}

#[test]
fn socket_engines_stop_under_traffic_without_a_write_after_free() {
    let _one = serial();
    for backend in [
        Backend::Mio,
        Backend::Reuseport,
        Backend::Recvmmsg,
        Backend::Blocking,
    ] {
        engine_rounds(backend, Overload::Discard);
    }
}

#[test]
fn xdp_engine_stops_under_traffic_without_a_write_after_free() {
    let _one = serial();
    engine_rounds(Backend::Xdp, Overload::Discard);
}

/// A panic injected on the receive side while memory is lent to the kernel, four rounds:
/// where the kernel may still write (io_uring), that memory is kept for good, never freed;
/// and nothing is written into released memory (AF_XDP's socket, closed by the unwind, ends
/// the kernel's writes into its UMEM before the UMEM goes).
fn panic_rounds(backend: Backend, keeps: bool) {
    let logs = quarantine::LogLines::install();
    let Some(link) = TestLink::for_backend(backend) else {
        return;
    };
    let what = format!("{backend}, a panic injected");
    for round in 0..4 {
        let mark = quarantine::mark();
        let kept = lent::kept();
        let mut engine = link
            .receive(|| Engine::start(engine_config(&link)))
            .expect("engine starts");
        let traffic = Traffic::start(&link, engine.local_addr());
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = 0;
        while got < 10 && Instant::now() < deadline {
            got += engine.recv_timeout(Duration::from_millis(1)).is_some() as u32;
        }
        lent::panic_receive_thread_on(engine.local_addr().port());
        while lent::receive_panic_armed() != 0 && Instant::now() < deadline {
            let _ = engine.recv_timeout(Duration::from_millis(1));
        }
        let fired = lent::receive_panic_armed() == 0;
        lent::panic_receive_thread_on(0);
        assert!(fired, "{what}: the panic hook never fired");
        engine.shutdown();
        std::thread::sleep(Duration::from_millis(10));
        traffic.stop();
        check_round(&what, round, mark, &logs);
        if keeps {
            assert!(
                lent::kept() > kept,
                "{what}, round {round}: the memory lent to the kernel was not kept"
            );
        }
    }
}

#[test]
#[cfg(feature = "uring")]
fn a_panic_in_a_uring_receive_keeps_the_lent_memory() {
    let _one = serial();
    panic_rounds(Backend::Uring, true);
}

#[test]
#[cfg(feature = "uring")]
fn a_panic_in_a_multishot_receive_keeps_the_lent_memory() {
    let _one = serial();
    panic_rounds(Backend::UringMultishot, true);
}

#[test]
fn a_panic_in_an_xdp_receive_writes_nothing_after_release() {
    let _one = serial();
    panic_rounds(Backend::Xdp, false);
}

/// The in-place receiver over a socket (`recvmmsg` into the consumer's buffers) and over
/// AF_XDP: buffers lent, some taken back and given again, then the receiver ended.
fn inplace_rounds(backend: Backend) {
    let logs = quarantine::LogLines::install();
    let Some(link) = TestLink::for_backend(backend) else {
        return;
    };
    let what = format!("in-place receiver, {backend}");
    let first = quarantine::mark();
    let mut mark = first;
    for round in 0..ROUNDS {
        let round_mark = quarantine::mark();
        let mut engine = engine_config(&link);
        if backend != Backend::Xdp {
            engine.backend = Backend::Recvmmsg;
        }
        let cfg = InPlaceConfig {
            engine,
            decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
            depacketizer: DepacketizerConfig::default(),
            buffers: 4,
        };
        let mut rx = link
            .receive(|| InPlaceReceiver::<u8, Vec<u8>>::start(cfg))
            .expect("receiver starts");
        for _ in 0..4 {
            rx.give(vec![0u8; 16 * SIZE]).unwrap();
        }
        let traffic = Traffic::start(&link, rx.local_addr());
        traffic.wait_sent(50);
        let until = Instant::now() + Duration::from_millis(5 + (round % 4) as u64 * 5);
        let mut kept = Vec::new();
        while Instant::now() < until {
            rx.notifier().wait_timeout(Duration::from_millis(1));
            while let Some(f) = rx.take() {
                // Give most back, keep one now and then: the receiver also runs dry.
                if round % 2 == 0 && kept.is_empty() {
                    kept.push(f.buffer);
                } else {
                    let _ = rx.give(f.buffer);
                }
            }
        }
        match End::of(round) {
            End::Shutdown | End::Stop => drop(rx.shutdown()),
            End::Drop => drop(rx),
        }
        drop(kept);
        std::thread::sleep(Duration::from_millis(10));
        traffic.stop();
        check_round(&what, round, mark, &logs);
        mark = round_mark;
    }
    check_round(&what, ROUNDS, first, &logs);
}

#[test]
fn inplace_receiver_stops_under_traffic_without_a_write_after_free() {
    let _one = serial();
    inplace_rounds(Backend::Recvmmsg);
}

#[test]
fn xdp_inplace_receiver_stops_under_traffic_without_a_write_after_free() {
    let _one = serial();
    inplace_rounds(Backend::Xdp);
}

/// A receiver that checks every datagram it gets is a ramp from its first byte: a send
/// that read freed (poisoned) memory would show as datagrams of poison.
struct RampReceiver {
    socket: UdpSocket,
    stop: Arc<AtomicBool>,
    bad: Arc<AtomicU64>,
    good: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl RampReceiver {
    fn start() -> RampReceiver {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket2::SockRef::from(&socket)
            .set_recv_buffer_size(8 << 20)
            .unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let (stop, bad, good) = Default::default();
        let mut r = RampReceiver {
            socket: socket.try_clone().unwrap(),
            stop,
            bad,
            good,
            thread: None,
        };
        let (stop, bad, good) = (r.stop.clone(), r.bad.clone(), r.good.clone());
        r.thread = Some(std::thread::spawn(move || {
            let mut b = vec![0u8; 65_536];
            while !stop.load(Ordering::Relaxed) {
                if let Ok(n) = socket.recv(&mut b) {
                    let first = b[0];
                    let ramp = b[..n]
                        .iter()
                        .enumerate()
                        .all(|(i, &x)| x == first.wrapping_add(i as u8));
                    if ramp { &good } else { &bad }.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
        r
    }

    fn addr(&self) -> SocketAddr {
        self.socket.local_addr().unwrap()
    }

    /// (good, bad) once 10 ms passed without a datagram.
    fn finish(mut self) -> (u64, u64) {
        let mut last = (u64::MAX, u64::MAX);
        loop {
            std::thread::sleep(Duration::from_millis(10));
            let now = (
                self.good.load(Ordering::Relaxed),
                self.bad.load(Ordering::Relaxed),
            );
            if now == last {
                break;
            }
            last = now;
        }
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        last
    }
}

/// A buffer of `datagrams` ramps of `segment` bytes, each ramp starting at its index.
fn ramps(datagrams: usize, segment: usize) -> Vec<u8> {
    (0..datagrams)
        .flat_map(|d| (0..segment).map(move |i| (d + i) as u8))
        .collect()
}

/// The io_uring sender dropped (and closed) with sends in flight, 40 rounds each with and
/// without zero-copy: no datagram carries bytes of freed memory, and no freed block was
/// written.
#[test]
#[cfg(feature = "uring")]
fn uring_sender_stops_with_sends_in_flight_without_touching_freed_memory() {
    let _one = serial();
    let logs = quarantine::LogLines::install();
    for zero_copy in [false, true] {
        for round in 0..ROUNDS {
            let mark = quarantine::mark();
            let rx = RampReceiver::start();
            let mut cfg = SenderConfig::new(rx.addr());
            cfg.uring_depth = 64;
            cfg.gso = round % 2 == 0;
            let mut tx = UringSender::new(&cfg, zero_copy).unwrap();
            for _ in 0..3 {
                let mut buf = tx.buffer();
                buf.extend_from_slice(&ramps(200, 1_400));
                let _ = tx.submit(buf, 1_400);
            }
            if round % 2 == 0 {
                drop(tx);
            } else {
                tx.close();
            }
            let (good, bad) = rx.finish();
            assert_eq!(bad, 0, "round {round}: {bad} datagrams not the ramp sent");
            assert!(good > 0, "round {round}: nothing arrived");
            check_round(
                &format!("uring sender (zero copy {zero_copy})"),
                round,
                mark,
                &logs,
            );
        }
    }
}

/// A panic in the io_uring sender with sends in flight: their memory is kept.
#[test]
#[cfg(feature = "uring")]
fn a_panic_in_the_uring_sender_keeps_the_lent_memory() {
    let _one = serial();
    let logs = quarantine::LogLines::install();
    for round in 0..4 {
        let mark = quarantine::mark();
        let kept = lent::kept();
        let rx = RampReceiver::start();
        lent::panic_send_thread_to(rx.addr().port());
        let mut tx = UringSender::new(&SenderConfig::new(rx.addr()), false).unwrap();
        let mut buf = tx.buffer();
        buf.extend_from_slice(&ramps(200, 1_400));
        tx.submit(buf, 1_400).unwrap();
        drop(tx);
        let fired = lent::send_panic_armed() == 0;
        lent::panic_send_thread_to(0);
        assert!(fired, "round {round}: the panic hook never fired");
        let (_, bad) = rx.finish();
        assert_eq!(bad, 0, "round {round}");
        assert!(
            lent::kept() > kept,
            "round {round}: the sends' memory was not kept"
        );
        check_round("uring sender, a panic injected", round, mark, &logs);
    }
}

/// The `sendmmsg` sender: buffers lent only for the call; likewise checked.
#[test]
fn sendmmsg_sender_lends_nothing_past_a_call() {
    let _one = serial();
    let logs = quarantine::LogLines::install();
    for round in 0..ROUNDS {
        let mark = quarantine::mark();
        let rx = RampReceiver::start();
        let mut cfg = SenderConfig::new(rx.addr());
        cfg.gso = round % 2 == 0;
        let mut tx = Sender::new(&cfg).unwrap();
        let buf = ramps(100, 1_400);
        tx.send_segments(&buf, 1_400).unwrap();
        drop(buf);
        drop(tx);
        let (good, bad) = rx.finish();
        assert_eq!(bad, 0, "round {round}");
        assert!(good > 0, "round {round}: nothing arrived");
        check_round("sendmmsg sender", round, mark, &logs);
    }
}

/// The instrument itself: a block written after it was freed is found, and an unmapped
/// range is kept inaccessible.
#[test]
fn the_instrument_sees_a_write_after_free() {
    let _one = serial();
    let mark = quarantine::mark();
    let b = vec![7u8; 4096].into_boxed_slice();
    let p = Box::into_raw(b) as *mut u8;
    // SAFETY: freed through the global allocator, which keeps the block (never reused).
    // Checked by: `the_instrument_sees_a_write_after_free`.
    unsafe { drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, 4096))) };
    assert!(quarantine::writes_since(mark).is_empty());
    // What a kernel completing a receive into the block would do.
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(b"late datagram", rx.local_addr().unwrap())
        .unwrap();
    // SAFETY: a raw recv into the kept block: the test's stand-in for a kernel write.
    // Checked by: `the_instrument_sees_a_write_after_free`.
    let n = unsafe { libc::recv(std::os::fd::AsRawFd::as_raw_fd(&rx), p.cast(), 4096, 0) };
    assert_eq!(n, 13);
    let w = quarantine::writes_since(mark);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!((w[0].first, w[0].bytes), (0, 13));
    // An unmapped range: a kernel copy into it fails instead of landing in new memory.
    let (g0, _) = quarantine::guarded();
    // SAFETY: a fresh anonymous mapping, then released through the interposed munmap.
    // Checked by: `the_instrument_sees_a_write_after_free`.
    let m = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    // SAFETY: our own mapping.
    // Checked by: `the_instrument_sees_a_write_after_free`.
    assert_eq!(unsafe { quarantine::munmap(m, 4096) }, 0);
    assert_eq!(quarantine::guarded().0, g0 + 1);
    tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
    // SAFETY: the kernel checks the address; the range is inaccessible.
    // Checked by: `the_instrument_sees_a_write_after_free`.
    let n = unsafe { libc::recv(std::os::fd::AsRawFd::as_raw_fd(&rx), m, 4096, 0) };
    assert_eq!(
        (n, std::io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::EFAULT))
    );
}
