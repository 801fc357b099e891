//! The sequence layer's books against what was sent: the fuzzer's bytes are a stream (format,
//! clock, encoding, window, payload, and per packet its losses, short or long length, burst
//! end, time jump, clock set back, restart, delay and duplicate), the reference model of `fsdr-net-io/tests/model` says what
//! an exact receiver delivers, and the library's output — every item, tag and counter — must
//! be that. The check knows what was sent; it never asks the code under test.
#![no_main]

#[path = "../../crates/fsdr-net-io/tests/model/coarse.rs"]
mod coarse;
#[path = "../../crates/fsdr-net-io/tests/model/learnt.rs"]
mod learnt;
#[path = "../../crates/fsdr-net-io/tests/model/reference.rs"]
mod reference;
// The engine and in-place runs are the model test's; here only the pure one runs.
#[allow(dead_code)]
#[path = "../../crates/fsdr-net-io/tests/model/run.rs"]
mod run;
#[path = "../../crates/fsdr-net-io/tests/model/scenario.rs"]
mod scenario;
#[allow(dead_code)]
#[path = "../../crates/fsdr-net-io/tests/model/windows.rs"]
mod windows;

use fsdr_net_io::seq::Ratio;
use libfuzzer_sys::fuzz_target;
use scenario::{Back, Clock, Content, Enc, Kind, Op, Scenario};

/// A scenario from bytes: 8 of parameters, then 3 per packet.
fn scenario(data: &[u8]) -> Option<Scenario> {
    let (head, rest) = data.split_at_checked(8)?;
    let kind = Kind::ALL[head[0] as usize % Kind::ALL.len()];
    let vrt = kind.format() == fsdr_net_io::Format::Vrt;
    let enc = match head[1] % 3 {
        0 => Enc::Sc16,
        1 => Enc::Sc8,
        _ if vrt => Enc::Sc16,
        _ => Enc::Fc32,
    };
    let even = enc == Enc::Sc8 && !vrt;
    let mut spp = 1 + head[2] as usize % 40;
    if even {
        spp = (spp + 1) & !1;
    }
    let window = [0usize, 1, 3, 8, 64][head[3] as usize % 5];
    let clocks = [
        (Ratio::integer(1)?, 100e6, 100e6),
        (Ratio::integer(4)?, 200e6, 50e6),
        (Ratio::integer(10)?, 200e6, 20e6),
        (Ratio::new(625, 96)?, 200e6, 30.72e6),
        (Ratio::new(20, 7)?, 200e6, 70e6),
        (Ratio::new(5, 2)?, 200e6, 80e6),
        // Ticks longer than half a sample (`Scenario::coarse` takes out what they hide).
        (Ratio::new(625, 1536)?, 200e6, 491.52e6),
        (Ratio::new(625, 384)?, 200e6, 122.88e6),
    ];
    let (tpi, tick_rate, sample_rate) = match kind {
        Kind::ChdrTicks => clocks[head[4] as usize % clocks.len()],
        Kind::VrtSecondsCount => (Ratio::integer(1)?, 5000.0, 5000.0),
        Kind::VrtPicos => {
            let rate = [30.72e6, 10e6, 1e6][head[4] as usize % 3];
            (Ratio::of_rates(1e12, rate)?, rate, rate)
        }
        _ => (Ratio::integer(1)?, 10e6, 10e6),
    };
    let seed = u64::from(u16::from_le_bytes([head[5], head[6]]));
    let first_seq = match kind.period() {
        0 => seed + 2,
        p => (p - 1 - seed % p.min(64) * u64::from(head[7] & 1)) % p,
    };
    let timed = kind.timed();
    let chdr = kind.format() == fsdr_net_io::Format::Chdr;
    let ops: Vec<Op> = rest
        .chunks_exact(3)
        .take(300)
        .map(|b| {
            let lose = match b[0] {
                0..=199 => 0,
                200..=239 => u64::from(b[0] - 199),
                240..=247 => [8, 9, 15, 16, 17, 31, 32, 48][(b[0] - 240) as usize],
                248 if chdr && spp <= 4 => 65_536,
                _ => u64::from(b[1] % 100),
            };
            let short = if timed && spp > 2 && b[1] >= 240 {
                let s = 1 + b[2] as usize % (spp - 1);
                if even { s & !1 } else { s }
            } else {
                0
            };
            // A packet longer than the stream's size.
            let long = if b[1] & 0xf0 == 0x60 {
                let l = 1 + b[2] as usize % (2 * spp);
                if even { l & !1 } else { l }
            } else {
                0
            };
            // The device's clock set back before it (formats with time).
            let back = (timed && b[1] & 0xf0 == 0x50).then(|| match b[2] % 4 {
                0 => Back::ToStart,
                1 => Back::ToZero,
                _ => Back::By(1 + u64::from(b[2]) * spp as u64 / 4),
            });
            Op {
                lose,
                short,
                long,
                back,
                eob_gap: (chdr && timed && b[1] & 0xf0 == 0x10)
                    .then(|| u64::from(b[2]) % (3 * spp as u64)),
                jump: if kind == Kind::ChdrTicks && b[1] & 0xf0 == 0x20 {
                    1 + u64::from(b[2]) % (5 * spp as u64)
                } else {
                    0
                },
                restart: kind != Kind::VrtBare && b[1] == 0x33,
                delay: if b[2] >= 240 {
                    1 + (b[2] - 240) as usize % 12
                } else {
                    0
                },
                dup: if b[2] & 0xf0 == 0x40 {
                    1 + (b[2] & 0x7) as usize
                } else {
                    0
                },
                ..Default::default()
            }
        })
        .collect();
    if ops.is_empty() {
        return None;
    }
    let ops = scenario::tidy(ops);
    Some(Scenario {
        kind,
        enc,
        // Every other one converted to Complex<f32>.
        float: head[1] / 3 % 2 == 1 && enc != Enc::Fc32,
        clock: Clock {
            ticks_per_sample: tpi,
            tick_rate,
            sample_rate,
            // Formats that can learn their rates are told them or not.
            configured: !(kind.learnable() && head[7] & 2 != 0),
        },
        spp,
        first_seq,
        window,
        ops,
        // Ramps mostly; silence and repeating payloads (which prove no copy).
        content: match head[6] % 8 {
            0 => Content::Zeros,
            1 => Content::Repeat(1 + u64::from(head[5] % 4) * spp as u64),
            _ => Content::Ramp,
        },
        // Far from 0, but not so far that a clock set back to 0 and then to the start again
        // (a step ahead of t0, which VRT fills as lost packets) makes gigabytes of zeros.
        t0: u64::from(head[5]) << 12,
    }
    .coarse()
    .learnt())
}

fuzz_target!(|data: &[u8]| {
    if let Some(sc) = scenario(data)
        && let Err(e) = run::run_and_check(&sc, run::Through::Pure)
    {
        run::trace(&sc);
        panic!("{e}");
    }
});
