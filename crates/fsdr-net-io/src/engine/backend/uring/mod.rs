//! The `uring` backend: io_uring through tokio-uring on a dedicated thread running a
//! tokio-uring runtime. `uring_depth` receive operations are in flight at all times, each
//! receiving straight into a free slot, so the kernel always has posted receives.
//!
//! tokio-uring's `recv_from` reports neither `MSG_TRUNC` nor control messages. Slots are
//! therefore one byte larger than the largest accepted datagram (a datagram that fills that
//! byte was truncated), kernel drops are read with `SO_MEMINFO`, and arrival times come from
//! CLOCK_MONOTONIC. Its fixed-buffer receive (`read_fixed`) would not report the sender, which
//! the allow-list needs, so it is not used.
//!
//! # Memory lent to the kernel
//!
//! A receive operation owns its buffer ([`OpBuf`]: a slot, or its task's overflow buffer)
//! and tokio-uring's `msghdr` and source address, which the kernel writes when it completes
//! the receive. tokio-uring frees an operation's data after its completion — except when its
//! runtime is dropped with operations in flight: its driver then frees their data first and
//! cancels them after. So no receive is ever dropped in flight, and the runtime is dropped
//! only once every operation has completed:
//!
//! - Stopping: the engine's stop flag is set and a notifier wakes the stopper task, which
//!   cancels every operation on the socket (`IORING_OP_ASYNC_CANCEL` by descriptor, all of
//!   them) until every lent buffer is back ([`Lent`] counts them: one per operation, back
//!   when tokio-uring hands the operation's data back after its completion). The receive
//!   tasks see their receive end (a datagram, or `ECANCELED`) and return. What is queued is
//!   then taken with the drain every socket backend shares (`engine/receive.rs`). No datagram
//!   is needed to wake it, so a socket bound to a multicast group or joined to one source
//!   stops as fast as any. (`shutdown(SHUT_RD)` cannot be used: tokio-uring unwraps the
//!   sender's address of every completion, and the end-of-file completion it causes has none.)
//! - Any other end — a panic in a receive task or on the thread, a cancel that does not end
//!   within [`CANCEL_WAIT`] — keeps the runtime, and with it every operation's memory, for the
//!   rest of the process ([`crate::lent::keep_for_good`], counted in `leaked_rings`).
//!
//! `tests/kernel_writes.rs` checks both: stops under traffic and an injected panic, with freed
//! memory poisoned and watched for writes.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::mem::ManuallyDrop;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::super::meta::Clocks;
use super::super::receive::drain_socket;
use super::super::slots::ReceiverEnd;
use super::super::worker::{Worker, spawn_receive_thread};
use super::super::{EngineConfig, Shared};
use super::{Capabilities, ReceiveBackend, Started};
use crate::Error;
use crate::lent;
use crate::sys::RecvMeta;

mod ops;
use ops::{Lent, OpBuf, Target, cancel_all};

/// How often a paused receive looks whether the consumer made room.
const PAUSE_CHECK: Duration = Duration::from_micros(250);
/// How long the stopper cancels and waits for the receives to end before it keeps their
/// memory for good.
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// See the [module documentation](self).
pub(crate) struct Uring;

