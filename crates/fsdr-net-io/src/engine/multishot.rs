//! The `uring-multishot` backend: one io_uring multishot `recvmsg` fed by a provided-buffer
//! ring whose buffers are the engine's slots (buffer ID = slot index). One submission keeps
//! receiving until the kernel ends it (for example when the ring runs dry); the thread then
//! re-arms it as soon as buffers are back. Slots return to the ring when the consumer is done.
//!
//! When the consumer holds every slot, a few overflow buffers go into the ring so that the
//! socket keeps draining; what lands there is counted as `overflow`. Needs Linux ≥ 6.0
//! (multishot `recvmsg`, provided-buffer rings); older kernels get a clear error.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use io_uring::types::{BufRingEntry, RecvMsgOut, SubmitArgs, Timespec};
use io_uring::{IoUring, Probe, cqueue, opcode, types};
use socket2::Socket;

use super::worker::{Worker, spawn_receive_thread};
use super::{EngineConfig, EngineError, Shared, Started};
use crate::sys::{self, RecvMeta};

const NAME_LEN: usize = std::mem::size_of::<libc::sockaddr_storage>();
/// Bytes in front of each datagram in a multishot buffer: the `io_uring_recvmsg_out` header,
/// the source address and the control messages.
pub(super) const HEADER_SPACE: usize = 16 + NAME_LEN + sys::CONTROL_SPACE;
const RECV: u64 = 1;
const CANCEL: u64 = 2;
const BGID: u16 = 7;
/// Wait for completions at most this long when armed (then refresh the drop counter).
const ARMED_WAIT: Duration = Duration::from_millis(100);
/// Wait this long when disarmed for lack of buffers, to re-arm soon after slots come back.
const DRY_WAIT: Duration = Duration::from_micros(500);

/// A provided-buffer ring in anonymous memory shared with the kernel.
struct BufRing {
    base: *mut BufRingEntry,
    bytes: usize,
    mask: u16,
    tail: u16,
}

impl BufRing {
    fn new(entries: u16) -> io::Result<Self> {
        let bytes = entries as usize * std::mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping has no preconditions; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            base: base.cast(),
            bytes,
            mask: entries - 1,
            tail: 0,
        })
    }

    /// Adds a buffer (visible to the kernel after `publish`).
    fn push(&mut self, addr: *mut u8, len: usize, bid: u16) {
        // SAFETY: the index is masked into the mapping; entries past the kernel's head are
        // ours to write until the tail is published.
        let entry = unsafe { &mut *self.base.add((self.tail & self.mask) as usize) };
        entry.set_addr(addr as u64);
        entry.set_len(len as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field lives inside the first entry of the mapping and is only
        // written by us; the kernel reads it, hence the release store.
        unsafe {
            let tail = BufRingEntry::tail(self.base) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: base/bytes describe the mapping made in `new`; it is unregistered first.
        unsafe {
            libc::munmap(self.base.cast(), self.bytes);
        }
    }
}

// SAFETY: the ring memory is owned by this value and used by one thread at a time.
unsafe impl Send for BufRing {}

fn unsupported(cfg: &EngineConfig, reason: String) -> EngineError {
    EngineError::Unsupported {
        backend: cfg.backend,
        reason,
    }
}

pub(super) fn start(
    cfg: &EngineConfig,
    shared: Arc<Shared>,
    socket: Socket,
) -> Result<Started, EngineError> {
    let overflow = cfg.uring_overflow_buffers.unwrap_or(cfg.batch);
    let total = cfg.slots + overflow;
    let entries = total.next_power_of_two().clamp(2, 32_768) as u16;
    if total > entries as usize {
        return Err(EngineError::Config(format!(
            "{} slots + {overflow} overflow buffers exceed the 32768-entry buffer ring",
            cfg.slots
        )));
    }
    let ring = IoUring::builder()
        .setup_cqsize(8192)
        .build(64)
        .map_err(|e| unsupported(cfg, format!("io_uring_setup: {e}")))?;
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| unsupported(cfg, format!("io_uring probe: {e}")))?;
    if !probe.is_supported(opcode::RecvMsg::CODE) {
        return Err(unsupported(cfg, "IORING_OP_RECVMSG missing".into()));
    }
    let bufs =
        BufRing::new(entries).map_err(|e| unsupported(cfg, format!("buffer ring memory: {e}")))?;
    // SAFETY: the ring memory stays mapped until after it is unregistered (see `run`).
    unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(bufs.base as u64, entries, BGID, 0)
            .map_err(|e| {
                unsupported(
                    cfg,
                    format!("provided-buffer ring (needs Linux >= 5.19): {e}"),
                )
            })?;
    }
    let stop_handle = socket.try_clone().map_err(EngineError::Spawn)?;
    let batch = cfg.batch;
    let handle = spawn_receive_thread(0, &cfg.threads, move || {
        let mut rx = Multishot::new(shared, ring, bufs, batch, overflow);
        if let Err(e) = rx.run(socket.as_raw_fd()) {
            tracing::error!(error = %e, "uring-multishot receive thread failed");
        }
    })?;
    Ok(Started {
        threads: vec![handle],
        stoppers: vec![Box::new(move || {
            sys::shutdown_read(stop_handle.as_raw_fd())
        })],
    })
}

