//! With the `lttng` feature, keeps the sections through which lttng-ust finds the tracepoints
//! in this package's examples, tests and benches: rust-lld garbage-collects them otherwise,
//! and nothing is recorded.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_LTTNG").is_some() {
        println!("cargo:rustc-link-arg=-Wl,-z,nostart-stop-gc");
    }
}
