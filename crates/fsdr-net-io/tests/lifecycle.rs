//! Starting and stopping engines leaves no thread and no file descriptor behind. Alone in its
//! own test binary so that no other test's threads disturb the counts.

mod common;

use common::*;
use fsdr_net_io::engine::RECEIVE_THREAD_PREFIX;
use fsdr_net_io::{Backend, Engine, EngineConfig, Format};

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The names of the process's threads, for the failure messages.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_string())
        .collect()
}

/// The thread count once no receive thread is listed any more, or after 5 s. A joined thread
/// can still be listed in `/proc/self/task` for a moment: the kernel wakes `pthread_join` when
/// it clears the thread's id, before it releases the task (CI on a loaded host once counted one
/// more). Every thread an engine starts carries [`RECEIVE_THREAD_PREFIX`] in its name.
fn thread_count_settled() -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let receive_threads = || {
        thread_names()
            .iter()
            .filter(|name| name.starts_with(RECEIVE_THREAD_PREFIX))
            .count()
    };
    while receive_threads() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    thread_count()
}

#[test]
fn start_stop_200_times_leaves_nothing_behind() {
    // Warm up lazily created process-wide state (GSO detection, tracing).
    engine(Backend::Mio, Format::Raw).shutdown();
    let threads = thread_count_settled();
    let fds = fd_count();
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
    assert_eq!(thread_count_settled(), threads, "threads left behind");
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
