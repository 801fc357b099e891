//! A USRP in UHD remote-streaming mode, in software: sc16 samples at a sample rate, in
//! `raw_payload` (no header) or `full_packet` (CHDR with sequence numbers and timestamps)
//! mode, or as VRT/DIFI or GNU Radio seq64 packets, paced against the wall clock, with fault
//! injection (drops, reorders, duplicates, a restart) at exact, known places.
//!
//! ```
//! use fsdr_net_io::emulator::{Emulator, EmulatorConfig, Signal};
//! use fsdr_net_io::Format;
//!
//! let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
//! let mut cfg = EmulatorConfig::new(rx.local_addr().unwrap(), Format::Chdr);
//! cfg.rate = 1e6;
//! cfg.samples = Some(10_000);
//! cfg.signal = Signal::Ramp;
//! let report = Emulator::new(cfg).unwrap().run().unwrap();
//! assert_eq!(report.samples_sent, 10_000);
//! assert_eq!(report.packets_sent, 6); // 5 × 1996 samples and one of 20
//! ```

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::Error;
use crate::format::Format;
use crate::sample::{Encoder, WireFormat};
use crate::send::{Framer, Pacer, Sender, SenderConfig};
use num_complex::Complex;

/// Largest datagram a USRP sends on 10 GbE with a standard UHD configuration.
pub const DATAGRAM_BYTES: usize = 8000;

/// What the emulated radio receives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Signal {
    /// A complex tone at `cycles_per_sample` of the sample rate, amplitude 0.5.
    Tone {
        /// Frequency as a fraction of the sample rate.
        cycles_per_sample: f64,
    },
    /// Sample `n` carries I = `n` mod 2^16 and Q = (`n` >> 16) mod 2^16 (as i16), so a
    /// receiver can check every sample ([`ramp_index`]).
    Ramp,
}

/// The sample index a ramp sample encodes (the low 32 bits of `n`).
pub fn ramp_index(i: i16, q: i16) -> u32 {
    u32::from(i as u16) | (u32::from(q as u16) << 16)
}

/// Faults to inject, each every N-th packet (1-based), so that both ends can be compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// Do not send every N-th packet (its samples and sequence number are skipped).
    pub drop_every: Option<u64>,
    /// Send every N-th packet after its successor.
    pub reorder_every: Option<u64>,
    /// Send every N-th packet twice.
    pub duplicate_every: Option<u64>,
    /// After N packets, start the sequence numbers over (as when a device re-arms).
    pub restart_after: Option<u64>,
    /// With several channels: inject the faults into this channel only (`None`: every one).
    pub channel: Option<usize>,
}

/// The stream ID the emulator gives channel `c` in `format`: VRT stream IDs 1, 2, …, CHDR
/// destination endpoints 0, 1, ….
pub fn channel_stream_id(format: Format, c: usize) -> u32 {
    match format {
        Format::Vrt => 1 + c as u32,
        _ => c as u32,
    }
}

/// How to emulate.
#[derive(Debug, Clone, PartialEq)]
pub struct EmulatorConfig {
    /// Where to stream (UHD's `dest_addr`/`dest_port`).
    pub dest: SocketAddr,
    /// Packet format: [`Format::Raw`] is `raw_payload`, [`Format::Chdr`] is `full_packet`.
    pub format: Format,
    /// Samples per second.
    pub rate: f64,
    /// Samples per packet; `None`: the most that fit [`DATAGRAM_BYTES`].
    pub spp: Option<usize>,
    /// Device tick rate for timestamps.
    pub tick_rate: f64,
    /// Timestamp of the first sample, in ticks.
    pub start_ticks: u64,
    /// Stop after this many samples.
    pub samples: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// The signal.
    pub signal: Signal,
    /// Fault injection.
    pub faults: Faults,
    /// Send unpaced (as fast as possible) instead of at `rate`.
    pub unpaced: bool,
    /// Paced: the longest stretch of stream sent back to back in one call (at least one
    /// packet, at most 32). A radio spaces its packets evenly and a 10 GbE NIC hands them to
    /// the kernel in interrupt-moderated batches (typically 50–200 µs); a sender that emits
    /// 32 jumbo packets at once overruns a small receive buffer that the radio would not.
    /// Default 100 µs: 10 packets of 8000 bytes at 800 MB/s, 2 at 200 MB/s, 1 below
    /// 160 MB/s. Zero sends one packet per call, which is harder on the receiver than any
    /// NIC (one wake-up per packet on loopback).
    pub burst: Duration,
    /// How samples are laid out: an sc16 wire format (default
    /// [`EmulatorConfig::default_wire`]).
    pub wire: WireFormat,
    /// VRT: IF context packets to send beside the data (none by default).
    pub context: Option<ContextPlan>,
    /// Channels, as a multi-channel radio streams them to one port: one packet of each per
    /// period of `spp` samples, interleaved, each a stream of its own (VRT stream IDs 1, 2,
    /// …; CHDR destination endpoints 0, 1, …) with its own sequence numbers. Default 1.
    /// `rate` is per channel; the report's packet and sample counts add up every channel.
    pub channels: usize,
}

