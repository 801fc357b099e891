//! AF_XDP sockets: the UMEM (user memory the kernel writes frames into), the fill and RX
//! rings shared with the kernel, binding to one queue of an interface (copy or zero-copy,
//! multi-buffer), `need_wakeup` and the socket's statistics. The `xdp` receive backend
//! (`engine/backend/xdp/`) is their one user; the program that steers frames here is in
//! [`ebpf`](super::ebpf).
//!
//! The rings are single-producer/single-consumer queues in memory mapped from the socket: the
//! kernel produces RX descriptors and consumes fill addresses, this thread the opposite. Each
//! index is a free-running `u32` read and written with acquire/release ordering, as the
//! kernel's own `libxdp` does.
//!
//! long: one socket's UMEM, rings and the rule for reading a frame are one owner's state;
//! split, the rule that keeps a frame from being read while the kernel may write it would
//! span files.
//!
//! A frame is the kernel's from the moment it goes into the fill ring until its RX
//! descriptor is published; this side reads a frame only through a published descriptor
//! ([`XskSocket::frame`], borrowing the socket) and gives it back only by releasing the
//! descriptor ([`XskSocket::release`], taking it mutably), so no slice of a frame the kernel
//! may write can be alive.
//!
//! ```no_run
//! use fsdr_net_io::sys::xsk::{XskOptions, XskSocket, XskBind};
//! # fn f(ifindex: u32) -> std::io::Result<()> {
//! let opts = XskOptions { ifindex, queue: 0, bind: XskBind::Copy, ..XskOptions::default() };
//! let mut xsk = XskSocket::open(&opts)?;
//! xsk.fill_all();
//! # Ok(()) }
//! ```

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_OPTIONS: libc::c_int = 8;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_USE_SG: u16 = 1 << 4;
const XDP_RING_NEED_WAKEUP: u32 = 1;
/// A descriptor's `options`: more of this packet follows in the next descriptor.
pub const XDP_PKT_CONTD: u32 = 1;
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// One RX descriptor: where in the UMEM a frame (or a fragment of one) is, and how long.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpDesc {
    /// Offset of the bytes in the UMEM.
    pub addr: u64,
    /// Their length.
    pub len: u32,
    /// [`XDP_PKT_CONTD`] when the packet continues in the next descriptor.
    pub options: u32,
}

#[repr(C)]
#[derive(Default)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

#[repr(C)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// The socket's statistics (`XDP_STATISTICS`): frames the kernel could not hand over.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Dropped for reasons other than a full RX ring (no fill address, for one).
    pub rx_dropped: u64,
    /// Descriptors the kernel found invalid.
    pub rx_invalid_descs: u64,
    /// Transmit descriptors found invalid (unused here).
    pub tx_invalid_descs: u64,
    /// Dropped because the RX ring was full (this thread behind).
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the TX ring was empty (unused here).
    pub tx_ring_empty_descs: u64,
}

/// How to bind: copy mode works on every driver; zero-copy lets the NIC write into the UMEM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum XskBind {
    /// Zero-copy where the driver has it, else copy (the reason is logged).
    #[default]
    Auto,
    /// The kernel copies each frame into the UMEM.
    Copy,
    /// The NIC writes into the UMEM; fails where the driver cannot.
    ZeroCopy,
}

/// What [`XskSocket::open`] makes.
#[derive(Debug, Clone)]
pub struct XskOptions {
    /// The interface.
    pub ifindex: u32,
    /// Its receive queue.
    pub queue: u32,
    /// UMEM frames (a power of two).
    pub frames: u32,
    /// Bytes per frame (2048 or 4096).
    pub frame_size: u32,
    /// Fill and RX ring entries (a power of two).
    pub ring_size: u32,
    /// Copy or zero-copy.
    pub bind: XskBind,
    /// Multi-buffer (`XDP_USE_SG`): frames larger than one UMEM frame arrive as several
    /// descriptors.
    pub multi_buffer: bool,
    /// Busy polling: `SO_PREFER_BUSY_POLL` with `SO_BUSY_POLL` of this many microseconds and
    /// `SO_BUSY_POLL_BUDGET` of `ring_size / 8` packets (the driver's interrupts stay off while
    /// the thread polls; needs the interface's `napi_defer_hard_irqs` and
    /// `gro_flush_timeout` set to help).
    pub busy_poll_us: Option<u32>,
}

