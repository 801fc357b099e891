//! Memory lent to the kernel: who may free it, and what happens when nobody can prove that
//! the kernel let go of it.
//!
//! A receive submitted to io_uring, a provided-buffer ring, an AF_XDP UMEM: the kernel writes
//! into such memory after the call that lent it returned, so it is owned until the kernel
//! says it is done (the operation's completion, the socket shut down and its completions
//! drained). On every other path — a panic on the thread that lent it, a cancel that did not
//! end — it is kept for the rest of the process, never freed: `keep_for_good` forgets it
//! and counts it ([`kept`]).
//!
//! Which memory is lent, who owns it while lent and which test shows it is in
//! ARCHITECTURE.md ("Memory lent to the kernel"); `tests/kernel_writes.rs` is the check that
//! sees a write into released memory, the kernel's included.
//!
//! The module is public but hidden: [`kept`] and the panic hooks are for tests.

#![doc(hidden)]

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

static KEPT: AtomicU64 = AtomicU64::new(0);
static PANIC_RECEIVE_PORT: AtomicU16 = AtomicU16::new(0);
static PANIC_SEND_PORT: AtomicU16 = AtomicU16::new(0);

/// Keeps `value` (memory the kernel may still write, or what holds it) alive for the rest of
/// the process, and says so.
#[cfg(feature = "uring")]
pub(crate) fn keep_for_good<T>(value: T, what: &str) {
    std::mem::forget(value);
    KEPT.fetch_add(1, Ordering::Relaxed);
    tracing::error!(
        "{what}: the kernel may still write into its memory, which is kept (leaked) for the \
         rest of the process instead of freed"
    );
}

/// How many areas of lent memory this process kept for good (`keep_for_good`).
pub fn kept() -> u64 {
    KEPT.load(Ordering::Relaxed)
}

/// Tests: the next receive thread (or io_uring receive task) of a receiver bound to `port`
/// that has memory lent to the kernel panics there, once. 0 disarms.
pub fn panic_receive_thread_on(port: u16) {
    PANIC_RECEIVE_PORT.store(port, Ordering::Relaxed);
}

/// Tests: the io_uring sender whose destination is `port` panics with sends in flight,
/// once. 0 disarms.
pub fn panic_send_thread_to(port: u16) {
    PANIC_SEND_PORT.store(port, Ordering::Relaxed);
}

/// Tests: the port a receive panic is armed for (0 once it fired).
pub fn receive_panic_armed() -> u16 {
    PANIC_RECEIVE_PORT.load(Ordering::Relaxed)
}

/// Tests: the port a send panic is armed for (0 once it fired).
pub fn send_panic_armed() -> u16 {
    PANIC_SEND_PORT.load(Ordering::Relaxed)
}

/// Whether a receive on `port` is to panic now (the hook fires once).
pub(crate) fn receive_panic_due(port: u16) -> bool {
    due(&PANIC_RECEIVE_PORT, port)
}

/// Whether a send to `port` is to panic now (the hook fires once).
#[cfg(feature = "uring")]
pub(crate) fn send_panic_due(port: u16) -> bool {
    due(&PANIC_SEND_PORT, port)
}

fn due(hook: &AtomicU16, port: u16) -> bool {
    port != 0
        && hook.load(Ordering::Relaxed) == port
        && hook
            .compare_exchange(port, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}
