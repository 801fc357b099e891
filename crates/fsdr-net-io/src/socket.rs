//! Receive sockets: binding (IPv4, IPv6, dual-stack), multicast membership, receive-buffer
//! sizing, kernel drop reporting, timestamps, busy polling, and the source allow-list.
//!
//! ```
//! use fsdr_net_io::socket::{SocketConfig, open_socket};
//!
//! let cfg = SocketConfig::new("127.0.0.1:0".parse().unwrap()).recv_buffer(1 << 20);
//! let opened = open_socket(&cfg, false).unwrap();
//! assert!(opened.buffer.effective > 0);
//! ```

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use nix::sys::socket::{setsockopt, sockopt};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::sys;

/// Default receive buffer request: 128 MiB, about 160 ms of an 800 MB/s stream. The kernel
/// charges only what is queued, so it costs memory only while the consumer is behind; then it
/// is what the default overload policy (pause: stop reading, let the kernel queue absorb) has
/// to absorb with. With UHD's 25 MB (31 ms at 800 MB/s) the main job lost 0.2–2.3% of the
/// samples in four runs of six on a 2-vCPU VM whose hypervisor stole up to a third of the CPU
/// time; with 128 MiB it lost nothing in six (docs/PERFORMANCE.md).
pub const DEFAULT_RECV_BUFFER: usize = 128 << 20;

/// Which senders may feed the stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SourceFilter {
    /// Anyone.
    #[default]
    Any,
    /// Only datagrams from these sources; a rule without a port matches every port of the
    /// address.
    Allow(Vec<SourceRule>),
}

/// One entry of an allow-list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceRule {
    /// Sender address (IPv4-mapped IPv6 addresses match their IPv4 form).
    pub ip: IpAddr,
    /// Sender port, or any.
    pub port: Option<u16>,
}

impl SourceRule {
    /// Matches exactly one sender socket.
    pub fn peer(addr: SocketAddr) -> Self {
        Self {
            ip: addr.ip(),
            port: Some(addr.port()),
        }
    }

    /// Matches every port of `ip`.
    pub fn host(ip: IpAddr) -> Self {
        Self { ip, port: None }
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

impl SourceFilter {
    /// Accepts only `peer`.
    pub fn peer(peer: SocketAddr) -> Self {
        SourceFilter::Allow(vec![SourceRule::peer(peer)])
    }

    /// Whether a datagram from `source` is accepted.
    pub fn accepts(&self, source: Option<SocketAddr>) -> bool {
        match self {
            SourceFilter::Any => true,
            SourceFilter::Allow(rules) => source.is_some_and(|s| {
                let ip = canonical(s.ip());
                rules
                    .iter()
                    .any(|r| canonical(r.ip) == ip && r.port.is_none_or(|p| p == s.port()))
            }),
        }
    }
}

/// A multicast group to join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Multicast {
    /// The group address.
    pub group: IpAddr,
    /// Interface: an IPv4 address for IPv4 groups (unspecified = kernel's choice), an
    /// interface index for IPv6 groups (0 = kernel's choice).
    pub interface: MulticastInterface,
}

/// The interface on which to join a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MulticastInterface {
    /// IPv4 interface address.
    V4(Ipv4Addr),
    /// IPv6 interface index.
    V6(u32),
}

impl MulticastInterface {
    /// The interface a user names for a group: an interface name (`eth0`, `veth1`) or one of
    /// its addresses (IPv4 groups), an interface name or index (IPv6 groups); `None`: the
    /// kernel's choice. An error names what was not found.
    ///
    /// ```
    /// use fsdr_net_io::socket::MulticastInterface;
    ///
    /// let g = "239.1.2.3".parse().unwrap();
    /// assert_eq!(
    ///     MulticastInterface::parse(None, g).unwrap(),
    ///     MulticastInterface::V4("0.0.0.0".parse().unwrap())
    /// );
    /// assert_eq!(
    ///     MulticastInterface::parse(Some("lo"), g).unwrap(),
    ///     MulticastInterface::V4("127.0.0.1".parse().unwrap())
    /// );
    /// assert!(MulticastInterface::parse(Some("no-such-if0"), g).is_err());
    /// ```
    pub fn parse(spec: Option<&str>, group: IpAddr) -> io::Result<Self> {
        let not_found = |why: String| io::Error::new(io::ErrorKind::NotFound, why);
        match (group, spec) {
            (IpAddr::V4(_), None) => Ok(Self::V4(Ipv4Addr::UNSPECIFIED)),
            (IpAddr::V6(_), None) => Ok(Self::V6(0)),
            (IpAddr::V4(_), Some(s)) => {
                if let Ok(a) = s.parse::<Ipv4Addr>() {
                    return Ok(Self::V4(a));
                }
                sys::interface_addrs()?
                    .into_iter()
                    .find_map(|i| match i.addr {
                        IpAddr::V4(a) if i.name == s => Some(Self::V4(a)),
                        _ => None,
                    })
                    .ok_or_else(|| not_found(format!("no interface {s} with an IPv4 address")))
            }
            (IpAddr::V6(_), Some(s)) => {
                if let Ok(i) = s.parse::<u32>() {
                    return Ok(Self::V6(i));
                }
                nix::net::if_::if_nametoindex(s)
                    .map(Self::V6)
                    .map_err(|e| not_found(format!("no interface {s}: {e}")))
            }
        }
    }

