//! What the receiving examples say about loss: sentences a user can act on, beside the
//! counters, and the exit code (1 when samples were lost, unless `--allow-loss`).

/// The exit-code flag of the receiving examples.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct LossArgs {
    /// Exit 0 even when samples were lost (by default the exit code is then 1, so that a
    /// script notices; the summary is printed either way).
    #[arg(long)]
    pub allow_loss: bool,
}

impl LossArgs {
    /// Ends the process with exit code 1 when `lost` samples (or frames) were lost and loss
    /// is not allowed; prints why on stderr.
    pub fn exit_on_loss(&self, lost: u64, what: &str) {
        if lost > 0 && !self.allow_loss {
            eprintln!("{lost} {what} lost: exit code 1 (--allow-loss to exit 0)");
            std::process::exit(1);
        }
    }
}
