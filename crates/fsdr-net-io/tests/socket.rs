//! The receive socket and the threads around it: IPv6 and dual stack, multicast over a veth
//! pair, receive-buffer sizing and its warnings, wildcard binds, pinning and priority errors.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use common::check_holds_cpu_latency;
use fsdr_net_io::depacketizer::DepacketizerConfig;
use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
use fsdr_net_io::sample::{Decoder, WireFormat};
use fsdr_net_io::socket::{Multicast, MulticastInterface};
use fsdr_net_io::{Backend, Engine, EngineConfig, Error, Format};

#[test]
fn ipv6_loopback_and_dual_stack() {
    let mut cfg = EngineConfig::new("[::1]:0".parse().unwrap());
    cfg.format = Format::Seq64;
    let mut engine = Engine::start(cfg).unwrap();
    let tx = UdpSocket::bind("[::1]:0").unwrap();
    tx.send_to(&1u64.to_le_bytes(), engine.local_addr())
        .unwrap();
    let d = engine
        .recv_timeout(Duration::from_secs(5))
        .expect("IPv6 datagram");
    assert_eq!(d.meta().source, tx.local_addr().unwrap());
    drop(d);
    drop(engine);

    // [::] without v6_only also takes IPv4.
    let cfg = EngineConfig::new("[::]:0".parse().unwrap());
    let mut engine = Engine::start(cfg).unwrap();
    let port = engine.local_addr().port();
    let tx4 = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx4.send_to(b"v4", ("127.0.0.1", port)).unwrap();
    let d = engine
        .recv_timeout(Duration::from_secs(5))
        .expect("IPv4 on dual-stack");
    assert_eq!(d.payload(), b"v4");
    assert_eq!(d.meta().source.port(), tx4.local_addr().unwrap().port());
    drop(d);
    drop(engine);

    // v6_only refuses it.
    let mut cfg = EngineConfig::new("[::]:0".parse().unwrap());
    cfg.socket.v6_only = true;
    let mut engine = Engine::start(cfg).unwrap();
    let port = engine.local_addr().port();
    tx4.send_to(b"v4", ("127.0.0.1", port)).unwrap();
    assert!(engine.recv_timeout(Duration::from_millis(300)).is_none());
}

/// A group joined on a veth in a namespace of its own, sent to from another namespace (so
/// nothing can leave on a real interface): two engines on one port both receive every
/// datagram. Needs root; `cargo xtask test` requires it to run.
#[test]
fn multicast_over_a_veth_pair_reaches_every_joined_receiver() {
    let pair = match fsdr_net_io::netns::VethPair::create("mc", 1500) {
        Ok(p) => p,
        Err(why) => return fsdr_net_io::netns::unavailable("netns", &why),
    };
    let group: std::net::Ipv4Addr = "239.255.77.1".parse().unwrap();
    let b = pair.b.clone();
    let (mut one, mut two) = pair.b.run(move || {
        let start = |port: u16| {
            let mut cfg = EngineConfig::new(SocketAddr::from((group, port)));
            cfg.socket.multicast = Some(Multicast {
                group: group.into(),
                interface: MulticastInterface::V4(b.addr),
            });
            Engine::start(cfg).unwrap()
        };
        let one = start(0);
        let two = start(one.local_addr().port());
        (one, two)
    });
    let port = one.local_addr().port();
    let a = pair.a.clone();
    pair.a.run(move || {
        let mut scfg = fsdr_net_io::send::SenderConfig::new(SocketAddr::from((group, port)));
        scfg.multicast_if = Some(a.addr.into());
        let mut sender = fsdr_net_io::send::Sender::new(&scfg).unwrap();
        for k in 0..100u8 {
            sender.send_datagrams(&[&[k; 10]]).unwrap();
        }
    });
    for engine in [&mut one, &mut two] {
        for k in 0..100u8 {
            let d = engine
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|| panic!("datagram {k}"));
            assert_eq!(d.payload(), &[k; 10]);
        }
    }
}

