//! What the host did to a measurement: the share of the machine's CPU time the hypervisor gave
//! to other guests (steal, from `/proc/stat`), and how late a thread that sleeps 1 ms at a
//! time wakes up (a hiccup meter, as jHiccup or cyclictest).
//!
//! A receive thread blocked in `recvmmsg` and a FutureSDR worker parked on its condition
//! variable wake the same way as the meter's thread. When that thread wakes milliseconds late
//! on an otherwise idle host, no receiver on that host can promise a sub-millisecond latency
//! tail, and a loss that coincides with much steal time says more about the host than about
//! the receiver. [`ThreadCpuMeter`] shows where a process's CPU time went, thread by thread;
//! [`Machine`] names the machine (CPU, caches, kernel), since ratios to the bare loop differ
//! between hosts.
//! `usrp_rx` reports the steal time of its run; `cargo xtask host`,
//! `cargo xtask latency` and `cargo xtask loss` report these figures beside their own.
//!
//! ```
//! use std::time::Duration;
//! use fsdr_net_io::host::{CpuTimes, HiccupMeter};
//!
//! let before = CpuTimes::now();
//! let meter = HiccupMeter::start().unwrap();
//! std::thread::sleep(Duration::from_millis(20)); // the measurement
//! let report = meter.finish();
//! println!("{report}");
//! assert!(report.p50 <= report.max);
//! // None where /proc/stat is missing or no tick passed.
//! let steal = before.and_then(|b| b.steal_to_now());
//! assert!(steal.is_none_or(|s| (0.0..=1.0).contains(&s)));
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

mod machine;
pub use crate::diagnosis::{Load, LoadMeter};
pub use machine::{Cache, Machine};

/// How long the meter's thread sleeps each time.
pub const PERIOD: Duration = Duration::from_millis(1);

/// Cumulative CPU time of the whole machine, in clock ticks (the `cpu` line of `/proc/stat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// user + nice + system + idle + iowait + irq + softirq + steal.
    pub total: u64,
    /// Time a virtual CPU was ready to run while the hypervisor ran something else.
    pub steal: u64,
}

impl CpuTimes {
    /// Parses the aggregate `cpu` line of `/proc/stat`; `None` when there is none or it does
    /// not parse.
    pub fn parse(stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        // Guest time is already part of user time: only the first eight fields add up.
        Some(CpuTimes {
            total: v.iter().take(8).sum(),
            steal: v.get(7).copied().unwrap_or(0),
        })
    }

    /// The machine's counters now (`None` where `/proc/stat` cannot be read).
    pub fn now() -> Option<CpuTimes> {
        CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The share of CPU time stolen (0..=1) between `self` and a `later` reading; `None` when
    /// no tick passed or the counters went backwards.
    pub fn steal_since(&self, later: &CpuTimes) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let steal = later.steal.checked_sub(self.steal)?;
        (total > 0 && steal <= total).then(|| steal as f64 / total as f64)
    }

    /// The share of CPU time stolen between `self` and now.
    pub fn steal_to_now(&self) -> Option<f64> {
        self.steal_since(&CpuTimes::now()?)
    }
}

fn micros<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_nanos() as f64 / 1e3)
}

/// What the host did over one measurement. Serialized with the lateness in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostReport {
    /// Wall time measured, in seconds.
    pub seconds: f64,
    /// Share of the machine's CPU time stolen (0..=1), when `/proc/stat` was readable.
    pub steal: Option<f64>,
    /// Wake-ups measured.
    pub wakeups: usize,
    /// Median lateness of a wake-up beyond the [`PERIOD`] asked.
    #[serde(rename = "late_p50_us", serialize_with = "micros")]
    pub p50: Duration,
    /// 99th percentile of the lateness.
    #[serde(rename = "late_p99_us", serialize_with = "micros")]
    pub p99: Duration,
    /// 99.9th percentile of the lateness.
    #[serde(rename = "late_p999_us", serialize_with = "micros")]
    pub p999: Duration,
    /// The latest wake-up.
    #[serde(rename = "late_max_us", serialize_with = "micros")]
    pub max: Duration,
    /// Wake-ups more than 1 ms late.
    pub late_over_1ms: usize,
}

