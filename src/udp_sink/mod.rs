//! [`UdpSink`]: sends a stream as datagrams in any format of `fsdr-net-io`.

mod builder;
mod bursts;

use std::time::{Duration, Instant};

use fsdr_net_io::format::vrt::context::PacketTime;
use fsdr_net_io::sample::{Encoder, Item};
use fsdr_net_io::send::{ContextSender, Framer, Pacer, SendStats, Sender};
#[cfg(feature = "uring")]
use fsdr_net_io::send::{Submit, UringSender};
use futuresdr::runtime::Timer;
use futuresdr::runtime::dev::prelude::*;

pub use builder::UdpSinkBuilder;
pub use bursts::{TAG_TX_EOB, TAG_TX_SOB, TAG_TX_TIME};

/// Where a sink's datagrams go out.
enum Out {
    /// `sendmmsg` (with UDP GSO where available) on the scheduler's thread.
    Mmsg(Sender),
    /// io_uring on a dedicated thread; `None` once closed.
    #[cfg(feature = "uring")]
    Uring(Option<UringSender>, SendStats),
}

/// Sends its input as UDP datagrams of a fixed payload size, in any format of `fsdr-net-io`
/// (raw, GNU Radio sequence headers, CHDR with or without timestamps, VRT), in `sendmmsg`
/// batches (with UDP GSO where available) or through io_uring, optionally paced to a sample
/// rate by a token bucket. `Complex<f32>` items go out as the format's sc16 (CHDR
/// `sc16_chdr`, VRT `sc16_item32_be`) unless another wire format is chosen. When the input
/// ends, the remaining items go out in a last, shorter datagram; VRT payloads that do not
/// fill a 32-bit word are padded (announced in the class ID's pad bit count, counted in
/// [`SendStats::pad_bytes`]). `Complex<f32>` components beyond the wire format's full scale
/// (±1 for sc16) are saturated as UHD's converter does, and counted ([`UdpSink::clipped`],
/// [`SendStats::clipped`]; the first is a warning in the log).
///
/// Tags make bursts, with UHD's names: [`TAG_TX_SOB`] on a burst's first item,
/// [`TAG_TX_EOB`] on its last, [`TAG_TX_TIME`] on the item a device time belongs to. A
/// datagram never spans a burst's start or end: a burst of N items becomes exactly the
/// datagrams its length needs, the last one short. A burst's last datagram, and the stream's
/// last one when the input ends, carry the end of burst (CHDR's EOB flag; in VRT a trailer
/// word with the end-of-burst indicator, as UHD reads it; an empty datagram when the input
/// ends after its last items went out), as a USRP marks them; the receiving
/// [`UdpSource`](crate::UdpSource) tags that item [`TAG_EOB`](crate::TAG_EOB). A
/// `tx_time` re-anchors the timestamps (CHDR, VRT with the builder's
/// [`timestamps`](UdpSinkBuilder::timestamps)); the datagrams after it follow the items sent.
///
/// VRT with [`context`](UdpSinkBuilder::context): DIFI standard context packets with the
/// data's stream ID go out before the first data packet, before the first data packet after
/// a `tx_freq`, `tx_rate`, `tx_gain` or `tx_bandwidth` tag changed a setting (the tag cuts
/// the datagram there; the packet is stamped with that item's time), and every
/// [`context_every`](UdpSinkBuilder::context_every) data packets; with
/// [`difi_version`](UdpSinkBuilder::difi_version) a DIFI version packet with the first and
/// the repeated ones. A [`UdpSource`](crate::UdpSource) turns them back into `rx_*` tags on
/// the same items.
///
/// # Stream Inputs
///
/// `input`: items to send.
///
/// # Stream Outputs
///
/// No stream outputs.
///
/// # Usage
/// ```no_run
/// use fsdr_net::UdpSink;
/// use fsdr_net::io::Format;
///
/// let sink = UdpSink::<f32>::builder("127.0.0.1:49000")
///     .format(Format::Seq64)
///     .payload_bytes(8000)
///     .sample_rate(1e6)
///     .build()
///     .unwrap();
/// ```
#[derive(Block)]
pub struct UdpSink<T: Item> {
    #[input]
    input: DefaultCpuReader<T>,
    out: Out,
    framing: Framing<T>,
    staging: Vec<u8>,
    batch: usize,
    pacer: Option<Pacer>,
    /// Paced: no datagram before this instant. FutureSDR also wakes a block when upstream
    /// produces, so a timer alone would not hold the rate.
    not_before: Option<Instant>,
    items_sent: u64,
    /// Move the worker threads this block runs on to SCHED_BATCH.
    batch_workers: bool,
    /// The format has an end-of-burst flag (CHDR).
    eob_flag: bool,
    /// Datagrams went out since the last end of burst.
    open_burst: bool,
    /// A `tx_time` tag on a stream without timestamps was reported.
    warned_time: bool,
    /// Clipped items were reported.
    warned_clipped: bool,
    /// VRT context (and DIFI version) packets beside the data.
    context: Option<ContextSender>,
}

