//! Running a receiver and a sender side by side, and reading what they report.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};
use fsdr_net_io::Format;
use fsdr_net_io::emulator::EmulatorConfig;
use fsdr_net_io::host::CpuTimes;
use indicatif::ProgressBar;
use serde_json::Value;

use super::args::{LossArgs, Rate, ReceiverSpec};
use super::cell::{Cell, Threads};

/// The receiver and sender processes running now, for the `--netns` signal handler to end
/// before it removes their namespaces.
static RUNNING: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Keeps a child's pid in [`RUNNING`] while it lives (until the guard drops, after the wait).
struct Tracked(u32);

impl Tracked {
    fn new(pid: u32) -> Tracked {
        RUNNING.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
        Tracked(pid)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&p| p != self.0);
    }
}

/// The highest zero-loss rate found by bisection.
#[derive(Debug, Clone)]
pub(crate) struct MaxRate {
    pub(crate) receiver: String,
    pub(crate) mbps: f64,
    /// True when even the sender's top speed lost nothing: the receiver was not the limit.
    pub(crate) sender_limited: bool,
}

pub(crate) struct Harness {
    pub(crate) args: LossArgs,
    pub(crate) format: Format,
    pub(crate) spp: usize,
    /// Bytes per datagram as sent (header and whole samples).
    pub(crate) datagram: usize,
    /// Smol workers of flowgraph receivers (`None`: FutureSDR's default runtime).
    pub(crate) workers: Option<usize>,
    /// `--netns`: the receiver in `b`, the sender in `a`.
    pub(crate) pair: Option<fsdr_net_io::netns::VethPair>,
    /// `--pin`: the sender's CPUs and the receiver's (`--cpus` lists).
    pub(crate) cpus: Option<Cpus>,
}

/// Where `--pin` runs the sender and the receiver.
#[derive(Debug, Clone)]
pub(crate) struct Cpus {
    pub(crate) sender: Vec<usize>,
    pub(crate) receiver: Vec<usize>,
}

impl Cpus {
    /// The first CPU this process may use for the sender, the rest for the receiver.
    pub(crate) fn split() -> Result<Cpus> {
        let all = fsdr_net_io::sys::sched::allowed_cpus().context("--pin: the allowed CPUs")?;
        if all.len() < 2 {
            bail!("--pin needs two CPUs or more (this process may use {all:?})");
        }
        Ok(Cpus {
            sender: all[..1].to_vec(),
            receiver: all[1..].to_vec(),
        })
    }