struct Multishot {
    worker: Worker,
    ring: IoUring,
    bufs: BufRing,
    /// Overflow buffers and which of them are not in the ring.
    scratch: Box<[u8]>,
    scratch_free: Vec<u16>,
    slot_len: usize,
    slots: usize,
    /// Buffers (slots + overflow) currently in the ring.
    in_ring: usize,
    batch: usize,
    armed: bool,
    arms: u64,
    msghdr: Box<libc::msghdr>,
    cqes: Vec<(i32, u32, u64)>,
    fd: RawFd,
}

impl Multishot {
    fn new(
        shared: Arc<Shared>,
        ring: IoUring,
        bufs: BufRing,
        batch: usize,
        overflow: usize,
    ) -> Self {
        let slot_len = shared.pools[0].slot_size();
        let slots = shared.pools[0].slots();
        // SAFETY: all-zero is a valid msghdr; only the lengths matter to the kernel here.
        let mut msghdr: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msghdr.msg_namelen = NAME_LEN as libc::socklen_t;
        msghdr.msg_controllen = sys::CONTROL_SPACE as _;
        Self {
            worker: Worker::new(0, shared, 1),
            ring,
            bufs,
            scratch: vec![0x5au8; overflow * slot_len].into_boxed_slice(),
            scratch_free: (0..overflow as u16).rev().collect(),
            slot_len,
            slots,
            in_ring: 0,
            batch,
            armed: false,
            arms: 0,
            msghdr,
            cqes: Vec::with_capacity(8192),
            fd: -1,
        }
    }

    fn buffer(&mut self, bid: u16) -> *mut u8 {
        if (bid as usize) < self.slots {
            self.worker.pool().buf_ptr(u32::from(bid))
        } else {
            let k = bid as usize - self.slots;
            self.scratch[k * self.slot_len..].as_mut_ptr()
        }
    }

    fn give(&mut self, bid: u16) {
        let ptr = self.buffer(bid);
        self.bufs.push(ptr, self.slot_len, bid);
        self.in_ring += 1;
    }

    /// Puts slots the consumer returned (and overflow buffers if slots ran out) in the ring.
    fn refill(&mut self) {
        let mut slots_in = 0;
        while let Some(i) = self.worker.pool().free.pop() {
            self.give(i as u16);
            slots_in += 1;
        }
        if slots_in == 0 && self.in_ring < self.batch {
            while let Some(k) = self.scratch_free.pop() {
                self.give(self.slots as u16 + k);
            }
        }
        self.bufs.publish();
    }

