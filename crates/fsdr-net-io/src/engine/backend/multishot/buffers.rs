//! The memory the `uring-multishot` backend lends the kernel: the provided-buffer ring and
//! the overflow buffers.

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;

/// A provided-buffer ring in anonymous memory shared with the kernel.
pub(super) struct BufRing {
    pub(super) base: *mut BufRingEntry,
    bytes: usize,
    mask: u16,
    tail: u16,
}

impl BufRing {
    pub(super) fn new(entries: u16) -> io::Result<Self> {
        let bytes = entries as usize * std::mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping has no preconditions; the result is checked.
        // Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            base: base.cast(),
            bytes,
            mask: entries - 1,
            tail: 0,
        })
    }

    /// Adds a buffer (visible to the kernel after `publish`).
    pub(super) fn push(&mut self, addr: *mut u8, len: usize, bid: u16) {
        // SAFETY: the index is masked into the mapping; entries past the kernel's head are
        // ours to write until the tail is published.
        // Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
        // Kernel writes (freed memory poisoned and watched):
        // `uring_multishot_engine_stops_under_traffic_without_a_write_after_free`.
        let entry = unsafe { &mut *self.base.add((self.tail & self.mask) as usize) };
        entry.set_addr(addr as u64);
        entry.set_len(len as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    pub(super) fn publish(&self) {
        // SAFETY: the tail field lives inside the first entry of the mapping and is only
        // written by us; the kernel reads it, hence the release store.
        // Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
        // Kernel writes (freed memory poisoned and watched):
        // `uring_multishot_engine_stops_under_traffic_without_a_write_after_free`.
        unsafe {
            let tail = BufRingEntry::tail(self.base) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: base/bytes describe the mapping made in `new`; `Receiver::run` unregisters
        // it first, or leaks this value when the kernel may still use it.
        // Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
        // Kernel writes (freed memory poisoned and watched):
        // `uring_multishot_engine_stops_under_traffic_without_a_write_after_free`.
        unsafe {
            libc::munmap(self.base.cast(), self.bytes);
        }
    }
}

// SAFETY: the ring memory is owned by this value and used by one thread at a time.
// Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
unsafe impl Send for BufRing {}

/// The overflow buffers, as raw memory: the kernel writes into the ones in the ring while
/// this thread touches others, so no Rust reference may ever span them all (a `&mut [u8]` of
/// the whole area would claim what the kernel is writing). Only a buffer the kernel handed
/// back is read, through a slice of just that buffer.
pub(super) struct OverflowArea {
    base: *mut u8,
    len: usize,
}

impl OverflowArea {
    pub(super) fn new(len: usize) -> Self {
        let b: Box<[u8]> = vec![0x5au8; len].into_boxed_slice();
        OverflowArea {
            base: Box::into_raw(b).cast::<u8>(),
            len,
        }
    }

    /// Overflow buffer `k` of `size` bytes.
    pub(super) fn buffer(&self, k: usize, size: usize) -> *mut u8 {
        assert!(
            (k + 1) * size <= self.len,
            "overflow buffer {k} out of range"
        );
        // SAFETY: in bounds (checked above) of the allocation made in `new`.
        // Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
        unsafe { self.base.add(k * size) }
    }
}

impl Drop for OverflowArea {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the boxed slice leaked in `new`, freed once, here;
        // `Receiver::run` forgets the receiver (and this area) instead of dropping it while
        // the kernel may still write into it.
        // Checked by: `uring_multishot_accounts_for_every_datagram` (ASan).
        // Kernel writes (freed memory poisoned and watched):
        // `uring_multishot_engine_stops_under_traffic_without_a_write_after_free`.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.base, self.len)) });
    }
}
