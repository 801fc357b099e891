//! `cargo xtask loss`: what each receiver keeps of a paced stream at each offered rate.
//!
//! For every cell of receivers × rates, one `loss_rx` process binds and announces its address,
//! one `usrp_sim` process sends the stream to it for `--seconds`, and both print JSON. The
//! sender and the receiver are separate processes, so the receiver's getrusage is its own.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};
use fsdr_net_io::Format;
use fsdr_net_io::emulator::EmulatorConfig;
use fsdr_net_io::host::CpuTimes;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

mod report;

use report::{plot, table, write_csv};

/// The receivers of the default matrix, in table order: fsdr-net's flowgraph for every
/// backend of `Backend::ALL` and with the zero-copy in-place source, the engine for every
/// backend and inline (received on the consumer's thread), the in-place receiver alone (on
/// its own thread, and inline), FutureSDR's own source, and the recvmmsg reference.
pub fn receivers() -> Vec<String> {
    let backends = fsdr_net_io::Backend::ALL;
    backends
        .iter()
        .map(|b| format!("flowgraph-{b}"))
        .chain(["flowgraph-inplace".to_string()])
        .chain(backends.iter().map(|b| format!("engine-{b}")))
        .chain(["engine-inline".to_string()])
        .chain(["inplace", "inplace-inline", "futuresdr", "recvmmsg"].map(String::from))
        .collect()
}

/// One receiver of the sweep as given: `loss_rx`'s receiver and the options it runs with.
#[derive(Debug, Clone, PartialEq)]
struct ReceiverSpec {
    /// `loss_rx --receiver`.
    name: String,
    /// Further `loss_rx` arguments.
    args: Vec<String>,
}

impl ReceiverSpec {
    /// `engine-mio+gro`, `flowgraph-inplace:coalesce-us=1000:gro`.
    fn parse(spec: &str) -> Result<ReceiverSpec> {
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
    /// Print JSON instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Output folder for the CSV and PNG.
    #[arg(long, default_value = "target/fsdr-net")]
    pub out: PathBuf,
}

/// A percentage (0..=100) as a share (0..=1).
fn parse_percent(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(format!("{s:?} is not a percentage from 0 to 100")),
    }
}

/// An offered rate: MB/s, or as fast as the sender goes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rate {
    MBps(f64),
    Unpaced,
}

impl Rate {
    fn parse(s: &str) -> Result<Rate> {
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

    fn label(&self) -> String {
        match self {
            Rate::MBps(r) => format!("{r} MB/s"),
            Rate::Unpaced => "unpaced".into(),
        }
    }
}

/// One receiver at one offered rate.
#[derive(Debug, Clone)]
struct Cell {
    receiver: String,
    rate: Rate,
    offered_mbps: f64,
    sent: u64,
    delivered: u64,
    kernel_drops: u64,
    overflows: u64,
    malformed: u64,
    send_errors: u64,
    cpu_seconds: f64,
    bytes: u64,
    /// fsdr-net receivers: datagrams taken from the kernel, receive system calls, wake-ups
    /// of the consumer, pauses; flowgraphs: payload bytes copied after the kernel.
    received: Option<u64>,
    recv_calls: Option<u64>,
    wakeups: Option<u64>,
    paused: Option<u64>,
    copied_bytes: Option<u64>,
    /// Share of the machine's CPU time the hypervisor stole during the run (0..1): a run
    /// with much of it measured the host more than the receiver.
    steal: Option<f64>,
    /// The receiver's CPU time by thread, when `loss_rx` reported it.
    threads: Option<Threads>,
    /// CPU per GB as a multiple of the recvmmsg reference's in the same round (the median
    /// over rounds), when the reference ran.
    ratio: Option<f64>,
    /// Delivered rate as a multiple of the reference's in the same round (the median over
    /// rounds): what counts unpaced, where each receiver keeps what it can.
    delivered_ratio: Option<f64>,
    /// CPU per GB of the thread that reads the socket as a multiple of the reference loop's
    /// thread in the same round (the median over rounds).
    reader_ratio: Option<f64>,
    /// Rounds whose ratios count (`--max-steal` leaves out the others), of `rounds`.
    ratio_rounds: usize,
    /// Rounds run.
    rounds: usize,
}

/// CPU seconds of one receiver run by the threads' roles (`loss_rx`'s `threads`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Threads {
    /// fsdr-net's receive threads.
    receive: f64,
    /// FutureSDR's smol workers.
    workers: f64,
    /// The main thread (the consumer, or the whole loop of the inline receivers and the
    /// reference).
    main: f64,
    /// Every other thread.
    other: f64,
    /// The role whose thread reads the socket.
    reader: Reader,
}

