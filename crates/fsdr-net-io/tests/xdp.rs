//! The `xdp` backend over a real link: two network namespaces joined by a veth pair (nothing
//! leaves on a real interface), the emulator sending from one, an engine with `Backend::Xdp`
//! receiving in the other — in native and in generic mode, with jumbo (MTU 9000, multi-buffer)
//! and standard frames. Every format with sequence numbers under drops, reorders and
//! duplicates: the books as exact as on every backend. Other traffic on the same interface
//! still reaches the kernel, and no program is left on the interface afterwards, also when
//! the engine's thread is gone by a panic. Needs root (`FSDR_NET_REQUIRE_NETNS` makes a
//! skip a failure, as `cargo xtask test` sets it).

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use fsdr_net_io::emulator::{Emulator, EmulatorConfig, EmulatorReport, Faults, Signal};
use fsdr_net_io::netns::{Side, VethPair, unavailable};
use fsdr_net_io::{Backend, Engine, EngineConfig, Error, Format, Stats, XdpMode};

fn pair(tag: &str, mtu: u32) -> Option<VethPair> {
    match VethPair::create(tag, mtu) {
        Ok(p) => Some(p),
        Err(e) => {
            unavailable("netns", &e);
            None
        }
    }
}

/// Whether an XDP program is attached to `side`'s interface.
fn attached(side: &Side) -> bool {
    let out = std::process::Command::new("ip")
        .args(["-n", &side.netns, "-d", "link", "show", "dev", &side.ifname])
        .output()
        .expect("ip runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.contains("xdp") && text.contains("prog/xdp")
}

fn config(side: &Side, mode: XdpMode, format: Format) -> EngineConfig {
    let mut cfg = EngineConfig::new(SocketAddr::from((side.addr, 0)));
    cfg.backend = Backend::Xdp;
    cfg.format = format;
    cfg.xdp.interface = Some(side.ifname.clone());
    cfg.xdp.mode = mode;
    cfg.reorder_timeout = Duration::from_millis(100);
    cfg
}

/// Streams `packets` packets of `format` (`spp` samples each) with `faults` from `a` into an
/// XDP engine in `b`; returns what the emulator did, the counters and the samples delivered.
fn stream(
    pair: &VethPair,
    mode: XdpMode,
    format: Format,
    spp: u64,
    packets: u64,
    faults: Faults,
) -> (EmulatorReport, Stats, u64) {
    let mut engine = pair
        .b
        .run(|| Engine::start(config(&pair.b, mode, format)))
        .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    assert!(attached(&pair.b), "the program is on the interface");
    let mut emu = EmulatorConfig::new(engine.local_addr(), format);
    emu.rate = 20e6;
    emu.tick_rate = 20e6;
    emu.spp = Some(spp as usize);
    emu.samples = Some(packets * spp);
    emu.signal = Signal::Ramp;
    emu.faults = faults;
    let sender = std::thread::scope(|s| {
        let sender = s.spawn(|| pair.a.run(|| Emulator::new(emu).unwrap().run().unwrap()));
        let mut samples = 0u64;
        let mut idle = 0;
        while idle < 3 {
            match engine.recv_timeout(Duration::from_millis(100)) {
                Some(d) => {
                    samples += d.payload().len() as u64 / 4;
                    idle = 0;
                }
                None if sender.is_finished() => idle += 1,
                None => {}
            }
        }
        (sender.join().unwrap(), samples)
    });
    let stats = engine.shutdown();
    assert!(!attached(&pair.b), "the program is gone with the engine");
    (sender.0, stats, sender.1)
}

/// Each mode with the MTU it is tested at: native with jumbo frames (multi-buffer, a
/// frags-aware program) and with standard ones; generic with jumbo frames.
const SETUPS: [(XdpMode, u32, u64); 3] = [
    (XdpMode::Native, 9000, 1900),
    (XdpMode::Native, 1500, 300),
    (XdpMode::Generic, 9000, 1900),
];

#[test]
fn xdp_books_are_exact_under_faults() {
    for (i, (mode, mtu, spp)) in SETUPS.into_iter().enumerate() {
        let Some(pair) = pair(&format!("x{i}"), mtu) else {
            return;
        };
        if mode == XdpMode::Generic {
            // Generic XDP runs before segmentation: a local sender's UDP GSO batch would reach
            // the program as one frame larger than the MTU (counted `truncated`), which a
            // radio never sends. The sender's end segments in software instead.
            pair.a
                .ip(&["link", "set", "dev", &pair.a.ifname, "gso_max_segs", "1"])
                .unwrap();
        }
        for format in [Format::Seq64, Format::Chdr, Format::Vrt] {
            let faults = Faults {
                drop_every: Some(17),
                reorder_every: Some(23),
                duplicate_every: Some(31),
                ..Faults::default()
            };
            let (sent, s, samples) = stream(&pair, mode, format, spp, 400, faults);
            let ctx = format!("{mode:?} MTU {mtu}, {format}: {s}\n{sent:?}");
            assert_eq!(s.kernel_drops + s.overflow + s.malformed, 0, "{ctx}");
            assert_eq!(
                s.xdp_via_kernel, 0,
                "every datagram came through the ring: {ctx}"
            );
            assert_eq!(s.missed, sent.dropped, "{ctx}");
            assert_eq!(s.duplicates, sent.duplicated, "{ctx}");
            assert_eq!(s.reordered, sent.reordered, "{ctx}");
            assert_eq!((s.late, s.resyncs, s.truncated), (0, 0, 0), "{ctx}");
            assert_eq!(s.delivered, sent.packets_sent, "{ctx}");
            assert_eq!(samples, sent.samples_sent, "{ctx}");
        }
    }
}

/// Other traffic on the interface — another UDP port, and the stream's own destination as IP
/// fragments — still reaches the kernel; the fragments are read from the engine's socket.
#[test]
fn other_traffic_reaches_the_kernel_and_fragments_are_read_from_the_socket() {
    let Some(pair) = pair("xo", 1500) else {
        return;
    };
    let mut engine = pair
        .b
        .run(|| Engine::start(config(&pair.b, XdpMode::Native, Format::Raw)))
        .unwrap();
    let to = engine.local_addr();
    let other = pair
        .b
        .run(|| UdpSocket::bind((pair.b.addr, 0)))
        .expect("another socket");
    other
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let other_addr = other.local_addr().unwrap();
    pair.a.run(|| {
        let s = UdpSocket::bind((pair.a.addr, 0)).unwrap();
        s.send_to(b"for the kernel", other_addr).unwrap();
        s.send_to(&[7u8; 1000], to).unwrap();
        // Larger than the MTU: IP fragments, which the program passes to the kernel.
        s.send_to(&[9u8; 4000], to).unwrap();
    });
    let mut buf = [0u8; 64];
    let n = other
        .recv(&mut buf)
        .expect("the other port's datagram arrives");
    assert_eq!(&buf[..n], b"for the kernel");
    let mut lens = Vec::new();
    while lens.len() < 2 {
        let Some(d) = engine.recv_timeout(Duration::from_secs(5)) else {
            break;
        };
        lens.push(d.bytes().len());
    }
    lens.sort();
    let s = engine.shutdown();
    assert_eq!(lens, [1000, 4000], "{s}");
    assert_eq!(
        s.xdp_via_kernel, 1,
        "the fragmented one came through the socket: {s}"
    );
    assert!(!attached(&pair.b));
}

fn refused(r: Result<Engine, Error>) -> Error {
    match r {
        Ok(_) => panic!("started where it should have refused"),
        Err(e) => e,
    }
}

#[test]
fn xdp_refuses_clearly_before_attaching_anything() {
    let Some(pair) = pair("xe", 1500) else {
        return;
    };
    // No interface given.
    let mut cfg = config(&pair.b, XdpMode::Native, Format::Raw);
    cfg.xdp.interface = None;
    let e = refused(pair.b.run(|| Engine::start(cfg)));
    assert!(e.to_string().contains("--interface"), "{e}");
    // An interface that does not exist.
    let mut cfg = config(&pair.b, XdpMode::Native, Format::Raw);
    cfg.xdp.interface = Some("nosuch0".into());
    let e = refused(pair.b.run(|| Engine::start(cfg)));
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("nosuch0"), "{e}");
    // The queue taken by another engine's socket: the second says so, the first keeps its
    // program.
    let first = pair
        .b
        .run(|| Engine::start(config(&pair.b, XdpMode::Native, Format::Raw)))
        .unwrap();
    let e = refused(
        pair.b
            .run(|| Engine::start(config(&pair.b, XdpMode::Native, Format::Raw))),
    );
    assert!(e.to_string().contains("another AF_XDP socket"), "{e}");
    assert!(attached(&pair.b));
    drop(first);
    assert!(!attached(&pair.b), "nothing left attached");
    // The interface taken by someone else's program: refused, and theirs stays.
    use fsdr_net_io::sys::ebpf::{UdpMatch, XdpAttach, XdpLink, XdpProgram, XskMap};
    let theirs = pair.b.run(|| {
        let ifindex = nix::net::if_::if_nametoindex(pair.b.ifname.as_str()).unwrap();
        let map = XskMap::create(1).unwrap();
        let m = UdpMatch {
            port: 9,
            v4: true,
            ..UdpMatch::default()
        };
        let prog = XdpProgram::load(&m, &map, false).unwrap();
        XdpLink::attach(&prog, ifindex, XdpAttach::Native).unwrap()
    });
    let e = refused(
        pair.b
            .run(|| Engine::start(config(&pair.b, XdpMode::Native, Format::Raw))),
    );
    assert!(e.to_string().contains("another XDP program"), "{e}");
    assert!(attached(&pair.b), "theirs is still there");
    drop(theirs);
    assert!(!attached(&pair.b));
}

