//! Preallocated datagram buffers of one receive thread and the two single-producer
//! single-consumer index rings (`rtrb`) through which their ownership moves: ready slots from
//! the receive thread to the consumer, free slots back.
//!
//! Ownership rule: whoever popped slot `i` from a ring last (and has not pushed it since) is
//! the only one that touches its bytes and metadata. `rtrb` publishes a push with release
//! ordering and observes it with acquire ordering, so the writes of the previous owner are
//! visible to the next one.

use std::cell::UnsafeCell;
use std::sync::Arc;

use super::meta::DatagramMeta;

/// The taking end of a ring of returned items (free slots, empty buffers) that hands them
/// out most recently returned first. The ring is FIFO; taking from it in order would cycle
/// through everything in circulation (the engine's whole 73 MB pool) and make the kernel's
/// copy write to memory that left the CPU's cache (it cost the engine half again the copy
/// time of the bare loop; docs/PERFORMANCE.md). Returned items move onto a stack instead and
/// are taken from its top.
///
/// [`in_order`](Self::in_order) hands them out in the order they were returned instead: for
/// buffers that are consecutive windows of one memory (FutureSDR's circular buffer), where
/// the stream must go on in the next window.
pub(crate) struct Recycled<T> {
    ring: rtrb::Consumer<T>,
    /// Taken from the back (a stack), or from the front when `in_order`.
    hot: std::collections::VecDeque<T>,
    in_order: bool,
}

impl<T> Recycled<T> {
    pub(crate) fn new(ring: rtrb::Consumer<T>) -> Self {
        let hot = std::collections::VecDeque::with_capacity(ring.buffer().capacity());
        Recycled {
            ring,
            hot,
            in_order: false,
        }
    }

    /// Items handed out in the order they were returned (see the type's documentation).
    pub(crate) fn in_order(ring: rtrb::Consumer<T>) -> Self {
        Recycled {
            in_order: true,
            ..Self::new(ring)
        }
    }

    /// Moves everything returned so far onto the stack.
    fn collect(&mut self) {
        let n = self.ring.slots();
        if n > 0
            && let Ok(chunk) = self.ring.read_chunk(n)
        {
            self.hot.extend(chunk);
        }
    }

    /// The most items the ring holds.
    pub(crate) fn capacity(&self) -> usize {
        self.ring.buffer().capacity()
    }

    /// Items held or returned and not taken yet.
    pub(crate) fn len(&self) -> usize {
        self.hot.len() + self.ring.slots()
    }

    /// The most recently returned item (in order: the first returned), if any.
    pub(crate) fn take(&mut self) -> Option<T> {
        self.collect();
        if self.in_order {
            self.hot.pop_front()
        } else {
            self.hot.pop_back()
        }
    }

    /// Puts back items taken and not used, in the order they were taken: the first of them
    /// is the next one taken (in order; on the stack the last given ends on top).
    pub(crate) fn put_back(&mut self, items: impl Iterator<Item = T>) {
        if self.in_order {
            let items: Vec<T> = items.collect();
            for item in items.into_iter().rev() {
                self.hot.push_front(item);
            }
        } else {
            self.hot.extend(items);
        }
    }

    /// Appends up to `n` items to `out`, the most recently returned first (in order: the
    /// first returned first).
    pub(crate) fn take_into(&mut self, n: usize, out: &mut Vec<T>) {
        self.collect();
        let n = n.min(self.hot.len());
        if self.in_order {
            out.extend(self.hot.drain(..n));
        } else {
            let from = self.hot.len() - n;
            out.extend(self.hot.drain(from..).rev());
        }
    }
}

/// The receive thread's ends of one pool's rings.
pub(crate) struct ReceiverEnd {
    /// Ready slots, towards the consumer.
    pub(crate) ready: rtrb::Producer<u32>,
    /// Free slots, back from the consumer, the most recently freed first.
    pub(crate) free: Recycled<u32>,
}

/// The consumer's ends of one pool's rings.
pub(crate) struct ConsumerEnd {
    pub(crate) ready: rtrb::Consumer<u32>,
    pub(crate) free: rtrb::Producer<u32>,
}

