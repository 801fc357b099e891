//! What `usrp_rx` prints at the end: the summary (text, or one JSON object whose fields are
//! documented in docs/json.md and only ever added to), the sentences that say what happened
//! to lost samples, and how the capture failed, if it did, which decides the exit code.

use fsdr_net::io::emulator::EmulatorReport;
use fsdr_net::io::{Backend, Format};
use fsdr_net_io::diagnosis::Load;
use fsdr_net_io::host::Machine;

use super::common::loss::{Capture, Failure, arrived, sentence};
use super::{Args, ChannelsOutcome, Outcome};
use fsdr_net::io::diagnosis::explain;

/// Samples that never reached the flowgraph, as far as the receiver alone can tell: those of
/// the gaps the sequence numbers show, and those of datagrams lost where no later datagram
/// could reveal them (the end of the stream, or a format without sequence numbers),
/// estimated from the average datagram.
fn seen_lost_samples(o: &Outcome) -> u64 {
    let e = &o.stats.engine;
    let lost_datagrams = e.kernel_drops + e.overflow + e.truncated + e.malformed;
    let unseen = lost_datagrams.saturating_sub(e.missed);
    let per_datagram = (o.items - o.stats.stream.zeros_inserted) / e.delivered.max(1);
    o.stats.stream.missed_items + unseen * per_datagram
}

/// Samples per second over the stream's span (first to last arrival), which holds every
/// datagram but the last: the stream's rate, not diluted by the wait before the first
/// datagram or the idle time after the last.
fn stream_rate(received: u64, datagrams: u64, stream_seconds: f64) -> f64 {
    if datagrams < 2 || stream_seconds <= 0.0 {
        return 0.0;
    }
    received as f64 * (datagrams - 1) as f64 / datagrams as f64 / stream_seconds
}

/// With `--listen`: the sentence for a device whose stream contradicts the rates usrp_rx
/// was told — its timestamps did (`clock_dropped`), or it arrived faster than `--rate` by
/// more than 2% (no loss or pause makes a stream faster; a device at 250 Msps and 250 MHz
/// told 200 and 200 keeps the ratio its stamps show, but its time tags read them at the
/// wrong tick rate). `None` otherwise.
fn rates_told(args: &Args, clock_dropped: bool, rate: f64) -> Option<String> {
    let faster = rate > 1.02 * args.rate;
    (args.listen.is_some() && (clock_dropped || faster)).then(|| {
        format!(
            "the stream arrived at {:.2} Msps; usrp_rx was told --rate {:.2} Msps and \
             --tick-rate {:.2} MHz: pass the device's (its time tags read its ticks at \
             --tick-rate).",
            rate / 1e6,
            args.rate / 1e6,
            args.tick_rate / 1e6
        )
    })
}

/// The shortest stream whose span at the receiver tells its sender's rate to 1%: arrival
/// times jitter by the receive thread's scheduling (a millisecond is 1% of 0.1 s).
const RATE_SPAN: f64 = 1.0;

/// The rate asked of the sender, where one was: the emulator's, or with `--listen` a
/// `--rate` given on the command line (per channel).
fn rate_asked(args: &Args, emu: Option<&EmulatorReport>) -> Option<f64> {
    match emu {
        Some(r) => Some(r.rate_asked),
        None => args.rate_given.then_some(args.rate),
    }
}

/// The rate the sender sent at: the emulator's own count, or with `--listen` the samples
/// that arrived and those seen lost over the stream's span (`samples`, in `datagrams`),
/// when it lasted [`RATE_SPAN`] or more.
fn sender_rate(
    emu: Option<&EmulatorReport>,
    samples: u64,
    datagrams: u64,
    stream_seconds: f64,
) -> Option<f64> {
    match emu {
        Some(r) => Some(r.rate),
        None => (datagrams >= 2 && stream_seconds >= RATE_SPAN)
            .then(|| stream_rate(samples, datagrams, stream_seconds)),
    }
}

/// Who sent, in sentences.
fn sender(args: &Args) -> &'static str {
    if args.listen.is_some() {
        "the sender"
    } else {
        "the built-in emulator"
    }
}

