//! Ettus CHDR packets at CHDR width 64, little-endian, as UHD ≥ 4.4 remote streaming sends them
//! with `stream_mode=full_packet`.
//!
//! Header word (64 bits, little-endian):
//!
//! | bits  | field |
//! |-------|-------|
//! | 63:58 | virtual channel |
//! | 57    | end of burst (EOB) |
//! | 56    | end of vector (EOV) |
//! | 55:53 | packet type: 0 management, 1 stream status, 2 stream command, 4 control, 6 data, 7 data with timestamp (3 and 5 reserved) |
//! | 52:48 | number of metadata words |
//! | 47:32 | sequence number |
//! | 31:16 | length of the whole packet in bytes |
//! | 15:0  | destination endpoint ID |
//!
//! A type-7 packet carries its 64-bit timestamp in the next word; metadata words follow, then
//! the payload.
//!
//! ```
//! use fsdr_net_io::format::chdr::{ChdrPacket, ChdrRepr};
//!
//! let mut buf = vec![0u8; 16 + 8];
//! let repr = ChdrRepr::data(3, buf.len(), Some(1_000), false).unwrap();
//! repr.emit(&mut ChdrPacket::new_unchecked(&mut buf[..]));
//! let packet = ChdrPacket::new_checked(&buf[..]).unwrap();
//! assert_eq!(packet.seq_num(), 3);
//! assert_eq!(packet.timestamp(), Some(1_000));
//! assert_eq!(packet.payload().len(), 8);
//! ```

use super::{FormatError, PacketClass, PacketInfo, Timestamp, need};

/// Length of the header word.
pub const HEADER_LEN: usize = 8;

/// CHDR packet types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketType {
    /// Management.
    Management,
    /// Stream status.
    StreamStatus,
    /// Stream command.
    StreamCommand,
    /// Control.
    Control,
    /// Data without timestamp.
    Data,
    /// Data with timestamp.
    DataWithTimestamp,
}

impl PacketType {
    /// Decodes the 3-bit field.
    pub fn from_bits(bits: u8) -> Result<Self, FormatError> {
        Ok(match bits {
            0 => PacketType::Management,
            1 => PacketType::StreamStatus,
            2 => PacketType::StreamCommand,
            4 => PacketType::Control,
            6 => PacketType::Data,
            7 => PacketType::DataWithTimestamp,
            other => return Err(FormatError::UnknownPacketType(other)),
        })
    }

    /// The 3-bit field.
    pub fn bits(self) -> u8 {
        match self {
            PacketType::Management => 0,
            PacketType::StreamStatus => 1,
            PacketType::StreamCommand => 2,
            PacketType::Control => 4,
            PacketType::Data => 6,
            PacketType::DataWithTimestamp => 7,
        }
    }
}

/// A view of a CHDR packet.
#[derive(Debug, Clone, Copy)]
pub struct ChdrPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ChdrPacket<T> {
    /// Wraps a buffer without checks; accessors may panic on a buffer that is too short.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after checking the header, the packet type, the length field against
    /// the datagram, and that the timestamp and metadata words fit.
    pub fn new_checked(buffer: T) -> Result<Self, FormatError> {
        let len = buffer.as_ref().len();
        Self::new_checked_head(buffer, len)
    }

    /// Wraps the first bytes of a datagram of `len` bytes after the checks of
    /// [`ChdrPacket::new_checked`]: `head` must hold the header, timestamp and metadata
    /// words (the payload may be elsewhere, as when a receiver scattered it straight into an
    /// output buffer). Accessors that read the payload see only `head`.
    pub fn new_checked_head(head: T, len: usize) -> Result<Self, FormatError> {
        need(head.as_ref(), HEADER_LEN)?;
        let packet = Self { buffer: head };
        let pkt_type = PacketType::from_bits(packet.pkt_type_bits())?;
        let field = packet.length() as usize;
        if field != len {
            return Err(FormatError::LengthMismatch {
                field,
                datagram: len,
            });
        }
        let ts = if pkt_type == PacketType::DataWithTimestamp {
            8
        } else {
            0
        };
        let header = HEADER_LEN + ts + 8 * packet.num_mdata() as usize;
        need(packet.buffer.as_ref(), header)?;
        Ok(packet)
    }

