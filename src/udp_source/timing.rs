//! The clocks every source keeps across `work` calls, held together by [`WorkClock`]: the one
//! timer it sleeps on ([`Deadline`]), the idle clock ([`Activity`]) and when `stats` is due
//! ([`StatsTimer`]). Each source's `work` begins with [`WorkClock::begin`], does its own
//! part, and ends where [`WorkClock::idle_over`] says the stream is over or in
//! [`WorkClock::sleep`].

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
struct Deadline {
    timer: async_io::Timer,
    at: Option<Instant>,
}

impl Deadline {
    fn new() -> Self {
        Deadline {
            timer: async_io::Timer::never(),
            at: None,
        }
    }

    /// Makes sure the timer fires no later than `at`.
    fn arm(&mut self, at: Instant, now: Instant) {
        if self.at.is_none_or(|cur| at < cur || cur <= now) {
            self.timer.set_at(at);
            self.at = Some(at);
        }
    }
}

/// Completes when the shared timer fires.
struct DeadlineWait(Arc<Mutex<Deadline>>);

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
struct Activity {
    /// Silence that ends the stream, and the wait for the first datagram.
    idle_finish: Option<(Duration, Duration)>,
    started: Option<Instant>,
    last_data: Option<Instant>,
}

impl Activity {
    fn new(idle_finish: Option<(Duration, Duration)>) -> Self {
        Self {
            idle_finish,
            started: None,
            last_data: None,
        }
    }

    /// The start, set by the first call.
    fn start(&mut self, now: Instant) -> Instant {
        *self.started.get_or_insert(now)
    }

    /// Data arrived at `now`.
    fn data(&mut self, now: Instant) {
        self.last_data = Some(now);
    }

    /// When the silence ends the stream (after [`Activity::start`]); `None` without
    /// `finish_after_idle`.
    fn idle_end(&self) -> Option<Instant> {
        let (idle, first) = self.idle_finish?;
        Some(match self.last_data {
            Some(last) => last + idle,
            None => self.started? + first,
        })
    }
}

/// When a source posts its periodic `stats` message (`stats_interval`; none: never).
#[derive(Debug, Clone, Copy)]
struct StatsTimer {
    every: Option<Duration>,
    next: Option<Instant>,
}

impl StatsTimer {
    fn new(every: Option<Duration>) -> Self {
        Self { every, next: None }
    }

    /// Whether a message is due at `now` (the first one `every` after `started`); if so,
    /// the next one is `every` after `now`.
    fn due(&mut self, started: Instant, now: Instant) -> bool {
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
    fn deadline(&self) -> Option<Instant> {
        self.every.and(self.next)
    }
}

/// What every source keeps across `work` calls around its own part: whether its worker
/// thread runs SCHED_BATCH, the idle clock, the `stats` timer and the one timer it sleeps
/// on.
pub(super) struct WorkClock {
    batch_workers: bool,
    activity: Activity,
    stats: StatsTimer,
    deadline: Arc<Mutex<Deadline>>,
}

/// One `work` call: when it began, and when the stream started (the first call).
#[derive(Debug, Clone, Copy)]
pub(super) struct Call {
    pub(super) now: Instant,
    started: Instant,
}

impl WorkClock {
    /// `stats_interval`: how often `stats` is posted (none: never); `idle_finish`: the
    /// silence that ends the stream and the wait for its first datagram.
    pub(super) fn new(
        stats_interval: Option<Duration>,
        idle_finish: Option<(Duration, Duration)>,
    ) -> Self {
        Self {
            batch_workers: true,
            activity: Activity::new(idle_finish),
            stats: StatsTimer::new(stats_interval),
            deadline: Arc::new(Mutex::new(Deadline::new())),
        }
    }

    /// Whether `work` moves its worker thread to SCHED_BATCH (the builders' `batch_workers`).
    pub(super) fn set_batch_workers(&mut self, on: bool) {
        self.batch_workers = on;
    }

    /// Begins a `work` call: the worker policy, the time, the idle clock's start.
    pub(super) fn begin(&mut self) -> Call {
        if self.batch_workers {
            crate::worker_policy::batch_this_worker();
        }
        let now = Instant::now();
        let started = self.activity.start(now);
        Call { now, started }
    }

    /// Data arrived at `now`.
    pub(super) fn data(&mut self, now: Instant) {
        self.activity.data(now);
    }

    /// Whether the periodic `stats` message is due in this call.
    pub(super) fn stats_due(&mut self, call: Call) -> bool {
        self.stats.due(call.started, call.now)
    }

    /// When the silence ends the stream (`None` without `finish_after_idle`).
    pub(super) fn idle_end(&self) -> Option<Instant> {
        self.activity.idle_end()
    }

    /// Whether the silence that ends the stream has passed at `now`.
    pub(super) fn idle_over(&self, now: Instant) -> bool {
        self.idle_end().is_some_and(|end| now >= end)
    }

    /// Ends the call asleep until `notified` fires, the next `stats` message is due or the
    /// earliest of `deadlines` passes.
    pub(super) fn sleep(
        &self,
        io: &mut WorkIo,
        notified: fsdr_net_io::Notified,
        deadlines: impl IntoIterator<Item = Option<Instant>>,
        now: Instant,
    ) {
        let deadlines = deadlines.into_iter().chain([self.stats.deadline()]);
        sleep_until(io, &self.deadline, notified, deadlines, now);
    }

    /// Blocks until `end` alone (a hold for a late reader: its consumption calls `work`
    /// again).
    pub(super) fn hold_until(&self, io: &mut WorkIo, end: Instant, now: Instant) {
        self.deadline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .arm(end, now);
        io.block_on(DeadlineWait(self.deadline.clone()));
    }
}

/// Puts the block to sleep until `notified` fires or the earliest of `deadlines` passes,
/// with the one timer `timer` kept across `work` calls.
fn sleep_until(
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
