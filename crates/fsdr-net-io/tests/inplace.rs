//! In-place reception end to end: the emulator's ramp through an [`InPlaceReceiver`] in every
//! format with sequence numbers, clean and with drops, reorders, duplicates and a restart, on
//! a receive thread and inline, with UDP GRO and without (the emulator sends with GSO, so
//! with GRO its datagrams arrive as coalesced receives).
//! Every sample lands at its index on the stream's timeline, every count is the emulator's,
//! and the fast path copies nothing.
//!
//! long: one harness (`stream_into` and its checks) and the cases that drive it; split, each
//! part would carry its own copy of the harness.

use std::time::{Duration, Instant};

mod common;

use fsdr_net_io::depacketizer::{DepacketizerConfig, DepacketizerStats, TagKind};
use fsdr_net_io::emulator::{Emulator, EmulatorConfig, EmulatorReport, Faults, Signal, ramp_index};
use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
use fsdr_net_io::sample::{Decoder, Item, WireFormat};
use fsdr_net_io::{Backend, Coalesce, EngineConfig, Format, Stats};
use num_complex::{Complex, Complex32};

const SPP: u64 = 100;

/// What a run produced.
struct Run<T> {
    sent: EmulatorReport,
    stats: Stats,
    dp: DepacketizerStats,
    items: Vec<T>,
    tags: Vec<(usize, TagKind)>,
}

/// How a case receives.
#[derive(Debug, Clone, Copy)]
struct Mode {
    /// On the consumer's thread instead of a receive thread of its own.
    inline: bool,
    /// UDP GRO on.
    gro: bool,
    /// Zeros for missed items (the default); off, a gap only tags.
    zero_fill: bool,
    /// Under load the thread reads every 500 µs (`poll_interval`) instead of on every
    /// arrival (with a small receive buffer, not root, bounded to nothing).
    poll: bool,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "inline: {}, GRO: {}, zero fill: {}, polling: {}",
            self.inline, self.gro, self.zero_fill, self.poll
        )
    }
}

/// Every format with sequence numbers, each received on a thread of its own and inline (on
/// the consumer's thread), each with and without UDP GRO; on a thread also polling.
fn cases() -> impl Iterator<Item = (Mode, Format)> {
    [
        (false, false, false),
        (true, false, false),
        (false, true, false),
        (true, true, false),
        (false, false, true),
        (false, true, true),
    ]
    .into_iter()
    .flat_map(|(inline, gro, poll)| {
        FORMATS.into_iter().map(move |f| {
            (
                Mode {
                    inline,
                    gro,
                    zero_fill: true,
                    poll,
                },
                f,
            )
        })
    })
}

/// An in-place receiver's engine settings for `format` in `mode`.
fn engine_config(mode: Mode, format: Format) -> EngineConfig {
    let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    engine.backend = Backend::Recvmmsg;
    engine.format = format;
    engine.socket.gro = mode.gro;
    // Counting, not timing, is under test: a sender thread descheduled for a few ms on a
    // loaded machine (ASan, tests in parallel) must not turn a reordered datagram into a
    // missed and a late one, as the 5 ms default let it once.
    engine.reorder_timeout = Duration::from_millis(100);
    if mode.poll {
        engine.poll_interval = Some(Duration::from_micros(500));
    }
    engine
}

/// Starts an in-place receiver of bytes (`u8` items, no conversion) on a thread of its own
/// with `engine`, and lends it `buffers` buffers of `bytes` each.
fn start_bytes(engine: EngineConfig, buffers: usize, bytes: usize) -> InPlaceReceiver<u8, Vec<u8>> {
    let cfg = InPlaceConfig {
        engine,
        decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
        depacketizer: DepacketizerConfig::default(),
        buffers,
    };
    let mut rx = InPlaceReceiver::<u8, Vec<u8>>::start(cfg).unwrap();
    for _ in 0..buffers {
        rx.give(vec![0u8; bytes]).unwrap();
    }
    rx
}

