//! Runs a scenario through the library — its sequence layer and depacketizer by hand
//! (`StreamOrder`, as the engine's consumer drives it), or through an `Engine` over
//! loopback — and compares every item, tag and counter with the reference model.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use fsdr_net_io::depacketizer::{DatagramIn, Depacketizer, DepacketizerConfig, TagKind};
use fsdr_net_io::inplace::{Filled, InPlaceConfig, InPlaceReceiver, ItemBuffer};
use fsdr_net_io::sample::{Decoder, Item};
use fsdr_net_io::seq::{Released, SeqEvent, StreamClock, StreamOrder, Tracking, fingerprint};
use fsdr_net_io::{Backend, Engine, EngineConfig, Stats};
use num_complex::Complex;

use super::reference::{Counts, Expected, Tag};
use super::scenario::{Enc, Kind, Scenario, Sent, as_f32, carried, sc8, sc16};

/// An item type of an encoding, and the item a sender's sample `n` in encoding `enc`
/// becomes.
pub trait Sample: Item + PartialEq + Copy {
    fn of(n: u64, enc: Enc) -> Self;
}
impl Sample for Complex<i16> {
    fn of(n: u64, _: Enc) -> Self {
        sc16(n)
    }
}
impl Sample for Complex<i8> {
    fn of(n: u64, _: Enc) -> Self {
        sc8(n)
    }
}
impl Sample for Complex<f32> {
    fn of(n: u64, enc: Enc) -> Self {
        as_f32(enc, n)
    }
}

/// What the library produced.
#[derive(Debug, Default)]
pub struct Outcome<T> {
    pub items: Vec<T>,
    pub tags: Vec<(usize, Tag)>,
    pub counts: Counts,
}

/// The clock a receiver is told, as the blocks give it: the rates where configured, and
/// the wire's bytes a sample always (the decoder's).
pub fn clock(sc: &Scenario) -> StreamClock {
    let bytes_per_sample = sc.enc.bytes_per_sample() as u32;
    if !sc.clock.configured {
        return StreamClock {
            bytes_per_sample,
            ..Default::default()
        };
    }
    StreamClock {
        tick_rate: Some(sc.clock.tick_rate),
        sample_rate: Some(sc.clock.sample_rate),
        bytes_per_sample,
    }
}

fn depacketizer<T: Sample>(sc: &Scenario) -> Depacketizer<T> {
    Depacketizer::new(
        Decoder::new(sc.enc.wire(sc.kind.format())).unwrap(),
        depacketizer_config(sc),
    )
}

pub fn depacketizer_config(sc: &Scenario) -> DepacketizerConfig {
    let timed = sc.kind.timed();
    let tick_rate = match sc.kind {
        Kind::ChdrTicks | Kind::VrtFree => sc.clock.tick_rate,
        _ => sc.clock.sample_rate,
    };
    DepacketizerConfig {
        zero_fill: true,
        tick_rate: timed.then_some(tick_rate),
        ticks_per_item: timed.then(|| match sc.kind {
            Kind::ChdrTicks | Kind::VrtFree => sc.clock.ticks_per_sample.to_f64(),
            _ => 1.0,
        }),
        ..Default::default()
    }
}

/// The tags of one output call (indices from its start) appended at `base`.
pub fn add_tags(
    out: &mut Vec<(usize, Tag)>,
    base: usize,
    tags: &[fsdr_net_io::depacketizer::ItemTag],
) {
    for t in tags {
        let tag = match t.kind {
            TagKind::Missed { frames, items } => Tag::Missed { frames, items },
            TagKind::Time(_) => Tag::Time,
            TagKind::Eob => Tag::Eob,
            TagKind::Setting { .. } => continue,
        };
        out.push((base + t.index, tag));
    }
}

/// The engine's counters the model predicts.
pub fn engine_counts(s: &Stats) -> Counts {
    Counts {
        delivered: s.delivered,
        missed: s.missed,
        duplicates: s.duplicates,
        late: s.late,
        resyncs: s.resyncs,
        reordered: s.reordered,
        ambiguous: s.ambiguous,
    }
}

