//! Stream item types the UDP blocks carry, and how payload bytes become items.
//!
//! Items travel as their little-endian bytes (`u8`, `i16`, `f32`, `Complex<i16>`,
//! `Complex<f32>`), except for USRP `sc16` payloads, which [`Sc16`] converts to
//! `Complex<f32>` as UHD does: each 16-bit component scaled by 1/32767.
//!
//! UHD puts sc16 on the wire in two orders. CHDR (UHD 4 remote streaming, RFNoC) stores each
//! sample as I then Q, each a little-endian `i16` ([`IqOrder::IQ`]); the older `item32`
//! layout packs I in the upper and Q in the lower half of a little-endian 32-bit word, so Q's
//! bytes come first ([`IqOrder::QI`]).
//!
//! ```
//! use fsdr_net::sample::{IqOrder, Sc16};
//! use num_complex::Complex32;
//!
//! let wire = [0xff, 0x7f, 0x01, 0x80]; // I = 32767, Q = -32767
//! let mut out = [Complex32::default()];
//! Sc16 { order: IqOrder::IQ }.decode(&wire, &mut out);
//! assert_eq!(out[0], Complex32::new(1.0, -1.0));
//! ```

use num_complex::{Complex, Complex32};

/// UHD's scale from sc16 to fc32.
pub const SC16_SCALE: f32 = 1.0 / 32767.0;

/// A plain-data item: any bit pattern is a valid value and it has no padding, so a payload
/// can be copied into it byte for byte.
///
/// # Safety
/// Implementors must have no padding bytes and accept every bit pattern.
pub unsafe trait PlainItem:
    Copy + Default + std::fmt::Debug + Send + Sync + 'static
{
}

// SAFETY: integers and floats accept every bit pattern and have no padding; `Complex<T>` is
// `repr(C)` with two fields of the same type.
unsafe impl PlainItem for u8 {}
// SAFETY: as above.
unsafe impl PlainItem for i8 {}
// SAFETY: as above.
unsafe impl PlainItem for i16 {}
// SAFETY: as above.
unsafe impl PlainItem for u16 {}
// SAFETY: as above.
unsafe impl PlainItem for i32 {}
// SAFETY: as above.
unsafe impl PlainItem for u32 {}
// SAFETY: as above.
unsafe impl PlainItem for i64 {}
// SAFETY: as above.
unsafe impl PlainItem for u64 {}
// SAFETY: as above.
unsafe impl PlainItem for f32 {}
// SAFETY: as above.
unsafe impl PlainItem for f64 {}
// SAFETY: as above.
unsafe impl PlainItem for Complex<i16> {}
// SAFETY: as above.
unsafe impl PlainItem for Complex<f32> {}

/// The bytes of a slice of plain items.
pub fn as_bytes<T: PlainItem>(items: &[T]) -> &[u8] {
    // SAFETY: PlainItem has no padding, so every byte is initialised.
    unsafe { std::slice::from_raw_parts(items.as_ptr().cast(), std::mem::size_of_val(items)) }
}

/// The bytes of a mutable slice of plain items.
pub fn as_bytes_mut<T: PlainItem>(items: &mut [T]) -> &mut [u8] {
    // SAFETY: PlainItem accepts every bit pattern, so any bytes written are a valid value.
    unsafe {
        std::slice::from_raw_parts_mut(items.as_mut_ptr().cast(), std::mem::size_of_val(items))
    }
}

/// Order of the two 16-bit components of an sc16 sample on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IqOrder {
    /// I then Q, each little-endian (CHDR, UHD 4 remote streaming).
    #[default]
    IQ,
    /// Q then I, each little-endian (UHD's little-endian `item32`: I in the upper half).
    QI,
}

/// USRP sc16 → `Complex<f32>`, scaled by 1/32767.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sc16 {
    /// Component order on the wire.
    pub order: IqOrder,
}

impl Sc16 {
    /// Bytes per sample on the wire.
    pub const WIRE_BYTES: usize = 4;

    /// Decodes `min(wire.len() / 4, out.len())` samples; returns how many.
    pub fn decode(&self, wire: &[u8], out: &mut [Complex32]) -> usize {
        let n = (wire.len() / 4).min(out.len());
        let (a, b) = match self.order {
            IqOrder::IQ => (0, 2),
            IqOrder::QI => (2, 0),
        };
        for (o, w) in out[..n].iter_mut().zip(wire.chunks_exact(4)) {
            let i = i16::from_le_bytes([w[a], w[a + 1]]);
            let q = i16::from_le_bytes([w[b], w[b + 1]]);
            *o = Complex32::new(f32::from(i) * SC16_SCALE, f32::from(q) * SC16_SCALE);
        }
        n
    }

