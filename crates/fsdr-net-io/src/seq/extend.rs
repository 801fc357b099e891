//! [`SeqExtender`]: widens a short sequence number (VITA-49's 4 bits, CHDR's 16) to 64 bits,
//! with the help of the packet timestamps where the format has them, so that the tracker and
//! the reorder stage work in a space where a lost packet can never look like a duplicate.
//!
//! A 4-bit counter repeats every 16 packets: after a loss, the counter alone cannot tell a gap
//! of 2 from a gap of 18, nor a packet 14 ahead from one 2 behind. A sample-count timestamp
//! can. The extender learns the stream's ticks per payload byte from two consecutive packets
//! and then, for every packet that is not simply the next one, picks the 64-bit number whose
//! low bits are the packet's counter and which lies nearest to where the timestamp says the
//! packet is. When counter and timestamp cannot agree (a device that re-armed its counter
//! while time went on), the stream restarts: the extender jumps far ahead, which the tracker
//! reports as one `Resync`.
//!
//! Without timestamps it falls back to the counter alone: nearest in either direction, so the
//! reorder window must stay below half the counter's period (the engine bounds it).
//!
//! ```
//! use fsdr_net_io::seq::SeqExtender;
//!
//! // VRT: 4-bit counter, 100 samples (400 bytes) per packet, TSF = sample count.
//! let mut x = SeqExtender::new(4, None);
//! assert_eq!(x.extend(0, Some(0), 400), 0);
//! assert_eq!(x.extend(1, Some(100), 400), 1);
//! // 17 packets lost: the counter says 2 ahead, the timestamp says 18.
//! assert_eq!(x.extend(3, Some(1_900), 400), 19);
//! ```

/// Counter periods a restart jumps ahead: far beyond any gap the tracker accepts (2^20
/// frames), so it is always a `Resync`.
const RESTART_PERIODS: u64 = 1 << 24;

#[derive(Debug, Clone, Copy)]
struct Newest {
    ext: u64,
    ticks: Option<u64>,
    payload: usize,
}

/// Extends short sequence numbers to 64 bits, with the help of timestamps: see the
/// [`seq`](crate::seq) module.
#[derive(Debug, Clone)]
pub struct SeqExtender {
    bits: u32,
    mask: u64,
    restart_seq: Option<u64>,
    newest: Option<Newest>,
    ticks_per_byte: Option<f64>,
}

impl SeqExtender {
    /// An extender for `bits`-bit counters (1..=63). `restart_seq`: the number a restarted
    /// sender begins with, recognised as a restart when it arrives out of turn (only useful
    /// for long counters and streams without timestamps).
    pub fn new(bits: u32, restart_seq: Option<u64>) -> Self {
        let bits = bits.clamp(1, 63);
        Self {
            bits,
            mask: (1u64 << bits) - 1,
            restart_seq,
            newest: None,
            ticks_per_byte: None,
        }
    }

    /// Ticks per payload byte learnt from consecutive packets, once known.
    pub fn ticks_per_byte(&self) -> Option<f64> {
        self.ticks_per_byte
    }

    fn restart(&mut self, seq: u64, ticks: Option<u64>, payload: usize) -> u64 {
        let base = self.newest.map_or(0, |n| n.ext >> self.bits);
        let ext = ((base + RESTART_PERIODS) << self.bits) | seq;
        self.newest = Some(Newest {
            ext,
            ticks,
            payload,
        });
        ext
    }

