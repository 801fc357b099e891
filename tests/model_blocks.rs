//! The FutureSDR blocks against the reference model: the scenarios fsdr-net-io's
//! `tests/model.rs` draws (every format, clock and sample encoding; loss, reorder,
//! duplicates, short packets, ends of burst, time jumps, restarts), each sent over loopback
//! into a `UdpSource` built by the public builder and run in FutureSDR's default runtime,
//! as an application does. Every item and tag that reaches the sink and every counter of
//! the source must be what the model says (`crates/fsdr-net-io/tests/model/reference.rs`):
//! the library's receivers are checked there, this checks what the block adds (the windows
//! of FutureSDR's buffer it lends, its tags, its end).
//!
//! `MODEL_BLOCK_CASES` sets the number of cases of each test (default 16: `cargo xtask
//! test`'s debug run, new ones every run; `cargo xtask props --cases N` runs N/1000 in
//! release, at least 16).

use std::time::Duration;

use fsdr_net::io::Backend;
use fsdr_net::{TAG_EOB, TAG_MISSED, TAG_MISSED_ITEMS, TAG_TIME, UdpSource};
use futuresdr::runtime::buffer::circuit;
use futuresdr::runtime::dev::prelude::*;
use num_complex::Complex;
use proptest::prelude::*;

#[path = "../crates/fsdr-net-io/tests/model"]
#[allow(dead_code)]
mod model {
    pub mod coarse;
    pub mod learnt;
    pub mod reference;
    pub mod run;
    pub mod scenario;
    pub mod strategy;
    pub mod windows;
}

use model::reference::{Expected, Tag};
use model::run::{Outcome, Sample, check, depacketizer_config, engine_counts, send};
use model::scenario::{Enc, Kind, Scenario, Sent};
use model::strategy::scenario;

use fsdr_net::TagSink;

/// The block's tags as the model's: a gap's two tags (frames, items) on one item are one.
fn model_tags(tags: &[(usize, futuresdr::runtime::dev::Tag)]) -> Vec<(usize, Tag)> {
    use futuresdr::runtime::dev::Tag as T;
    let mut out = Vec::new();
    let mut frames = std::collections::BTreeMap::new();
    let mut items = std::collections::BTreeMap::new();
    for (i, tag) in tags {
        match tag {
            T::NamedUsize(n, f) if n == TAG_MISSED => {
                frames.insert(*i, *f as u64);
            }
            T::NamedUsize(n, k) if n == TAG_MISSED_ITEMS => {
                items.insert(*i, *k as u64);
            }
            T::NamedAny(n, _) if n == TAG_TIME => out.push((*i, Tag::Time)),
            T::NamedUsize(n, _) if n == TAG_EOB => out.push((*i, Tag::Eob)),
            _ => {}
        }
    }
    for (i, frames) in frames {
        // A gap without its items' tag is reported as such: the comparison then fails.
        let items = items.remove(&i).unwrap_or(u64::MAX);
        out.push((i, Tag::Missed { frames, items }));
    }
    out.extend(items.into_iter().map(|(i, items)| {
        (
            i,
            Tag::Missed {
                frames: u64::MAX,
                items,
            },
        )
    }));
    out
}

/// The builder as an application would set it up for `sc`: its format and wire encoding,
/// the reorder window, and the rates where the scenario tells them (time tags need them);
/// where it learns them, no rates and no time tags.
fn builder<T: Sample + CpuSample>(sc: &Scenario) -> fsdr_net::UdpSourceBuilder<T> {
    let format = sc.kind.format();
    let b = UdpSource::<T>::builder("127.0.0.1:0")
        .format(format)
        .wire_format(sc.enc.wire(format))
        .zero_fill_missed(true)
        // Only the datagrams decide (the model knows no clock): a second is far longer
        // than the sender's pauses. What is held when the stream ends is released by it
        // (an engine) or as the block ends (in place).
        .reorder(sc.window, Duration::from_secs(1))
        .finish_after_idle(Duration::from_millis(300));
    if !(sc.kind.timed() && sc.clock.configured) {
        return b.time_tags(false);
    }
    // The depacketizer's clock the model runs with: its tick rate, and the sample rate as
    // told (CHDR and VRT free-running counts tick at the device's clock; the others count
    // at the sample rate).
    let tick_rate = depacketizer_config(sc).tick_rate.expect("a timed kind");
    b.tick_rate(tick_rate).sample_rate(sc.clock.sample_rate)
}

