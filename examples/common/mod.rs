//! Command-line pieces shared by the examples.
#![allow(dead_code)]

use fsdr_net::io::Format;
use fsdr_net::io::emulator::{ContextPlan, Faults, Signal};

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings).
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
}

/// Parses numbers written as `200e6` as well as `200000000`.
pub fn parse_f64(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{s:?} must be a non-negative number"))
    }
}

/// Parses a rate (samples or ticks per second) written as `200e6` as well as `200000000`:
/// a positive number (0, a negative one or NaN is clap's error, exit code 2).
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{s:?}: {e}"))?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!("{s:?} must be a positive number"))
    }
}

/// Parses an address as the builders take it: `host:port` with a host name
/// (`localhost:49000`) or an IP address, resolved once to its first address
/// (`fsdr_net::io::resolve`); a name that does not resolve is clap's error (exit code 2).
pub fn parse_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    fsdr_net::io::resolve(s).map_err(|e| e.to_string())
}

/// Ends the process as clap does for a bad command line: `msg` with the usage, exit code 2.
pub fn usage_error<P: clap::CommandFactory>(msg: impl std::fmt::Display) -> ! {
    P::command()
        .error(clap::error::ErrorKind::ArgumentConflict, msg)
        .exit()
}

/// A duration of `s` seconds (0 for less; `Duration::MAX` beyond what a `Duration` holds, which
/// the library then refuses with an error naming the setting).
pub fn seconds(s: f64) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(std::time::Duration::MAX)
}

/// Parses counts written as `1e6` as well as `1000000`.
pub fn parse_u64(s: &str) -> Result<u64, String> {
    parse_f64(s).map(|v| v as u64)
}

/// UHD remote-streaming mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[allow(non_camel_case_types)]
pub enum Mode {
    /// Samples only, no header: gaps cannot be seen.
    #[value(name = "raw_payload", alias = "raw-payload")]
    raw_payload,
    /// CHDR packets with sequence numbers and timestamps.
    #[value(name = "full_packet", alias = "full-packet")]
    full_packet,
}

/// The wire format for a mode, unless a format is named.
pub fn format_for(mode: Mode, format: Option<Format>) -> Format {
    format.unwrap_or(match mode {
        Mode::raw_payload => Format::Raw,
        Mode::full_packet => Format::Chdr,
    })
}

/// The emulated signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SignalArg {
    /// A tone at 1% of the sample rate.
    Tone,
    /// A counter a receiver can verify sample by sample.
    Ramp,
}

impl From<SignalArg> for Signal {
    fn from(s: SignalArg) -> Signal {
        match s {
            SignalArg::Tone => Signal::Tone {
                cycles_per_sample: 0.01,
            },
            SignalArg::Ramp => Signal::Ramp,
        }
    }
}

/// Fault injection flags of the emulator.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct FaultArgs {
    /// Drop every N-th packet.
    #[arg(long)]
    pub drop_every: Option<u64>,
    /// Send every N-th packet after its successor.
    #[arg(long)]
    pub reorder_every: Option<u64>,
    /// Send every N-th packet twice.
    #[arg(long)]
    pub duplicate_every: Option<u64>,
    /// Start the sequence numbers over after N packets.
    #[arg(long)]
    pub restart_after: Option<u64>,
    /// With --channels: inject the faults into this channel only (0-based).
    #[arg(long)]
    pub fault_channel: Option<usize>,
}

impl From<FaultArgs> for Faults {
    fn from(f: FaultArgs) -> Faults {
        Faults {
            drop_every: f.drop_every,
            reorder_every: f.reorder_every,
            duplicate_every: f.duplicate_every,
            restart_after: f.restart_after,
            channel: f.fault_channel,
        }
    }
}

/// VITA-49/DIFI context packets from the emulator.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ContextArgs {
    /// VRT: send a DIFI standard context packet (sample rate, frequency, bandwidth, gain)
    /// before the first data packet and then every N data packets.
    #[arg(long)]
    pub context_every: Option<u64>,
    /// The RF reference frequency those context packets announce (Hz).
    #[arg(long, default_value = "1e9", value_parser = parse_f64)]
    pub rf_freq: f64,
    /// Retune after this many data packets: half the sample rate, twice the frequency.
    #[arg(long)]
    pub retune_after: Option<u64>,
}

