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

/// Where a device's clock is set back to (`set_time_now`, a stop, set time and start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Back {
    /// To this many samples before the end of the packet before it (0 at most).
    By(u64),
    /// To the time the stream began with.
    ToStart,
    /// To 0.
    ToZero,
}

/// What happens to (and before) one packet of the stream.
#[derive(Debug, Clone, Copy, Default)]
pub struct Op {
    /// Packets lost just before this one.
    pub lose: u64,
    /// It carries this many samples fewer than the stream's size (timed formats).
    pub short: usize,
    /// It carries this many samples more than the stream's size (when not short).
    pub long: usize,
    /// It ends a burst; the next one starts `gap` samples of time later.
    pub eob_gap: Option<u64>,
    /// The device's clock jumps by this many samples before it, without a loss (formats with
    /// time; on a 4-bit counter a jump that 16·m lost packets could hold is such a loss).
    pub jump: u64,
    /// The device's clock is set back before it (after any jump); the counter goes on
    /// unless `restart`.
    pub back: Option<Back>,
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

/// What the samples carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Every sample its index (distinct within 2^16 at least): a misplaced one shows.
    Ramp,
    /// Every sample 0 (silence, an idle radio).
    Zeros,
    /// The index modulo this many samples (a constant for 1, a tone, a repeated frame).
    Repeat(u64),
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
    /// What the samples carry.
    pub content: Content,
    /// The device's time (in samples) at the first packet.
    pub t0: u64,
}

/// One packet the sender made (sent or lost).
#[derive(Debug, Clone)]
pub struct Sent {
    /// Position in the sender's stream.
    pub index: usize,
    /// Index of its first sample in the sender's stream (what the samples carry).
    pub first: u64,
    /// The device's time (in samples) at its first sample: what its timestamp says.
    pub time: u64,
    pub samples: usize,
    pub counter: u64,
    pub eob: bool,
    /// It went out (not lost).
    pub sent: bool,
    pub bytes: Vec<u8>,
}

