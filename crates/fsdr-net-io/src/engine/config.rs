//! [`EngineConfig`]: everything a receive engine needs to start, and its validation.

use std::net::SocketAddr;
use std::time::Duration;

use crate::format::Format;
use crate::seq::SeqConfig;
use crate::socket::SocketConfig;
use crate::sys::ReuseportSpread;

// The `Backend` enum, from the one table of backends (`backend/list.rs`); its dispatch to
// the implementations is `backend/mod.rs`'s, which also checks a configuration against the
// backend it names (`EngineConfig::validate`).
macro_rules! backend_enum {
    ($( $(#[$attr:meta])* $variant:ident = $name:literal => $imp:path $(, feature $feature:literal)?; )*) => {
        /// Receive backends. See each one's documentation, and the README's table for when to
        /// pick which.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        #[non_exhaustive]
        pub enum Backend {
            $( $(#[$attr])* $variant, )*
        }

        impl Backend {
            /// Every backend of this build, in table order (io_uring ones only with the
            /// `uring` feature).
            pub const ALL: &'static [Backend] = &[
                $( $(#[cfg(feature = $feature)])? Backend::$variant, )*
            ];

            /// Every backend name, including those this build leaves out.
            pub(crate) const EVERY: &'static [Backend] = &[ $( Backend::$variant, )* ];
        }
    };
}
super::backend::list::backend_list!(backend_enum);

/// Pinning and priority of receive threads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadOptions {
    /// CPUs to pin receive threads to, round-robin (empty: no pinning).
    pub cpus: Vec<usize>,
    /// SCHED_FIFO priority (1..=99) for receive threads.
    pub fifo_priority: Option<i32>,
}

/// What the receive side does when the consumer falls behind (every slot held, or the
/// queue in front of it longer than the latency budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overload {
    /// Stop reading until the consumer catches up: the kernel's receive buffer absorbs the
    /// burst and drops what does not fit (counted as `kernel_drops`), which costs nothing, so
    /// an overloaded receiver spends its CPU on data that is delivered (no receive livelock).
    #[default]
    Pause,
    /// Keep reading and drop in the receive thread (counted as `overflow`): the socket queue
    /// stays short, so what gets through is the freshest data, at the cost of reading
    /// everything that is thrown away.
    Discard,
}

/// How the receive side wakes the consumer: at most once per `frames` datagrams or `time`,
/// like a NIC's interrupt moderation (`ethtool -C rx-frames/rx-usecs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coalesce {
    /// Wake after every receive call that handed something over.
    Off,
    /// Wake when `frames` datagrams wait or the first of them has waited `time`.
    Fixed {
        /// Datagrams that wake at once.
        frames: usize,
        /// The longest a datagram waits for its wake-up.
        time: Duration,
    },
    /// Like `Fixed`, but at once when traffic is sparse (the last wake-up was `time` or more
    /// before the first waiting datagram), so latency at low rates does not grow; batched
    /// under load. A receive that comes when the first waiting datagram has waited half of
    /// `time` wakes at once too: the next receive would come too late, and a timer of its own
    /// would cost the receive thread a wake-up of its own. So under bursty load the consumer is
    /// woken by the receives themselves, and the timer only ends a stream that stops.
    Adaptive {
        /// Datagrams that wake at once.
        frames: usize,
        /// The longest a datagram waits for its wake-up.
        time: Duration,
    },
}

/// When the datagrams waiting for a wake-up must wake the consumer ([`Coalesce::schedule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WakeSchedule {
    /// A receive at or after this time (CLOCK_MONOTONIC ns) wakes the consumer.
    pub(crate) on_receive: u64,
    /// Without another receive, a timer wakes it at this time.
    pub(crate) at_latest: u64,
}

impl Coalesce {
    /// The wake moderation for a latency budget: how long a datagram may take from its
    /// arrival to the consumer under load. Half of it is the longest a datagram waits for its
    /// wake-up (the other half is left for the hand-over and the consumer's scheduling),
    /// sparse traffic wakes at once, and [`BUDGET_FRAMES`](Self::BUDGET_FRAMES) waiting
    /// datagrams wake at once too ([`Coalesce::Adaptive`]), so that at high rates what a
    /// wake-up hands over still fits the caches. A zero budget wakes after every receive
    /// ([`Coalesce::Off`]): the lowest latency and the most wake-ups. The blocks' builder
    /// sets it with `latency_budget` (default 2 ms).
    ///
    /// ```
    /// use fsdr_net_io::Coalesce;
    /// use std::time::Duration;
    ///
    /// assert_eq!(Coalesce::for_latency_budget(Duration::ZERO), Coalesce::Off);
    /// assert_eq!(
    ///     Coalesce::for_latency_budget(Duration::from_millis(2)),
    ///     Coalesce::Adaptive { frames: 64, time: Duration::from_millis(1) },
    /// );
    /// ```
    pub fn for_latency_budget(budget: Duration) -> Coalesce {
        if budget.is_zero() {
            Coalesce::Off
        } else {
            Coalesce::Adaptive {
                frames: Self::BUDGET_FRAMES,
                time: budget / 2,
            }
        }
    }

    /// Datagrams that wake the consumer at once under a latency budget: 64 (512 KB of
    /// 8000-byte datagrams). At 1.97 GB/s a 1 ms wait without it gathered 250 datagrams a
    /// wake-up and cost 0.33–0.35 CPU-s/GB against 0.27–0.31 with it; at 393 MB/s of 1472 B
    /// it made no difference (docs/measurements/2026-11-26.md).
    pub const BUDGET_FRAMES: usize = 64;

    /// When `pending` datagrams, the first of them handed over at `first_ns`, must wake the
    /// consumer, given its last wake-up at `last_wake_ns`.
    pub(crate) fn schedule(&self, pending: u64, first_ns: u64, last_wake_ns: u64) -> WakeSchedule {
        let at = |on_receive, at_latest| WakeSchedule {
            on_receive,
            at_latest,
        };
        match *self {
            Coalesce::Off => at(first_ns, first_ns),
            Coalesce::Fixed { frames, time } => {
                if pending >= frames as u64 {
                    at(first_ns, first_ns)
                } else {
                    let t = first_ns + time.as_nanos() as u64;
                    at(t, t)
                }
            }
            Coalesce::Adaptive { frames, time } => {
                let t = time.as_nanos() as u64;
                if pending >= frames as u64 || first_ns.saturating_sub(last_wake_ns) >= t {
                    at(first_ns, first_ns)
                } else {
                    at(first_ns + t / 2, first_ns + t)
                }
            }
        }
    }
}

impl Default for Coalesce {
    fn default() -> Self {
        Coalesce::Adaptive {
            frames: 64,
            time: Duration::from_micros(50),
        }
    }
}

/// Default bytes per slot: a 9000-byte jumbo frame's UDP payload, rounded up.
pub const DEFAULT_SLOT_SIZE: usize = 9216;

/// Everything the engine needs to start.
///
/// ```
/// use fsdr_net_io::{Backend, EngineConfig, Format};
///
/// let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
/// cfg.backend = Backend::Reuseport;
/// cfg.reuseport_threads = 2;
/// cfg.format = Format::Chdr;
/// assert_eq!(cfg.thread_count(), 2);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// The socket.
    pub socket: SocketConfig,
    /// Which backend.
    pub backend: Backend,
    /// Wire format of the datagrams.
    pub format: Format,
    /// Datagrams per `recvmmsg` call.
    pub batch: usize,
    /// Slots per receive thread: how many datagrams may wait for the consumer.
    pub slots: usize,
    /// Bytes per slot: the largest datagram accepted whole (larger ones are `truncated`).
    pub slot_size: usize,
    /// Pinning and priority.
    pub threads: ThreadOptions,
    /// Datagrams held back per stream to restore order (0 disables reordering). Bounded by
    /// half the format's sequence space (7 for VITA-49's 4-bit counter) unless the timestamps
    /// widen it.
    pub reorder_window: usize,
    /// How long a missing datagram is waited for, counted from the arrival that showed it
    /// missing (a later one): held datagrams wait at most this long after their gap was
    /// seen, however many gaps are open at once.
    pub reorder_timeout: Duration,
    /// Sequence rules; `None` uses the format's defaults.
    pub seq: Option<SeqConfig>,
    /// `reuseport`: number of receive threads (and sockets).
    pub reuseport_threads: usize,
    /// `reuseport`: spread datagrams over the sockets with a classic-BPF program instead of
    /// the kernel's 4-tuple hash (which sends one flow to one socket).
    pub reuseport_spread: Option<ReuseportSpread>,
    /// `uring`: receive operations kept in flight.
    pub uring_depth: usize,
    /// `uring-multishot`: overflow buffers put in the provided-buffer ring when the consumer
    /// holds every slot (datagrams landing there are counted as `overflow`); `None`: `batch`
    /// with [`Overload::Discard`], 0 with [`Overload::Pause`] (the ring runs dry, the multishot
    /// receive ends, and the kernel's queue absorbs or drops until it is re-armed).
    pub uring_overflow_buffers: Option<usize>,
    /// What to do when the consumer falls behind.
    pub overload: Overload,
    /// How the consumer is woken.
    pub coalesce: Coalesce,
    /// The longest datagrams should wait for the consumer: the queue in front of it is
    /// bounded to this much of the measured arrival rate (and by `slots`); beyond it the
    /// `overload` policy applies. `None`: bounded by `slots` only.
    pub latency_budget: Option<Duration>,
    /// Hand VRT context packets ([`PacketClass::Context`](crate::PacketClass)) to the consumer,
    /// outside sequence tracking, instead of counting them as `skipped` (default: off).
    pub deliver_context: bool,
    /// The stream's rates and bytes per sample, when known: gaps are then sized from the
    /// timestamps with the exact ratio ([`StreamClock`](crate::seq::StreamClock)); ratios
    /// not given are learnt from consecutive packets
    /// ([`RateEstimate`](crate::seq::RateEstimate)). The blocks set it from their tick and
    /// sample rates.
    pub clock: crate::seq::StreamClock,
    /// While the engine runs, ask that idle CPUs wake within this time
    /// ([`CpuLatencyRequest`](crate::cpu_latency::CpuLatencyRequest), `/dev/cpu_dma_latency`;
    /// needs root). `Some(Duration::ZERO)` keeps idle CPUs polling, which takes the idle
    /// wake-up out of every hand-over; on a virtual machine it removed most of the latency
    /// tail. Default: none (the machine's idle policy).
    pub cpu_latency: Option<Duration>,
    /// The `xdp` backend's interface, queue and modes ([`XdpConfig`]).
    pub xdp: XdpConfig,
    /// Under load, read the socket at most this often instead of on every arrival (`mio`
    /// and `reuseport` backends, and the in-place receiver on sockets): after a receive call that brought datagrams the thread
    /// sleeps this long, then drains what came meanwhile; a drain that finds nothing goes
    /// back to waiting for the socket. Fewer, larger receives and wake-ups, at up to this
    /// much more latency. Bounded so that the socket's receive buffer holds what arrives
    /// meanwhile at 100 Gb/s (128 MiB: 5 ms; with Linux's default 208 KiB it is off).
    /// Default: none (every arrival); the blocks' latency budget sets a quarter of it.
    pub poll_interval: Option<Duration>,
}

