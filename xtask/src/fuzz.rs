//! The fuzz targets (`fuzz/fuzz_targets`): their seed corpus of valid packets emitted by
//! `fsdr-net-io`, `cargo xtask fuzz`, and the short fixed-seed run in `cargo xtask test`.

use anyhow::{Result, bail};

use crate::{cargo, report};

/// Seconds each fuzz target runs in `cargo xtask test`.
pub const SECONDS_IN_TEST: u64 = 10;

/// The fuzz targets (see `fuzz/fuzz_targets`).
const TARGETS: &[&str] = &[
    "seq64",
    "chdr",
    "vrt",
    "seq_tracker",
    "seq_books",
    "cmsg",
    "depacketizer",
    "vrt_context",
];

/// Valid packets for a target's seed corpus, emitted by the crate under test.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    use fsdr_net_io::{DataHeader, Format};
    let emit = |format: Format, len: usize, seq: u64, timestamp: Option<u64>| {
        let mut dg = vec![0u8; len];
        let fields = DataHeader {
            seq,
            timestamp,
            ..Default::default()
        };
        format.emit_header(&mut dg, &fields).map(|_| dg).ok()
    };
    let mut out = Vec::new();
    match target {
        "seq64" => {
            for len in [8, 9, 100, 1472, 8000] {
                out.extend(emit(Format::Seq64, len, len as u64, None));
            }
            for len in [16, 17, 1000] {
                out.extend(emit(Format::SeqPlusSize, len, 7, None));
            }
        }
        "chdr" => {
            for (len, ts) in [(8, None), (16, Some(5)), (64, None), (8000, Some(1 << 40))] {
                out.extend(emit(Format::Chdr, len, 65535, ts));
            }
            // With two metadata words.
            if let Some(mut dg) = emit(Format::Chdr, 48, 3, Some(9)) {
                dg[6] |= 2;
                out.push(dg);
            }
        }
        "vrt" => {
            for (len, ts) in [(16, None), (24, Some(1)), (1000, None), (8000, Some(77))] {
                out.extend(emit(Format::Vrt, len, 15, ts));
            }
        }
        "cmsg" => {
            use fsdr_net_io::sys::cmsg::write_cmsg;
            let mut buf = [0u8; 128];
            let mut at = 0;
            at += write_cmsg(
                &mut buf[at..],
                libc::SOL_SOCKET,
                libc::SO_RXQ_OVFL,
                &7u32.to_ne_bytes(),
            )
            .unwrap_or(0);
            let ts: Vec<u8> = [3i64, 5].iter().flat_map(|v| v.to_ne_bytes()).collect();
            at += write_cmsg(&mut buf[at..], libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts)
                .unwrap_or(0);
            at += write_cmsg(
                &mut buf[at..],
                libc::SOL_UDP,
                libc::UDP_GRO,
                &1472i32.to_ne_bytes(),
            )
            .unwrap_or(0);
            out.push(buf[..at].to_vec());
        }
        "vrt_context" => {
            use fsdr_net_io::format::vrt::DIFI_OUI;
            use fsdr_net_io::format::vrt::context::{
                DIFI_CONTEXT_CLASS, DIFI_INFO_CLASS, IfContext, emit_context,
            };
            let plain = IfContext {
                stream_id: Some(1),
                sample_rate_sps: Some(10e6),
                rf_ref_freq_hz: Some(2.4e9),
                gain_db: Some((20.0, 0.0)),
                ..IfContext::default()
            };
            let difi = IfContext {
                class_id: Some((DIFI_OUI, DIFI_INFO_CLASS, DIFI_CONTEXT_CLASS)),
                changed: true,
                reference_point_id: Some(0),
                bandwidth_hz: Some(8e6),
                if_ref_freq_hz: Some(0.0),
                if_band_offset_hz: Some(0.0),
                reference_level_dbm: Some(0.0),
                timestamp_adjustment_fs: Some(0),
                timestamp_cal_time: Some(0),
                state_indicators: Some(0),
                payload_format: Some(0xA000_03CF_0000_0000),
                ..plain.clone()
            };
            out.extend(emit_context(&plain, 1, None).ok());
            out.extend(emit_context(&difi, 2, Some(1000)).ok());
        }
        "seq_books" => {
            // CHDR with ticks, sc16, window 8, 10 samples a packet; then packets: plain, a
            // loss of 16, a delay, a duplicate, a time jump.
            out.push(vec![
                2, 0, 9, 3, 1, 7, 0, 0, 0, 0, 0, 0, 0, 0, 240, 0, 0, 0, 0, 245, 0, 0, 0x41, 0,
                0x20, 9, 0, 0, 0,
            ]);
        }
        "depacketizer" => {
            // Room, zero-fill, then (length, gap frames, eob) per datagram.
            out.push(vec![7, 1, 200, 0, 0, 200, 2, 1, 13, 0, 0, 255, 1, 0]);
        }
        _ => {
            // Width, window, then 16-bit sequence numbers: in order, a gap, a swap, a repeat.
            let mut s = vec![2u8, 8];
            for n in [1u16, 2, 3, 5, 4, 6, 6, 7, 1000, 1001, 1, 2] {
                s.extend_from_slice(&n.to_le_bytes());
            }
            out.push(s);
        }
    }
    out
}

/// Whether `cargo fuzz` is here; installs it first when `install`.
pub fn cargo_fuzz(install: bool) -> Result<bool> {
    let have = || {
        cargo()
            .args(["fuzz", "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !have() && install {
        report::run_as(
            "install cargo-fuzz",
            cargo().args(["install", "cargo-fuzz", "--locked"]),
        )?;
    }
    Ok(have())
}

/// Every fuzz target (or `only`) for `seconds` from the seed corpus; with `seed`, libFuzzer's
/// random seed, so that a run of the same code finds the same inputs.
pub fn run_targets(seconds: u64, only: Option<&str>, seed: Option<u64>) -> Result<()> {
    let targets: Vec<&str> = TARGETS
        .iter()
        .copied()
        .filter(|t| only.is_none_or(|o| o == *t))
        .collect();
    if targets.is_empty() {
        bail!(
            "unknown fuzz target; expected one of {}",
            TARGETS.join(", ")
        );
    }
    for target in &targets {
        let corpus = std::path::Path::new("fuzz/corpus").join(target);
        std::fs::create_dir_all(&corpus)?;
        for (i, seed) in seeds(target).iter().enumerate() {
            std::fs::write(corpus.join(format!("seed-{i}")), seed)?;
        }
        // cargo-fuzz passes nightly-only flags (sanitizers); the one toolchain here is stable.
        let mut cmd = cargo();
        cmd.env("RUSTC_BOOTSTRAP", "1")
            .args(["fuzz", "run", target])
            .arg(&corpus)
            .arg("--")
            .arg(format!("-max_total_time={seconds}"));
        if let Some(seed) = seed {
            cmd.arg(format!("-seed={seed}"));
        }
        report::run_as(&format!("fuzz {target} ({seconds} s)"), &mut cmd)?;
    }
    Ok(())
}

pub fn fuzz(seconds: u64, only: Option<&str>) -> Result<()> {
    cargo_fuzz(true)?;
    run_targets(seconds, only, None)?;
    println!("fuzz: ran {seconds} s a target without a finding");
    Ok(())
}
