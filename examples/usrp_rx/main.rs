//! Receives a USRP remote stream (UHD ≥ 4.4: `dest_addr`, `dest_port`, `stream_mode`) into a
//! FutureSDR flowgraph `UdpSource → (sc16 → Complex<f32>) → sink` and says exactly what
//! arrived and what was lost. Without `--listen` it starts the built-in USRP emulator on
//! loopback (200 Msps, full_packet CHDR) in the same process. Its exit code says how a
//! capture failed (docs/json.md): 1 samples lost, 2 a bad command line, 3 nothing arrived,
//! 4 nothing in the format asked for, 5 a sender more than 1% short of the rate asked, 6
//! the stream's end lost uncounted.
//!
//! ```text
//! cargo run --release --example usrp_rx                       # emulator, 10 s, progress + summary
//! cargo run --release --example usrp_rx -- --duration 5 --json
//! cargo run --release --example usrp_rx -- --listen 0.0.0.0:49000 --mode full_packet
//! ```

#[path = "../common/mod.rs"]
mod common;
mod sources;
mod summary;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches};
use common::{
    ContextArgs, FaultArgs, Mode, SignalArg, format_for, parse_addr, parse_f64, parse_rate,
    usage_error,
};
use fsdr_net::io::StreamSelector;
use fsdr_net::io::emulator::{Emulator, EmulatorConfig, EmulatorReport, Signal, channel_stream_id};
use fsdr_net::io::{Backend, Format, WireFormat};
use fsdr_net::{
    MultiSourceStats, MultiUdpSource, ProbeSink, RampCheck, RampSample, SigmfItem, SigmfSink,
    SourceStats, UdpSource, UdpSourceBuilder,
};
use fsdr_net_io::diagnosis::{Load, LoadMeter};
use fsdr_net_io::host::CpuTimes;
use futuresdr::blocks::FileSink;
use futuresdr::runtime::Flowgraph;
use futuresdr::runtime::macros::connect;
use num_complex::{Complex, Complex32};

