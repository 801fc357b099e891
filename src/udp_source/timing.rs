//! The clocks every source keeps across `work` calls: the one timer it sleeps on
//! ([`Deadline`], [`sleep_until`]), the idle clock ([`Activity`]) and when `stats` is due
//! ([`StatsTimer`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futuresdr::runtime::dev::prelude::*;

/// One timer kept across `work` calls. Creating a timer per idle wait costs a round trip to
/// async-io's reactor thread each time: at 20 k wake-ups a second that thread alone took most
/// of a core (found with `cargo xtask loss` and evenly paced packets). The timer is re-armed
/// only when the wanted deadline is earlier than the armed one or the armed one has passed;
/// when it fires early, `work` looks again and re-arms once.
pub(super) struct Deadline {
    timer: async_io::Timer,
    at: Option<Instant>,
}

impl Deadline {
    pub(super) fn new() -> Self {
        Deadline {
            timer: async_io::Timer::never(),
            at: None,
        }
    }

    /// Makes sure the timer fires no later than `at`.
    pub(super) fn arm(&mut self, at: Instant, now: Instant) {
        if self.at.is_none_or(|cur| at < cur || cur <= now) {
            self.timer.set_at(at);
            self.at = Some(at);
        }
    }
}

/// Completes when the shared timer fires.
pub(super) struct DeadlineWait(pub(super) Arc<Mutex<Deadline>>);

impl Future for DeadlineWait {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut d = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if d.at.is_none() {
            return Poll::Pending;
        }
        match Pin::new(&mut d.timer).poll(cx) {
            Poll::Ready(_) => {
                d.at = None;
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The idle clock every source keeps for `finish_after_idle`: when the stream started (the
/// first `work` call) and last brought data.
#[derive(Debug, Clone, Copy)]
pub(super) struct Activity {
    /// Silence that ends the stream, and the wait for the first datagram.
    idle_finish: Option<(Duration, Duration)>,
    started: Option<Instant>,
    last_data: Option<Instant>,
}

impl Activity {
    pub(super) fn new(idle_finish: Option<(Duration, Duration)>) -> Self {
        Self {
            idle_finish,
            started: None,
            last_data: None,
        }
    }

    /// The start, set by the first call.
    pub(super) fn start(&mut self, now: Instant) -> Instant {
        *self.started.get_or_insert(now)
    }

    /// Data arrived at `now`.
    pub(super) fn data(&mut self, now: Instant) {
        self.last_data = Some(now);
    }

    /// When the silence ends the stream (after [`Activity::start`]); `None` without
    /// `finish_after_idle`.
    pub(super) fn idle_end(&self) -> Option<Instant> {
        let (idle, first) = self.idle_finish?;
        Some(match self.last_data {
            Some(last) => last + idle,
            None => self.started? + first,
        })
    }
}

/// When a source posts its periodic `stats` message (`stats_interval`; none: never).
#[derive(Debug, Clone, Copy)]
pub(super) struct StatsTimer {
    every: Option<Duration>,
    next: Option<Instant>,
}

impl StatsTimer {
    pub(super) fn new(every: Option<Duration>) -> Self {
        Self { every, next: None }
    }

    /// Whether a message is due at `now` (the first one `every` after `started`); if so,
    /// the next one is `every` after `now`.
    pub(super) fn due(&mut self, started: Instant, now: Instant) -> bool {
        let Some(every) = self.every else {
            return false;
        };
        let due = *self.next.get_or_insert(started + every);
        if now < due {
            return false;
        }
        self.next = Some(now + every);
        true
    }

    /// When the next message is due, once the first was scheduled.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.every.and(self.next)
    }
}

/// Puts the block to sleep until `notified` fires or the earliest of `deadlines` passes,
/// with the one timer `timer` kept across `work` calls.
pub(super) fn sleep_until(
    io: &mut WorkIo,
    timer: &Arc<Mutex<Deadline>>,
    notified: fsdr_net_io::Notified,
    deadlines: impl IntoIterator<Item = Option<Instant>>,
    now: Instant,
) {
    match deadlines.into_iter().flatten().min() {
        Some(at) => {
            timer.lock().unwrap_or_else(|e| e.into_inner()).arm(at, now);
            let wait = DeadlineWait(timer.clone());
            io.block_on(async move {
                futuresdr::futures::future::select(notified, wait).await;
            });
        }
        None => io.block_on(notified),
    }
}
