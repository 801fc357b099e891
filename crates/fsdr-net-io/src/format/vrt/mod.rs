//! VITA-49.0 (VRT) IF data packets, big-endian, including DIFI data packets.
//!
//! Header word (32 bits, big-endian):
//!
//! | bits  | field |
//! |-------|-------|
//! | 31:28 | packet type: 0/1 IF data without/with stream ID, 2/3 extension data, 4/5 context, 6/7 command |
//! | 27    | C: class ID present (2 words) |
//! | 26    | T: trailer present (data packets, 1 word at the end) |
//! | 23:22 | TSI: integer timestamp type (none, UTC, GPS, other) |
//! | 21:20 | TSF: fractional timestamp type (none, sample count, real time in ps, free running) |
//! | 19:16 | packet count (4 bits) |
//! | 15:0  | packet size in 32-bit words, header included |
//!
//! Then, in order: stream ID, class ID, integer timestamp, fractional timestamp (2 words),
//! payload, trailer. Context packets carry no samples: [`context`] parses them (with the
//! `vita49` crate). DIFI data packets are accepted whatever their OUI.
//!
//! End of burst: the trailer's first user-defined indicator (bit 8, enabled by bit 20), the
//! bit UHD's VRT unpacker reads as `eob` (start of burst: bit 9, enabled by bit 21). The
//! emitter writes a trailer only on a burst's last packet ([`EOB_TRAILER`]); DIFI 1.x data
//! packets otherwise carry none.
//!
//! ```
//! use fsdr_net_io::format::vrt::VrtPacket;
//! use fsdr_net_io::format::{DataHeader, Format};
//!
//! let mut dg = vec![0u8; Format::Vrt.header_len(true) + 16];
//! let fields = DataHeader { seq: 17, timestamp: Some(5_000), ..Default::default() };
//! Format::Vrt.emit_header(&mut dg, &fields).unwrap();
//! let packet = VrtPacket::new_checked(&dg[..]).unwrap();
//! assert_eq!(packet.packet_count(), 17 % 16);
//! assert_eq!(packet.fractional_timestamp(), Some(5_000));
//! assert_eq!(packet.payload().len(), 16);
//! ```

pub mod context;

use super::{DataHeader, FormatError, PacketClass, PacketInfo, Timestamp, need};

/// The DIFI organisationally unique identifier, used by the emitter's class ID.
pub const DIFI_OUI: u32 = 0x6A_621E;

/// The trailer word the emitter puts on a burst's last packet: the end-of-burst indicator
/// (bit 8) and its enable (bit 20), as UHD reads them.
pub const EOB_TRAILER: u32 = (1 << 20) | (1 << 8);

/// Whether a trailer word says end of burst (indicator bit 8 with its enable bit 20).
///
/// ```
/// use fsdr_net_io::format::vrt::{EOB_TRAILER, trailer_ends_burst};
///
/// assert!(trailer_ends_burst(EOB_TRAILER));
/// assert!(!trailer_ends_burst(1 << 8)); // indicator without its enable
/// ```
pub fn trailer_ends_burst(trailer: u32) -> bool {
    (trailer >> 20) & (trailer >> 8) & 1 == 1
}

/// Integer timestamp type (TSI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tsi {
    /// No integer timestamp.
    None,
    /// UTC seconds.
    Utc,
    /// GPS seconds.
    Gps,
    /// Other.
    Other,
}

/// Fractional timestamp type (TSF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tsf {
    /// No fractional timestamp.
    None,
    /// Sample count.
    SampleCount,
    /// Real time in picoseconds.
    RealTime,
    /// Free-running count.
    FreeRunning,
}

impl Tsi {
    fn from_bits(b: u32) -> Self {
        [Tsi::None, Tsi::Utc, Tsi::Gps, Tsi::Other][(b & 3) as usize]
    }
    fn bits(self) -> u32 {
        self as u32
    }
}

impl Tsf {
    fn from_bits(b: u32) -> Self {
        [Tsf::None, Tsf::SampleCount, Tsf::RealTime, Tsf::FreeRunning][(b & 3) as usize]
    }
    fn bits(self) -> u32 {
        self as u32
    }
}

/// A VITA-49 timestamp as carried in a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VrtTimestamp {
    /// Type of the integer part.
    pub tsi: Tsi,
    /// Integer seconds, if present.
    pub integer: Option<u32>,
    /// Type of the fractional part.
    pub tsf: Tsf,
    /// Fractional part, if present.
    pub fractional: Option<u64>,
}

