//! Every platform syscall of the crate: batched receive and send (`recvmmsg`, `recvmsg`,
//! `sendmmsg` with UDP GSO), control-message parsing (`SO_RXQ_OVFL`, `SO_TIMESTAMPNS`),
//! socket memory counters, CPU affinity and real-time priority.
//!
//! Capabilities (UDP GSO) are detected once per process. Metadata of a received datagram
//! travels in [`RecvMeta`].

use std::io;
use std::mem::{self, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;
use std::ptr;
use std::sync::OnceLock;

/// Bytes of control-message space per datagram: `SO_RXQ_OVFL` (u32) and `SCM_TIMESTAMPNS`
/// (timespec), each with its header and padding.
const CMSG_BUF: usize = 64;

/// What the kernel told us about one received datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes written into the buffer (at most the buffer size).
    pub len: usize,
    /// The datagram was larger than the buffer (`MSG_TRUNC`).
    pub truncated: bool,
    /// Sender address.
    pub source: Option<SocketAddr>,
    /// The socket's cumulative drop counter (`SO_RXQ_OVFL`), when the kernel sent it.
    pub kernel_drops: Option<u32>,
    /// Kernel receive timestamp (`SO_TIMESTAMPNS`, CLOCK_REALTIME) in ns since the epoch.
    pub timestamp_ns: Option<u64>,
}

