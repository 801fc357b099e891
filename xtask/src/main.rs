//! `cargo xtask …`: project automation.
//!
//! * `cargo xtask test [--no-loom]`: installs what the tests need (Debian packages when run
//!   as root), then runs rustfmt, clippy (also with `--features lttng` and fsdr-net-io
//!   without io_uring), every test of the workspace and the doc tests, quietly, `cargo doc`
//!   with warnings as errors, the loom models, every fuzz target for 10 s from a fixed seed,
//!   the exactness model, a short soak, Miri and ASan.
//! * `cargo xtask fuzz --seconds S`: runs every `cargo fuzz` target for S seconds from a seed
//!   corpus of valid packets emitted by `fsdr-net-io` (installs cargo-fuzz when missing).
//! * `cargo xtask loss [--seconds S] [--rates 100,200,400,800,unpaced] [--find-max]
//!   [--max-steal PCT]`: what each receiver keeps of a paced stream at each offered rate and
//!   what it costs (CPU per GB in all and by thread, against the bare recvmmsg loop of the same
//!   round), as tables, CSV and PNG. A receiver can carry `loss_rx` options
//!   (`flowgraph-inplace:coalesce-us=1000`). `--pin`: the sender on the first CPU, the
//!   receiver on the others (`latency --usrp` and `turnaround` take it too).
//! * `cargo xtask latency --pipes P --stages S [--granularity G] [--scheduler smol|flow]`:
//!   records an LTTng trace of `examples/latency.rs` and prints p50/p99 per pipe (`--usrp`:
//!   network arrival to sink through `usrp_rx`).
//! * `cargo xtask turnaround [--rates 50e6,200e6]`: arrival to answer through a flowgraph.
//! * `cargo xtask host [--seconds S]`: how late a sleeping thread wakes and the CPU time the
//!   hypervisor steals (`loss` and `latency` report the same beside their figures).
//! * `cargo xtask probe-bench`: what the probes cost, without the feature, with it, recording.
//! * `cargo xtask soak --minutes M`: streams the USRP emulator into `usrp_rx` with faults
//!   injected at known rates, samples the receiver's memory every second, and checks that every
//!   sample and every fault is accounted for.
//! * `cargo xtask props --cases N`: the exactness model's property tests (`fsdr-net-io`'s
//!   `tests/model.rs`) in release with N cases (N/1000 through an engine over loopback).
//! * `cargo xtask miri [--all]`: the unit tests that make no system call under Miri (the
//!   nightly toolchain); `--all` the whole scope, else what `cargo xtask test` runs.
//! * `cargo xtask asan`: fsdr-net-io's tests built with AddressSanitizer (nightly).
//! * `cargo xtask api [--bless]`: the public API of fsdr-net-io and fsdr-net, one line per
//!   item, against `api/*.txt` (`cargo xtask test` compares them).
//! * `cargo xtask shape`: files over 600 lines without a reason, and import circles between
//!   modules (`cargo xtask test` checks both).

mod api;
mod checks;
mod fuzz;
mod host;
mod latency;
mod loss;
mod report;
mod safety;
mod shape;
mod soak;
mod turnaround;

