//! GNU Radio gr-network headers.
//!
//! * "64-bit sequence number" (`HEADERTYPE_SEQNUM`): 8 bytes, the sequence number as a
//!   little-endian `u64`; the sender's first datagram carries 1.
//! * "sequence number + data size" (`HEADERTYPE_SEQPLUSSIZE`): 16 bytes (the C++ struct
//!   `{ uint64_t seqnum; int16_t length; }` with its padding), little-endian; `length` is the
//!   number of data bytes after the header.
//!
//! ```
//! use fsdr_net_io::format::seq64::{Seq64Packet, Seq64Repr};
//!
//! let mut buf = [0u8; 12];
//! Seq64Repr { seq: 42 }.emit(&mut Seq64Packet::new_unchecked(&mut buf[..]));
//! let packet = Seq64Packet::new_checked(&buf[..]).unwrap();
//! assert_eq!(packet.seq(), 42);
//! assert_eq!(packet.payload().len(), 4);
//! ```

use super::{FormatError, PacketInfo, need};

/// Length of the 64-bit sequence number header.
pub const SEQ64_HEADER_LEN: usize = 8;
/// Length of the sequence + size header (including the C struct's padding).
pub const SEQ_SIZE_HEADER_LEN: usize = 16;

/// A view of a datagram with the 64-bit sequence number header.
#[derive(Debug, Clone, Copy)]
pub struct Seq64Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Seq64Packet<T> {
    /// Wraps a buffer without checking its length; accessors may panic on short buffers.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after checking it holds the header.
    pub fn new_checked(buffer: T) -> Result<Self, FormatError> {
        need(buffer.as_ref(), SEQ64_HEADER_LEN)?;
        Ok(Self { buffer })
    }

    /// The sequence number.
    pub fn seq(&self) -> u64 {
        u64::from_le_bytes(self.buffer.as_ref()[..8].try_into().unwrap())
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[SEQ64_HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Seq64Packet<T> {
    /// Sets the sequence number.
    pub fn set_seq(&mut self, seq: u64) {
        self.buffer.as_mut()[..8].copy_from_slice(&seq.to_le_bytes());
    }
}

/// The fields of a 64-bit sequence number header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seq64Repr {
    /// The sequence number.
    pub seq: u64,
}

impl Seq64Repr {
    /// Reads the header of a checked packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &Seq64Packet<T>) -> Self {
        Self { seq: packet.seq() }
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Seq64Packet<T>) {
        packet.set_seq(self.seq);
    }
}

/// A view of a datagram with the sequence number + size header.
#[derive(Debug, Clone, Copy)]
pub struct SeqSizePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SeqSizePacket<T> {
    /// Wraps a buffer without checks.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after checking the header fits and the length field matches the
    /// datagram.
    pub fn new_checked(buffer: T) -> Result<Self, FormatError> {
        let len = buffer.as_ref().len();
        Self::new_checked_head(buffer, len)
    }

    /// Wraps the header of a datagram of `len` bytes (the data may be elsewhere) after the
    /// checks of [`SeqSizePacket::new_checked`].
    pub fn new_checked_head(head: T, len: usize) -> Result<Self, FormatError> {
        need(head.as_ref(), SEQ_SIZE_HEADER_LEN)?;
        let packet = Self { buffer: head };
        let field = packet.length();
        let datagram = len;
        if field < 0 || SEQ_SIZE_HEADER_LEN + field as usize != datagram {
            return Err(FormatError::LengthMismatch {
                field: SEQ_SIZE_HEADER_LEN + field.max(0) as usize,
                datagram,
            });
        }
        Ok(packet)
    }

    /// The sequence number.
    pub fn seq(&self) -> u64 {
        u64::from_le_bytes(self.buffer.as_ref()[..8].try_into().unwrap())
    }

    /// Number of data bytes after the header, as sent.
    pub fn length(&self) -> i16 {
        i16::from_le_bytes(self.buffer.as_ref()[8..10].try_into().unwrap())
    }

