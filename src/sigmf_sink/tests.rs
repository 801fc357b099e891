//! The sink's bookkeeping: capture segments at time jumps and retunes, rate changes.

use super::*;

fn tag(index: usize, tag: Tag) -> ItemTag {
    ItemTag { index, tag }
}

fn time(ticks: u64) -> Tag {
    let rx = RxTime {
        ticks,
        seconds: ticks as f64 / 200e6,
        tick_rate: 200e6,
    };
    Tag::NamedAny(TAG_TIME.into(), Box::new(rx))
}

#[test]
fn segments_start_at_time_jumps_and_retunes_only() {
    let dir = std::env::temp_dir().join(format!("fsdr-net-sigmf-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut sink = SigmfSink::<Complex<i16>>::builder(dir.join("r"))
        .sample_rate(10e6)
        .frequency(1e9)
        .build()
        .unwrap();
    let t0 = 1_767_225_600 * 200_000_000u64;
    // 20 ticks per sample: a tag at item 1000 that continues the stream is no segment.
    sink.note_tags(0, &[tag(0, time(t0)), tag(1000, time(t0 + 20_000))]);
    // A jump of one sample is.
    sink.note_tags(2000, &[tag(0, time(t0 + 40_020))]);
    // A retune starts one at its sample, with the extrapolated time.
    sink.note_tags(
        3000,
        &[tag(5, Tag::NamedAny("rx_freq".into(), Box::new(2e9)))],
    );
    let starts: Vec<(u64, Option<f64>, Option<u64>)> = sink
        .segments
        .iter()
        .map(|s| (s.start, s.frequency, s.time.map(|t| t.ticks)))
        .collect();
    assert_eq!(
        starts,
        [
            (0, Some(1e9), Some(t0)),
            (2000, Some(1e9), Some(t0 + 40_020)),
            (3005, Some(2e9), Some(t0 + 40_020 + 1005 * 20)),
        ]
    );
    let t = sink.segments[1].time.unwrap();
    assert_eq!(iso8601(t).as_deref(), Some("2026-01-01T00:00:00.0002001Z"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Review (first hour) item 4: a rate change from a context packet is not lost in the
/// recording: a capture segment starts there, an annotation says the new rate, and the
/// time after it is extrapolated at the new rate.
#[test]
fn a_rate_change_starts_a_segment_and_is_annotated() {
    let dir = std::env::temp_dir().join(format!("fsdr-net-sigmf-rate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut sink = SigmfSink::<Complex<i16>>::builder(dir.join("r"))
        .frequency(1e9)
        .build()
        .unwrap();
    let rate = |r: f64| Tag::NamedAny("rx_rate".into(), Box::new(r));
    let t0 = 1_767_225_600 * 200_000_000u64;
    sink.note_tags(0, &[tag(0, rate(10e6)), tag(0, time(t0))]);
    sink.note_tags(1000, &[tag(0, rate(5e6))]);
    assert_eq!(sink.info.sample_rate, Some(10e6));
    assert_eq!(sink.rate_changes, [(1000, 5e6)]);
    let starts: Vec<(u64, Option<u64>)> = sink
        .segments
        .iter()
        .map(|s| (s.start, s.time.map(|t| t.ticks)))
        .collect();
    // 20 ticks a sample before the change, 40 after.
    assert_eq!(starts, [(0, Some(t0)), (1000, Some(t0 + 20_000))]);
    let at = sink.expected_time(1500).unwrap().ticks;
    assert_eq!(at, t0 + 20_000 + 500 * 40);
    std::fs::remove_dir_all(&dir).unwrap();
}
