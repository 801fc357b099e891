//! The review's exactness defects, each as the user met it: datagrams of a known stream sent
//! over loopback into an [`Engine`], then through a [`Depacketizer`] with zero-fill; every
//! output item is compared with the sample the sender put there (a ramp), and every counter
//! with what was sent.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use fsdr_net_io::depacketizer::{
    DatagramIn, Depacketizer, DepacketizerConfig, DepacketizerStats, GapEvent, ItemTag, TagKind,
};
use fsdr_net_io::sample::{Decoder, Encoder, WireFormat};
use fsdr_net_io::{DataHeader, Engine, EngineConfig, Format, Stats};
use num_complex::Complex;

type C = Complex<i16>;

/// The ramp sample at stream position `n` (never zero, so zero-fill is told apart).
fn ramp(n: u64) -> C {
    let v = n + 1;
    C::new(v as u16 as i16, (v >> 16) as u16 as i16)
}

/// One packet of the sender: its counter, timestamp, first sample and sample count.
#[derive(Clone, Copy, Debug)]
struct Pkt {
    seq: u64,
    ts: Option<u64>,
    first: u64,
    n: usize,
    eob: bool,
}

fn datagram(format: Format, p: &Pkt) -> Vec<u8> {
    let h = format.header_len(p.ts.is_some());
    let mut dg = vec![0u8; h + 4 * p.n];
    let fields = DataHeader {
        seq: p.seq,
        timestamp: p.ts,
        eob: p.eob,
        ..Default::default()
    };
    format.emit_header(&mut dg, &fields).unwrap();
    let samples: Vec<C> = (0..p.n as u64).map(|k| ramp(p.first + k)).collect();
    Encoder::<C>::new(WireFormat::native(format))
        .unwrap()
        .encode(&samples, &mut dg[h..]);
    dg
}

/// A stream of `count` packets of `spp` samples from sample 0, counter from `seq0`,
/// timestamps `ticks(first sample)` when given.
fn stream(count: u64, spp: usize, seq0: u64, ticks: Option<&dyn Fn(u64) -> u64>) -> Vec<Pkt> {
    (0..count)
        .map(|k| {
            let first = k * spp as u64;
            Pkt {
                seq: seq0 + k,
                ts: ticks.map(|t| t(first)),
                first,
                n: spp,
                eob: false,
            }
        })
        .collect()
}

struct Outcome {
    items: Vec<C>,
    tags: Vec<ItemTag>,
    gaps: Vec<GapEvent>,
    stats: Stats,
    dp: DepacketizerStats,
}

/// Sends `datagrams` into an engine for `format` (changed by `tune`) and depacketizes what
/// it delivers with zero-fill and `dp_cfg`.
fn run(
    format: Format,
    tune: impl FnOnce(&mut EngineConfig),
    dp_cfg: DepacketizerConfig,
    datagrams: Vec<Vec<u8>>,
) -> Outcome {
    let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.format = format;
    cfg.slots = 4096;
    tune(&mut cfg);
    let mut engine = Engine::start(cfg).unwrap();
    let to = engine.local_addr();
    let sent = datagrams.len() as u64;
    let sender = std::thread::spawn(move || {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for (i, d) in datagrams.iter().enumerate() {
            tx.send_to(d, to).unwrap();
            if i % 256 == 255 {
                std::thread::sleep(Duration::from_micros(300));
            }
        }
    });
    let decoder = Decoder::<C>::new(WireFormat::native(format)).unwrap();
    let mut dp = Depacketizer::new(
        decoder,
        DepacketizerConfig {
            zero_fill: true,
            ..dp_cfg
        },
    );
    let mut out = vec![C::default(); 1 << 16];
    let (mut items, mut tags, mut gaps) = (Vec::new(), Vec::new(), Vec::new());
    let mut take = |engine: &mut Engine, dp: &mut Depacketizer<C>, wait: bool| {
        let mut w = dp.writer(&mut out);
        let mut any = false;
        loop {
            if !w.fits(9216) {
                break;
            }
            let d = if wait && !any {
                engine.recv_timeout(Duration::from_millis(20))
            } else {
                engine.try_recv()
            };
            let Some(d) = d else { break };
            any = true;
            if d.info().class == fsdr_net_io::PacketClass::Context {
                let ctx = fsdr_net_io::format::vrt::context::parse_context(d.bytes()).unwrap();
                if let Some(f) = ctx.rf_ref_freq_hz {
                    w.tag_at(
                        TagKind::Setting {
                            name: "rx_freq",
                            value: f,
                        },
                        d.info().timestamp,
                    );
                }
                continue;
            }
            w.push(&DatagramIn::from_datagram(&d));
        }
        gaps.extend(w.take_gaps());
        let base = items.len();
        let (n, t) = w.finish();
        items.extend_from_slice(&out[..n]);
        tags.extend(t.into_iter().map(|t| ItemTag {
            index: t.index + base,
            kind: t.kind,
        }));
        any || n > 0
    };
    let start = Instant::now();
    loop {
        let got = take(&mut engine, &mut dp, true);
        if !got && sender.is_finished() && engine.stats().accounted() >= sent {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "stream never drained"
        );
    }
    sender.join().unwrap();
    engine.stop();
    while take(&mut engine, &mut dp, false) {}
    Outcome {
        items,
        tags,
        gaps,
        stats: engine.shutdown(),
        dp: dp.stats(),
    }
}

