//! The zero-copy sources end to end in FutureSDR's default runtime: the emulator's CHDR ramp
//! into an `InPlaceUdpSource<Complex<i16>>`, checked sample by sample by a `RampCheck` that
//! reads the circuit buffer in place, with the circuit closed so buffers come back; with UDP
//! GRO and without (the emulator sends with GSO: with GRO its datagrams arrive coalesced).
//! And `UdpSource` with `zero_copy` (`zero_copy` below), which writes into windows of the
//! default circular buffer.

#[path = "inplace_source/zero_copy.rs"]
mod zero_copy;

use std::time::Duration;

use fsdr_net::io::emulator::{Emulator, EmulatorConfig, EmulatorReport, Faults, Signal};
use fsdr_net::prelude::*;
use fsdr_net::{InPlaceUdpSource, RampCheck};
use futuresdr::num_complex::Complex;
use futuresdr::runtime::buffer::circuit;
use futuresdr::runtime::dev::prelude::*;

type Check = RampCheck<Complex<i16>, circuit::Reader<Complex<i16>>>;

type Builder = fsdr_net::UdpSourceBuilder<Complex<i16>>;

/// What one run brought.
struct Outcome {
    /// What the emulator sent.
    sent: fsdr_net::io::emulator::EmulatorReport,
    /// The source's counters.
    stats: SourceStats,
    /// Items the ramp check saw.
    items: u64,
    /// Breaks in the ramp.
    breaks: u64,
    /// `missed` messages.
    missed_messages: usize,
}

/// Samples per packet of the emulator's streams here.
const SPP: u64 = 1000;

/// The builder every source here starts from: CHDR at 50 Msps (a 50 MHz clock), zero-fill,
/// the end 300 ms after the stream's.
fn builder() -> Builder {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
        .format(Format::Chdr)
        .tick_rate(50e6)
        .sample_rate(50e6)
        .zero_fill_missed(true)
        .stats_interval(None)
        .finish_after_idle(Duration::from_millis(300))
        .first_datagram_within(Duration::from_secs(10))
}

/// The emulator's CHDR ramp to `to`: `packets` packets of [`SPP`] samples at `rate`.
fn emulator(to: std::net::SocketAddr, packets: u64, rate: f64, faults: Faults) -> EmulatorConfig {
    let mut emu = EmulatorConfig::new(to, Format::Chdr);
    emu.rate = rate;
    emu.tick_rate = 50e6;
    emu.spp = Some(SPP as usize);
    emu.samples = Some(packets * SPP);
    emu.signal = Signal::Ramp;
    emu.faults = faults;
    emu
}

/// Runs `fg` in FutureSDR's default runtime while the emulator sends, from 200 ms on.
fn run_sending(fg: Flowgraph, emu: EmulatorConfig) -> Result<(Flowgraph, EmulatorReport)> {
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        Emulator::new(emu).unwrap().run().unwrap()
    });
    let fg = Runtime::new().run(fg)?;
    Ok((fg, sender.join().unwrap()))
}

/// Runs `packets` CHDR packets of 1000 samples through the in-place source into a ramp
/// check, with UDP GRO on if `gro`.
fn run(packets: u64, faults: Faults, gro: bool) -> Result<Outcome> {
    run_tuned(packets, faults, gro, |b| b)
}

/// [`run`] with further builder settings.
fn run_tuned(
    packets: u64,
    faults: Faults,
    gro: bool,
    tune: impl FnOnce(Builder) -> Builder,
) -> Result<Outcome> {
    let src: InPlaceUdpSource<Complex<i16>> = tune(builder().udp_gro(gro)).build_in_place()?;
    let emu = emulator(src.local_addr(), packets, 50e6, faults);
    let check = Check::new(true);
    let messages = MessageCollector::new();
    let mut fg = Flowgraph::new();
    connect!(fg, src > check; src < check; src.missed | messages);
    let (fg, sent) = run_sending(fg, emu)?;
    let src = fg.block(&src)?;
    let check = fg.block(&check)?;
    let missed = fg.block(&messages)?.messages().len();
    Ok(Outcome {
        sent,
        stats: src.stats(),
        items: check.items(),
        breaks: check.discontinuities(),
        missed_messages: missed,
    })
}