/// Which of a receiver's threads reads the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    /// fsdr-net's own receive threads.
    Receive,
    /// The main thread: the inline receivers and the reference loop.
    Main,
    /// FutureSDR's workers (FutureSDR's own `UdpSource`), shared with the rest of the
    /// flowgraph.
    Workers,
}

impl Reader {
    const ALL: [Reader; 3] = [Reader::Receive, Reader::Main, Reader::Workers];

    /// The role's name in `loss_rx`'s JSON.
    fn name(self) -> &'static str {
        match self {
            Reader::Receive => "receive",
            Reader::Main => "main",
            Reader::Workers => "workers",
        }
    }
}

impl Threads {
    fn parse(v: &Value) -> Option<Threads> {
        let f = |k: &str| v[k].as_f64();
        Some(Threads {
            receive: f("receive")?,
            workers: f("workers")?,
            main: f("main")?,
            other: f("other")?,
            reader: Reader::ALL
                .into_iter()
                .find(|r| Some(r.name()) == v["reader"].as_str())?,
        })
    }

    /// CPU seconds of the threads that read the socket.
    fn reader(&self) -> f64 {
        match self.reader {
            Reader::Receive => self.receive,
            Reader::Main => self.main,
            Reader::Workers => self.workers,
        }
    }

    /// CPU seconds of the workers where they do not read the socket themselves.
    fn workers_apart(&self) -> f64 {
        match self.reader {
            Reader::Workers => 0.0,
            _ => self.workers,
        }
    }
}

impl Cell {
    /// Receive system calls per datagram taken from the kernel.
    fn calls_per_datagram(&self) -> Option<f64> {
        Some(self.recv_calls? as f64 / self.received?.max(1) as f64)
    }

    /// Wake-ups of the consumer per GB delivered.
    fn wakeups_per_gb(&self) -> Option<f64> {
        Some(self.wakeups? as f64 / (self.bytes.max(1) as f64 / 1e9))
    }

    /// Payload bytes copied after the kernel per GB delivered.
    fn copied_per_gb(&self) -> Option<f64> {
        Some(self.copied_bytes? as f64 / (self.bytes.max(1) as f64 / 1e9))
    }