/// Receive a USRP remote stream (or the built-in emulator) and account for every sample.
#[derive(clap::Parser, Debug)]
#[command(allow_negative_numbers = true)]
struct Args {
    /// Receive from a real device on this address (`HOST:PORT`, a name or an IP address)
    /// instead of starting the emulator.
    #[arg(long, value_parser = parse_addr)]
    listen: Option<SocketAddr>,
    /// Receive backend (default: the source's choice — in place over `recvmmsg`, converting
    /// sc16 to Complex<f32> where each payload lands; the `mio` engine where in place cannot
    /// be, e.g. `--overload drop-newest`). The summary says which one received.
    #[arg(long)]
    backend: Option<Backend>,
    /// Mark every N-th sample with LTTng events (`fsdr_net:arrival` in the source with the
    /// datagram's arrival time, `fsdr_net:rx` in a probe sink beside the main sink), for
    /// network-arrival-to-sink latency (`cargo xtask latency --usrp`). Needs the `lttng`
    /// feature to record anything.
    #[arg(long)]
    probe: Option<u64>,
    /// raw_payload (samples only) or full_packet (CHDR).
    #[arg(long, value_enum, default_value = "full_packet")]
    mode: Mode,
    /// Other formats: vrt or seq64 (overrides --mode).
    #[arg(long)]
    format: Option<Format>,
    /// Sample rate (samples/s) of the emulator, and of the device for timestamps. Given with
    /// --listen, the rate asked of the device: a stream more than 1% slower fails (exit 5).
    #[arg(long, default_value = "200e6", value_parser = parse_rate)]
    rate: f64,
    /// Whether --rate was given on the command line.
    #[arg(skip)]
    rate_given: bool,
    /// Device tick rate (Hz).
    #[arg(long, default_value = "200e6", value_parser = parse_rate)]
    tick_rate: f64,
    /// Receive for this long (seconds).
    #[arg(long, default_value = "10", value_parser = parse_f64)]
    duration: f64,
    /// With --listen: stop after this much silence once data has arrived (seconds).
    #[arg(long, default_value = "2", value_parser = parse_f64)]
    idle_timeout: f64,
    /// Write the samples to this file (Complex<f32>, or sc16 with --wire): a SigMF recording
    /// (data and `.sigmf-meta`, gaps annotated) when it ends in `.sigmf-data`, raw otherwise.
    #[arg(long)]
    output: Option<std::path::PathBuf>,
    /// Keep samples as sc16 (Complex<i16>) instead of converting to Complex<f32>.
    #[arg(long)]
    wire: bool,
    /// Wire sample encoding (default: a USRP's: sc16_item32_be in VRT, sc16_chdr otherwise,
    /// raw_payload included): sc16_chdr, sc16_item32_le, sc16_item32_be, sc8_item32_le,
    /// sc8_item32_be, sc8_difi, fc32.
    #[arg(long)]
    wire_format: Option<WireFormat>,
    /// Print the summary as one JSON object (no progress line).
    #[arg(long)]
    json: bool,
    /// Emulator signal; with ramp the flowgraph checks every sample's continuity.
    #[arg(long, value_enum, default_value = "tone")]
    signal: SignalArg,
    /// Check ramp continuity (implied by --signal ramp; use with --listen and usrp_sim).
    #[arg(long)]
    check_ramp: bool,
    /// Insert zeros for missed packets.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    zero_fill: bool,
    /// Receive buffer to request (bytes; default the library's, 128 MiB).
    #[arg(long, default_value_t = fsdr_net::io::socket::DEFAULT_RECV_BUFFER)]
    recv_buffer: usize,
    /// Emulator fault injection.
    #[command(flatten)]
    faults: FaultArgs,
    /// Emulator context packets (VRT/DIFI).
    #[command(flatten)]
    context: ContextArgs,
    /// Streams on the port, one output each: channel c (0-based, as --fault-channel) is VRT
    /// stream ID c or CHDR destination endpoint c; the emulator sends that many channels.
    #[arg(long, default_value_t = 1, value_parser = common::parse_count)]
    channels: usize,
    /// With --channels: one `UdpSource` per channel in the flowgraph instead of one
    /// `MultiUdpSource`, channel c on its own port (the --listen port + c; without --listen,
    /// one emulator per channel), as a device that streams each channel to its own port.
    #[arg(long)]
    source_per_channel: bool,
    /// With --listen: the samples the device was asked for (UHD's `num_samps`). Samples lost
    /// at the end of the stream, where no later sequence number can show them, then count.
    #[arg(long, value_parser = common::parse_u64)]
    expect_samples: Option<u64>,
    /// Exit code on loss.
    #[command(flatten)]
    loss: common::loss::LossArgs,
    /// Multicast: --listen 239.x.y.z:PORT joins a group.
    #[command(flatten)]
    multicast: common::multicast::RxMulticastArgs,
    /// Run the built-in emulator on these CPUs (comma-separated), e.g. one beside `--cpus`
    /// (the rest of the process) that the receiver does not use, as a radio is another
    /// machine.
    #[arg(long, value_delimiter = ',')]
    emulator_cpus: Vec<usize>,
    /// Runtime and engine tuning.
    #[command(flatten)]
    tuning: common::TuningArgs,
}

/// What one run measured.
struct Outcome {
    /// The backend the source received with.
    backend: Option<Backend>,
    stats: SourceStats,
    items: u64,
    seconds: f64,
    discontinuities: Option<(u64, Option<u64>)>,
    /// Share of the machine's CPU time the hypervisor stole during the run.
    host_steal: Option<f64>,
    /// Where the machine's CPU time went during the run.
    load: Option<Load>,
}

fn build<T: RampSample>(
    b: UdpSourceBuilder<T>,
    args: &Args,
    format: Format,
) -> UdpSourceBuilder<T> {
    let mut b = match args.backend {
        Some(backend) => b.backend(backend),
        None => b,
    };
    b = b
        .format(format)
        .recv_buffer(args.recv_buffer)
        .zero_fill_missed(args.zero_fill)
        .tick_rate(if format == Format::Vrt {
            // VRT timestamps count samples.
            args.rate
        } else {
            args.tick_rate
        })
        .sample_rate(args.rate)
        .stats_interval(None);
    b = args
        .tuning
        .source(b)
        .configure(|c| args.multicast.apply_xdp(c));
    // Checked in main before anything starts.
    if let Ok(Some(group)) = args.multicast.group(args.listen) {
        b = b.multicast(group);
        if let Some(source) = args.multicast.source {
            b = b.multicast_source(source);
        }
    }
    // A USRP's (and the emulator's) samples: sc16, big-endian in VRT, little-endian
    // otherwise (also in raw_payload mode, which has no header to say so).
    b = b.wire_format(
        args.wire_format
            .unwrap_or_else(|| EmulatorConfig::default_wire(format)),
    );
    if let Some(g) = args.probe {
        b = b.probe(g);
    }
    // A device stream ends after --idle-timeout of silence; the in-process emulator's stream
    // ends when the emulator stops, and everything it sent is drained before the summary.
    let idle = if args.listen.is_some() {
        args.idle_timeout
    } else {
        0.5
    };
    b = b
        .finish_after_idle(common::seconds(idle))
        .first_datagram_within(common::seconds(args.duration));
    b
}

