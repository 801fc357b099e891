//! The AF_XDP receive itself, shared by the engine's `xdp` side and the in-place receiver:
//! set-up (interface, socket, map, program, link; every failure a clear error before
//! anything is attached), whole packets taken from the RX ring, their UDP payload handed out
//! in order over the packet's descriptors, the frames given back to the kernel.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};

use socket2::Socket;

use super::super::super::EngineConfig;
use super::super::super::config::XdpMode;
use super::frame::{Udp, parse_frame};
use crate::Error;
use crate::sys::ebpf::{UdpMatch, XdpAttach, XdpLink, XdpProgram, XskMap};
use crate::sys::xsk::{XDP_PKT_CONTD, XskOptions, XskSocket, XskStats};

/// What the thread owns: the socket, the map and program, the link (dropped with it).
struct Setup {
    // Drop order: the link (detaches the program) first.
    _link: XdpLink,
    _program: XdpProgram,
    _map: XskMap,
    xsk: XskSocket,
}

fn unsupported(cfg: &EngineConfig, reason: String) -> Error {
    Error::Unsupported {
        backend: cfg.backend,
        reason,
    }
}

/// Explains a failed `bpf()` or AF_XDP call.
fn explain(what: &str, e: &io::Error) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (needs CAP_BPF and CAP_NET_ADMIN: run as root or grant them)"
        }
        Some(libc::EAFNOSUPPORT) => " (the kernel has no AF_XDP: CONFIG_XDP_SOCKETS)",
        Some(libc::EBUSY) | Some(libc::EEXIST) => {
            " (another XDP program is attached to the interface: `ip link show dev IFACE` \
             shows it; detach it or use another interface)"
        }
        Some(libc::ERANGE) => {
            " (the MTU is too large for native XDP without multi-buffer; use --xdp-mode generic \
             or a smaller MTU)"
        }
        _ => "",
    };
    format!("{what}: {e}{hint}")
}

/// The interface's index and MTU, through an ioctl on `socket` (in the socket's namespace).
fn interface(socket: &Socket, name: &str) -> io::Result<(u32, u32)> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
    // SAFETY: a NUL-terminated name; the call only reads it.
    // Checked by: `xdp_refuses_clearly_before_attaching_anything`.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: all-zero is a valid ifreq.
    // Checked by: `xdp_refuses_clearly_before_attaching_anything`.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads the name and writes the MTU into `req`.
    // Checked by: `xdp_refuses_clearly_before_attaching_anything`.
    let r = unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFMTU, &mut req) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member of the union.
    // Checked by: `xdp_refuses_clearly_before_attaching_anything`.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok((index, mtu.max(0) as u32))
}

impl Setup {
    fn new(cfg: &EngineConfig, socket: &Socket) -> Result<Setup, Error> {
        let name = cfg.xdp.interface.as_deref().unwrap_or_default();
        let (ifindex, mtu) = interface(socket, name)
            .map_err(|e| unsupported(cfg, explain(&format!("interface {name:?}"), &e)))?;
        let local = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .unwrap_or(cfg.socket.bind);
        // The largest datagram accepted whole must fit the link (its IP and UDP headers too).
        let largest = cfg.slot_size.min(65_507);
        if (mtu as usize) < 28 {
            return Err(unsupported(cfg, format!("interface {name} has MTU {mtu}")));
        }
        let m = udp_match(cfg, local);
        let opts = XskOptions {
            ifindex,
            queue: cfg.xdp.queue,
            bind: cfg.xdp.bind,
            // One 4 KiB frame holds a 1500-byte frame; jumbo frames need several.
            multi_buffer: mtu as usize + 14 > 4096,
            busy_poll_us: cfg.xdp.busy_poll_us,
            ..XskOptions::default()
        };
        tracing::debug!(mtu, largest, "xdp set-up");
        let xsk = XskSocket::open(&opts).map_err(|e| {
            let what = if opts.multi_buffer {
                format!(
                    "AF_XDP socket on {name} queue {} with multi-buffer (MTU {mtu} needs frames \
                     larger than a page: Linux >= 6.6 and a driver with XDP multi-buffer)",
                    opts.queue
                )
            } else {
                format!("AF_XDP socket on {name} queue {}", opts.queue)
            };
            if e.raw_os_error() == Some(libc::EBUSY) {
                return unsupported(
                    cfg,
                    format!("{what}: {e} (another AF_XDP socket is bound to this queue)"),
                );
            }
            unsupported(cfg, explain(&what, &e))
        })?;
        let map = XskMap::create(cfg.xdp.queue + 1)
            .map_err(|e| unsupported(cfg, explain("creating the XSK map", &e)))?;
        map.set(cfg.xdp.queue, &xsk)
            .map_err(|e| unsupported(cfg, explain("adding the socket to the XSK map", &e)))?;
        let program = XdpProgram::load(&m, &map, opts.multi_buffer)
            .map_err(|e| unsupported(cfg, explain("loading the XDP program", &e)))?;
        let attach = |mode| {
            XdpLink::attach(&program, ifindex, mode)
                .map_err(|e| unsupported(cfg, explain(&format!("attaching to {name}"), &e)))
        };
        let link = match cfg.xdp.mode {
            XdpMode::Native => attach(XdpAttach::Native)?,
            XdpMode::Generic => attach(XdpAttach::Generic)?,
            XdpMode::Auto => attach(XdpAttach::Native).or_else(|e| {
                tracing::info!(error = %e, "native XDP refused; generic mode");
                attach(XdpAttach::Generic)
            })?,
        };
        tracing::info!(
            interface = name,
            queue = cfg.xdp.queue,
            zero_copy = xsk.zero_copy(),
            multi_buffer = xsk.multi_buffer(),
            "AF_XDP receive attached"
        );
        Ok(Setup {
            _link: link,
            _program: program,
            _map: map,
            xsk,
        })
    }
}

