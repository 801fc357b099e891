//! `cargo xtask latency`: records an LTTng trace of the latency example (or of `usrp_rx` with
//! `--usrp`) with the session settings of `tracing/session.sh`, analyses it with
//! `fsdr-net-trace`, and prints the table and the paths of the CSV and PNG.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use fsdr_net_trace::analysis::Pairing;
use fsdr_net_trace::{AnalyzeOptions, analyze, analyze_pairings};
use serde_json::Value;

/// What `cargo xtask latency` was asked for.
#[derive(Debug, Clone, clap::Args)]
pub struct LatencyArgs {
    /// Parallel pipes.
    #[arg(long, default_value_t = 2)]
    pub pipes: usize,
    /// Copy stages per pipe.
    #[arg(long, default_value_t = 2)]
    pub stages: usize,
    /// Items between two marks.
    #[arg(long, default_value_t = 32768)]
    pub granularity: u64,
    /// Scheduler of the example: smol, smol1 or flow.
    #[arg(long, default_value = "smol")]
    pub scheduler: String,
    /// Items per pipe (default 2^27 for the example; for --usrp, none: --seconds decides).
    #[arg(long)]
    pub items: Option<String>,
    /// Instead of the example: usrp_rx with its built-in emulator, network arrival to sink.
    #[arg(long)]
    pub usrp: bool,
    /// --usrp: sample rate of the emulator.
    #[arg(long, default_value = "50e6")]
    pub rate: String,
    /// --usrp: seconds of stream.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// --usrp: take a datagram's arrival as the receive thread's read rather than the
    /// kernel's timestamp (leaves out the time in the socket's queue and the receive thread's
    /// wake-up; compare the two runs to see what those cost).
    #[arg(long)]
    pub read_time: bool,
    /// --usrp: the emulator on the first CPU, usrp_rx's receiver and workers on the others
    /// (`--emulator-cpus`, `--cpus`; as `cargo xtask loss --pin`): a radio is another
    /// machine, not a thread that competes with the receiver for its CPU.
    #[arg(long)]
    pub pin: bool,
    /// Tune the host for latency during the run: hold a CPU wake-up latency request of 0
    /// (`/dev/cpu_dma_latency`: idle CPUs poll instead of halting). Needs root. (For a
    /// real-time receive thread as well, add `-- --rx-priority 50` with --usrp.)
    #[arg(long)]
    pub low_latency: bool,
    /// Output folder for the trace, CSV and PNG.
    #[arg(long, default_value = "target/fsdr-net")]
    pub out: PathBuf,
    /// Further arguments for the traced program, after `--` (with --usrp, usrp_rx's tuning
    /// flags: `-- --coalesce-us 50`).
    #[arg(last = true)]
    pub extra: Vec<String>,
}

/// Destroys the session even when a later step fails.
struct Session {
    name: String,
    stopped: bool,
}

impl Session {
    fn start(name: &str, out: &Path) -> Result<Session> {
        crate::run(
            Command::new("tracing/session.sh")
                .args(["start", name])
                .arg(out),
        )?;
        Ok(Session {
            name: name.into(),
            stopped: false,
        })
    }

    /// Stops and destroys; returns what `lttng list` said of discarded events.
    fn stop(&mut self) -> Result<String> {
        self.stopped = true;
        let out = Command::new("tracing/session.sh")
            .args(["stop", &self.name])
            .output()
            .context("running tracing/session.sh stop")?;
        if !out.status.success() {
            bail!(
                "stopping the session failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = Command::new("lttng").args(["destroy", &self.name]).output();
        }
    }
}

fn need(cmd: &str, package: &str) -> Result<()> {
    if Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        Ok(())
    } else {
        bail!("`{cmd}` not found: install Debian's {package} (`cargo xtask test` does, as root)")
    }
}