impl ReceiveBackend for Uring {
    fn name(&self) -> &'static str {
        "uring"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            kernel_timestamps: false,
            gro: false,
            io_uring: true,
            multi_thread: false,
            loopback: true,
        }
    }
    fn slot_overhead(&self) -> usize {
        // One spare byte tells a truncated datagram from one that fills the slot.
        1
    }
    fn validate(&self, cfg: &EngineConfig) -> Result<(), Error> {
        if !(1..=4096).contains(&cfg.uring_depth) {
            return Err(Error::config(format!(
                "uring depth {} outside 1..=4096",
                cfg.uring_depth
            )));
        }
        if cfg.socket.timestamps {
            return Err(Error::Unsupported {
                backend: cfg.backend,
                reason: "tokio-uring's recv_from returns no control messages, so no kernel \
                         timestamps: use mio, recvmmsg or uring-multishot"
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
        let (socket, end) = super::single(sockets, ends);
        // io_uring honours O_NONBLOCK: on a non-blocking socket a receive with no datagram
        // queued completes at once with EAGAIN instead of waiting, and every operation spins
        // (found by `cargo xtask loss`: under load the receive thread spent its time failing
        // and logging). On a blocking socket the kernel arms a poll and completes the receive
        // when data comes; the thread itself never blocks in it.
        socket.set_nonblocking(false).map_err(Error::Spawn)?;
        let drain_socket_fd = socket.try_clone().map_err(Error::Spawn)?;
        let port = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .map_or(0, |a| a.port());
        let stop = Arc::new(tokio::sync::Notify::new());
        let depth = cfg.uring_depth;
        let batch = cfg.batch;
        let builder = {
            let mut b = tokio_uring::builder();
            b.entries((depth * 2).next_power_of_two() as u32);
            b
        };
        // Fail here, not in the thread, when io_uring is unavailable.
        drop(
            tokio_uring::Runtime::new(&builder).map_err(|e| Error::Unsupported {
                backend: cfg.backend,
                reason: format!("tokio-uring runtime: {e}"),
            })?,
        );
        let worker_cfg = cfg.clone();
        let task_stop = stop.clone();
        let handle = spawn_receive_thread(0, &cfg.threads, move || {
            let worker = Worker::new(0, shared, end, &worker_cfg, 1);
            let rt = match tokio_uring::Runtime::new(&builder) {
                // Dropped only once no operation is in flight: an unwind out of `block_on`
                // (a panic on this thread) keeps it, with every operation's memory.
                Ok(rt) => ManuallyDrop::new(rt),
                Err(e) => return tracing::error!(error = %e, "tokio-uring runtime failed"),
            };
            let lent = Lent::default();
            let ring = RingEnd {
                socket: socket.into(),
                depth,
                stop: task_stop,
                lent: lent.clone(),
                port,
            };
            match rt.block_on(ring.run(worker)) {
                Ended::Clean(worker) => {
                    // The queue is still taken (the one stop rule), then the consumer is
                    // woken and the counters published.
                    drain_socket(worker, drain_socket_fd, batch);
                    debug_assert_eq!(lent.out(), 0);
                    drop(ManuallyDrop::into_inner(rt));
                }
                Ended::Kept { mut worker, panic } => {
                    worker.counts.leaked_rings += 1;
                    drain_socket(worker, drain_socket_fd, batch);
                    lent::keep_for_good(rt, "uring receive");
                    if let Some(p) = panic {
                        std::panic::resume_unwind(p);
                    }
                }
            }
        })?;
        let mut started = Started::new();
        started.threads.push(handle);
        // The stop flag is set before the stoppers run: a stopper task that checks it after
        // this has registered for the notification first, so none waits on.
        started
            .stoppers
            .push(Box::new(move || stop.notify_waiters()));
        Ok(started)
    }
}

/// How the receive tasks ended.
enum Ended {
    /// Every operation completed: the runtime may be dropped.
    Clean(Worker),
    /// Operations may still be in flight (a task panicked, or the cancel did not end them):
    /// the runtime must be kept.
    Kept {
        worker: Worker,
        panic: Option<Box<dyn std::any::Any + Send>>,
    },
}

/// What the receive tasks share.
struct RingEnd {
    socket: UdpSocket,
    depth: usize,
    stop: Arc<tokio::sync::Notify>,
    lent: Lent,
    /// The socket's port (the panic hook's key).
    port: u16,
}

/// Set when a receive task unwinds: the other tasks end, and the stopper cancels.
#[derive(Clone, Default)]
struct Failed(Rc<Cell<bool>>, Rc<tokio::sync::Notify>);

/// Marks [`Failed`] when dropped while its task unwinds.
struct OnUnwind(Failed);

impl Drop for OnUnwind {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.0.set(true);
            self.0.1.notify_one();
        }
    }
}