/// `slots` buffers of `slot_size` bytes and their metadata.
pub(crate) struct SlotPool {
    base: *mut u8,
    total: usize,
    slot_size: usize,
    meta: Box<[UnsafeCell<DatagramMeta>]>,
}

// SAFETY: the pool's memory is only touched through slot indices whose ownership is handed
// over through the rings (see the module documentation), so no two threads access one slot
// at the same time; the pointer itself is never reassigned.
// Checked by: `pool_starts_with_every_slot_free_and_rings_pass_ownership` and
// `ownership_moves_across_threads_in_order` under Miri.
unsafe impl Send for SlotPool {}
// SAFETY: as above.
// Checked by: `pool_starts_with_every_slot_free_and_rings_pass_ownership` and
// `ownership_moves_across_threads_in_order` under Miri.
unsafe impl Sync for SlotPool {}

impl SlotPool {
    /// A pool with every slot free (in the free ring, owned by the receive thread).
    pub(crate) fn new(slots: usize, slot_size: usize) -> (Arc<SlotPool>, ReceiverEnd, ConsumerEnd) {
        let slots = slots.clamp(1, u32::MAX as usize);
        let total = slots * slot_size;
        // A non-zero fill makes the allocator write every page now: a zeroed allocation
        // would be faulted in page by page while the first datagrams arrive.
        let mem: Box<[u8]> = vec![0x5au8; total].into_boxed_slice();
        let base = Box::into_raw(mem) as *mut u8;
        let pool = Arc::new(SlotPool {
            base,
            total,
            slot_size,
            meta: (0..slots)
                .map(|_| UnsafeCell::new(DatagramMeta::default()))
                .collect(),
        });
        let (ready_tx, ready_rx) = rtrb::RingBuffer::new(slots);
        let (mut free_tx, free_rx) = rtrb::RingBuffer::new(slots);
        for i in 0..slots {
            free_tx
                .push(i as u32)
                .expect("the free ring holds every slot");
        }
        (
            pool,
            ReceiverEnd {
                ready: ready_tx,
                free: Recycled::new(free_rx),
            },
            ConsumerEnd {
                ready: ready_rx,
                free: free_tx,
            },
        )
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
        // Checked by: `pool_starts_with_every_slot_free_and_rings_pass_ownership` and
        // `ownership_moves_across_threads_in_order` under Miri.
        unsafe { self.base.add(i as usize * self.slot_size) }
    }

    /// The filled part of slot `i`.
    ///
    /// # Safety
    /// The caller must own slot `i` (popped it and not pushed it since).
    pub(crate) unsafe fn data(&self, i: u32) -> &[u8] {
        // SAFETY: the caller owns the slot; its metadata says how much of it was written, and
        // both are clamped to the slot.
        // Checked by: `pool_starts_with_every_slot_free_and_rings_pass_ownership` and
        // `ownership_moves_across_threads_in_order` under Miri.
        unsafe {
            let meta = &*self.meta[i as usize].get();
            let offset = meta.offset.min(self.slot_size);
            let len = meta.len.min(self.slot_size - offset);
            std::slice::from_raw_parts(self.buf_ptr(i).add(offset), len)
        }
    }

    /// The bytes of slot `i` after `offset`, `len` of them at most (clamped to the slot).
    ///
    /// # Safety
    /// The caller must own slot `i` and the kernel must have written those bytes.
    pub(crate) unsafe fn bytes(&self, i: u32, offset: usize, len: usize) -> &[u8] {
        let offset = offset.min(self.slot_size);
        let len = len.min(self.slot_size - offset);
        // SAFETY: within the slot (clamped above); the caller owns it.
        // Checked by: `pool_starts_with_every_slot_free_and_rings_pass_ownership` and
        // `ownership_moves_across_threads_in_order` under Miri.
        unsafe { std::slice::from_raw_parts(self.buf_ptr(i).add(offset), len) }
    }

    /// Metadata of slot `i`.
    ///
    /// # Safety
    /// The caller must own slot `i`.
    pub(crate) unsafe fn meta(&self, i: u32) -> &DatagramMeta {
        // SAFETY: the caller owns the slot, so nobody writes the metadata meanwhile.
        // Checked by: `pool_starts_with_every_slot_free_and_rings_pass_ownership` and
        // `ownership_moves_across_threads_in_order` under Miri.
        unsafe { &*self.meta[i as usize].get() }
    }