/// What the output must be: the samples of the received packets at their positions, zeros
/// for the lost ones, from the first received packet's first sample.
fn expected(sent: &[Pkt], lost: impl Fn(usize) -> bool) -> Vec<C> {
    let received: Vec<&Pkt> = sent
        .iter()
        .enumerate()
        .filter(|(i, _)| !lost(*i))
        .map(|(_, p)| p)
        .collect();
    let (Some(&first), Some(&last)) = (received.first(), received.last()) else {
        return Vec::new();
    };
    let mut out = vec![C::default(); (last.first + last.n as u64 - first.first) as usize];
    for p in &received {
        for k in 0..p.n as u64 {
            out[(p.first + k - first.first) as usize] = ramp(p.first + k);
        }
    }
    out
}

fn bytes(format: Format, sent: &[Pkt], lost: impl Fn(usize) -> bool) -> Vec<Vec<u8>> {
    sent.iter()
        .enumerate()
        .filter(|(i, _)| !lost(*i))
        .map(|(_, p)| datagram(format, p))
        .collect()
}

fn vrt_dp() -> DepacketizerConfig {
    DepacketizerConfig {
        tick_rate: Some(10e6),
        ticks_per_item: Some(1.0),
        ..Default::default()
    }
}

/// Defect 1: a 4-bit VRT counter with sample-count timestamps, a loss of exactly 16·m
/// packets: the counter moves by one, the timestamp says 16·m + 1.
#[test]
fn vrt_losses_of_sixteen_packets_are_counted_and_filled() {
    let sent = stream(120, 100, 0, Some(&|s| s));
    for (a, b) in [(10usize, 26usize), (40, 72), (90, 106)] {
        let lost = |i: usize| (a..b).contains(&i);
        let o = run(
            Format::Vrt,
            |_| {},
            vrt_dp(),
            bytes(Format::Vrt, &sent, lost),
        );
        assert_eq!(o.stats.missed, (b - a) as u64, "lost {a}..{b}");
        assert_eq!(o.dp.zeros_inserted, 100 * (b - a) as u64);
        assert_eq!(o.items, expected(&sent, lost), "lost {a}..{b}");
        assert_eq!(o.stats.duplicates + o.stats.late, 0);
    }
}

