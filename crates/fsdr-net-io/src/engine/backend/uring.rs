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
//! Stopping: the engine's stop flag is set and a notifier wakes every operation's task, which
//! drops its receive in flight; what is queued is then taken with the drain every socket
//! backend shares (`engine/receive.rs`). No datagram is needed to wake it, so a socket bound
//! to a multicast group or joined to one source stops as fast as any. (`shutdown(SHUT_RD)`
//! cannot be used here: tokio-uring unwraps the sender's address of every completion, and
//! the end-of-file completion it causes has none.) A dropped receive is cancelled by
//! tokio-uring's driver, which keeps the operation's buffer until the kernel completes it:
//! every buffer an operation receives into is owned by the operation ([`OpBuf`]), so the
//! kernel never writes into memory that was freed.

use std::cell::RefCell;
use std::future::Future;
use std::net::UdpSocket;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

use socket2::Socket;
use tokio_uring::buf::{IoBuf, IoBufMut};

use super::super::meta::Clocks;
use super::super::receive::drain_socket;
use super::super::slots::{ReceiverEnd, SlotPool};
use super::super::worker::{Worker, spawn_receive_thread};
use super::super::{EngineConfig, Shared};
use super::{Capabilities, ReceiveBackend, Started};
use crate::Error;
use crate::sys::RecvMeta;

/// Where one receive operation's bytes go, owned by the operation for as long as
/// tokio-uring holds it (after a cancellation, until the kernel completes it).
enum Target {
    /// A slot of the pool: the `Arc` keeps the pool's memory alive.
    Slot { _pool: Arc<SlotPool> },
    /// The task's overflow buffer.
    Overflow(Box<[u8]>),
}

/// A buffer lent to one receive operation.
struct OpBuf {
    target: Target,
    ptr: *mut u8,
    cap: usize,
    init: usize,
}

impl OpBuf {
    fn slot(pool: Arc<SlotPool>, slot: u32) -> Self {
        let (ptr, cap) = (pool.buf_ptr(slot), pool.slot_size());
        OpBuf {
            target: Target::Slot { _pool: pool },
            ptr,
            cap,
            init: 0,
        }
    }

    fn overflow(mut b: Box<[u8]>) -> Self {
        let (ptr, cap) = (b.as_mut_ptr(), b.len());
        OpBuf {
            target: Target::Overflow(b),
            ptr,
            cap,
            init: 0,
        }
    }
}

// SAFETY: `ptr` points at `cap` bytes owned through `target` (a slot of a pool this buffer
// holds an `Arc` of, which the receive thread took from the free ring and nobody else touches
// until it is handed over; or a boxed overflow buffer): they stay valid and in place for as
// long as the buffer lives, wherever tokio-uring moves it. Miri cannot run io_uring; the
// ownership is what `tests/lifecycle.rs` (stop with operations in flight) exercises.
// Checked by: `uring_accounts_for_every_datagram` and `start_stop_200_times_leaves_nothing_behind`
// under ASan.
unsafe impl IoBuf for OpBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.ptr
    }
    fn bytes_init(&self) -> usize {
        self.init
    }
    fn bytes_total(&self) -> usize {
        self.cap
    }
}

// SAFETY: as for `IoBuf`; `set_init` only records how much the kernel wrote.
// Checked by: `uring_accounts_for_every_datagram` and `start_stop_200_times_leaves_nothing_behind`
// under ASan.
unsafe impl IoBufMut for OpBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
    unsafe fn set_init(&mut self, pos: usize) {
        self.init = self.init.max(pos);
    }
}

/// The first of two futures to complete.
enum First<A, B> {
    A(A),
    B(B),
}

async fn first<A: Future, B: Future>(a: A, b: B) -> First<A::Output, B::Output> {
    let (mut a, mut b) = (pin!(a), pin!(b));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(x) = a.as_mut().poll(cx) {
            return Poll::Ready(First::A(x));
        }
        if let Poll::Ready(y) = b.as_mut().poll(cx) {
            return Poll::Ready(First::B(y));
        }
        Poll::Pending
    })
    .await
}

