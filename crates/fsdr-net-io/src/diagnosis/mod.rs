//! Loss in words: [`explain`] turns a receiver's counters, and what else used the machine's
//! CPUs meanwhile ([`Load`]), into sentences that say where datagrams went, why, and what to
//! change, naming the settings (`EngineConfig` fields; the examples' flags are named
//! after them). The examples print them under their summary; an application can do the same.
//!
//! ```
//! use fsdr_net_io::Stats;
//! use fsdr_net_io::diagnosis::explain;
//! use fsdr_net_io::diagnosis::{Load, LoadMeter};
//!
//! let meter = LoadMeter::start();
//! // … receive; here, a run in which the kernel dropped 120 datagrams …
//! let stats = Stats { kernel_drops: 120, missed: 120, ..Stats::default() };
//! for sentence in explain(&stats, 0, meter.finish().as_ref()) {
//!     println!("{sentence}");
//! }
//! let busy = Load { cpus: 2, this_process: 0.5, other_processes: 0.45, steal: 0.0 };
//! assert!(explain(&stats, 0, Some(&busy))[0].contains("other processes used 45%"));
//! ```

use crate::stats::Stats;

mod load;
pub use load::{Load, LoadMeter};

/// Share (0..=1) of the machine's CPU time above which another user of it is named.
const NOTABLE: f64 = 0.05;

