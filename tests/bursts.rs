//! Issue #32, item 1: `tx_sob`, `tx_eob` and `tx_time` tags drive `UdpSink` as they drive a
//! USRP's transmit streamer; a CHDR stream's last datagram ends its burst; a round trip
//! through sink and source brings `rx_eob` and `rx_time` back on the same items.

use std::net::UdpSocket;
use std::time::Duration;

use fsdr_net::io::Format;
use fsdr_net::{
    RxTime, TAG_EOB, TAG_TIME, TAG_TX_EOB, TAG_TX_SOB, TAG_TX_TIME, UdpSink, UdpSource,
};
use futuresdr::runtime::dev::prelude::*;
use num_complex::Complex;

/// Emits its items with tags at the given (absolute) indices, then finishes.
#[derive(Block)]
struct Tagged {
    #[output]
    output: DefaultCpuWriter<Complex<i16>>,
    items: Vec<Complex<i16>>,
    tags: Vec<(usize, Tag)>,
    sent: usize,
    /// Finish only in the call after the last items went out.
    finish_late: bool,
}

impl Kernel for Tagged {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (out, mut tags) = self.output.slice_with_tags();
        let n = out.len().min(self.items.len() - self.sent);
        out[..n].copy_from_slice(&self.items[self.sent..self.sent + n]);
        for (i, t) in &self.tags {
            if (self.sent..self.sent + n).contains(i) {
                tags.add_tag(i - self.sent, t.clone());
            }
        }
        let done_before = self.sent == self.items.len();
        self.sent += n;
        self.output.produce(n);
        if self.sent == self.items.len() {
            if self.finish_late && !done_before {
                // Let the sink send everything before the input ends.
                io.block_on(async {
                    futuresdr::runtime::Timer::after(Duration::from_millis(100)).await;
                });
            } else {
                io.finished = true;
            }
        }
        Ok(())
    }
}

/// Collects items and tags (absolute indices).
#[derive(Block)]
struct Collect {
    #[input]
    input: DefaultCpuReader<Complex<i16>>,
    items: usize,
    tags: Vec<(usize, Tag)>,
}

impl Kernel for Collect {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (items, tags) = self.input.slice_with_tags();
        for t in tags.iter() {
            self.tags.push((self.items + t.index, t.tag.clone()));
        }
        let n = items.len();
        self.items += n;
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}

const N: usize = 1000;
/// Two bursts and an untagged rest: 0..250 (ends at 249), 250..600 (starts at 250 with a
/// time, ends at 599), 600..1000 (ended by the input's end).
fn tagged() -> Tagged {
    let named = |n: &str| Tag::NamedUsize(n.into(), 1);
    Tagged {
        output: DefaultCpuWriter::default(),
        items: (0..N)
            .map(|i| Complex::new(i as i16, -(i as i16)))
            .collect(),
        tags: vec![
            (0, named(TAG_TX_SOB)),
            (249, named(TAG_TX_EOB)),
            (250, named(TAG_TX_SOB)),
            (250, Tag::NamedUsize(TAG_TX_TIME.into(), 100_000)),
            (599, named(TAG_TX_EOB)),
        ],
        sent: 0,
        finish_late: false,
    }
}

fn sink(to: std::net::SocketAddr) -> UdpSink<Complex<i16>> {
    // 100 samples a datagram, two ticks a sample.
    UdpSink::<Complex<i16>>::builder(to)
        .format(Format::Chdr)
        .payload_bytes(400)
        .timestamps(0, 2.0)
        .build()
        .unwrap()
}

fn run(fg: Flowgraph) -> Flowgraph {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    Runtime::new().run(fg).expect("flowgraph runs")
}

/// The sink's datagrams for [`tagged`]'s items.
fn capture() -> Result<Vec<Vec<u8>>> {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut fg = Flowgraph::new();
    let src = tagged();
    let snk = sink(rx.local_addr().unwrap());
    connect!(fg, src > snk);
    run(fg);
    let mut got = Vec::new();
    let mut b = vec![0u8; 9000];
    while let Ok(n) = rx.recv(&mut b) {
        got.push(b[..n].to_vec());
    }
    Ok(got)
}

/// (samples, end of burst, timestamp) of each datagram, as the bursts must come out.
const WANT: [(u32, bool, u64); 11] = [
    (100, false, 0),
    (100, false, 200),
    (50, true, 400),
    (100, false, 100_000),
    (100, false, 100_200),
    (100, false, 100_400),
    (50, true, 100_600),
    (100, false, 100_700),
    (100, false, 100_900),
    (100, false, 101_100),
    (100, true, 101_300),
];

#[test]
fn tags_cut_bursts_into_exact_datagrams_with_eob_and_time() -> Result<()> {
    let got: Vec<(u32, bool, u64)> = capture()?
        .iter()
        .map(|dg| {
            let info = Format::Chdr.parse(dg).unwrap();
            let ticks = info.timestamp.unwrap().ticks(1.0).unwrap();
            (info.payload_len / 4, info.eob, ticks)
        })
        .collect();
    assert_eq!(got, WANT);
    Ok(())
}