fn print_load(load: Option<&Load>) {
    if let Some(l) = load {
        println!("{:<24} {l}", "machine CPU time");
    }
}

fn print_explanation(words: &[String]) {
    for (i, w) in words.iter().enumerate() {
        println!("{:<24} {w}", if i == 0 { "what happened" } else { "" });
    }
}

/// Prints the summary of a one-stream run; returns how the capture failed, if it did.
pub(super) fn single(
    args: &Args,
    format: Format,
    o: &Outcome,
    emu: Option<&EmulatorReport>,
) -> Option<Failure> {
    let s = &o.stats.engine;
    // What the source received with (as asked, or its own choice).
    let backend = o.backend.or(args.backend).unwrap_or(Backend::Mio);
    let zeros = o.stats.stream.zeros_inserted;
    let received = o.items - zeros;
    // Samples the sender produced: known from the emulator, or from --expect-samples; for a
    // device otherwise, what arrived plus every sample the receiver can tell did not.
    let sent = emu
        .map(|r| r.samples_sent + r.dropped_samples)
        .or(args.expect_samples.filter(|_| args.listen.is_some()));
    let seen = seen_lost_samples(o);
    let lost = sent.map_or(seen, |n| n.saturating_sub(received));
    // Lost where no sequence number could show it: after the last datagram that arrived.
    let unseen = sent.map(|_| lost.saturating_sub(o.stats.stream.missed_items));
    let success = received as f64 / sent.unwrap_or(received + lost).max(1) as f64;
    let stream_seconds = s.stream_seconds();
    let rate = stream_rate(received, s.delivered, stream_seconds);
    let (disc, first) = o.discontinuities.unwrap_or((0, None));
    let mut words = explain(s, emu.map_or(0, |r| r.dropped), o.load.as_ref());
    if let Some(n) = unseen.filter(|&n| n > 0) {
        words.push(format!(
            "{n} samples at the end of the stream did not arrive: no later sequence number \
             can show such a loss, only the known length of the stream."
        ));
    }
    // A USRP ends a stream it stops with an end of burst. A device stream that went quiet
    // (the run ended before --duration) without one lost its end, and no sequence number
    // can say how much of it.
    let ended = o.stats.stream.ended_with_end_of_burst();
    let went_quiet = args.listen.is_some() && o.seconds + 0.5 < args.duration;
    let end_lost = format == Format::Chdr
        && went_quiet
        && unseen.is_none()
        && ended != Some(true)
        && received > 0;
    if end_lost {
        words.push(
            "the stream went quiet without an end of burst: its last packets were lost, and \
             no sequence number can show how many (--expect-samples counts them)."
                .to_string(),
        );
    }
    let asked = rate_asked(args, emu);
    let sent_rate = asked.and_then(|a| {
        Some((
            sender_rate(emu, received + seen, s.delivered, stream_seconds)?,
            a,
        ))
    });
    let failure = args.loss.judge(&Capture {
        arrived: arrived(s),
        received,
        lost,
        end_lost,
        rate: sent_rate,
    });
    if let Some(w) = failure.as_ref().and_then(|f| sentence(f, sender(args))) {
        words.push(w);
    }
    if let Some(w) = rates_told(args, s.clock_dropped > 0, rate) {
        words.push(w);
    }
    if format == Format::Raw && lost > 0 {
        words.push(
            "raw_payload carries no sequence numbers: lost packets cannot be placed or \
             zero-filled (full_packet can)."
                .to_string(),
        );
    }
    if args.json {
        let json = serde_json::json!({
            "source": if args.listen.is_some() { "device" } else { "emulator" },
            "backend": backend.name(),
            "format": format.name(),
            "seconds": o.seconds,
            "sent": sent,
            "received": received,
            // The summary fields of the USRP issue, which scripts read at the top level
            // (the full counters are under `stats`).
            "missed": s.missed,
            "kernel_drops": s.kernel_drops,
            "overflows": s.overflow,
            "duplicates": s.duplicates,
            "late": s.late,
            "reordered": s.reordered,
            "resyncs": s.resyncs,
            "malformed": s.malformed,
            "truncated": s.truncated,
            "rejected": s.rejected,
            "datagrams": s.delivered,
            "missed_samples": o.stats.stream.missed_items,
            "lost_samples": lost,
            "success_rate": success,
            "rate_sps": rate,
            "discontinuities": o.discontinuities.map(|_| disc),
            "first_discontinuity": first,
            "stats": o.stats,
            "emulator": emu,
            "host_steal": o.host_steal,
            "stream_seconds": stream_seconds,
            "unseen_lost_samples": unseen,
            "load": o.load,
            "explanation": words,
            "ended_with_eob": ended,
            "machine": Machine::detect(),
            "rate_asked": asked,
            "sender_rate_sps": sent_rate.map(|r| r.0),
            "failure": failure.as_ref().map(Failure::name),
        });
        println!("{json}");
        return failure;
    }
    println!(
        "{:<24} {}",
        "source",
        if args.listen.is_some() {
            "device"
        } else {
            "built-in emulator"
        }
    );
    println!("{:<24} {} / {}", "backend / format", backend, format);
    println!(
        "{:<24} {:.2} s ({:.2} s from the first datagram to the last)",
        "duration", o.seconds, stream_seconds
    );
    if let Some(sent) = sent {
        println!("{:<24} {sent}", "samples sent");
    }
    if let Some(r) = emu {
        println!(
            "{:<24} {} (datagrams the kernel refused to send)",
            "emulator send errors", r.send_errors
        );
    }
    println!("{:<24} {received}", "samples received");
    println!(
        "{:<24} {:.2} Msps (the stream's)",
        "receive rate",
        rate / 1e6
    );
    if let Some((got, asked)) = sent_rate {
        println!(
            "{:<24} {:.2} Msps sent of {:.2} Msps asked",
            "sender rate",
            got / 1e6,
            asked / 1e6
        );
    }
    println!("{:<24} {:.6} %", "success rate", success * 100.0);
    println!(
        "{:<24} {} packets, {} samples ({} zero-filled); {} samples lost in all",
        "missed", s.missed, o.stats.stream.missed_items, zeros, lost
    );
    println!("{:<24} {}", "kernel drops", s.kernel_drops);
    println!("{:<24} {}", "overflows", s.overflow);
    println!(
        "{:<24} {}",
        "stream end",
        match ended {
            Some(true) => "seen (its last packet ended the burst)",
            Some(false) => "not seen (earlier bursts ended, the last did not)",
            None => "not marked (no packet ended a burst)",
        }
    );
    println!(
        "{:<24} {} / {} / {} / {}",
        "dup / late / reord / resync", s.duplicates, s.late, s.reordered, s.resyncs
    );
    println!(
        "{:<24} {} / {} / {}",
        "malformed / trunc / rej", s.malformed, s.truncated, s.rejected
    );
    if o.discontinuities.is_some() {
        println!(
            "{:<24} {disc} (first at sample {})",
            "ramp discontinuities",
            first.map_or("-".to_string(), |f| f.to_string())
        );
    }
    print_load(o.load.as_ref());
    print_explanation(&words);
    failure
}