/// Converts a kernel socket address into a [`SocketAddr`].
pub fn sockaddr_to_std(
    storage: &libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    match storage.ss_family as libc::c_int {
        libc::AF_INET if len as usize >= mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, and it is large enough.
            let a = unsafe { &*(storage as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len as usize >= mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says the storage holds a sockaddr_in6, and it is large enough.
            let a = unsafe { &*(storage as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Parses the control messages of a received `msghdr`.
///
/// # Safety
/// `hdr.msg_control` must point to `hdr.msg_controllen` readable bytes written by the kernel.
unsafe fn parse_cmsgs(hdr: &libc::msghdr, meta: &mut RecvMeta) {
    // SAFETY: the caller guarantees the control buffer; CMSG_FIRSTHDR/NXTHDR stay within it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
        while !cmsg.is_null() {
            let c = &*cmsg;
            let data = libc::CMSG_DATA(cmsg);
            if c.cmsg_level == libc::SOL_SOCKET {
                if c.cmsg_type == libc::SO_RXQ_OVFL {
                    meta.kernel_drops = Some(ptr::read_unaligned(data as *const u32));
                } else if c.cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = ptr::read_unaligned(data as *const libc::timespec);
                    meta.timestamp_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
            }
            cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
        }
    }
}

/// Preallocated message headers for `recvmmsg`/`recvmsg`: addresses, iovecs and control
/// buffers for up to `capacity` datagrams. The data buffers are supplied per call.
pub struct RecvBatch {
    msgs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_storage>,
    cmsgs: Vec<[u64; CMSG_BUF / 8]>,
}

// SAFETY: the raw pointers inside the headers point into the batch's own vectors (and into
// buffers the owner supplies for the duration of one call); the batch is used by one thread.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Headers for up to `capacity` datagrams per call.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        // SAFETY: all-zero is a valid value for these plain C structs.
        let zeroed_msg: libc::mmsghdr = unsafe { mem::zeroed() };
        // SAFETY: as above.
        let zeroed_name: libc::sockaddr_storage = unsafe { mem::zeroed() };
        Self {
            msgs: vec![zeroed_msg; capacity],
            iovs: vec![
                libc::iovec {
                    iov_base: ptr::null_mut(),
                    iov_len: 0
                };
                capacity
            ],
            names: vec![zeroed_name; capacity],
            cmsgs: vec![[0u64; CMSG_BUF / 8]; capacity],
        }
    }

    /// How many datagrams one call can take.
    pub fn capacity(&self) -> usize {
        self.msgs.len()
    }

    /// Points entry `i` at a buffer for the next call.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes until the next receive call returns, and
    /// must not be read or written by anyone else meanwhile.
    pub unsafe fn set_buffer(&mut self, i: usize, buf: *mut u8, len: usize) {
        self.iovs[i] = libc::iovec {
            iov_base: buf.cast(),
            iov_len: len,
        };
    }

    fn arm(&mut self, i: usize) {
        let hdr = &mut self.msgs[i].msg_hdr;
        hdr.msg_name = (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
        hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        hdr.msg_iov = &mut self.iovs[i];
        hdr.msg_iovlen = 1;
        hdr.msg_control = self.cmsgs[i].as_mut_ptr().cast();
        hdr.msg_controllen = CMSG_BUF as _;
        hdr.msg_flags = 0;
        self.msgs[i].msg_len = 0;
    }

    /// `recvmmsg` into the first `n` entries without blocking. Returns the number of datagrams
    /// received; `WouldBlock` when there are none.
    pub fn recv_mmsg(&mut self, fd: RawFd, n: usize) -> io::Result<usize> {
        let n = n.min(self.capacity());
        for i in 0..n {
            self.arm(i);
        }
        loop {
            // SAFETY: the first n headers point at live buffers armed above and at buffers
            // the caller set with `set_buffer`.
            let r = unsafe {
                libc::recvmmsg(
                    fd,
                    self.msgs.as_mut_ptr(),
                    n as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                )
            };
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// One blocking `recvmsg` into entry 0 (subject to the socket's receive timeout).
    pub fn recv_one(&mut self, fd: RawFd) -> io::Result<()> {
        self.arm(0);
        loop {
            // SAFETY: header 0 points at live buffers armed above and at the caller's buffer.
            let r = unsafe { libc::recvmsg(fd, &mut self.msgs[0].msg_hdr, 0) };
            if r >= 0 {
                self.msgs[0].msg_len = r as libc::c_uint;
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Metadata of entry `i` after a receive call that filled it.
    pub fn meta(&self, i: usize) -> RecvMeta {
        let m = &self.msgs[i];
        let mut meta = RecvMeta {
            len: (m.msg_len as usize).min(self.iovs[i].iov_len),
            truncated: m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            source: sockaddr_to_std(&self.names[i], m.msg_hdr.msg_namelen),
            kernel_drops: None,
            timestamp_ns: None,
        };
        // SAFETY: the kernel filled the control buffer of this header and set its length.
        unsafe { parse_cmsgs(&m.msg_hdr, &mut meta) };
        meta
    }
}

/// Sets an integer socket option.
pub fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is a valid int that outlives the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads an integer socket option.
pub fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: value and len are valid for writes for the duration of the call.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The socket's count of dropped datagrams (`SO_MEMINFO`, `SK_MEMINFO_DROPS`): the same
/// counter `SO_RXQ_OVFL` reports, readable at any time.
pub fn socket_drops(fd: RawFd) -> io::Result<u32> {
    const SK_MEMINFO_VARS: usize = 9;
    const SK_MEMINFO_DROPS: usize = 8;
    let mut info = [0u32; SK_MEMINFO_VARS];
    let mut len = mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: info and len are valid for writes of the given size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    if (len as usize) < mem::size_of_val(&info) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "SO_MEMINFO without SK_MEMINFO_DROPS",
        ));
    }
    Ok(info[SK_MEMINFO_DROPS])
}

/// Monotonic clock in nanoseconds (CLOCK_MONOTONIC).
pub fn monotonic_ns() -> u64 {
    let mut ts = MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: ts is valid for writes; CLOCK_MONOTONIC always exists on Linux.
    let ts = unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, ts.as_mut_ptr());
        ts.assume_init()
    };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET stays within it for cpu < CPU_SETSIZE (checked).
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} out of range"),
            ));
        }
        let mut set: libc::cpu_set_t = mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Gives the calling thread SCHED_FIFO at `priority` (1..=99).
pub fn set_fifo_priority(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: param is a valid sched_param; pthread_self() is the calling thread.
    let r = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

/// Lowers the calling thread's timer slack to 1 µs so that short sleeps of a pacer are
/// precise.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and affects only the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
}

/// Whether the kernel accepts UDP GSO (`UDP_SEGMENT`); detected once.
pub fn udp_gso_supported() -> bool {
    static GSO: OnceLock<bool> = OnceLock::new();
    *GSO.get_or_init(|| {
        let Ok(sock) = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)
        else {
            return false;
        };
        use std::os::fd::AsRawFd;
        getsockopt_int(sock.as_raw_fd(), libc::SOL_UDP, libc::UDP_SEGMENT).is_ok()
    })
}

