//! The `xdp` backend: AF_XDP. An XDP program on the interface steers the stream's UDP
//! destination to an AF_XDP socket bound to one receive queue; every other frame goes on to
//! the kernel. Frames land in the socket's UMEM (copied there by the kernel in copy mode,
//! written by the NIC in zero-copy mode), this thread checks their Ethernet, IP and UDP
//! headers and copies the UDP payload into an engine slot: from there on a datagram takes
//! the same path as from every other backend (classification, counters, tracking).
//!
//! The thread runs the engine's one receive loop (`engine/receive.rs` `run_loop`): a pass
//! waits for frames with `poll` (which also wakes the kernel when the fill ring asks for it,
//! `need_wakeup`), takes up to a batch of packets from the RX ring and gives their frames
//! back through the fill ring. The UDP socket stays bound: it keeps the port, and what the
//! program passes to the kernel for that destination (IP fragments, IPv4 options, IPv6
//! extension headers, frames of another queue) arrives there and is read in the same pass
//! (`xdp_via_kernel`). Its `shutdown(SHUT_RD)` wakes the thread for the stop.
//!
//! Set-up happens in [`Xdp::start`] on the caller's thread, so that every failure (no
//! CAP_BPF/CAP_NET_ADMIN, no such interface, an MTU too small, no AF_XDP or multi-buffer in
//! the kernel, a program already attached) is an error of `Engine::start` and nothing is
//! left attached. The program is attached as a BPF link: it goes when the link's descriptor
//! closes — when the thread ends, on a panic, or with the process.
//!
//! Not done: the arrival time is the read's (the XDP RX timestamp metadata needs a kfunc
//! program per driver), and the UDP checksum is not verified (a veth frame from a local
//! sender carries only the partial checksum that offload would complete; NICs check it in
//! hardware). The IPv4 header checksum is.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use socket2::Socket;

use super::super::config::XdpMode;
use super::super::meta::Clocks;
use super::super::receive::{Pass, ReceiveSide, recv_batch, run_loop};
use super::super::slots::ReceiverEnd;
use super::super::worker::{Worker, spawn_receive_thread};
use super::super::{EngineConfig, Shared};
use super::{Capabilities, ReceiveBackend, Started, single};
use crate::Error;
use crate::sys::ebpf::{UdpMatch, XdpAttach, XdpLink, XdpProgram, XskMap};
use crate::sys::xsk::{XDP_PKT_CONTD, XskOptions, XskSocket};
use crate::sys::{self, RecvBatch, RecvMeta, Wait};

mod frame;
use frame::parse_frame;

/// See the [module documentation](self).
pub(crate) struct Xdp;

/// Longest wait in one pass (then the statistics are read again).
const IDLE_WAIT_MS: i32 = 100;
/// Under load, the UDP socket and the AF_XDP statistics are read every this many passes.
const SIDE_EVERY: u64 = 64;

impl ReceiveBackend for Xdp {
    fn name(&self) -> &'static str {
        "xdp"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            kernel_timestamps: false,
            gro: false,
            io_uring: false,
            multi_thread: false,
            loopback: false,
        }
    }

    fn validate(&self, cfg: &EngineConfig) -> Result<(), Error> {
        if cfg.xdp.interface.is_none() {
            return Err(Error::config(
                "the xdp backend needs the interface the stream arrives on (--interface IFACE)",
            ));
        }
        if cfg.socket.timestamps {
            return Err(Error::Unsupported {
                backend: cfg.backend,
                reason: "no kernel receive timestamps through AF_XDP (arrival is when the \
                         receive thread reads the ring)"
                    .into(),
            });
        }
        Ok(())
    }

    fn start(
        &self,
        cfg: &EngineConfig,
        shared: Arc<Shared>,
        sockets: Vec<Socket>,
        ends: Vec<ReceiverEnd>,
    ) -> Result<Started, Error> {
        let (socket, end) = single(sockets, ends);
        let setup = Setup::new(cfg, &socket)?;
        let stop_handle = socket.try_clone().map_err(Error::Spawn)?;
        let batch = cfg.batch;
        let worker_cfg = cfg.clone();
        let handle = spawn_receive_thread(0, &cfg.threads, move || {
            let worker = Worker::new(0, shared, end, &worker_cfg, batch);
            let mut side = XdpSide {
                worker,
                msgs: RecvBatch::new(batch),
                socket,
                batch,
                wake_by: None,
                packet: Vec::with_capacity(4),
                passes: 0,
                setup,
            };
            side.setup.xsk.fill_all();
            run_loop(&mut side);
        })?;
        let mut started = Started::new();
        started.threads.push(handle);
        started
            .stoppers
            .push(Box::new(move || sys::shutdown_read(stop_handle.as_fd())));
        Ok(started)
    }
}

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
            unsupported(cfg, explain(&what, &e))
        })?;
        let map = XskMap::create(cfg.xdp.queue + 1)
            .map_err(|e| unsupported(cfg, explain("creating the XSK map", &e)))?;
        map.set(cfg.xdp.queue, xsk.as_fd())
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