/// Prints the summary of a `--channels` run; returns how the capture failed, if it did.
/// `sent_per_channel`: the samples each channel's sender produced, when known.
pub(super) fn channels(
    args: &Args,
    o: &ChannelsOutcome,
    emu: Option<&EmulatorReport>,
    sent_per_channel: Option<&[u64]>,
) -> Option<Failure> {
    // One figure for every channel when the channels were sent alike (one emulator).
    let sent =
        sent_per_channel.and_then(|v| v.first().copied().filter(|f| v.iter().all(|x| x == f)));
    let mut total = (0u64, 0u64, 0u64); // received, sent, lost
    let channels: Vec<serde_json::Value> = o
        .stats
        .streams
        .iter()
        .zip(&o.outputs)
        .enumerate()
        .map(|(c, (s, &(items, disc)))| {
            let received = items - s.stream.zeros_inserted;
            let channel_sent = sent_per_channel.and_then(|v| v.get(c).copied());
            let expected = channel_sent.unwrap_or(received + s.stream.missed_items);
            let lost = expected.saturating_sub(received);
            total = (total.0 + received, total.1 + expected, total.2 + lost);
            serde_json::json!({
                "stream": s.selector,
                "received": received,
                "missed": s.missed,
                "missed_samples": s.stream.missed_items,
                "zeros": s.stream.zeros_inserted,
                "success_rate": received as f64 / expected.max(1) as f64,
                "discontinuities": disc,
                "ended_with_eob": s.stream.ended_with_end_of_burst(),
                "overflow": s.overflow,
                "sent": channel_sent,
            })
        })
        .collect();
    let (received, expected, lost) = total;
    let e = &o.stats.engine;
    let missed: u64 = o.stats.streams.iter().map(|s| s.missed).sum();
    let mut words = explain(e, emu.map_or(0, |r| r.dropped), o.load.as_ref());
    for s in o.stats.streams.iter().filter(|s| s.overflow > 0) {
        words.push(format!(
            "{} datagrams of {} were dropped at the source and zero-filled because that \
             output's reader fell behind while the others were served (its backlog was full): \
             the blocks after it are too slow for this rate (more workers, cheaper blocks).",
            s.overflow, s.selector
        ));
    }
    let stream_seconds = e.stream_seconds();
    let channels_n = o.outputs.len().max(1) as f64;
    let per_channel = stream_rate(received, e.delivered, stream_seconds) / channels_n;
    if let Some(w) = rates_told(args, e.clock_dropped > 0, per_channel) {
        words.push(w.replacen("the stream arrived", "each channel arrived", 1));
    }
    // Per channel, as --rate is.
    let seen_missed: u64 = o.stats.streams.iter().map(|s| s.stream.missed_items).sum();
    let asked = rate_asked(args, emu);
    let sent_rate = asked.and_then(|a| {
        let got = sender_rate(emu, received + seen_missed, e.delivered, stream_seconds)?;
        // The emulator's rate is per channel already.
        Some((if emu.is_some() { got } else { got / channels_n }, a))
    });
    let failure = args.loss.judge(&Capture {
        arrived: arrived(e),
        received,
        lost,
        end_lost: false,
        rate: sent_rate,
    });
    if let Some(w) = failure.as_ref().and_then(|f| sentence(f, sender(args))) {
        words.push(w);
    }
    if args.json {
        let json = serde_json::json!({
            "seconds": o.seconds,
            "sent_per_channel": sent,
            "missed": missed,
            "kernel_drops": e.kernel_drops,
            "overflows": e.overflow,
            "channels": channels,
            "skipped_by_stream": o.stats.skipped_by_stream,
            "stats": o.stats.engine,
            "emulator": emu,
            "host_steal": o.host_steal,
            "sent": sent_per_channel.map(|_| expected),
            "received": received,
            "lost_samples": lost,
            "success_rate": received as f64 / expected.max(1) as f64,
            "rate_sps": stream_rate(received, e.delivered, stream_seconds),
            "stream_seconds": stream_seconds,
            "load": o.load,
            "explanation": words,
            "machine": Machine::detect(),
            "rate_asked": asked,
            "sender_rate_sps": sent_rate.map(|r| r.0),
            "failure": failure.as_ref().map(Failure::name),
        });
        println!("{json}");
        return failure;
    }
    println!(
        "{:<24} {:.2} s ({:.2} s from the first datagram to the last)",
        "duration", o.seconds, stream_seconds
    );
    if let Some((got, asked)) = sent_rate {
        println!(
            "{:<24} {:.2} Msps sent of {:.2} Msps asked (per channel)",
            "sender rate",
            got / 1e6,
            asked / 1e6
        );
    }
    if let Some(sent) = sent {
        println!("{:<24} {sent}", "samples sent / channel");
    } else if let Some(v) = sent_per_channel {
        println!("{:<24} {v:?}", "samples sent / channel");
    }
    for (c, ch) in channels.iter().enumerate() {
        println!("channel {c}: {ch}");
    }
    for (k, v) in &o.stats.skipped_by_stream {
        println!("{:<24} {v} datagrams of {k}", "skipped");
    }
    println!("{:<24} {}", "kernel drops", e.kernel_drops);
    println!("{:<24} {}", "overflows", e.overflow);
    print_load(o.load.as_ref());
    print_explanation(&words);
    failure
}