/// Where the `xdp` backend's XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// In the driver where it can, else in the generic path (the reason is logged).
    #[default]
    Auto,
    /// In the driver: before the kernel makes a socket buffer (veth, ixgbe, i40e, ice, mlx5…).
    Native,
    /// In the kernel's generic path, on any interface, after the socket buffer is made.
    Generic,
}

impl std::str::FromStr for XdpMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(XdpMode::Auto),
            "native" | "drv" => Ok(XdpMode::Native),
            "generic" | "skb" => Ok(XdpMode::Generic),
            _ => Err(format!("unknown XDP mode {s:?} (auto, native, generic)")),
        }
    }
}

/// The `xdp` backend's settings: which interface and queue, where the program runs, how the
/// AF_XDP socket binds.
///
/// ```
/// use fsdr_net_io::{Backend, EngineConfig, XdpMode};
///
/// let mut cfg = EngineConfig::new("10.0.0.2:49152".parse().unwrap());
/// cfg.backend = Backend::Xdp;
/// cfg.xdp.interface = Some("eth1".into());
/// cfg.xdp.mode = XdpMode::Generic;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct XdpConfig {
    /// The interface the stream arrives on (required by the `xdp` backend).
    pub interface: Option<String>,
    /// Its receive queue (the NIC's flow steering must put the stream there; 0 on veth).
    pub queue: u32,
    /// Where the program runs.
    pub mode: XdpMode,
    /// Copy or zero-copy bind.
    pub bind: super::XskBind,
    /// Busy polling of the AF_XDP socket for this many microseconds per wait
    /// (`SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL`, `SO_BUSY_POLL_BUDGET`); default: off.
    pub busy_poll_us: Option<u32>,
}

