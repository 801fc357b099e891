use super::*;
use num_complex::{Complex, Complex32};

/// UHD's item32 word for a sample: I in the upper 16 bits.
fn item32(i: i16, q: i16) -> u32 {
    (u32::from(i as u16) << 16) | u32::from(q as u16)
}

const SAMPLES: [(i16, i16); 6] = [
    (0, 0),
    (32767, -32767),
    (-32768, 1),
    (16384, -8192),
    (1, -1),
    (12345, -23456),
];

fn expect_f32(i: i16, q: i16) -> Complex32 {
    // UHD: T(int16 * float(scale_factor)) with scale 1/32767.
    Complex32::new(f32::from(i) * SC16_SCALE, f32::from(q) * SC16_SCALE)
}

#[test]
fn sc16_layouts_decode_to_the_same_samples() {
    fn chdr(i: i16, q: i16) -> Vec<u8> {
        let mut b = i.to_le_bytes().to_vec();
        b.extend(q.to_le_bytes());
        b
    }
    fn le(i: i16, q: i16) -> Vec<u8> {
        item32(i, q).to_le_bytes().to_vec()
    }
    fn be(i: i16, q: i16) -> Vec<u8> {
        item32(i, q).to_be_bytes().to_vec()
    }
    type Layout = fn(i16, i16) -> Vec<u8>;
    let layouts: [(WireFormat, Layout); 3] = [
        (WireFormat::Sc16Chdr, chdr),
        (WireFormat::Sc16Item32Le, le),
        (WireFormat::Sc16Item32Be, be),
    ];
    for (wire, bytes) in layouts {
        let payload: Vec<u8> = SAMPLES.iter().flat_map(|&(i, q)| bytes(i, q)).collect();
        // Aligned and misaligned payloads take both paths.
        for shift in [0usize, 1] {
            let mut buf = vec![0u8; shift];
            buf.extend(&payload);
            let p = &buf[shift..];
            let mut f = vec![Complex32::default(); SAMPLES.len()];
            assert_eq!(Decoder::new(wire).unwrap().decode(p, &mut f), SAMPLES.len());
            let mut s = vec![Complex::<i16>::default(); SAMPLES.len()];
            Decoder::new(wire).unwrap().decode(p, &mut s);
            for (k, &(i, q)) in SAMPLES.iter().enumerate() {
                assert_eq!(
                    f[k].re.to_bits(),
                    expect_f32(i, q).re.to_bits(),
                    "{wire} {k}"
                );
                assert_eq!(
                    f[k].im.to_bits(),
                    expect_f32(i, q).im.to_bits(),
                    "{wire} {k}"
                );
                assert_eq!(s[k], Complex::new(i, q), "{wire} {k}");
            }
        }
    }
}

#[test]
fn sc8_layouts_follow_uhds_word_order() {
    // Two samples (i0, q0), (i1, q1) in one word, as libuhd's converters pack them
    // (tests/uhd_converters.rs checks against the library): word = i0 << 24 | q0 << 16 |
    // i1 << 8 | q1.
    let (i0, q0, i1, q1) = (5i8, -6i8, 127i8, -128i8);
    let word = (u32::from(i0 as u8) << 24)
        | (u32::from(q0 as u8) << 16)
        | (u32::from(i1 as u8) << 8)
        | u32::from(q1 as u8);
    let want = [Complex::new(i0, q0), Complex::new(i1, q1)];
    for (wire, bytes) in [
        (WireFormat::Sc8Item32Le, word.to_le_bytes()),
        (WireFormat::Sc8Item32Be, word.to_be_bytes()),
        (
            WireFormat::Sc8Difi,
            [i0 as u8, q0 as u8, i1 as u8, q1 as u8],
        ),
    ] {
        let mut out = [Complex::<i8>::default(); 2];
        assert_eq!(Decoder::new(wire).unwrap().decode(&bytes, &mut out), 2);
        assert_eq!(out, want, "{wire}");
        let mut f = [Complex32::default(); 2];
        Decoder::new(wire).unwrap().decode(&bytes, &mut f);
        assert_eq!(f[1].re, f32::from(i1) * SC8_SCALE);
        assert_eq!(f[0].im, f32::from(q0) * SC8_SCALE);
    }
    // The encoders write the same bytes back, from integers and from UHD-scaled floats.
    for wire in [
        WireFormat::Sc8Item32Le,
        WireFormat::Sc8Item32Be,
        WireFormat::Sc8Difi,
    ] {
        let mut b = [0u8; 4];
        Encoder::new(wire).unwrap().encode(&want, &mut b);
        let mut back = [Complex::<i8>::default(); 2];
        Decoder::new(wire).unwrap().decode(&b, &mut back);
        assert_eq!(back, want, "{wire}");
        let f: Vec<Complex32> = want
            .iter()
            .map(|c| Complex32::new(f32::from(c.re) * SC8_SCALE, f32::from(c.im) * SC8_SCALE))
            .collect();
        let mut bf = [0u8; 4];
        Encoder::new(wire).unwrap().encode(&f, &mut bf);
        assert_eq!(bf, b, "{wire} from floats");
    }
    // DIFI sc8 decodes a lone last sample of 2 bytes.
    let mut out = [Complex::<i8>::default(); 3];
    let n = Decoder::new(WireFormat::Sc8Difi)
        .unwrap()
        .decode(&[1, 2, 3, 4, 5, 6], &mut out);
    assert_eq!((n, out[2]), (3, Complex::new(5, 6)));
}