/// Runs one traced measurement and prints its analysis.
pub fn run(args: LatencyArgs) -> Result<()> {
    need("lttng", "lttng-tools")?;
    need("babeltrace2", "babeltrace2")?;
    if args.pipes == 0 || args.granularity == 0 {
        bail!("--pipes and --granularity must be at least 1");
    }
    if args.pin && !args.usrp {
        bail!("--pin places usrp_rx's emulator and receiver: it needs --usrp");
    }
    let example = if args.usrp { "usrp_rx" } else { "latency" };
    crate::run(crate::cargo().args([
        "build",
        "--release",
        "--features",
        "lttng",
        "--example",
        example,
    ]))?;
    std::fs::create_dir_all(&args.out)?;
    let out = std::fs::canonicalize(&args.out)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let name = format!("fsdr-net-{}-{stamp}", std::process::id());
    let trace = out.join(format!("trace-{example}-{stamp}"));
    let mut cmd = Command::new(format!("target/release/examples/{example}"));
    cmd.env("LTTNG_UST_ALLOW_BLOCKING", "1");
    let pairing;
    if args.usrp {
        pairing = Pairing::NetworkRx;
        // Kernel receive timestamps: arrival is when the kernel queued the datagram, so the
        // time it waited in the socket's queue (the pause policy's buffer) is part of the
        // latency, not only the time after the receive thread took it.
        // Losses are reported with the latencies, not a failed run.
        cmd.args(["--json", "--allow-loss", "--rate", &args.rate])
            .args(["--duration", &args.seconds.to_string()])
            .args(["--probe", &args.granularity.to_string()]);
        if !args.read_time {
            cmd.arg("--kernel-timestamps");
        }
        if args.pin {
            let cpus = crate::loss::Cpus::split()?;
            eprintln!(
                "xtask: the emulator on CPU {}, the receiver on CPU {} (--pin)",
                crate::loss::Cpus::list(&cpus.sender),
                crate::loss::Cpus::list(&cpus.receiver)
            );
            cmd.args(["--emulator-cpus", &crate::loss::Cpus::list(&cpus.sender)])
                .args(["--cpus", &crate::loss::Cpus::list(&cpus.receiver)]);
        }
    } else {
        pairing = Pairing::TxRx;
        cmd.arg("--json")
            .args(["--pipes", &args.pipes.to_string()])
            .args(["--stages", &args.stages.to_string()])
            .args(["--granularity", &args.granularity.to_string()])
            .args(["--scheduler", &args.scheduler])
            .args(["--items", args.items.as_deref().unwrap_or("134217728")]);
    }
    // Held until the traced program has ended: the request is machine-wide.
    let _cpu_latency = if args.low_latency {
        let r = fsdr_net_io::cpu_latency::CpuLatencyRequest::new(std::time::Duration::ZERO)
            .context("--low-latency: requesting a CPU wake-up latency of 0 (needs root)")?;
        eprintln!("xtask: idle CPUs poll for this run (CPU wake-up latency request of 0)");
        Some(r)
    } else {
        None
    };
    cmd.args(&args.extra);
    let mut session = Session::start(&name, &trace)?;
    eprintln!("xtask: {cmd:?}");
    // The host's own hiccups over the same run: what any thread of the traced program that
    // sleeps and wakes (receive thread, workers) went through at the least.
    let monitor = fsdr_net_io::host::HiccupMeter::start().context("starting the hiccup meter")?;
    let result = cmd.output().context("running the traced program");
    let host = monitor.finish();
    let result = result?;
    let discarded = session.stop()?;
    let stdout = String::from_utf8_lossy(&result.stdout);
    let run = crate::last_json(&stdout);
    // usrp_rx's emulator kept from its rate by this machine (exit code 5, a short sender)
    // still gives a trace to read; the summary below says the rate it got.
    let short = result.status.code() == Some(5)
        && run.as_ref().is_ok_and(|r| r["failure"] == "short_sender");
    if !result.status.success() && !short {
        bail!(
            "{example} failed ({}): {}",
            result.status,
            String::from_utf8_lossy(&result.stderr)
        );
    }
    if short {
        eprintln!("xtask: the emulator could not keep up with the rate asked (see its report)");
    }
    let run = run.context("the traced program's result")?;
    let tag = if args.usrp {
        format!("usrp-g{}", args.granularity)
    } else {
        format!(
            "p{}-s{}-g{}-{}",
            args.pipes, args.stages, args.granularity, args.scheduler
        )
    };
    let csv = out.join(format!("latency-{tag}.csv"));
    let png = out.join(format!("latency-{tag}.png"));
    let analysed = analyze(&AnalyzeOptions {
        trace: trace.clone(),
        pairing,
        csv: Some(csv.clone()),
        png: Some(png.clone()),
    })?;
    println!(
        "{} latency ({}), granularity {} items; lttng: {discarded}\n",
        if args.usrp {
            "Network-arrival-to-sink"
        } else {
            "Source-to-sink"
        },
        pairing.name(),
        args.granularity,
    );
    print!("{}", analysed.table());
    println!("{host}");
    println!("machine: {}", fsdr_net_io::host::Machine::detect());
    println!("trace: {}", trace.display());
    println!("CSV: {}", csv.display());
    match &analysed.png {
        Some(Ok(p)) => println!("PNG: {}", p.display()),
        Some(Err(e)) => println!("PNG: not written: {e}"),
        None => {}
    }
    // The example reports the marks its sinks passed: every one must have been matched.
    if !args.usrp {
        let blocks = run["blocks"].as_array().cloned().unwrap_or_default();
        let marks = run["marks"].as_array().cloned().unwrap_or_default();
        let mut problems = Vec::new();
        for (b, m) in blocks.iter().zip(&marks) {
            let (b, m) = (b.as_u64().unwrap_or(0), m.as_u64().unwrap_or(0));
            let got = analysed.report.pipes.get(&b).map_or(0, |s| s.count);
            if got != m {
                problems.push(format!("pipe {b}: {got} matched of {m} marks"));
            }
        }
        if analysed.read.discarded > 0 {
            problems.push(format!(
                "the tracer discarded {} events",
                analysed.read.discarded
            ));
        }
        if !problems.is_empty() {
            bail!("incomplete trace: {}", problems.join("; "));
        }
        println!(
            "every mark matched: {} per pipe ({} items / granularity {})",
            marks.first().and_then(Value::as_u64).unwrap_or(0),
            run["items"],
            args.granularity
        );
    } else {
        // The same trace from the source's hand-over, to separate network-to-source time,
        // and per datagram from its arrival to the source taking it (one more read for both).
        let [handover, taken] =
            analyze_pairings(&trace, [Pairing::SourceRx, Pairing::NetworkSource])?;
        println!("\nFrom UdpSource's hand-over to the sink (source-rx):\n");
        print!("{}", handover.table());
        println!(
            "\nEach datagram from its arrival ({}) to UdpSource taking it (network-source):\n",
            if args.read_time {
                "the receive thread's read"
            } else {
                "the kernel's timestamp"
            }
        );
        print!("{}", taken.table());
        println!(
            "usrp_rx received {} samples, missed {}",
            run["received"], run["missed_samples"]
        );
    }
    Ok(())
}