impl VrtTimestamp {
    /// Time in ticks (samples) of `tick_rate` Hz: integer seconds × rate plus the sample
    /// count or the picoseconds converted; a free-running count as it is.
    pub fn ticks(&self, tick_rate: f64) -> Option<u64> {
        let base = self.integer.map(|s| (s as f64 * tick_rate) as u64);
        match (self.tsf, self.fractional) {
            (Tsf::SampleCount, Some(f)) | (Tsf::FreeRunning, Some(f)) => {
                Some(base.unwrap_or(0).wrapping_add(f))
            }
            (Tsf::RealTime, Some(ps)) => {
                Some(base.unwrap_or(0) + (ps as f64 * tick_rate / 1e12) as u64)
            }
            _ => base,
        }
    }

    /// Time in seconds for a stream of `tick_rate` Hz.
    pub fn seconds(&self, tick_rate: f64) -> Option<f64> {
        let base = self.integer.map(f64::from);
        match (self.tsf, self.fractional) {
            (Tsf::SampleCount, Some(f)) | (Tsf::FreeRunning, Some(f)) => {
                Some(base.unwrap_or(0.0) + f as f64 / tick_rate)
            }
            (Tsf::RealTime, Some(ps)) => Some(base.unwrap_or(0.0) + ps as f64 * 1e-12),
            _ => base,
        }
    }
}

/// A view of a VRT packet.
#[derive(Debug, Clone, Copy)]
pub struct VrtPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VrtPacket<T> {
    /// Wraps a buffer without checks.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after checking the packet type, the size field against the datagram
    /// and that every announced word fits.
    pub fn new_checked(buffer: T) -> Result<Self, FormatError> {
        let len = buffer.as_ref().len();
        Self::new_checked_head(buffer, len)
    }

    /// Wraps the first bytes of a datagram of `len` bytes after the checks of
    /// [`VrtPacket::new_checked`]: `head` must hold every header word (the payload and
    /// trailer may be elsewhere, as when a receiver scattered them straight into an output
    /// buffer). Accessors that read the payload or trailer see only `head`.
    pub fn new_checked_head(head: T, len: usize) -> Result<Self, FormatError> {
        need(head.as_ref(), 4)?;
        let packet = Self { buffer: head };
        let ty = packet.packet_type();
        if ty > 7 {
            return Err(FormatError::UnknownPacketType(ty));
        }
        let field = packet.packet_size_words() as usize * 4;
        if field != len {
            return Err(FormatError::LengthMismatch {
                field,
                datagram: len,
            });
        }
        // Every header word before a field accessor reads one.
        need(packet.buffer.as_ref(), packet.payload_offset())?;
        let needed = packet.payload_offset() + packet.trailer_len();
        if len < needed {
            return Err(FormatError::Truncated { needed, got: len });
        }
        Ok(packet)
    }

    fn word(&self, i: usize) -> u32 {
        u32::from_be_bytes(self.buffer.as_ref()[4 * i..4 * i + 4].try_into().unwrap())
    }

    fn header(&self) -> u32 {
        self.word(0)
    }

    /// Packet type (4 bits).
    pub fn packet_type(&self) -> u8 {
        (self.header() >> 28) as u8
    }

    /// Whether the packet carries samples (IF or extension data).
    pub fn is_data(&self) -> bool {
        self.packet_type() <= 3
    }

    /// Whether a stream ID word follows the header.
    pub fn has_stream_id(&self) -> bool {
        // Odd data types, and every context and command packet.
        let ty = self.packet_type();
        ty & 1 == 1 || ty >= 4
    }

    /// C bit: class ID present.
    pub fn has_class_id(&self) -> bool {
        self.header() >> 27 & 1 == 1
    }

    /// T bit: trailer present (data packets only).
    pub fn has_trailer(&self) -> bool {
        self.is_data() && self.header() >> 26 & 1 == 1
    }

    /// Integer timestamp type.
    pub fn tsi(&self) -> Tsi {
        Tsi::from_bits(self.header() >> 22)
    }

    /// Fractional timestamp type.
    pub fn tsf(&self) -> Tsf {
        Tsf::from_bits(self.header() >> 20)
    }

    /// Packet count (4 bits).
    pub fn packet_count(&self) -> u8 {
        (self.header() >> 16) as u8 & 0xf
    }

    /// Packet size in 32-bit words, header included.
    pub fn packet_size_words(&self) -> u16 {
        self.header() as u16
    }

    fn class_id_word(&self) -> usize {
        1 + usize::from(self.has_stream_id())
    }

    fn tsi_word(&self) -> usize {
        self.class_id_word() + if self.has_class_id() { 2 } else { 0 }
    }

    fn tsf_word(&self) -> usize {
        self.tsi_word() + usize::from(self.tsi() != Tsi::None)
    }

    /// Stream ID.
    pub fn stream_id(&self) -> Option<u32> {
        self.has_stream_id().then(|| self.word(1))
    }

    /// OUI of the class ID (24 bits).
    pub fn class_oui(&self) -> Option<u32> {
        self.has_class_id()
            .then(|| self.word(self.class_id_word()) & 0x00ff_ffff)
    }

