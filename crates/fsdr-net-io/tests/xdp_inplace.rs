//! The in-place receiver over AF_XDP (`Backend::Xdp`) on a veth pair between two network
//! namespaces: each frame's payload is copied once, from the UMEM to its sample position in
//! the output buffer. The emulator's ramp in every format with sequence numbers, clean and
//! with drops, reorders and duplicates (as they come, and queued in the ring before the
//! first receive), native and generic XDP with jumbo frames: every sample at its index,
//! every count the emulator's, and a clean stream needs no other copy.
//! Needs root (`FSDR_NET_REQUIRE_NETNS` makes a skip a failure).

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fsdr_net_io::depacketizer::{DepacketizerConfig, DepacketizerStats};
use fsdr_net_io::emulator::{Emulator, EmulatorConfig, EmulatorReport, Faults, Signal, ramp_index};
use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
use fsdr_net_io::netns::{VethPair, unavailable};
use fsdr_net_io::sample::{Decoder, WireFormat};
use fsdr_net_io::{Backend, EngineConfig, Format, Stats, XdpMode};
use num_complex::Complex;

const SPP: u64 = 1900;

struct Run {
    sent: EmulatorReport,
    stats: Stats,
    dp: DepacketizerStats,
    items: Vec<Complex<i16>>,
}

/// Streams `packets` of the emulator's ramp from `a` to an in-place receiver in `b`. With
/// `queued` the receiver runs inline and reads only once the sender is done: every frame
/// waits in the ring, and each receive finds a whole batch.
fn stream(
    pair: &VethPair,
    mode: XdpMode,
    format: Format,
    packets: u64,
    faults: Faults,
    queued: bool,
) -> Run {
    let mut engine = EngineConfig::new(SocketAddr::from((pair.b.addr, 0)));
    engine.backend = Backend::Xdp;
    engine.format = format;
    engine.xdp.interface = Some(pair.b.ifname.clone());
    engine.xdp.mode = mode;
    engine.reorder_timeout = Duration::from_millis(100);
    let cfg = InPlaceConfig {
        engine,
        decoder: Decoder::<Complex<i16>>::new(WireFormat::Sc16Chdr).unwrap(),
        depacketizer: DepacketizerConfig {
            zero_fill: true,
            tick_rate: Some(20e6),
            ticks_per_item: Some(1.0),
            marks: None,
        },
        buffers: 8,
    };
    let mut rx = pair
        .b
        .run(|| {
            if queued {
                InPlaceReceiver::<Complex<i16>, Vec<Complex<i16>>>::start_inline(cfg)
            } else {
                InPlaceReceiver::<Complex<i16>, Vec<Complex<i16>>>::start(cfg)
            }
        })
        .unwrap_or_else(|e| panic!("{mode:?} {format}: {e}"));
    for _ in 0..8 {
        rx.give(vec![Complex::default(); 65536]).unwrap();
    }
    let mut emu = EmulatorConfig::new(rx.local_addr(), format);
    emu.rate = 20e6;
    emu.tick_rate = 20e6;
    emu.spp = Some(SPP as usize);
    emu.samples = Some(packets * SPP);
    emu.signal = Signal::Ramp;
    emu.faults = faults;
    emu.wire = WireFormat::Sc16Chdr;
    let a = pair.a.clone();
    let sender = std::thread::spawn(move || a.run(|| Emulator::new(emu).unwrap().run().unwrap()));
    while queued && !sender.is_finished() {
        std::thread::sleep(Duration::from_millis(5));
    }
    if queued {
        // The sender's last frames may still wait in the veth pair's queue for its NAPI
        // poll (which runs the XDP program): let them reach the ring, so that the first
        // receive finds them all. (A CI run under ASan copied 23 datagrams more than one
        // per gap, with three more wake-ups, and did not recur in 12 runs; reading while
        // frames still arrive is the suspected difference.)
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut items = Vec::new();
    let mut end = common::StreamEnd::new(sender);
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{format}: the stream never ended: {}",
            rx.stats()
        );
        rx.receive(Duration::from_millis(20));
        let mut any = false;
        while let Some(f) = rx.take() {
            any = true;
            items.extend_from_slice(&f.buffer[..f.items]);
            rx.give(f.buffer).unwrap();
        }
        if end.over(any, || rx.stats().accounted()) {
            break;
        }
    }
    let sent = end.report();
    let (stats, dp, rest) = rx.shutdown();
    for f in rest {
        items.extend_from_slice(&f.buffer[..f.items]);
    }
    Run {
        sent,
        stats,
        dp,
        items,
    }
}

/// Every sample is zero (filled for a loss) or the ramp value of its index; returns the zeros.
fn check_timeline(items: &[Complex<i16>], ctx: &str) -> u64 {
    let mut zeros = 0;
    for (k, s) in items.iter().enumerate() {
        if *s == Complex::new(0, 0) && k != 0 {
            zeros += 1;
            continue;
        }
        assert_eq!(ramp_index(s.re, s.im) as usize, k, "sample {k}: {ctx}");
    }
    zeros
}

