//! When the in-place receive thread reads: it waits for the socket or the next deadline (a
//! hand-over, the reorder timeout), and under load with a poll interval
//! (`EngineConfig::poll_interval`) it sleeps that interval after a receive that brought data
//! instead of waking on every arrival, as the `mio` backend does.

use std::time::Duration;

use super::ItemBuffer;
use super::receiver::Receive;
use super::step::{Polled, Ready, Until};
use crate::sample::Item;
use crate::sys;

impl<T: Item, B: ItemBuffer<T>> Receive<T, B> {
    /// When the reorder stage gives up on its oldest gap (ns, monotonic), if anything is held.
    fn reorder_deadline_ns(&self, now: u64) -> Option<u64> {
        self.order
            .as_ref()
            .and_then(|o| o.held_since())
            .map(|since| {
                now + self
                    .reorder_timeout
                    .saturating_sub(since.elapsed())
                    .as_nanos() as u64
            })
    }

    /// The next moment this receiver must act without data (ns, monotonic): a hand-over
    /// due, the reorder timeout. For a group's thread, which waits for all its receivers.
    pub(super) fn next_deadline_ns(&self) -> Option<u64> {
        let due = self.hand_over_due();
        [
            due.map(|d| d.on_receive),
            due.map(|d| d.at_latest),
            self.reorder_deadline_ns(sys::monotonic_ns()),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Waits until the socket is readable or a deadline (hand-over, reorder timeout)
    /// passes, and acts on the deadline; waits no longer than `until` allows.
    pub(super) fn wait_for_data(&mut self, until: Until) -> Ready {
        let reorder = self.reorder_deadline_ns(sys::monotonic_ns());
        let due = self.hand_over_due();
        // Right after a receive: hand over now if that receive made it due.
        if due.is_some_and(|d| sys::monotonic_ns() >= d.on_receive) {
            self.hand_over_now();
            return Ready::Acted;
        }
        let limit = match until {
            Until::Data => None,
            Until::Within(w) => Some(sys::monotonic_ns() + w.as_nanos() as u64),
            Until::Polled => Some(sys::monotonic_ns()),
        };
        let deadline = [due.map(|d| d.at_latest), reorder]
            .into_iter()
            .flatten()
            .min();
        let Some(d) = deadline.or(limit) else {
            return Ready::Now;
        };
        let d = limit.map_or(d, |l| l.min(d));
        let now = sys::monotonic_ns();
        let readable = match until {
            // What the group's poll found, unless a deadline passed meanwhile.
            Until::Polled => {
                std::mem::take(&mut self.readable) && deadline.is_none_or(|dl| now < dl)
            }
            _ => now < d && self.readable_within(d - now),
        };
        if readable {
            return Ready::Now;
        }
        // A deadline passed with nothing to read.
        let mut acted = false;
        if let Some(o) = self.order.as_mut()
            && o.held_since()
                .is_some_and(|since| since.elapsed() >= self.reorder_timeout)
        {
            o.flush_oldest(&mut self.released);
            self.deliver_released();
            acted = true;
        }
        let due_now = |rx: &Self| {
            rx.hand_over_due()
                .is_some_and(|due| sys::monotonic_ns() >= due.at_latest)
        };
        // The buffer waited for a hole as long as the reorder timeout allows, counted from
        // its datagram's arrival (the reorder stage counts from a moment later): the gaps
        // due are given up on first, so their zeros go in and the datagrams placed ahead
        // stay where they are, rather than being copied back out for a hand-over.
        while due_now(self) && !self.may_hand_over() {
            let before = self.ahead_at.len();
            let Some(o) = self.order.as_mut() else { break };
            if !o.flush_oldest(&mut self.released) {
                break;
            }
            self.deliver_released();
            acted = true;
            if self.ahead_at.len() >= before {
                break;
            }
        }
        if due_now(self) {
            self.hand_over_now();
            acted = true;
        }
        if acted || limit.is_none() {
            Ready::Acted
        } else {
            Ready::Nothing
        }
    }

    /// After a receive that brought data, with a poll interval: hands over at once if that
    /// receive made a hand-over due; else, with no deadline passed, sleeps the interval (or
    /// until a hand-over or the reorder timeout is due) if `sleep` (the last receive took
    /// what was queued), and the next receive takes what came meanwhile without waiting. A
    /// deadline already passed is left to `wait_for_data`.
    pub(super) fn poll_sleep(&mut self, sleep: bool) -> Polled {
        let now = sys::monotonic_ns();
        let due = self.hand_over_due();
        if due.is_some_and(|d| now >= d.on_receive) {
            self.hand_over_now();
            return Polled::HandedOver;
        }
        let reorder = self.reorder_deadline_ns(now);
        let deadline = [due.map(|d| d.at_latest), reorder]
            .into_iter()
            .flatten()
            .min();
        if deadline.is_some_and(|d| d <= now) {
            return Polled::Due;
        }
        if sleep {
            let until = deadline.map_or(now + self.poll_ns, |d| d.min(now + self.poll_ns));
            std::thread::sleep(Duration::from_nanos(until - now));
        }
        Polled::Slept
    }
}
