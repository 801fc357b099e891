//! Several streams on one port: a three-channel emulated radio (VRT stream IDs, CHDR
//! destination endpoints) with drops in one channel, received by a `MultiUdpSource` that
//! selects two of them. Each output's samples and `missed` counters are exact, the third
//! stream is counted as skipped, on every backend.

use std::time::Duration;

use fsdr_net::io::emulator::{Emulator, EmulatorConfig, Faults, Signal, ramp_index};
use fsdr_net::io::netns::TestLink;
use fsdr_net::io::{Backend, StreamSelector};
use fsdr_net::prelude::*;
use fsdr_net::{MultiUdpSource, TAG_MISSED};
use futuresdr::num_complex::Complex;
use futuresdr::runtime::dev::prelude::*;

const SPP: u64 = 400;
const PACKETS: u64 = 100;
/// Channel 1 loses packets 7, 14, …, 98 (1-based): 14 packets, each with a successor.
const DROP_EVERY: u64 = 7;

/// Keeps a stream's samples and the frames its `rx_missed` tags announce.
#[derive(Block)]
struct Collect {
    #[input]
    input: DefaultCpuReader<Complex<i16>>,
    items: Vec<Complex<i16>>,
    missed_tags: u64,
}

impl Collect {
    fn new() -> Self {
        Collect {
            input: DefaultCpuReader::default(),
            items: Vec::new(),
            missed_tags: 0,
        }
    }
}

impl Kernel for Collect {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (items, tags) = self.input.slice_with_tags();
        for t in tags.iter() {
            if let Tag::NamedUsize(name, n) = &t.tag
                && name == TAG_MISSED
            {
                self.missed_tags += *n as u64;
            }
        }
        let n = items.len();
        self.items.extend_from_slice(items);
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}

fn check_samples(items: &[Complex<i16>], dropped: impl Fn(u64) -> bool, ctx: &str) {
    assert_eq!(items.len() as u64, PACKETS * SPP, "{ctx}");
    for (n, s) in items.iter().enumerate() {
        let packet = n as u64 / SPP + 1;
        if dropped(packet) {
            assert_eq!((s.re, s.im), (0, 0), "{ctx}: sample {n} should be a zero");
        } else {
            assert_eq!(ramp_index(s.re, s.im), n as u32, "{ctx}: sample {n}");
        }
    }
}

fn two_of_three(format: Format, backend: Backend) -> anyhow::Result<()> {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let mut emu = EmulatorConfig::new("127.0.0.1:9".parse()?, format);
    emu.channels = 3;
    // The xdp backend over a veth pair between two namespaces; the others on loopback.
    let Some(link) = TestLink::for_backend(backend) else {
        return Ok(());
    };
    let mut builder = UdpSource::builder(link.bind());
    if format == Format::Chdr {
        builder = builder.tick_rate(20e6);
    }
    let builder = builder
        .format(format)
        .backend(backend)
        .configure(|c| link.apply(c))
        .sample_rate(10e6)
        .zero_fill_missed(true)
        .finish_after_idle(Duration::from_millis(300))
        .first_datagram_within(Duration::from_secs(10))
        // One numbering for channels, stream IDs and faults in every format: channel c is
        // stream ID c (VRT stream ID, CHDR endpoint), `Faults.channel` counts the same way.
        ;
    let src: MultiUdpSource<Complex<i16>> =
        link.receive(|| builder.build_streams([StreamSelector::Id(0), StreamSelector::Id(1)]))?;
    emu.dest = src.local_addr();
    emu.rate = 10e6;
    emu.tick_rate = 20e6;
    emu.spp = Some(SPP as usize);
    emu.samples = Some(PACKETS * SPP);
    emu.signal = Signal::Ramp;
    emu.faults = Faults {
        drop_every: Some(DROP_EVERY),
        channel: Some(1),
        ..Faults::default()
    };
    let (a, b) = (Collect::new(), Collect::new());
    let mut fg = Flowgraph::new();
    connect!(fg, src.outputs[0] > a; src.outputs[1] > b);
    let sender = link.send(|| {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            Emulator::new(emu).unwrap().run().unwrap()
        })
    });
    let fg = Runtime::new().run(fg)?;
    let sent = sender.join().unwrap();
    let stats = fg.block(&src)?.stats();
    let ctx = format!("{format} {backend}: {stats}\n{sent:?}");
    assert_eq!(sent.dropped, PACKETS / DROP_EVERY, "{ctx}");
    assert_eq!(
        stats.engine.kernel_drops + stats.engine.overflow,
        0,
        "{ctx}"
    );

    let a = fg.block(&a)?;
    check_samples(&a.items, |_| false, &format!("output 0, {ctx}"));
    assert_eq!((stats.streams[0].missed, a.missed_tags), (0, 0), "{ctx}");
    assert_eq!(stats.streams[0].datagrams, PACKETS, "{ctx}");

    let b = fg.block(&b)?;
    check_samples(
        &b.items,
        |p| p.is_multiple_of(DROP_EVERY),
        &format!("output 1, {ctx}"),
    );
    assert_eq!(stats.streams[1].missed, sent.dropped, "{ctx}");
    assert_eq!(b.missed_tags, sent.dropped, "{ctx}");
    assert_eq!(
        stats.streams[1].stream.zeros_inserted, sent.dropped_samples,
        "{ctx}"
    );
    assert_eq!(stats.engine.duplicates + stats.engine.late, 0, "{ctx}");

    // The third channel: counted, per stream, and nowhere else.
    let skipped: Vec<(&String, &u64)> = stats.skipped_by_stream.iter().collect();
    assert_eq!(skipped.len(), 1, "{ctx}");
    assert!(skipped[0].0.starts_with("id 2 "), "{ctx}");
    assert_eq!(*skipped[0].1, PACKETS, "{ctx}");
    Ok(())
}

