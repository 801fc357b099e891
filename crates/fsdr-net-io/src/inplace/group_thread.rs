//! One receive thread for several in-place receivers of a group (`group.rs`): the thread
//! waits for all their sockets in one `ppoll` and steps each receiver that has something to
//! do, so that a radio's channels on one CPU cost one thread's wake-ups and task switches,
//! not one per channel. Each receiver keeps its own state, buffers and counters; under load
//! with a poll interval the thread sleeps that interval once for all of them.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::ItemBuffer;
use super::receiver::{Polling, Receive, Step, Until};
use crate::Error;
use crate::engine::ThreadOptions;
use crate::sample::Item;
use crate::sys;

/// How often the thread looks again for a receiver without an empty buffer (a buffer given
/// back does not wake a thread that waits in `ppoll`).
const PAUSE_CHECK_NS: u64 = 250_000;
/// The most steps one receiver takes in a turn before the next one's (a turn ends sooner
/// when the receiver has nothing left to do).
const STEPS_PER_TURN: usize = 8;

/// The thread of a group, joined when the last of its receivers is dropped (by then it has
/// finished every one of them and ended).
pub(crate) struct GroupThread(Option<JoinHandle<()>>);

impl Drop for GroupThread {
    fn drop(&mut self) {
        if let Some(t) = self.0.take()
            && t.join().is_err()
        {
            tracing::error!("in-place group receive thread panicked");
        }
    }
}

/// A receiver the thread serves.
struct Member<T, B> {
    rx: Box<Receive<T, B>>,
    /// Told when the receiver is finished; `None` once it is.
    done: Option<mpsc::Sender<()>>,
    /// Its last step found no empty buffer: its socket is not waited for.
    paused: bool,
}

/// Starts thread `index` (its name and CPU, as for one receive thread per receiver) for
/// `rxs`; returns it with, per receiver, what says that the receiver is finished.
pub(super) fn spawn<T: Item, B: ItemBuffer<T>>(
    index: usize,
    opts: &ThreadOptions,
    rxs: Vec<Box<Receive<T, B>>>,
) -> Result<(Arc<GroupThread>, Vec<mpsc::Receiver<()>>), Error> {
    let mut dones = Vec::with_capacity(rxs.len());
    let members = rxs
        .into_iter()
        .map(|rx| {
            let (tx, done) = mpsc::channel();
            dones.push(done);
            Member {
                rx,
                done: Some(tx),
                paused: false,
            }
        })
        .collect();
    let thread = crate::engine::spawn_receive_thread(index, opts, move || run(members))?;
    Ok((Arc::new(GroupThread(Some(thread))), dones))
}

/// The thread's loop: until every receiver is finished, waits for the sockets (or the next
/// deadline, or the poll interval) and gives each receiver a turn.
fn run<T: Item, B: ItemBuffer<T>>(mut members: Vec<Member<T, B>>) {
    sys::set_timer_slack_ns(5_000);
    let poll_ns = members.iter().map(|m| m.rx.poll_ns).min().unwrap_or(0);
    let mut readable = Vec::with_capacity(members.len());
    // What the last round's receives found: whether more is queued.
    let mut urgency = Polling::Off;
    loop {
        // A receiver being stopped is finished as its own thread would finish it.
        for m in &mut members {
            if m.done.is_some() && m.rx.stopping() {
                m.rx.drain_and_finish();
                if let Some(done) = m.done.take() {
                    let _ = done.send(());
                }
            }
        }
        if members.iter().all(|m| m.done.is_none()) {
            return;
        }
        let wait_ns = wait_ns(&members, urgency, poll_ns);
        let live = members.iter().filter(|m| m.done.is_some() && !m.paused);
        if urgency == Polling::Off || wait_ns != Some(0) {
            let fds: Vec<_> = live.map(|m| m.rx.socket.as_fd()).collect();
            sys::readable_among(&fds, wait_ns, &mut readable);
        } else {
            // Under load, after the poll interval (or a full receive): every socket is read
            // without asking which has data (most have; a receive that finds none costs
            // what the question would).
            readable.clear();
            readable.extend(live.map(|_| true));
        }
        urgency = Polling::Off;
        let mut polled = readable.iter();
        for m in members.iter_mut().filter(|m| m.done.is_some()) {
            m.rx.readable = !m.paused && polled.next().copied().unwrap_or(false);
            m.paused = false;
            for _ in 0..STEPS_PER_TURN {
                match m.rx.step(false, Until::Polled) {
                    Step::Busy => urgency = urgency.max(m.rx.polling),
                    Step::NoBuffer => {
                        m.paused = true;
                        break;
                    }
                    Step::Idle | Step::Drained => break,
                }
            }
        }
    }
}

/// How long the next `ppoll` may wait (ns; `None`: until a socket is readable): not at all
/// after a full receive; after one that took what was queued, the poll interval is slept
/// first (up to the next deadline) and then not at all; else until the next deadline of any
/// receiver, and no longer than `PAUSE_CHECK_NS` while one waits for a buffer.
fn wait_ns<T: Item, B: ItemBuffer<T>>(
    members: &[Member<T, B>],
    urgency: Polling,
    poll_ns: u64,
) -> Option<u64> {
    let live = || members.iter().filter(|m| m.done.is_some());
    let now = sys::monotonic_ns();
    let deadline = live().filter_map(|m| m.rx.next_deadline_ns()).min();
    let until_deadline = deadline.map(|d| d.saturating_sub(now));
    let wait = match urgency {
        Polling::Drain => Some(0),
        Polling::Sleep if poll_ns > 0 => {
            let sleep = until_deadline.map_or(poll_ns, |d| d.min(poll_ns));
            if sleep > 0 {
                std::thread::sleep(Duration::from_nanos(sleep));
            }
            Some(0)
        }
        _ => until_deadline,
    };
    if live().any(|m| m.paused) {
        Some(wait.map_or(PAUSE_CHECK_NS, |w| w.min(PAUSE_CHECK_NS)))
    } else {
        wait
    }
}
