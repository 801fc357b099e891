//! Frames from the AF_XDP ring to datagrams: the Ethernet (one VLAN tag at most), IPv4/IPv6
//! and UDP headers checked (lengths, the IPv4 header checksum), the UDP payload located.

use std::net::{IpAddr, SocketAddr};

/// Where a frame's UDP payload is, and who sent it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Udp {
    /// Offset of the payload in the frame.
    pub(crate) offset: usize,
    /// Payload bytes (from the UDP length).
    pub(crate) len: usize,
    pub(crate) source: SocketAddr,
}

/// Checks a frame's Ethernet (one VLAN tag at most), IPv4/IPv6 and UDP headers, as far as
/// `head` (the first fragment) holds them, against `total` bytes in the frame.
pub(super) fn parse_frame(head: &[u8], total: usize) -> Option<Udp> {
    let be16 = |b: &[u8], at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
    };
    let mut l3 = 14;
    let mut ty = be16(head, 12)?;
    if ty == 0x8100 || ty == 0x88a8 {
        ty = be16(head, 16)?;
        l3 = 18;
    }
    let (l4, ip_end, source) = match ty {
        0x0800 => {
            let h = head.get(l3..l3 + 20)?;
            if h[0] != 0x45 || h[9] != 17 {
                return None;
            }
            let mut sum = 0u32;
            for k in 0..10 {
                sum += u32::from(u16::from_be_bytes([h[2 * k], h[2 * k + 1]]));
            }
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            if sum != 0xffff {
                return None;
            }
            let ip_len = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let src = std::net::Ipv4Addr::new(h[12], h[13], h[14], h[15]);
            (l3 + 20, l3 + ip_len, IpAddr::V4(src))
        }
        0x86dd => {
            let h = head.get(l3..l3 + 40)?;
            if h[6] != 17 {
                return None;
            }
            let payload = usize::from(u16::from_be_bytes([h[4], h[5]]));
            let mut src = [0u8; 16];
            src.copy_from_slice(&h[8..24]);
            (l3 + 40, l3 + 40 + payload, IpAddr::V6(src.into()))
        }
        _ => return None,
    };
    let u = head.get(l4..l4 + 8)?;
    let udp_len = usize::from(u16::from_be_bytes([u[4], u[5]]));
    let port = u16::from_be_bytes([u[0], u[1]]);
    if udp_len < 8 || l4 + udp_len > ip_end || ip_end > total {
        return None;
    }
    Some(Udp {
        offset: l4 + 8,
        len: udp_len - 8,
        source: SocketAddr::new(source, port),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(vlan: bool, v6: bool, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0, 5]);
        }
        let udp_len = 8 + payload.len();
        if v6 {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&(udp_len as u16).to_be_bytes());
            f.extend_from_slice(&[17, 64]);
            f.extend_from_slice(&[0xfd; 16]);
            f.extend_from_slice(&[0xfe; 16]);
        } else {
            f.extend_from_slice(&[0x08, 0x00]);
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
            h[8] = 64;
            h[9] = 17;
            h[12..16].copy_from_slice(&[10, 0, 0, 1]);
            h[16..20].copy_from_slice(&[10, 0, 0, 2]);
            let mut sum = 0u32;
            for k in 0..10 {
                sum += u32::from(u16::from_be_bytes([h[2 * k], h[2 * k + 1]]));
            }
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            f.extend_from_slice(&h);
        }
        f.extend_from_slice(&4000u16.to_be_bytes());
        f.extend_from_slice(&5000u16.to_be_bytes());
        f.extend_from_slice(&(udp_len as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn frames_are_parsed_with_and_without_vlan_in_both_ip_versions() {
        for vlan in [false, true] {
            for v6 in [false, true] {
                let f = frame(vlan, v6, b"hello");
                let u = parse_frame(&f, f.len()).expect("a valid frame");
                assert_eq!(&f[u.offset..u.offset + u.len], b"hello");
                assert_eq!(u.source.port(), 4000);
                // A frame cut short, or one with padding, is judged by its IP length.
                assert_eq!(parse_frame(&f, f.len() - 1), None);
                let mut padded = f.clone();
                padded.extend_from_slice(&[0; 10]);
                assert_eq!(parse_frame(&padded, padded.len()).map(|u| u.len), Some(5));
            }
        }
    }

    #[test]
    fn a_bad_ipv4_header_checksum_or_a_lying_length_is_refused() {
        let mut f = frame(false, false, b"x");
        f[14 + 8] ^= 1; // TTL changed, checksum not
        assert_eq!(parse_frame(&f, f.len()), None);
        let mut f = frame(false, false, b"abc");
        let udp_len = 14 + 20 + 4;
        f[udp_len..udp_len + 2].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(parse_frame(&f, f.len()), None);
        // Every prefix of a frame is refused or parsed, never a panic.
        let f = frame(true, true, b"payload");
        for n in 0..f.len() {
            let _ = parse_frame(&f[..n], f.len());
        }
    }
}