/// Sends `arrivals` to `to` in that order from a thread of its own, pausing now and then so
/// that the kernel's buffer never overflows.
pub fn send(
    stream: &[Sent],
    arrivals: &[usize],
    to: std::net::SocketAddr,
) -> std::thread::JoinHandle<()> {
    let datagrams: Vec<Vec<u8>> = arrivals.iter().map(|&i| stream[i].bytes.clone()).collect();
    std::thread::spawn(move || {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for (k, d) in datagrams.iter().enumerate() {
            tx.send_to(d, to).unwrap();
            if k % 128 == 127 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    })
}

/// Collects a depacketizer's output across calls.
struct Sink<T> {
    dp: Depacketizer<T>,
    buf: Vec<T>,
    out: Outcome<T>,
}

impl<T: Sample> Sink<T> {
    fn new(sc: &Scenario) -> Self {
        Sink {
            dp: depacketizer(sc),
            buf: vec![T::default(); 1 << 16],
            out: Outcome::default(),
        }
    }

    fn push(&mut self, d: &DatagramIn<'_>) {
        let mut staged = true;
        let mut first = true;
        while staged {
            let mut w = self.dp.writer(&mut self.buf);
            if first {
                w.push(d);
                first = false;
            }
            staged = w.pending();
            let (n, tags) = w.finish();
            let base = self.out.items.len();
            self.out.items.extend_from_slice(&self.buf[..n]);
            add_tags(&mut self.out.tags, base, &tags);
        }
    }
}

fn count<T>(c: &mut Counts, r: &Released<T>) {
    if r.ambiguous {
        c.ambiguous += 1;
    }
    match r.event {
        SeqEvent::Gap { missed } => c.missed += missed,
        SeqEvent::Duplicate => c.duplicates += 1,
        SeqEvent::Late => c.late += 1,
        SeqEvent::Resync => c.resyncs += 1,
        SeqEvent::First | SeqEvent::InOrder => {}
    }
    if r.deliver {
        c.delivered += 1;
    }
}

/// The sequence layer and depacketizer driven by hand, as the engine's consumer does.
pub fn run_pure<T: Sample>(sc: &Scenario, stream: &[Sent], arrivals: &[usize]) -> Outcome<T> {
    let format = sc.kind.format();
    let tracking = Tracking::for_format(format, 1)
        .unwrap()
        .with_clock(clock(sc));
    let mut order = StreamOrder::new(tracking, sc.window);
    let mut sink = Sink::<T>::new(sc);
    let mut released = Vec::new();
    let mut counts = Counts::default();
    let take = |released: &mut Vec<Released<usize>>, sink: &mut Sink<T>, counts: &mut Counts| {
        for r in released.drain(..) {
            count(counts, &r);
            if r.deliver {
                let bytes = &stream[r.item].bytes;
                let info = format.parse(bytes).unwrap();
                let mut d = DatagramIn::new(&bytes[info.payload()]);
                d.gap = r.gap;
                d.restart = matches!(r.event, SeqEvent::First | SeqEvent::Resync);
                d.timestamp = info.timestamp;
                d.eob = info.eob;
                d.seq = info.seq;
                sink.push(&d);
            }
        }
    };
    for &i in arrivals {
        let bytes = &stream[i].bytes;
        let info = format.parse(bytes).unwrap();
        let mut p = tracking.packet(&info);
        if order.needs_fingerprint() {
            p.fingerprint = Some(fingerprint(&bytes[info.payload()]));
        }
        let w = order.widen(&p);
        counts.reordered += order.push(w, &p, i, &mut released);
        take(&mut released, &mut sink, &mut counts);
    }
    order.flush_all(&mut released);
    take(&mut released, &mut sink, &mut counts);
    sink.out.counts = counts;
    sink.out
}

/// The same datagrams sent over loopback into an engine (mio, one thread), its deliveries
/// depacketized.
pub fn run_engine<T: Sample>(sc: &Scenario, stream: &[Sent], arrivals: &[usize]) -> Outcome<T> {
    let format = sc.kind.format();
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.format = format;
    cfg.slots = 2048;
    cfg.slot_size = 2048;
    cfg.reorder_window = sc.window;
    // Nothing may be given up on by the clock: only the datagrams decide.
    cfg.reorder_timeout = Duration::from_secs(30);
    cfg.clock = clock(sc);
    let mut engine = Engine::start(cfg).unwrap();
    let sent = arrivals.len() as u64;
    let sender = send(stream, arrivals, engine.local_addr());
    let mut sink = Sink::<T>::new(sc);
    let start = Instant::now();
    let take = |engine: &mut Engine, sink: &mut Sink<T>, wait: bool| {
        let d = if wait {
            engine.recv_timeout(Duration::from_millis(20))
        } else {
            engine.try_recv()
        };
        let Some(d) = d else { return false };
        sink.push(&DatagramIn::from_datagram(&d));
        true
    };
    loop {
        // Everything taken from the kernel: what is held for a missing predecessor is
        // released by the stop below (the reorder timeout is long on purpose).
        if !take(&mut engine, &mut sink, true)
            && sender.is_finished()
            && engine.stats().received >= sent
        {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no end: {sc:?}");
    }
    sender.join().unwrap();
    engine.stop();
    while take(&mut engine, &mut sink, false) {}
    let s = engine.shutdown();
    assert_eq!(
        s.kernel_drops + s.overflow + s.truncated + s.malformed,
        0,
        "{s}"
    );
    sink.out.counts = engine_counts(&s);
    sink.out
}

/// The same datagrams sent over loopback into an in-place receiver (payloads scattered
/// straight into lent buffers), its buffers' items and tags concatenated. The buffers' size
/// comes from the scenario, a few datagrams each, so that gaps fall on buffer ends too.
pub fn run_inplace<T: Sample>(sc: &Scenario, stream: &[Sent], arrivals: &[usize]) -> Outcome<T> {
    let (cfg, buffer_items) = inplace_config::<T>(sc);
    let buffers = cfg.buffers;
    let mut rx = InPlaceReceiver::<T, Vec<T>>::start(cfg).unwrap();
    for _ in 0..buffers {
        rx.give(vec![T::default(); buffer_items]).unwrap();
    }
    let mut out = Outcome::<T>::default();
    let s = drive(rx, stream, arrivals, stall(sc), |f, rx| {
        add_tags(&mut out.tags, out.items.len(), &f.tags);
        out.items.extend_from_slice(&f.buffer[..f.items]);
        if let Some(rx) = rx {
            rx.give(f.buffer).unwrap();
        }
    });
    out.counts = engine_counts(&s);
    out
}

/// An in-place receiver's configuration for `sc`, and the items of each buffer.
pub fn inplace_config<T: Sample>(sc: &Scenario) -> (InPlaceConfig<T>, usize) {
    let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    engine.backend = Backend::Recvmmsg;
    engine.format = sc.kind.format();
    engine.slot_size = 2048;
    engine.reorder_window = sc.window;
    // What is held when the stream ends is given up on by the clock while buffers still
    // come back (at the stop no buffer would come back for the zeros of a long gap); a
    // stall of a second mid-stream would be needed to make the clock decide earlier.
    engine.reorder_timeout = Duration::from_secs(1);
    engine.clock = clock(sc);
    let buffer_items = sc.spp * (1 + (sc.first_seq % 9) as usize) + (sc.first_seq % 5) as usize;
    // Room for a whole window (and more) in the buffers lent: what is held when the stream
    // ends is written at the stop, when the consumer returns no more buffers.
    let buffers = ((sc.window + 8) * sc.spp).div_ceil(buffer_items) + 3;
    let cfg = InPlaceConfig {
        engine,
        decoder: Decoder::new(sc.enc.wire(sc.kind.format())).unwrap(),
        depacketizer: depacketizer_config(sc),
        buffers,
    };
    (cfg, buffer_items)
}

/// For a third of the scenarios, the number of buffers after which the consumer keeps
/// what it takes for a while (`drive`): the receiver runs out of buffers mid-stream.
pub fn stall(sc: &Scenario) -> Option<usize> {
    sc.first_seq
        .is_multiple_of(3)
        .then_some((sc.first_seq % 4) as usize)
}

/// Sends the datagrams to `rx` and hands each buffer it fills to `keep` (with the
/// receiver, to lend more) until every datagram was decided on and no buffer came for a
/// while; then shuts it down, hands over what it still had (without a receiver) and
/// returns its counters, checked for losses on the way. With `stall`, after that many
/// buffers the consumer keeps the buffers it takes for 30 ms before it hands them to `keep`
/// (in order), as a flowgraph that falls behind does.
pub fn drive<T: Sample, B: ItemBuffer<T>>(
    mut rx: InPlaceReceiver<T, B>,
    stream: &[Sent],
    arrivals: &[usize],
    stall: Option<usize>,
    mut keep: impl FnMut(Filled<B>, Option<&mut InPlaceReceiver<T, B>>),
) -> Stats {
    let sent = arrivals.len() as u64;
    let sender = send(stream, arrivals, rx.local_addr());
    let start = Instant::now();
    let mut quiet = None;
    let (mut taken, mut until, mut kept) = (0, None, Vec::new());
    loop {
        rx.receive(Duration::from_millis(20));
        let mut any = false;
        while let Some(f) = rx.take() {
            any = true;
            if stall == Some(taken) && until.is_none() {
                until = Some(Instant::now() + Duration::from_millis(30));
            }
            taken += 1;
            kept.push(f);
        }
        if until.is_none_or(|u| Instant::now() >= u) {
            for f in kept.drain(..) {
                keep(f, Some(&mut rx));
            }
        }
        // Every datagram decided on (delivered or not), then no buffer for a while: the
        // zeros of a long gap may still be coming, one buffer at a time, after the last
        // datagram was decided (measured from the last buffer, so that a stall of the
        // receive thread on a loaded machine does not end the run early).
        if any {
            quiet = None;
        }
        let st = rx.stats();
        if sender.is_finished()
            && st.received >= sent
            && st.delivered + st.duplicates + st.late >= sent
        {
            let since = *quiet.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_millis(200) {
                break;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no end");
    }
    sender.join().unwrap();
    let (s, _, rest) = rx.shutdown();
    for f in kept.into_iter().chain(rest) {
        keep(f, None);
    }
    assert_eq!(
        s.kernel_drops + s.overflow + s.truncated + s.malformed,
        0,
        "{s}"
    );
    s
}

/// Compares an outcome with the model, item by item; the message says where they part.
pub fn check<T: Sample>(sc: &Scenario, want: &Expected, got: &Outcome<T>) -> Result<(), String> {
    let item = |e: &Option<u64>| {
        e.and_then(|n| carried(sc.content, n))
            .map_or(T::default(), |c| T::of(c, sc.enc))
    };
    let n = want.items.len().max(got.items.len());
    if let Some(k) = (0..n).find(|&k| want.items.get(k).map(item) != got.items.get(k).copied()) {
        return Err(format!(
            "item {k} of {} (want {}): want {:?}, got {:?}\ncounts want {:?}\n       got  {:?}\n{}",
            got.items.len(),
            want.items.len(),
            want.items.get(k),
            got.items.get(k),
            want.counts,
            got.counts,
            sc.brief(),
        ));
    }
    let mut a = want.tags.clone();
    let mut b = got.tags.clone();
    a.sort();
    b.sort();
    if a != b {
        let first = a
            .iter()
            .zip(&b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        return Err(format!(
            "tags differ from #{first}: want {:?}, got {:?} (of {} / {})\n{}",
            a.get(first),
            b.get(first),
            a.len(),
            b.len(),
            sc.brief(),
        ));
    }
    // A receiver that learns the rates may flag more than the model, which knows them: a
    // count or size its ratio cannot yet prove (a loss of 65 536 packets sized by a ratio
    // 16 pairs old). Never fewer, and every item, tag and other counter as the model says.
    let mut counts = got.counts;
    if !sc.clock.configured && counts.ambiguous >= want.counts.ambiguous {
        counts.ambiguous = want.counts.ambiguous;
    }
    if want.counts != counts {
        return Err(format!(
            "counts: want {:?}\n        got  {:?}\n{}",
            want.counts,
            got.counts,
            sc.brief(),
        ));
    }
    Ok(())
}

/// What a scenario runs through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Through {
    /// The sequence layer and depacketizer by hand.
    Pure,
    /// An engine over loopback.
    Engine,
    /// An in-place receiver over loopback.
    InPlace,
    /// An in-place receiver filling consecutive windows of one memory, as the zero-copy
    /// `UdpSource` lends them (`model/windows.rs`).
    Windows,
}

/// Runs `sc` through `run` with the item type of its encoding and checks it.
pub fn run_and_check(sc: &Scenario, through: Through) -> Result<(), String> {
    let stream = sc.stream();
    let arrivals = sc.arrivals(&stream);
    let want = super::reference::expect(sc, &stream, &arrivals);
    fn go<T: Sample>(
        sc: &Scenario,
        stream: &[Sent],
        arrivals: &[usize],
        want: &Expected,
        through: Through,
    ) -> Result<(), String> {
        let got = match through {
            Through::Pure => run_pure::<T>(sc, stream, arrivals),
            Through::Engine => run_engine::<T>(sc, stream, arrivals),
            Through::InPlace => run_inplace::<T>(sc, stream, arrivals),
            Through::Windows => super::windows::run::<T>(sc, stream, arrivals, want.items.len()),
        };
        check(sc, want, &got)
    }
    match sc.enc {
        _ if sc.float => go::<Complex<f32>>(sc, &stream, &arrivals, &want, through),
        Enc::Sc16 => go::<Complex<i16>>(sc, &stream, &arrivals, &want, through),
        Enc::Sc8 => go::<Complex<i8>>(sc, &stream, &arrivals, &want, through),
        Enc::Fc32 => go::<Complex<f32>>(sc, &stream, &arrivals, &want, through),
    }
}

/// Prints, arrival by arrival, what the model and the library made of each packet: the first
/// thing to look at when a case fails.
pub fn trace(sc: &Scenario) {
    let stream = sc.stream();
    let arrivals = sc.arrivals(&stream);
    let model = super::reference::perceived(sc, &stream, &arrivals);
    let format = sc.kind.format();
    let tracking = Tracking::for_format(format, 1)
        .unwrap()
        .with_clock(clock(sc));
    let mut order = StreamOrder::<usize>::new(tracking, sc.window);
    let mut out = Vec::new();
    for (k, &i) in arrivals.iter().enumerate() {
        let s = &stream[i];
        let info = format.parse(&s.bytes).unwrap();
        let mut p = tracking.packet(&info);
        if order.needs_fingerprint() {
            p.fingerprint = Some(fingerprint(&s.bytes[info.payload()]));
        }
        let w = order.widen(&p);
        order.push(w, &p, i, &mut out);
        let events: Vec<String> = out
            .drain(..)
            .map(|r| format!("{}:{:?}", r.item, r.event))
            .collect();
        eprintln!(
            "#{k} sent {i} counter {} first {} time {} n {} | model {:?} | lib ext {} start {:?} amb {} restart {} -> {} [{w:?}] ticks {:?}",
            s.counter,
            s.first,
            s.time,
            s.samples,
            model[k],
            w.ext,
            w.start,
            w.ambiguous,
            w.restart,
            events.join(" "),
            p.ticks,
        );
    }
}
