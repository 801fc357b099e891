//! Lock-free hand-off between receive threads and the consumer: a pool of preallocated slots
//! per receive thread, two single-producer/single-consumer index rings per pool (ready slots
//! towards the consumer, free slots back), and a [`Notify`] through which the consumer sleeps
//! without spinning, as a thread or as an async task.

use std::cell::UnsafeCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::format::PacketInfo;

/// Keeps hot atomics of different threads on different cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A bounded single-producer single-consumer queue of `u32` slot indices.
///
/// Exactly one thread may push and exactly one (other) thread may pop; the engine guarantees
/// that by construction. Capacity is a power of two at least as large as the number of slots
/// it will ever hold, so that pushes of slot indices never fail.
#[derive(Debug)]
pub(crate) struct IndexRing {
    buf: Box<[AtomicU32]>,
    mask: usize,
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<AtomicUsize>,
}

impl IndexRing {
    pub(crate) fn with_capacity(n: usize) -> Self {
        let cap = n.max(2).next_power_of_two();
        Self {
            buf: (0..cap).map(|_| AtomicU32::new(0)).collect(),
            mask: cap - 1,
            head: CachePadded(AtomicUsize::new(0)),
            tail: CachePadded(AtomicUsize::new(0)),
        }
    }

    /// Producer side. Returns false when full.
    pub(crate) fn push(&self, v: u32) -> bool {
        let t = self.tail.load(Ordering::Relaxed);
        if t.wrapping_sub(self.head.load(Ordering::Acquire)) > self.mask {
            return false;
        }
        self.buf[t & self.mask].store(v, Ordering::Relaxed);
        self.tail.store(t.wrapping_add(1), Ordering::Release);
        true
    }

    /// Consumer side: the next entry without taking it.
    pub(crate) fn peek(&self) -> Option<u32> {
        let h = self.head.load(Ordering::Relaxed);
        if h == self.tail.load(Ordering::Acquire) {
            return None;
        }
        Some(self.buf[h & self.mask].load(Ordering::Relaxed))
    }

    /// Consumer side.
    pub(crate) fn pop(&self) -> Option<u32> {
        let h = self.head.load(Ordering::Relaxed);
        if h == self.tail.load(Ordering::Acquire) {
            return None;
        }
        let v = self.buf[h & self.mask].load(Ordering::Relaxed);
        self.head.store(h.wrapping_add(1), Ordering::Release);
        Some(v)
    }
}

/// How a datagram's arrival time was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrivalClock {
    /// Kernel receive timestamp (`SO_TIMESTAMPNS`), CLOCK_REALTIME, ns since the Unix epoch.
    Kernel,
    /// CLOCK_MONOTONIC read by the receive thread when the datagram (batch) was received.
    Monotonic,
}

/// Arrival time of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Nanoseconds on `clock`.
    pub ns: u64,
    /// Which clock.
    pub clock: ArrivalClock,
}

/// Metadata of a received datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramMeta {
    /// Datagram length in bytes.
    pub len: usize,
    /// Where the datagram starts in its slot (io_uring multishot puts a header first).
    pub offset: usize,
    /// Sender.
    pub source: std::net::SocketAddr,
    /// Arrival time.
    pub arrival: Arrival,
    /// Index of the receive thread that got it.
    pub thread: u16,
    /// What the format parser found.
    pub info: PacketInfo,
}

impl Default for DatagramMeta {
    fn default() -> Self {
        Self {
            len: 0,
            offset: 0,
            source: std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
            arrival: Arrival {
                ns: 0,
                clock: ArrivalClock::Monotonic,
            },
            thread: 0,
            info: PacketInfo::data(0..0),
        }
    }
}

/// Preallocated datagram buffers and their metadata, owned by one receive thread.
///
/// Ownership of slot `i` moves between the receive thread and the consumer through the
/// [`IndexRing`]s: whoever popped `i` last (and has not pushed it since) is the only one that
/// touches its buffer and metadata.
pub(crate) struct SlotPool {
    base: *mut u8,
    total: usize,
    slot_size: usize,
    meta: Box<[UnsafeCell<DatagramMeta>]>,
    /// Ready slots, receive thread → consumer.
    pub(crate) ready: IndexRing,
    /// Free slots, consumer → receive thread.
    pub(crate) free: IndexRing,
}

// SAFETY: the pool's memory is only touched through slot indices whose ownership is handed
// over through the rings (Release on push, Acquire on pop), so no two threads access one slot
// at the same time.
unsafe impl Send for SlotPool {}
// SAFETY: as above.
unsafe impl Sync for SlotPool {}

impl SlotPool {
    /// `slots` buffers of `slot_size` bytes, all initially free.
    pub(crate) fn new(slots: usize, slot_size: usize) -> Self {
        let slots = slots.clamp(1, u32::MAX as usize);
        let total = slots * slot_size;
        // A non-zero fill makes the allocator write every page now: a zeroed allocation
        // would be faulted in page by page while the first datagrams arrive.
        let mem: Box<[u8]> = vec![0x5au8; total].into_boxed_slice();
        let base = Box::into_raw(mem) as *mut u8;
        let pool = Self {
            base,
            total,
            slot_size,
            meta: (0..slots)
                .map(|_| UnsafeCell::new(DatagramMeta::default()))
                .collect(),
            ready: IndexRing::with_capacity(slots),
            free: IndexRing::with_capacity(slots),
        };
        for i in 0..slots {
            pool.free.push(i as u32);
        }
        pool
    }

    pub(crate) fn slots(&self) -> usize {
        self.meta.len()
    }