/// Defect 1, random bursts: every lost packet counted, no good packet dropped.
#[test]
fn vrt_random_loss_bursts_are_exact() {
    let sent = stream(1500, 64, 0, Some(&|s| s));
    let mut noise = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        noise ^= noise << 13;
        noise ^= noise >> 7;
        noise ^= noise << 17;
        noise
    };
    let mut lost = vec![false; sent.len()];
    let mut i = 5;
    while i < sent.len() - 5 {
        let burst = (next() % 40) as usize;
        for l in lost.iter_mut().skip(i).take(burst) {
            *l = true;
        }
        i += burst + 1 + (next() % 30) as usize;
    }
    let lost_n = lost.iter().filter(|&&l| l).count() as u64;
    let o = run(
        Format::Vrt,
        |_| {},
        vrt_dp(),
        bytes(Format::Vrt, &sent, |i| lost[i]),
    );
    assert_eq!(o.stats.missed, lost_n);
    assert_eq!(o.stats.delivered, sent.len() as u64 - lost_n);
    assert_eq!(o.items, expected(&sent, |i| lost[i]));
}

/// Defect 2: a 4-bit counter without timestamps and a loss of 8–15 packets: the packets
/// after it are new data (their bytes differ from what was received at those numbers), so
/// they are delivered, and the loss is counted and flagged ambiguous.
#[test]
fn vrt_without_time_never_discards_data_that_might_be_new() {
    let sent = stream(50, 100, 0, None);
    for burst in 8..16usize {
        let lost = |i: usize| (20..20 + burst).contains(&i);
        let o = run(
            Format::Vrt,
            |c| c.reorder_window = 0,
            DepacketizerConfig::default(),
            bytes(Format::Vrt, &sent, lost),
        );
        assert_eq!(o.stats.delivered, (50 - burst) as u64, "burst {burst}");
        assert_eq!(o.stats.duplicates, 0, "burst {burst}");
        assert_eq!(o.stats.missed, burst as u64, "burst {burst}");
        // Counted modulo 16 from the counter: 8–15 behind is only possible as new data.
        assert_eq!(o.stats.ambiguous, 1, "burst {burst}");
        assert!(o.gaps.iter().any(|g| g.ambiguous), "burst {burst}");
        assert_eq!(o.items, expected(&sent, lost), "burst {burst}");
    }
    // A true duplicate is still one.
    let mut dgs = bytes(Format::Vrt, &sent, |_| false);
    dgs.insert(31, dgs[30].clone());
    let o = run(
        Format::Vrt,
        |c| c.reorder_window = 0,
        DepacketizerConfig::default(),
        dgs,
    );
    assert_eq!((o.stats.duplicates, o.stats.ambiguous), (1, 0));
    assert_eq!(o.items, expected(&sent, |_| false));
}

/// Defect 3: CHDR without timestamps across the 16-bit wrap: 65535 lost is one missed
/// frame (not a restart), and 0 overtaking 65535 is a reorder (not a duplicate).
#[test]
fn chdr_without_time_across_the_wrap() {
    let sent = stream(60, 16, 65_510, None);
    let wrap = sent.iter().position(|p| p.seq % 65_536 == 65_535).unwrap();
    let lost = |i: usize| i == wrap;
    let o = run(
        Format::Chdr,
        |_| {},
        DepacketizerConfig::default(),
        bytes(Format::Chdr, &sent, lost),
    );
    assert_eq!((o.stats.missed, o.stats.resyncs), (1, 0));
    assert_eq!(o.items, expected(&sent, lost));
    // 0 overtakes 65535.
    let mut dgs = bytes(Format::Chdr, &sent, |_| false);
    dgs.swap(wrap, wrap + 1);
    let o = run(Format::Chdr, |_| {}, DepacketizerConfig::default(), dgs);
    assert_eq!(
        (
            o.stats.missed,
            o.stats.duplicates,
            o.stats.resyncs,
            o.stats.reordered
        ),
        (0, 0, 0, 1)
    );
    assert_eq!(o.items, expected(&sent, |_| false));
}

