//! The turnaround probe (issue #32, item 4) against the bare `recvmmsg` → `sendmmsg` loop:
//! every packet sent is answered, stamped on the way out and on the way back, and matched to
//! its answer by the timestamp it carries.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use fsdr_net_io::turnaround::{Probe, bare_loop};

#[test]
fn the_probe_measures_the_bare_loop_packet_by_packet() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    // The loop's receive buffer before anything is sent: the loop sets it too, but its
    // thread may start after the first packets (under ASan a few were dropped at the
    // default size once).
    nix::sys::socket::setsockopt(
        &rx,
        nix::sys::socket::sockopt::RcvBufForce,
        &fsdr_net_io::socket::DEFAULT_RECV_BUFFER,
    )
    .unwrap();
    let to = rx.local_addr().unwrap();
    // The probe's answer port: a free one.
    let back = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let stop = AtomicBool::new(false);
    let passed = AtomicU64::new(0);
    let report = std::thread::scope(|s| {
        let looped = s.spawn(|| bare_loop(rx, back, &stop, &passed));
        let report = Probe::new(to, back)
            .rate(5e6)
            .samples_per_packet(1000)
            .duration(Duration::from_millis(300))
            // Counting, not timing, is under test: a loop thread descheduled for a while on
            // a loaded machine still answers within the wait.
            .linger(Duration::from_secs(1))
            .run()
            .unwrap();
        stop.store(true, Ordering::Relaxed);
        looped.join().unwrap().unwrap();
        report
    });
    let passed = passed.load(Ordering::Relaxed);
    assert!(report.sent > 100, "{report:?}");
    assert_eq!(passed, report.sent, "the loop passed every packet on");
    assert_eq!(report.answered, report.sent, "{report:?}");
    assert_eq!((report.unstamped, report.foreign), (0, 0), "{report:?}");
    assert_eq!(report.turnaround_ns.len() as u64, report.sent);
    // Quantiles are ordered and come from the samples.
    let (p50, p99) = (
        report.percentile_ns(0.5).unwrap(),
        report.percentile_ns(0.99).unwrap(),
    );
    assert!(p50 <= p99 && report.turnaround_ns.contains(&p99));
}
