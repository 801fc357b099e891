//! Issue #67: exact when the device's clock misbehaves — its time set back, big steps ahead,
//! losses among the first packets, repeating payloads, a packet longer than the others.
//! Each case is a stream whose every sample carries its index (a ramp, unless the case is
//! about repeating payloads), run through the sequence layer and depacketizer as the
//! engine's consumer drives them, through an engine over loopback and into the in-place
//! receiver; each asserts what the user gets (every sample, in the sender's order, and the
//! counters), and that the reference model (`tests/model/reference.rs`) says the same.

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

use fsdr_net_io::seq::Ratio;
use model::reference::{Counts, Tag};
use model::run::{Outcome, Through, run_and_check, run_engine, run_inplace, run_pure};
use model::scenario::{Back, Clock, Content, Enc, Kind, Op, Scenario};
use num_complex::Complex;

/// A stream of `kind` in sc16, `spp` samples a packet, the rates told (CHDR and VRT's
/// free-running count at 4 ticks a sample, 200 MHz; VRT picoseconds at 10 Msps), its time
/// beginning at 1 000 000 samples.
fn stream(kind: Kind, spp: usize, window: usize, ops: Vec<Op>) -> Scenario {
    let (ticks_per_sample, tick_rate, sample_rate) = match kind {
        Kind::ChdrTicks | Kind::VrtFree => (Ratio::integer(4).unwrap(), 200e6, 50e6),
        Kind::VrtPicos => (Ratio::of_rates(1e12, 10e6).unwrap(), 10e6, 10e6),
        _ => (Ratio::integer(1).unwrap(), 10e6, 10e6),
    };
    Scenario {
        kind,
        enc: Enc::Sc16,
        float: false,
        clock: Clock {
            ticks_per_sample,
            tick_rate,
            sample_rate,
            configured: true,
        },
        spp,
        first_seq: 3,
        window,
        ops,
        content: Content::Ramp,
        t0: 1_000_000,
    }
}

/// `sc` with its receiver told no rates (it learns them from the stamps).
fn learnt(mut sc: Scenario) -> Scenario {
    sc.clock.configured = false;
    sc
}

/// What `sc` gives through `through`, in sc16.
fn run(sc: &Scenario, through: Through) -> Outcome<Complex<i16>> {
    if std::env::var_os("MODEL_TRACE").is_some() && through == Through::Pure {
        model::run::trace(sc);
    }
    let stream = sc.stream();
    let arrivals = sc.arrivals(&stream);
    match through {
        Through::Pure => run_pure(sc, &stream, &arrivals),
        Through::Engine => run_engine(sc, &stream, &arrivals),
        Through::InPlace | Through::Windows => run_inplace(sc, &stream, &arrivals),
    }
}

/// The index each item carries (`None`: a zero).
fn indices(o: &Outcome<Complex<i16>>) -> Vec<Option<u64>> {
    o.items
        .iter()
        .map(|c| {
            let v = u64::from(c.re as u16) | u64::from(c.im as u16) << 16;
            v.checked_sub(1)
        })
        .collect()
}

/// Every sample `0..n`, once, in order, and nothing else.
fn every_sample(n: u64) -> Vec<Option<u64>> {
    (0..n).map(Some).collect()
}

/// Where the items first differ from `want` (for the failure message).
fn first_difference(got: &[Option<u64>], want: &[Option<u64>]) -> String {
    let k = (0..got.len().max(want.len()))
        .find(|&k| got.get(k) != want.get(k))
        .unwrap_or(0);
    format!(
        "item {k} of {} (want {}): got {:?}, want {:?}",
        got.len(),
        want.len(),
        got.get(k),
        want.get(k)
    )
}

fn check_model(sc: &Scenario) {
    if let Err(e) = run_and_check(sc, Through::Pure) {
        panic!("the model says otherwise: {e}");
    }
}

