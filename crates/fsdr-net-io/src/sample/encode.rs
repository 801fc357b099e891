//! [`Encoder`]: items to wire bytes (the sink's side).

use super::decode::Component;
use super::{Item, ItemKind, WireFormat, WireFormatError};

/// Encodes items `T` into wire bytes of one [`WireFormat`] (the sink's side).
#[derive(Debug, Clone, Copy)]
pub struct Encoder<T> {
    wire: WireFormat,
    unit: usize,
    items_per_unit: usize,
    /// Encodes; returns (bytes written, items clipped).
    f: fn(&[T], &mut [u8]) -> (usize, u64),
}

impl<T: Item> Encoder<T> {
    /// An encoder from `T` to `wire`.
    pub fn new(wire: WireFormat) -> Result<Self, WireFormatError> {
        let f: fn(&[T], &mut [u8]) -> (usize, u64) = match (wire, T::KIND) {
            (WireFormat::Plain, _) => encode_plain::<T>,
            // fc32 is `Complex<f32>`'s own memory on a little-endian host.
            #[cfg(target_endian = "little")]
            (WireFormat::Fc32, ItemKind::ComplexF32) => encode_plain::<T>,
            (WireFormat::Sc16Chdr, ItemKind::ComplexF32) => encode_sc16::<T, f32, false, false>,
            (WireFormat::Sc16Item32Le, ItemKind::ComplexF32) => encode_sc16::<T, f32, false, true>,
            (WireFormat::Sc16Item32Be, ItemKind::ComplexF32) => encode_sc16::<T, f32, true, false>,
            (WireFormat::Sc16Chdr, ItemKind::ComplexI16) => encode_sc16::<T, i16, false, false>,
            (WireFormat::Sc16Item32Le, ItemKind::ComplexI16) => encode_sc16::<T, i16, false, true>,
            (WireFormat::Sc16Item32Be, ItemKind::ComplexI16) => encode_sc16::<T, i16, true, false>,
            // sc8: I0, Q0, I1, Q1 bytes (big-endian item32 and DIFI), or the little-endian
            // word of them (Q1, I1, Q0, I0).
            (WireFormat::Sc8Item32Be, ItemKind::ComplexF32) => encode_sc8::<T, f32, false, true>,
            (WireFormat::Sc8Difi, ItemKind::ComplexF32) => encode_sc8::<T, f32, false, false>,
            (WireFormat::Sc8Item32Le, ItemKind::ComplexF32) => encode_sc8::<T, f32, true, true>,
            (WireFormat::Sc8Item32Be, ItemKind::ComplexI8) => encode_sc8::<T, i8, false, true>,
            (WireFormat::Sc8Difi, ItemKind::ComplexI8) => encode_sc8::<T, i8, false, false>,
            (WireFormat::Sc8Item32Le, ItemKind::ComplexI8) => encode_sc8::<T, i8, true, true>,
            _ => {
                return Err(WireFormatError::Mismatch {
                    wire,
                    item: T::NAME,
                });
            }
        };
        let (unit, items_per_unit) = wire.unit(std::mem::size_of::<T>());
        Ok(Self {
            wire,
            unit,
            items_per_unit,
            f,
        })
    }

    /// The encoding.
    pub fn wire(&self) -> WireFormat {
        self.wire
    }

    /// Wire bytes per item.
    pub fn bytes_per_item(&self) -> usize {
        self.unit / self.items_per_unit
    }

    /// Encodes as many items as fit `wire`; returns the bytes written.
    pub fn encode(&self, items: &[T], wire: &mut [u8]) -> usize {
        (self.f)(items, wire).0
    }

    /// [`encode`](Self::encode), also counting the items clipped at the wire format's full
    /// scale: those with a component the encoding saturates, whose value times the scale
    /// (32767 for sc16, 32767/256 for sc8, as UHD's) rounds outside the integer's range —
    /// a `Complex<f32>` component above 1.0000153 or below −1.0000458 in sc16, beyond
    /// ±0.9961 in sc8 — or is NaN. Returns (bytes written, items clipped); integer items and
    /// `fc32` are never clipped.
    ///
    /// ```
    /// use fsdr_net_io::sample::{Encoder, WireFormat};
    /// use num_complex::Complex32;
    ///
    /// let e = Encoder::<Complex32>::new(WireFormat::Sc16Chdr).unwrap();
    /// let items = [Complex32::new(1.0, -1.0), Complex32::new(1.5, 0.0), Complex32::new(0.0, -2.0)];
    /// let mut wire = [0u8; 12];
    /// assert_eq!(e.encode_counting(&items, &mut wire), (12, 2));
    /// ```
    pub fn encode_counting(&self, items: &[T], wire: &mut [u8]) -> (usize, u64) {
        (self.f)(items, wire)
    }
}

fn encode_plain<T: Item>(items: &[T], wire: &mut [u8]) -> (usize, u64) {
    let b = bytemuck::cast_slice::<T, u8>(items);
    let n = b
        .len()
        .min(wire.len() / std::mem::size_of::<T>() * std::mem::size_of::<T>());
    wire[..n].copy_from_slice(&b[..n]);
    (n, 0)
}

