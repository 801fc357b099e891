//! What `cargo xtask loss` is asked: the arguments, the receivers and their options, the rates.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

/// The receivers of the default matrix, in table order: fsdr-net's flowgraph as the
/// builder makes it (`flowgraph`: in place into the default buffer), for every
/// backend of `Backend::ALL` and with the zero-copy in-place source (over AF_XDP too with
/// `netns`), the engine for every
/// backend and inline (received on the consumer's thread), the in-place receiver alone (on
/// its own thread, and inline), FutureSDR's own source, and the recvmmsg reference. Backends
/// that need a real link (xdp) only with `netns` (the sweep over a veth pair).
pub fn receivers(netns: bool) -> Vec<String> {
    let backends: Vec<_> = fsdr_net_io::Backend::ALL
        .iter()
        .filter(|b| netns || b.capabilities().loopback)
        .collect();
    ["flowgraph", "flowgraph-fc32"]
        .map(String::from)
        .into_iter()
        .chain(backends.iter().map(|b| format!("flowgraph-{b}")))
        .chain(["flowgraph-inplace".to_string()])
        .chain(netns.then(|| "flowgraph-inplace-xdp".to_string()))
        .chain(backends.iter().map(|b| format!("engine-{b}")))
        .chain(["engine-inline".to_string()])
        .chain(["inplace", "inplace-inline", "futuresdr", "recvmmsg"].map(String::from))
        .collect()
}

/// The receivers that take a stream of several channels (`--channels`), in table order.
pub(crate) const MULTI_CHANNEL: [&str; 3] =
    ["flowgraph-multi", "flowgraph-multi-inplace", "recvmmsg"];

/// Whether a receiver takes several ports (`--ports`).
pub(crate) fn takes_ports(name: &str) -> bool {
    name == "recvmmsg"
        || name == "flowgraph"
        || name.starts_with("flowgraph-") && !name.starts_with("flowgraph-multi")
}

/// One receiver of the sweep as given: `loss_rx`'s receiver and the options it runs with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReceiverSpec {
    /// `loss_rx --receiver`.
    pub(crate) name: String,
    /// Further `loss_rx` arguments.
    pub(crate) args: Vec<String>,
}

impl ReceiverSpec {
    /// `engine-mio+gro`, `flowgraph-inplace:coalesce-us=1000:gro`.
    pub(crate) fn parse(spec: &str) -> Result<ReceiverSpec> {
        let mut parts = spec.split(':');
        let first = parts.next().unwrap_or_default();
        let (name, gro) = match first.strip_suffix("+gro") {
            Some(name) => (name, true),
            None => (first, false),
        };
        if name.is_empty() {
            bail!("receiver {spec:?}: no receiver name");
        }
        let mut args = Vec::new();
        if gro {
            args.push("--gro".to_string());
        }
        for opt in parts {
            let (flag, value) = match opt.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None => (opt, None),
            };
            if flag.is_empty() || flag.starts_with('-') || flag == "receiver" {
                bail!(
                    "receiver {spec:?}: option {opt:?} should read `name=value` or `name` \
                     (a loss_rx option without its dashes, not --receiver)"
                );
            }
            args.push(format!("--{flag}"));
            args.extend(value.map(String::from));
        }
        Ok(ReceiverSpec {
            name: name.to_string(),
            args,
        })
    }
}