/// How items become datagrams.
struct Framing<T> {
    framer: Framer,
    encoder: Encoder<T>,
    payload_items: usize,
    pad_bytes: u64,
    /// Items clipped at the wire format's full scale.
    clipped: u64,
}

impl<T: Item> Framing<T> {
    /// Frames and encodes `n_dg` datagrams of `items` into `target`, the last one `last`
    /// items when non-zero and ending a burst when `eob`; returns (bytes, items, segment
    /// length: every datagram but a shorter last one has it, as UDP GSO asks).
    fn frame(
        &mut self,
        items: &[T],
        n_dg: usize,
        last: usize,
        eob: bool,
        target: &mut Vec<u8>,
    ) -> Result<(usize, usize, usize)> {
        let per = self.payload_items;
        let wb = self.encoder.bytes_per_item();
        let header = self.framer.header_len();
        let full_payload = per * wb;
        let full_len = header + full_payload + self.framer.pad_for(full_payload);
        let (mut bytes, mut sent_items) = (0, 0);
        for k in 0..n_dg {
            let final_one = k + 1 == n_dg;
            let count = if final_one && last > 0 { last } else { per };
            let payload = count * wb;
            let pad = self.framer.pad_for(payload);
            let len = header + payload + pad + self.framer.trailer_len(final_one && eob);
            if target.len() < bytes + len {
                target.resize(bytes + len, 0);
            }
            let dg = &mut target[bytes..bytes + len];
            if final_one && eob {
                self.framer.frame_end_of_burst(dg, count as u64, pad)
            } else {
                self.framer.frame(dg, count as u64, pad)
            }
            .map_err(|e| anyhow::anyhow!("framing a datagram: {e}"))?;
            let (_, clipped) = self.encoder.encode_counting(
                &items[k * per..k * per + count],
                &mut dg[header..header + payload],
            );
            self.clipped += clipped;
            self.pad_bytes += pad as u64;
            bytes += len;
            sent_items += count;
        }
        let segment = if n_dg == 1 { bytes } else { full_len };
        Ok((bytes, sent_items, segment))
    }

    /// Whether the last of several datagrams, `last` items (0: a full one) and ending a
    /// burst, would be longer than the others (VRT's trailer on a full or nearly full
    /// datagram), which UDP GSO cannot send in one call.
    fn last_outgrows(&self, last: usize) -> bool {
        let wb = self.encoder.bytes_per_item();
        let len = |items: usize| {
            let payload = items * wb;
            payload + self.framer.pad_for(payload)
        };
        let count = if last > 0 { last } else { self.payload_items };
        len(count) + self.framer.trailer_len(true) > len(self.payload_items)
    }
}

/// Sends one datagram on its own (an end of burst without items, a context packet).
fn send_one(out: &mut Out, dg: &[u8]) -> std::result::Result<(), String> {
    match out {
        Out::Mmsg(sender) => sender
            .send_datagrams(&[dg])
            .map(|_| ())
            .map_err(|e| e.to_string()),
        #[cfg(feature = "uring")]
        Out::Uring(Some(u), _) => {
            let mut b = u.buffer();
            b.clear();
            b.extend_from_slice(dg);
            u.submit(b, dg.len()).map_err(|e| e.to_string())
        }
        #[cfg(feature = "uring")]
        Out::Uring(None, _) => Err("sink closed".into()),
    }
}

