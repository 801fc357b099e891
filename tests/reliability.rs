//! Hostile input, senders outside the allow-list, silence and a stalled consumer, through a
//! running `UdpSource` flowgraph.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fsdr_net::io::{Format, Overload};
use fsdr_net::{SourceStats, TAG_MISSED, UdpSource};
use futuresdr::blocks::VectorSink;
use futuresdr::runtime::Timer;
use futuresdr::runtime::dev::prelude::*;

fn run(fg: Flowgraph) -> Flowgraph {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    Runtime::new().run(fg).expect("flowgraph runs")
}

fn chdr(seq: u16, payload: &[u8]) -> Vec<u8> {
    let mut dg = vec![0u8; 8 + payload.len()];
    let fields = fsdr_net::io::DataHeader {
        seq: u64::from(seq),
        ..Default::default()
    };
    Format::Chdr.emit_header(&mut dg, &fields).unwrap();
    dg[8..].copy_from_slice(payload);
    dg
}

#[test]
fn hostile_datagrams_are_counted_and_valid_ones_come_out_intact_in_order() -> Result<()> {
    let src = UdpSource::<u8>::builder("127.0.0.1:0")
        .format(Format::Chdr)
        .wire_format(fsdr_net::io::WireFormat::Plain)
        .time_tags(false)
        .max_datagram(2000)
        .finish_after_idle(Duration::from_millis(500))
        .build()?;
    let to = src.local_addr();
    let snk = VectorSink::<u8>::new(100_000);
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk);
    let sender = std::thread::spawn(move || {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut expected = Vec::new();
        let (mut truncated, mut malformed, mut skipped) = (0u64, 0u64, 0u64);
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for seq in 0..300u16 {
            let payload: Vec<u8> = (0..100).map(|k| (seq as usize * 7 + k) as u8).collect();
            tx.send_to(&chdr(seq, &payload), to).unwrap();
            expected.extend_from_slice(&payload);
            let bad: Vec<u8> = match seq % 6 {
                // Shorter than a header.
                0 => vec![0x42; (next() % 8) as usize],
                // Larger than a slot.
                1 => {
                    truncated += 1;
                    chdr(seq, &vec![0u8; 2500])
                }
                // Length field disagreeing with the datagram.
                2 => {
                    let mut d = chdr(seq, &[1; 40]);
                    d.truncate(30);
                    d
                }
                // Reserved packet type 3.
                3 => {
                    let mut d = chdr(seq, &[1; 40]);
                    d[6] = (d[6] & !0xe0) | (3 << 5);
                    d
                }
                // A control packet: valid, but no samples.
                4 => {
                    let mut d = chdr(seq, &[1; 40]);
                    d[6] = (d[6] & !0xe0) | (4 << 5);
                    d
                }
                // Random bytes.
                _ => (0..(next() % 300)).map(|_| next() as u8).collect(),
            };
            if seq % 6 != 1 {
                match Format::Chdr.parse(&bad) {
                    Err(_) => malformed += 1,
                    Ok(i) if i.class != fsdr_net::io::PacketClass::Data => skipped += 1,
                    Ok(_) => panic!("a bad datagram parsed as data"),
                }
            }
            tx.send_to(&bad, to).unwrap();
            if seq % 50 == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        (expected, truncated, malformed, skipped)
    });
    let fg = run(fg);
    let (expected, truncated, malformed, skipped) = sender.join().unwrap();
    let stats = fg.block(&src)?.stats();
    assert_eq!(stats.kernel_drops + stats.overflow, 0, "{stats}");
    assert_eq!(stats.delivered, 300, "{stats}");
    assert_eq!(stats.truncated, truncated, "{stats}");
    assert_eq!(stats.malformed, malformed, "{stats}");
    assert_eq!(stats.skipped, skipped, "{stats}");
    assert_eq!(stats.missed, 0, "{stats}");
    assert_eq!(stats.accounted(), 600, "{stats}");
    assert!(
        *fg.block(&snk)?.items() == expected,
        "valid payloads intact and in order"
    );
    Ok(())
}

