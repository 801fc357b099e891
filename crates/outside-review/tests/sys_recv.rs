//! `sys::RecvBatch`'s safe functions around the lending rule ("the batch forgets [a lent
//! buffer] when that call returns"):
//! * a buffer lent (the one `unsafe` call, with its contract kept: valid until the next
//!   receive call returns), a receive, then the buffer freed — legal — and then only safe
//!   calls: `recv`, `recv_mmsg`, `recv_one`, `fill_from` must not write into it (the
//!   quarantine sees any write into the freed block);
//! * a fresh batch without buffers: `fill_from`, `recv` must write nowhere;
//! * out-of-range arguments: `recv(n > capacity)`, `fill_from(n > capacity)`, `meta(i >=
//!   capacity)`, `with_iovecs(_, > MAX_IOVECS)`, `new(0)`; red zones must stay intact.
mod common;

use fsdr_net_io::sys::recv::MAX_IOVECS;
use fsdr_net_io::sys::{RecvBatch, Wait};
use std::net::UdpSocket;

#[test]
fn forgotten_buffers_are_never_written() {
    let before = common::scan();
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_nonblocking(true).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = rx.local_addr().unwrap();
    let mut batch = RecvBatch::new(4);
    let mut bufs: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; 3000]).collect();
    for (i, b) in bufs.iter_mut().enumerate() {
        // SAFETY (contract kept): valid and untouched until the next receive call returns.
        unsafe { batch.set_buffer(i, b.as_mut_ptr(), b.len()) };
    }
    tx.send_to(&[1u8; 500], to).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let n = batch.recv_mmsg(&rx, 4).unwrap();
    assert_eq!(n, 1);
    drop(bufs); // legal now: the call returned
    for _ in 0..4 {
        tx.send_to(&[2u8; 700], to).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(5));
    let r1 = batch.recv_mmsg(&rx, 4);
    let r2 = batch.recv(&rx, 4, Wait::No);
    let r3 = batch.recv_one(&rx);
    let r4 = batch.fill_from(4, |w| {
        w.write(&[3u8; 900]);
        Some(to)
    });
    eprintln!("after forget: recv_mmsg {r1:?}, recv {r2:?}, recv_one {r3:?}, fill_from {r4:?}");
    let r = common::report("recvbatch forgotten");
    assert_eq!(r.dirty_blocks, before.dirty_blocks);
    assert!(r.clean());
}

#[test]
fn odd_arguments() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_nonblocking(true).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = rx.local_addr().unwrap();
    for _ in 0..8 {
        tx.send_to(&[9u8; 100], to).unwrap();
    }
    let mut fresh = RecvBatch::new(2);
    let a = fresh.fill_from(2, |w| {
        w.write(&[4u8; 64]);
        Some(to)
    });
    let b = fresh.recv_mmsg(&rx, 2);
    let c = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fresh.recv_mmsg(&rx, 100)));
    let d = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fresh.fill_from(100, |_| Some(to))
    }));
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fresh.meta(5).len));
    let f = std::panic::catch_unwind(|| RecvBatch::with_iovecs(2, MAX_IOVECS + 10).capacity());
    let mut z = RecvBatch::new(0);
    let g = z.recv_mmsg(&rx, 0);
    let h = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| z.recv_mmsg(&rx, 1)));
    eprintln!(
        "fill_from no buffers {a:?}; recv no buffers {b:?}; recv n>cap {:?}; fill n>cap {:?}; meta(5) {:?}; with_iovecs(>MAX) {:?}; new(0) recv 0 {g:?}; new(0) recv 1 {:?}",
        c.map_err(|_| "panic"),
        d.map_err(|_| "panic"),
        e.map_err(|_| "panic"),
        f.map_err(|_| "panic"),
        h.map_err(|_| "panic")
    );
    let r = common::report("recvbatch odd");
    assert!(r.clean());
}
