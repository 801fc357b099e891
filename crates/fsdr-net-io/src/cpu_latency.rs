//! [`CpuLatencyRequest`]: keeps idle CPUs out of deep idle states while a low-latency
//! receiver runs, through Linux's PM QoS interface (`/dev/cpu_dma_latency`).
//!
//! A thread that hands a datagram over wakes another thread. When that thread's CPU is idle,
//! the wake-up waits for the CPU to leave its idle state. On bare metal a deep C-state takes
//! tens to hundreds of microseconds to leave. In a virtual machine an idle vCPU halts and its
//! host thread sleeps, so waking it means the hypervisor scheduling that thread again, which
//! took up to milliseconds on the 2-vCPU guests fsdr-net is measured on: most of the
//! latency tail of `cargo xtask latency --usrp` (see docs/PERFORMANCE.md).
//!
//! While a request for 0 µs is held, cpuidle picks only states that leave at once (the
//! polling state), so idle CPUs spin instead of halting. That costs power, and a guest's idle
//! vCPUs then keep their host CPUs busy: it is a setting for a machine given over to the
//! stream, as tuned's `latency-performance` profile and cyclictest use it. The request ends
//! when the value is dropped (the kernel drops it when the file is closed, also when the
//! process dies).
//!
//! Writing the file needs root (it is mode 0600).
//!
//! ```no_run
//! use std::time::Duration;
//! use fsdr_net_io::cpu_latency::{current, CpuLatencyRequest};
//!
//! let request = CpuLatencyRequest::new(Duration::ZERO)?;
//! assert_eq!(current()?, Duration::ZERO); // the strictest request in force
//! // ... receive ...
//! drop(request); // idle states as before
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::time::Duration;

/// The PM QoS device: writing an `i32` of microseconds requests that CPUs leave idle within
/// that time, for as long as the file stays open; reading gives the strictest request.
const PATH: &str = "/dev/cpu_dma_latency";

/// A CPU wake-up latency request, in force while this value lives.
#[derive(Debug)]
pub struct CpuLatencyRequest {
    /// Holds the request: closing the file ends it.
    _file: File,
    max: Duration,
}

impl CpuLatencyRequest {
    /// Requests that idle CPUs wake within `max` (rounded down to whole microseconds;
    /// `Duration::ZERO` keeps them polling).
    ///
    /// Fails where the device is missing or not writable (not root).
    pub fn new(max: Duration) -> io::Result<Self> {
        let us = i32::try_from(max.as_micros()).unwrap_or(i32::MAX);
        let mut file = OpenOptions::new().write(true).open(PATH)?;
        file.write_all(&us.to_ne_bytes())?;
        tracing::debug!(max_us = us, "CPU wake-up latency requested");
        Ok(Self { _file: file, max })
    }

    /// The latency requested.
    pub fn max(&self) -> Duration {
        self.max
    }
}

/// The request an engine configuration asks for, as the engine's error.
pub(crate) fn request(max: Option<Duration>) -> Result<Option<CpuLatencyRequest>, crate::Error> {
    max.map(|max| {
        CpuLatencyRequest::new(max).map_err(|source| crate::Error::CpuLatency { max, source })
    })
    .transpose()
}

/// The strictest CPU wake-up latency requested on this machine now, by any process
/// (`/dev/cpu_dma_latency`; about 2000 s when nobody asks).
pub fn current() -> io::Result<Duration> {
    let mut raw = [0u8; 4];
    File::open(PATH)?.read_exact(&mut raw)?;
    let us = i32::from_ne_bytes(raw);
    Ok(Duration::from_micros(u64::try_from(us).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_holds_while_it_lives_and_ends_when_dropped() {
        let req = match CpuLatencyRequest::new(Duration::from_micros(7)) {
            Ok(r) => r,
            Err(e) => {
                println!("skipped: {PATH} not writable here ({e})");
                return;
            }
        };
        // Another process could hold a stricter request; ours holds at least.
        assert!(current().unwrap() <= Duration::from_micros(7));
        assert_eq!(req.max(), Duration::from_micros(7));
        drop(req);
        // Another process may hold a request of its own, so the value after is shown, not
        // checked (the engine and in-place tests check it around their own requests).
        let after = current().unwrap();
        println!("after the request ended: {after:?}");
    }
}