/// How often a paused receive looks whether the consumer made room.
const PAUSE_CHECK: std::time::Duration = std::time::Duration::from_micros(250);

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
            match tokio_uring::Runtime::new(&builder) {
                Ok(rt) => {
                    let worker = rt.block_on(run(worker, socket.into(), depth, task_stop));
                    // The operations are dropped; the queue is still taken (the one stop
                    // rule), then the consumer is woken and the counters published.
                    drain_socket(worker, drain_socket_fd, batch);
                    // The runtime's driver cancels what is in flight and waits for the
                    // kernel before the thread ends (the buffers are the operations' own).
                    drop(rt);
                }
                Err(e) => tracing::error!(error = %e, "tokio-uring runtime failed"),
            }
        })?;
        let mut started = Started::new();
        started.threads.push(handle);
        // The stop flag is set before the stoppers run: a task that checks it after this
        // has registered for the notification first, so none waits on.
        started
            .stoppers
            .push(Box::new(move || stop.notify_waiters()));
        Ok(started)
    }
}

async fn run(
    worker: Worker,
    socket: UdpSocket,
    depth: usize,
    stop: Arc<tokio::sync::Notify>,
) -> Worker {
    let socket = Rc::new(tokio_uring::net::UdpSocket::from_std(socket));
    let worker = Rc::new(RefCell::new(worker));
    let slot_len = worker.borrow().pool().slot_size();
    let tasks: Vec<_> = (0..depth)
        .map(|_| {
            let socket = socket.clone();
            let worker = worker.clone();
            tokio_uring::spawn(receive(socket, worker, slot_len, stop.clone()))
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    drop(socket);
    match Rc::try_unwrap(worker) {
        Ok(w) => w.into_inner(),
        Err(_) => unreachable!("every task has ended"),
    }
}

/// One operation's loop: receive into a free slot (or its overflow buffer), hand it over,
/// repeat until the engine stops.
async fn receive(
    socket: Rc<tokio_uring::net::UdpSocket>,
    worker: Rc<RefCell<Worker>>,
    slot_len: usize,
    stop: Arc<tokio::sync::Notify>,
) {
    let mut overflow = Some(vec![0x5au8; slot_len].into_boxed_slice());
    let mut completions = 0u64;
    loop {
        // Registered before the flag is read: a stop after the read still wakes this task.
        let mut stopped = pin!(stop.notified());
        stopped.as_mut().enable();
        if worker.borrow().stopping() {
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
        if slot.is_none() && worker.borrow().pauses() {
            // The consumer is behind: submit nothing; the kernel's queue absorbs meanwhile.
            worker.borrow_mut().note_paused();
            if let First::B(()) = first(tokio::time::sleep(PAUSE_CHECK), stopped).await {
                return;
            }
            continue;
        }
        let buf = match (slot, overflow.take()) {
            (Some(s), spare) => {
                overflow = spare;
                OpBuf::slot(worker.borrow().pool_arc(), s)
            }
            (None, Some(o)) => OpBuf::overflow(o),
            (None, None) => unreachable!("the overflow buffer comes back with every receive"),
        };
        worker.borrow_mut().counts.recv_calls += 1;
        let (res, buf) = match first(socket.recv_from(buf), stopped).await {
            First::A(done) => done,
            // Stopping: the receive is dropped (tokio-uring cancels it and keeps its buffer
            // until the kernel lets go of it; a slot in it is not handed back).
            First::B(()) => return,
        };
        if let Target::Overflow(b) = buf.target {
            overflow = Some(b);
        }
        let now = Clocks::now();
        let mut w = worker.borrow_mut();
        match res {
            Ok((n, source)) => {
                let meta = RecvMeta {
                    len: n.min(slot_len - 1),
                    truncated: n >= slot_len,
                    source: Some(source),
                    ..RecvMeta::default()
                };
                match slot {
                    Some(s) => {
                        if !w.complete(s, &meta, now) {
                            w.stash.push(s);
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
                }
                if w.stopping() {
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
