//! Stream items and wire sample encodings: how payload bytes become items and back.
//!
//! [`WireFormat`] names every encoding the way UHD does, and [`Decoder`]/[`Encoder`] convert
//! between it and the items of a stream bit for bit as UHD's converters of the same name do:
//! `sc16` to `Complex<f32>` multiplies each `int16` by `float(1/32767)`, `sc8` by
//! `float(256/32767)` (UHD's `peak = 1` scaling), `Complex<i16>`/`Complex<i8>` keep the
//! integers unscaled, and `Complex<f32>` to `sc16` rounds `x · 32767` to nearest (ties to even) and
//! saturates, as libuhd's SSE2 converter does. `tests/uhd_converters.rs` checks every encoding
//! bit for bit against libuhd's converters.
//!
//! | name | bytes of one sample on the wire | used by |
//! |---|---|---|
//! | `sc16_chdr` | I lo, I hi, Q lo, Q hi (two little-endian `int16`) | CHDR, UHD 4 remote streaming |
//! | `sc16_item32_le` | Q lo, Q hi, I lo, I hi (a little-endian word, I in the upper half) | UHD 3 little-endian links |
//! | `sc16_item32_be` | I hi, I lo, Q hi, Q lo (a big-endian word, I in the upper half) | UHD VRT devices (N2xx), VITA-49 and DIFI sc16 |
//! | `sc8_item32_le` | two samples per little-endian word: Q1, I1, Q0, I0 | UHD 3 |
//! | `sc8_item32_be` | two samples per big-endian word: I0, Q0, I1, Q1 | UHD VRT devices |
//! | `sc8_difi` | I, Q (two `int8`, in order) | DIFI / VITA-49 sc8 |
//! | `fc32` | I, Q as little-endian `float32` | UHD `fc32` over the wire |
//! | `plain` | the item's own bytes, as they are | raw streams, any item type |
//!
//! Each format has its default ([`WireFormat::default_for`]): CHDR `sc16_chdr`, VRT/DIFI
//! `sc16_item32_be`, the rest `plain`, and complex outputs of a non-complex wire format are an
//! error at build time, not garbage.
//!
//! ```
//! use fsdr_net_io::sample::{Decoder, WireFormat};
//! use num_complex::Complex32;
//!
//! let wire = [0x7f, 0xff, 0x80, 0x01]; // sc16_item32_be: I = 32767, Q = -32767
//! let d = Decoder::<Complex32>::new(WireFormat::Sc16Item32Be).unwrap();
//! let mut out = [Complex32::default()];
//! assert_eq!(d.decode(&wire, &mut out), 1);
//! assert_eq!(out[0], Complex32::new(1.0, -1.0));
//! ```

use std::fmt;
use std::str::FromStr;

use num_complex::Complex;

use crate::format::Format;

mod decode;
mod encode;

pub use decode::Decoder;
pub use encode::Encoder;

/// The scale UHD applies from `sc16` to floats: `float(1/32767)`.
pub const SC16_SCALE: f32 = (1.0f64 / 32767.0) as f32;
/// The scale UHD applies from `sc8` to floats with the default `peak` of 1:
/// `float(256/32767)`.
pub const SC8_SCALE: f32 = (256.0f64 / 32767.0) as f32;

/// What kind of item a stream carries, as far as sample conversion is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// `Complex<f32>`.
    ComplexF32,
    /// `Complex<i16>`.
    ComplexI16,
    /// `Complex<i8>`.
    ComplexI8,
    /// Anything else: bytes are copied as they are.
    Other,
}

/// A stream item: plain data (any bit pattern valid, no padding, `bytemuck::Pod`) that the
/// blocks can copy from and to payload bytes.
pub trait Item: bytemuck::Pod + Default + fmt::Debug + Send + Sync + 'static {
    /// Which conversions apply.
    const KIND: ItemKind;
    /// The item's name in messages.
    const NAME: &'static str;
}

macro_rules! items {
    ($($t:ty => $kind:ident),* $(,)?) => {
        $(impl Item for $t {
            const KIND: ItemKind = ItemKind::$kind;
            const NAME: &'static str = stringify!($t);
        })*
    };
}

items! {
    u8 => Other, i8 => Other, u16 => Other, i16 => Other, u32 => Other, i32 => Other,
    u64 => Other, i64 => Other, f32 => Other, f64 => Other,
    Complex<f32> => ComplexF32, Complex<i16> => ComplexI16, Complex<i8> => ComplexI8,
    Complex<f64> => Other,
}

