//! What the `uring` backend lends the kernel: each receive operation's buffer ([`OpBuf`]: a
//! slot or its task's overflow buffer), counted while tokio-uring holds it ([`Lent`]), and
//! the cancel that ends every receive on the socket ([`cancel_all`]). The module
//! documentation of the backend says when the runtime may be dropped.

use std::cell::Cell;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::Arc;

use tokio_uring::buf::{IoBuf, IoBufMut};

use super::super::super::slots::SlotPool;

/// Where one receive operation's bytes go, owned by the operation for as long as
/// tokio-uring holds it.
pub(super) enum Target {
    /// A slot of the pool: the `Arc` keeps the pool's memory alive.
    Slot { _pool: Arc<SlotPool> },
    /// The task's overflow buffer.
    Overflow(Box<[u8]>),
}

/// The operations whose data tokio-uring holds: one per receive submitted, back when the
/// operation's buffer is dropped or taken apart after its completion. While it is above 0
/// the runtime must not be dropped.
#[derive(Clone, Default)]
pub(super) struct Lent(Rc<Cell<usize>>);

impl Lent {
    pub(super) fn out(&self) -> usize {
        self.0.get()
    }
}

/// One unit of [`Lent`], held by an operation's buffer.
struct LentOne(Lent);

impl LentOne {
    fn new(lent: &Lent) -> Self {
        lent.0.set(lent.0.get() + 1);
        LentOne(lent.clone())
    }
}

impl Drop for LentOne {
    fn drop(&mut self) {
        let c = &self.0.0;
        c.set(c.get() - 1);
    }
}

/// A buffer lent to one receive operation.
pub(super) struct OpBuf {
    pub(super) target: Target,
    ptr: *mut u8,
    cap: usize,
    init: usize,
    _lent: LentOne,
}

impl OpBuf {
    pub(super) fn slot(pool: Arc<SlotPool>, slot: u32, lent: &Lent) -> Self {
        let (ptr, cap) = (pool.buf_ptr(slot), pool.slot_size());
        OpBuf {
            target: Target::Slot { _pool: pool },
            ptr,
            cap,
            init: 0,
            _lent: LentOne::new(lent),
        }
    }

    pub(super) fn overflow(mut b: Box<[u8]>, lent: &Lent) -> Self {
        let (ptr, cap) = (b.as_mut_ptr(), b.len());
        OpBuf {
            target: Target::Overflow(b),
            ptr,
            cap,
            init: 0,
            _lent: LentOne::new(lent),
        }
    }
}

// SAFETY: `ptr` points at `cap` bytes owned through `target` (a slot of a pool this buffer
// holds an `Arc` of, which the receive thread took from the free ring and nobody else touches
// until it is handed over; or a boxed overflow buffer): they stay valid and in place for as
// long as the buffer lives, wherever tokio-uring moves it, and tokio-uring drops it only after
// the operation's completion: no operation is dropped in flight, and the runtime is dropped
// only once `Lent` is back to 0 (else kept for good). Miri cannot run io_uring.
// Checked by: `uring_engine_stops_under_traffic_without_a_write_after_free` and
// `a_panic_in_a_uring_receive_keeps_the_lent_memory` (freed memory poisoned and watched).
unsafe impl IoBuf for OpBuf {
    fn stable_ptr(&self) -> *const u8 {
        self.ptr
    }
    fn bytes_init(&self) -> usize {
        self.init
    }
    fn bytes_total(&self) -> usize {
        self.cap
    }
}

// SAFETY: as for `IoBuf`; `set_init` only records how much the kernel wrote.
// Checked by: `uring_engine_stops_under_traffic_without_a_write_after_free` and
// `a_panic_in_a_uring_receive_keeps_the_lent_memory`.
unsafe impl IoBufMut for OpBuf {
    fn stable_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
    unsafe fn set_init(&mut self, pos: usize) {
        self.init = self.init.max(pos);
    }
}

/// What a cancel's completion is turned into.
struct Cancelled;

impl tokio_uring::OneshotOutputTransform for Cancelled {
    type Output = std::io::Result<u32>;
    type StoredData = ();
    fn transform_oneshot_output(self, _: (), cqe: io_uring_06::cqueue::Entry) -> Self::Output {
        match cqe.result() {
            // No operation matched: none was in flight.
            r if r == -libc::ENOENT => Ok(0),
            r if r < 0 => Err(std::io::Error::from_raw_os_error(-r)),
            r => Ok(r as u32),
        }
    }
}

/// Cancels every io_uring operation on `fd` (`IORING_ASYNC_CANCEL_FD | _ALL`, Linux 5.19):
/// each completes (with `ECANCELED` unless it had completed already). Returns how many.
pub(super) async fn cancel_all(fd: RawFd) -> std::io::Result<u32> {
    use io_uring_06::{opcode, types};
    let entry = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all()).build();
    tokio_uring::UnsubmittedOneshot::new((), Cancelled, entry)
        .submit()
        .await
}
