//! Issue #32, item 1: `tx_sob`, `tx_eob` and `tx_time` tags drive `UdpSink` as they drive a
//! USRP's transmit streamer; a CHDR or VRT stream's last datagram ends its burst (CHDR's EOB
//! flag, VRT's trailer indicator); UHD's own CHDR header class and VRT unpacker read them;
//! a round trip through sink and source brings `rx_eob` and `rx_time` back on the same items.

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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
    /// Finish only once the receiving end counted every item (so that the sink sent them
    /// all before its input ended): the receiver's item count, shared.
    finish_late: Option<Arc<AtomicUsize>>,
    /// When the late finish gives up waiting (the test's asserts then say what was missing).
    give_up: Option<Instant>,
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
        self.sent += n;
        self.output.produce(n);
        if self.sent < self.items.len() {
            return Ok(());
        }
        match &self.finish_late {
            // A timer alone is not enough: FutureSDR calls `work` again on any notification
            // (the sink consuming, say), which cut a 1 s wait short in CI and let the sink see
            // its last items and the end together.
            Some(received)
                if received.load(Ordering::Acquire) < self.items.len()
                    && Instant::now() < *self.give_up.get_or_insert(Instant::now() + WAIT) =>
            {
                io.block_on(async {
                    futuresdr::runtime::Timer::after(Duration::from_millis(10)).await;
                });
            }
            _ => io.finished = true,
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
    /// The item count, shared with a [`Tagged`] that finishes late.
    received: Arc<AtomicUsize>,
}

/// How long a late-finishing [`Tagged`] waits for the receiver at most.
const WAIT: Duration = Duration::from_secs(30);

impl Collect {
    fn new() -> Self {
        Collect {
            input: DefaultCpuReader::default(),
            items: 0,
            tags: Vec::new(),
            received: Arc::new(AtomicUsize::new(0)),
        }
    }
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
        self.received.store(self.items, Ordering::Release);
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}

const N: usize = 1000;
/// Three bursts: 0..250 (ends at 249), 250..600 (starts at 250 with a time, ends at 599),
/// 600..1000 (ends at 999: tagged, so that the last datagram carries the end whenever the
/// sink learns that its input ended; `an_input_that_ends_late_still_ends_the_burst` takes
/// the tags away).
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
            (999, named(TAG_TX_EOB)),
        ],
        sent: 0,
        finish_late: None,
        give_up: None,
    }
}

/// The formats with an end of burst.
const FORMATS: [Format; 2] = [Format::Chdr, Format::Vrt];

/// Timestamp units a sample: CHDR's ticks at twice the sample rate, VRT's sample count.
fn ticks_per_item(format: Format) -> u64 {
    if format == Format::Vrt { 1 } else { 2 }
}

fn sink(to: std::net::SocketAddr, format: Format) -> UdpSink<Complex<i16>> {
    // 100 samples a datagram.
    UdpSink::<Complex<i16>>::builder(to)
        .format(format)
        .payload_bytes(400)
        .timestamps(0, ticks_per_item(format) as f64)
        .build()
        .unwrap()
}

fn run(fg: Flowgraph) -> Flowgraph {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    Runtime::new().run(fg).expect("flowgraph runs")
}

/// The sink's datagrams for [`tagged`]'s items.
fn capture(format: Format) -> Result<Vec<Vec<u8>>> {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut fg = Flowgraph::new();
    let src = tagged();
    let snk = sink(rx.local_addr().unwrap(), format);
    connect!(fg, src > snk);
    run(fg);
    let mut got = Vec::new();
    let mut b = vec![0u8; 9000];
    while let Ok(n) = rx.recv(&mut b) {
        got.push(b[..n].to_vec());
    }
    Ok(got)
}

/// (samples, end of burst, timestamp) of each datagram, as the bursts must come out: the
/// second burst starts at its `tx_time`, 100 000; the rest continues from there.
fn want(format: Format) -> Vec<(u32, bool, u64)> {
    let t = ticks_per_item(format);
    vec![
        (100, false, 0),
        (100, false, 100 * t),
        (50, true, 200 * t),
        (100, false, 100_000),
        (100, false, 100_000 + 100 * t),
        (100, false, 100_000 + 200 * t),
        (50, true, 100_000 + 300 * t),
        (100, false, 100_000 + 350 * t),
        (100, false, 100_000 + 450 * t),
        (100, false, 100_000 + 550 * t),
        (100, true, 100_000 + 650 * t),
    ]
}