    fn success(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.delivered as f64 / self.sent as f64
        }
    }

    fn lossless(&self) -> bool {
        self.sent > 0 && self.delivered == self.sent
    }

    /// Delivered MB/s.
    fn delivered_mbps(&self) -> f64 {
        self.offered_mbps * self.success()
    }

    /// CPU seconds per GB delivered of some of the receiver's threads.
    fn per_gb(&self, seconds: f64) -> f64 {
        if self.bytes == 0 {
            f64::NAN
        } else {
            seconds / (self.bytes as f64 / 1e9)
        }
    }

    /// CPU per GB of the thread that reads the socket ([`Threads::reader`]).
    fn reader_per_gb(&self) -> f64 {
        self.threads.map_or(f64::NAN, |t| self.per_gb(t.reader()))
    }

    /// CPU per GB of the FutureSDR workers.
    fn workers_per_gb(&self) -> f64 {
        self.threads
            .map_or(f64::NAN, |t| self.per_gb(t.workers_apart()))
    }

    /// The workers' CPU microseconds per wake-up of the consumer (the hand-overs).
    fn workers_per_wakeup_us(&self) -> Option<f64> {
        let w = self.wakeups.filter(|&w| w > 0)?;
        let t = self.threads.filter(|t| t.workers_apart() > 0.0)?;
        Some(t.workers_apart() / w as f64 * 1e6)
    }

    /// `, 2 of 3 rounds` when `--max-steal` left rounds out of the ratios (empty otherwise,
    /// and for the reference itself).
    fn kept_rounds(&self) -> String {
        if self.ratio_rounds < self.rounds && self.receiver != "recvmmsg" {
            format!(", {} of {} rounds", self.ratio_rounds, self.rounds)
        } else {
            String::new()
        }
    }

    fn cpu_per_gb(&self) -> f64 {
        if self.bytes == 0 {
            f64::NAN
        } else {
            self.cpu_seconds / (self.bytes as f64 / 1e9)
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "receiver": self.receiver,
            "rate": self.rate.label(),
            "offered_mbps": self.offered_mbps,
            "sent": self.sent,
            "delivered": self.delivered,
            "success": self.success(),
            "kernel_drops": self.kernel_drops,
            "overflows": self.overflows,
            "malformed": self.malformed,
            "send_errors": self.send_errors,
            "cpu_seconds": self.cpu_seconds,
            "cpu_seconds_per_gb": self.cpu_per_gb(),
            "cpu_ratio_to_reference": self.ratio,
            "ratio_rounds": self.ratio_rounds,
            "rounds": self.rounds,
            "delivered_ratio_to_reference": self.delivered_ratio,
            "received": self.received,
            "recv_calls": self.recv_calls,
            "calls_per_datagram": self.calls_per_datagram(),
            "wakeups": self.wakeups,
            "wakeups_per_gb": self.wakeups_per_gb(),
            "paused": self.paused,
            "copied_bytes": self.copied_bytes,
            "copied_bytes_per_gb": self.copied_per_gb(),
            "steal": self.steal,
            "threads": self.threads.map(|t| json!({
                "receive": t.receive, "workers": t.workers, "main": t.main, "other": t.other,
                "reader": t.reader.name(),
            })),
            "reader_cpu_seconds_per_gb": self.threads.map(|_| self.reader_per_gb()),
            "reader_ratio_to_reference": self.reader_ratio,
            "workers_cpu_seconds_per_gb": self.threads.map(|_| self.workers_per_gb()),
            "workers_us_per_wakeup": self.workers_per_wakeup_us(),
        })
    }
}

/// The highest zero-loss rate found by bisection.
#[derive(Debug, Clone)]
struct MaxRate {
    receiver: String,
    mbps: f64,
    /// True when even the sender's top speed lost nothing: the receiver was not the limit.
    sender_limited: bool,
}

struct Harness {
    args: LossArgs,
    format: Format,
    spp: usize,
    /// Bytes per datagram as sent (header and whole samples).
    datagram: usize,
    /// Smol workers of flowgraph receivers (`None`: FutureSDR's default runtime).
    workers: Option<usize>,
}

fn read_json_line(child: &mut Child) -> Result<Value> {
    let mut out = String::new();
    if let Some(stdout) = child.stdout.as_mut() {
        std::io::Read::read_to_string(stdout, &mut out)?;
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("{status}");
    }
    crate::last_json(&out)
}

impl Harness {
    fn new(args: LossArgs) -> Result<Harness> {
        let format: Format = args.format.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut cfg = EmulatorConfig::new("127.0.0.1:9".parse()?, format);
        let header = cfg.header_len();
        if args.size < header + 4 || args.size > 65_507 {
            bail!(
                "--size {} does not fit a {format} header ({header} B) and one sample, or UDP",
                args.size
            );
        }
        cfg.spp = Some((args.size - header) / 4);
        let spp = cfg.samples_per_packet();
        let datagram = header + 4 * spp;
        let workers = args.workers.filter(|&w| w > 0);
        Ok(Harness {
            args,
            format,
            spp,
            datagram,
            workers,
        })
    }

