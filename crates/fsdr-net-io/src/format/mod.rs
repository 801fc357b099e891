//! Packet formats: zero-copy views over received datagrams and emitters for senders.
//!
//! Each format lives in its own module and follows the same shape (after smoltcp's `wire`):
//! a `Packet<T: AsRef<[u8]>>` view with a checked constructor and field accessors, a `Repr`
//! that holds the parsed header fields, and `Repr::emit` that writes them back. The
//! [`Format`] enum ties them together for the receive engine, which only needs a
//! [`PacketInfo`]: where the payload is, which sequence number and timestamp the datagram
//! carries, and whether it carries samples at all.
//!
//! ```
//! use fsdr_net_io::format::{DataHeader, Format, PacketClass};
//!
//! let mut datagram = vec![0u8; 8 + 4];
//! let fields = DataHeader { seq: 7, ..Default::default() };
//! let header = Format::Seq64.emit_header(&mut datagram, &fields).unwrap();
//! datagram[header..].copy_from_slice(&[1, 2, 3, 4]);
//! let info = Format::Seq64.parse(&datagram).unwrap();
//! assert_eq!(info.class, PacketClass::Data);
//! assert_eq!(info.seq, Some(7));
//! assert_eq!(&datagram[info.payload()], &[1, 2, 3, 4]);
//! ```

pub mod chdr;
pub mod raw;
pub mod seq64;
pub mod vrt;

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

/// Why a datagram could not be parsed. Every malformed input maps to one of these; no parser
/// panics on any byte string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The datagram is shorter than the header it announces.
    #[error("datagram of {got} bytes is shorter than the {needed} bytes its header needs")]
    Truncated {
        /// Bytes the header (and its optional words) need.
        needed: usize,
        /// Bytes the datagram has.
        got: usize,
    },
    /// A length field disagrees with the size of the datagram.
    #[error("length field says {field} bytes, the datagram has {datagram}")]
    LengthMismatch {
        /// Length in bytes according to the header.
        field: usize,
        /// Length of the datagram in bytes.
        datagram: usize,
    },
    /// The packet type is not one the format defines.
    #[error("unknown packet type {0:#x}")]
    UnknownPacketType(u8),
    /// A VRT context packet the `vita49` parser refused.
    #[error("VRT context packet: {0}")]
    Context(String),
    /// A header field the emitter was asked to write that the format cannot carry as given:
    /// a [`Framer`](crate::send::Framer)'s ticks per item that is not a finite number ≥ 0,
    /// a CHDR stream ID (destination endpoint) above 16 bits. Never written truncated.
    #[error("{0}")]
    Field(String),
}

/// What a datagram carries, as far as a sample stream is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketClass {
    /// Samples: delivered to the consumer.
    Data,
    /// A valid packet that carries no samples (CHDR control or management, VRT command):
    /// counted as `skipped` and not delivered.
    NonData,
    /// A VRT IF context packet: the radio's settings for a stream. Delivered to consumers
    /// that ask for context ([`EngineConfig::deliver_context`](crate::EngineConfig)),
    /// counted as `skipped` otherwise.
    Context,
}

/// A timestamp carried in a packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timestamp {
    /// A CHDR timestamp: ticks of the device's tick rate.
    Ticks(u64),
    /// A VITA-49 timestamp: integer seconds (TSI) and fractional part (TSF).
    Vrt(vrt::VrtTimestamp),
}

impl Timestamp {
    /// Time in ticks of `tick_rate` Hz where the format allows it (CHDR ticks, VRT sample
    /// counts, VRT integer seconds combined with picoseconds).
    pub fn ticks(&self, tick_rate: f64) -> Option<u64> {
        match self {
            Timestamp::Ticks(t) => Some(*t),
            Timestamp::Vrt(v) => v.ticks(tick_rate),
        }
    }