    /// A `--cpus` argument.
    pub(crate) fn list(cpus: &[usize]) -> String {
        cpus.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

pub(crate) fn read_json_line(child: &mut Child) -> Result<Value> {
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
    pub(crate) fn new(args: LossArgs) -> Result<Harness> {
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
        let pair = if args.netns {
            let pair = fsdr_net_io::netns::VethPair::create("loss", 9000)
                .map_err(|e| anyhow::anyhow!("--netns: {e}"))?;
            // One frame per datagram, as from a radio: no UDP GSO batch crosses the veth
            // whole (generic XDP and the socket path would see super-packets a NIC never
            // delivers).
            pair.a
                .ip(&["link", "set", "dev", &pair.a.ifname, "gso_max_segs", "1"])
                .map_err(|e| anyhow::anyhow!("--netns: {e}"))?;
            // Interrupted or terminated, the sweep still removes its namespaces (the drop
            // that does it otherwise does not run then).
            let names = [pair.a.netns.clone(), pair.b.netns.clone()];
            ctrlc::set_handler(move || {
                for &pid in RUNNING.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                    // SAFETY: kill has no memory preconditions; the pid is a child this
                    // process started and has not yet waited for, so it cannot be reused.
                    // Checked by: nothing to check: no memory is passed.
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                }
                for n in &names {
                    let _ = fsdr_net_io::netns::ip(&["netns", "del", n]);
                }
                std::process::exit(130);
            })
            .context("--netns: a signal handler that removes the namespaces")?;
            Some(pair)
        } else {
            None
        };
        let cpus = if args.pin { Some(Cpus::split()?) } else { None };
        Ok(Harness {
            args,
            format,
            spp,
            datagram,
            workers,
            pair,
            cpus,
        })
    }

    /// The release build of `example`, on the receiving (`rx`) or the sending side: in its
    /// namespace with `--netns`.
    fn command(&self, rx: bool, example: &str) -> Result<Command> {
        let path = std::env::current_dir()?.join(format!("target/release/examples/{example}"));
        Ok(match &self.pair {
            None => Command::new(path),
            Some(p) if rx => p.b.command(path),
            Some(p) => p.a.command(path),
        })
    }

    /// Runs one receiver at one rate for `seconds`.
    pub(crate) fn cell(&self, receiver: &str, rate: Rate, seconds: f64) -> Result<Cell> {
        let spec = ReceiverSpec::parse(receiver)?;
        let mut rx = self.command(true, "loss_rx")?;
        rx.args(["--receiver", &spec.name, "--format", self.format.name()])
            .args(&spec.args);
        if let Some(p) = &self.pair {
            rx.args(["--bind", &format!("{}:0", p.b.addr)]);
            if spec.name.ends_with("-xdp") {
                rx.args(["--interface", &p.b.ifname]);
            }
        }
        if let Some(w) = self.workers {
            rx.args(["--workers", &w.to_string()]);
        }
        if self.args.channels > 1 {
            rx.args(["--channels", &self.args.channels.to_string()]);
        }
        if self.args.ports > 1 {
            rx.args(["--ports", &self.args.ports.to_string()]);
        }
        if let Some(c) = &self.cpus {
            rx.args(["--cpus", &Cpus::list(&c.receiver)]);
        }
        let cpu_before = CpuTimes::now();
        let mut rx = rx
            .args(["--size", &self.datagram.to_string(), "--idle", "0.5"])
            .args(["--timeout", &(seconds + 30.0).to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting loss_rx")?;
        let _rx_running = Tracked::new(rx.id());
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
        let sent = self.send(addr, rate, seconds);
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
            peeks: stat("peeks"),
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

    /// Streams for `seconds` at `rate` to `addr` (one `usrp_sim` process with every channel),
    /// or with `--ports N` to the N ports from `addr`'s (one `usrp_sim` per port, the rate
    /// split evenly); what they sent, summed: `packets_sent`, `send_errors`, `seconds` (the
    /// longest).
    fn send(&self, addr: &str, rate: Rate, seconds: f64) -> Result<Value> {
        let first: std::net::SocketAddr = addr.parse().context("the receiver's address")?;
        let ports = self.args.ports.max(1);
        let channels = self.args.channels.max(1);
        let mut senders = Vec::with_capacity(ports);
        for p in 0..ports {
            let dest = std::net::SocketAddr::new(first.ip(), first.port() + p as u16);
            let mut tx = self.command(false, "usrp_sim")?;
            tx.args(["--dest", &dest.to_string(), "--format", self.format.name()])
                .args(["--spp", &self.spp.to_string()])
                .args(["--burst-us", &self.args.burst_us.to_string()])
                .args(["--duration", &seconds.to_string()])
                .stdout(Stdio::piped());
            if let Some(n) = self.args.drop_every {
                tx.args(["--drop-every", &n.to_string()]);
            }
            if channels > 1 {
                tx.args(["--channels", &channels.to_string()]);
            }
            if let Some(c) = &self.cpus {
                tx.args(["--cpus", &Cpus::list(&c.sender)]);
            }
            match rate {
                Rate::MBps(mbps) => {
                    // usrp_sim's rate is each channel's.
                    let sps = mbps * 1e6 / self.datagram as f64 * self.spp as f64
                        / (channels * ports) as f64;
                    tx.args(["--rate", &format!("{sps}")]);
                }
                Rate::Unpaced => {
                    tx.arg("--unpaced");
                }
            }
            match tx.spawn() {
                Ok(tx) => senders.push(tx),
                Err(e) => {
                    for mut t in senders {
                        let _ = t.kill();
                        let _ = t.wait();
                    }
                    return Err(e).context("starting usrp_sim");
                }
            }
        }
        let tracked: Vec<Tracked> = senders.iter().map(|t| Tracked::new(t.id())).collect();
        let mut total = serde_json::json!({"packets_sent": 0, "send_errors": 0, "seconds": 0.0});
        let mut failed = None;
        for mut tx in senders {
            match read_json_line(&mut tx).context("usrp_sim") {
                Ok(v) => {
                    for k in ["packets_sent", "send_errors"] {
                        total[k] =
                            (total[k].as_u64().unwrap_or(0) + v[k].as_u64().unwrap_or(0)).into();
                    }
                    let secs = v["seconds"].as_f64().unwrap_or(seconds);
                    total["seconds"] = total["seconds"].as_f64().unwrap_or(0.0).max(secs).into();
                }
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        drop(tracked);
        match failed {
            Some(e) => Err(e),
            None => Ok(total),
        }
    }

    /// Of one cell's runs, the one with the median CPU per GB; its ratio to the reference is
    /// the median of the ratios each run had to the reference run of its own round (`refs`,
    /// round by round), so that a slow spell of the machine moves both sides of a ratio.
    ///
    /// With `max_steal`, a round in which this run or the reference's had more steal time
    /// is left out of the ratios, and the run reported is the median of the calm ones
    /// (of all, when none was calm).
    pub(crate) fn median_cell(
        mut runs: Vec<Cell>,
        refs: Option<&[Cell]>,
        max_steal: Option<f64>,
    ) -> Cell {
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
    pub(crate) fn find_max(
        &self,
        receiver: &str,
        cells: &[Cell],
        bar: &ProgressBar,
    ) -> Result<MaxRate> {
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