/// UHD's own CHDR header class (libuhd-dev) reads the same burst ends, lengths, sequence
/// numbers and timestamps.
#[test]
fn uhd_reads_the_burst_ends_and_times_where_the_tags_put_them() -> Result<()> {
    let required = std::env::var_os("FSDR_NET_REQUIRE_UHD").is_some();
    if !std::path::Path::new("/usr/include/uhd/rfnoc/chdr_types.hpp").exists() {
        assert!(
            !required,
            "FSDR_NET_REQUIRE_UHD is set but libuhd-dev is not installed"
        );
        eprintln!("skipped: UHD's headers (libuhd-dev) are not installed");
        return Ok(());
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("uhd-chdr");
    std::fs::create_dir_all(&dir)?;
    let exe = dir.join("uhd_chdr");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/uhd/uhd_chdr.cpp");
    let built = std::process::Command::new("g++")
        .args(["-std=c++17", "-O1", "-o"])
        .arg(&exe)
        .arg(src)
        .status()?;
    assert!(built.success(), "building the UHD CHDR helper");
    let datagrams = capture()?;
    let input: String = datagrams
        .iter()
        .map(|dg| {
            dg[..16]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
                + "\n"
        })
        .collect();
    let mut child = std::process::Command::new(&exe)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    use std::io::Write;
    child.stdin.take().unwrap().write_all(input.as_bytes())?;
    let out = child.wait_with_output()?;
    assert!(out.status.success());
    let uhd: Vec<(u32, bool, u64)> = String::from_utf8(out.stdout)?
        .lines()
        .enumerate()
        .map(|(k, l)| {
            let f: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
            // eob, seq, length, timed, timestamp: a timed CHDR data packet has a 16-byte header.
            assert_eq!((f[1], f[3]), (k as u64, 1), "datagram {k}: {l}");
            assert_eq!(f[2] as usize, datagrams[k].len(), "datagram {k}: {l}");
            ((f[2] as u32 - 16) / 4, f[0] == 1, f[4])
        })
        .collect();
    assert_eq!(uhd, WANT);
    Ok(())
}

#[test]
fn a_round_trip_keeps_burst_ends_and_times_on_their_items() -> Result<()> {
    let source = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
        .format(Format::Chdr)
        .tick_rate(200e6)
        .sample_rate(100e6) // two ticks a sample, as the sink stamps them
        .finish_after_idle(Duration::from_millis(500))
        .build()
        .unwrap();
    let to = source.local_addr();
    let mut fg = Flowgraph::new();
    let tx = tagged();
    let snk = sink(to);
    connect!(fg, tx > snk);
    let src = source;
    let col = Collect {
        input: DefaultCpuReader::default(),
        items: 0,
        tags: Vec::new(),
    };
    connect!(fg, src > col);
    let fg = run(fg);
    let c = fg.block(&col).unwrap();
    assert_eq!(c.items, N);
    let eobs: Vec<usize> = c
        .tags
        .iter()
        .filter(|(_, t)| matches!(t, Tag::NamedUsize(n, _) if n == TAG_EOB))
        .map(|&(i, _)| i)
        .collect();
    assert_eq!(eobs, [249, 599, 999]);
    let times: Vec<(usize, u64)> = c
        .tags
        .iter()
        .filter_map(|(i, t)| match t {
            Tag::NamedAny(n, v) if n == TAG_TIME => {
                v.downcast_ref::<RxTime>().map(|r| (*i, r.ticks))
            }
            _ => None,
        })
        .collect();
    assert_eq!(times, [(0, 0), (250, 100_000)], "{:?}", c.tags);
    Ok(())
}

/// The input ends after its last items went out (a multiple of the datagram size): an empty
/// datagram then ends the burst, and the receiver counts the stream's end as seen.
#[test]
fn an_input_that_ends_late_still_ends_the_burst() -> Result<()> {
    for late in [false, true] {
        let source = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
            .format(Format::Chdr)
            .time_tags(false)
            .finish_after_idle(Duration::from_millis(500))
            .build()
            .unwrap();
        let mut tx = tagged();
        tx.tags.clear();
        tx.finish_late = late;
        let snk = sink(source.local_addr());
        let mut fg = Flowgraph::new();
        connect!(fg, tx > snk);
        let src = source;
        let col = Collect {
            input: DefaultCpuReader::default(),
            items: 0,
            tags: Vec::new(),
        };
        connect!(fg, src > col);
        let fg = run(fg);
        let stats = fg.block(&src)?.stats();
        // Ten datagrams of 100 samples, and when the input ended late an empty one.
        let datagrams = fg.block(&snk)?.send_stats().datagrams;
        assert_eq!(datagrams, 10 + u64::from(late), "late {late}");
        assert_eq!(fg.block(&col)?.items, N, "late {late}");
        assert_eq!(stats.engine.malformed + stats.engine.missed, 0, "{stats:?}");
        assert_eq!(
            stats.stream.ended_with_end_of_burst(),
            Some(true),
            "late {late}: {stats:?}"
        );
        assert_eq!(stats.stream.ends_of_burst, 1, "late {late}: {stats:?}");
    }
    Ok(())
}
