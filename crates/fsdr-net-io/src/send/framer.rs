//! [`Framer`]: writes consecutive headers of one format, with running sequence numbers,
//! timestamps that follow the sample count, and (VRT) the padding of a short last word.

use crate::format::{DataHeader, Format, FormatError};

/// Writes headers of one format with consecutive sequence numbers and timestamps.
///
/// Timestamps advance with the items sent: the datagram after `n` items carries
/// `start + round(n × ticks_per_item)`, so a shorter last datagram and a fractional number of
/// ticks per item stay exact.
///
/// ```
/// use fsdr_net_io::send::Framer;
/// use fsdr_net_io::Format;
///
/// let mut f = Framer::new(Format::Chdr).timestamps(1000, 2.5);
/// let mut dg = [0u8; 64];
/// let h = f.frame(&mut dg, 100, 0).unwrap();
/// assert_eq!(h, 16);
/// let info = Format::Chdr.parse(&dg).unwrap();
/// assert_eq!((info.seq, info.timestamp.unwrap().ticks(1.0)), (Some(0), Some(1000)));
/// f.frame(&mut dg, 100, 0).unwrap();
/// assert_eq!(Format::Chdr.parse(&dg).unwrap().timestamp.unwrap().ticks(1.0), Some(1250));
/// ```
#[derive(Debug, Clone)]
pub struct Framer {
    format: Format,
    seq: u64,
    stream_id: Option<u32>,
    time: Option<(u64, f64)>,
    /// VRT with DIFI's timestamps: the epoch (UTC seconds) and the integer sample rate; the
    /// time is then `time.0` picoseconds since the epoch plus the items' exact duration.
    utc: Option<(u32, u64)>,
    items: u64,
}

const PS_PER_S: u64 = 1_000_000_000_000;

impl Framer {
    /// Starts at the format's first sequence number, without timestamps.
    pub fn new(format: Format) -> Self {
        Self {
            format,
            seq: format.first_seq(),
            stream_id: None,
            time: None,
            utc: None,
            items: 0,
        }
    }

    /// VRT timestamps as DIFI asks for them: integer UTC seconds and picoseconds (TSI = UTC,
    /// TSF = real time), the first item at `epoch_seconds`, the rest exact for a stream of
    /// `sample_rate` samples per second (integer arithmetic: a fractional number of
    /// picoseconds per sample never drifts). [`Framer::next_timestamp`] and
    /// [`Framer::set_time`] then count picoseconds since the epoch.
    ///
    /// ```
    /// use fsdr_net_io::send::Framer;
    /// use fsdr_net_io::format::vrt::VrtPacket;
    /// use fsdr_net_io::Format;
    ///
    /// // 30.72 Msps: 32 552.083… ps a sample.
    /// let mut f = Framer::new(Format::Vrt).utc_timestamps(1_700_000_000, 30_720_000);
    /// let mut dg = vec![0u8; f.header_len() + 4 * 364];
    /// for _ in 0..1000 {
    ///     f.frame(&mut dg, 364, 0).unwrap();
    /// }
    /// // 364 000 samples later: 11.848958333… ms, rounded to the picosecond.
    /// assert_eq!(f.next_timestamp(), Some(11_848_958_333));
    /// assert_eq!(f.next_utc(), Some((1_700_000_000, 11_848_958_333)));
    /// f.frame(&mut dg, 364, 0).unwrap();
    /// let p = VrtPacket::new_checked(&dg[..]).unwrap();
    /// assert_eq!(p.integer_timestamp(), Some(1_700_000_000));
    /// assert_eq!(p.fractional_timestamp(), Some(11_848_958_333));
    /// ```
    pub fn utc_timestamps(mut self, epoch_seconds: u32, sample_rate: u64) -> Self {
        let rate = sample_rate.max(1);
        self.time = Some((0, PS_PER_S as f64 / rate as f64));
        self.utc = Some((epoch_seconds, rate));
        self
    }

    /// With [`Framer::utc_timestamps`]: the next datagram's time as (UTC seconds,
    /// picoseconds within the second).
    pub fn next_utc(&self) -> Option<(u32, u64)> {
        let (epoch, _) = self.utc?;
        let ps = self.next_timestamp()?;
        let seconds = u64::from(epoch) + ps / PS_PER_S;
        Some((u32::try_from(seconds).unwrap_or(u32::MAX), ps % PS_PER_S))
    }

