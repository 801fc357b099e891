//! FutureSDR flowgraphs ended mid-stream while a flood goes on, on each source kind:
//! `UdpSource<u8>` with no backend (zero copy into windows of FutureSDR's circular buffer,
//! which is mmap'd: the munmap keeper sees writes after the unmap), with `Backend::Uring`,
//! `UringMultishot`, `Mio`; `InPlaceUdpSource<u8>` (circuit buffers, heap: the quarantine
//! allocator sees them); and `InPlaceUdpSource` / `UdpSource` on `Backend::Xdp` over a veth
//! pair. Each round ends the graph either by `FlowgraphHandle::stop` or by a downstream
//! `Head` finishing, then the flowgraph (and the block) is dropped, the flood goes on.
mod common;

use fsdr_net::prelude::*;
use fsdr_net_io::netns::TestLink;
use futuresdr::blocks::{Head, NullSink};
use futuresdr::runtime::buffer::circuit;
use futuresdr::runtime::macros::connect;
use futuresdr::runtime::{Flowgraph, Runtime};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const SIZE: usize = 1000;

#[derive(Clone, Copy, Debug)]
enum Kind {
    ZeroCopy,
    Engine(Backend),
    InPlace,
}

fn round(kind: Kind, k: usize, link: Option<&TestLink>) {
    round_with(kind, k, link, false)
}

static CURRENT: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

fn round_with(kind: Kind, k: usize, link: Option<&TestLink>, gro_faults: bool) {
    *CURRENT.lock().unwrap() = format!("{kind:?} round {k} (latency budget {} ms)", k % 4);
    let bind = link
        .map(|l| l.bind())
        .unwrap_or("127.0.0.1:0".parse().unwrap());
    let fg;
    let by_head = k % 2 == 1;
    let build = || -> Result<(Flowgraph, std::net::SocketAddr), futuresdr::runtime::Error> {
        let mut fg = Flowgraph::new();
        let b = UdpSource::<u8>::builder(bind)
            .format(Format::Seq64)
            .wire_format(WireFormat::Plain)
            .recv_buffer(1 << 20);
        let b = if gro_faults {
            b.udp_gro(true)
                .latency_budget(Duration::from_millis(k as u64 % 4))
        } else {
            b
        };
        let b = match (kind, link) {
            (Kind::Engine(be), Some(l)) => {
                let mut cfg = l.config();
                let iface = cfg.xdp.interface.take();
                b.backend(be).configure(move |c| c.xdp.interface = iface)
            }
            (Kind::Engine(be), None) => b.backend(be).slots(64).configure(|c| c.reorder_window = 8),
            (Kind::InPlace, Some(l)) => {
                let mut cfg = l.config();
                let iface = cfg.xdp.interface.take();
                b.backend(Backend::Xdp)
                    .configure(move |c| c.xdp.interface = iface)
            }
            _ => b,
        };
        match kind {
            Kind::InPlace => {
                let src = b
                    .in_place_buffers(4)
                    .buffer_datagrams(8)
                    .build_in_place()
                    .expect("build");
                let to = src.local_addr();
                let snk = NullSink::<u8, circuit::Reader<u8>>::new();
                connect!(fg, src > snk; src < snk);
                Ok((fg, to))
            }
            _ => {
                let src = b.build().expect("build");
                let to = src.local_addr();
                if by_head {
                    let head = Head::<u8>::new(200_000);
                    let snk = NullSink::<u8>::new();
                    connect!(fg, src > head > snk);
                } else {
                    let snk = NullSink::<u8>::new();
                    connect!(fg, src > snk);
                }
                Ok((fg, to))
            }
        }
    };
    let to;
    (fg, to) = match link {
        Some(l) => l.receive(build),
        None => build(),
    }
    .expect("flowgraph");
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let flood = match link {
        Some(l) => l.send(move || common::seq64_flood(to, SIZE, s2)),
        None if gro_faults => common::seq64_flood_faulty(to, SIZE, s2),
        None => common::seq64_flood(to, SIZE, s2),
    };
    let rt = Runtime::new();
    let running = rt.start(fg).expect("start");
    std::thread::sleep(Duration::from_millis(30 + (k as u64 % 3) * 10));
    if !by_head || matches!(kind, Kind::InPlace) {
        let h = running.handle();
        let _ = futuresdr::futures::executor::block_on(h.stop());
    }
    let res = running.wait();
    drop(res);
    drop(rt);
    std::thread::sleep(Duration::from_millis(15));
    let v: Vec<Vec<u8>> = (0..32).map(|_| vec![3u8; 20000]).collect();
    drop(v);
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
}