/// Defect 4: a short packet before a loss: the loss is measured from its end in packets of
/// the stream's size (2 lost, not 18).
#[test]
fn a_short_packet_before_a_loss_does_not_inflate_it() {
    let mut sent = Vec::new();
    let mut first = 0;
    for k in 0..30u64 {
        let n = if k == 10 { 10 } else { 200 };
        sent.push(Pkt {
            seq: k,
            ts: Some(first),
            first,
            n,
            eob: false,
        });
        first += n as u64;
    }
    let lost = |i: usize| i == 11 || i == 12;
    let o = run(
        Format::Vrt,
        |_| {},
        vrt_dp(),
        bytes(Format::Vrt, &sent, lost),
    );
    assert_eq!(o.stats.missed, 2);
    assert_eq!(o.dp.zeros_inserted, 400);
    assert_eq!(o.items, expected(&sent, lost));
}

/// Defect 5: 200 MHz ticks and 30.72 Msps (625/96 ticks per sample): a 1000-packet gap is
/// zero-filled to the exact sample, rate learnt from the stream.
#[test]
fn a_long_gap_at_a_non_integer_tick_ratio_is_filled_exactly() {
    // round(s × 625/96), halves up, as a sender stamps.
    let t = |s: u64| ((2 * s as u128 * 625 + 96) / 192) as u64;
    let sent = stream(4000, 364, 0, Some(&t));
    let lost = |i: usize| (2500..3500).contains(&i);
    let dp = DepacketizerConfig {
        tick_rate: Some(200e6),
        ticks_per_item: Some(200e6 / 30.72e6),
        ..Default::default()
    };
    let o = run(Format::Chdr, |_| {}, dp, bytes(Format::Chdr, &sent, lost));
    assert_eq!(o.stats.missed, 1000);
    assert_eq!(o.dp.zeros_inserted, 364_000);
    assert_eq!(o.items, expected(&sent, lost));
}

/// Defect 6: at a non-integer ticks per sample a continuous stream has one time tag.
#[test]
fn a_continuous_stream_has_one_time_tag_at_any_tick_ratio() {
    let t = |s: u64| ((2 * s as u128 * 625 + 96) / 192) as u64;
    let sent = stream(1000, 364, 0, Some(&t));
    let dp = DepacketizerConfig {
        tick_rate: Some(200e6),
        ticks_per_item: Some(200e6 / 30.72e6),
        ..Default::default()
    };
    let o = run(
        Format::Chdr,
        |_| {},
        dp,
        bytes(Format::Chdr, &sent, |_| false),
    );
    let times: Vec<usize> = o
        .tags
        .iter()
        .filter(|t| matches!(t.kind, TagKind::Time(_)))
        .map(|t| t.index)
        .collect();
    assert_eq!(times, [0]);
}

/// Defect 7: a context packet applies from the sample time it carries, whatever was lost or
/// held around it.
#[test]
fn a_context_setting_lands_on_the_sample_it_names() {
    use fsdr_net_io::format::vrt::context::{IfContext, emit_context};
    let spp = 1994usize;
    let sent = stream(1300, spp, 0, Some(&|s| s));
    let retune_at = 1000 * spp as u64;
    for drop_every in [999usize, 994, 1001, 0] {
        let lost = |i: usize| drop_every > 0 && (i + 1).is_multiple_of(drop_every);
        let mut dgs = Vec::new();
        for (i, p) in sent.iter().enumerate() {
            if i == 1000 {
                let ctx = IfContext {
                    stream_id: Some(1),
                    rf_ref_freq_hz: Some(2.4e9),
                    changed: true,
                    ..Default::default()
                };
                dgs.push(emit_context(&ctx, 0, Some(retune_at)).unwrap());
            }
            if !lost(i) {
                dgs.push(datagram(Format::Vrt, p));
            }
        }
        let dp = DepacketizerConfig {
            tick_rate: Some(5e6),
            ticks_per_item: Some(1.0),
            ..Default::default()
        };
        let o = run(Format::Vrt, |c| c.deliver_context = true, dp, dgs);
        let at: Vec<usize> = o
            .tags
            .iter()
            .filter(|t| matches!(t.kind, TagKind::Setting { .. }))
            .map(|t| t.index)
            .collect();
        assert_eq!(
            at,
            [retune_at as usize],
            "drop every {drop_every}: {:?} {:?}",
            o.stats,
            o.tags.len()
        );
        assert_eq!(o.items, expected(&sent, lost));
    }
}
