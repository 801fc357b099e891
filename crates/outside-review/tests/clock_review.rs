//! Outside review: how the sequence/timestamp layer, the engine and the in-place receiver
//! handle a misbehaving device clock and network, written from the README and the rustdoc
//! only.
//!
//! long: one harness (streams, the engine and in-place runs, the expected outcome) and the
//! review's 108 cases on it, as the reviewer wrote them; split, each part would repeat it.
//!
//! Every stream is a RAMP: sample `i` of the sender carries the value `i + 1` (as a
//! little-endian `u32`, decoded with `WireFormat::Plain` into `u32` items, 4 bytes a sample
//! as sc16), so any lost, duplicated, shifted or zero-filled sample is visible. Packets go
//! over loopback (127.0.0.1) to an `Engine` started inline (the caller's thread receives),
//! and each delivered datagram goes through `DatagramIn::from_datagram` into a
//! `Depacketizer` with zero-fill; a subset also goes through the `InPlaceReceiver`.
//!
//! Device time is kept as a sample position `pos` (50 Msps): CHDR stamps `pos * 4` ticks of
//! a 200 MHz clock; VRT sample count stamps `pos`; VRT picoseconds stamps `pos * 20000` ps
//! split into integer UTC seconds and picoseconds.
//!
//! Expected results are computed from what the README and the rustdoc of `seq` (module
//! table and rules), `SeqExtender` and `Stats` promise; the comment above each case says which
//! sentence.

use fsdr_net_io::depacketizer::{
    DatagramIn, Depacketizer, DepacketizerConfig, DepacketizerStats, GapEvent, TagKind,
};
use fsdr_net_io::format::DataHeader;
use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
use fsdr_net_io::sample::{Decoder, WireFormat};
use fsdr_net_io::seq::StreamClock;
use fsdr_net_io::{Backend, Engine, EngineConfig, Format, Stats};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

/// Samples per (full) packet.
const S: usize = 100;
/// Where the device's time starts (samples).
const P0: u64 = 1_000_000;
const SAMPLE_RATE: f64 = 50e6;
const CHDR_TICK_RATE: f64 = 200e6;
const TICKS_PER_SAMPLE: u64 = 4;
const PS_PER_SAMPLE: u64 = 20_000;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fmt {
    /// CHDR with timestamps (ticks).
    Chdr,
    /// CHDR without timestamps.
    ChdrNoTs,
    /// VRT, TSF = sample count.
    VrtCount,
    /// VRT, TSI = UTC seconds, TSF = real time (picoseconds), as DIFI.
    VrtPs,
    /// VRT without timestamps.
    VrtNone,
}

impl Fmt {
    fn format(self) -> Format {
        match self {
            Fmt::Chdr | Fmt::ChdrNoTs => Format::Chdr,
            _ => Format::Vrt,
        }
    }
    fn has_time(self) -> bool {
        !matches!(self, Fmt::ChdrNoTs | Fmt::VrtNone)
    }
    /// The time tag's ticks and tick rate for a sample position.
    fn tag_ticks(self, pos: u64) -> u64 {
        match self {
            Fmt::Chdr => pos * TICKS_PER_SAMPLE,
            _ => pos,
        }
    }
    fn tick_rate(self) -> f64 {
        match self {
            Fmt::Chdr | Fmt::ChdrNoTs => CHDR_TICK_RATE,
            _ => SAMPLE_RATE,
        }
    }
}

#[derive(Clone, Debug)]
struct Pkt {
    seq: u64,
    pos: u64,
    eob: bool,
    payload: Vec<u32>,
}