impl Scenario {
    /// The case in a few lines: its parameters and the packets with faults (for messages).
    pub fn brief(&self) -> String {
        let mut out = format!(
            "{:?} {:?} float {} clock {}/{} ({} told {}) spp {} first_seq {} window {} {:?} t0 {}",
            self.kind,
            self.enc,
            self.float,
            self.clock.ticks_per_sample.num(),
            self.clock.ticks_per_sample.den(),
            self.clock.sample_rate,
            self.clock.configured,
            self.spp,
            self.first_seq,
            self.window,
            self.content,
            self.t0,
        );
        out += &format!(", {} packets:", self.ops.len());
        for (i, o) in self.ops.iter().enumerate() {
            let f: Vec<String> = [
                (o.lose > 0).then(|| format!("lose {}", o.lose)),
                (o.short > 0).then(|| format!("short {}", o.short)),
                (o.long > 0).then(|| format!("long {}", o.long)),
                o.eob_gap.map(|g| format!("eob {g}")),
                (o.jump > 0).then(|| format!("jump {}", o.jump)),
                o.back.map(|b| format!("back {b:?}")),
                o.restart.then(|| "restart".into()),
                (o.delay > 0).then(|| format!("delay {}", o.delay)),
                (o.dup > 0).then(|| format!("dup {}", o.dup)),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !f.is_empty() {
                out += &format!(" [{i}] {}", f.join(" "));
            }
        }
        out
    }

    /// Clocks set back to before the stream's start (or its first two packets) are set
    /// back to two packets after it: where stamps are a tick off or the ratio learnt, a
    /// packet there may fit the place of one before the stream's first within the
    /// rounding, and be taken for a late one (the model, which knows the time exactly,
    /// cannot say which).
    pub fn no_step_before_the_start(&mut self) {
        for i in 0..self.ops.len() {
            let Some(Back::By(x)) = self.ops[i].back else {
                continue;
            };
            let stream = self.stream();
            // The op's packet is the (i + 1)-th sent one; the one before it ends at `end`.
            let Some(at) = stream.iter().filter(|p| p.sent).nth(i).map(|p| p.index) else {
                continue;
            };
            let Some(before) = at.checked_sub(1).map(|j| &stream[j]) else {
                continue;
            };
            // At two packets after the start at the earliest.
            let end = before.time + before.samples as u64;
            let earliest = (self.t0 + 2 * self.spp as u64).min(end);
            if x > end - earliest {
                self.ops[i].back = Some(Back::By(end - earliest));
            }
        }
    }

    /// Every packet the sender made, in its order.
    pub fn stream(&self) -> Vec<Sent> {
        let format = self.kind.format();
        let mut out = Vec::new();
        let mut sample = 0u64; // index of the next sample the sender makes
        let mut time = self.t0; // the device's time at it
        let mut end = self.t0; // the device's time at the end of the packet before
        let mut counter = self.first_seq;
        let restart_at = format.first_seq();
        for op in &self.ops {
            for _ in 0..op.lose {
                let p = self.packet(out.len(), (sample, time), self.spp, counter, false, false);
                out.push(p);
                sample += self.spp as u64;
                time += self.spp as u64;
                counter = counter.wrapping_add(1);
            }
            time += op.jump;
            time = match op.back {
                None => time,
                Some(Back::By(x)) => end.saturating_sub(x),
                Some(Back::ToStart) => self.t0,
                Some(Back::ToZero) => 0,
            };
            if op.restart {
                counter = restart_at;
            }
            let n = match op.short {
                0 => self.spp + op.long,
                s => self.spp - s.min(self.spp - 1),
            };
            let eob = op.eob_gap.is_some();
            out.push(self.packet(out.len(), (sample, time), n, counter, true, eob));
            end = time + n as u64;
            time = end + op.eob_gap.unwrap_or(0);
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
        (first, time): (u64, u64),
        samples: usize,
        counter: u64,
        sent: bool,
        eob: bool,
    ) -> Sent {
        let format = self.kind.format();
        let mut bytes = Vec::new();
        if sent {
            let payload = payload(self.enc, format, first, samples, self.content);
            bytes = self.frame(counter, time, &payload, eob);
        }
        Sent {
            index,
            first,
            time,
            samples,
            counter,
            eob,
            sent,
            bytes,
        }
    }

    /// The datagram: header for the packet's counter and time, then the payload.
    fn frame(&self, counter: u64, time: u64, payload: &[u8], eob: bool) -> Vec<u8> {
        let format = self.kind.format();
        match self.kind {
            Kind::VrtSecondsCount | Kind::VrtPicos | Kind::VrtFree => {
                let rate = self.clock.sample_rate as u64;
                let timestamp = match self.kind {
                    Kind::VrtFree => VrtTimestamp {
                        tsi: Tsi::None,
                        integer: None,
                        tsf: Tsf::FreeRunning,
                        fractional: Some(self.clock.ticks_per_sample.ticks_rounded(time)),
                    },
                    Kind::VrtSecondsCount => VrtTimestamp {
                        tsi: Tsi::Utc,
                        integer: Some((1_700_000_000 + time / rate) as u32),
                        tsf: Tsf::SampleCount,
                        fractional: Some(time % rate),
                    },
                    _ => {
                        let ps_per = Ratio::of_rates(1e12, self.clock.sample_rate).unwrap();
                        let ps = ps_per.ticks_rounded(time);
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
                    // A burst's last packet: the end-of-burst trailer (UHD's indicator).
                    trailer: eob.then_some(fsdr_net_io::format::vrt::EOB_TRAILER),
                    timestamp: Some(timestamp),
                    packet_count: (counter & 0xf) as u8,
                    size_words: 0,
                };
                let h = repr.header_len();
                let mut dg = vec![0u8; h + payload.len() + pad + format.trailer_len(eob)];
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
                    Kind::ChdrTicks => Some(self.clock.ticks_per_sample.ticks_rounded(time)),
                    Kind::VrtCount => Some(time),
                    _ => None,
                };
                let pad = if format == Format::Vrt {
                    (4 - payload.len() % 4) % 4
                } else {
                    0
                };
                let h = format.header_len(timestamp.is_some());
                let mut dg = vec![0u8; h + payload.len() + pad + format.trailer_len(eob)];
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

/// What sample `n` of a stream with `content` carries: the index of a ramp sample whose
/// value it has (`None`: a zero).
pub fn carried(content: Content, n: u64) -> Option<u64> {
    match content {
        Content::Ramp => Some(n),
        Content::Zeros => None,
        Content::Repeat(p) => Some(n % p.max(1)),
    }
}

/// Samples `first..first + samples` of the stream in an encoding, as the receiver's items
/// (as bytes of `T`'s wire layout): with `Content::Ramp` every sample distinct within 2^16,
/// so a misplaced one shows.
pub fn payload(enc: Enc, format: Format, first: u64, samples: usize, content: Content) -> Vec<u8> {
    use fsdr_net_io::sample::Encoder;
    use num_complex::Complex;
    let wire = enc.wire(format);
    let mut out = vec![0u8; samples * enc.bytes_per_sample()];
    let ns = (first..first + samples as u64).map(|n| carried(content, n));
    match enc {
        Enc::Sc16 => {
            let s: Vec<Complex<i16>> = ns.map(|c| c.map_or(Complex::default(), sc16)).collect();
            Encoder::new(wire).unwrap().encode(&s, &mut out);
        }
        Enc::Sc8 => {
            let s: Vec<Complex<i8>> = ns.map(|c| c.map_or(Complex::default(), sc8)).collect();
            Encoder::new(wire).unwrap().encode(&s, &mut out);
        }
        Enc::Fc32 => {
            // fc32 has no encoder (it is a receive format): little-endian I then Q.
            for (k, c) in ns.enumerate() {
                let c = c.map_or(Complex::default(), fc32);
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

/// Faults that would let a packet from before a restart (or a clock set back) arrive after
/// it, which the stream after it cannot place, are taken out around each (the README's
/// format table states what such a packet gives).
pub fn tidy(mut ops: Vec<Op>) -> Vec<Op> {
    let restarts: Vec<usize> = (0..ops.len())
        .filter(|&i| i > 0 && (ops[i].restart || ops[i].back.is_some()))
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
        o.back = None;
    }
    // A step of 2^28 samples or more is a resync where it is read against the packet
    // before; read after a burst's end (where a step is the next burst's start), or once a
    // late packet filled the hole before it, it is a gap as long as the time: the same
    // rules as for the steps below 2^23, more zeros than a case can hold (props 1M: an end
    // of burst, a late packet, then a loss and a step of 2^28). None of those near one.
    let big: Vec<usize> = (0..ops.len()).filter(|&j| ops[j].jump >= 1 << 27).collect();
    for j in big {
        for i in j.saturating_sub(14)..(j + 14).min(ops.len()) {
            ops[i].delay = 0;
            ops[i].dup = 0;
            ops[i].eob_gap = None;
        }
    }
    // Set back to the stream's start after being set back to 0 would step ahead by the
    // start's time (up to 2^40 samples), which VRT fills as lost packets: more zeros than
    // a case can hold (the fuzzer ran out of memory). Set back to 0 again instead.
    let mut zeroed = false;
    for o in ops.iter_mut() {
        if zeroed && matches!(o.back, Some(Back::ToStart)) {
            o.back = Some(Back::ToZero);
        }
        zeroed |= matches!(o.back, Some(Back::ToZero));
    }
    // The first consecutive pair confirms a told clock: no time step in it (two pairs that
    // contradict a told clock before any pair confirmed it drop it, `clock_dropped`: a
    // stream whose first pairs are two device time steps is that case, which the model,
    // trusting the told clock, does not describe; the README's format table states it).
    calm_first_pair(&mut ops);
    ops
}

/// No time step up to the first consecutive pair (see `tidy`), and its first packet full:
/// a pair of a sample confirms a clock within a tick a sample only, and a jump right after
/// it reads as the clock off (props 1M). Applied again where `coarse` or `learnt` adjust a
/// case (taking losses and delays out can make an earlier pair the first).
pub fn calm_first_pair(ops: &mut [Op]) {
    let first_pair = (1..ops.len()).find(|&i| pair_at(ops, i));
    for o in &mut ops[..first_pair.map_or(0, |i| i + 1)] {
        (o.jump, o.back) = (0, None);
    }
    if let Some(i) = first_pair {
        ops[i - 1].short = 0;
    }
}

/// Whether packets `i − 1` and `i` arrive as a consecutive pair: nothing lost between,
/// neither late, no end of burst, no restart, and no packet from before the stream's first
/// arrival landing between (it may restart the stream; other late packets do not change
/// the newest one).
pub fn pair_at(ops: &[Op], i: usize) -> bool {
    let (o, before) = (&ops[i], &ops[i - 1]);
    let first_arrival = (0..ops.len()).min_by_key(|&k| (k + ops[k].delay, ops[k].delay));
    let between = (0..i - 1).any(|j| {
        ops[j].delay > 0 && j + ops[j].delay == i - 1 && first_arrival.is_some_and(|f| j < f)
    });
    o.lose == 0
        && o.delay == 0
        && before.delay == 0
        && before.eob_gap.is_none()
        && !o.restart
        && !between
}
