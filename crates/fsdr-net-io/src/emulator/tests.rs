//! The emulator sends what a device sends: sequence numbers, timestamps, channels, context
//! and faults exactly where asked.

use super::*;
use crate::seq::{SeqConfig, SeqEvent, SeqTracker};
use std::time::Duration;

fn capture(cfg: EmulatorConfig) -> (EmulatorReport, Vec<Vec<u8>>) {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut cfg = cfg;
    cfg.dest = rx.local_addr().unwrap();
    let report = Emulator::new(cfg).unwrap().run().unwrap();
    let mut got = Vec::new();
    let mut b = vec![0u8; 9000];
    while let Ok(n) = rx.recv(&mut b) {
        got.push(b[..n].to_vec());
    }
    (report, got)
}

#[test]
fn one_packet_per_call_with_faults_still_sends_the_whole_stream() {
    let mut c = base(Format::Seq64);
    c.rate = 1e6; // one packet per call
    assert_eq!(c.packets_per_call(), 1);
    c.faults.drop_every = Some(3);
    c.faults.reorder_every = Some(5);
    let (r, got) = capture(c);
    assert_eq!(r.packets_sent + r.dropped, 50, "{r:?}");
    assert_eq!(r.dropped, 16);
    assert_eq!(got.len() as u64, r.packets_sent);
}

#[test]
fn paced_bursts_follow_the_rate() {
    let mut c = base(Format::Chdr);
    c.spp = Some(1996); // 8000-byte packets
    c.rate = 200e6; // 800 MB/s: 100 µs hold 10 packets
    assert_eq!(c.packets_per_call(), 10);
    c.burst = Duration::ZERO;
    assert_eq!(c.packets_per_call(), 1);
    c.burst = Duration::from_micros(100);
    c.rate = 25e6; // 100 MB/s: one packet per call
    assert_eq!(c.packets_per_call(), 1);
    c.rate = 10e9;
    assert_eq!(c.packets_per_call(), 32);
    c.unpaced = true;
    assert_eq!(c.packets_per_call(), 32);
}

#[test]
fn tone_runs_continue_the_period_across_packets() {
    let mut cfg = base(Format::Raw);
    cfg.signal = Signal::Tone {
        cycles_per_sample: 0.01,
    };
    let emu = Emulator::new(cfg).unwrap();
    let period = emu.tone.len() as u64;
    for first in [0, 1, period - 1, period, 7 * period + 33] {
        let mut payload = vec![0u8; 4 * 250 + 3];
        emu.fill(first, &mut payload);
        for (k, s) in payload.chunks_exact(4).enumerate() {
            let want = emu.tone[((first + k as u64) % period) as usize];
            assert_eq!(s, want, "sample {k} after {first}");
        }
    }
}

fn base(format: Format) -> EmulatorConfig {
    let mut c = EmulatorConfig::new("127.0.0.1:9".parse().unwrap(), format);
    c.rate = 10e6;
    c.spp = Some(100);
    c.samples = Some(100 * 50);
    c.signal = Signal::Ramp;
    c.tick_rate = 20e6;
    c.start_ticks = 1000;
    c
}

#[test]
fn vrt_context_packets_go_before_their_data_packet() {
    use crate::format::PacketClass;
    use crate::format::vrt::context::{Difi, parse_context};
    let mut c = base(Format::Vrt);
    c.tick_rate = c.rate;
    c.start_ticks = 0;
    c.context = Some(ContextPlan {
        every: 20,
        rf_freq: 1e9,
        gain_db: 10.0,
        retune: Some((30, 5e6, 2e9)),
        difi: true,
    });
    let (r, got) = capture(c);
    assert_eq!(r.packets_sent, 50);
    // Before data packets 1, 21, 31 (the retune) and 41.
    assert_eq!(r.context_sent, 4, "{r:?}");
    assert_eq!(got.len(), 54);
    let mut data = 0u64;
    let mut seen = Vec::new();
    for dg in &got {
        match Format::Vrt.parse(dg).unwrap().class {
            PacketClass::Data => data += 1,
            PacketClass::Context => {
                let ctx = parse_context(dg).unwrap();
                assert_eq!(ctx.difi, Some(Difi::StandardContext { complete: true }));
                // Timestamped with the next data packet's first sample.
                assert_eq!(ctx.sample_count, Some(data * 100));
                seen.push((data, ctx.sample_rate_sps, ctx.rf_ref_freq_hz, ctx.changed));
            }
            PacketClass::NonData => panic!("unexpected packet"),
        }
    }
    assert_eq!(
        seen,
        [
            (0, Some(10e6), Some(1e9), true),
            (20, Some(10e6), Some(1e9), false),
            (30, Some(5e6), Some(2e9), true),
            (40, Some(5e6), Some(2e9), false),
        ]
    );
}