/// Streams `packets` ramp packets of `format` (samples laid out as `wire`) into an in-place
/// receiver of `T` items with buffers of `buffer_items`, received as `mode` says.
fn stream<T: Item>(
    mode: Mode,
    format: Format,
    wire: WireFormat,
    packets: u64,
    faults: Faults,
    buffer_items: usize,
) -> Run<T> {
    stream_into(mode, format, wire, packets, faults, 8, buffer_items)
}

/// Like [`stream`], with `buffers` buffers in circulation.
fn stream_into<T: Item>(
    mode: Mode,
    format: Format,
    wire: WireFormat,
    packets: u64,
    faults: Faults,
    buffers: usize,
    buffer_items: usize,
) -> Run<T> {
    let cfg = InPlaceConfig {
        engine: engine_config(mode, format),
        decoder: Decoder::<T>::new(wire).unwrap(),
        depacketizer: DepacketizerConfig {
            zero_fill: mode.zero_fill,
            tick_rate: Some(20e6),
            ticks_per_item: Some(1.0),
            marks: None,
        },
        buffers,
    };
    let mut rx = if mode.inline {
        InPlaceReceiver::<T, Vec<T>>::start_inline(cfg).unwrap()
    } else {
        InPlaceReceiver::<T, Vec<T>>::start(cfg).unwrap()
    };
    for _ in 0..buffers {
        rx.give(vec![T::default(); buffer_items]).unwrap();
    }
    let mut emu = EmulatorConfig::new(rx.local_addr(), format);
    emu.rate = 20e6;
    emu.tick_rate = 20e6;
    emu.spp = Some(SPP as usize);
    emu.samples = Some(packets * SPP);
    emu.signal = Signal::Ramp;
    emu.faults = faults;
    emu.wire = wire;
    let sender = std::thread::spawn(move || Emulator::new(emu).unwrap().run().unwrap());
    let (mut items, mut tags) = (Vec::new(), Vec::new());
    let mut take = |f: fsdr_net_io::inplace::Filled<Vec<T>>, items: &mut Vec<T>| {
        let base = items.len();
        tags.extend(f.tags.iter().map(|t| (base + t.index, t.kind)));
        items.extend_from_slice(&f.buffer[..f.items]);
        f.buffer
    };
    let mut end = common::StreamEnd::new(sender);
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{format} ({mode}): the stream never ended: {}",
            rx.stats()
        );
        rx.receive(Duration::from_millis(20));
        let mut any = false;
        while let Some(f) = rx.take() {
            any = true;
            let b = take(f, &mut items);
            rx.give(b).unwrap();
        }
        if end.over(any, || rx.stats().accounted()) {
            break;
        }
    }
    let sent = end.report();
    let (stats, dp, rest) = rx.shutdown();
    for f in rest {
        take(f, &mut items);
    }
    Run {
        sent,
        stats,
        dp,
        items,
        tags,
    }
}

/// Like [`check_timeline`] for samples converted to `Complex<f32>`: returns the zeros.
fn check_converted_timeline(items: &[Complex32], ctx: &str) -> u64 {
    let scale = fsdr_net_io::sample::SC16_SCALE;
    let mut zeros = 0;
    for (k, s) in items.iter().enumerate() {
        if *s == Complex32::default() {
            zeros += 1;
            continue;
        }
        let i = (s.re / scale).round() as i16;
        let q = (s.im / scale).round() as i16;
        assert_eq!(ramp_index(i, q) as usize, k, "sample {k}: {ctx}");
    }
    zeros
}

/// Every sample is zero (filled for a loss) or the ramp value of its index.
fn check_timeline(items: &[Complex<i16>], ctx: &str) -> u64 {
    let mut zeros = 0;
    for (k, s) in items.iter().enumerate() {
        if *s == Complex::new(0, 0) && k != 0 {
            zeros += 1;
            continue;
        }
        assert_eq!(
            ramp_index(s.re, s.im) as usize,
            k % (1 << 32),
            "sample {k}: {ctx}"
        );
    }
    zeros
}

/// The sample formats' natural in-place pairing: items whose memory is the wire's.
const FORMATS: [Format; 3] = [Format::Seq64, Format::Chdr, Format::Vrt];