/// Item 1: a device's time set back with its counter going on, every packet in order, the
/// rates told (a USRP after `set_time_now(0)`, or a stop, set time and start): 90 packets
/// of 100 samples, time set back at packet 30 by a packet, to the stream's start, by 50,
/// 700 and 2503 packets and to 0, with and without an end of burst before it. A restart:
/// every sample delivered once and in order, nothing counted lost, late or duplicate, and
/// `rx_time` at the new time on sample 3000.
#[test]
fn a_clock_set_back_is_a_restart_with_every_sample_delivered() {
    let backs = [
        Back::By(100),
        Back::ToStart,
        Back::By(5_000),
        Back::By(70_000),
        Back::By(250_300),
        Back::ToZero,
    ];
    for kind in [
        Kind::VrtCount,
        Kind::VrtPicos,
        Kind::VrtFree,
        Kind::ChdrTicks,
    ] {
        for back in backs {
            for eob in [false, true] {
                let mut ops = vec![Op::default(); 90];
                ops[30].back = Some(back);
                if eob {
                    ops[29].eob_gap = Some(0);
                }
                let sc = stream(kind, 100, 8, ops);
                // Through an engine and in place for a few: each is a socket and a thread.
                let throughs: &[Through] = match back {
                    Back::ToStart | Back::By(70_000) => {
                        &[Through::Pure, Through::Engine, Through::InPlace]
                    }
                    _ => &[Through::Pure],
                };
                for &through in throughs {
                    let got = run(&sc, through);
                    let what = format!("{kind:?}, {back:?}, eob {eob}, {through:?}");
                    let items = indices(&got);
                    let want = every_sample(9000);
                    assert!(items == want, "{what}: {}", first_difference(&items, &want));
                    let counts = Counts {
                        delivered: 90,
                        resyncs: 1,
                        ..Default::default()
                    };
                    assert_eq!(got.counts, counts, "{what}");
                    assert!(
                        got.tags.contains(&(3000, Tag::Time)),
                        "{what}: {:?}",
                        got.tags
                    );
                }
                check_model(&sc);
            }
        }
    }
}

/// Item 1, the counter restarting with the time: a stop, set time and start of a device
/// that numbers its packets anew. A restart too, every sample delivered.
#[test]
fn a_clock_and_counter_set_back_together_is_a_restart() {
    for kind in [Kind::VrtPicos, Kind::ChdrTicks] {
        for back in [Back::ToStart, Back::By(650), Back::ToZero] {
            let mut ops = vec![Op::default(); 60];
            (ops[20].back, ops[20].restart) = (Some(back), true);
            let sc = stream(kind, 100, 0, ops);
            let got = run(&sc, Through::Pure);
            let items = indices(&got);
            let want = every_sample(6000);
            assert!(
                items == want,
                "{kind:?} {back:?}: {}",
                first_difference(&items, &want)
            );
            assert_eq!(got.counts.resyncs, 1, "{kind:?} {back:?}: {:?}", got.counts);
            check_model(&sc);
        }
    }
}

/// Item 2: bursts as `UdpSink` sends them from `tx_time` tags — the first at 1 000 000,
/// the second back at 500 000, a burst continuing it, then one at 2 000 000 — through the
/// sequence layer, an engine and in place: every sample delivered (1000), one restart,
/// nothing lost, late or duplicate. VRT: the second burst back at the first one's time,
/// and a 1-sample burst back in time.
#[test]
fn bursts_back_in_time_are_restarts_with_every_sample_delivered() {
    for kind in [Kind::ChdrTicks, Kind::VrtPicos, Kind::VrtCount] {
        for back in [Back::By(500_400), Back::ToStart] {
            let mut ops = vec![Op::default(); 10];
            ops[3].eob_gap = Some(0);
            ops[4].back = Some(back);
            ops[6].eob_gap = Some(0);
            ops[7].eob_gap = Some(1_499_600);
            let sc = stream(kind, 100, 8, ops);
            for through in [Through::Pure, Through::Engine, Through::InPlace] {
                let got = run(&sc, through);
                let what = format!("{kind:?}, {back:?}, {through:?}");
                let items = indices(&got);
                let want = every_sample(1000);
                assert!(items == want, "{what}: {}", first_difference(&items, &want));
                let counts = Counts {
                    delivered: 10,
                    resyncs: 1,
                    ..Default::default()
                };
                assert_eq!(got.counts, counts, "{what}");
            }
            check_model(&sc);
        }
    }
    // A 1-sample burst back in time (VRT): one restart, its sample delivered.
    let mut ops = vec![Op::default(); 12];
    ops[5].eob_gap = Some(0);
    (ops[6].back, ops[6].short, ops[6].eob_gap) = (Some(Back::By(300)), 99, Some(0));
    ops[7].back = Some(Back::By(20));
    let sc = stream(Kind::VrtPicos, 100, 8, ops);
    for through in [Through::Pure, Through::Engine, Through::InPlace] {
        let got = run(&sc, through);
        let items = indices(&got);
        let want = every_sample(1101);
        assert!(
            items == want,
            "{through:?}: {}",
            first_difference(&items, &want)
        );
        assert_eq!(
            got.counts.missed + got.counts.duplicates + got.counts.late,
            0
        );
    }
    check_model(&sc);
}