fn run_flowgraph<T: RampSample + SigmfItem>(
    src: UdpSource<T>,
    args: &Args,
    check: bool,
    expected_samples: Option<u64>,
) -> Result<Outcome> {
    let stats = src.stats_handle();
    let backend = src.backend().map(|(b, _)| b);
    let bytes_per_sample = src.bytes_per_item() as u64;
    let sink = RampCheck::<T>::new(check);
    let probe = src.probe_spec().map(ProbeSink::<T>::new);
    let mut fg = Flowgraph::new();
    connect!(fg, src > sink);
    if let Some(probe) = probe {
        connect!(fg, src > probe);
    }
    if let Some(path) = &args.output {
        let name = path.to_string_lossy();
        if name.ends_with(".sigmf-data") || name.ends_with(".sigmf-meta") {
            let hw = if args.listen.is_some() {
                "USRP"
            } else {
                "fsdr-net USRP emulator"
            };
            let format = format_for(args.mode, args.format);
            let mut rec = SigmfSink::<T>::builder(path)
                .sample_rate(args.rate)
                .hw(hw)
                .description(format!("usrp_rx, {format:?} stream"))
                // A USRP (and the emulator) ends a CHDR stream with an end of burst.
                .end_of_burst_ends(format == Format::Chdr);
            if let Some(n) = expected_samples {
                rec = rec.expected_samples(n);
            }
            let rec = rec.build()?;
            connect!(fg, src > rec);
        } else {
            let file = FileSink::<T>::new(path);
            connect!(fg, src > file);
        }
    }
    let start = Instant::now();
    let cpu_before = CpuTimes::now();
    let load = LoadMeter::start();
    let running = args.tuning.runtime().start(fg)?;
    let handle = running.handle();
    let done = Arc::new(AtomicBool::new(false));
    let stopper = {
        let handle = handle.clone();
        let done = done.clone();
        let limit = args.duration;
        let device = args.listen.is_some();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) && !sources::time_is_up(start, limit, device) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = futuresdr::futures::executor::block_on(handle.stop());
        })
    };
    {
        let handle = handle.clone();
        ctrlc::set_handler(move || {
            let _ = futuresdr::futures::executor::block_on(handle.stop());
        })?;
    }
    let progress = (!args.json).then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(200));
        let stats = stats.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut last = (Instant::now(), 0u64);
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                let s = stats.snapshot();
                let samples = s.delivered_bytes / bytes_per_sample;
                let now = Instant::now();
                let rate = (samples - last.1) as f64 / now.duration_since(last.0).as_secs_f64();
                last = (now, samples);
                bar.set_message(format!(
                    "{:7.1} Msps | samples {:>13} | missed {:>6} | kernel drops {:>6} | overflows {:>6}",
                    rate / 1e6,
                    samples,
                    s.missed,
                    s.kernel_drops,
                    s.overflow
                ));
            }
            bar.finish_and_clear();
        })
    });
    let fg = running.wait()?;
    done.store(true, Ordering::Relaxed);
    let _ = stopper.join();
    if let Some(p) = progress {
        let _ = p.join();
    }
    let src_block = fg.block(&src)?;
    let sink_block = fg.block(&sink)?;
    Ok(Outcome {
        backend,
        stats: src_block.stats(),
        items: sink_block.items(),
        seconds: start.elapsed().as_secs_f64(),
        discontinuities: check.then(|| {
            (
                sink_block.discontinuities(),
                sink_block.first_discontinuity(),
            )
        }),
        host_steal: cpu_before.and_then(|b| b.steal_to_now()),
        load: load.finish(),
    })
}