    fn arm(&mut self) {
        let entry = opcode::RecvMsgMulti::new(types::Fd(self.fd), &*self.msghdr, BGID)
            .build()
            .user_data(RECV);
        // SAFETY: the msghdr template and the buffer ring outlive the request: the thread
        // does not return while a request is armed (see `run`).
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_ok() {
            self.armed = true;
            self.arms += 1;
            if self.arms > 1 {
                self.worker.shared.counters.threads[0].rearms.add(1);
            }
        }
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let ts = Timespec::from(timeout);
        let args = SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn handle(&mut self, res: i32, flags: u32, now: u64) -> bool {
        if !cqueue::more(flags) {
            self.armed = false;
        }
        let Some(bid) = cqueue::buffer_select(flags) else {
            if res < 0 && -res != libc::ENOBUFS && !self.worker.stopping() {
                tracing::warn!(error = %io::Error::from_raw_os_error(-res), "multishot recvmsg");
            }
            // No buffer: ring dry (ENOBUFS), end of stream after shutdown, or an error.
            return res == 0;
        };
        self.in_ring -= 1;
        let ptr = self.buffer(bid);
        let filled = res.max(0) as usize;
        // SAFETY: the kernel wrote `res` bytes into buffer `bid`, which it handed back to us.
        let buf = unsafe { std::slice::from_raw_parts(ptr, filled.min(self.slot_len)) };
        let parsed = RecvMsgOut::parse(buf, &self.msghdr).ok().map(|out| {
            let mut meta = RecvMeta {
                len: out.payload_data().len(),
                truncated: out.is_payload_truncated(),
                source: sys::sockaddr_from_bytes(out.name_data()),
                kernel_drops: None,
                timestamp_ns: None,
            };
            sys::parse_control(out.control_data(), &mut meta);
            let offset = out.payload_data().as_ptr() as usize - ptr as usize;
            (meta, offset, out.incoming_name_len())
        });
        let Some((meta, offset, namelen)) = parsed else {
            // A completion too short for its own header: never seen from a sane kernel.
            self.give(bid);
            return false;
        };
        if namelen == 0 && meta.len == 0 && self.worker.stopping() {
            // The wake-up from shutdown(SHUT_RD), not a datagram.
            self.give(bid);
            return true;
        }
        if (bid as usize) < self.slots {
            if !self.worker.complete_at(u32::from(bid), offset, &meta, now) {
                self.give(bid);
            }
        } else {
            self.worker.overflowed(&meta);
            self.scratch_free.push(bid - self.slots as u16);
        }
        false
    }

    fn run(&mut self, fd: RawFd) -> io::Result<()> {
        self.fd = fd;
        let result = self.receive();
        // Never leave with a request armed: the kernel could still write into slots.
        if self.armed {
            let cancel = opcode::AsyncCancel::new(RECV).build().user_data(CANCEL);
            // SAFETY: a cancel entry references no memory.
            let _ = unsafe { self.ring.submission().push(&cancel) };
            for _ in 0..100 {
                let _ = self.wait(Duration::from_millis(10));
                self.collect();
                let now = sys::monotonic_ns();
                for k in 0..self.cqes.len() {
                    let (res, flags, ud) = self.cqes[k];
                    if ud == RECV {
                        self.handle(res, flags, now);
                    }
                }
                if !self.armed {
                    break;
                }
            }
        }
        self.worker.publish();
        self.worker.refresh_kernel_drops(fd);
        if self.armed {
            // Leak the buffers rather than free memory the kernel may still use.
            tracing::error!("multishot receive could not be cancelled; leaking its buffers");
            std::mem::forget(std::mem::replace(&mut self.scratch, Box::new([])));
            return result;
        }
        let _ = self.ring.submitter().unregister_buf_ring(BGID);
        result
    }

    fn collect(&mut self) {
        self.cqes.clear();
        for cqe in self.ring.completion() {
            self.cqes.push((cqe.result(), cqe.flags(), cqe.user_data()));
        }
    }

    fn receive(&mut self) -> io::Result<()> {
        let fd = self.fd;
        let mut ended = false;
        let mut stop_seen: Option<std::time::Instant> = None;
        loop {
            self.refill();
            let stopping = self.worker.stopping();
            if stopping {
                let since = *stop_seen.get_or_insert_with(std::time::Instant::now);
                // Ended by the shutdown wake-up, or (should it never come) cancelled in `run`.
                if ended || !self.armed || since.elapsed() > Duration::from_millis(500) {
                    return Ok(());
                }
            }
            if !self.armed && self.in_ring > 0 && !stopping {
                self.arm();
            }
            let wait = if self.armed { ARMED_WAIT } else { DRY_WAIT };
            self.wait(wait)?;
            self.collect();
            if self.cqes.is_empty() {
                // Idle, or dry and waiting for slots: the kernel may be dropping meanwhile.
                self.worker.refresh_kernel_drops(fd);
                continue;
            }
            let now = sys::monotonic_ns();
            for k in 0..self.cqes.len() {
                let (res, flags, ud) = self.cqes[k];
                if ud == RECV && self.handle(res, flags, now) && self.worker.stopping() {
                    ended = true;
                }
            }
            self.worker.publish();
        }
    }
}
