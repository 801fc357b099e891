//! Counters of the receive engine and the snapshots that report them.
//!
//! Every datagram the kernel hands a receive thread ends in exactly one place: delivered to
//! the consumer, or counted as `overflow`, `truncated`, `rejected`, `malformed`, `skipped`,
//! `duplicates` or `late` (or `unconsumed` at shutdown). Datagrams the kernel dropped before
//! that are `kernel_drops`. Missed frames are counted separately, from sequence numbers.
//!
//! The counters are declared once, in the table inside this module: the per-thread atomics,
//! the consumer's atomics, [`Stats`] and [`ThreadStats`] with their `serde` form, the field
//! list [`Stats::FIELDS`] (name and meaning, in a stable order), `Display`, and the
//! conversion to and from `(name, value)` pairs that the FutureSDR `stats` port uses all
//! derive from it.
//!
//! ```no_run
//! # fn f(engine: &fsdr_net_io::Engine) {
//! let s = engine.stats();
//! println!("{} delivered, {} lost in the kernel, {} missed frames",
//!          s.delivered, s.kernel_drops, s.missed);
//! for (name, value) in s.fields() {
//!     println!("{name} = {value}");
//! }
//! # }
//! ```

use crossbeam_utils::CachePadded;
use serde::{Deserialize, Serialize};

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

