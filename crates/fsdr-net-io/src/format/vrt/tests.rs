use super::*;

fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

#[test]
fn type0_no_stream_id_no_timestamp() {
    let dg = words(&[0x0003_0003, 0x1111_1111, 0x2222_2222]);
    let info = parse(&dg).unwrap();
    assert_eq!(info.class, PacketClass::Data);
    assert_eq!(info.seq, Some(3));
    assert_eq!(info.stream_id, None);
    assert_eq!(info.timestamp, None);
    assert_eq!(info.payload(), 4..12);
}

#[test]
fn type1_stream_id_class_id_trailer_and_both_timestamps() {
    // type 1, C, T, TSI=UTC, TSF=real-time, count 9, size 10 words
    let hdr = 0x1 << 28 | 1 << 27 | 1 << 26 | 1 << 22 | 2 << 20 | 9 << 16 | 10;
    let dg = words(&[
        hdr,
        0xdead_beef,
        0x006a_621e,
        0x0001_0002,
        1_700_000_000,
        0,
        500_000,
        0xaaaa_aaaa,
        0xbbbb_bbbb,
        0x8000_0000,
    ]);
    let p = VrtPacket::new_checked(&dg[..]).unwrap();
    assert_eq!(p.stream_id(), Some(0xdead_beef));
    assert_eq!(p.class_oui(), Some(DIFI_OUI));
    assert_eq!(p.class_codes(), Some((1, 2)));
    assert_eq!(p.tsi(), Tsi::Utc);
    assert_eq!(p.tsf(), Tsf::RealTime);
    assert_eq!(p.integer_timestamp(), Some(1_700_000_000));
    assert_eq!(p.fractional_timestamp(), Some(500_000));
    assert_eq!(p.trailer(), Some(0x8000_0000));
    assert_eq!(p.payload(), &words(&[0xaaaa_aaaa, 0xbbbb_bbbb])[..]);
    let info = parse(&dg).unwrap();
    assert_eq!(info.payload(), 28..36);
    let t = info.timestamp.unwrap();
    assert_eq!(t.seconds(1e6), Some(1_700_000_000.0 + 500_000e-12));
    let repr = VrtRepr::parse(&p);
    let mut out = vec![0u8; dg.len()];
    repr.emit(&mut out);
    out[28..36].copy_from_slice(p.payload());
    assert_eq!(out, dg);
}

/// Found by `cargo xtask fuzz` (target vrt): the pad bit count of the class ID was lost
/// when a parsed header was emitted again.
#[test]
fn class_id_pad_bits_survive_a_round_trip() {
    let dg = [
        0x18, 0x0f, 0x00, 0x06, 0x00, 0xff, 0xff, 0xff, 0xff, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x18,
    ];
    let p = VrtPacket::new_checked(&dg[..]).unwrap();
    assert_eq!(p.class_pad_bits(), Some(0x1f));
    let repr = VrtRepr::parse(&p);
    let mut out = vec![0u8; dg.len()];
    repr.emit(&mut out);
    // Equal except the reserved bits 26:24 of the class ID's first word.
    let mut want = dg;
    want[8] &= !0x07;
    assert_eq!(&out[..16], &want[..16]);
}

#[test]
fn each_tsi_and_tsf() {
    for tsi in 0..4u32 {
        for tsf in 0..4u32 {
            let n_ts = usize::from(tsi != 0) + if tsf != 0 { 2 } else { 0 };
            let size = 2 + n_ts + 1;
            let mut ws = vec![1 << 28 | tsi << 22 | tsf << 20 | size as u32, 7];
            if tsi != 0 {
                ws.push(100);
            }
            if tsf != 0 {
                ws.extend([0, 250]);
            }
            ws.push(0x5555_5555);
            let dg = words(&ws);
            let p = VrtPacket::new_checked(&dg[..]).unwrap();
            assert_eq!(p.integer_timestamp(), (tsi != 0).then_some(100));
            assert_eq!(p.fractional_timestamp(), (tsf != 0).then_some(250));
            assert_eq!(p.payload(), &[0x55; 4]);
            let t = p.timestamp();
            assert_eq!(t.is_some(), tsi != 0 || tsf != 0);
            if tsf == 1 {
                let expect = if tsi != 0 { 100 * 1000 + 250 } else { 250 };
                assert_eq!(t.unwrap().ticks(1000.0), Some(expect));
            }
        }
    }
}

