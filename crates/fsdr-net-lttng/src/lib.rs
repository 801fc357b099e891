//! LTTng-UST tracepoints of fsdr-net: the provider `fsdr_net` with the events
//!
//! | event | fields | fired by |
//! |---|---|---|
//! | `fsdr_net:tx` | `block`, `seq` | a source, at each granularity boundary it produces |
//! | `fsdr_net:rx` | `block`, `seq` | a sink, at each boundary it consumes |
//! | `fsdr_net:probe` | `block`, `seq` | a pass-through probe, at each boundary going by |
//! | `fsdr_net:arrival` | `block`, `seq`, `arrival_ns` | `UdpSource`, at each boundary it produces, with the time its datagram left the kernel |
//! | `fsdr_net:packet` | `block`, `seq`, `bytes`, `arrival_ns`, `kernel_ns` | `UdpSource`, per datagram |
//!
//! `block` names a pipe (a source and the sinks that measure it share it), `seq` counts
//! boundaries: boundary `k` is item `k × granularity`. Times in fields are CLOCK_MONOTONIC
//! nanoseconds, LTTng's own clock, except `kernel_ns` (CLOCK_REALTIME, 0 when the socket has no
//! kernel timestamps).
//!
//! The real tracepoints are compiled only with the cargo feature `lttng` (Debian's
//! `liblttng-ust-dev`); without it every function here is an empty inline function, so no user
//! needs LTTng installed and the calls cost nothing.
//!
//! # Linking with the `lttng` feature
//! Since rustc 1.90 the default linker (rust-lld) garbage-collects the sections through which
//! lttng-ust finds tracepoints: the program runs and records nothing. Every binary that links
//! this crate with the feature needs, in its package's build script,
//! `println!("cargo:rustc-link-arg=-Wl,-z,nostart-stop-gc");` (the root `fsdr-net` package
//! does this for its examples, tests and benches). [`registered`] tells at run time whether
//! the tracepoints reached lttng-ust.
//!
//! The program must start with `LTTNG_UST_ALLOW_BLOCKING=1` in its environment for a blocking
//! channel (`--blocking-timeout=inf`) to lose no events; see `tracing/README.md`.
//!
//! ```
//! // Fire a tx at every boundary of 1000 items produced in two calls.
//! let mut marks = fsdr_net_lttng::Marks::new(fsdr_net_lttng::next_block_id(), 1000);
//! let mut fired = Vec::new();
//! marks.advance(1500, |block, seq| { fsdr_net_lttng::tx(block, seq); fired.push(seq) });
//! marks.advance(1500, |block, seq| { fsdr_net_lttng::tx(block, seq); fired.push(seq) });
//! assert_eq!(fired, [0, 1, 2]);
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

/// True when the crate was built with real tracepoints (the `lttng` feature).
pub const ENABLED: bool = cfg!(feature = "lttng");

#[cfg(feature = "lttng")]
mod ffi {
    unsafe extern "C" {
        pub fn fsdr_net_tp_tx(block: u64, seq: u64);
        pub fn fsdr_net_tp_rx(block: u64, seq: u64);
        pub fn fsdr_net_tp_probe(block: u64, seq: u64);
        pub fn fsdr_net_tp_arrival(block: u64, seq: u64, arrival_ns: u64);
        pub fn fsdr_net_tp_packet(
            block: u64,
            seq: u64,
            bytes: u64,
            arrival_ns: u64,
            kernel_ns: u64,
        );
        pub fn fsdr_net_tp_packet_enabled() -> std::ffi::c_int;
    }
}

/// A source produced boundary `seq` of pipe `block`.
#[inline(always)]
pub fn tx(block: u64, seq: u64) {
    #[cfg(feature = "lttng")]
    // SAFETY: a plain C function taking two integers; lttng-ust makes it a no-op when no
    // session records the event.
    // Checked by: `calls_are_harmless_without_a_session`, and with the `lttng` feature
    // `a_probed_udp_source_names_its_pipe_and_its_sink_sees_every_item`.
    unsafe {
        ffi::fsdr_net_tp_tx(block, seq)
    };
    #[cfg(not(feature = "lttng"))]
    let _ = (block, seq);
}

/// A sink consumed boundary `seq` of pipe `block`.
#[inline(always)]
pub fn rx(block: u64, seq: u64) {
    #[cfg(feature = "lttng")]
    // SAFETY: as for `tx`.
    // Checked by: `calls_are_harmless_without_a_session`, and with the `lttng` feature
    // `a_probed_udp_source_names_its_pipe_and_its_sink_sees_every_item`.
    unsafe {
        ffi::fsdr_net_tp_rx(block, seq)
    };
    #[cfg(not(feature = "lttng"))]
    let _ = (block, seq);
}

/// A pass-through probe saw boundary `seq` of pipe `block` go by.
#[inline(always)]
pub fn probe(block: u64, seq: u64) {
    #[cfg(feature = "lttng")]
    // SAFETY: as for `tx`.
    // Checked by: `calls_are_harmless_without_a_session`, and with the `lttng` feature
    // `a_probed_udp_source_names_its_pipe_and_its_sink_sees_every_item`.
    unsafe {
        ffi::fsdr_net_tp_probe(block, seq)
    };
    #[cfg(not(feature = "lttng"))]
    let _ = (block, seq);
}

