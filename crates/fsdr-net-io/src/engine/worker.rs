//! The part of a receive thread that every backend shares: taking free slots, classifying
//! what the kernel returned (truncated, rejected, malformed, non-data, deliverable), counting,
//! publishing to the consumer, and the thread set-up (pinning, priority).

use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{EngineError, Shared, ThreadOptions};
use crate::format::{Format, PacketClass};
use crate::ring::{Arrival, ArrivalClock, DatagramMeta, SlotPool};
use crate::socket::SourceFilter;
use crate::stats::ThreadCounters;
use crate::sys::{self, RecvMeta};

/// Per-thread receive state shared by all backends.
pub(crate) struct Worker {
    pub(crate) index: u16,
    pub(crate) shared: Arc<Shared>,
    format: Format,
    filter: SourceFilter,
    /// Free slots this thread owns and has not used yet.
    pub(crate) stash: Vec<u32>,
    /// Slots taken for a batch that came back unused or were recycled.
    keep: Vec<u32>,
    /// Overflow buffers, `batch` slots of `slot_size` bytes.
    scratch: Box<[u8]>,
    published: bool,
    // Counts accumulated over a batch, flushed by `publish`.
    received: u64,
    bytes: u64,
    overflow: u64,
    truncated: u64,
    rejected: u64,
    malformed: u64,
    skipped: u64,
    kernel_drops: Option<u32>,
}

impl Worker {
    pub(crate) fn new(index: usize, shared: Arc<Shared>, batch: usize) -> Self {
        let slot_size = shared.pools[index].slot_size();
        Self {
            index: index as u16,
            format: shared.format,
            filter: shared.filter.clone(),
            shared,
            stash: Vec::with_capacity(batch),
            keep: Vec::with_capacity(batch),
            scratch: vec![0x5au8; batch.max(1) * slot_size].into_boxed_slice(),
            published: false,
            received: 0,
            bytes: 0,
            overflow: 0,
            truncated: 0,
            rejected: 0,
            malformed: 0,
            skipped: 0,
            kernel_drops: None,
        }
    }

    pub(crate) fn pool(&self) -> &SlotPool {
        &self.shared.pools[self.index as usize]
    }

    fn counters(&self) -> &ThreadCounters {
        &self.shared.counters.threads[self.index as usize]
    }

