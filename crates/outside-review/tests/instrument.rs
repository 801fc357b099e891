//! Calibrates the instrument: the kernel writing into a freed heap block must be seen by
//! `common::scan()` (the one `unsafe` call here is the calibration's deliberate misuse of
//! `RecvBatch::set_buffer`, not a sequence under review). Also checks that a dropped,
//! never-lent Vec leaves its poison intact.
mod common;

use fsdr_net_io::sys::{RecvBatch, Wait};
use std::net::UdpSocket;

#[test]
fn kernel_write_into_freed_block_is_seen() {
    let before = common::scan();
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut batch = RecvBatch::new(1);
    let mut buf = vec![0u8; 4000];
    unsafe { batch.set_buffer(0, buf.as_mut_ptr(), buf.len()) };
    let p = buf.as_ptr() as usize;
    drop(buf); // freed (poisoned) while still lent for the next call: the deliberate bug
    tx.send_to(&[0x11u8; 1000], rx.local_addr().unwrap())
        .unwrap();
    let n = batch.recv(&rx, 1, Wait::ForOne).unwrap();
    assert_eq!(n, 1);
    let r = common::report("calibration");
    eprintln!("freed block was at {p:#x}");
    assert_eq!(r.dirty_blocks, before.dirty_blocks + 1);
    assert_eq!(r.dirty_bytes, before.dirty_bytes + 1000);
}