/// The destination the program steers: the socket's port; its address unless unspecified
/// (a multicast socket: the group).
fn udp_match(cfg: &EngineConfig, local: SocketAddr) -> UdpMatch {
    let group = cfg.socket.multicast.as_ref().map(|m| m.group);
    let ip = group.unwrap_or(local.ip());
    let mut m = UdpMatch {
        port: local.port(),
        ..UdpMatch::default()
    };
    match ip {
        IpAddr::V4(a) => {
            m.v4 = true;
            m.v4_addr = (!a.is_unspecified()).then_some(a);
        }
        IpAddr::V6(a) => {
            m.v6 = true;
            m.v6_addr = (!a.is_unspecified()).then_some(a);
            m.v4 = a.is_unspecified() && !cfg.socket.v6_only;
        }
    }
    m
}

/// One whole packet in the ring: its descriptors (several with multi-buffer), the RX ring's
/// entries `first..end` after its consumer index.
pub(crate) struct Frame<'a> {
    xsk: &'a XskSocket,
    first: u32,
    end: u32,
}

impl Frame<'_> {
    /// The bytes of each descriptor in turn; `None` for one outside the UMEM.
    fn parts(&self) -> impl Iterator<Item = Option<&[u8]>> {
        (self.first..self.end).map(|k| self.xsk.frame(k))
    }

    /// The UDP datagram it carries, when its headers check out.
    pub(crate) fn udp(&self) -> Option<Udp> {
        let total: usize = (self.first..self.end)
            .map(|k| self.xsk.desc(k).map_or(0, |d| d.len as usize))
            .sum();
        let head = self.xsk.frame(self.first)?;
        parse_frame(head, total)
    }

    /// The start of `udp`'s payload as far as the first descriptor holds it (a format's
    /// header, for the frames of any link): to read before the payload is written.
    pub(crate) fn payload_head(&self, udp: &Udp) -> &[u8] {
        let Some(b) = self.xsk.frame(self.first) else {
            return &[];
        };
        let end = udp.offset.saturating_add(udp.len).min(b.len());
        b.get(udp.offset..end).unwrap_or_default()
    }

    /// Hands the payload of `udp` to `out` in order, over the packet's descriptors; false
    /// (and nothing handed out) when a descriptor lies outside the UMEM.
    pub(crate) fn payload(&self, udp: &Udp, mut out: impl FnMut(&[u8])) -> bool {
        if self.parts().any(|b| b.is_none()) {
            return false;
        }
        let (mut skip, mut left) = (udp.offset, udp.len);
        for b in self.parts() {
            let b = b.unwrap_or_default();
            if skip >= b.len() {
                skip -= b.len();
                continue;
            }
            let n = (b.len() - skip).min(left);
            out(&b[skip..skip + n]);
            left -= n;
            skip = 0;
            if left == 0 {
                break;
            }
        }
        left == 0
    }
}

/// An AF_XDP receive attached to an interface queue: see the [module documentation](self).
pub(crate) struct XdpRx {
    setup: Setup,
}

impl XdpRx {
    /// Attaches for `cfg` (`socket`: the bound UDP socket, in the namespace of the interface)
    /// and gives the kernel every frame.
    pub(crate) fn open(cfg: &EngineConfig, socket: &Socket) -> Result<XdpRx, Error> {
        let mut setup = Setup::new(cfg, socket)?;
        setup.xsk.fill_all();
        Ok(XdpRx { setup })
    }

    /// RX descriptors ready.
    pub(crate) fn ready(&self) -> u32 {
        self.setup.xsk.ready()
    }

