//! AF_XDP, over a veth pair (receiver in namespace b, flood from a).
//!
//! * `engine_end_under_traffic`: `Backend::Xdp` engines (via `netns::TestLink`) started and
//!   ended by shutdown / stop+drain / drop / mem::forget while the flood goes on, plus the
//!   receive-thread panic hook; the quarantine allocator (and the munmap keeper) must show no
//!   freed memory written.
//! * `xsk_socket_safe_api`: `sys::xsk::XskSocket` driven directly through its safe API with
//!   the crate's own XSK map / program / link: frames read while their slice is held must not
//!   change; `release(u32::MAX)` with nothing ready, `fill_all` twice; then the socket is
//!   dropped under traffic (link still attached).
//! * `xsk_socket_outlived_by_dup_fd`: the socket's fd is duplicated through its public `AsFd`
//!   (`try_clone_to_owned`, safe), then the `XskSocket` is dropped while frames keep coming:
//!   the kernel socket (bound, in the map, with the fill ring's frames) outlives the UMEM's
//!   owner.
mod common;

use fsdr_net_io::netns::{TestLink, VethPair};
use fsdr_net_io::sys::ebpf::{UdpMatch, XdpAttach, XdpLink, XdpProgram, XskMap};
use fsdr_net_io::sys::xsk::{XskBind, XskOptions, XskSocket};
use fsdr_net_io::{Backend, Engine, Format};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const SIZE: usize = 1000;

fn payload_ok(d: &[u8]) -> bool {
    if d.len() < 9 {
        return false;
    }
    let seq = u64::from_le_bytes(d[..8].try_into().unwrap());
    d[8..]
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (seq.wrapping_mul(7) as usize + i) as u8)
}

#[test]
fn engine_end_under_traffic() {
    let link = TestLink::for_backend(Backend::Xdp).expect("xdp link");
    let mut bad = 0u64;
    let mut delivered = 0u64;
    for round in 0..16 {
        let mut cfg = link.config();
        cfg.format = Format::Seq64;
        cfg.slots = [64, 32, 1024, 64][round % 4];
        cfg.batch = 16;
        cfg.reorder_window = 0;
        cfg.slot_size = 2048;
        if round % 5 == 4 {
            // panic hook for this engine's port: bind a fixed port first
            let port = link.receive(|| {
                std::net::UdpSocket::bind(link.bind())
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            });
            cfg.socket.bind.set_port(port);
            fsdr_net_io::lent::panic_receive_thread_on(port);
        }
        let res = link.receive(|| Engine::start(cfg.clone()));
        let mut engine = match res {
            Ok(e) => e,
            Err(e) => {
                eprintln!("round {round}: start: {e}");
                continue;
            }
        };
        let to = engine.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let flood = link.send(move || common::seq64_flood(to, SIZE, s2));
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(40) {
            if let Some(d) = engine.recv_timeout(Duration::from_millis(5)) {
                delivered += 1;
                if !payload_ok(d.bytes()) {
                    bad += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis([0, 5, 20][round % 3]));
        // forget only in the last round: a forgotten engine keeps its queue bound
        let end = if round == 15 { 3 } else { round % 3 };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match end {
            0 => drop(engine.shutdown()),
            1 => {
                engine.stop();
                while engine.try_recv().is_some() {}
                drop(engine)
            }
            2 => drop(engine),
            _ => std::mem::forget(engine),
        }));
        if r.is_err() {
            eprintln!("round {round}: panic reached the consumer");
        }
        std::thread::sleep(Duration::from_millis(20));
        let v: Vec<Vec<u8>> = (0..32).map(|_| vec![3u8; 20000]).collect();
        drop(v);
        stop.store(true, Ordering::Relaxed);
        flood.join().unwrap();
        fsdr_net_io::lent::panic_receive_thread_on(0);
    }
    let rep = common::report("xdp engine");
    eprintln!("xdp engine: delivered {delivered} bad {bad}");
    assert!(delivered > 0);
    assert_eq!(bad, 0);
    assert!(rep.clean(), "{rep:?}");
}

fn ifindex(pair: &VethPair) -> u32 {
    let out = std::process::Command::new("ip")
        .args(["-n", &pair.b.netns, "-o", "link", "show", &pair.b.ifname])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    s.split(':').next().unwrap().trim().parse().unwrap()
}

