//! `cargo xtask soak`: the USRP emulator into `usrp_rx` with faults injected at known
//! places, the receiver's memory sampled every second, and every sample and fault checked
//! against what was sent. `cargo xtask test` runs a short one on the debug build (the
//! accounting with debug assertions on, at 5 Msps); `cargo xtask soak` the release build at
//! the rates users run.

use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{cargo, last_json};

/// Resident memory of a process in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Faults injected during a soak: prime periods, so they rarely coincide.
const DROP_EVERY: u64 = 997;
const REORDER_EVERY: u64 = 1009;
const DUPLICATE_EVERY: u64 = 1013;

/// Which build of `usrp_rx` a soak runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// Optimized: the rates a user runs (`cargo xtask soak`).
    Release,
    /// The test suite's debug build, already there, with debug assertions (overflow checks)
    /// on: the accounting at a rate a debug build keeps (`cargo xtask test`).
    Debug,
}

impl Build {
    pub fn new(debug: bool) -> Self {
        if debug { Build::Debug } else { Build::Release }
    }
}

pub fn soak(minutes: f64, rate: &str, backend: &str, build: Build) -> Result<()> {
    let (args, exe): (&[&str], _) = match build {
        Build::Release => (
            &["build", "--release", "--example", "usrp_rx"],
            "target/release/examples/usrp_rx",
        ),
        // With the workspace's features, as the test suite built it (this package alone
        // resolves them differently: FutureSDR again, most of a minute).
        Build::Debug => (
            &["build", "--workspace", "--example", "usrp_rx"],
            "target/debug/examples/usrp_rx",
        ),
    };
    let what = match build {
        Build::Release => "build usrp_rx (release)",
        Build::Debug => "build usrp_rx (debug)",
    };
    crate::report::run_as(what, cargo().args(args))?;
    let seconds = (minutes * 60.0).max(1.0);
    let mut child = Command::new(exe)
        .args(["--json", "--zero-fill", "false", "--signal", "ramp"])
        // The injected drops are losses: the soak checks them itself.
        .arg("--allow-loss")
        .args(["--rate", rate, "--backend", backend])
        .args(["--duration", &seconds.to_string()])
        .args(["--drop-every", &DROP_EVERY.to_string()])
        .args(["--reorder-every", &REORDER_EVERY.to_string()])
        .args(["--duplicate-every", &DUPLICATE_EVERY.to_string()])
        // A reordered datagram waits up to 100 ms for its predecessor (as the tests' do):
        // with the 5 ms default, a thread of this process descheduled for longer between
        // the two (a debug build on two busy vCPUs: CI at 64069ac) turns one reorder into
        // a missed and a late datagram — counted, but not the counts this checks.
        .args(["--reorder-timeout-ms", "100"])
        .stdout(std::process::Stdio::piped())
        .stderr(if crate::report::quiet() {
            std::process::Stdio::null()
        } else {
            std::process::Stdio::inherit()
        })
        .spawn()
        .context("starting usrp_rx")?;
    let pid = child.id();
    eprintln!("xtask: soak for {seconds} s at {rate} samples/s (backend {backend}), pid {pid}");
    let mut rss = Vec::new();
    while child.try_wait()?.is_none() {
        if let Some(k) = rss_kib(pid) {
            rss.push(k);
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    let out = child.wait_with_output()?;
    let rx: serde_json::Value =
        last_json(&String::from_utf8_lossy(&out.stdout)).context("usrp_rx's result")?;
    // The soak checks the books, not the emulator's speed: an emulator this machine kept
    // from its rate (exit code 5, a short sender) still sent every sample the books count.
    let short = out.status.code() == Some(5) && rx["failure"] == "short_sender";
    if !out.status.success() && !short {
        bail!("usrp_rx failed: {}", out.status);
    }
    if short {
        eprintln!(
            "xtask: soak: the emulator sent {:.2} Msps of the {rate} asked (this machine's pace)",
            rx["sender_rate_sps"].as_f64().unwrap_or(0.0) / 1e6
        );
    }
    let emu = &rx["emulator"];
    // A summary field of usrp_rx's JSON, or one of its counters under `stats`.
    let n = |v: &serde_json::Value, k: &str| {
        v[k].as_u64()
            .or_else(|| v["stats"][k].as_u64())
            .unwrap_or(0)
    };
    let sent = n(emu, "samples_sent") + n(emu, "dropped_samples");
    let lost_in_receiver = n(&rx, "kernel_drops") + n(&rx, "overflow");
    let mut failures = Vec::new();
    // The table is printed unless `cargo xtask test` runs quietly and everything held.
    let mut table = Vec::new();
    let mut check = |what: &str, got: u64, want: u64| {
        let ok = got == want;
        table.push(format!(
            "{:<44} {:>14} {:>14} {}",
            what,
            got,
            want,
            if ok { "ok" } else { "MISMATCH" }
        ));
        if !ok {
            failures.push(what.to_string());
        }
    };
    // A drop that hits the stream's last packet (one run in DROP_EVERY) leaves no later
    // packet to reveal it: the summary counts it apart (`unseen_lost_samples`, from the
    // emulator's report), and the stream's end of burst is missing then, and only then.
    let unseen = n(&rx, "unseen_lost_samples");
    let unseen_packets = unseen.div_ceil(n(emu, "spp").max(1));
    check(
        "received + missed + unseen samples = sent",
        n(&rx, "received") + n(&rx, "missed_samples") + unseen,
        sent,
    );
    check(
        "missed + unseen packets = dropped + lost in rx",
        n(&rx, "missed") + unseen_packets,
        n(emu, "dropped") + lost_in_receiver,
    );
    check(
        "stream end seen (EOB) unless its end was lost",
        u64::from(rx["ended_with_eob"].as_bool() == Some(true)),
        u64::from(unseen == 0),
    );
    check(
        "duplicates = duplicated",
        n(&rx, "duplicates"),
        n(emu, "duplicated"),
    );
    check(
        "reordered = reordered",
        n(&rx, "reordered"),
        n(emu, "reordered"),
    );
    check("late", n(&rx, "late"), 0);
    check("resyncs", n(&rx, "resyncs"), 0);
    check("emulator send errors", n(emu, "send_errors"), 0);
    table.push(format!(
        "lost in the receiver (kernel drops + overflows): {lost_in_receiver}; \
         ramp discontinuities: {} (one per dropped packet before the last expected: {})",
        n(&rx, "discontinuities"),
        n(emu, "dropped") - unseen_packets.min(n(emu, "dropped"))
    ));
    // Memory: after a 5 s warm-up, resident size should not grow.
    let warm = rss.iter().skip(5).copied().collect::<Vec<_>>();
    if let (Some(first), Some(last), Some(max), Some(min)) = (
        warm.first(),
        warm.last(),
        warm.iter().max(),
        warm.iter().min(),
    ) {
        table.push(format!(
            "resident memory (KiB, {} samples after warm-up): first {first}, last {last}, \
             min {min}, max {max}, growth {:+}",
            warm.len(),
            *last as i64 - *first as i64
        ));
        if *last > first + first / 10 + 16 * 1024 {
            failures.push("memory grew".into());
        }
    }
    if !crate::report::quiet() || !failures.is_empty() {
        println!("{:<44} {:>14} {:>14}", "check", "receiver", "expected");
        for line in &table {
            println!("{line}");
        }
    }
    if failures.is_empty() {
        println!("soak: every sample and every injected fault accounted for");
        Ok(())
    } else {
        bail!("soak failed: {}", failures.join(", "))
    }
}
