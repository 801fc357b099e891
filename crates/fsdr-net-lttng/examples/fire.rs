//! Fires `tx`, `packet` and `rx` for N boundaries of one pipe, for checking that a session
//! records events (the linker trap records nothing and says nothing):
//! `cargo run -p fsdr-net-lttng --features lttng --example fire -- 1000 [SKIP_RX_EVERY]`.
//! With SKIP_RX_EVERY = K, every K-th boundary gets no `rx`, and the `rx` of each pair of
//! boundaries fire in reverse order, so that the trace holds unmatched and out-of-order events.

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().ok());
    let n = args.next().flatten().unwrap_or(1000);
    let skip = args.next().flatten().filter(|&k| k > 0);
    let block = fsdr_net_lttng::next_block_id();
    for first in (0..n).step_by(2) {
        let pair: Vec<u64> = (first..(first + 2).min(n)).collect();
        for &seq in &pair {
            fsdr_net_lttng::tx(block, seq);
            fsdr_net_lttng::packet(block, seq, 8000, seq, 0);
        }
        let order: Vec<u64> = match skip {
            Some(k) => pair
                .into_iter()
                .rev()
                .filter(|seq| (seq + 1) % k != 0)
                .collect(),
            None => pair,
        };
        for seq in order {
            fsdr_net_lttng::rx(block, seq);
        }
    }
    println!(
        "fired {n} tx/packet/rx, skip {skip:?} (tracepoints compiled in: {}, lttng-ust loaded: {})",
        fsdr_net_lttng::ENABLED,
        fsdr_net_lttng::registered()
    );
}