/// Item 3: VRT picoseconds, the rates learnt, packets 1–16 (or 1–32) lost right after the
/// first: the loss cannot be counted (no rate yet, and a 4-bit counter hides 16·m), so it
/// is flagged; every sample received is delivered in order. With a sample count (the
/// format's own clock) it is counted and zero-filled exactly.
#[test]
fn a_loss_a_4_bit_counter_hides_before_a_rate_is_learnt_is_flagged() {
    for lost in [16, 32] {
        let mut ops = vec![Op::default(); 60];
        ops[1].lose = lost;
        let sc = learnt(stream(Kind::VrtPicos, 100, 0, ops.clone()));
        for through in [Through::Pure, Through::Engine, Through::InPlace] {
            let got = run(&sc, through);
            let items: Vec<u64> = indices(&got).into_iter().flatten().collect();
            let want: Vec<u64> = (0..100)
                .chain((lost + 1) * 100..(lost + 60) * 100)
                .collect();
            assert_eq!(items, want, "{lost} lost, {through:?}");
            assert!(
                got.counts.ambiguous >= 1,
                "{lost} lost, {through:?}: {:?}",
                got.counts
            );
        }
        let sc = stream(Kind::VrtCount, 100, 0, ops);
        let got = run(&sc, Through::Pure);
        let mut want = every_sample((lost + 60) * 100);
        want[100..(lost as usize + 1) * 100].fill(None);
        assert_eq!(indices(&got), want, "{lost} lost, sample count");
        assert_eq!(got.counts.missed, lost);
        check_model(&sc);
    }
}

/// Item 4: a late packet longer than the others (CHDR, rates told; packet 5 of 160
/// samples comes after packet 6, the others 100). Within the reorder window: every sample
/// in order, nothing lost or flagged. Without: packet 6 after a gap of one packet, counted
/// by the counter and flagged (the time shows more than a packet of the largest size seen:
/// a time jump beside it, or the lost packet longer), sized from the packets (100 zeros)
/// with `rx_time` on packet 6; packet 5 late.
#[test]
fn a_late_packet_longer_than_the_others_is_placed_by_its_counter() {
    let mut ops = vec![Op::default(); 20];
    (ops[5].long, ops[5].delay) = (60, 1);
    let sc = stream(Kind::ChdrTicks, 100, 8, ops.clone());
    for through in [Through::Pure, Through::Engine, Through::InPlace] {
        let got = run(&sc, through);
        let items = indices(&got);
        let want = every_sample(2060);
        assert!(
            items == want,
            "{through:?}: {}",
            first_difference(&items, &want)
        );
        let counts = Counts {
            delivered: 20,
            reordered: 1,
            ..Default::default()
        };
        assert_eq!(got.counts, counts, "{through:?}");
    }
    check_model(&sc);
    let sc = stream(Kind::ChdrTicks, 100, 0, ops);
    let got = run(&sc, Through::Pure);
    let mut want = every_sample(2060);
    want.splice(500..660, std::iter::repeat_n(None, 100));
    assert_eq!(indices(&got), want);
    assert!(got.tags.contains(&(600, Tag::Time)), "{:?}", got.tags);
    let counts = Counts {
        delivered: 19,
        missed: 1,
        late: 1,
        ambiguous: 1,
        ..Default::default()
    };
    assert_eq!(got.counts, counts);
    assert!(got.tags.contains(&(
        500,
        Tag::Missed {
            frames: 1,
            items: 100
        }
    )));
    check_model(&sc);
}

