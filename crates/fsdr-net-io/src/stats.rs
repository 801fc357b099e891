//! Counters of the receive engine and the snapshot that reports them.
//!
//! Every datagram the kernel hands a receive thread ends in exactly one place: delivered to
//! the consumer, or counted as `overflow`, `truncated`, `rejected`, `malformed`, `skipped`,
//! `duplicates` or `late` (or still queued). Datagrams the kernel dropped before that are
//! `kernel_drops`. Missed frames are counted separately, from sequence numbers.
//!
//! ```no_run
//! # fn f(engine: &fsdr_net_io::Engine) {
//! let s = engine.stats();
//! println!("{} delivered, {} lost in the kernel, {} missed frames",
//!          s.delivered, s.kernel_drops, s.missed);
//! # }
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ring::CachePadded;

/// A counter with a single writer: increments are a plain load and store, readers see a
/// consistent (if slightly old) value at any time.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    pub(crate) fn add(&self, n: u64) {
        if n != 0 {
            self.0
                .store(self.0.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        }
    }
    pub(crate) fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Counters written by one receive thread.
#[derive(Debug, Default)]
pub(crate) struct ThreadCounters {
    pub(crate) received: Counter,
    pub(crate) bytes: Counter,
    pub(crate) kernel_drops: Counter,
    pub(crate) overflow: Counter,
    pub(crate) truncated: Counter,
    pub(crate) rejected: Counter,
    pub(crate) malformed: Counter,
    pub(crate) skipped: Counter,
    pub(crate) rearms: Counter,
}

/// Counters written by the consumer.
#[derive(Debug, Default)]
pub(crate) struct ConsumerCounters {
    pub(crate) delivered: Counter,
    pub(crate) delivered_bytes: Counter,
    pub(crate) missed: Counter,
    pub(crate) duplicates: Counter,
    pub(crate) late: Counter,
    pub(crate) resyncs: Counter,
    pub(crate) reordered: Counter,
    pub(crate) unconsumed: Counter,
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
                .map(|_| CachePadded(ThreadCounters::default()))
                .collect(),
            consumer: CachePadded(ConsumerCounters::default()),
        }
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let per_thread: Vec<ThreadStats> = self
            .threads
            .iter()
            .enumerate()
            .map(|(i, t)| ThreadStats {
                thread: i,
                received: t.received.get(),
                bytes: t.bytes.get(),
                kernel_drops: t.kernel_drops.get(),
                overflow: t.overflow.get(),
                truncated: t.truncated.get(),
                rejected: t.rejected.get(),
                malformed: t.malformed.get(),
                skipped: t.skipped.get(),
                rearms: t.rearms.get(),
            })
            .collect();
        let sum = |f: fn(&ThreadStats) -> u64| per_thread.iter().map(f).sum::<u64>();
        let c = &self.consumer;
        Stats {
            received: sum(|t| t.received),
            bytes: sum(|t| t.bytes),
            kernel_drops: sum(|t| t.kernel_drops),
            overflow: sum(|t| t.overflow),
            truncated: sum(|t| t.truncated),
            rejected: sum(|t| t.rejected),
            malformed: sum(|t| t.malformed),
            skipped: sum(|t| t.skipped),
            rearms: sum(|t| t.rearms),
            delivered: c.delivered.get(),
            delivered_bytes: c.delivered_bytes.get(),
            missed: c.missed.get(),
            duplicates: c.duplicates.get(),
            late: c.late.get(),
            resyncs: c.resyncs.get(),
            reordered: c.reordered.get(),
            unconsumed: c.unconsumed.get(),
            per_thread,
        }
    }
}

/// Counters of one receive thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadStats {
    /// Thread index.
    pub thread: usize,
    /// Datagrams taken from the kernel.
    pub received: u64,
    /// Bytes taken from the kernel.
    pub bytes: u64,
    /// Datagrams the kernel dropped on this thread's socket (full receive buffer).
    pub kernel_drops: u64,
    /// Datagrams dropped because the consumer was behind (no free slot).
    pub overflow: u64,
    /// Datagrams larger than a slot (`MSG_TRUNC`).
    pub truncated: u64,
    /// Datagrams from senders outside the allow-list.
    pub rejected: u64,
    /// Datagrams the format parser refused.
    pub malformed: u64,
    /// Valid packets that carry no samples (VRT context, CHDR control).
    pub skipped: u64,
    /// io_uring multishot receives re-armed after the kernel ended them.
    pub rearms: u64,
}

/// A snapshot of every counter of an engine, summed over threads, with the per-thread figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams taken from the kernel.
    pub received: u64,
    /// Bytes taken from the kernel.
    pub bytes: u64,
    /// Datagrams dropped by the kernel for a full receive buffer (`SO_RXQ_OVFL`).
    pub kernel_drops: u64,
    /// Datagrams dropped because the consumer was behind.
    pub overflow: u64,
    /// Datagrams larger than a slot.
    pub truncated: u64,
    /// Datagrams from senders outside the allow-list.
    pub rejected: u64,
    /// Datagrams the format parser refused.
    pub malformed: u64,
    /// Valid packets without samples.
    pub skipped: u64,
    /// io_uring multishot re-arms.
    pub rearms: u64,
    /// Datagrams handed to the consumer.
    pub delivered: u64,
    /// Payload bytes (after the format's header) handed to the consumer.
    pub delivered_bytes: u64,
    /// Frames missing from the delivered stream, by sequence number.
    pub missed: u64,
    /// Datagrams received twice (dropped).
    pub duplicates: u64,
    /// Datagrams that arrived after their successors had been delivered (dropped).
    pub late: u64,
    /// Sequence restarts (sender restarts or jumps beyond the allowed gap).
    pub resyncs: u64,
    /// Datagrams that arrived out of order and were put back in order.
    pub reordered: u64,
    /// Datagrams received but not taken by the consumer before shutdown.
    pub unconsumed: u64,
    /// Per receive thread.
    pub per_thread: Vec<ThreadStats>,
}

impl Stats {
    /// Every datagram the receive threads dropped, for whatever reason, after the kernel.
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
        writeln!(
            f,
            "received {} datagrams ({} bytes), delivered {} ({} payload bytes)",
            self.received, self.bytes, self.delivered, self.delivered_bytes
        )?;
        writeln!(
            f,
            "kernel drops {}, overflow {}, truncated {}, rejected {}, malformed {}, skipped {}",
            self.kernel_drops,
            self.overflow,
            self.truncated,
            self.rejected,
            self.malformed,
            self.skipped
        )?;
        write!(
            f,
            "missed frames {}, duplicates {}, late {}, reordered {}, resyncs {}",
            self.missed, self.duplicates, self.late, self.reordered, self.resyncs
        )?;
        if self.per_thread.len() > 1 {
            for t in &self.per_thread {
                write!(
                    f,
                    "\n  thread {}: received {}, kernel drops {}, overflow {}",
                    t.thread, t.received, t.kernel_drops, t.overflow
                )?;
            }
        }
        Ok(())
    }
}
