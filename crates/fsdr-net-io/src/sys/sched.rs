//! Scheduling of the calling thread: CPU affinity, real-time priority, batch policy and timer
//! slack.

use std::io;

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    set_thread_cpus(&[cpu])
}

/// Lets the calling thread run on `cpus` only (its affinity mask); threads it starts
/// afterwards inherit the mask, so called first in `main` it places the whole process, as
/// `taskset -c` does.
///
/// ```
/// use fsdr_net_io::sys::sched::{allowed_cpus, set_thread_cpus};
///
/// let cpus = allowed_cpus().unwrap();
/// std::thread::spawn(move || {
///     set_thread_cpus(&cpus[..1]).unwrap();
///     assert_eq!(allowed_cpus().unwrap(), &cpus[..1]);
/// })
/// .join()
/// .unwrap();
/// ```
pub fn set_thread_cpus(cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no CPU given to run on",
        ));
    }
    let mut set = nix::sched::CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} out of range"),
            )
        })?;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(io::Error::from)
}

/// The CPUs the calling thread may run on (its affinity mask), in ascending order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))?;
    Ok((0..nix::sched::CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect())
}

/// Gives the calling thread SCHED_FIFO at `priority` (1..=99).
pub fn set_fifo_priority(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: param is a valid sched_param that outlives the call; pthread_self() is the
    // calling thread (nix has no wrapper for pthread_setschedparam).
    // Checked by: `batch_policy_is_per_thread_and_leaves_other_policies` under ASan.
    let r = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

/// The scheduling policy (`libc::SCHED_OTHER`, `SCHED_BATCH`, `SCHED_FIFO`, …) of a thread
/// of this process, by its kernel thread ID (0: the calling thread).
pub fn thread_policy(tid: i32) -> io::Result<i32> {
    // SAFETY: sched_getscheduler only reads the policy of the given thread.
    // Checked by: `batch_policy_is_per_thread_and_leaves_other_policies` under ASan.
    let r = unsafe { libc::sched_getscheduler(tid) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Moves the calling thread from `SCHED_OTHER` to `SCHED_BATCH`, so that when woken it no
/// longer preempts the thread running on its CPU (it waits for the next scheduler tick or
/// an idle CPU). A thread with any other policy (real-time, idle, already batch) is left
/// alone. Returns whether the policy changed.
///
/// This is what keeps two FutureSDR workers from spinning on each other: FutureSDR 0.0.40's
/// circular buffer wakes the other block while it holds a spin lock, and a worker woken onto
/// the lock holder's CPU preempts the holder and spins until the tick ends its time slice.
///
/// ```
/// std::thread::spawn(|| {
///     let changed = fsdr_net_io::sys::sched::set_batch_policy().unwrap();
///     let policy = fsdr_net_io::sys::sched::thread_policy(0).unwrap();
///     assert!(!changed || policy == libc::SCHED_BATCH);
/// })
/// .join()
/// .unwrap();
/// ```
pub fn set_batch_policy() -> io::Result<bool> {
    if thread_policy(0)? != libc::SCHED_OTHER {
        return Ok(false);
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: param is a valid sched_param that outlives the call; pid 0 is the calling
    // thread (Linux schedules threads, not processes).
    // Checked by: `batch_policy_is_per_thread_and_leaves_other_policies` under ASan.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(true)
    }
}

/// Sets the calling thread's timer slack (Linux's default is 50 µs), so that short sleeps of
/// a pacer end on time. Affects only the calling thread: call it on the thread that sleeps.
pub fn set_timer_slack_ns(ns: u64) {
    if let Err(e) = nix::sys::prctl::set_timerslack(ns as libc::c_ulong) {
        tracing::debug!(error = %e, "PR_SET_TIMERSLACK");
    }
}

/// The calling thread's timer slack in nanoseconds.
pub fn timer_slack_ns() -> io::Result<u64> {
    nix::sys::prctl::get_timerslack()
        .map(|v| v as u64)
        .map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_policy_is_per_thread_and_leaves_other_policies() {
        let before = thread_policy(0).unwrap();
        std::thread::spawn(|| {
            assert_eq!(thread_policy(0).unwrap(), libc::SCHED_OTHER);
            assert!(set_batch_policy().unwrap());
            assert_eq!(thread_policy(0).unwrap(), libc::SCHED_BATCH);
            // Already batch: nothing to do.
            assert!(!set_batch_policy().unwrap());
        })
        .join()
        .unwrap();
        assert_eq!(thread_policy(0).unwrap(), before);
        // A real-time thread keeps its policy (needs CAP_SYS_NICE; skipped without).
        std::thread::spawn(|| {
            if set_fifo_priority(1).is_ok() {
                assert!(!set_batch_policy().unwrap());
                assert_eq!(thread_policy(0).unwrap(), libc::SCHED_FIFO);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn timer_slack_is_per_thread() {
        let before = timer_slack_ns().unwrap();
        std::thread::spawn(|| {
            set_timer_slack_ns(1_000);
            assert_eq!(timer_slack_ns().unwrap(), 1_000);
        })
        .join()
        .unwrap();
        assert_eq!(timer_slack_ns().unwrap(), before);
    }

    #[test]
    fn pinning_to_an_impossible_cpu_is_an_error() {
        assert!(pin_current_thread(1 << 20).is_err());
    }
}