/// Item 5: repeating payloads prove nothing. VRT's 4-bit counter without timestamps, 10
/// packets lost among packets whose samples are all zeros (silence, an idle radio) or a
/// packet's worth repeated: the packet after the loss is 6 behind by its counter and
/// brings the same bytes as were received there — no proof of a copy. New data after a
/// loss, flagged: every packet delivered, the loss counted, no duplicate.
#[test]
fn repeating_payloads_prove_no_duplicate() {
    for content in [Content::Zeros, Content::Repeat(100), Content::Repeat(1)] {
        let mut ops = vec![Op::default(); 40];
        ops[20].lose = 10;
        let mut sc = stream(Kind::VrtBare, 100, 0, ops);
        sc.content = content;
        for through in [Through::Pure, Through::Engine, Through::InPlace] {
            let got = run(&sc, through);
            let what = format!("{content:?}, {through:?}");
            assert_eq!(got.items.len(), 5000, "{what}");
            let c = got.counts;
            assert_eq!((c.delivered, c.missed, c.duplicates), (40, 10, 0), "{what}");
            assert!(c.ambiguous >= 1, "{what}: {c:?}");
        }
        check_model(&sc);
    }
    // A real copy of a packet whose payload no other one has is still a duplicate.
    let mut ops = vec![Op::default(); 40];
    ops[20].dup = 3;
    let sc = stream(Kind::VrtBare, 100, 0, ops);
    let got = run(&sc, Through::Pure);
    assert_eq!(indices(&got), every_sample(4000));
    assert_eq!(got.counts.duplicates, 1);
}

/// Item 6: a time step with the counter one ahead, the rates learnt (CHDR, VRT
/// picoseconds): 70 000 or 100 000 samples. Taken for a loss of a period of the counter
/// (flagged) or a time jump, it is sized within what the time allows: the samples' time,
/// not 65 536 packets.
#[test]
fn a_big_time_step_under_learnt_rates_is_sized_by_the_time() {
    for kind in [Kind::ChdrTicks, Kind::VrtPicos] {
        for step in [70_000, 100_000] {
            let mut ops = vec![Op::default(); 40];
            ops[30].jump = step;
            let sc = learnt(stream(kind, 100, 0, ops));
            let got = run(&sc, Through::Pure);
            let zeros = got.items.len() as u64 - 4000;
            assert!(
                zeros == 0 || zeros == step,
                "{kind:?}, {step}: {zeros} zeros, {:?}",
                got.counts
            );
            check_model(&sc);
        }
    }
}

/// Item 6: `ambiguous` on exact data. A late short packet that fills its hole exactly
/// within the window (CHDR, rates told), and a late second packet with learnt VRT
/// picoseconds: every sample in order, nothing flagged.
#[test]
fn a_late_packet_that_fills_its_hole_leaves_nothing_flagged() {
    let mut ops = vec![Op::default(); 20];
    (ops[5].short, ops[5].delay) = (40, 1);
    let sc = stream(Kind::ChdrTicks, 100, 8, ops);
    let got = run(&sc, Through::Pure);
    assert_eq!(indices(&got), every_sample(1960));
    assert_eq!(got.counts.ambiguous, 0, "{:?}", got.counts);
    check_model(&sc);
    let mut ops = vec![Op::default(); 40];
    ops[1].delay = 1;
    let sc = learnt(stream(Kind::VrtPicos, 100, 8, ops));
    let got = run(&sc, Through::Pure);
    assert_eq!(indices(&got), every_sample(4000));
    assert_eq!(got.counts.ambiguous, 0, "{:?}", got.counts);
}
