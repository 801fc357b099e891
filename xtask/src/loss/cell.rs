//! One receiver at one rate: what a run delivered and cost (`Cell`), and the CPU by thread.

use serde_json::{Value, json};

use super::args::Rate;

/// One receiver at one offered rate.
#[derive(Debug, Clone)]
pub(crate) struct Cell {
    pub(crate) receiver: String,
    pub(crate) rate: Rate,
    pub(crate) offered_mbps: f64,
    pub(crate) sent: u64,
    pub(crate) delivered: u64,
    pub(crate) kernel_drops: u64,
    pub(crate) overflows: u64,
    pub(crate) malformed: u64,
    pub(crate) send_errors: u64,
    pub(crate) cpu_seconds: f64,
    pub(crate) bytes: u64,
    /// fsdr-net receivers: datagrams taken from the kernel, receive system calls, wake-ups
    /// of the consumer, pauses; flowgraphs: payload bytes copied after the kernel.
    pub(crate) received: Option<u64>,
    pub(crate) recv_calls: Option<u64>,
    /// In-place receivers: queued headers looked at before a receive, after gaps.
    pub(crate) peeks: Option<u64>,
    pub(crate) wakeups: Option<u64>,
    pub(crate) paused: Option<u64>,
    pub(crate) copied_bytes: Option<u64>,
    /// Share of the machine's CPU time the hypervisor stole during the run (0..1): a run
    /// with much of it measured the host more than the receiver.
    pub(crate) steal: Option<f64>,
    /// The receiver's CPU time by thread, when `loss_rx` reported it.
    pub(crate) threads: Option<Threads>,
    /// CPU per GB as a multiple of the recvmmsg reference's in the same round (the median
    /// over rounds), when the reference ran.
    pub(crate) ratio: Option<f64>,
    /// Delivered rate as a multiple of the reference's in the same round (the median over
    /// rounds): what counts unpaced, where each receiver keeps what it can.
    pub(crate) delivered_ratio: Option<f64>,
    /// CPU per GB of the thread that reads the socket as a multiple of the reference loop's
    /// thread in the same round (the median over rounds).
    pub(crate) reader_ratio: Option<f64>,
    /// Rounds whose ratios count (`--max-steal` leaves out the others), of `rounds`.
    pub(crate) ratio_rounds: usize,
    /// Rounds run.
    pub(crate) rounds: usize,
}

/// CPU seconds of one receiver run by the threads' roles (`loss_rx`'s `threads`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Threads {
    /// fsdr-net's receive threads.
    pub(crate) receive: f64,
    /// FutureSDR's smol workers.
    pub(crate) workers: f64,
    /// The main thread (the consumer, or the whole loop of the inline receivers and the
    /// reference).
    pub(crate) main: f64,
    /// Every other thread.
    pub(crate) other: f64,
    /// The role whose thread reads the socket.
    pub(crate) reader: Reader,
}

/// Which of a receiver's threads reads the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reader {
    /// fsdr-net's own receive threads.
    Receive,
    /// The main thread: the inline receivers and the reference loop.
    Main,
    /// FutureSDR's workers (FutureSDR's own `UdpSource`), shared with the rest of the
    /// flowgraph.
    Workers,
}

impl Reader {
    const ALL: [Reader; 3] = [Reader::Receive, Reader::Main, Reader::Workers];

    /// The role's name in `loss_rx`'s JSON.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Reader::Receive => "receive",
            Reader::Main => "main",
            Reader::Workers => "workers",
        }
    }
}

impl Threads {
    pub(crate) fn parse(v: &Value) -> Option<Threads> {
        let f = |k: &str| v[k].as_f64();
        Some(Threads {
            receive: f("receive")?,
            workers: f("workers")?,
            main: f("main")?,
            other: f("other")?,
            reader: Reader::ALL
                .into_iter()
                .find(|r| Some(r.name()) == v["reader"].as_str())?,
        })
    }

    /// CPU seconds of the threads that read the socket.
    pub(crate) fn reader(&self) -> f64 {
        match self.reader {
            Reader::Receive => self.receive,
            Reader::Main => self.main,
            Reader::Workers => self.workers,
        }
    }

    /// CPU seconds of the workers where they do not read the socket themselves.
    pub(crate) fn workers_apart(&self) -> f64 {
        match self.reader {
            Reader::Workers => 0.0,
            _ => self.workers,
        }
    }
}