/// What `cargo xtask loss` was asked for.
#[derive(Debug, Clone, clap::Args)]
pub struct LossArgs {
    /// Seconds of stream per cell.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Offered rates in MB/s (datagram bytes on the wire), comma-separated; `unpaced` sends as
    /// fast as the sender can.
    #[arg(long, default_value = "100,200,400,800,unpaced", value_delimiter = ',')]
    pub rates: Vec<String>,
    /// Wire format.
    #[arg(long, default_value = "chdr")]
    pub format: String,
    /// Datagram size in bytes, header included.
    #[arg(long, default_value_t = 8000)]
    pub size: usize,
    /// Receivers (default: every one), comma-separated; `+gro` after an fsdr-net receiver of
    /// the mio or reuseport backend or an in-place one turns UDP GRO on (`engine-mio+gro`,
    /// `flowgraph-inplace+gro`). Options of
    /// `loss_rx` follow a receiver after colons, so that one sweep can compare settings:
    /// `flowgraph-inplace:coalesce-us=1000:coalesce-frames=512` runs it with
    /// `--coalesce-us 1000 --coalesce-frames 512`; a flag without `=` is passed alone.
    #[arg(long, value_delimiter = ',')]
    pub receivers: Vec<String>,
    /// Also find each receiver's highest zero-loss rate by bisection.
    #[arg(long)]
    pub find_max: bool,
    /// Bisection steps for --find-max.
    #[arg(long, default_value_t = 4)]
    pub steps: u32,
    /// Rounds: each runs every receiver at every rate once (interleaved in time); per cell the
    /// run with the median CPU per GB is reported, and the median of its ratios to the
    /// reference run of the same round.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Paced sender: microseconds of stream per send call (as a NIC's interrupt moderation
    /// batches packets); 0 sends packets one at a time, one receiver wake-up each.
    #[arg(long, default_value_t = 100.0)]
    pub burst_us: f64,
    /// The sender leaves out every Nth datagram (`usrp_sim --drop-every`): a lossy link, for
    /// what gaps cost (the in-place source's copied bytes per GB). Delivered is then counted
    /// against the datagrams sent.
    #[arg(long)]
    pub drop_every: Option<u64>,
    /// Channels in the stream: `usrp_sim --channels N` sends N streams (stream ID or CHDR
    /// destination endpoint c) to the one port, the offered rate split evenly among them.
    /// Only `flowgraph-multi` (a `MultiUdpSource`, an output per channel) and `recvmmsg` (every
    /// datagram counted) take several; they are the default receivers then.
    #[arg(long, default_value_t = 1)]
    pub channels: usize,
    /// Ports: N streams, each from its own `usrp_sim` to one of N consecutive ports (the
    /// offered rate split evenly), as a radio whose channels stream to ports of their own.
    /// Only `flowgraph-<backend>` and `flowgraph-inplace` (a source per port, in one
    /// flowgraph) and `recvmmsg` (a loop per port, each on its own thread) take several.
    #[arg(long, default_value_t = 1)]
    pub ports: usize,
    /// The sender on a CPU of its own (the first this process may use) and the receiver on
    /// the others (`usrp_sim --cpus`, `loss_rx --cpus`), as a radio is another machine.
    /// Without it the scheduler places both, and on loopback the receive copy reads what the
    /// sender has just written: the bare loop costs 0.09 CPU-s/GB when it runs on the
    /// sender's CPU and 0.22–0.27 on the other, so the reference, and every ratio to it,
    /// follows where the scheduler happened to put the loop. FutureSDR's default runtime
    /// then has one worker per receiver CPU.
    #[arg(long)]
    pub pin: bool,
    /// FutureSDR smol workers of the flowgraph receivers (fsdr-net's and FutureSDR's UdpSource
    /// alike); default (and 0): FutureSDR's default runtime, `Runtime::new()`, one worker per
    /// core, which is what every user gets.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Leave out of the ratios to the reference every round in which the receiver's run or
    /// the reference's had more than this share of the machine's CPU time stolen by the host
    /// (percent; default: keep every round). The tables say how many rounds were kept.
    #[arg(long, value_parser = parse_percent)]
    pub max_steal: Option<f64>,
    /// Run over a veth pair between two network namespaces made for the sweep (MTU 9000;
    /// nothing leaves on a real interface): every receiver in one, the sender in the other,
    /// whose end segments in software, so that each datagram is one frame as from a radio.
    /// The receivers of backends that need a real link (`engine-xdp`, `flowgraph-xdp`) run
    /// only so, and join the default list then. Needs root.
    #[arg(long)]
    pub netns: bool,
    /// Print JSON instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Output folder for the CSV and PNG.
    #[arg(long, default_value = "target/fsdr-net")]
    pub out: PathBuf,
}

/// A percentage (0..=100) as a share (0..=1).
pub(crate) fn parse_percent(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(format!("{s:?} is not a percentage from 0 to 100")),
    }
}

/// An offered rate: MB/s, or as fast as the sender goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Rate {
    MBps(f64),
    Unpaced,
}

impl Rate {
    pub(crate) fn parse(s: &str) -> Result<Rate> {
        match s.trim() {
            "unpaced" | "max" => Ok(Rate::Unpaced),
            v => {
                let r: f64 = v.parse().with_context(|| format!("rate {v:?}"))?;
                if !(r > 0.0 && r.is_finite()) {
                    bail!("rate {v:?} must be a positive number of MB/s or `unpaced`");
                }
                Ok(Rate::MBps(r))
            }
        }
    }

    pub(crate) fn label(&self) -> String {
        match self {
            Rate::MBps(r) => format!("{r} MB/s"),
            Rate::Unpaced => "unpaced".into(),
        }
    }
}
