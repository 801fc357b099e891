//! [`Notify`]: how receive threads wake the one consumer, a thread or an async task, without
//! it spinning and without a lost wake-up.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use std::sync::Arc;

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, Ordering};
#[cfg(loom)]
use loom::sync::{Condvar, Mutex};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(not(loom))]
use std::sync::{Condvar, Mutex};

/// Wakes a consumer (a thread or an async task) when receive threads publish datagrams.
///
/// `notify` is cheap when nobody waits: one atomic swap. A notification that arrives while
/// nobody waits is remembered, so no wake-up is lost; several coalesce into one.
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
    lock: Mutex<Waiting>,
    cond: Condvar,
}

/// Who waits, guarded by the lock: an async task's waker, and how many threads sleep on the
/// condition variable. The count lets `notify` skip the condition variable when no thread
/// waits: std's `notify_all` makes a `futex` call every time, and an async consumer (a
/// FutureSDR block) never waits on it — one syscall per hand-over for nothing.
#[derive(Debug, Default)]
struct Waiting {
    waker: Option<Waker>,
    threads: usize,
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
                // A waiting thread counted itself under this lock before `cond.wait*` released
                // it; one that has not counted itself yet sees `pending` (set above) first.
                if g.threads > 0 {
                    self.cond.notify_all();
                }
                g.waker.take()
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

    /// Whether a notification is pending (without consuming it).
    pub fn is_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Blocks the calling thread until notified or until `timeout` passes; true if notified.
    #[cfg(not(loom))]
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        if self.take() {
            return true;
        }
        let deadline = crate::sys::deadline(std::time::Instant::now(), timeout);
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.take() {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            g.threads += 1;
            g = self
                .cond
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            g.threads -= 1;
        }
    }

    /// Blocks until notified (loom has no timed waits; `timeout` is ignored).
    #[cfg(loom)]
    pub fn wait_timeout(&self, _timeout: Duration) -> bool {
        let mut g = self.lock.lock().unwrap();
        loop {
            if self.take() {
                return true;
            }
            g.threads += 1;
            g = self.cond.wait(g).unwrap();
            g.threads -= 1;
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
        // Checked again under the lock: a notify() between the first check and here has
        // either set `pending` (seen now) or will take the waker stored below.
        if self.notify.take() {
            return Poll::Ready(());
        }
        g.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn notify_wakes_async_waiter() {
        struct W(std::sync::atomic::AtomicBool);
        impl std::task::Wake for W {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let n = Arc::new(Notify::new());
        let w = Arc::new(W(std::sync::atomic::AtomicBool::new(false)));
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

/// Model tests: `cargo xtask loom` (part of `cargo xtask test`; the crate's unit tests built
/// with `--cfg loom` and the `loom` feature). The `Arc` is std's (its count needs no
/// model); the flag, the lock and the condition variable are loom's.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::thread;

    /// A notification sent while the consumer is between its check and its sleep is never
    /// lost: the blocking wait always returns.
    #[test]
    fn loom_thread_wait_never_misses_a_notify() {
        loom::model(|| {
            let n = Arc::new(Notify::new());
            let n2 = n.clone();
            let t = thread::spawn(move || n2.notify());
            assert!(n.wait_timeout(Duration::from_secs(1)));
            t.join().unwrap();
        });
    }

    /// The async path: after `notify`, a pending poll has either been woken or left the flag
    /// set for the next poll, which then completes.
    #[test]
    fn loom_async_wait_never_misses_a_notify() {
        use std::sync::atomic::AtomicBool as StdBool;
        struct W(StdBool);
        impl std::task::Wake for W {
            fn wake(self: Arc<Self>) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        loom::model(|| {
            let n = Arc::new(Notify::new());
            let n2 = n.clone();
            let t = thread::spawn(move || n2.notify());
            let w = Arc::new(W(StdBool::new(false)));
            let waker = Waker::from(w.clone());
            let mut cx = Context::from_waker(&waker);
            let mut fut = n.notified();
            let first = Pin::new(&mut fut).poll(&mut cx).is_ready();
            t.join().unwrap();
            if !first {
                let woken = w.0.load(std::sync::atomic::Ordering::SeqCst);
                assert!(woken || n.is_pending());
                assert!(Pin::new(&mut fut).poll(&mut cx).is_ready());
            }
        });
    }

    /// Notifications coalesce: two notifies before a wait are one wake-up, and nothing is
    /// left pending after it.
    #[test]
    fn loom_notifications_coalesce() {
        loom::model(|| {
            let n = Arc::new(Notify::new());
            let a = n.clone();
            let b = n.clone();
            let ta = thread::spawn(move || a.notify());
            let tb = thread::spawn(move || b.notify());
            ta.join().unwrap();
            tb.join().unwrap();
            assert!(n.take());
            assert!(!n.take());
        });
    }
}
