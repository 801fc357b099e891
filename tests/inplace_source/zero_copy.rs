//! `UdpSource` with `zero_copy`: the in-place receive thread writes into windows of the
//! default circular buffer, which downstream blocks read as usual. Every item that comes
//! out is compared with what it must be (the ramp at its stream position, zeros where
//! packets were dropped), with the counters and messages.

use std::time::Duration;

use fsdr_net::io::emulator::{EmulatorReport, Faults, ramp_index};
use fsdr_net::prelude::*;
use futuresdr::blocks::VectorSink;
use futuresdr::num_complex::Complex;
use futuresdr::runtime::dev::prelude::*;

use super::{Builder, SPP, builder, check_drops, emulator, run_sending};

/// What one run brought.
struct Outcome {
    sent: EmulatorReport,
    stats: SourceStats,
    items: Vec<Complex<i16>>,
    missed_messages: usize,
}

/// Runs `packets` CHDR packets of 1000 samples at `rate` through a zero-copy `UdpSource`
/// into a vector.
fn run(
    packets: u64,
    rate: f64,
    faults: Faults,
    tune: impl FnOnce(Builder) -> Builder,
) -> Result<Outcome> {
    let src = tune(builder().sample_rate(rate).zero_copy(true)).build()?;
    let emu = emulator(src.local_addr(), packets, rate, faults);
    let sink = VectorSink::<Complex<i16>>::new(((packets + 1) * SPP) as usize);
    let messages = MessageCollector::new();
    let mut fg = Flowgraph::new();
    connect!(fg, src > sink; src.missed | messages);
    let (fg, sent) = run_sending(fg, emu)?;
    let src = fg.block(&src)?;
    let items = fg.block(&sink)?.items().clone();
    let missed_messages = fg.block(&messages)?.messages().len();
    Ok(Outcome {
        sent,
        stats: src.stats(),
        items,
        missed_messages,
    })
}

/// The first item that is not what it must be: the ramp at its position, or zeros in a
/// packet the emulator dropped (every `drop_every`-th, 1-based).
fn first_wrong(items: &[Complex<i16>], drop_every: Option<u64>) -> Option<(usize, u32)> {
    items.iter().enumerate().find_map(|(n, s)| {
        let packet = n as u64 / SPP + 1;
        let dropped = drop_every.is_some_and(|d| packet.is_multiple_of(d));
        let ok = if dropped {
            s.re == 0 && s.im == 0
        } else {
            ramp_index(s.re, s.im) == n as u32
        };
        (!ok).then(|| (n, ramp_index(s.re, s.im)))
    })
}

#[test]
fn zero_copy_delivers_every_item_without_a_copy() -> Result<()> {
    for gro in [false, true] {
        let o = run(2000, 50e6, Faults::default(), |b| b.udp_gro(gro))?;
        let s = &o.stats;
        let ctx = format!("GRO: {gro}\n{}\n{:?}\n{:?}", s.engine, s.stream, o.sent);
        assert_eq!(s.engine.kernel_drops, 0, "{ctx}");
        assert_eq!(o.items.len() as u64, o.sent.samples_sent, "{ctx}");
        assert_eq!(first_wrong(&o.items, None), None, "{ctx}");
        assert_eq!(s.stream.items, o.sent.samples_sent, "{ctx}");
        // Only what teaches the layout is copied: the first datagram, or with GRO the
        // first coalesced receive (one send call of the emulator's, 32 datagrams at most);
        // and the receive that runs over the end of the first window, which was lent
        // before the datagrams' size was known. Every window after it ends where a
        // datagram ends, and one handed over early is split, not moved.
        let first = if gro { 32 * 4000 } else { 4000 };
        assert!(s.stream.copied_bytes <= 2 * first + 4000, "{ctx}");
    }
    Ok(())
}

#[test]
fn zero_copy_zero_fills_drops_and_counts_them() -> Result<()> {
    let faults = Faults {
        drop_every: Some(100),
        ..Faults::default()
    };
    let o = run(1001, 50e6, faults, |b| b)?;
    let s = &o.stats;
    let ctx = format!("{}\n{:?}\n{:?}", s.engine, s.stream, o.sent);
    check_drops(&o.sent, s, o.items.len() as u64, o.missed_messages, &ctx);
    assert_eq!(first_wrong(&o.items, Some(100)), None, "{ctx}");
    Ok(())
}

/// A slow stream with a short latency budget: every window goes back long before it is
/// full (the receiver splits it and goes on in its rest), with drops, reordering and
/// duplicates on top; every item still comes out where it belongs, every fault counted.
#[test]
fn zero_copy_is_exact_with_windows_handed_over_early_and_faults() -> Result<()> {
    let faults = Faults {
        drop_every: Some(37),
        reorder_every: Some(11),
        duplicate_every: Some(13),
        ..Faults::default()
    };
    let o = run(600, 4e6, faults, |b| {
        b.latency_budget(Duration::from_millis(1))
            .buffer_datagrams(16)
            .in_place_buffers(4)
    })?;
    let s = &o.stats;
    let ctx = format!("{}\n{:?}\n{:?}", s.engine, s.stream, o.sent);
    assert_eq!(s.engine.kernel_drops, 0, "{ctx}");
    assert_eq!(first_wrong(&o.items, Some(37)), None, "{ctx}");
    assert_eq!(
        o.items.len() as u64,
        o.sent.samples_sent + o.sent.dropped_samples,
        "{ctx}"
    );
    assert_eq!(s.engine.missed, o.sent.dropped, "{ctx}");
    assert_eq!(s.engine.duplicates, o.sent.duplicated, "{ctx}");
    assert_eq!(o.missed_messages as u64, o.sent.dropped, "{ctx}");
    assert!(s.engine.wakeups > 600 / 16, "windows went early: {ctx}");
    Ok(())
}

#[test]
fn zero_copy_takes_the_in_place_backends_only() {
    let e = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
        .backend(Backend::Mio)
        .zero_copy(true)
        .build()
        .err()
        .expect("mio is not an in-place backend");
    assert!(e.to_string().contains("recvmmsg"), "{e}");
}
