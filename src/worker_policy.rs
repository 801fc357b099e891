//! The scheduling policy of the FutureSDR worker threads that run fsdr-net blocks.
//!
//! FutureSDR 0.0.40's default stream buffer (`circular`, over vmcircbuffer) wakes the block
//! on the other side of a buffer while it holds a spin lock. When the woken worker thread is
//! placed on the lock holder's CPU it preempts the holder, calls into the same buffer and
//! spins until the scheduler tick ends its time slice (4 ms at 250 Hz). With one worker per
//! core and a receive thread and a sender sharing the cores, that happens many times a
//! second: the flowgraph stops for a tick each time and a 800 MB/s stream overruns its
//! buffers (profile and `perf sched` traces in `docs/PERFORMANCE.md`). A worker in
//! `SCHED_BATCH` does not preempt on wake-up, so the holder finishes its few hundred
//! nanoseconds and the woken block runs right after. fsdr-net's blocks move the worker they
//! run on to `SCHED_BATCH` the first time they run there, unless told not to
//! (`batch_workers(false)` on their builders); threads with a real-time or other non-default
//! policy are left alone.

use std::cell::Cell;

thread_local! {
    static DONE: Cell<bool> = const { Cell::new(false) };
}

/// Moves the calling worker thread to `SCHED_BATCH` once (a thread-local flag makes every
/// later call free).
pub(crate) fn batch_this_worker() {
    DONE.with(|done| {
        if done.replace(true) {
            return;
        }
        match fsdr_net_io::engine::set_batch_policy() {
            Ok(true) => tracing::debug!(
                thread = std::thread::current().name().unwrap_or("?"),
                "worker thread moved to SCHED_BATCH"
            ),
            Ok(false) => {}
            Err(e) => tracing::debug!(error = %e, "SCHED_BATCH not set"),
        }
    });
}
