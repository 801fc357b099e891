use super::*;
use crate::format::vrt::{Tsf, Tsi, VrtTimestamp};
use crate::sample::WireFormat;

fn plain(zero_fill: bool) -> Depacketizer<i16> {
    Depacketizer::new(
        Decoder::new(WireFormat::Plain).unwrap(),
        DepacketizerConfig {
            zero_fill,
            ..Default::default()
        },
    )
}

fn bytes(v: &[i16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Runs datagrams through output slices of `room` items; returns items and absolute tags.
fn run(
    dp: &mut Depacketizer<i16>,
    dgs: &[DatagramIn<'_>],
    room: usize,
) -> (Vec<i16>, Vec<(usize, TagKind)>) {
    let mut items = Vec::new();
    let mut tags = Vec::new();
    let mut next = 0;
    let mut out = vec![0i16; room];
    loop {
        let mut w = dp.writer(&mut out);
        while next < dgs.len() && !w.pending() && w.room() > 0 {
            w.push(&dgs[next]);
            next += 1;
        }
        let pending = w.pending();
        let (n, t) = w.finish();
        let base = items.len();
        tags.extend(t.into_iter().map(|t| (base + t.index, t.kind)));
        items.extend_from_slice(&out[..n]);
        if next == dgs.len() && !pending {
            break;
        }
    }
    (items, tags)
}

/// The time tags among `tags`: (item, ticks).
fn time_tags(tags: &[(usize, TagKind)]) -> Vec<(usize, u64)> {
    tags.iter()
        .filter_map(|(i, t)| match t {
            TagKind::Time(rx) => Some((*i, rx.ticks)),
            _ => None,
        })
        .collect()
}

#[test]
fn gap_zero_fill_and_tags_are_the_same_in_any_output_size() {
    let a = bytes(&[1, 2, 3]);
    let b = bytes(&[4, 5, 6]);
    let mut d2 = DatagramIn::new(&b);
    d2.gap = Gap {
        frames: 2,
        bytes: None,
        ..Default::default()
    };
    d2.eob = true;
    let dgs = [DatagramIn::new(&a), d2];
    let mut reference = None;
    for room in 1..=16 {
        let got = run(&mut plain(true), &dgs, room);
        assert_eq!(got.0, [1, 2, 3, 0, 0, 0, 0, 0, 0, 4, 5, 6], "room {room}");
        assert_eq!(
            got.1,
            [
                (
                    3,
                    TagKind::Missed {
                        frames: 2,
                        items: 6
                    }
                ),
                (11, TagKind::Eob)
            ],
            "room {room}"
        );
        reference.get_or_insert(got.clone());
        assert_eq!(Some(&got), reference.as_ref());
    }
}

/// The defect: a datagram staged behind a zero-filled gap lost its end-of-burst tag.
#[test]
fn a_staged_datagram_keeps_its_end_of_burst_tag() {
    let a = bytes(&[1; 4]);
    let b = bytes(&[2; 4]);
    let mut d2 = DatagramIn::new(&b);
    d2.gap = Gap {
        frames: 1,
        bytes: None,
        ..Default::default()
    };
    d2.eob = true;
    // Room 6: the first datagram (4) fits, two of the four zeros fit, the rest is staged.
    let (items, tags) = run(&mut plain(true), &[DatagramIn::new(&a), d2], 6);
    assert_eq!(items.len(), 12);
    assert!(tags.contains(&(11, TagKind::Eob)), "{tags:?}");
}

#[test]
fn without_zero_fill_the_gap_tag_is_on_the_next_item() {
    let a = bytes(&[1, 2]);
    let b = bytes(&[3, 4]);
    let mut d2 = DatagramIn::new(&b);
    d2.gap = Gap {
        frames: 5,
        bytes: None,
        ..Default::default()
    };
    let mut dp = plain(false);
    let (items, tags) = run(&mut dp, &[DatagramIn::new(&a), d2], 3);
    assert_eq!(items, [1, 2, 3, 4]);
    assert_eq!(
        tags,
        [(
            2,
            TagKind::Missed {
                frames: 5,
                items: 10
            }
        )]
    );
    assert_eq!(dp.stats().missed_items, 10);
    assert_eq!(dp.stats().zeros_inserted, 0);
}

#[test]
fn gap_sized_by_timestamp_bytes_wins_over_frames_times_payload() {
    let b = bytes(&[9, 9]);
    let mut d = DatagramIn::new(&b);
    d.gap = Gap {
        frames: 1,
        bytes: Some(10),
        ..Default::default()
    }; // the lost packet was 5 items, not 2
    let (items, _) = run(&mut plain(true), &[d], 64);
    assert_eq!(items, [0, 0, 0, 0, 0, 9, 9]);
}

#[test]
fn partial_items_carry_across_datagrams_and_are_dropped_at_a_gap() {
    let all = bytes(&[10, 11, 12, 13]);
    // 8 bytes as 3 + 3 + 2.
    let (p1, p2, p3) = (&all[..3], &all[3..6], &all[6..]);
    let dgs = [
        DatagramIn::new(p1),
        DatagramIn::new(p2),
        DatagramIn::new(p3),
    ];
    for room in 1..=5 {
        let (items, _) = run(&mut plain(false), &dgs, room);
        assert_eq!(items, [10, 11, 12, 13], "room {room}");
    }
    let mut after_gap = DatagramIn::new(&all[..2]);
    after_gap.gap = Gap {
        frames: 1,
        bytes: None,
        ..Default::default()
    };
    let (items, _) = run(&mut plain(false), &[DatagramIn::new(p1), after_gap], 8);
    // 10, then the half of 11 before the gap is dropped, then 10 again: not 11's first
    // byte glued to the next datagram's.
    assert_eq!(items, [10, 10]);
}

#[test]
fn time_tags_at_start_after_gaps_and_jumps_and_identical_when_staged() {
    let ts = |t: u64| {
        Some(Timestamp::Vrt(VrtTimestamp {
            tsi: Tsi::None,
            integer: None,
            tsf: Tsf::SampleCount,
            fractional: Some(t),
        }))
    };
    let p = bytes(&[1, 2, 3, 4]);
    let mut dgs: Vec<DatagramIn<'_>> = (0..4)
        .map(|k| {
            let mut d = DatagramIn::new(&p);
            d.timestamp = ts(100 + 4 * k);
            d
        })
        .collect();
    dgs[3].timestamp = ts(1000); // a jump without a gap
    let cfg = DepacketizerConfig {
        tick_rate: Some(1e6),
        ticks_per_item: Some(1.0),
        ..Default::default()
    };
    let mut reference = None;
    for room in [1usize, 3, 5, 64] {
        let mut dp = Depacketizer::new(Decoder::new(WireFormat::Plain).unwrap(), cfg.clone());
        let (_, tags) = run(&mut dp, &dgs, room);
        assert_eq!(time_tags(&tags), [(0, 100), (12, 1000)], "room {room}");
        reference.get_or_insert(tags.clone());
        assert_eq!(Some(&tags), reference.as_ref());
    }
}

/// Ticks coarser than an item (491.52 Msps stamped by a 200 MHz clock, 0.41 ticks an item):
/// consecutive stamps, each rounded to a whole tick, are up to a tick off from where the
/// items put them. That is no discontinuity — the time tag is on the first item only, not on
/// every other datagram — while a jump of a few ticks is one.
#[test]
fn ticks_coarser_than_an_item_tag_only_real_jumps() {
    let p = bytes(&[7; 1996]);
    let tpi = 200e6 / 491.52e6;
    let mut dgs: Vec<DatagramIn<'_>> = (0..200u64)
        .map(|k| {
            let mut d = DatagramIn::new(&p);
            d.timestamp = Some(Timestamp::Ticks((k as f64 * 1996.0 * tpi).round() as u64));
            d
        })
        .collect();
    // Four ticks later than the items say, without a gap.
    for d in &mut dgs[150..] {
        if let Some(Timestamp::Ticks(t)) = d.timestamp.as_mut() {
            *t += 4;
        }
    }
    let jumped = (150.0 * 1996.0 * tpi).round() as u64 + 4;
    let cfg = DepacketizerConfig {
        tick_rate: Some(200e6),
        ticks_per_item: Some(tpi),
        ..Default::default()
    };
    let mut dp = Depacketizer::new(Decoder::new(WireFormat::Plain).unwrap(), cfg);
    let (items, tags) = run(&mut dp, &dgs, 4096);
    assert_eq!(items.len(), 200 * 1996);
    assert_eq!(time_tags(&tags), [(0, 0), (150 * 1996, jumped)]);
}

#[test]
fn a_rate_that_is_not_finite_and_positive_gives_no_time_tags_never_meaningless_ones() {
    let ts = Some(Timestamp::Ticks(1000));
    let p = bytes(&[1, 2, 3, 4]);
    let mut d = DatagramIn::new(&p);
    d.timestamp = ts;
    let good = DepacketizerConfig {
        tick_rate: Some(1e6),
        ..Default::default()
    };
    let dec = || Decoder::<i16>::new(WireFormat::Plain).unwrap();
    let times = |cfg: &DepacketizerConfig| {
        let mut dp = Depacketizer::new(dec(), cfg.clone());
        let (_, tags) = run(&mut dp, &[d], 64);
        tags.into_iter()
            .filter_map(|(_, t)| match t {
                TagKind::Time(rx) => Some(rx),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(times(&good).len(), 1);
    assert!(Depacketizer::try_new(dec(), good.clone()).is_ok());
    for bad in [f64::NAN, f64::INFINITY, -1e6, 0.0] {
        let cfg = DepacketizerConfig {
            tick_rate: Some(bad),
            ..good.clone()
        };
        assert!(times(&cfg).is_empty(), "tick rate {bad}");
        assert!(
            Depacketizer::try_new(dec(), cfg).is_err(),
            "tick rate {bad}"
        );
        // A bad ticks per item is left out too: time tags at the start, none from it.
        let cfg = DepacketizerConfig {
            ticks_per_item: Some(bad),
            ..good.clone()
        };
        let t = times(&cfg);
        assert!(
            t.len() == 1 && t[0].seconds.is_finite(),
            "ticks per item {bad}"
        );
        assert!(
            Depacketizer::try_new(dec(), cfg).is_err(),
            "ticks per item {bad}"
        );
    }
}

#[test]
fn marks_count_items_and_skip_zeros() {
    let p = bytes(&[1; 10]);
    let mut d2 = DatagramIn::new(&p);
    d2.gap = Gap {
        frames: 1,
        bytes: None,
        ..Default::default()
    };
    let mut dp = Depacketizer::new(
        Decoder::new(WireFormat::Plain).unwrap(),
        DepacketizerConfig {
            zero_fill: true,
            marks: Some(Marks::new(0, 7)),
            ..Default::default()
        },
    );
    run(&mut dp, &[DatagramIn::new(&p), d2], 4);
    assert_eq!(dp.marks().unwrap().items(), 30);
    assert_eq!(dp.stats().items, 30);
}

/// A datagram placed by the kernel gives exactly what pushing its bytes gives: items, tags
/// (time on restarts and jumps, end of burst) and counters — except that nothing is copied.
/// One that would not fit (with the zeros of its gap) is refused (and then pushed).
#[test]
fn placed_datagrams_match_pushed_ones_without_a_copy() {
    let cfg = || DepacketizerConfig {
        zero_fill: true,
        tick_rate: Some(1e6),
        ticks_per_item: Some(1.0),
        marks: None,
    };
    let dec = || Decoder::<i16>::new(WireFormat::Plain).unwrap();
    let payloads: Vec<Vec<i16>> = (0..6)
        .map(|k| (0..4).map(|i| 10 * k + i).collect())
        .collect();
    let mut dgs: Vec<DatagramIn<'_>> = Vec::new();
    let raw: Vec<Vec<u8>> = payloads.iter().map(|p| bytes(p)).collect();
    for (k, p) in raw.iter().enumerate() {
        let mut d = DatagramIn::new(p);
        d.restart = k == 0;
        // The timestamp jumps at datagram 3 (no gap in sequence numbers).
        d.timestamp = Some(Timestamp::Ticks(
            100 + 4 * k as u64 + if k >= 3 { 50 } else { 0 },
        ));
        d.eob = k == 4;
        d.seq = Some(k as u64);
        dgs.push(d);
    }
    let mut pushed = Depacketizer::new(dec(), cfg());
    let mut out_a = vec![0i16; 64];
    let mut w = pushed.writer(&mut out_a);
    for d in &dgs {
        w.push(d);
    }
    let (na, tags_a) = w.finish();

    let mut placed = Depacketizer::new(dec(), cfg());
    let mut out_b = vec![0i16; 64];
    let mut w = placed.writer(&mut out_b);
    for (k, d) in dgs.iter().enumerate() {
        // What the kernel would have done: the payload lands at the writer's position.
        let at = w.written();
        w.out[at..at + 4].copy_from_slice(&payloads[k]);
        assert!(w.push_placed(d, d.payload.len()));
    }
    let (nb, tags_b) = w.finish();
    assert_eq!((na, &out_a[..na]), (nb, &out_b[..nb]));
    assert_eq!(tags_a, tags_b);
    assert_eq!(
        tags_a.len(),
        3,
        "time at 0 and at the jump, EOB: {tags_a:?}"
    );
    let (a, b) = (pushed.stats(), placed.stats());
    assert_eq!(b.copied_bytes, 0);
    assert_eq!(a.copied_bytes, 6 * 8);
    assert_eq!(
        DepacketizerStats {
            copied_bytes: 0,
            ..a
        },
        b,
        "every other counter alike"
    );

    // Without room for its gap's zeros and its items, it is refused and takes nothing.
    let mut out = vec![0i16; 6];
    let mut w = placed.writer(&mut out);
    let mut d = DatagramIn::new(&raw[0]);
    d.gap = Gap {
        frames: 1,
        bytes: None,
        ..Default::default()
    };
    assert!(!w.push_placed(&d, 8));
    assert!(w.push_placed(&DatagramIn::new(&raw[0]), 8));
    assert!(!w.can_place(8), "2 items of room left");
    assert!(!w.push_placed(&DatagramIn::new(&raw[0]), 8));
    assert_eq!(w.written(), 4);
    // Converting decoders never place.
    let mut f = Depacketizer::new(
        Decoder::<num_complex::Complex32>::new(WireFormat::Sc16Chdr).unwrap(),
        DepacketizerConfig::default(),
    );
    let mut out = vec![num_complex::Complex32::default(); 8];
    assert!(!f.writer(&mut out).can_place(8));
}

/// Review defect 8: a partial sample at the end of a burst, or before a restart, belongs to
/// no sample of the next burst: the next burst starts with its own first whole sample.
#[test]
fn a_partial_sample_does_not_survive_an_end_of_burst_or_a_restart() {
    use num_complex::Complex;
    let mut dp = Depacketizer::<Complex<i16>>::new(
        Decoder::new(WireFormat::Sc16Chdr).unwrap(),
        DepacketizerConfig::default(),
    );
    // One sample and half of another, then a burst ends.
    let first = [1u8, 0, 2, 0, 9, 9];
    let second = [3u8, 0, 4, 0];
    for how in ["eob", "restart"] {
        let mut a = DatagramIn::new(&first);
        let mut b = DatagramIn::new(&second);
        match how {
            "eob" => a.eob = true,
            _ => b.restart = true,
        }
        let mut out = vec![Complex::default(); 8];
        let mut w = dp.writer(&mut out);
        w.push(&a);
        w.push(&b);
        let (n, _) = w.finish();
        assert_eq!(
            &out[..n],
            &[Complex::new(1, 2), Complex::new(3, 4)],
            "after {how}"
        );
    }
}

#[test]
fn an_end_of_burst_without_items_ends_the_burst_on_the_item_before_it() {
    let a = bytes(&[1, 2, 3]);
    let mut end = DatagramIn::new(&[]);
    end.eob = true;
    let mut dp = plain(true);
    let (items, tags) = run(&mut dp, &[DatagramIn::new(&a), end], 16);
    assert_eq!(items, [1, 2, 3]);
    assert_eq!(tags, [(2, TagKind::Eob)]);
    assert_eq!(dp.stats().ended_with_end_of_burst(), Some(true));
    // Once the items before it were handed over, only the counter shows it.
    let mut dp = plain(true);
    let mut out = vec![0i16; 3];
    let mut w = dp.writer(&mut out);
    w.push(&DatagramIn::new(&a));
    assert_eq!(w.finish().0, 3);
    let mut w = dp.writer(&mut out);
    w.push(&end);
    assert!(w.finish().1.is_empty());
    assert_eq!(dp.stats().ends_of_burst, 1);
}

/// A datagram placed behind room for its gap (in-place reception places datagrams ahead of a
/// gap): the zeros, the missed tag and event, the time tag and every counter are those a
/// push of its bytes gives, and its payload is not copied.
#[test]
fn a_datagram_placed_behind_its_gap_matches_a_pushed_one() {
    let cfg = || DepacketizerConfig {
        zero_fill: true,
        tick_rate: Some(1e6),
        ticks_per_item: Some(1.0),
        marks: None,
    };
    let dec = || Decoder::<i16>::new(WireFormat::Plain).unwrap();
    let first: Vec<i16> = (1..=4).collect();
    let after: Vec<i16> = (9..=12).collect();
    let (raw0, raw1) = (bytes(&first), bytes(&after));
    let mut d0 = DatagramIn::new(&raw0);
    d0.restart = true;
    d0.timestamp = Some(Timestamp::Ticks(100));
    let mut d1 = DatagramIn::new(&raw1);
    d1.timestamp = Some(Timestamp::Ticks(108));
    d1.gap = Gap {
        frames: 1,
        bytes: Some(8),
        ..Default::default()
    };
    let mut pushed = Depacketizer::new(dec(), cfg());
    let mut out_a = vec![0i16; 16];
    let mut w = pushed.writer(&mut out_a);
    w.push(&d0);
    w.push(&d1);
    let gaps_a = w.take_gaps();
    let (na, tags_a) = w.finish();

    let mut placed = Depacketizer::new(dec(), cfg());
    assert_eq!(placed.zeros_before(&d1.gap, raw1.len()), 4);
    let mut out_b = vec![-1i16; 16];
    // The kernel put the second payload behind room for the four missing items.
    out_b[8..12].copy_from_slice(&after);
    let mut w = placed.writer(&mut out_b);
    w.push(&d0);
    assert!(w.push_placed(&d1, raw1.len()));
    let gaps_b = w.take_gaps();
    let (nb, tags_b) = w.finish();
    assert_eq!((na, &out_a[..na]), (nb, &out_b[..nb]));
    assert_eq!(&out_b[..12], &[1, 2, 3, 4, 0, 0, 0, 0, 9, 10, 11, 12]);
    assert_eq!((tags_a, gaps_a), (tags_b, gaps_b));
    let (a, b) = (pushed.stats(), placed.stats());
    assert_eq!(
        a.copied_bytes - b.copied_bytes,
        8,
        "the second payload not copied"
    );
    assert_eq!(
        DepacketizerStats {
            copied_bytes: 0,
            ..a
        },
        DepacketizerStats {
            copied_bytes: 0,
            ..b
        }
    );
}