/// The IF context packets a VRT emulator sends: before the first data packet, every `every`
/// data packets after it, and at a retune. Each states the sample rate, RF frequency,
/// bandwidth (80% of the rate) and gain; timestamped with the sample count of the next
/// data packet, in a packet count of their own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextPlan {
    /// Data packets between context packets (0: only the first and the retune).
    pub every: u64,
    /// RF frequency stated (Hz).
    pub rf_freq: f64,
    /// Gain stated (dB, stage 1).
    pub gain_db: f32,
    /// After this many data packets, state `(sample rate, RF frequency)` instead.
    pub retune: Option<(u64, f64, f64)>,
    /// DIFI standard context packets (DIFI class ID, every field DIFI requires).
    pub difi: bool,
}

impl EmulatorConfig {
    /// 200 Msps, tick rate 200 MHz, largest packets, a tone, until stopped.
    pub fn new(dest: SocketAddr, format: Format) -> Self {
        Self {
            dest,
            format,
            rate: 200e6,
            spp: None,
            tick_rate: 200e6,
            start_ticks: 0,
            samples: None,
            duration: None,
            signal: Signal::Tone {
                cycles_per_sample: 0.01,
            },
            faults: Faults::default(),
            unpaced: false,
            burst: Duration::from_micros(100),
            wire: Self::default_wire(format),
            context: None,
            channels: 1,
        }
    }

    /// The samples a device sends in `format`: `sc16_item32_be` in VITA-49/DIFI (big-endian
    /// I then Q, as UHD's VRT devices and DIFI put them on the wire), `sc16_chdr` (I then Q,
    /// little-endian) otherwise, which is also what UHD's `raw_payload` mode carries.
    pub fn default_wire(format: Format) -> WireFormat {
        match format {
            Format::Vrt => WireFormat::Sc16Item32Be,
            _ => WireFormat::Sc16Chdr,
        }
    }

    /// The stream ID of channel `c` ([`channel_stream_id`] of this format).
    pub fn stream_id(&self, c: usize) -> u32 {
        channel_stream_id(self.format, c)
    }

    /// Packets per send call: 32 unpaced; paced, as many as `burst` of stream holds (1..=32).
    pub fn packets_per_call(&self) -> usize {
        const MAX: usize = 32;
        if self.unpaced {
            return MAX;
        }
        let full = (self.header_len() + 4 * self.samples_per_packet()) as f64;
        let bytes_per_s = self.rate / self.samples_per_packet() as f64 * full;
        ((bytes_per_s * self.burst.as_secs_f64() / full) as usize).clamp(1, MAX)
    }

    /// Header bytes per packet.
    pub fn header_len(&self) -> usize {
        self.format.header_len(self.timestamps())
    }

    /// The timestamp of the first sample and the timestamp units per sample: CHDR counts
    /// ticks of [`tick_rate`](Self::tick_rate); VITA-49's fractional timestamp (TSF) is a
    /// sample count, so a VRT stream starts at `start_ticks` converted to samples and counts
    /// one per sample.
    pub fn clock(&self) -> (u64, f64) {
        match self.format {
            Format::Vrt => (
                (self.start_ticks as f64 * self.rate / self.tick_rate).round() as u64,
                1.0,
            ),
            _ => (self.start_ticks, self.tick_rate / self.rate),
        }
    }

    /// Whether packets carry timestamps (CHDR and VRT).
    pub fn timestamps(&self) -> bool {
        matches!(self.format, Format::Chdr | Format::Vrt)
    }

    /// Samples per packet in force.
    pub fn samples_per_packet(&self) -> usize {
        self.spp
            .unwrap_or((DATAGRAM_BYTES - self.header_len()) / 4)
            .max(1)
    }
}