impl HostReport {
    /// Summarises how late each wake-up was.
    pub fn from_lateness(seconds: f64, steal: Option<f64>, mut late: Vec<Duration>) -> Self {
        late.sort_unstable();
        let q = |p: f64| {
            let i = ((late.len() as f64 * p) as usize).min(late.len().saturating_sub(1));
            late.get(i).copied().unwrap_or_default()
        };
        HostReport {
            seconds,
            steal,
            wakeups: late.len(),
            p50: q(0.5),
            p99: q(0.99),
            p999: q(0.999),
            max: late.last().copied().unwrap_or_default(),
            late_over_1ms: late
                .iter()
                .filter(|d| **d > Duration::from_millis(1))
                .count(),
        }
    }
}

impl fmt::Display for HostReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
        let steal = self.steal.map_or("unknown".into(), |s| {
            format!("{:.1}% of CPU time", 100.0 * s)
        });
        write!(
            f,
            "host over {:.1} s: steal {steal}; a thread sleeping 1 ms woke late by p50 {}, \
             p99 {}, p99.9 {}, at most {} ({} of {} wake-ups more than 1 ms late)",
            self.seconds,
            ms(self.p50),
            ms(self.p99),
            ms(self.p999),
            ms(self.max),
            self.late_over_1ms,
            self.wakeups
        )
    }
}

/// A hiccup meter on its own thread (it sleeps [`PERIOD`] at a time and records how late it
/// woke), with the machine's steal counter read at its start.
pub struct HiccupMeter {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Duration>>,
    start: Option<CpuTimes>,
    t0: Instant,
}

impl HiccupMeter {
    /// Starts measuring.
    pub fn start() -> std::io::Result<HiccupMeter> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("hiccup-meter".into())
            .spawn(move || {
                let mut late = Vec::with_capacity(1 << 16);
                while !flag.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    std::thread::sleep(PERIOD);
                    late.push(t.elapsed().saturating_sub(PERIOD));
                }
                late
            })?;
        Ok(HiccupMeter {
            stop,
            thread,
            start: CpuTimes::now(),
            t0: Instant::now(),
        })
    }

    /// Stops measuring and summarises.
    pub fn finish(self) -> HostReport {
        self.stop.store(true, Ordering::Relaxed);
        let late = self.thread.join().unwrap_or_default();
        let steal = self.start.and_then(|a| a.steal_to_now());
        HostReport::from_lateness(self.t0.elapsed().as_secs_f64(), steal, late)
    }
}

/// CPU time one thread of this process used: user and system time together, as the kernel
/// accounts it (`/proc/self/task/<tid>/schedstat`, nanoseconds on a CPU).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadCpu {
    /// The thread's id (`gettid`); the process's main thread has the process's id.
    pub tid: i32,
    /// The thread's name (`/proc/self/task/<tid>/comm`), as last seen.
    pub name: String,
    /// CPU seconds, as of the last sample that found the thread.
    pub seconds: f64,
}

/// Per-thread CPU time of this process over a measurement, sampled by a thread of its own:
/// where a receiver's CPU goes (its receive thread, the FutureSDR workers, the main thread),
/// without `perf`.
///
/// A thread is sampled every `every` while the meter runs and once more at
/// [`finish`](Self::finish); a thread that ends between two samples loses what it used
/// after the last one. The meter's own thread is reported too (`cpu-meter`; names are
/// cut to 15 bytes by the kernel).
///
/// ```
/// use std::time::Duration;
/// use fsdr_net_io::host::ThreadCpuMeter;
///
/// let meter = ThreadCpuMeter::start(Duration::from_millis(100)).unwrap();
/// // … the measurement: start a receiver, stream, stop it …
/// let threads = meter.finish();
/// let workers: f64 = threads
///     .iter()
///     .filter(|t| t.name.starts_with("smol-"))
///     .map(|t| t.seconds)
///     .sum();
/// assert!(workers >= 0.0);
/// assert!(threads.iter().any(|t| t.name == "cpu-meter"));
/// ```
pub struct ThreadCpuMeter {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<BTreeMap<i32, ThreadCpu>>,
}

impl ThreadCpuMeter {
    /// Starts sampling every `every` (at least 1 ms).
    pub fn start(every: Duration) -> std::io::Result<ThreadCpuMeter> {
        let every = every.max(Duration::from_millis(1));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("cpu-meter".into())
            .spawn(move || {
                let mut seen = BTreeMap::new();
                loop {
                    sample_threads(&mut seen);
                    if flag.load(Ordering::Acquire) {
                        return seen;
                    }
                    std::thread::park_timeout(every);
                }
            })?;
        Ok(ThreadCpuMeter { stop, thread })
    }

    /// Takes a last sample and returns every thread seen, by thread id.
    pub fn finish(self) -> Vec<ThreadCpu> {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        self.thread
            .join()
            .map(|seen| seen.into_values().collect())
            .unwrap_or_default()
    }
}

