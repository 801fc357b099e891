//! Issue #32, item 2: a DIFI-complete sender. `UdpSink` with VRT and a context sends DIFI
//! standard context packets (on start, on `tx_*` setting tags, every N data packets) and DIFI
//! 1.1 version packets with the data's stream ID; the `vita49` crate reads them as an
//! independent parser; UHD's VRT unpacker reads the data packets between them; a round trip
//! through `UdpSource` brings the settings back as `rx_*` tags on the same items.

use std::net::UdpSocket;
use std::time::Duration;

use fsdr_net::io::Format;
use fsdr_net::io::format::vrt::context::IfContext;
use fsdr_net::io::format::vrt::context::version::VersionInfo;
use fsdr_net::{UdpSink, UdpSource};
use futuresdr::runtime::dev::prelude::*;
use num_complex::Complex;
use vita49::PacketType;
use vita49::prelude::*;

/// Emits `n` items with a `tx_freq` tag on item `at` and a `tx_eob` on the last, then finishes.
#[derive(Block)]
struct Retune {
    #[output]
    output: DefaultCpuWriter<Complex<i16>>,
    sent: usize,
    n: usize,
    at: usize,
}

impl Retune {
    fn new(n: usize, at: usize) -> Self {
        Self {
            output: DefaultCpuWriter::default(),
            sent: 0,
            n,
            at,
        }
    }
}

impl Kernel for Retune {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (out, mut tags) = self.output.slice_with_tags();
        let n = out.len().min(self.n - self.sent);
        for (k, o) in out[..n].iter_mut().enumerate() {
            *o = Complex::new((self.sent + k) as i16, 0);
        }
        if (self.sent..self.sent + n).contains(&self.at) {
            tags.add_tag(
                self.at - self.sent,
                Tag::NamedAny("tx_freq".into(), Box::new(2e9f64)),
            );
        }
        // The stream's end as a tag: the last datagram carries it whenever the sink learns
        // that its input ended.
        if (self.sent..self.sent + n).contains(&(self.n - 1)) {
            tags.add_tag(
                self.n - 1 - self.sent,
                Tag::NamedUsize(fsdr_net::TAG_TX_EOB.into(), 1),
            );
        }
        self.sent += n;
        self.output.produce(n);
        io.finished = self.sent == self.n;
        Ok(())
    }
}

/// Collects items and the settings' tags (absolute indices).
#[derive(Block)]
struct Settings {
    #[input]
    input: DefaultCpuReader<Complex<i16>>,
    items: usize,
    tags: Vec<(usize, String, f64)>,
}

impl Kernel for Settings {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (items, tags) = self.input.slice_with_tags();
        for t in tags.iter() {
            if let Tag::NamedAny(name, v) = &t.tag
                && let Some(v) = v.downcast_ref::<f64>()
                && name.starts_with("rx_")
                && name != "rx_time"
            {
                self.tags.push((self.items + t.index, name.clone(), *v));
            }
        }
        let n = items.len();
        self.items += n;
        self.input.consume(n);
        io.finished = self.input.finished();
        Ok(())
    }
}

const N: usize = 1000;
const RETUNE_AT: usize = 450;
const STREAM: u32 = 3;
const VERSION: VersionInfo = VersionInfo {
    year: 2026,
    day: 329,
    revision: 2,
    kind: 1,
    icd_version: 0,
};

/// `ctx` with the fields DIFI requires besides the radio's settings: what a sender states of
/// its reference point, IF, reference level and timestamp calibration.
fn difi(ctx: IfContext) -> IfContext {
    IfContext {
        reference_point_id: Some(0),
        if_ref_freq_hz: Some(0.0),
        if_band_offset_hz: Some(0.0),
        reference_level_dbm: Some(-10.0),
        timestamp_adjustment_fs: Some(0),
        timestamp_cal_time: Some(0),
        ..ctx
    }
}

fn sink(to: std::net::SocketAddr) -> UdpSink<Complex<i16>> {
    // 100 samples a datagram, a sample count as the timestamp; repeat every 4 data packets.
    UdpSink::<Complex<i16>>::builder(to)
        .format(Format::Vrt)
        .payload_bytes(400)
        .timestamps(0, 1.0)
        .stream_id(STREAM)
        .context(difi(IfContext {
            sample_rate_sps: Some(1e6),
            rf_ref_freq_hz: Some(1e9),
            bandwidth_hz: Some(0.8e6),
            gain_db: Some((10.0, 0.0)),
            ..Default::default()
        }))
        .context_every(4)
        .difi_version(VERSION)
        .build()
        .unwrap()
}

fn run(fg: Flowgraph) -> Flowgraph {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    Runtime::new().run(fg).expect("flowgraph runs")
}

