//! Running the examples from tests: built once (debug, as the rest of the tests), started
//! as processes, their JSON read from the last line of stdout.
#![allow(dead_code)]

use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// The examples the tests run.
const EXAMPLES: &[&str] = &[
    "usrp_sim",
    "usrp_rx",
    "rx_to_mem",
    "loss_rx",
    "inplace_rx",
    "latency",
    "embed",
    "turnaround",
    "tx_tags",
];

/// The path of an example's binary, after building every example the tests run once.
pub fn example(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        // With the workspace's feature resolution: `cargo xtask test` runs `cargo test
        // --workspace --all-targets`, which has built these examples already; a build of
        // this package alone resolves the shared dependencies' features differently and
        // built FutureSDR and the examples a second time (a minute of CI).
        let mut cargo = Command::new(env!("CARGO"));
        cargo.args(["build", "--quiet", "--workspace"]);
        for e in EXAMPLES {
            cargo.args(["--example", e]);
        }
        let status = cargo.status().expect("cargo runs");
        assert!(status.success(), "building the examples");
    });
    assert!(EXAMPLES.contains(&name), "{name} is not in EXAMPLES");
    // Beside this test's binary (target/debug/deps/NAME-HASH), whatever the target
    // directory (`CARGO_TARGET_DIR`).
    let test = std::env::current_exe().expect("the test's path");
    let profile = test
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    profile.join("examples").join(name)
}

/// A UDP port that was free a moment ago.
pub fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until a receiving example says on stderr that it has bound its socket (a fixed
/// sleep races a loaded machine: a whole stream could go out before the port is open).
/// Its stderr is echoed to the test's.
pub fn wait_until_listening(rx: &mut std::process::Child) {
    use std::io::BufRead;
    let stderr = rx.stderr.take().expect("stderr piped");
    let (ready, bound) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.starts_with("listening on") {
                let _ = ready.send(());
            }
            eprintln!("example: {line}");
        }
    });
    bound
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the example binds its socket");
}

/// Whether a receiving example succeeded, or failed only because its sender could not keep
/// up with the rate asked (exit code 5, `failure` `short_sender`): an in-process emulator
/// on a busy machine, a debug build at a high rate. Tests of anything but the rate take it
/// as a success (a sender's speed is the machine's, not the behaviour under test).
pub fn ok_or_short(out: &std::process::Output) -> bool {
    let short = || {
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines().last().is_some_and(|l| {
            serde_json::from_str::<Value>(l).is_ok_and(|j| j["failure"] == "short_sender")
        })
    };
    out.status.success() || (out.status.code() == Some(5) && short())
}

/// The JSON object on the last line of an example's stdout.
pub fn last_json(stdout: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Runs the turnaround example (with `extra` flags) against the turnaround probe for a short,
/// slow stream; returns what the probe measured and the example's output.
pub fn turnaround(extra: &[&str]) -> (fsdr_net_io::turnaround::ProbeReport, std::process::Output) {
    let listen = format!("127.0.0.1:{}", free_port());
    let back = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(example("turnaround"))
        .args([
            "--listen", &listen, "--dest", &back, "--json", "--idle", "0.5",
        ])
        .args(["--spp", "1000"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("turnaround starts");
    wait_until_listening(&mut child);
    let report =
        fsdr_net_io::turnaround::Probe::new(listen.parse().unwrap(), back.parse().unwrap())
            .rate(2e6)
            .samples_per_packet(1000)
            .duration(std::time::Duration::from_millis(300))
            .run()
            .expect("the probe runs");
    (report, child.wait_with_output().expect("turnaround ends"))
}

/// Runs `usrp_rx --listen ADDR` (receiving with `--json --check-ramp --allow-loss`) and then the emulator (`sim`, already given its arguments);
/// returns (receiver JSON, emulator JSON).
pub fn run_pair(listen: &str, rx_args: &[&str], sim: Command) -> (Value, Value) {
    run_pair_with(Command::new(example("usrp_rx")), listen, rx_args, sim)
}

/// [`run_pair`] with the receiver started by `rx` (`usrp_rx`, possibly inside a namespace).
pub fn run_pair_with(
    mut rx: Command,
    listen: &str,
    rx_args: &[&str],
    mut sim: Command,
) -> (Value, Value) {
    let mut rx = rx
        .args(["--listen", listen, "--json", "--check-ramp", "--allow-loss"])
        .args(["--duration", "60", "--idle-timeout", "1"])
        .args(rx_args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("usrp_rx starts");
    wait_until_listening(&mut rx);
    let sim = sim.output().expect("usrp_sim runs");
    assert!(
        sim.status.success(),
        "usrp_sim: {}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let rx = rx.wait_with_output().expect("usrp_rx ends");
    let json = last_json(&rx.stdout);
    // A sender slower than a --rate given fails as such (exit code 5), which some of the
    // pairs arrange on purpose (a device told another rate, an emulator at a rate a debug
    // build cannot send); nothing else fails.
    assert!(ok_or_short(&rx), "usrp_rx failed: {json}");
    (json, last_json(&sim.stdout))
}

/// A number of `usrp_rx`'s (or `usrp_sim`'s) JSON: a summary field, or one of the counters
/// under `stats`.
pub fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .or_else(|| v["stats"][k].as_u64())
        .unwrap_or_else(|| panic!("{k} in {v}"))
}

/// Asserts that the receiver (`usrp_rx`'s JSON) dropped nothing itself and counted every
/// packet and sample the sender (`usrp_sim`'s JSON) dropped as missed.
pub fn assert_drops_missed(rx: &Value, sim: &Value) {
    assert_eq!(u(rx, "kernel_drops") + u(rx, "overflow"), 0, "{rx}");
    assert_eq!(u(rx, "missed"), u(sim, "dropped"), "{rx} {sim}");
    assert_eq!(
        u(rx, "missed_samples"),
        u(sim, "dropped_samples"),
        "{rx} {sim}"
    );
}