/// Sends the context packets that are due before the next data packet, stamped `next`.
fn send_context(
    context: &mut Option<ContextSender>,
    out: &mut Out,
    next: Option<PacketTime>,
) -> Result<()> {
    let Some(c) = context.as_mut().filter(|c| c.due()) else {
        return Ok(());
    };
    let packets = c
        .packets(next)
        .map_err(|e| anyhow::anyhow!("UdpSink: building a context packet: {e}"))?;
    for p in packets {
        if let Err(e) = send_one(out, &p) {
            tracing::warn!(error = %e, "UdpSink: sending a context packet");
        }
    }
    Ok(())
}

impl<T: Item> UdpSink<T> {
    /// Sends a datagram without items that ends the burst.
    fn send_empty_end_of_burst(&mut self) {
        let framer = &self.framing.framer;
        let mut dg = vec![0u8; framer.header_len() + framer.trailer_len(true)];
        if let Err(e) = self.framing.framer.frame_end_of_burst(&mut dg, 0, 0) {
            tracing::warn!(error = %e, "UdpSink: framing the end of burst");
            return;
        }
        match send_one(&mut self.out, &dg) {
            Ok(()) => self.open_burst = false,
            Err(e) => tracing::warn!(error = %e, "UdpSink: sending the end of burst"),
        }
    }

    /// Context packets sent so far (0 without [`UdpSinkBuilder::context`]).
    pub fn context_sent(&self) -> u64 {
        self.context.as_ref().map_or(0, ContextSender::sent)
    }

    /// A builder for a sink sending to `dest`: anything [`std::net::ToSocketAddrs`] takes,
    /// resolved once (`"127.0.0.1:49000"`, `"localhost:49000"`, a `SocketAddr`).
    pub fn builder(dest: impl std::net::ToSocketAddrs + std::fmt::Debug) -> UdpSinkBuilder<T> {
        UdpSinkBuilder::new(dest)
    }

    /// Items sent so far.
    pub fn items_sent(&self) -> u64 {
        self.items_sent
    }

    /// The sender's counters (datagrams, bytes, syscalls, errors, padding).
    pub fn send_stats(&self) -> SendStats {
        let mut s = match &self.out {
            Out::Mmsg(s) => s.stats(),
            #[cfg(feature = "uring")]
            Out::Uring(Some(u), _) => u.stats(),
            #[cfg(feature = "uring")]
            Out::Uring(None, last) => *last,
        };
        s.pad_bytes = self.framing.pad_bytes;
        s.clipped = self.framing.clipped;
        s
    }

    /// Items clipped so far at the wire format's full scale: `Complex<f32>` components the
    /// encoding saturated (beyond ±1 by more than half a step in sc16; see
    /// [`Encoder::encode_counting`]). The first clipped item is also a warning in the log.
    pub fn clipped(&self) -> u64 {
        self.framing.clipped
    }
}