impl ContextArgs {
    /// The emulator's context plan for a stream at `rate` samples/s, if asked for.
    pub fn plan(&self, rate: f64) -> Option<ContextPlan> {
        let every = self.context_every?;
        Some(ContextPlan {
            every: every.max(1),
            rf_freq: self.rf_freq,
            gain_db: 0.0,
            retune: self
                .retune_after
                .map(|p| (p, rate / 2.0, self.rf_freq * 2.0)),
            difi: true,
        })
    }
}

/// What the receive side does when the flowgraph falls behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OverloadArg {
    /// Stop reading and let the kernel drop (counted as kernel drops).
    Pause,
    /// Keep reading and drop in the receive thread (counted as overflow).
    Discard,
}

/// Runtime and engine tuning shared by the receiving examples.
#[derive(Debug, Clone, clap::Args)]
pub struct TuningArgs {
    /// FutureSDR smol workers (default: FutureSDR's own runtime, one worker per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// When the flowgraph falls behind: pause (default) or discard.
    #[arg(long, value_enum)]
    pub overload: Option<OverloadArg>,
    /// The longest queue in front of the flowgraph, in milliseconds of stream (0: bounded
    /// by slots only); default: the engine's.
    #[arg(long, value_parser = parse_f64)]
    pub latency_budget_ms: Option<f64>,
    /// The sources' one knob, `UdpSourceBuilder::latency_budget`, in milliseconds (default:
    /// the builder's, 2 ms): how long a datagram may take to the block's output under load,
    /// which sets how often the receive thread reads and wakes the flowgraph. Not
    /// --latency-budget-ms (the engine's queue bound).
    #[arg(long, value_parser = parse_f64)]
    pub source_budget_ms: Option<f64>,
    /// Wake the flowgraph at most every this many microseconds under load (0: after every
    /// receive call); default: the blocks' 2 ms latency budget (at once when sparse, at most
    /// every 1 ms under load), for engine-only receivers the engine's (adaptive, 50 µs / 64
    /// datagrams).
    #[arg(long, value_parser = parse_f64)]
    pub coalesce_us: Option<f64>,
    /// With --coalesce-us: wake at once when this many datagrams wait. Raise it with a longer
    /// --coalesce-us, or these 64 decide (64 datagrams of 1472 B arrive in about 240 µs at
    /// 393 MB/s).
    #[arg(long, default_value_t = 64)]
    pub coalesce_frames: usize,
    /// Under load, read the socket at most every this many microseconds (0: on every
    /// arrival); default: the blocks' latency budget's (a quarter of 2 ms), for engine-only
    /// receivers on every arrival.
    #[arg(long, value_parser = parse_f64)]
    pub poll_us: Option<f64>,
    /// Datagram slots of the engine (default: the engine's).
    #[arg(long)]
    pub slots: Option<usize>,
    /// Size of the source's output buffer, in largest datagrams (per buffer for the
    /// in-place source, and for `loss_rx`'s in-place receivers; default: the builder's, 16
    /// and 64).
    #[arg(long)]
    pub buffer_datagrams: Option<usize>,
    /// The in-place source's buffers in its ring (default: the builder's, 32).
    #[arg(long)]
    pub in_place_buffers: Option<usize>,
    /// Receive straight into the source's output, FutureSDR's default buffer
    /// (`UdpSourceBuilder::zero_copy`, which the builder turns on by default where the
    /// items are the wire's and no backend is chosen; here with `--backend recvmmsg` or
    /// `xdp` too).
    #[arg(long)]
    pub zero_copy: bool,
    /// Receive threads of the in-place multi-stream source (default: the builder's, one
    /// per stream up to half the CPUs).
    #[arg(long)]
    pub stream_threads: Option<usize>,
    /// Datagrams per receive call (default: the engine's).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Datagrams held per stream to restore order (0: no reordering; default: the engine's).
    #[arg(long)]
    pub reorder_window: Option<usize>,
    /// Milliseconds a datagram waits for a missing predecessor before the gap counts as
    /// missed (default: the engine's, 5 ms).
    #[arg(long)]
    pub reorder_timeout_ms: Option<f64>,
    /// UDP GRO on receive: coalesced receives split in place (mio and reuseport backends,
    /// and the in-place source and receivers).
    #[arg(long)]
    pub gro: bool,
    /// Kernel receive timestamps (`SO_TIMESTAMPNS`): a datagram's arrival time is when the
    /// kernel queued it, so the time it waited in the socket's queue counts in the latency
    /// probes (`cargo xtask latency --usrp` turns it on).
    #[arg(long)]
    pub kernel_timestamps: bool,
    /// Leave the FutureSDR workers that run fsdr-net's blocks at the default scheduling
    /// policy (otherwise the blocks move them to SCHED_BATCH: `batch_workers`).
    #[arg(long)]
    pub normal_workers: bool,
    /// Give the receive threads SCHED_FIFO at this priority (1..=99; needs root or
    /// CAP_SYS_NICE), as UHD's example programs ask with `uhd::set_thread_priority_safe`.
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=99))]
    pub rx_priority: Option<i32>,
    /// While receiving, ask that idle CPUs wake within this many microseconds (0: keep them
    /// polling; `/dev/cpu_dma_latency`, needs root). Takes the idle wake-up out of each
    /// hand-over, at the cost of idle CPUs spinning.
    #[arg(long, value_parser = parse_f64)]
    pub cpu_latency_us: Option<f64>,
    /// The low-latency preset (`UdpSourceBuilder::low_latency`): wake the flowgraph after
    /// every receive, keep idle CPUs polling, SCHED_FIFO 50 for the receive thread (each
    /// unless given otherwise). Needs root.
    #[arg(long)]
    pub low_latency: bool,
    /// Run the whole process on these CPUs (comma-separated: its affinity, set before any
    /// thread starts, as `taskset -c` does). FutureSDR's default runtime then makes one
    /// worker per CPU given.
    #[arg(long, value_delimiter = ',')]
    pub cpus: Vec<usize>,
    /// AF_XDP.
    #[command(flatten)]
    pub xdp: XdpArgs,
}