/// A wire sample encoding. See the [module documentation](self) for the byte layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WireFormat {
    /// The item's own bytes.
    Plain,
    /// `sc16_chdr`: I then Q, little-endian `int16`.
    Sc16Chdr,
    /// `sc16_item32_le`: little-endian word, I in the upper half.
    Sc16Item32Le,
    /// `sc16_item32_be`: big-endian word, I in the upper half (VITA-49/DIFI sc16).
    Sc16Item32Be,
    /// `sc8_item32_le`: two samples per little-endian word.
    Sc8Item32Le,
    /// `sc8_item32_be`: two samples per big-endian word.
    Sc8Item32Be,
    /// DIFI sc8: I then Q, `int8`.
    Sc8Difi,
    /// `fc32`: little-endian `float32` I then Q.
    Fc32,
}

impl WireFormat {
    /// Every encoding.
    pub const ALL: &'static [WireFormat] = &[
        WireFormat::Plain,
        WireFormat::Sc16Chdr,
        WireFormat::Sc16Item32Le,
        WireFormat::Sc16Item32Be,
        WireFormat::Sc8Item32Le,
        WireFormat::Sc8Item32Be,
        WireFormat::Sc8Difi,
        WireFormat::Fc32,
    ];

    /// The name UHD uses (and the CLIs' `--wire-format`).
    pub fn name(&self) -> &'static str {
        match self {
            WireFormat::Plain => "plain",
            WireFormat::Sc16Chdr => "sc16_chdr",
            WireFormat::Sc16Item32Le => "sc16_item32_le",
            WireFormat::Sc16Item32Be => "sc16_item32_be",
            WireFormat::Sc8Item32Le => "sc8_item32_le",
            WireFormat::Sc8Item32Be => "sc8_item32_be",
            WireFormat::Sc8Difi => "sc8_difi",
            WireFormat::Fc32 => "fc32",
        }
    }

    /// VITA-49.2's Data Packet Payload Format field (CIF0 bit 15) for this encoding in a VRT
    /// data packet: link-efficient, complex Cartesian, signed fixed point, the item packing
    /// field as wide as the item (DIFI's form: `0xA00003CF_00000000` for 16-bit,
    /// `0xA00001C7_00000000` for 8-bit). `None` for the little-endian encodings (`fc32`
    /// included) and `plain`, which a VRT packet, big-endian, cannot describe.
    ///
    /// ```
    /// use fsdr_net_io::sample::WireFormat;
    /// assert_eq!(WireFormat::Sc16Item32Be.vita49_payload_format(), Some(0xA000_03CF_0000_0000));
    /// assert_eq!(WireFormat::Sc8Difi.vita49_payload_format(), Some(0xA000_01C7_0000_0000));
    /// ```
    pub fn vita49_payload_format(&self) -> Option<u64> {
        // Bits 63 (link-efficient), 62..61 (01: complex Cartesian), 60..56 (item format),
        // 43..38 (packing field size − 1), 37..32 (item size − 1).
        // Signed fixed point is item format 0.
        let word = |bits: u64| (1 << 63) | (1 << 61) | ((bits - 1) << 38) | ((bits - 1) << 32);
        match self {
            WireFormat::Sc16Item32Be => Some(word(16)),
            WireFormat::Sc8Item32Be | WireFormat::Sc8Difi => Some(word(8)),
            _ => None,
        }
    }

    /// The wire format a packet format carries by default: CHDR `sc16_chdr`, VRT/DIFI
    /// `sc16_item32_be`, others `plain`.
    pub fn native(format: Format) -> WireFormat {
        match format {
            Format::Chdr => WireFormat::Sc16Chdr,
            Format::Vrt => WireFormat::Sc16Item32Be,
            _ => WireFormat::Plain,
        }
    }

    /// The encoding for items `T` in `format` when none is asked for: the format's own
    /// (CHDR `sc16_chdr`, VRT `sc16_item32_be`, `plain` for the others) — an error where it
    /// does not convert to `T` (a CHDR stream into `f32` items would reinterpret sc16 bytes;
    /// that takes an explicit `plain`).
    ///
    /// ```
    /// use fsdr_net_io::{Format, WireFormat};
    /// use num_complex::Complex;
    ///
    /// assert_eq!(WireFormat::for_items::<Complex<f32>>(Format::Chdr), Ok(WireFormat::Sc16Chdr));
    /// assert_eq!(WireFormat::for_items::<u8>(Format::Seq64), Ok(WireFormat::Plain));
    /// assert!(WireFormat::for_items::<f32>(Format::Vrt).is_err());
    /// ```
    pub fn for_items<T: Item>(format: Format) -> Result<WireFormat, WireFormatError> {
        let native = Self::native(format);
        if native.converts_to(T::KIND) {
            Ok(native)
        } else {
            Err(WireFormatError::NotSamples {
                format,
                wire: native,
                item: T::NAME,
            })
        }
    }

    /// The default for items `T` in `format`: the format's native encoding when it converts
    /// to `T` (complex items), otherwise `plain`. The blocks use
    /// [`WireFormat::for_items`], which refuses the second case.
    pub fn default_for<T: Item>(format: Format) -> WireFormat {
        let native = Self::native(format);
        if native.converts_to(T::KIND) {
            native
        } else {
            WireFormat::Plain
        }
    }

    /// Wire bytes of the smallest decodable unit, and the items it holds.
    pub fn unit(&self, item_bytes: usize) -> (usize, usize) {
        match self {
            WireFormat::Plain => (item_bytes, 1),
            WireFormat::Sc16Chdr | WireFormat::Sc16Item32Le | WireFormat::Sc16Item32Be => (4, 1),
            WireFormat::Sc8Item32Le | WireFormat::Sc8Item32Be => (4, 2),
            WireFormat::Sc8Difi => (2, 1),
            WireFormat::Fc32 => (8, 1),
        }
    }

    fn is_sc16(&self) -> bool {
        matches!(
            self,
            WireFormat::Sc16Chdr | WireFormat::Sc16Item32Le | WireFormat::Sc16Item32Be
        )
    }

    fn is_sc8(&self) -> bool {
        matches!(
            self,
            WireFormat::Sc8Item32Le | WireFormat::Sc8Item32Be | WireFormat::Sc8Difi
        )
    }

    /// Whether this encoding converts to (and from) items of `kind`.
    pub fn converts_to(&self, kind: ItemKind) -> bool {
        match self {
            WireFormat::Plain => true,
            WireFormat::Fc32 => kind == ItemKind::ComplexF32,
            w if w.is_sc16() => matches!(kind, ItemKind::ComplexF32 | ItemKind::ComplexI16),
            w if w.is_sc8() => matches!(
                kind,
                ItemKind::ComplexF32 | ItemKind::ComplexI16 | ItemKind::ComplexI8
            ),
            _ => false,
        }
    }
}

