//! The latency budget of the blocks' builder: the one setting that trades CPU for latency
//! (`UdpSourceBuilder::latency_budget`, default 2 ms) and the low-latency preset. What it
//! sets, that an explicit wake moderation wins whatever the order, and that under the
//! default a lone datagram still reaches the sink without another behind it (sparse traffic
//! wakes at once).

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fsdr_net::io::{Coalesce, EngineConfig};
use fsdr_net::prelude::*;
use fsdr_net::{Error, UdpSourceBuilder};
use futuresdr::runtime::dev::prelude::*;

/// What a builder's engine settings end up with, as `read` sees them.
fn seen<R>(b: UdpSourceBuilder<u8>, read: impl FnOnce(&EngineConfig) -> R) -> R {
    let mut seen = None;
    let _ = b.configure(|c: &mut EngineConfig| seen = Some(read(c)));
    seen.expect("configure runs its closure")
}

/// The wake moderation a builder ends up with.
fn coalesce_of(b: UdpSourceBuilder<u8>) -> Coalesce {
    seen(b, |c| c.coalesce)
}

fn builder() -> UdpSourceBuilder<u8> {
    UdpSource::<u8>::builder("127.0.0.1:0")
}

/// A builder whose engine settings were edited through `configure`, then given a budget.
fn edited_then_budgeted(edit: impl FnOnce(&mut EngineConfig)) -> UdpSourceBuilder<u8> {
    builder()
        .configure(edit)
        .latency_budget(Duration::from_millis(10))
}

#[test]
fn the_budget_sets_the_wake_moderation() {
    let every = |ms: u64| Coalesce::Adaptive {
        frames: Coalesce::BUDGET_FRAMES,
        time: Duration::from_millis(ms),
    };
    assert_eq!(
        UdpSourceBuilder::<u8>::DEFAULT_LATENCY_BUDGET,
        Duration::from_millis(2)
    );
    assert_eq!(coalesce_of(builder()), every(1), "the default: 2 ms");
    assert_eq!(
        coalesce_of(builder().latency_budget(Duration::from_millis(8))),
        every(4)
    );
    assert_eq!(
        coalesce_of(builder().latency_budget(Duration::ZERO)),
        Coalesce::Off
    );
    assert_eq!(coalesce_of(builder().low_latency()), Coalesce::Off);
    // An explicit wake moderation wins, given before or after the budget.
    let explicit = Coalesce::Fixed {
        frames: 8,
        time: Duration::from_micros(300),
    };
    assert_eq!(
        coalesce_of(builder().coalesce(explicit).latency_budget(Duration::ZERO)),
        explicit
    );
    assert_eq!(
        coalesce_of(builder().latency_budget(Duration::ZERO).coalesce(explicit)),
        explicit
    );
    assert_eq!(
        coalesce_of(edited_then_budgeted(|c| c.coalesce = explicit)),
        explicit
    );
    // Under load the socket is read every quarter of the budget, and on every arrival with a
    // zero budget; an interval set through `configure` wins.
    let poll = |b: UdpSourceBuilder<u8>| seen(b, |c| c.poll_interval);
    assert_eq!(poll(builder()), Some(Duration::from_micros(500)));
    assert_eq!(poll(builder().latency_budget(Duration::ZERO)), None);
    assert_eq!(poll(builder().low_latency()), None);
    assert_eq!(poll(edited_then_budgeted(|c| c.poll_interval = None)), None);
    // The engine's own queue bound is another setting, left as it is.
    assert_eq!(
        seen(builder().latency_budget(Duration::ZERO), |c| c
            .latency_budget),
        Some(Duration::from_millis(20))
    );
}

/// The scheduling policy of this process's receive threads (`fsdr-net-rx*`).
fn receive_thread_policies() -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .unwrap_or_default()
                .starts_with("fsdr-net-rx")
        })
        .filter_map(|t| {
            let tid: i32 = t.file_name().to_string_lossy().parse().ok()?;
            fsdr_net_io::sys::sched::thread_policy(tid).ok()
        })
        .collect()
}

#[test]
fn the_low_latency_preset_runs_the_receive_thread_real_time_or_says_why_not() {
    match builder().low_latency().build() {
        Ok(src) => {
            // The thread sets its policy as it starts.
            let until = Instant::now() + Duration::from_secs(10);
            while !receive_thread_policies().contains(&libc::SCHED_FIFO) {
                assert!(
                    Instant::now() < until,
                    "no SCHED_FIFO receive thread: {:?}",
                    receive_thread_policies()
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            drop(src);
        }
        Err(e) => {
            // Without the privileges it needs: a clear error, nothing started.
            let text = e.to_string();
            assert!(
                matches!(&e, Error::Io(_))
                    && (text.contains("needs root") || text.contains("CAP_SYS_NICE")),
                "{e}"
            );
        }
    }
    // A priority given explicitly is kept.
    assert_eq!(
        seen(builder().fifo_priority(7).low_latency(), |c| c
            .threads
            .fifo_priority),
        Some(7)
    );
}

/// Counts what arrives, shared with the test.
#[derive(Block)]
struct Count {
    #[input]
    input: DefaultCpuReader<u8>,
    seen: Arc<AtomicUsize>,
}

impl Kernel for Count {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let n = self.input.slice().len();
        self.seen.fetch_add(n, Ordering::AcqRel);
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}

#[test]
fn under_the_default_budget_a_lone_datagram_reaches_the_sink() -> anyhow::Result<()> {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let src = builder()
        .finish_after_idle(Duration::from_secs(1))
        .build()?;
    let dest = src.local_addr();
    let seen = Arc::new(AtomicUsize::new(0));
    let snk = Count {
        input: DefaultCpuReader::default(),
        seen: seen.clone(),
    };
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk);
    let running = Runtime::new().start(fg)?;
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    // One datagram at a time; each must arrive with nothing sent behind it.
    for i in 1..=3usize {
        tx.send_to(&[i as u8; 100], dest)?;
        let until = Instant::now() + Duration::from_secs(30);
        while seen.load(Ordering::Acquire) < 100 * i {
            anyhow::ensure!(
                Instant::now() < until,
                "datagram {i} did not reach the sink"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    running.wait()?;
    assert_eq!(seen.load(Ordering::Acquire), 300);
    Ok(())
}