impl TuningArgs {
    /// `--cpus`: places the whole process. Call it first in `main`, before any thread starts.
    pub fn place(&self) -> anyhow::Result<()> {
        check_cpus("--cpus", &self.cpus)?;
        if !self.cpus.is_empty() {
            fsdr_net_io::sys::sched::set_thread_cpus(&self.cpus)
                .map_err(|e| anyhow::anyhow!("--cpus {:?}: {e}", self.cpus))?;
        }
        Ok(())
    }

    /// Applies the settings given on the command line to a source: the engine's, and the
    /// workers' scheduling policy.
    pub fn source<T: fsdr_net::io::sample::Item>(
        &self,
        b: fsdr_net::UdpSourceBuilder<T>,
    ) -> fsdr_net::UdpSourceBuilder<T> {
        let b = if self.low_latency { b.low_latency() } else { b };
        let b = match self.source_budget_ms {
            Some(ms) => b.latency_budget(seconds(ms * 1e-3)),
            None => b,
        };
        let b = b
            .batch_workers(!self.normal_workers)
            .configure(|c| self.apply(c));
        // Off is the builder's to decide (by default on where it can be).
        let b = if self.zero_copy { b.zero_copy(true) } else { b };
        let b = match self.in_place_buffers {
            Some(n) => b.in_place_buffers(n),
            None => b,
        };
        let b = match self.stream_threads {
            Some(n) => b.stream_threads(n),
            None => b,
        };
        match self.buffer_datagrams {
            Some(n) => b.buffer_datagrams(n),
            None => b,
        }
    }

