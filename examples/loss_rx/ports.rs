//! `--ports N`: N streams, each sent to its own port (consecutive from the one announced),
//! each received by its own source in one flowgraph or by its own bare loop (the reference),
//! as a radio's channels arrive when each streams to a port of its own.

use std::net::SocketAddr;

use anyhow::{Context, Result, anyhow};

use super::{Args, Outcome};

/// Name prefix of the reference's loops on the ports after the first (counted with the main
/// thread, which runs the first: the threads that read the sockets).
pub(crate) const LOOP_THREAD: &str = "loss-loop-";

/// Opens `--ports` receivers on consecutive ports: the first where `--bind` says (any free
/// port for port 0), the others on the ports after it; with port 0 a taken port is tried
/// again from a new first port.
pub(crate) fn on_ports<S>(
    args: &Args,
    open: impl Fn(SocketAddr) -> Result<S>,
    addr: impl Fn(&S) -> SocketAddr,
) -> Result<Vec<S>> {
    let n = args.ports.max(1);
    let mut last_err = None;
    for _ in 0..20 {
        let first = open(args.bind)?;
        let base = addr(&first);
        let mut all = vec![first];
        for c in 1..n {
            let Some(port) = u16::try_from(c)
                .ok()
                .and_then(|c| base.port().checked_add(c))
            else {
                break;
            };
            match open(SocketAddr::new(base.ip(), port)) {
                Ok(s) => all.push(s),
                Err(e) => {
                    last_err = Some(e);
                    break;
                }
            }
        }
        if all.len() == n {
            return Ok(all);
        }
        if args.bind.port() != 0 {
            break;
        }
    }
    Err(last_err.unwrap_or_else(|| anyhow!("the ports ran out")))
        .with_context(|| format!("{n} consecutive ports from {}", args.bind))
}

impl Outcome {
    /// Adds another port's outcome to this one.
    pub(crate) fn merge(&mut self, o: Outcome) {
        self.delivered += o.delivered;
        self.bytes += o.bytes;
        self.kernel_drops += o.kernel_drops;
        self.overflows += o.overflows;
        self.malformed += o.malformed;
        self.copied_bytes = match (self.copied_bytes, o.copied_bytes) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.stats = match (self.stats.take(), o.stats) {
            (Some(mut a), Some(b)) => {
                let sums: Vec<(&str, u64)> = a
                    .fields()
                    .zip(b.fields())
                    .map(|((k, x), (_, y))| (k, x + y))
                    .collect();
                for (k, v) in sums {
                    a.set_field(k, v);
                }
                a.per_thread.extend(b.per_thread);
                Some(a)
            }
            (a, b) => a.or(b),
        };
    }
}