#[test]
fn a_clean_stream_lands_in_place_without_a_copy() {
    for (mode, format) in cases() {
        let r = stream::<Complex<i16>>(
            mode,
            format,
            WireFormat::Sc16Chdr,
            2000,
            Faults::default(),
            4096,
        );
        let ctx = format!("{format} ({mode}): {}\n{:?}\n{:?}", r.stats, r.dp, r.sent);
        assert_eq!(r.stats.delivered, r.sent.packets_sent, "{ctx}");
        assert_eq!(r.items.len() as u64, r.sent.samples_sent, "{ctx}");
        assert_eq!(check_timeline(&r.items, &ctx), 0, "{ctx}");
        if mode.gro {
            // Only the first coalesced receive, which teaches the stream's layout and the
            // receives' size, is copied: one send call of the emulator's, 32 datagrams at
            // most. That receive is split and copied: a fix-up.
            assert!(r.stats.gro_datagrams > 0, "{ctx}");
            assert!(r.stats.gro_fixups >= 1, "{ctx}");
            assert!(r.dp.copied_bytes <= 32 * 4 * SPP, "{ctx}");
        } else {
            // Only the first datagram, which teaches the stream's layout, is copied.
            assert!(r.dp.copied_bytes <= 4 * SPP, "{ctx}");
        }
        assert_eq!(
            r.stats.missed + r.stats.malformed + r.stats.skipped,
            0,
            "{ctx}"
        );
        if format != Format::Seq64 {
            assert_eq!(r.tags.first().map(|t| t.0), Some(0), "time tag at 0: {ctx}");
            // The stream's last packet ends its burst (VRT: in a trailer, read from the
            // whole datagram while its payload stays in place).
            assert_eq!(r.dp.ended_with_end_of_burst(), Some(true), "{ctx}");
        }
    }
}

#[test]
fn drops_are_zero_filled_and_counted_exactly_in_place() {
    for (mode, format) in cases() {
        for every in [7u64, 16, 100] {
            let packets = 2 * every.max(100) + 1;
            let faults = Faults {
                drop_every: Some(every),
                ..Faults::default()
            };
            // With GRO, buffers that take whole coalesced receives (the emulator's send calls
            // of up to 32 datagrams): positions a buffer has no room for are copied.
            let items = if mode.gro { 4000 } else { 1000 };
            let r =
                stream::<Complex<i16>>(mode, format, WireFormat::Sc16Chdr, packets, faults, items);
            let ctx = format!(
                "{format} ({mode}), drop every {every}: {}\n{:?}\n{:?}",
                r.stats, r.dp, r.sent
            );
            assert_eq!(r.stats.missed, r.sent.dropped, "{ctx}");
            assert_eq!(
                (r.stats.duplicates, r.stats.late, r.stats.resyncs),
                (0, 0, 0),
                "{ctx}"
            );
            assert_eq!(r.stats.delivered, r.sent.packets_sent, "{ctx}");
            assert_eq!(r.dp.zeros_inserted, r.sent.dropped_samples, "{ctx}");
            assert_eq!(
                r.items.len() as u64,
                r.sent.samples_sent + r.sent.dropped_samples,
                "{ctx}"
            );
            assert_eq!(
                check_timeline(&r.items, &ctx),
                r.sent.dropped_samples,
                "{ctx}"
            );
            let missed_tags = r
                .tags
                .iter()
                .filter(|t| matches!(t.1, TagKind::Missed { .. }))
                .count() as u64;
            assert_eq!(missed_tags, r.sent.dropped, "one tag per gap: {ctx}");
            // A gap sends the rest of its receive batch down the copying path; with rare
            // gaps most of the stream still lands in place. With GRO a receive is one
            // coalesced receive of up to 32 datagrams: copied are the first one, the rest of
            // one per gap, and one per datagram staged for want of room (the receive after
            // it finds the staged data waiting and takes the copying path).
            if mode.gro {
                let bound = (1 + r.sent.dropped + r.dp.staged) * 32 * 4 * SPP;
                assert!(r.dp.copied_bytes <= bound, "{ctx}");
            } else if every >= 100 {
                assert!(r.dp.copied_bytes < r.sent.samples_sent * 4 / 2, "{ctx}");
            }
        }
    }
}