/// The AF_XDP socket as a side of the engine's one receive loop.
struct XdpSide {
    worker: Worker,
    msgs: RecvBatch,
    socket: Socket,
    batch: usize,
    wake_by: Option<u64>,
    /// The descriptors of the packet being read (several with multi-buffer).
    packet: Vec<crate::sys::xsk::XdpDesc>,
    /// Passes made.
    passes: u64,
    setup: Setup,
}

impl XdpSide {
    /// Copies packet `self.packet` into slot `slot` (or counts it); true when it went to the
    /// consumer.
    fn deliver(&mut self, slot: Option<u32>, at: Clocks) -> bool {
        let xsk = &self.setup.xsk;
        let total: usize = self.packet.iter().map(|d| d.len as usize).sum();
        let head = self.packet.first().and_then(|d| xsk.bytes(d));
        let Some(udp) = head.and_then(|h| parse_frame(h, total)) else {
            // Steered here by the program, yet not a whole UDP datagram for us (a bad IPv4
            // checksum, lengths that disagree): counted, never delivered.
            self.worker.counts.received += 1;
            self.worker.counts.malformed += 1;
            return false;
        };
        let size = self.worker.pool().slot_size();
        let meta = RecvMeta {
            len: udp.len.min(size),
            truncated: udp.len > size,
            source: Some(udp.source),
            ..RecvMeta::default()
        };
        let Some(slot) = slot else {
            self.worker.overflowed(&meta);
            return false;
        };
        if !meta.truncated {
            // Copy the payload, which may span the packet's descriptors, into the slot.
            let dst = self.worker.pool().buf_ptr(slot);
            let (mut skip, mut copied) = (udp.offset, 0);
            for d in &self.packet {
                let Some(b) = xsk.bytes(d) else { break };
                if skip >= b.len() {
                    skip -= b.len();
                    continue;
                }
                let n = (b.len() - skip).min(udp.len - copied);
                // SAFETY: this thread owns `slot` (from the stash); `copied + n <= udp.len
                // <= slot_size`, and UMEM and slot never overlap.
                // Checked by: `xdp_books_are_exact_under_faults` (ASan).
                unsafe { std::ptr::copy_nonoverlapping(b[skip..].as_ptr(), dst.add(copied), n) };
                copied += n;
                skip = 0;
                if copied == udp.len {
                    break;
                }
            }
            if copied < udp.len {
                self.worker.counts.received += 1;
                self.worker.counts.malformed += 1;
                return false;
            }
        }
        self.worker.complete(slot, &meta, at)
    }

    /// Takes up to a batch of packets from the RX ring; returns how many.
    fn take_ring(&mut self) -> usize {
        let room = self.worker.fill_stash(self.batch);
        let pause = self.worker.pauses();
        let ready = self.setup.xsk.ready();
        let at = Clocks::now();
        let (mut k, mut taken) = (0u32, 0usize);
        let mut consumed = [0u64; 16];
        while k < ready && taken < self.batch {
            // A whole packet: its descriptors up to one without XDP_PKT_CONTD.
            self.packet.clear();
            let mut end = k;
            loop {
                if end >= ready {
                    // The rest of the packet is not published yet.
                    self.packet.clear();
                    break;
                }
                let d = self.setup.xsk.desc(end);
                end += 1;
                self.packet.push(d);
                if d.options & XDP_PKT_CONTD == 0 {
                    break;
                }
            }
            if self.packet.is_empty() || (taken >= room && pause) {
                break;
            }
            let slot = (taken < room).then(|| self.worker.stash[taken]);
            if self.deliver(slot, at) && taken < room {
                consumed[taken / 64] |= 1 << (taken % 64);
            }
            for i in 0..self.packet.len() {
                let addr = self.packet[i].addr;
                self.setup.xsk.recycle(addr);
            }
            k = end;
            taken += 1;
        }
        self.setup.xsk.release(k);
        self.setup.xsk.fill_all();
        self.worker
            .retire_batch(taken.min(room), |i| consumed[i / 64] >> (i % 64) & 1 == 1);
        taken
    }

