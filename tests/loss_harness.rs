//! The receivers of the loss harness (`loss_rx`), whose counts `cargo xtask loss` reports:
//! every datagram the sender sent is delivered or counted as lost, also with several channels;
//! and the placement of sender and receiver that `--pin` gives both harnesses.

mod examples;

use std::net::UdpSocket;
use std::process::{Command, Stdio};

use examples::example;
use serde_json::Value;

/// Starts `loss_rx --receiver NAME`, waits for its address, runs `send(addr)`, and returns the
/// receiver's JSON result.
fn loss_rx(receiver: &str, send: impl FnOnce(&str)) -> Value {
    loss_rx_with(receiver, &[], send)
}

/// [`loss_rx`] with further `loss_rx` arguments.
fn loss_rx_with(receiver: &str, extra: &[&str], send: impl FnOnce(&str)) -> Value {
    use std::io::{BufRead, Read};
    let mut rx = Command::new(example("loss_rx"))
        .args(["--receiver", receiver, "--format", "chdr", "--size", "8000"])
        .args(["--idle", "0.5", "--timeout", "60"])
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .expect("loss_rx starts");
    let mut out = std::io::BufReader::new(rx.stdout.take().expect("stdout piped"));
    let mut first = String::new();
    out.read_line(&mut first)
        .expect("loss_rx prints its address");
    let addr = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{receiver}: {first:?}"))
        .to_string();
    send(&addr);
    let mut rest = String::new();
    out.read_to_string(&mut rest).expect("loss_rx output");
    assert!(
        rx.wait().expect("loss_rx ends").success(),
        "{receiver} failed"
    );
    serde_json::from_str(rest.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{receiver}: {e}: {rest}"))
}

fn sim_to(addr: &str, extra: &[&str]) -> Value {
    let out = Command::new(example("usrp_sim"))
        .args(["--dest", addr, "--format", "chdr", "--spp", "1996"])
        .args(extra)
        .output()
        .expect("usrp_sim runs");
    assert!(out.status.success());
    serde_json::from_slice(out.stdout.trim_ascii()).expect("usrp_sim JSON")
}

/// Every one of `packets` datagrams (of 1996 samples) is delivered whole or counted as lost
/// (a kernel drop or an overflow), and none is malformed.
fn accounted(receiver: &str, rx: &Value, packets: u64) {
    let n = |k: &str| rx[k].as_u64().unwrap_or(u64::MAX);
    assert_eq!(n("malformed"), 0, "{receiver}: {rx}");
    assert_eq!(
        n("delivered") + n("kernel_drops") + n("overflows"),
        packets,
        "{receiver}: {rx}"
    );
    assert_eq!(n("bytes"), n("delivered") * 1996 * 4, "{receiver}: {rx}");
}

#[test]
fn every_loss_harness_receiver_accounts_for_every_datagram() {
    // Unpaced into a debug build: some receivers lose datagrams, and every loss must show up
    // as a kernel drop or an overflow (FutureSDR's block: kernel drops read from /proc).
    for receiver in [
        "flowgraph-mio",
        "flowgraph-fc32",
        "engine-uring",
        "futuresdr",
        "recvmmsg",
    ] {
        let mut sent = Value::Null;
        let rx = loss_rx(receiver, |addr| {
            sent = sim_to(
                addr,
                &["--samples", &(1996 * 3000).to_string(), "--unpaced"],
            );
        });
        let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(u64::MAX);
        let packets = n(&sent, "packets_sent") - n(&sent, "send_errors");
        accounted(receiver, &rx, packets);
        assert!(rx["cpu_seconds"].as_f64().is_some_and(|c| c > 0.0), "{rx}");
    }
}

#[test]
fn the_loss_harness_takes_a_stream_of_several_channels() {
    // `usrp_sim --channels 3` to one port: the MultiUdpSource receivers deliver every channel
    // (or counts what it lost), the reference counts every datagram; a single-stream receiver
    // refuses the channels rather than report one channel's share as loss.
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(u64::MAX);
    for receiver in ["flowgraph-multi", "flowgraph-multi-inplace", "recvmmsg"] {
        let mut sent = Value::Null;
        let rx = loss_rx_with(receiver, &["--channels", "3"], |addr| {
            sent = sim_to(
                addr,
                &["--channels", "3", "--samples", &(1996 * 200).to_string()],
            );
        });
        let packets = n(&sent, "packets_sent") - n(&sent, "send_errors");
        assert_eq!(packets, 600, "{sent}");
        accounted(receiver, &rx, packets);
    }
    let out = Command::new(example("loss_rx"))
        .args(["--receiver", "flowgraph-mio", "--channels", "2"])
        .output()
        .expect("loss_rx runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("only flowgraph-multi[-inplace] and recvmmsg"),
        "{err}"
    );
}

#[test]
fn the_loss_harness_receives_streams_on_consecutive_ports() {
    // One sender per port, as `cargo xtask loss --ports 2` runs them: a source (or loop) per
    // port, and every datagram of both delivered or counted as lost.
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(u64::MAX);
    for receiver in ["flowgraph-mio", "flowgraph-inplace", "recvmmsg"] {
        let mut packets = 0;
        let rx = loss_rx_with(receiver, &["--ports", "2"], |addr| {
            let first: std::net::SocketAddr = addr.parse().expect("an address");
            let senders: Vec<_> = (0..2u16)
                .map(|p| {
                    let dest = std::net::SocketAddr::new(first.ip(), first.port() + p);
                    std::thread::spawn(move || {
                        sim_to(&dest.to_string(), &["--samples", &(1996 * 200).to_string()])
                    })
                })
                .collect();
            for s in senders {
                let sent = s.join().expect("a sender");
                packets += n(&sent, "packets_sent") - n(&sent, "send_errors");
            }
        });
        assert_eq!(packets, 400);
        accounted(receiver, &rx, packets);
    }
}

#[test]
fn the_loss_harness_runs_sender_and_receiver_on_the_cpus_given() {
    // `cargo xtask loss --pin`: `--cpus` places each process; the reference loop also runs
    // with `--loop-sets` (buffers that leave the cache). A CPU the machine lacks is an error
    // that names it, before anything is received.
    let cpu = fsdr_net_io::sys::sched::allowed_cpus().expect("the allowed CPUs")[0].to_string();
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(u64::MAX);
    for (receiver, extra) in [
        ("flowgraph-mio", vec!["--cpus", &cpu]),
        ("recvmmsg", vec!["--cpus", &cpu, "--loop-sets", "4"]),
    ] {
        let mut packets = 0;
        let rx = loss_rx_with(receiver, &extra, |addr| {
            let sent = sim_to(
                addr,
                &["--cpus", &cpu, "--samples", &(1996 * 300).to_string()],
            );
            packets = n(&sent, "packets_sent") - n(&sent, "send_errors");
        });
        assert_eq!(packets, 300);
        accounted(receiver, &rx, packets);
    }
    // Every example with `--cpus` (the receiving ones through the shared tuning flags).
    for (bin, more) in [
        ("loss_rx", &[][..]),
        ("usrp_sim", &["--dest", "127.0.0.1:9"][..]),
        ("turnaround", &[][..]),
        ("inplace_rx", &[][..]),
    ] {
        let out = Command::new(example(bin))
            .args(["--cpus", "100000"])
            .args(more)
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{bin}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--cpus") && err.contains("100000"),
            "{bin}: {err}"
        );
    }
}