impl EngineConfig {
    /// Defaults for a socket bound to `bind`: mio backend, raw format, batches of 32,
    /// 8192 slots of 9216 bytes, reorder window 64 (5 ms), pause when overloaded, adaptive
    /// wake-ups (64 datagrams / 50 µs), a 20 ms latency budget.
    pub fn new(bind: SocketAddr) -> Self {
        Self {
            socket: SocketConfig::new(bind),
            backend: Backend::default(),
            format: Format::Raw,
            batch: 32,
            slots: 8192,
            slot_size: DEFAULT_SLOT_SIZE,
            threads: ThreadOptions::default(),
            reorder_window: 64,
            reorder_timeout: Duration::from_millis(5),
            seq: None,
            reuseport_threads: 2,
            reuseport_spread: None,
            uring_depth: 64,
            uring_overflow_buffers: None,
            overload: Overload::default(),
            coalesce: Coalesce::default(),
            latency_budget: Some(Duration::from_millis(20)),
            deliver_context: false,
            clock: crate::seq::StreamClock::default(),
            cpu_latency: None,
            xdp: XdpConfig::default(),
            poll_interval: None,
        }
    }

    /// The sequence rules the tracker uses. Short counters (4 and 16 bits) are widened to 64
    /// bits first ([`SeqExtender`](crate::seq::SeqExtender)), so the tracker works in a 64-bit
    /// space for them; `None` for formats without sequence numbers.
    pub fn seq_config(&self) -> Option<SeqConfig> {
        self.tracking().map(|t| t.seq)
    }

