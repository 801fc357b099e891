//! The part of a receive thread that every backend shares: taking free slots, classifying
//! what the kernel returned (truncated, rejected, malformed, non-data, deliverable), counting,
//! publishing to the consumer, and the thread set-up (pinning, priority).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use std::time::Duration;

use super::budget::Budget;
use super::classify;
use super::config::{Coalesce, EngineConfig, Overload, WakeSchedule};
use super::meta::{Arrival, Clocks, DatagramMeta};
use super::slots::{ReceiverEnd, SlotPool};
use super::{Shared, ThreadOptions};
use crate::Error;
use crate::format::{Format, PacketClass};
use crate::socket::SourceFilter;
use crate::stats::{LocalCounts, ThreadCounters};
use crate::sys::{self, RecvMeta};

/// How often a paused receive thread looks whether the consumer made room.
const PAUSE_CHECK: Duration = Duration::from_micros(250);

/// When to wake the consumer ([`Coalesce`]).
#[derive(Debug)]
struct Moderation {
    coalesce: Coalesce,
    /// Datagrams handed over since the last wake-up, and when the first of them was.
    pending: u64,
    first_ns: u64,
    last_wake_ns: u64,
}

impl Moderation {
    fn schedule(&self) -> WakeSchedule {
        self.coalesce
            .schedule(self.pending, self.first_ns, self.last_wake_ns)
    }
}

/// Per-thread receive state shared by all backends.
pub(crate) struct Worker {
    pub(crate) index: u16,
    pub(crate) shared: Arc<Shared>,
    pool: Arc<SlotPool>,
    end: ReceiverEnd,
    format: Format,
    filter: SourceFilter,
    /// Hand VRT context packets to the consumer instead of counting them as skipped.
    deliver_context: bool,
    /// Free slots set aside for the next receive (its first entries are used first).
    pub(crate) stash: Vec<u32>,
    /// Slots taken for a batch that came back unused or were recycled.
    keep: Vec<u32>,
    /// Overflow buffers, `batch` slots of `slot_size` bytes.
    scratch: Box<[u8]>,
    /// Counts accumulated over a batch, flushed by `publish`.
    pub(crate) counts: LocalCounts,
    /// A receive returned the empty, senderless result of `shutdown(SHUT_RD)`: the socket's
    /// queue was empty and the engine is stopping.
    pub(crate) shut_down: bool,
    /// Datagrams handed over since the last `publish`.
    new_items: u64,
    /// Slots lent to the kernel (the multishot backend's provided-buffer ring, the `uring`
    /// backend's receives in flight).
    pub(crate) lent: usize,
    moderation: Moderation,
    budget: Budget,
    overload: Overload,
    batch: usize,
    /// The consumer's own thread receives ([`Engine::start_inline`](super::Engine::start_inline)):
    /// there is nobody to wake.
    inline: bool,
    /// Drops counted outside the socket (an AF_XDP socket's), added to the socket's.
    pub(crate) extra_drops: u32,
}

impl Worker {
    pub(crate) fn new(
        index: usize,
        shared: Arc<Shared>,
        end: ReceiverEnd,
        cfg: &EngineConfig,
        batch: usize,
    ) -> Self {
        let pool = shared.pools[index].clone();
        let slot_size = pool.slot_size();
        let slots = pool.slots();
        Self {
            new_items: 0,
            lent: 0,
            moderation: Moderation {
                coalesce: cfg.coalesce,
                pending: 0,
                first_ns: 0,
                last_wake_ns: 0,
            },
            budget: Budget {
                budget_ns: cfg.latency_budget.map(|b| b.as_nanos() as u64),
                floor: (2 * cfg.batch).min(slots),
                slots,
                window_start: None,
                window_count: 0,
                cap: slots,
                last_drops: None,
                dropped: 0,
            },
            overload: cfg.overload,
            batch,
            index: index as u16,
            format: shared.format,
            filter: shared.filter.clone(),
            deliver_context: cfg.deliver_context,
            pool,
            end,
            shared,
            stash: Vec::with_capacity(batch),
            keep: Vec::with_capacity(batch),
            scratch: vec![0x5au8; batch.max(1) * slot_size].into_boxed_slice(),
            counts: LocalCounts::default(),
            shut_down: false,
            inline: false,
            extra_drops: 0,
        }
    }

    /// A worker driven by the consumer's thread: it hands datagrams over without waking
    /// anyone (and counts no wake-ups).
    pub(crate) fn for_inline(mut self) -> Self {
        self.inline = true;
        self
    }

