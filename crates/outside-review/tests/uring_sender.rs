//! The io_uring sender (`send::UringSender`), zero copy and not, over a veth pair whose
//! sending end has a netem delay: the kernel then holds the sent pages for the delay, long
//! after the send's first completion. Every datagram carries its index in every 4-byte word.
//!
//! * `recycled_buffers_keep_their_bytes`: buffers are taken with `buffer()` (recycled ones),
//!   filled and submitted as fast as the queue takes them; the receiver checks every datagram
//!   (self-consistent, each index once). A buffer recycled before the kernel let go of it
//!   would show as a datagram carrying a later index (or a mixed one).
//! * `close_and_drop_with_sends_in_flight`: the sender is closed / dropped / forgotten right
//!   after the last submit, while the netem queue still holds its pages; the received bytes
//!   must not carry the allocator's poison (0xA5), and no freed block may be dirty.
//! * `panic_hook_with_sends_in_flight`: `lent::panic_send_thread_to(port)` makes the sending
//!   thread panic with sends in flight; the same checks.
mod common;

use fsdr_net_io::netns::VethPair;
use fsdr_net_io::send::{SenderConfig, Submit, UringSender};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const SEG: usize = 1200;

fn netem(pair: &VethPair, delay_ms: u32 /* tbf rate in Mbit/s */) {
    let st = pair
        .a
        .command("tc")
        .args([
            "qdisc",
            "add",
            "dev",
            &pair.a.ifname,
            "root",
            "tbf",
            "rate",
            &format!("{delay_ms}mbit"),
            "burst",
            "3000",
            "limit",
            "100000000",
        ])
        .status()
        .unwrap();
    assert!(st.success(), "tc netem");
}

struct Rx {
    sock: UdpSocket,
}

#[derive(Default, Debug)]
struct Check {
    datagrams: u64,
    inconsistent: u64,
    poison: u64,
    dup: u64,
    out_of_order: u64,
    wrong_len: u64,
    first_bad: Option<(u32, Vec<u8>)>,
    seen: HashMap<u32, u32>,
}

impl Rx {
    fn drain(&self, check: &mut Check, idle: Duration) {
        let mut buf = vec![0u8; 65536];
        self.sock.set_read_timeout(Some(idle)).unwrap();
        let mut last: i64 = -1;
        while let Ok(n) = self.sock.recv(&mut buf) {
            check.datagrams += 1;
            let d = &buf[..n];
            if n != SEG {
                check.wrong_len += 1;
            }
            if d.chunks(4).any(|w| w == [0xA5; 4]) {
                check.poison += 1;
            }
            let idx = u32::from_le_bytes(d[..4].try_into().unwrap());
            let consistent = d
                .chunks_exact(4)
                .all(|w| u32::from_le_bytes(w.try_into().unwrap()) == idx);
            if !consistent {
                check.inconsistent += 1;
                if check.first_bad.is_none() {
                    check.first_bad = Some((idx, d[..64.min(n)].to_vec()));
                }
            }
            if (idx as i64) < last {
                check.out_of_order += 1;
            }
            last = idx as i64;
            let c = check.seen.entry(idx).or_insert(0);
            *c += 1;
            if *c > 1 {
                check.dup += 1;
            }
        }
    }
}

fn setup(tag: &str, delay_ms: u32) -> (VethPair, Rx, SocketAddr) {
    let pair = VethPair::create(tag, 1500).expect("veth");
    netem(&pair, delay_ms);
    // A large receive buffer so nothing is dropped at the receiver: forced (SO_RCVBUFFORCE)
    // for this socket only, the machine's net.core.rmem_max left as it was.
    let cfg = fsdr_net_io::socket::SocketConfig::new(SocketAddr::new(pair.b.addr.into(), 0))
        .recv_buffer(256 << 20);
    let opened = pair
        .b
        .run(|| fsdr_net_io::socket::open_socket(&cfg, false))
        .unwrap();
    let sock: UdpSocket = opened.socket.into();
    sock.set_nonblocking(false).unwrap();
    let to = opened.local_addr;
    (pair, Rx { sock }, to)
}

fn fill(buf: &mut Vec<u8>, first: u32, n: usize) {
    buf.clear();
    for k in 0..n {
        let idx = first + k as u32;
        for _ in 0..SEG / 4 {
            buf.extend_from_slice(&idx.to_le_bytes());
        }
    }
}

fn submit_all(s: &mut UringSender, mut buf: Vec<u8>) -> bool {
    loop {
        match s.submit(buf, SEG) {
            Ok(()) => return true,
            Err(Submit::Full(b)) => {
                buf = b;
                s.notifier().wait_timeout(Duration::from_millis(50));
            }
            Err(e) => {
                eprintln!("submit: {:?}", matches!(e, Submit::Closed));
                return false;
            }
        }
    }
}