/// A panic on the thread that owns the engine unwinds through its drop: the program goes.
#[test]
fn a_panic_leaves_no_program_attached() {
    let Some(pair) = pair("xp", 1500) else {
        return;
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _engine = pair
            .b
            .run(|| Engine::start(config(&pair.b, XdpMode::Generic, Format::Raw)))
            .unwrap();
        assert!(attached(&pair.b));
        panic!("the test's own panic");
    }));
    assert!(r.is_err());
    assert!(
        !attached(&pair.b),
        "the link went with the unwinding engine"
    );
}

/// A consumer that stops taking: the receive thread pauses (the default policy), the RX ring
/// fills and the kernel drops at the ring — counted in `kernel_drops` (and its own field), and
/// the sequence numbers count the same datagrams missed: every datagram sent is delivered or
/// counted once.
#[test]
fn a_full_rx_ring_is_counted_as_kernel_drops_and_missed() {
    use fsdr_net_io::send::{SenderConfig, StreamSender};
    let Some(pair) = pair("xf", 9000) else {
        return;
    };
    let mut cfg = config(&pair.b, XdpMode::Native, Format::Seq64);
    cfg.slots = 256;
    cfg.latency_budget = None;
    let engine = pair.b.run(|| Engine::start(cfg)).unwrap();
    let to = engine.local_addr();
    // Far more than the 256 slots and the 4096-entry RX ring hold, while nobody takes.
    let sent = pair.a.run(|| {
        StreamSender::new(SenderConfig::new(to), Format::Seq64)
            .datagram_size(1000)
            .count(20_000)
            .run()
            .unwrap()
            .datagrams
    });
    let mut engine = engine;
    let mut delivered = 0u64;
    while engine.recv_timeout(Duration::from_millis(300)).is_some() {
        delivered += 1;
    }
    let s = engine.shutdown();
    assert_eq!(delivered, s.delivered, "{s}");
    assert!(s.kernel_drops > 0, "the ring overflowed: {s}");
    assert_eq!(
        s.kernel_drops,
        s.xdp_rx_ring_full + s.xdp_rx_dropped,
        "every drop was the AF_XDP socket's: {s}"
    );
    // The last datagrams may be among the dropped: no successor tells the tracker.
    assert_eq!(s.delivered + s.kernel_drops, sent, "{s}");
    assert!(s.missed <= s.kernel_drops, "{s}");
    assert!(s.paused > 0, "{s}");
}

