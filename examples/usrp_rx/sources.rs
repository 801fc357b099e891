//! `--channels N --source-per-channel`: one `UdpSource` per channel in one flowgraph, each on
//! its own port — how a USRP that streams each channel to its own `dest_port` (an N320's
//! pair, an X410's four) is received, against one `MultiUdpSource` that takes every channel
//! from one port. Channel c listens on the `--listen` port + c; without `--listen` one
//! emulator per channel streams to its source. The summary is the `--channels` one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use fsdr_net::io::emulator::{Emulator, EmulatorConfig, EmulatorReport, Faults};
use fsdr_net::io::{Format, Stats};
use fsdr_net::{MultiSourceStats, RampCheck, RampSample, SourceStats, StreamStats, UdpSource};
use futuresdr::runtime::Flowgraph;
use futuresdr::runtime::macros::connect;

use super::{Args, ChannelsOutcome, build, run_to_end};

/// Emulators started and not yet done.
static EMULATORS_RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Runs `emulator` on a thread of its own, on the `--emulator-cpus` when given.
pub(super) fn spawn_emulator(
    emulator: Emulator,
    args: &Args,
) -> std::thread::JoinHandle<Result<EmulatorReport, fsdr_net::io::Error>> {
    let cpus = args.emulator_cpus.clone();
    EMULATORS_RUNNING.fetch_add(1, Ordering::Relaxed);
    std::thread::spawn(move || {
        let report = if cpus.is_empty() {
            emulator.run()
        } else {
            fsdr_net_io::sys::sched::set_thread_cpus(&cpus)
                .map_err(fsdr_net::io::Error::from)
                .and_then(|()| emulator.run())
        };
        EMULATORS_RUNNING.fetch_sub(1, Ordering::Relaxed);
        report
    })
}

/// Whether a run started at `start` is to be stopped: a device's (`device`) after
/// `duration` seconds; with the emulators, whose stream ends the run by itself once it has
/// drained, only as a safety net 10 s after the later of `duration` and their end (an
/// emulator that cannot keep up takes longer than `duration` to send it).
pub(super) fn time_is_up(start: std::time::Instant, duration: f64, device: bool) -> bool {
    static LAST_SEEN_RUNNING: std::sync::Mutex<Option<std::time::Instant>> =
        std::sync::Mutex::new(None);
    let elapsed = start.elapsed().as_secs_f64();
    if device {
        return elapsed >= duration;
    }
    let mut seen = LAST_SEEN_RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    if EMULATORS_RUNNING.load(Ordering::Relaxed) > 0 {
        *seen = Some(std::time::Instant::now());
        return false;
    }
    let since_end = seen.map_or(elapsed, |t| t.elapsed().as_secs_f64());
    elapsed >= duration + 10.0 && since_end >= 10.0
}

/// The address channel `c` listens on: the `--listen` port + c, or any free port on
/// loopback for the emulator.
fn channel_addr(args: &Args, c: usize) -> Result<String> {
    match args.listen {
        None => Ok("127.0.0.1:0".to_string()),
        Some(a) => {
            let port = u16::try_from(usize::from(a.port()) + c)
                .ok()
                .filter(|_| a.port() != 0 || c == 0)
                .with_context(|| {
                    format!(
                        "--source-per-channel: channel {c} needs port {} + {c}",
                        a.port()
                    )
                })?;
            Ok(SocketAddr::new(a.ip(), port).to_string())
        }
    }
}

/// The counters of N sources as those of one `MultiUdpSource`: per channel its source's,
/// the engine's summed (the stream's span: the longest).
fn as_multi(per_source: Vec<(SocketAddr, SourceStats)>) -> MultiSourceStats {
    let engines: Vec<&Stats> = per_source.iter().map(|(_, s)| &s.engine).collect();
    let engine = Stats::from_fields(Stats::FIELDS.iter().map(|&(name, _)| {
        let values = engines
            .iter()
            .map(|e| e.fields().find(|(k, _)| *k == name).map_or(0, |(_, v)| v));
        let v = if name == "stream_ns" {
            values.max().unwrap_or(0)
        } else {
            values.sum()
        };
        (name, v)
    }))
    .expect("the engine's own field names");
    let streams = per_source
        .iter()
        .map(|(addr, s)| StreamStats {
            selector: addr.to_string(),
            datagrams: s.engine.delivered,
            missed: s.engine.missed,
            overflow: s.engine.overflow,
            stream: s.stream,
        })
        .collect();
    MultiSourceStats {
        engine,
        streams,
        skipped_by_stream: BTreeMap::new(),
    }
}