impl Default for XskOptions {
    fn default() -> Self {
        XskOptions {
            ifindex: 0,
            queue: 0,
            frames: 8192,
            frame_size: 4096,
            ring_size: 4096,
            bind: XskBind::Auto,
            multi_buffer: true,
            busy_poll_us: None,
        }
    }
}

/// The UMEM: anonymous memory the kernel writes frames into.
struct Umem {
    base: *mut u8,
    len: usize,
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `XskSocket::open_with`; the socket that
        // registered it is closed first (field order of `XskSocket`; no duplicate of its
        // descriptor leaves this crate), so the kernel no longer writes into it. Should a
        // reference the kernel holds (an XSK map entry released later) keep it bound a moment
        // longer, the kernel writes through the UMEM pages it pinned at registration, not
        // through this mapping: nothing mapped here later is written.
        // Checked by: `xdp_books_are_exact_under_faults` (ASan).
        // Kernel writes (freed memory poisoned and watched):
        // `xdp_engine_stops_under_traffic_without_a_write_after_free`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// One ring mapped from the socket.
struct Ring {
    map: *mut u8,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut u8,
    mask: u32,
    size: u32,
    /// This side's own index (producer for the fill ring, consumer for RX).
    local: u32,
}

impl Ring {
    /// Maps ring `pgoff` of `fd` with `size` entries of `entry` bytes at `off`.
    fn map(
        fd: RawFd,
        off: &RingOffset,
        pgoff: libc::off_t,
        size: u32,
        entry: usize,
    ) -> io::Result<Ring> {
        let map_len = off.desc as usize + size as usize * entry;
        // SAFETY: a fresh shared mapping of the socket's ring; the kernel checks `pgoff` and
        // the length against the ring it made.
        // Checked by: `xdp_books_are_exact_under_faults` (ASan).
        // Kernel writes (freed memory poisoned and watched):
        // `xdp_engine_stops_under_traffic_without_a_write_after_free`.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = map.cast::<u8>();
        // SAFETY: the offsets come from the kernel for this mapping and lie inside it; the
        // index words are 4-byte aligned, as the kernel lays them out.
        // Checked by: `xdp_books_are_exact_under_faults` (ASan).
        // Kernel writes (freed memory poisoned and watched):
        // `xdp_engine_stops_under_traffic_without_a_write_after_free`.
        let at = |o: u64| unsafe { map.add(o as usize) };
        Ok(Ring {
            map,
            map_len,
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            descs: at(off.desc),
            mask: size - 1,
            size,
            local: 0,
        })
    }

    fn load(&self, word: *const AtomicU32) -> u32 {
        // SAFETY: `word` points into the live mapping (see `map`); the kernel writes it
        // concurrently, which is what the atomic is for.
        // Checked by: `xdp_books_are_exact_under_faults` (ASan).
        // Kernel writes (freed memory poisoned and watched):
        // `xdp_engine_stops_under_traffic_without_a_write_after_free`.
        unsafe { (*word).load(Ordering::Acquire) }
    }

