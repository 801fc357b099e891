//! A trace recorded by this test with real LTTng: proves that events reach the session
//! (the linker trap records nothing without failing) and that the analysis of a recorded
//! trace counts matched, unmatched and out-of-order events. Needs root, `lttng-tools`,
//! `liblttng-ust-dev` and `babeltrace2` (which `cargo xtask test` installs); skipped otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;

use fsdr_net_trace::analysis::Pairing;
use fsdr_net_trace::{AnalyzeOptions, analyze, analyze_pairings};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// LTTng cannot record here (`why`): a failure when `FSDR_NET_REQUIRE_LTTNG` is set (as
/// `cargo xtask test` sets it as root with the packages installed), otherwise said and passed.
fn unavailable(why: &str) {
    if std::env::var_os("FSDR_NET_REQUIRE_LTTNG").is_some() {
        panic!("FSDR_NET_REQUIRE_LTTNG is set, but this test cannot record here: {why}");
    }
    eprintln!("not run here ({why}); set FSDR_NET_REQUIRE_LTTNG to make that a failure");
}

fn available() -> Result<(), String> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        return Err("not root".into());
    }
    for cmd in ["lttng", "lttng-sessiond", "babeltrace2"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {cmd}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Err(format!("{cmd} not installed"));
        }
    }
    if !Path::new("/usr/include/x86_64-linux-gnu/lttng/tracepoint.h").exists()
        && !Path::new("/usr/include/lttng/tracepoint.h").exists()
    {
        return Err("liblttng-ust-dev not installed".into());
    }
    Ok(())
}

/// A session records the events of every process; the tests record one at a time.
static ONE_SESSION: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn record(name: &str, args: &[&str]) -> PathBuf {
    let _one = ONE_SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let ws = workspace();
    let status = Command::new(env!("CARGO"))
        .current_dir(&ws)
        .args([
            "build",
            "--quiet",
            "-p",
            "fsdr-net-lttng",
            "--features",
            "lttng",
        ])
        .args(["--example", "fire"])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the fire example with lttng");
    let trace = std::env::temp_dir().join(format!("fsdr-net-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&trace);
    let session = format!("fsdr-net-test-{name}-{}", std::process::id());
    let script = ws.join("tracing/session.sh");
    let ok = Command::new(&script)
        .args(["start", &session])
        .arg(&trace)
        .status()
        .expect("session.sh runs");
    assert!(ok.success(), "starting the LTTng session");
    let out = Command::new(ws.join("target/debug/examples/fire"))
        .args(args)
        .env("LTTNG_UST_ALLOW_BLOCKING", "1")
        .output()
        .expect("fire runs");
    let stop = Command::new(&script)
        .args(["stop", &session])
        .output()
        .expect("session.sh runs");
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("lttng-ust loaded: true"), "{said}");
    assert!(stop.status.success());
    trace
}

#[test]
fn a_recorded_trace_is_matched_with_gaps_and_reordering() {
    if let Err(why) = available() {
        return unavailable(&why);
    }
    let trace = record("gaps", &["1000", "7"]);
    let out = analyze(&AnalyzeOptions::new(trace.clone(), Pairing::TxRx)).unwrap();
    // 1000 tx, 1000 packets, and an rx for every boundary but each 7th.
    assert_eq!(out.read.events, 1000 + 1000 + (1000 - 142));
    assert_eq!(out.read.discarded, 0);
    let s = &out.report.overall;
    assert_eq!(s.count, 1000 - 142);
    assert_eq!((s.unmatched_start, s.unmatched_end), (142, 0));
    assert_eq!(s.duplicates, 0);
    assert!(s.min_ns >= 0 && s.min_ns <= s.p50_ns && s.p50_ns <= s.p99_ns);
    // One read for several pairings gives what one read per pairing gives; every recorded
    // `packet` event is one network-source sample.
    let [again, packets] =
        analyze_pairings(&trace, [Pairing::TxRx, Pairing::NetworkSource]).unwrap();
    assert_eq!(again.report.overall, out.report.overall);
    assert_eq!(again.read, out.read);
    assert_eq!(packets.report.overall.count, 1000);
    assert_eq!(packets.report.overall.duplicates, 0);
    let _ = std::fs::remove_dir_all(trace);
}

#[test]
fn csv_and_png_of_a_recorded_trace() {
    if let Err(why) = available() {
        return unavailable(&why);
    }
    let trace = record("files", &["500"]);
    let dir = std::env::temp_dir().join(format!("fsdr-net-files-out-{}", std::process::id()));
    let mut opts = AnalyzeOptions::new(trace.clone(), Pairing::TxRx);
    opts.csv = Some(dir.join("l.csv"));
    opts.png = Some(dir.join("l.png"));
    let out = analyze(&opts).unwrap();
    assert_eq!(out.report.overall.count, 500);
    let csv = std::fs::read_to_string(dir.join("l.csv")).unwrap();
    assert_eq!(csv.lines().count(), 501);
    assert!(csv.starts_with("block,seq,start_ns,end_ns,latency_ns\n"));
    match out.png {
        Some(Ok(p)) => assert_eq!(&std::fs::read(p).unwrap()[1..4], b"PNG"),
        Some(Err(e)) => eprintln!("PNG not checked: {e}"),
        None => panic!("PNG was asked for"),
    }
    let _ = std::fs::remove_dir_all(trace);
    let _ = std::fs::remove_dir_all(dir);
}