    /// The timestamp on a linear scale of the stream's own units, without knowing any rate:
    /// CHDR ticks; a VRT sample count or free-running count (without integer seconds), or
    /// picoseconds (integer seconds × 10^12 + real-time picoseconds, wrapping). `None` where
    /// that needs the sample rate (integer seconds with a sample count) or the timestamp has
    /// no fractional part. Differences of consecutive values measure time between packets.
    pub fn linear(&self) -> Option<u64> {
        match self {
            Timestamp::Ticks(t) => Some(*t),
            Timestamp::Vrt(v) => match (v.integer, v.tsf, v.fractional) {
                (None, vrt::Tsf::SampleCount | vrt::Tsf::FreeRunning, Some(f)) => Some(f),
                (i, vrt::Tsf::RealTime, Some(ps)) => Some(
                    u64::from(i.unwrap_or(0))
                        .wrapping_mul(1_000_000_000_000)
                        .wrapping_add(ps),
                ),
                _ => None,
            },
        }
    }

    /// Like [`Timestamp::linear`], and with the device's tick rate (VRT: the sample rate)
    /// also integer seconds with a sample count: seconds × rate + count, in exact integer
    /// arithmetic when the rate is a whole number.
    ///
    /// ```
    /// use fsdr_net_io::format::Timestamp;
    /// use fsdr_net_io::format::vrt::{Tsf, Tsi, VrtTimestamp};
    ///
    /// let t = Timestamp::Vrt(VrtTimestamp {
    ///     tsi: Tsi::Utc,
    ///     integer: Some(1_700_000_000),
    ///     tsf: Tsf::SampleCount,
    ///     fractional: Some(5),
    /// });
    /// assert_eq!(t.linear(), None);
    /// assert_eq!(t.linear_at(Some(30.72e6)), Some(1_700_000_000 * 30_720_000 + 5));
    /// ```
    pub fn linear_at(&self, tick_rate: Option<f64>) -> Option<u64> {
        if let Some(t) = self.linear() {
            return Some(t);
        }
        match (self, tick_rate) {
            (Timestamp::Vrt(v), Some(rate)) if rate > 0.0 && rate.is_finite() => {
                match (v.integer, v.tsf, v.fractional) {
                    (Some(s), vrt::Tsf::SampleCount, Some(f)) => {
                        let base = if rate.fract() == 0.0 && rate < 1.8e19 {
                            u64::from(s).wrapping_mul(rate as u64)
                        } else {
                            (f64::from(s) * rate) as u64
                        };
                        Some(base.wrapping_add(f))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Time in seconds for a device running at `tick_rate` Hz.
    pub fn seconds(&self, tick_rate: f64) -> Option<f64> {
        match self {
            Timestamp::Ticks(t) => Some(*t as f64 / tick_rate),
            Timestamp::Vrt(v) => v.seconds(tick_rate),
        }
    }
}

/// The fields an emitter writes into a data-packet header ([`Format::emit_header`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataHeader {
    /// Sequence number (reduced to the format's sequence space).
    pub seq: u64,
    /// Timestamp of the first sample: CHDR ticks, VRT sample count.
    pub timestamp: Option<u64>,
    /// End of burst: CHDR's EOB flag; VRT's trailer with the end-of-burst indicator
    /// ([`vrt::EOB_TRAILER`], 4 bytes after the padding: [`Format::trailer_len`]).
    pub eob: bool,
    /// Stream identifier: VRT stream ID, CHDR destination endpoint (default 0 in both:
    /// channel 0, [`channel_stream_id`](crate::emulator::channel_stream_id)).
    pub stream_id: Option<u32>,
    /// Bytes of padding after the payload (VRT, to fill the last 32-bit word; announced in
    /// the class ID's pad bit count). At most 3.
    pub pad: usize,
    /// VRT: integer UTC seconds (TSI = UTC, one more header word); `timestamp` is then the
    /// picoseconds within that second (TSF = real time), as DIFI asks. Other formats, and
    /// VRT without it (a sample count), ignore it.
    pub utc_seconds: Option<u32>,
}

impl DataHeader {
    /// Header bytes `format` writes for these fields.
    pub fn header_len(&self, format: Format) -> usize {
        format.header_len(self.timestamp.is_some())
            + if format == Format::Vrt && self.utc_seconds.is_some() {
                4
            } else {
                0
            }
    }
}

/// The facts about one datagram that the engine and the blocks need, independent of format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    /// Whether the datagram carries samples.
    pub class: PacketClass,
    /// Sequence number, in the format's sequence space (see [`Format::seq_bits`]).
    pub seq: Option<u64>,
    /// Offset of the payload within the datagram.
    pub payload_offset: u32,
    /// Length of the payload in bytes.
    pub payload_len: u32,
    /// Timestamp of the first sample of the payload.
    pub timestamp: Option<Timestamp>,
    /// End of burst.
    pub eob: bool,
    /// Stream identifier (VRT stream ID, CHDR destination endpoint).
    pub stream_id: Option<u32>,
}

impl PacketInfo {
    /// A data packet whose payload spans `payload` and that carries nothing else.
    pub fn data(payload: Range<usize>) -> Self {
        Self {
            class: PacketClass::Data,
            seq: None,
            payload_offset: payload.start as u32,
            payload_len: (payload.end - payload.start) as u32,
            timestamp: None,
            eob: false,
            stream_id: None,
        }
    }

    /// Byte range of the payload within the datagram.
    pub fn payload(&self) -> Range<usize> {
        let start = self.payload_offset as usize;
        start..start + self.payload_len as usize
    }
}

/// The wire formats fsdr-net understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// No header: every byte is payload, no sequence numbers.
    #[default]
    Raw,
    /// GNU Radio gr-network "64-bit sequence number" header (8 bytes, little-endian).
    Seq64,
    /// GNU Radio gr-network "sequence number + data size" header (16 bytes).
    SeqPlusSize,
    /// Ettus CHDR, 64-bit CHDR width, little-endian (UHD remote streaming, full_packet).
    Chdr,
    /// VITA-49.0 VRT IF data packets (and DIFI), big-endian.
    Vrt,
}

impl Format {
    /// All formats, for tests and sweeps.
    pub const ALL: [Format; 5] = [
        Format::Raw,
        Format::Seq64,
        Format::SeqPlusSize,
        Format::Chdr,
        Format::Vrt,
    ];

    /// Width of the format's sequence numbers in bits (64, 16 or 4); `None` when it has none.
    pub fn seq_bits(&self) -> Option<u32> {
        match self {
            Format::Raw => None,
            Format::Seq64 | Format::SeqPlusSize => Some(64),
            Format::Chdr => Some(16),
            Format::Vrt => Some(4),
        }
    }

    /// The sequence number a sender puts in its first datagram.
    pub fn first_seq(&self) -> u64 {
        match self {
            Format::Seq64 | Format::SeqPlusSize => 1,
            _ => 0,
        }
    }

    /// Header bytes an emitter writes before the payload (`timestamp` only matters for CHDR
    /// and VRT).
    pub fn header_len(&self, timestamp: bool) -> usize {
        match self {
            Format::Raw => 0,
            Format::Seq64 => seq64::SEQ64_HEADER_LEN,
            Format::SeqPlusSize => seq64::SEQ_SIZE_HEADER_LEN,
            Format::Chdr => chdr::HEADER_LEN + if timestamp { 8 } else { 0 },
            Format::Vrt => vrt::emit_header_len(timestamp),
        }
    }

    /// Bytes after the payload (and its padding) of a datagram the emitter writes: VRT's
    /// trailer word on a burst's last packet, where its end-of-burst indicator is; 0 for
    /// every other datagram and format (CHDR's EOB is a header flag).
    ///
    /// ```
    /// use fsdr_net_io::Format;
    ///
    /// assert_eq!(Format::Vrt.trailer_len(true), 4);
    /// assert_eq!(Format::Vrt.trailer_len(false), 0);
    /// assert_eq!(Format::Chdr.trailer_len(true), 0);
    /// ```
    pub fn trailer_len(&self, eob: bool) -> usize {
        if eob && *self == Format::Vrt { 4 } else { 0 }
    }

    /// Whether a datagram whose header words are `head` carries fields after its payload
    /// that [`Format::parse_head`] cannot read from the head alone (VRT's trailer, where the
    /// end of burst is): a receiver that scattered the payload parses the whole datagram
    /// instead.
    pub fn trailer_unseen(&self, head: &[u8]) -> bool {
        *self == Format::Vrt && head.first().is_some_and(|b| b >> 2 & 1 == 1)
    }

    /// Parses a datagram.
    pub fn parse(&self, datagram: &[u8]) -> Result<PacketInfo, FormatError> {
        match self {
            Format::Raw => Ok(raw::parse(datagram)),
            Format::Chdr => chdr::parse(datagram),
            Format::Vrt => vrt::parse(datagram),
            _ => self.parse_head(datagram, datagram.len()),
        }
    }

    /// Parses a datagram of `len` bytes from its first bytes `head`, which must hold the
    /// whole header (VRT: every header word): what a receiver that scattered the payload
    /// straight into an output buffer has at hand. The same result as [`Format::parse`] on
    /// the whole datagram, or an error (`Truncated` when `head` ends inside the header) —
    /// except a VRT trailer's end of burst, which only the whole datagram shows
    /// ([`Format::trailer_unseen`] says when a head leaves it out).
    ///
    /// ```
    /// use fsdr_net_io::format::{DataHeader, Format};
    ///
    /// let mut dg = vec![0u8; 16 + 64];
    /// let h = DataHeader { seq: 9, timestamp: Some(1000), ..Default::default() };
    /// let header = Format::Chdr.emit_header(&mut dg, &h).unwrap();
    /// let whole = Format::Chdr.parse(&dg).unwrap();
    /// assert_eq!(Format::Chdr.parse_head(&dg[..header], dg.len()).unwrap(), whole);
    /// assert!(Format::Chdr.parse_head(&dg[..8], dg.len()).is_err());
    /// ```
    pub fn parse_head(&self, head: &[u8], len: usize) -> Result<PacketInfo, FormatError> {
        let head = &head[..head.len().min(len)];
        match self {
            Format::Raw => Ok(PacketInfo::data(0..len)),
            Format::Seq64 => seq64::parse_seq64(head, len),
            Format::SeqPlusSize => seq64::parse_seq_plus_size(head, len),
            Format::Chdr => chdr::parse_head(head, len),
            Format::Vrt => vrt::parse_head(head, len),
        }
    }

    /// Writes a data-packet header for a datagram of `datagram.len()` bytes whose payload
    /// follows the header (and ends `h.pad` bytes before the end), and returns the header
    /// length. `h.seq` is reduced to the format's sequence space; `h.timestamp` is in ticks
    /// (CHDR) or sample counts (VRT, TSF = sample count). Fails when the buffer cannot hold
    /// the header, exceeds a length field, or (VRT) is not a whole number of 32-bit words.
    ///
    /// ```
    /// use fsdr_net_io::format::{DataHeader, Format};
    ///
    /// // 6 payload bytes padded to a 32-bit word.
    /// let h = Format::Vrt.header_len(false);
    /// let mut dg = vec![0u8; h + 8];
    /// Format::Vrt.emit_header(&mut dg, &DataHeader { seq: 3, pad: 2, ..Default::default() }).unwrap();
    /// let info = Format::Vrt.parse(&dg).unwrap();
    /// assert_eq!(info.payload_len, 6);
    /// ```
    pub fn emit_header(&self, datagram: &mut [u8], h: &DataHeader) -> Result<usize, FormatError> {
        let header = h.header_len(*self);
        let needed = header + h.pad + self.trailer_len(h.eob);
        if datagram.len() < needed {
            return Err(FormatError::Truncated {
                needed,
                got: datagram.len(),
            });
        }
        match self {
            Format::Raw => {}
            Format::Seq64 => seq64::emit_seq64(datagram, h.seq),
            Format::SeqPlusSize => seq64::emit_seq_plus_size(datagram, h.seq)?,
            Format::Chdr => {
                let id = h.stream_id.unwrap_or(0);
                let epid = u16::try_from(id).map_err(|_| {
                    FormatError::Field(format!(
                        "stream ID {id} does not fit CHDR's 16-bit destination endpoint"
                    ))
                })?;
                let mut repr =
                    chdr::ChdrRepr::data(h.seq as u16, datagram.len(), h.timestamp, h.eob)?;
                repr.dst_epid = epid;
                repr.emit(&mut chdr::ChdrPacket::new_unchecked(&mut *datagram));
            }
            Format::Vrt => vrt::emit_data_header(datagram, h)?,
        }
        Ok(header)
    }

    /// Name as used on command lines.
    pub fn name(&self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Seq64 => "seq64",
            Format::SeqPlusSize => "seq-size",
            Format::Chdr => "chdr",
            Format::Vrt => "vrt",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error for an unknown format name.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown format {0:?} (expected raw, seq64, seq-size, chdr or vrt)")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "raw" | "none" | "raw_payload" => Format::Raw,
            "seq64" | "seqnum" => Format::Seq64,
            "seq-size" | "seqplussize" | "seq_plus_size" => Format::SeqPlusSize,
            "chdr" | "full_packet" => Format::Chdr,
            "vrt" | "vita49" | "difi" => Format::Vrt,
            _ => return Err(UnknownFormat(s.to_string())),
        })
    }
}

