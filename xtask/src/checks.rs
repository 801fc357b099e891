//! The checks beyond the test suite: the exactness model at scale (`props`), Miri over the
//! code that makes no system call (`miri`), and the test suite under AddressSanitizer
//! (`asan`). Miri and ASan need the nightly toolchain the machine image carries beside the
//! stable one that builds the project; they never build the project's own artefacts.

use std::process::Command;

use anyhow::{Context, Result, bail};

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
pub fn miri_command(scope: &[&str]) -> Command {
    let mut cmd = nightly();
    cmd.env("CARGO_TARGET_DIR", "target/miri")
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
        .args(scope);
    cmd
}

/// [`miri_command`], run.
pub fn miri(scope: &[&str]) -> Result<()> {
    if !miri_available() {
        bail!(
            "no nightly toolchain with Miri here (rustup component add --toolchain nightly miri)"
        );
    }
    crate::report::run_as("miri", &mut miri_command(scope))
}

/// fsdr-net-io's tests (unit and integration) built with `-Zsanitizer=address`; with
/// `build_only`, built and not run (`cargo xtask test` builds them beside the tests).
pub fn asan_command(build_only: bool) -> Command {
    let mut cmd = nightly();
    cmd.env("CARGO_TARGET_DIR", "target/asan")
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
        ]);
    if build_only {
        cmd.arg("--no-run");
    }
    cmd
}

/// [`asan_command`], built and run.
pub fn asan() -> Result<()> {
    if !nightly_available() {
        bail!("no nightly toolchain here for -Zsanitizer=address");
    }
    crate::report::run_as("asan", &mut asan_command(false))
}

/// The exactness model's property tests in release (`fsdr-net-io`'s `tests/model.rs`):
/// `cases` through the sequence layer, a thousandth of them (at least 16) through an engine
/// over loopback. With `build_only`, built and not run (`cargo xtask test` builds them
/// beside the tests).
pub fn props_command(cases: u64, build_only: bool) -> Command {
    let few = (cases / 1000).max(16).to_string();
    let mut cmd = crate::cargo();
    // The model's own variables: proptest's PROPTEST_CASES would override every test's
    // count, the engine test's too.
    cmd.env_remove("PROPTEST_CASES")
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
        ]);
    if build_only {
        cmd.arg("--no-run");
    }
    cmd
}

/// [`props_command`], built and run; with `blocks` as many cases as through the engine
/// through each source block in a flowgraph (`tests/model_blocks.rs`; `cargo xtask test`
/// runs a few of those in its debug test run instead, which saves building the root
/// package's tests in release).
pub fn props(cases: u64, blocks: bool) -> Result<()> {
    crate::report::run_as("exactness model", &mut props_command(cases, false))?;
    if !blocks {
        return Ok(());
    }
    let few = (cases / 1000).max(16).to_string();
    crate::report::run_as(
        "exactness model, blocks",
        crate::cargo()
            .env_remove("PROPTEST_CASES")
            .env("MODEL_BLOCK_CASES", &few)
            .args(["test", "--quiet", "--release", "--test", "model_blocks"]),
    )
}

/// `cargo rustc` of fsdr-net-io's unit tests with `--cfg loom` given to that crate alone,
/// in the workspace's debug build: the models check the crate's own synchronisation (no
/// dependency of the crate's reads `cfg(loom)` but tokio, whose API then changes), and the
/// dependencies are the test run's build, not a second one (`RUSTFLAGS="--cfg loom"` rebuilt
/// every one of them).
fn loom_build() -> Command {
    let mut cmd = crate::cargo();
    cmd.args([
        "rustc",
        "--quiet",
        "-p",
        "fsdr-net-io",
        // The `loom` crate: an optional dependency (as a `cfg(loom)` target dependency it
        // would need the cfg in RUSTFLAGS, hence in every crate).
        "--features",
        "loom",
        "--lib",
        "--profile",
        "test",
    ]);
    cmd
}

/// The loom model tests (the notifier and the single-writer counters: the hand-written
/// synchronisation; the index rings are `rtrb`'s): every interleaving of a notify against a
/// waiting consumer, of a counter's writer against its readers.
pub fn loom() -> Result<()> {
    let with_cfg = |mut cmd: Command| {
        cmd.args(["--", "--cfg", "loom"]);
        cmd
    };
    crate::report::run_as("build loom models", &mut with_cfg(loom_build()))?;
    // The build again, done: its messages name the test binary.
    let mut again = loom_build();
    again.args(["--message-format", "json-render-diagnostics"]);
    let out = with_cfg(again).output()?;
    let exe = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|m| m["executable"].as_str().map(str::to_string))
        .context("cargo rustc named no test binary for the loom models")?;
    crate::report::run_as(
        "loom models",
        Command::new(exe).args(["--quiet", "--test-threads", "2", "loom"]),
    )
}
