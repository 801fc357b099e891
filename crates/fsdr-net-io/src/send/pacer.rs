//! [`Pacer`]: a token bucket over virtual time that holds a byte rate with one sleep per
//! batch, not per datagram.

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::sched::timer_slack_ns;

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