/// The reports of one emulator per channel as one report of an N-channel emulator.
fn merge_reports(reports: &[EmulatorReport]) -> Option<EmulatorReport> {
    let first = reports.first()?;
    let mut all = EmulatorReport {
        spp: first.spp,
        ..EmulatorReport::default()
    };
    for r in reports {
        all.packets_sent += r.packets_sent;
        all.samples_sent += r.samples_sent;
        all.dropped += r.dropped;
        all.dropped_samples += r.dropped_samples;
        all.reordered += r.reordered;
        all.duplicated += r.duplicated;
        all.restarts += r.restarts;
        all.send_errors += r.send_errors;
        all.context_sent += r.context_sent;
        all.seconds = all.seconds.max(r.seconds);
        // Per channel, as an N-channel emulator reports it.
        all.rate += r.rate / reports.len() as f64;
    }
    Some(all)
}

/// What the emulators sent: their reports merged, and the samples each channel's produced.
pub(super) struct Sent {
    pub(super) report: EmulatorReport,
    pub(super) per_channel: Vec<u64>,
}

/// Builds one source per channel, streams the emulators to them (without `--listen`), runs
/// the flowgraph and returns what it measured with what the emulators sent.
pub(super) fn run<T: RampSample>(
    args: &Args,
    format: Format,
    emulator: impl Fn(SocketAddr) -> EmulatorConfig,
    check: bool,
) -> Result<(ChannelsOutcome, Option<Sent>)> {
    let mut fg = Flowgraph::new();
    let mut chains = Vec::with_capacity(args.channels);
    let mut addrs = Vec::with_capacity(args.channels);
    for c in 0..args.channels {
        let src = build(
            UdpSource::<T>::builder(channel_addr(args, c)?),
            args,
            format,
        )
        .build()?;
        addrs.push(src.local_addr());
        let sink = RampCheck::<T>::new(check);
        connect!(fg, src > sink);
        chains.push((src, sink));
    }
    // One line once every socket is bound (scripts and tests wait for it).
    let list: Vec<String> = addrs.iter().map(SocketAddr::to_string).collect();
    eprintln!(
        "listening on {} (channels 0..{})",
        list.join(", "),
        addrs.len()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let senders = if args.listen.is_some() {
        Vec::new()
    } else {
        addrs
            .iter()
            .enumerate()
            .map(|(c, &dest)| {
                let mut cfg = emulator(dest);
                // --fault-channel c: the faults go to channel c's emulator only.
                match cfg.faults.channel {
                    Some(f) if f != c => cfg.faults = Faults::default(),
                    _ => cfg.faults.channel = None,
                }
                let e = Emulator::new(cfg).context("starting an emulator")?;
                let flag = e.stop_flag();
                let stop = stop.clone();
                let run = spawn_emulator(e, args);
                // One stop for all: each emulator's own flag follows the shared one.
                Ok(std::thread::spawn(move || {
                    while !run.is_finished() {
                        if stop.load(Ordering::Relaxed) {
                            flag.store(true, Ordering::Relaxed);
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    run.join().expect("emulator thread")
                }))
            })
            .collect::<Result<Vec<_>>>()?
    };
    let run = run_to_end(fg, args)?;
    let fg = &run.fg;
    stop.store(true, Ordering::Relaxed);
    let reports = senders
        .into_iter()
        .map(|t| t.join().expect("emulator supervisor"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut outputs = Vec::with_capacity(chains.len());
    let mut per_source = Vec::with_capacity(chains.len());
    for ((src, sink), addr) in chains.iter().zip(addrs) {
        let s = fg.block(sink)?;
        outputs.push((s.items(), s.discontinuities()));
        per_source.push((addr, fg.block(src)?.stats()));
    }
    let outcome = ChannelsOutcome {
        stats: as_multi(per_source),
        outputs,
        seconds: run.seconds,
        host_steal: run.host_steal,
        load: run.load,
    };
    let sent = merge_reports(&reports).map(|report| Sent {
        report,
        per_channel: reports
            .iter()
            .map(|r| r.samples_sent + r.dropped_samples)
            .collect(),
    });
    Ok((outcome, sent))
}
