//! The in-place receiver (`inplace::InPlaceReceiver<u8, Vec<u8>>`): the kernel writes
//! straight into the consumer's Vecs.
//!
//! * `buffers_change_between_lends`: under a flood, every buffer taken back is overwritten with
//!   0xEE and held for a while (it must stay 0xEE: nothing may write into a buffer handed
//!   back), then either given back as it is, dropped and replaced by a fresh Vec (new
//!   address), shrunk/grown (realloc) before being given again, of odd lengths (1, 991, 992,
//!   5000, 0), or given to a *different* receiver; every filled buffer's payloads must carry
//!   their pattern. Receivers end by shutdown, drop or mem::forget while the flood goes on;
//!   then the quarantine allocator must show no freed block written.
//! * same with `start_inline` (the caller's thread receives).
//! * `streams_one_ends_while_others_run`: `start_streams_on(cfg, [1,2,3], 1)` (one thread
//!   serving three receivers), CHDR flood to all three streams; receiver 0 (then 1) is shut
//!   down / dropped / forgotten while the thread goes on serving the others.
mod common;

use fsdr_net_io::depacketizer::DepacketizerConfig;
use fsdr_net_io::format::{DataHeader, Format};
use fsdr_net_io::inplace::{Filled, InPlaceConfig, InPlaceReceiver};
use fsdr_net_io::sample::{Decoder, WireFormat};
use fsdr_net_io::{Backend, EngineConfig};
use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const SIZE: usize = 1000;
const PAY: usize = SIZE - 8;

type Rx = InPlaceReceiver<u8, Vec<u8>>;

fn cfg(bind: SocketAddr, format: Format, buffers: usize) -> InPlaceConfig<u8> {
    let mut engine = EngineConfig::new(bind);
    engine.backend = Backend::Recvmmsg;
    engine.format = format;
    engine.batch = 16;
    engine.slot_size = 2048;
    engine.socket.recv_buffer = 1 << 20;
    InPlaceConfig {
        engine,
        decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
        depacketizer: DepacketizerConfig::default(),
        buffers,
    }
}

#[derive(Default, Debug)]
struct T {
    filled: u64,
    items: u64,
    bad_chunks: u64,
    written_after_return: u64,
}

/// Items are consecutive payloads of the flood (byte i of a payload = seq*7 + i), possibly
/// cut at buffer ends: every byte follows its predecessor by +1 except at payload starts, so
/// more breaks than payloads, or a run of 8 equal bytes (0xEE of a returned buffer, 0xA5
/// poison, 0 of a fresh Vec), is corruption.
fn check_items(items: &[u8], t: &mut T) {
    let breaks = items
        .windows(2)
        .filter(|w| w[1] != w[0].wrapping_add(1))
        .count();
    let allowed = items.len() / PAY + 2;
    let runs = items.windows(8).any(|w| w.iter().all(|&x| x == w[0]));
    if breaks > allowed || runs {
        t.bad_chunks += 1;
    }
}

fn next_buffer(k: usize, old: Option<Vec<u8>>) -> Vec<u8> {
    match (k % 7, old) {
        (0, Some(v)) => v,
        (1, Some(mut v)) => {
            v.truncate(PAY * 3);
            v.shrink_to_fit(); // realloc: a new address for the next lend
            v
        }
        (2, Some(mut v)) => {
            v.resize(v.len() + 4096, 0); // realloc to a larger block
            v
        }
        (3, _) => vec![0u8; [1, 991, 992, 5000, 7][k % 5]],
        (4, _) => Vec::new(),
        _ => vec![0u8; PAY * 16],
    }
}

fn pump(
    rx: &mut Rx,
    held: &mut VecDeque<(Instant, Vec<u8>)>,
    k: &mut usize,
    t: &mut T,
    inline: bool,
) {
    if inline {
        let _ = rx.receive(Duration::from_millis(1));
    } else {
        rx.notifier().wait_timeout(Duration::from_millis(1));
    }
    while let Some(Filled {
        mut buffer, items, ..
    }) = rx.take()
    {
        t.filled += 1;
        t.items += items as u64;
        check_items(&buffer[..items], t);
        buffer.fill(0xEE);
        held.push_back((Instant::now(), buffer));
    }
    while held
        .front()
        .is_some_and(|(at, _)| at.elapsed() > Duration::from_millis(2))
    {
        let (_, b) = held.pop_front().unwrap();
        if b.iter().any(|&x| x != 0xEE) {
            t.written_after_return += 1;
        }
        *k += 1;
        let nb = next_buffer(*k, Some(b));
        if let Err(back) = rx.give(nb) {
            drop(back);
        }
    }
}

fn run(inline: bool, rounds: usize) -> T {
    run_with(inline, rounds, false)
}

