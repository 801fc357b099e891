//! The zero-copy multi-stream source end to end in FutureSDR's default runtime: the
//! emulator's channels (CHDR destination endpoints, VRT stream IDs) to one port, into a
//! `MultiInPlaceUdpSource<Complex<i16>>` whose outputs are checked sample by sample by
//! `RampCheck`s that read the circuit buffers in place; losses in one channel are that
//! channel's alone, zero-filled, counted and messaged with their output.

use std::time::Duration;

use fsdr_net::RampCheck;
use fsdr_net::io::emulator::{
    ContextPlan, Emulator, EmulatorConfig, Faults, Signal, channel_stream_id,
};
use fsdr_net::prelude::*;
use futuresdr::num_complex::Complex;
use futuresdr::runtime::buffer::circuit;
use futuresdr::runtime::dev::prelude::*;

type Check = RampCheck<Complex<i16>, circuit::Reader<Complex<i16>>>;

const SPP: u64 = 1000;
const PACKETS: u64 = 1001;

#[test]
fn each_channel_arrives_whole_in_its_own_output_without_a_copy() -> Result<()> {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    // VRT also with each channel's IF context (issue #67: an output's `datagrams` counted
    // its context packets, 121 where `MultiUdpSource` says 120), in big-endian items, which
    // DIFI's context describes.
    for (format, context) in [
        (Format::Chdr, false),
        (Format::Vrt, false),
        (Format::Vrt, true),
    ] {
        // Channel 1 first: the output of an ID gets that ID's stream.
        let ids = [channel_stream_id(format, 1), channel_stream_id(format, 0)];
        let wire = if context {
            WireFormat::Sc16Item32Be
        } else {
            WireFormat::Sc16Chdr
        };
        let src = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
            .format(format)
            .wire_format(wire)
            .tick_rate(50e6)
            .sample_rate(50e6)
            .zero_fill_missed(true)
            .stats_interval(None)
            .finish_after_idle(Duration::from_millis(300))
            .first_datagram_within(Duration::from_secs(10))
            .build_streams_in_place(ids.map(StreamSelector::Id))?;
        assert_eq!(src.streams(), 2);
        let mut emu = EmulatorConfig::new(src.local_addr(), format);
        emu.rate = 50e6;
        emu.tick_rate = 50e6;
        emu.spp = Some(SPP as usize);
        emu.samples = Some(PACKETS * SPP);
        emu.signal = Signal::Ramp;
        emu.wire = wire;
        emu.channels = 2;
        emu.faults = Faults {
            drop_every: Some(100),
            channel: Some(1),
            ..Faults::default()
        };
        if context {
            emu.context = Some(ContextPlan::default());
        }
        let (lossy, clean) = (Check::new(true), Check::new(true));
        let messages = MessageCollector::new();
        let mut fg = Flowgraph::new();
        connect!(fg, src.outputs[0] > lossy; src.outputs[0] < lossy;
            src.outputs[1] > clean; src.outputs[1] < clean; src.missed | messages);
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            Emulator::new(emu).unwrap().run().unwrap()
        });
        let fg = Runtime::new().run(fg)?;
        let sent = sender.join().unwrap();
        let s = fg.block(&src)?.stats();
        let missed = fg.block(&messages)?.messages().to_vec();
        let (lossy, clean) = (fg.block(&lossy)?, fg.block(&clean)?);
        let ctx = format!("{format} context {context}\n{s}\n{:?}\n{sent:?}", s.streams);
        assert_eq!(sent.dropped, PACKETS / 100, "{ctx}");
        assert_eq!(s.engine.kernel_drops, 0, "{ctx}");
        assert_eq!(s.engine.skipped, 0, "{ctx}");
        assert_eq!(
            s.engine.delivered,
            2 * PACKETS - sent.dropped + sent.context_sent,
            "{ctx}"
        );
        // An output's datagrams are its data datagrams.
        assert_eq!(s.streams[0].datagrams, PACKETS - sent.dropped, "{ctx}");
        assert_eq!(s.streams[1].datagrams, PACKETS, "{ctx}");
        // Channel 1: its gaps, zero-filled, one message each, naming output 0.
        assert_eq!(s.streams[0].missed, sent.dropped, "{ctx}");
        assert_eq!(
            s.streams[0].stream.zeros_inserted, sent.dropped_samples,
            "{ctx}"
        );
        assert_eq!(lossy.items(), PACKETS * SPP, "{ctx}");
        assert_eq!(missed.len() as u64, sent.dropped, "{ctx}");
        for m in &missed {
            let Pmt::MapStrPmt(m) = m else {
                panic!("{m:?}")
            };
            assert_eq!(m.get("output"), Some(&Pmt::U64(0)), "{ctx}");
        }
        // Channel 0: whole, in order; without context packets only its first datagram
        // copied.
        assert_eq!(s.streams[1].missed, 0, "{ctx}");
        assert_eq!(clean.items(), PACKETS * SPP, "{ctx}");
        assert_eq!(clean.discontinuities(), 0, "{ctx}");
        if !context {
            assert!(s.streams[1].stream.copied_bytes <= SPP * 4, "{ctx}");
        }
    }
    Ok(())
}

