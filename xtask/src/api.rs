//! The public API, checked: `cargo xtask api` lists every public item of `fsdr-net-io` (with
//! its default features: the test bed is not part of it) and of `fsdr-net` — modules,
//! types, functions, methods, fields, variants, constants, re-exports — one line each,
//! from rustdoc's JSON (the nightly toolchain), and compares the lists with `api/*.txt`.
//! A change to the surface shows as a diff, to be accepted with `--bless`. `cargo xtask
//! test` runs the comparison.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// The packages whose surface is checked, and their crate names.
const PACKAGES: &[(&str, &str)] = &[("fsdr-net-io", "fsdr_net_io"), ("fsdr-net", "fsdr_net")];

/// Where the snapshots live.
fn snapshot(package: &str) -> PathBuf {
    Path::new("api").join(format!("{package}.txt"))
}

/// Lists each package's public items and compares them with the snapshots (or writes them,
/// with `bless`).
pub fn check(bless: bool) -> Result<()> {
    let mut diffs = Vec::new();
    for &(package, krate) in PACKAGES {
        crate::report::run_as(
            &format!("rustdoc JSON, {package}"),
            crate::checks::nightly()
                .env("CARGO_TARGET_DIR", "target/api")
                .env_remove("RUSTFLAGS")
                .args([
                    "rustdoc",
                    "--quiet",
                    "-p",
                    package,
                    "--lib",
                    "--",
                    "-Z",
                    "unstable-options",
                    "--output-format",
                    "json",
                ]),
        )?;
        let json = Path::new("target/api/doc").join(format!("{krate}.json"));
        let doc: Value = serde_json::from_str(
            &std::fs::read_to_string(&json).with_context(|| json.display().to_string())?,
        )
        .with_context(|| format!("parsing {}", json.display()))?;
        let now = listing(&doc, krate)?;
        let path = snapshot(package);
        if bless {
            std::fs::create_dir_all("api")?;
            std::fs::write(&path, now.join("\n") + "\n")?;
            eprintln!(
                "xtask: {} public items of {package} written to {}",
                now.len(),
                path.display()
            );
            continue;
        }
        let before: BTreeSet<String> = std::fs::read_to_string(&path)
            .with_context(|| {
                format!(
                    "{} (make it with `cargo xtask api --bless`)",
                    path.display()
                )
            })?
            .lines()
            .map(str::to_string)
            .collect();
        let after: BTreeSet<String> = now.into_iter().collect();
        let gone: Vec<_> = before.difference(&after).collect();
        let new: Vec<_> = after.difference(&before).collect();
        if gone.is_empty() && new.is_empty() {
            eprintln!(
                "xtask: {package}: {} public items, as in {}",
                after.len(),
                path.display()
            );
        } else {
            let mut d = format!("{package} ({}):", path.display());
            for g in gone {
                d.push_str(&format!("\n  - {g}"));
            }
            for n in new {
                d.push_str(&format!("\n  + {n}"));
            }
            diffs.push(d);
        }
    }
    if !diffs.is_empty() {
        bail!(
            "the public API changed; if that is meant, `cargo xtask api --bless` and commit \
             api/*.txt:\n{}",
            diffs.join("\n")
        );
    }
    Ok(())
}

/// One line per public item reachable from the crate's root: `kind path`, sorted.
fn listing(doc: &Value, krate: &str) -> Result<Vec<String>> {
    let index = doc["index"]
        .as_object()
        .context("rustdoc JSON without an index")?;
    let root = doc["root"].to_string();
    let mut out = BTreeSet::new();
    let mut seen = BTreeSet::new();
    walk(index, &root, krate, &mut out, &mut seen);
    Ok(out.into_iter().collect())
}

/// An item's kind: the one key of its `inner` object.
fn kind(item: &Value) -> &str {
    item["inner"]
        .as_object()
        .and_then(|o| o.keys().next())
        .map_or("?", String::as_str)
}

fn hidden(item: &Value) -> bool {
    item["attrs"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x.to_string().contains("hidden")))
}

fn public(item: &Value) -> bool {
    item["visibility"].as_str() == Some("public")
}

fn walk(
    index: &serde_json::Map<String, Value>,
    module: &str,
    path: &str,
    out: &mut BTreeSet<String>,
    seen: &mut BTreeSet<String>,
) {
    if !seen.insert(module.to_string()) {
        return;
    }
    let Some(items) = index
        .get(module)
        .and_then(|m| m["inner"]["module"]["items"].as_array())
    else {
        return;
    };
    for id in items {
        let Some(item) = index.get(&id.to_string()) else {
            continue;
        };
        if hidden(item) {
            continue;
        }
        let k = kind(item);
        if k == "use" {
            let u = &item["inner"]["use"];
            let name = u["name"].as_str().unwrap_or("?");
            let source = u["source"].as_str().unwrap_or("?");
            out.insert(format!("use {path}::{name} = {source}"));
            continue;
        }
        if !public(item) {
            continue;
        }
        let name = item["name"].as_str().unwrap_or("?");
        let here = format!("{path}::{name}");
        out.insert(format!("{k} {here}"));
        let inner = &item["inner"][k];
        match k {
            "module" => walk(index, &id.to_string(), &here, out, seen),
            "struct" | "enum" | "union" => {
                members(index, inner, &here, out);
            }
            "trait" => {
                for t in inner["items"].as_array().into_iter().flatten() {
                    if let Some(t) = index.get(&t.to_string()) {
                        out.insert(format!(
                            "trait-{} {here}::{}",
                            kind(t),
                            t["name"].as_str().unwrap_or("?")
                        ));
                    }
                }
            }
            _ => {}
        }
    }
}

/// A type's public fields, variants and inherent methods (trait impls are the traits').
fn members(
    index: &serde_json::Map<String, Value>,
    inner: &Value,
    here: &str,
    out: &mut BTreeSet<String>,
) {
    let fields = inner["kind"]["plain"]["fields"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(inner["kind"]["tuple"].as_array().into_iter().flatten())
        .chain(inner["fields"].as_array().into_iter().flatten());
    for f in fields {
        if let Some(f) = index.get(&f.to_string())
            && public(f)
            && !hidden(f)
        {
            out.insert(format!(
                "field {here}.{}",
                f["name"].as_str().unwrap_or("?")
            ));
        }
    }
    for v in inner["variants"].as_array().into_iter().flatten() {
        if let Some(v) = index.get(&v.to_string()) {
            out.insert(format!(
                "variant {here}::{}",
                v["name"].as_str().unwrap_or("?")
            ));
        }
    }
    for i in inner["impls"].as_array().into_iter().flatten() {
        let Some(imp) = index.get(&i.to_string()).map(|i| &i["inner"]["impl"]) else {
            continue;
        };
        if !imp["trait"].is_null() || imp["is_synthetic"] == true || !imp["blanket_impl"].is_null()
        {
            continue;
        }
        for m in imp["items"].as_array().into_iter().flatten() {
            if let Some(m) = index.get(&m.to_string())
                && public(m)
                && !hidden(m)
            {
                out.insert(format!(
                    "{} {here}::{}",
                    kind(m),
                    m["name"].as_str().unwrap_or("?")
                ));
            }
        }
    }
}