fn main() -> Result<()> {
    common::init_logging();
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let matches = Args::command().get_matches();
    let mut args = Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    args.rate_given = matches.value_source("rate") == Some(clap::parser::ValueSource::CommandLine);
    for (flag, cpus) in [
        ("--emulator-cpus", &args.emulator_cpus),
        ("--cpus", &args.tuning.cpus),
    ] {
        if let Err(e) = common::check_cpus(flag, cpus) {
            usage_error::<Args>(e);
        }
    }
    args.tuning.place()?;
    if let Err(e) = args
        .multicast
        .check(args.listen, args.backend == Some(Backend::Xdp))
    {
        usage_error::<Args>(format!("{e:#}"));
    }
    let format = format_for(args.mode, args.format);
    let bind = args
        .listen
        .map_or_else(|| "127.0.0.1:0".to_string(), |a| a.to_string());
    let signal: Signal = args.signal.into();
    let check = args.check_ramp || signal == Signal::Ramp;

    // The emulator's settings for a stream of `channels` channels to `dest`.
    let emulator_config = |dest: SocketAddr, channels: usize| {
        let mut cfg = EmulatorConfig::new(dest, format);
        cfg.rate = args.rate;
        cfg.tick_rate = args.tick_rate;
        cfg.duration = Some(common::seconds(args.duration));
        cfg.signal = signal;
        cfg.faults = args.faults.into();
        cfg.channels = channels;
        cfg.context = args.context.plan(args.rate);
        if let Some(w) = args.wire_format {
            cfg.wire = w;
        }
        cfg
    };
    let emulator_thread = std::sync::Mutex::new(None);
    let mut emulator_stop = None;
    let mut start_emulator = |dest: SocketAddr| -> Result<()> {
        if args.listen.is_some() {
            return Ok(());
        }
        let emulator =
            Emulator::new(emulator_config(dest, args.channels)).context("starting the emulator")?;
        emulator_stop = Some(emulator.stop_flag());
        *emulator_thread.lock().unwrap() = Some(sources::spawn_emulator(emulator, &args));
        Ok(())
    };

    if args.source_per_channel {
        if args.channels < 2 || args.output.is_some() || args.probe.is_some() {
            usage_error::<Args>(
                "--source-per-channel needs --channels 2 or more, without --output or --probe",
            );
        }
        // Each emulator sends one channel; --fault-channel picks whose faults apply.
        let per_emulator = |dest: SocketAddr| emulator_config(dest, 1);
        let (outcome, sent) = if args.wire {
            sources::run::<Complex<i16>>(&args, format, per_emulator, check)?
        } else {
            sources::run::<Complex32>(&args, format, per_emulator, check)?
        };
        let failure = summary::channels(
            &args,
            &outcome,
            sent.as_ref().map(|s| &s.report),
            sent.as_ref().map(|s| &s.per_channel[..]),
        );
        args.loss.exit_on(failure.as_ref(), "samples were");
        return Ok(());
    }
    if args.channels > 1 {
        if args.output.is_some() || args.probe.is_some() {
            usage_error::<Args>("--channels does not combine with --output or --probe");
        }
        let ids: Vec<StreamSelector> = (0..args.channels)
            .map(|c| StreamSelector::Id(channel_stream_id(format, c)))
            .collect();
        let per_channel = if args.wire {
            let src = build(UdpSource::<Complex<i16>>::builder(&bind), &args, format)
                .build_streams(ids)?;
            eprintln!("listening on {}", src.local_addr());
            start_emulator(src.local_addr())?;
            run_channels(src, &args, check)?
        } else {
            let src =
                build(UdpSource::<Complex32>::builder(&bind), &args, format).build_streams(ids)?;
            eprintln!("listening on {}", src.local_addr());
            start_emulator(src.local_addr())?;
            run_channels(src, &args, check)?
        };
        if let Some(stop) = emulator_stop {
            stop.store(true, Ordering::Relaxed);
        }
        let report: Option<EmulatorReport> = match emulator_thread.lock().unwrap().take() {
            Some(t) => Some(t.join().expect("emulator thread")?),
            None => None,
        };
        // One emulator sends every channel, the same number of samples each.
        let sent = report.as_ref().map(|r| {
            let n = args.channels as u64;
            vec![(r.samples_sent + r.dropped_samples) / n; args.channels]
        });
        let failure = summary::channels(&args, &per_channel, report.as_ref(), sent.as_deref());
        args.loss.exit_on(failure.as_ref(), "samples were");
        return Ok(());
    }

    // The stream's length, where known: the emulator's (paced, `--rate × --duration`), or
    // the device's `--expect-samples`.
    let expected_samples = match args.listen {
        Some(_) => args.expect_samples,
        None => emulator_config(bind.parse()?, 1).samples_to_send(),
    };
    let outcome = if args.wire {
        let src = build(UdpSource::<Complex<i16>>::builder(&bind), &args, format).build()?;
        let dest = src.local_addr();
        eprintln!("listening on {dest}");
        start_emulator(dest)?;
        run_flowgraph(src, &args, check, expected_samples)?
    } else {
        let src = build(UdpSource::<Complex32>::builder(&bind), &args, format).build()?;
        let dest = src.local_addr();
        eprintln!("listening on {dest}");
        start_emulator(dest)?;
        run_flowgraph(src, &args, check, expected_samples)?
    };
    if let Some(stop) = emulator_stop {
        stop.store(true, Ordering::Relaxed);
    }
    let report: Option<EmulatorReport> = match emulator_thread.lock().unwrap().take() {
        Some(t) => Some(t.join().expect("emulator thread")?),
        None => None,
    };
    let failure = summary::single(&args, format, &outcome, report.as_ref());
    args.loss.exit_on(failure.as_ref(), "samples were");
    Ok(())
}