/// A counter with a single writer: increments are a plain load and store (no locked
/// read-modify-write), readers on other threads see a consistent, possibly slightly old value.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds `n` (single writer only).
    pub(crate) fn add(&self, n: u64) {
        if n != 0 {
            self.0
                .store(self.0.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        }
    }
    /// Raises the value to `v` if it is larger (single writer only).
    pub(crate) fn max(&self, v: u64) {
        if v > self.0.load(Ordering::Relaxed) {
            self.0.store(v, Ordering::Relaxed);
        }
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// `FIELDS`, `fields()` and `set_field()` of a struct of `u64` counters.
macro_rules! field_table {
    ($ty:ident { $( $field:ident, $doc:literal; )* }) => {
        impl $ty {
            /// Every field: its name and what it counts, in a stable order.
            pub const FIELDS: &'static [(&'static str, &'static str)] =
                &[ $( (stringify!($field), $doc), )* ];

            /// Every field as `(name, value)`, in the order of `FIELDS`.
            pub fn fields(&self) -> impl Iterator<Item = (&'static str, u64)> + use<> {
                [ $( (stringify!($field), self.$field), )* ].into_iter()
            }

            /// Sets the field `name`; false when there is no such field.
            pub fn set_field(&mut self, name: &str, value: u64) -> bool {
                match name {
                    $( stringify!($field) => { self.$field = value; true } )*
                    _ => false,
                }
            }
        }
    };
}
pub(crate) use field_table;

/// Declares the engine's counters once: the per-thread atomics and their local batch
/// accumulator, the consumer's atomics, and the snapshots with their field tables.
macro_rules! counters {
    (
        thread { $( $tf:ident : $tk:ident, $td:literal; )* }
        consumer { $( $cf:ident, $cd:literal; )* }
    ) => {
        /// Counters of one receive thread.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct ThreadCounts {
            $( #[doc = $td] pub $tf: u64, )*
        }
        field_table!(ThreadCounts { $( $tf, $td; )* });

        #[derive(Debug, Default)]
        pub(crate) struct ThreadCounters {
            $( pub(crate) $tf: Counter, )*
        }

        impl ThreadCounters {
            pub(crate) fn snapshot(&self) -> ThreadCounts {
                ThreadCounts { $( $tf: self.$tf.get(), )* }
            }
        }

        /// Counts a receive thread accumulates over a batch, published at once.
        #[derive(Debug, Default, Clone, Copy)]
        pub(crate) struct LocalCounts {
            $( pub(crate) $tf: u64, )*
        }

        impl LocalCounts {
            /// Publishes the accumulated counts and clears them.
            pub(crate) fn flush(&mut self, to: &ThreadCounters) {
                $( counters!(@flush $tk, to.$tf, self.$tf); )*
                *self = Self::default();
            }
        }

        #[derive(Debug, Default)]
        pub(crate) struct ConsumerCounters {
            $( pub(crate) $cf: Counter, )*
        }

        /// A snapshot of every counter of an engine, summed over receive threads, with the
        /// per-thread figures.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct Stats {
            $( #[doc = $td] pub $tf: u64, )*
            $( #[doc = $cd] pub $cf: u64, )*
            /// Per receive thread.
            #[serde(skip_serializing_if = "Vec::is_empty", default)]
            pub per_thread: Vec<ThreadStats>,
        }
        field_table!(Stats { $( $tf, $td; )* $( $cf, $cd; )* });

        impl Counters {
            pub(crate) fn snapshot(&self) -> Stats {
                let per_thread: Vec<ThreadStats> = self
                    .threads
                    .iter()
                    .enumerate()
                    .map(|(thread, t)| ThreadStats { thread, counts: t.snapshot() })
                    .collect();
                let c = &self.consumer;
                Stats {
                    $( $tf: per_thread.iter().map(|t| t.counts.$tf).sum(), )*
                    $( $cf: c.$cf.get(), )*
                    per_thread,
                }
            }
        }
    };
    (@flush add, $to:expr, $v:expr) => { $to.add($v) };
    (@flush max, $to:expr, $v:expr) => { if $v != 0 { $to.max($v) } };
}

counters! {
    thread {
        received: add, "Datagrams taken from the kernel.";
        bytes: add, "Bytes taken from the kernel.";
        kernel_drops: max, "Datagrams the kernel dropped for a full receive buffer (the socket's counter, SO_MEMINFO, read live); with UDP GRO the kernel counts a dropped coalesced receive once (up to 64 datagrams), and `missed` counts its datagrams from the sequence numbers.";
        overflow: add, "Datagrams read and dropped because the consumer held every slot or buffer (the read-and-discard overload policy; and at a stop, what the kernel still held for a consumer that held every slot or buffer).";
        truncated: add, "Datagrams larger than a slot (MSG_TRUNC), never delivered as if whole.";
        rejected: add, "Datagrams from senders outside the allow-list.";
        malformed: add, "Datagrams the format parser refused.";
        skipped: add, "Valid packets without samples (VRT context, CHDR control), or of a stream no output asked for.";
        rearms: add, "io_uring multishot receives re-armed after the kernel ended them.";
        recv_calls: add, "Receive system calls (recvmmsg, recvmsg, io_uring submissions) made.";
        peeks: add, "In-place receiver over a socket: headers of queued datagrams read without taking them (SO_PEEK_OFF), to end a receive in front of a gap; two system calls each, not in recv_calls.";
        wakeups: add, "Times the receive side woke the consumer.";
        leaked_rings: add, "io_uring buffer rings kept alive (leaked on purpose) at shutdown because a cancelled multishot receive did not end.";
        paused: add, "Times the receive side stopped reading because the consumer was behind (the kernel's buffer then absorbs or drops, counted as kernel_drops).";
        gro_datagrams: add, "Datagrams that arrived coalesced in UDP GRO receives and were split again (each also counted as received).";
        gro_fixups: add, "UDP GRO receives that did not line up with the slots (the first one, or after the sender changed its datagram size) and were copied into place.";
        xdp_rx_dropped: max, "AF_XDP: frames the kernel dropped for want of a fill-ring frame or other reasons (XDP_STATISTICS rx_dropped; also in kernel_drops).";
        xdp_rx_ring_full: max, "AF_XDP: frames dropped because the RX ring was full, the receive thread behind (rx_ring_full; also in kernel_drops).";
        xdp_fill_ring_empty: max, "AF_XDP: times the kernel found the fill ring empty (rx_fill_ring_empty_descs).";
        xdp_invalid_descs: max, "AF_XDP: descriptors the kernel found invalid (rx_invalid_descs).";
        xdp_via_kernel: add, "AF_XDP backend: datagrams that took the kernel's path instead (IP fragments, options or extension headers, another queue) and were read from the UDP socket (each also counted as received).";
    }
    consumer {
        delivered, "Datagrams handed to the consumer.";
        delivered_bytes, "Payload bytes (after the format's header) handed to the consumer.";
        missed, "Frames missing from the delivered stream, by sequence number.";
        duplicates, "Datagrams received twice (dropped).";
        late, "Datagrams that arrived after their successors had been delivered (dropped).";
        resyncs, "Sequence restarts: sender restarts, or jumps beyond the allowed gap.";
        reordered, "Datagrams that arrived out of order and were put back in order.";
        unconsumed, "Datagrams received but not taken by the consumer before shutdown.";
        ambiguous, "Datagrams whose place the format could not prove (a short counter without timestamps: new data at a number behind the stream, after a loss of half the counter's period or more; delivered, and the loss counted modulo the period; or a gap whose time is other than whole packets where the stamps cannot size it exactly: a short packet lost, sized as a full one where ticks are coarser than half a sample, or a rate learnt from the stream's stamps, a tick off where it is only near the stream's; or told rates a little off the device's, sized by their time until a run of packets shows them wrong).";
        clock_dropped, "Streams whose timestamps contradicted the configured tick and sample rates (two consecutive pairs before any agreed, or a run of consecutive packets by more than 5 ticks beyond the time jumps in it after one did: a receiver told the wrong rate, even 0.1% off); their gaps were sized from the rate learnt from the stream instead, and a warning named both.";
        stream_ns, "Nanoseconds from the arrival of the first delivered datagram to that of the latest: the stream's span, without the wait before it or the idle time after it (delivered_bytes / stream_ns is the stream's rate).";
    }
}

/// The consumer's record of the delivered stream's span in arrival time
/// ([`Stats::stream_ns`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct StreamSpan {
    first_ns: Option<u64>,
}

impl StreamSpan {
    /// A datagram that arrived at `arrival_ns` (CLOCK_MONOTONIC; 0: unknown) was delivered.
    pub(crate) fn delivered(&mut self, arrival_ns: u64, to: &ConsumerCounters) {
        if arrival_ns == 0 {
            return;
        }
        let first = *self.first_ns.get_or_insert(arrival_ns);
        to.stream_ns.max(arrival_ns.saturating_sub(first));
    }
}

/// Counters of one receive thread, with its index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadStats {
    /// Thread index.
    pub thread: usize,
    /// The counters.
    #[serde(flatten)]
    pub counts: ThreadCounts,
}

impl std::ops::Deref for ThreadStats {
    type Target = ThreadCounts;
    fn deref(&self) -> &ThreadCounts {
        &self.counts
    }
}

/// All counters of an engine.
#[derive(Debug)]
pub(crate) struct Counters {
    pub(crate) threads: Box<[CachePadded<ThreadCounters>]>,
    pub(crate) consumer: CachePadded<ConsumerCounters>,
}

impl Counters {
    pub(crate) fn new(threads: usize) -> Self {
        Self {
            threads: (0..threads)
                .map(|_| CachePadded::new(ThreadCounters::default()))
                .collect(),
            consumer: CachePadded::new(ConsumerCounters::default()),
        }
    }
}

impl Stats {
    /// Rebuilds a snapshot from `(name, value)` pairs (per-thread figures stay empty).
    /// An unknown name is returned as the error.
    pub fn from_fields<'a>(
        pairs: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Result<Stats, String> {
        let mut s = Stats::default();
        for (name, value) in pairs {
            if !s.set_field(name, value) {
                return Err(name.to_string());
            }
        }
        Ok(s)
    }

    /// The counters of receivers on separate sockets — a group of in-place receivers, one
    /// per stream of a port (`InPlaceReceiver::start_streams`) — as the port's: every count
    /// added (each socket drops on its own), `stream_ns` the longest span, the per-thread
    /// figures one after another.
    ///
    /// ```
    /// use fsdr_net_io::Stats;
    ///
    /// let a = Stats { delivered: 3, kernel_drops: 1, stream_ns: 50, ..Default::default() };
    /// let b = Stats { delivered: 4, kernel_drops: 2, stream_ns: 70, ..Default::default() };
    /// let port = Stats::combined([&a, &b]);
    /// assert_eq!((port.delivered, port.kernel_drops, port.stream_ns), (7, 3, 70));
    /// ```
    pub fn combined<'a>(parts: impl IntoIterator<Item = &'a Stats>) -> Stats {
        let mut sum = Stats::default();
        for part in parts {
            let before: Vec<(&'static str, u64)> = sum.fields().collect();
            for ((name, have), (_, add)) in before.into_iter().zip(part.fields()) {
                let v = if name == "stream_ns" {
                    have.max(add)
                } else {
                    have + add
                };
                sum.set_field(name, v);
            }
            let base = sum.per_thread.len();
            sum.per_thread
                .extend(part.per_thread.iter().map(|t| ThreadStats {
                    thread: base + t.thread,
                    counts: t.counts,
                }));
        }
        sum
    }

    /// The stream's span in seconds ([`Stats::stream_ns`]).
    pub fn stream_seconds(&self) -> f64 {
        self.stream_ns as f64 * 1e-9
    }

    /// Payload bytes per second over the stream's span (0 before two datagrams arrived):
    /// the rate of the stream itself, which a rate over the whole run (waiting for the first
    /// datagram, the idle time after the last) understates.
    pub fn stream_bytes_per_second(&self) -> f64 {
        if self.stream_ns == 0 || self.delivered < 2 {
            return 0.0;
        }
        // The span runs from the first arrival to the last: it holds every datagram but one.
        let per = self.delivered_bytes as f64 / self.delivered as f64;
        per * (self.delivered - 1) as f64 / self.stream_seconds()
    }

    /// Every datagram the receive side dropped, for whatever reason, after the kernel.
    pub fn dropped_after_kernel(&self) -> u64 {
        self.overflow
            + self.truncated
            + self.rejected
            + self.malformed
            + self.skipped
            + self.duplicates
            + self.late
            + self.unconsumed
    }

    /// Delivered plus every drop counter, kernel drops included: equals what was sent to
    /// the socket once everything sent has been received or dropped.
    pub fn accounted(&self) -> u64 {
        self.delivered + self.kernel_drops + self.dropped_after_kernel()
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.fields().map(|(n, v)| format!("{n} {v}")).collect();
        for (i, chunk) in parts.chunks(7).enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(&chunk.join(", "))?;
        }
        if self.per_thread.len() > 1 {
            for t in &self.per_thread {
                write!(
                    f,
                    "\n  thread {}: received {}, kernel_drops {}, overflow {}",
                    t.thread, t.counts.received, t.counts.kernel_drops, t.counts.overflow
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_round_trips_through_names_json_and_display() {
        let mut s = Stats::default();
        let names: Vec<&str> = Stats::FIELDS.iter().map(|(n, _)| *n).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(s.set_field(n, i as u64 + 1), "{n}");
        }
        let back = Stats::from_fields(s.fields()).unwrap();
        assert_eq!(back, s);
        let json = serde_json::to_value(&s).unwrap();
        for (n, v) in s.fields() {
            assert_eq!(json[n].as_u64(), Some(v), "{n} in {json}");
        }
        let shown = s.to_string();
        for n in &names {
            assert!(shown.contains(n), "{n} in {shown}");
        }
        assert_eq!(Stats::from_fields([("bogus", 1)]), Err("bogus".into()));
    }

    #[test]
    fn local_counts_flush_adds_and_keeps_the_maximum() {
        let a = ThreadCounters::default();
        let mut l = LocalCounts {
            received: 3,
            kernel_drops: 5,
            ..Default::default()
        };
        l.flush(&a);
        let mut l = LocalCounts {
            received: 2,
            kernel_drops: 4,
            ..Default::default()
        };
        l.flush(&a);
        assert_eq!((a.received.get(), a.kernel_drops.get()), (5, 5));
        assert_eq!(l.received, 0);
    }

    #[test]
    fn accounted_sums_every_fate() {
        let s = Stats {
            delivered: 10,
            kernel_drops: 1,
            overflow: 2,
            duplicates: 3,
            unconsumed: 4,
            ..Default::default()
        };
        assert_eq!(s.accounted(), 20);
    }
}

/// Model tests of the single-writer counters (`cargo xtask test` runs them under loom).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::thread;
    use std::sync::Arc;

    /// A reader on another thread sees each counter only grow, and never a value the writer
    /// did not publish (no torn or lost increments from the plain load-and-store).
    #[test]
    fn loom_counters_publish_monotonically() {
        loom::model(|| {
            let c = Arc::new(ThreadCounters::default());
            let w = c.clone();
            let writer = thread::spawn(move || {
                let mut local = LocalCounts {
                    received: 2,
                    kernel_drops: 5,
                    ..Default::default()
                };
                local.flush(&w);
                local.received = 3;
                local.kernel_drops = 4; // an older drop count never lowers the maximum
                local.flush(&w);
            });
            let a = c.snapshot();
            let b = c.snapshot();
            assert!([0, 2, 5].contains(&a.received), "{a:?}");
            assert!(b.received >= a.received && b.kernel_drops >= a.kernel_drops);
            writer.join().unwrap();
            let end = c.snapshot();
            assert_eq!((end.received, end.kernel_drops), (5, 5));
        });
    }
}