#[doc(hidden)]
impl<T: Item> Kernel for UdpSink<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        if self.batch_workers {
            crate::worker_policy::batch_this_worker();
        }
        if let Some(at) = self.not_before {
            let now = Instant::now();
            if now < at {
                io.block_on(async move {
                    Timer::after(at - now).await;
                });
                return Ok(());
            }
            self.not_before = None;
        }
        let finished = self.input.finished();
        let (items, tags) = self.input.slice_with_tags();
        // Bursts: tags cut the stream, the end of the input is the end of the last burst.
        let mut seg = bursts::segment(tags, items.len(), self.context.is_some());
        if let Some(c) = self.context.as_mut() {
            for (name, value) in &seg.settings {
                c.apply(name, *value);
            }
        }
        if finished && seg.len == items.len() {
            seg.bounded = true;
            seg.eob = true;
        }
        if let Some(t) = seg.time
            && !self.framing.framer.set_time(t)
            && !self.warned_time
        {
            self.warned_time = true;
            tracing::warn!(
                "UdpSink: a tx_time tag on a stream without timestamps (set the builder's \
                 timestamps and a format that carries them): the tag is ignored"
            );
        }
        let items = &items[..seg.len];
        let per = self.framing.payload_items;
        let (full, rest) = (items.len() / per, items.len() % per);
        // The whole segment goes in this call when it fits a batch; its last datagram may
        // then be short and end the burst.
        let whole = seg.bounded && full + usize::from(rest > 0) <= self.batch;
        let (mut n_dg, mut last, mut eob) = if whole {
            (full + usize::from(rest > 0), rest, seg.eob && self.eob_flag)
        } else {
            (full.min(self.batch), 0, false)
        };
        // A last datagram that its end-of-burst trailer makes longer than the others goes
        // alone in the next call (one GSO call sends equal segments and a shorter last one).
        if eob && n_dg > 1 && self.framing.last_outgrows(last) {
            // The full datagrams go now (`full` of them either way); the last one next.
            (n_dg, last, eob) = (n_dg - 1, 0, false);
        }
        if n_dg > 0 {
            let f = &self.framing.framer;
            let next = match f.next_utc() {
                Some((seconds, picoseconds)) => Some(PacketTime::Utc {
                    seconds,
                    picoseconds,
                }),
                None => f.next_timestamp().map(PacketTime::SampleCount),
            };
            send_context(&mut self.context, &mut self.out, next)?;
        }
        // A repeated context packet goes between two data packets: the batch ends there.
        if let Some(c) = &self.context
            && (n_dg as u64) > c.until_due()
        {
            (n_dg, last, eob) = (c.until_due() as usize, 0, false);
        }
        if n_dg == 0 {
            if finished {
                if self.open_burst && self.eob_flag {
                    // The input ended after its last datagram went out: an empty datagram
                    // ends the burst, as UHD sends one for an end of burst without samples.
                    self.send_empty_end_of_burst();
                }
                io.finished = true;
            }
            return Ok(());
        }
        let mut target = match &mut self.out {
            #[cfg(feature = "uring")]
            Out::Uring(Some(u), _) => u.buffer(),
            _ => std::mem::take(&mut self.staging),
        };
        // The framer moves on only when the datagrams really go: keep it to roll back.
        #[cfg(feature = "uring")]
        let before = (
            self.framing.framer.clone(),
            self.framing.pad_bytes,
            self.framing.clipped,
        );
        let (bytes, sent_items, segment) =
            self.framing.frame(items, n_dg, last, eob, &mut target)?;
        if self.framing.clipped > 0 && !self.warned_clipped {
            self.warned_clipped = true;
            tracing::warn!(
                "UdpSink: {} items clipped at {}'s full scale (a component beyond ±1 of \
                 Complex<f32>); scale the signal down. Counted in UdpSink::clipped (this \
                 warning is the only one)",
                self.framing.clipped,
                self.framing.encoder.wire()
            );
        }
        self.open_burst = !eob;
        let sent = match &mut self.out {
            Out::Mmsg(sender) => {
                let r = sender.send_segments(&target[..bytes], segment);
                self.staging = target;
                r.map_err(|e| e.to_string())
            }
            #[cfg(feature = "uring")]
            Out::Uring(Some(u), _) => {
                target.truncate(bytes);
                match u.submit(target, segment) {
                    Ok(()) => Ok(()),
                    Err(Submit::Full(_)) => {
                        // The io_uring thread is behind: keep the items, wait for it.
                        (
                            self.framing.framer,
                            self.framing.pad_bytes,
                            self.framing.clipped,
                        ) = before;
                        io.block_on(u.notifier().notified());
                        return Ok(());
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            #[cfg(feature = "uring")]
            Out::Uring(None, _) => Err("sink closed".into()),
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, "UdpSink: send failed; {sent_items} items lost");
        }
        self.input.consume(sent_items);
        self.items_sent += sent_items as u64;
        if let Some(c) = self.context.as_mut() {
            c.data_sent(n_dg as u64);
        }
        let wait = self
            .pacer
            .as_mut()
            .map_or(Duration::ZERO, |p| p.delay(bytes));
        if wait > Duration::ZERO {
            self.not_before = Some(Instant::now() + wait);
            io.block_on(async move {
                Timer::after(wait).await;
            });
        } else {
            io.call_again = true;
        }
        Ok(())
    }

    async fn deinit(&mut self, _mo: &mut MessageOutputs, _meta: &mut BlockMeta) -> Result<()> {
        // Everything queued for the io_uring thread goes out before the flowgraph ends.
        #[cfg(feature = "uring")]
        if let Out::Uring(u, last) = &mut self.out
            && let Some(u) = u.take()
        {
            *last = u.close();
        }
        Ok(())
    }
}
