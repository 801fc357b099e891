//! What `cargo xtask loss` writes: markdown tables, the CSV of every cell and the plot.

use std::path::Path;

use anyhow::{Context, Result};
use fsdr_net_trace::plot::{Chart, Series, line_chart};

use super::{Cell, Harness, Rate};

pub(super) fn table(
    title: &str,
    receivers: &[String],
    rates: &[Rate],
    f: impl Fn(&str, Rate) -> String,
) {
    println!("\n{title}\n");
    print!("| receiver |");
    for r in rates {
        print!(" {} |", r.label());
    }
    println!();
    print!("|---|");
    for _ in rates {
        print!("---:|");
    }
    println!();
    for recv in receivers {
        print!("| {recv} |");
        for &r in rates {
            print!(" {} |", f(recv, r));
        }
        println!();
    }
}

/// Every cell as a line of CSV.
pub(super) fn write_csv(path: &Path, cells: &[Cell]) -> Result<()> {
    let mut s = String::from(
        "receiver,rate,offered_mbps,sent,delivered,success,kernel_drops,overflows,malformed,send_errors,cpu_seconds,cpu_seconds_per_gb,steal,reader_cpu_seconds_per_gb,workers_cpu_seconds_per_gb\n",
    );
    let opt = |c: &Cell, v: f64| c.threads.map_or(String::new(), |_| format!("{v:.4}"));
    for c in cells {
        s += &format!(
            "{},{},{:.3},{},{},{:.6},{},{},{},{},{:.4},{:.4},{},{},{}\n",
            c.receiver,
            c.rate.label(),
            c.offered_mbps,
            c.sent,
            c.delivered,
            c.success(),
            c.kernel_drops,
            c.overflows,
            c.malformed,
            c.send_errors,
            c.cpu_seconds,
            c.cpu_per_gb(),
            c.steal.map_or(String::new(), |s| format!("{s:.4}")),
            opt(c, c.reader_per_gb()),
            opt(c, c.workers_per_gb()),
        );
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

pub(super) fn plot(
    path: &Path,
    receivers: &[String],
    cells: &[Cell],
    h: &Harness,
) -> Result<(), fsdr_net_trace::plot::PlotError> {
    let series: Vec<Series> = receivers
        .iter()
        .map(|r| {
            let mut pts: Vec<(f64, f64)> = cells
                .iter()
                .filter(|c| &c.receiver == r)
                .map(|c| (c.offered_mbps, 100.0 * c.success()))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series::new(r.clone(), pts)
        })
        .collect();
    let mut chart = Chart::new(
        &format!(
            "Delivered vs offered rate ({} B {} datagrams, {} s each)",
            h.args.size,
            h.format.name(),
            h.args.seconds
        ),
        "offered rate (MB/s)",
        "delivered (%)",
    );
    chart.y_range = Some((0.0, 101.0));
    line_chart(path, &chart, &series)
}

#[cfg(test)]
mod tests {
    use super::super::{Reader, Threads};
    use super::*;

    #[test]
    fn rates_parse() {
        assert_eq!(Rate::parse("800").unwrap(), Rate::MBps(800.0));
        assert_eq!(Rate::parse(" unpaced").unwrap(), Rate::Unpaced);
        assert!(Rate::parse("-1").is_err());
        assert!(Rate::parse("fast").is_err());
    }

    #[test]
    fn success_and_cost() {
        let c = Cell {
            receiver: "x".into(),
            rate: Rate::MBps(100.0),
            offered_mbps: 100.0,
            sent: 1000,
            delivered: 999,
            kernel_drops: 1,
            overflows: 0,
            malformed: 0,
            send_errors: 0,
            cpu_seconds: 0.5,
            bytes: 2_000_000_000,
            received: Some(1000),
            recv_calls: Some(100),
            peeks: Some(0),
            wakeups: Some(10),
            paused: Some(0),
            copied_bytes: Some(2_000_000_000),
            steal: Some(0.05),
            threads: Some(Threads {
                receive: 0.3,
                workers: 0.15,
                main: 0.04,
                other: 0.01,
                reader: Reader::Receive,
            }),
            ratio: None,
            delivered_ratio: None,
            reader_ratio: None,
            ratio_rounds: 0,
            rounds: 1,
        };
        assert!((c.success() - 0.999).abs() < 1e-12);
        assert!(!c.lossless());
        assert!((c.cpu_per_gb() - 0.25).abs() < 1e-12);
        // By thread: the receive thread reads the socket; the workers' cost per hand-over.
        assert!((c.reader_per_gb() - 0.15).abs() < 1e-12);
        assert!((c.workers_per_gb() - 0.075).abs() < 1e-12);
        assert!((c.workers_per_wakeup_us().unwrap() - 15_000.0).abs() < 1e-6);
        let inline = Threads {
            receive: 0.0,
            reader: Reader::Main,
            ..c.threads.unwrap()
        };
        assert_eq!(inline.reader(), 0.04);
        // FutureSDR's own source reads on the workers: they count as the reader, not apart.
        let futuresdr = Threads {
            reader: Reader::Workers,
            ..c.threads.unwrap()
        };
        assert_eq!((futuresdr.reader(), futuresdr.workers_apart()), (0.15, 0.0));
        let parsed = Threads::parse(&serde_json::json!({
            "receive": 0.3, "workers": 0.15, "main": 0.04, "other": 0.01, "reader": "receive"
        }));
        assert_eq!(parsed, c.threads);
        assert_eq!(Threads::parse(&serde_json::Value::Null), None);
        assert_eq!(
            Threads::parse(&serde_json::json!({
                "receive": 0.3, "workers": 0.15, "main": 0.04, "other": 0.01, "reader": "gpu"
            })),
            None
        );

        // Ratios to the reference are taken round by round, then the median.
        let run = |offered: f64, cpu: f64| Cell {
            offered_mbps: offered,
            cpu_seconds: cpu,
            ..c.clone()
        };
        let runs = vec![run(100.0, 0.5), run(50.0, 1.0), run(90.0, 0.6)];
        let refs = vec![run(100.0, 0.4), run(100.0, 0.5), run(45.0, 0.3)];
        let m = Harness::median_cell(runs.clone(), Some(&refs), None);
        // Delivered rate: 1.0, 0.5, 2.0 → 1.0; CPU: 1.25, 2.0, 2.0 → 2.0.
        assert!((m.delivered_ratio.unwrap() - 1.0).abs() < 1e-12);
        assert!((m.ratio.unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(
            (m.ratio_rounds, m.rounds, m.kept_rounds()),
            (3, 3, String::new())
        );
        let alone = Harness::median_cell(vec![run(1.0, 1.0)], None, None);
        assert_eq!((alone.ratio, alone.delivered_ratio), (None, None));
        // No reference in the sweep: nothing was left out.
        let alone = Harness::median_cell(vec![run(1.0, 1.0)], None, Some(0.01));
        assert_eq!(alone.kept_rounds(), "");

        // --max-steal 10%: the second round's reference had 20% stolen, so that round's
        // ratios (2.0 and 0.5) are left out; of the rest, CPU 1.25 and 2.0 → 2.0 (the upper
        // median), delivered 1.0 and 2.0 → 2.0.
        let mut refs = refs;
        refs[1].steal = Some(0.2);
        let m = Harness::median_cell(runs.clone(), Some(&refs), Some(0.1));
        assert_eq!((m.ratio_rounds, m.rounds), (2, 3));
        assert_eq!(m.kept_rounds(), ", 2 of 3 rounds");
        assert!((m.ratio.unwrap() - 2.0).abs() < 1e-12);
        assert!((m.delivered_ratio.unwrap() - 2.0).abs() < 1e-12);
        // A stolen run of the receiver itself is not the one reported either.
        let mut stolen = runs;
        stolen[1].steal = Some(0.5);
        let m = Harness::median_cell(stolen, Some(&refs), Some(0.1));
        assert_ne!(m.steal, Some(0.5));
        assert_eq!(m.ratio_rounds, 2);
        // No calm round: no ratio, and the tables say so.
        let all_stolen: Vec<Cell> = refs
            .iter()
            .map(|r| Cell {
                steal: Some(0.3),
                ..r.clone()
            })
            .collect();
        let m = Harness::median_cell(all_stolen.clone(), Some(&all_stolen), Some(0.1));
        assert_eq!((m.ratio, m.ratio_rounds), (None, 0));
    }
}
