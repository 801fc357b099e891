//! `usrp_rx --channels N --source-per-channel`: one `UdpSource` per channel in one
//! flowgraph, each on its own port, with the built-in emulators and with `usrp_sim`
//! processes; every channel's samples accounted for, faults on one channel only.

mod examples;

use std::process::{Command, Stdio};

use examples::{example, free_port, last_json, u, wait_until_listening};
use serde_json::Value;

#[test]
fn each_channel_is_its_own_source_and_a_fault_stays_on_its_channel() {
    let out = Command::new(example("usrp_rx"))
        .args(["--json", "--channels", "2", "--source-per-channel"])
        .args(["--duration", "1", "--rate", "2e6", "--signal", "ramp"])
        .args(["--drop-every", "20", "--fault-channel", "1", "--allow-loss"])
        .output()
        .expect("usrp_rx runs");
    assert!(
        examples::ok_or_short(&out),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = last_json(&out.stdout);
    let emu = &v["emulator"];
    let ch = v["channels"].as_array().expect("channels");
    assert_eq!(ch.len(), 2);
    // Channel 0: everything the emulator sent, continuous.
    assert_eq!(u(&ch[0], "received"), u(&ch[0], "sent"), "{v}");
    assert_eq!(u(&ch[0], "missed"), 0);
    assert_eq!(u(&ch[0], "discontinuities"), 0);
    // Channel 1: exactly the dropped packets lost, those with a successor missed and
    // zero-filled; the stream's last packet, when dropped, only its end of burst shows.
    let dropped = u(emu, "dropped");
    assert!(dropped > 0, "{v}");
    assert_eq!(
        u(&ch[1], "sent") - u(&ch[1], "received"),
        u(emu, "dropped_samples"),
        "{v}"
    );
    let last_dropped = ch[1]["ended_with_eob"].is_null();
    assert_eq!(
        u(&ch[1], "missed") + u64::from(last_dropped),
        dropped,
        "{v}"
    );
    assert_eq!(u(&ch[1], "zeros"), u(&ch[1], "missed_samples"));
    // The totals are the channels' sums; the sources are distinct ports.
    assert_eq!(u(&v, "sent"), u(&ch[0], "sent") + u(&ch[1], "sent"));
    assert_eq!(u(&v, "lost_samples"), u(emu, "dropped_samples"));
    assert_eq!(u(&v, "missed"), u(&ch[1], "missed"));
    assert_eq!(
        u(&v["stats"], "delivered"),
        u(emu, "packets_sent"),
        "every datagram sent was delivered: {v}"
    );
    assert_ne!(ch[0]["stream"], ch[1]["stream"]);
}

#[test]
fn two_senders_into_consecutive_ports_of_one_flowgraph() {
    // Two consecutive free ports: try until the second of a free one is free as well.
    let port = (0..50)
        .map(|_| free_port())
        .find(|&p| p < u16::MAX && std::net::UdpSocket::bind(("127.0.0.1", p + 1)).is_ok())
        .expect("two consecutive free ports");
    let mut rx = Command::new(example("usrp_rx"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--channels", "2", "--source-per-channel", "--json"])
        .args([
            "--check-ramp",
            "--duration",
            "60",
            "--idle-timeout",
            "1",
            "--rate",
            "5e6",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("usrp_rx starts");
    wait_until_listening(&mut rx);
    let senders: Vec<_> = [port, port + 1]
        .iter()
        .map(|p| {
            Command::new(example("usrp_sim"))
                .args(["--dest", &format!("127.0.0.1:{p}")])
                .args(["--rate", "5e6", "--signal", "ramp", "--samples", "2e6"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("usrp_sim starts")
        })
        .collect();
    let sent: Vec<Value> = senders
        .into_iter()
        .map(|s| {
            let o = s.wait_with_output().expect("usrp_sim ends");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            last_json(&o.stdout)
        })
        .collect();
    let out = rx.wait_with_output().expect("usrp_rx ends");
    assert!(examples::ok_or_short(&out), "usrp_rx: {:?}", out.status);
    let v = last_json(&out.stdout);
    let ch = v["channels"].as_array().expect("channels");
    for (c, s) in sent.iter().enumerate() {
        assert_eq!(
            u(&ch[c], "received"),
            u(s, "samples_sent"),
            "channel {c}: {v}"
        );
        assert_eq!(u(&ch[c], "missed"), 0);
        assert_eq!(u(&ch[c], "discontinuities"), 0);
        assert!(
            ch[c]["stream"]
                .as_str()
                .unwrap()
                .ends_with(&(port + c as u16).to_string())
        );
    }
    assert_eq!(u(&v, "kernel_drops"), 0);
}