#[test]
fn usrp_rx_runs_its_emulator_and_its_receiver_on_the_cpus_given() {
    // `cargo xtask latency --usrp --pin`: `--emulator-cpus` places the in-process emulator,
    // `--cpus` the rest, and every sample arrives. A CPU this process may not use is an error
    // that names the flag and the CPU, before anything starts.
    let cpus = fsdr_net_io::sys::sched::allowed_cpus().expect("the allowed CPUs");
    let (emulator, receiver) = (cpus[0].to_string(), cpus[cpus.len() - 1].to_string());
    let out = Command::new(example("usrp_rx"))
        .args([
            "--json",
            "--duration",
            "0.5",
            "--rate",
            "5e6",
            "--signal",
            "ramp",
        ])
        .args(["--emulator-cpus", &emulator, "--cpus", &receiver])
        .output()
        .expect("usrp_rx runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(examples::ok_or_short(&out), "{err}");
    let v = examples::last_json(&out.stdout);
    let n = |k: &str| v[k].as_u64().unwrap_or(u64::MAX);
    assert!(n("received") > 0, "{v}");
    assert_eq!((n("received"), n("missed")), (n("sent"), 0), "{v}");
    assert_eq!(n("discontinuities"), 0, "{v}");
    for flag in ["--emulator-cpus", "--cpus"] {
        let out = Command::new(example("usrp_rx"))
            .args(["--json", "--duration", "0.1", flag, "100000"])
            .output()
            .expect("usrp_rx runs");
        assert!(!out.status.success(), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(flag) && err.contains("100000"),
            "{flag}: {err}"
        );
    }
}

#[test]
fn loss_harness_receivers_count_datagrams_that_do_not_parse() {
    for receiver in ["engine-mio", "futuresdr", "recvmmsg"] {
        let rx = loss_rx(receiver, |addr| {
            let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
            // Eight-byte CHDR headers whose length field disagrees with the datagram.
            for _ in 0..10 {
                tx.send_to(&[0u8; 8000], addr).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            sim_to(
                addr,
                &["--samples", &(1996 * 20).to_string(), "--rate", "2e6"],
            );
        });
        let n = |k: &str| rx[k].as_u64().unwrap_or(u64::MAX);
        if receiver == "futuresdr" {
            // Its 208 KiB socket loses datagrams even at this rate in a debug build; every
            // one is a kernel drop, and the bad ones that arrive are counted.
            assert!(n("malformed") > 0, "{rx}");
            assert_eq!(
                n("malformed") + n("delivered") + n("kernel_drops"),
                30,
                "{rx}"
            );
        } else {
            assert_eq!(
                (n("malformed"), n("delivered")),
                (10, 20),
                "{receiver}: {rx}"
            );
        }
    }
}