/// What one datagram is, as the `vita49` crate reads it.
#[derive(Debug, PartialEq)]
enum Seen {
    /// A standard context packet: RF frequency, change indicator, timestamp.
    Context(f64, bool, u64),
    /// A version packet: version and build code.
    Version(u32),
    /// A data packet: samples, first timestamp.
    Data(usize, u64),
}

fn read(dg: &[u8]) -> Seen {
    let p = Vrt::try_from(dg).expect("vita49 parses every datagram");
    assert_eq!(p.stream_id(), Some(STREAM));
    let ts = p.fractional_timestamp().expect("a sample-count timestamp");
    let class = p.class_id().expect("a class ID");
    assert_eq!(class.oui(), 0x6A_621E, "DIFI's OUI");
    match p.header().packet_type() {
        PacketType::Context => {
            assert_eq!(class.packet_class_code(), 1);
            let c = p.payload().context().unwrap();
            assert_eq!(c.sample_rate_sps(), Some(1e6));
            Seen::Context(c.rf_ref_freq_hz().unwrap(), c.context_changed(), ts)
        }
        PacketType::ExtensionContext => {
            assert_eq!(class.packet_class_code(), 4);
            let c = p.payload().context().unwrap();
            assert_eq!(c.v49_spec_compliance().copied(), Some(4));
            Seen::Version(*c.version_and_build_code().unwrap())
        }
        PacketType::SignalData => {
            let samples = p.payload().signal_data().unwrap().payload_size_bytes() / 4;
            Seen::Data(samples, ts)
        }
        t => panic!("unexpected packet type {t:?}"),
    }
}

#[test]
fn the_sink_sends_context_and_version_packets_that_vita49_reads() -> Result<()> {
    let rx = UdpSocket::bind("127.0.0.1:0")?;
    rx.set_read_timeout(Some(Duration::from_millis(500)))?;
    let mut fg = Flowgraph::new();
    let src = Retune::new(N, RETUNE_AT);
    let snk = sink(rx.local_addr()?);
    connect!(fg, src > snk);
    let fg = run(fg);
    assert_eq!(fg.block(&snk)?.context_sent(), 4);
    let mut got = Vec::new();
    let mut b = vec![0u8; 9000];
    while let Ok(n) = rx.recv(&mut b) {
        got.push(read(&b[..n]));
    }
    let code = VERSION.code().unwrap();
    use Seen::*;
    let want = vec![
        Context(1e9, true, 0),
        Version(code),
        Data(100, 0),
        Data(100, 100),
        Data(100, 200),
        Data(100, 300),
        // The repeat after 4 data packets.
        Context(1e9, false, 400),
        Version(code),
        // The retune cuts the datagram at its item; the new context applies from there.
        Data(50, 400),
        Context(2e9, true, 450),
        Data(100, 450),
        Data(100, 550),
        Data(100, 650),
        Data(100, 750),
        Context(2e9, false, 850),
        Version(code),
        Data(100, 850),
        Data(50, 950),
    ];
    assert_eq!(got, want);
    Ok(())
}

#[test]
fn a_round_trip_brings_the_settings_back_on_the_same_items() -> Result<()> {
    let source = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
        .format(Format::Vrt)
        .sample_rate(1e6)
        .tick_rate(1e6)
        .finish_after_idle(Duration::from_millis(500))
        .build()
        .unwrap();
    let mut fg = Flowgraph::new();
    let tx = Retune::new(N, RETUNE_AT);
    let snk = sink(source.local_addr());
    connect!(fg, tx > snk);
    let src = source;
    let col = Settings {
        input: DefaultCpuReader::default(),
        items: 0,
        tags: Vec::new(),
    };
    connect!(fg, src > col);
    let fg = run(fg);
    let c = fg.block(&col)?;
    assert_eq!(c.items, N);
    let mut at0: Vec<(String, f64)> = c
        .tags
        .iter()
        .filter(|t| t.0 == 0)
        .map(|t| (t.1.clone(), t.2))
        .collect();
    at0.sort_by(|a, b| a.0.cmp(&b.0));
    let want0 = [
        ("rx_bandwidth", 0.8e6),
        ("rx_freq", 1e9),
        ("rx_gain", 10.0),
        ("rx_rate", 1e6),
    ];
    assert_eq!(at0, want0.map(|(n, v)| (n.to_string(), v)), "{:?}", c.tags);
    let later: Vec<&(usize, String, f64)> = c.tags.iter().filter(|t| t.0 > 0).collect();
    assert_eq!(
        later,
        [&(RETUNE_AT, "rx_freq".to_string(), 2e9)],
        "only the retune, on its item: {:?}",
        c.tags
    );
    Ok(())
}

/// DIFI's timestamps: UTC seconds and picoseconds at 30.72 Msps (32 552.083… ps a sample).
const EPOCH: u32 = 1_700_000_000;
const RATE: u64 = 30_720_000;
const SPP: usize = 364;
const PACKETS: usize = 1000;