#[test]
fn two_selected_streams_of_three_are_exact_on_every_backend() -> anyhow::Result<()> {
    for &backend in Backend::ALL {
        for format in [Format::Vrt, Format::Chdr] {
            two_of_three(format, backend)?;
        }
    }
    Ok(())
}

#[test]
fn selectors_must_be_distinct_and_present() {
    let none: [StreamSelector; 0] = [];
    let e = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
        .format(Format::Vrt)
        .sample_rate(1e6)
        .build_streams(none)
        .err()
        .expect("no selector is an error");
    assert!(e.to_string().contains("at least one"), "{e}");
    let e = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
        .format(Format::Vrt)
        .sample_rate(1e6)
        .build_streams([StreamSelector::Id(1), StreamSelector::Id(1)])
        .err()
        .expect("a selector twice is an error");
    assert!(e.to_string().contains("twice"), "{e}");
}

/// Takes nothing until `until`, then everything: a reader that falls far behind.
#[derive(Block)]
struct Stall {
    #[input]
    input: DefaultCpuReader<Complex<i16>>,
    until: std::time::Instant,
    items: Vec<Complex<i16>>,
}

impl Kernel for Stall {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        if std::time::Instant::now() < self.until {
            let until = self.until;
            io.block_on(async move {
                async_io::Timer::at(until).await;
            });
            return Ok(());
        }
        let items = self.input.slice();
        let n = items.len();
        self.items.extend_from_slice(items);
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}

/// Review defect 9: one output's reader stalls for a second while its stream goes on; the
/// other stream loses nothing, the stalled one's drops are counted for it alone and
/// zero-filled, so its timeline stays exact.
#[test]
fn a_stalled_reader_does_not_make_the_other_streams_lose_data() -> anyhow::Result<()> {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    const N: u64 = 4000;
    let mut emu = EmulatorConfig::new("127.0.0.1:9".parse()?, Format::Vrt);
    emu.channels = 2;
    let src: MultiUdpSource<Complex<i16>> = UdpSource::builder("127.0.0.1:0")
        .format(Format::Vrt)
        .sample_rate(20e6)
        .zero_fill_missed(true)
        // A small receive side: what the stalled reader holds back cannot hide in it.
        .slots(256)
        .recv_buffer(256 * 1024)
        .finish_after_idle(Duration::from_millis(1500))
        .first_datagram_within(Duration::from_secs(10))
        .build_streams([
            StreamSelector::Id(emu.stream_id(0)),
            StreamSelector::Id(emu.stream_id(1)),
        ])?;
    emu.dest = src.local_addr();
    emu.rate = 20e6;
    emu.spp = Some(SPP as usize);
    emu.samples = Some(N * SPP);
    emu.signal = Signal::Ramp;
    let fast = Collect::new();
    let slow = Stall {
        input: DefaultCpuReader::default(),
        until: std::time::Instant::now() + Duration::from_millis(1000),
        items: Vec::new(),
    };
    let mut fg = Flowgraph::new();
    connect!(fg, src.outputs[0] > fast; src.outputs[1] > slow);
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        Emulator::new(emu).unwrap().run().unwrap()
    });
    let fg = Runtime::new().run(fg)?;
    sender.join().unwrap();
    let stats = fg.block(&src)?.stats();
    let ctx = format!("{stats}");
    assert_eq!(
        stats.engine.kernel_drops + stats.engine.overflow,
        0,
        "{ctx}"
    );
    let fast = fg.block(&fast)?;
    assert_eq!(fast.items.len() as u64, N * SPP, "{ctx}");
    assert!(
        fast.items
            .iter()
            .enumerate()
            .all(|(n, s)| ramp_index(s.re, s.im) == n as u32),
        "{ctx}"
    );
    assert_eq!(stats.streams[0].overflow, 0, "{ctx}");
    let slow = fg.block(&slow)?;
    let dropped = stats.streams[1].overflow;
    assert!(dropped > 0, "the stall must have dropped something: {ctx}");
    // Every sample in its place: the ramp where it arrived, zeros where it was dropped.
    assert_eq!(slow.items.len() as u64, N * SPP, "{ctx}");
    let mut zero_packets = 0;
    for (p, chunk) in slow.items.chunks(SPP as usize).enumerate() {
        if chunk.iter().all(|s| (s.re, s.im) == (0, 0)) {
            zero_packets += 1;
        } else {
            for (k, s) in chunk.iter().enumerate() {
                assert_eq!(
                    ramp_index(s.re, s.im) as usize,
                    p * SPP as usize + k,
                    "{ctx}"
                );
            }
        }
    }
    assert_eq!(zero_packets, dropped, "{ctx}");
    Ok(())
}