impl RingEnd {
    async fn run(self, worker: Worker) -> Ended {
        let fd = self.socket.as_raw_fd();
        let socket = Rc::new(tokio_uring::net::UdpSocket::from_std(self.socket));
        let worker = Rc::new(RefCell::new(worker));
        let failed = Failed::default();
        let slots = Slots::default();
        let ended = Rc::new(Cell::new(false));
        let ticker = tokio_uring::spawn(slots.clone().tick(worker.clone(), ended.clone()));
        let slot_len = worker.borrow().pool().slot_size();
        let tasks: Vec<_> = (0..self.depth)
            .map(|_| {
                tokio_uring::spawn(receive(Task {
                    socket: socket.clone(),
                    slots: slots.clone(),
                    worker: worker.clone(),
                    slot_len,
                    lent: self.lent.clone(),
                    failed: failed.clone(),
                    port: self.port,
                }))
            })
            .collect();
        let all_back = stop_receives(fd, &self.stop, &worker, &failed, &self.lent).await;
        // Tasks waiting for a slot see the stop.
        slots.all();
        let mut panic = None;
        for t in tasks {
            if let Err(e) = t.await
                && e.is_panic()
            {
                panic.get_or_insert(e.into_panic());
            }
        }
        ended.set(true);
        let _ = ticker.await;
        drop(socket);
        let worker = match Rc::try_unwrap(worker) {
            Ok(w) => w.into_inner(),
            Err(_) => unreachable!("every task has ended"),
        };
        if all_back && panic.is_none() && self.lent.out() == 0 {
            Ended::Clean(worker)
        } else {
            Ended::Kept { worker, panic }
        }
    }
}