/// Maximum number of segments the kernel accepts in one GSO send.
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Maximum bytes in one GSO send (IP length limit less headers).
pub const GSO_MAX_BYTES: usize = 65_000;

/// Preallocated headers for `sendmmsg`, optionally with one `UDP_SEGMENT` control message per
/// header.
pub struct SendBatch {
    msgs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    cmsgs: Vec<[u64; 4]>,
}

// SAFETY: the raw pointers point into the batch's own vectors or into the caller's buffers
// for the duration of one call; the batch is used by one thread at a time.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// Headers for up to `capacity` messages per call.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        // SAFETY: all-zero is a valid mmsghdr.
        let zeroed: libc::mmsghdr = unsafe { mem::zeroed() };
        Self {
            msgs: vec![zeroed; capacity],
            iovs: vec![
                libc::iovec {
                    iov_base: ptr::null_mut(),
                    iov_len: 0
                };
                capacity
            ],
            cmsgs: vec![[0u64; 4]; capacity],
        }
    }

    /// Messages per call.
    pub fn capacity(&self) -> usize {
        self.msgs.len()
    }

    /// Sets message `i` to `buf`, sent as datagrams of `segment` bytes with GSO when
    /// `segment` is given, else as one datagram.
    pub fn set(&mut self, i: usize, buf: &[u8], segment: Option<u16>) {
        self.iovs[i] = libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: all-zero is a valid msghdr.
        let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
        hdr.msg_iov = &mut self.iovs[i];
        hdr.msg_iovlen = 1;
        if let Some(seg) = segment {
            let space = mem::size_of_val(&self.cmsgs[i]);
            hdr.msg_control = self.cmsgs[i].as_mut_ptr().cast();
            hdr.msg_controllen = space as _;
            // SAFETY: the control buffer holds CMSG_SPACE(2) bytes (32 >= 16 + 8), so the
            // first header and its 2-byte payload fit.
            unsafe {
                let cmsg = libc::CMSG_FIRSTHDR(&hdr);
                (*cmsg).cmsg_level = libc::SOL_UDP;
                (*cmsg).cmsg_type = libc::UDP_SEGMENT;
                (*cmsg).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as _;
                ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut u16, seg);
                hdr.msg_controllen = libc::CMSG_SPACE(mem::size_of::<u16>() as u32) as _;
            }
        }
        self.msgs[i].msg_hdr = hdr;
        self.msgs[i].msg_len = 0;
    }

    /// Sends messages `start..start + n` on a connected socket; returns how many went out.
    ///
    /// # Safety
    /// The buffers given to [`SendBatch::set`] for those messages must still be alive.
    pub unsafe fn send_from(&mut self, fd: RawFd, start: usize, n: usize) -> io::Result<usize> {
        let msgs = &mut self.msgs[start..start + n];
        loop {
            // SAFETY: the headers point at live iovecs/control buffers of the batch and at the
            // caller's buffers (guaranteed alive by the caller).
            let r = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), n as libc::c_uint, 0) };
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// How a classic-BPF program attached to a SO_REUSEPORT group picks the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReuseportSpread {
    /// A random socket per datagram: spreads even a single flow over every socket.
    Random,
    /// The socket whose index is the receiving CPU modulo the group size.
    Cpu,
}

/// `SO_ATTACH_REUSEPORT_CBPF` (asm-generic value; the libc crate lists it only for Android).
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;

