//! `cargo xtask host`: what the host alone does to a sleeping thread, and the CPU time the
//! hypervisor steals ([`fsdr_net_io::host`]); `latency` and `loss` report the same beside
//! their figures.

use std::time::Duration;

use anyhow::{Context, Result};
use fsdr_net_io::host::HiccupMeter;

/// Measures the host for `seconds` with nothing else running.
pub fn run(seconds: f64, json: bool) -> Result<()> {
    let m = HiccupMeter::start().context("starting the hiccup meter")?;
    std::thread::sleep(Duration::from_secs_f64(seconds.max(0.01)));
    let r = m.finish();
    let machine = fsdr_net_io::host::Machine::detect();
    if json {
        let mut v = serde_json::to_value(&r)?;
        v["machine"] = serde_json::to_value(&machine)?;
        println!("{v}");
    } else {
        println!("{r}");
        println!("machine: {machine}");
    }
    Ok(())
}