fn utc_sink(to: std::net::SocketAddr) -> UdpSink<Complex<i16>> {
    UdpSink::<Complex<i16>>::builder(to)
        .format(Format::Vrt)
        .payload_bytes(4 * SPP)
        .utc_timestamps(EPOCH, RATE)
        .sample_rate(RATE as f64) // paced: the test's socket has the default buffer
        .stream_id(STREAM)
        .context(difi(IfContext {
            sample_rate_sps: Some(RATE as f64),
            rf_ref_freq_hz: Some(1e9),
            bandwidth_hz: Some(0.8 * RATE as f64),
            gain_db: Some((0.0, 0.0)),
            ..Default::default()
        }))
        .build()
        .unwrap()
}

/// The exact time of sample `k`: (UTC seconds, picoseconds), rounded to the nearest ps.
fn utc_of(k: u64) -> (u32, u64) {
    let ps = (u128::from(k) * 1_000_000_000_000 + u128::from(RATE) / 2) / u128::from(RATE);
    let ps = ps as u64;
    (
        EPOCH + (ps / 1_000_000_000_000) as u32,
        ps % 1_000_000_000_000,
    )
}

#[test]
fn utc_timestamps_are_difis_and_exact_for_every_packet() -> Result<()> {
    // The receive buffer the sources use (forced as root), read while the flowgraph runs.
    let cfg = fsdr_net::io::socket::SocketConfig::new("127.0.0.1:0".parse()?);
    let rx: UdpSocket = fsdr_net::io::socket::open_socket(&cfg, false)?
        .socket
        .into();
    rx.set_nonblocking(false)?;
    rx.set_read_timeout(Some(Duration::from_millis(500)))?;
    let to = rx.local_addr()?;
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut b = vec![0u8; 9000];
        while let Ok(n) = rx.recv(&mut b) {
            got.push(b[..n].to_vec());
        }
        got
    });
    let mut fg = Flowgraph::new();
    let src = Retune::new(SPP * PACKETS, SPP * 500 + 100);
    let snk = utc_sink(to);
    connect!(fg, src > snk);
    run(fg);
    let mut sample = 0u64;
    let mut data = 0;
    let mut contexts = Vec::new();
    for dg in reader.join().unwrap() {
        let p = Vrt::try_from(&dg[..]).expect("vita49 parses it");
        assert_eq!(p.header().tsi(), vita49::Tsi::Utc);
        assert_eq!(p.header().tsf(), vita49::Tsf::RealTimePs);
        let at = (
            p.integer_timestamp().unwrap(),
            p.fractional_timestamp().unwrap(),
        );
        // Every packet is stamped with its first sample's exact time; context packets with
        // the time of the data packet after them.
        assert_eq!(at, utc_of(sample), "packet {data} (sample {sample})");
        match p.header().packet_type() {
            PacketType::Context => contexts.push(sample),
            PacketType::SignalData => {
                sample += p.payload().signal_data().unwrap().payload_size_bytes() as u64 / 4;
                data += 1;
            }
            t => panic!("unexpected {t:?}"),
        }
    }
    assert_eq!(sample, (SPP * PACKETS) as u64);
    assert_eq!(contexts, [0, (SPP * 500 + 100) as u64]);
    Ok(())
}

#[test]
fn a_difi_stream_with_utc_timestamps_round_trips_without_a_seam() -> Result<()> {
    let source = UdpSource::<Complex<i16>>::builder("127.0.0.1:0")
        .format(Format::Vrt)
        .sample_rate(RATE as f64)
        .finish_after_idle(Duration::from_millis(500))
        .build()
        .unwrap();
    let mut fg = Flowgraph::new();
    let at = SPP * 500 + 100;
    let tx = Retune::new(SPP * PACKETS, at);
    let snk = utc_sink(source.local_addr());
    connect!(fg, tx > snk);
    let src = source;
    let col = Settings {
        input: DefaultCpuReader::default(),
        items: 0,
        tags: Vec::new(),
    };
    connect!(fg, src > col);
    let fg = run(fg);
    let c = fg.block(&col)?;
    assert_eq!(c.items, SPP * PACKETS);
    let stats = fg.block(&src)?.stats();
    assert_eq!(
        (
            stats.engine.missed,
            stats.engine.ambiguous,
            stats.engine.resyncs
        ),
        (0, 0, 0),
        "{stats:?}"
    );
    let freq: Vec<(usize, f64)> = c
        .tags
        .iter()
        .filter(|t| t.1 == "rx_freq")
        .map(|t| (t.0, t.2))
        .collect();
    assert_eq!(freq, [(0, 1e9), (at, 2e9)], "{:?}", c.tags);
    Ok(())
}