    /// As an address a sender's `multicast_if` takes (IPv4), or `None` (IPv6: the index).
    pub fn v4(self) -> Option<IpAddr> {
        match self {
            Self::V4(a) if !a.is_unspecified() => Some(IpAddr::V4(a)),
            _ => None,
        }
    }

    /// The IPv6 interface index, if any.
    pub fn v6(self) -> Option<u32> {
        match self {
            Self::V6(i) if i != 0 => Some(i),
            _ => None,
        }
    }
}

/// How to open a receive socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketConfig {
    /// Address to bind. `[::]` is dual-stack unless `v6_only`.
    pub bind: SocketAddr,
    /// Refuse IPv4 on an IPv6 socket.
    pub v6_only: bool,
    /// Group to join.
    pub multicast: Option<Multicast>,
    /// With `multicast`: join source-specifically (IGMPv3 `IP_ADD_SOURCE_MEMBERSHIP`), so
    /// that the kernel passes only this sender's datagrams to the group (IPv4).
    pub multicast_source: Option<IpAddr>,
    /// Who may send.
    pub filter: SourceFilter,
    /// Receive buffer to request, in bytes.
    pub recv_buffer: usize,
    /// Try `SO_RCVBUFFORCE` (needs CAP_NET_ADMIN) when the plain request falls short.
    pub force_recv_buffer: bool,
    /// `SO_BUSY_POLL` in microseconds.
    pub busy_poll_us: Option<u32>,
    /// Kernel receive timestamps (`SO_TIMESTAMPNS`).
    pub timestamps: bool,
    /// UDP GRO (`UDP_GRO`): the kernel may coalesce consecutive datagrams of one flow into one
    /// receive of up to 64 KiB (a NIC's GRO, or a local sender's UDP GSO passed through whole),
    /// which the engine splits again in place (mio and reuseport backends, and
    /// [`InPlaceReceiver`](crate::inplace::InPlaceReceiver), which scatters the datagrams
    /// straight into the consumer's buffers; other backends refuse it).
    /// Fewer, larger receives cost less per datagram. The kernel then counts a dropped
    /// coalesced receive as one drop; the sequence numbers still count every datagram missed.
    pub gro: bool,
}

impl SocketConfig {
    /// Defaults for `bind`: a [`DEFAULT_RECV_BUFFER`] (128 MiB) buffer, forced when
    /// privileged; anyone may send.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            bind,
            v6_only: false,
            multicast: None,
            multicast_source: None,
            filter: SourceFilter::Any,
            recv_buffer: DEFAULT_RECV_BUFFER,
            force_recv_buffer: true,
            busy_poll_us: None,
            timestamps: false,
            gro: false,
        }
    }

    /// Sets the receive buffer request.
    pub fn recv_buffer(mut self, bytes: usize) -> Self {
        self.recv_buffer = bytes;
        self
    }

    /// Sets the source filter.
    pub fn filter(mut self, filter: SourceFilter) -> Self {
        self.filter = filter;
        self
    }
}

/// What the kernel made of the receive-buffer request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferReport {
    /// Bytes requested.
    pub requested: usize,
    /// Bytes granted, in the units of the request (the kernel reports twice this for its
    /// bookkeeping overhead).
    pub effective: usize,
    /// Whether `SO_RCVBUFFORCE` was used.
    pub forced: bool,
}

impl BufferReport {
    /// Whether the kernel gave less than requested.
    pub fn short(&self) -> bool {
        self.effective < self.requested
    }
}

/// An opened, bound receive socket.
#[derive(Debug)]
pub struct OpenedSocket {
    /// The socket (non-blocking).
    pub socket: Socket,
    /// Bound address.
    pub local_addr: SocketAddr,
    /// Receive buffer outcome.
    pub buffer: BufferReport,
}

