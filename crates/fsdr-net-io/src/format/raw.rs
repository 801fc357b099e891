//! The raw format: no header, every byte of the datagram is payload (UHD remote streaming in
//! `raw_payload` mode, FutureSDR's and GNU Radio's UDP blocks without headers).
//!
//! ```
//! let info = fsdr_net_io::format::raw::parse(&[1, 2, 3]);
//! assert_eq!(info.payload(), 0..3);
//! assert_eq!(info.seq, None);
//! ```

use super::PacketInfo;

/// Describes a raw datagram: the whole datagram is payload.
pub fn parse(datagram: &[u8]) -> PacketInfo {
    PacketInfo::data(0..datagram.len())
}

#[cfg(test)]
mod tests {
    #[test]
    fn empty_and_full() {
        assert_eq!(super::parse(&[]).payload(), 0..0);
        assert_eq!(super::parse(&[0; 8000]).payload(), 0..8000);
    }
}
