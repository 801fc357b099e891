//! The `uring-multishot` backend: one io_uring multishot `recvmsg` fed by a provided-buffer
//! ring whose buffers are the engine's slots (buffer ID = slot index). (long: the receiver —
//! ring, request, buffers and their one ending — and its side of the engine's receive loop
//! change the same state; the memory itself is in `buffers.rs`.) One submission keeps
//! receiving until the kernel ends it (for example when the ring runs dry); the thread then
//! re-arms it as soon as buffers are back. Slots return to the ring when the consumer is done.
//!
//! When the consumer holds every slot, a few overflow buffers go into the ring so that the
//! socket keeps draining; what lands there is counted as `overflow`. Needs Linux ≥ 6.0
//! (multishot `recvmsg`, provided-buffer rings); older kernels get a clear error.
//!
//! The thread runs the engine's one receive loop (`engine/receive.rs` `run_loop`, the same
//! stop rule as every backend): a pass re-arms, waits for completions and hands them over.
//! Shutdown: `shutdown(SHUT_RD)` ends the multishot receive; should it not end, the request is
//! cancelled and the thread waits (bounded) for the cancel. If even that does not complete,
//! the kernel may still write into the slots and the buffer ring: the thread then keeps the
//! ring, the buffer ring and the slot pool alive for the rest of the process (leaked on
//! purpose), counts it in `leaked_rings` and logs an error, rather than free memory the
//! kernel may write. A panic on the thread does the same: only a receiver whose request the
//! kernel ended and whose buffer ring it unregistered frees that memory ([`Lent`],
//! `tests/kernel_writes.rs`).

use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;
#[cfg(test)]
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use io_uring::types::{RecvMsgOut, SubmitArgs, Timespec};
use io_uring::{IoUring, Probe, cqueue, opcode, types};
use socket2::Socket;

use super::super::meta::Clocks;
use super::super::receive::{Pass, ReceiveSide, run_loop};
use super::super::slots::ReceiverEnd;
use super::super::worker::{Worker, spawn_receive_thread};
use super::super::{EngineConfig, Overload, Shared};
use super::{Capabilities, ReceiveBackend, Started};
use crate::Error;
use crate::lent;
use crate::sys::{self, RecvMeta};

mod buffers;
use buffers::{BufRing, OverflowArea};

const NAME_LEN: usize = std::mem::size_of::<libc::sockaddr_storage>();
/// Bytes in front of each datagram in a multishot buffer: the `io_uring_recvmsg_out` header,
/// the source address and the control messages.
const HEADER_SPACE: usize = 16 + NAME_LEN + sys::CONTROL_SPACE;
const RECV: u64 = 1;
const CANCEL: u64 = 2;
const BGID: u16 = 7;
/// Wait for completions at most this long when armed (then refresh the drop counter).
const ARMED_WAIT: Duration = Duration::from_millis(100);
/// Wait this long when disarmed for lack of buffers, to re-arm soon after slots come back.
const DRY_WAIT: Duration = Duration::from_micros(500);
/// How long shutdown waits for a cancelled receive to end before leaking its memory.
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// Tests: the receive thread on this local port skips the shutdown wake-up and the cancel,
/// as if the kernel never ended the request.
#[cfg(test)]
pub(crate) static NEVER_CANCEL_PORT: AtomicU16 = AtomicU16::new(0);

/// See the [module documentation](self).
pub(crate) struct Multishot;

