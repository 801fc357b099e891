//! What else ran on the machine while a receiver ran: [`LoadMeter`] compares the machine's
//! CPU time (`/proc/stat`) with this process's (`/proc/self/stat`), so that a summary can say
//! "other processes used 45% of the 2 CPUs" beside the kernel's drops, which is what a user
//! can act on: a receive thread that does not get a CPU in time loses datagrams in the
//! kernel, whatever the receiver does.

use serde::Serialize;

/// CPU time in clock ticks, machine-wide and of this process, read together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Ticks {
    /// Every CPU's time (the first eight fields of the `cpu` line of `/proc/stat`).
    total: u64,
    /// idle + iowait.
    idle: u64,
    /// steal: the hypervisor ran other guests.
    steal: u64,
    /// This process: utime + stime (fields 14 and 15 of `/proc/self/stat`), children
    /// not included.
    process: u64,
}

/// Parses the aggregate `cpu` line of `/proc/stat`: `(total, idle + iowait, steal)`.
fn parse_machine(stat: &str) -> Option<(u64, u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if v.len() < 8 {
        return None;
    }
    Some((v.iter().take(8).sum(), v[3] + v[4], v[7]))
}

/// Parses `/proc/<pid>/stat`: utime + stime. The command name (field 2) may hold spaces and
/// parentheses: the fields are counted after its last `)`.
fn parse_process(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name, field 3 (state) is f[0]: utime (14) is f[11], stime (15) f[12].
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

impl Ticks {
    fn now() -> Option<Ticks> {
        let (total, idle, steal) = parse_machine(&std::fs::read_to_string("/proc/stat").ok()?)?;
        let process = parse_process(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        Some(Ticks {
            total,
            idle,
            steal,
            process,
        })
    }
}

/// Where the machine's CPU time went during a measurement, as shares (0..=1) of all CPUs'
/// time together.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Load {
    /// CPUs online.
    pub cpus: usize,
    /// Used by this process (every thread: receive threads, workers, an in-process sender).
    pub this_process: f64,
    /// Used by every other process on the machine (and the kernel's work for them).
    pub other_processes: f64,
    /// Taken by the hypervisor for other guests.
    pub steal: f64,
}

impl Load {
    fn between(a: &Ticks, b: &Ticks, cpus: usize) -> Option<Load> {
        let total = b.total.checked_sub(a.total)?;
        if total == 0 {
            return None;
        }
        let idle = b.idle.saturating_sub(a.idle);
        let steal = b.steal.saturating_sub(a.steal);
        let process = b.process.saturating_sub(a.process);
        let busy = total.saturating_sub(idle + steal);
        let share = |t: u64| (t as f64 / total as f64).clamp(0.0, 1.0);
        Some(Load {
            cpus,
            this_process: share(process.min(busy)),
            other_processes: share(busy.saturating_sub(process)),
            steal: share(steal),
        })
    }

    /// The other processes' use in CPUs (0.5: half of one CPU).
    pub fn other_cpus(&self) -> f64 {
        self.other_processes * self.cpus as f64
    }
}

impl std::fmt::Display for Load {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "this process {:.0}%, other processes {:.0}%, hypervisor steal {:.0}% of {} CPUs",
            100.0 * self.this_process,
            100.0 * self.other_processes,
            100.0 * self.steal,
            self.cpus
        )
    }
}

/// Measures [`Load`] between [`start`](Self::start) and [`finish`](Self::finish): two reads
/// of `/proc`, no thread.
///
/// ```
/// use fsdr_net_io::diagnosis::LoadMeter;
///
/// let meter = LoadMeter::start();
/// let mut x = 0u64;
/// for i in 0..20_000_000u64 { x = x.wrapping_add(i * i); } // the measurement
/// std::hint::black_box(x);
/// if let Some(load) = meter.finish() {
///     println!("{load}");
///     assert!(load.other_processes <= 1.0 && load.this_process <= 1.0);
/// }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LoadMeter {
    start: Option<Ticks>,
}

impl LoadMeter {
    /// Reads the counters now.
    pub fn start() -> LoadMeter {
        LoadMeter {
            start: Ticks::now(),
        }
    }

    /// The load since [`start`](Self::start); `None` where `/proc` could not be read or no
    /// clock tick passed (USER_HZ is usually 100: runs of 10 ms and more).
    pub fn finish(&self) -> Option<Load> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Load::between(self.start.as_ref()?, &Ticks::now()?, cpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_lines_parse() {
        let stat = "cpu  100 5 50 800 20 3 2 7 0 0\ncpu0 1 2 3 4 5 6 7 8\n";
        assert_eq!(parse_machine(stat), Some((987, 820, 7)));
        assert_eq!(parse_machine("cpu0 1 2 3\n"), None);
        let me = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194304 100 0 0 0 31 9 0 0 20 0 3";
        assert_eq!(parse_process(me), Some(40));
        assert_eq!(parse_process("4242 (x) S 1"), None);
    }

    #[test]
    fn shares_split_the_busy_time() {
        let a = Ticks::default();
        let b = Ticks {
            total: 200,
            idle: 50,
            steal: 10,
            process: 60,
        };
        let l = Load::between(&a, &b, 2).unwrap();
        assert_eq!(
            (l.this_process, l.other_processes, l.steal),
            (0.3, 0.4, 0.05)
        );
        assert!((l.other_cpus() - 0.8).abs() < 1e-12);
        assert_eq!(Load::between(&a, &a, 2), None);
    }

    #[test]
    fn a_busy_thread_of_this_process_counts_as_this_process() {
        let meter = LoadMeter::start();
        let t0 = std::time::Instant::now();
        let mut x = 1u64;
        while t0.elapsed() < std::time::Duration::from_millis(300) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let Some(l) = meter.finish() else { return };
        // 300 ms of one CPU on a machine of `cpus`: whatever else runs, this process's share
        // is clearly above zero.
        assert!(l.this_process > 0.0, "{l}");
    }
}
