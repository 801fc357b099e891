//! [`Pacer`]: a token bucket over virtual time that holds a byte rate with one sleep per
//! batch, not per datagram. [`SampleClock`]: the clock of a sender that stands in for a
//! radio, on which sample `n` exists at `n / rate` and not before.

use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crate::sys;

/// Holds a byte rate: a token bucket over virtual time. Each `acquire(bytes)` moves the
/// schedule on by `bytes / rate`; the caller sleeps only when it is ahead of the schedule by
/// more than the burst allowance, so pacing costs one sleep per batch, not per datagram.
///
/// The thread that sleeps in [`Pacer::acquire`] gets a 1 µs timer slack (Linux's default of
/// 50 µs would make short sleeps overshoot); a pacer moved to another thread sets it there.
///
/// ```
/// use fsdr_net_io::send::Pacer;
/// let mut p = Pacer::new(1e9, 64 * 1024);
/// let t = std::time::Instant::now();
/// for _ in 0..100 { p.acquire(100_000); } // 10 MB at 1 GB/s
/// assert!(t.elapsed() >= std::time::Duration::from_millis(9));
/// ```
#[derive(Debug, Clone)]
pub struct Pacer {
    rate: f64,
    burst: Duration,
    /// When the bytes acquired so far are due.
    due: Instant,
    /// The thread whose timer slack was lowered.
    slack_set_on: Option<ThreadId>,
}

/// Timer slack of a sleeping pacer thread.
const SLACK_NS: u64 = 1_000;

impl Pacer {
    /// A pacer for `bytes_per_s` allowing bursts of `burst_bytes`.
    pub fn new(bytes_per_s: f64, burst_bytes: usize) -> Self {
        let rate = bytes_per_s.max(1.0);
        Self {
            rate,
            burst: Duration::from_secs_f64(burst_bytes as f64 / rate),
            due: Instant::now(),
            slack_set_on: None,
        }
    }

    /// The rate in bytes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Waits (sleeping the calling thread) until `bytes` more may be sent.
    pub fn acquire(&mut self, bytes: usize) {
        let wait = self.delay(bytes);
        if !wait.is_zero() {
            let me = std::thread::current().id();
            if self.slack_set_on != Some(me) {
                sys::set_timer_slack_ns(SLACK_NS);
                self.slack_set_on = Some(me);
            }
            std::thread::sleep(wait);
        }
    }

    /// Books `bytes` and returns how long the caller should wait before sending more (for
    /// callers that must not block, such as an async task arming a timer).
    pub fn delay(&mut self, bytes: usize) -> Duration {
        let now = Instant::now();
        // Never bank more than one burst of unused time.
        if self.due + self.burst < now {
            self.due = now - self.burst;
        }
        self.due += Duration::from_secs_f64(bytes as f64 / self.rate);
        self.due
            .saturating_duration_since(now)
            .saturating_sub(self.burst)
    }
}

/// The clock of a sender that stands in for a radio: sample `n` (counted from 0) exists
/// `n / rate` seconds after the start, and a packet goes out once its last sample exists, so
/// that the samples sent by any time are the rate's worth of that time — never more, and
/// fewer only when the sender cannot keep up, which the clock measures
/// ([`SampleClock::behind`], [`SampleClock::rate_got`]). Behind (a stall of the sending
/// thread), it catches up at [`SampleClock::CATCH_UP`] times the rate with bursts of at most
/// [`SampleClock::CATCH_UP_BURST`] of stream, not in one burst of everything due, which would
/// overrun a receiver that a radio's steady stream does not (and without a sleep per call,
/// which on a busy machine hands the CPU away for milliseconds each time).
///
/// ```
/// use fsdr_net_io::send::SampleClock;
/// let mut clock = SampleClock::new(1e6);
/// clock.wait_for(2_000); // the first 2000 samples exist 2 ms after the start
/// assert!(clock.elapsed().as_secs_f64() >= 2e-3);
/// assert!(clock.rate_got(2_000) <= 1e6);
/// ```
#[derive(Debug, Clone)]
pub struct SampleClock {
    rate: f64,
    start: Instant,
    /// How far behind the clock the latest send was.
    behind: Duration,
    /// The most any send was behind.
    most_behind: Duration,
    /// Catching up: when the samples waited for so far may have gone at [`CATCH_UP`](Self::CATCH_UP)
    /// times the rate, and how many there were.
    catch_up: Option<(Instant, u64)>,
    slack_set_on: Option<ThreadId>,
}

impl SampleClock {
    /// Behind its clock, a sender catches up at this many times the rate…
    pub const CATCH_UP: f64 = 1.1;
    /// …in bursts of at most this much stream beyond it.
    pub const CATCH_UP_BURST: Duration = Duration::from_micros(500);