impl ReceiveBackend for Multishot {
    fn name(&self) -> &'static str {
        "uring-multishot"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            io_uring: true,
            ..Capabilities::SOCKET
        }
    }
    fn slot_overhead(&self) -> usize {
        HEADER_SPACE
    }
    fn validate(&self, cfg: &EngineConfig) -> Result<(), Error> {
        if cfg.slots > 32_768 - 1024 {
            return Err(Error::config(format!(
                "uring-multishot takes at most {} slots (16-bit buffer IDs in a ring of 32768)",
                32_768 - 1024
            )));
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
        let (socket, end) = super::single(sockets, ends);
        let overflow = cfg.uring_overflow_buffers.unwrap_or(match cfg.overload {
            // Pausing: the ring runs dry and the kernel's queue absorbs.
            Overload::Pause => 0,
            Overload::Discard => cfg.batch,
        });
        let total = cfg.slots + overflow;
        let entries = total.next_power_of_two().clamp(2, 32_768) as u16;
        if total > entries as usize {
            return Err(Error::config(format!(
                "{} slots + {overflow} overflow buffers exceed the 32768-entry buffer ring",
                cfg.slots
            )));
        }
        let unsupported = |reason: String| Error::Unsupported {
            backend: cfg.backend,
            reason,
        };
        let ring = IoUring::builder()
            .setup_cqsize(8192)
            .build(64)
            .map_err(|e| unsupported(format!("io_uring_setup: {e}")))?;
        let mut probe = Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(|e| unsupported(format!("io_uring probe: {e}")))?;
        if !probe.is_supported(opcode::RecvMsg::CODE) {
            return Err(unsupported("IORING_OP_RECVMSG missing".into()));
        }
        let bufs =
            BufRing::new(entries).map_err(|e| unsupported(format!("buffer ring memory: {e}")))?;
        // SAFETY: the ring memory stays mapped until after it is unregistered, or for the
        // rest of the process when a cancel does not complete (see `Multishot::run`).
        // Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(bufs.base as u64, entries, BGID, 0)
                .map_err(|e| {
                    unsupported(format!("provided-buffer ring (needs Linux >= 5.19): {e}"))
                })?;
        }
        let stop_handle = socket.try_clone().map_err(Error::Spawn)?;
        let batch = cfg.batch;
        let worker_cfg = cfg.clone();
        let handle = spawn_receive_thread(0, &cfg.threads, move || {
            let worker = Worker::new(0, shared, end, &worker_cfg, 1);
            let rx = Receiver::new(worker, ring, bufs, batch, overflow, socket);
            if let Err(e) = rx.run() {
                tracing::error!(error = %e, "uring-multishot receive thread failed");
            }
        })?;
        let mut started = Started::new();
        started.threads.push(handle);
        started.stoppers.push(Box::new(move || {
            #[cfg(test)]
            if stop_handle
                .local_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .is_some_and(|a| a.port() == NEVER_CANCEL_PORT.load(Ordering::Relaxed))
            {
                return;
            }
            sys::shutdown_read(stop_handle.as_fd())
        }));
        Ok(started)
    }
}

/// What the kernel may write while a request is armed or the buffer ring registered: freed
/// only once it let go ([`Receiver::released`]), else kept for good.
struct Lent {
    ring: IoUring,
    bufs: BufRing,
    /// Overflow buffers.
    scratch: OverflowArea,
    msghdr: Box<libc::msghdr>,
}

struct Receiver {
    worker: Worker,
    lent: ManuallyDrop<Lent>,
    /// The kernel let go of `lent` and of the slots: no request armed, the buffer ring
    /// unregistered.
    released: bool,
    socket: Socket,
    /// The socket's port (the panic hook's key).
    port: u16,
    /// Overflow buffers not in the ring.
    scratch_free: Vec<u16>,
    slot_len: usize,
    slots: usize,
    /// Buffers (slots + overflow) currently in the ring.
    in_ring: usize,
    batch: usize,
    armed: bool,
    arms: u64,
    cqes: Vec<(i32, u32, u64)>,
    /// When the deferred consumer wake-up is due.
    wake_by: Option<u64>,
    /// The error that ended the loop, if one did.
    failed: Option<io::Error>,
}