#[test]
fn context_and_command_packets_carry_no_samples() {
    let dg = words(&[0x4 << 28 | 3, 1, 0]);
    assert_eq!(parse(&dg).unwrap().class, PacketClass::Context);
    let dg = words(&[0x5 << 28 | 3, 1, 0]);
    assert_eq!(parse(&dg).unwrap().class, PacketClass::Context);
    let dg = words(&[0x6 << 28 | 3, 1, 0]);
    assert_eq!(parse(&dg).unwrap().class, PacketClass::NonData);
}

#[test]
fn extension_data_is_data() {
    let dg = words(&[0x3 << 28 | 3, 1, 0]);
    assert_eq!(parse(&dg).unwrap().class, PacketClass::Data);
}

#[test]
fn malformed() {
    assert_eq!(
        parse(&[0, 0]),
        Err(FormatError::Truncated { needed: 4, got: 2 })
    );
    // Unknown packet type.
    assert_eq!(
        parse(&words(&[0x9 << 28 | 1])),
        Err(FormatError::UnknownPacketType(9))
    );
    // Size disagrees with datagram.
    assert_eq!(
        parse(&words(&[0x0000_0005, 0])),
        Err(FormatError::LengthMismatch {
            field: 20,
            datagram: 8
        })
    );
    // Not a multiple of four.
    let mut dg = words(&[0x0000_0002, 0]);
    dg.push(0);
    assert!(matches!(
        parse(&dg),
        Err(FormatError::LengthMismatch { .. })
    ));
    // Size matches but the announced words do not fit.
    let hdr = 1 << 28 | 1 << 27 | 3 << 22 | 3 << 20 | 3;
    assert!(matches!(
        parse(&words(&[hdr, 0, 0])),
        Err(FormatError::Truncated { .. })
    ));
    // Size field of zero.
    assert!(matches!(
        parse(&words(&[0x1000_0000, 0])),
        Err(FormatError::LengthMismatch { .. })
    ));
}

#[test]
fn an_end_of_burst_is_a_trailer_after_the_padding_and_only_the_whole_datagram_shows_it() {
    use crate::format::{DataHeader, Format};
    for pad in 0..=3usize {
        let payload = 8 - pad;
        let h = Format::Vrt.header_len(true);
        let mut dg = vec![0xeeu8; h + payload + pad + Format::Vrt.trailer_len(true)];
        let fields = DataHeader {
            seq: 5,
            timestamp: Some(77),
            eob: true,
            pad,
            ..Default::default()
        };
        Format::Vrt.emit_header(&mut dg, &fields).unwrap();
        let info = Format::Vrt.parse(&dg).unwrap();
        assert!(info.eob, "pad {pad}");
        assert_eq!(info.payload(), h..h + payload, "pad {pad}");
        // Padding zero, trailer last.
        assert!(dg[h + payload..h + payload + pad].iter().all(|&b| b == 0));
        let end = dg.len();
        assert_eq!(dg[end - 4..], EOB_TRAILER.to_be_bytes());
        // From the head alone the trailer cannot be seen, and the format says so.
        assert!(Format::Vrt.trailer_unseen(&dg[..h]));
        assert!(!Format::Vrt.parse_head(&dg[..h], dg.len()).unwrap().eob);
        // Without the end of burst: no trailer.
        let mut plain = vec![0u8; h + 8];
        Format::Vrt
            .emit_header(&mut plain, &DataHeader::default())
            .unwrap();
        assert!(!Format::Vrt.trailer_unseen(&plain[..h]));
        assert!(!Format::Vrt.parse(&plain).unwrap().eob);
    }
    // Too short for header and trailer: an error, not a panic.
    let mut short = vec![0u8; Format::Vrt.header_len(false)];
    let eob = DataHeader {
        eob: true,
        ..Default::default()
    };
    assert!(Format::Vrt.emit_header(&mut short, &eob).is_err());
}