/// A component that becomes an sc16 `int16` the way UHD converts it.
trait ToSc16: Component {
    fn to_sc16(self) -> i16;
    /// Whether the conversion saturates: the value lies beyond `int16`'s range.
    fn clips_sc16(self) -> bool;
}

impl ToSc16 for f32 {
    /// As the converter libuhd picks on x86 (SSE2): `x * float(32767)` in single precision,
    /// rounded to nearest with ties to even (`cvtps2dq`), saturated to `int16` (`packssdw`);
    /// NaN and values beyond `i32` become the "integer indefinite" and so -32768. Checked
    /// bit for bit against libuhd in tests/uhd_converters.rs.
    #[inline(always)]
    fn to_sc16(self) -> i16 {
        let v = self * 32767.0f32;
        if v.abs() < 2_147_483_648.0 {
            v.round_ties_even().clamp(-32768.0, 32767.0) as i16
        } else {
            i16::MIN
        }
    }

    #[inline(always)]
    fn clips_sc16(self) -> bool {
        let r = (self * 32767.0f32).round_ties_even();
        // NaN compares false: clipped (it becomes -32768).
        !(-32768.0..=32767.0).contains(&r)
    }
}

impl ToSc16 for i16 {
    #[inline(always)]
    fn to_sc16(self) -> i16 {
        self
    }

    #[inline(always)]
    fn clips_sc16(self) -> bool {
        false
    }
}

/// A component that becomes an sc8 `int8` the way UHD converts it.
trait ToSc8: Component {
    fn to_sc8(self) -> i8;
    /// Whether the conversion saturates.
    fn clips_sc8(self) -> bool;
}

impl ToSc8 for f32 {
    /// As libuhd's converter with the transmit scale UHD's streamer gives sc8 (32767/256,
    /// the DSP's host scaling for the default peak of 1): rounded to nearest, ties to even,
    /// saturated to `int8`; NaN becomes -128. Checked against libuhd in
    /// tests/uhd_converters.rs.
    #[inline(always)]
    fn to_sc8(self) -> i8 {
        let v = self * (32767.0f32 / 256.0);
        if v.abs() < 2_147_483_648.0 {
            v.round_ties_even().clamp(-128.0, 127.0) as i8
        } else {
            i8::MIN
        }
    }

    #[inline(always)]
    fn clips_sc8(self) -> bool {
        let r = (self * (32767.0f32 / 256.0)).round_ties_even();
        !(-128.0..=127.0).contains(&r)
    }
}

impl ToSc8 for i8 {
    #[inline(always)]
    fn to_sc8(self) -> i8 {
        self
    }

    #[inline(always)]
    fn clips_sc8(self) -> bool {
        false
    }
}

/// sc8: two samples per 4 bytes, I0, Q0, I1, Q1 (`LE`: the word's bytes reversed); a lone
/// last sample pads its word with a zero sample (`WORDS`, item32) or takes 2 bytes (DIFI).
fn encode_sc8<T: Item, C: ToSc8, const LE: bool, const WORDS: bool>(
    items: &[T],
    wire: &mut [u8],
) -> (usize, u64) {
    let n = items.len().min(wire.len() / 2);
    let src = bytemuck::cast_slice::<T, C>(&items[..n]);
    let mut at = 0;
    let mut clipped = 0u64;
    for pair in src.chunks(4) {
        let mut b = [0u8; 4];
        for (k, c) in pair.iter().enumerate() {
            b[k] = c.to_sc8() as u8;
        }
        if LE {
            b.reverse();
        }
        let len = if pair.len() == 4 || WORDS { 4 } else { 2 };
        if at + len > wire.len() {
            break;
        }
        for sample in pair.chunks(2) {
            clipped += u64::from(sample.iter().any(|c| c.clips_sc8()));
        }
        wire[at..at + len].copy_from_slice(&b[..len]);
        at += len;
    }
    (at, clipped)
}

fn encode_sc16<T: Item, C: ToSc16, const BE: bool, const SWAP: bool>(
    items: &[T],
    wire: &mut [u8],
) -> (usize, u64) {
    let n = items.len().min(wire.len() / 4);
    let src = bytemuck::cast_slice::<T, C>(&items[..n]);
    let mut clipped = 0u64;
    for (w, s) in wire.chunks_exact_mut(4).zip(src.chunks_exact(2)) {
        clipped += u64::from(s[0].clips_sc16() | s[1].clips_sc16());
        let (i, q) = (s[0].to_sc16(), s[1].to_sc16());
        let (a, b) = if SWAP { (q, i) } else { (i, q) };
        let (a, b) = if BE {
            (a.to_be_bytes(), b.to_be_bytes())
        } else {
            (a.to_le_bytes(), b.to_le_bytes())
        };
        w[..2].copy_from_slice(&a);
        w[2..].copy_from_slice(&b);
    }
    (4 * n, clipped)
}