impl Receiver {
    fn new(
        worker: Worker,
        ring: IoUring,
        bufs: BufRing,
        batch: usize,
        overflow: usize,
        socket: Socket,
    ) -> Self {
        let slot_len = worker.pool().slot_size();
        let slots = worker.pool().slots();
        // SAFETY: all-zero is a valid msghdr; only the lengths matter to the kernel here.
        // Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
        // Kernel writes (freed memory poisoned and watched):
        // `uring_multishot_engine_stops_under_traffic_without_a_write_after_free`.
        let mut msghdr: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msghdr.msg_namelen = NAME_LEN as libc::socklen_t;
        msghdr.msg_controllen = sys::CONTROL_SPACE as _;
        let port = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .map_or(0, |a| a.port());
        Self {
            worker,
            lent: ManuallyDrop::new(Lent {
                ring,
                bufs,
                scratch: OverflowArea::new(overflow * slot_len),
                msghdr,
            }),
            released: false,
            socket,
            port,
            scratch_free: (0..overflow as u16).rev().collect(),
            slot_len,
            slots,
            in_ring: 0,
            batch,
            armed: false,
            arms: 0,
            cqes: Vec::with_capacity(8192),
            wake_by: None,
            failed: None,
        }
    }

    fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    fn buffer(&mut self, bid: u16) -> *mut u8 {
        if (bid as usize) < self.slots {
            self.worker.pool().buf_ptr(u32::from(bid))
        } else {
            self.lent
                .scratch
                .buffer(bid as usize - self.slots, self.slot_len)
        }
    }

    fn give(&mut self, bid: u16) {
        let ptr = self.buffer(bid);
        self.lent.bufs.push(ptr, self.slot_len, bid);
        self.in_ring += 1;
        if (bid as usize) < self.slots {
            self.worker.lent += 1;
        }
    }

    /// Puts slots the consumer returned (as many as the latency budget lets it hold more of;
    /// and overflow buffers if slots ran out and the policy is to discard) in the ring.
    fn refill(&mut self) {
        let mut slots_in = 0;
        while self.worker.room() > 0
            && let Some(i) = self.worker.take_free()
        {
            self.give(i as u16);
            slots_in += 1;
        }
        if slots_in == 0 && self.in_ring < self.batch {
            while let Some(k) = self.scratch_free.pop() {
                self.give(self.slots as u16 + k);
            }
        }
        self.lent.bufs.publish();
    }