impl fmt::Display for WireFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown wire format name, or one that does not convert to the stream's items.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireFormatError {
    /// No such name.
    #[error("unknown wire format {0:?} (expected one of {names})", names = WireFormat::ALL.iter().map(|w| w.name()).collect::<Vec<_>>().join(", "))]
    Unknown(String),
    /// The encoding does not produce these items.
    #[error("wire format {wire} does not convert to {item} items")]
    Mismatch {
        /// The encoding.
        wire: WireFormat,
        /// The item type.
        item: &'static str,
    },
    /// The packet format carries samples of an encoding these items are not.
    #[error(
        "{format} carries {wire} samples, which do not convert to {item} items: use \
         Complex<f32>, Complex<i16> or Complex<i8> items, or ask for the bytes as they are \
         with .wire_format(WireFormat::Plain)"
    )]
    NotSamples {
        /// The packet format.
        format: Format,
        /// Its encoding.
        wire: WireFormat,
        /// The item type.
        item: &'static str,
    },
}

impl FromStr for WireFormat {
    type Err = WireFormatError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.to_ascii_lowercase().replace('-', "_");
        Ok(match s.as_str() {
            "vrt_sc16" | "difi_sc16" | "sc16_be" => WireFormat::Sc16Item32Be,
            "difi_sc8" | "vrt_sc8" => WireFormat::Sc8Difi,
            "fc32_le" => WireFormat::Fc32,
            _ => *WireFormat::ALL
                .iter()
                .find(|w| w.name() == s)
                .ok_or(WireFormatError::Unknown(s))?,
        })
    }
}

#[cfg(test)]
mod tests;