fn run_with(inline: bool, rounds: usize, faulty: bool) -> T {
    let mut t = T::default();
    for round in 0..rounds {
        let mut c = cfg("127.0.0.1:0".parse().unwrap(), Format::Seq64, 6);
        c.engine.socket.gro = faulty && round % 2 == 0;
        let mut a = if inline {
            Rx::start_inline(c).unwrap()
        } else {
            Rx::start(c).unwrap()
        };
        let mut c = cfg("127.0.0.1:0".parse().unwrap(), Format::Seq64, 6);
        c.engine.socket.gro = faulty && round % 2 == 1;
        let mut b = if inline {
            Rx::start_inline(c).unwrap()
        } else {
            Rx::start(c).unwrap()
        };
        for i in 0..6 {
            a.give(next_buffer(i * 3 + 5, None)).unwrap();
            b.give(vec![0u8; PAY * 8]).unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flood = if faulty {
            common::seq64_flood_faulty
        } else {
            common::seq64_flood
        };
        let f1 = flood(a.local_addr(), SIZE, stop.clone());
        let f2 = flood(b.local_addr(), SIZE, stop.clone());
        let mut held = VecDeque::new();
        let mut held_b = VecDeque::new();
        let mut k = round;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(60) {
            pump(&mut a, &mut held, &mut k, &mut t, inline);
            pump(&mut b, &mut held_b, &mut k, &mut t, inline);
            // move one buffer from a's hands to b
            if let Some((_, v)) = held.pop_back() {
                if v.iter().any(|&x| x != 0xEE) {
                    t.written_after_return += 1;
                }
                let _ = b.give(v);
            }
        }
        // end both under traffic
        match round % 3 {
            0 => {
                let (_, _, bufs) = a.shutdown();
                for f in bufs {
                    check_items(&f.buffer[..f.items], &mut t);
                }
                drop(b);
            }
            1 => {
                drop(a);
                let _ = b.shutdown();
            }
            _ => {
                std::mem::forget(a);
                drop(b);
            }
        }
        for (_, v) in held.drain(..).chain(held_b.drain(..)) {
            if v.iter().any(|&x| x != 0xEE) {
                t.written_after_return += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
        stop.store(true, Ordering::Relaxed);
        f1.join().unwrap();
        f2.join().unwrap();
    }
    t
}

#[test]
fn buffers_change_between_lends() {
    let t = run(false, 12);
    let r = common::report("inplace thread");
    eprintln!("{t:?}");
    assert!(t.filled > 0);
    assert_eq!((t.bad_chunks, t.written_after_return), (0, 0));
    assert!(r.clean());
}

#[test]
fn buffers_change_between_lends_inline() {
    let t = run(true, 12);
    let r = common::report("inplace inline");
    eprintln!("{t:?}");
    assert!(t.filled > 0);
    assert_eq!((t.bad_chunks, t.written_after_return), (0, 0));
    assert!(r.clean());
}

/// As `buffers_change_between_lends`, with UDP GRO on one receiver of each pair and a flood
/// with gaps, reorders, duplicates and short datagrams (the copying and "ahead" paths).
/// Short datagrams make more breaks than payloads legitimately, so only the run check and
/// the allocator decide here.
#[test]
fn buffers_change_between_lends_gro_faults() {
    let t = run_with(false, 12, true);
    let r = common::report("inplace gro faults");
    eprintln!("{t:?}");
    assert!(t.filled > 0);
    assert_eq!(t.written_after_return, 0);
    assert!(r.clean());
}

fn chdr_flood(
    to: SocketAddr,
    ids: &'static [u32],
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut seq = [0u64; 8];
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for &id in ids {
                let h = DataHeader {
                    seq: seq[id as usize],
                    stream_id: Some(id),
                    ..Default::default()
                };
                seq[id as usize] += 1;
                let hl = h.header_len(Format::Chdr);
                let mut dg = vec![0u8; hl + PAY];
                for (i, b) in dg[hl..].iter_mut().enumerate() {
                    *b = (n as usize + i) as u8;
                }
                n += 1;
                Format::Chdr.emit_header(&mut dg, &h).unwrap();
                let _ = s.send_to(&dg, to);
            }
            if n.is_multiple_of(64) {
                std::thread::yield_now();
            }
        }
    })
}

#[test]
fn streams_one_ends_while_others_run() {
    let mut t = T::default();
    for round in 0..9 {
        let c = cfg("127.0.0.1:0".parse().unwrap(), Format::Chdr, 4);
        let mut rxs = Rx::start_streams_on(c, &[1, 2, 3], 1 + round % 2).unwrap();
        for rx in &mut rxs {
            for _ in 0..4 {
                rx.give(vec![0u8; PAY * 8]).unwrap();
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let f = chdr_flood(rxs[0].local_addr(), &[1, 2, 3], stop.clone());
        let serve = |rxs: &mut Vec<Rx>, t: &mut T, ms: u64| {
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_millis(ms) {
                rxs[0].notifier().wait_timeout(Duration::from_millis(1));
                for rx in rxs.iter_mut() {
                    while let Some(fl) = rx.take() {
                        t.filled += 1;
                        t.items += fl.items as u64;
                        check_items(&fl.buffer[..fl.items], t);
                        let _ = rx.give(fl.buffer);
                    }
                }
            }
        };
        serve(&mut rxs, &mut t, 30);
        let first = rxs.remove(round % 3);
        match round / 3 {
            0 => drop(first.shutdown()),
            1 => drop(first),
            _ => std::mem::forget(first),
        }
        let v: Vec<Vec<u8>> = (0..32).map(|_| vec![3u8; 20000]).collect();
        drop(v);
        serve(&mut rxs, &mut t, 30);
        let second = rxs.remove(0);
        drop(second);
        serve(&mut rxs, &mut t, 20);
        drop(rxs);
        std::thread::sleep(Duration::from_millis(5));
        stop.store(true, Ordering::Relaxed);
        f.join().unwrap();
    }
    let r = common::report("streams");
    eprintln!("{t:?}");
    assert!(t.filled > 0);
    assert_eq!(t.bad_chunks, 0);
    assert!(r.clean());
}