use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "fsdr-net project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install what the tests need, then run fmt, clippy and every test.
    Test {
        /// Skip installing packages.
        #[arg(long)]
        no_install: bool,
        /// Skip the loom model tests (a debug build in target/loom).
        #[arg(long)]
        no_loom: bool,
        /// Extra arguments for `cargo test` (after `--`).
        #[arg(last = true)]
        rest: Vec<String>,
    },
    /// Run every fuzz target for a while from a seed corpus of valid packets.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Only this target.
        #[arg(long)]
        target: Option<String>,
    },
    /// Loss against offered rate for every receiver (fsdr-net flowgraph and engine per backend,
    /// FutureSDR's UdpSource, a recvmmsg reference): tables, CSV and PNG.
    Loss(loss::LossArgs),
    /// Record an LTTng trace of the latency example (or usrp_rx with --usrp) and print the
    /// latency distribution per pipe (needs root and the LTTng packages).
    Latency(latency::LatencyArgs),
    /// Arrival to answer through examples/turnaround.rs, with the bare loop as the floor.
    Turnaround(turnaround::TurnaroundArgs),
    /// How late a thread sleeping 1 ms wakes on this host, and the CPU time stolen by the
    /// hypervisor: what bounds any receiver's latency tail here.
    Host {
        /// How long.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// One line of JSON.
        #[arg(long)]
        json: bool,
    },
    /// The probe benchmark in three modes: tracepoints compiled out, compiled in without a
    /// session, and recording (needs root and the LTTng packages).
    ProbeBench,
    /// The exactness model's property tests in release with N cases.
    Props {
        /// Cases through the sequence layer (a thousandth of them through an engine).
        #[arg(long, default_value_t = 100_000)]
        cases: u64,
    },
    /// The unit tests that make no system call, under Miri (nightly toolchain).
    Miri {
        /// The whole scope (slow), not only what `cargo xtask test` runs.
        #[arg(long)]
        all: bool,
    },
    /// fsdr-net-io's tests under AddressSanitizer (nightly toolchain).
    Asan,
    /// The public API of fsdr-net-io and fsdr-net against the snapshots in api/ (nightly
    /// toolchain for rustdoc's JSON).
    Api {
        /// Write the snapshots instead of comparing.
        #[arg(long)]
        bless: bool,
    },
    /// The code's shape: files over 600 lines without a reason, import circles.
    Shape,
    /// Stream with injected faults for M minutes and check exact accounting and flat memory.
    Soak {
        /// How long.
        #[arg(long, default_value_t = 2.0)]
        minutes: f64,
        /// Sample rate: 80% of the 88 Msps `usrp_rx` kept in-process on 2 vCPUs.
        #[arg(long, default_value = "70e6")]
        rate: String,
        /// Receive backend.
        #[arg(long, default_value = "mio")]
        backend: String,
        /// The debug build (debug assertions on), as `cargo xtask test` runs it at 5e6.
        #[arg(long)]
        debug: bool,
    },
}

/// Debian packages the test suite and the LTTng tooling use.
const PACKAGES: &[&str] = &[
    "lttng-tools",
    "liblttng-ust-dev",
    "babeltrace2",
    "iproute2",
    "fonts-dejavu-core",
    // UHD's converters, the reference for sample decoding (tests/uhd_converters.rs).
    "libuhd-dev",
    "libboost-dev",
    "g++",
];