    /// Runs one receiver at one rate for `seconds`.
    fn cell(&self, receiver: &str, rate: Rate, seconds: f64) -> Result<Cell> {
        let mut rx = Command::new("target/release/examples/loss_rx");
        let spec = ReceiverSpec::parse(receiver)?;
        rx.args(["--receiver", &spec.name, "--format", self.format.name()])
            .args(&spec.args);
        if let Some(w) = self.workers {
            rx.args(["--workers", &w.to_string()]);
        }
        let cpu_before = CpuTimes::now();
        let mut rx = rx
            .args(["--size", &self.datagram.to_string(), "--idle", "0.5"])
            .args(["--timeout", &(seconds + 30.0).to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting loss_rx")?;
        // The first line names the bound address; the rest is read by a thread all along, so
        // that nothing the receiver prints can block it on a full pipe.
        let mut first = String::new();
        let mut reader = BufReader::new(rx.stdout.take().context("loss_rx stdout")?);
        reader.read_line(&mut first)?;
        let rest = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut reader, &mut rest);
            rest
        });
        let Some(addr) = first.trim().strip_prefix("listening on ") else {
            let _ = rx.kill();
            bail!("{receiver}: expected `listening on ADDR`, got {first:?}");
        };
        let datagram = self.datagram as f64;
        let mut tx = Command::new("target/release/examples/usrp_sim");
        tx.args(["--dest", addr, "--format", self.format.name()])
            .args(["--spp", &self.spp.to_string()])
            .args(["--burst-us", &self.args.burst_us.to_string()])
            .args(["--duration", &seconds.to_string()])
            .stdout(Stdio::piped());
        match rate {
            Rate::MBps(mbps) => {
                let sps = mbps * 1e6 / datagram * self.spp as f64;
                tx.args(["--rate", &format!("{sps}")]);
            }
            Rate::Unpaced => {
                tx.arg("--unpaced");
            }
        }
        // If the sender fails, the receiver is stopped too rather than left waiting.
        let sent = tx
            .spawn()
            .context("starting usrp_sim")
            .and_then(|mut tx| read_json_line(&mut tx).context("usrp_sim"));
        let sent = match sent {
            Ok(v) => v,
            Err(e) => {
                let _ = rx.kill();
                let _ = rx.wait();
                return Err(e);
            }
        };
        let rest = rest.join().unwrap_or_default();
        let status = rx.wait()?;
        if !status.success() {
            bail!("loss_rx --receiver {receiver} failed: {status}");
        }
        let steal = cpu_before.and_then(|b| b.steal_to_now());
        let got = crate::last_json(&rest).context("loss_rx's result")?;
        let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
        let stat = |k: &str| got["stats"][k].as_u64();
        let packets = n(&sent, "packets_sent");
        let secs = sent["seconds"].as_f64().unwrap_or(seconds).max(1e-9);
        Ok(Cell {
            receiver: receiver.into(),
            rate,
            offered_mbps: packets as f64 * datagram / secs / 1e6,
            sent: packets - n(&sent, "send_errors"),
            delivered: n(&got, "delivered"),
            kernel_drops: n(&got, "kernel_drops"),
            overflows: n(&got, "overflows"),
            malformed: n(&got, "malformed"),
            send_errors: n(&sent, "send_errors"),
            cpu_seconds: got["cpu_seconds"].as_f64().unwrap_or(f64::NAN),
            bytes: n(&got, "bytes"),
            received: stat("received"),
            recv_calls: stat("recv_calls"),
            wakeups: stat("wakeups"),
            paused: stat("paused"),
            copied_bytes: got["copied_bytes"].as_u64(),
            steal,
            threads: Threads::parse(&got["threads"]),
            ratio: None,
            delivered_ratio: None,
            reader_ratio: None,
            ratio_rounds: 0,
            rounds: 1,
        })
    }

    /// Of one cell's runs, the one with the median CPU per GB; its ratio to the reference is
    /// the median of the ratios each run had to the reference run of its own round (`refs`,
    /// round by round), so that a slow spell of the machine moves both sides of a ratio.
    ///
    /// With `max_steal`, a round in which this run or the reference's had more steal time
    /// is left out of the ratios, and the run reported is the median of the calm ones
    /// (of all, when none was calm).
    fn median_cell(mut runs: Vec<Cell>, refs: Option<&[Cell]>, max_steal: Option<f64>) -> Cell {
        let calm = |c: &Cell| match (max_steal, c.steal) {
            (Some(max), Some(s)) => s <= max,
            _ => true,
        };
        let pairs: Vec<(&Cell, &Cell)> = refs
            .map(|refs| {
                runs.iter()
                    .zip(refs)
                    .filter(|(c, r)| calm(c) && calm(r))
                    .collect()
            })
            .unwrap_or_default();
        let median_ratio = |f: fn(&Cell) -> f64| {
            let mut ratios: Vec<f64> = pairs
                .iter()
                .map(|(c, r)| f(c) / f(r))
                .filter(|x| x.is_finite())
                .collect();
            ratios.sort_by(f64::total_cmp);
            (!ratios.is_empty()).then(|| ratios[ratios.len() / 2])
        };
        let ratio = median_ratio(Cell::cpu_per_gb);
        let delivered_ratio = median_ratio(Cell::delivered_mbps);
        let reader_ratio = median_ratio(Cell::reader_per_gb);
        let rounds = runs.len();
        // Without a reference there is no ratio to leave rounds out of.
        let ratio_rounds = if refs.is_some() { pairs.len() } else { rounds };
        if runs.iter().any(calm) {
            runs.retain(calm);
        }
        runs.sort_by(|a, b| a.cpu_per_gb().total_cmp(&b.cpu_per_gb()));
        let mut c = runs.swap_remove(runs.len() / 2);
        c.ratio = ratio;
        c.delivered_ratio = delivered_ratio;
        c.reader_ratio = reader_ratio;
        c.ratio_rounds = ratio_rounds;
        c.rounds = rounds;
        c
    }

    /// Bisects between the highest lossless and the lowest lossy rate of the sweep.
    fn find_max(&self, receiver: &str, cells: &[Cell], bar: &ProgressBar) -> Result<MaxRate> {
        let mine: Vec<&Cell> = cells.iter().filter(|c| c.receiver == receiver).collect();
        let mut good = mine
            .iter()
            .filter(|c| c.lossless())
            .map(|c| c.offered_mbps)
            .fold(0.0, f64::max);
        let mut bad = mine
            .iter()
            .filter(|c| !c.lossless())
            .map(|c| c.offered_mbps)
            .fold(f64::INFINITY, f64::min);
        if bad.is_infinite() {
            // Nothing of the sweep lost: try the sender's top speed.
            let top = self.cell(receiver, Rate::Unpaced, self.args.seconds)?;
            if top.lossless() {
                return Ok(MaxRate {
                    receiver: receiver.into(),
                    mbps: top.offered_mbps.max(good),
                    sender_limited: true,
                });
            }
            bad = top.offered_mbps;
        }
        if good >= bad {
            good = 0.0;
        }
        for step in 0..self.args.steps {
            let mid = if good == 0.0 {
                bad / 2.0
            } else {
                (good + bad) / 2.0
            };
            bar.set_message(format!("{receiver}: bisection {}, {mid:.0} MB/s", step + 1));
            let c = self.cell(receiver, Rate::MBps(mid), self.args.seconds)?;
            if c.lossless() {
                good = mid;
            } else {
                bad = mid;
            }
        }
        Ok(MaxRate {
            receiver: receiver.into(),
            mbps: good,
            sender_limited: false,
        })
    }
}

