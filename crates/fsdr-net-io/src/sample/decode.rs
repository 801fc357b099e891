//! [`Decoder`]: wire bytes to items, one converter per (encoding, item kind).

use super::{Item, ItemKind, SC8_SCALE, SC16_SCALE, WireFormat, WireFormatError};

/// Decodes wire bytes of one [`WireFormat`] into items `T`.
#[derive(Debug, Clone, Copy)]
pub struct Decoder<T> {
    wire: WireFormat,
    unit: usize,
    items_per_unit: usize,
    f: fn(&[u8], &mut [T]) -> usize,
}

impl<T: Item> Decoder<T> {
    /// A decoder from `wire` to `T`; an error when the encoding does not produce `T`.
    pub fn new(wire: WireFormat) -> Result<Self, WireFormatError> {
        if !wire.converts_to(T::KIND) {
            return Err(WireFormatError::Mismatch {
                wire,
                item: T::NAME,
            });
        }
        let (unit, items_per_unit) = wire.unit(std::mem::size_of::<T>());
        let f: fn(&[u8], &mut [T]) -> usize = match (wire, T::KIND) {
            (WireFormat::Plain, _) => copy_plain::<T>,
            (w, ItemKind::ComplexF32) => convert::<T, f32>(w),
            (w, ItemKind::ComplexI16) => convert::<T, i16>(w),
            (w, ItemKind::ComplexI8) => convert::<T, i8>(w),
            (_, ItemKind::Other) => copy_plain::<T>,
        };
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

    /// Wire bytes of the smallest decodable unit.
    pub fn unit_bytes(&self) -> usize {
        self.unit
    }

    /// Items in one unit.
    pub fn items_per_unit(&self) -> usize {
        self.items_per_unit
    }

    /// Items `wire_bytes` bytes hold (whole units only).
    pub fn items_in(&self, wire_bytes: usize) -> usize {
        wire_bytes / self.unit * self.items_per_unit
    }

    /// Whether the wire bytes are the items' own memory, so that decoding is a plain copy:
    /// `plain`, and the encodings whose bytes are the item's layout on this (little-endian)
    /// host — `sc16_chdr` into `Complex<i16>`, `sc8_difi` and `sc8_item32_be` into
    /// `Complex<i8>`, `fc32` into `Complex<f32>`. A receiver may then put payloads straight into an output buffer.
    ///
    /// ```
    /// use fsdr_net_io::sample::{Decoder, WireFormat};
    /// use num_complex::{Complex, Complex32};
    ///
    /// assert!(Decoder::<Complex<i16>>::new(WireFormat::Sc16Chdr).unwrap().is_copy());
    /// assert!(!Decoder::<Complex32>::new(WireFormat::Sc16Chdr).unwrap().is_copy());
    /// ```
    pub fn is_copy(&self) -> bool {
        let le = cfg!(target_endian = "little");
        match (self.wire, T::KIND) {
            (WireFormat::Plain, _) | (_, ItemKind::Other) => true,
            (WireFormat::Sc16Chdr, ItemKind::ComplexI16)
            | (WireFormat::Fc32, ItemKind::ComplexF32) => le,
            (WireFormat::Sc8Difi | WireFormat::Sc8Item32Be, ItemKind::ComplexI8) => true,
            _ => false,
        }
    }

    /// Decodes the whole units of `wire` that fit `out`; returns the items written.
    pub fn decode(&self, wire: &[u8], out: &mut [T]) -> usize {
        (self.f)(wire, out)
    }

    /// Whether [`decode_in_place`](Self::decode_in_place) can decode inside the output
    /// itself: not a plain copy, and an item takes at least the bytes its wire form takes
    /// (`sc16` or `sc8` into `Complex<f32>`, `sc8` into `Complex<i16>`, UHD's item32
    /// layouts into items of their own size). A receiver may then put payloads into an
    /// output buffer behind the room of their items and decode them forward there.
    ///
    /// ```
    /// use fsdr_net_io::sample::{Decoder, WireFormat};
    /// use num_complex::{Complex, Complex32};
    ///
    /// assert!(Decoder::<Complex32>::new(WireFormat::Sc16Chdr).unwrap().decodes_in_place());
    /// assert!(Decoder::<Complex<i16>>::new(WireFormat::Sc16Item32Be).unwrap().decodes_in_place());
    /// // A plain copy: nothing to decode.
    /// assert!(!Decoder::<Complex<i16>>::new(WireFormat::Sc16Chdr).unwrap().decodes_in_place());
    /// ```
    pub fn decodes_in_place(&self) -> bool {
        !self.is_copy()
            && self.wire != WireFormat::Plain
            && std::mem::size_of::<T>() * self.items_per_unit >= self.unit
    }

    /// Decodes `wire_len` wire bytes that lie in `items`' own memory, from byte `at`, into
    /// `items` from its first: each chunk is read before the items decoded from it are
    /// written, so the wire bytes must lie far enough back that no item is written over
    /// bytes still to be read (`at` at least the bytes the items grow by: put at the end of
    /// their items' room, they always are). Returns the items decoded, or `None` — having
    /// changed nothing — when the decoder does not [decode in
    /// place](Self::decodes_in_place), `wire_len` is not whole units, or the bytes do not
    /// lie so.
    ///
    /// ```
    /// use fsdr_net_io::sample::{Decoder, WireFormat};
    /// use num_complex::Complex32;
    ///
    /// let dec = Decoder::<Complex32>::new(WireFormat::Sc16Chdr).unwrap();
    /// // Two sc16 samples (4 bytes each) at the end of the room of two Complex<f32> (16 bytes).
    /// let mut items = [Complex32::default(); 2];
    /// let wire: [i16; 4] = [16384, -16384, 0, 32767];
    /// bytemuck::cast_slice_mut::<Complex32, u8>(&mut items)[8..]
    ///     .copy_from_slice(bytemuck::cast_slice(&wire));
    /// assert_eq!(dec.decode_in_place(&mut items, 8, 8), Some(2));
    /// assert!((items[0].re - 0.5).abs() < 1e-4 && (items[0].im + 0.5).abs() < 1e-4);
    /// assert_eq!(items[1].re, 0.0);
    /// // Too far forward: the first item would be written over the second sample unread.
    /// assert_eq!(dec.decode_in_place(&mut items, 4, 8), None);
    /// ```
    pub fn decode_in_place(&self, items: &mut [T], at: usize, wire_len: usize) -> Option<usize> {
        /// Wire bytes read into the stack at a time where no run of units is clear of the
        /// bytes still to be read (8-byte aligned, so that sc16 is read as `i16`s on the
        /// vector path).
        const CHUNK: usize = 2048;
        /// Units decoded straight from the bytes behind them, at least.
        const DIRECT: usize = 16;
        let (unit, per) = (self.unit, self.items_per_unit);
        let item = std::mem::size_of::<T>() * per;
        let grows = item - unit.min(item);
        let units = wire_len / unit;
        if !self.decodes_in_place()
            || !wire_len.is_multiple_of(unit)
            || units * per > items.len()
            || at + wire_len > std::mem::size_of_val(items)
            || units * grows > at
        {
            return None;
        }
        let mut tmp = [0u64; CHUNK / 8];
        let tmp: &mut [u8] = bytemuck::cast_slice_mut(&mut tmp);
        let step = (CHUNK / unit).max(1) * unit;
        let mut done = 0;
        while done < units {
            let from = at + done * unit;
            // The units whose items end before the first byte still to be read are
            // decoded from there directly (half of what is left, when items grow): the
            // output below `from`, the input above. `units * grows <= at` keeps it ≥ 0.
            let clear = ((from - done * item) / item).min(units - done);
            if clear >= DIRECT {
                let bytes = bytemuck::cast_slice_mut::<T, u8>(items);
                let (below, above) = bytes.split_at_mut(from);
                let out = &mut below[done * item..(done + clear) * item];
                if let Ok(out) = bytemuck::try_cast_slice_mut::<u8, T>(out) {
                    (self.f)(&above[..clear * unit], out);
                    done += clear;
                    continue;
                }
            }
            // Otherwise through the stack: what this chunk's items are written over was
            // read already (into `tmp`, or by the chunks before).
            let k = ((units - done) * unit).min(step);
            tmp[..k].copy_from_slice(&bytemuck::cast_slice::<T, u8>(items)[from..from + k]);
            (self.f)(&tmp[..k], &mut items[done * per..]);
            done += k / unit;
        }
        Some(units * per)
    }
}

fn copy_plain<T: Item>(wire: &[u8], out: &mut [T]) -> usize {
    let size = std::mem::size_of::<T>();
    let n = (wire.len() / size).min(out.len());
    bytemuck::cast_slice_mut::<T, u8>(&mut out[..n]).copy_from_slice(&wire[..n * size]);
    n
}

/// A component type of complex items: `f32`, `i16` or `i8`.
pub(super) trait Component: bytemuck::Pod {
    fn from_i16(v: i16) -> Self;
    fn from_i8(v: i8) -> Self;
    fn from_f32(v: f32) -> Self;
}

impl Component for f32 {
    #[inline(always)]
    fn from_i16(v: i16) -> Self {
        f32::from(v) * SC16_SCALE
    }
    #[inline(always)]
    fn from_i8(v: i8) -> Self {
        f32::from(v) * SC8_SCALE
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl Component for i16 {
    #[inline(always)]
    fn from_i16(v: i16) -> Self {
        v
    }
    #[inline(always)]
    fn from_i8(v: i8) -> Self {
        i16::from(v)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v as i16
    }
}

impl Component for i8 {
    #[inline(always)]
    fn from_i16(v: i16) -> Self {
        v as i8
    }
    #[inline(always)]
    fn from_i8(v: i8) -> Self {
        v
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v as i8
    }
}

/// The converter from `wire` to complex items of component `C`.
fn convert<T: Item, C: Component>(wire: WireFormat) -> fn(&[u8], &mut [T]) -> usize {
    match wire {
        WireFormat::Sc16Chdr => sc16::<T, C, false, false>(),
        WireFormat::Sc16Item32Le => sc16::<T, C, false, true>(),
        WireFormat::Sc16Item32Be => sc16::<T, C, true, false>(),
        // UHD's item32 word holds i0 << 24 | q0 << 16 | i1 << 8 | q1 (checked against
        // libuhd's converters in tests/uhd_converters.rs).
        WireFormat::Sc8Item32Le => sc8::<T, C, 3, 2, 1, 0>,
        WireFormat::Sc8Item32Be => sc8::<T, C, 0, 1, 2, 3>,
        WireFormat::Sc8Difi => sc8::<T, C, 0, 1, 2, 3>,
        WireFormat::Fc32 => fc32::<T, C>,
        WireFormat::Plain => copy_plain::<T>,
    }
}

/// The components (I, Q, I, Q, …) of `out`, whose items are complex numbers of `C`.
fn components<T: Item, C: Component>(out: &mut [T]) -> &mut [C] {
    bytemuck::cast_slice_mut::<T, C>(out)
}

/// The sc16 converter: pairs of `int16` (`BE`: big-endian), `SWAP`: Q before I. The most
/// common wire format and the flowgraph's largest per-sample cost at 200 Msps (the profile
/// in docs/PERFORMANCE.md). On a CPU with AVX2 (detected once, when the decoder is made) the
/// same loop runs compiled for it: 6× faster than the baseline SSE2 build for CHDR to
/// `Complex<f32>`, 1.4–1.9× for UHD's item32 layouts (`cargo bench --bench formats --
/// decode/sc`).
fn sc16<T: Item, C: Component, const BE: bool, const SWAP: bool>() -> fn(&[u8], &mut [T]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return |wire, out| {
            // SAFETY: the CPU supports AVX2 (detected before this converter was chosen), the
            // only requirement of a function compiled with `target_feature(enable = "avx2")`.
            // Checked by: `sc16_compiled_for_avx2_and_baseline_agree` under ASan.
            unsafe { sc16_avx2::<T, C, BE, SWAP>(wire, out) }
        };
    }
    sc16_loop::<T, C, BE, SWAP>
}

/// [`sc16_loop`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sc16_avx2<T: Item, C: Component, const BE: bool, const SWAP: bool>(
    wire: &[u8],
    out: &mut [T],
) -> usize {
    sc16_loop::<T, C, BE, SWAP>(wire, out)
}

#[inline(always)]
fn sc16_loop<T: Item, C: Component, const BE: bool, const SWAP: bool>(
    wire: &[u8],
    out: &mut [T],
) -> usize {
    let n = (wire.len() / 4).min(out.len());
    let dst = &mut components::<T, C>(&mut out[..n])[..2 * n];
    let host = |v: i16| if BE { i16::from_be(v) } else { i16::from_le(v) };
    // The fast path reads the payload as `i16`s in place (it is 2-byte aligned whenever
    // the header length is even, which every format's is); the loop vectorises.
    if let Ok(src) = bytemuck::try_cast_slice::<u8, i16>(&wire[..4 * n]) {
        for (d, s) in dst.chunks_exact_mut(2).zip(src.chunks_exact(2)) {
            let (i, q) = if SWAP { (s[1], s[0]) } else { (s[0], s[1]) };
            d[0] = C::from_i16(host(i));
            d[1] = C::from_i16(host(q));
        }
    } else {
        for (d, s) in dst.chunks_exact_mut(2).zip(wire.chunks_exact(4)) {
            let a = i16::from_ne_bytes([s[0], s[1]]);
            let b = i16::from_ne_bytes([s[2], s[3]]);
            let (i, q) = if SWAP { (b, a) } else { (a, b) };
            d[0] = C::from_i16(host(i));
            d[1] = C::from_i16(host(q));
        }
    }
    n
}

/// sc8: every 4 bytes hold two samples; `I0, Q0, I1, Q1` are the byte positions of their
/// components.
fn sc8<
    T: Item,
    C: Component,
    const I0: usize,
    const Q0: usize,
    const I1: usize,
    const Q1: usize,
>(
    wire: &[u8],
    out: &mut [T],
) -> usize {
    let units = (wire.len() / 4).min(out.len() / 2);
    let mut n = 2 * units;
    let room = out.len();
    let dst = components::<T, C>(&mut out[..]);
    for (d, s) in dst
        .chunks_exact_mut(4)
        .zip(wire.chunks_exact(4))
        .take(units)
    {
        d[0] = C::from_i8(s[I0] as i8);
        d[1] = C::from_i8(s[Q0] as i8);
        d[2] = C::from_i8(s[I1] as i8);
        d[3] = C::from_i8(s[Q1] as i8);
    }
    // DIFI sc8 has 2-byte samples: one more may follow the whole words.
    if I0 == 0 && Q0 == 1 && wire.len() >= 4 * units + 2 && room > n {
        let s = &wire[4 * units..];
        dst[2 * n] = C::from_i8(s[0] as i8);
        dst[2 * n + 1] = C::from_i8(s[1] as i8);
        n += 1;
    }
    n
}

/// fc32: little-endian `float32` pairs.
fn fc32<T: Item, C: Component>(wire: &[u8], out: &mut [T]) -> usize {
    let n = (wire.len() / 8).min(out.len());
    let dst = &mut components::<T, C>(&mut out[..n])[..2 * n];
    for (d, s) in dst.iter_mut().zip(wire.chunks_exact(4)) {
        *d = C::from_f32(f32::from_le_bytes([s[0], s[1], s[2], s[3]]));
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::Complex;

    /// The dispatched decoder (AVX2 where the CPU has it) and the baseline loop agree bit for
    /// bit on every sc16 layout, for lengths that fill vector bodies and leave every
    /// remainder, aligned and not.
    #[test]
    fn sc16_compiled_for_avx2_and_baseline_agree() {
        fn check<
            T: Item + PartialEq + std::fmt::Debug,
            C: Component,
            const BE: bool,
            const SWAP: bool,
        >(
            bytes: &[u8],
        ) {
            let n = bytes.len() / 4;
            let mut a = vec![T::default(); n];
            let mut b = vec![T::default(); n];
            assert_eq!(sc16::<T, C, BE, SWAP>()(bytes, &mut a), n);
            assert_eq!(sc16_loop::<T, C, BE, SWAP>(bytes, &mut b), n);
            assert_eq!(
                bytemuck::cast_slice::<T, u8>(&a),
                bytemuck::cast_slice::<T, u8>(&b),
                "{n} samples, BE {BE}, SWAP {SWAP}"
            );
        }
        let raw = crate::testing::Noise::new().bytes(4 * 300 + 1);
        for shift in [0usize, 1] {
            for samples in (0..70).chain([255, 256, 257, 299]) {
                let p = &raw[shift..shift + 4 * samples];
                check::<Complex<f32>, f32, false, false>(p);
                check::<Complex<f32>, f32, false, true>(p);
                check::<Complex<f32>, f32, true, false>(p);
                check::<Complex<f32>, f32, true, true>(p);
                check::<Complex<i16>, i16, false, false>(p);
                check::<Complex<i16>, i16, true, false>(p);
                check::<Complex<i16>, i16, false, true>(p);
            }
        }
    }
}
