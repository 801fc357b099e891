//! Samples that need conversion (sc16 or sc8 into `Complex<f32>`, UHD's item32 layouts):
//! a payload lands at the end of the room its items take and is decoded forward there
//! ([`Decoder::decode_in_place`]), and from then on it is placed like a payload whose bytes
//! are the items. One placed ahead of a gap is decoded into its place (`ahead.rs`); one
//! copied back out of its place (`evacuate`) is encoded back into exactly the wire's bytes.

use super::ItemBuffer;
use super::layout::Layout;
use super::receiver::{Pattern, Receive};
use crate::sample::{Decoder, Encoder, Item};

impl<T: Item, B: ItemBuffer<T>> Receive<T, B> {
    /// Whether payloads can be placed: their bytes are the items', or they are decoded
    /// where they landed.
    pub(super) fn places(&self) -> bool {
        let dec = self.dp.decoder();
        dec.is_copy() || dec.decodes_in_place()
    }

    /// Whether datagrams may be placed ahead of a gap: their items can be copied back out
    /// as the wire's bytes if the gap comes out otherwise.
    pub(super) fn places_ahead(&self) -> bool {
        self.dp.decoder().is_copy() || self.reencode.is_some()
    }

    /// Bytes of the output the items of a payload of the stream's pattern take (its body
    /// area lies at their end).
    pub(super) fn region(&self, p: Pattern) -> usize {
        self.dp.decoder().items_in(p.payload) * std::mem::size_of::<T>()
    }

    /// Decodes the `payload` wire bytes that landed in body area `l` of the buffer the call
    /// laid out in into the items of its room. True when done (at once where the wire's
    /// bytes are the items); false, with nothing changed, when it cannot be.
    pub(super) fn decode_landed(&mut self, l: Layout, payload: usize) -> bool {
        let dec = *self.dp.decoder();
        if dec.is_copy() {
            return true;
        }
        let Some(c) = self.layout_buffer() else {
            return false;
        };
        let items = &mut c.buffer.items()[l.items_at / std::mem::size_of::<T>()..];
        dec.decode_in_place(items, l.at - l.items_at, payload) == Some(dec.items_in(payload))
    }

    /// The encoder that turns decoded items back into exactly the wire's bytes, for decoders
    /// that decode in place and where one exists (every such pair but sc8 into
    /// `Complex<i16>`); `None` where decoding is a plain copy.
    pub(super) fn reencoder(dec: &Decoder<T>) -> Option<Encoder<T>> {
        if dec.is_copy() || !dec.decodes_in_place() {
            return None;
        }
        Encoder::new(dec.wire()).ok()
    }
}

/// Wire bytes of `items` for a datagram copied back out of its place: the items' own bytes,
/// or encoded back with `reencode`.
pub(super) fn wire_bytes<T: Item>(
    items: &[T],
    reencode: Option<&Encoder<T>>,
    len: usize,
) -> Vec<u8> {
    match reencode {
        None => bytemuck::cast_slice::<T, u8>(items).to_vec(),
        Some(e) => {
            let mut out = vec![0u8; len];
            e.encode(items, &mut out);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::WireFormat;
    use num_complex::{Complex, Complex32};

    /// Every sample value of every encoding that decodes in place comes back as its own wire
    /// bytes when encoded again: a datagram copied back out of its place is decoded to the
    /// same items a second time.
    #[test]
    fn decoded_samples_encode_back_to_their_wire_bytes() {
        fn check<T: Item>(wire: WireFormat) -> bool {
            let dec = Decoder::<T>::new(wire).unwrap();
            let Some(enc) = Receive::<T, Vec<T>>::reencoder(&dec) else {
                return false;
            };
            let bytes: Vec<u8> = (0..=u16::MAX).flat_map(|v| v.to_le_bytes()).collect();
            let bytes = &bytes[..bytes.len() / dec.unit_bytes() * dec.unit_bytes()];
            let mut items = vec![T::default(); dec.items_in(bytes.len())];
            assert_eq!(dec.decode(bytes, &mut items), items.len());
            assert_eq!(
                wire_bytes(&items, Some(&enc), bytes.len()),
                bytes,
                "{wire} into {}",
                T::NAME
            );
            true
        }
        let mut checked = 0;
        for &w in WireFormat::ALL {
            checked += usize::from(check::<Complex32>(w));
            if Decoder::<Complex<i16>>::new(w).is_ok() {
                checked += usize::from(check::<Complex<i16>>(w));
            }
            if Decoder::<Complex<i8>>::new(w).is_ok() {
                checked += usize::from(check::<Complex<i8>>(w));
            }
        }
        // The three sc16 and three sc8 layouts into Complex<f32>, sc16's item32 layouts into
        // Complex<i16>, sc8's little-endian word into Complex<i8>.
        assert_eq!(checked, 9);
    }
}
