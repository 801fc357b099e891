//! The scenarios proptest draws: every format, clock and sample encoding, the rates told
//! or learnt, and each packet's faults (`Op`) in the proportions the model tests use. Shared
//! by fsdr-net-io's `tests/model.rs` and the blocks' `tests/model_blocks.rs`.

use fsdr_net_io::seq::Ratio;
use proptest::prelude::*;

use super::scenario::{Back, Clock, Content, Enc, Kind, Op, Scenario, tidy};

/// (ticks per sample, tick rate, sample rate) of CHDR clocks: integer and not.
pub fn chdr_clocks() -> Vec<(Ratio, f64, f64)> {
    vec![
        (Ratio::integer(1).unwrap(), 100e6, 100e6),
        (Ratio::integer(4).unwrap(), 200e6, 50e6),
        (Ratio::integer(10).unwrap(), 200e6, 20e6),
        (Ratio::new(625, 96).unwrap(), 200e6, 30.72e6),
        (Ratio::new(20, 7).unwrap(), 200e6, 70e6),
        (Ratio::new(5, 2).unwrap(), 200e6, 80e6),
        // Ticks longer than half a sample: stamps rounded to them are up to a tick off
        // (an X410 channel at 491.52 Msps with a 200 MHz clock; 122.88 Msps).
        (Ratio::new(625, 1536).unwrap(), 200e6, 491.52e6),
        (Ratio::new(625, 384).unwrap(), 200e6, 122.88e6),
    ]
}

pub fn op(kind: Kind, spp: usize, even: bool, window: usize) -> impl Strategy<Value = Op> {
    let timed = kind.timed();
    let chdr = kind.format() == fsdr_net_io::Format::Chdr;
    // A loss of a whole 16-bit period, told only by the time.
    let wide_loss = if chdr && spp <= 4 { 65_536u64 } else { 16 };
    let lose = prop_oneof![
        85 => Just(0u64),
        8 => 1u64..=20,
        3 => prop::sample::select(vec![8u64, 9, 15, 16, 17, 31, 32, 48]),
        1 => Just(wide_loss),
        1 => 21u64..=100,
    ];
    // Packets shorter (a burst's last, a streamer's odd one) or longer than the stream's
    // size (a device whose packet size changed).
    let short = if spp > 2 {
        prop_oneof![95 => Just(0usize), 5 => 1..spp].boxed()
    } else {
        Just(0usize).boxed()
    };
    let long = prop_oneof![97 => Just(0usize), 3 => 1..=2 * spp];
    // Formats with an end-of-burst flag: CHDR's, VRT's trailer.
    let eob = if kind.format() != fsdr_net_io::Format::Seq64
        && kind.format() != fsdr_net_io::Format::SeqPlusSize
    {
        prop_oneof![97 => Just(None), 3 => (0..3 * spp as u64).prop_map(Some)].boxed()
    } else {
        Just(None).boxed()
    };
    // The device's clock steps ahead by any amount: a few packets, up to 2^22 samples, or
    // 2^28 to 2^35 (beyond 2^20 packets: a resync, nothing filled). (Steps between would
    // fill up to 2^27 samples of zeros where they read as lost packets: the same rules,
    // too much memory for a case.)
    let jump = if timed {
        prop_oneof![
            97 => Just(0u64),
            2 => 1..5 * spp as u64,
            1 => prop_oneof![1u32..=21, 28u32..=34]
                .prop_flat_map(|e| (1u64 << e)..(2u64 << e)),
        ]
        .boxed()
    } else {
        Just(0u64).boxed()
    };
    // Or back (`set_time_now`, a stop, set time and start), by any amount.
    let back = if timed {
        let by = prop_oneof![
            1..=2 * spp as u64,
            (1u64..=64).prop_map(move |k| k * spp as u64),
            (1u32..=34, any::<u64>()).prop_map(|(e, x)| (1u64 << e) + x % (1u64 << e)),
        ];
        prop_oneof![
            98 => Just(None),
            1 => by.prop_map(|x| Some(Back::By(x))),
            1 => prop::sample::select(vec![Back::ToStart, Back::ToZero]).prop_map(Some),
        ]
        .boxed()
    } else {
        Just(None).boxed()
    };
    let restart = if kind == Kind::VrtBare {
        Just(false).boxed()
    } else {
        prop_oneof![99 => Just(false), 1 => Just(true)].boxed()
    };
    let far = 2 * window + 3;
    let delay = prop_oneof![94 => Just(0usize), 6 => 1..=far.min(12)];
    let dup = prop_oneof![96 => Just(0usize), 4 => 1usize..=10];
    ((lose, short, long, eob, jump, back), (restart, delay, dup)).prop_map(
        move |((lose, short, long, eob_gap, jump, back), (restart, delay, dup))| Op {
            lose,
            // sc8 in 32-bit words: whole words of two samples.
            short: if even { short & !1 } else { short },
            long: if even { long & !1 } else { long },
            eob_gap,
            jump,
            back,
            restart,
            delay,
            dup,
        },
    )
}

