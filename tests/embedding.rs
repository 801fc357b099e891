//! What a FutureSDR user meets when embedding the blocks: builders whose result does not
//! depend on call order, message ports that end with the graph, the final `stats` message,
//! and clear errors instead of silent guesses.

use std::sync::mpsc;
use std::time::Duration;

use fsdr_net::UdpSourceBuilder;
use fsdr_net::io::emulator::{Emulator, EmulatorConfig};
use fsdr_net::prelude::*;
use futuresdr::blocks::VectorSource;
use futuresdr::num_complex::Complex32;
use futuresdr::runtime::dev::prelude::*;

/// Runs `fg` on another thread and fails the test if it does not end within `limit`.
fn run_within(fg: Flowgraph, limit: Duration) -> Flowgraph {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Runtime::new().run(fg));
    });
    rx.recv_timeout(limit)
        .expect("the flowgraph ended by itself")
        .expect("the flowgraph ran")
}

/// Collects the `rx_time` tags of a stream.
#[derive(Block)]
struct TimeTags {
    #[input]
    input: DefaultCpuReader<Complex32>,
    items: usize,
    tags: Vec<(usize, u64)>,
}

impl Kernel for TimeTags {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (items, tags) = self.input.slice_with_tags();
        for t in tags {
            if let Tag::NamedAny(name, v) = &t.tag
                && name == TAG_TIME
            {
                let rx = v.downcast_ref::<RxTime>().expect("an RxTime");
                self.tags.push((self.items + t.index, rx.ticks));
            }
        }
        let n = items.len();
        self.items += n;
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}

/// 0.2 s of a 20 Msps CHDR stream from a 200 MHz device into a source built by `build`.
fn time_tags_of(
    build: impl FnOnce(UdpSourceBuilder<Complex32>) -> UdpSourceBuilder<Complex32>,
) -> Vec<(usize, u64)> {
    let src = build(
        UdpSource::<Complex32>::builder("127.0.0.1:0")
            .format(Format::Chdr)
            .finish_after_idle(Duration::from_millis(300)),
    )
    .build()
    .expect("source builds");
    let mut emu = EmulatorConfig::new(src.local_addr(), Format::Chdr);
    emu.rate = 20e6;
    emu.tick_rate = 200e6;
    emu.start_ticks = 1_000_000;
    emu.spp = Some(1000);
    emu.samples = Some(4_000_000);
    let emu = Emulator::new(emu).unwrap();
    let snk = TimeTags {
        input: Default::default(),
        items: 0,
        tags: Vec::new(),
    };
    let mut fg = Flowgraph::new();
    let src = fg.add(src);
    let snk = fg.add(snk);
    fg.stream_dyn(src.id(), "output", snk.id(), "input")
        .unwrap();
    let sender = std::thread::spawn(move || emu.run());
    let fg = run_within(fg, Duration::from_secs(60));
    sender.join().unwrap().unwrap();
    let stats = fg.block(&src).unwrap().stats();
    assert_eq!(stats.kernel_drops + stats.overflow, 0, "{stats}");
    fg.block(&snk).unwrap().tags.clone()
}

#[test]
fn rates_given_in_either_order_give_the_same_tags() {
    let a = time_tags_of(|b| b.tick_rate(200e6).sample_rate(20e6));
    let b = time_tags_of(|b| b.sample_rate(20e6).tick_rate(200e6));
    assert_eq!(a, b);
    // A continuous stream is tagged once, at its first item.
    assert_eq!(a, [(0, 1_000_000)]);
}

#[test]
fn every_message_port_connected_and_the_graph_ends_by_itself() -> Result<()> {
    // Nothing is ever sent: the idle clock runs from the start of the flowgraph.
    let src = UdpSource::<u8>::builder("127.0.0.1:0")
        .stats_interval(Some(Duration::from_millis(50)))
        .finish_after_idle(Duration::from_millis(400))
        .build()
        .unwrap();
    let snk = futuresdr::blocks::NullSink::<u8>::new();
    let messages = MessageCollector::new().senders(2);
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk; src.missed | messages; src.stats | messages);
    let fg = run_within(fg, Duration::from_secs(20));
    let got = fg.block(&messages).unwrap().messages().to_vec();
    assert!(got.len() >= 2, "{got:?}");
    // The final message is the final count, and it is complete.
    let last = SourceStats::from_pmt(got.last().unwrap()).unwrap();
    assert!(last.fields().eq(fg.block(&src).unwrap().stats().fields()));
    Ok(())
}