    /// Encodes samples (clamped to ±1) for a sender; returns bytes written.
    pub fn encode(&self, samples: &[Complex32], wire: &mut [u8]) -> usize {
        let n = samples.len().min(wire.len() / 4);
        let (a, b) = match self.order {
            IqOrder::IQ => (0, 2),
            IqOrder::QI => (2, 0),
        };
        for (s, w) in samples[..n].iter().zip(wire.chunks_exact_mut(4)) {
            let i = (s.re.clamp(-1.0, 1.0) * 32767.0).round() as i16;
            let q = (s.im.clamp(-1.0, 1.0) * 32767.0).round() as i16;
            w[a..a + 2].copy_from_slice(&i.to_le_bytes());
            w[b..b + 2].copy_from_slice(&q.to_le_bytes());
        }
        4 * n
    }
}

/// How a source turns payload bytes into items of type `T`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decoder<T> {
    /// Bytes of one item on the wire.
    pub(crate) wire_bytes: usize,
    pub(crate) decode: fn(&[u8], &mut [T]) -> usize,
}

fn copy_plain<T: PlainItem>(wire: &[u8], out: &mut [T]) -> usize {
    let n = (wire.len() / std::mem::size_of::<T>()).min(out.len());
    as_bytes_mut(&mut out[..n]).copy_from_slice(&wire[..n * std::mem::size_of::<T>()]);
    n
}

impl<T: PlainItem> Decoder<T> {
    pub(crate) fn plain() -> Self {
        Self {
            wire_bytes: std::mem::size_of::<T>(),
            decode: copy_plain::<T>,
        }
    }
}

impl Decoder<Complex32> {
    pub(crate) fn sc16(order: IqOrder) -> Self {
        fn iq(w: &[u8], o: &mut [Complex32]) -> usize {
            Sc16 { order: IqOrder::IQ }.decode(w, o)
        }
        fn qi(w: &[u8], o: &mut [Complex32]) -> usize {
            Sc16 { order: IqOrder::QI }.decode(w, o)
        }
        Self {
            wire_bytes: Sc16::WIRE_BYTES,
            decode: match order {
                IqOrder::IQ => iq,
                IqOrder::QI => qi,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sc16_vectors_in_both_orders() {
        // I = 16384, Q = -8192 ; I = -32768, Q = 0.
        let iq = [0x00, 0x40, 0x00, 0xe0, 0x00, 0x80, 0x00, 0x00];
        let mut out = [Complex32::default(); 2];
        assert_eq!(Sc16 { order: IqOrder::IQ }.decode(&iq, &mut out), 2);
        assert_eq!(out[0], Complex32::new(16384.0 / 32767.0, -8192.0 / 32767.0));
        assert_eq!(out[1], Complex32::new(-32768.0 / 32767.0, 0.0));
        // The same samples as UHD's item32 little-endian: word = I << 16 | Q.
        let word0 = (16384u32 << 16) | (-8192i16 as u16 as u32);
        let word1 = 0x8000u32 << 16; // Q = 0
        let mut qi = word0.to_le_bytes().to_vec();
        qi.extend_from_slice(&word1.to_le_bytes());
        let mut out2 = [Complex32::default(); 2];
        Sc16 { order: IqOrder::QI }.decode(&qi, &mut out2);
        assert_eq!(out, out2);
    }

    #[test]
    fn sc16_encode_decode_round_trip() {
        let s = [Complex32::new(0.5, -0.25), Complex32::new(1.0, -1.0)];
        for order in [IqOrder::IQ, IqOrder::QI] {
            let mut wire = [0u8; 8];
            let c = Sc16 { order };
            assert_eq!(c.encode(&s, &mut wire), 8);
            let mut back = [Complex32::default(); 2];
            c.decode(&wire, &mut back);
            for (a, b) in s.iter().zip(back) {
                assert!((a - b).norm() < 1e-4);
            }
        }
    }

    #[test]
    fn plain_copy_and_partial() {
        let wire = [1u8, 0, 2, 0, 3];
        let mut out = [0i16; 4];
        assert_eq!(copy_plain::<i16>(&wire, &mut out), 2);
        assert_eq!(out[..2], [1, 2]);
    }
}
