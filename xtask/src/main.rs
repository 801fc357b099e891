//! `cargo xtask …`: project automation.
//!
//! * `cargo xtask test`: installs what the tests need (Debian packages when run as root),
//!   then runs rustfmt, clippy and every test of the workspace.

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
        /// Extra arguments for `cargo test` (after `--`).
        #[arg(last = true)]
        rest: Vec<String>,
    },
}

/// Debian packages the test suite and the LTTng tooling use.
const PACKAGES: &[&str] = &["lttng-tools", "liblttng-ust-dev", "babeltrace2", "iproute2"];

fn main() -> Result<()> {
    match Cli::parse().task {
        Task::Test { no_install, rest } => test(no_install, &rest),
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

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: {cmd:?}");
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

fn test(no_install: bool, rest: &[String]) -> Result<()> {
    if !no_install {
        install_packages()?;
    }
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo()
        .args(["test", "--workspace", "--all-targets"])
        .args(rest))?;
    run(cargo().args(["test", "--workspace", "--doc"]))?;
    Ok(())
}
