//! The checks beyond the test suite: the exactness model at scale (`props`), Miri over the
//! code that makes no system call (`miri`), and the test suite under AddressSanitizer
//! (`asan`). Miri and ASan need the nightly toolchain the machine image carries beside the
//! stable one that builds the project; they never build the project's own artefacts.

use std::process::Command;

use anyhow::{Result, bail};

/// The unit tests Miri runs (by name prefix): formats, control-message parsing, slot rings,
/// sample conversion, the depacketizer and the sequence layer. Everything else makes system
/// calls, which Miri cannot.
pub const MIRI_SCOPE: &[&str] = &[
    "format::",
    "sys::cmsg",
    "engine::slots",
    "engine::config",
    "sample::",
    "depacketizer::",
    "seq::",
];

/// The part of [`MIRI_SCOPE`] that `cargo xtask test` runs (about half a minute; the rest
/// takes Miri tens of minutes): the slot rings (the `unsafe` Miri can check), control
/// messages, the engine's configuration and the depacketizer (over the decoders). Not the
/// sequence layer (no `unsafe`; 75 s of Miri), the conversion tables or the format sweeps:
/// `cargo xtask miri --all` runs those.
pub const MIRI_IN_TEST: &[&str] = &[
    "sys::cmsg",
    "engine::slots",
    "engine::config",
    "depacketizer::",
];

pub fn nightly() -> Command {
    let mut c = Command::new("cargo");
    c.arg("+nightly");
    // The stable toolchain's cargo sets these for the xtask itself; the nightly must not
    // inherit them.
    c.env_remove("RUSTC")
        .env_remove("RUSTDOC")
        .env_remove("CARGO");
    c
}

/// Whether the nightly toolchain with Miri is here (tried once to add the component).
pub fn miri_available() -> bool {
    let has = || {
        nightly()
            .args(["miri", "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has() {
        return true;
    }
    let _ = Command::new("rustup")
        .args([
            "component",
            "add",
            "--toolchain",
            "nightly",
            "miri",
            "rust-src",
        ])
        .output();
    has()
}

/// Whether the nightly toolchain is here (for ASan).
pub fn nightly_available() -> bool {
    nightly()
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `cargo +nightly miri test` over `scope` (Stacked Borrows, the default model).
pub fn miri(scope: &[&str]) -> Result<()> {
    if !miri_available() {
        bail!(
            "no nightly toolchain with Miri here (rustup component add --toolchain nightly miri)"
        );
    }
    crate::report::run_as(
        "miri",
        nightly()
            .env("CARGO_TARGET_DIR", "target/miri")
            .args([
                "miri",
                "test",
                "--quiet",
                "-p",
                "fsdr-net-io",
                "--no-default-features",
                "--lib",
                "--",
            ])
            .args(scope),
    )
}

/// fsdr-net-io's tests (unit and integration) built with `-Zsanitizer=address`.
pub fn asan() -> Result<()> {
    if !nightly_available() {
        bail!("no nightly toolchain here for -Zsanitizer=address");
    }
    crate::report::run_as(
        "asan",
        nightly()
            .env("CARGO_TARGET_DIR", "target/asan")
            .env(
                "RUSTFLAGS",
                "-Zsanitizer=address -Cdebug-assertions=on --cfg asan",
            )
            .env("RUSTDOCFLAGS", "-Zsanitizer=address")
            .env("ASAN_OPTIONS", "detect_leaks=0")
            .env_remove("PROPTEST_CASES")
            .env("MODEL_CASES", "200")
            .env("MODEL_ENGINE_CASES", "8")
            .args([
                "test",
                "--quiet",
                "-p",
                "fsdr-net-io",
                "--target",
                "x86_64-unknown-linux-gnu",
                "--lib",
                "--tests",
            ]),
    )
}

/// The exactness model's property tests in release: `cases` through the sequence layer,
/// a thousandth of them (at least 16) through an engine over loopback, and with `blocks`
/// as many through each source block in a flowgraph (`tests/model_blocks.rs`; `cargo
/// xtask test` runs a few of those in its debug test run instead, which saves building
/// the root package's tests in release).
pub fn props(cases: u64, blocks: bool) -> Result<()> {
    let few = (cases / 1000).max(16).to_string();
    crate::report::run_as(
        "exactness model",
        crate::cargo()
            // The model's own variables: proptest's PROPTEST_CASES would override every
            // test's count, the engine test's too.
            .env_remove("PROPTEST_CASES")
            .env("MODEL_CASES", cases.to_string())
            .env("MODEL_ENGINE_CASES", &few)
            .args([
                "test",
                "--quiet",
                "--release",
                "-p",
                "fsdr-net-io",
                "--test",
                "model",
            ]),
    )?;
    if !blocks {
        return Ok(());
    }
    crate::report::run_as(
        "exactness model, blocks",
        crate::cargo()
            .env_remove("PROPTEST_CASES")
            .env("MODEL_BLOCK_CASES", &few)
            .args(["test", "--quiet", "--release", "--test", "model_blocks"]),
    )
}