/// A channel no output asked for reaches the first output's receiver and is counted per
/// stream key, as `MultiUdpSource` counts it.
#[test]
fn a_channel_no_output_asked_for_is_counted_by_its_key() -> Result<()> {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    const N: u64 = 200;
    for format in [Format::Chdr, Format::Vrt] {
        let ids = [channel_stream_id(format, 0), channel_stream_id(format, 1)];
        let src = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
            .format(format)
            .wire_format(WireFormat::Sc16Chdr)
            .time_tags(false)
            .stats_interval(None)
            .finish_after_idle(Duration::from_millis(300))
            .first_datagram_within(Duration::from_secs(10))
            .build_streams_in_place(ids.map(StreamSelector::Id))?;
        let mut emu = EmulatorConfig::new(src.local_addr(), format);
        emu.rate = 10e6;
        emu.spp = Some(SPP as usize);
        emu.samples = Some(N * SPP);
        emu.wire = WireFormat::Sc16Chdr;
        emu.channels = 3;
        let (a, b) = (Check::new(false), Check::new(false));
        let mut fg = Flowgraph::new();
        connect!(fg, src.outputs[0] > a; src.outputs[0] < a; src.outputs[1] > b; src.outputs[1] < b);
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            Emulator::new(emu).unwrap().run().unwrap()
        });
        let fg = Runtime::new().run(fg)?;
        sender.join().unwrap();
        let s = fg.block(&src)?.stats();
        let ctx = format!("{format}\n{s}");
        assert_eq!(s.engine.skipped, N, "{ctx}");
        let third = format!("id {} from 127.0.0.1:", channel_stream_id(format, 2));
        let keys: Vec<_> = s.skipped_by_stream.iter().collect();
        assert!(
            matches!(keys[..], [(k, &n)] if k.starts_with(&third) && n == N),
            "{ctx}"
        );
        let Pmt::MapStrPmt(m) = s.to_pmt() else {
            panic!("{ctx}")
        };
        assert_eq!(m.get(&format!("skipped.{}", keys[0].0)), Some(&Pmt::U64(N)));
    }
    Ok(())
}

#[test]
fn selectors_the_kernel_cannot_steer_by_are_refused() {
    let builder = || {
        UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
            .format(Format::Chdr)
            .tick_rate(50e6)
    };
    let refused = |r: std::result::Result<
        fsdr_net::MultiInPlaceUdpSource<Complex<i16>>,
        fsdr_net::Error,
    >| { r.err().expect("refused") };
    let from = StreamSelector::Sender("127.0.0.1:5000".parse().unwrap());
    let e = refused(builder().build_streams_in_place([StreamSelector::Id(0), from]));
    assert!(e.to_string().contains("StreamSelector::Id only"), "{e}");
    let e = refused(
        builder()
            .backend(Backend::Mio)
            .build_streams_in_place([StreamSelector::Id(0)]),
    );
    assert!(e.to_string().contains("backend"), "{e}");
    let e = refused(
        builder()
            .udp_gro(true)
            .build_streams_in_place([StreamSelector::Id(0), StreamSelector::Id(1)]),
    );
    assert!(e.to_string().contains("GRO"), "{e}");
    let e = refused(
        UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
            .format(Format::Seq64)
            .build_streams_in_place([StreamSelector::Id(0)]),
    );
    assert!(e.to_string().contains("stream ID"), "{e}");
}