fn run_recycle(zero_copy: bool, gso: bool) {
    let (pair, rx, to) = setup(if zero_copy { "zc" } else { "cp" }, 40);
    let mut cfg = SenderConfig::new(to);
    cfg.gso = gso;
    cfg.uring_depth = 64;
    let mut s = pair
        .a
        .run(|| UringSender::new(&cfg, zero_copy))
        .expect("uring sender");
    let per_buf = 16usize;
    let bufs = 400u32;
    let t = Instant::now();
    for b in 0..bufs {
        let mut buf = s.buffer();
        fill(&mut buf, b * per_buf as u32, per_buf);
        assert!(submit_all(&mut s, buf));
    }
    let stats = s.close();
    eprintln!(
        "zc={zero_copy} gso={gso}: submitted {} datagrams in {:?}",
        bufs as usize * per_buf,
        t.elapsed()
    );
    let mut c = Check::default();
    rx.drain(&mut c, Duration::from_millis(500));
    let missing = (0..bufs * per_buf as u32)
        .filter(|i| !c.seen.contains_key(i))
        .count();
    eprintln!(
        "zc={zero_copy} gso={gso}: received {} inconsistent {} poison {} dup {} out_of_order {} wrong_len {} missing {} first_bad {:?}",
        c.datagrams,
        c.inconsistent,
        c.poison,
        c.dup,
        c.out_of_order,
        c.wrong_len,
        missing,
        c.first_bad
    );
    let _ = stats;
    let r = common::report(&format!("recycle zc={zero_copy} gso={gso}"));
    drop(pair);
    assert_eq!((c.inconsistent, c.poison, c.dup), (0, 0, 0));
    assert!(r.clean());
}

#[test]
fn recycled_buffers_keep_their_bytes() {
    run_recycle(true, false);
    run_recycle(true, true);
    run_recycle(false, true);
}

enum End {
    Close,
    Drop,
    Forget,
}

fn run_end(zero_copy: bool, end: End, rounds: u32) {
    let (pair, rx, to) = setup("end", 60);
    let mut total = Check::default();
    for round in 0..rounds {
        let mut cfg = SenderConfig::new(to);
        cfg.gso = round % 2 == 0;
        cfg.uring_depth = 32;
        let mut s = pair
            .a
            .run(|| UringSender::new(&cfg, zero_copy))
            .expect("uring sender");
        for b in 0..4u32 {
            // fresh buffers each time (not recycled): freed by the library when done
            let mut buf = Vec::with_capacity(32 * SEG);
            fill(&mut buf, round * 1000 + b * 32, 32);
            if !submit_all(&mut s, buf) {
                break;
            }
        }
        match end {
            End::Close => {
                s.close();
            }
            End::Drop => drop(s),
            End::Forget => std::mem::forget(s),
        }
        // churn the allocator: nothing reuses (quarantine), but poison is written now
        let v: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 40000]).collect();
        drop(v);
    }
    rx.drain(&mut total, Duration::from_millis(800));
    eprintln!(
        "zc={zero_copy} end: received {} inconsistent {} poison {} dup {} first_bad {:?}",
        total.datagrams, total.inconsistent, total.poison, total.dup, total.first_bad
    );
    let r = common::report("end");
    drop(pair);
    assert_eq!((total.inconsistent, total.poison), (0, 0));
    assert!(r.clean());
}

#[test]
fn close_and_drop_with_sends_in_flight() {
    run_end(true, End::Close, 10);
    run_end(true, End::Drop, 10);
    run_end(false, End::Drop, 5);
    run_end(true, End::Forget, 3);
}

#[test]
fn panic_hook_with_sends_in_flight() {
    let (pair, rx, to) = setup("pan", 60);
    let mut c = Check::default();
    for round in 0..6u32 {
        let mut cfg = SenderConfig::new(to);
        cfg.gso = round % 2 == 0;
        let zero_copy = round % 3 != 2;
        let mut s = pair
            .a
            .run(|| UringSender::new(&cfg, zero_copy))
            .expect("uring sender");
        fsdr_net_io::lent::panic_send_thread_to(to.port());
        for b in 0..4u32 {
            let mut buf = Vec::with_capacity(32 * SEG);
            fill(&mut buf, round * 1000 + b * 32, 32);
            if !submit_all(&mut s, buf) {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
        eprintln!(
            "round {round}: armed after sends: {}",
            fsdr_net_io::lent::send_panic_armed()
        );
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(s)));
        let v: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 40000]).collect();
        drop(v);
    }
    fsdr_net_io::lent::panic_send_thread_to(0);
    let stop = Arc::new(AtomicBool::new(false));
    let _ = stop;
    rx.drain(&mut c, Duration::from_millis(800));
    eprintln!(
        "panic: received {} inconsistent {} poison {} dup {} first_bad {:?}",
        c.datagrams, c.inconsistent, c.poison, c.dup, c.first_bad
    );
    let r = common::report("panic");
    drop(pair);
    assert_eq!((c.inconsistent, c.poison), (0, 0));
    assert!(r.clean());
    let _ = Ordering::Relaxed;
}
