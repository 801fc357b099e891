//! Issue #32, item 4: `examples/turnaround.rs` answers every packet of a stream datagram for
//! datagram (the same samples per datagram, conjugated, numbered by their timestamps), through
//! the flowgraph and through the bare loop; the probe of `cargo xtask turnaround` matches
//! each answer to its question.

mod examples;

#[test]
fn the_turnaround_example_answers_every_packet_through_the_flowgraph_and_the_bare_loop() {
    for extra in [&[][..], &["--bare"][..]] {
        let (report, out) = examples::turnaround(extra);
        assert!(out.status.success(), "{extra:?}: {:?}", out.status);
        assert!(report.sent > 100, "{extra:?}: {report:?}");
        assert_eq!(report.answered, report.sent, "{extra:?}: {report:?}");
        assert_eq!((report.unstamped, report.foreign), (0, 0), "{extra:?}");
        assert_eq!(report.turnaround_ns.len() as u64, report.sent);
        let json = examples::last_json(&out.stdout);
        let samples = report.sent * 1000;
        assert_eq!(json["received"], samples, "{extra:?}: {json}");
        assert_eq!(json["sent"], samples, "{extra:?}: {json}");
        assert_eq!(json["missed"], 0, "{extra:?}: {json}");
    }
}