/// `cargo xtask probe-bench`: the probe benchmark without the feature, with it and no session,
/// and with it while a session records.
pub fn probe_bench(out: &Path) -> Result<()> {
    crate::run(crate::cargo().args(["bench", "--bench", "probe"]))?;
    need("lttng", "lttng-tools")?;
    crate::run(crate::cargo().args(["bench", "--bench", "probe", "--features", "lttng"]))?;
    std::fs::create_dir_all(out)?;
    let out = std::fs::canonicalize(out)?;
    let name = format!("fsdr-net-bench-{}", std::process::id());
    let trace = out.join("trace-probe-bench");
    let _ = std::fs::remove_dir_all(&trace);
    let mut session = Session::start(&name, &trace)?;
    let result = crate::run(
        crate::cargo()
            .args(["bench", "--bench", "probe", "--features", "lttng"])
            .env("FSDR_NET_RECORDING", "1")
            .env("LTTNG_UST_ALLOW_BLOCKING", "1"),
    );
    let discarded = session.stop()?;
    result?;
    let size: u64 = walk_size(&trace);
    println!(
        "recording session: {discarded}; trace {:.0} MB (removed)",
        size as f64 / 1e6
    );
    let _ = std::fs::remove_dir_all(&trace);
    Ok(())
}

fn walk_size(p: &Path) -> u64 {
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => std::fs::read_dir(p)
            .map(|d| d.flatten().map(|e| walk_size(&e.path())).sum())
            .unwrap_or(0),
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}
