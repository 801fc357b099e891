//! `cargo xtask turnaround`: the time from a packet's arrival at a receiving socket to the
//! departure of its answer, through `examples/turnaround.rs` (`UdpSource → Apply → UdpSink`)
//! with FutureSDR's default runtime, with the project's lowest-latency settings, and through
//! the bare `recvmmsg → sendmmsg` loop as the floor — each a separate process, the probe
//! (`fsdr_net_io::turnaround::Probe`) in this one.

use std::io::BufRead;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use fsdr_net_io::turnaround::{Probe, ProbeReport};
use serde_json::{Value, json};

use crate::loss::Cpus;

/// What `cargo xtask turnaround` was asked for.
#[derive(Debug, Clone, clap::Args)]
pub struct TurnaroundArgs {
    /// Sample rates of the probe's stream (4-byte samples), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "50e6,200e6")]
    pub rates: Vec<f64>,
    /// Seconds of stream per run.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Samples per packet (2000: 8000-byte datagrams, as a USRP sends).
    #[arg(long, default_value_t = 2000)]
    pub spp: usize,
    /// Where the table goes as JSON.
    #[arg(long, default_value = "target/fsdr-net/turnaround.json")]
    pub out: std::path::PathBuf,
    /// The probe (sender and answer reader) on the first CPU, the example on the others
    /// (`--cpus`), as `cargo xtask loss --pin` places sender and receiver.
    #[arg(long)]
    pub pin: bool,
}

/// The turnaround example's settings per mode.
fn modes(root: bool) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut m = vec![("default runtime", vec![])];
    if root {
        // The low-latency preset: wake at once, keep idle CPUs polling, a real-time receive
        // thread.
        m.push(("lowest latency", vec!["--low-latency"]));
    }
    m.push(("bare recvmmsg→sendmmsg", vec!["--bare"]));
    m
}

fn free_addr() -> Result<SocketAddr> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?)
}

/// One run: the example in `mode` answering a probe at `rate`.
fn run_one(
    args: &TurnaroundArgs,
    rate: f64,
    extra: &[&str],
    cpus: Option<&Cpus>,
) -> Result<(ProbeReport, Value)> {
    let (listen, back) = (free_addr()?, free_addr()?);
    let mut example = Command::new("target/release/examples/turnaround");
    if let Some(c) = cpus {
        example.args(["--cpus", &Cpus::list(&c.receiver)]);
    }
    let mut child = example
        .args(["--listen", &listen.to_string(), "--dest", &back.to_string()])
        .args(["--spp", &args.spp.to_string(), "--json", "--allow-loss"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the turnaround example")?;
    let stderr = child.stderr.take().expect("piped");
    let (ready, listening) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.starts_with("listening on") {
                let _ = ready.send(());
            } else if !crate::report::quiet() {
                eprintln!("turnaround: {line}");
            }
        }
    });
    if listening.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        bail!("the turnaround example did not start listening");
    }
    let probe = Probe::new(listen, back)
        .rate(rate)
        .samples_per_packet(args.spp)
        .duration(Duration::from_secs_f64(args.seconds));
    // The probe's threads start from this one and take its CPUs.
    let report = std::thread::scope(|s| {
        s.spawn(|| -> Result<ProbeReport> {
            if let Some(c) = cpus {
                fsdr_net_io::sys::sched::set_thread_cpus(&c.sender).context("--pin: the probe")?;
            }
            probe.run().context("probing")
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the probe's thread panicked"))?
    })?;
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let summary: Value = serde_json::from_str(text.lines().last().unwrap_or("{}"))
        .with_context(|| format!("the example's summary: {text}"))?;
    Ok((report, summary))
}

pub fn run(args: TurnaroundArgs) -> Result<()> {
    crate::report::run_as(
        "build turnaround (release)",
        crate::cargo().args(["build", "--release", "--example", "turnaround"]),
    )?;
    let cpus = if args.pin {
        let c = Cpus::split()?;
        eprintln!(
            "xtask: the probe on CPU {}, the example on CPU {} (--pin)",
            Cpus::list(&c.sender),
            Cpus::list(&c.receiver)
        );
        Some(c)
    } else {
        None
    };
    let root = crate::is_root();
    if !root {
        eprintln!("xtask: not root: the lowest-latency settings need root; left out");
    }
    let us = |ns: Option<u64>| ns.map_or(f64::NAN, |n| n as f64 / 1e3);
    println!(
        "| rate | receiver | packets/s | answered | p50 µs | p99 µs | p99.9 µs | max µs | kernel drops |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for &rate in &args.rates {
        for (mode, extra) in modes(root) {
            let (r, summary) = run_one(&args, rate, &extra, cpus.as_ref())?;
            let q = |p| us(r.percentile_ns(p));
            let drops = summary["kernel_drops"].as_u64().unwrap_or(0);
            let pps = r.sent as f64 / args.seconds;
            println!(
                "| {:.0} Msps | {mode} | {pps:.0} | {}/{} | {:.0} | {:.0} | {:.0} | {:.0} | {drops} |",
                rate / 1e6,
                r.answered,
                r.sent,
                q(0.5),
                q(0.99),
                q(0.999),
                q(1.0)
            );
            rows.push(json!({
                "rate": rate, "mode": mode, "sent": r.sent, "packets_per_s": pps,
                "answered": r.answered,
                "unstamped": r.unstamped, "p50_us": q(0.5), "p99_us": q(0.99),
                "p999_us": q(0.999), "max_us": q(1.0), "pinned": args.pin, "example": summary,
            }));
        }
    }
    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&rows)?)?;
    eprintln!("xtask: table as JSON in {}", args.out.display());
    Ok(())
}