#[test]
fn tags_cut_bursts_into_exact_datagrams_with_eob_and_time() -> Result<()> {
    for format in FORMATS {
        let datagrams = capture(format)?;
        let got: Vec<(u32, bool, u64)> = datagrams
            .iter()
            .map(|dg| {
                let info = format.parse(dg).unwrap();
                let ticks = info.timestamp.unwrap().ticks(1.0).unwrap();
                (info.payload_len / 4, info.eob, ticks)
            })
            .collect();
        assert_eq!(got, want(format), "{format}");
        // VRT: the trailer word is on the burst ends only.
        if format == Format::Vrt {
            let trailers: Vec<bool> = datagrams
                .iter()
                .map(|dg| fsdr_net::io::format::vrt::VrtPacket::new_checked(&dg[..]).unwrap())
                .map(|p| p.trailer().is_some())
                .collect();
            let eobs: Vec<bool> = want(format).iter().map(|w| w.1).collect();
            assert_eq!(trailers, eobs);
        }
    }
    Ok(())
}

/// Builds one of the UHD helpers of `tests/uhd/`, or says why not (a failure where
/// `FSDR_NET_REQUIRE_UHD` is set).
fn uhd_helper(name: &str, header: &str, libs: &[&str]) -> Result<Option<std::path::PathBuf>> {
    let required = std::env::var_os("FSDR_NET_REQUIRE_UHD").is_some();
    if !std::path::Path::new(header).exists() {
        assert!(
            !required,
            "FSDR_NET_REQUIRE_UHD is set but libuhd-dev is not installed"
        );
        eprintln!("skipped: UHD's headers (libuhd-dev) are not installed");
        return Ok(None);
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir)?;
    let exe = dir.join(name);
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/uhd")
        .join(format!("{name}.cpp"));
    let built = std::process::Command::new("g++")
        .args(["-std=c++17", "-O1", "-o"])
        .arg(&exe)
        .arg(src)
        .args(libs)
        .status()?;
    assert!(built.success(), "building the UHD helper {name}");
    Ok(Some(exe))
}

/// Runs a helper with one hex line per datagram (`take` bytes of each) on its input;
/// returns its output's lines split into numbers.
fn run_helper(exe: &std::path::Path, datagrams: &[Vec<u8>], take: usize) -> Result<Vec<Vec<u64>>> {
    let input: String = datagrams
        .iter()
        .map(|dg| {
            dg[..take.min(dg.len())]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
                + "\n"
        })
        .collect();
    let mut child = std::process::Command::new(exe)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    use std::io::Write;
    child.stdin.take().unwrap().write_all(input.as_bytes())?;
    let out = child.wait_with_output()?;
    assert!(out.status.success(), "{}", exe.display());
    Ok(String::from_utf8(out.stdout)?
        .lines()
        .map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect())
        .collect())
}

/// UHD's own VRT unpacker (libuhd) reads the burst ends from the trailer, and the same
/// lengths, packet counts and timestamps.
#[test]
fn uhd_reads_the_vrt_burst_ends_and_times_where_the_tags_put_them() -> Result<()> {
    let Some(exe) = uhd_helper(
        "uhd_vrt",
        "/usr/include/uhd/transport/vrt_if_packet.hpp",
        &["-luhd"],
    )?
    else {
        return Ok(());
    };
    let datagrams = capture(Format::Vrt)?;
    let uhd: Vec<(u32, bool, u64)> = run_helper(&exe, &datagrams, usize::MAX)?
        .iter()
        .enumerate()
        .map(|(k, f)| {
            // eob, packet count, payload bytes, has TSF, TSF, has trailer.
            assert_eq!(
                (f[1], f[3], f[5]),
                (k as u64 % 16, 1, f[0]),
                "datagram {k}: {f:?}"
            );
            ((f[2] / 4) as u32, f[0] == 1, f[4])
        })
        .collect();
    assert_eq!(uhd, want(Format::Vrt));
    Ok(())
}