    /// Adds timestamps starting at `start` ticks, `ticks_per_item` per item sent. A
    /// `ticks_per_item` that is not a finite number ≥ 0 makes every [`Framer::frame`] an
    /// error ([`FormatError::Field`]) rather than a datagram with a meaningless time.
    ///
    /// ```
    /// use fsdr_net_io::send::Framer;
    /// use fsdr_net_io::format::FormatError;
    /// use fsdr_net_io::Format;
    ///
    /// let mut f = Framer::new(Format::Chdr).timestamps(0, f64::NAN);
    /// let e = f.frame(&mut [0u8; 64], 10, 0).unwrap_err();
    /// assert!(matches!(e, FormatError::Field(_)));
    /// ```
    pub fn timestamps(mut self, start: u64, ticks_per_item: f64) -> Self {
        self.time = Some((start, ticks_per_item));
        self
    }

    /// Re-anchors the timestamps: the next datagram starts at `ticks`, later ones follow the
    /// items sent from there (a burst's `tx_time`). False, and nothing changes, when the
    /// framer writes no timestamps.
    ///
    /// ```
    /// use fsdr_net_io::send::Framer;
    /// use fsdr_net_io::Format;
    ///
    /// let mut f = Framer::new(Format::Chdr).timestamps(0, 2.0);
    /// let mut dg = [0u8; 64];
    /// f.frame(&mut dg, 10, 0).unwrap();
    /// assert!(f.set_time(1_000));
    /// assert_eq!(f.next_timestamp(), Some(1_000));
    /// f.frame(&mut dg, 10, 0).unwrap();
    /// assert_eq!(f.next_timestamp(), Some(1_020));
    /// assert!(!Framer::new(Format::Chdr).set_time(5));
    /// ```
    pub fn set_time(&mut self, ticks: u64) -> bool {
        match &mut self.time {
            Some((start, _)) => {
                *start = ticks;
                self.items = 0;
                true
            }
            None => false,
        }
    }

    /// Sets the stream identifier (VRT stream ID, CHDR destination endpoint: 16 bits, so
    /// that a larger one makes [`Framer::frame`] an error, never a truncated endpoint).
    pub fn stream_id(mut self, id: u32) -> Self {
        self.stream_id = Some(id);
        self
    }

    /// Sets the next sequence number (for restarts and fault injection).
    pub fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// The next sequence number (unreduced).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Header length of every datagram this framer writes.
    pub fn header_len(&self) -> usize {
        DataHeader {
            timestamp: self.time.map(|_| 0),
            utc_seconds: self.utc.map(|u| u.0),
            ..Default::default()
        }
        .header_len(self.format)
    }

    /// Bytes after the padding of a datagram that ends a burst (`eob`) or not: VRT's
    /// end-of-burst trailer word, [`Format::trailer_len`].
    pub fn trailer_len(&self, eob: bool) -> usize {
        self.format.trailer_len(eob)
    }

    /// Bytes of padding a payload of `payload` bytes needs (VRT: up to the next 32-bit word;
    /// 0 for other formats).
    pub fn pad_for(&self, payload: usize) -> usize {
        match self.format {
            Format::Vrt => (4 - payload % 4) % 4,
            _ => 0,
        }
    }

    /// The timestamp the next datagram will carry.
    pub fn next_timestamp(&self) -> Option<u64> {
        if let (Some((start, _)), Some((_, rate))) = (self.time, self.utc) {
            // Picoseconds of `items` samples, rounded to the nearest, exactly.
            let r = u128::from(rate);
            let ps = (u128::from(self.items) * u128::from(PS_PER_S) + r / 2) / r;
            return Some(start.wrapping_add(u64::try_from(ps).unwrap_or(u64::MAX)));
        }
        self.time
            .map(|(start, tpi)| start.wrapping_add((self.items as f64 * tpi).round() as u64))
    }

