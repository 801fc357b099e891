//! What one step of the in-place receive loop may wait for and what it did (`receiver.rs`
//! takes the steps, `wait.rs` waits, `group.rs` steps several receivers on one thread).

use std::time::Duration;

/// What one `Receive::step` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Received, handed over, or acted on a deadline.
    Busy,
    /// No empty buffer: the consumer has to return one.
    NoBuffer,
    /// Nothing arrived within the wait.
    Idle,
    /// Stopping and the socket's queue is empty (or shut down).
    Drained,
}

/// What `Receive::wait_for_data` found.
pub(super) enum Ready {
    /// The socket is readable (or there is no deadline: the receive itself waits).
    Now,
    /// A deadline came first and was acted on.
    Acted,
    /// Nothing within the caller's wait.
    Nothing,
}

/// How long a step may wait for data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Until {
    /// On its own thread: until the socket is readable or a deadline passes (a hand-over,
    /// the reorder timeout); under load with a poll interval, it sleeps that instead.
    Data,
    /// Inline, on the consumer's thread: as for `Data`, but this long at most.
    Within(Duration),
    /// On a group's receive thread, which polled every socket of its receivers and set
    /// `Receive::readable`: no wait at all (a passed deadline is acted on).
    Polled,
}

/// Under load with a poll interval, when the next receive comes (ordered by urgency).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Polling {
    /// When the socket has data (the last receive found none, or no poll interval).
    Off,
    /// After a sleep: the last receive took what was queued.
    Sleep,
    /// At once: the last receive was full, more is likely queued.
    Drain,
}

/// What `Receive::poll_sleep` did.
pub(super) enum Polled {
    /// The last receive made a hand-over due: done instead of sleeping.
    HandedOver,
    /// Slept (or had no need to): the next receive does not wait.
    Slept,
    /// A deadline has passed: `wait_for_data` acts on it.
    Due,
}
