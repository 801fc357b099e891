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
//! The thread stops when the engine sends its socket one empty datagram per operation in
//! flight from a private wake-up socket (so that every operation completes and no buffer is
//! left with the kernel); those are recognised by their source and not counted.

use std::cell::RefCell;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::sync::Arc;

use socket2::Socket;
use tokio_uring::buf::{IoBuf, IoBufMut};

use super::super::datagram::Clocks;
use super::super::slots::ReceiverEnd;
use super::super::worker::{Worker, spawn_receive_thread};
use super::super::{EngineConfig, Shared};
use super::{Capabilities, ReceiveBackend, Started};
use crate::Error;
use crate::sys::RecvMeta;

/// A slot (or overflow buffer) lent to one receive operation.
struct SlotBuf {
    ptr: *mut u8,
    cap: usize,
    init: usize,
}

// SAFETY: `ptr` points at `cap` bytes that the receive thread owns (a slot taken from the free
// ring or a task's private overflow buffer) and that outlive the operation; the pointer is
// stable while the buffer moves in and out of the operation.
unsafe impl IoBuf for SlotBuf {
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
unsafe impl IoBufMut for SlotBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
    unsafe fn set_init(&mut self, pos: usize) {
        self.init = self.init.max(pos);
    }
}

/// How often a paused receive looks whether the consumer made room.
const PAUSE_CHECK: std::time::Duration = std::time::Duration::from_micros(250);

fn wake_target(local: SocketAddr) -> SocketAddr {
    let mut to = local;
    if local.ip().is_unspecified() {
        to.set_ip(match local {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    to
}

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
        let local = socket
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .ok_or_else(|| Error::Spawn(std::io::Error::other("socket has no address")))?;
        // io_uring honours O_NONBLOCK: on a non-blocking socket a receive with no datagram
        // queued completes at once with EAGAIN instead of waiting, and every operation spins
        // (found by `cargo xtask loss`: under load the receive thread spent its time failing
        // and logging). On a blocking socket the kernel arms a poll and completes the receive
        // when data comes; the thread itself never blocks in it.
        socket.set_nonblocking(false).map_err(Error::Spawn)?;
        let target = wake_target(local);
        let waker = UdpSocket::bind(match target {
            SocketAddr::V4(_) => SocketAddr::from(([127, 0, 0, 1], 0)),
            SocketAddr::V6(_) => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 0)),
        })
        .map_err(Error::Spawn)?;
        let wake_from = waker.local_addr().map_err(Error::Spawn)?;
        let depth = cfg.uring_depth;
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
        let handle = spawn_receive_thread(0, &cfg.threads, move || {
            let worker = Worker::new(0, shared, end, &worker_cfg, 1);
            match tokio_uring::Runtime::new(&builder) {
                Ok(rt) => rt.block_on(run(worker, socket.into(), depth, wake_from)),
                Err(e) => tracing::error!(error = %e, "tokio-uring runtime failed"),
            }
        })?;
        let mut started = Started::new();
        started.threads.push(handle);
        started.stoppers.push(Box::new(move || {
            for _ in 0..depth {
                let _ = waker.send_to(&[], target);
            }
        }));
        Ok(started)
    }
}

async fn run(worker: Worker, socket: UdpSocket, depth: usize, wake_from: SocketAddr) {
    let socket = Rc::new(tokio_uring::net::UdpSocket::from_std(socket));
    let worker = Rc::new(RefCell::new(worker));
    let slot_len = worker.borrow().pool().slot_size();
    let tasks: Vec<_> = (0..depth)
        .map(|_| {
            let socket = socket.clone();
            let worker = worker.clone();
            tokio_uring::spawn(receive(socket, worker, slot_len, wake_from))
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    let mut w = worker.borrow_mut();
    w.wake(Clocks::now().monotonic_ns);
    w.refresh_kernel_drops();
}

/// One operation's loop: receive into a free slot (or its overflow buffer), hand it over,
/// repeat until the engine stops.
async fn receive(
    socket: Rc<tokio_uring::net::UdpSocket>,
    worker: Rc<RefCell<Worker>>,
    slot_len: usize,
    wake_from: SocketAddr,
) {
    let mut overflow = vec![0x5au8; slot_len].into_boxed_slice();
    let mut completions = 0u64;
    loop {
        let slot = {
            let mut w = worker.borrow_mut();
            if w.fill_stash(1) == 1 {
                w.stash.pop()
            } else {
                None
            }
        };
        if slot.is_none() && worker.borrow().pauses() && !worker.borrow().stopping() {
            // The consumer is behind: submit nothing; the kernel's queue absorbs meanwhile.
            worker.borrow_mut().note_paused();
            tokio::time::sleep(PAUSE_CHECK).await;
            continue;
        }
        let ptr = match slot {
            Some(s) => worker.borrow().pool().buf_ptr(s),
            None => overflow.as_mut_ptr(),
        };
        let buf = SlotBuf {
            ptr,
            cap: slot_len,
            init: 0,
        };
        worker.borrow_mut().counts.recv_calls += 1;
        let (res, _) = socket.recv_from(buf).await;
        let now = Clocks::now();
        let mut w = worker.borrow_mut();
        match res {
            Ok((n, source)) => {
                if n == 0 && source == wake_from && w.stopping() {
                    if let Some(s) = slot {
                        w.stash.push(s);
                    }
                    return;
                }
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
                if w.stopping() {
                    // Whatever completes after the stop request ends this operation, so a
                    // wake-up that the kernel could not queue never leaves it waiting.
                    return;
                }
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