#[test]
fn encoders_round_like_uhd_and_round_trip_integers() {
    let samples = [
        Complex32::new(0.5, -0.5),
        Complex32::new(0.99999, -1.0),
        Complex32::new(2.0, f32::NAN),
    ];
    let e = Encoder::<Complex32>::new(WireFormat::Sc16Chdr).unwrap();
    let mut wire = [0u8; 12];
    assert_eq!(e.encode(&samples, &mut wire), 12);
    // 0.5 · 32767 = 16383.5 → 16384 (ties to even), −16384; 0.99999 · 32767 → 32767;
    // beyond full scale saturates; NaN is the SSE2 "indefinite" → −32768.
    let got: Vec<i16> = wire
        .chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert_eq!(got, [16384, -16384, 32767, -32767, 32767, -32768]);
    for wire in [
        WireFormat::Sc16Chdr,
        WireFormat::Sc16Item32Le,
        WireFormat::Sc16Item32Be,
    ] {
        let s: Vec<Complex<i16>> = SAMPLES.iter().map(|&(i, q)| Complex::new(i, q)).collect();
        let mut b = vec![0u8; 4 * s.len()];
        Encoder::new(wire).unwrap().encode(&s, &mut b);
        let mut back = vec![Complex::<i16>::default(); s.len()];
        Decoder::new(wire).unwrap().decode(&b, &mut back);
        assert_eq!(back, s, "{wire}");
    }
}

#[test]
fn defaults_and_mismatches() {
    assert_eq!(
        WireFormat::default_for::<Complex32>(Format::Chdr),
        WireFormat::Sc16Chdr
    );
    assert_eq!(
        WireFormat::default_for::<Complex32>(Format::Vrt),
        WireFormat::Sc16Item32Be
    );
    assert_eq!(
        WireFormat::default_for::<Complex32>(Format::Raw),
        WireFormat::Plain
    );
    assert_eq!(
        WireFormat::default_for::<u8>(Format::Chdr),
        WireFormat::Plain
    );
    assert!(matches!(
        Decoder::<f32>::new(WireFormat::Sc16Chdr),
        Err(WireFormatError::Mismatch { .. })
    ));
    assert!(Encoder::<Complex32>::new(WireFormat::Fc32).is_ok());
    assert!(Encoder::<Complex<i16>>::new(WireFormat::Sc8Difi).is_err());
    for w in WireFormat::ALL {
        assert_eq!(w.name().parse::<WireFormat>().unwrap(), *w);
    }
    assert_eq!(
        "difi_sc16".parse::<WireFormat>().unwrap(),
        WireFormat::Sc16Item32Be
    );
    assert!("sc12".parse::<WireFormat>().is_err());
}

/// Every decoder that says it is a plain copy decodes to exactly the wire bytes, and every
/// other one does not (for bytes where it matters), for every item kind.
#[test]
fn is_copy_means_decoding_is_a_byte_copy() {
    fn check<T: Item + PartialEq>() {
        let wire: Vec<u8> = (0..64u8)
            .map(|b| b.wrapping_mul(37).wrapping_add(11))
            .collect();
        for &w in WireFormat::ALL {
            let Ok(d) = Decoder::<T>::new(w) else {
                continue;
            };
            let mut out = vec![T::default(); d.items_in(wire.len())];
            let n = d.decode(&wire, &mut out);
            let bytes = bytemuck::cast_slice::<T, u8>(&out[..n]);
            let same = bytes.len() == wire.len() && bytes == &wire[..];
            assert_eq!(d.is_copy(), same, "{w} into {}", T::NAME);
        }
    }
    check::<u8>();
    check::<i16>();
    check::<f32>();
    check::<Complex<i16>>();
    check::<Complex<i8>>();
    check::<Complex32>();
}

/// fc32 goes both ways (the review found it decode-only, the sink's error saying otherwise):
/// little-endian float32 I then Q, every bit kept.
#[test]
fn fc32_encodes_and_decodes_every_bit() {
    let s = [
        Complex32::new(0.25, -1.5e-30),
        Complex32::new(f32::MAX, f32::MIN_POSITIVE),
        Complex32::new(-0.0, 1.0),
    ];
    let mut wire = [0u8; 24];
    let e = Encoder::<Complex32>::new(WireFormat::Fc32).unwrap();
    assert_eq!(e.encode(&s, &mut wire), 24);
    assert_eq!(&wire[..4], &0.25f32.to_le_bytes());
    assert_eq!(&wire[4..8], &(-1.5e-30f32).to_le_bytes());
    let mut back = [Complex32::default(); 3];
    Decoder::new(WireFormat::Fc32)
        .unwrap()
        .decode(&wire, &mut back);
    assert!(
        back.iter()
            .zip(&s)
            .all(|(a, b)| a.re.to_bits() == b.re.to_bits() && a.im.to_bits() == b.im.to_bits())
    );
    assert!(Encoder::<Complex<i16>>::new(WireFormat::Fc32).is_err());
}