/// Attaches a classic-BPF program to the SO_REUSEPORT group of `fd` that returns the index of
/// the socket (in bind order) to deliver to: `spread` modulo `sockets`.
pub fn attach_reuseport_cbpf(fd: RawFd, spread: ReuseportSpread, sockets: u32) -> io::Result<()> {
    let ancillary = match spread {
        ReuseportSpread::Random => libc::SKF_AD_RANDOM,
        ReuseportSpread::Cpu => libc::SKF_AD_CPU,
    };
    let mut program = [
        // A = random number or CPU id (ancillary load).
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: (libc::SKF_AD_OFF + ancillary) as u32,
        },
        // A = A % sockets.
        libc::sock_filter {
            code: (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: sockets.max(1),
        },
        // Return A: the index of the socket.
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_A) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        },
    ];
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: prog points at a valid filter array that outlives the call; the kernel copies it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
            (&prog as *const libc::sock_fprog).cast(),
            mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `shutdown(fd, SHUT_RD)`: wakes every receive waiting on the socket (blocking `recvmsg`,
/// io_uring receives), which then return 0. On an unconnected UDP socket the call reports
/// `ENOTCONN` but still marks the socket and wakes the waiters, so that error is ignored.
pub fn shutdown_read(fd: RawFd) {
    // SAFETY: shutdown has no memory-safety preconditions; a bad fd only yields an error.
    unsafe {
        libc::shutdown(fd, libc::SHUT_RD);
    }
}

/// Parses the control messages in `control` (as the kernel wrote them) into `meta`.
pub fn parse_control(control: &[u8], meta: &mut RecvMeta) {
    if control.is_empty() {
        return;
    }
    // SAFETY: all-zero is a valid msghdr.
    let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
    hdr.msg_control = control.as_ptr() as *mut libc::c_void;
    hdr.msg_controllen = control.len() as _;
    // SAFETY: the header describes exactly the readable `control` slice.
    unsafe { parse_cmsgs(&hdr, meta) };
}

/// Reads a kernel socket address from raw bytes.
pub fn sockaddr_from_bytes(bytes: &[u8]) -> Option<SocketAddr> {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let n = bytes.len().min(mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: n bytes fit both the source slice and the storage.
    unsafe {
        ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            n,
        );
    }
    sockaddr_to_std(&storage, n as libc::socklen_t)
}

/// Space the control messages of one datagram need (see [`RecvBatch`]).
pub const CONTROL_SPACE: usize = CMSG_BUF;

/// A network interface address (from `getifaddrs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceAddr {
    /// Interface name.
    pub name: String,
    /// One of its addresses.
    pub addr: std::net::IpAddr,
}

/// Every IPv4 and IPv6 address of every interface that is up.
pub fn interface_addrs() -> io::Result<Vec<InterfaceAddr>> {
    let mut head: *mut libc::ifaddrs = ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_flags & libc::IFF_UP as libc::c_uint == 0 {
            continue;
        }
        // SAFETY: ifa_addr points at a sockaddr of at least the size its family implies.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as libc::c_int;
        let len = match family {
            libc::AF_INET => mem::size_of::<libc::sockaddr_in>(),
            libc::AF_INET6 => mem::size_of::<libc::sockaddr_in6>(),
            _ => continue,
        };
        // SAFETY: as above, `len` bytes are readable for this family.
        let bytes = unsafe { std::slice::from_raw_parts(ifa.ifa_addr as *const u8, len) };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        if let Some(a) = sockaddr_from_bytes(bytes) {
            out.push(InterfaceAddr { name, addr: a.ip() });
        }
    }
    // SAFETY: head came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn recv_batch_reports_truncation_source_and_drops_counter() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        setsockopt_int(rx.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(&[7u8; 100], rx.local_addr().unwrap()).unwrap();
        tx.send_to(&[8u8; 10], rx.local_addr().unwrap()).unwrap();
        let mut batch = RecvBatch::new(4);
        let mut bufs = [[0u8; 50]; 4];
        for (i, b) in bufs.iter_mut().enumerate() {
            // SAFETY: the buffers live until the end of the test and nobody else uses them.
            unsafe { batch.set_buffer(i, b.as_mut_ptr(), b.len()) };
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let n = batch.recv_mmsg(rx.as_raw_fd(), 4).unwrap();
        assert_eq!(n, 2);
        let m0 = batch.meta(0);
        assert!(m0.truncated);
        assert_eq!(m0.len, 50);
        assert_eq!(m0.source, Some(tx.local_addr().unwrap()));
        // The kernel attaches SO_RXQ_OVFL only once the drop count is non-zero.
        assert_eq!(m0.kernel_drops, None);
        let m1 = batch.meta(1);
        assert!(!m1.truncated);
        assert_eq!(m1.len, 10);
        assert_eq!(&bufs[1][..10], &[8u8; 10]);
        assert_eq!(
            batch.recv_mmsg(rx.as_raw_fd(), 4).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        assert_eq!(socket_drops(rx.as_raw_fd()).unwrap(), 0);
    }

    #[test]
    fn interface_addrs_include_loopback() {
        let all = interface_addrs().unwrap();
        assert!(
            all.iter()
                .any(|i| i.addr == std::net::IpAddr::from([127, 0, 0, 1])),
            "{all:?}"
        );
    }
}
