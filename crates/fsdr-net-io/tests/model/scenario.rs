//! What a sender emits and what arrives: a stream of one format, clock and sample encoding,
//! and the faults on its way (lost runs, short packets, ends of burst, device time jumps,
//! counter restarts, reorders, duplicates), built from a few parameters that proptest
//! generates and shrinks.

use fsdr_net_io::format::vrt::{Tsf, Tsi, VrtClassId, VrtRepr, VrtTimestamp};
use fsdr_net_io::format::{DataHeader, Format};
use fsdr_net_io::sample::WireFormat;
use fsdr_net_io::seq::Ratio;

/// A format with one way of stamping time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// GNU Radio's 64-bit sequence number.
    Seq64,
    /// GNU Radio's sequence number and size.
    SeqSize,
    /// CHDR with device ticks.
    ChdrTicks,
    /// CHDR without timestamps.
    ChdrBare,
    /// VRT with a sample count (TSF 1), no integer seconds.
    VrtCount,
    /// VRT with UTC seconds and a sample count.
    VrtSecondsCount,
    /// VRT/DIFI with UTC seconds and real-time picoseconds.
    VrtPicos,
    /// VRT with a free-running count of a device clock (TSF 3) at a told tick rate: CHDR's
    /// clocks on a 4-bit counter.
    VrtFree,
    /// VRT without timestamps.
    VrtBare,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::Seq64,
        Kind::SeqSize,
        Kind::ChdrTicks,
        Kind::ChdrBare,
        Kind::VrtCount,
        Kind::VrtSecondsCount,
        Kind::VrtPicos,
        Kind::VrtFree,
        Kind::VrtBare,
    ];

    pub fn format(self) -> Format {
        match self {
            Kind::Seq64 => Format::Seq64,
            Kind::SeqSize => Format::SeqPlusSize,
            Kind::ChdrTicks | Kind::ChdrBare => Format::Chdr,
            _ => Format::Vrt,
        }
    }

    pub fn timed(self) -> bool {
        matches!(
            self,
            Kind::ChdrTicks
                | Kind::VrtCount
                | Kind::VrtSecondsCount
                | Kind::VrtPicos
                | Kind::VrtFree
        )
    }

    /// Stamps count a device clock's ticks at a told tick rate (CHDR, VRT free-running).
    pub fn ticked(self) -> bool {
        matches!(self, Kind::ChdrTicks | Kind::VrtFree)
    }

    /// Counter period (0: 64-bit).
    pub fn period(self) -> u64 {
        match self.format().seq_bits() {
            Some(64) | None => 0,
            Some(b) => 1 << b,
        }
    }
}

/// How samples go on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enc {
    /// sc16 (the format's own layout).
    Sc16,
    /// sc8: DIFI's two bytes per sample in VRT, item32 (two samples a word) in CHDR.
    Sc8,
    /// fc32.
    Fc32,
}

impl Enc {
    pub fn wire(self, format: Format) -> WireFormat {
        match (self, format) {
            (Enc::Sc16, f) => match f {
                Format::Vrt => WireFormat::Sc16Item32Be,
                _ => WireFormat::Sc16Chdr,
            },
            (Enc::Sc8, Format::Vrt) => WireFormat::Sc8Difi,
            (Enc::Sc8, _) => WireFormat::Sc8Item32Le,
            (Enc::Fc32, _) => WireFormat::Fc32,
        }
    }

    pub fn bytes_per_sample(self) -> usize {
        match self {
            Enc::Sc16 => 4,
            Enc::Sc8 => 2,
            Enc::Fc32 => 8,
        }
    }
}

/// What happens to (and before) one packet of the stream.
#[derive(Debug, Clone, Copy, Default)]
pub struct Op {
    /// Packets lost just before this one.
    pub lose: u64,
    /// It carries this many samples fewer than the stream's size (timed formats).
    pub short: usize,
    /// It ends a burst; the next one starts `gap` samples of time later.
    pub eob_gap: Option<u64>,
    /// The device's clock jumps by this many samples before it, without a loss (formats with
    /// time; on a 4-bit counter a jump that 16·m lost packets could hold is such a loss).
    pub jump: u64,
    /// The sender's counter starts over at this packet (time goes on).
    pub restart: bool,
    /// It arrives this many packets late.
    pub delay: usize,
    /// A copy arrives this many packets after it (0: none).
    pub dup: usize,
}