    fn store(&self, word: *const AtomicU32, v: u32) {
        // SAFETY: as in `load`.
        // Checked by: `xdp_books_are_exact_under_faults` (ASan).
        unsafe { (*word).store(v, Ordering::Release) }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Ring::map`, unmapped once.
        // Checked by: `xdp_books_are_exact_under_faults` (ASan).
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

/// An AF_XDP socket bound to one queue, with its UMEM, fill ring and RX ring (the completion
/// ring the kernel insists on is mapped and never used: nothing is sent).
pub struct XskSocket {
    // Drop order: rings, then the socket (which unregisters the UMEM), then the UMEM.
    fill: Ring,
    completion: Ring,
    rx: Ring,
    fd: OwnedFd,
    umem: Umem,
    frame_size: u32,
    frames: u32,
    /// Frame addresses neither in the fill ring nor in the kernel's hands.
    spare: Vec<u64>,
    zero_copy: bool,
    multi_buffer: bool,
}

// SAFETY: the raw pointers are into mappings this value owns; nothing else refers to them,
// so moving the whole socket to another thread is sound.
// Checked by: `xdp_books_are_exact_under_faults` (ASan).
unsafe impl Send for XskSocket {}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live value of the size passed.
    // Checked by: `xdp_books_are_exact_under_faults` (ASan).
    check(unsafe {
        libc::setsockopt(
            fd,
            SOL_XDP,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
}

/// Reads option `name` into `v`; returns the length the kernel wrote.
fn getsockopt<T>(fd: RawFd, name: libc::c_int, v: &mut T) -> io::Result<usize> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is writable for `len` bytes; the kernel writes at most that many.
    // Checked by: `xdp_books_are_exact_under_faults` (ASan).
    // Kernel writes (freed memory poisoned and watched):
    // `xdp_engine_stops_under_traffic_without_a_write_after_free`.
    check(unsafe { libc::getsockopt(fd, SOL_XDP, name, (v as *mut T).cast(), &mut len) })?;
    Ok(len as usize)
}

impl XskSocket {
    /// Opens, registers the UMEM, maps the rings and binds. With [`XskBind::Auto`] a refused
    /// zero-copy bind is retried in copy mode on a fresh socket (the reason is logged).
    ///
    /// A socket closed on the same queue a moment before is released by the kernel from a
    /// work queue: until then a bind finds the queue busy (`EBUSY`), so that is retried for
    /// up to a second (a receiver restarted at once).
    pub fn open(opts: &XskOptions) -> io::Result<XskSocket> {
        let mut tries = 0;
        loop {
            match Self::open_once(opts) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 20 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                r => return r,
            }
        }
    }

    fn open_once(opts: &XskOptions) -> io::Result<XskSocket> {
        match opts.bind {
            XskBind::Copy => Self::open_with(opts, XDP_COPY),
            XskBind::ZeroCopy => Self::open_with(opts, XDP_ZEROCOPY),
            XskBind::Auto => Self::open_with(opts, XDP_ZEROCOPY).or_else(|e| {
                tracing::info!(
                    error = %e,
                    "AF_XDP zero-copy bind refused (the driver has no zero-copy mode); copy mode"
                );
                Self::open_with(opts, XDP_COPY)
            }),
        }
    }

    fn open_with(opts: &XskOptions, mode: u16) -> io::Result<XskSocket> {
        if !opts.frames.is_power_of_two() || !opts.ring_size.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "AF_XDP frames and ring size must be powers of two",
            ));
        }
        // SAFETY: plain socket creation.
        // Checked by: `xdp_books_are_exact_under_faults` (ASan).
        let raw = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        check(raw)?;
        // SAFETY: `raw` is a new descriptor owned by nothing else.
        // Checked by: `xdp_books_are_exact_under_faults` (ASan).
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = opts.frames as usize * opts.frame_size as usize;
        // SAFETY: a fresh private anonymous mapping.
        // Checked by: `xdp_books_are_exact_under_faults` (ASan).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let umem = Umem {
            base: base.cast(),
            len,
        };
        let reg = UmemReg {
            addr: base as u64,
            len: len as u64,
            chunk_size: opts.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        let raw = fd.as_raw_fd();
        setsockopt(raw, XDP_UMEM_REG, &reg)?;
        setsockopt(raw, XDP_UMEM_FILL_RING, &opts.ring_size)?;
        setsockopt(raw, XDP_UMEM_COMPLETION_RING, &opts.ring_size)?;
        setsockopt(raw, XDP_RX_RING, &opts.ring_size)?;
        let mut off = MmapOffsets::default();
        getsockopt(raw, XDP_MMAP_OFFSETS, &mut off)?;
        let rx = Ring::map(
            raw,
            &off.rx,
            XDP_PGOFF_RX_RING,
            opts.ring_size,
            std::mem::size_of::<XdpDesc>(),
        )?;
        let fill = Ring::map(raw, &off.fr, XDP_UMEM_PGOFF_FILL_RING, opts.ring_size, 8)?;
        let completion = Ring::map(
            raw,
            &off.cr,
            XDP_UMEM_PGOFF_COMPLETION_RING,
            opts.ring_size,
            8,
        )?;
        let mut flags = mode | XDP_USE_NEED_WAKEUP;
        if opts.multi_buffer {
            flags |= XDP_USE_SG;
        }
        let sa = SockaddrXdp {
            family: AF_XDP as u16,
            flags,
            ifindex: opts.ifindex,
            queue_id: opts.queue,
            shared_umem_fd: 0,
        };
        // SAFETY: `sa` is a sockaddr_xdp of the size passed.
        // Checked by: `xdp_books_are_exact_under_faults` (ASan).
        check(unsafe {
            libc::bind(
                raw,
                (&sa as *const SockaddrXdp).cast(),
                std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
            )
        })?;
        if let Some(us) = opts.busy_poll_us {
            let budget = (opts.ring_size / 8).max(1) as libc::c_int;
            for (name, v) in [
                (SO_PREFER_BUSY_POLL, 1),
                (libc::SO_BUSY_POLL, us as libc::c_int),
                (SO_BUSY_POLL_BUDGET, budget),
            ] {
                // SAFETY: an int option of the size passed.
                // Checked by: `busy_polling_is_set_or_refused_clearly` (ASan).
                check(unsafe {
                    libc::setsockopt(
                        raw,
                        libc::SOL_SOCKET,
                        name,
                        (&v as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                    )
                })?;
            }
        }
        let mut options = 0u32;
        let zero_copy = getsockopt(raw, XDP_OPTIONS, &mut options).is_ok()
            && options & XDP_OPTIONS_ZEROCOPY != 0;
        Ok(XskSocket {
            fill,
            completion,
            rx,
            fd,
            umem,
            frame_size: opts.frame_size,
            frames: opts.frames,
            spare: (0..u64::from(opts.frames))
                .rev()
                .map(|i| i * u64::from(opts.frame_size))
                .collect(),
            zero_copy,
            multi_buffer: opts.multi_buffer,
        })
    }

    /// Whether the bind is zero-copy.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether multi-buffer is on.
    pub fn multi_buffer(&self) -> bool {
        self.multi_buffer
    }

    /// Bytes per UMEM frame.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Gives the kernel every spare frame (as many as the fill ring takes).
    pub fn fill_all(&mut self) {
        let ring = &mut self.fill;
        let consumer = ring.load(ring.consumer);
        let free = ring.size - ring.local.wrapping_sub(consumer);
        let n = (free as usize).min(self.spare.len());
        for _ in 0..n {
            let addr = self.spare.pop().expect("counted above");
            let i = (ring.local & ring.mask) as usize;
            // SAFETY: entry `i` lies inside the fill ring's descriptor area (masked index),
            // and the kernel does not read entries beyond the producer index we publish.
            // Checked by: `xdp_books_are_exact_under_faults` (ASan).
            // Kernel writes (freed memory poisoned and watched):
            // `xdp_engine_stops_under_traffic_without_a_write_after_free`.
            unsafe { ring.descs.cast::<u64>().add(i).write(addr) };
            ring.local = ring.local.wrapping_add(1);
        }
        if n > 0 {
            ring.store(ring.producer, ring.local);
        }
        let _ = &self.completion;
    }

    /// Whether the kernel asks to be woken to refill (the fill ring's `need_wakeup` flag):
    /// then [`XskSocket::wait`] must enter the kernel even when frames are queued.
    pub fn needs_wakeup(&self) -> bool {
        self.fill.load(self.fill.flags) & XDP_RING_NEED_WAKEUP != 0
    }

    /// RX descriptors ready to read: the kernel published them and does not touch them, or
    /// their frames, until [`XskSocket::release`] gives them back.
    pub fn ready(&self) -> u32 {
        self.rx.load(self.rx.producer).wrapping_sub(self.rx.local)
    }

    /// Descriptor `k` after the consumer index; `None` unless `k < ready()` (an entry the
    /// kernel has not published is not read).
    pub fn desc(&self, k: u32) -> Option<XdpDesc> {
        if k >= self.ready() {
            return None;
        }
        let i = (self.rx.local.wrapping_add(k) & self.rx.mask) as usize;
        // SAFETY: entry `i` lies inside the RX descriptor area (masked index); the kernel
        // published it (k < ready, read with acquire) and does not touch it until we release it.
        // Checked by: `xdp_books_are_exact_under_faults`,
        // `xdp_frames_are_lent_only_while_published` and (kernel writes)
        // `xdp_engine_stops_under_traffic_without_a_write_after_free`.
        Some(unsafe { self.rx.descs.cast::<XdpDesc>().add(i).read() })
    }

    /// The bytes of RX descriptor `k` (`k < ready()`), bounds-checked against the UMEM.
    /// The frame is the kernel's again only after [`XskSocket::release`], which takes
    /// `&mut self`: the slice cannot outlive it. `None` for `k >= ready()` or a descriptor
    /// outside the UMEM.
    pub fn frame(&self, k: u32) -> Option<&[u8]> {
        let d = self.desc(k)?;
        let start = usize::try_from(d.addr).ok()?;
        let end = start.checked_add(d.len as usize)?;
        let frame = self.frame_size as usize;
        if end > self.umem.len || (d.len > 0 && start / frame != (end - 1) / frame) {
            return None;
        }
        // SAFETY: inside one frame of the UMEM (checked above); the kernel wrote the frame,
        // published its descriptor, and does not write it again until the frame goes back
        // through the fill ring, which only `release` (taking `&mut self`) does.
        // Checked by: `xdp_books_are_exact_under_faults`,
        // `xdp_frames_are_lent_only_while_published` and (kernel writes)
        // `xdp_engine_stops_under_traffic_without_a_write_after_free`.
        Some(unsafe { std::slice::from_raw_parts(self.umem.base.add(start), d.len as usize) })
    }

    /// Gives the first `n` ready descriptors (at most [`XskSocket::ready`]) back to the
    /// kernel, their frames to the spare list (the fill ring takes them at the next
    /// [`XskSocket::fill_all`]).
    pub fn release(&mut self, n: u32) {
        let n = n.min(self.ready());
        let frame = u64::from(self.frame_size);
        for k in 0..n {
            let addr = self.desc(k).expect("k < ready").addr;
            self.spare.push(addr - addr % frame);
        }
        self.rx.local = self.rx.local.wrapping_add(n);
        self.rx.store(self.rx.consumer, self.rx.local);
    }

    /// Waits up to `timeout_ms` (0: not at all) for RX descriptors; with `need_wakeup` this
    /// is also what makes the kernel refill from the fill ring.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        // Checked by: `xdp_books_are_exact_under_faults` (ASan).
        let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        Ok(r > 0)
    }

    /// The socket's statistics.
    pub fn stats(&self) -> io::Result<XskStats> {
        let mut s = XskStats::default();
        getsockopt(self.fd.as_raw_fd(), XDP_STATISTICS, &mut s)?;
        Ok(s)
    }

    /// UMEM frames in total.
    pub fn frames(&self) -> u32 {
        self.frames
    }
}

impl XskSocket {
    /// The socket's descriptor, for this crate's `poll` and XSK map only. Not `AsFd`: a
    /// duplicate made from it would keep the socket bound, and the kernel writing, after
    /// this value dropped and unmapped the UMEM (an outside review found the sequence).
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