    fn header(&self) -> u64 {
        u64::from_le_bytes(self.buffer.as_ref()[..8].try_into().unwrap())
    }

    /// Virtual channel (6 bits).
    pub fn vc(&self) -> u8 {
        (self.header() >> 58) as u8 & 0x3f
    }

    /// End of burst.
    pub fn eob(&self) -> bool {
        self.header() >> 57 & 1 == 1
    }

    /// End of vector.
    pub fn eov(&self) -> bool {
        self.header() >> 56 & 1 == 1
    }

    /// The raw 3-bit packet type field.
    pub fn pkt_type_bits(&self) -> u8 {
        (self.header() >> 53) as u8 & 0x7
    }

    /// The packet type (fails for the reserved codes 3 and 5).
    pub fn pkt_type(&self) -> Result<PacketType, FormatError> {
        PacketType::from_bits(self.pkt_type_bits())
    }

    /// Number of 64-bit metadata words.
    pub fn num_mdata(&self) -> u8 {
        (self.header() >> 48) as u8 & 0x1f
    }

    /// Sequence number (16 bits).
    pub fn seq_num(&self) -> u16 {
        (self.header() >> 32) as u16
    }

    /// Length of the whole packet in bytes.
    pub fn length(&self) -> u16 {
        (self.header() >> 16) as u16
    }

    /// Destination endpoint ID.
    pub fn dst_epid(&self) -> u16 {
        self.header() as u16
    }

    fn has_timestamp(&self) -> bool {
        self.pkt_type_bits() == PacketType::DataWithTimestamp.bits()
    }

    /// The timestamp of a type-7 packet.
    pub fn timestamp(&self) -> Option<u64> {
        self.has_timestamp()
            .then(|| u64::from_le_bytes(self.buffer.as_ref()[8..16].try_into().unwrap()))
    }

    fn metadata_offset(&self) -> usize {
        HEADER_LEN + if self.has_timestamp() { 8 } else { 0 }
    }

    /// Metadata word `i` (`i < num_mdata()`).
    pub fn metadata_word(&self, i: usize) -> u64 {
        let at = self.metadata_offset() + 8 * i;
        u64::from_le_bytes(self.buffer.as_ref()[at..at + 8].try_into().unwrap())
    }

    /// Offset of the payload in the packet.
    pub fn payload_offset(&self) -> usize {
        self.metadata_offset() + 8 * self.num_mdata() as usize
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.payload_offset()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ChdrPacket<T> {
    /// Writes the header word.
    pub fn set_header(&mut self, header: u64) {
        self.buffer.as_mut()[..8].copy_from_slice(&header.to_le_bytes());
    }

    /// Writes the timestamp word (the packet type must be 7).
    pub fn set_timestamp(&mut self, ts: u64) {
        self.buffer.as_mut()[8..16].copy_from_slice(&ts.to_le_bytes());
    }

    /// Writes metadata word `i`.
    pub fn set_metadata_word(&mut self, i: usize, word: u64) {
        let at = self.metadata_offset() + 8 * i;
        self.buffer.as_mut()[at..at + 8].copy_from_slice(&word.to_le_bytes());
    }
}

/// The fields of a CHDR header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChdrRepr {
    /// Virtual channel (6 bits).
    pub vc: u8,
    /// End of burst.
    pub eob: bool,
    /// End of vector.
    pub eov: bool,
    /// Packet type.
    pub pkt_type: PacketType,
    /// Number of metadata words (5 bits).
    pub num_mdata: u8,
    /// Sequence number.
    pub seq_num: u16,
    /// Whole packet length in bytes.
    pub length: u16,
    /// Destination endpoint.
    pub dst_epid: u16,
    /// Timestamp (only for [`PacketType::DataWithTimestamp`]).
    pub timestamp: Option<u64>,
}

impl ChdrRepr {
    /// A data packet of `length` bytes with an optional timestamp and no metadata.
    pub fn data(
        seq_num: u16,
        length: usize,
        timestamp: Option<u64>,
        eob: bool,
    ) -> Result<Self, FormatError> {
        let length = u16::try_from(length).map_err(|_| FormatError::LengthMismatch {
            field: u16::MAX as usize,
            datagram: length,
        })?;
        Ok(Self {
            vc: 0,
            eob,
            eov: false,
            pkt_type: if timestamp.is_some() {
                PacketType::DataWithTimestamp
            } else {
                PacketType::Data
            },
            num_mdata: 0,
            seq_num,
            length,
            dst_epid: 0,
            timestamp,
        })
    }