    /// Writes the header of the next datagram, which carries `items` items followed by `pad`
    /// bytes of padding (the whole of `datagram` is the datagram), and moves on; returns the
    /// header length.
    pub fn frame(
        &mut self,
        datagram: &mut [u8],
        items: u64,
        pad: usize,
    ) -> Result<usize, FormatError> {
        self.frame_with(datagram, items, pad, false)
    }

    /// As [`Framer::frame`], for the last datagram of a burst: it carries the end-of-burst
    /// flag (CHDR's EOB; in VRT a trailer word after the padding, so `datagram` is
    /// [`Framer::trailer_len`] bytes longer), as a USRP marks the last packet of a burst and
    /// of a stream it stops. Receivers count it
    /// ([`DepacketizerStats::ends_of_burst`](crate::depacketizer::DepacketizerStats::ends_of_burst)),
    /// so that a lost last packet can be seen.
    pub fn frame_end_of_burst(
        &mut self,
        datagram: &mut [u8],
        items: u64,
        pad: usize,
    ) -> Result<usize, FormatError> {
        self.frame_with(datagram, items, pad, true)
    }

    fn frame_with(
        &mut self,
        datagram: &mut [u8],
        items: u64,
        pad: usize,
        eob: bool,
    ) -> Result<usize, FormatError> {
        if let Some((_, tpi)) = self.time.filter(|(_, t)| !(t.is_finite() && *t >= 0.0)) {
            return Err(FormatError::Field(format!(
                "ticks per item must be finite and not negative, not {tpi}"
            )));
        }
        let (timestamp, utc_seconds) = match self.next_utc() {
            Some((s, ps)) if self.format == Format::Vrt => (Some(ps), Some(s)),
            _ => (self.next_timestamp(), None),
        };
        let fields = DataHeader {
            seq: self.seq,
            timestamp,
            eob,
            stream_id: self.stream_id,
            pad,
            utc_seconds,
        };
        let h = self.format.emit_header(datagram, &fields)?;
        self.skip(1, items);
        Ok(h)
    }

    /// Moves on by `datagrams` datagrams of `items` items in all, without writing (a
    /// sender-side loss).
    pub fn skip(&mut self, datagrams: u64, items: u64) {
        self.seq = self.seq.wrapping_add(datagrams);
        self.items += items;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vrt_pads_to_a_word_and_the_receiver_sees_the_true_payload() {
        let mut f = Framer::new(Format::Vrt).timestamps(0, 1.0);
        for payload in 1..=9usize {
            let pad = f.pad_for(payload);
            let h = f.header_len();
            let mut dg = vec![0xeeu8; h + payload + pad];
            f.frame(&mut dg, payload as u64, pad).unwrap();
            let info = Format::Vrt.parse(&dg).unwrap();
            assert_eq!(info.payload_len as usize, payload, "payload {payload}");
            assert!(dg[h + payload..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn a_chdr_stream_id_beyond_16_bits_is_an_error_not_a_truncated_endpoint() {
        let mut dg = [0u8; 64];
        let mut f = Framer::new(Format::Chdr).stream_id(0x1_0005);
        assert!(matches!(f.frame(&mut dg, 4, 0), Err(FormatError::Field(_))));
        let mut f = Framer::new(Format::Chdr).stream_id(0xffff);
        f.frame(&mut dg, 4, 0).unwrap();
        assert_eq!(Format::Chdr.parse(&dg).unwrap().stream_id, Some(0xffff));
    }

    #[test]
    fn timestamps_follow_items_exactly() {
        let mut f = Framer::new(Format::Chdr).timestamps(10, 1.5);
        let mut dg = [0u8; 32];
        let mut seen = Vec::new();
        for items in [3u64, 3, 1, 5] {
            f.frame(&mut dg, items, 0).unwrap();
            seen.push(
                Format::Chdr
                    .parse(&dg)
                    .unwrap()
                    .timestamp
                    .unwrap()
                    .ticks(1.0)
                    .unwrap(),
            );
        }
        assert_eq!(seen, [10, 15, 19, 21]); // 0, 4.5→5 (rounded), 9, 10.5→11 ticks after 10
        f.skip(2, 10);
        assert_eq!(f.next_timestamp(), Some(10 + 33)); // 22 items × 1.5
    }
}