    pub(crate) fn stopping(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire)
    }

    /// Tops the stash up to `n` free slots (fewer when the consumer is behind).
    pub(crate) fn fill_stash(&mut self, n: usize) -> usize {
        while self.stash.len() < n {
            match self.pool().free.pop() {
                Some(i) => self.stash.push(i),
                None => break,
            }
        }
        self.stash.len().min(n)
    }

    /// Pointer to overflow buffer `i`.
    pub(crate) fn scratch_ptr(&mut self, i: usize) -> *mut u8 {
        let size = self.pool().slot_size();
        self.scratch[i * size..].as_mut_ptr()
    }

    fn note_kernel(&mut self, meta: &RecvMeta) {
        self.received += 1;
        self.bytes += meta.len as u64;
        if let Some(d) = meta.kernel_drops {
            self.kernel_drops = Some(d);
        }
    }

    /// Handles a datagram received into a scratch buffer: counted as overflow.
    pub(crate) fn overflowed(&mut self, meta: &RecvMeta) {
        self.note_kernel(meta);
        self.overflow += 1;
    }

    /// Handles a datagram received into slot `slot`. Returns true when the slot went to the
    /// consumer, false when it stays with this thread (datagram dropped and counted).
    pub(crate) fn complete(&mut self, slot: u32, meta: &RecvMeta, now_ns: u64) -> bool {
        self.complete_at(slot, 0, meta, now_ns)
    }

    /// Like [`Worker::complete`] for a datagram that starts `offset` bytes into its slot.
    pub(crate) fn complete_at(
        &mut self,
        slot: u32,
        offset: usize,
        meta: &RecvMeta,
        now_ns: u64,
    ) -> bool {
        self.note_kernel(meta);
        if meta.truncated {
            self.truncated += 1;
            return false;
        }
        if !self.filter.accepts(meta.source) {
            self.rejected += 1;
            return false;
        }
        let pool = &self.shared.pools[self.index as usize];
        if offset + meta.len > pool.slot_size() {
            // Cannot happen with a correct backend; never read past the slot.
            self.truncated += 1;
            return false;
        }
        // SAFETY: this thread owns `slot` (taken from the free ring, not yet published), and
        // the kernel wrote `meta.len` bytes into it at `offset` (bounds checked above).
        let bytes = unsafe { std::slice::from_raw_parts(pool.buf_ptr(slot).add(offset), meta.len) };
        let info = match self.format.parse(bytes) {
            Ok(info) => info,
            Err(e) => {
                if self.malformed == 0 {
                    tracing::debug!(thread = self.index, error = %e, "malformed datagram");
                }
                self.malformed += 1;
                return false;
            }
        };
        if info.class != PacketClass::Data {
            self.skipped += 1;
            return false;
        }
        let arrival = match meta.timestamp_ns {
            Some(ns) => Arrival {
                ns,
                clock: ArrivalClock::Kernel,
            },
            None => Arrival {
                ns: now_ns,
                clock: ArrivalClock::Monotonic,
            },
        };
        let dm = DatagramMeta {
            len: meta.len,
            offset,
            source: meta
                .source
                .unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 0))),
            arrival,
            thread: self.index,
            info,
        };
        // SAFETY: this thread owns `slot` until the push below hands it over.
        unsafe { pool.set_meta(slot, dm) };
        let pushed = pool.ready.push(slot);
        debug_assert!(pushed, "ready ring sized for every slot");
        self.published = true;
        true
    }

    /// After a batch received into `stash[..used]`: keeps the slots that were not handed to
    /// the consumer. `consumed[i]` says whether slot `i` of the batch went out.
    pub(crate) fn retire_batch(&mut self, used: usize, consumed: impl Fn(usize) -> bool) {
        self.keep.clear();
        for i in 0..used {
            if !consumed(i) {
                self.keep.push(self.stash[i]);
            }
        }
        self.stash.drain(..used);
        self.stash.extend_from_slice(&self.keep);
    }

    /// Publishes counters and wakes the consumer if anything was handed over.
    pub(crate) fn publish(&mut self) {
        let c = &self.shared.counters.threads[self.index as usize];
        c.received.add(std::mem::take(&mut self.received));
        c.bytes.add(std::mem::take(&mut self.bytes));
        c.overflow.add(std::mem::take(&mut self.overflow));
        c.truncated.add(std::mem::take(&mut self.truncated));
        c.rejected.add(std::mem::take(&mut self.rejected));
        c.malformed.add(std::mem::take(&mut self.malformed));
        c.skipped.add(std::mem::take(&mut self.skipped));
        if let Some(d) = self.kernel_drops.take() {
            c.kernel_drops.set(u64::from(d).max(c.kernel_drops.get()));
        }
        if std::mem::take(&mut self.published) {
            self.shared.notify.notify();
        }
    }

    /// Reads the socket's drop counter directly (for idle periods and at exit).
    pub(crate) fn refresh_kernel_drops(&self, fd: RawFd) {
        if let Ok(d) = sys::socket_drops(fd) {
            let c = &self.counters().kernel_drops;
            c.set(u64::from(d).max(c.get()));
        }
    }
}

/// Starts receive thread `index`: applies pinning and priority first and reports the outcome
/// before running `body`, so that a set-up error reaches [`Engine::start`](super::Engine::start)
/// and the thread is joined.
pub(crate) fn spawn_receive_thread(
    index: usize,
    opts: &ThreadOptions,
    body: impl FnOnce() + Send + 'static,
) -> Result<std::thread::JoinHandle<()>, EngineError> {
    let opts = opts.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
    let handle = std::thread::Builder::new()
        .name(format!("fsdr-net-rx{index}"))
        .spawn(move || {
            let setup = setup_thread(&opts, index);
            let ok = setup.is_ok();
            let _ = ready_tx.send(setup);
            if ok {
                body();
            }
        })
        .map_err(EngineError::Spawn)?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        Err(_) => {
            let _ = handle.join();
            Err(EngineError::Spawn(std::io::Error::other(
                "receive thread exited during set-up",
            )))
        }
    }
}

/// Applies pinning and priority to the calling thread.
fn setup_thread(opts: &ThreadOptions, index: usize) -> Result<(), EngineError> {
    if let Some(cpu) = opts.cpus.get(index % opts.cpus.len().max(1)).copied() {
        sys::pin_current_thread(cpu).map_err(|source| EngineError::Pin { cpu, source })?;
    }
    if let Some(priority) = opts.fifo_priority {
        sys::set_fifo_priority(priority)
            .map_err(|source| EngineError::Priority { priority, source })?;
    }
    Ok(())
}