/// What a multi-channel run measured.
struct ChannelsOutcome {
    stats: MultiSourceStats,
    /// Items and ramp discontinuities per output.
    outputs: Vec<(u64, u64)>,
    host_steal: Option<f64>,
    load: Option<Load>,
    seconds: f64,
}

/// `--channels N`: a `MultiUdpSource` with one ramp-checking sink per output.
fn run_channels<T: RampSample>(
    src: MultiUdpSource<T>,
    args: &Args,
    check: bool,
) -> Result<ChannelsOutcome> {
    let n = src.streams();
    let mut fg = Flowgraph::new();
    let src = fg.add(src);
    let mut sinks = Vec::with_capacity(n);
    for c in 0..n {
        let sink = fg.add(RampCheck::<T>::new(check));
        fg.stream(
            &src,
            move |b| b.outputs().get_mut(c).expect("an output per stream"),
            &sink,
            |b| b.input(),
        )?;
        sinks.push(sink);
    }
    let run = run_to_end(fg, args)?;
    let fg = &run.fg;
    let outputs = sinks
        .iter()
        .map(|s| {
            let s = fg.block(s)?;
            Ok((s.items(), s.discontinuities()))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ChannelsOutcome {
        stats: fg.block(&src)?.stats(),
        outputs,
        seconds: run.seconds,
        host_steal: run.host_steal,
        load: run.load,
    })
}

/// A multi-channel flowgraph after its run, with what the run measured besides its blocks.
struct Run {
    fg: Flowgraph,
    seconds: f64,
    host_steal: Option<f64>,
    load: Option<Load>,
}

/// Runs a multi-channel flowgraph to its end: stopped after --duration with --listen; with
/// the emulator it ends by itself and the timer (10 s later) is only a safety net.
fn run_to_end(fg: Flowgraph, args: &Args) -> Result<Run> {
    let start = Instant::now();
    let cpu_before = CpuTimes::now();
    let load = LoadMeter::start();
    let running = args.tuning.runtime().start(fg)?;
    let handle = running.handle();
    let (limit, device) = (args.duration, args.listen.is_some());
    let done = Arc::new(AtomicBool::new(false));
    let stopper = {
        let done = done.clone();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) && !sources::time_is_up(start, limit, device) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = futuresdr::futures::executor::block_on(handle.stop());
        })
    };
    let fg = running.wait()?;
    done.store(true, Ordering::Relaxed);
    let _ = stopper.join();
    Ok(Run {
        fg,
        seconds: start.elapsed().as_secs_f64(),
        host_steal: cpu_before.and_then(|b| b.steal_to_now()),
        load: load.finish(),
    })
}