#[test]
fn reorders_duplicates_and_a_restart_are_exact_in_place() {
    for (mode, format) in cases() {
        let faults = Faults {
            reorder_every: Some(23),
            duplicate_every: Some(31),
            ..Faults::default()
        };
        let r = stream::<Complex<i16>>(mode, format, WireFormat::Sc16Chdr, 600, faults, 2048);
        let ctx = format!("{format} ({mode}): {}\n{:?}\n{:?}", r.stats, r.dp, r.sent);
        assert_eq!(r.stats.duplicates, r.sent.duplicated, "{ctx}");
        assert_eq!(r.stats.reordered, r.sent.reordered, "{ctx}");
        assert_eq!(
            (r.stats.missed, r.stats.late, r.stats.resyncs),
            (0, 0, 0),
            "{ctx}"
        );
        assert_eq!(r.items.len() as u64, r.sent.samples_sent, "{ctx}");
        assert_eq!(check_timeline(&r.items, &ctx), 0, "{ctx}");

        let faults = Faults {
            restart_after: Some(157),
            ..Faults::default()
        };
        let r = stream::<Complex<i16>>(mode, format, WireFormat::Sc16Chdr, 300, faults, 2048);
        let ctx = format!("{format} ({mode}) restart: {}\n{:?}", r.stats, r.sent);
        assert_eq!(r.stats.resyncs, 1, "{ctx}");
        assert_eq!(
            (r.stats.missed, r.stats.duplicates, r.stats.late),
            (0, 0, 0),
            "{ctx}"
        );
        assert_eq!(r.items.len() as u64, r.sent.samples_sent, "{ctx}");
    }
}

#[test]
fn converting_items_are_decoded_in_place_with_the_same_result() {
    // sc16 into Complex<f32> needs a conversion: the payloads land at the end of their
    // items' room and are decoded forward there; only those that landed elsewhere (the
    // first, which teaches the layout, and after a gap those that show it) are copied.
    for (mode, format) in cases() {
        let wire = EmulatorConfig::default_wire(format);
        for every in [None, Some(100)] {
            let faults = Faults {
                drop_every: every,
                ..Faults::default()
            };
            // As `drops_are_zero_filled_and_counted_exactly_in_place` sizes them.
            let items = if mode.gro { 4000 } else { 1000 };
            let r = stream::<Complex32>(mode, format, wire, 401, faults, items);
            let ctx = format!(
                "{format} ({mode}), drop every {every:?}: {}\n{:?}\n{:?}",
                r.stats, r.dp, r.sent
            );
            assert_eq!(r.stats.missed, r.sent.dropped, "{ctx}");
            assert_eq!(
                r.items.len() as u64,
                r.sent.samples_sent + r.sent.dropped_samples,
                "{ctx}"
            );
            // Zeros: the missed samples, and the ramp's first, (0, 0).
            let zeros = check_converted_timeline(&r.items, &ctx);
            assert_eq!(zeros, r.sent.dropped_samples + 1, "{ctx}");
            // Copied as on the fast path without conversion: with GRO the first coalesced
            // receive, the rest of one per gap and one per staged datagram; without, the
            // first datagram, and with rare gaps a small part of the stream.
            if mode.gro {
                let bound = (1 + r.sent.dropped + r.dp.staged) * 32 * 4 * SPP;
                assert!(r.dp.copied_bytes <= bound, "{ctx}");
            } else if every.is_none() {
                assert!(r.dp.copied_bytes <= 4 * SPP, "{ctx}");
            } else {
                assert!(r.dp.copied_bytes < r.sent.samples_sent * 4 / 2, "{ctx}");
            }
        }
    }
}