/// One sentence per kind of loss in `s`, each saying where the datagrams went, why, and what
/// to change. `injected` are the frames the built-in sender dropped on purpose (fault
/// injection); `load` is the machine's CPU use during the run. Empty when nothing was lost.
pub fn explain(s: &Stats, injected: u64, load: Option<&Load>) -> Vec<String> {
    let mut out = Vec::new();
    let busy_others = load.filter(|l| l.other_processes >= NOTABLE);
    let steal = load.filter(|l| l.steal >= NOTABLE);
    if s.kernel_drops > 0 {
        let mut why = format!(
            "{} datagrams were dropped by the kernel: the socket's receive buffer filled up \
             because ",
            s.kernel_drops
        );
        if s.paused > 0 {
            why.push_str(
                "the flowgraph fell behind and the source stopped reading (paused); the blocks \
                 after the source are too slow for this rate: cheaper blocks, or more workers",
            );
        } else {
            why.push_str("the receive thread did not get a CPU in time");
            if let Some(l) = busy_others {
                why.push_str(&format!(
                    ": other processes used {:.0}% of the machine's {} CPUs during the run \
                     ({:.1} CPUs' worth); run on a quiet machine",
                    100.0 * l.other_processes,
                    l.cpus,
                    l.other_cpus()
                ));
            } else if let Some(l) = steal {
                why.push_str(&format!(
                    ": the hypervisor gave {:.0}% of the CPU time to other guests; a host with \
                     dedicated CPUs avoids it",
                    100.0 * l.steal
                ));
            } else {
                why.push_str(
                    "; nothing else was busy, so this rate needs more CPU than this machine \
                     gives (docs/PERFORMANCE.md says what it sustains): a larger \
                     receive buffer (`socket.recv_buffer`) rides out short stalls, SCHED_FIFO \
                     (`threads.fifo_priority`, as root) gives the receive thread precedence",
                );
            }
        }
        out.push(why + ".");
    }
    if s.xdp_rx_ring_full + s.xdp_rx_dropped > 0 {
        out.push(format!(
            "Of the kernel's drops, {} were at the AF_XDP socket because its RX ring was full              (the receive thread fell behind) and {} for want of a free frame in its fill ring.",
            s.xdp_rx_ring_full, s.xdp_rx_dropped
        ));
    }
    if s.xdp_via_kernel > 0 {
        out.push(format!(
            "{} datagrams took the kernel's path instead of the AF_XDP ring (IP fragments of              datagrams larger than the link's MTU, IP options, or another receive queue: steer              the stream to the queue given with `ethtool -N`); they were received all the same.",
            s.xdp_via_kernel
        ));
    }
    if s.overflow > 0 {
        out.push(format!(
            "{} datagrams were read and discarded because the consumer held every slot, or as many as the latency budget allows at the measured rate (`Overload::Discard`): the flowgraph fell behind; cheaper blocks, more workers, more `slots`, or a longer `latency_budget`.",
            s.overflow
        ));
    }
    if s.truncated > 0 {
        out.push(format!(
            "{} datagrams were larger than a slot and were not delivered: raise the slot size \
             (`slot_size`) to the sender's datagram size.",
            s.truncated
        ));
    }
    if s.malformed > 0 {
        out.push(format!(
            "{} datagrams did not parse in the format asked for: check the format \
             setting against what the sender sends.",
            s.malformed
        ));
    }
    if s.rejected > 0 {
        out.push(format!(
            "{} datagrams came from senders outside the allow-list.",
            s.rejected
        ));
    }
    if s.late + s.duplicates > 0 {
        out.push(format!(
            "{} datagrams arrived after their successors had been delivered and {} twice; \
             both were dropped (a longer `reorder_timeout` waits longer for stragglers).",
            s.late, s.duplicates
        ));
    }
    if s.clock_dropped > 0 {
        out.push(format!(
            "The timestamps of {} stream(s) did not follow the configured tick and sample \
             rates (the receiver was told another rate than the device streams at): gaps were \
             sized from the rate learnt from the stream instead; set the device's rates \
             (`tick_rate`, `sample_rate`) so that time tags follow its clock.",
            s.clock_dropped
        ));
    }
    // Frames missing from the sequence numbers that no counter of this host explains were
    // lost before the socket.
    let here = s.kernel_drops + s.overflow + s.truncated + s.malformed;
    let elsewhere = s.missed.saturating_sub(here);
    if elsewhere > injected {
        out.push(format!(
            "{} frames were missing from the sequence numbers beyond what this host dropped: \
             lost before the socket (the wire, the NIC: `ethtool -S <interface>`, or the \
             sender: a USRP prints O or D).",
            elsewhere - injected
        ));
    }
    if injected > 0 {
        out.push(format!(
            "{injected} frames were dropped by the built-in sender on purpose (fault \
             injection)."
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(others: f64, steal: f64) -> Load {
        Load {
            cpus: 2,
            this_process: 0.5,
            other_processes: others,
            steal,
        }
    }

    #[test]
    fn af_xdp_drops_and_the_kernel_path_are_named() {
        let s = Stats {
            kernel_drops: 5,
            xdp_rx_ring_full: 4,
            xdp_rx_dropped: 1,
            xdp_via_kernel: 3,
            ..Stats::default()
        };
        let text = explain(&s, 0, None).join(" ");
        assert!(text.contains("4 were at the AF_XDP socket"), "{text}");
        assert!(
            text.contains("3 datagrams took the kernel's path"),
            "{text}"
        );
    }

    #[test]
    fn kernel_drops_name_the_busy_machine_or_say_nothing_else_ran() {
        let s = Stats {
            kernel_drops: 50_887,
            missed: 50_887,
            ..Stats::default()
        };
        let busy = explain(&s, 0, Some(&load(0.47, 0.0)));
        assert_eq!(busy.len(), 1, "{busy:?}");
        assert!(busy[0].starts_with("50887 datagrams were dropped by the kernel"));
        assert!(busy[0].contains("other processes used 47% of the machine's 2 CPUs"));
        let stolen = explain(&s, 0, Some(&load(0.0, 0.2)));
        assert!(stolen[0].contains("hypervisor gave 20%"), "{stolen:?}");
        let quiet = explain(&s, 0, Some(&load(0.0, 0.0)));
        assert!(quiet[0].contains("nothing else was busy"), "{quiet:?}");
        let paused = Stats {
            paused: 3,
            ..s.clone()
        };
        assert!(explain(&paused, 0, None)[0].contains("the flowgraph fell behind"));
    }

    #[test]
    fn every_loss_counter_has_its_sentence_and_no_loss_has_none() {
        assert!(explain(&Stats::default(), 0, None).is_empty());
        let s = Stats {
            overflow: 1,
            truncated: 2,
            malformed: 3,
            rejected: 4,
            late: 5,
            duplicates: 6,
            ..Stats::default()
        };
        let words = explain(&s, 0, None);
        assert_eq!(words.len(), 5, "{words:?}");
        // Missed frames beyond this host's drops were lost before the socket; those the
        // built-in sender dropped on purpose are said to be so.
        let wire = Stats {
            missed: 10,
            kernel_drops: 4,
            ..Stats::default()
        };
        let words = explain(&wire, 0, None);
        assert!(words[1].starts_with("6 frames were missing"), "{words:?}");
        let injected = explain(
            &Stats {
                missed: 10,
                ..Stats::default()
            },
            10,
            None,
        );
        assert_eq!(injected.len(), 1, "{injected:?}");
        assert!(injected[0].contains("on purpose"));
    }
}
