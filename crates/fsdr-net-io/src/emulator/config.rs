//! What to emulate: the signal, the faults, the context packets and the stream's shape
//! ([`EmulatorConfig`]).

use std::net::SocketAddr;
use std::time::Duration;

use crate::format::Format;
use crate::sample::WireFormat;

use super::DATAGRAM_BYTES;

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

/// The stream ID the emulator gives channel `c` in `format`: one convention for every format
/// and flag, channels count from 0 and channel `c` is stream ID `c` (the VRT stream ID, the
/// CHDR destination endpoint), as [`Faults::channel`] and the examples' `--fault-channel`
/// count them. Formats without stream IDs (raw, seq64) have one channel per port.
///
/// ```
/// use fsdr_net_io::Format;
/// use fsdr_net_io::emulator::channel_stream_id;
/// use fsdr_net_io::StreamSelector;
///
/// // The selectors of a two-channel VRT emulator's streams, in channel order.
/// let streams: Vec<_> = (0..2).map(|c| StreamSelector::Id(channel_stream_id(Format::Vrt, c))).collect();
/// assert_eq!(streams, [StreamSelector::Id(0), StreamSelector::Id(1)]);
/// assert_eq!(channel_stream_id(Format::Chdr, 1), 1);
/// ```
pub fn channel_stream_id(format: Format, c: usize) -> u32 {
    // One rule for every format; the format is the argument so that a format with another
    // numbering can be added without changing callers.
    let _ = format;
    c as u32
}

/// The most channels one emulator sends ([`EmulatorConfig::channels`]): each is a stream ID
/// of its own, and CHDR's endpoint IDs are 16 bits.
pub const MAX_CHANNELS: usize = 1024;

/// How to emulate.
#[derive(Debug, Clone, PartialEq)]
pub struct EmulatorConfig {
    /// Where to stream (UHD's `dest_addr`/`dest_port`).
    pub dest: SocketAddr,
    /// Packet format: [`Format::Raw`] is `raw_payload`, [`Format::Chdr`] is `full_packet`.
    pub format: Format,
    /// Samples per second.
    pub rate: f64,
    /// Samples per packet (at least 1, the datagram within UDP's 65507 bytes); `None`: the
    /// most that fit [`DATAGRAM_BYTES`].
    pub spp: Option<usize>,
    /// Device tick rate for timestamps.
    pub tick_rate: f64,
    /// Timestamp of the first sample, in ticks.
    pub start_ticks: u64,
    /// Stop after this many samples (per channel).
    pub samples: Option<u64>,
    /// Stop after this long: paced, after `rate × duration` samples (per channel), the
    /// stream's length whatever the machine; unpaced, after this long on the wall clock.
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
    /// period of `spp` samples, interleaved, each a stream of its own (channel `c` is stream ID `c`:
    /// [`channel_stream_id`]) with its own sequence numbers. Default 1, at most
    /// [`MAX_CHANNELS`]. `rate` is per channel; the report's packet and sample counts add up
    /// every channel.
    pub channels: usize,
    /// With a multicast `dest`: the interface to send on (an IPv4 address), `None` for the
    /// kernel's choice.
    pub multicast_if: Option<std::net::IpAddr>,
    /// With an IPv6 multicast `dest`: the interface index to send on.
    pub multicast_if_v6: Option<u32>,
    /// With a multicast `dest`: the packets' time to live (hops).
    pub multicast_ttl: u32,
}

/// The IF context packets a VRT emulator sends: before the first data packet, every `every`
/// data packets after it, and at a retune. Each states the sample rate, RF frequency,
/// bandwidth (80% of the rate) and gain; timestamped with the sample count of the next
/// data packet, in a packet count of their own. DIFI's packets also state the emulated
/// radio's other fields: reference point 0, IF reference frequency and band offset 0 Hz
/// (baseband), reference level 0 dBm, no timestamp adjustment, calibration time 0, no state
/// or event indicator valid, and its wire format's payload format.
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

impl Default for ContextPlan {
    /// A DIFI context packet before the first data packet and every 100 after it, stating
    /// 1 GHz and 10 dB, no retune.
    fn default() -> Self {
        ContextPlan {
            every: 100,
            rf_freq: 1e9,
            gain_db: 10.0,
            retune: None,
            difi: true,
        }
    }
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
            multicast_if: None,
            multicast_if_v6: None,
            multicast_ttl: 1,
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

    /// Samples per channel the stream holds, when bounded: `samples`, and paced the
    /// `rate × duration` (rounded) a radio produces in `duration`, whichever is fewer.
    ///
    /// ```
    /// use fsdr_net_io::Format;
    /// use fsdr_net_io::emulator::EmulatorConfig;
    /// let mut c = EmulatorConfig::new("127.0.0.1:9".parse().unwrap(), Format::Chdr);
    /// c.rate = 491.52e6;
    /// c.duration = Some(std::time::Duration::from_secs(1));
    /// assert_eq!(c.samples_to_send(), Some(491_520_000));
    /// c.samples = Some(1000);
    /// assert_eq!(c.samples_to_send(), Some(1000));
    /// ```
    pub fn samples_to_send(&self) -> Option<u64> {
        // `as` saturates: a duration beyond reason is "until `samples`".
        let by_time = self
            .duration
            .filter(|_| !self.unpaced)
            .map(|d| (self.rate * d.as_secs_f64()).round() as u64);
        match (self.samples, by_time) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Samples per packet in force.
    pub fn samples_per_packet(&self) -> usize {
        self.spp
            .unwrap_or((DATAGRAM_BYTES - self.header_len()) / 4)
            .max(1)
    }
}