/// Checks that `datagram` has at least `needed` bytes.
pub(crate) fn need(datagram: &[u8], needed: usize) -> Result<(), FormatError> {
    if datagram.len() < needed {
        Err(FormatError::Truncated {
            needed,
            got: datagram.len(),
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `parse_head` from any prefix that holds the header gives what `parse` gives on the
    /// whole datagram, and an error from a shorter one; never a panic. Emitted packets of
    /// every format, with their headers' bytes then flipped at random.
    #[test]
    fn parse_head_agrees_with_parse_from_every_prefix() {
        let mut noise = crate::testing::Noise::new();
        let mut rand = move || noise.next_u64();
        for format in Format::ALL {
            for round in 0..crate::testing::sweep(400, 110) {
                let len = 28 + (rand() % 200) as usize / 4 * 4;
                let mut dg = vec![0u8; len];
                let h = DataHeader {
                    seq: rand(),
                    timestamp: (round % 2 == 0).then(|| rand() >> 8),
                    eob: round % 3 == 0,
                    ..Default::default()
                };
                format.emit_header(&mut dg, &h).unwrap();
                if round >= 100 {
                    let i = (rand() % 28) as usize;
                    dg[i] ^= 1 << (rand() % 8);
                }
                let whole = format.parse(&dg);
                for k in 0..=dg.len().min(40) {
                    let head = format.parse_head(&dg[..k], len);
                    match (&whole, &head) {
                        // The one field a head cannot show: VRT's trailer, which the
                        // format says it holds (`trailer_unseen`).
                        (Ok(w), Ok(h)) if k < len && format.trailer_unseen(&dg[..k]) => {
                            let w = PacketInfo { eob: false, ..*w };
                            assert_eq!(&w, h, "{format:?} prefix {k}")
                        }
                        (Ok(w), Ok(h)) => assert_eq!(w, h, "{format:?} prefix {k}"),
                        (Ok(w), Err(_)) => assert!(
                            k < w.payload_offset as usize,
                            "{format:?}: a prefix of {k} holds the header of {w:?}"
                        ),
                        (Err(_), Ok(h)) => {
                            panic!("{format:?} prefix {k}: {h:?} from a bad datagram")
                        }
                        (Err(_), Err(_)) => {}
                    }
                }
            }
        }
    }

    #[test]
    fn every_format_round_trips_through_emit_and_parse() {
        for format in Format::ALL {
            for ts in [None, Some(123_456u64)] {
                let mut dg = vec![0u8; 1000];
                let fields = DataHeader {
                    seq: 5,
                    timestamp: ts,
                    ..Default::default()
                };
                let h = format.emit_header(&mut dg, &fields).unwrap();
                for (i, b) in dg[h..].iter_mut().enumerate() {
                    *b = i as u8;
                }
                let info = format.parse(&dg).unwrap();
                assert_eq!(info.class, PacketClass::Data, "{format}");
                assert_eq!(info.payload(), h..1000, "{format}");
                if format.seq_bits().is_some() {
                    assert_eq!(info.seq, Some(5), "{format}");
                }
                if matches!(format, Format::Chdr | Format::Vrt) {
                    assert_eq!(info.timestamp.and_then(|t| t.ticks(1e6)), ts, "{format}");
                }
            }
        }
    }

    #[test]
    fn no_parser_panics_on_short_or_random_input() {
        let mut noise = crate::testing::Noise::new();
        for len in 0..crate::testing::sweep(200, 40) as usize {
            let dg = noise.bytes(len);
            for format in Format::ALL {
                let _ = format.parse(&dg);
            }
        }
    }

    #[test]
    fn names_parse_back() {
        for format in Format::ALL {
            assert_eq!(format.name().parse::<Format>().unwrap(), format);
        }
        assert!("bogus".parse::<Format>().is_err());
    }
}