    /// Pad bit count of the class ID (bits 31:27 of its first word): unused bits at the end of
    /// the payload.
    pub fn class_pad_bits(&self) -> Option<u8> {
        self.has_class_id()
            .then(|| (self.word(self.class_id_word()) >> 27) as u8)
    }

    /// The class ID fields together.
    pub fn class_id(&self) -> Option<VrtClassId> {
        Some(VrtClassId {
            pad_bits: self.class_pad_bits()?,
            oui: self.class_oui()?,
            info_class: self.class_codes()?.0,
            packet_class: self.class_codes()?.1,
        })
    }

    /// Information class code and packet class code of the class ID.
    pub fn class_codes(&self) -> Option<(u16, u16)> {
        self.has_class_id().then(|| {
            let w = self.word(self.class_id_word() + 1);
            ((w >> 16) as u16, w as u16)
        })
    }

    /// Integer timestamp.
    pub fn integer_timestamp(&self) -> Option<u32> {
        (self.tsi() != Tsi::None).then(|| self.word(self.tsi_word()))
    }

    /// Fractional timestamp.
    pub fn fractional_timestamp(&self) -> Option<u64> {
        (self.tsf() != Tsf::None).then(|| {
            let w = self.tsf_word();
            (u64::from(self.word(w)) << 32) | u64::from(self.word(w + 1))
        })
    }

    /// The timestamp fields together.
    pub fn timestamp(&self) -> Option<VrtTimestamp> {
        (self.tsi() != Tsi::None || self.tsf() != Tsf::None).then(|| VrtTimestamp {
            tsi: self.tsi(),
            integer: self.integer_timestamp(),
            tsf: self.tsf(),
            fractional: self.fractional_timestamp(),
        })
    }

    /// Byte offset of the payload.
    pub fn payload_offset(&self) -> usize {
        4 * (self.tsf_word() + if self.tsf() != Tsf::None { 2 } else { 0 })
    }

    fn trailer_len(&self) -> usize {
        if self.has_trailer() { 4 } else { 0 }
    }

    /// The trailer word.
    pub fn trailer(&self) -> Option<u32> {
        self.has_trailer().then(|| {
            let b = self.buffer.as_ref();
            u32::from_be_bytes(b[b.len() - 4..].try_into().unwrap())
        })
    }

    /// The payload (between the header words and the trailer).
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[self.payload_offset()..b.len() - self.trailer_len()]
    }
}

/// The class ID of a VRT packet (bits 26:24 of its first word are reserved and emitted as 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VrtClassId {
    /// Pad bit count (5 bits).
    pub pad_bits: u8,
    /// Organisationally unique identifier (24 bits).
    pub oui: u32,
    /// Information class code.
    pub info_class: u16,
    /// Packet class code.
    pub packet_class: u16,
}

impl VrtClassId {
    /// A class ID with no padding.
    pub fn new(oui: u32, info_class: u16, packet_class: u16) -> Self {
        Self {
            pad_bits: 0,
            oui,
            info_class,
            packet_class,
        }
    }
}

/// The header fields of a VRT data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VrtRepr {
    /// Packet type (0–3 for data).
    pub packet_type: u8,
    /// Stream ID (present for odd packet types).
    pub stream_id: Option<u32>,
    /// Class ID.
    pub class_id: Option<VrtClassId>,
    /// Trailer word.
    pub trailer: Option<u32>,
    /// Timestamp.
    pub timestamp: Option<VrtTimestamp>,
    /// Packet count (4 bits).
    pub packet_count: u8,
    /// Packet size in words.
    pub size_words: u16,
}

