//! The examples' summaries as scripts read them: every JSON field documented in docs/json.md
//! is in the example's output with its documented type, and nothing undocumented is; the
//! receiving examples exit 1 when samples were lost (0 with `--allow-loss`) and say why in
//! words; the rate they report is the stream's, not the whole run's.

mod examples;

use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::net::UdpSocket;
use std::process::{Command, Output, Stdio};

use examples::{example, free_port, last_json};
use serde_json::Value;

/// docs/json.md: each `## \`heading\`` section's table as (field, type) rows.
fn documented() -> BTreeMap<String, Vec<(String, String)>> {
    let text = include_str!("../docs/json.md");
    let mut sections = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            current = Some(h.trim_matches('`').to_string());
            sections.insert(h.trim_matches('`').to_string(), Vec::new());
        } else if let (Some(h), Some(row)) = (&current, line.strip_prefix("| `")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let field = cells[0].trim_end_matches('`').to_string();
            sections
                .get_mut(h)
                .expect("section")
                .push((field, cells[1].to_string()));
        }
    }
    sections
}

fn run(name: &str, args: &[&str]) -> Output {
    Command::new(example(name))
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{name} runs: {e}"))
}

/// Starts `loss_rx`, sends it a short stream and returns its output.
fn loss_rx() -> Output {
    let mut rx = Command::new(example("loss_rx"))
        .args([
            "--receiver",
            "engine-mio",
            "--format",
            "chdr",
            "--idle",
            "0.3",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("loss_rx starts");
    let mut out = std::io::BufReader::new(rx.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("the address line");
    let addr = first.trim().strip_prefix("listening on ").expect("address");
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sim = run(
        "usrp_sim",
        &[
            "--dest",
            addr,
            "--format",
            "chdr",
            "--samples",
            "1e5",
            "--rate",
            "1e7",
        ],
    );
    assert!(sim.status.success());
    drop(tx);
    let mut rest = Vec::new();
    out.read_to_end(&mut rest).expect("loss_rx output");
    let status = rx.wait().expect("loss_rx ends");
    Output {
        status,
        stdout: rest,
        stderr: Vec::new(),
    }
}

/// Whether a JSON value has the documented type (`int`, `float`, `string`, `bool`, `object`,
/// `array…`, each with `?` for "or null").
fn has_type(v: &Value, ty: &str) -> bool {
    let (ty, nullable) = match ty.strip_suffix('?') {
        Some(t) => (t, true),
        None => (ty, false),
    };
    if v.is_null() {
        return nullable;
    }
    match ty {
        "int" => v.is_u64(),
        "float" => v.is_number(),
        "string" => v.is_string(),
        "bool" => v.is_boolean(),
        "object" => v.is_object(),
        t if t.starts_with("array") => v.is_array(),
        t => panic!("docs/json.md: unknown type {t:?}"),
    }
}

#[test]
fn every_documented_summary_matches_its_example() {
    let dest = format!("127.0.0.1:{}", free_port());
    let docs = documented();
    let runs: Vec<(&str, Output)> = vec![
        (
            "usrp_rx --json",
            run(
                "usrp_rx",
                &[
                    "--json",
                    "--duration",
                    "1",
                    "--rate",
                    "2e6",
                    "--signal",
                    "ramp",
                ],
            ),
        ),
        (
            "usrp_rx --json --channels N",
            run(
                "usrp_rx",
                &[
                    "--json",
                    "--channels",
                    "2",
                    "--format",
                    "vrt",
                    "--duration",
                    "1",
                    "--rate",
                    "1e6",
                ],
            ),
        ),
        (
            "rx_to_mem --json",
            run("rx_to_mem", &["--json", "--bytes", "1e6", "--rate", "1e8"]),
        ),
        (
            "inplace_rx",
            run("inplace_rx", &["--duration", "1", "--rate", "2e6"]),
        ),
        (
            "usrp_sim",
            run(
                "usrp_sim",
                &["--dest", &dest, "--samples", "1e5", "--rate", "1e7"],
            ),
        ),
        ("loss_rx", loss_rx()),
        ("turnaround --json", examples::turnaround(&[]).1),
        (
            "tx_tags --json",
            run("tx_tags", &["--json", "--format", "vrt"]),
        ),
        (
            "latency --json",
            run(
                "latency",
                &[
                    "--json", "--pipes", "1", "--stages", "1", "--items", "65536",
                ],
            ),
        ),
    ];
    let ran: Vec<&str> = runs.iter().map(|(h, _)| *h).collect();
    assert_eq!(
        docs.keys().map(String::as_str).collect::<Vec<_>>(),
        {
            let mut r = ran.clone();
            r.sort_unstable();
            r
        },
        "every documented summary is run here, and every one run here is documented"
    );
    for (heading, out) in &runs {
        // No loss in these runs (the channel run's rate is 1 Msps per channel; a loss
        // here would be a real one, and the exit code says so). An emulator this machine
        // kept from its rate fails as a short sender (exit code 5), its summary as whole.
        let json = last_json(&out.stdout);
        assert!(examples::ok_or_short(out), "{heading}: {:?}", out.status);
        let obj = json.as_object().expect("one JSON object");
        let fields = &docs[*heading];
        for (field, ty) in fields {
            let v = obj
                .get(field)
                .unwrap_or_else(|| panic!("{heading}: documented `{field}` missing in {json}"));
            assert!(has_type(v, ty), "{heading}: `{field}` is not {ty}: {v}");
        }
        for key in obj.keys() {
            assert!(
                fields.iter().any(|(f, _)| f == key),
                "{heading}: `{key}` is not documented in docs/json.md"
            );
        }
    }
    for receiving in [
        "usrp_rx --json",
        "usrp_rx --json --channels N",
        "rx_to_mem --json",
        "inplace_rx",
    ] {
        for common in [
            "sent",
            "received",
            "missed",
            "kernel_drops",
            "overflows",
            "success_rate",
        ] {
            assert!(
                docs[receiving].iter().any(|(f, _)| f == common),
                "{receiving} lacks `{common}`"
            );
        }
    }
}

#[test]
fn examples_exit_non_zero_when_samples_were_lost_unless_allowed() {
    let lossy = ["--duration", "1", "--rate", "2e6", "--drop-every", "50"];
    for (name, extra) in [
        ("usrp_rx", &["--json"][..]),
        ("inplace_rx", &[][..]),
        ("embed", &[][..]),
    ] {
        let args: Vec<&str> = lossy.iter().chain(extra).copied().collect();
        let args: Vec<&str> = if name == "embed" {
            // embed streams 1 s of its own rate; it has no --duration.
            args.into_iter()
                .filter(|a| *a != "--duration" && *a != "1")
                .collect()
        } else {
            args
        };
        let out = run(name, &args);
        assert_eq!(out.status.code(), Some(1), "{name} with loss");
        let allowed: Vec<&str> = args.iter().copied().chain(["--allow-loss"]).collect();
        let out = run(name, &allowed);
        // Allowed: 0, unless the in-process emulator fell short of its rate (exit code 5).
        assert!(examples::ok_or_short(&out), "{name} --allow-loss");
        if name != "embed" {
            let json = last_json(&out.stdout);
            let words = json["explanation"].as_array().expect("explanation");
            assert!(
                words
                    .iter()
                    .any(|w| w.as_str().unwrap().contains("on purpose")),
                "{name}: {json}"
            );
            assert!(json["success_rate"].as_f64().unwrap() < 1.0, "{json}");
        }
    }
    // rx_to_mem from a sender that leaves out every 10th datagram.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut rx = Command::new(example("rx_to_mem"))
        .args([
            "--listen", &listen, "--format", "chdr", "--json", "--bytes", "1e9",
        ])
        .args(["--timeout", "0.5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    examples::wait_until_listening(&mut rx);
    let sim = run(
        "usrp_sim",
        &[
            "--dest",
            &listen,
            "--samples",
            "1e5",
            "--rate",
            "1e7",
            "--drop-every",
            "10",
        ],
    );
    assert!(sim.status.success());
    let mut stdout = Vec::new();
    rx.stdout.take().unwrap().read_to_end(&mut stdout).unwrap();
    let status = rx.wait().unwrap();
    let json = last_json(&stdout);
    assert_eq!(status.code(), Some(1), "{json}");
    assert_eq!(json["missed"].as_u64(), Some(5), "{json}");
}

#[test]
fn the_rate_is_the_streams_not_the_whole_runs() {
    // The in-process emulator streams for 1 s; the run also waits for the stream to drain
    // (0.5 s without a datagram). The rate covers the stream only.
    let out = run("usrp_rx", &["--json", "--duration", "1", "--rate", "2e6"]);
    assert!(examples::ok_or_short(&out));
    let j = last_json(&out.stdout);
    let f = |k: &str| j[k].as_f64().unwrap_or_else(|| panic!("{k} in {j}"));
    let (seconds, stream) = (f("seconds"), f("stream_seconds"));
    assert!(stream > 0.0 && stream + 0.4 < seconds, "{j}");
    let (received, datagrams) = (f("received"), f("datagrams"));
    let expected = received * (datagrams - 1.0) / datagrams / stream;
    assert!((f("rate_sps") - expected).abs() <= 1e-6 * expected, "{j}");
    assert!(f("rate_sps") > 1.3 * received / seconds, "{j}");
}
