//! The addresses of the machine's interfaces (`getifaddrs`), for telling a user which
//! interfaces a wildcard bind exposes.

use std::io;
use std::net::IpAddr;

use nix::net::if_::InterfaceFlags;

/// A network interface address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceAddr {
    /// Interface name.
    pub name: String,
    /// One of its addresses.
    pub addr: IpAddr,
}

/// Every IPv4 and IPv6 address of every interface that is up.
pub fn interface_addrs() -> io::Result<Vec<InterfaceAddr>> {
    let mut out = Vec::new();
    for ifa in nix::ifaddrs::getifaddrs().map_err(io::Error::from)? {
        if !ifa.flags.contains(InterfaceFlags::IFF_UP) {
            continue;
        }
        let Some(addr) = ifa.address else { continue };
        let ip = if let Some(v4) = addr.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = addr.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        out.push(InterfaceAddr {
            name: ifa.interface_name,
            addr: ip,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn interface_addrs_include_loopback() {
        let all = super::interface_addrs().unwrap();
        assert!(
            all.iter()
                .any(|i| i.addr == std::net::IpAddr::from([127, 0, 0, 1])),
            "{all:?}"
        );
    }
}