/// The stream's clock: ticks per sample, and the rates a receiver is given.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub ticks_per_sample: Ratio,
    pub tick_rate: f64,
    pub sample_rate: f64,
    /// The receiver is told the rates (otherwise it learns them).
    pub configured: bool,
}

/// The whole case.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub kind: Kind,
    pub enc: Enc,
    /// The receiver's items are `Complex<f32>` whatever the encoding: sc16 and sc8 are
    /// converted (in place, by the in-place receiver).
    pub float: bool,
    pub clock: Clock,
    /// Samples per full packet.
    pub spp: usize,
    /// The counter of the first packet.
    pub first_seq: u64,
    pub window: usize,
    pub ops: Vec<Op>,
}

/// One packet the sender made (sent or lost).
#[derive(Debug, Clone)]
pub struct Sent {
    /// Position in the sender's stream.
    pub index: usize,
    /// First sample of it on the sender's timeline.
    pub first: u64,
    pub samples: usize,
    pub counter: u64,
    pub eob: bool,
    /// It went out (not lost).
    pub sent: bool,
    pub bytes: Vec<u8>,
}

impl Scenario {
    /// Every packet the sender made, in its order.
    pub fn stream(&self) -> Vec<Sent> {
        let format = self.kind.format();
        let mut out = Vec::new();
        let mut sample = 0u64; // position on the timeline (samples since the start)
        let mut counter = self.first_seq;
        let restart_at = format.first_seq();
        for op in &self.ops {
            for _ in 0..op.lose {
                out.push(self.packet(out.len(), sample, self.spp, counter, false, false));
                sample += self.spp as u64;
                counter = counter.wrapping_add(1);
            }
            sample += op.jump;
            if op.restart {
                counter = restart_at;
            }
            let n = self.spp - op.short.min(self.spp - 1);
            out.push(self.packet(out.len(), sample, n, counter, true, op.eob_gap.is_some()));
            sample += op.eob_gap.unwrap_or(0);
            sample += n as u64;
            counter = counter.wrapping_add(1);
        }
        out
    }

    /// The order of arrival: indices into `stream`, lost ones left out, delays and copies
    /// applied.
    pub fn arrivals(&self, stream: &[Sent]) -> Vec<usize> {
        // Each sent packet gets an arrival slot; later slots for the late and the copies.
        let mut slots: Vec<(usize, usize, usize)> = Vec::new(); // (slot, tiebreak, index)
        let mut op_of = self.ops.iter();
        for (pos, p) in stream.iter().filter(|p| p.sent).enumerate() {
            let op = op_of.next().expect("one op per sent packet");
            slots.push((pos + op.delay, 1 + op.delay, p.index));
            if op.dup > 0 {
                slots.push((pos + op.dup, 0, p.index));
            }
        }
        slots.sort();
        slots.into_iter().map(|(_, _, i)| i).collect()
    }

    fn packet(
        &self,
        index: usize,
        first: u64,
        samples: usize,
        counter: u64,
        sent: bool,
        eob: bool,
    ) -> Sent {
        let format = self.kind.format();
        let mut bytes = Vec::new();
        if sent {
            let payload = payload(self.enc, format, first, samples);
            bytes = self.frame(counter, first, &payload, eob);
        }
        Sent {
            index,
            first,
            samples,
            counter,
            eob,
            sent,
            bytes,
        }
    }

