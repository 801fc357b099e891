//! What the receiving examples say about a capture that failed: sentences a user can act on,
//! beside the counters, and the exit code — one per way a capture fails (docs/json.md lists
//! them): 1 when samples were lost (unless `--allow-loss`), 3 when nothing arrived, 4 when
//! nothing arrived in the format asked for, 5 when the sender was more than 1% short of the
//! rate asked, 6 when the stream's end was lost and nothing can count it (unless
//! `--allow-loss`). 2 is clap's, for a bad command line.

/// Datagrams that reached a receiver, delivered or not: those delivered, and those the
/// kernel dropped, discarded, malformed, truncated, refused, late and duplicated.
pub fn arrived(s: &fsdr_net::io::Stats) -> u64 {
    s.delivered
        + s.kernel_drops
        + s.overflow
        + s.malformed
        + s.truncated
        + s.rejected
        + s.duplicates
        + s.late
}

/// The exit-code flag of the receiving examples.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct LossArgs {
    /// Exit 0 even when samples were lost (by default the exit code is then 1, so that a
    /// script notices; the summary is printed either way). A capture that got nothing, or
    /// a sender short of the rate asked, still fails.
    #[arg(long)]
    pub allow_loss: bool,
}

/// A sender more than this share short of the rate asked failed the capture.
pub const SHORT: f64 = 0.01;

/// How a capture failed: one variant per rule, in the order [`LossArgs::judge`] tries them.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// No datagram reached the receiver.
    NothingArrived,
    /// Datagrams arrived, and not one item of them was delivered (the format asked for is
    /// not the sender's, or every datagram was refused).
    NothingParsed {
        /// Datagrams that arrived.
        datagrams: u64,
    },
    /// Samples (or bytes) were lost, counted.
    Lost {
        /// How many.
        count: u64,
    },
    /// The stream's end was lost and nothing can count it (it ended without the end of
    /// burst its sender marks ends with).
    EndLost,
    /// The sender sent more than [`SHORT`] below the rate asked.
    ShortSender {
        /// Samples per second it sent at.
        got: f64,
        /// Samples per second asked.
        asked: f64,
    },
}

impl Failure {
    /// The process's exit code.
    pub fn code(&self) -> i32 {
        match self {
            Failure::Lost { .. } => 1,
            Failure::NothingArrived => 3,
            Failure::NothingParsed { .. } => 4,
            Failure::ShortSender { .. } => 5,
            Failure::EndLost => 6,
        }
    }

    /// Its name in the JSON summaries (`failure`).
    pub fn name(&self) -> &'static str {
        match self {
            Failure::NothingArrived => "nothing_arrived",
            Failure::NothingParsed { .. } => "nothing_parsed",
            Failure::Lost { .. } => "lost",
            Failure::EndLost => "end_lost",
            Failure::ShortSender { .. } => "short_sender",
        }
    }
}

/// What a capture got, as the rules need it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Capture {
    /// Datagrams that reached the receiver, delivered or not (kernel drops, malformed,
    /// truncated, refused ones included).
    pub arrived: u64,
    /// Items delivered.
    pub received: u64,
    /// Items known lost.
    pub lost: u64,
    /// The stream's end was lost, uncounted.
    pub end_lost: bool,
    /// The sender's rate and the rate asked of it (samples per second), where both are
    /// known.
    pub rate: Option<(f64, f64)>,
}

impl LossArgs {
    /// The failure of a capture, if it failed: the first rule that holds of nothing
    /// arrived, nothing delivered, samples lost, an end lost (those two unless
    /// `--allow-loss`), a sender short of the rate asked.
    pub fn judge(&self, c: &Capture) -> Option<Failure> {
        if c.arrived == 0 && c.received == 0 {
            return Some(Failure::NothingArrived);
        }
        if c.received == 0 {
            return Some(Failure::NothingParsed {
                datagrams: c.arrived,
            });
        }
        if c.lost > 0 && !self.allow_loss {
            return Some(Failure::Lost { count: c.lost });
        }
        if c.end_lost && !self.allow_loss {
            return Some(Failure::EndLost);
        }
        match c.rate {
            Some((got, asked)) if got < (1.0 - SHORT) * asked => {
                Some(Failure::ShortSender { got, asked })
            }
            _ => None,
        }
    }

    /// Ends the process with the failure's exit code, saying why on stderr (`what`: "samples
    /// were", the lost items' name). Returns when the capture did not fail.
    pub fn exit_on(&self, failure: Option<&Failure>, what: &str) {
        let Some(f) = failure else {
            return;
        };
        let code = f.code();
        match f {
            Failure::Lost { count } => {
                eprintln!("{count} {what} lost: exit code {code} (--allow-loss to exit 0)")
            }
            Failure::EndLost => eprintln!(
                "the stream's end was lost, how much of it unknown: exit code {code} \
                 (--allow-loss to exit 0)"
            ),
            Failure::NothingArrived => eprintln!("nothing arrived: exit code {code}"),
            Failure::NothingParsed { datagrams } => eprintln!(
                "{datagrams} datagrams arrived and none held data in the format asked for: \
                 exit code {code}"
            ),
            Failure::ShortSender { got, asked } => eprintln!(
                "the sender sent {:.3} Msps of the {:.3} Msps asked: exit code {code}",
                got / 1e6,
                asked / 1e6
            ),
        }
        std::process::exit(code);
    }

    /// Ends the process with exit code 1 when `lost` samples (or frames) were lost and loss
    /// is not allowed; prints why on stderr.
    pub fn exit_on_loss(&self, lost: u64, what: &str) {
        let f = (lost > 0).then_some(Failure::Lost { count: lost });
        if !self.allow_loss {
            self.exit_on(f.as_ref(), what);
        }
    }
}

/// The sentence a failure adds to a summary's explanation (`None` for a counted loss, which
/// the loss sentences explain; `source`: "the built-in emulator" or "the sender").
pub fn sentence(f: &Failure, source: &str) -> Option<String> {
    match f {
        Failure::NothingArrived => Some(
            "nothing arrived: no datagram reached the socket (is the sender streaming to \
             this address and port, is a firewall or another process in the way?)."
                .to_string(),
        ),
        Failure::NothingParsed { datagrams } => Some(format!(
            "{datagrams} datagrams arrived and not one held a sample in the format asked for: \
             the capture got nothing (check --format and --mode against the sender)."
        )),
        Failure::ShortSender { got, asked } => Some(format!(
            "{source} sent {:.3} Msps, {:.1}% short of the {:.3} Msps asked: the capture \
             holds fewer samples a second than the rate says (a sender that cannot keep up, \
             or a device at another rate: pass its --rate).",
            got / 1e6,
            100.0 * (1.0 - got / asked),
            asked / 1e6
        )),
        Failure::Lost { .. } | Failure::EndLost => None,
    }
}