/// The program the backend would load for IPv6 and dual-stack destinations, with and without
/// multi-buffer, passes the kernel's verifier (the veth tests run the IPv4 one).
#[test]
fn every_variant_of_the_program_passes_the_verifier() {
    use fsdr_net_io::sys::ebpf::{UdpMatch, XdpProgram, XskMap};
    if !fsdr_net_io::netns::is_root() {
        return unavailable("netns", "loading BPF programs needs CAP_BPF");
    }
    let map = XskMap::create(4).expect("an XSK map");
    let v6 = "fd00::2".parse().unwrap();
    let v4 = "10.1.2.3".parse().unwrap();
    for m in [
        UdpMatch {
            port: 49152,
            v6: true,
            v6_addr: Some(v6),
            ..UdpMatch::default()
        },
        UdpMatch {
            port: 1,
            v4: true,
            v6: true,
            ..UdpMatch::default()
        },
        UdpMatch {
            port: 65535,
            v4: true,
            v4_addr: Some(v4),
            v6: true,
            v6_addr: Some(v6),
        },
    ] {
        for frags in [false, true] {
            XdpProgram::load(&m, &map, frags).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        }
    }
}

/// Busy polling on the AF_XDP socket: set where the kernel has it, and the stream still
/// arrives whole.
#[test]
fn busy_polling_is_set_or_refused_clearly() {
    let Some(pair) = pair("xb", 1500) else {
        return;
    };
    let mut cfg = config(&pair.b, XdpMode::Native, Format::Seq64);
    cfg.xdp.busy_poll_us = Some(50);
    let mut engine = match pair.b.run(|| Engine::start(cfg)) {
        Ok(e) => e,
        Err(e) => {
            // A kernel without SO_PREFER_BUSY_POLL says so; nothing is left attached.
            assert!(e.to_string().contains("AF_XDP socket"), "{e}");
            assert!(!attached(&pair.b));
            return;
        }
    };
    let to = engine.local_addr();
    pair.a.run(|| {
        let s = UdpSocket::bind((pair.a.addr, 0)).unwrap();
        for seq in 0..100u64 {
            let mut dg = [0u8; 200];
            dg[..8].copy_from_slice(&seq.to_le_bytes());
            s.send_to(&dg, to).unwrap();
        }
    });
    let mut n = 0;
    while engine.recv_timeout(Duration::from_millis(500)).is_some() {
        n += 1;
    }
    let s = engine.shutdown();
    assert_eq!(n, 100, "{s}");
}