/// Reads `net.core.rmem_max`.
pub fn rmem_max() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn size_recv_buffer(socket: &Socket, cfg: &SocketConfig) -> io::Result<BufferReport> {
    let requested = cfg.recv_buffer;
    let _ = socket.set_recv_buffer_size(requested);
    let mut effective = socket.recv_buffer_size()? / 2;
    let mut forced = false;
    if effective < requested && cfg.force_recv_buffer {
        let value = requested.min(i32::MAX as usize);
        if setsockopt(socket, sockopt::RcvBufForce, &value).is_ok() {
            forced = true;
            effective = socket.recv_buffer_size()? / 2;
        }
    }
    let report = BufferReport {
        requested,
        effective,
        forced,
    };
    if report.short() {
        tracing::warn!(
            requested,
            effective,
            "receive buffer: asked for {requested} bytes, the kernel gave {effective}; \
             raise the limit with `sysctl -w net.core.rmem_max={requested}` (or run with \
             CAP_NET_ADMIN so SO_RCVBUFFORCE can be used)"
        );
    }
    Ok(report)
}

/// Says which interfaces a wildcard bind exposes the port on.
fn log_exposed_interfaces(local: SocketAddr, v6_only: bool) {
    let exposed: Vec<String> = sys::interface_addrs()
        .unwrap_or_default()
        .into_iter()
        .filter(|i| match local {
            SocketAddr::V4(_) => i.addr.is_ipv4(),
            SocketAddr::V6(_) => !v6_only || i.addr.is_ipv6(),
        })
        .map(|i| format!("{} {}", i.name, i.addr))
        .collect();
    tracing::info!(
        %local,
        "bound to a wildcard address: port {} is open on every interface ({}); bind a \
         specific address or set an allow-list to narrow this",
        local.port(),
        exposed.join(", ")
    );
}

/// Opens and binds a non-blocking UDP socket as `cfg` says. `reuse_port` sets SO_REUSEPORT
/// (for several sockets on one address).
pub fn open_socket(cfg: &SocketConfig, reuse_port: bool) -> io::Result<OpenedSocket> {
    let domain = Domain::for_address(cfg.bind);
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if cfg.bind.is_ipv6() {
        socket.set_only_v6(cfg.v6_only)?;
    }
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    if cfg.multicast.is_some() {
        socket.set_reuse_address(true)?;
    }
    let buffer = size_recv_buffer(&socket, cfg)?;
    // The kernel's drop counter is read with `SO_MEMINFO` (`sys::socket_drops`) when it is
    // needed, not asked for per datagram with `SO_RXQ_OVFL`: once a socket has dropped, the
    // kernel attaches that control message to every datagram after it, which made each one
    // cost about a tenth more to receive exactly when the receiver is behind (64 B unpaced,
    // docs/PERFORMANCE.md).
    if cfg.timestamps {
        setsockopt(&socket, sockopt::ReceiveTimestampns, &true).map_err(io::Error::from)?;
    }
    if cfg.gro {
        setsockopt(&socket, sockopt::UdpGroSegment, &true)
            .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("UDP_GRO: {e}")))?;
    }
    if let Some(us) = cfg.busy_poll_us {
        socket
            .set_busy_poll(us)
            .map_err(|e| io::Error::new(e.kind(), format!("SO_BUSY_POLL={us}: {e}")))?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&SockAddr::from(cfg.bind))?;
    if let Some(m) = cfg.multicast {
        match (m.group, m.interface, cfg.multicast_source) {
            (IpAddr::V4(g), MulticastInterface::V4(i), Some(IpAddr::V4(src))) => {
                socket.join_ssm_v4(&src, &g, &i)?
            }
            (_, _, Some(src)) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("a source-specific join ({src} to {}) needs IPv4", m.group),
                ));
            }
            (IpAddr::V4(g), MulticastInterface::V4(i), None) => socket.join_multicast_v4(&g, &i)?,
            (IpAddr::V6(g), MulticastInterface::V6(i), None) => socket.join_multicast_v6(&g, i)?,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "multicast group and interface are of different IP versions",
                ));
            }
        }
    }
    let local_addr = socket
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("bound socket has no IP address"))?;
    if local_addr.ip().is_unspecified() {
        log_exposed_interfaces(local_addr, cfg.v6_only);
    }
    Ok(OpenedSocket {
        socket,
        local_addr,
        buffer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_matches_ip_port_and_mapped_addresses() {
        let a: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let f = SourceFilter::peer(a);
        assert!(f.accepts(Some(a)));
        assert!(!f.accepts(Some("127.0.0.1:5001".parse().unwrap())));
        assert!(f.accepts(Some("[::ffff:127.0.0.1]:5000".parse().unwrap())));
        assert!(!f.accepts(None));
        let f = SourceFilter::Allow(vec![SourceRule::host("::1".parse().unwrap())]);
        assert!(f.accepts(Some("[::1]:9".parse().unwrap())));
        assert!(!f.accepts(Some(a)));
        assert!(SourceFilter::Any.accepts(None));
    }
}