/// Two buffers of little more than one datagram each, every datagram converted and every
/// tenth dropped: copied datagrams and zero fills keep running out of buffers in the middle
/// of a receive batch, wait for the next one, and still come out exact and in order.
#[test]
fn copied_datagrams_that_wait_for_a_buffer_stay_exact_and_in_order() {
    for (mode, format) in cases() {
        let wire = EmulatorConfig::default_wire(format);
        let faults = Faults {
            drop_every: Some(10),
            reorder_every: Some(17),
            ..Faults::default()
        };
        let r = stream_into::<Complex32>(mode, format, wire, 401, faults, 2, 130);
        let ctx = format!("{format} ({mode}): {}\n{:?}\n{:?}", r.stats, r.dp, r.sent);
        assert_eq!(r.stats.missed, r.sent.dropped, "{ctx}");
        assert_eq!(r.stats.reordered, r.sent.reordered, "{ctx}");
        assert_eq!(r.stats.delivered, r.sent.packets_sent, "{ctx}");
        assert_eq!(r.stats.unconsumed, 0, "{ctx}");
        assert_eq!(
            r.items.len() as u64,
            r.sent.samples_sent + r.sent.dropped_samples,
            "{ctx}"
        );
        let zeros = check_converted_timeline(&r.items, &ctx);
        assert!(zeros >= r.sent.dropped_samples, "{ctx}");
    }
}