    /// Reads the header of a checked packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &ChdrPacket<T>) -> Result<Self, FormatError> {
        Ok(Self {
            vc: packet.vc(),
            eob: packet.eob(),
            eov: packet.eov(),
            pkt_type: packet.pkt_type()?,
            num_mdata: packet.num_mdata(),
            seq_num: packet.seq_num(),
            length: packet.length(),
            dst_epid: packet.dst_epid(),
            timestamp: packet.timestamp(),
        })
    }

    /// The header word.
    pub fn header_word(&self) -> u64 {
        (u64::from(self.vc & 0x3f) << 58)
            | (u64::from(self.eob) << 57)
            | (u64::from(self.eov) << 56)
            | (u64::from(self.pkt_type.bits()) << 53)
            | (u64::from(self.num_mdata & 0x1f) << 48)
            | (u64::from(self.seq_num) << 32)
            | (u64::from(self.length) << 16)
            | u64::from(self.dst_epid)
    }

    /// Bytes before the metadata words.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + if self.timestamp.is_some() { 8 } else { 0 }
    }

    /// Writes the header word and timestamp (metadata words are left to the caller).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ChdrPacket<T>) {
        packet.set_header(self.header_word());
        if let Some(ts) = self.timestamp {
            packet.set_timestamp(ts);
        }
    }
}

pub(crate) fn parse(datagram: &[u8]) -> Result<PacketInfo, FormatError> {
    parse_head(datagram, datagram.len())
}

