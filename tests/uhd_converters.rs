//! Sample decoding and encoding against UHD's own converters (Debian's `libuhd-dev`): a
//! helper built from `tests/uhd/uhd_vectors.cpp` runs UHD's `fc32 <-> <wire>` converters with
//! the scale factors UHD's streamers use, and every value fsdr-net produces must be bit for bit
//! UHD's. Then streams: UHD-encoded `sc16_item32_be` samples in DIFI/VRT packets through a
//! `UdpSource<Complex32>` come out as exactly UHD's fc32, and so do UHD's sc8 samples in a
//! DIFI sc8 stream; and `usrp_rx --listen … --format vrt --output FILE` writes UHD's fc32.
//!
//! Without UHD's headers the tests say so and pass, unless `FSDR_NET_REQUIRE_UHD` is set
//! (`cargo xtask test` sets it once it has installed `libuhd-dev`).

mod examples;

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use fsdr_net::io::format::DataHeader;
use fsdr_net::io::sample::{Decoder, Encoder, WireFormat};
use fsdr_net::prelude::*;
use futuresdr::blocks::VectorSink;
use futuresdr::num_complex::{Complex, Complex32};
use futuresdr::runtime::dev::prelude::*;

const FORMATS: [&str; 5] = [
    "sc16_item32_be",
    "sc16_item32_le",
    "sc8_item32_be",
    "sc8_item32_le",
    "sc16_chdr",
];

/// The folder with UHD's vectors, built and written once per test run.
fn vectors() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let required = std::env::var_os("FSDR_NET_REQUIRE_UHD").is_some();
        if !Path::new("/usr/include/uhd/convert.hpp").exists() {
            assert!(
                !required,
                "FSDR_NET_REQUIRE_UHD is set but libuhd-dev is not installed"
            );
            eprintln!("skipped: UHD's headers (libuhd-dev) are not installed");
            return None;
        }
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("uhd-vectors");
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("uhd_vectors");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/uhd/uhd_vectors.cpp");
        let built = Command::new("g++")
            .args(["-std=c++17", "-O1", "-o"])
            .arg(&exe)
            .arg(&src)
            .arg("-luhd")
            .status()
            .expect("g++ runs");
        assert!(built.success(), "building the UHD vector helper");
        let ran = Command::new(&exe)
            .arg(&dir)
            .output()
            .expect("the helper runs");
        assert!(ran.status.success(), "{ran:?}");
        Some(dir)
    })
    .as_deref()
}

fn read(dir: &Path, fmt: &str, what: &str) -> Vec<u8> {
    std::fs::read(dir.join(format!("{fmt}.{what}"))).unwrap()
}

fn complex(bytes: &[u8]) -> Vec<Complex32> {
    bytes
        .chunks_exact(8)
        .map(|c| {
            Complex32::new(
                f32::from_ne_bytes(c[..4].try_into().unwrap()),
                f32::from_ne_bytes(c[4..].try_into().unwrap()),
            )
        })
        .collect()
}

/// Bitwise equality of two sample vectors, with the first difference in the message.
fn assert_bits(got: &[Complex32], want: &[Complex32], ctx: &str) {
    assert_eq!(got.len(), want.len(), "{ctx}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.re.to_bits() == w.re.to_bits() && g.im.to_bits() == w.im.to_bits(),
            "{ctx}: sample {k}: fsdr-net {g} UHD {w}"
        );
    }
}