/// A consumer that returns no buffer: the receiver counts the pause, and the copied
/// datagrams it could not write when it stopped count as `unconsumed` — every datagram
/// received ends in a counter. In every format with sequence numbers, on a thread of its
/// own and inline.
#[test]
fn a_consumer_that_returns_no_buffer_moves_paused_and_unconsumed() {
    for (mode, format) in cases() {
        let cfg = InPlaceConfig {
            engine: engine_config(mode, format),
            // sc16 into Complex<f32>: converted (in place where a datagram lands there).
            decoder: Decoder::<Complex32>::new(EmulatorConfig::default_wire(format)).unwrap(),
            depacketizer: DepacketizerConfig::default(),
            buffers: 1,
        };
        let mut rx = if mode.inline {
            InPlaceReceiver::<Complex32, Vec<Complex32>>::start_inline(cfg).unwrap()
        } else {
            InPlaceReceiver::<Complex32, Vec<Complex32>>::start(cfg).unwrap()
        };
        // Five datagrams of 100 samples queue in the socket before there is a buffer, so
        // one receive takes them all; the one buffer holds 130 samples.
        let mut emu = EmulatorConfig::new(rx.local_addr(), format);
        emu.rate = 1e6;
        emu.tick_rate = 1e6;
        emu.spp = Some(SPP as usize);
        emu.samples = Some(5 * SPP);
        emu.signal = Signal::Ramp;
        let sent = Emulator::new(emu).unwrap().run().unwrap();
        rx.give(vec![Complex32::default(); 130]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        // Until the receiver has also looked for a next buffer and counted the pause: a
        // shutdown before that (a receive thread that published the receive but has not yet
        // come back to the buffers) ends it without one.
        // Filled buffers are taken and kept (an inline receiver steps only while none waits).
        let mut taken = Vec::new();
        while rx.stats().received < 1 || rx.stats().paused == 0 {
            assert!(
                Instant::now() < deadline,
                "{format} ({mode}): {}",
                rx.stats()
            );
            rx.receive(Duration::from_millis(20));
            taken.extend(rx.take());
        }
        let (stats, dp, mut rest) = rx.shutdown();
        rest.extend(taken);
        let ctx = format!("{format} ({mode}): {stats}\n{dp:?}\n{sent:?}");
        assert_eq!(stats.received, sent.packets_sent, "{ctx}");
        assert!(stats.paused >= 1, "{ctx}");
        if stats.gro_datagrams > 0 {
            // One coalesced receive takes all five, copied (the first teaches the layout):
            // the first fits, the second fits in part (the rest is staged), the other three
            // find no buffer.
            assert_eq!((stats.delivered, stats.unconsumed), (2, 3), "{ctx}");
            assert_eq!(rest.iter().map(|f| f.items).sum::<usize>(), 130, "{ctx}");
        } else {
            // The first, alone, teaches the layout (also with GRO when the five came apart);
            // the buffer has no room for the next one and the other four stay queued until
            // the stop reads and counts them.
            assert_eq!(
                (stats.delivered, stats.unconsumed, stats.overflow),
                (1, 0, 4),
                "{ctx}"
            );
            assert_eq!(rest.iter().map(|f| f.items).sum::<usize>(), 100, "{ctx}");
        }
    }
}

/// How [`gro_stream`] sends a run of datagrams.
#[derive(Clone, Copy)]
enum Send {
    /// As GSO super-packets: coalesced receives.
    Gso,
    /// One datagram per send call.
    Alone,
}

/// Sends `runs` of seq64 datagrams (count, size, how) to an in-place receiver with UDP GRO
/// and checks that every payload arrives whole, once and in order; returns the counters.
fn gro_stream(runs: &[(u64, usize, Send)]) -> (Stats, DepacketizerStats) {
    use fsdr_net_io::send::{Sender, SenderConfig};
    let mut engine = engine_config(
        Mode {
            inline: false,
            gro: true,
            zero_fill: true,
            poll: false,
        },
        Format::Seq64,
    );
    engine.reorder_window = 0;
    let mut rx = start_bytes(engine, 8, 256 * 1024);
    let mut tx = Sender::new(&SenderConfig::new(rx.local_addr())).unwrap();
    assert!(tx.gso(), "the kernel has UDP GSO");
    // Datagram i: its sequence number, then its payload, the low byte of i repeated.
    let mut expected = Vec::new();
    let mut i = 0u64;
    for &(count, size, how) in runs {
        let mut buf = Vec::new();
        for _ in 0..count {
            buf.extend_from_slice(&i.to_le_bytes());
            buf.extend(std::iter::repeat_n(i as u8, size - 8));
            expected.extend(std::iter::repeat_n(i as u8, size - 8));
            i += 1;
        }
        match how {
            Send::Gso => tx.send_segments(&buf, size).unwrap(),
            Send::Alone => {
                for d in buf.chunks(size) {
                    tx.send_datagrams(&[d]).unwrap();
                }
            }
        }
    }
    let mut items = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while items.len() < expected.len() {
        assert!(Instant::now() < deadline, "{}", rx.stats());
        rx.notifier().wait_timeout(Duration::from_millis(20));
        while let Some(f) = rx.take() {
            items.extend_from_slice(&f.buffer[..f.items]);
            rx.give(f.buffer).unwrap();
        }
    }
    let (s, dp, _) = rx.shutdown();
    let ctx = format!("{s}\n{dp:?}");
    assert_eq!(items.len(), expected.len(), "{ctx}");
    let first_wrong = items.iter().zip(&expected).position(|(a, b)| a != b);
    assert_eq!(first_wrong, None, "{ctx}");
    assert_eq!((s.received, s.delivered), (i, i), "{ctx}");
    assert_eq!(s.missed + s.truncated + s.kernel_drops, 0, "{ctx}");
    (s, dp)
}

/// UDP GRO with a sender that changes its datagram size: each change is a coalesced receive
/// that does not line up with the positions set for the old size, is split and copied
/// (`gro_fixups`), and teaches the new size; the steady runs between land in place.
#[test]
fn coalesced_receives_of_changing_sizes_land_whole_and_in_order() {
    let runs = [
        (300, 8000, Send::Gso),
        (300, 1472, Send::Gso),
        (300, 64, Send::Gso),
        (100, 9000, Send::Gso),
        (300, 8000, Send::Gso),
    ];
    let (s, dp) = gro_stream(&runs);
    let ctx = format!("{s}\n{dp:?}");
    assert!(
        s.gro_datagrams >= 1000,
        "the receives were coalesced: {ctx}"
    );
    // Every size is first met in a receive that does not line up.
    assert!(s.gro_fixups >= runs.len() as u64 - 1, "{ctx}");
    // The steady runs land in place: less than half of the payload is copied.
    assert!(dp.copied_bytes < dp.items / 2, "{ctx}");
}

/// Runs of nine datagrams of 8000 B: a GSO sender's eight per super-packet and a remainder
/// that comes alone. The remainder does not end the coalesced layout, so after the first
/// receive every payload lands in place; then datagrams sent one by one, which the layout
/// takes one per call until it gives way to batches again.
#[test]
fn a_remainder_alone_keeps_coalesced_receives_in_place() {
    let mut runs = vec![(9, 8000, Send::Gso); 40];
    runs.push((200, 8000, Send::Alone));
    let (s, dp) = gro_stream(&runs);
    let ctx = format!("{s}\n{dp:?}");
    assert!(s.gro_datagrams >= 40 * 8, "{ctx}");
    // Only the first coalesced receive, which teaches the layout, is copied.
    assert_eq!(s.gro_fixups, 1, "{ctx}");
    assert!(dp.copied_bytes <= 8 * 7992, "{ctx}");
}

#[test]
fn backends_other_than_recvmmsg_are_refused() {
    let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    engine.backend = Backend::Mio;
    let cfg = InPlaceConfig {
        engine,
        decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
        depacketizer: DepacketizerConfig::default(),
        buffers: 2,
    };
    let e = InPlaceReceiver::<u8, Vec<u8>>::start(cfg).unwrap_err();
    assert!(e.to_string().contains("recvmmsg"), "{e}");
}

#[test]
fn a_tick_rate_that_is_not_finite_and_positive_is_refused() {
    for rate in [f64::NAN, -1.0] {
        let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        engine.backend = Backend::Recvmmsg;
        let cfg = InPlaceConfig {
            engine,
            decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
            depacketizer: DepacketizerConfig {
                tick_rate: Some(rate),
                ..Default::default()
            },
            buffers: 2,
        };
        let e = InPlaceReceiver::<u8, Vec<u8>>::start_inline(cfg).unwrap_err();
        assert!(e.to_string().contains("tick rate"), "{e}");
    }
}

/// The receive thread fills the buffers returned last (their memory is still in the
/// cache), not the ones that waited longest; and no more buffers than configured can be lent.
#[test]
fn the_buffer_returned_last_is_filled_next_and_lending_is_bounded() {
    let mode = Mode {
        inline: false,
        gro: false,
        zero_fill: true,
        poll: false,
    };
    let mut rx = start_bytes(engine_config(mode, Format::Seq64), 4, 64 * 1024);
    assert!(rx.give(vec![0u8; 16]).is_err(), "a fifth buffer is refused");
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut send_and_take = |seq: u64| {
        let mut dg = seq.to_le_bytes().to_vec();
        dg.extend_from_slice(&[seq as u8; 100]);
        tx.send_to(&dg, rx.local_addr()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(
                Instant::now() < deadline,
                "datagram {seq} never handed over"
            );
            rx.notifier().wait_timeout(Duration::from_millis(20));
            if let Some(f) = rx.take() {
                assert_eq!((f.items, f.buffer[0]), (100, seq as u8));
                let at = f.buffer.as_ptr();
                rx.give(f.buffer).unwrap();
                return at;
            }
        }
    };
    // The thread takes its next buffer when it hands one over: with one buffer downstream
    // at a time two take turns, or (the consumer giving it back before the thread takes
    // the next, as under AddressSanitizer) one is used throughout; a FIFO would cycle
    // through all four.
    let mut used: Vec<*const u8> = (1..=12).map(&mut send_and_take).collect();
    used.sort();
    used.dedup();
    assert!((1..=2).contains(&used.len()), "buffers used: {used:?}");
    let (stats, dp, _) = rx.shutdown();
    assert_eq!((stats.delivered, dp.items), (12, 1200));
}

/// Polling under load (`poll_interval`) with the latency budget's wake moderation: after a
/// burst, datagrams that come alone are still handed over with nothing sent behind them —
/// a receive that finds the socket empty goes back to waiting, and the moderation's deadline
/// hands the buffer over.
#[test]
fn a_polling_receiver_hands_a_lone_datagram_over() {
    let mode = Mode {
        inline: false,
        gro: false,
        zero_fill: true,
        poll: true,
    };
    let mut engine = engine_config(mode, Format::Seq64);
    engine.coalesce = Coalesce::Adaptive {
        frames: usize::MAX,
        time: Duration::from_millis(1),
    };
    let mut rx = start_bytes(engine, 4, 64 * 1024);
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dest = rx.local_addr();
    let send = |seq: u64| {
        let mut dg = seq.to_le_bytes().to_vec();
        dg.extend_from_slice(&[seq as u8; 100]);
        tx.send_to(&dg, dest).unwrap();
    };
    let mut items = 0;
    let mut take_until = |rx: &mut InPlaceReceiver<u8, Vec<u8>>, want: usize, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while items < want {
            assert!(Instant::now() < deadline, "{what}: {items} of {want} items");
            rx.notifier().wait_timeout(Duration::from_millis(20));
            while let Some(f) = rx.take() {
                items += f.items;
                rx.give(f.buffer).unwrap();
            }
        }
    };
    // A burst: the thread is polling after it.
    for seq in 0..300 {
        send(seq);
    }
    take_until(&mut rx, 300 * 100, "the burst");
    for seq in 300..305 {
        send(seq);
        take_until(&mut rx, (seq as usize + 1) * 100, "a lone datagram");
    }
    let (stats, dp, _) = rx.shutdown();
    assert_eq!((stats.delivered, dp.items, stats.missed), (305, 30_500, 0));
}