struct Xsk {
    xsk: XskSocket,
    _link: XdpLink,
    _prog: XdpProgram,
    _map: XskMap,
    port: u16,
}

fn open(pair: &VethPair, port: u16, frames: u32) -> Xsk {
    let idx = ifindex(pair);
    pair.b.run(|| {
        let opts = XskOptions {
            ifindex: idx,
            queue: 0,
            bind: XskBind::Copy,
            frames,
            frame_size: 2048,
            ring_size: 64,
            ..XskOptions::default()
        };
        let mut xsk = XskSocket::open(&opts).expect("xsk open");
        xsk.fill_all();
        let map = XskMap::create(1).unwrap();
        map.set(0, &xsk).unwrap();
        let m = UdpMatch {
            port,
            v4: true,
            v4_addr: Some(pair.b.addr),
            ..UdpMatch::default()
        };
        let prog = XdpProgram::load(&m, &map, false).expect("prog");
        let link = XdpLink::attach(&prog, idx, XdpAttach::Generic).expect("attach");
        Xsk {
            xsk,
            _link: link,
            _prog: prog,
            _map: map,
            port,
        }
    })
}

fn flood_to(pair: &VethPair, port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let to = std::net::SocketAddr::from((pair.b.addr, port));
    pair.a.run(move || common::seq64_flood(to, SIZE, stop))
}

/// UDP payload of an Ethernet/IPv4/UDP frame (no options).
fn udp_payload(f: &[u8]) -> &[u8] {
    if f.len() < 42 {
        &f[f.len()..]
    } else {
        &f[42..]
    }
}

#[test]
fn xsk_socket_safe_api() {
    let pair = VethPair::create("xs", 1500).expect("veth");
    let before = common::scan();
    let mut x = open(&pair, 40001, 256);
    let stop = Arc::new(AtomicBool::new(false));
    let flood = flood_to(&pair, x.port, stop.clone());
    let mut frames = 0u64;
    let mut bad = 0u64;
    let mut changed = 0u64;
    let t0 = Instant::now();
    let mut k = 0u32;
    while t0.elapsed() < Duration::from_millis(300) {
        let _ = x.xsk.wait(5);
        let n = x.xsk.ready();
        if n == 0 {
            x.xsk.release(u32::MAX); // nothing ready: must be a no-op
            x.xsk.fill_all();
            x.xsk.fill_all();
            continue;
        }
        // hold every ready frame's slice while the kernel keeps receiving
        let held: Vec<(&[u8], Vec<u8>)> = (0..n)
            .filter_map(|i| x.xsk.frame(i))
            .map(|f| (f, f.to_vec()))
            .collect();
        let _ = x.xsk.wait(0); // lets the kernel refill / go on
        std::thread::sleep(Duration::from_micros(300));
        for (f, copy) in &held {
            frames += 1;
            if *f != &copy[..] {
                changed += 1;
            }
            if !payload_ok(udp_payload(f)) {
                bad += 1;
            }
        }
        let _ = x.xsk.desc(n + 5); // beyond ready: None
        drop(held);
        k += 1;
        // release more than ready every few rounds
        x.xsk.release(if k.is_multiple_of(5) { n + 100 } else { n });
        x.xsk.fill_all();
    }
    eprintln!(
        "xsk: frames {frames} bad {bad} changed under a held slice {changed}; stats {:?}",
        x.xsk.stats().ok().map(|s| format!("{s:?}"))
    );
    // drop the socket under traffic, the link still attached
    let Xsk {
        xsk,
        _link,
        _prog,
        _map,
        ..
    } = x;
    drop(xsk);
    std::thread::sleep(Duration::from_millis(50));
    drop(_link);
    let v: Vec<Vec<u8>> = (0..32).map(|_| vec![3u8; 20000]).collect();
    drop(v);
    std::thread::sleep(Duration::from_millis(20));
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
    let rep = common::report("xsk safe api");
    drop(pair);
    assert!(frames > 0);
    assert_eq!((bad, changed), (0, 0));
    assert_eq!(
        (rep.dirty_blocks, rep.dirty_maps),
        (before.dirty_blocks, before.dirty_maps),
        "{rep:?}"
    );
}

