//! Socket addresses as the kernel writes them (`sockaddr_in`, `sockaddr_in6` in a
//! `sockaddr_storage`), read from plain bytes with every length checked.
//!
//! ```
//! use fsdr_net_io::sys::sockaddr::{NameBuf, sockaddr_from_bytes};
//!
//! let mut name = NameBuf::default();
//! name.0[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
//! name.0[2..4].copy_from_slice(&49000u16.to_be_bytes());
//! name.0[4..8].copy_from_slice(&[127, 0, 0, 1]);
//! let addr = sockaddr_from_bytes(&name.0[..16]).unwrap();
//! assert_eq!(addr, "127.0.0.1:49000".parse().unwrap());
//! ```

use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Room for any socket address (`sockaddr_storage`: 128 bytes, 8-byte aligned), handed to the
/// kernel as `msg_name` and read back with [`sockaddr_from_bytes`].
#[derive(Debug, Clone, Copy)]
#[repr(C, align(8))]
pub struct NameBuf(pub [u8; size_of::<libc::sockaddr_storage>()]);

impl Default for NameBuf {
    fn default() -> Self {
        NameBuf([0; size_of::<libc::sockaddr_storage>()])
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<[u8; 2]> {
    b.get(at..at + 2)?.try_into().ok()
}

fn u32_at(b: &[u8], at: usize) -> Option<[u8; 4]> {
    b.get(at..at + 4)?.try_into().ok()
}

/// Reads an IPv4 or IPv6 socket address from the first bytes of a `sockaddr`; `None` for
/// other families or too few bytes.
pub fn sockaddr_from_bytes(bytes: &[u8]) -> Option<SocketAddr> {
    let family = i32::from(u16::from_ne_bytes(u16_at(bytes, 0)?));
    let port = u16::from_be_bytes(u16_at(bytes, 2)?);
    match family {
        libc::AF_INET if bytes.len() >= size_of::<libc::sockaddr_in>() => {
            let ip: [u8; 4] = u32_at(bytes, 4)?;
            Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port)))
        }
        libc::AF_INET6 if bytes.len() >= size_of::<libc::sockaddr_in6>() => {
            let flowinfo = u32::from_ne_bytes(u32_at(bytes, 4)?);
            let ip: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
            let scope = u32::from_ne_bytes(u32_at(bytes, 24)?);
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                port,
                flowinfo,
                scope,
            )))
        }
        _ => None,
    }
}

/// Writes `addr` as the kernel would (`sockaddr_in` or `sockaddr_in6`) into `out`; returns
/// its length. [`sockaddr_from_bytes`] reads it back.
pub fn sockaddr_to_bytes(addr: SocketAddr, out: &mut NameBuf) -> usize {
    out.0.fill(0);
    match addr {
        SocketAddr::V4(a) => {
            out.0[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            out.0[2..4].copy_from_slice(&a.port().to_be_bytes());
            out.0[4..8].copy_from_slice(&a.ip().octets());
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            out.0[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
            out.0[2..4].copy_from_slice(&a.port().to_be_bytes());
            out.0[4..8].copy_from_slice(&a.flowinfo().to_ne_bytes());
            out.0[8..24].copy_from_slice(&a.ip().octets());
            out.0[24..28].copy_from_slice(&a.scope_id().to_ne_bytes());
            size_of::<libc::sockaddr_in6>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_written_read_back() {
        let mut name = NameBuf::default();
        for a in ["10.1.2.3:4000", "[fd00::1]:49152"] {
            let a: SocketAddr = a.parse().unwrap();
            let n = sockaddr_to_bytes(a, &mut name);
            assert_eq!(sockaddr_from_bytes(&name.0[..n]), Some(a));
        }
    }

    #[test]
    fn v6_and_short_and_unknown() {
        let mut b = [0u8; 28];
        b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&9u16.to_be_bytes());
        b[23] = 1;
        assert_eq!(sockaddr_from_bytes(&b), Some("[::1]:9".parse().unwrap()));
        assert_eq!(sockaddr_from_bytes(&b[..27]), None);
        b[0] = 0xff;
        assert_eq!(sockaddr_from_bytes(&b), None);
        assert_eq!(sockaddr_from_bytes(&[]), None);
    }
}
