//! [`Budget`]: the queue in front of the consumer bounded in time — the arrival rate,
//! measured over a window, gives how many datagrams the latency budget holds.

/// The window over which the arrival rate (for the latency budget) is measured.
const RATE_WINDOW_NS: u64 = 10_000_000;

/// The queue in front of the consumer bounded in time: the arrival rate measured over a
/// window gives how many datagrams the latency budget holds.
#[derive(Debug)]
pub(crate) struct Budget {
    pub(crate) budget_ns: Option<u64>,
    pub(crate) floor: usize,
    pub(crate) slots: usize,
    /// When the current rate window began (`None`: idle, no arrival since the last one
    /// closed empty), and what arrived in it.
    pub(crate) window_start: Option<u64>,
    pub(crate) window_count: u64,
    /// Datagrams the consumer may hold.
    pub(crate) cap: usize,
    /// The socket's drop counter as last read (`SO_MEMINFO`, when a rate window closes), and
    /// the drops and discards since then not yet counted as arrivals: the rate is what was
    /// offered, not what was handed over, so that a pause (which reads less) or a discard
    /// does not shrink the budget and cause the next one.
    pub(crate) last_drops: Option<u32>,
    pub(crate) dropped: u64,
}

impl Budget {
    /// Whether the rate window closes at `now` (and the drop counter should be read first).
    pub(crate) fn closes(&self, now: u64) -> bool {
        self.budget_ns.is_some()
            && self
                .window_start
                .is_some_and(|s| now.saturating_sub(s) >= RATE_WINDOW_NS)
    }

    /// The kernel's drop counter, as read from the socket.
    pub(crate) fn kernel_drops(&mut self, counter: u32) {
        if let Some(last) = self.last_drops {
            self.dropped += u64::from(counter.wrapping_sub(last));
        }
        self.last_drops = Some(counter);
    }

    pub(crate) fn arrived(&mut self, n: u64, now: u64) {
        let n = n + std::mem::take(&mut self.dropped);
        let Some(start) = self.window_start else {
            // Idle: a window begins with the first arrival. Measured from an earlier start
            // (the engine's, or the end of a stream), the idle time before a stream would
            // count as part of its rate and put the budget of a fast stream near its floor.
            // What this receive took arrived before `now`, at a time unknown: the window
            // counts from the next receive on.
            if n > 0 {
                self.window_start = Some(now);
            }
            return;
        };
        let elapsed = now.saturating_sub(start);
        if self.window_count == 0 && n > 0 && elapsed >= RATE_WINDOW_NS {
            // A whole window passed with nothing in it (a pause between bursts): as idle.
            self.window_start = Some(now);
            return;
        }
        self.window_count += n;
        if elapsed >= RATE_WINDOW_NS {
            if let Some(b) = self.budget_ns {
                let per_ns = self.window_count as f64 / elapsed as f64;
                self.cap = ((per_ns * b as f64) as usize).clamp(self.floor, self.slots);
            }
            // A window with nothing in it leaves the budget idle until the next arrival.
            self.window_start = (self.window_count > 0).then_some(now);
            self.window_count = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(budget_ms: u64) -> Budget {
        Budget {
            budget_ns: Some(budget_ms * 1_000_000),
            floor: 16,
            slots: 4096,
            window_start: None,
            window_count: 0,
            cap: 4096,
            last_drops: None,
            dropped: 0,
        }
    }

    /// 100 datagrams per ms with a 20 ms budget hold 2000 datagrams, also when the stream
    /// begins long after the engine started measuring.
    #[test]
    fn a_stream_that_starts_late_is_not_measured_over_the_idle_time_before_it() {
        let ms = 1_000_000;
        let mut b = budget(20);
        // The first datagrams come 50 ms after the start, then 100 every ms.
        let mut now = 50 * ms;
        b.arrived(1, now);
        assert!(b.cap >= 1900, "cap {}", b.cap);
        for _ in 0..30 {
            now += ms;
            b.arrived(100, now);
            assert!(b.cap >= 1900, "cap {}", b.cap);
        }
        assert!((1900..=2100).contains(&b.cap), "cap {}", b.cap);
    }

    /// A stream that slows down gets a shorter queue; one that stops leaves it at the floor.
    #[test]
    fn the_budget_follows_the_rate_down_to_its_floor() {
        let ms = 1_000_000;
        let mut b = budget(20);
        let mut now = 0;
        for _ in 0..30 {
            now += ms;
            b.arrived(10, now);
        }
        assert!((190..=210).contains(&b.cap), "cap {}", b.cap);
        for _ in 0..30 {
            now += ms;
            b.arrived(0, now);
        }
        assert_eq!(b.cap, 16);
    }

    /// A stream that begins late in a window is measured from its first datagram: 12
    /// datagrams in the last 0.1 ms of the first window are not a rate of 1.2 per ms.
    #[test]
    fn a_window_begins_with_its_first_arrival() {
        let us = 1_000;
        let mut b = budget(20);
        let mut now = 9_900 * us;
        for _ in 0..200 {
            b.arrived(12, now);
            now += 100 * us;
        }
        // 120 per ms for 20 ms.
        assert!((2300..=2500).contains(&b.cap), "cap {}", b.cap);
    }

    /// The rate counts what was offered: datagrams read plus the kernel's drops, read from
    /// its counter when a window closes (as `Worker::publish` does). A paused thread that
    /// reads 10 per ms while the kernel drops 90 keeps the budget of 100 per ms.
    #[test]
    fn drops_read_when_a_window_closes_count_as_arrivals() {
        let ms = 1_000_000;
        let mut b = budget(20);
        let mut counter = 5u32; // drops from before the budget measured: not counted
        let mut now = 0;
        let mut reads = 0;
        for _ in 0..40 {
            now += ms;
            counter += 90;
            if b.closes(now) {
                b.kernel_drops(counter);
                reads += 1;
            }
            b.arrived(10, now);
        }
        assert_eq!(reads, 3, "the counter is read once per 10 ms window");
        // The first window had no earlier reading to count drops against: 10 per ms then.
        assert!((1900..=2100).contains(&b.cap), "cap {}", b.cap);
        // Without a budget nothing is read.
        let mut none = budget(20);
        none.budget_ns = None;
        assert!(!none.closes(100 * ms));
    }
}
