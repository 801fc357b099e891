//! Each receive backend on loopback for 64-, 1472- and 8000-byte payloads: datagrams and bytes
//! per second handed to the consumer, next to a plain `recvmmsg` loop as the ceiling reference.
//! The sender runs unpaced on its own thread; what the receiver keeps is what is measured.
//! `cargo bench --bench receive`.

use std::net::UdpSocket;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fsdr_net::io::send::{SenderConfig, StreamSender};
use fsdr_net::io::{Backend, Engine, EngineConfig, Format};
use fsdr_net_io::sys::RecvBatch;

/// Starts an unpaced raw sender to `to`; stops when the flag is set.
fn sender(
    to: std::net::SocketAddr,
    size: usize,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let s = StreamSender::new(SenderConfig::new(to), Format::Raw)
        .datagram_size(size)
        .stop_flag(stop);
    std::thread::spawn(move || {
        let _ = s.run();
    })
}

fn receive(c: &mut Criterion) {
    for size in [64usize, 1472, 8000] {
        let mut group = c.benchmark_group(format!("receive/{size}B"));
        group.throughput(Throughput::Bytes(size as u64));
        // On loopback: the xdp backend needs a real link (`cargo xtask loss --netns`).
        for &backend in Backend::ALL.iter().filter(|b| b.capabilities().loopback) {
            let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
            cfg.backend = backend;
            cfg.slot_size = size.max(64);
            let mut engine = Engine::start(cfg).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let tx = sender(engine.local_addr(), size, stop.clone());
            // One iteration: one datagram delivered to the consumer.
            group.bench_function(backend.name(), |b| {
                b.iter_custom(|n| {
                    let start = Instant::now();
                    let mut got = 0;
                    while got < n && start.elapsed() < Duration::from_secs(10) {
                        if engine.recv_timeout(Duration::from_millis(100)).is_some() {
                            got += 1;
                        }
                    }
                    start.elapsed()
                })
            });
            stop.store(true, Ordering::Relaxed);
            let _ = tx.join();
            let s = engine.shutdown();
            eprintln!(
                "{backend} {size} B: delivered {} of {} received, kernel drops {}, overflow {}",
                s.delivered, s.received, s.kernel_drops, s.overflow
            );
        }
        // The ceiling: one thread, a plain recvmmsg loop, no hand-off.
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let tx = sender(rx.local_addr().unwrap(), size, stop.clone());
        let mut batch = RecvBatch::new(32);
        let mut bufs = vec![0u8; 32 * size.max(64)];
        group.bench_function("recvmmsg-reference", |b| {
            b.iter_custom(|n| {
                let start = Instant::now();
                let mut got = 0;
                while got < n && start.elapsed() < Duration::from_secs(10) {
                    for (i, chunk) in bufs.chunks_mut(size.max(64)).enumerate() {
                        // SAFETY: the buffers outlive the call and nothing else uses them.
                        // Checked by: `receive` (this bench, run once by `cargo test
                        // --all-targets`).
                        unsafe { batch.set_buffer(i, chunk.as_mut_ptr(), chunk.len()) };
                    }
                    match batch.recv_mmsg(&rx, 32) {
                        Ok(k) => got += k as u64,
                        Err(_) => std::thread::yield_now(),
                    }
                }
                start.elapsed()
            })
        });
        stop.store(true, Ordering::Relaxed);
        let _ = tx.join();
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    targets = receive
}
criterion_main!(benches);