#[test]
fn recv_buffer_above_rmem_max_reports_effective_size_and_warns() {
    let rmem_max = fsdr_net_io::socket::rmem_max().expect("rmem_max readable");
    let capture = common::TraceLog::default();
    let subscriber = capture.subscriber();
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.socket.recv_buffer = rmem_max * 4;
    cfg.socket.force_recv_buffer = false;
    let engine = tracing::subscriber::with_default(subscriber, || Engine::start(cfg).unwrap());
    let b = engine.recv_buffer();
    assert_eq!(b.requested, rmem_max * 4);
    assert!(b.effective <= rmem_max, "{b:?}");
    assert!(b.short() && !b.forced);
    let log = capture.text();
    assert!(log.contains("WARN"), "{log}");
    assert!(
        log.contains(&format!("net.core.rmem_max={}", rmem_max * 4)),
        "{log}"
    );
    assert!(log.contains(&b.effective.to_string()), "{log}");
}

#[test]
fn wildcard_bind_logs_the_exposed_interfaces() {
    let capture = common::TraceLog::default();
    let subscriber = capture.subscriber();
    let cfg = EngineConfig::new("0.0.0.0:0".parse().unwrap());
    let engine = tracing::subscriber::with_default(subscriber, || Engine::start(cfg).unwrap());
    let log = capture.text();
    assert!(log.contains("wildcard"), "{log}");
    assert!(log.contains("lo 127.0.0.1"), "{log}");
    assert!(
        log.contains(&engine.local_addr().port().to_string()),
        "{log}"
    );
}

#[test]
fn forced_recv_buffer_when_privileged() {
    // Above net.core.rmem_max whatever it is on this machine, so only the force can grant it.
    let rmem_max = fsdr_net_io::socket::rmem_max().expect("rmem_max readable");
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.socket.recv_buffer = (rmem_max + 1).max(25_000_000);
    let engine = Engine::start(cfg).unwrap();
    let b = engine.recv_buffer();
    // SAFETY: geteuid has no preconditions.
    // Checked by: nothing to check: no memory is passed.
    if unsafe { libc::geteuid() } == 0 {
        assert!(b.forced && !b.short(), "{b:?}");
    } else {
        fsdr_net_io::netns::unavailable("root", &format!("SO_RCVBUFFORCE needs root; got {b:?}"));
    }
}

#[test]
fn thread_options_pin_and_priority_errors_are_clear() {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.threads.cpus = vec![0];
    Engine::start(cfg.clone()).expect("pinning to CPU 0 works");
    cfg.threads.cpus = vec![1000];
    match Engine::start(cfg) {
        Err(Error::Pin { cpu: 1000, .. }) => {}
        other => panic!("expected a pinning error, got {other:?}"),
    }
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.backend = Backend::Blocking;
    cfg.threads.fifo_priority = Some(10);
    match Engine::start(cfg) {
        Ok(_) => println!("SCHED_FIFO permitted here"),
        Err(e @ Error::Priority { .. }) => {
            assert!(e.to_string().contains("CAP_SYS_NICE"), "{e}")
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[test]
fn engine_holds_its_cpu_latency_request_while_it_runs() {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.cpu_latency = Some(Duration::ZERO);
    check_holds_cpu_latency(|| Engine::start(cfg));
}

/// `EngineConfig::cpu_latency` holds for an in-place receiver as for an engine: from start to
/// drop.
#[test]
fn in_place_receiver_holds_its_cpu_latency_request_while_it_runs() {
    let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    engine.backend = Backend::Recvmmsg;
    engine.format = Format::Seq64;
    engine.cpu_latency = Some(Duration::ZERO);
    let cfg = InPlaceConfig {
        engine,
        decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
        depacketizer: DepacketizerConfig::default(),
        buffers: 2,
    };
    check_holds_cpu_latency(|| InPlaceReceiver::<u8, Vec<u8>>::start(cfg));
}
