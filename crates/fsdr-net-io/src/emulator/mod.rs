//! A USRP in UHD remote-streaming mode, in software: sc16 samples at a sample rate, in
//! `raw_payload` (no header) or `full_packet` (CHDR with sequence numbers and timestamps)
//! mode, or as VRT/DIFI or GNU Radio seq64 packets, with fault injection (drops, reorders,
//! duplicates, a restart) at exact, known places. In CHDR the stream's last packet carries
//! the end-of-burst flag, as a USRP's does when it stops streaming (a stop, the end of
//! `duration` or of `samples`).
//!
//! Paced, it sends its rate exactly, as a radio does: a packet goes out once its last sample
//! exists on the emulator's clock ([`SampleClock`]), so a stream of
//! `duration` is `rate × duration` samples and never arrives faster than `rate`. A machine
//! that cannot keep up makes it late, not short of samples: it warns, and its report says
//! the rate it got ([`EmulatorReport::rate`], [`EmulatorReport::kept_up`]).
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
use std::time::Instant;

use serde::Serialize;

use crate::Error;
use crate::format::Format;
use crate::sample::Encoder;
use crate::send::{Framer, SampleClock, Sender, SenderConfig};
use num_complex::Complex;

/// Largest datagram a USRP sends on 10 GbE with a standard UHD configuration.
pub const DATAGRAM_BYTES: usize = 8000;

mod config;

pub use config::{
    ContextPlan, EmulatorConfig, Faults, MAX_CHANNELS, Signal, channel_stream_id, ramp_index,
};

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
    /// The rate asked, samples per second per channel ([`EmulatorConfig::rate`]).
    pub rate_asked: f64,
    /// Whether it sent at the rate asked: `rate` within 0.1% of `rate_asked` (paced), or
    /// unpaced (no rate to keep up with).
    pub kept_up: bool,
    /// Paced: the most a send went out behind its samples' time on the emulator's clock
    /// (seconds; 0 when it always had to wait for them).
    pub behind_seconds: f64,
}

/// The share of the rate asked below which a paced emulator did not keep up.
pub const KEPT_UP: f64 = 0.999;