    /// Waits up to `timeout_ns` for frames or for the UDP `socket` (what the program passed
    /// to the kernel, or the stop's `shutdown`); returns whether either is ready and whether
    /// the socket is (`None`: interrupted, or an error).
    pub(crate) fn poll(&self, socket: &Socket, timeout_ns: u64) -> Option<(bool, bool)> {
        use nix::poll::{PollFd, PollFlags, ppoll};
        use nix::sys::time::TimeSpec;
        let mut fds = [
            PollFd::new(self.setup.xsk.fd(), PollFlags::POLLIN),
            PollFd::new(socket.as_fd(), PollFlags::POLLIN),
        ];
        let t = TimeSpec::from_duration(std::time::Duration::from_nanos(timeout_ns));
        let n = ppoll(&mut fds, Some(t), None).ok()?;
        let socket_ready = fds[1].revents().is_some_and(|r| !r.is_empty());
        Some((n > 0, socket_ready))
    }

    /// Zero-copy drivers refill from the fill ring when woken (`need_wakeup`); in copy mode
    /// the kernel fills the ring without it. True when a wake-up call was made.
    pub(crate) fn wake_kernel(&self) -> bool {
        let xsk = &self.setup.xsk;
        if xsk.zero_copy() && xsk.needs_wakeup() {
            let _ = xsk.wait(0);
            return true;
        }
        false
    }

    /// The socket's statistics.
    pub(crate) fn stats(&self) -> Option<XskStats> {
        self.setup.xsk.stats().ok()
    }

    /// Takes whole packets from the RX ring, at most `max`, while `each` accepts them (false:
    /// the packet stays in the ring for later); their frames go back to the kernel. Returns
    /// how many were taken.
    pub(crate) fn take(&mut self, max: usize, mut each: impl FnMut(Frame<'_>) -> bool) -> usize {
        let xsk = &self.setup.xsk;
        let ready = xsk.ready();
        let (mut k, mut taken) = (0u32, 0usize);
        while k < ready && taken < max {
            let (mut end, mut whole) = (k, false);
            while let Some(d) = xsk.desc(end) {
                end += 1;
                if d.options & XDP_PKT_CONTD == 0 {
                    whole = true;
                    break;
                }
            }
            // The rest of a packet not yet published: it waits for the next call.
            if !whole {
                break;
            }
            let frame = Frame { xsk, first: k, end };
            if !each(frame) {
                break;
            }
            k = end;
            taken += 1;
        }
        self.setup.xsk.release(k);
        self.setup.xsk.fill_all();
        taken
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::Backend;
    use crate::netns::TestLink;

    /// A frame is read only through a descriptor the kernel published, and given back only by
    /// releasing it: no descriptor past the ring's producer is read, no frame in the fill ring
    /// can be borrowed, and the bytes of a published frame do not change while more traffic
    /// arrives (the kernel writes other frames) until it is released.
    #[test]
    fn xdp_frames_are_lent_only_while_published() {
        let Some(link) = TestLink::for_backend(Backend::Xdp) else {
            return;
        };
        let cfg = link.config();
        link.receive(|| {
            let opened = crate::socket::open_socket(&cfg.socket, false).unwrap();
            let socket = opened.socket;
            let mut rx = XdpRx::open(&cfg, &socket).unwrap();
            let to = socket.local_addr().unwrap().as_socket().unwrap();
            let xsk = &rx.setup.xsk;
            assert_eq!(xsk.ready(), 0);
            // Every frame is in the fill ring: none can be read.
            assert!(xsk.desc(0).is_none() && xsk.frame(0).is_none());
            let send = |n: u8| {
                link.send(|| {
                    let tx = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
                    for i in 0..n {
                        tx.send_to(&[i; 300], to).unwrap();
                    }
                })
            };
            send(3);
            let until = Instant::now() + Duration::from_secs(5);
            while rx.ready() < 3 && Instant::now() < until {
                rx.poll(&socket, 10_000_000);
            }
            let xsk = &rx.setup.xsk;
            let ready = xsk.ready();
            assert!(ready >= 3, "{ready} published");
            assert!(xsk.desc(ready).is_none() && xsk.frame(ready).is_none());
            let before: Vec<Vec<u8>> = (0..ready).map(|k| xsk.frame(k).unwrap().to_vec()).collect();
            let live = xsk.frame(0).unwrap();
            // More traffic lands in other frames while these are held.
            send(32);
            let _ = xsk.wait(50);
            assert_eq!(live, &before[0][..]);
            for (k, b) in before.iter().enumerate() {
                assert_eq!(xsk.frame(k as u32).unwrap(), &b[..], "frame {k} changed");
            }
            // Released, the frames go back to the kernel through the fill ring.
            let taken = rx.take(usize::MAX, |_| true);
            assert!(taken >= 3);
        });
    }
}
