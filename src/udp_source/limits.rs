//! The bounds a source's settings are checked against at build, so that nothing sized or
//! timed from them overflows later: output buffers, the in-place buffers in circulation, and
//! the block's timings (the engine's own are checked by
//! [`EngineConfig::validate`](fsdr_net_io::EngineConfig::validate)); and a backend's own
//! settings against the backend chosen.

use std::time::Duration;

use fsdr_net_io::Backend;
use fsdr_net_io::engine::MAX_SETTING_DURATION;
use fsdr_net_io::sample::{Decoder, Item};

use crate::Error;

/// The largest output buffer a source asks FutureSDR for, in bytes.
const MAX_OUTPUT_BYTES: usize = 1 << 30;
/// The most buffers the in-place source keeps in circulation.
const MAX_IN_PLACE_BUFFERS: usize = 4096;
/// The most streams one `MultiUdpSource` takes (an output buffer each), as the emulator's
/// most channels.
pub(super) const MAX_STREAMS: usize = fsdr_net_io::emulator::MAX_CHANNELS;
/// The most memory the in-place source's buffers in circulation may take, in bytes.
const MAX_IN_PLACE_BYTES: usize = 16 << 30;

/// Items of an output buffer that holds `datagrams` datagrams of up to `slot_size` bytes; an
/// error when that would take more than a GiB.
pub(super) fn output_items<T: Item>(
    datagrams: usize,
    decoder: &Decoder<T>,
    slot_size: usize,
) -> Result<usize, Error> {
    let per = decoder.items_in(slot_size) + decoder.items_per_unit();
    datagrams
        .checked_mul(per)
        .filter(|n| {
            n.checked_mul(std::mem::size_of::<T>())
                .is_some_and(|b| b <= MAX_OUTPUT_BYTES)
        })
        .ok_or_else(|| {
            Error::config(format!(
                "an output buffer of {datagrams} datagrams of up to {slot_size} bytes takes \
                 over 1 GiB: fewer buffer_datagrams (with several streams, also a smaller \
                 reorder window: each output holds twice the window)"
            ))
        })
}

/// Datagrams an in-place buffer holds by default: 64 of items that are the wire's bytes, and
/// the same wire bytes' worth of converted ones (32 of sc16 as `Complex<f32>`, 16 of sc8),
/// so that the buffers in circulation take the same memory whatever the items. Converted
/// items write twice or four times the wire's bytes; in a ring twice the size they land in
/// memory the cache no longer holds (64 sc16 datagrams as `Complex<f32>` a buffer cost 1.21–1.31×
/// the bare loop at 800 MB/s, 32 1.18–1.20×: docs/measurements/2026-11-28.md).
pub(super) fn in_place_datagrams<T: Item>(decoder: &Decoder<T>) -> usize {
    let item_bytes = decoder.items_per_unit() * std::mem::size_of::<T>();
    (64 * decoder.unit_bytes() / item_bytes.max(1)).clamp(1, 64)
}

/// Checks the in-place source's `buffers` of `bytes` each: 1..=4096 of them, 16 GiB at most.
pub(super) fn check_in_place(buffers: usize, bytes: usize) -> Result<(), Error> {
    if buffers == 0 || buffers > MAX_IN_PLACE_BUFFERS {
        return Err(Error::config(format!(
            "in_place_buffers {buffers} outside 1..={MAX_IN_PLACE_BUFFERS}"
        )));
    }
    match bytes.checked_mul(buffers) {
        Some(total) if total <= MAX_IN_PLACE_BYTES => Ok(()),
        _ => Err(Error::config(format!(
            "{buffers} in_place_buffers of {bytes} bytes each take over {} GiB: fewer \
             in_place_buffers or buffer_datagrams",
            MAX_IN_PLACE_BYTES >> 30
        ))),
    }
}

/// Checks the block's timing settings, each `(name, value)`: a day at most, as the engine's.
pub(super) fn check_durations(settings: &[(&str, Option<Duration>)]) -> Result<(), Error> {
    for &(name, d) in settings {
        if let Some(d) = d.filter(|d| *d > MAX_SETTING_DURATION) {
            return Err(Error::config(format!(
                "{name} {d:?} is over {} hours, the longest a timing setting may be",
                MAX_SETTING_DURATION.as_secs() / 3600
            )));
        }
    }
    Ok(())
}

/// The backend of a builder: the one `chosen` (by `.backend(…)`), else the one whose own
/// setting was given (`reuseport(…)`, `uring_depth(…)`), else `None` (the default). A
/// backend's own setting given with another backend is an error, never silently ignored.
pub(super) fn chosen_backend(
    chosen: Option<Backend>,
    reuseport: bool,
    uring_depth: bool,
) -> Result<Option<Backend>, Error> {
    let mut chosen = chosen;
    for (set, name, backend) in [
        (reuseport, "reuseport(…)", Backend::Reuseport),
        (uring_depth, "uring_depth(…)", Backend::Uring),
    ] {
        match chosen {
            _ if !set => {}
            None => chosen = Some(backend),
            Some(b) if b == backend => {}
            Some(b) => {
                return Err(Error::config(format!(
                    "{name} is a setting of backend {backend}, but backend {b} was chosen"
                )));
            }
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsdr_net_io::sample::WireFormat;
    use num_complex::{Complex, Complex32};

    #[test]
    fn in_place_buffers_hold_the_same_wire_bytes_whatever_the_items() {
        let d = |w| Decoder::<Complex32>::new(w).unwrap();
        assert_eq!(in_place_datagrams(&d(WireFormat::Sc16Chdr)), 32);
        assert_eq!(in_place_datagrams(&d(WireFormat::Sc8Difi)), 16);
        assert_eq!(in_place_datagrams(&d(WireFormat::Fc32)), 64);
        let i16s = Decoder::<Complex<i16>>::new(WireFormat::Sc16Chdr).unwrap();
        assert_eq!(in_place_datagrams(&i16s), 64);
        let bytes = Decoder::<u8>::new(WireFormat::Plain).unwrap();
        assert_eq!(in_place_datagrams(&bytes), 64);
    }
}