/// The block a scenario runs through, as the builder makes it.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// `build()`: in place, into windows of FutureSDR's default buffer.
    Default,
    /// `backend(..).build()`: a receive engine, datagrams copied into the output.
    Engine(Backend),
    /// `build_in_place()`: `InPlaceUdpSource`, buffers of its own.
    InPlace,
}

/// Runs the built source `$src` into a tag sink in FutureSDR's default runtime while a
/// thread sends the scenario's datagrams; the outcome, checked for losses on the way.
macro_rules! through_flowgraph {
    ($src:expr, $sink:ty, $stream:expr, $arrivals:expr $(, $circuit:tt)?) => {{
        let src = $src.expect("the scenario's source builds");
        let sender = send($stream, $arrivals, src.local_addr());
        let sink = <$sink>::new();
        let mut fg = Flowgraph::new();
        let (src, sink) = (|| -> Result<_> {
            connect!(fg, src > sink);
            // The in-place source's buffers come back through the circuit.
            $(connect!(fg, src $circuit sink);)?
            Ok((src, sink))
        })()
        .expect("connected");
        futuresdr::runtime::config::set("ctrlport_enable", false);
        let fg = Runtime::new().run(fg).expect("the flowgraph runs");
        sender.join().expect("the sender");
        let stats = fg.block(&src).expect("the source").stats();
        let e = &stats.engine;
        assert_eq!(
            e.kernel_drops + e.overflow + e.truncated + e.malformed,
            0,
            "{e}"
        );
        let sink = fg.block(&sink).expect("the sink");
        Outcome {
            items: sink.items().to_vec(),
            tags: model_tags(sink.tags()),
            counts: engine_counts(e),
        }
    }};
}

/// Runs `sc` through `source` into a tag sink.
fn run_block<T: Sample + CpuSample>(
    sc: &Scenario,
    stream: &[Sent],
    arrivals: &[usize],
    source: Source,
) -> Outcome<T> {
    let b = builder::<T>(sc);
    type Circuit<T> = TagSink<T, circuit::Reader<T>>;
    match source {
        Source::Default => through_flowgraph!(b.build(), TagSink<T>, stream, arrivals),
        // One socket: across several, arrival order is the threads' (and a counter's
        // return to its first number no longer a restart), which the model does not state.
        Source::Engine(Backend::Reuseport) => {
            through_flowgraph!(b.reuseport(1, None).build(), TagSink<T>, stream, arrivals)
        }
        Source::Engine(backend) => {
            through_flowgraph!(b.backend(backend).build(), TagSink<T>, stream, arrivals)
        }
        Source::InPlace => {
            through_flowgraph!(b.build_in_place(), Circuit<T>, stream, arrivals, <)
        }
    }
}