    /// The data after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[SEQ_SIZE_HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SeqSizePacket<T> {
    /// Sets the sequence number.
    pub fn set_seq(&mut self, seq: u64) {
        self.buffer.as_mut()[..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// Sets the length field and clears the padding.
    pub fn set_length(&mut self, length: i16) {
        let b = self.buffer.as_mut();
        b[8..10].copy_from_slice(&length.to_le_bytes());
        b[10..16].fill(0);
    }
}

/// The fields of a sequence + size header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqSizeRepr {
    /// The sequence number.
    pub seq: u64,
    /// Data bytes after the header.
    pub length: i16,
}

impl SeqSizeRepr {
    /// Reads the header of a checked packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &SeqSizePacket<T>) -> Self {
        Self {
            seq: packet.seq(),
            length: packet.length(),
        }
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut SeqSizePacket<T>) {
        packet.set_seq(self.seq);
        packet.set_length(self.length);
    }
}

pub(crate) fn parse_seq64(head: &[u8], len: usize) -> Result<PacketInfo, FormatError> {
    need(&head[..head.len().min(len)], SEQ64_HEADER_LEN)?;
    let packet = Seq64Packet::new_checked(head)?;
    let mut info = PacketInfo::data(SEQ64_HEADER_LEN..len);
    info.seq = Some(packet.seq());
    Ok(info)
}

pub(crate) fn parse_seq_plus_size(head: &[u8], len: usize) -> Result<PacketInfo, FormatError> {
    let packet = SeqSizePacket::new_checked_head(head, len)?;
    let mut info = PacketInfo::data(SEQ_SIZE_HEADER_LEN..len);
    info.seq = Some(packet.seq());
    Ok(info)
}

pub(crate) fn emit_seq64(datagram: &mut [u8], seq: u64) {
    Seq64Repr { seq }.emit(&mut Seq64Packet::new_unchecked(datagram));
}

pub(crate) fn emit_seq_plus_size(datagram: &mut [u8], seq: u64) -> Result<(), FormatError> {
    let data = datagram.len() - SEQ_SIZE_HEADER_LEN;
    let length = i16::try_from(data).map_err(|_| FormatError::LengthMismatch {
        field: i16::MAX as usize,
        datagram: datagram.len(),
    })?;
    SeqSizeRepr { seq, length }.emit(&mut SeqSizePacket::new_unchecked(datagram));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq64_bytes() {
        let dg = [0x01, 0, 0, 0, 0, 0, 0, 0x80, 0xaa, 0xbb];
        let p = Seq64Packet::new_checked(&dg[..]).unwrap();
        assert_eq!(p.seq(), 0x8000_0000_0000_0001);
        assert_eq!(p.payload(), &[0xaa, 0xbb]);
        let info = parse_seq64(&dg, dg.len()).unwrap();
        assert_eq!(info.payload(), 8..10);
    }

    #[test]
    fn seq64_short_is_an_error() {
        for len in 0..8 {
            assert_eq!(
                parse_seq64(&vec![0; len], len),
                Err(FormatError::Truncated {
                    needed: 8,
                    got: len
                })
            );
        }
    }

    #[test]
    fn seq64_round_trip() {
        let mut buf = [0u8; 8];
        let repr = Seq64Repr { seq: u64::MAX - 3 };
        repr.emit(&mut Seq64Packet::new_unchecked(&mut buf[..]));
        assert_eq!(
            Seq64Repr::parse(&Seq64Packet::new_checked(&buf[..]).unwrap()),
            repr
        );
    }

    #[test]
    fn seq_size_bytes_and_round_trip() {
        let mut dg = [0u8; 16 + 3];
        dg[0] = 9;
        dg[8] = 3;
        let p = SeqSizePacket::new_checked(&dg[..]).unwrap();
        assert_eq!((p.seq(), p.length()), (9, 3));
        let repr = SeqSizeRepr::parse(&p);
        let mut out = [0xffu8; 19];
        repr.emit(&mut SeqSizePacket::new_unchecked(&mut out[..]));
        assert_eq!(&out[..16], &dg[..16]);
    }

    #[test]
    fn seq_size_length_must_match() {
        let mut dg = vec![0u8; 16 + 3];
        dg[8] = 4;
        assert_eq!(
            parse_seq_plus_size(&dg, dg.len()),
            Err(FormatError::LengthMismatch {
                field: 20,
                datagram: 19
            })
        );
        dg[8] = 0xff;
        dg[9] = 0xff; // -1
        assert!(matches!(
            parse_seq_plus_size(&dg, dg.len()),
            Err(FormatError::LengthMismatch { .. })
        ));
        assert!(matches!(
            parse_seq_plus_size(&dg[..10], 10),
            Err(FormatError::Truncated { .. })
        ));
    }
}