    pub(crate) fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Pointer to the buffer of slot `i`.
    pub(crate) fn buf_ptr(&self, i: u32) -> *mut u8 {
        assert!((i as usize) < self.slots());
        // SAFETY: i < slots, so the offset stays within the allocation of `total` bytes.
        unsafe { self.base.add(i as usize * self.slot_size) }
    }

    /// The filled part of slot `i`.
    ///
    /// # Safety
    /// The caller must own slot `i` (popped it and not pushed it since).
    pub(crate) unsafe fn data(&self, i: u32) -> &[u8] {
        // SAFETY: the caller owns the slot; its metadata says how much of it was written.
        unsafe {
            let meta = &*self.meta[i as usize].get();
            let offset = meta.offset.min(self.slot_size);
            let len = meta.len.min(self.slot_size - offset);
            std::slice::from_raw_parts(self.buf_ptr(i).add(offset), len)
        }
    }

    /// Metadata of slot `i`.
    ///
    /// # Safety
    /// The caller must own slot `i`.
    pub(crate) unsafe fn meta(&self, i: u32) -> &DatagramMeta {
        // SAFETY: the caller owns the slot, so nobody writes the metadata meanwhile.
        unsafe { &*self.meta[i as usize].get() }
    }

    /// Writes the metadata of slot `i`.
    ///
    /// # Safety
    /// The caller must own slot `i`.
    pub(crate) unsafe fn set_meta(&self, i: u32, meta: DatagramMeta) {
        // SAFETY: the caller owns the slot, so nobody reads the metadata meanwhile.
        unsafe { *self.meta[i as usize].get() = meta };
    }
}

impl Drop for SlotPool {
    fn drop(&mut self) {
        // SAFETY: base came from Box::<[u8]>::into_raw with `total` bytes and is freed once.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.base, self.total,
            )));
        }
    }
}

/// Wakes a consumer (a thread or an async task) when receive threads publish datagrams.
///
/// `notify` is cheap when the consumer is not waiting: a single atomic swap. A notification
/// that arrives while nobody waits is remembered, so no wake-up is lost.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use fsdr_net_io::Notify;
///
/// let n = Arc::new(Notify::new());
/// let n2 = n.clone();
/// std::thread::spawn(move || n2.notify());
/// assert!(n.wait_timeout(Duration::from_secs(5)));
/// ```
#[derive(Debug, Default)]
pub struct Notify {
    pending: AtomicBool,
    lock: Mutex<Option<Waker>>,
    cond: Condvar,
}

impl Notify {
    /// A notifier with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Signals the consumer.
    pub fn notify(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            let waker = {
                let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
                self.cond.notify_all();
                g.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        }
    }

    /// Consumes a pending notification, if any.
    pub fn take(&self) -> bool {
        self.pending.swap(false, Ordering::AcqRel)
    }

    /// Blocks the calling thread until notified or until `timeout` passes; true if notified.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        if self.take() {
            return true;
        }
        let deadline = std::time::Instant::now() + timeout;
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.take() {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            g = self
                .cond
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A future that completes at the next notification (at once if one is pending). It owns
    /// an `Arc`, so it is `'static` and can be handed to a runtime.
    pub fn notified(self: &Arc<Self>) -> Notified {
        Notified {
            notify: Arc::clone(self),
        }
    }
}

/// Future returned by [`Notify::notified`].
#[derive(Debug)]
pub struct Notified {
    notify: Arc<Notify>,
}

impl Future for Notified {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.notify.take() {
            return Poll::Ready(());
        }
        let mut g = self.notify.lock.lock().unwrap_or_else(|e| e.into_inner());
        if self.notify.take() {
            return Poll::Ready(());
        }
        *g = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_ring_fifo_and_full() {
        let r = IndexRing::with_capacity(4);
        for i in 0..4 {
            assert!(r.push(i));
        }
        assert!(!r.push(9));
        for i in 0..4 {
            assert_eq!(r.pop(), Some(i));
        }
        assert_eq!(r.pop(), None);
    }

    #[test]
    fn index_ring_across_threads_keeps_every_index_in_order() {
        let r = Arc::new(IndexRing::with_capacity(64));
        let p = r.clone();
        let n = 1_000_000u32;
        let t = std::thread::spawn(move || {
            for i in 0..n {
                while !p.push(i) {
                    std::hint::spin_loop();
                }
            }
        });
        let mut expect = 0;
        while expect < n {
            if let Some(v) = r.pop() {
                assert_eq!(v, expect);
                expect += 1;
            }
        }
        t.join().unwrap();
    }

    #[test]
    fn pool_starts_with_every_slot_free() {
        let p = SlotPool::new(10, 100);
        let mut seen: Vec<u32> = std::iter::from_fn(|| p.free.pop()).collect();
        seen.sort();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(p.slot_size(), 100);
    }

    #[test]
    fn notify_wakes_async_waiter() {
        struct W(std::sync::atomic::AtomicBool);
        impl std::task::Wake for W {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let n = Arc::new(Notify::new());
        let w = Arc::new(W(AtomicBool::new(false)));
        let waker = Waker::from(w.clone());
        let mut cx = Context::from_waker(&waker);
        let mut fut = n.notified();
        assert!(Pin::new(&mut fut).poll(&mut cx).is_pending());
        n.notify();
        assert!(w.0.load(Ordering::SeqCst));
        assert!(Pin::new(&mut fut).poll(&mut cx).is_ready());
        // Nothing pending any more.
        assert!(!n.wait_timeout(Duration::from_millis(1)));
    }
}
