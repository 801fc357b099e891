//! `usrp_sim` → `usrp_rx --listen` with the rates given right and wrong: the configured
//! clock checked against the stream's timestamps (`seq::extend`'s rule 5), every fault still
//! counted once, and the summary saying what to pass.

mod examples;

use std::process::Command;

use examples::{assert_drops_missed, example, free_port, run_pair, u};
use serde_json::Value;

/// Ticks coarser than a sample (an X410 channel's 491.52 Msps stamped at 200 MHz: 0.41 ticks
/// a sample), with the rates given to the receiver as a user gives them. Before, the
/// configured ratio took every second or third packet for a restart (`usrp_rx --rate
/// 491.52e6`: 96 150 resyncs in a second), and a loss there was counted by no counter. Now
/// every fault is counted once and every lost sample is missed.
#[test]
fn ticks_coarser_than_a_sample_are_counted_exactly() {
    let (rx, _) = x410_with_faults(&["--rate", "491.52e6"]);
    assert_eq!(u(&rx, "resyncs"), 0, "{rx}");
    assert_eq!(u(&rx, "clock_dropped"), 0, "{rx}");
}

/// A receiver told a slower rate than the stream's (`usrp_rx --listen` left at its default
/// 200 Msps for a 491.52 Msps stream at 200 MHz ticks) saw every packet start inside the one
/// before it by the clock it was given: each was a restart (486 180 resyncs in 2 s). Now
/// the second such pair drops that clock for the rate the stream shows: one resync, every
/// fault counted exactly, the `clock_dropped` counter, and the summary says what to pass.
#[test]
fn a_rate_slower_than_the_streams_is_one_resync_and_said() {
    let (rx, _) = x410_with_faults(&[]);
    assert_eq!(u(&rx, "resyncs"), 1, "{rx}");
    assert_eq!(u(&rx, "clock_dropped"), 1, "{rx}");
    let said = rx["explanation"].to_string();
    assert!(said.contains("told --rate 200.00 Msps"), "{said}");
}

/// `usrp_sim` at the X410's 491.52 Msps (200 MHz ticks: coarser than a sample) with drops,
/// reorders and duplicates into `usrp_rx --listen` with `rx_args`; asserts that every fault
/// is counted once and every lost sample is missed, and returns both reports.
fn x410_with_faults(rx_args: &[&str]) -> (Value, Value) {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut sim = Command::new(example("usrp_sim"));
    sim.args(["--dest", &listen, "--rate", "491.52e6", "--signal", "ramp"])
        .args(["--samples", "4e6", "--drop-every", "97"])
        .args(["--reorder-every", "50", "--duplicate-every", "70"]);
    let mut args = vec!["--reorder-timeout-ms", "100"];
    args.extend_from_slice(rx_args);
    let (rx, sim) = run_pair(&listen, &args, sim);
    assert_drops_missed(&rx, &sim);
    assert_eq!(u(&rx, "received"), u(&sim, "samples_sent"), "{rx} {sim}");
    // The ramp: every zero and every gap seen, nothing else.
    assert_eq!(
        u(&rx, "discontinuities"),
        u(&rx, "missed_samples") + u(&rx, "missed"),
        "{rx}"
    );
    assert_eq!(u(&rx, "duplicates"), u(&sim, "duplicated"), "{rx} {sim}");
    assert_eq!(u(&rx, "reordered"), u(&sim, "reordered"), "{rx} {sim}");
    assert_eq!(u(&rx, "late") + u(&rx, "ambiguous"), 0, "{rx}");
    (rx, sim)
}