impl Cell {
    /// Receive system calls per datagram taken from the kernel.
    pub(crate) fn calls_per_datagram(&self) -> Option<f64> {
        Some(self.recv_calls? as f64 / self.received?.max(1) as f64)
    }

    /// Wake-ups of the consumer per GB delivered.
    pub(crate) fn wakeups_per_gb(&self) -> Option<f64> {
        Some(self.wakeups? as f64 / (self.bytes.max(1) as f64 / 1e9))
    }

    /// Payload bytes copied after the kernel per GB delivered.
    pub(crate) fn copied_per_gb(&self) -> Option<f64> {
        Some(self.copied_bytes? as f64 / (self.bytes.max(1) as f64 / 1e9))
    }

    pub(crate) fn success(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.delivered as f64 / self.sent as f64
        }
    }

    pub(crate) fn lossless(&self) -> bool {
        self.sent > 0 && self.delivered == self.sent
    }

    /// Delivered MB/s.
    pub(crate) fn delivered_mbps(&self) -> f64 {
        self.offered_mbps * self.success()
    }

    /// CPU seconds per GB delivered of some of the receiver's threads.
    pub(crate) fn per_gb(&self, seconds: f64) -> f64 {
        if self.bytes == 0 {
            f64::NAN
        } else {
            seconds / (self.bytes as f64 / 1e9)
        }
    }

    /// CPU per GB of the thread that reads the socket ([`Threads::reader`]).
    pub(crate) fn reader_per_gb(&self) -> f64 {
        self.threads.map_or(f64::NAN, |t| self.per_gb(t.reader()))
    }

    /// CPU per GB of the FutureSDR workers.
    pub(crate) fn workers_per_gb(&self) -> f64 {
        self.threads
            .map_or(f64::NAN, |t| self.per_gb(t.workers_apart()))
    }

    /// The workers' CPU microseconds per wake-up of the consumer (the hand-overs).
    pub(crate) fn workers_per_wakeup_us(&self) -> Option<f64> {
        let w = self.wakeups.filter(|&w| w > 0)?;
        let t = self.threads.filter(|t| t.workers_apart() > 0.0)?;
        Some(t.workers_apart() / w as f64 * 1e6)
    }

    /// `, 2 of 3 rounds` when `--max-steal` left rounds out of the ratios (empty otherwise,
    /// and for the reference itself).
    pub(crate) fn kept_rounds(&self) -> String {
        if self.ratio_rounds < self.rounds && self.receiver != "recvmmsg" {
            format!(", {} of {} rounds", self.ratio_rounds, self.rounds)
        } else {
            String::new()
        }
    }

    pub(crate) fn cpu_per_gb(&self) -> f64 {
        if self.bytes == 0 {
            f64::NAN
        } else {
            self.cpu_seconds / (self.bytes as f64 / 1e9)
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "receiver": self.receiver,
            "rate": self.rate.label(),
            "offered_mbps": self.offered_mbps,
            "sent": self.sent,
            "delivered": self.delivered,
            "success": self.success(),
            "kernel_drops": self.kernel_drops,
            "overflows": self.overflows,
            "malformed": self.malformed,
            "send_errors": self.send_errors,
            "cpu_seconds": self.cpu_seconds,
            "cpu_seconds_per_gb": self.cpu_per_gb(),
            "cpu_ratio_to_reference": self.ratio,
            "ratio_rounds": self.ratio_rounds,
            "rounds": self.rounds,
            "delivered_ratio_to_reference": self.delivered_ratio,
            "received": self.received,
            "recv_calls": self.recv_calls,
            "calls_per_datagram": self.calls_per_datagram(),
            "peeks": self.peeks,
            "wakeups": self.wakeups,
            "wakeups_per_gb": self.wakeups_per_gb(),
            "paused": self.paused,
            "copied_bytes": self.copied_bytes,
            "copied_bytes_per_gb": self.copied_per_gb(),
            "steal": self.steal,
            "threads": self.threads.map(|t| json!({
                "receive": t.receive, "workers": t.workers, "main": t.main, "other": t.other,
                "reader": t.reader.name(),
            })),
            "reader_cpu_seconds_per_gb": self.threads.map(|_| self.reader_per_gb()),
            "reader_ratio_to_reference": self.reader_ratio,
            "workers_cpu_seconds_per_gb": self.threads.map(|_| self.workers_per_gb()),
            "workers_us_per_wakeup": self.workers_per_wakeup_us(),
        })
    }
}