#[test]
fn a_second_sender_outside_the_allow_list_is_rejected() -> Result<()> {
    let allowed = UdpSocket::bind("127.0.0.1:0")?;
    let intruder = UdpSocket::bind("127.0.0.1:0")?;
    let src = UdpSource::<u8>::builder("127.0.0.1:0")
        .format(Format::Seq64)
        .peer(allowed.local_addr()?)
        .finish_after_idle(Duration::from_millis(400))
        .build()?;
    let to: SocketAddr = src.local_addr();
    let snk = VectorSink::<u8>::new(1000);
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk);
    std::thread::spawn(move || {
        for seq in 1..=100u64 {
            let mut d = seq.to_le_bytes().to_vec();
            d.push(seq as u8);
            allowed.send_to(&d, to).unwrap();
            // The intruder even uses plausible sequence numbers.
            let mut e = (seq + 1).to_le_bytes().to_vec();
            e.push(0xee);
            intruder.send_to(&e, to).unwrap();
        }
    });
    let fg = run(fg);
    let stats = fg.block(&src)?.stats();
    assert_eq!(stats.rejected, 100, "{stats}");
    assert_eq!(stats.delivered, 100, "{stats}");
    assert_eq!(*fg.block(&snk)?.items(), (1..=100u8).collect::<Vec<_>>());
    Ok(())
}

#[test]
fn after_a_long_silence_the_source_resumes() -> Result<()> {
    let src = UdpSource::<u8>::builder("127.0.0.1:0")
        .stats_interval(None)
        .finish_after_idle(Duration::from_secs(3))
        .build()?;
    let to = src.local_addr();
    let snk = VectorSink::<u8>::new(1000);
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk);
    std::thread::spawn(move || {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(&[1, 2, 3], to).unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        tx.send_to(&[4, 5, 6], to).unwrap();
    });
    let fg = run(fg);
    assert_eq!(*fg.block(&snk)?.items(), [1, 2, 3, 4, 5, 6]);
    // Asleep through the silence: a handful of calls, not a spin.
    let calls = fg.block(&src)?.work_calls();
    assert!(calls < 20, "work() ran {calls} times");
    Ok(())
}

/// The stream ends while datagrams wait in the reorder window for a missing one: the block
/// sleeps until their timeout, then delivers them behind a counted gap and ends. (Before,
/// an engine-backed source past its idle end woke itself at once on every call until the
/// timeout: a core busy for as long as the timeout.)
#[test]
fn a_stream_that_ends_with_datagrams_held_sleeps_until_they_are_due() -> Result<()> {
    let src = UdpSource::<u8>::builder("127.0.0.1:0")
        .format(Format::Seq64)
        .backend(fsdr_net::io::Backend::Mio)
        .zero_fill_missed(true)
        .stats_interval(None)
        .reorder(8, Duration::from_millis(800))
        .finish_after_idle(Duration::from_millis(100))
        .build()?;
    let to = src.local_addr();
    let snk = VectorSink::<u8>::new(100);
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk);
    std::thread::spawn(move || {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        // Number 2 never comes.
        for seq in [0u64, 1, 3, 4] {
            let mut dg = vec![0u8; 9];
            let fields = fsdr_net::io::DataHeader {
                seq,
                ..Default::default()
            };
            Format::Seq64.emit_header(&mut dg, &fields).unwrap();
            dg[8] = 10 + seq as u8;
            tx.send_to(&dg, to).unwrap();
        }
    });
    let fg = run(fg);
    let stats = fg.block(&src)?.stats();
    assert_eq!((stats.delivered, stats.missed), (4, 1), "{stats}");
    assert_eq!(*fg.block(&snk)?.items(), [10, 11, 0, 13, 14]);
    let calls = fg.block(&src)?.work_calls();
    assert!(calls < 30, "work() ran {calls} times");
    Ok(())
}

/// A sink that consumes nothing for its first `stall`, then everything; records tags.
#[derive(Block)]
struct StallSink {
    #[input]
    input: DefaultCpuReader<u8>,
    stall: Duration,
    /// Set on the first call. A timer alone would not hold: FutureSDR also wakes the block
    /// whenever upstream produces.
    until: Option<std::time::Instant>,
    /// Set once the stall is over, for the sender to go on.
    resumed: Arc<AtomicBool>,
    items: usize,
    missed_tags: Vec<(usize, usize)>,
}

impl Kernel for StallSink {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let until = *self
            .until
            .get_or_insert_with(|| std::time::Instant::now() + self.stall);
        let now = std::time::Instant::now();
        if now < until {
            io.block_on(async move {
                Timer::after(until - now).await;
            });
            return Ok(());
        }
        self.resumed.store(true, Ordering::Release);
        let (items, tags) = self.input.slice_with_tags();
        for t in tags.iter() {
            if let Tag::NamedUsize(n, c) = &t.tag
                && n == TAG_MISSED
            {
                self.missed_tags.push((self.items + t.index, *c));
            }
        }
        let n = items.len();
        self.items += n;
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}

/// The source's counters, the sink's item count and its `rx_missed` tags (index, frames).
type Stalled = (SourceStats, usize, Vec<(usize, usize)>);

