//! SigMF recordings: an emulated CHDR stream with three dropped packets, zero-filled by the
//! source and written by [`SigmfSink`], is a valid recording (the `wcsng-sigmf` validator,
//! and the SigMF Python library's when installed) with three `gap` annotations at the first
//! zero-filled sample of each gap, the samples exactly as sent, and a capture segment with the
//! device's frequency and time.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fsdr_net::SigmfSink;
use fsdr_net::io::emulator::{
    Emulator, EmulatorConfig, EmulatorReport, Faults, Signal, ramp_index,
};
use fsdr_net::prelude::*;
use futuresdr::num_complex::Complex;
use futuresdr::runtime::dev::prelude::{Flowgraph, Runtime, connect};
use sigmf::recording_file::Recording;
use sigmf::validation::ValidationPolicy;

const SPP: u64 = 500;
/// 35 packets with every 10th dropped: packets 10, 20 and 30 (1-based) are lost, each with
/// a successor that shows the gap.
const PACKETS: u64 = 35;
const DROP_EVERY: u64 = 10;
const TICK_RATE: f64 = 200e6;
const SAMPLE_RATE: f64 = 10e6;
/// 2026-01-01T00:00:00Z in device ticks.
const START_SECONDS: u64 = 1_767_225_600;

fn record(base: &Path) -> anyhow::Result<(EmulatorReport, SourceStats)> {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let src = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
        .format(Format::Chdr)
        .tick_rate(TICK_RATE)
        .sample_rate(SAMPLE_RATE)
        .zero_fill_missed(true)
        .stats_interval(None)
        .finish_after_idle(Duration::from_millis(300))
        .first_datagram_within(Duration::from_secs(10))
        .build()?;
    let rec = SigmfSink::<Complex<i16>>::builder(base)
        .sample_rate(SAMPLE_RATE)
        .frequency(2.45e9)
        .hw("fsdr-net USRP emulator")
        .description("three injected gaps")
        .build()?;
    let mut emu = EmulatorConfig::new(src.local_addr(), Format::Chdr);
    emu.rate = SAMPLE_RATE;
    emu.tick_rate = TICK_RATE;
    emu.start_ticks = START_SECONDS * TICK_RATE as u64;
    emu.spp = Some(SPP as usize);
    emu.samples = Some(PACKETS * SPP);
    emu.signal = Signal::Ramp;
    emu.faults = Faults {
        drop_every: Some(DROP_EVERY),
        ..Faults::default()
    };
    let mut fg = Flowgraph::new();
    connect!(fg, src > rec);
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        Emulator::new(emu).unwrap().run().unwrap()
    });
    let fg = Runtime::new().run(fg)?;
    let sent = sender.join().unwrap();
    let stats = fg.block(&src)?.stats();
    let rec = fg.block(&rec)?;
    assert_eq!(rec.outcome(), Some(&Ok(())));
    assert_eq!(rec.items(), PACKETS * SPP);
    Ok((sent, stats))
}

#[test]
fn a_recording_with_three_gaps_has_three_annotations_at_the_gaps() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("fsdr-net-sigmf-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let base = dir.join("capture");
    let (sent, stats) = record(&base)?;
    assert_eq!(sent.dropped, 3, "{sent:?}");
    assert_eq!(stats.missed, 3, "{}", stats.engine);

    // The library's validator, strict, on the file as written.
    let meta_path = dir.join("capture.sigmf-meta");
    let mut recording = Recording::open(&meta_path)?;
    let report = recording
        .metadata()
        .validate(ValidationPolicy::StrictSupportedVersion);
    assert!(report.is_valid(), "{report:?}");
    recording.verify_dataset_digest()?;
    assert_eq!(recording.frame_count()?, PACKETS * SPP);

    let meta = recording.metadata();
    let global = meta.global();
    assert_eq!(global.datatype.to_string(), "ci16_le");
    assert_eq!(global.sample_rate, Some(SAMPLE_RATE));
    // One annotation per gap, at the first zero-filled sample, as long as the gap.
    let gaps: Vec<(u64, Option<u64>, Option<String>)> = meta
        .annotations()
        .iter()
        .map(|a| (a.sample_start, a.sample_count, a.label.clone()))
        .collect();
    let expected: Vec<_> = [10, 20, 30]
        .iter()
        .map(|k| ((k - 1) * SPP, Some(SPP), Some("gap".to_string())))
        .collect();
    assert_eq!(gaps, expected);
    for a in meta.annotations() {
        let comment = a.comment.as_deref().unwrap_or_default();
        assert!(comment.starts_with("1 frames missed"), "{comment}");
    }
    // The stream's time never jumps (the gaps are zero-filled): one capture segment, with
    // the device's time of sample 0 and the frequency.
    let captures = meta.captures();
    assert_eq!(captures.len(), 1, "{captures:?}");
    assert_eq!(captures[0].sample_start, 0);
    assert_eq!(captures[0].frequency, Some(2.45e9));
    assert_eq!(
        captures[0].datetime.as_deref(),
        Some("2026-01-01T00:00:00Z")
    );

    // The samples: the ramp as sent, zeros where packets were dropped.
    let data = std::fs::read(dir.join("capture.sigmf-data"))?;
    let items: &[Complex<i16>] = bytemuck::cast_slice(&data);
    for (n, s) in items.iter().enumerate() {
        let packet = n as u64 / SPP + 1;
        if packet.is_multiple_of(DROP_EVERY) {
            assert_eq!((s.re, s.im), (0, 0), "sample {n}");
        } else {
            assert_eq!(ramp_index(s.re, s.im), n as u32, "sample {n}");
        }
    }

    python_validates(&meta_path);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The SigMF project's own Python library opens the recording (schema validation and the
/// sha512 of the data). Required when `FSDR_NET_REQUIRE_SIGMF` is set (as `cargo xtask
/// test` does after installing it), skipped with a note otherwise.
fn python_validates(meta: &Path) {
    let script = "import sys\nfrom sigmf import sigmffile\n\
                  f = sigmffile.fromfile(sys.argv[1])\n\
                  f.validate()\n\
                  print(len(f.get_annotations()), f.sample_count)";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(meta)
        .output();
    let required = std::env::var_os("FSDR_NET_REQUIRE_SIGMF").is_some();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            assert_eq!(text.trim(), format!("3 {}", PACKETS * SPP));
        }
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            if required || !err.contains("No module named 'sigmf'") {
                panic!("the SigMF Python library rejects the recording: {err}");
            }
            eprintln!("note: python3 has no sigmf module; skipped its validation");
        }
        Err(e) => {
            assert!(!required, "python3: {e}");
            eprintln!("note: no python3 ({e}); skipped the SigMF library's validation");
        }
    }
}