/// [`parse`] from the first bytes of a datagram of `len` bytes.
pub(crate) fn parse_head(head: &[u8], len: usize) -> Result<PacketInfo, FormatError> {
    let packet = ChdrPacket::new_checked_head(head, len)?;
    let class = match packet.pkt_type()? {
        PacketType::Data | PacketType::DataWithTimestamp => PacketClass::Data,
        _ => PacketClass::NonData,
    };
    let mut info = PacketInfo::data(packet.payload_offset()..len);
    info.class = class;
    info.seq = Some(u64::from(packet.seq_num()));
    info.timestamp = packet.timestamp().map(Timestamp::Ticks);
    info.eob = packet.eob();
    info.stream_id = Some(u32::from(packet.dst_epid()));
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a packet by hand from the bit layout, independent of the emitter.
    /// `flags` is (virtual channel, EOB, EOV).
    fn header(flags: (u64, u64, u64), ty: u64, nm: u64, seq: u64, len: u64, epid: u64) -> u64 {
        let (vc, eob, eov) = flags;
        vc << 58 | eob << 57 | eov << 56 | ty << 53 | nm << 48 | seq << 32 | len << 16 | epid
    }

    #[test]
    fn data_without_timestamp() {
        let mut dg = header((0, 0, 0), 6, 0, 0x1234, 12, 0x0002)
            .to_le_bytes()
            .to_vec();
        dg.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(&dg[..8], &[0x02, 0x00, 0x0c, 0x00, 0x34, 0x12, 0xc0, 0x00]);
        let info = parse(&dg).unwrap();
        assert_eq!(info.class, PacketClass::Data);
        assert_eq!(info.seq, Some(0x1234));
        assert_eq!(info.payload(), 8..12);
        assert_eq!(info.timestamp, None);
        assert_eq!(info.stream_id, Some(2));
        assert!(!info.eob);
    }

    #[test]
    fn data_with_timestamp_and_eob() {
        let mut dg = header((1, 1, 0), 7, 0, 7, 24, 5).to_le_bytes().to_vec();
        dg.extend_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        dg.extend_from_slice(&[9; 8]);
        let p = ChdrPacket::new_checked(&dg[..]).unwrap();
        assert_eq!(p.vc(), 1);
        assert!(p.eob());
        assert!(!p.eov());
        let info = parse(&dg).unwrap();
        assert_eq!(
            info.timestamp,
            Some(Timestamp::Ticks(0x0102_0304_0506_0708))
        );
        assert_eq!(info.payload(), 16..24);
        assert!(info.eob);
    }

    #[test]
    fn metadata_words_are_skipped() {
        let mut dg = header((0, 0, 1), 7, 2, 1, 8 + 8 + 16 + 4, 0)
            .to_le_bytes()
            .to_vec();
        dg.extend_from_slice(&77u64.to_le_bytes());
        dg.extend_from_slice(&0xaaaa_u64.to_le_bytes());
        dg.extend_from_slice(&0xbbbb_u64.to_le_bytes());
        dg.extend_from_slice(&[1, 2, 3, 4]);
        let p = ChdrPacket::new_checked(&dg[..]).unwrap();
        assert_eq!(p.num_mdata(), 2);
        assert_eq!(p.metadata_word(0), 0xaaaa);
        assert_eq!(p.metadata_word(1), 0xbbbb);
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        assert!(p.eov());
        let info = parse(&dg).unwrap();
        assert_eq!(info.payload(), 32..36);
        assert_eq!(info.timestamp, Some(Timestamp::Ticks(77)));
    }

    #[test]
    fn metadata_without_timestamp() {
        let mut dg = header((0, 0, 0), 6, 1, 1, 20, 0).to_le_bytes().to_vec();
        dg.extend_from_slice(&[0xee; 8]);
        dg.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(parse(&dg).unwrap().payload(), 16..20);
    }

    #[test]
    fn non_data_types_are_classified_not_rejected() {
        for ty in [0u64, 1, 2, 4] {
            let dg = header((0, 0, 0), ty, 0, 0, 16, 0).to_le_bytes().repeat(2);
            assert_eq!(parse(&dg).unwrap().class, PacketClass::NonData, "type {ty}");
        }
    }

    #[test]
    fn malformed_packets_are_errors() {
        // Reserved packet types.
        for ty in [3u64, 5] {
            let dg = header((0, 0, 0), ty, 0, 0, 16, 0).to_le_bytes().repeat(2);
            assert_eq!(parse(&dg), Err(FormatError::UnknownPacketType(ty as u8)));
        }
        // Short datagram.
        assert_eq!(
            parse(&[0u8; 5]),
            Err(FormatError::Truncated { needed: 8, got: 5 })
        );
        // Length field larger and smaller than the datagram.
        let mut dg = header((0, 0, 0), 6, 0, 0, 100, 0).to_le_bytes().to_vec();
        dg.extend_from_slice(&[0; 8]);
        assert_eq!(
            parse(&dg),
            Err(FormatError::LengthMismatch {
                field: 100,
                datagram: 16
            })
        );
        let dg = header((0, 0, 0), 6, 0, 0, 8, 0).to_le_bytes().repeat(2);
        assert!(matches!(
            parse(&dg),
            Err(FormatError::LengthMismatch { .. })
        ));
        // Timestamp announced but missing.
        let dg = header((0, 0, 0), 7, 0, 0, 12, 0).to_le_bytes().to_vec();
        let mut dg2 = dg.clone();
        dg2.extend_from_slice(&[0; 4]);
        assert_eq!(
            parse(&dg2),
            Err(FormatError::Truncated {
                needed: 16,
                got: 12
            })
        );
        // Metadata announced but missing.
        let mut dg = header((0, 0, 0), 6, 31, 0, 16, 0).to_le_bytes().to_vec();
        dg.extend_from_slice(&[0; 8]);
        assert!(matches!(parse(&dg), Err(FormatError::Truncated { .. })));
    }

    #[test]
    fn repr_round_trip() {
        let repr = ChdrRepr {
            vc: 0x2a,
            eob: true,
            eov: true,
            pkt_type: PacketType::DataWithTimestamp,
            num_mdata: 1,
            seq_num: 0xfffe,
            length: 40,
            dst_epid: 0xbeef,
            timestamp: Some(u64::MAX),
        };
        let mut buf = [0u8; 40];
        repr.emit(&mut ChdrPacket::new_unchecked(&mut buf[..]));
        let p = ChdrPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(ChdrRepr::parse(&p).unwrap(), repr);
        assert_eq!(p.payload_offset(), 24);
    }
}