/// What the emulator did (serialises to the JSON line `usrp_sim` prints).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct EmulatorReport {
    /// Distinct packets sent (duplicates not counted again).
    pub packets_sent: u64,
    /// Samples in those packets.
    pub samples_sent: u64,
    /// Packets not sent (`drop_every`).
    pub dropped: u64,
    /// Samples in the dropped packets.
    pub dropped_samples: u64,
    /// Packets sent after their successor.
    pub reordered: u64,
    /// Packets sent twice.
    pub duplicated: u64,
    /// Sequence restarts.
    pub restarts: u64,
    /// Datagrams the kernel did not take (send errors): attempted minus sent.
    pub send_errors: u64,
    /// Wall time.
    pub seconds: f64,
    /// Achieved rate in samples per second per channel (sent and dropped samples over wall
    /// time).
    pub rate: f64,
    /// Samples per packet.
    pub spp: usize,
    /// Context packets sent.
    pub context_sent: u64,
}

/// The emulator: owns its socket; [`Emulator::run`] streams until done or stopped.
pub struct Emulator {
    cfg: EmulatorConfig,
    sender: Sender,
    stop: Arc<AtomicBool>,
    /// One period of the tone, encoded in the wire format.
    tone: Vec<[u8; 4]>,
    encoder: Encoder<Complex<i16>>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator").field("cfg", &self.cfg).finish()
    }
}

/// One sample in the wire format.
fn encode(encoder: &Encoder<Complex<i16>>, i: i16, q: i16) -> [u8; 4] {
    let mut b = [0u8; 4];
    encoder.encode(&[Complex::new(i, q)], &mut b);
    b
}

impl Emulator {
    /// Opens the socket.
    pub fn new(cfg: EmulatorConfig) -> Result<Self, Error> {
        if !(cfg.rate > 0.0 && cfg.tick_rate > 0.0) {
            return Err(Error::config("rate and tick rate must be positive"));
        }
        if cfg.channels == 0
            || (cfg.channels > 1 && !matches!(cfg.format, Format::Vrt | Format::Chdr))
        {
            return Err(Error::config(format!(
                "{} channels: several channels need a format with stream IDs (vrt or chdr), \
                 and at least one",
                cfg.channels
            )));
        }
        let encoder = Encoder::<Complex<i16>>::new(cfg.wire)
            .ok()
            .filter(|e| e.bytes_per_item() == 4)
            .ok_or_else(|| {
                Error::config(format!(
                    "the emulator sends sc16 wire formats, not {}",
                    cfg.wire
                ))
            })?;
        let sender = Sender::new(&SenderConfig::new(cfg.dest))?;
        let tone = match cfg.signal {
            Signal::Tone { cycles_per_sample } => {
                // One period (at most 4096 samples; the tone is approximate beyond that).
                let period = (1.0 / cycles_per_sample.abs().max(1e-6))
                    .round()
                    .clamp(1.0, 4096.0);
                (0..period as usize)
                    .map(|n| {
                        let ph = 2.0 * std::f64::consts::PI * n as f64 / period;
                        encode(
                            &encoder,
                            (0.5 * ph.cos() * 32767.0).round() as i16,
                            (0.5 * ph.sin() * 32767.0).round() as i16,
                        )
                    })
                    .collect()
            }
            Signal::Ramp => Vec::new(),
        };
        Ok(Self {
            cfg,
            sender,
            stop: Arc::new(AtomicBool::new(false)),
            tone,
            encoder,
        })
    }