/// Reads every thread of this process into `seen` (threads that cannot be read, because
/// they ended meanwhile, keep their last reading).
fn sample_threads(seen: &mut BTreeMap<i32, ThreadCpu>) {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for entry in dir.flatten() {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let Some(ns) = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| parse_schedstat(&s))
        else {
            continue;
        };
        let name = std::fs::read_to_string(path.join("comm"))
            .map(|s| s.trim_end().to_string())
            .unwrap_or_default();
        let t = seen.entry(tid).or_insert_with(|| ThreadCpu {
            tid,
            name: String::new(),
            seconds: 0.0,
        });
        t.name = name;
        t.seconds = t.seconds.max(ns as f64 * 1e-9);
    }
}

/// The time on a CPU, in nanoseconds, of a `schedstat` file (its first field).
fn parse_schedstat(s: &str) -> Option<u64> {
    s.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_read_from_the_cpu_line() {
        let a = CpuTimes::parse(
            "cpu  100 0 50 800 10 0 5 35 7 0\ncpu0 50 0 25 400 5 0 2 18 3 0\nintr 1\n",
        )
        .unwrap();
        // Guest time (7) is part of user time and not added again.
        assert_eq!(
            a,
            CpuTimes {
                total: 1000,
                steal: 35
            }
        );
        let b = CpuTimes::parse("cpu  200 0 100 1500 10 0 5 185 9 0\n").unwrap();
        assert_eq!(a.steal_since(&b), Some(0.15));
        // Counters that went backwards (another machine's file) give nothing.
        assert_eq!(b.steal_since(&a), None);
        assert_eq!(a.steal_since(&a), None);
        assert_eq!(CpuTimes::parse("intr 1\n"), None);
        assert_eq!(CpuTimes::parse("cpu  1 2 x\n"), None);
        // An old kernel without the steal field.
        assert_eq!(
            CpuTimes::parse("cpu  1 2 3 4\n"),
            Some(CpuTimes {
                total: 10,
                steal: 0
            })
        );
    }

    #[test]
    fn lateness_percentiles() {
        let late: Vec<Duration> = (1..=1000u64).rev().map(Duration::from_micros).collect();
        let r = HostReport::from_lateness(1.0, Some(0.1), late);
        assert_eq!(r.wakeups, 1000);
        assert_eq!(r.p50, Duration::from_micros(501));
        assert_eq!(r.p99, Duration::from_micros(991));
        assert_eq!(r.p999, Duration::from_micros(1000));
        assert_eq!(r.max, Duration::from_micros(1000));
        assert_eq!(r.late_over_1ms, 0);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["late_p99_us"], 991.0);
        assert_eq!(json["steal"], 0.1);
        let empty = HostReport::from_lateness(0.0, None, Vec::new());
        assert_eq!((empty.wakeups, empty.max), (0, Duration::ZERO));
        assert!(empty.to_string().contains("steal unknown"));
    }

    #[test]
    fn schedstat_gives_the_time_on_a_cpu() {
        assert_eq!(parse_schedstat("356363669 121146 46\n"), Some(356_363_669));
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    #[test]
    fn the_thread_meter_sees_every_thread_by_name() {
        let meter = ThreadCpuMeter::start(Duration::from_millis(5)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let busy = std::thread::Builder::new()
            .name("meter-test-busy".into())
            .spawn(move || {
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(40) {
                    std::hint::spin_loop();
                }
                // Stays alive until the meter has taken its last sample.
                rx.recv().ok();
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(60));
        let threads = meter.finish();
        tx.send(()).unwrap();
        busy.join().unwrap();
        let busy = threads
            .iter()
            .find(|t| t.name == "meter-test-busy")
            .expect("the busy thread was sampled");
        // It spun for 40 ms of wall time (on a busy host with less CPU than that).
        assert!(busy.seconds > 0.0, "{busy:?}");
        assert!(threads.iter().any(|t| t.name == "cpu-meter"));
        // The process's main thread (the test harness's) has the process's id.
        let pid = std::process::id() as i32;
        assert!(threads.iter().any(|t| t.tid == pid), "{threads:?}");
    }

    #[test]
    fn the_meter_measures_this_host() {
        let m = HiccupMeter::start().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let r = m.finish();
        assert!(r.wakeups >= 1, "{r:?}");
        assert!(r.p50 <= r.p99 && r.p99 <= r.p999 && r.p999 <= r.max);
    }
}