#[test]
fn decoders_and_encoders_are_bit_identical_to_uhds_converters() {
    let Some(dir) = vectors() else { return };
    for fmt in FORMATS {
        let wire: WireFormat = fmt.parse().unwrap();
        let dec = Decoder::<Complex32>::new(wire).unwrap();
        let input = read(dir, fmt, "dec_in");
        let want = complex(&read(dir, fmt, "dec_out"));
        let mut got = vec![Complex32::default(); want.len()];
        assert_eq!(dec.decode(&input, &mut got), want.len(), "{fmt}");
        assert_bits(&got, &want, &format!("{fmt} decode"));

        let enc = Encoder::<Complex32>::new(wire).unwrap();
        let samples = complex(&read(dir, fmt, "enc_in"));
        let want = read(dir, fmt, "enc_out");
        let mut got = vec![0u8; want.len()];
        enc.encode(&samples, &mut got);
        if let Some(k) = (0..want.len()).find(|&k| got[k] != want[k]) {
            panic!(
                "{fmt} encode: byte {k} (sample {}): fsdr-net {:#04x} UHD {:#04x}",
                k / enc.bytes_per_item(),
                got[k],
                want[k]
            );
        }
    }
}

/// Streams `payload` (wire bytes) in VRT data packets of `per_packet` bytes into a
/// `UdpSource<Complex32>` decoding `wire`; returns what came out.
fn through_source(payload: &[u8], per_packet: usize, wire: WireFormat) -> Result<Vec<Complex32>> {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let src = UdpSource::<Complex32>::builder("127.0.0.1:0")
        .format(Format::Vrt)
        .wire_format(wire)
        .sample_rate(1e6)
        .stats_interval(None)
        .finish_after_idle(Duration::from_millis(300))
        .first_datagram_within(Duration::from_secs(10))
        .build()
        .unwrap();
    let to = src.local_addr();
    let snk = VectorSink::<Complex32>::new(payload.len());
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk);
    let packets = vrt_packets(payload, per_packet, wire);
    send_later(packets, to);
    let fg = Runtime::new().run(fg)?;
    let s = fg.block(&src)?.stats();
    assert_eq!((s.missed, s.malformed), (0, 0), "{}", s.engine);
    Ok(fg.block(&snk)?.items().to_vec())
}

/// `payload` cut into VITA-49 data packets of `per_packet` bytes, with sequence numbers and
/// sample-count timestamps.
fn vrt_packets(payload: &[u8], per_packet: usize, wire: WireFormat) -> Vec<Vec<u8>> {
    let bytes_per_sample = match wire {
        WireFormat::Sc8Difi => 2,
        _ => 4,
    };
    payload
        .chunks(per_packet)
        .enumerate()
        .map(|(k, chunk)| {
            let header = Format::Vrt.header_len(true);
            let mut dg = vec![0u8; header + chunk.len()];
            let h = DataHeader {
                seq: k as u64,
                timestamp: Some((k * per_packet / bytes_per_sample) as u64),
                ..Default::default()
            };
            Format::Vrt.emit_header(&mut dg, &h).unwrap();
            dg[header..].copy_from_slice(chunk);
            dg
        })
        .collect()
}

/// Sends `packets` to `to` from another thread, 200 µs apart, after 200 ms.
fn send_later(packets: Vec<Vec<u8>>, to: std::net::SocketAddr) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for p in packets {
            tx.send_to(&p, to).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
    })
}