#[test]
fn the_final_stats_message_rebuilds_every_counter() -> Result<()> {
    let src = UdpSource::<u8>::builder("127.0.0.1:0")
        .format(Format::Seq64)
        .stats_interval(None)
        .finish_after_idle(Duration::from_millis(300))
        .build()
        .unwrap();
    let to = src.local_addr();
    let snk = futuresdr::blocks::NullSink::<u8>::new();
    let messages = MessageCollector::new();
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk; src.stats | messages);
    let sender = std::thread::spawn(move || {
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for seq in [1u64, 2, 4, 4, 5, 3] {
            let mut dg = seq.to_le_bytes().to_vec();
            dg.extend_from_slice(&[0u8; 92]);
            tx.send_to(&dg, to).unwrap();
        }
        tx.send_to(&[1, 2, 3], to).unwrap(); // too short for a header
    });
    let fg = run_within(fg, Duration::from_secs(20));
    sender.join().unwrap();
    let got = fg.block(&messages).unwrap().messages().to_vec();
    assert_eq!(got.len(), 1, "only the final message: {got:?}");
    let msg = SourceStats::from_pmt(&got[0]).unwrap();
    let stats = fg.block(&src).unwrap().stats();
    assert!(msg.fields().eq(stats.fields()), "{msg}\n{stats}");
    // From the message alone: every datagram sent is accounted for.
    assert_eq!(msg.accounted(), 7, "{msg}");
    assert_eq!((msg.duplicates, msg.malformed), (1, 1), "{msg}");
    Ok(())
}

#[test]
fn bad_settings_are_clear_errors_not_silent_guesses() {
    let err = |r: Result<UdpSource<Complex32>, fsdr_net::Error>| r.err().map(|e| e.to_string());
    // CHDR timestamps need the radio's tick rate.
    let e = err(UdpSource::builder("127.0.0.1:0")
        .format(Format::Chdr)
        .build())
    .unwrap();
    assert!(e.contains("tick_rate"), "{e}");
    // VRT sample counts need the sample rate.
    let e = err(UdpSource::builder("127.0.0.1:0")
        .format(Format::Vrt)
        .build())
    .unwrap();
    assert!(e.contains("sample_rate"), "{e}");
    // …unless time is not wanted.
    assert!(
        UdpSource::<Complex32>::builder("127.0.0.1:0")
            .format(Format::Chdr)
            .time_tags(false)
            .build()
            .is_ok()
    );
    // Review (first hour) item 4: a CHDR or VRT stream's sc16 samples are not f32 (or u8)
    // items: a build error unless the bytes are asked for as they are.
    for format in [Format::Chdr, Format::Vrt] {
        let e = UdpSource::<f32>::builder("127.0.0.1:0")
            .format(format)
            .time_tags(false)
            .build()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("sc16") && e.contains("f32"), "{format}: {e}");
        assert!(
            UdpSource::<f32>::builder("127.0.0.1:0")
                .format(format)
                .time_tags(false)
                .wire_format(WireFormat::Plain)
                .build()
                .is_ok()
        );
    }
    // A stream-ID selector on a format without stream IDs selects nothing: an error.
    let e = UdpSource::<Complex32>::builder("127.0.0.1:0")
        .format(Format::Raw)
        .build_streams([fsdr_net::io::StreamSelector::Id(1)])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("stream ID") && e.contains("Sender"), "{e}");
    // sc16 does not decode to f32.
    let e = UdpSource::<f32>::builder("127.0.0.1:0")
        .wire_format(WireFormat::Sc16Chdr)
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("sc16_chdr") && e.contains("f32"), "{e}");
    assert!(
        UdpSource::<u8>::builder("127.0.0.1:0")
            .buffer_datagrams(0)
            .build()
            .is_err()
    );
    // Host names resolve; a name that does not is an error at build.
    let src = UdpSource::<u8>::builder("localhost:0").build().unwrap();
    assert!(src.local_addr().ip().is_loopback());
    assert!(
        UdpSource::<u8>::builder("no-such-host.invalid:1")
            .build()
            .is_err()
    );
    // A payload that is not a whole number of items.
    for bytes in [0usize, 3] {
        let e = UdpSink::<f32>::builder("127.0.0.1:9")
            .payload_bytes(bytes)
            .build()
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("payload_bytes"), "{e}");
    }
    assert!(
        UdpSink::<u8>::builder("127.0.0.1:9")
            .batch(0)
            .build()
            .is_err()
    );
    assert!(UdpSink::<u8>::builder("localhost:9").build().is_ok());
}

/// A CHDR stream of sc16 into `UdpSource<Complex<f32>>` without naming the wire format: the
/// samples come out converted, not as half as many garbage floats.
#[test]
fn complex_items_from_chdr_are_sc16_by_default() {
    let src = UdpSource::<Complex32>::builder("127.0.0.1:0")
        .format(Format::Chdr)
        .time_tags(false)
        .build()
        .unwrap();
    assert_eq!(src.wire_format(), WireFormat::Sc16Chdr);
    assert_eq!(src.bytes_per_item(), 4);
    let sink = UdpSink::<Complex32>::builder("127.0.0.1:9")
        .format(Format::Vrt)
        .build()
        .unwrap();
    let _ = VectorSource::<Complex32>::new(vec![]);
    drop(sink);
}

