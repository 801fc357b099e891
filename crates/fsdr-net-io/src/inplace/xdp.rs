//! The in-place receiver over AF_XDP (`Backend::Xdp`): each frame's UDP payload is copied
//! from the UMEM into the same areas a `recvmmsg` call would have filled — the header area,
//! the payload's sample position in the output buffer, the spill area — so the one copy is
//! UMEM → output buffer, and everything after (placement, the copying path, tracking) is the
//! same as for the socket. What the XDP program passes to the kernel (IP fragments, frames of
//! another queue) and the stop's `shutdown` arrive on the UDP socket and are read from it.

use std::io;

use super::ItemBuffer;
use super::receiver::Receive;
use crate::sample::Item;
use crate::sys::{self, Wait};

/// The longest a blocking receive waits for frames before its step ends (and is made again).
const WAIT_NS: u64 = 100_000_000;

impl<T: Item, B: ItemBuffer<T>> Receive<T, B> {
    /// Fills up to `n` of the entries set up for this call: one `recvmmsg`, or with AF_XDP
    /// the packets waiting in the ring (`WouldBlock` when there are none after the wait).
    pub(super) fn recv_entries(&mut self, n: usize, wait: Wait) -> io::Result<usize> {
        let Some(x) = self.xdp.as_mut() else {
            return self.msgs.recv(&self.socket, n, wait);
        };
        if x.ready() == 0 {
            let timeout = if wait == Wait::ForOne { WAIT_NS } else { 0 };
            let (_, socket) = x.poll(&self.socket, timeout).unwrap_or((false, false));
            if socket {
                let got = self.msgs.recv(&self.socket, n, Wait::No)?;
                let real = (0..got)
                    .filter(|&i| self.msgs.meta(i).source.is_some())
                    .count();
                self.counts.xdp_via_kernel += real as u64;
                return Ok(got);
            }
            if x.ready() == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
        } else if x.wake_kernel() {
            self.counts.recv_calls += 1;
        }
        let mut bad = 0u64;
        let got = self.msgs.fill_from(n, |w| {
            let mut source = None;
            while source.is_none() {
                let took = x.take(1, |f| {
                    match f.udp() {
                        Some(u) if f.payload(&u, |b| w.write(b)) => source = Some(u.source),
                        // Steered here, yet not a whole UDP datagram for us: counted.
                        _ => bad += 1,
                    }
                    true
                });
                if took == 0 {
                    break;
                }
            }
            source
        });
        self.counts.received += bad;
        self.counts.malformed += bad;
        got
    }

    /// Whether data is there within `ns`: the socket, or with AF_XDP the ring or the socket.
    pub(super) fn readable_within(&self, ns: u64) -> bool {
        match &self.xdp {
            None => sys::readable_within(&self.socket, ns),
            Some(x) => x.ready() > 0 || x.poll(&self.socket, ns).is_some_and(|(any, _)| any),
        }
    }

    /// Reads the AF_XDP socket's statistics into the counters; returns its drops (0 without
    /// AF_XDP).
    pub(super) fn xdp_drops(&mut self) -> u64 {
        let Some(s) = self.xdp.as_ref().and_then(|x| x.stats()) else {
            return 0;
        };
        let c = &mut self.counts;
        c.xdp_rx_dropped = s.rx_dropped;
        c.xdp_rx_ring_full = s.rx_ring_full;
        c.xdp_fill_ring_empty = s.rx_fill_ring_empty_descs;
        c.xdp_invalid_descs = s.rx_invalid_descs;
        s.rx_dropped + s.rx_ring_full
    }
}