/// A network source produced boundary `seq` of pipe `block`, carried by a datagram that the
/// receive thread took from the kernel at `arrival_ns` (CLOCK_MONOTONIC).
#[inline(always)]
pub fn arrival(block: u64, seq: u64, arrival_ns: u64) {
    #[cfg(feature = "lttng")]
    // SAFETY: as for `tx`.
    // Checked by: `calls_are_harmless_without_a_session`, and with the `lttng` feature
    // `a_probed_udp_source_names_its_pipe_and_its_sink_sees_every_item`.
    unsafe {
        ffi::fsdr_net_tp_arrival(block, seq, arrival_ns)
    };
    #[cfg(not(feature = "lttng"))]
    let _ = (block, seq, arrival_ns);
}

/// A network source handed over one datagram.
#[inline(always)]
pub fn packet(block: u64, seq: u64, bytes: u64, arrival_ns: u64, kernel_ns: u64) {
    #[cfg(feature = "lttng")]
    // SAFETY: as for `tx`.
    // Checked by: `calls_are_harmless_without_a_session`, and with the `lttng` feature
    // `a_probed_udp_source_names_its_pipe_and_its_sink_sees_every_item`.
    unsafe {
        ffi::fsdr_net_tp_packet(block, seq, bytes, arrival_ns, kernel_ns)
    };
    #[cfg(not(feature = "lttng"))]
    let _ = (block, seq, bytes, arrival_ns, kernel_ns);
}

/// Whether a session records `fsdr_net:packet` right now (always false without the feature),
/// so that a caller can skip work that only feeds the event.
#[inline(always)]
pub fn packet_enabled() -> bool {
    #[cfg(feature = "lttng")]
    // SAFETY: a C function without arguments reading lttng-ust's enabled flag.
    // Checked by: `calls_are_harmless_without_a_session`, and with the `lttng` feature
    // `a_probed_udp_source_names_its_pipe_and_its_sink_sees_every_item`.
    return unsafe { ffi::fsdr_net_tp_packet_enabled() != 0 };
    #[cfg(not(feature = "lttng"))]
    false
}

/// Whether the tracepoints are compiled in and lttng-ust found them in this process. Reads
/// `/proc/self/maps` for liblttng-ust: if the library is not mapped, nothing can be recorded.
pub fn registered() -> bool {
    ENABLED
        && std::fs::read_to_string("/proc/self/maps")
            .is_ok_and(|m| m.lines().any(|l| l.contains("liblttng-ust.so")))
}

static NEXT_BLOCK: AtomicU64 = AtomicU64::new(0);

/// A fresh pipe id for this process (0, 1, 2, …). Sources take one; the sinks and probes that
/// measure the same pipe copy it from their source.
pub fn next_block_id() -> u64 {
    NEXT_BLOCK.fetch_add(1, Ordering::Relaxed)
}

/// Counts items through one point of a pipe and reports every granularity boundary crossed:
/// boundary `k` is item `k × granularity`, so N items cross `ceil(N / granularity)` of them.
#[derive(Debug, Clone)]
pub struct Marks {
    block: u64,
    granularity: u64,
    items: u64,
}

impl Marks {
    /// Marks of pipe `block` every `granularity` items (at least 1).
    pub fn new(block: u64, granularity: u64) -> Self {
        Marks {
            block,
            granularity: granularity.max(1),
            items: 0,
        }
    }

    /// The pipe id.
    pub fn block(&self) -> u64 {
        self.block
    }

    /// Items between boundaries.
    pub fn granularity(&self) -> u64 {
        self.granularity
    }

    /// Items counted so far.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Counts `n` more items, calling `fire(block, seq)` for each boundary among them.
    #[inline]
    pub fn advance(&mut self, n: u64, mut fire: impl FnMut(u64, u64)) {
        let g = self.granularity;
        let first = self.items.div_ceil(g);
        self.items += n;
        let end = self.items.div_ceil(g);
        for seq in first..end {
            fire(self.block, seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_are_counted_once_whatever_the_chunking() {
        for chunk in [1u64, 7, 100, 1000, 4096, 10_000] {
            let mut m = Marks::new(3, 1000);
            let mut seqs = Vec::new();
            let mut left = 10_000u64;
            while left > 0 {
                let n = chunk.min(left);
                m.advance(n, |b, s| {
                    assert_eq!(b, 3);
                    seqs.push(s)
                });
                left -= n;
            }
            assert_eq!(seqs, (0..10).collect::<Vec<_>>(), "chunk {chunk}");
        }
        let mut m = Marks::new(0, 0);
        let mut n = 0;
        m.advance(5, |_, _| n += 1);
        assert_eq!((n, m.granularity()), (5, 1));
    }

    #[test]
    fn calls_are_harmless_without_a_session() {
        tx(1, 2);
        rx(1, 2);
        probe(1, 2);
        arrival(1, 2, 3);
        packet(1, 2, 3, 4, 5);
        assert!(!packet_enabled() || ENABLED);
        assert!(next_block_id() < next_block_id());
    }
}