/// Every datagram delivered or missed as sent, every sample at its place (zeros for the
/// missed), nothing dropped or malformed on the way.
fn check_books(r: &Run, ctx: &str) {
    assert_eq!(r.stats.kernel_drops + r.stats.malformed, 0, "{ctx}");
    assert_eq!(r.stats.missed, r.sent.dropped, "{ctx}");
    assert_eq!(r.stats.delivered, r.sent.packets_sent, "{ctx}");
    let zeros = check_timeline(&r.items, ctx);
    assert_eq!(zeros, r.sent.dropped_samples, "{ctx}");
    assert_eq!(
        r.items.len() as u64,
        r.sent.samples_sent + r.sent.dropped_samples,
        "{ctx}"
    );
}

#[test]
fn in_place_reception_over_xdp_is_exact_and_copies_once() {
    for (i, mode) in [XdpMode::Native, XdpMode::Generic].into_iter().enumerate() {
        let pair = match VethPair::create(&format!("xi{i}"), 9000) {
            Ok(p) => p,
            Err(e) => return unavailable("netns", &e),
        };
        if mode == XdpMode::Generic {
            // Generic XDP runs before segmentation: one frame per datagram, as from a radio.
            pair.a
                .ip(&["link", "set", "dev", &pair.a.ifname, "gso_max_segs", "1"])
                .unwrap();
        }
        for format in [Format::Seq64, Format::Chdr, Format::Vrt] {
            let r = stream(&pair, mode, format, 400, Faults::default(), false);
            let ctx = format!(
                "{mode:?} {format} clean: {}\n{:?}\n{:?}",
                r.stats, r.dp, r.sent
            );
            assert_eq!(r.stats.delivered, r.sent.packets_sent, "{ctx}");
            assert_eq!(r.items.len() as u64, r.sent.samples_sent, "{ctx}");
            assert_eq!(check_timeline(&r.items, &ctx), 0, "{ctx}");
            // Only the first datagram, which teaches the stream's layout, is copied again.
            assert!(r.dp.copied_bytes <= 4 * SPP, "{ctx}");
            assert_eq!(r.stats.kernel_drops + r.stats.malformed, 0, "{ctx}");

            let faults = Faults {
                drop_every: Some(17),
                reorder_every: Some(23),
                duplicate_every: Some(31),
                ..Faults::default()
            };
            // As they come, and all queued first: whole batches, cut at every gap, late or
            // repeated frame.
            for queued in [false, true] {
                let r = stream(&pair, mode, format, 400, faults, queued);
                let ctx = format!(
                    "{mode:?} {format} faults (queued: {queued}): {}\n{:?}\n{:?}",
                    r.stats, r.dp, r.sent
                );
                check_books(&r, &ctx);
                assert_eq!(r.stats.duplicates, r.sent.duplicated, "{ctx}");
                assert_eq!(r.stats.reordered, r.sent.reordered, "{ctx}");
            }
        }
    }
}

/// Issue #34, item 2, over AF_XDP: the receiver sees a frame's header before it writes the
/// payload, so a receive ends in front of a frame that shows a gap, and that frame is read
/// alone. Only it is copied (to its sample position behind room for the missing items);
/// the frames behind it land in place — over a socket, the rest of its `recvmmsg` call
/// would have landed behind it and been copied too. The frames wait in the ring until the
/// sender is done, so every receive could take a whole batch.
#[test]
fn a_gap_over_xdp_costs_one_datagram() {
    let pair = match VethPair::create("xg", 9000) {
        Ok(p) => p,
        Err(e) => return unavailable("netns", &e),
    };
    let datagram = 4 * SPP;
    for format in [Format::Seq64, Format::Chdr, Format::Vrt] {
        for every in [7u64, 50, 300] {
            let faults = Faults {
                drop_every: Some(every),
                ..Faults::default()
            };
            // The first datagram (it teaches the stream's layout) and one per gap, also at
            // one loss in 7 (nine gaps wait at once in the 64-datagram window) and for the
            // stream's last gaps, which only the reorder timeout decides: their zeros go in
            // where the datagrams placed ahead left room, and nothing is copied back out.
            // The books are exact in every run; the copies are those of an undisturbed
            // receive: two CI runs under ASan copied 23 and 47 datagrams more (3 and 6 more
            // hand-overs), which no local run, loaded or pinned to one busy CPU, repeated.
            // So a run over the bound is shown with the in-place receiver's trace of what
            // it copied, and tried again, up to three times.
            let mut over = Vec::new();
            for _ in 0..3 {
                let log = common::TraceLog::default();
                let r = tracing::subscriber::with_default(log.subscriber(), || {
                    stream(&pair, XdpMode::Native, format, 901, faults, true)
                });
                let ctx = format!(
                    "{format} drop every {every}: {}\n{:?}\n{:?}",
                    r.stats, r.dp, r.sent
                );
                check_books(&r, &ctx);
                eprintln!(
                    "{format} 1/{every}: copied {} datagrams, {} gaps",
                    r.dp.copied_bytes / datagram,
                    r.sent.dropped
                );
                if r.dp.copied_bytes <= (1 + r.sent.dropped) * datagram {
                    break;
                }
                eprintln!("over the bound, tried again:\n{ctx}\n{}", log.text());
                over.push(ctx);
            }
            assert!(over.len() < 3, "{}", over.join("\n"));
        }
    }
}