/// Runs `sc` through a `UdpSource` with the item type of its encoding and checks it.
fn run_and_check(sc: &Scenario, source: Source) -> Result<(), String> {
    let stream = sc.stream();
    let arrivals = sc.arrivals(&stream);
    let mut want = model::reference::expect(sc, &stream, &arrivals);
    if !(sc.kind.timed() && sc.clock.configured) {
        want.tags.retain(|(_, t)| *t != Tag::Time);
    }
    fn go<T: Sample + CpuSample>(
        sc: &Scenario,
        stream: &[Sent],
        arrivals: &[usize],
        want: &Expected,
        source: Source,
    ) -> Result<(), String> {
        check(sc, want, &run_block::<T>(sc, stream, arrivals, source))
    }
    match sc.enc {
        _ if sc.float => go::<Complex<f32>>(sc, &stream, &arrivals, &want, source),
        Enc::Sc16 => go::<Complex<i16>>(sc, &stream, &arrivals, &want, source),
        Enc::Sc8 => go::<Complex<i8>>(sc, &stream, &arrivals, &want, source),
        Enc::Fc32 => go::<Complex<f32>>(sc, &stream, &arrivals, &want, source),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("MODEL_BLOCK_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(16),
        max_shrink_iters: 256,
        ..ProptestConfig::default()
    })]

    /// What `UdpSource::builder(addr).build()` gives: in place, into windows of FutureSDR's
    /// default buffer.
    #[test]
    fn the_default_udp_source_agrees_with_the_model(sc in scenario(Kind::ALL.to_vec())) {
        if let Err(e) = run_and_check(&sc, Source::Default) {
            prop_assert!(false, "{}", e);
        }
    }

    /// The same block on a receive engine, datagrams copied into the output: each backend
    /// of the build but `xdp` (which needs a veth pair) in turn.
    #[test]
    fn the_udp_source_on_an_engine_agrees_with_the_model(sc in scenario(Kind::ALL.to_vec())) {
        let engines: Vec<Backend> =
            Backend::ALL.iter().copied().filter(|&b| b != Backend::Xdp).collect();
        let backend = engines[(sc.first_seq % engines.len() as u64) as usize];
        if let Err(e) = run_and_check(&sc, Source::Engine(backend)) {
            prop_assert!(false, "{}", e);
        }
    }

    /// `InPlaceUdpSource`: the receive thread writes into buffers of the block's own.
    #[test]
    fn the_in_place_udp_source_agrees_with_the_model(sc in scenario(Kind::ALL.to_vec())) {
        if let Err(e) = run_and_check(&sc, Source::InPlace) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Issue #67 item 5 through `MultiUdpSource`, its zero-copy feed and on the mio engine:
/// VRT's 4-bit counter without timestamps, 10 packets lost among packets of silence. The
/// packet after the loss is 6 behind by its counter and brings the bytes received there,
/// which prove no copy: new data after a loss, flagged; the loss counted, nothing dropped.
#[test]
fn a_multi_udp_source_takes_no_repeating_payload_for_a_copy() {
    use fsdr_net::io::StreamSelector;
    use model::scenario::{Clock, Content, Op};
    let mut ops = vec![Op::default(); 40];
    ops[20].lose = 10;
    let sc = Scenario {
        kind: Kind::VrtBare,
        enc: Enc::Sc16,
        float: false,
        clock: Clock {
            ticks_per_sample: fsdr_net::io::seq::Ratio::integer(1).unwrap(),
            tick_rate: 10e6,
            sample_rate: 10e6,
            configured: true,
        },
        spp: 100,
        first_seq: 3,
        window: 0,
        ops,
        content: Content::Zeros,
        t0: 0,
    };
    let stream = sc.stream();
    let arrivals = sc.arrivals(&stream);
    for engine in [false, true] {
        let b = builder::<Complex<i16>>(&sc);
        let b = if engine { b.backend(Backend::Mio) } else { b };
        // The model's VRT without timestamps carries no stream ID: the output selects
        // the sender.
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").expect("a socket");
        let src = b
            .build_streams([StreamSelector::Sender(tx.local_addr().expect("bound"))])
            .expect("the source builds");
        let (to, datagrams): (_, Vec<Vec<u8>>) = (
            src.local_addr(),
            arrivals.iter().map(|&i| stream[i].bytes.clone()).collect(),
        );
        let sender = std::thread::spawn(move || {
            for d in &datagrams {
                tx.send_to(d, to).expect("sent");
            }
        });
        let sink = TagSink::<Complex<i16>>::new();
        let mut fg = Flowgraph::new();
        let (src, sink) = (|| -> Result<_> {
            connect!(fg, src.outputs[0] > sink);
            Ok((src, sink))
        })()
        .expect("connected");
        futuresdr::runtime::config::set("ctrlport_enable", false);
        let fg = Runtime::new().run(fg).expect("the flowgraph runs");
        sender.join().expect("the sender");
        let s = fg.block(&src).expect("the source").stats();
        let items = fg.block(&sink).expect("the sink").items().len();
        let e = &s.engine;
        let what = format!("engine {engine}: {e}");
        assert_eq!(items, 5000, "{what}");
        assert_eq!((e.missed, e.duplicates, e.late), (10, 0, 0), "{what}");
        assert_eq!(s.streams[0].datagrams, 40, "{what}");
        assert!(e.ambiguous >= 1, "{what}");
    }
}