    /// Reads the socket's statistics into the counters (and kernel_drops).
    fn statistics(&mut self) {
        if let Ok(s) = self.setup.xsk.stats() {
            let c = &mut self.worker.counts;
            c.xdp_rx_dropped = s.rx_dropped;
            c.xdp_rx_ring_full = s.rx_ring_full;
            c.xdp_fill_ring_empty = s.rx_fill_ring_empty_descs;
            c.xdp_invalid_descs = s.rx_invalid_descs;
            self.worker.extra_drops = (s.rx_dropped + s.rx_ring_full) as u32;
        }
    }

    /// Reads what the kernel's path delivered to the UDP socket.
    fn take_socket(&mut self) -> usize {
        let before = self.worker.counts.received;
        let w = &mut self.worker;
        match recv_batch(w, &mut self.msgs, &self.socket, self.batch, Wait::No) {
            Ok(Some(n)) => {
                let real = (w.counts.received - before) as usize;
                w.counts.xdp_via_kernel += real as u64;
                if w.shut_down { 0 } else { n }
            }
            _ => 0,
        }
    }
}

impl ReceiveSide for XdpSide {
    fn stopping(&self) -> bool {
        self.worker.stopping()
    }

    fn pass(&mut self, stopping: bool) -> Pass {
        self.passes = self.passes.wrapping_add(1);
        // The socket and the statistics cost a system call each: read when the socket is
        // readable or the engine stops, and every `SIDE_EVERY` passes under load.
        let every = self.passes.is_multiple_of(SIDE_EVERY);
        let mut socket_ready = stopping || every;
        if !stopping && self.setup.xsk.ready() == 0 {
            let now = sys::monotonic_ns();
            let wait = match self.wake_by {
                Some(d) if d <= now => 0,
                Some(d) => ((d - now) / 1_000_000).clamp(1, IDLE_WAIT_MS as u64) as i32,
                None => IDLE_WAIT_MS,
            };
            let mut fds = [
                libc::pollfd {
                    fd: self.setup.xsk.as_fd().as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.socket.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds.
            // Checked by: `xdp_books_are_exact_under_faults` (ASan).
            let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, wait) };
            self.worker.counts.recv_calls += 1;
            socket_ready = fds[1].revents != 0;
            if r <= 0 {
                let now = sys::monotonic_ns();
                if self.wake_by.is_some_and(|d| now >= d) {
                    self.worker.wake(now);
                    self.wake_by = None;
                }
                self.statistics();
                self.worker.refresh_kernel_drops();
                return Pass::Idle;
            }
        } else if self.setup.xsk.zero_copy() && self.setup.xsk.needs_wakeup() {
            // Zero-copy drivers refill from the fill ring when woken; in copy mode the
            // kernel fills the ring without it.
            let _ = self.setup.xsk.wait(0);
            self.worker.counts.recv_calls += 1;
        }
        let from_ring = self.take_ring();
        if from_ring == 0 && self.worker.pauses() && self.setup.xsk.ready() > 0 {
            return Pass::NoRoom;
        }
        let from_socket = if socket_ready { self.take_socket() } else { 0 };
        if every || stopping {
            self.statistics();
        }
        self.wake_by = self.worker.publish(sys::monotonic_ns());
        let took = from_ring + from_socket;
        if stopping && took == 0 {
            return Pass::Drained;
        }
        Pass::Took {
            more: from_ring == self.batch || from_socket == self.batch,
        }
    }

    fn wait_for_room(&mut self) {
        self.worker.wait_for_room();
    }

    fn finish(&mut self) {
        self.statistics();
        self.worker.wake(sys::monotonic_ns());
        self.worker.refresh_kernel_drops();
    }
}
