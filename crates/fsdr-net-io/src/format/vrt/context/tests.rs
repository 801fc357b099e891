//! Context packets: parse and emit round trips, DIFI checks, the fields the `vita49` crate
//! cannot take.

use super::*;

fn full() -> IfContext {
    IfContext {
        stream_id: Some(0x1234_5678),
        integer_seconds: Some(1_700_000_000),
        sample_count: None,
        changed: true,
        reference_point_id: Some(9),
        bandwidth_hz: Some(20e6),
        if_ref_freq_hz: Some(-1.5e6),
        rf_ref_freq_hz: Some(2.412e9),
        rf_offset_hz: Some(250e3),
        if_band_offset_hz: Some(-10e3),
        reference_level_dbm: Some(-12.5),
        gain_db: Some((30.0, 1.5)),
        over_range_count: Some(3),
        sample_rate_sps: Some(30.72e6),
        timestamp_adjustment_fs: Some(-1_000_000),
        timestamp_cal_time: Some(1_699_999_000),
        temperature_c: Some(41.25),
        device_id: Some((0x00_2233, 0x0042)),
        state_indicators: Some(0x000A_0000),
        payload_format: Some(0xA000_01CF_0000_0000),
        class_id: None,
        difi: None,
    }
}

/// Found by the `vrt_context` fuzz target: a context packet with CIF1's "array of CIFs"
/// bit made the `vita49` crate panic (unimplemented field). It is an error now.
#[test]
fn fields_the_vita49_crate_does_not_implement_are_an_error_not_a_panic() {
    const CRASH: [u8; 94] = [
        0x49, 0x12, 0x00, 0x1a, 0x00, 0x00, 0x00, 0x01, 0x02, 0x6a, 0x62, 0x1e, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xe8, 0xfb,
        0xb9, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0xf0, 0xd1, 0x80, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];
    assert!(parse_context(&CRASH).is_err());
    // A well-formed packet whose CIF1 announces each unimplemented field.
    let ok = emit_context(&full(), 0, None).unwrap();
    let info = crate::format::Format::Vrt.parse(&ok).unwrap();
    let at = info.payload().start;
    for bit in [28u32, 11, 9, 7] {
        let mut p = ok.clone();
        let cif0 = u32::from_be_bytes(p[at..at + 4].try_into().unwrap()) | 0b10;
        p[at..at + 4].copy_from_slice(&cif0.to_be_bytes());
        p.splice(at + 4..at + 4, (1u32 << bit).to_be_bytes());
        let words = (p.len() / 4) as u16;
        p[2..4].copy_from_slice(&words.to_be_bytes());
        let e = parse_context(&p).expect_err("unsupported CIF1 field");
        assert!(e.to_string().contains("CIF1"), "{e}");
    }
}

/// Found by the `vrt_context` fuzz target: a sample rate that parsed to 2^44 Hz (the
/// top of the field, rounded up as an f64) panicked when emitted again.
#[test]
fn values_beyond_the_fixed_point_range_are_an_error_not_a_panic() {
    for ctx in [
        IfContext {
            sample_rate_sps: Some((1u64 << 44) as f64),
            ..full()
        },
        IfContext {
            rf_ref_freq_hz: Some(-1.0),
            ..full()
        },
        IfContext {
            if_ref_freq_hz: Some(f64::NAN),
            ..full()
        },
        IfContext {
            reference_level_dbm: Some(300.0),
            ..full()
        },
        IfContext {
            gain_db: Some((0.0, f32::INFINITY)),
            ..full()
        },
    ] {
        assert!(emit_context(&ctx, 0, None).is_err(), "{ctx:?}");
    }
}

#[test]
fn every_cif0_field_round_trips_through_the_emitter() {
    let ctx = full();
    let bytes = emit_context(&ctx, 5, Some(123_456)).unwrap();
    let back = parse_context(&bytes).unwrap();
    assert_eq!(
        back,
        IfContext {
            sample_count: Some(123_456),
            ..ctx
        }
    );
}

/// The fixed-point encodings, checked against words built by hand from the standard:
/// 64-bit frequencies with 20 fractional bits, reference level Q9.7 in the low half,
/// temperature Q10.6.
#[test]
fn fixed_point_fields_are_the_standards_words() {
    let ctx = IfContext {
        stream_id: Some(1),
        rf_ref_freq_hz: Some(100e6),
        reference_level_dbm: Some(-1.0),
        ..IfContext::default()
    };
    let b = emit_context(&ctx, 0, None).unwrap();
    // Header, stream ID, CIF0, then the RF reference frequency (bit 27) and the reference
    // level (bit 24), in CIF0 bit order.
    let cif0 = u32::from_be_bytes(b[8..12].try_into().unwrap());
    assert_eq!(cif0, (1 << 27) | (1 << 24));
    let freq = u64::from_be_bytes(b[12..20].try_into().unwrap());
    assert_eq!(freq, 100_000_000u64 << 20);
    let level = u32::from_be_bytes(b[20..24].try_into().unwrap());
    assert_eq!(level, (-128i16) as u16 as u32);
}

#[test]
fn difi_standard_context_is_recognised_and_validated() {
    let mut ctx = IfContext {
        stream_id: Some(1),
        class_id: Some((DIFI_OUI, DIFI_INFO_CLASS, DIFI_CONTEXT_CLASS)),
        rf_offset_hz: None,
        over_range_count: None,
        temperature_c: None,
        device_id: None,
        integer_seconds: None,
        ..full()
    };
    ctx.changed = true;
    let b = emit_context(&ctx, 0, Some(0)).unwrap();
    let back = parse_context(&b).unwrap();
    assert_eq!(back.difi, Some(Difi::StandardContext { complete: true }));
    // A DIFI class with a field too many is flagged incomplete.
    ctx.over_range_count = Some(1);
    let b = emit_context(&ctx, 0, Some(0)).unwrap();
    let back = parse_context(&b).unwrap();
    assert_eq!(back.difi, Some(Difi::StandardContext { complete: false }));
    // A DIFI class with a required field not set is not built (no zero stands in for it).
    let e = emit_context(
        &IfContext {
            gain_db: None,
            over_range_count: None,
            ..ctx.clone()
        },
        0,
        Some(0),
    )
    .unwrap_err();
    assert!(e.to_string().contains("not set: gain_db"), "{e}");
    // Not DIFI without its class ID.
    ctx.class_id = Some((0x00_1234, 0, 1));
    let b = emit_context(&ctx, 0, Some(0)).unwrap();
    assert_eq!(parse_context(&b).unwrap().difi, Some(Difi::No));
}

#[test]
fn changes_name_the_settings_that_moved() {
    let a = IfContext {
        sample_rate_sps: Some(10e6),
        rf_ref_freq_hz: Some(1e9),
        gain_db: Some((10.0, 0.5)),
        ..IfContext::default()
    };
    assert_eq!(
        a.changes(None),
        [("rx_rate", 10e6), ("rx_freq", 1e9), ("rx_gain", 10.5)]
    );
    assert!(a.changes(Some(&a)).is_empty());
    let b = IfContext {
        rf_ref_freq_hz: Some(2e9),
        ..a.clone()
    };
    assert_eq!(b.changes(Some(&a)), [("rx_freq", 2e9)]);
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    assert!(parse_context(&[]).is_err());
    assert!(parse_context(&[0x40, 0, 0, 1]).is_err());
    let mut b = emit_context(&full(), 0, None).unwrap();
    b.truncate(b.len() - 4);
    assert!(parse_context(&b).is_err());
}