    /// The datagram: header for the packet's counter and time, then the payload.
    fn frame(&self, counter: u64, first: u64, payload: &[u8], eob: bool) -> Vec<u8> {
        let format = self.kind.format();
        match self.kind {
            Kind::VrtSecondsCount | Kind::VrtPicos | Kind::VrtFree => {
                let rate = self.clock.sample_rate as u64;
                let timestamp = match self.kind {
                    Kind::VrtFree => VrtTimestamp {
                        tsi: Tsi::None,
                        integer: None,
                        tsf: Tsf::FreeRunning,
                        fractional: Some(self.clock.ticks_per_sample.ticks_rounded(first)),
                    },
                    Kind::VrtSecondsCount => VrtTimestamp {
                        tsi: Tsi::Utc,
                        integer: Some((1_700_000_000 + first / rate) as u32),
                        tsf: Tsf::SampleCount,
                        fractional: Some(first % rate),
                    },
                    _ => {
                        let ps_per = Ratio::of_rates(1e12, self.clock.sample_rate).unwrap();
                        let ps = ps_per.ticks_rounded(first);
                        VrtTimestamp {
                            tsi: Tsi::Utc,
                            integer: Some((1_700_000_000 + ps / 1_000_000_000_000) as u32),
                            tsf: Tsf::RealTime,
                            fractional: Some(ps % 1_000_000_000_000),
                        }
                    }
                };
                let pad = (4 - payload.len() % 4) % 4;
                let mut class_id = VrtClassId::new(fsdr_net_io::format::vrt::DIFI_OUI, 0, 0);
                class_id.pad_bits = (8 * pad) as u8;
                let repr = VrtRepr {
                    packet_type: 1,
                    stream_id: Some(1),
                    class_id: Some(class_id),
                    trailer: None,
                    timestamp: Some(timestamp),
                    packet_count: (counter & 0xf) as u8,
                    size_words: 0,
                };
                let h = repr.header_len();
                let mut dg = vec![0u8; h + payload.len() + pad];
                let repr = VrtRepr {
                    size_words: (dg.len() / 4) as u16,
                    ..repr
                };
                repr.emit(&mut dg);
                dg[h..h + payload.len()].copy_from_slice(payload);
                dg
            }
            _ => {
                let timestamp = match self.kind {
                    Kind::ChdrTicks => Some(self.clock.ticks_per_sample.ticks_rounded(first)),
                    Kind::VrtCount => Some(first),
                    _ => None,
                };
                let pad = if format == Format::Vrt {
                    (4 - payload.len() % 4) % 4
                } else {
                    0
                };
                let h = format.header_len(timestamp.is_some());
                let mut dg = vec![0u8; h + payload.len() + pad];
                let fields = DataHeader {
                    seq: counter,
                    timestamp,
                    eob,
                    pad,
                    ..Default::default()
                };
                format.emit_header(&mut dg, &fields).unwrap();
                dg[h..h + payload.len()].copy_from_slice(payload);
                dg
            }
        }
    }
}

/// Sample `n` of the stream in an encoding, as the receiver's item (as bytes of `T`'s wire
/// layout): every sample distinct within 2^16, so a misplaced one shows.
pub fn payload(enc: Enc, format: Format, first: u64, samples: usize) -> Vec<u8> {
    use fsdr_net_io::sample::Encoder;
    use num_complex::Complex;
    let wire = enc.wire(format);
    let mut out = vec![0u8; samples * enc.bytes_per_sample()];
    let ns = first..first + samples as u64;
    match enc {
        Enc::Sc16 => {
            let s: Vec<Complex<i16>> = ns.map(sc16).collect();
            Encoder::new(wire).unwrap().encode(&s, &mut out);
        }
        Enc::Sc8 => {
            let s: Vec<Complex<i8>> = ns.map(sc8).collect();
            Encoder::new(wire).unwrap().encode(&s, &mut out);
        }
        Enc::Fc32 => {
            // fc32 has no encoder (it is a receive format): little-endian I then Q.
            for (k, n) in ns.enumerate() {
                let c = fc32(n);
                out[8 * k..8 * k + 4].copy_from_slice(&c.re.to_le_bytes());
                out[8 * k + 4..8 * k + 8].copy_from_slice(&c.im.to_le_bytes());
            }
        }
    }
    out
}

pub fn sc16(n: u64) -> num_complex::Complex<i16> {
    num_complex::Complex::new((n + 1) as u16 as i16, ((n + 1) >> 16) as u16 as i16)
}

pub fn sc8(n: u64) -> num_complex::Complex<i8> {
    num_complex::Complex::new(n as u8 as i8, (n >> 8) as u8 as i8)
}

pub fn fc32(n: u64) -> num_complex::Complex<f32> {
    num_complex::Complex::new((n + 1) as f32, -((n % 4096) as f32))
}

