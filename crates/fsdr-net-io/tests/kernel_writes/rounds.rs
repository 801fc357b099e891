//! What the kernel-write checks share (`tests/kernel_writes.rs` here and in the root
//! package): traffic that keeps coming while a receiver ends, the ways to end it, and the
//! look at the instrument after each round.

#![allow(dead_code)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fsdr_net_io::netns::TestLink;

use super::quarantine;

/// Rounds of start, traffic and end per receiver.
pub const ROUNDS: usize = 40;
/// Datagram size: odd, so that no slot boundary lines up with it.
pub const SIZE: usize = 2_998;

/// One test at a time: each keeps a sender busy, and each looks at every block freed since
/// it started.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A thread that keeps sending Seq64 datagrams to `to` (about one every 5 µs) until told
/// to stop; returns how many it sent.
pub struct Traffic {
    stop: Arc<AtomicBool>,
    sent: Arc<std::sync::atomic::AtomicU64>,
    thread: Option<JoinHandle<u64>>,
}

impl Traffic {
    pub fn start(link: &TestLink, to: SocketAddr) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let count = sent.clone();
        let thread = link.send(move || {
            std::thread::spawn(move || {
                let any: SocketAddr = if to.is_ipv4() {
                    "0.0.0.0:0".parse().unwrap()
                } else {
                    "[::]:0".parse().unwrap()
                };
                let tx = UdpSocket::bind(any).unwrap();
                let mut dg = vec![0u8; SIZE];
                let mut seq = 0u64;
                let mut next = Instant::now();
                while !flag.load(Ordering::Relaxed) {
                    seq += 1;
                    dg[..8].copy_from_slice(&seq.to_le_bytes());
                    for (i, b) in dg[8..].iter_mut().enumerate() {
                        *b = (seq as usize + i) as u8;
                    }
                    let _ = tx.send_to(&dg, to);
                    count.store(seq, Ordering::Relaxed);
                    next += Duration::from_micros(5);
                    while Instant::now() < next && !flag.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                    if Instant::now() > next + Duration::from_millis(1) {
                        next = Instant::now();
                    }
                }
                seq
            })
        });
        Traffic {
            stop,
            sent,
            thread: Some(thread),
        }
    }

    /// Waits until `n` datagrams went out (a loaded machine may start the thread late), at
    /// most 10 s.
    pub fn wait_sent(&self, n: u64) {
        let until = Instant::now() + Duration::from_secs(10);
        while self.sent.load(Ordering::Relaxed) < n && Instant::now() < until {
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    pub fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How a round lets go of its receiver.
#[derive(Debug, Clone, Copy)]
pub enum End {
    Shutdown,
    Stop,
    Drop,
}

impl End {
    pub fn of(round: usize) -> End {
        [End::Shutdown, End::Stop, End::Drop][round % 3]
    }
}

/// Fails with what the instrument saw since `mark` (the start of the round before, so that a
/// write that comes late is still seen): blocks written after they were freed, or kernel
/// copies into released mappings.
pub fn check_round(what: &str, round: usize, mark: usize, logs: &quarantine::LogLines) {
    let written = quarantine::writes_since(mark);
    let faults = logs.faults();
    assert!(
        written.is_empty() && faults.is_empty(),
        "{what}, round {round}: {} freed blocks written after release (first: {:?}); \
         {} kernel copies into released mappings ({:?})",
        written.len(),
        written.first(),
        faults.len(),
        faults.first(),
    );
}