/// Settings at the edges of their types (an outside review's probe): each a clear error at
/// build that names the setting, for every kind of source and for the sink — never a panic
/// (an overflow while sizing buffers) or one later in the running flowgraph (an `Instant`
/// overflow in a timer).
#[test]
fn settings_beyond_reason_are_errors_not_panics() {
    type Set = fn(UdpSourceBuilder<Complex32>) -> UdpSourceBuilder<Complex32>;
    let cases: [(&str, Set); 9] = [
        ("slot size", |b| b.max_datagram(usize::MAX)),
        ("buffer_datagrams", |b| b.buffer_datagrams(usize::MAX)),
        ("reorder window", |b| {
            b.reorder(usize::MAX, Duration::from_millis(5))
        }),
        ("reorder timeout", |b| b.reorder(64, Duration::MAX)),
        ("latency_budget", |b| b.latency_budget(Duration::MAX)),
        ("stats_interval", |b| b.stats_interval(Some(Duration::MAX))),
        ("finish_after_idle", |b| b.finish_after_idle(Duration::MAX)),
        ("first_datagram_within", |b| {
            b.finish_after_idle(Duration::from_secs(1))
                .first_datagram_within(Duration::MAX)
        }),
        ("in_place_buffers", |b| b.in_place_buffers(usize::MAX)),
    ];
    for (name, set) in cases {
        let b = || {
            set(UdpSource::<Complex32>::builder("127.0.0.1:0")
                .format(Format::Chdr)
                .tick_rate(200e6)
                .sample_rate(200e6))
        };
        let errors = [
            b().build().err().map(|e| e.to_string()),
            b().build_in_place().err().map(|e| e.to_string()),
            b().build_streams([fsdr_net::io::StreamSelector::Id(0)])
                .err()
                .map(|e| e.to_string()),
        ];
        for (kind, e) in errors.into_iter().enumerate() {
            // in_place_buffers concerns the in-place receivers: here every kind (sc16 CHDR
            // into Complex<f32> is received in place by default, converted where it lands).
            let e = e.unwrap_or_else(|| panic!("{name}, kind {kind}: built"));
            assert!(e.contains(name), "{name}, kind {kind}: {e}");
        }
    }
    // More streams than one source keeps outputs for (each an output buffer).
    let e = UdpSource::<Complex32>::builder("127.0.0.1:0")
        .format(Format::Chdr)
        .time_tags(false)
        .build_streams((0..100_000).map(fsdr_net::io::StreamSelector::Id))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("stream selectors"), "{e}");
    // The sink: a batch beyond `sendmmsg`'s limit, timestamps that are not a number.
    let e = UdpSink::<u8>::builder("127.0.0.1:9")
        .batch(usize::MAX)
        .build()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("batch"), "{e}");
    for format in [Format::Chdr, Format::Vrt, Format::Seq64] {
        let e = UdpSink::<u8>::builder("127.0.0.1:9")
            .format(format)
            .wire_format(WireFormat::Plain)
            .payload_bytes(usize::MAX)
            .build()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("payload_bytes") && e.contains("65507"),
            "{format}: {e}"
        );
    }
    for tpi in [f64::NAN, f64::INFINITY, -1.0, 0.0] {
        let e = UdpSink::<Complex32>::builder("127.0.0.1:9")
            .format(Format::Chdr)
            .timestamps(0, tpi)
            .build()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("timestamps"), "{tpi}: {e}");
    }
    // Header fields the format has no room for: never dropped or truncated.
    let sink = |format: Format| UdpSink::<Complex32>::builder("127.0.0.1:9").format(format);
    for format in [Format::Raw, Format::Seq64, Format::SeqPlusSize] {
        for b in [sink(format).timestamps(0, 1.0), sink(format).stream_id(1)] {
            let e = b.build().err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("header fields"), "{format}: {e}");
        }
    }
    let e = sink(Format::Chdr).stream_id(1 << 16).build().err();
    assert!(e.is_some_and(|e| e.to_string().contains("16-bit")));
    assert!(sink(Format::Chdr).stream_id(0xffff).build().is_ok());
    assert!(sink(Format::Vrt).stream_id(1 << 16).build().is_ok());
    // A recording's metadata takes numbers only.
    let dir = std::env::temp_dir().join(format!("fsdr-net-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (rate, freq) in [(f64::NAN, 1e9), (-1.0, 1e9), (1e6, f64::INFINITY)] {
        let e = SigmfSink::<Complex32>::builder(dir.join("r.sigmf-data"))
            .sample_rate(rate)
            .frequency(freq)
            .build()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("sample_rate") || e.contains("frequency"), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