/// Sample `n` of an encoding as `Complex<f32>`: UHD's scales, full scale 32767 for sc16 and
/// 127 (of sc8 shifted into sc16's range) for sc8.
pub fn as_f32(enc: Enc, n: u64) -> num_complex::Complex<f32> {
    let sc16_scale = (1.0f64 / 32767.0) as f32;
    let sc8_scale = (256.0f64 / 32767.0) as f32;
    match enc {
        Enc::Sc16 => {
            let s = sc16(n);
            num_complex::Complex::new(f32::from(s.re) * sc16_scale, f32::from(s.im) * sc16_scale)
        }
        Enc::Sc8 => {
            let s = sc8(n);
            num_complex::Complex::new(f32::from(s.re) * sc8_scale, f32::from(s.im) * sc8_scale)
        }
        Enc::Fc32 => fc32(n),
    }
}

impl Scenario {
    /// The stamps give every distance exactly: not so where a tick is longer than half a
    /// sample (`Ratio::inverts_exactly`; CHDR at 491.52 Msps with a 200 MHz clock).
    pub fn exact_time(&self) -> bool {
        self.kind.timed() && (!self.kind.ticked() || self.clock.ticks_per_sample.inverts_exactly())
    }

    /// The stream's timebase comes from rates the receiver is told, which could be wrong
    /// (CHDR ticks, VRT picoseconds), not the format's own (VRT sample counts).
    pub fn told_clock(&self) -> bool {
        matches!(self.kind, Kind::ChdrTicks | Kind::VrtPicos | Kind::VrtFree)
    }

    /// With ticks coarser than that, each stamp is rounded by up to half a tick, so
    /// distances are known within `q` samples (`Ratio::units_per_tick_ceil`). What no
    /// receiver can tell apart then is left out of the case: packets shorter than `2q + 1`
    /// samples (one behind the newest by less than the uncertainty, or too short for the
    /// time to place it), time jumps and gaps between bursts shorter than two ticks (inside
    /// the rounding: the stamps may not show them) or than `2q + 1` samples (the room a loss
    /// may leave within the rounding), short packets near a jump (a late one's hole and the
    /// jump could add up to within the rounding of a loss), packets that arrive after their
    /// successor short by fewer than `2q + 1` samples (a loss of less than whole packets,
    /// flagged, to the successor: within the rounding it may not show), and a counter
    /// restarted within `2q + 1` numbers of its wrap (the numbers it skipped could be as
    /// many short packets lost inside the rounding), and on a 4-bit counter a jump within
    /// `2q + 1` samples of 16·m (as many lost packets could hold it). And the stream begins (and restarts) with a full packet: lost
    /// packets larger than any seen leave room that is more than as many of the largest
    /// only within the rounding (a restart to an exact receiver, a loss to one that allows
    /// for the rounding; the fuzzer found it: short packets, then a full one lost).
    ///
    /// Under any told clock, jumps are two ticks at least: one within a tick a pair is the
    /// stamps' rounding to a receiver, and a run of them reads as the clock off, which rule
    /// 5 drops (the fuzzer found eight 1-tick jumps in a row on 1-sample packets).
    pub fn coarse(mut self) -> Self {
        let tpi = self.clock.ticks_per_sample;
        if self.told_clock() {
            let two_ticks = (2 * tpi.den()).div_ceil(tpi.num());
            for op in self.ops.iter_mut().filter(|o| o.jump > 0) {
                op.jump = op.jump.max(two_ticks);
            }
        }
        if !self.kind.ticked() || tpi.inverts_exactly() {
            return self;
        }
        let q = tpi.units_per_tick_ceil() as usize;
        let least = 2 * q + 1;
        // Two ticks in samples, rounded up (so that the stamps show it), and more than the
        // uncertainty of the distance on both sides (so that it is not taken for the room
        // a loss leaves).
        let visible = (2 * tpi.den()).div_ceil(tpi.num()).max(least as u64);
        let even = self.enc == Enc::Sc8;
        self.spp = self.spp.max(least + 2);
        if even {
            self.spp = (self.spp + 1) & !1;
        }
        // Around a jump (or a gap between bursts) no short packets: one that arrives late
        // leaves a hole of less than the stream's size, and the jump beside it could fill
        // the rest to within the rounding of a loss's room.
        let jumps: Vec<usize> = (0..self.ops.len())
            .filter(|&i| self.ops[i].jump > 0 || self.ops[i].eob_gap.is_some_and(|g| g > 0))
            .collect();
        let n = self.ops.len();
        for &j in &jumps {
            for o in &mut self.ops[j.saturating_sub(14)..(j + 14).min(n)] {
                o.short = 0;
            }
        }
        // Nor a loss (or a late packet's hole) across a jump: the time then exceeds the
        // packets lost, and within two ticks a packet and 1% a told clock's error could
        // make that (`seq::extend`: the count stays the counter's) — where the stamps'
        // rounding puts it against that bound is no fact of the stream.
        for j in jumps {
            // The step is before op j (a jump) or after it (the end of a burst).
            let after = if self.ops[j].jump > 0 { j } else { j + 1 };
            if after < n {
                self.ops[after].lose = 0;
                self.ops[after].delay = 0;
            }
            if after > 0 {
                self.ops[after - 1].delay = 0;
            }
            // Nor, on a 4-bit counter, a late packet across a jump: the jump read as 16·m
            // lost moves where the time puts it by as much, and a tie between two numbers
            // 16 apart is then the stamps' rounding's (props: one late by 8 across two
            // such jumps, the model's tie to the nearer number, the receiver's the other).
            if self.kind.period() == 16 {
                for i in 0..after.min(n) {
                    if i + self.ops[i].delay >= after {
                        self.ops[i].delay = 0;
                    }
                }
            }
        }
        let period = self.kind.period();
        let restart_at = self.kind.format().first_seq();
        let mut counter = self.first_seq;
        for op in &mut self.ops {
            op.short = op.short.min(self.spp - least);
            if even {
                op.short &= !1;
            }
            // A short packet that arrives after its successor is a loss of less than whole
            // packets to that one: told (and flagged) only where it is short by more than
            // the rounding on both sides.
            if op.delay > 0 && op.short < least {
                op.short = 0;
            }
            if op.jump > 0 {
                op.jump = op.jump.max(visible);
                // On a 4-bit counter (VRT) a jump is a loss of 16·m packets where they can
                // hold it (a sample each at least): within the rounding of 16·m samples the
                // stamps cannot tell which, so the case keeps out of it.
                let m = (op.jump + 8) / 16;
                if period == 16 && m > 0 && op.jump.abs_diff(16 * m) <= least as u64 {
                    op.jump = 16 * m + least as u64 + 1;
                }
            }
            if let Some(g) = op.eob_gap.as_mut()
                && *g > 0
            {
                *g = (*g).max(visible);
            }
            counter = counter.wrapping_add(op.lose);
            if op.restart {
                // The newest number is the one before: the restart number is `d` ahead.
                let d = restart_at.wrapping_sub(counter.wrapping_sub(1)) % period;
                if (2..=least as u64).contains(&d) {
                    op.restart = false;
                } else {
                    counter = restart_at;
                }
            }
            if op.restart {
                op.short = 0;
            }
            counter = counter.wrapping_add(1);
        }
        if let Some(o) = self.ops.first_mut() {
            o.short = 0;
        }
        self
    }
}