/// A paced emulator behind its clock by more than this says so (once) while it runs.
const BEHIND_WARNING: std::time::Duration = std::time::Duration::from_millis(100);

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
        if cfg.channels > MAX_CHANNELS {
            return Err(Error::config(format!(
                "{} channels: at most {MAX_CHANNELS}",
                cfg.channels
            )));
        }
        if let Some(spp) = cfg.spp {
            let datagram = spp
                .checked_mul(4)
                .and_then(|b| b.checked_add(cfg.header_len()));
            if spp == 0 || datagram.is_none_or(|d| d > crate::send::MAX_UDP_PAYLOAD) {
                return Err(Error::config(format!(
                    "{spp} samples per packet: at least 1, and a datagram (header and 4 bytes a \
                     sample) within UDP's 65507 bytes"
                )));
            }
        }
        if cfg.format == Format::Vrt
            && cfg.context.is_some_and(|p| p.difi)
            && cfg.wire.vita49_payload_format().is_none()
        {
            return Err(Error::config(format!(
                "DIFI context packets state the data's payload format, which VITA-49 cannot \
                 describe for {} (little-endian): use sc16_item32_be",
                cfg.wire
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
        let mut scfg = SenderConfig::new(cfg.dest);
        scfg.multicast_if = cfg.multicast_if;
        scfg.multicast_if_v6 = cfg.multicast_if_v6;
        scfg.multicast_ttl = cfg.multicast_ttl;
        let sender = Sender::new(&scfg)?;
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

    /// Sends the datagrams of `sizes` laid out one after another in `buf`: as one GSO send
    /// when all are `full` long.
    fn send_call(&mut self, buf: &[u8], sizes: &[usize], full: usize) {
        let result = if sizes.iter().all(|&s| s == full) {
            self.sender.send_segments(buf, full)
        } else {
            let mut parts = Vec::with_capacity(sizes.len());
            let mut at = 0;
            for &s in sizes {
                parts.push(&buf[at..at + s]);
                at += s;
            }
            self.sender.send_datagrams(&parts)
        };
        if let Err(e) = result {
            tracing::debug!(error = %e, "emulator send failed");
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
                if matches!(cfg.format, Format::Vrt | Format::Chdr) {
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
        // Per channel room for a batch plus duplicates and a held-back packet. Each channel's
        // packets of a call go out in one send of their own: a GSO send is one datagram to the
        // receiving kernel until its socket is chosen, so one that mixed channels would reach
        // the socket of its first datagram's stream (SO_REUSEPORT steering by stream ID).
        let mut bufs = vec![vec![0u8; full * (2 * BATCH + 2)]; channels];
        // Samples per channel to send: paced, `duration` is the rate's worth of samples.
        let total = cfg.samples_to_send();
        let mut r = EmulatorReport {
            spp,
            rate_asked: cfg.rate,
            ..Default::default()
        };
        let f = cfg.faults;
        let faulty = |c: usize| f.channel.is_none_or(|x| x == c);
        let every = |n: Option<u64>, k: u64| n.is_some_and(|n| n > 0 && k.is_multiple_of(n));
        let start = Instant::now();
        let mut clock = (!cfg.unpaced).then(|| SampleClock::new(cfg.rate));
        let mut warned = false;
        let mut packet = 0u64; // packets the device produced (sent or dropped)
        let mut sample = 0u64;
        // A packet held back to go after its successor, and its channel.
        let mut held: Option<(usize, Vec<u8>)> = None;
        let mut sizes: Vec<Vec<usize>> = vec![Vec::with_capacity(2 * BATCH + 2); channels];
        let mut attempted = 0u64;
        let plan = cfg.context.filter(|_| cfg.format == Format::Vrt);
        // The data packet before which the last context packet went out (1-based).
        let mut context_before = 0u64;
        // The last packet went out (it ended the burst).
        let mut finished = false;
        let due = |k: u64| {
            plan.is_some_and(|p| {
                k == 1
                    || (p.every > 0 && (k - 1).is_multiple_of(p.every))
                    || p.retune.is_some_and(|(after, _, _)| k == after + 1)
            })
        };
        'stream: loop {
            let mut used = vec![0usize; channels];
            let mut ended = false;
            sizes.iter_mut().for_each(Vec::clear);
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
                        // The emulated radio's other settings, which DIFI asks it to state.
                        reference_point_id: Some(0),
                        if_ref_freq_hz: Some(0.0),
                        if_band_offset_hz: Some(0.0),
                        reference_level_dbm: Some(0.0),
                        timestamp_adjustment_fs: Some(0),
                        timestamp_cal_time: Some(0),
                        state_indicators: Some(0),
                        payload_format: cfg.wire.vita49_payload_format(),
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
                if finished || total.is_some_and(|n| sample >= n) {
                    ended = true;
                    break;
                }
                let n = total.map_or(spp as u64, |total| (total - sample).min(spp as u64)) as usize;
                // The stream's last packet ends its burst (CHDR's EOB, VRT's trailer), as a USRP's does
                // when it stops streaming: a stop or the end of the duration takes effect
                // with this packet (unpaced, the duration is the wall clock's).
                let last = self.stop.load(Ordering::Relaxed)
                    || (cfg.unpaced && cfg.duration.is_some_and(|d| start.elapsed() >= d))
                    || total.is_some_and(|total| sample + n as u64 >= total);
                finished = last;
                // VRT's end of burst is a trailer word after the samples.
                let len = header + 4 * n + cfg.format.trailer_len(last);
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
                    let (buf, used, sizes) = (&mut bufs[c], &mut used[c], &mut sizes[c]);
                    let dg = &mut buf[*used..*used + len];
                    if last {
                        framer.frame_end_of_burst(dg, n as u64, 0)
                    } else {
                        framer.frame(dg, n as u64, 0)
                    }
                    .map_err(|e| Error::Io(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
                    self.fill(sample, &mut dg[header..header + 4 * n]);
                    r.packets_sent += 1;
                    r.samples_sent += n as u64;
                    if faulty(c) && every(f.reorder_every, packet) && held.is_none() {
                        held = Some((c, buf[*used..*used + len].to_vec()));
                        r.reordered += 1;
                        continue;
                    }
                    sizes.push(len);
                    *used += len;
                    if faulty(c) && every(f.duplicate_every, packet) {
                        buf.copy_within(*used - len..*used, *used);
                        sizes.push(len);
                        *used += len;
                        r.duplicated += 1;
                    }
                    // A held packet goes right after its successor in its own channel.
                    if held.as_ref().is_some_and(|(hc, _)| *hc == c) {
                        let (_, h) = held.take().expect("held");
                        buf[*used..*used + h.len()].copy_from_slice(&h);
                        sizes.push(h.len());
                        *used += h.len();
                    }
                }
                sample += n as u64;
            }
            let bytes: usize = used.iter().sum();
            if bytes == 0 && !ended {
                // Every packet of this call was dropped or held back by a fault.
                continue 'stream;
            }
            if bytes == 0 {
                if let Some((_, h)) = held.take() {
                    // The stream ended right after a held packet: it goes last.
                    attempted += 1;
                    if let Err(e) = self.sender.send_datagrams(&[&h]) {
                        tracing::debug!(error = %e, "emulator send failed");
                    }
                }
                break 'stream;
            }
            attempted += sizes.iter().map(|s| s.len() as u64).sum::<u64>();
            if let Some(c) = clock.as_mut() {
                // The call's packets go once their last sample exists.
                c.wait_for(sample);
                if c.behind() > BEHIND_WARNING && !warned {
                    warned = true;
                    tracing::warn!(
                        "the emulator is {:.0} ms behind its clock at {:.2} Msps: this machine \
                         cannot send the rate asked; it sends as fast as it can and reports \
                         the rate it got",
                        c.behind().as_secs_f64() * 1e3,
                        cfg.rate / 1e6
                    );
                }
            }
            for ((buf, sizes), &used) in bufs.iter().zip(&sizes).zip(&used) {
                if used > 0 {
                    self.send_call(&buf[..used], sizes, full);
                }
            }
        }
        r.send_errors = attempted - self.sender.stats().datagrams;
        r.seconds = start.elapsed().as_secs_f64();
        r.rate =
            (r.samples_sent + r.dropped_samples) as f64 / channels as f64 / r.seconds.max(1e-9);
        r.behind_seconds = clock
            .as_ref()
            .map_or(0.0, |c| c.most_behind().as_secs_f64());
        r.kept_up = cfg.unpaced || r.rate >= KEPT_UP * cfg.rate;
        if !r.kept_up {
            tracing::warn!(
                "the emulator could not keep up: {:.2} Msps of the {:.2} Msps asked ({} samples \
                 in {:.3} s)",
                r.rate / 1e6,
                cfg.rate / 1e6,
                r.samples_sent + r.dropped_samples,
                r.seconds
            );
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests;