/// What a stream's samples carry: mostly a ramp (every sample its index), also silence and
/// payloads that repeat (a constant, a packet's worth, 16 packets' worth, 7 samples).
pub fn content(spp: usize) -> impl Strategy<Value = Content> {
    let spp = spp as u64;
    prop_oneof![
        8 => Just(Content::Ramp),
        1 => Just(Content::Zeros),
        1 => prop::sample::select(vec![1, 7, spp, 2 * spp, 16 * spp]).prop_map(Content::Repeat),
    ]
}

pub fn scenario(kinds: Vec<Kind>) -> impl Strategy<Value = Scenario> {
    (
        prop::sample::select(kinds),
        prop::sample::select(vec![0usize, 1, 3, 8, 64]),
        1usize..=40,
        any::<u64>(),
        0usize..8,
        prop::sample::select(vec![Enc::Sc16, Enc::Sc8, Enc::Fc32]),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_flat_map(|(kind, window, spp, seed, clock_i, enc, float, learnt)| {
            // Half the cases of formats that can learn their rates are not told them.
            let learnt = learnt && kind.learnable();
            let enc = match (enc, kind.format()) {
                (Enc::Fc32, fsdr_net_io::Format::Vrt) => Enc::Sc16,
                (e, _) => e,
            };
            let even = enc == Enc::Sc8 && kind.format() != fsdr_net_io::Format::Vrt;
            let spp = if even { (spp + 1) & !1 } else { spp };
            let (tpi, tick_rate, sample_rate) = match kind {
                Kind::ChdrTicks | Kind::VrtFree => chdr_clocks()[clock_i],
                Kind::VrtSecondsCount => (Ratio::integer(1).unwrap(), 5000.0, 5000.0),
                Kind::VrtPicos => {
                    let rate = [30.72e6, 10e6, 1e6][clock_i % 3];
                    (Ratio::of_rates(1e12, rate).unwrap(), rate, rate)
                }
                _ => (Ratio::integer(1).unwrap(), 10e6, 10e6),
            };
            let first_seq = match kind.period() {
                0 => seed % (1 << 40) + 2,
                p if seed % 3 == 0 => p - 1 - seed / 3 % p.min(40),
                p => seed % p,
            };
            let clock = Clock {
                ticks_per_sample: tpi,
                tick_rate,
                sample_rate,
                // The clock the blocks give the engine, with the rates or without them
                // (learnt from the stamps: `Scenario::learnt` says what such a case keeps
                // out).
                configured: !learnt,
            };
            let t0 = prop_oneof![Just(0u64), 0u64..1 << 40];
            (
                prop::collection::vec(op(kind, spp, even, window), 1..200),
                content(spp),
                t0,
            )
                .prop_map(move |(ops, content, t0)| {
                    Scenario {
                        kind,
                        enc,
                        // Converted to Complex<f32> (the main job's items).
                        float: float && enc != Enc::Fc32,
                        clock,
                        spp,
                        first_seq,
                        window,
                        ops: tidy(ops),
                        content,
                        t0,
                    }
                    .coarse()
                    .learnt()
                })
        })
}