    /// The 64-bit number of a packet carrying counter `seq`, timestamp `ticks` (any linear
    /// time unit of the stream: CHDR ticks, VRT sample counts) and `payload` bytes.
    pub fn extend(&mut self, seq: u64, ticks: Option<u64>, payload: usize) -> u64 {
        let seq = seq & self.mask;
        let Some(n) = self.newest else {
            self.newest = Some(Newest {
                ext: seq,
                ticks,
                payload,
            });
            return seq;
        };
        let period = self.mask as i64 + 1;
        let d = (seq.wrapping_sub(n.ext) & self.mask) as i64;
        let plain = if d < period / 2 { d } else { d - period };
        let offset = if d == 1 {
            1
        } else if let (Some(t), Some(t0), Some(tpb)) = (ticks, n.ticks, self.ticks_per_byte)
            && n.payload > 0
        {
            let est = t.wrapping_sub(t0) as i64 as f64 / (tpb * n.payload as f64);
            let k = ((d as f64 - est) / period as f64).round() as i64;
            let o = d - k * period;
            if (o as f64 - est).abs() > (est.abs() / 8.0).max(1.0) {
                return self.restart(seq, ticks, payload);
            }
            o
        } else if self.restart_seq == Some(seq) {
            return self.restart(seq, ticks, payload);
        } else {
            plain
        };
        let ext = n.ext.wrapping_add(offset as u64);
        if offset == 1
            && let (Some(t), Some(t0)) = (ticks, n.ticks)
            && n.payload > 0
        {
            let dt = t.wrapping_sub(t0) as i64;
            if dt > 0 {
                self.ticks_per_byte = Some(dt as f64 / n.payload as f64);
            }
        }
        // Newer packets move the reference; so does one far behind (the start of a restarted
        // run, which the tracker then recognises). A late or duplicate one does not.
        if offset > 0 || offset < -(super::HISTORY as i64) {
            self.newest = Some(Newest {
                ext,
                ticks,
                payload,
            });
        }
        ext
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seq::{Reorder, SeqConfig, SeqEvent};

    /// A 4-bit stream of `n` packets of 100 samples with every `every`-th packet dropped and
    /// the rest through an extender and a reorder stage of window 64: the number of missed
    /// frames equals the number dropped, and nothing is a duplicate.
    fn drops(every: u64, n: u64, timestamps: bool) -> (u64, u64, u64) {
        let mut x = SeqExtender::new(4, None);
        let mut r = Reorder::new(SeqConfig::for_bits(64), 64);
        let mut out = Vec::new();
        let mut dropped = 0;
        for k in 0..n {
            if (k + 1) % every == 0 {
                dropped += 1;
                continue;
            }
            let ts = timestamps.then_some(k * 100);
            let ext = x.extend(k % 16, ts, 400);
            r.push(ext, k, &mut out);
        }
        r.flush_all(&mut out);
        let missed = out
            .iter()
            .map(|d| match d.event {
                SeqEvent::Gap { missed } => missed,
                _ => 0,
            })
            .sum();
        let dups = out
            .iter()
            .filter(|d| d.event == SeqEvent::Duplicate)
            .count() as u64;
        // The last drop has no successor when n is a multiple of `every`.
        let tail = u64::from(n.is_multiple_of(every));
        (missed, dups, dropped - tail)
    }

    #[test]
    fn four_bit_counter_with_timestamps_counts_every_drop() {
        for every in [7, 16, 17, 100, 1000] {
            let (missed, dups, dropped) = drops(every, 5000, true);
            assert_eq!((missed, dups), (dropped, 0), "drop every {every}");
        }
    }

    #[test]
    fn long_losses_are_sized_by_the_timestamp() {
        let mut x = SeqExtender::new(4, None);
        assert_eq!(x.extend(5, Some(1000), 400), 5);
        assert_eq!(x.extend(6, Some(1100), 400), 6);
        // 40 packets lost (counter 6 → 47 ≡ 15).
        assert_eq!(x.extend(47 % 16, Some(1100 + 41 * 100), 400), 47);
        // A duplicate and a late one stay behind.
        assert_eq!(x.extend(47 % 16, Some(1100 + 41 * 100), 400), 47);
        assert_eq!(x.extend(46 % 16, Some(1100 + 40 * 100), 400), 46);
    }

    #[test]
    fn counter_re_armed_while_time_goes_on_is_a_restart() {
        let mut x = SeqExtender::new(16, Some(0));
        for k in 0..500u64 {
            assert_eq!(x.extend(k, Some(k * 10), 40), k);
        }
        let e = x.extend(0, Some(5000), 40);
        assert!(e > 1 << 30, "{e}");
        assert_eq!(x.extend(1, Some(5010), 40), e + 1);
    }

    #[test]
    fn without_timestamps_the_nearest_number_wins() {
        let mut x = SeqExtender::new(4, None);
        assert_eq!(x.extend(14, None, 1), 14);
        assert_eq!(x.extend(1, None, 1), 17); // 2 lost across the wrap
        assert_eq!(x.extend(15, None, 1), 15); // late, behind
        // CHDR without timestamps: the restart rule.
        let mut x = SeqExtender::new(16, Some(0));
        for k in 0..300u64 {
            x.extend(k, None, 1);
        }
        assert!(x.extend(0, None, 1) > 1 << 30);
    }
}
