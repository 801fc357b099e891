//! Starting and stopping engines leaves no thread and no file descriptor behind. Alone in its
//! own test binary so that no other test's threads disturb the counts.

mod common;

use common::*;
use fsdr_net_io::{Backend, Engine, EngineConfig, Format};

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn start_stop_200_times_leaves_nothing_behind() {
    // Warm up lazily created process-wide state (GSO detection, tracing).
    engine(Backend::Mio, Format::Raw).shutdown();
    let (threads, fds) = (thread_count(), fd_count());
    for i in 0..200 {
        let backend = if i % 2 == 0 {
            Backend::Mio
        } else {
            Backend::Blocking
        };
        // A small slot pool: the default one (8192 slots, written at start so that the first
        // datagrams find their pages) takes tens of milliseconds to start, and what is
        // checked here is what a start leaves behind.
        let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.backend = backend;
        cfg.format = Format::Seq64;
        cfg.slots = 256;
        let e = Engine::start(cfg).expect("engine starts");
        if i % 50 == 0 {
            assert!(thread_count() > threads, "a receive thread runs");
        }
        if i % 3 == 0 {
            e.shutdown();
        } else {
            drop(e);
        }
    }
    assert_eq!(thread_count(), threads, "threads left behind");
    assert_eq!(fd_count(), fds, "file descriptors left behind");
    // Inline engines start no thread and leave no descriptor behind either.
    for i in 0..100 {
        let mut cfg = EngineConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.format = Format::Seq64;
        cfg.slots = 256;
        let e = Engine::start_inline(cfg).unwrap();
        assert_eq!(thread_count(), threads, "an inline engine starts no thread");
        if i % 3 == 0 {
            e.shutdown();
        } else {
            drop(e);
        }
    }
    assert_eq!(
        fd_count(),
        fds,
        "file descriptors left behind by inline engines"
    );
}