/// A multicast stream: the program steers the group's datagrams (the socket joined the group
/// on the veth, so the NIC would pass them up), unicast to another port stays with the kernel.
#[test]
fn a_multicast_group_is_steered_to_the_ring() {
    use fsdr_net_io::socket::{Multicast, MulticastInterface};
    let Some(pair) = pair("xm", 1500) else {
        return;
    };
    let group: std::net::Ipv4Addr = "239.255.78.1".parse().unwrap();
    let mut cfg = config(&pair.b, XdpMode::Native, Format::Seq64);
    cfg.socket.bind = SocketAddr::from((group, 0));
    cfg.socket.multicast = Some(Multicast {
        group: group.into(),
        interface: MulticastInterface::V4(pair.b.addr),
    });
    let mut engine = pair.b.run(|| Engine::start(cfg)).unwrap();
    let port = engine.local_addr().port();
    let a = pair.a.clone();
    pair.a.run(move || {
        let mut scfg = fsdr_net_io::send::SenderConfig::new(SocketAddr::from((group, port)));
        scfg.multicast_if = Some(a.addr.into());
        let mut sender = fsdr_net_io::send::Sender::new(&scfg).unwrap();
        for seq in 1..=200u64 {
            let mut dg = [0u8; 100];
            dg[..8].copy_from_slice(&seq.to_le_bytes());
            sender.send_datagrams(&[&dg]).unwrap();
        }
    });
    let mut n = 0;
    while engine.recv_timeout(Duration::from_millis(500)).is_some() {
        n += 1;
    }
    let s = engine.shutdown();
    assert_eq!((n, s.missed, s.xdp_via_kernel), (200, 0, 0), "{s}");
}