impl VrtRepr {
    /// Reads a checked packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &VrtPacket<T>) -> Self {
        Self {
            packet_type: packet.packet_type(),
            stream_id: packet.stream_id(),
            class_id: packet.class_id(),
            trailer: packet.trailer(),
            timestamp: packet.timestamp(),
            packet_count: packet.packet_count(),
            size_words: packet.packet_size_words(),
        }
    }

    /// Header bytes before the payload.
    pub fn header_len(&self) -> usize {
        let ts = self.timestamp;
        4 * (1
            + usize::from(self.stream_id.is_some())
            + if self.class_id.is_some() { 2 } else { 0 }
            + usize::from(ts.is_some_and(|t| t.tsi != Tsi::None))
            + if ts.is_some_and(|t| t.tsf != Tsf::None) {
                2
            } else {
                0
            })
    }

    /// Writes header words and trailer into a buffer of `size_words * 4` bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let ts = self.timestamp.unwrap_or(VrtTimestamp {
            tsi: Tsi::None,
            integer: None,
            tsf: Tsf::None,
            fractional: None,
        });
        let header = (u32::from(self.packet_type & 0xf) << 28)
            | (u32::from(self.class_id.is_some()) << 27)
            | (u32::from(self.trailer.is_some()) << 26)
            | (ts.tsi.bits() << 22)
            | (ts.tsf.bits() << 20)
            | (u32::from(self.packet_count & 0xf) << 16)
            | u32::from(self.size_words);
        let mut at = 0;
        let mut put = |w: u32| {
            buf[at..at + 4].copy_from_slice(&w.to_be_bytes());
            at += 4;
        };
        put(header);
        if let Some(sid) = self.stream_id {
            put(sid);
        }
        if let Some(c) = self.class_id {
            put(u32::from(c.pad_bits & 0x1f) << 27 | (c.oui & 0x00ff_ffff));
            put(u32::from(c.info_class) << 16 | u32::from(c.packet_class));
        }
        if ts.tsi != Tsi::None {
            put(ts.integer.unwrap_or(0));
        }
        if ts.tsf != Tsf::None {
            let f = ts.fractional.unwrap_or(0);
            put((f >> 32) as u32);
            put(f as u32);
        }
        if let Some(t) = self.trailer {
            let n = buf.len();
            buf[n - 4..].copy_from_slice(&t.to_be_bytes());
        }
    }
}

pub(crate) fn emit_header_len(timestamp: bool) -> usize {
    4 + 4 + 8 + if timestamp { 8 } else { 0 }
}

/// Writes the header the built-in emitter uses: IF data with a stream ID (0 unless given), a
/// DIFI class ID carrying the pad bit count, and, with a timestamp, TSF = sample count (or,
/// with `utc_seconds`, TSI = UTC and TSF = real time in picoseconds, DIFI's).
pub(crate) fn emit_data_header(datagram: &mut [u8], h: &DataHeader) -> Result<(), FormatError> {
    let len = datagram.len();
    if !len.is_multiple_of(4) || len / 4 > u16::MAX as usize || h.pad > 3 {
        return Err(FormatError::LengthMismatch {
            field: len / 4 * 4,
            datagram: len,
        });
    }
    let mut class_id = VrtClassId::new(DIFI_OUI, 0, 0);
    class_id.pad_bits = (8 * h.pad) as u8;
    VrtRepr {
        packet_type: 1,
        stream_id: Some(h.stream_id.unwrap_or(0)),
        class_id: Some(class_id),
        trailer: h.eob.then_some(EOB_TRAILER),
        timestamp: match (h.utc_seconds, h.timestamp) {
            // DIFI's: UTC seconds and picoseconds.
            (Some(s), ps) => Some(VrtTimestamp {
                tsi: Tsi::Utc,
                integer: Some(s),
                tsf: Tsf::RealTime,
                fractional: Some(ps.unwrap_or(0)),
            }),
            (None, t) => t.map(|t| VrtTimestamp {
                tsi: Tsi::None,
                integer: None,
                tsf: Tsf::SampleCount,
                fractional: Some(t),
            }),
        },
        packet_count: (h.seq & 0xf) as u8,
        size_words: (len / 4) as u16,
    }
    .emit(datagram);
    // The padding ends the payload, before the trailer.
    let end = len - if h.eob { 4 } else { 0 };
    datagram[end - h.pad..end].fill(0);
    Ok(())
}

pub(crate) fn parse(datagram: &[u8]) -> Result<PacketInfo, FormatError> {
    parse_head(datagram, datagram.len())
}

/// [`parse`] from the first bytes of a datagram of `len` bytes (the header words).
pub(crate) fn parse_head(head: &[u8], len: usize) -> Result<PacketInfo, FormatError> {
    let packet = VrtPacket::new_checked_head(head, len)?;
    let start = packet.payload_offset();
    // The class ID's pad bit count: bits at the end of the payload that carry no data.
    let payload = len - start - packet.trailer_len();
    let pad = packet.class_pad_bits().map_or(0, |b| usize::from(b) / 8);
    if pad > payload {
        return Err(FormatError::LengthMismatch {
            field: pad,
            datagram: payload,
        });
    }
    let mut info = PacketInfo::data(start..start + payload - pad);
    // The trailer is the datagram's last word; a head without it cannot say (a receiver
    // that scattered the payload asks `trailer_unseen` first).
    if head.len() == len {
        info.eob = packet.trailer().is_some_and(trailer_ends_burst);
    }
    info.class = match packet.packet_type() {
        0..=3 => PacketClass::Data,
        4 | 5 => PacketClass::Context,
        _ => PacketClass::NonData,
    };
    info.seq = Some(u64::from(packet.packet_count()));
    info.timestamp = packet.timestamp().map(Timestamp::Vrt);
    info.stream_id = packet.stream_id();
    Ok(info)
}

#[cfg(test)]
mod tests;