    /// A flag that stops [`Emulator::run`] from another thread.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// The sending socket's address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.sender.local_addr()
    }

    fn fill(&self, first_sample: u64, payload: &mut [u8]) {
        match self.cfg.signal {
            Signal::Ramp => {
                for (k, s) in payload.chunks_exact_mut(4).enumerate() {
                    let n = first_sample + k as u64;
                    s.copy_from_slice(&encode(
                        &self.encoder,
                        n as u16 as i16,
                        (n >> 16) as u16 as i16,
                    ));
                }
            }
            Signal::Tone { .. } => {
                // Copies runs of the one-period table: a division per packet, not per sample
                // (which capped the emulator near 130 Msps on this machine's cores).
                let table = self.tone.as_flattened();
                let mut at = (first_sample % self.tone.len() as u64) as usize * 4;
                let whole = payload.len() / 4 * 4;
                let mut out = &mut payload[..whole];
                while !out.is_empty() {
                    let n = (table.len() - at).min(out.len());
                    out[..n].copy_from_slice(&table[at..at + n]);
                    out = &mut out[n..];
                    at = 0;
                }
            }
        }
    }

    /// Streams on the calling thread until the sample count or duration is reached or the
    /// stop flag is set.
    pub fn run(mut self) -> Result<EmulatorReport, Error> {
        let cfg = self.cfg.clone();
        let spp = cfg.samples_per_packet();
        let header = cfg.header_len();
        let first_seq = cfg.format.first_seq();
        let channels = cfg.channels;
        let (start_ticks, ticks_per_sample) = cfg.clock();
        let mut framers: Vec<Framer> = (0..channels)
            .map(|c| {
                let mut framer = Framer::new(cfg.format);
                if channels > 1 {
                    framer = framer.stream_id(cfg.stream_id(c));
                }
                if cfg.timestamps() {
                    framer = framer.timestamps(start_ticks, ticks_per_sample);
                }
                framer
            })
            .collect();
        let full = header + 4 * spp;
        const BATCH: usize = 32;
        let per_call = cfg.packets_per_call();
        // Room for a batch of every channel plus duplicates and a held-back packet.
        let mut buf = vec![0u8; full * channels * (2 * BATCH + 2)];
        let mut pacer = (!cfg.unpaced).then(|| {
            let bytes_per_s = cfg.rate / spp as f64 * full as f64 * channels as f64;
            Pacer::new(bytes_per_s, full * channels * 4.max(per_call))
        });
        let mut r = EmulatorReport {
            spp,
            ..Default::default()
        };
        let f = cfg.faults;
        let faulty = |c: usize| f.channel.is_none_or(|x| x == c);
        let every = |n: Option<u64>, k: u64| n.is_some_and(|n| n > 0 && k.is_multiple_of(n));
        let start = Instant::now();
        let mut packet = 0u64; // packets the device produced (sent or dropped)
        let mut sample = 0u64;
        // A packet held back to go after its successor, and its channel.
        let mut held: Option<(usize, Vec<u8>)> = None;
        let mut sizes: Vec<usize> = Vec::with_capacity(channels * (2 * BATCH + 2));
        let mut attempted = 0u64;
        let plan = cfg.context.filter(|_| cfg.format == Format::Vrt);
        // The data packet before which the last context packet went out (1-based).
        let mut context_before = 0u64;
        let due = |k: u64| {
            plan.is_some_and(|p| {
                k == 1
                    || (p.every > 0 && (k - 1).is_multiple_of(p.every))
                    || p.retune.is_some_and(|(after, _, _)| k == after + 1)
            })
        };
        'stream: loop {
            let mut used = 0usize;
            let mut ended = false;
            sizes.clear();
            if let Some(p) = plan
                && due(packet + 1)
                && context_before != packet + 1
            {
                context_before = packet + 1;
                let retuned = p.retune.filter(|&(after, _, _)| packet >= after);
                let (rate, freq) = retuned.map_or((cfg.rate, p.rf_freq), |(_, r, f)| (r, f));
                for c in 0..channels {
                    let ctx = crate::format::vrt::context::IfContext {
                        stream_id: Some(cfg.stream_id(c)),
                        changed: packet == 0
                            || retuned.is_some_and(|(after, _, _)| packet == after),
                        sample_rate_sps: Some(rate),
                        rf_ref_freq_hz: Some(freq),
                        bandwidth_hz: Some(0.8 * rate),
                        gain_db: Some((p.gain_db, 0.0)),
                        class_id: p.difi.then_some((
                            crate::format::vrt::DIFI_OUI,
                            crate::format::vrt::context::DIFI_INFO_CLASS,
                            crate::format::vrt::context::DIFI_CONTEXT_CLASS,
                        )),
                        ..Default::default()
                    };
                    let ticks = start_ticks + (sample as f64 * ticks_per_sample) as u64;
                    let bytes = crate::format::vrt::context::emit_context(
                        &ctx,
                        ((r.context_sent / channels as u64) % 16) as u8,
                        Some(ticks),
                    )
                    .map_err(|e| Error::Io(io::Error::new(io::ErrorKind::InvalidData, e)))?;
                    attempted += 1;
                    r.context_sent += 1;
                    if let Err(e) = self.sender.send_datagrams(&[&bytes]) {
                        tracing::debug!(error = %e, "emulator send failed");
                    }
                }
            }
            for _ in 0..per_call {
                // A context packet goes out before its data packet: end the batch here.
                if due(packet + 1) && context_before != packet + 1 {
                    break;
                }
                if self.stop.load(Ordering::Relaxed)
                    || cfg.samples.is_some_and(|n| sample >= n)
                    || cfg.duration.is_some_and(|d| start.elapsed() >= d)
                {
                    ended = true;
                    break;
                }
                let n = cfg
                    .samples
                    .map_or(spp as u64, |total| (total - sample).min(spp as u64))
                    as usize;
                let len = header + 4 * n;
                packet += 1;
                if f.restart_after.is_some_and(|a| packet == a + 1) {
                    for (c, framer) in framers.iter_mut().enumerate() {
                        if faulty(c) {
                            framer.set_seq(first_seq);
                        }
                    }
                    r.restarts += 1;
                }
                for (c, framer) in framers.iter_mut().enumerate() {
                    if faulty(c) && every(f.drop_every, packet) {
                        framer.skip(1, n as u64);
                        r.dropped += 1;
                        r.dropped_samples += n as u64;
                        continue;
                    }
                    let dg = &mut buf[used..used + len];
                    framer
                        .frame(dg, n as u64, 0)
                        .map_err(|e| Error::Io(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
                    self.fill(sample, &mut dg[header..]);
                    r.packets_sent += 1;
                    r.samples_sent += n as u64;
                    if faulty(c) && every(f.reorder_every, packet) && held.is_none() {
                        held = Some((c, buf[used..used + len].to_vec()));
                        r.reordered += 1;
                        continue;
                    }
                    sizes.push(len);
                    used += len;
                    if faulty(c) && every(f.duplicate_every, packet) {
                        buf.copy_within(used - len..used, used);
                        sizes.push(len);
                        used += len;
                        r.duplicated += 1;
                    }
                    // A held packet goes right after its successor in its own channel.
                    if held.as_ref().is_some_and(|(hc, _)| *hc == c) {
                        let (_, h) = held.take().expect("held");
                        buf[used..used + h.len()].copy_from_slice(&h);
                        sizes.push(h.len());
                        used += h.len();
                    }
                }
                sample += n as u64;
            }
            if used == 0 && !ended {
                // Every packet of this call was dropped or held back by a fault.
                continue 'stream;
            }
            if used == 0 {
                if let Some((_, h)) = held.take() {
                    // The stream ended right after a held packet: it goes last.
                    attempted += 1;
                    if let Err(e) = self.sender.send_datagrams(&[&h]) {
                        tracing::debug!(error = %e, "emulator send failed");
                    }
                }
                break 'stream;
            }
            attempted += sizes.len() as u64;
            if let Some(p) = pacer.as_mut() {
                p.acquire(used);
            }
            let all_full = sizes.iter().all(|&s| s == full);
            let result = if all_full {
                self.sender.send_segments(&buf[..used], full)
            } else {
                let mut parts = Vec::with_capacity(sizes.len());
                let mut at = 0;
                for &s in &sizes {
                    parts.push(&buf[at..at + s]);
                    at += s;
                }
                self.sender.send_datagrams(&parts)
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, "emulator send failed");
            }
        }
        r.send_errors = attempted - self.sender.stats().datagrams;
        r.seconds = start.elapsed().as_secs_f64();
        r.rate =
            (r.samples_sent + r.dropped_samples) as f64 / channels as f64 / r.seconds.max(1e-9);
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seq::{SeqConfig, SeqEvent, SeqTracker};

    fn capture(cfg: EmulatorConfig) -> (EmulatorReport, Vec<Vec<u8>>) {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut cfg = cfg;
        cfg.dest = rx.local_addr().unwrap();
        let report = Emulator::new(cfg).unwrap().run().unwrap();
        let mut got = Vec::new();
        let mut b = vec![0u8; 9000];
        while let Ok(n) = rx.recv(&mut b) {
            got.push(b[..n].to_vec());
        }
        (report, got)
    }

    #[test]
    fn one_packet_per_call_with_faults_still_sends_the_whole_stream() {
        let mut c = base(Format::Seq64);
        c.rate = 1e6; // one packet per call
        assert_eq!(c.packets_per_call(), 1);
        c.faults.drop_every = Some(3);
        c.faults.reorder_every = Some(5);
        let (r, got) = capture(c);
        assert_eq!(r.packets_sent + r.dropped, 50, "{r:?}");
        assert_eq!(r.dropped, 16);
        assert_eq!(got.len() as u64, r.packets_sent);
    }

    #[test]
    fn paced_bursts_follow_the_rate() {
        let mut c = base(Format::Chdr);
        c.spp = Some(1996); // 8000-byte packets
        c.rate = 200e6; // 800 MB/s: 100 µs hold 10 packets
        assert_eq!(c.packets_per_call(), 10);
        c.burst = Duration::ZERO;
        assert_eq!(c.packets_per_call(), 1);
        c.burst = Duration::from_micros(100);
        c.rate = 25e6; // 100 MB/s: one packet per call
        assert_eq!(c.packets_per_call(), 1);
        c.rate = 10e9;
        assert_eq!(c.packets_per_call(), 32);
        c.unpaced = true;
        assert_eq!(c.packets_per_call(), 32);
    }

    #[test]
    fn tone_runs_continue_the_period_across_packets() {
        let mut cfg = base(Format::Raw);
        cfg.signal = Signal::Tone {
            cycles_per_sample: 0.01,
        };
        let emu = Emulator::new(cfg).unwrap();
        let period = emu.tone.len() as u64;
        for first in [0, 1, period - 1, period, 7 * period + 33] {
            let mut payload = vec![0u8; 4 * 250 + 3];
            emu.fill(first, &mut payload);
            for (k, s) in payload.chunks_exact(4).enumerate() {
                let want = emu.tone[((first + k as u64) % period) as usize];
                assert_eq!(s, want, "sample {k} after {first}");
            }
        }
    }

    fn base(format: Format) -> EmulatorConfig {
        let mut c = EmulatorConfig::new("127.0.0.1:9".parse().unwrap(), format);
        c.rate = 10e6;
        c.spp = Some(100);
        c.samples = Some(100 * 50);
        c.signal = Signal::Ramp;
        c.tick_rate = 20e6;
        c.start_ticks = 1000;
        c
    }

    #[test]
    fn vrt_context_packets_go_before_their_data_packet() {
        use crate::format::PacketClass;
        use crate::format::vrt::context::{Difi, parse_context};
        let mut c = base(Format::Vrt);
        c.tick_rate = c.rate;
        c.start_ticks = 0;
        c.context = Some(ContextPlan {
            every: 20,
            rf_freq: 1e9,
            gain_db: 10.0,
            retune: Some((30, 5e6, 2e9)),
            difi: true,
        });
        let (r, got) = capture(c);
        assert_eq!(r.packets_sent, 50);
        // Before data packets 1, 21, 31 (the retune) and 41.
        assert_eq!(r.context_sent, 4, "{r:?}");
        assert_eq!(got.len(), 54);
        let mut data = 0u64;
        let mut seen = Vec::new();
        for dg in &got {
            match Format::Vrt.parse(dg).unwrap().class {
                PacketClass::Data => data += 1,
                PacketClass::Context => {
                    let ctx = parse_context(dg).unwrap();
                    assert_eq!(ctx.difi, Some(Difi::StandardContext { complete: true }));
                    // Timestamped with the next data packet's first sample.
                    assert_eq!(ctx.sample_count, Some(data * 100));
                    seen.push((data, ctx.sample_rate_sps, ctx.rf_ref_freq_hz, ctx.changed));
                }
                PacketClass::NonData => panic!("unexpected packet"),
            }
        }
        assert_eq!(
            seen,
            [
                (0, Some(10e6), Some(1e9), true),
                (20, Some(10e6), Some(1e9), false),
                (30, Some(5e6), Some(2e9), true),
                (40, Some(5e6), Some(2e9), false),
            ]
        );
    }

    #[test]
    fn chdr_sequence_and_timestamps_as_a_device_sends_them() {
        let (r, got) = capture(base(Format::Chdr));
        assert_eq!((r.packets_sent, r.samples_sent), (50, 5000));
        assert_eq!(got.len(), 50);
        for (k, dg) in got.iter().enumerate() {
            let info = Format::Chdr.parse(dg).unwrap();
            assert_eq!(info.seq, Some(k as u64));
            // Two ticks per sample: 100 samples = 200 ticks per packet.
            assert_eq!(
                info.timestamp.unwrap().ticks(20e6),
                Some(1000 + 200 * k as u64)
            );
            let p = &dg[info.payload()];
            let i = i16::from_le_bytes([p[0], p[1]]);
            let q = i16::from_le_bytes([p[2], p[3]]);
            assert_eq!(ramp_index(i, q), 100 * k as u32);
        }
    }

    #[test]
    fn vrt_timestamps_count_samples_whatever_the_tick_rate() {
        // 20 MHz ticks, 10 Msps: start_ticks 1000 is sample 500; TSF counts samples.
        let (r, got) = capture(base(Format::Vrt));
        assert_eq!(r.packets_sent, 50);
        for (k, dg) in got.iter().enumerate() {
            let info = Format::Vrt.parse(dg).unwrap();
            assert_eq!(info.timestamp.unwrap().linear(), Some(500 + 100 * k as u64));
        }
    }

    #[test]
    fn channels_interleave_with_their_own_ids_and_faults_stay_in_theirs() {
        let mut c = base(Format::Vrt);
        c.channels = 2;
        c.faults = Faults {
            drop_every: Some(10),
            reorder_every: Some(7),
            channel: Some(1),
            ..Faults::default()
        };
        let (r, got) = capture(c);
        assert_eq!(r.dropped, 5);
        assert_eq!(r.packets_sent, 95);
        let seqs = |id: u32| -> Vec<u64> {
            got.iter()
                .map(|dg| Format::Vrt.parse(dg).unwrap())
                .filter(|i| i.stream_id == Some(id))
                .map(|i| i.seq.unwrap())
                .collect()
        };
        // Channel 0 (stream 1) is whole and in order; channel 1 (stream 2) has its drops
        // and its reorders (VRT counts modulo 16).
        let s1 = seqs(1);
        assert_eq!(s1, (0..50).map(|k| k % 16).collect::<Vec<_>>());
        let s2 = seqs(2);
        assert_eq!(s2.len(), 45);
        assert_ne!(s2, (0..45).map(|k| k % 16).collect::<Vec<_>>());
        assert_eq!(got.len(), 95);
    }

    #[test]
    fn faults_happen_exactly_where_asked() {
        let mut c = base(Format::Seq64);
        // 51 packets: the last dropped one (50) has a successor, so it can be seen missing.
        c.samples = Some(100 * 51);
        c.faults = Faults {
            drop_every: Some(10),
            reorder_every: Some(7),
            duplicate_every: Some(9),
            restart_after: None,
            channel: None,
        };
        let (r, got) = capture(c);
        assert_eq!(r.dropped, 5); // packets 10, 20, 30, 40, 50
        assert_eq!(r.packets_sent, 46);
        assert_eq!(r.duplicated, 5); // 9, 18, 27, 36, 45
        assert_eq!(got.len() as u64, r.packets_sent + r.duplicated);
        let mut t = SeqTracker::new(SeqConfig::for_bits(64));
        let (mut missed, mut dup, mut late) = (0, 0, 0);
        for dg in &got {
            match t.observe(Format::Seq64.parse(dg).unwrap().seq.unwrap()) {
                SeqEvent::Gap { missed: m } => missed += m,
                SeqEvent::Duplicate => dup += 1,
                SeqEvent::Late => late += 1,
                _ => {}
            }
        }
        assert_eq!(dup, 5);
        assert!(late > 0 && late <= r.reordered);
        assert_eq!(missed - late, r.dropped);
    }

    #[test]
    fn restart_starts_the_sequence_over_once() {
        let mut c = base(Format::Chdr);
        c.faults.restart_after = Some(20);
        let (r, got) = capture(c);
        assert_eq!(r.restarts, 1);
        let seqs: Vec<u64> = got
            .iter()
            .map(|d| Format::Chdr.parse(d).unwrap().seq.unwrap())
            .collect();
        let expected: Vec<u64> = (0..20).chain(0..30).collect();
        assert_eq!(seqs, expected);
    }

    #[test]
    fn raw_payload_has_no_header_and_largest_packets_fit_8000_bytes() {
        let mut c = base(Format::Raw);
        c.spp = None;
        c.samples = Some(4000);
        let (r, got) = capture(c);
        assert_eq!(r.spp, 2000);
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|d| d.len() == 8000));
        let c = EmulatorConfig::new("127.0.0.1:9".parse().unwrap(), Format::Chdr);
        assert_eq!(c.samples_per_packet(), 1996);
    }
}