/// Decoding in place gives bit for bit what decoding from a separate buffer gives, for every
/// encoding that decodes in place, every length from none to several stack chunks, the wire
/// bytes anywhere far enough back, and the bytes behind the items left alone; too far
/// forward, or not whole units, it refuses and changes nothing.
#[test]
fn decoding_in_place_agrees_with_decoding_from_a_copy() {
    fn check<T: Item + PartialEq + std::fmt::Debug>(wire: WireFormat) {
        let dec = Decoder::<T>::new(wire).unwrap();
        if !dec.decodes_in_place() {
            return;
        }
        let (unit, size) = (dec.unit_bytes(), std::mem::size_of::<T>());
        let grows = (size * dec.items_per_unit()).saturating_sub(unit);
        let noise = crate::testing::Noise::new().bytes(unit * 1100);
        for units in [0usize, 1, 2, 15, 16, 17, 100, 499, 1000, 1100] {
            let len = units * unit;
            let wire_bytes = &noise[..len];
            let mut want = vec![T::default(); dec.items_in(len)];
            dec.decode(wire_bytes, &mut want);
            // The least room the bytes may start at, the end of the items' room, and further.
            let least = units * grows;
            let room = want.len() * size;
            for at in [
                least,
                room.saturating_sub(len).max(least),
                least + 3 * unit + 8,
            ] {
                let n = (at + len).div_ceil(size) + 3;
                let mut items = vec![T::default(); n];
                let bytes = bytemuck::cast_slice_mut::<T, u8>(&mut items);
                bytes.fill(0xA5);
                bytes[at..at + len].copy_from_slice(wire_bytes);
                let tail = bytes[(at + len).max(room)..].to_vec();
                assert_eq!(
                    dec.decode_in_place(&mut items, at, len),
                    Some(want.len()),
                    "{wire} into {}, {units} units at {at}",
                    T::NAME
                );
                assert_eq!(&items[..want.len()], &want[..], "{wire}, {units} at {at}");
                let bytes = bytemuck::cast_slice::<T, u8>(&items);
                assert_eq!(&bytes[(at + len).max(room)..], &tail[..], "{wire}: beyond");
            }
            if least > 0 {
                let mut items = vec![T::default(); (least + len).div_ceil(size) + 1];
                let before = items.clone();
                assert_eq!(dec.decode_in_place(&mut items, least - 1, len), None);
                assert_eq!(items, before);
            }
            if unit > 1 && units > 0 {
                let mut items = vec![T::default(); (least + len).div_ceil(size) + 1];
                assert_eq!(dec.decode_in_place(&mut items, least, len - 1), None);
            }
        }
    }
    for &w in WireFormat::ALL {
        if w.converts_to(ItemKind::ComplexF32) {
            check::<Complex32>(w);
        }
        if w.converts_to(ItemKind::ComplexI16) {
            check::<Complex<i16>>(w);
        }
        if w.converts_to(ItemKind::ComplexI8) {
            check::<Complex<i8>>(w);
        }
    }
}

/// Clipping is counted per item, where the encoding saturates and only there: ±1 and the
/// extreme values that round into sc16's range are not clipped; NaN is.
#[test]
fn encoders_count_the_items_they_clip() {
    let c = |re, im| Complex32::new(re, im);
    let items = [
        c(1.0, -1.0),
        c(1.000_015, -1.000_045),
        c(1.000_02, 0.0),
        c(0.0, -1.000_05),
        c(f32::NAN, 0.0),
        c(3.0, -3.0),
    ];
    let mut wire = vec![0u8; 4 * items.len()];
    for w in [
        WireFormat::Sc16Chdr,
        WireFormat::Sc16Item32Le,
        WireFormat::Sc16Item32Be,
    ] {
        let e = Encoder::<Complex32>::new(w).unwrap();
        assert_eq!(e.encode_counting(&items, &mut wire), (24, 4), "{w}");
    }
    // sc8's scale puts 1.0 at 127.996: it saturates there.
    let e = Encoder::<Complex32>::new(WireFormat::Sc8Difi).unwrap();
    assert_eq!(
        e.encode_counting(&[c(0.99, 0.0), c(1.0, 0.0)], &mut wire),
        (4, 1)
    );
    let e = Encoder::<Complex32>::new(WireFormat::Fc32).unwrap();
    assert_eq!(e.encode_counting(&items[..3], &mut wire).1, 0);
    let e = Encoder::<Complex<i16>>::new(WireFormat::Sc16Chdr).unwrap();
    let ints = [Complex::new(i16::MIN, i16::MAX)];
    assert_eq!(e.encode_counting(&ints, &mut wire).1, 0);
}