/// Faults that would let a packet from before a restart arrive after it (which no format
/// can place) are taken out around each restart.
pub fn tidy(mut ops: Vec<Op>) -> Vec<Op> {
    let restarts: Vec<usize> = (0..ops.len())
        .filter(|&i| i > 0 && ops[i].restart)
        .collect();
    for r in restarts {
        for i in r.saturating_sub(14)..(r + 14).min(ops.len()) {
            ops[i].delay = 0;
            ops[i].dup = 0;
            if i >= r {
                ops[i].lose = 0;
                ops[i].jump = 0;
                ops[i].eob_gap = None;
            }
        }
    }
    if let Some(o) = ops.first_mut() {
        o.restart = false;
    }
    // The first pairs confirm the configured clock: no time jump among them (one alone is
    // tolerated, `seq::extend`), and they arrive in order. The sequence layer's rule: two
    // pairs that contradict a configured clock before any pair confirmed it mean the clock
    // is wrong (a receiver told the wrong rate), and the rate learnt from the stream takes
    // over. A stream whose first in-order pairs are two device time jumps (found by
    // `cargo xtask props --cases 1000000`: a reorder at the start, then two jumps) is that
    // case, which the model, trusting the configured clock, does not describe.
    for o in ops.iter_mut().take(3) {
        o.jump = 0;
        o.eob_gap = None;
        o.lose = 0;
        o.delay = 0;
    }
    ops
}