/// Issue #34, item 2: after a loss the datagrams behind the gap land at their sample
/// positions (placed ahead of the gap until it is decided), so a gap costs a copy of the
/// datagram that shows it — and, for the first gap in a while, of those its receive brought
/// behind it — not of the reorder window behind it.
#[test]
fn a_gap_costs_only_the_datagrams_that_show_it() {
    let modes = cases().filter(|(m, _)| !m.gro).chain(FORMATS.map(|f| {
        let mode = Mode {
            inline: false,
            gro: false,
            zero_fill: false,
            poll: false,
        };
        (mode, f)
    }));
    for (mode, format) in modes {
        for every in [50u64, 1000, 5000] {
            let packets = (4 * every).max(2000) + 1;
            let faults = Faults {
                drop_every: Some(every),
                ..Faults::default()
            };
            let r = stream_into::<Complex<i16>>(
                mode,
                format,
                WireFormat::Sc16Chdr,
                packets,
                faults,
                32,
                64 * SPP as usize,
            );
            let ctx = format!(
                "{format} ({mode}), drop every {every}: {}\n{:?}\n{:?}",
                r.stats, r.dp, r.sent
            );
            assert_eq!(r.stats.missed, r.sent.dropped, "{ctx}");
            let missed_tags = r
                .tags
                .iter()
                .filter(|t| matches!(t.1, TagKind::Missed { .. }))
                .count() as u64;
            assert_eq!(missed_tags, r.sent.dropped, "one tag per gap: {ctx}");
            if mode.zero_fill {
                assert_eq!(r.dp.zeros_inserted, r.sent.dropped_samples, "{ctx}");
                assert_eq!(
                    check_timeline(&r.items, &ctx),
                    r.sent.dropped_samples,
                    "{ctx}"
                );
            } else {
                // The samples that came, in order, and nothing else.
                assert_eq!(r.items.len() as u64, r.sent.samples_sent, "{ctx}");
                let index = |s: &Complex<i16>| ramp_index(s.re, s.im);
                assert!(
                    r.items.windows(2).all(|w| index(&w[1]) > index(&w[0])),
                    "{ctx}"
                );
            }
            // The first datagram, the first gap's receive call (the datagram that shows it
            // and those the call brought behind it), and then, while gaps are about, the
            // datagram that shows each gap alone: the receiver looks at the queued headers
            // and ends a receive in front of it (`inplace/probe.rs`); twice, for a window
            // passed in the middle of a call. Before, every gap cost its call's datagrams
            // (at one loss in 50 about a quarter of the bytes), and before that the reorder
            // window's (64).
            // The looks last 128 datagrams after a gap: at one loss in 1000 or 5000 every
            // gap is a first one.
            let batch = engine_config(mode, format).batch as u64;
            let first_gaps = if every > 128 { r.sent.dropped } else { 1 };
            if every < 128 {
                assert!(r.stats.peeks > 0, "{ctx}");
            }
            let per_datagram = 4 * SPP;
            assert!(
                r.dp.copied_bytes <= (1 + first_gaps * batch + r.sent.dropped * 2) * per_datagram,
                "{ctx}"
            );
            eprintln!(
                "{format} ({mode}) 1/{every}: copied {} of {} bytes ({:.2}%), {} gaps",
                r.dp.copied_bytes,
                r.sent.samples_sent * 4,
                100.0 * r.dp.copied_bytes as f64 / (r.sent.samples_sent * 4) as f64,
                r.sent.dropped
            );
        }
    }
}