    /// Writes the metadata of slot `i`.
    ///
    /// # Safety
    /// The caller must own slot `i`.
    pub(crate) unsafe fn set_meta(&self, i: u32, meta: DatagramMeta) {
        // SAFETY: the caller owns the slot, so nobody reads the metadata meanwhile.
        // Checked by: `pool_starts_with_every_slot_free_and_rings_pass_ownership` and
        // `ownership_moves_across_threads_in_order` under Miri.
        unsafe { *self.meta[i as usize].get() = meta };
    }
}

impl Drop for SlotPool {
    fn drop(&mut self) {
        // SAFETY: base came from Box::<[u8]>::into_raw with `total` bytes and is freed once.
        // Checked by: `pool_starts_with_every_slot_free_and_rings_pass_ownership` and
        // `ownership_moves_across_threads_in_order` under Miri.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.base, self.total,
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_starts_with_every_slot_free_and_rings_pass_ownership() {
        let (p, mut rx, mut cons) = SlotPool::new(10, 100);
        let mut seen: Vec<u32> = std::iter::from_fn(|| rx.free.take()).collect();
        seen.sort();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(p.slot_size(), 100);
        for i in seen {
            rx.ready.push(i).unwrap();
        }
        assert!(rx.ready.push(0).is_err(), "never more than every slot");
        assert_eq!(cons.ready.pop(), Ok(0));
        cons.free.push(0).unwrap();
        assert_eq!(rx.free.take(), Some(0));
    }

    #[test]
    fn the_most_recently_freed_slots_are_used_first() {
        let (_p, mut rx, mut cons) = SlotPool::new(1000, 8);
        // The receive thread takes a batch, the consumer frees it in delivery order.
        let mut batch = Vec::new();
        rx.free.take_into(4, &mut batch);
        assert_eq!(rx.free.len(), 996);
        for &s in &batch {
            rx.ready.push(s).unwrap();
        }
        let mut delivered = Vec::new();
        while let Ok(s) = cons.ready.pop() {
            delivered.push(s);
            cons.free.push(s).unwrap();
        }
        assert_eq!(rx.free.len(), 1000);
        // The next batch reuses those four, the last freed first, not the 996 slots that
        // were never touched (which a FIFO would hand out next).
        let mut next = Vec::new();
        rx.free.take_into(4, &mut next);
        delivered.reverse();
        assert_eq!(next, delivered);
        // Asking for more than is free gives what there is.
        let mut all = Vec::new();
        rx.free.take_into(5000, &mut all);
        assert_eq!(all.len(), 996);
        assert_eq!(rx.free.take(), None);
    }

    #[test]
    fn ownership_moves_across_threads_in_order() {
        let (p, mut rx, mut cons) = SlotPool::new(64, 8);
        let n = crate::testing::sweep(200_000, 500) as u32;
        let pool = p.clone();
        let t = std::thread::spawn(move || {
            for k in 0..n {
                let slot = loop {
                    if let Some(s) = rx.free.take() {
                        break s;
                    }
                    std::hint::spin_loop();
                };
                // SAFETY: popped from the free ring: this thread owns the slot.
                // Checked by: `pool_starts_with_every_slot_free_and_rings_pass_ownership` and
                // `ownership_moves_across_threads_in_order` under Miri.
                unsafe {
                    std::ptr::copy_nonoverlapping(k.to_le_bytes().as_ptr(), pool.buf_ptr(slot), 4);
                    pool.set_meta(
                        slot,
                        DatagramMeta {
                            len: 4,
                            ..Default::default()
                        },
                    );
                }
                rx.ready.push(slot).unwrap();
            }
        });
        let mut expect = 0;
        while expect < n {
            if let Ok(slot) = cons.ready.pop() {
                // SAFETY: popped from the ready ring: the consumer owns the slot.
                // Checked by: `pool_starts_with_every_slot_free_and_rings_pass_ownership` and
                // `ownership_moves_across_threads_in_order` under Miri.
                let v = u32::from_le_bytes(unsafe { p.data(slot) }.try_into().unwrap());
                assert_eq!(v, expect);
                expect += 1;
                cons.free.push(slot).unwrap();
            }
        }
        t.join().unwrap();
    }
}