    /// Whether `meta` is the wake-up of `shutdown(SHUT_RD)` rather than a datagram (a real
    /// datagram always has a sender); remembered in `shut_down`.
    fn shutdown_marker(&mut self, meta: &RecvMeta) -> bool {
        let marker = meta.len == 0 && meta.source.is_none() && !meta.truncated;
        self.shut_down |= marker;
        marker
    }

    pub(crate) fn pool(&self) -> &SlotPool {
        &self.pool
    }

    /// Another reference to the pool (to keep it alive on purpose).
    #[cfg(feature = "uring")]
    pub(crate) fn pool_arc(&self) -> Arc<SlotPool> {
        self.pool.clone()
    }

    fn counters(&self) -> &ThreadCounters {
        &self.shared.counters.threads[self.index as usize]
    }

    pub(crate) fn stopping(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire)
    }

    /// Takes one slot back from the consumer, if it returned one (beyond the stash: for the
    /// multishot ring, and for the datagrams of a coalesced receive that outnumber the slots
    /// set aside for it).
    pub(crate) fn take_free(&mut self) -> Option<u32> {
        self.end.free.take()
    }

    /// Free slots this thread owns or may take back now.
    fn free_slots(&self) -> usize {
        self.stash.len() + self.end.free.len()
    }

    /// Datagrams the consumer holds now (ready or being used; not those held for reordering).
    fn held_by_consumer(&self) -> usize {
        let held = self.pool.slots() - self.free_slots() - self.lent;
        // Not those held back for reordering: they go out only when more datagrams come.
        let reorder = self.shared.resume[self.index as usize]
            .reorder_held
            .load(Ordering::Relaxed);
        held.saturating_sub(reorder)
    }

    /// Slots this thread may receive into now: free ones, as far as the latency budget lets
    /// the consumer's queue grow.
    pub(crate) fn room(&self) -> usize {
        self.free_slots()
            .min(self.budget.cap.saturating_sub(self.held_by_consumer()))
    }

    /// Tops the stash up to `n` free slots; returns how many a receive may use (fewer when
    /// the consumer is behind), never more than the stash holds.
    pub(crate) fn fill_stash(&mut self, n: usize) -> usize {
        if self.stash.len() < n {
            self.end
                .free
                .take_into(n - self.stash.len(), &mut self.stash);
        }
        // `room` counts the free ring too, which the consumer may have refilled since
        // `take_into` found it short: those slots are not in the stash.
        self.room().min(n).min(self.stash.len())
    }

    /// Whether the consumer holds as many datagrams as the latency budget lets it: then no
    /// free slot is for lack of the consumer's returns, not because the free slots are lent
    /// to receives in flight.
    #[cfg(feature = "uring")]
    pub(crate) fn consumer_behind(&self) -> bool {
        self.budget.cap.saturating_sub(self.held_by_consumer()) == 0
    }

    /// Whether the overload policy is to stop reading.
    pub(crate) fn pauses(&self) -> bool {
        self.overload == Overload::Pause
    }

    /// From now on, when the consumer holds every slot, read into overflow buffers (counted
    /// as `overflow`) instead of pausing: at a stop, what the kernel still holds is counted,
    /// not freed unseen when the socket closes.
    pub(crate) fn discard_from_now(&mut self) {
        self.overload = Overload::Discard;
    }

    /// Counts a pause of a backend that waits on its own timer (io_uring), and wakes the
    /// consumer for what is ready.
    #[cfg(feature = "uring")]
    pub(crate) fn note_paused(&mut self) {
        self.wake(sys::monotonic_ns());
        self.counts.paused += 1;
        self.counts
            .flush(&self.shared.counters.threads[self.index as usize]);
    }

    /// The consumer is behind and the policy is to pause: wakes it for what is ready, then
    /// waits until it has made room for a batch (or the engine stops).
    pub(crate) fn wait_for_room(&mut self) {
        self.wait_for_room_and_free(1);
    }

    /// Like [`Worker::wait_for_room`], and also until `min_free` slots are free (a coalesced
    /// receive needs its whole entry).
    pub(crate) fn wait_for_room_and_free(&mut self, min_free: usize) {
        self.wake(sys::monotonic_ns());
        self.counts.paused += 1;
        self.counts
            .flush(&self.shared.counters.threads[self.index as usize]);
        let signal = &self.shared.resume[self.index as usize];
        signal.paused.store(true, Ordering::Release);
        let want = self.batch.min(self.budget.cap).max(1);
        let min_free = min_free.min(self.pool.slots());
        while !self.stopping() && (self.room() < want || self.free_slots() < min_free) {
            signal.notify.wait_timeout(PAUSE_CHECK);
            // The rate keeps being measured against the clock, so that a budget set while
            // the stream was faster does not keep the queue short for ever.
            self.budget.arrived(0, sys::monotonic_ns());
        }
        signal.paused.store(false, Ordering::Release);
    }

    /// Overflow buffers the worker has: entries `0..scratch_slots()` of a receive may go to
    /// [`Worker::scratch_ptr`].
    pub(crate) fn scratch_slots(&self) -> usize {
        self.scratch.len() / self.pool.slot_size().max(1)
    }

    /// Pointer to overflow buffer `i`.
    pub(crate) fn scratch_ptr(&mut self, i: usize) -> *mut u8 {
        let size = self.pool.slot_size();
        self.scratch[i * size..].as_mut_ptr()
    }

    fn note_kernel(&mut self, meta: &RecvMeta) {
        self.counts.received += 1;
        self.counts.bytes += meta.len as u64;
    }

    /// Handles a datagram received into a scratch buffer: counted as overflow.
    pub(crate) fn overflowed(&mut self, meta: &RecvMeta) {
        if self.shutdown_marker(meta) {
            return;
        }
        self.note_kernel(meta);
        self.counts.overflow += 1;
        // Offered, though not handed over: the budget's rate counts it, or a budget that
        // measured a low rate once would discard the rest of a faster stream for good.
        self.budget.dropped += 1;
    }

    /// Handles a datagram received into slot `slot`. Returns true when the slot went to the
    /// consumer, false when it stays with this thread (datagram dropped and counted).
    pub(crate) fn complete(&mut self, slot: u32, meta: &RecvMeta, at: Clocks) -> bool {
        self.complete_at(slot, 0, meta, at)
    }

    /// Like [`Worker::complete`] for a datagram that starts `offset` bytes into its slot.
    pub(crate) fn complete_at(
        &mut self,
        slot: u32,
        offset: usize,
        meta: &RecvMeta,
        at: Clocks,
    ) -> bool {
        if self.shutdown_marker(meta) {
            return false;
        }
        self.note_kernel(meta);
        if offset + meta.len > self.pool.slot_size() {
            // Cannot happen with a correct backend; never read past the slot.
            self.counts.truncated += 1;
            return false;
        }
        // SAFETY: this thread owns `slot` (taken from the free ring, not yet published), and
        // the kernel wrote `meta.len` bytes into it at `offset` (bounds checked above).
        // Checked by: `truncated_malformed_and_non_data_are_counted_not_delivered` and
        // `mio_accounts_for_every_datagram` under ASan.
        // Kernel writes (freed memory poisoned and watched):
        // `socket_engines_stop_under_traffic_without_a_write_after_free`.
        let bytes = unsafe { self.pool.bytes(slot, offset, meta.len) };
        let info = match classify::admit(meta, &self.filter, self.format, bytes) {
            Ok(info) => info,
            Err(refused) => {
                refused.count(&mut self.counts);
                return false;
            }
        };
        let wanted = match info.class {
            PacketClass::Data => true,
            PacketClass::Context => self.deliver_context,
            PacketClass::NonData => false,
        };
        if !wanted {
            self.counts.skipped += 1;
            return false;
        }
        let dm = DatagramMeta {
            len: meta.len,
            offset,
            source: meta
                .source
                .unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 0))),
            arrival: Arrival::new(meta.timestamp_ns, at),
            thread: self.index,
            info,
        };
        // SAFETY: this thread owns `slot` until the push below hands it over.
        // Checked by: `truncated_malformed_and_non_data_are_counted_not_delivered` and
        // `mio_accounts_for_every_datagram` under ASan.
        unsafe { self.pool.set_meta(slot, dm) };
        let pushed = self.end.ready.push(slot);
        debug_assert!(pushed.is_ok(), "ready ring sized for every slot");
        self.new_items += 1;
        true
    }

    /// After a batch received into `stash[..used]`: every slot that was not handed to the
    /// consumer goes back onto the hot stack, the ones the kernel just wrote (and that were
    /// dropped) on top. `consumed[i]` says whether slot `i` of the batch went out. A stash
    /// that kept its unused slots would cycle through them: with UDP GRO it sets aside up to
    /// 512 slots (4.6 MB) per receive, and the copy would go to memory that left the cache.
    pub(crate) fn retire_batch(&mut self, used: usize, consumed: impl Fn(usize) -> bool) {
        self.keep.clear();
        for i in 0..used {
            if !consumed(i) {
                self.keep.push(self.stash[i]);
            }
        }
        self.end
            .free
            .put_back(self.stash[used..].iter().rev().copied());
        self.end.free.put_back(self.keep.iter().rev().copied());
        self.stash.clear();
    }

    /// After a receive call: publishes the counters, and wakes the consumer now or says by
    /// when it must be woken ([`Coalesce`]); `None` when nothing waits for a wake-up.
    pub(crate) fn publish(&mut self, now: u64) -> Option<u64> {
        let new = std::mem::take(&mut self.new_items);
        if self.budget.closes(now) {
            self.poll_kernel_drops();
        }
        self.budget.arrived(new, now);
        if self.inline {
            self.counts
                .flush(&self.shared.counters.threads[self.index as usize]);
            return None;
        }
        if new > 0 {
            if self.moderation.pending == 0 {
                self.moderation.first_ns = now;
            }
            self.moderation.pending += new;
        }
        if self.moderation.pending == 0 {
            self.counts
                .flush(&self.shared.counters.threads[self.index as usize]);
            return None;
        }
        let due = self.moderation.schedule();
        if now >= due.on_receive {
            self.wake(now);
            return None;
        }
        self.counts
            .flush(&self.shared.counters.threads[self.index as usize]);
        Some(due.at_latest)
    }

    /// Wakes the consumer for whatever was handed over (a deadline expired, or the thread is
    /// about to wait or stop).
    pub(crate) fn wake(&mut self, now: u64) {
        self.moderation.pending += std::mem::take(&mut self.new_items);
        if self.moderation.pending > 0 {
            self.moderation.pending = 0;
            self.moderation.last_wake_ns = now;
            self.counts.wakeups += 1;
            self.counts
                .flush(&self.shared.counters.threads[self.index as usize]);
            self.shared.notify.notify();
        } else {
            self.counts
                .flush(&self.shared.counters.threads[self.index as usize]);
        }
    }

    /// The kernel's drop counter of this thread's socket (`SO_MEMINFO`, through the
    /// engine's second descriptor of it): the one way the engine reads it.
    fn read_kernel_drops(&self) -> Option<u32> {
        let socket = sys::socket_drops(self.shared.probes.get(usize::from(self.index))?).ok()?;
        Some(socket.wrapping_add(self.extra_drops))
    }

    /// Reads the drop counter into the counters and the latency budget's rate: once per
    /// rate window, a system call per 10 ms instead of a control message per datagram.
    fn poll_kernel_drops(&mut self) {
        if let Some(d) = self.read_kernel_drops() {
            self.counts.kernel_drops = self.counts.kernel_drops.max(u64::from(d));
            self.budget.kernel_drops(d);
        }
    }

    /// Reads the drop counter straight into the shared counters (idle periods, exit).
    pub(crate) fn refresh_kernel_drops(&self) {
        if let Some(d) = self.read_kernel_drops() {
            self.counters().kernel_drops.max(u64::from(d));
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
) -> Result<std::thread::JoinHandle<()>, Error> {
    let opts = opts.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
    let handle = std::thread::Builder::new()
        .name(format!("{}{index}", super::RECEIVE_THREAD_PREFIX))
        .spawn(move || {
            let setup = setup_thread(&opts, index);
            let ok = setup.is_ok();
            let _ = ready_tx.send(setup);
            if ok {
                body();
            }
        })
        .map_err(Error::Spawn)?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        Err(_) => {
            let _ = handle.join();
            Err(Error::Spawn(std::io::Error::other(
                "receive thread exited during set-up",
            )))
        }
    }
}

/// Applies pinning and priority to the calling thread.
pub(crate) fn setup_thread(opts: &ThreadOptions, index: usize) -> Result<(), Error> {
    if let Some(cpu) = opts.cpus.get(index % opts.cpus.len().max(1)).copied() {
        sys::pin_current_thread(cpu).map_err(|source| Error::Pin { cpu, source })?;
    }
    if let Some(priority) = opts.fifo_priority {
        sys::set_fifo_priority(priority).map_err(|source| Error::Priority { priority, source })?;
    }
    // Deferred wake-ups are timed in tens of microseconds: Linux's default slack of 50 µs
    // would stretch them.
    sys::set_timer_slack_ns(5_000);
    Ok(())
}
