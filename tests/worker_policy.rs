//! fsdr-net's blocks move the FutureSDR workers they run on to SCHED_BATCH (see
//! `batch_workers` on the builders), and leave them alone when told to. A test binary of its
//! own: it looks at every thread of the process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fsdr_net::prelude::*;
use fsdr_net_io::sys::sched::thread_policy;
use futuresdr::runtime::dev::prelude::*;

/// Whether any FutureSDR worker thread (`smol-*`) of this process is in SCHED_BATCH now.
fn a_worker_is_batch() -> bool {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    tasks.flatten().any(|t| {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let tid: i32 = t.file_name().to_string_lossy().parse().unwrap_or(0);
        comm.starts_with("smol") && thread_policy(tid).ok() == Some(libc::SCHED_BATCH)
    })
}

/// Runs a source that ends after 300 ms of silence and reports whether a worker was seen in
/// SCHED_BATCH meanwhile.
fn run(batch: bool) -> Result<bool> {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let src = UdpSource::<u8>::builder("127.0.0.1:0")
        .finish_after_idle(Duration::from_millis(300))
        .batch_workers(batch)
        .build()
        .unwrap();
    let snk = futuresdr::blocks::NullSink::<u8>::new();
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk);
    let done = Arc::new(AtomicBool::new(false));
    let seen = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut seen = false;
            while !done.load(Ordering::Acquire) {
                seen |= a_worker_is_batch();
                std::thread::sleep(Duration::from_millis(5));
            }
            seen
        })
    };
    Runtime::new().run(fg).unwrap();
    done.store(true, Ordering::Release);
    Ok(seen.join().unwrap())
}

#[test]
fn workers_are_batch_unless_told_otherwise() -> Result<()> {
    assert!(!run(false)?, "batch_workers(false) left the workers alone");
    assert!(run(true)?, "the source's worker moved to SCHED_BATCH");
    Ok(())
}