    /// A clock at `rate` samples per second (at least 1), started now.
    pub fn new(rate: f64) -> Self {
        Self {
            rate: rate.max(1.0),
            start: Instant::now(),
            behind: Duration::ZERO,
            most_behind: Duration::ZERO,
            catch_up: None,
            slack_set_on: None,
        }
    }

    /// The rate asked, samples per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// When the first `samples` samples all exist.
    pub fn due(&self, samples: u64) -> Instant {
        self.start + Duration::from_secs_f64(samples as f64 / self.rate)
    }

    /// Sleeps until the first `samples` samples exist, and behind the clock until the
    /// samples since the latest call may go at [`CATCH_UP`](Self::CATCH_UP) times the rate
    /// (a token bucket of [`CATCH_UP_BURST`](Self::CATCH_UP_BURST)); notes how far behind the
    /// clock the sender is.
    pub fn wait_for(&mut self, samples: u64) {
        let due = self.due(samples);
        let now = Instant::now();
        let catching_up = self.catch_up.map(|(at, before)| {
            // Never more than one burst of unused catching up banked.
            at.max(now.checked_sub(Self::CATCH_UP_BURST).unwrap_or(now))
                + Duration::from_secs_f64(
                    samples.saturating_sub(before) as f64 / (Self::CATCH_UP * self.rate),
                )
        });
        let go = catching_up.map_or(due, |c| c.max(due));
        if let Some(wait) = go.checked_duration_since(now).filter(|w| !w.is_zero()) {
            let me = std::thread::current().id();
            if self.slack_set_on != Some(me) {
                sys::set_timer_slack_ns(SLACK_NS);
                self.slack_set_on = Some(me);
            }
            std::thread::sleep(wait);
        }
        let sent = Instant::now();
        self.behind = sent.saturating_duration_since(due);
        self.most_behind = self.most_behind.max(self.behind);
        self.catch_up = Some((catching_up.unwrap_or(sent), samples));
    }

    /// How far behind the clock the latest [`wait_for`](Self::wait_for) left the sender
    /// (the time its samples went after they existed).
    pub fn behind(&self) -> Duration {
        self.behind
    }

    /// The most any [`wait_for`](Self::wait_for) found the sender behind.
    pub fn most_behind(&self) -> Duration {
        self.most_behind
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// The rate achieved with `samples` sent by now: samples per second of elapsed time
    /// (at most [`rate`](Self::rate) once they were waited for).
    pub fn rate_got(&self, samples: u64) -> f64 {
        samples as f64 / self.elapsed().as_secs_f64().max(1e-9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::sched::timer_slack_ns;

    /// Never ahead of its clock: `n` samples waited for take at least `n / rate`, which a
    /// loaded machine can only lengthen.
    #[test]
    fn a_sample_clock_never_runs_ahead() {
        let mut c = SampleClock::new(1e6);
        for k in 1..=20u64 {
            c.wait_for(k * 500);
            assert!(c.elapsed() >= Duration::from_micros(k * 500), "{k}");
            assert!(c.rate_got(k * 500) <= 1e6);
        }
    }

    /// Behind its clock, a sender catches up at 1.1 times the rate (with a 0.5 ms burst), not
    /// in one burst of everything due.
    #[test]
    fn a_sample_clock_catches_up_at_a_bounded_rate() {
        let mut c = SampleClock::new(1e6);
        c.wait_for(1_000);
        std::thread::sleep(Duration::from_millis(30)); // a stall: 30 ms behind
        let stalled = Instant::now();
        c.wait_for(23_000); // 22 ms of samples, late: 20 ms at 1.1 times the rate, 1 banked
        assert!(
            stalled.elapsed() >= Duration::from_millis(18),
            "{:?}",
            stalled.elapsed()
        );
        assert!(c.most_behind() >= Duration::from_millis(10));
    }

    #[test]
    fn pacer_holds_rate() {
        let mut p = Pacer::new(50e6, 64 * 1024);
        let t = Instant::now();
        for _ in 0..200 {
            p.acquire(25_000);
        }
        // 5 MB at 50 MB/s = 100 ms (minus one burst allowance).
        let e = t.elapsed().as_secs_f64();
        assert!(e > 0.09, "{e}");
    }

    /// The slack belongs to the thread that sleeps, not to the one that built the pacer.
    #[test]
    fn timer_slack_is_set_on_the_sleeping_thread() {
        let builder_before = timer_slack_ns().unwrap();
        let mut p = Pacer::new(1e6, 1);
        assert_eq!(timer_slack_ns().unwrap(), builder_before);
        let (slack_before, slack_after) = std::thread::spawn(move || {
            let before = timer_slack_ns().unwrap();
            p.acquire(2_000); // 2 ms at 1 MB/s: sleeps
            (before, timer_slack_ns().unwrap())
        })
        .join()
        .unwrap();
        assert_ne!(slack_before, SLACK_NS);
        assert_eq!(slack_after, SLACK_NS);
        assert_eq!(timer_slack_ns().unwrap(), builder_before);
    }
}