/// A device at 0.8 Msps and 0.8 MHz told 0.2 and 0.2 (as one at 250 Msps and 250 MHz told
/// 200 and 200; slow, as the examples here are debug builds): its stamps keep the ratio
/// usrp_rx was told, so nothing in them contradicts it, but the stream arrives faster than
/// `--rate` and the summary says what to pass.
#[test]
fn a_stream_faster_than_its_rate_is_said() {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut sim = Command::new(example("usrp_sim"));
    sim.args(["--dest", &listen, "--rate", "0.8e6", "--tick-rate", "0.8e6"])
        .args(["--signal", "ramp", "--samples", "4e5"]);
    let (rx, _) = run_pair(&listen, &["--rate", "0.2e6", "--tick-rate", "0.2e6"], sim);
    assert_eq!(u(&rx, "clock_dropped") + u(&rx, "resyncs"), 0, "{rx}");
    let said = rx["explanation"].to_string();
    assert!(
        said.contains("told --rate 0.20 Msps"),
        "{said} {}",
        rx["rate_sps"]
    );
}

/// A receiver told a rate the stream misses by less than the stamps' rounding over one
/// packet (100-sample packets, told 0.98304 Msps at 0.4 MHz ticks — an X410 channel's
/// ratio, slow as the examples here are debug builds — for a stream 1.1% slower): the
/// first pair can confirm the clock, and then a packet it cannot place was a restart, one
/// every few packets for as long as the stream (with release builds at 100 times the
/// rates, 443 of 1452 drops counted as resyncs instead of missed). Now the run of
/// consecutive packets drops the clock early: every drop missed, no resync, and the
/// summary says so.
#[test]
fn a_rate_off_by_less_than_a_pair_shows_is_dropped_over_a_run() {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut sim = Command::new(example("usrp_sim"));
    sim.args([
        "--dest",
        &listen,
        "--rate",
        "0.972e6",
        "--tick-rate",
        "0.4e6",
    ])
    .args(["--spp", "100", "--signal", "ramp", "--samples", "1e6"])
    .args(["--drop-every", "101"]);
    let told = ["--rate", "0.98304e6", "--tick-rate", "0.4e6"];
    let (rx, sim) = run_pair(&listen, &told, sim);
    assert_eq!(u(&rx, "missed"), u(&sim, "dropped"), "{rx} {sim}");
    assert_eq!(u(&rx, "resyncs") + u(&rx, "ambiguous"), 0, "{rx}");
    assert_eq!(u(&rx, "clock_dropped"), 1, "{rx}");
    let said = rx["explanation"].to_string();
    assert!(
        said.contains("did not follow the configured tick"),
        "{said}"
    );
}

/// After the clock is dropped the rate is learnt from the stream; an X410 channel's ratio in
/// 59-sample packets (0.98304 Msps at 0.4 MHz ticks, as 491.52 Msps at 200 MHz) spans
/// 24.007 ticks a packet, which the learnt ratio took for 24 whole ones for some 280
/// packets: a gap across a stamp the rounding moved was sized a tick (2.46 samples) off,
/// silently (release builds: 6 samples too many of 9853 missed, no counter saying so). Now
/// such a stamp is off the learnt ratio's grid, and every gap is its packets' samples.
#[test]
fn a_learnt_ratio_near_whole_ticks_a_packet_sizes_every_gap_exactly() {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut sim = Command::new(example("usrp_sim"));
    sim.args(["--dest", &listen, "--rate", "0.98304e6"])
        .args(["--tick-rate", "0.4e6", "--spp", "59", "--signal", "ramp"])
        .args(["--samples", "1e6", "--drop-every", "101"]);
    let told = ["--rate", "0.972e6", "--tick-rate", "0.4e6"];
    let (rx, sim) = run_pair(&listen, &told, sim);
    assert_drops_missed(&rx, &sim);
    assert_eq!(u(&rx, "clock_dropped"), 1, "{rx}");
    assert_eq!(u(&rx, "resyncs") + u(&rx, "ambiguous"), 0, "{rx}");
    assert_eq!(
        u(&rx, "discontinuities"),
        u(&rx, "missed_samples") + u(&rx, "missed"),
        "{rx}"
    );
}