impl Pkt {
    fn encode(&self, fmt: Fmt) -> Vec<u8> {
        let mut h = DataHeader {
            seq: self.seq,
            eob: self.eob,
            ..Default::default()
        };
        match fmt {
            Fmt::Chdr => h.timestamp = Some(self.pos * TICKS_PER_SAMPLE),
            Fmt::VrtCount => h.timestamp = Some(self.pos),
            Fmt::VrtPs => {
                let ps = self.pos * PS_PER_SAMPLE;
                h.utc_seconds = Some((ps / 1_000_000_000_000) as u32);
                h.timestamp = Some(ps % 1_000_000_000_000);
            }
            Fmt::ChdrNoTs | Fmt::VrtNone => {}
        }
        let f = fmt.format();
        let hl = h.header_len(f);
        let pl = self.payload.len() * 4;
        let mut dg = vec![0u8; hl + pl + f.trailer_len(self.eob)];
        let n = f.emit_header(&mut dg, &h).expect("emit header");
        assert_eq!(n, hl);
        for (i, v) in self.payload.iter().enumerate() {
            dg[hl + 4 * i..hl + 4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        dg
    }
}

/// The sender: a device with a counter, a clock and a ramp.
struct Dev {
    seq: u64,
    pos: u64,
    val: u32,
}

impl Dev {
    fn new(fmt: Fmt) -> Self {
        Dev {
            seq: fmt.format().first_seq(),
            pos: P0,
            val: 1,
        }
    }
    /// The next packet of `n` samples (ramp payload), advancing counter, clock and ramp.
    fn pkt_n(&mut self, n: usize) -> Pkt {
        let p = Pkt {
            seq: self.seq,
            pos: self.pos,
            eob: false,
            payload: (0..n as u32).map(|i| self.val + i).collect(),
        };
        self.seq += 1;
        self.pos += n as u64;
        self.val += n as u32;
        p
    }
    fn pkt(&mut self) -> Pkt {
        self.pkt_n(S)
    }
    fn pkts(&mut self, k: usize) -> Vec<Pkt> {
        (0..k).map(|_| self.pkt()).collect()
    }
}

fn ramp(p: &Pkt) -> &[u32] {
    &p.payload
}

#[derive(Debug, Default)]
struct Out {
    items: Vec<u32>,
    /// (index, ticks) of every Time tag.
    times: Vec<(usize, u64)>,
    /// index of every Eob tag.
    eobs: Vec<usize>,
    /// (index, frames, items) of every Missed tag.
    missed_tags: Vec<(usize, u64, u64)>,
    gaps: Vec<GapEvent>,
    stats: Stats,
    dp: DepacketizerStats,
    restarts_seen: usize,
}

impl Out {
    fn summary(&self) -> String {
        let s = &self.stats;
        format!(
            "items {} zeros {} | delivered {} missed {} dups {} late {} resyncs {} ambiguous {} reordered {} clock_dropped {} kernel_drops {} | times {:?} | missed tags {:?} | gaps {:?} | eobs {:?}",
            self.items.len(),
            self.dp.zeros_inserted,
            s.delivered,
            s.missed,
            s.duplicates,
            s.late,
            s.resyncs,
            s.ambiguous,
            s.reordered,
            s.clock_dropped,
            s.kernel_drops,
            &self.times[..self.times.len().min(12)],
            &self.missed_tags[..self.missed_tags.len().min(12)],
            self.gaps
                .iter()
                .take(12)
                .map(|g| (g.frames, g.items, g.ambiguous))
                .collect::<Vec<_>>(),
            &self.eobs[..self.eobs.len().min(12)],
        )
    }
    fn tag(&mut self, base: usize, kind: TagKind) {
        match kind {
            TagKind::Time(t) => self.times.push((base, t.ticks)),
            TagKind::Eob => self.eobs.push(base),
            TagKind::Missed { frames, items } => self.missed_tags.push((base, frames, items)),
            TagKind::Setting { .. } => {}
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Mode {
    fmt: Fmt,
    /// Rates told (`EngineConfig::clock` with tick and sample rate); otherwise learnt.
    told: bool,
    /// `EngineConfig::reorder_window`; `None`: the format's usual (64 CHDR, 7 VRT with
    /// time, 3 VRT without).
    window: Option<usize>,
}

fn m(fmt: Fmt, told: bool) -> Mode {
    Mode {
        fmt,
        told,
        window: None,
    }
}

fn engine_config(mode: Mode) -> EngineConfig {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.format = mode.fmt.format();
    cfg.reorder_window = mode.window.unwrap_or(match mode.fmt {
        Fmt::Chdr | Fmt::ChdrNoTs => 64,
        Fmt::VrtCount | Fmt::VrtPs => 7,
        Fmt::VrtNone => 3,
    });
    // Deterministic: a missing datagram is waited for until the window passes it or the
    // stream ends (stop releases what is held).
    cfg.reorder_timeout = Duration::from_secs(30);
    cfg.slot_size = 2048;
    cfg.clock = if mode.told {
        StreamClock {
            tick_rate: Some(mode.fmt.tick_rate()),
            sample_rate: Some(SAMPLE_RATE),
            bytes_per_sample: 4,
        }
    } else {
        StreamClock {
            tick_rate: None,
            sample_rate: None,
            bytes_per_sample: 4,
        }
    };
    cfg
}

fn dp_config(mode: Mode) -> DepacketizerConfig {
    DepacketizerConfig {
        zero_fill: true,
        tick_rate: mode.fmt.has_time().then(|| mode.fmt.tick_rate()),
        // Ticks per item in both modes (time tags also where time jumps): "rates learnt"
        // is about the engine's StreamClock only.
        ticks_per_item: mode.fmt.has_time().then_some(match mode.fmt {
            Fmt::Chdr => TICKS_PER_SAMPLE as f64,
            _ => 1.0,
        }),
        ..Default::default()
    }
}

const CHUNK: usize = 1 << 16;

fn push_dp(dp: &mut Depacketizer<u32>, d: &DatagramIn<'_>, out: &mut Out) {
    let mut pushed = false;
    loop {
        let mut buf = vec![0u32; CHUNK];
        let mut w = dp.writer(&mut buf);
        if !pushed {
            w.push(d);
            pushed = true;
        }
        out.gaps.extend(w.take_gaps());
        let (n, tags) = w.finish();
        let base = out.items.len();
        for t in tags {
            out.tag(base + t.index, t.kind);
        }
        out.items.extend_from_slice(&buf[..n]);
        if !dp.pending() {
            break;
        }
    }
}

/// Sends `pkts` in order over loopback to an inline engine and depacketizes what it
/// delivers.
fn run_engine(mode: Mode, pkts: &[Pkt]) -> Out {
    let mut engine = Engine::start_inline(engine_config(mode)).expect("engine");
    let to = engine.local_addr();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut dp =
        Depacketizer::<u32>::try_new(Decoder::new(WireFormat::Plain).unwrap(), dp_config(mode))
            .unwrap();
    let mut out = Out::default();
    let mut sent = 0u64;
    for chunk in pkts.chunks(16) {
        for p in chunk {
            tx.send_to(&p.encode(mode.fmt), to).unwrap();
            sent += 1;
        }
        let t0 = Instant::now();
        loop {
            while let Some(d) = engine.try_recv() {
                let din = DatagramIn::from_datagram(&d);
                if din.restart {
                    out.restarts_seen += 1;
                }
                push_dp(&mut dp, &din, &mut out);
            }
            let s = engine.stats();
            if s.received + s.kernel_drops >= sent {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "engine stalled");
        }
    }
    engine.stop();
    while let Some(d) = engine.try_recv() {
        let din = DatagramIn::from_datagram(&d);
        if din.restart {
            out.restarts_seen += 1;
        }
        push_dp(&mut dp, &din, &mut out);
    }
    out.stats = engine.shutdown();
    out.dp = dp.stats();
    assert_eq!(out.stats.kernel_drops, 0, "loopback dropped: test invalid");
    assert_eq!(out.stats.received, pkts.len() as u64);
    assert_eq!(
        out.stats.accounted(),
        pkts.len() as u64,
        "{}",
        out.summary()
    );
    out
}

/// The same stream through an `InPlaceReceiver` (own receive thread, `Vec<u32>` buffers).
fn run_inplace(mode: Mode, pkts: &[Pkt]) -> Out {
    let mut engine = engine_config(mode);
    engine.backend = Backend::Recvmmsg;
    let cfg = InPlaceConfig {
        engine,
        decoder: Decoder::<u32>::new(WireFormat::Plain).unwrap(),
        depacketizer: dp_config(mode),
        buffers: 64,
    };
    let mut rx = InPlaceReceiver::<u32, Vec<u32>>::start(cfg).expect("in-place receiver");
    for _ in 0..64 {
        rx.give(vec![0u32; 8192]).unwrap();
    }
    let to = rx.local_addr();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut out = Out::default();
    let take = |rx: &mut InPlaceReceiver<u32, Vec<u32>>, out: &mut Out| {
        while let Some(f) = rx.take() {
            let base = out.items.len();
            for t in f.tags {
                out.tag(base + t.index, t.kind);
            }
            out.gaps.extend(f.gaps);
            out.items.extend_from_slice(&f.buffer[..f.items]);
            let mut b = f.buffer;
            b.iter_mut().for_each(|x| *x = 0);
            let _ = rx.give(b);
        }
    };
    let mut sent = 0u64;
    for chunk in pkts.chunks(16) {
        for p in chunk {
            tx.send_to(&p.encode(mode.fmt), to).unwrap();
            sent += 1;
        }
        let t0 = Instant::now();
        loop {
            take(&mut rx, &mut out);
            let s = rx.stats();
            if s.received + s.kernel_drops >= sent {
                break;
            }
            rx.notifier().wait_timeout(Duration::from_millis(1));
            assert!(t0.elapsed() < Duration::from_secs(5), "in-place stalled");
        }
    }
    // let the thread hand over what it holds
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(30) {
        rx.notifier().wait_timeout(Duration::from_millis(2));
        take(&mut rx, &mut out);
    }
    let (stats, dps, rest) = rx.shutdown();
    for f in rest {
        let base = out.items.len();
        for t in f.tags {
            out.tag(base + t.index, t.kind);
        }
        out.gaps.extend(f.gaps);
        out.items.extend_from_slice(&f.buffer[..f.items]);
    }
    out.stats = stats;
    out.dp = dps;
    assert_eq!(out.stats.kernel_drops, 0, "loopback dropped: test invalid");
    out
}

/// What must come out, built from the packets in the order the docs say they are delivered.
#[derive(Debug, Default, Clone)]
struct Exp {
    items: Vec<u32>,
    times: Vec<(usize, u64)>,
    eobs: Vec<usize>,
    missed_tags: Vec<(usize, u64, u64)>,
    missed: u64,
    duplicates: u64,
    late: u64,
    resyncs: u64,
    /// Some(true): at least one ambiguous; Some(false): none; None: not checked.
    ambiguous: Option<bool>,
}

impl Exp {
    /// A packet delivered; `time`: a time tag on its first item.
    fn deliver(&mut self, fmt: Fmt, p: &Pkt, time: bool) {
        if time && fmt.has_time() {
            self.times.push((self.items.len(), fmt.tag_ticks(p.pos)));
        }
        self.items.extend_from_slice(ramp(p));
        if p.eob {
            self.eobs.push(self.items.len() - 1);
        }
    }
    /// A gap of `frames` packets filled with `items` zeros before the next packet.
    fn zeros(&mut self, frames: u64, items: u64) {
        self.missed_tags.push((self.items.len(), frames, items));
        self.items.extend(std::iter::repeat_n(0, items as usize));
        self.missed += frames;
    }
}

fn first_diff(a: &[u32], b: &[u32]) -> String {
    let i = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    format!(
        "first difference at item {i}: got {:?}, want {:?}",
        &a[i..(i + 4).min(a.len())],
        &b[i..(i + 4).min(b.len())]
    )
}

thread_local! {
    /// In a loop test: the failures of `check` so far (every case runs, then `soft_end`).
    static SOFT: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

fn soft_begin() {
    SOFT.with(|s| *s.borrow_mut() = Some(Vec::new()));
}

fn soft_end() {
    let errs = SOFT.with(|s| s.borrow_mut().take()).unwrap_or_default();
    assert!(
        errs.is_empty(),
        "{} case(s) failed:\n{}",
        errs.len(),
        errs.join("\n")
    );
}

fn check(name: &str, out: &Out, exp: &Exp) {
    let mut errs = Vec::new();
    if out.items != exp.items {
        errs.push(format!(
            "items: got {} want {}; {}",
            out.items.len(),
            exp.items.len(),
            first_diff(&out.items, &exp.items)
        ));
    }
    if out.times != exp.times {
        errs.push(format!(
            "time tags: got {:?} want {:?}",
            out.times, exp.times
        ));
    }
    if out.eobs != exp.eobs {
        errs.push(format!("eob tags: got {:?} want {:?}", out.eobs, exp.eobs));
    }
    if out.missed_tags != exp.missed_tags {
        errs.push(format!(
            "missed tags: got {:?} want {:?}",
            out.missed_tags, exp.missed_tags
        ));
    }
    let s = &out.stats;
    for (n, g, w) in [
        ("missed", s.missed, exp.missed),
        ("duplicates", s.duplicates, exp.duplicates),
        ("late", s.late, exp.late),
        ("resyncs", s.resyncs, exp.resyncs),
    ] {
        if g != w {
            errs.push(format!("{n}: got {g} want {w}"));
        }
    }
    if let Some(a) = exp.ambiguous
        && (s.ambiguous > 0) != a
    {
        errs.push(format!(
            "ambiguous: got {} want {}",
            s.ambiguous,
            if a { ">0" } else { "0" }
        ));
    }
    if errs.is_empty() {
        return;
    }
    let msg = format!("{name}:\n  {}\n  out: {}", errs.join("\n  "), out.summary());
    let soft = SOFT.with(|s| {
        s.borrow_mut().as_mut().map(|v| {
            v.push(msg.clone());
        })
    });
    if soft.is_none() {
        panic!("{msg}");
    }
}

// ---------------------------------------------------------------------------------------
// 1. Device time set back.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
enum Counter {
    /// The counter goes on (a USRP's set_time_now while streaming).
    GoesOn,
    /// The counter restarts at the format's first number (stop, set time, start).
    Restarts,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Back {
    /// By this many packets.
    Packets(u64),
    /// To the stream's first stamp.
    ToStart,
    /// To time 0 (set_time_now(0)).
    ToZero,
}

/// `n` packets, the last with EOB when `eob`, then the device time set back, then `k` more.
fn set_back_stream(
    fmt: Fmt,
    n: usize,
    back: Back,
    eob: bool,
    counter: Counter,
    k: usize,
) -> Vec<Pkt> {
    let mut d = Dev::new(fmt);
    let mut v = d.pkts(n);
    v.last_mut().unwrap().eob = eob;
    d.pos = match back {
        Back::Packets(b) => d.pos - b * S as u64,
        Back::ToStart => P0,
        Back::ToZero => 0,
    };
    if counter == Counter::Restarts {
        d.seq = fmt.format().first_seq();
    }
    v.extend(d.pkts(k));
    v
}

/// Docs: a clock set back is "a restart, every sample delivered, rx_time at the new time"
/// (README, CHDR with timestamps; VRT "as CHDR") — unless the set-back stamp and counter
/// (mod the counter's period) are those of one of the last 1024 packets received: then
/// copies (`duplicates`) until the stream passes the newest (VRT row, and the rule "a
/// packet the time puts behind the newest one is a copy of the packet received at the
/// counter's number nearest to where the time puts it").
fn expect_set_back(fmt: Fmt, pkts: &[Pkt], n: usize) -> Exp {
    let period: u64 = match fmt.format() {
        Format::Chdr => 1 << 16,
        _ => 16,
    };
    let mut e = Exp {
        ambiguous: Some(false),
        ..Default::default()
    };
    for (i, p) in pkts[..n].iter().enumerate() {
        e.deliver(fmt, p, i == 0);
    }
    let newest_pos = pkts[n - 1].pos;
    // does the first packet after the set-back repeat stamp and counter of a packet among
    // the last 1024 received?
    let first_after = &pkts[n];
    let copy_of = pkts[..n]
        .iter()
        .enumerate()
        .rev()
        .take(1024)
        .find(|(_, q)| q.pos == first_after.pos && q.seq % period == first_after.seq % period);
    if copy_of.is_some() {
        // copies until past the newest, then in order
        let mut dups = 0;
        for p in &pkts[n..] {
            if p.pos <= newest_pos {
                dups += 1;
            } else {
                e.deliver(fmt, p, false);
            }
        }
        e.duplicates = dups;
    } else {
        e.resyncs = 1;
        for (j, p) in pkts[n..].iter().enumerate() {
            e.deliver(fmt, p, j == 0);
        }
    }
    e
}

fn set_back_case(mode: Mode, n: usize, back: Back, eob: bool, counter: Counter) {
    let pkts = set_back_stream(mode.fmt, n, back, eob, counter, 20);
    let out = run_engine(mode, &pkts);
    let exp = expect_set_back(mode.fmt, &pkts, n);
    check(
        &format!("{mode:?} n={n} back={back:?} eob={eob} counter={counter:?}"),
        &out,
        &exp,
    );
}

macro_rules! set_back_tests {
    ($($name:ident: $fmt:ident, $told:expr, $n:expr, $back:expr, $eob:expr, $counter:ident;)*) => {$(
        #[test]
        fn $name() {
            set_back_case(m(Fmt::$fmt, $told), $n, $back, $eob, Counter::$counter);
        }
    )*};
}

use Back::{Packets, ToStart, ToZero};

set_back_tests! {
    // CHDR, rates told
    back_chdr_told_1: Chdr, true, 66, Packets(1), false, GoesOn;
    back_chdr_told_1_eob: Chdr, true, 66, Packets(1), true, GoesOn;
    back_chdr_told_50: Chdr, true, 66, Packets(50), false, GoesOn;
    back_chdr_told_50_restart: Chdr, true, 66, Packets(50), false, Restarts;
    back_chdr_told_50_eob_restart: Chdr, true, 66, Packets(50), true, Restarts;
    back_chdr_told_start: Chdr, true, 66, ToStart, false, GoesOn;
    back_chdr_told_start_eob_restart: Chdr, true, 66, ToStart, true, Restarts;
    back_chdr_told_zero: Chdr, true, 66, ToZero, false, GoesOn;
    back_chdr_told_zero_eob_restart: Chdr, true, 66, ToZero, true, Restarts;
    back_chdr_told_700: Chdr, true, 2610, Packets(700), false, GoesOn;
    back_chdr_told_700_restart: Chdr, true, 2610, Packets(700), false, Restarts;
    back_chdr_told_2503: Chdr, true, 2610, Packets(2503), false, GoesOn;
    back_chdr_told_2503_eob_restart: Chdr, true, 2610, Packets(2503), true, Restarts;
    back_chdr_told_zero_long_eob_restart: Chdr, true, 2610, ToZero, true, Restarts;
    // CHDR, rates learnt
    back_chdr_learnt_1: Chdr, false, 66, Packets(1), false, GoesOn;
    back_chdr_learnt_50: Chdr, false, 66, Packets(50), false, GoesOn;
    back_chdr_learnt_50_eob_restart: Chdr, false, 66, Packets(50), true, Restarts;
    back_chdr_learnt_start: Chdr, false, 66, ToStart, false, GoesOn;
    back_chdr_learnt_zero_eob_restart: Chdr, false, 66, ToZero, true, Restarts;
    back_chdr_learnt_700: Chdr, false, 2610, Packets(700), false, GoesOn;
    back_chdr_learnt_2503_restart: Chdr, false, 2610, Packets(2503), false, Restarts;
    // VRT sample count (the format's own clock)
    back_vrtcount_1: VrtCount, true, 66, Packets(1), false, GoesOn;
    back_vrtcount_1_eob: VrtCount, true, 66, Packets(1), true, GoesOn;
    back_vrtcount_50: VrtCount, true, 66, Packets(50), false, GoesOn;
    back_vrtcount_50_restart_is_copy: VrtCount, true, 66, Packets(50), false, Restarts;
    back_vrtcount_16_is_copy: VrtCount, true, 66, Packets(16), false, GoesOn;
    back_vrtcount_start: VrtCount, true, 66, ToStart, false, GoesOn;
    back_vrtcount_start_restart_is_copy: VrtCount, true, 66, ToStart, true, Restarts;
    back_vrtcount_zero: VrtCount, true, 66, ToZero, false, GoesOn;
    back_vrtcount_700: VrtCount, true, 2610, Packets(700), false, GoesOn;
    back_vrtcount_700_restart: VrtCount, true, 2610, Packets(700), false, Restarts;
    back_vrtcount_2503: VrtCount, true, 2610, Packets(2503), true, GoesOn;
    back_vrtcount_start_long_restart: VrtCount, true, 2610, ToStart, false, Restarts;
    back_vrtcount_learnt_50: VrtCount, false, 66, Packets(50), false, GoesOn;
    // VRT picoseconds, rates told and learnt
    back_vrtps_told_1: VrtPs, true, 66, Packets(1), false, GoesOn;
    back_vrtps_told_50: VrtPs, true, 66, Packets(50), true, GoesOn;
    back_vrtps_told_start: VrtPs, true, 66, ToStart, false, GoesOn;
    back_vrtps_told_zero_eob_restart: VrtPs, true, 66, ToZero, true, Restarts;
    back_vrtps_told_700: VrtPs, true, 2610, Packets(700), false, GoesOn;
    back_vrtps_told_2503_restart: VrtPs, true, 2610, Packets(2503), false, Restarts;
    back_vrtps_learnt_1: VrtPs, false, 66, Packets(1), false, GoesOn;
    back_vrtps_learnt_50: VrtPs, false, 66, Packets(50), false, GoesOn;
    back_vrtps_learnt_50_eob: VrtPs, false, 66, Packets(50), true, GoesOn;
    back_vrtps_learnt_start: VrtPs, false, 66, ToStart, false, GoesOn;
    back_vrtps_learnt_700: VrtPs, false, 2610, Packets(700), false, GoesOn;
    back_vrtps_learnt_2503_restart: VrtPs, false, 2610, Packets(2503), false, Restarts;
}

/// The same set-backs through the in-place receiver: the docs say its counters are the
/// engine's and it takes the depacketizer's copying path for what does not fit; items,
/// tags and counters must equal the engine path's.
#[test]
fn back_inplace_matches_engine() {
    soft_begin();
    let cases = [
        (m(Fmt::Chdr, true), 66, Packets(50), false, Counter::GoesOn),
        (m(Fmt::Chdr, true), 66, ToZero, true, Counter::Restarts),
        (m(Fmt::Chdr, false), 66, Packets(1), false, Counter::GoesOn),
        (
            m(Fmt::VrtCount, true),
            66,
            Packets(50),
            false,
            Counter::GoesOn,
        ),
        (
            m(Fmt::VrtCount, true),
            66,
            Packets(16),
            false,
            Counter::GoesOn,
        ),
        (
            m(Fmt::VrtPs, true),
            2610,
            Packets(700),
            false,
            Counter::GoesOn,
        ),
    ];
    for (mode, n, back, eob, counter) in cases {
        let pkts = set_back_stream(mode.fmt, n, back, eob, counter, 20);
        let out = run_inplace(mode, &pkts);
        let exp = expect_set_back(mode.fmt, &pkts, n);
        check(
            &format!("in-place {mode:?} n={n} back={back:?} eob={eob} counter={counter:?}"),
            &out,
            &exp,
        );
    }
    soft_end();
}

// ---------------------------------------------------------------------------------------
// 2. Forward time jumps.
// ---------------------------------------------------------------------------------------

/// 10 packets, then the time jumps ahead by `jump` samples with the counter advancing by
/// `counter_step` (1: one on), then 10 more.
fn jump_stream(fmt: Fmt, jump: u64, counter_step: u64) -> Vec<Pkt> {
    let mut d = Dev::new(fmt);
    let mut v = d.pkts(10);
    d.pos += jump;
    d.seq += counter_step - 1;
    v.extend(d.pkts(10));
    v
}

/// What the docs promise for a jump: `lost` packets and `zeros` zero items (None: a time
/// discontinuity, tagged, not filled); `amb`: flagged.
fn expect_jump(fmt: Fmt, pkts: &[Pkt], gap: Option<(u64, u64)>, amb: bool) -> Exp {
    let mut e = Exp {
        ambiguous: Some(amb),
        ..Default::default()
    };
    for (i, p) in pkts[..10].iter().enumerate() {
        e.deliver(fmt, p, i == 0);
    }
    if let Some((frames, items)) = gap {
        e.zeros(frames, items);
    }
    for (j, p) in pkts[10..].iter().enumerate() {
        e.deliver(fmt, p, j == 0);
    }
    e
}

fn jump_case(mode: Mode, jump: u64, step: u64, gap: Option<(u64, u64)>, amb: bool) {
    let pkts = jump_stream(mode.fmt, jump, step);
    let out = run_engine(mode, &pkts);
    check(
        &format!("{mode:?} jump={jump} samples, counter +{step}"),
        &out,
        &expect_jump(mode.fmt, &pkts, gap, amb),
    );
}

macro_rules! jump_tests {
    ($($name:ident: $fmt:ident, $told:expr, $jump:expr, $step:expr, $gap:expr, $amb:expr;)*) => {$(
        #[test]
        fn $name() {
            jump_case(m(Fmt::$fmt, $told), $jump, $step, $gap, $amb);
        }
    )*};
}

const P16: u64 = 16 * S as u64;
const P65536: u64 = 65536 * S as u64;

jump_tests! {
    // CHDR told, counter one on: "a jump of time with the counter one ahead is a time
    // discontinuity (tagged, not filled)"; "a step ahead, counter one on, that 65 536·m lost
    // could fill: that loss" (each lost packet holds at least a sample, at most the largest),
    // "both ambiguous"; zero-fill "exact from the time".
    jump_chdr_told_1: Chdr, true, 1, 1, None, false;
    jump_chdr_told_50: Chdr, true, 50, 1, None, false;
    jump_chdr_told_1pkt: Chdr, true, S as u64, 1, None, false;
    jump_chdr_told_16pkt: Chdr, true, P16, 1, None, false;
    jump_chdr_told_70000: Chdr, true, 70_000, 1, Some((65536, 70_000)), true;
    jump_chdr_told_100000: Chdr, true, 100_000, 1, Some((65536, 100_000)), true;
    // counter agreeing: exact loss; a loss other than whole packets under a told clock
    // (a short packet lost) flagged.
    jump_chdr_told_1_agree: Chdr, true, 1, 2, Some((1, 1)), true;
    jump_chdr_told_50_agree: Chdr, true, 50, 2, Some((1, 50)), true;
    jump_chdr_told_1pkt_agree: Chdr, true, S as u64, 2, Some((1, S as u64)), false;
    jump_chdr_told_16pkt_agree: Chdr, true, P16, 17, Some((16, P16)), false;
    jump_chdr_told_70000_agree: Chdr, true, 70_000, 701, Some((700, 70_000)), false;
    jump_chdr_told_100000_agree: Chdr, true, 100_000, 1001, Some((1000, 100_000)), false;
    // CHDR learnt (a run of 10 consecutive packets pinned 1 tick a byte)
    jump_chdr_learnt_1: Chdr, false, 1, 1, None, false;
    jump_chdr_learnt_16pkt: Chdr, false, P16, 1, None, false;
    jump_chdr_learnt_70000: Chdr, false, 70_000, 1, Some((65536, 70_000)), true;
    jump_chdr_learnt_16pkt_agree: Chdr, false, P16, 17, Some((16, P16)), false;
    jump_chdr_learnt_100000_agree: Chdr, false, 100_000, 1001, Some((1000, 100_000)), false;
    // VRT sample count: "a time step ahead is 16·m lost packets where they could fill it
    // (flagged)"; 16·m whole packets: "exact, any length (16·m too)".
    jump_vrtcount_1: VrtCount, true, 1, 1, None, false;
    jump_vrtcount_50: VrtCount, true, 50, 1, Some((16, 50)), true;
    jump_vrtcount_1pkt: VrtCount, true, S as u64, 1, Some((16, S as u64)), true;
    jump_vrtcount_16pkt: VrtCount, true, P16, 1, Some((16, P16)), false;
    jump_vrtcount_70000: VrtCount, true, 70_000, 1, Some((704, 70_000)), true;
    jump_vrtcount_100000: VrtCount, true, 100_000, 1, Some((1008, 100_000)), true;
    jump_vrtcount_65536pkt: VrtCount, true, P65536, 1, Some((65536, P65536)), false;
    // counter agreeing: sample count sizes a short packet lost "exactly" (not flagged)
    jump_vrtcount_1_agree: VrtCount, true, 1, 2, Some((1, 1)), false;
    jump_vrtcount_50_agree: VrtCount, true, 50, 2, Some((1, 50)), false;
    jump_vrtcount_1pkt_agree: VrtCount, true, S as u64, 2, Some((1, S as u64)), false;
    jump_vrtcount_70000_agree: VrtCount, true, 70_000, 701, Some((700, 70_000)), false;
    jump_vrtcount_100000_agree: VrtCount, true, 100_000, 1001, Some((1000, 100_000)), false;
    // VRT picoseconds, told
    jump_vrtps_told_1: VrtPs, true, 1, 1, None, false;
    jump_vrtps_told_50: VrtPs, true, 50, 1, Some((16, 50)), true;
    jump_vrtps_told_16pkt: VrtPs, true, P16, 1, Some((16, P16)), false;
    jump_vrtps_told_70000: VrtPs, true, 70_000, 1, Some((704, 70_000)), true;
    jump_vrtps_told_1pkt_agree: VrtPs, true, S as u64, 2, Some((1, S as u64)), false;
    jump_vrtps_told_50_agree: VrtPs, true, 50, 2, Some((1, 50)), true;
    jump_vrtps_told_100000_agree: VrtPs, true, 100_000, 1001, Some((1000, 100_000)), false;
    // VRT picoseconds, learnt
    jump_vrtps_learnt_1pkt_agree: VrtPs, false, S as u64, 2, Some((1, S as u64)), false;
    jump_vrtps_learnt_16pkt: VrtPs, false, P16, 1, Some((16, P16)), false;
}

/// CHDR: "a loss beside a time step (more time than the lost packets hold, no period more
/// fits it) is the counter's count, flagged, zero-filled for the packets" — 2 lost by the
/// counter, the time 10 packets ahead.
#[test]
fn jump_chdr_told_loss_beside_step() {
    let mode = m(Fmt::Chdr, true);
    let pkts = jump_stream(Fmt::Chdr, 10 * S as u64, 3);
    let out = run_engine(mode, &pkts);
    check(
        "chdr told: 2 lost beside a 10-packet step",
        &out,
        &expect_jump(Fmt::Chdr, &pkts, Some((2, 2 * S as u64)), true),
    );
}

// ---------------------------------------------------------------------------------------
// 3. Losses, late packets and duplicates among the very first packets.
// ---------------------------------------------------------------------------------------

/// Packet 0, then packets 1..=lost lost, then 30 more.
fn early_loss_stream(fmt: Fmt, lost: usize) -> (Vec<Pkt>, Vec<Pkt>) {
    let mut d = Dev::new(fmt);
    let all = d.pkts(1 + lost + 30);
    let mut sent = vec![all[0].clone()];
    sent.extend_from_slice(&all[1 + lost..]);
    (sent, all)
}

fn expect_early_loss(fmt: Fmt, sent: &[Pkt], lost: u64, amb: bool) -> Exp {
    let mut e = Exp {
        ambiguous: Some(amb),
        ..Default::default()
    };
    e.deliver(fmt, &sent[0], true);
    e.zeros(lost, lost * S as u64);
    for (j, p) in sent[1..].iter().enumerate() {
        e.deliver(fmt, p, j == 0);
    }
    e
}

/// Rates told (or the format's own sample count): "exact, any length (16·m too)" for
/// CHDR and VRT with time: every loss right after the first packet counted and filled.
#[test]
fn early_loss_told() {
    soft_begin();
    for fmt in [Fmt::Chdr, Fmt::VrtCount, Fmt::VrtPs] {
        for lost in 2..=17usize {
            let (sent, _) = early_loss_stream(fmt, lost);
            let out = run_engine(m(fmt, true), &sent);
            check(
                &format!("{fmt:?} told: packets 1..={lost} lost"),
                &out,
                &expect_early_loss(fmt, &sent, lost as u64, false),
            );
        }
    }
    soft_end();
}

/// CHDR, rates learnt: before a rate "the counter alone sizes a loss" (16-bit: far below
/// half the period), lost × the largest.
#[test]
fn early_loss_chdr_learnt() {
    soft_begin();
    for lost in 2..=17usize {
        let (sent, _) = early_loss_stream(Fmt::Chdr, lost);
        let out = run_engine(m(Fmt::Chdr, false), &sent);
        check(
            &format!("CHDR learnt: packets 1..={lost} lost"),
            &out,
            &expect_early_loss(Fmt::Chdr, &sent, lost as u64, false),
        );
    }
    soft_end();
}

/// VRT picoseconds, rates learnt, 4-bit counter: before a rate "on a 4-bit counter every
/// loss so counted is flagged", "a loss of half the counter's period or more is not counted
/// (ambiguous once later packets show it)". So: every delivered sample once and in order;
/// a loss counted exactly, or the stream flagged ambiguous. Never a duplicate or late.
#[test]
fn early_loss_vrtps_learnt() {
    let mut report = Vec::new();
    for lost in 2..=17usize {
        let (sent, _) = early_loss_stream(Fmt::VrtPs, lost);
        let out = run_engine(m(Fmt::VrtPs, false), &sent);
        let s = &out.stats;
        let nonzero: Vec<u32> = out.items.iter().copied().filter(|&x| x != 0).collect();
        let want: Vec<u32> = sent
            .iter()
            .flat_map(|p| p.payload.iter().copied())
            .collect();
        let exact = s.missed == lost as u64 && out.dp.zeros_inserted == (lost * S) as u64;
        report.push(format!("lost {lost}: {}", out.summary()));
        assert_eq!(
            nonzero, want,
            "VrtPs learnt, {lost} lost: samples lost or repeated"
        );
        assert_eq!(
            (s.duplicates, s.late),
            (0, 0),
            "lost {lost}: {}",
            out.summary()
        );
        assert!(
            exact || s.ambiguous > 0,
            "VrtPs learnt, packets 1..={lost} lost: counted {} (zeros {}) without a flag: {}",
            s.missed,
            out.dp.zeros_inserted,
            out.summary()
        );
    }
    eprintln!("{}", report.join("\n"));
}

/// The first packet late: sent after packet 1 (and after 1..=10). It arrives behind the
/// stream's first packet, "within half the counter's period of it": a late one. With the
/// reorder window the first datagram received is already out, so: `late` 1, nothing missed,
/// the stream from packet 1 on.
#[test]
fn early_first_packet_late() {
    soft_begin();
    for (fmt, told) in [
        (Fmt::Chdr, true),
        (Fmt::Chdr, false),
        (Fmt::VrtCount, true),
        (Fmt::VrtPs, true),
        (Fmt::VrtPs, false),
    ] {
        for after in [1usize, 5] {
            let mut d = Dev::new(fmt);
            let all = d.pkts(30);
            let mut sent: Vec<Pkt> = all[1..=after].to_vec();
            sent.push(all[0].clone());
            sent.extend_from_slice(&all[after + 1..]);
            let out = run_engine(m(fmt, told), &sent);
            let mut e = Exp {
                ambiguous: Some(false),
                late: 1,
                ..Default::default()
            };
            for (j, p) in all[1..].iter().enumerate() {
                e.deliver(fmt, p, j == 0);
            }
            check(
                &format!("{fmt:?} told={told}: first packet sent after {after}"),
                &out,
                &e,
            );
        }
    }
    soft_end();
}

/// The first packet duplicated (at once, and after packet 3): "exact: a copy carries its
/// stamp" → `duplicates` 1, every sample once.
#[test]
fn early_first_packet_duplicated() {
    soft_begin();
    for (fmt, told) in [
        (Fmt::Chdr, true),
        (Fmt::Chdr, false),
        (Fmt::VrtCount, true),
        (Fmt::VrtPs, false),
        (Fmt::VrtNone, false),
    ] {
        early_first_dup(fmt, told);
    }
    soft_end();
}

/// CHDR without timestamps: the README says duplicates are "exact" for it, and a copy of
/// a unique (ramp) payload is proven by its fingerprint; the copy of packet 0 is taken for a
/// sender restart ("0 out of turn") instead: its 100 samples are delivered twice (and, when
/// the copy comes after packet 3, 2 packets of zeros follow).
#[test]
fn early_first_packet_duplicated_chdr_no_ts() {
    soft_begin();
    early_first_dup(Fmt::ChdrNoTs, false);
    soft_end();
}

fn early_first_dup(fmt: Fmt, told: bool) {
    {
        for at in [1usize, 3] {
            let mut d = Dev::new(fmt);
            let all = d.pkts(30);
            let mut sent: Vec<Pkt> = all[..at].to_vec();
            sent.push(all[0].clone());
            sent.extend_from_slice(&all[at..]);
            let out = run_engine(m(fmt, told), &sent);
            let mut e = Exp {
                ambiguous: Some(false),
                duplicates: 1,
                ..Default::default()
            };
            for (j, p) in all.iter().enumerate() {
                e.deliver(fmt, p, j == 0);
            }
            check(
                &format!("{fmt:?} told={told}: first packet again after {at}"),
                &out,
                &e,
            );
        }
    }
}

/// Packet 0, then 1..=lost lost, and packet 1 arriving late after packet lost+1 (a late
/// packet among the first ones, rates told): with the reorder window it is put back in
/// place, the gap shrinks by one packet.
#[test]
fn early_loss_then_late_fill() {
    soft_begin();
    for fmt in [Fmt::Chdr, Fmt::VrtCount] {
        for lost in [2usize, 5] {
            let mut d = Dev::new(fmt);
            let all = d.pkts(1 + lost + 20);
            let mut sent = vec![all[0].clone(), all[1 + lost].clone(), all[1].clone()];
            sent.extend_from_slice(&all[2 + lost..]);
            let out = run_engine(m(fmt, true), &sent);
            let mut e = Exp {
                ambiguous: Some(false),
                ..Default::default()
            };
            e.deliver(fmt, &all[0], true);
            e.deliver(fmt, &all[1], false);
            e.zeros(lost as u64 - 1, ((lost - 1) * S) as u64);
            for (j, p) in all[1 + lost..].iter().enumerate() {
                e.deliver(fmt, p, j == 0);
            }
            check(
                &format!("{fmt:?}: 1..={lost} lost, 1 late within the window"),
                &out,
                &e,
            );
            assert!(out.stats.reordered >= 1, "{}", out.summary());
        }
    }
    soft_end();
}

// ---------------------------------------------------------------------------------------
// 4. Repeating payloads.
// ---------------------------------------------------------------------------------------

/// A stream whose payload of packet k is `pay(k)`.
fn stream_with(fmt: Fmt, n: usize, pay: impl Fn(usize) -> Vec<u32>) -> Vec<Pkt> {
    let mut d = Dev::new(fmt);
    (0..n)
        .map(|k| {
            let mut p = d.pkt();
            p.payload = pay(k);
            p
        })
        .collect()
}

fn payload_kind(kind: &str, k: usize) -> Vec<u32> {
    match kind {
        "zero" => vec![0; S],
        "const" => vec![7; S],
        "period4" => (0..S as u32)
            .map(|i| 1000 * (k as u32 % 4) + i + 1)
            .collect(),
        "ramp" => (0..S as u32).map(|i| (k * S) as u32 + i + 1).collect(),
        _ => unreachable!(),
    }
}

/// VRT without timestamps (4-bit counter), `lost` packets lost after packet 20 of 40.
/// Docs: "lost mod 16 (16·m is invisible); 8–15 (mod 16) flagged ambiguous" and, for a
/// number behind: "a duplicate only when the whole payload's fingerprint equals the one
/// received there and no other remembered position received it (repeating payloads prove
/// nothing). Otherwise, where something was received there, new data after a long loss:
/// delivered, counted ambiguous." Lost items: "lost packets × the largest payload".
#[test]
fn repeat_vrt_none_losses() {
    soft_begin();
    vrt_none_losses(&[1, 3, 8, 10, 15, 16, 17]);
    soft_end();
}

/// 7 lost on a 4-bit counter without time: the counter is 8 on, exactly half the period,
/// as near behind as ahead. Counted (7, 700 zeros) and flagged. (Found by this review: the
/// README said "8–15" flagged; it now says "7–15".)
#[test]
fn repeat_vrt_none_7_lost_flag() {
    soft_begin();
    vrt_none_losses(&[7]);
    soft_end();
}

fn vrt_none_losses(losts: &[usize]) {
    for kind in ["zero", "const", "period4", "ramp"] {
        for &lost in losts {
            let all = stream_with(Fmt::VrtNone, 40 + lost, |k| payload_kind(kind, k));
            let mut sent = all[..20].to_vec();
            sent.extend_from_slice(&all[20 + lost..]);
            let out = run_engine(m(Fmt::VrtNone, false), &sent);
            let mut e = Exp::default();
            for p in &all[..20] {
                e.deliver(Fmt::VrtNone, p, false);
            }
            let counted = (lost % 16) as u64;
            if counted > 0 {
                e.zeros(counted, counted * S as u64);
            }
            for p in &all[20 + lost..] {
                e.deliver(Fmt::VrtNone, p, false);
            }
            e.ambiguous = Some((7..16).contains(&(lost % 16)));
            check(&format!("VRT no time, {kind}, {lost} lost"), &out, &e);
        }
    }
}

/// A copy of a packet whose payload repeats (silence, a constant, a payload every 4th
/// packet repeats) proves nothing: "copies of repeating payloads are new data after a loss,
/// ambiguous" — never a declared duplicate. A copy of a ramp packet (unique payload) is a
/// proven duplicate. VRT without timestamps; the copy of packet 20 comes right after it.
#[test]
fn repeat_vrt_none_copies() {
    for kind in ["zero", "const", "period4", "ramp"] {
        let all = stream_with(Fmt::VrtNone, 40, |k| payload_kind(kind, k));
        let mut sent = all[..21].to_vec();
        sent.push(all[20].clone());
        sent.extend_from_slice(&all[21..]);
        let out = run_engine(m(Fmt::VrtNone, false), &sent);
        let s = &out.stats;
        if kind == "ramp" {
            let mut e = Exp {
                duplicates: 1,
                ambiguous: Some(false),
                ..Default::default()
            };
            for p in &all {
                e.deliver(Fmt::VrtNone, p, false);
            }
            check("VRT no time, ramp copy", &out, &e);
        } else {
            // not proven: delivered as new data, flagged
            assert_eq!(
                s.duplicates,
                0,
                "{kind}: a duplicate declared without proof: {}",
                out.summary()
            );
            assert!(s.ambiguous > 0, "{kind}: not flagged: {}", out.summary());
            assert_eq!(s.delivered, 41, "{kind}: {}", out.summary());
        }
    }
}

/// Silence with a genuine copy on formats with a 16-bit counter or timestamps: CHDR
/// without timestamps ("duplicate: exact"), CHDR and VRT with time ("a copy carries its
/// stamp").
#[test]
fn repeat_silence_copy_other_formats() {
    soft_begin();
    for (fmt, told) in [
        (Fmt::Chdr, true),
        (Fmt::Chdr, false),
        (Fmt::VrtCount, true),
        (Fmt::VrtPs, false),
    ] {
        silence_copies(fmt, told);
    }
    soft_end();
}

/// CHDR without timestamps, silence, packet 20 sent twice (then packet 18 again): the
/// README's table says duplicates are "exact" for CHDR without timestamps; the rules for a
/// short counter without time say a copy of a repeating payload proves nothing and is "new
/// data after a loss … flagged". What comes out is the latter, with the loss a whole 16-bit
/// period: 65535 packets (6 553 500 zeros) inserted for one duplicated datagram.
#[test]
fn repeat_silence_copy_chdr_no_ts() {
    soft_begin();
    silence_copies(Fmt::ChdrNoTs, false);
    soft_end();
}

fn silence_copies(fmt: Fmt, told: bool) {
    {
        let all = stream_with(fmt, 40, |_| vec![0; S]);
        let mut sent = all[..21].to_vec();
        sent.push(all[20].clone());
        sent.push(all[18].clone());
        sent.extend_from_slice(&all[21..]);
        let out = run_engine(m(fmt, told), &sent);
        let mut e = Exp {
            duplicates: 2,
            ambiguous: Some(false),
            ..Default::default()
        };
        for (j, p) in all.iter().enumerate() {
            e.deliver(fmt, p, j == 0);
        }
        check(
            &format!("{fmt:?} told={told}: silence, copies of 20 and 18"),
            &out,
            &e,
        );
    }
}

/// Silence with losses on formats with time: losses exact whatever the payload.
#[test]
fn repeat_silence_losses_with_time() {
    soft_begin();
    for (fmt, told) in [(Fmt::Chdr, true), (Fmt::VrtCount, true), (Fmt::VrtPs, true)] {
        for lost in [1usize, 8, 15, 16, 17] {
            let all = stream_with(fmt, 40 + lost, |_| vec![0; S]);
            let mut sent = all[..20].to_vec();
            sent.extend_from_slice(&all[20 + lost..]);
            let out = run_engine(m(fmt, told), &sent);
            let mut e = Exp {
                ambiguous: Some(false),
                ..Default::default()
            };
            for (j, p) in all[..20].iter().enumerate() {
                e.deliver(fmt, p, j == 0);
            }
            e.zeros(lost as u64, (lost * S) as u64);
            for (j, p) in all[20 + lost..].iter().enumerate() {
                e.deliver(fmt, p, j == 0);
            }
            check(&format!("{fmt:?}: silence, {lost} lost"), &out, &e);
        }
    }
    soft_end();
}

// ---------------------------------------------------------------------------------------
// 5. Packets of varying length.
// ---------------------------------------------------------------------------------------

/// 10 packets of S, packet 10 of 150 samples, then 10 of S; packet 10 sent after 11 and 12.
fn long_late_stream(fmt: Fmt) -> (Vec<Pkt>, Vec<Pkt>) {
    let mut d = Dev::new(fmt);
    let mut all = d.pkts(10);
    all.push(d.pkt_n(150));
    all.extend(d.pkts(10));
    let mut sent = all[..10].to_vec();
    sent.push(all[11].clone());
    sent.push(all[12].clone());
    sent.push(all[10].clone());
    sent.extend_from_slice(&all[13..]);
    (sent, all)
}

/// Within the reorder window the long packet is put back in place: every sample, in order.
#[test]
fn length_long_packet_reordered() {
    soft_begin();
    for (fmt, told) in [(Fmt::Chdr, true), (Fmt::Chdr, false)] {
        let (sent, all) = long_late_stream(fmt);
        let out = run_engine(m(fmt, told), &sent);
        let mut e = Exp {
            ambiguous: Some(false),
            ..Default::default()
        };
        for (j, p) in all.iter().enumerate() {
            e.deliver(fmt, p, j == 0);
        }
        check(
            &format!("{fmt:?} told={told}: long packet 2 late, reordered"),
            &out,
            &e,
        );
    }
    soft_end();
}

/// No reorder window: the long packet is late. Before it, the gap: 1 packet by the counter
/// but 150 samples by the time, more than the largest packet so far holds (100). Docs (rule
/// 1): "with the counter further ahead, where only a period more was too many for the time,
/// the counter's count beside a time jump (or lost packets longer than any seen), flagged,
/// its gap sized from the packets": 1 lost, 100 zeros, flagged; a time tag on packet 11;
/// the long packet then `late`.
#[test]
fn length_long_packet_late_no_window() {
    soft_begin();
    for (fmt, told) in [(Fmt::Chdr, true)] {
        let (sent, all) = long_late_stream(fmt);
        let mode = Mode {
            fmt,
            told,
            window: Some(0),
        };
        let out = run_engine(mode, &sent);
        let mut e = Exp {
            ambiguous: Some(true),
            late: 1,
            ..Default::default()
        };
        for (j, p) in all[..10].iter().enumerate() {
            e.deliver(fmt, p, j == 0);
        }
        e.zeros(1, S as u64);
        for (j, p) in all[11..].iter().enumerate() {
            e.deliver(fmt, p, j == 0);
        }
        check(
            &format!("{fmt:?} told={told}: long packet late, no window"),
            &out,
            &e,
        );
    }
    soft_end();
}

/// Short packets delivered: positions go on after them, no gap, no tag.
#[test]
fn length_short_packets_in_order() {
    soft_begin();
    for (fmt, told) in [
        (Fmt::Chdr, true),
        (Fmt::Chdr, false),
        (Fmt::VrtCount, true),
        (Fmt::VrtPs, true),
        (Fmt::VrtNone, false),
    ] {
        let mut d = Dev::new(fmt);
        let mut all = d.pkts(20);
        all.push(d.pkt_n(30));
        all.extend(d.pkts(5));
        all.push(d.pkt_n(1));
        all.extend(d.pkts(10));
        let out = run_engine(m(fmt, told), &all);
        let mut e = Exp {
            ambiguous: Some(false),
            ..Default::default()
        };
        for (j, p) in all.iter().enumerate() {
            e.deliver(fmt, p, j == 0);
        }
        check(
            &format!("{fmt:?} told={told}: short packets in order"),
            &out,
            &e,
        );
    }
    soft_end();
}

/// A short packet (30 samples) lost: the time sizes it (30 zeros); told rates and a learnt
/// ratio flag "time other than whole packets" (a short packet lost looks like rates a little
/// off); the VRT sample count sizes it "exactly" (not flagged). Without time: "lost packets
/// × the largest payload" (100 zeros).
#[test]
fn length_short_packet_lost() {
    soft_begin();
    for (fmt, told, zeros, amb) in [
        (Fmt::Chdr, true, 30u64, true),
        (Fmt::Chdr, false, 30, true),
        (Fmt::VrtCount, true, 30, false),
        (Fmt::VrtPs, true, 30, true),
        (Fmt::VrtNone, false, S as u64, false),
        (Fmt::ChdrNoTs, false, S as u64, false),
    ] {
        let mut d = Dev::new(fmt);
        let mut all = d.pkts(20);
        all.push(d.pkt_n(30));
        all.extend(d.pkts(10));
        let mut sent = all[..20].to_vec();
        sent.extend_from_slice(&all[21..]);
        let out = run_engine(m(fmt, told), &sent);
        let mut e = Exp {
            ambiguous: Some(amb),
            ..Default::default()
        };
        for (j, p) in all[..20].iter().enumerate() {
            e.deliver(fmt, p, j == 0);
        }
        e.zeros(1, zeros);
        for (j, p) in all[21..].iter().enumerate() {
            e.deliver(fmt, p, j == 0);
        }
        check(&format!("{fmt:?} told={told}: short packet lost"), &out, &e);
    }
    soft_end();
}

/// Sanity of the harness: a clean stream through engine and in-place receiver.
#[test]
fn clean_stream_engine_and_inplace() {
    soft_begin();
    for (fmt, told) in [(Fmt::Chdr, true), (Fmt::VrtPs, true), (Fmt::VrtNone, false)] {
        let mut d = Dev::new(fmt);
        let mut all = d.pkts(50);
        all[49].eob = true;
        let mut e = Exp {
            ambiguous: Some(false),
            ..Default::default()
        };
        for (j, p) in all.iter().enumerate() {
            e.deliver(fmt, p, j == 0);
        }
        check(
            &format!("{fmt:?} clean (engine)"),
            &run_engine(m(fmt, told), &all),
            &e,
        );
        check(
            &format!("{fmt:?} clean (in place)"),
            &run_inplace(m(fmt, told), &all),
            &e,
        );
    }
    soft_end();
}

/// VRT (4-bit counter), the long packet 10 (150 samples) sent after 11 and 12, with the
/// usual window (7) and none. Rule 1: packet 11 is 2 on by the counter and 150 samples on by
/// the time; one packet holds at most 100, so k = 18: 17 lost "where they could fill it",
/// 150 zeros, flagged — beyond the window of 7, so 11 goes out. Packet 10 then lies behind
/// the newest, nothing received at its number (10) and its time between its received
/// neighbours' (9 and 11): "a late one" — `late` 1, dropped; the stream goes on in order.
/// What comes out instead: packet 10 is taken for a clock set back (resyncs 1), delivered
/// after packet 12 with a time tag going back, and packet 13 then gets a spurious gap of 2
/// packets (200 zeros): 350 zeros in all for 150 samples lost, samples out of order.
#[test]
#[ignore = "finding, a limitation the README states (VRT row: a long packet late: a restart): its successors' gap read as 16 more lost, then a resync, a spurious 2-packet gap after it"]
fn length_long_packet_late_vrt() {
    soft_begin();
    for (fmt, told) in [
        (Fmt::VrtCount, true),
        (Fmt::VrtPs, true),
        (Fmt::VrtPs, false),
    ] {
        for window in [None, Some(0)] {
            let (sent, all) = long_late_stream(fmt);
            let out = run_engine(Mode { fmt, told, window }, &sent);
            let mut e = Exp {
                ambiguous: Some(true),
                late: 1,
                ..Default::default()
            };
            for (j, p) in all[..10].iter().enumerate() {
                e.deliver(fmt, p, j == 0);
            }
            e.zeros(17, 150);
            for (j, p) in all[11..].iter().enumerate() {
                e.deliver(fmt, p, j == 0);
            }
            check(
                &format!("{fmt:?} told={told} window={window:?}: long packet late"),
                &out,
                &e,
            );
        }
    }
    soft_end();
}

/// CHDR told, a step of exactly 65536 packets with the counter one on. README: "a step
/// ahead, counter one on, that 65 536·m lost could fill: that loss (`ambiguous` unless
/// whole packets)": 65536 lost, 6 553 600 zeros, unflagged (the 70 000- and
/// 100 000-sample steps are flagged). (Found by this review: the README said "both
/// `ambiguous`".)
#[test]
fn jump_chdr_told_65536pkt() {
    jump_case(m(Fmt::Chdr, true), P65536, 1, Some((65536, P65536)), false);
}

/// CHDR told, 2610 packets, then counter restarted at 0 and time set back (no end of burst
/// before): to the stream's start, to time 0, by 2000 packets; rates told and learnt. The
/// first packets' positions are beyond the 1024 remembered, so neither a copy (not provable)
/// nor late (something was received there); README: "counter and time disagree (time back):
/// a restart, every sample delivered, rx_time at the new time"; rule 4: 0 out of turn
/// "restarts the stream where the time does not place it … except … where the stamps put it
/// behind the newest one", then rule 1: neither copy nor late → restart.
/// To time 0 and by 2000 packets this holds (restart, every sample delivered).
#[test]
fn back_chdr_long_counter_restart_no_eob() {
    soft_begin();
    for told in [true, false] {
        for back in [ToZero, Packets(2000)] {
            let mode = m(Fmt::Chdr, told);
            let pkts = set_back_stream(Fmt::Chdr, 2610, back, false, Counter::Restarts, 20);
            let out = run_engine(mode, &pkts);
            check(
                &format!("{mode:?} n=2610 back={back:?} counter restarts, no eob"),
                &out,
                &expect_set_back(Fmt::Chdr, &pkts, 2610),
            );
        }
    }
    soft_end();
}

/// The same, set back exactly to the stream's first stamp (a USRP that streamed from
/// set_time_now(0) at time 0, then stop, set_time_now(0), start): also after an end of
/// burst ("0 out of turn after an end of burst" is a restart). What comes out: every packet
/// after the set-back is dropped as `late` (20 of 20, 2000 samples lost), no restart, no
/// flag — with or without the end of burst, rates told or learnt. (With 66 packets before,
/// inside the 1024 remembered, the end-of-burst case is a restart as promised.)
#[test]
fn back_chdr_long_counter_restart_to_start() {
    soft_begin();
    for told in [true, false] {
        for eob in [false, true] {
            let mode = m(Fmt::Chdr, told);
            let pkts = set_back_stream(Fmt::Chdr, 2610, ToStart, eob, Counter::Restarts, 20);
            let out = run_engine(mode, &pkts);
            check(
                &format!("{mode:?} n=2610 back=ToStart eob={eob} counter restarts"),
                &out,
                &expect_set_back(Fmt::Chdr, &pkts, 2610),
            );
        }
    }
    soft_end();
}