fn main() -> Result<()> {
    match Cli::parse().task {
        Task::Test {
            no_install,
            no_loom,
            rest,
        } => test(no_install, !no_loom, &rest),
        Task::Fuzz { seconds, target } => fuzz::fuzz(seconds, target.as_deref()),
        Task::Latency(args) => latency::run(args),
        Task::Turnaround(args) => turnaround::run(args),
        Task::Host { seconds, json } => host::run(seconds, json),
        Task::ProbeBench => latency::probe_bench(std::path::Path::new("target/fsdr-net")),
        Task::Loss(args) => loss::run(args, || {
            run(cargo().args([
                "build",
                "--release",
                "--example",
                "loss_rx",
                "--example",
                "usrp_sim",
            ]))
        }),
        Task::Soak {
            minutes,
            rate,
            backend,
            debug,
        } => soak::soak(minutes, &rate, &backend, soak::Build::new(debug)),
        Task::Props { cases } => checks::props(cases, true),
        Task::Miri { all } => checks::miri(if all {
            checks::MIRI_SCOPE
        } else {
            checks::MIRI_IN_TEST
        }),
        Task::Asan => checks::asan(),
        Task::Api { bless } => api::check(bless),
        Task::Shape => shape::check(),
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

/// Installs missing Debian packages when running as root on a Debian-like system.
fn install_packages() -> Result<()> {
    let missing: Vec<&str> = PACKAGES.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() || Command::new("apt-get").arg("--version").output().is_err() {
        eprintln!(
            "xtask: not root or no apt-get; not installing {} (tests that need them will skip)",
            missing.join(" ")
        );
        return Ok(());
    }
    eprintln!("xtask: installing {}", missing.join(" "));
    run(Command::new("apt-get").args(["update", "-qq"]))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn python_has_sigmf() -> bool {
    Command::new("python3")
        .args(["-c", "import sigmf"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Installs the SigMF project's Python library (the recording test validates with it) when
/// python3 has pip and no `sigmf` module; without them the test skips that check.
fn install_python_sigmf() {
    if python_has_sigmf() {
        return;
    }
    eprintln!("xtask: installing the SigMF Python library (pip)");
    let pip = |extra: &[&str]| {
        Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(extra)
            .arg("sigmf")
            .status()
            .is_ok_and(|s| s.success())
    };
    // Debian's own python3 refuses pip outside a venv (PEP 668) unless told.
    let ok = pip(&[]) || (is_root() && pip(&["--break-system-packages"]));
    if !ok {
        eprintln!("xtask: could not install sigmf with pip; its validation will be skipped");
    }
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn run(cmd: &mut Command) -> Result<()> {
    report::run(cmd)
}

/// `cargo xtask test`: every step quietly (output in target/xtask/logs/), one line each, and
/// one summary line at the end.
fn test(no_install: bool, loom: bool, rest: &[String]) -> Result<()> {
    let started = std::time::Instant::now();
    report::set_quiet();
    let result = test_steps(no_install, loom, rest);
    eprintln!("{}", report::summary_line(result.is_ok(), started));
    result
}

fn test_steps(no_install: bool, loom: bool, rest: &[String]) -> Result<()> {
    if !no_install {
        install_packages()?;
    }
    report::run_as("rustfmt", cargo().args(["fmt", "--all", "--", "--check"]))?;
    shape::check()?;
    let clippy = |name: &str, extra: &[&str]| {
        report::run_as(
            name,
            cargo()
                .args(["clippy", "--quiet", "--workspace", "--all-targets"])
                .args(extra)
                .args(["--", "-D", "warnings"]),
        )
    };
    clippy("clippy", &[])?;
    // The real tracepoints (FFI and C provider) are checked where their headers exist.
    if installed("liblttng-ust-dev") {
        clippy("clippy, lttng", &["--features", "lttng"])?;
    }
    // fsdr-net-io without io_uring: it builds, and neither io-uring nor tokio-uring is in it.
    report::run_as(
        "clippy, fsdr-net-io without uring",
        cargo().args([
            "clippy",
            "--quiet",
            "-p",
            "fsdr-net-io",
            "--no-default-features",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    let tree = cargo()
        .args([
            "tree",
            "-p",
            "fsdr-net-io",
            "--no-default-features",
            "-e",
            "normal",
        ])
        .output()
        .context("cargo tree")?;
    let tree = String::from_utf8_lossy(&tree.stdout);
    if tree.contains("io-uring") || tree.contains("tokio-uring") {
        bail!("fsdr-net-io --no-default-features still depends on io_uring:\n{tree}");
    }
    // FutureSDR reads its log level from FUTURESDR_LOG (the repository's config.toml makes the
    // default `warn`): RUST_LOG, when set, applies to it too.
    let log = std::env::var("FUTURESDR_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "warn".into());
    let mut tests = cargo();
    tests.env("FUTURESDR_LOG", &log);
    if !no_install {
        install_python_sigmf();
    }
    // Every test that needs something of the machine runs wherever it is there: the test
    // fails, instead of passing without checking, when its FSDR_NET_REQUIRE_* is set.
    let root = is_root();
    let needs = [
        (
            "UHD",
            installed("libuhd-dev"),
            "libuhd-dev is not installed",
        ),
        ("SIGMF", python_has_sigmf(), "python3 has no sigmf module"),
        ("ROOT", root, "not root"),
        ("NETNS", root, "not root: no network namespaces"),
        (
            "CPU_LATENCY",
            root && std::path::Path::new("/dev/cpu_dma_latency").exists(),
            "not root, or no /dev/cpu_dma_latency",
        ),
        (
            "LTTNG",
            root && installed("lttng-tools") && installed("babeltrace2"),
            "not root, or the LTTng packages are missing",
        ),
        (
            "FONT",
            installed("fonts-dejavu-core"),
            "no fonts-dejavu-core",
        ),
    ];
    let mut cannot = Vec::new();
    for (need, here, why) in needs {
        if here {
            tests.env(format!("FSDR_NET_REQUIRE_{need}"), "1");
        } else {
            cannot.push(format!("{need} ({why})"));
        }
    }
    if !cannot.is_empty() {
        eprintln!(
            "xtask: tests that need these do not run here: {}",
            cannot.join(", ")
        );
    }
    report::run_as(
        "tests",
        tests
            .args(["test", "--quiet", "--workspace", "--all-targets"])
            .args(rest),
    )?;
    report::run_as(
        "doc tests",
        cargo()
            .env("FUTURESDR_LOG", &log)
            .args(["test", "--quiet", "--workspace", "--doc"]),
    )?;
    report::run_as(
        "rustdoc",
        cargo().env("RUSTDOCFLAGS", "-D warnings").args([
            "doc",
            "--quiet",
            "--no-deps",
            "--workspace",
        ]),
    )?;
    // The public surface against its snapshot (rustdoc's JSON needs the nightly toolchain).
    if checks::nightly_available() {
        api::check(false)?;
    } else {
        eprintln!("xtask: no nightly toolchain here: the public API is not compared");
    }
    if loom {
        loom_models()?;
    }
    // Every fuzz target briefly, from a fixed seed: an invariant a target states that the
    // code no longer keeps fails here, not weeks later in a long run.
    if fuzz::cargo_fuzz(!no_install)? {
        fuzz::run_targets(fuzz::SECONDS_IN_TEST, None, Some(1))?;
    } else {
        eprintln!("xtask: cargo-fuzz is not installed (--no-install): fuzz targets not run");
    }
    // Exactness at scale: 3000 cases a format through the sequence layer, 24 through an
    // engine; then a short soak of the main job's debug build with injected faults.
    checks::props(24_000, false)?;
    soak::soak(1.0 / 3.0, "5e6", "mio", soak::Build::Debug)?;
    // Soundness where the nightly toolchain is: Miri over the code without system calls,
    // and the test suite under AddressSanitizer.
    if checks::miri_available() {
        checks::miri(checks::MIRI_IN_TEST)?;
        checks::asan()?;
    } else {
        eprintln!("xtask: no nightly toolchain with Miri here: Miri and ASan not run");
    }
    Ok(())
}

/// The loom model tests of the notifier (the one hand-written synchronisation left; the
/// index rings are `rtrb`'s): every interleaving of a notify against a waiting consumer.
fn loom_models() -> Result<()> {
    report::run_as(
        "loom models",
        cargo()
            .env("RUSTFLAGS", "--cfg loom")
            .env("CARGO_TARGET_DIR", "target/loom")
            .args([
                // Debug: the models run in hundredths of a second either way, and a release
                // build under cfg(loom) (every dependency again) took two minutes of CI.
                "test",
                "--quiet",
                "-p",
                "fsdr-net-io",
                // tokio (under tokio-uring) changes its API under cfg(loom).
                "--no-default-features",
                "--lib",
                "loom",
            ]),
    )
}

/// The result line of an example: the last line of its output that is a JSON object (progress
/// and address lines may come before it).
fn last_json(output: &str) -> Result<serde_json::Value> {
    let line = output
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("no JSON result line")?;
    serde_json::from_str(line).with_context(|| format!("parsing {line:?}"))
}