/// UHD's own CHDR header class (libuhd-dev) reads the same burst ends, lengths, sequence
/// numbers and timestamps.
#[test]
fn uhd_reads_the_burst_ends_and_times_where_the_tags_put_them() -> Result<()> {
    let Some(exe) = uhd_helper("uhd_chdr", "/usr/include/uhd/rfnoc/chdr_types.hpp", &[])? else {
        return Ok(());
    };
    let datagrams = capture(Format::Chdr)?;
    let uhd: Vec<(u32, bool, u64)> = run_helper(&exe, &datagrams, 16)?
        .iter()
        .enumerate()
        .map(|(k, f)| {
            // eob, seq, length, timed, timestamp: a timed CHDR data packet has a 16-byte header.
            assert_eq!((f[1], f[3]), (k as u64, 1), "datagram {k}: {f:?}");
            assert_eq!(f[2] as usize, datagrams[k].len(), "datagram {k}: {f:?}");
            ((f[2] as u32 - 16) / 4, f[0] == 1, f[4])
        })
        .collect();
    assert_eq!(uhd, want(Format::Chdr));
    Ok(())
}

#[test]
fn a_round_trip_keeps_burst_ends_and_times_on_their_items() -> Result<()> {
    for format in FORMATS {
        let t = ticks_per_item(format) as f64;
        let source = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
            .format(format)
            .tick_rate(100e6 * t)
            .sample_rate(100e6) // as the sink stamps them
            .finish_after_idle(Duration::from_millis(500))
            .build()
            .unwrap();
        let to = source.local_addr();
        let mut fg = Flowgraph::new();
        let tx = tagged();
        let snk = sink(to, format);
        connect!(fg, tx > snk);
        let src = source;
        let col = Collect::new();
        connect!(fg, src > col);
        let fg = run(fg);
        let c = fg.block(&col).unwrap();
        assert_eq!(c.items, N, "{format}");
        let eobs: Vec<usize> = c
            .tags
            .iter()
            .filter(|(_, t)| matches!(t, Tag::NamedUsize(n, _) if n == TAG_EOB))
            .map(|&(i, _)| i)
            .collect();
        assert_eq!(eobs, [249, 599, 999], "{format}");
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
        assert_eq!(times, [(0, 0), (250, 100_000)], "{format}: {:?}", c.tags);
    }
    Ok(())
}

/// The input ends after its last items went out (a multiple of the datagram size): an empty
/// datagram then ends the burst, and the receiver counts the stream's end as seen.
#[test]
fn an_input_that_ends_late_still_ends_the_burst() -> Result<()> {
    for (format, late) in FORMATS.into_iter().flat_map(|f| [(f, false), (f, true)]) {
        let source = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
            .format(format)
            .time_tags(false)
            // The empty datagram follows the receiver's last items by a wake-up or two.
            .finish_after_idle(Duration::from_secs(1))
            .build()
            .unwrap();
        let mut tx = tagged();
        tx.tags.clear();
        let col = Collect::new();
        tx.finish_late = late.then(|| col.received.clone());
        let snk = sink(source.local_addr(), format);
        let mut fg = Flowgraph::new();
        connect!(fg, tx > snk);
        let src = source;
        connect!(fg, src > col);
        let fg = run(fg);
        let stats = fg.block(&src)?.stats();
        // Ten datagrams of 100 samples, and when the input ended late an empty one (also
        // when it ended at once but the sink learned of it only after the tenth went out:
        // FutureSDR tells a block that its input finished in a later call).
        let datagrams = fg.block(&snk)?.send_stats().datagrams;
        let want = if late { 11..=11 } else { 10..=11 };
        assert!(
            want.contains(&datagrams),
            "{format} late {late}: {datagrams}"
        );
        assert_eq!(fg.block(&col)?.items, N, "{format} late {late}");
        assert_eq!(stats.engine.malformed + stats.engine.missed, 0, "{stats:?}");
        assert_eq!(
            stats.stream.ended_with_end_of_burst(),
            Some(true),
            "{format} late {late}: {stats:?}"
        );
        assert_eq!(
            stats.stream.ends_of_burst, 1,
            "{format} late {late}: {stats:?}"
        );
    }
    Ok(())
}
