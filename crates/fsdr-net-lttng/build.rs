//! With the `lttng` feature: compiles the C tracepoint provider and links lttng-ust.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "lttng")]
    {
        println!("cargo:rerun-if-changed=src/provider/tp.c");
        println!("cargo:rerun-if-changed=src/provider/tp.h");
        cc::Build::new()
            .file("src/provider/tp.c")
            .include("src/provider")
            .warnings(true)
            .compile("fsdr_net_tp");
        println!("cargo:rustc-link-lib=dylib=lttng-ust");
        println!("cargo:rustc-link-lib=dylib=dl");
        // rust-lld garbage-collects the sections lttng-ust finds its tracepoints through,
        // and then nothing is recorded. This applies to this crate's own tests; binaries in
        // other packages need the same flag (see the crate documentation).
        println!("cargo:rustc-link-arg=-Wl,-z,nostart-stop-gc");
    }
}
