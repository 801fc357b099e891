//! Issue #67, item 2: bursts whose `tx_time` goes back, sent by `UdpSink` and received by
//! `UdpSource` in place (windows of its output), in place with UDP GRO and through the mio
//! engine. A device's time set back is a restart: every sample delivered once and in order,
//! nothing counted missed, late or duplicate, no `rx_missed` tag, and `rx_time` at the new
//! time.

use std::time::Duration;

use fsdr_net::prelude::*;
use futuresdr::runtime::macros::connect;
use futuresdr::runtime::{Flowgraph, Runtime};
use num_complex::Complex;

const N: usize = 1000;

/// How the source receives.
#[derive(Debug, Clone, Copy)]
enum Receiver {
    InPlace,
    InPlaceGro,
    Mio,
}

const RECEIVERS: [Receiver; 3] = [Receiver::InPlace, Receiver::InPlaceGro, Receiver::Mio];

/// Timestamp units a sample: CHDR's ticks at twice the sample rate, VRT's sample count.
fn ticks_per_item(format: Format) -> u64 {
    if format == Format::Vrt { 1 } else { 2 }
}

/// Bursts of the ramp `0..N` (item `i` carries `i`): each `(first item, tx_time)` starts one
/// (`None`: it goes on from the burst before), each ending before the next.
fn bursts(starts: &[(usize, Option<u64>)]) -> TagSource<Complex<i16>> {
    let named = |n: &str| Tag::NamedUsize(n.into(), 1);
    let mut tags = Vec::new();
    for (k, &(first, time)) in starts.iter().enumerate() {
        tags.push((first, named(TAG_TX_SOB)));
        if let Some(t) = time {
            tags.push((first, Tag::NamedUsize(TAG_TX_TIME.into(), t as usize)));
        }
        let end = starts.get(k + 1).map_or(N, |&(f, _)| f);
        tags.push((end - 1, named(TAG_TX_EOB)));
    }
    tags.sort_by_key(|&(i, _)| i);
    let items = (0..N)
        .map(|i| Complex::new(i as i16, -(i as i16)))
        .collect();
    TagSource::new(items, tags).expect("tags on items")
}

fn source(format: Format, receiver: Receiver) -> UdpSource<Complex<i16>> {
    let t = ticks_per_item(format) as f64;
    let b = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
        .format(format)
        .tick_rate(100e6 * t)
        .sample_rate(100e6)
        .finish_after_idle(Duration::from_millis(500));
    let b = match receiver {
        Receiver::InPlace => b,
        Receiver::InPlaceGro => b.udp_gro(true),
        Receiver::Mio => b.backend(Backend::Mio),
    };
    b.build().expect("a source")
}

/// Items, tags (at their items' indices) and the source's counters of a run.
type Received = (Vec<Complex<i16>>, Vec<(usize, Tag)>, SourceStats);

/// What `starts`' bursts give through `receiver`: items, tags, the source's counters.
fn round_trip(
    format: Format,
    receiver: Receiver,
    starts: &[(usize, Option<u64>)],
) -> anyhow::Result<Received> {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let src = source(format, receiver);
    let snk = UdpSink::<Complex<i16>>::builder(src.local_addr())
        .format(format)
        .payload_bytes(400) // 100 samples a datagram
        .timestamps(0, ticks_per_item(format) as f64)
        .build()
        .expect("a sink");
    let tx = bursts(starts);
    let col = TagSink::<Complex<i16>>::new();
    let mut fg = Flowgraph::new();
    connect!(fg, tx > snk);
    connect!(fg, src > col);
    let fg = Runtime::new().run(fg).expect("flowgraph runs");
    let stats = fg.block(&src).expect("source").stats();
    let col = fg.block(&col).expect("sink");
    Ok((col.items().to_vec(), col.tags().to_vec(), stats))
}

fn times(tags: &[(usize, Tag)]) -> Vec<(usize, u64)> {
    tags.iter()
        .filter_map(|(i, t)| match t {
            Tag::NamedAny(n, v) if n == TAG_TIME => {
                v.downcast_ref::<RxTime>().map(|r| (*i, r.ticks))
            }
            _ => None,
        })
        .collect()
}

/// Every sample once, in order; one restart; nothing missed, late or duplicate; no
/// `rx_missed`; `rx_time` at each burst's `tx_time`.
fn check(format: Format, starts: &[(usize, Option<u64>)]) {
    for receiver in RECEIVERS {
        let what = format!("{format}, {receiver:?}, bursts {starts:?}");
        let (items, tags, s) = round_trip(format, receiver, starts).expect("a run");
        let want: Vec<Complex<i16>> = (0..N)
            .map(|i| Complex::new(i as i16, -(i as i16)))
            .collect();
        assert!(
            items == want,
            "{what}: {} items, first wrong {:?}",
            items.len(),
            items.iter().zip(&want).position(|(a, b)| a != b)
        );
        let e = &s.engine;
        assert_eq!(
            (e.missed, e.late, e.duplicates, e.resyncs),
            (0, 0, 0, 1),
            "{what}: {e:?}"
        );
        assert!(
            !tags
                .iter()
                .any(|(_, t)| matches!(t, Tag::NamedUsize(n, _) if n == TAG_MISSED)),
            "{what}: {tags:?}"
        );
        let times = times(&tags);
        for &(first, time) in starts {
            if let Some(t) = time {
                assert!(times.contains(&(first, t)), "{what}: {times:?}");
            }
        }
    }
}

/// A burst at 1 000 000 ticks, one back at 500 000, a burst going on from it, then one at
/// 2 000 000 (CHDR and VRT).
#[test]
fn a_burst_back_in_time_is_a_restart_with_every_sample_delivered() {
    for format in [Format::Chdr, Format::Vrt] {
        check(
            format,
            &[
                (0, Some(1_000_000)),
                (300, Some(500_000)),
                (600, None),
                (900, Some(2_000_000)),
            ],
        );
    }
}

/// VRT: the second burst back at the first one's time (its stamps and counters then repeat
/// the first's), and a burst of 1 sample back in time.
#[test]
fn a_vrt_burst_back_to_an_earlier_burst_is_no_duplicate() {
    check(
        Format::Vrt,
        &[
            (0, Some(1_000_000)),
            (400, Some(1_000_000)),
            (900, Some(2_000_000)),
        ],
    );
    check(
        Format::Vrt,
        &[
            (0, Some(1_000_000)),
            (300, Some(1_000_100)),
            (301, Some(2_000_000)),
        ],
    );
}