/// Waits for the engine's stop (or a task's panic), then cancels every operation on the
/// socket until each lent buffer is back; false when they did not come back within
/// [`CANCEL_WAIT`].
async fn stop_receives(
    fd: RawFd,
    stop: &tokio::sync::Notify,
    worker: &RefCell<Worker>,
    failed: &Failed,
    lent: &Lent,
) -> bool {
    loop {
        // Registered before the flags are read: a stop after the read still wakes this task.
        let mut stopped = pin!(stop.notified());
        stopped.as_mut().enable();
        let mut failing = pin!(failed.1.notified());
        failing.as_mut().enable();
        if worker.borrow().stopping() || failed.0.get() {
            break;
        }
        std::future::poll_fn(|cx| {
            if stopped.as_mut().poll(cx).is_ready() || failing.as_mut().poll(cx).is_ready() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
    let deadline = Instant::now() + CANCEL_WAIT;
    while lent.out() > 0 {
        if Instant::now() > deadline {
            tracing::error!(
                in_flight = lent.out(),
                "io_uring receives not ended by their cancel within {CANCEL_WAIT:?}"
            );
            return false;
        }
        if let Err(e) = cancel_all(fd).await {
            tracing::error!(error = %e, "io_uring cancel failed");
            return false;
        }
        // The receive tasks take their completions and hand their buffers back.
        for _ in 0..64 {
            if lent.out() == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        if lent.out() > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    true
}

/// One receive task's share.
struct Task {
    socket: Rc<tokio_uring::net::UdpSocket>,
    slots: Slots,
    worker: Rc<RefCell<Worker>>,
    slot_len: usize,
    lent: Lent,
    failed: Failed,
    port: u16,
}

/// One operation's loop: receive into a free slot (or, when the consumer holds every slot
/// the budget allows and the policy discards, its overflow buffer), hand it over, repeat
/// until the engine stops. A receive is never dropped in flight: the stopper's cancel ends
/// it. A task with no slot to receive into — every free slot in other tasks' receives, or the
/// consumer behind and the policy to pause — waits for [`Slots`] instead of submitting.
async fn receive(t: Task) {
    let _unwind = OnUnwind(t.failed.clone());
    let worker = &t.worker;
    let mut overflow = Some(vec![0x5au8; t.slot_len].into_boxed_slice());
    let mut completions = 0u64;
    loop {
        if worker.borrow().stopping() || t.failed.0.get() {
            return;
        }
        let slot = {
            let mut w = worker.borrow_mut();
            if w.fill_stash(1) == 1 {
                w.stash.pop()
            } else {
                None
            }
        };
        let discard = slot.is_none() && {
            let w = worker.borrow();
            w.consumer_behind() && !w.pauses()
        };
        if slot.is_none() && !discard {
            if worker.borrow().consumer_behind() {
                // The consumer is behind: submit nothing; the kernel's queue absorbs.
                worker.borrow_mut().note_paused();
            }
            t.slots.wait().await;
            continue;
        }
        let buf = match (slot, overflow.take()) {
            (Some(s), spare) => {
                overflow = spare;
                worker.borrow_mut().lent += 1;
                OpBuf::slot(worker.borrow().pool_arc(), s, &t.lent)
            }
            (None, Some(o)) => OpBuf::overflow(o, &t.lent),
            (None, None) => unreachable!("the overflow buffer comes back with every receive"),
        };
        worker.borrow_mut().counts.recv_calls += 1;
        let mut op = pin!(t.socket.recv_from(buf));
        if lent::receive_panic_due(t.port) {
            // Tests: a panic with this receive in flight (submitted by the first poll).
            std::future::poll_fn(|cx| {
                let _ = op.as_mut().poll(cx);
                Poll::Ready(())
            })
            .await;
            panic!("injected panic in a uring receive task (tests)");
        }
        let (res, buf) = op.await;
        if let Target::Overflow(b) = buf.target {
            overflow = Some(b);
        }
        let now = Clocks::now();
        let mut w = worker.borrow_mut();
        if slot.is_some() {
            w.lent -= 1;
        }
        match res {
            Ok((n, source)) => {
                let meta = RecvMeta {
                    len: n.min(t.slot_len - 1),
                    truncated: n >= t.slot_len,
                    source: Some(source),
                    ..RecvMeta::default()
                };
                match slot {
                    Some(s) => {
                        if !w.complete(s, &meta, now) {
                            w.stash.push(s);
                            t.slots.freed();
                        }
                    }
                    None => w.overflowed(&meta),
                }
                // No timer drives this thread's wake-ups: every completion wakes the consumer
                // (coalescing by the notifier's own flag).
                w.wake(now.monotonic_ns);
                completions += 1;
                if completions.is_multiple_of(4096) {
                    w.refresh_kernel_drops();
                }
            }
            Err(e) => {
                if let Some(s) = slot {
                    w.stash.push(s);
                    t.slots.freed();
                }
                if w.stopping() || t.failed.0.get() {
                    return;
                }
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    // Not expected on a blocking socket; retried, and logged only at debug
                    // level so that a burst of them cannot stall the thread on its log.
                    tracing::debug!("io_uring recv_from: EAGAIN");
                } else {
                    tracing::warn!(error = %e, "io_uring recv_from failed");
                }
            }
        }
    }
}

/// Where the tasks without a slot wait: woken when a task puts a slot back, and every
/// [`PAUSE_CHECK`] by one ticker (the consumer returns slots from another thread, unseen
/// here), and at the end. One timer for all of them: hundreds of tasks each on its own timer
/// kept the runtime from parking, and tokio-uring submits only when it parks.
#[derive(Clone, Default)]
struct Slots(Rc<tokio::sync::Notify>);

impl Slots {
    async fn wait(&self) {
        self.0.notified().await;
    }

    fn freed(&self) {
        self.0.notify_one();
    }

    fn all(&self) {
        self.0.notify_waiters();
    }

    /// The ticker: each [`PAUSE_CHECK`] until `done`, wakes as many waiting tasks as there
    /// are slots to receive into (or all of them, to receive into their overflow buffers,
    /// when the consumer is behind and the policy discards).
    async fn tick(self, worker: Rc<RefCell<Worker>>, done: Rc<Cell<bool>>) {
        while !done.get() {
            tokio::time::sleep(PAUSE_CHECK).await;
            let (room, discard) = {
                let mut w = worker.borrow_mut();
                let all = w.pool().slots();
                let room = w.fill_stash(all);
                (room, room == 0 && w.consumer_behind() && !w.pauses())
            };
            if discard {
                self.all();
            } else {
                for _ in 0..room {
                    self.freed();
                }
            }
        }
    }
}