#[test]
fn chdr_sequence_and_timestamps_as_a_device_sends_them() {
    let (r, got) = capture(base(Format::Chdr));
    assert_eq!((r.packets_sent, r.samples_sent), (50, 5000));
    assert_eq!(got.len(), 50);
    for (k, dg) in got.iter().enumerate() {
        let info = Format::Chdr.parse(dg).unwrap();
        assert_eq!(info.seq, Some(k as u64));
        // Two ticks per sample: 100 samples = 200 ticks per packet.
        assert_eq!(
            info.timestamp.unwrap().ticks(20e6),
            Some(1000 + 200 * k as u64)
        );
        let p = &dg[info.payload()];
        let i = i16::from_le_bytes([p[0], p[1]]);
        let q = i16::from_le_bytes([p[2], p[3]]);
        assert_eq!(ramp_index(i, q), 100 * k as u32);
    }
}

#[test]
fn the_last_chdr_packet_ends_the_burst_however_the_stream_ends() {
    // By sample count.
    let (_, got) = capture(base(Format::Chdr));
    let eob: Vec<bool> = got
        .iter()
        .map(|dg| Format::Chdr.parse(dg).unwrap().eob)
        .collect();
    assert_eq!(eob.iter().filter(|&&e| e).count(), 1, "{eob:?}");
    assert!(eob[49]);
    // By duration, on every channel.
    let mut c = base(Format::Chdr);
    c.samples = None;
    c.duration = Some(Duration::from_millis(20));
    c.rate = 1e5; // 20 packets a channel: all fit the test socket's buffer
    c.channels = 2;
    let (r, got) = capture(c);
    let ends: Vec<u32> = got
        .iter()
        .map(|dg| Format::Chdr.parse(dg).unwrap())
        .filter(|i| i.eob)
        .map(|i| i.stream_id.unwrap())
        .collect();
    assert_eq!(got.len() as u64, r.packets_sent);
    assert_eq!(ends, [0, 1], "{r:?}");
    let last_two: Vec<bool> = got[got.len() - 2..]
        .iter()
        .map(|dg| Format::Chdr.parse(dg).unwrap().eob)
        .collect();
    assert_eq!(last_two, [true, true]);
}

#[test]
fn vrt_timestamps_count_samples_whatever_the_tick_rate() {
    // 20 MHz ticks, 10 Msps: start_ticks 1000 is sample 500; TSF counts samples.
    let (r, got) = capture(base(Format::Vrt));
    assert_eq!(r.packets_sent, 50);
    for (k, dg) in got.iter().enumerate() {
        let info = Format::Vrt.parse(dg).unwrap();
        assert_eq!(info.timestamp.unwrap().linear(), Some(500 + 100 * k as u64));
    }
}

#[test]
fn channels_interleave_with_their_own_ids_and_faults_stay_in_theirs() {
    let mut c = base(Format::Vrt);
    c.channels = 2;
    c.faults = Faults {
        drop_every: Some(10),
        reorder_every: Some(7),
        channel: Some(1),
        ..Faults::default()
    };
    let (r, got) = capture(c);
    assert_eq!(r.dropped, 5);
    assert_eq!(r.packets_sent, 95);
    let seqs = |id: u32| -> Vec<u64> {
        got.iter()
            .map(|dg| Format::Vrt.parse(dg).unwrap())
            .filter(|i| i.stream_id == Some(id))
            .map(|i| i.seq.unwrap())
            .collect()
    };
    // Channel 0 (stream 0) is whole and in order; channel 1 (stream 1) has its drops
    // and its reorders (VRT counts modulo 16).
    let s0 = seqs(0);
    assert_eq!(s0, (0..50).map(|k| k % 16).collect::<Vec<_>>());
    let s1 = seqs(1);
    assert_eq!(s1.len(), 45);
    assert_ne!(s1, (0..45).map(|k| k % 16).collect::<Vec<_>>());
    assert_eq!(got.len(), 95);
}

#[test]
fn channel_c_is_stream_id_c_in_every_format_with_stream_ids() {
    for format in [Format::Vrt, Format::Chdr] {
        for channels in [1usize, 3] {
            let mut c = base(format);
            c.channels = channels;
            let (_, got) = capture(c);
            let mut ids: Vec<u32> = got
                .iter()
                .filter_map(|dg| format.parse(dg).ok())
                .filter_map(|i| i.stream_id)
                .collect();
            ids.sort_unstable();
            ids.dedup();
            let expected: Vec<u32> = (0..channels)
                .map(|c| channel_stream_id(format, c))
                .collect();
            assert_eq!(ids, expected, "{format}, {channels} channels");
            assert_eq!(expected, (0..channels as u32).collect::<Vec<_>>());
        }
    }
}