    /// How the consumer tracks sequence numbers: `None` for formats without them.
    pub fn tracking(&self) -> Option<crate::seq::Tracking> {
        let mut t = crate::seq::Tracking::for_format(self.format, self.thread_count())?
            .with_clock(self.clock);
        if let Some(seq) = self.seq {
            t.seq = seq;
        }
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    /// Bursts every 100 µs under 64 datagrams / 200 µs: every other burst's receive wakes
    /// the consumer, and no timer is ever the one that does. Under the default (50 µs) each
    /// burst is sparse enough to go at once.
    #[test]
    fn adaptive_wakes_on_receives_under_bursty_load_and_at_once_when_sparse() {
        let d = Coalesce::default();
        assert_eq!(d.schedule(10, 200 * US, 100 * US).on_receive, 200 * US);
        let c = Coalesce::Adaptive {
            frames: 64,
            time: Duration::from_micros(200),
        };
        let (mut pending, mut first, mut last_wake) = (0u64, 0u64, 0u64);
        let mut woken_by_receive = 0;
        for burst in 1..=100u64 {
            let now = burst * 100 * US;
            if pending == 0 {
                first = now;
            }
            pending += 10;
            let due = c.schedule(pending, first, last_wake);
            if now >= due.on_receive {
                woken_by_receive += 1;
                pending = 0;
                last_wake = now;
            } else {
                assert!(
                    due.at_latest > now + 100 * US - US,
                    "the next burst comes first"
                );
            }
        }
        assert_eq!(woken_by_receive, 50);
        // Sparse: the first datagram after a quiet period goes at once.
        let due = c.schedule(1, 10_000 * US, 9_000 * US);
        assert_eq!(due.on_receive, 10_000 * US);
        // Many waiting: at once.
        assert_eq!(c.schedule(64, 5 * US, 4 * US).on_receive, 5 * US);
        // Fixed has no early wake-up; Off is always due.
        let f = Coalesce::Fixed {
            frames: 8,
            time: Duration::from_micros(50),
        };
        let d = f.schedule(1, 100 * US, 99 * US);
        assert_eq!((d.on_receive, d.at_latest), (150 * US, 150 * US));
        assert_eq!(Coalesce::Off.schedule(1, 7, 6).on_receive, 7);
    }
}