/// Found by this review: a duplicate of the AF_XDP socket's descriptor (then `AsFd`, safe)
/// kept the socket bound after `XskSocket` dropped and unmapped its UMEM, and the kernel
/// wrote 66 441 bytes of frames into it. `XskSocket` has no `AsFd` any more (the XSK map takes
/// the socket itself). What is left to try: drop the socket while the map, program and link
/// that steer frames to it live on, then flood: closing the socket unbinds it, so nothing is
/// written into its released UMEM.
#[test]
fn xsk_socket_dropped_while_its_map_and_program_live() {
    let pair = VethPair::create("xd", 1500).expect("veth");
    let before = common::scan();
    let x = open(&pair, 40002, 64);
    let Xsk {
        xsk,
        _link,
        _prog,
        _map,
        port,
    } = x;
    // Drop the owner of the UMEM before any traffic: the fill ring holds every frame.
    drop(xsk);
    let stop = Arc::new(AtomicBool::new(false));
    let flood = flood_to(&pair, port, stop.clone());
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let sent = flood.join().unwrap();
    let rep = common::report("xsk dropped before its map");
    eprintln!(
        "sent {sent}; new dirty heap blocks {}, new dirty kept maps {}",
        rep.dirty_blocks - before.dirty_blocks,
        rep.dirty_maps - before.dirty_maps
    );
    drop(_link);
    drop(pair);
    assert!(sent > 0);
    assert_eq!(
        (rep.dirty_blocks, rep.dirty_maps),
        (before.dirty_blocks, before.dirty_maps),
        "{rep:?}"
    );
}

/// `InPlaceReceiver<u8, Vec<u8>>` on `Backend::Xdp` (accepted by the in-place receiver):
/// Vecs lent, reallocated between lends, receivers ended by shutdown / drop under traffic
/// (forget last: it keeps the queue bound). Frames' payloads checked for runs of poison.
#[test]
fn in_place_receiver_on_xdp() {
    use fsdr_net_io::depacketizer::DepacketizerConfig;
    use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
    use fsdr_net_io::sample::{Decoder, WireFormat};
    let link = TestLink::for_backend(Backend::Xdp).expect("xdp link");
    let before = common::scan();
    let mut filled = 0u64;
    let mut poisoned = 0u64;
    for round in 0..7 {
        let mut engine = link.config();
        engine.format = Format::Seq64;
        engine.batch = 16;
        let cfg = InPlaceConfig {
            engine,
            decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
            depacketizer: DepacketizerConfig::default(),
            buffers: 4,
        };
        let mut rx = match link.receive(|| InPlaceReceiver::<u8, Vec<u8>>::start(cfg)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("round {round}: {e}");
                continue;
            }
        };
        for i in 0..4 {
            rx.give(vec![0u8; 992 * (4 + i)]).unwrap();
        }
        let to = rx.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let flood = link.send(move || common::seq64_flood(to, SIZE, s2));
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(40) {
            rx.notifier().wait_timeout(Duration::from_millis(1));
            while let Some(f) = rx.take() {
                filled += 1;
                if f.buffer[..f.items].windows(8).any(|w| w == [0xA5; 8]) {
                    poisoned += 1;
                }
                let mut b = f.buffer;
                if filled.is_multiple_of(3) {
                    b.shrink_to(0);
                    b = vec![0u8; 992 * 5];
                }
                let _ = rx.give(b);
            }
        }
        match round {
            6 => std::mem::forget(rx),
            r if r % 2 == 0 => drop(rx.shutdown()),
            _ => drop(rx),
        }
        std::thread::sleep(Duration::from_millis(15));
        let v: Vec<Vec<u8>> = (0..32).map(|_| vec![3u8; 20000]).collect();
        drop(v);
        stop.store(true, Ordering::Relaxed);
        flood.join().unwrap();
    }
    let rep = common::report("in place xdp");
    eprintln!("in place xdp: filled {filled} poisoned {poisoned}");
    assert!(filled > 0);
    assert_eq!(poisoned, 0);
    assert_eq!(
        (rep.dirty_blocks, rep.dirty_maps),
        (before.dirty_blocks, before.dirty_maps),
        "{rep:?}"
    );
}