/// Runs 1100 datagrams (1000 of them while the sink stalls for 800 ms) and a closing one
/// into a small source with the given overload policy; returns the source's counters and
/// the sink.
fn stalled(overload: Overload) -> Result<Stalled> {
    let src = UdpSource::<u8>::builder("127.0.0.1:0")
        .format(Format::Seq64)
        .slots(128)
        .batch(16)
        .buffer_datagrams(4)
        .reorder(0, Duration::from_millis(1))
        .configure(|c| c.overload = overload)
        .finish_after_idle(Duration::from_millis(1500))
        .build()?;
    let to = src.local_addr();
    let handle = src.stats_handle();
    let resumed = Arc::new(AtomicBool::new(false));
    let snk = StallSink {
        input: DefaultCpuReader::default(),
        stall: Duration::from_millis(800),
        until: None,
        resumed: resumed.clone(),
        items: 0,
        missed_tags: Vec::new(),
    };
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk);
    std::thread::spawn(move || {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        // 1000 datagrams while the sink is stalled, 100 more after it resumed.
        for seq in 1..=1100u64 {
            let mut d = seq.to_le_bytes().to_vec();
            d.resize(8 + 500, seq as u8);
            tx.send_to(&d, to).unwrap();
            let t = std::time::Instant::now();
            if seq == 1 {
                // The stream starts where the source first delivers: a datagram dropped
                // before that (a flowgraph started late under load) no later one could show
                // missing. So the rest follows once the first was delivered.
                while handle.snapshot().delivered < 1 && t.elapsed() < Duration::from_secs(30) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            } else if seq == 1000 {
                // Go on once the sink has resumed (it stalls 800 ms from its first call,
                // which a loaded machine may start late) and the source has taken every
                // datagram so far into a counter: a datagram dropped at the very end would
                // be shown missing by none after it.
                while (!resumed.load(Ordering::Acquire) || handle.snapshot().accounted() < 1000)
                    && t.elapsed() < Duration::from_secs(30)
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                std::thread::sleep(Duration::from_millis(200));
            } else if seq % 20 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // A closing datagram once the source has taken all 1100 into a counter and the sink
        // has had time to drain: a stretch the source dropped at the very end (a loaded
        // machine's consumer late once more) is then shown missing by it, as every other.
        let t = std::time::Instant::now();
        while handle.snapshot().accounted() < 1100 && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(300));
        let mut d = 1101u64.to_le_bytes().to_vec();
        d.resize(8 + 500, 1101u64 as u8);
        tx.send_to(&d, to).unwrap();
    });
    let fg = run(fg);
    let stats = fg.block(&src)?.stats();
    let s = fg.block(&snk)?;
    Ok((stats, s.items, s.missed_tags.clone()))
}

#[test]
fn a_stalled_consumer_overflows_counted_and_the_stream_resumes_with_a_gap_tag() -> Result<()> {
    // Read and discard: the receive thread drops what the consumer has no room for.
    let (stats, items, missed_tags) = stalled(Overload::Discard)?;
    assert!(stats.overflow > 0, "{stats}");
    assert_eq!(stats.kernel_drops, 0, "{stats}");
    assert_eq!(stats.accounted(), 1101, "{stats}");
    // Every overflowed datagram is a missed frame: the stream resumed after them.
    assert_eq!(stats.missed, stats.overflow, "{stats}");
    // One gap per stretch dropped (usually one; two when the source made room once while the
    // sink was stalled, as a loaded machine's scheduling may let it), together every frame.
    assert!(!missed_tags.is_empty(), "{missed_tags:?}");
    let tagged: usize = missed_tags.iter().map(|t| t.1).sum();
    assert_eq!(tagged as u64, stats.missed, "{missed_tags:?}");
    assert_eq!(items as u64, stats.delivered * 500);
    Ok(())
}

#[test]
fn a_stalled_consumer_pauses_reading_and_the_kernel_buffer_absorbs_the_burst() -> Result<()> {
    // Pause (the default): the receive thread stops reading; 500 kB fit the socket buffer.
    let (stats, items, missed_tags) = stalled(Overload::Pause)?;
    assert!(stats.paused > 0, "{stats}");
    assert_eq!(
        stats.overflow + stats.kernel_drops + stats.missed,
        0,
        "{stats}"
    );
    assert_eq!(stats.delivered, 1101, "{stats}");
    assert!(missed_tags.is_empty(), "{missed_tags:?}");
    assert_eq!(items, 1101 * 500);
    Ok(())
}
