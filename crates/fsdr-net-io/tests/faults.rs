//! Faults injected by the emulator (drops, reorders, duplicates, a restart) in every format
//! with sequence numbers, through the receive engine: every count exact. VITA-49's 4-bit
//! packet count is the hard case: a loss followed by 16 good packets looks like no loss to the
//! counter alone; the sample-count timestamps tell. Every test runs the engine both ways: with
//! its receive thread and inline (received on the consumer's thread).

mod common;

use std::time::Duration;

use fsdr_net_io::emulator::{Emulator, EmulatorConfig, EmulatorReport, Faults, Signal};
use fsdr_net_io::{Engine, EngineConfig, Format, Stats};

/// Samples per packet: small packets, many of them.
const SPP: u64 = 100;

/// The engine with its receive thread (false) and inline (true).
const INLINE: [bool; 2] = [false, true];

/// Streams `packets` packets of `format` with `faults` into an engine (received inline when
/// `inline`); returns what the emulator did, the engine's counters and the samples delivered.
fn stream(
    format: Format,
    packets: u64,
    faults: Faults,
    inline: bool,
) -> (EmulatorReport, Stats, u64) {
    stream_with(format, packets, faults, false, inline)
}

/// [`stream`], with the engine's socket taking coalesced receives (UDP GRO) when `gro`.
fn stream_with(
    format: Format,
    packets: u64,
    faults: Faults,
    gro: bool,
    inline: bool,
) -> (EmulatorReport, Stats, u64) {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.format = format;
    cfg.socket.gro = gro;
    // Counting, not timing, is under test: a sender thread descheduled for a few ms on a
    // loaded machine must not turn a reordered packet into a missed and a late one.
    cfg.reorder_timeout = Duration::from_millis(100);
    let mut engine = if inline {
        Engine::start_inline(cfg).unwrap()
    } else {
        Engine::start(cfg).unwrap()
    };
    let mut emu = EmulatorConfig::new(engine.local_addr(), format);
    emu.rate = 20e6;
    emu.tick_rate = 20e6;
    emu.spp = Some(SPP as usize);
    emu.samples = Some(packets * SPP);
    emu.signal = Signal::Ramp;
    emu.faults = faults;
    let sender = std::thread::spawn(move || Emulator::new(emu).unwrap().run().unwrap());
    let header = format.header_len(matches!(format, Format::Chdr | Format::Vrt));
    let mut samples = 0u64;
    let mut end = common::StreamEnd::new(sender);
    loop {
        let got = match engine.recv_timeout(Duration::from_millis(20)) {
            Some(d) => {
                samples += d.payload().len() as u64 / 4;
                // The stream's last packet ends its burst: in VRT with a trailer word.
                let trailer = format.trailer_len(d.info().eob);
                assert_eq!(d.bytes().len() - d.payload().len(), header + trailer);
                true
            }
            None => false,
        };
        if end.over(got, || engine.stats().accounted()) {
            break;
        }
    }
    let report = end.report();
    (report, engine.shutdown(), samples)
}

/// Every format with sequence numbers, each with the receive thread and inline.
fn cases() -> impl Iterator<Item = (Format, bool)> {
    [Format::Seq64, Format::Chdr, Format::Vrt]
        .into_iter()
        .flat_map(|f| INLINE.map(|inline| (f, inline)))
}

#[test]
fn drops_are_missed_frames_exactly_in_every_format() {
    for (format, inline) in cases() {
        for every in [7u64, 16, 100, 1000] {
            // One packet more than a multiple of `every`: the last drop has a successor.
            let packets = 2 * every.max(100) + 1;
            let (sent, s, samples) = stream(
                format,
                packets,
                Faults {
                    drop_every: Some(every),
                    ..Faults::default()
                },
                inline,
            );
            let ctx = format!("{format}, inline {inline}, drop every {every}: {s}\n{sent:?}");
            assert_eq!(s.kernel_drops + s.overflow, 0, "{ctx}");
            assert_eq!(s.missed, sent.dropped, "{ctx}");
            assert_eq!((s.duplicates, s.late, s.resyncs), (0, 0, 0), "{ctx}");
            assert_eq!(s.delivered, sent.packets_sent, "{ctx}");
            assert_eq!(
                samples, sent.samples_sent,
                "samples delivered = sent − dropped: {ctx}"
            );
        }
    }
}

#[test]
fn reorders_and_duplicates_are_exact_in_every_format() {
    for (format, inline) in cases() {
        let (sent, s, samples) = stream(
            format,
            500,
            Faults {
                reorder_every: Some(23),
                duplicate_every: Some(31),
                ..Faults::default()
            },
            inline,
        );
        let ctx = format!("{format}, inline {inline}: {s}\n{sent:?}");
        assert_eq!(s.kernel_drops + s.overflow, 0, "{ctx}");
        assert_eq!(s.duplicates, sent.duplicated, "{ctx}");
        assert_eq!(s.reordered, sent.reordered, "{ctx}");
        assert_eq!((s.missed, s.late, s.resyncs), (0, 0, 0), "{ctx}");
        assert_eq!(samples, sent.samples_sent, "{ctx}");
    }
}