#[test]
fn faults_happen_exactly_where_asked() {
    let mut c = base(Format::Seq64);
    // 51 packets: the last dropped one (50) has a successor, so it can be seen missing.
    c.samples = Some(100 * 51);
    c.faults = Faults {
        drop_every: Some(10),
        reorder_every: Some(7),
        duplicate_every: Some(9),
        restart_after: None,
        channel: None,
    };
    let (r, got) = capture(c);
    assert_eq!(r.dropped, 5); // packets 10, 20, 30, 40, 50
    assert_eq!(r.packets_sent, 46);
    assert_eq!(r.duplicated, 5); // 9, 18, 27, 36, 45
    assert_eq!(got.len() as u64, r.packets_sent + r.duplicated);
    let mut t = SeqTracker::new(SeqConfig::for_bits(64));
    let (mut missed, mut dup, mut late) = (0, 0, 0);
    for dg in &got {
        match t.observe(Format::Seq64.parse(dg).unwrap().seq.unwrap()) {
            SeqEvent::Gap { missed: m } => missed += m,
            SeqEvent::Duplicate => dup += 1,
            SeqEvent::Late => late += 1,
            _ => {}
        }
    }
    assert_eq!(dup, 5);
    assert!(late > 0 && late <= r.reordered);
    assert_eq!(missed - late, r.dropped);
}

#[test]
fn restart_starts_the_sequence_over_once() {
    let mut c = base(Format::Chdr);
    c.faults.restart_after = Some(20);
    let (r, got) = capture(c);
    assert_eq!(r.restarts, 1);
    let seqs: Vec<u64> = got
        .iter()
        .map(|d| Format::Chdr.parse(d).unwrap().seq.unwrap())
        .collect();
    let expected: Vec<u64> = (0..20).chain(0..30).collect();
    assert_eq!(seqs, expected);
}

#[test]
fn raw_payload_has_no_header_and_largest_packets_fit_8000_bytes() {
    let mut c = base(Format::Raw);
    c.spp = None;
    c.samples = Some(4000);
    let (r, got) = capture(c);
    assert_eq!(r.spp, 2000);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|d| d.len() == 8000));
    let c = EmulatorConfig::new("127.0.0.1:9".parse().unwrap(), Format::Chdr);
    assert_eq!(c.samples_per_packet(), 1996);
}

#[test]
fn packet_sizes_and_channel_counts_beyond_reason_are_errors() {
    let err = |f: fn(&mut EmulatorConfig)| {
        let mut cfg = base(Format::Chdr);
        f(&mut cfg);
        Emulator::new(cfg)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    for e in [
        err(|c| c.spp = Some(0)),
        err(|c| c.spp = Some(16_376)),
        err(|c| c.spp = Some(usize::MAX)),
    ] {
        assert!(e.contains("samples per packet"), "{e}");
    }
    for e in [
        err(|c| c.channels = MAX_CHANNELS + 1),
        err(|c| c.channels = usize::MAX),
    ] {
        assert!(e.contains("channels"), "{e}");
    }
    // The largest that fit are allowed.
    let mut cfg = base(Format::Chdr);
    cfg.spp = Some((65_507 - cfg.header_len()) / 4);
    cfg.channels = MAX_CHANNELS;
    assert!(Emulator::new(cfg).is_ok());
}

/// A radio sends its rate exactly: one second of stream is the rate's worth of samples,
/// from 1 Msps to 491.52 Msps (an X410's), counted, whatever the machine; the time it took
/// is never less than the samples' (the clock never runs ahead), and the report's verdict
/// agrees with the rate it got.
#[test]
fn one_paced_second_is_the_rates_worth_of_samples() {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for rate in [1e6, 10e6, 100e6, 200e6, 491.52e6] {
        let mut c = EmulatorConfig::new(rx.local_addr().unwrap(), Format::Chdr);
        c.rate = rate;
        c.duration = Some(Duration::from_secs(1));
        c.faults.drop_every = Some(7); // dropped packets take their time as sent ones do
        let r = Emulator::new(c).unwrap().run().unwrap();
        let produced = r.samples_sent + r.dropped_samples;
        eprintln!(
            "{:.2} Msps asked: {produced} samples in {:.4} s, {:.4} Msps, kept up {}, \
             most behind {:.1} ms",
            rate / 1e6,
            r.seconds,
            r.rate / 1e6,
            r.kept_up,
            r.behind_seconds * 1e3
        );
        assert_eq!(produced, rate as u64, "{rate}: {r:?}");
        assert!(r.seconds >= 1.0 && r.rate <= rate, "{rate}: {r:?}");
        assert_eq!(r.rate_asked, rate);
        assert_eq!(r.kept_up, r.rate >= KEPT_UP * rate, "{r:?}");
    }
}