#[test]
fn a_clean_stream_arrives_whole_without_a_copy() -> Result<()> {
    for gro in [false, true] {
        let Outcome {
            sent,
            stats: s,
            items,
            breaks,
            ..
        } = run(2000, Faults::default(), gro)?;
        let ctx = format!("GRO: {gro}\n{}\n{:?}\n{sent:?}", s.engine, s.stream);
        assert_eq!(s.engine.kernel_drops, 0, "{ctx}");
        assert_eq!(items, sent.samples_sent, "{ctx}");
        assert_eq!(breaks, 0, "every sample in order: {ctx}");
        if gro {
            // Only the first coalesced receive (one send call of the emulator's, 32
            // datagrams at most) is copied: it teaches the layout and the receives' size.
            assert!(s.engine.gro_datagrams > 0, "{ctx}");
            assert!(s.stream.copied_bytes <= 32 * 4000, "{ctx}");
        } else {
            // Only the first datagram, which teaches the stream's layout, is copied.
            assert!(s.stream.copied_bytes <= 4000, "{ctx}");
        }
    }
    Ok(())
}

/// Every packet the emulator dropped counted, zero-filled and messaged (`items` came out,
/// `missed` messages were posted).
fn check_drops(sent: &EmulatorReport, s: &SourceStats, items: u64, missed: usize, ctx: &str) {
    assert_eq!(s.engine.kernel_drops, 0, "{ctx}");
    assert_eq!(s.engine.missed, sent.dropped, "{ctx}");
    assert_eq!(s.stream.zeros_inserted, sent.dropped_samples, "{ctx}");
    assert_eq!(items, sent.samples_sent + sent.dropped_samples, "{ctx}");
    assert_eq!(missed as u64, sent.dropped, "{ctx}");
}

#[test]
fn drops_are_zero_filled_counted_and_messaged() -> Result<()> {
    let faults = Faults {
        drop_every: Some(100),
        ..Faults::default()
    };
    for gro in [false, true] {
        let Outcome {
            sent,
            stats: s,
            items,
            missed_messages,
            ..
        } = run(1001, faults, gro)?;
        let ctx = format!("GRO: {gro}\n{}\n{:?}\n{sent:?}", s.engine, s.stream);
        check_drops(&sent, &s, items, missed_messages, &ctx);
    }
    Ok(())
}

/// With a coalescing time longer than a buffer takes to fill, the buffer's room decides
/// each hand-over: every buffer but the last goes downstream full, so the workers are woken
/// once per buffer instead of once per burst, and the stream still arrives whole.
#[test]
fn a_long_coalescing_time_hands_over_whole_buffers() -> Result<()> {
    const PACKETS: u64 = 3000;
    const BUFFER_PACKETS: u64 = 100;
    let Outcome {
        sent,
        stats: s,
        items,
        breaks,
        ..
    } = run_tuned(PACKETS, Faults::default(), false, |b| {
        b.max_datagram(4016)
            .buffer_datagrams(BUFFER_PACKETS as usize)
            .coalesce(fsdr_net::io::Coalesce::Adaptive {
                frames: usize::MAX,
                time: Duration::from_millis(100),
            })
    })?;
    let ctx = format!("{}\n{:?}\n{sent:?}", s.engine, s.stream);
    assert_eq!(items, sent.samples_sent, "{ctx}");
    assert_eq!(breaks, 0, "{ctx}");
    // The first datagram after silence goes at once (adaptive moderation), then full
    // buffers of 100, and the last one when the stream ends: 32, and one more for each time
    // a loaded host left the receiver without an empty buffer (`paused`) or stalled the
    // sender long enough to look like silence (then a datagram goes at once again; once in
    // a full test run); at most twice the buffers. A hand-over per burst (the default
    // 50 µs) would be hundreds.
    assert!(
        s.engine.wakeups <= 2 * (PACKETS / BUFFER_PACKETS) + 2 + s.engine.paused,
        "wake-ups: {ctx}"
    );
    Ok(())
}