#[test]
fn a_restart_is_one_resync_in_every_format() {
    for (format, inline) in cases() {
        let (sent, s, samples) = stream(
            format,
            300,
            Faults {
                // Not a multiple of 16: VRT's counter jumps where the restart happens.
                restart_after: Some(157),
                ..Faults::default()
            },
            inline,
        );
        let ctx = format!("{format}, inline {inline}: {s}\n{sent:?}");
        assert_eq!(sent.restarts, 1);
        assert_eq!(s.resyncs, 1, "{ctx}");
        assert_eq!((s.missed, s.duplicates, s.late), (0, 0, 0), "{ctx}");
        assert_eq!(samples, sent.samples_sent, "{ctx}");
    }
}

#[test]
fn drops_reorders_and_duplicates_together() {
    for (format, inline) in cases() {
        let (sent, s, samples) = stream(
            format,
            3001,
            Faults {
                drop_every: Some(97),
                reorder_every: Some(101),
                duplicate_every: Some(103),
                ..Faults::default()
            },
            inline,
        );
        let ctx = format!("{format}, inline {inline}: {s}\n{sent:?}");
        assert_eq!(s.kernel_drops + s.overflow, 0, "{ctx}");
        assert_eq!(s.missed, sent.dropped, "{ctx}");
        assert_eq!(s.duplicates, sent.duplicated, "{ctx}");
        assert_eq!((s.late, s.resyncs), (0, 0), "{ctx}");
        assert_eq!(samples, sent.samples_sent, "{ctx}");
    }
}

/// The emulator sends with UDP GSO, which loopback hands whole to a socket with `UDP_GRO`:
/// every receive then holds up to 64 datagrams. Split again, every fault counts exactly as
/// without GRO, in every format.
#[test]
fn coalesced_gro_receives_count_every_fault_exactly_in_every_format() {
    for (format, inline) in cases() {
        let faults = Faults {
            drop_every: Some(97),
            reorder_every: Some(101),
            duplicate_every: Some(103),
            ..Faults::default()
        };
        let (sent, s, samples) = stream_with(format, 3001, faults, true, inline);
        let ctx = format!("{format} with GRO, inline {inline}: {s}\n{sent:?}");
        assert!(
            s.gro_datagrams > sent.packets_sent / 2,
            "receives were coalesced: {ctx}"
        );
        // The first coalesced receive is copied into place (its size is not known yet); the
        // rest land in their slots.
        assert!(
            (1..=32).contains(&s.gro_fixups),
            "copies only while the size is learnt: {ctx}"
        );
        assert_eq!(s.received, sent.packets_sent + sent.duplicated, "{ctx}");
        assert_eq!(s.kernel_drops + s.overflow + s.truncated, 0, "{ctx}");
        assert_eq!(s.missed, sent.dropped, "{ctx}");
        assert_eq!(s.duplicates, sent.duplicated, "{ctx}");
        assert_eq!((s.late, s.resyncs), (0, 0), "{ctx}");
        assert_eq!(samples, sent.samples_sent, "{ctx}");

        let restart = Faults {
            restart_after: Some(157),
            ..Faults::default()
        };
        let (sent, s, samples) = stream_with(format, 300, restart, true, inline);
        let ctx = format!("{format} with GRO, inline {inline}, restart: {s}\n{sent:?}");
        assert_eq!(s.resyncs, 1, "{ctx}");
        assert_eq!((s.missed, s.duplicates, s.late), (0, 0, 0), "{ctx}");
        assert_eq!(samples, sent.samples_sent, "{ctx}");
    }
}

/// Ticks coarser than a sample, the rate learnt from the stream (CHDR at 491.52 Msps stamped
/// by a 200 MHz clock, 0.41 ticks a sample, each stamp rounded to a whole tick): no packet is
/// taken for a restart, and every gap is exactly its missed packets' bytes (sized from the
/// packets, not from two rounded stamps).
#[test]
fn ticks_coarser_than_a_sample_keep_the_books_and_the_gaps_exact() {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.format = Format::Chdr;
    cfg.reorder_timeout = Duration::from_millis(100);
    let mut engine = Engine::start(cfg).unwrap();
    let mut emu = EmulatorConfig::new(engine.local_addr(), Format::Chdr);
    emu.rate = 491.52e6;
    emu.tick_rate = 200e6;
    emu.unpaced = true;
    emu.spp = Some(1996);
    emu.samples = Some(3000 * 1996);
    emu.signal = Signal::Ramp;
    emu.faults = Faults {
        drop_every: Some(97),
        ..Faults::default()
    };
    let sender = std::thread::spawn(move || Emulator::new(emu).unwrap().run().unwrap());
    let (mut idle, mut gaps, mut wrong) = (0, 0u64, Vec::new());
    while idle < 3 {
        match engine.recv_timeout(Duration::from_millis(100)) {
            Some(d) => {
                let g = d.gap();
                if g.frames > 0 {
                    gaps += g.frames;
                    if g.bytes != Some(g.frames * 1996 * 4) {
                        wrong.push(g);
                    }
                }
                idle = 0;
            }
            None if sender.is_finished() => idle += 1,
            None => {}
        }
    }
    let sent = sender.join().unwrap();
    let s = engine.shutdown();
    let ctx = format!("{s}\n{sent:?}");
    assert_eq!(s.kernel_drops + s.overflow, 0, "{ctx}");
    assert_eq!((s.resyncs, s.ambiguous), (0, 0), "{ctx}");
    assert_eq!(s.missed, sent.dropped, "{ctx}");
    assert_eq!(gaps, sent.dropped, "{ctx}");
    assert!(
        wrong.is_empty(),
        "gaps not of whole packets: {wrong:?}\n{ctx}"
    );
}
