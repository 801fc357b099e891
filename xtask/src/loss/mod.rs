//! `cargo xtask loss`: what each receiver keeps of a paced stream at each offered rate.
//!
//! For every cell of receivers × rates, one `loss_rx` process binds and announces its address,
//! one `usrp_sim` process sends the stream to it for `--seconds`, and both print JSON. The
//! sender and the receiver are separate processes, so the receiver's getrusage is its own.

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

mod args;
mod cell;
mod harness;
mod report;

use args::*;
pub use args::{LossArgs, receivers};
use cell::*;
pub(crate) use harness::Cpus;
use harness::*;
use report::{plot, table, write_csv};

/// Runs the sweep, prints the tables, writes the CSV and the PNG.
pub fn run(args: LossArgs, build: impl FnOnce() -> Result<()>) -> Result<()> {
    let rates = args
        .rates
        .iter()
        .map(|r| Rate::parse(r))
        .collect::<Result<Vec<_>>>()?;
    if rates.is_empty() {
        bail!("--rates is empty");
    }
    if args.channels == 0 || args.ports == 0 {
        bail!("--channels and --ports must be at least 1");
    }
    if args.channels > 1 && args.ports > 1 {
        bail!("--channels and --ports do not combine: several channels go to one port");
    }
    let receivers: Vec<String> = if args.receivers.is_empty() && args.channels > 1 {
        MULTI_CHANNEL.map(String::from).to_vec()
    } else if args.receivers.is_empty() && args.ports > 1 {
        ["flowgraph-mio", "flowgraph-inplace", "recvmmsg"]
            .map(String::from)
            .to_vec()
    } else if args.receivers.is_empty() {
        receivers(args.netns)
    } else {
        args.receivers.clone()
    };
    // A misspelt receiver option fails here, not after the sweep's first rounds.
    for r in &receivers {
        let spec = ReceiverSpec::parse(r)?;
        if args.channels > 1 && !MULTI_CHANNEL.contains(&spec.name.as_str()) {
            bail!(
                "receiver {r:?} takes one stream; with --channels {} only {} can run",
                args.channels,
                MULTI_CHANNEL.join(" and ")
            );
        }
        if args.ports > 1 && !takes_ports(&spec.name) {
            bail!(
                "receiver {r:?} takes one port; with --ports {} only flowgraph-<backend>, \
                 flowgraph-inplace and recvmmsg can run",
                args.ports
            );
        }
    }
    build()?;
    let h = Harness::new(args.clone())?;
    let runs = args.runs.max(1);
    let total = (receivers.len() * rates.len() * runs) as u64;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")?
            .progress_chars("=> "),
    );
    // Rounds: every receiver at every rate once per round, so that the runs of the
    // receivers (and the reference) are interleaved in time rather than one after another.
    let mut all: Vec<Vec<Vec<Cell>>> = vec![vec![Vec::new(); receivers.len()]; rates.len()];
    for round in 0..runs {
        for (ri, &rate) in rates.iter().enumerate() {
            for (xi, recv) in receivers.iter().enumerate() {
                bar.set_message(format!("round {}: {recv} at {}", round + 1, rate.label()));
                let c = h
                    .cell(recv, rate, args.seconds)
                    .with_context(|| format!("{recv} at {}", rate.label()))?;
                let line = format!(
                    "{recv:>26} {:>12}: offered {:7.1} MB/s, delivered {:>8.4}%, kernel drops {}, overflows {}, {:.2} CPU-s/GB, steal {}",
                    rate.label(),
                    c.offered_mbps,
                    100.0 * c.success(),
                    c.kernel_drops,
                    c.overflows,
                    c.cpu_per_gb(),
                    c.steal.map_or("?".into(), |s| format!("{:.1}%", 100.0 * s)),
                );
                if bar.is_hidden() {
                    eprintln!("{line}");
                } else {
                    bar.println(line);
                }
                all[ri][xi].push(c);
                bar.inc(1);
            }
        }
    }
    let mut steals: Vec<f64> = all
        .iter()
        .flatten()
        .flatten()
        .filter_map(|c| c.steal)
        .collect();
    steals.sort_by(f64::total_cmp);
    let steal_line = match (steals.first(), steals.last()) {
        (Some(lo), Some(hi)) => format!(
            "host steal time per run: {:.1}% to {:.1}% (median {:.1}%) of the machine's CPU time",
            100.0 * lo,
            100.0 * hi,
            100.0 * steals[steals.len() / 2]
        ),
        _ => "host steal time: not readable".into(),
    };
    let reference = receivers.iter().position(|r| r == "recvmmsg");
    let mut cells = Vec::new();
    for per_rate in &mut all {
        let refs: Option<Vec<Cell>> = reference.map(|x| per_rate[x].clone());
        for runs in per_rate.iter_mut() {
            cells.push(Harness::median_cell(
                std::mem::take(runs),
                refs.as_deref(),
                args.max_steal,
            ));
        }
    }
    let mut maxes = Vec::new();
    if args.find_max {
        for recv in &receivers {
            maxes.push(h.find_max(recv, &cells, &bar)?);
        }
    }
    bar.finish_and_clear();
    std::fs::create_dir_all(&args.out)?;
    let csv = args.out.join("loss.csv");
    write_csv(&csv, &cells)?;
    let png = args.out.join("loss.png");
    let plotted = plot(&png, &receivers, &cells, &h);
    if args.json {
        let out = json!({
            "format": h.format.name(),
            "datagram_bytes": args.size,
            "seconds": args.seconds,
            "burst_us": args.burst_us,
            "channels": args.channels,
            "ports": args.ports,
            "sender_cpus": h.cpus.as_ref().map(|c| &c.sender),
            "receiver_cpus": h.cpus.as_ref().map(|c| &c.receiver),
            "drop_every": args.drop_every,
            "workers": h.workers,
            "cells": cells.iter().map(Cell::to_json).collect::<Vec<_>>(),
            "max_zero_loss": maxes.iter().map(|m| json!({
                "receiver": m.receiver, "mbps": m.mbps, "sender_limited": m.sender_limited
            })).collect::<Vec<_>>(),
            "steal_per_run": steals,
            "machine": fsdr_net_io::host::Machine::detect(),
            "csv": csv,
            "png": plotted.as_ref().ok().map(|_| &png),
        });
        println!("{out}");
    } else {
        let find = |recv: &str, r: Rate| cells.iter().find(|c| c.receiver == recv && c.rate == r);
        println!(
            "{} datagrams of {} B, {} s per cell, paced in {} µs bursts, flowgraphs on {} smol \
             workers; offered = what the sender achieved",
            h.format.name(),
            args.size,
            args.seconds,
            args.burst_us,
            h.workers
                .map_or("FutureSDR's default (one per core)".to_string(), |w| w
                    .to_string())
        );
        if args.channels > 1 {
            println!(
                "{} channels in one stream to one port (`usrp_sim --channels {}`), the rate split evenly",
                args.channels, args.channels
            );
        }
        if let Some(c) = &h.cpus {
            println!(
                "the sender on CPU {}, the receiver on CPU {} (--pin)",
                Cpus::list(&c.sender),
                Cpus::list(&c.receiver)
            );
        }
        if args.ports > 1 {
            println!(
                "{} streams to {} consecutive ports, one usrp_sim each, the rate split evenly; a source (or loop) per port",
                args.ports, args.ports
            );
        }
        if let Some(n) = args.drop_every {
            println!("the sender left out every {n}th datagram (a loss in {n})");
        }
        println!("{steal_line}");
        // Ratios to the loop depend on the caches (PERFORMANCE.md, "Another host").
        println!("machine: {}", fsdr_net_io::host::Machine::detect());
        if let Some(max) = args.max_steal {
            println!(
                "ratios to the reference from the rounds in which both runs had at most {:.1}% steal",
                100.0 * max
            );
        }
        table(
            "Delivered (% of sent, by sequence-numbered datagrams; unpaced: × the recvmmsg reference's delivered rate, the median of each run's ratio to the reference run of its round)",
            &receivers,
            &rates,
            |recv, r| {
                find(recv, r).map_or("-".into(), |c| {
                    if let Rate::Unpaced = r {
                        let x = c.delivered_ratio.map_or(String::new(), |x| {
                            format!(" ({x:.2}× the reference's rate{})", c.kept_rounds())
                        });
                        format!(
                            "{:.2}% of {:.0} MB/s{x}",
                            100.0 * c.success(),
                            c.offered_mbps
                        )
                    } else {
                        format!("{:.2}%", 100.0 * c.success())
                    }
                })
            },
        );
        table(
            "Lost: kernel drops / receiver overflows (datagrams)",
            &receivers,
            &rates,
            |recv, r| {
                find(recv, r).map_or("-".into(), |c| {
                    format!("{} / {}", c.kernel_drops, c.overflows)
                })
            },
        );
        table(
            "CPU seconds of the receiving process per GB delivered (× the recvmmsg reference: median of each run's ratio to the reference run of its round)",
            &receivers,
            &rates,
            |recv, r| {
                find(recv, r).map_or("-".into(), |c| {
                    let kept = c.kept_rounds();
                    match c.ratio {
                        Some(x) => format!("{:.2} ({x:.2}×{kept})", c.cpu_per_gb()),
                        None if kept.is_empty() => format!("{:.2}", c.cpu_per_gb()),
                        None => format!("{:.2} (no ratio{kept})", c.cpu_per_gb()),
                    }
                })
            },
        );
        let opt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |x| format!("{x:.digits$}"));
        table(
            "Receive system calls per datagram · consumer wake-ups per GB · payload bytes copied per GB",
            &receivers,
            &rates,
            |recv, r| {
                find(recv, r).map_or("-".into(), |c| {
                    format!(
                        "{} · {} · {}",
                        opt(c.calls_per_datagram(), 2),
                        opt(c.wakeups_per_gb(), 0),
                        c.copied_per_gb()
                            .map_or("-".into(), |x| format!("{:.2e}", x)),
                    )
                })
            },
        );
        table(
            "CPU-s/GB by thread: the thread that reads the socket (× the reference loop's thread, median of the rounds' ratios) · FutureSDR's workers (µs per wake-up) · the rest of the process",
            &receivers,
            &rates,
            |recv, r| {
                find(recv, r).map_or("-".into(), |c| match c.threads {
                    None => "-".into(),
                    Some(t) => {
                        let x = c
                            .reader_ratio
                            .map_or(String::new(), |x| format!(" ({x:.2}×)"));
                        let w = c
                            .workers_per_wakeup_us()
                            .map_or(String::new(), |us| format!(" ({us:.1} µs)"));
                        let rest = t.receive + t.workers + t.main + t.other
                            - t.reader()
                            - t.workers_apart();
                        format!(
                            "{:.2}{x} · {:.2}{w} · {:.2}",
                            c.reader_per_gb(),
                            c.workers_per_gb(),
                            c.per_gb(rest)
                        )
                    }
                })
            },
        );
        if !maxes.is_empty() {
            println!(
                "\nHighest zero-loss rate ({} bisection steps)\n",
                args.steps
            );
            println!("| receiver | MB/s |\n|---|---:|");
            for m in &maxes {
                let note = if m.sender_limited {
                    " (sender's top speed, no loss)"
                } else {
                    ""
                };
                println!("| {} | {:.0}{note} |", m.receiver, m.mbps);
            }
        }
        println!("\nCSV: {}", csv.display());
        match &plotted {
            Ok(()) => println!("PNG: {}", png.display()),
            Err(e) => println!("PNG: not written: {e}"),
        }
    }
    let send_errors: u64 = cells.iter().map(|c| c.send_errors).sum();
    if send_errors > 0 {
        eprintln!(
            "note: the sender reported {send_errors} send errors; those datagrams are not counted as sent"
        );
    }
    plotted.map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_channels_or_ports_go_only_to_receivers_that_take_them() {
        for r in MULTI_CHANNEL {
            assert!(ReceiverSpec::parse(r).is_ok());
        }
        assert!(takes_ports("flowgraph-mio") && takes_ports("flowgraph-inplace"));
        assert!(takes_ports("recvmmsg"));
        assert!(!takes_ports("flowgraph-multi") && !takes_ports("engine-mio"));
        assert!(!takes_ports("flowgraph-multi-inplace"));
        assert!(!takes_ports("inplace") && !takes_ports("futuresdr"));
    }

    #[test]
    fn receiver_specs_carry_loss_rx_options() {
        let spec = |s: &str| ReceiverSpec::parse(s).unwrap();
        assert_eq!(spec("recvmmsg").name, "recvmmsg");
        assert!(spec("recvmmsg").args.is_empty());
        assert_eq!(spec("engine-mio+gro").args, ["--gro"]);
        let s = spec("flowgraph-inplace:coalesce-us=1000:coalesce-frames=512:normal-workers");
        assert_eq!(s.name, "flowgraph-inplace");
        assert_eq!(
            s.args,
            [
                "--coalesce-us",
                "1000",
                "--coalesce-frames",
                "512",
                "--normal-workers"
            ]
        );
        assert_eq!(
            spec("engine-reuseport+gro:batch=32").args,
            ["--gro", "--batch", "32"]
        );
        for bad in [
            "",
            ":gro",
            "engine-mio:",
            "engine-mio:--gro",
            "x:receiver=y",
        ] {
            assert!(ReceiverSpec::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn steal_limits_are_percentages() {
        assert_eq!(parse_percent("5"), Ok(0.05));
        assert_eq!(parse_percent("12.5%"), Ok(0.125));
        assert!(parse_percent("101").is_err() && parse_percent("x").is_err());
    }
}