    /// Applies the engine settings given on the command line.
    pub fn apply(&self, cfg: &mut fsdr_net::io::EngineConfig) {
        use fsdr_net::io::{Coalesce, Overload};
        use std::time::Duration;
        self.xdp.apply(cfg);
        if let Some(o) = self.overload {
            cfg.overload = match o {
                OverloadArg::Pause => Overload::Pause,
                OverloadArg::Discard => Overload::Discard,
            };
        }
        if let Some(n) = self.slots {
            cfg.slots = n;
        }
        if let Some(n) = self.batch {
            cfg.batch = n;
        }
        if let Some(n) = self.reorder_window {
            cfg.reorder_window = n;
        }
        if let Some(ms) = self.reorder_timeout_ms {
            cfg.reorder_timeout = seconds(ms * 1e-3);
        }
        cfg.socket.gro |= self.gro;
        if let Some(p) = self.rx_priority {
            cfg.threads.fifo_priority = Some(p);
        }
        if let Some(us) = self.cpu_latency_us {
            cfg.cpu_latency = Some(seconds(us * 1e-6));
        }
        cfg.socket.timestamps |= self.kernel_timestamps;
        if let Some(ms) = self.latency_budget_ms {
            cfg.latency_budget = (ms > 0.0).then(|| seconds(ms * 1e-3));
        }
        if self.low_latency {
            // The preset for the engine-only receivers (the blocks take the builder's).
            cfg.coalesce = Coalesce::Off;
            cfg.cpu_latency.get_or_insert(Duration::ZERO);
            cfg.threads
                .fifo_priority
                .get_or_insert(fsdr_net::UdpSourceBuilder::<u8>::LOW_LATENCY_PRIORITY);
        }
        if let Some(us) = self.poll_us {
            cfg.poll_interval = (us > 0.0).then(|| seconds(us * 1e-6));
        }
        if let Some(us) = self.coalesce_us {
            cfg.coalesce = if us <= 0.0 {
                Coalesce::Off
            } else {
                Coalesce::Adaptive {
                    frames: self.coalesce_frames,
                    time: seconds(us * 1e-6),
                }
            };
        }
    }

    /// FutureSDR's default runtime, or one with `--workers` smol workers.
    pub fn runtime(
        &self,
    ) -> futuresdr::runtime::Runtime<futuresdr::runtime::scheduler::SmolScheduler> {
        use futuresdr::runtime::Runtime;
        use futuresdr::runtime::scheduler::SmolScheduler;
        match self.workers {
            Some(n) => Runtime::with_scheduler(SmolScheduler::new(n.max(1), false)),
            None => Runtime::new(),
        }
    }
}
pub mod loss;
pub mod multicast;

/// The `xdp` backend's queue and mode (`--backend xdp --interface IFACE`; the interface is
/// the multicast flags' `--interface`, the one the stream arrives on).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct XdpArgs {
    /// `--backend xdp`: the interface's receive queue the stream is steered to.
    #[arg(long, default_value_t = 0)]
    pub queue: u32,
    /// `--backend xdp`: where the XDP program runs: auto (native where the driver has it),
    /// native or generic.
    #[arg(long, default_value = "auto")]
    pub xdp_mode: fsdr_net::io::XdpMode,
    /// `--backend xdp`: busy-poll the AF_XDP socket this many microseconds per wait
    /// (`SO_PREFER_BUSY_POLL`; trades a spinning core for fewer interrupts).
    #[arg(long)]
    pub xdp_busy_poll_us: Option<u32>,
}

impl XdpArgs {
    /// Applies them to an engine configuration.
    pub fn apply(&self, cfg: &mut fsdr_net::io::EngineConfig) {
        cfg.xdp.queue = self.queue;
        cfg.xdp.mode = self.xdp_mode;
        cfg.xdp.busy_poll_us = self.xdp_busy_poll_us;
    }
}

/// At least one: the channel count's parser.
pub fn parse_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err("at least 1".to_string()),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}

/// An error naming `flag` and the CPU when `cpus` holds one this process may not use.
pub fn check_cpus(flag: &str, cpus: &[usize]) -> anyhow::Result<()> {
    let all = fsdr_net_io::sys::sched::allowed_cpus()
        .map_err(|e| anyhow::anyhow!("the CPUs this process may use: {e}"))?;
    match cpus.iter().find(|c| !all.contains(c)) {
        Some(c) => anyhow::bail!("{flag}: CPU {c} is not one this process may use ({all:?})"),
        None => Ok(()),
    }
}