/// The README's main job as a device receiver: `usrp_rx --listen … --format vrt
/// --wire-format W --output F` with `payload` (wire bytes) sent in VRT packets of
/// `per_packet` bytes; returns the Complex<f32> it wrote.
fn through_usrp_rx(payload: &[u8], per_packet: usize, wire: WireFormat) -> Result<Vec<Complex32>> {
    use std::io::{BufRead, BufReader};
    let exe = examples::example("usrp_rx");
    let out = std::env::temp_dir().join(format!("fsdr-net-uhd-{}-{wire}.fc32", std::process::id()));
    let port = UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port();
    let listen = format!("127.0.0.1:{port}");
    let mut rx = Command::new(exe)
        .args(["--listen", &listen, "--format", "vrt", "--rate", "1e6"])
        .args(["--wire-format", &wire.to_string()])
        .args([
            "--duration",
            "30",
            "--idle-timeout",
            "0.5",
            "--json",
            "--output",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    // It says where it listens once the socket is bound.
    let mut err = BufReader::new(rx.stderr.take().expect("stderr"));
    let mut line = String::new();
    while !line.contains("listening on") {
        line.clear();
        assert!(
            err.read_line(&mut line)? > 0,
            "usrp_rx ended before listening"
        );
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    send_later(vrt_packets(payload, per_packet, wire), listen.parse()?)
        .join()
        .unwrap();
    let result = rx.wait_with_output()?;
    assert!(result.status.success(), "usrp_rx failed");
    let got = complex(&std::fs::read(&out)?);
    std::fs::remove_file(&out)?;
    Ok(got)
}

/// UHD's sc8 samples (its `sc8_item32_be` test words as integers) and UHD's fc32 of them.
fn uhd_sc8(dir: &Path) -> (Vec<Complex<i8>>, Vec<Complex32>) {
    let words = read(dir, "sc8_item32_be", "dec_in");
    let want = complex(&read(dir, "sc8_item32_be", "dec_out"));
    let d = Decoder::<Complex<i8>>::new(WireFormat::Sc8Item32Be).unwrap();
    let mut ints = vec![Complex::<i8>::default(); want.len()];
    d.decode(&words, &mut ints);
    (ints, want)
}

/// Samples laid out as DIFI sc8: I then Q, one byte each, in sample order.
fn difi_sc8(ints: &[Complex<i8>]) -> Vec<u8> {
    ints.iter().flat_map(|c| [c.re as u8, c.im as u8]).collect()
}

/// UHD's `sc16_item32_be` samples in VRT, and UHD's sc8 samples in DIFI sc8, through
/// `usrp_rx --format vrt`: exactly UHD's fc32.
#[test]
fn usrp_rx_writes_uhds_fc32_for_vrt_and_difi_streams() -> Result<()> {
    let Some(dir) = vectors() else {
        return Ok(());
    };
    let wire = read(dir, "sc16_item32_be", "dec_in");
    let want = complex(&read(dir, "sc16_item32_be", "dec_out"));
    let got = through_usrp_rx(&wire, 4 * 500, WireFormat::Sc16Item32Be)?;
    assert_bits(&got, &want, "usrp_rx --format vrt (sc16_item32_be)");

    let (ints, want) = uhd_sc8(dir);
    let got = through_usrp_rx(&difi_sc8(&ints), 2 * 1000, WireFormat::Sc8Difi)?;
    assert_bits(&got, &want, "usrp_rx --format vrt --wire-format sc8_difi");
    Ok(())
}

#[test]
fn a_difi_sc16_stream_of_uhds_samples_decodes_to_uhds_values() -> Result<()> {
    let Some(dir) = vectors() else {
        return Ok(());
    };
    // UHD's sc16_item32_be bytes are what a UHD VRT device and a DIFI sc16 stream carry.
    let wire = read(dir, "sc16_item32_be", "dec_in");
    let want = complex(&read(dir, "sc16_item32_be", "dec_out"));
    let got = through_source(&wire, 4 * 500, WireFormat::Sc16Item32Be)?;
    assert_bits(&got, &want, "VRT/DIFI sc16");
    Ok(())
}

#[test]
fn a_difi_sc8_stream_of_uhds_samples_decodes_to_uhds_values() -> Result<()> {
    let Some(dir) = vectors() else {
        return Ok(());
    };
    // UHD's sc8 samples (from its sc8_item32_be words), laid out as DIFI sc8.
    let (ints, want) = uhd_sc8(dir);
    // The integers are UHD's: scaled they are UHD's floats.
    for (k, (i, w)) in ints.iter().zip(&want).enumerate() {
        let s = fsdr_net::io::sample::SC8_SCALE;
        assert_eq!(
            (f32::from(i.re) * s, f32::from(i.im) * s),
            (w.re, w.im),
            "sample {k}"
        );
    }
    let got = through_source(&difi_sc8(&ints), 2 * 1000, WireFormat::Sc8Difi)?;
    assert_bits(&got, &want, "DIFI sc8");
    Ok(())
}