fn run(kind: Kind, rounds: usize, link: Option<&TestLink>) {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let before = common::scan();
    for k in 0..rounds {
        round(kind, k, link);
    }
    let r = common::report(&format!("{kind:?} xdp={}", link.is_some()));
    assert_eq!(
        (
            r.dirty_blocks,
            r.dirty_maps,
            r.redzone_at_free,
            r.redzone_live
        ),
        (
            before.dirty_blocks,
            before.dirty_maps,
            before.redzone_at_free,
            before.redzone_live
        ),
        "{r:?}"
    );
}

#[test]
fn zero_copy_source_stopped_mid_stream() {
    run(Kind::ZeroCopy, 16, None);
}

#[test]
fn engine_sources_stopped_mid_stream() {
    for b in [Backend::Uring, Backend::UringMultishot, Backend::Mio] {
        run(Kind::Engine(b), 8, None);
    }
}

#[test]
fn in_place_source_stopped_mid_stream() {
    run(Kind::InPlace, 12, None);
}

#[test]
fn xdp_sources_stopped_mid_stream() {
    let link = TestLink::for_backend(Backend::Xdp).expect("xdp link");
    run(Kind::InPlace, 6, Some(&link));
    run(Kind::Engine(Backend::Xdp), 6, Some(&link));
}

/// The zero-copy and in-place sources with UDP GRO on, latency budgets 0..3 ms and a flood
/// with gaps, reorders, duplicates and short datagrams, stopped mid-stream.
#[test]
fn gro_and_faults_stopped_mid_stream() {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let before = common::scan();
    for k in 0..12 {
        round_with(Kind::ZeroCopy, k, None, true);
        round_with(Kind::InPlace, k, None, true);
    }
    let r = common::report("gro faults");
    assert_eq!(
        (r.dirty_blocks, r.dirty_maps, r.redzone_live),
        (before.dirty_blocks, before.dirty_maps, before.redzone_live),
        "{r:?}"
    );
}

/// Found by `gro_and_faults_stopped_mid_stream`: `InPlaceUdpSource<u8>` (Seq64, plain, UDP
/// GRO on, 4 in-place buffers of 8 datagrams, latency budget 0..3 ms) under a flood with
/// gaps, reorders, duplicates and short datagrams, stopped by `FlowgraphHandle::stop`: the
/// receive thread can panic while finishing ("a current buffer", in flush_pending). Counts
/// receive-thread panics through a panic hook over 120 rounds (zero-copy and in-place interleaved); expects none. Also checks the
/// allocator (no memory consequence was seen).
#[test]
fn in_place_gro_faults_stop_panics_receive_thread() {
    use std::sync::atomic::AtomicUsize;
    futuresdr::runtime::config::set("ctrlport_enable", false);
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("fsdr-net-rx"))
        {
            PANICS.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "RECEIVE THREAD PANIC during {}: {info}",
                CURRENT.lock().map(|s| s.clone()).unwrap_or_default()
            );
        } else {
            prev(info);
        }
    }));
    let before = common::scan();
    for k in 0..60 {
        round_with(Kind::ZeroCopy, k, None, true);
        round_with(Kind::InPlace, k, None, true);
    }
    let r = common::report("in place gro faults stop");
    let n = PANICS.load(Ordering::Relaxed);
    eprintln!("receive-thread panics in 120 rounds: {n}");
    assert_eq!(
        (r.dirty_blocks, r.dirty_maps, r.redzone_live),
        (before.dirty_blocks, before.dirty_maps, before.redzone_live),
        "{r:?}"
    );
    assert_eq!(n, 0, "the in-place receive thread panicked at stop");
}
