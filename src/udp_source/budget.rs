//! The latency budget of [`UdpSourceBuilder`]: the one setting that trades CPU for latency,
//! and the low-latency preset.

use std::time::Duration;

use fsdr_net_io::Coalesce;
use fsdr_net_io::sample::Item;

use super::UdpSourceBuilder;

impl<T: Item> UdpSourceBuilder<T> {
    /// The default [`latency_budget`](Self::latency_budget): 2 ms from arrival to the
    /// block's output under load.
    pub const DEFAULT_LATENCY_BUDGET: Duration = Duration::from_millis(2);
    /// SCHED_FIFO priority of the receive thread with [`low_latency`](Self::low_latency).
    pub const LOW_LATENCY_PRIORITY: i32 = 50;

    /// The one setting that trades CPU for latency: how long a datagram may take from its
    /// arrival to the block's output under load (default 2 ms). The receive side wakes the
    /// block at most every half of it while datagrams keep coming (sooner when 64 wait; the
    /// in-place source when a buffer is full), and at once when traffic is sparse
    /// ([`Coalesce::for_latency_budget`]); under load the receive threads (`mio`,
    /// `reuseport`, in place) read the socket every quarter of it rather than on every arrival
    /// ([`EngineConfig::poll_interval`](fsdr_net_io::EngineConfig::poll_interval)). Each
    /// wake-up saved spares FutureSDR's workers 20–30 µs on a 2-vCPU VM. Measured
    /// (docs/PERFORMANCE.md, "The latency budget"): with the 2 ms default `UdpSource` costs
    /// about half the CPU per GB of the former 50 µs wake-ups at 800 MB/s (0.32 against 0.61
    /// CPU-s/GB), 0.87× at 393 MB/s of 1472 B; arrival to sink at 200 Msps, p99: 0.9 ms in
    /// place, 1.3 ms through the engine (11-28). `Duration::ZERO` wakes after
    /// every receive; see [`low_latency`](Self::low_latency) for the preset. An explicit
    /// [`coalesce`](Self::coalesce) (or a poll interval set through
    /// [`configure`](Self::configure)) wins. (Not the engine's
    /// [`EngineConfig::latency_budget`](fsdr_net_io::EngineConfig::latency_budget), which
    /// bounds the queue when the flowgraph falls behind.)
    ///
    /// ```
    /// # use fsdr_net::UdpSource;
    /// # use futuresdr::num_complex::Complex32;
    /// # use std::time::Duration;
    /// let src = UdpSource::<Complex32>::builder("127.0.0.1:0")
    ///     .latency_budget(Duration::from_micros(200))
    ///     .build()?;
    /// # Ok::<(), fsdr_net::Error>(())
    /// ```
    pub fn latency_budget(mut self, budget: Duration) -> Self {
        self.budget = Some(budget);
        if !self.coalesce_set {
            self.cfg.coalesce = Coalesce::for_latency_budget(budget);
        }
        if !self.poll_set {
            self.cfg.poll_interval = Self::poll_interval_for(budget);
        }
        self
    }

    /// The low-latency preset: a zero [`latency_budget`](Self::latency_budget) (a wake-up
    /// after every receive, the socket read on every arrival), idle CPUs kept polling while
    /// it runs ([`cpu_latency`](Self::cpu_latency) zero) and the receive thread at
    /// SCHED_FIFO priority [`LOW_LATENCY_PRIORITY`](Self::LOW_LATENCY_PRIORITY) unless set
    /// otherwise. Needs root (or CAP_SYS_NICE and access to `/dev/cpu_dma_latency`):
    /// building fails with a clear error otherwise. Measured: arrival to sink p99 59–81 µs
    /// at 200 Msps on a 2-vCPU VM with the sender on the other CPU (`cargo xtask latency
    /// --usrp --rate 200e6 --pin -- --low-latency`; 64–146 µs beside it, 34–41 µs at 50
    /// Msps), at the cost of the most wake-ups and idle CPUs that spin.
    pub fn low_latency(mut self) -> Self {
        self.low_latency = true;
        self.latency_budget(Duration::ZERO)
    }

    /// How often a receive thread reads the socket under `budget`: a quarter of it (none
    /// below 80 µs, where the sleep would be too short to save a wake-up). An eighth cost
    /// the zero-copy source 1.25x the bare loop's CPU per GB at the X410's rate, a quarter
    /// 1.19x, for 60 µs more at p99 (docs/measurements/2026-11-28.md).
    pub(super) fn poll_interval_for(budget: Duration) -> Option<Duration> {
        let every = budget / 4;
        (every >= Duration::from_micros(20)).then_some(every)
    }
}