/// Runs the sweep, prints the tables, writes the CSV and the PNG.
pub fn run(args: LossArgs, build: impl FnOnce() -> Result<()>) -> Result<()> {
    let rates = args
        .rates
        .iter()
        .map(|r| Rate::parse(r))
        .collect::<Result<Vec<_>>>()?;
    if rates.is_empty() {
        bail!("--rates is empty");
    }
    let receivers: Vec<String> = if args.receivers.is_empty() {
        receivers()
    } else {
        args.receivers.clone()
    };
    // A misspelt receiver option fails here, not after the sweep's first rounds.
    for r in &receivers {
        ReceiverSpec::parse(r)?;
    }
    build()?;
    let h = Harness::new(args.clone())?;
    let runs = args.runs.max(1);
    let total = (receivers.len() * rates.len() * runs) as u64;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")?
            .progress_chars("=> "),
    );
    // Rounds: every receiver at every rate once per round, so that the runs of the
    // receivers (and the reference) are interleaved in time rather than one after another.
    let mut all: Vec<Vec<Vec<Cell>>> = vec![vec![Vec::new(); receivers.len()]; rates.len()];
    for round in 0..runs {
        for (ri, &rate) in rates.iter().enumerate() {
            for (xi, recv) in receivers.iter().enumerate() {
                bar.set_message(format!("round {}: {recv} at {}", round + 1, rate.label()));
                let c = h
                    .cell(recv, rate, args.seconds)
                    .with_context(|| format!("{recv} at {}", rate.label()))?;
                let line = format!(
                    "{recv:>26} {:>12}: offered {:7.1} MB/s, delivered {:>8.4}%, kernel drops {}, overflows {}, {:.2} CPU-s/GB, steal {}",
                    rate.label(),
                    c.offered_mbps,
                    100.0 * c.success(),
                    c.kernel_drops,
                    c.overflows,
                    c.cpu_per_gb(),
                    c.steal.map_or("?".into(), |s| format!("{:.1}%", 100.0 * s)),
                );
                if bar.is_hidden() {
                    eprintln!("{line}");
                } else {
                    bar.println(line);
                }
                all[ri][xi].push(c);
                bar.inc(1);
            }
        }
    }
    let mut steals: Vec<f64> = all
        .iter()
        .flatten()
        .flatten()
        .filter_map(|c| c.steal)
        .collect();
    steals.sort_by(f64::total_cmp);
    let steal_line = match (steals.first(), steals.last()) {
        (Some(lo), Some(hi)) => format!(
            "host steal time per run: {:.1}% to {:.1}% (median {:.1}%) of the machine's CPU time",
            100.0 * lo,
            100.0 * hi,
            100.0 * steals[steals.len() / 2]
        ),
        _ => "host steal time: not readable".into(),
    };
    let reference = receivers.iter().position(|r| r == "recvmmsg");
    let mut cells = Vec::new();
    for per_rate in &mut all {
        let refs: Option<Vec<Cell>> = reference.map(|x| per_rate[x].clone());
        for runs in per_rate.iter_mut() {
            cells.push(Harness::median_cell(
                std::mem::take(runs),
                refs.as_deref(),
                args.max_steal,
            ));
        }
    }
    let mut maxes = Vec::new();
    if args.find_max {
        for recv in &receivers {
            maxes.push(h.find_max(recv, &cells, &bar)?);
        }
    }
    bar.finish_and_clear();
    std::fs::create_dir_all(&args.out)?;
    let csv = args.out.join("loss.csv");
    write_csv(&csv, &cells)?;
    let png = args.out.join("loss.png");
    let plotted = plot(&png, &receivers, &cells, &h);
    if args.json {
        let out = json!({
            "format": h.format.name(),
            "datagram_bytes": args.size,
            "seconds": args.seconds,
            "burst_us": args.burst_us,
            "workers": h.workers,
            "cells": cells.iter().map(Cell::to_json).collect::<Vec<_>>(),
            "max_zero_loss": maxes.iter().map(|m| json!({
                "receiver": m.receiver, "mbps": m.mbps, "sender_limited": m.sender_limited
            })).collect::<Vec<_>>(),
            "steal_per_run": steals,
            "csv": csv,
            "png": plotted.as_ref().ok().map(|_| &png),
        });
        println!("{out}");
    } else {
        let find = |recv: &str, r: Rate| cells.iter().find(|c| c.receiver == recv && c.rate == r);
        println!(
            "{} datagrams of {} B, {} s per cell, paced in {} µs bursts, flowgraphs on {} smol \
             workers; offered = what the sender achieved",
            h.format.name(),
            args.size,
            args.seconds,
            args.burst_us,
            h.workers
                .map_or("FutureSDR's default (one per core)".to_string(), |w| w
                    .to_string())
        );
        println!("{steal_line}");
        if let Some(max) = args.max_steal {
            println!(
                "ratios to the reference from the rounds in which both runs had at most {:.1}% steal",
                100.0 * max
            );
        }
        table(
            "Delivered (% of sent, by sequence-numbered datagrams; unpaced: × the recvmmsg reference's delivered rate, the median of each run's ratio to the reference run of its round)",
            &receivers,
            &rates,
            |recv, r| {
                find(recv, r).map_or("-".into(), |c| {
                    if let Rate::Unpaced = r {
                        let x = c.delivered_ratio.map_or(String::new(), |x| {
                            format!(" ({x:.2}× the reference's rate{})", c.kept_rounds())
                        });
                        format!(
                            "{:.2}% of {:.0} MB/s{x}",
                            100.0 * c.success(),
                            c.offered_mbps
                        )
                    } else {
                        format!("{:.2}%", 100.0 * c.success())
                    }
                })
            },
        );
        table(
            "Lost: kernel drops / receiver overflows (datagrams)",
            &receivers,
            &rates,
            |recv, r| {
                find(recv, r).map_or("-".into(), |c| {
                    format!("{} / {}", c.kernel_drops, c.overflows)
                })
            },
        );
        table(
            "CPU seconds of the receiving process per GB delivered (× the recvmmsg reference: median of each run's ratio to the reference run of its round)",
            &receivers,
            &rates,
            |recv, r| {
                find(recv, r).map_or("-".into(), |c| {
                    let kept = c.kept_rounds();
                    match c.ratio {
                        Some(x) => format!("{:.2} ({x:.2}×{kept})", c.cpu_per_gb()),
                        None if kept.is_empty() => format!("{:.2}", c.cpu_per_gb()),
                        None => format!("{:.2} (no ratio{kept})", c.cpu_per_gb()),
                    }
                })
            },
        );
        let opt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |x| format!("{x:.digits$}"));
        table(
            "Receive system calls per datagram · consumer wake-ups per GB · payload bytes copied per GB",
            &receivers,
            &rates,
            |recv, r| {
                find(recv, r).map_or("-".into(), |c| {
                    format!(
                        "{} · {} · {}",
                        opt(c.calls_per_datagram(), 2),
                        opt(c.wakeups_per_gb(), 0),
                        c.copied_per_gb()
                            .map_or("-".into(), |x| format!("{:.2e}", x)),
                    )
                })
            },
        );
        table(
            "CPU-s/GB by thread: the thread that reads the socket (× the reference loop's thread, median of the rounds' ratios) · FutureSDR's workers (µs per wake-up) · the rest of the process",
            &receivers,
            &rates,
            |recv, r| {
                find(recv, r).map_or("-".into(), |c| match c.threads {
                    None => "-".into(),
                    Some(t) => {
                        let x = c
                            .reader_ratio
                            .map_or(String::new(), |x| format!(" ({x:.2}×)"));
                        let w = c
                            .workers_per_wakeup_us()
                            .map_or(String::new(), |us| format!(" ({us:.1} µs)"));
                        let rest = t.receive + t.workers + t.main + t.other
                            - t.reader()
                            - t.workers_apart();
                        format!(
                            "{:.2}{x} · {:.2}{w} · {:.2}",
                            c.reader_per_gb(),
                            c.workers_per_gb(),
                            c.per_gb(rest)
                        )
                    }
                })
            },
        );
        if !maxes.is_empty() {
            println!(
                "\nHighest zero-loss rate ({} bisection steps)\n",
                args.steps
            );
            println!("| receiver | MB/s |\n|---|---:|");
            for m in &maxes {
                let note = if m.sender_limited {
                    " (sender's top speed, no loss)"
                } else {
                    ""
                };
                println!("| {} | {:.0}{note} |", m.receiver, m.mbps);
            }
        }
        println!("\nCSV: {}", csv.display());
        match &plotted {
            Ok(()) => println!("PNG: {}", png.display()),
            Err(e) => println!("PNG: not written: {e}"),
        }
    }
    let send_errors: u64 = cells.iter().map(|c| c.send_errors).sum();
    if send_errors > 0 {
        eprintln!(
            "note: the sender reported {send_errors} send errors; those datagrams are not counted as sent"
        );
    }
    plotted.map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_specs_carry_loss_rx_options() {
        let spec = |s: &str| ReceiverSpec::parse(s).unwrap();
        assert_eq!(spec("recvmmsg").name, "recvmmsg");
        assert!(spec("recvmmsg").args.is_empty());
        assert_eq!(spec("engine-mio+gro").args, ["--gro"]);
        let s = spec("flowgraph-inplace:coalesce-us=1000:coalesce-frames=512:normal-workers");
        assert_eq!(s.name, "flowgraph-inplace");
        assert_eq!(
            s.args,
            [
                "--coalesce-us",
                "1000",
                "--coalesce-frames",
                "512",
                "--normal-workers"
            ]
        );
        assert_eq!(
            spec("engine-reuseport+gro:batch=32").args,
            ["--gro", "--batch", "32"]
        );
        for bad in [
            "",
            ":gro",
            "engine-mio:",
            "engine-mio:--gro",
            "x:receiver=y",
        ] {
            assert!(ReceiverSpec::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn steal_limits_are_percentages() {
        assert_eq!(parse_percent("5"), Ok(0.05));
        assert_eq!(parse_percent("12.5%"), Ok(0.125));
        assert!(parse_percent("101").is_err() && parse_percent("x").is_err());
    }
}