    fn arm(&mut self) {
        let entry = opcode::RecvMsgMulti::new(types::Fd(self.fd()), &*self.lent.msghdr, BGID)
            .build()
            .user_data(RECV);
        // SAFETY: the msghdr template and the buffer ring outlive the request: `run` does not
        // let them go while a request may be armed.
        // Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
        let pushed = unsafe { self.lent.ring.submission().push(&entry) };
        if pushed.is_ok() {
            self.armed = true;
            self.arms += 1;
            self.worker.counts.recv_calls += 1;
            if self.arms > 1 {
                self.worker.counts.rearms += 1;
            }
        }
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let ts = Timespec::from(timeout);
        let args = SubmitArgs::new().timespec(&ts);
        match self.lent.ring.submitter().submit_with_args(1, &args) {
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

    fn handle(&mut self, res: i32, flags: u32, at: Clocks) -> bool {
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
        if (bid as usize) < self.slots {
            self.worker.lent -= 1;
        }
        let ptr = self.buffer(bid);
        let filled = res.max(0) as usize;
        // SAFETY: the kernel wrote `res` bytes into buffer `bid`, which it handed back to us.
        // Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
        // Kernel writes (freed memory poisoned and watched):
        // `uring_multishot_engine_stops_under_traffic_without_a_write_after_free`.
        let buf = unsafe { std::slice::from_raw_parts(ptr, filled.min(self.slot_len)) };
        let parsed = RecvMsgOut::parse(buf, &self.lent.msghdr).ok().map(|out| {
            let mut meta = RecvMeta {
                len: out.payload_data().len(),
                truncated: out.is_payload_truncated(),
                source: sys::sockaddr_from_bytes(out.name_data()),
                control_malformed: out.is_control_data_truncated(),
                ..RecvMeta::default()
            };
            // The control area sits at an offset that is not 8-byte aligned unless the slot
            // size is: the parser reads plain bytes, never a `cmsghdr` reference.
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
            if !self.worker.complete_at(u32::from(bid), offset, &meta, at) {
                self.give(bid);
            }
        } else {
            self.worker.overflowed(&meta);
            self.scratch_free.push(bid - self.slots as u16);
        }
        false
    }

    fn cancel_and_wait(&mut self) {
        let never = {
            #[cfg(test)]
            {
                self.socket
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_socket())
                    .is_some_and(|a| a.port() == NEVER_CANCEL_PORT.load(Ordering::Relaxed))
            }
            #[cfg(not(test))]
            false
        };
        if never {
            return;
        }
        let cancel = opcode::AsyncCancel::new(RECV).build().user_data(CANCEL);
        // SAFETY: a cancel entry references no memory.
        // Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
        let _ = unsafe { self.lent.ring.submission().push(&cancel) };
        let start = std::time::Instant::now();
        while self.armed && start.elapsed() < CANCEL_WAIT {
            let _ = self.wait(Duration::from_millis(10));
            self.collect();
            let at = Clocks::now();
            for k in 0..self.cqes.len() {
                let (res, flags, ud) = self.cqes[k];
                if ud == RECV {
                    self.handle(res, flags, at);
                }
            }
        }
    }

    /// The thread: the engine's one receive loop over this ring, then (never freeing memory
    /// the kernel may still write) the ring's own end.
    fn run(mut self) -> io::Result<()> {
        run_loop(&mut self);
        let result = self.failed.take().map_or(Ok(()), Err);
        if self.armed {
            tracing::error!(
                "multishot receive could not be cancelled within {CANCEL_WAIT:?}; its io_uring, \
                 buffer ring and slot pool are kept alive (leaked) for the rest of the process"
            );
            self.worker.counts.leaked_rings += 1;
            self.worker.wake(sys::monotonic_ns());
            // `Drop` keeps what is lent.
            return result;
        }
        if self.lent.ring.submitter().unregister_buf_ring(BGID).is_ok() {
            self.released = true;
        } else {
            self.worker.counts.leaked_rings += 1;
        }
        result
    }

    fn collect(&mut self) {
        self.cqes.clear();
        for cqe in self.lent.ring.completion() {
            self.cqes.push((cqe.result(), cqe.flags(), cqe.user_data()));
        }
    }
}

impl Drop for Receiver {
    /// Frees what was lent only once the kernel let go of it ([`Receiver::run`] says so);
    /// otherwise — a panic on the thread, a request that would not end — keeps it, and the
    /// slot pool, for the rest of the process.
    fn drop(&mut self) {
        if self.released {
            // SAFETY: dropped once, here; nothing uses `lent` after this.
            // Checked by: `uring_multishot_engine_stops_under_traffic_without_a_write_after_free`.
            unsafe { ManuallyDrop::drop(&mut self.lent) };
        } else {
            // SAFETY: taken once, here, to be kept; nothing uses `lent` after this.
            // Checked by: `a_panic_in_a_multishot_receive_keeps_the_lent_memory`.
            let lent = unsafe { ManuallyDrop::take(&mut self.lent) };
            lent::keep_for_good((lent, self.worker.pool_arc()), "uring-multishot receive");
        }
    }
}

/// The multishot receive as a side of the engine's one receive loop: a pass re-arms the
/// request when buffers are back, waits for completions (or the deferred wake-up's deadline)
/// and hands what completed to the worker. Once stopping, a pass waits at most [`DRY_WAIT`]:
/// the `shutdown(SHUT_RD)` completion, or no completion at all, ends the drain.
impl ReceiveSide for Receiver {
    fn stopping(&self) -> bool {
        self.worker.stopping()
    }

    fn pass(&mut self, stopping: bool) -> Pass {
        self.refill();
        if stopping && !self.armed {
            // Dry (the consumer holds every slot): what the socket still holds is read by
            // `discard_pass`.
            return if self.in_ring == 0 {
                Pass::NoRoom
            } else {
                Pass::Drained
            };
        }
        if !self.armed && self.in_ring > 0 && !stopping {
            self.arm();
        }
        if self.armed && lent::receive_panic_due(self.port) {
            // Tests: a panic with the request armed.
            let _ = self.lent.ring.submit();
            panic!("injected panic in a uring-multishot receive (tests)");
        }
        let mut wait = if self.armed && !stopping {
            ARMED_WAIT
        } else {
            DRY_WAIT
        };
        if let Some(d) = self.wake_by {
            wait = wait.min(Duration::from_nanos(d.saturating_sub(sys::monotonic_ns())));
        }
        if !self.armed && self.in_ring == 0 {
            // Dry: the consumer holds what the budget allows. Wake it for what is ready.
            self.worker.wake(sys::monotonic_ns());
            self.wake_by = None;
        }
        if let Err(e) = self.wait(wait) {
            self.failed = Some(e);
            return Pass::Drained;
        }
        self.collect();
        if self.cqes.is_empty() {
            let now = sys::monotonic_ns();
            if self.wake_by.is_some_and(|d| now >= d) {
                self.worker.wake(now);
                self.wake_by = None;
            }
            // Idle, or dry and waiting for slots: the kernel may be dropping meanwhile.
            self.worker.refresh_kernel_drops();
            return if stopping { Pass::Drained } else { Pass::Idle };
        }
        let at = Clocks::now();
        let mut ended = false;
        for k in 0..self.cqes.len() {
            let (res, flags, ud) = self.cqes[k];
            if ud == RECV && self.handle(res, flags, at) && self.worker.stopping() {
                ended = true;
            }
        }
        self.wake_by = self.worker.publish(at.monotonic_ns);
        if ended {
            Pass::Drained
        } else {
            Pass::Took { more: true }
        }
    }

    fn wait_for_room(&mut self) {
        self.worker.wait_for_room();
    }

    /// Never frees memory with a request armed: cancels it and waits (bounded) for the
    /// cancel, handing over what completes meanwhile.
    fn finish(&mut self) {
        if self.armed {
            self.cancel_and_wait();
        }
        self.worker.wake(sys::monotonic_ns());
        self.worker.refresh_kernel_drops();
    }

    /// With no request armed, the socket is read directly, one datagram a call into an
    /// overflow buffer (the worker's), and the datagrams counted as `overflow`.
    fn discard_pass(&mut self) -> Pass {
        if self.armed {
            return Pass::Drained;
        }
        self.worker.discard_from_now();
        let mut msgs = sys::RecvBatch::new(self.batch);
        let w = &mut self.worker;
        let pass = match super::super::receive::recv_batch(
            w,
            &mut msgs,
            &self.socket,
            self.batch,
            sys::Wait::No,
        ) {
            Ok(Some(n)) if !w.shut_down => Pass::Took {
                more: n == self.batch,
            },
            Ok(_) | Err(_) => Pass::Drained,
        };
        w.publish(sys::monotonic_ns());
        pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, Engine, EngineConfig};

    /// A cancel that never completes must not free what the kernel may still write into: the
    /// pool stays alive after the engine is gone, and the leak is counted.
    #[test]
    fn an_uncancelled_receive_keeps_its_memory_alive() {
        let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.backend = Backend::UringMultishot;
        cfg.slots = 64;
        cfg.batch = 8;
        cfg.reorder_window = 8;
        let engine = Engine::start(cfg).unwrap();
        let port = engine.local_addr().port();
        NEVER_CANCEL_PORT.store(port, Ordering::Relaxed);
        let pool = engine.pool_for_tests(0);
        // The receive must be armed before the stop.
        let start = std::time::Instant::now();
        while engine.stats().recv_calls == 0 && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let handle = engine.stats_handle();
        let stats = engine.shutdown();
        NEVER_CANCEL_PORT.store(0, Ordering::Relaxed);
        assert_eq!(stats.leaked_rings, 1, "{stats}");
        assert!(
            pool.upgrade().is_some(),
            "the slot pool was freed under an armed receive"
        );
        drop(handle);
    }
}
