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

use std::os::fd::AsFd;
use std::sync::Arc;

use socket2::Socket;

use super::super::meta::Clocks;
use super::super::receive::{Pass, ReceiveSide, recv_batch, run_loop};
use super::super::slots::ReceiverEnd;
use super::super::worker::{Worker, spawn_receive_thread};
use super::super::{EngineConfig, Shared};
use super::{Capabilities, ReceiveBackend, Started, single};
use crate::Error;
use crate::sys::{self, RecvBatch, RecvMeta, Wait};

mod frame;
mod rx;
pub(crate) use rx::XdpRx;

/// See the [module documentation](self).
pub(crate) struct Xdp;

/// Longest wait in one pass (then the statistics are read again).
const IDLE_WAIT_NS: u64 = 100_000_000;
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
        let rx = XdpRx::open(cfg, &socket)?;
        let stop_handle = socket.try_clone().map_err(Error::Spawn)?;
        let batch = cfg.batch;
        let worker_cfg = cfg.clone();
        let handle = spawn_receive_thread(0, &cfg.threads, move || {
            let worker = Worker::new(0, shared, end, &worker_cfg, batch);
            let port = socket
                .local_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .map_or(0, |a| a.port());
            let mut side = XdpSide {
                worker,
                msgs: RecvBatch::new(batch),
                port,
                socket,
                batch,
                wake_by: None,
                passes: 0,
                rx,
            };
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

/// The AF_XDP socket as a side of the engine's one receive loop.
struct XdpSide {
    worker: Worker,
    msgs: RecvBatch,
    socket: Socket,
    /// The socket's port (the panic hook's key).
    port: u16,
    batch: usize,
    wake_by: Option<u64>,
    /// Passes made.
    passes: u64,
    rx: XdpRx,
}

/// Copies `frame`'s datagram into `slot` (or counts it); true when it went to the consumer.
fn deliver(worker: &mut Worker, frame: &rx::Frame<'_>, slot: Option<u32>, at: Clocks) -> bool {
    let Some(udp) = frame.udp() else {
        // Steered here by the program, yet not a whole UDP datagram for us (a bad IPv4
        // checksum, lengths that disagree): counted, never delivered.
        worker.counts.received += 1;
        worker.counts.malformed += 1;
        return false;
    };
    let size = worker.pool().slot_size();
    let meta = RecvMeta {
        len: udp.len.min(size),
        truncated: udp.len > size,
        source: Some(udp.source),
        ..RecvMeta::default()
    };
    let Some(slot) = slot else {
        worker.overflowed(&meta);
        return false;
    };
    if !meta.truncated {
        // The payload, which may span the packet's descriptors, into the slot.
        let dst = worker.pool().buf_ptr(slot);
        let mut copied = 0;
        let whole = frame.payload(&udp, |b| {
            // SAFETY: this thread owns `slot` (from the stash); the payload handed out is
            // `udp.len <= slot_size` bytes in all, and UMEM and slot never overlap.
            // Checked by: `xdp_books_are_exact_under_faults` (ASan).
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), dst.add(copied), b.len()) };
            copied += b.len();
        });
        if !whole {
            worker.counts.received += 1;
            worker.counts.malformed += 1;
            return false;
        }
    }
    worker.complete(slot, &meta, at)
}

impl XdpSide {
    /// Takes up to a batch of packets from the RX ring into free slots; returns how many.
    fn take_ring(&mut self) -> usize {
        let room = self.worker.fill_stash(self.batch);
        let pause = self.worker.pauses();
        let at = Clocks::now();
        let mut consumed = [0u64; 16];
        let mut taken = 0usize;
        let worker = &mut self.worker;
        self.rx.take(self.batch, |frame| {
            if taken >= room && pause {
                return false;
            }
            let slot = (taken < room).then(|| worker.stash[taken]);
            if deliver(worker, &frame, slot, at) && taken < room {
                consumed[taken / 64] |= 1 << (taken % 64);
            }
            taken += 1;
            true
        });
        self.worker
            .retire_batch(taken.min(room), |i| consumed[i / 64] >> (i % 64) & 1 == 1);
        taken
    }

    /// Reads the socket's statistics into the counters (and kernel_drops).
    fn statistics(&mut self) {
        if let Some(s) = self.rx.stats() {
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
        if !stopping && self.rx.ready() == 0 {
            let now = sys::monotonic_ns();
            let wait = match self.wake_by {
                Some(d) => d.saturating_sub(now).min(IDLE_WAIT_NS),
                None => IDLE_WAIT_NS,
            };
            let polled = self.rx.poll(&self.socket, wait);
            self.worker.counts.recv_calls += 1;
            let (any, socket) = polled.unwrap_or((false, false));
            socket_ready |= socket;
            if !any {
                let now = sys::monotonic_ns();
                if self.wake_by.is_some_and(|d| now >= d) {
                    self.worker.wake(now);
                    self.wake_by = None;
                }
                self.statistics();
                self.worker.refresh_kernel_drops();
                return Pass::Idle;
            }
        } else if self.rx.wake_kernel() {
            self.worker.counts.recv_calls += 1;
        }
        let from_ring = self.take_ring();
        if from_ring > 0 && crate::lent::receive_panic_due(self.port) {
            // Tests: a panic with every frame of the UMEM lent to the kernel or in the ring.
            panic!("injected panic in an xdp receive (tests)");
        }
        if from_ring == 0 && self.worker.pauses() && self.rx.ready() > 0 {
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

    fn discard_pass(&mut self) -> Pass {
        // Frames beyond the free slots are taken from the ring and counted as overflow.
        self.worker.discard_from_now();
        self.pass(true)
    }
}
