//! The shape that keeps the code easy to live in, checked so it cannot drift:
//!
//! - **Files that fit**: no Rust source over [`MAX_LINES`] lines unless one of its first 15
//!   lines says why (`long: …`).
//! - **No import circle**: within a crate, no module uses (`crate::…`, `super::…`, or a path
//!   through a child) a module that, directly or through others, uses it back. A module
//!   using its own ancestors (a child using its parent's shared state) is not counted: that
//!   is how Rust modules nest. What is counted is a circle between modules that are not
//!   each other's ancestors — siblings calling each other, a layer importing the layer that
//!   imports it.
//! - **Documents that stay readable**: README.md at most [`README_MAX`] bytes (a guide, not a
//!   lab notebook), docs/PERFORMANCE.md at most [`PERFORMANCE_MAX`] (the current state;
//!   dated sweeps go to docs/measurements/, which has an index), and every document the
//!   README links to exists.
//! - **Unsafe code that says what checks it** (`safety.rs`): every `// SAFETY:` comment
//!   names the test, Miri or ASan run that exercises it, and the tests it names exist.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The most lines a source file has without saying why.
pub const MAX_LINES: usize = 600;

/// The README's size limit in bytes (15 KB, counted as 15 000 so that no reading of "KB"
/// lets it grow past the limit).
pub const README_MAX: u64 = 15_000;

/// docs/PERFORMANCE.md's size limit in bytes (25 KB, counted as 25 000).
pub const PERFORMANCE_MAX: u64 = 25_000;

/// Problems with the documents' sizes and the README's and ARCHITECTURE's local links.
pub fn documents() -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for (path, max) in [
        ("README.md", README_MAX),
        ("docs/PERFORMANCE.md", PERFORMANCE_MAX),
    ] {
        match std::fs::metadata(path) {
            Ok(m) if m.len() > max => problems.push(format!(
                "{path} is {} bytes (over {max}): measurements and history belong in docs/measurements/",
                m.len()
            )),
            Ok(_) => {}
            Err(e) => problems.push(format!("{path}: {e}")),
        }
    }
    if std::fs::metadata("docs/measurements/README.md").is_err() {
        problems.push(
            "docs/measurements/README.md (the index of dated measurements) is missing".into(),
        );
    }
    for doc in [
        "README.md",
        "ARCHITECTURE.md",
        "docs/PERFORMANCE.md",
        "docs/measurements/README.md",
    ] {
        let Ok(text) = std::fs::read_to_string(doc) else {
            continue;
        };
        let base = Path::new(doc).parent().unwrap_or(Path::new(""));
        for target in local_links(&text) {
            if !base.join(&target).exists() {
                problems.push(format!("{doc} links to {target}, which does not exist"));
            }
        }
    }
    Ok(problems)
}

/// The targets of a Markdown text's relative links (`](path)` or `](path#anchor)`), without
/// web addresses.
fn local_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:") {
            out.push(target.to_string());
        }
    }
    out
}

/// The tracked Rust files (what git knows).
fn rust_files() -> Result<Vec<PathBuf>> {
    let out = Command::new("git")
        .args(["ls-files", "*.rs"])
        .output()
        .context("git ls-files")?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(PathBuf::from)
        .collect())
}

/// Files over [`MAX_LINES`] without a `long:` reason in their first lines.
pub fn long_files() -> Result<Vec<(PathBuf, usize)>> {
    let mut long = Vec::new();
    for f in rust_files()? {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let n = text.lines().count();
        let reason = text
            .lines()
            .take(15)
            .any(|l| l.to_ascii_lowercase().contains("long:"));
        if n > MAX_LINES && !reason {
            long.push((f, n));
        }
    }
    Ok(long)
}

/// The module path of a source file under a crate's `src`, e.g. `engine::backend::mio`
/// (`""` for the crate root).
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    Some(parts)
}

/// Every `crate::a::b` and `super::…::x` path in `text`, resolved against `module`, as
/// candidate module paths (longest first is tried by the caller).
fn paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find(['c', 's']) {
            let tail = &rest[i..];
            let before_ok = i == 0 || !rest[..i].ends_with(ident);
            let (base, after): (Vec<String>, &str) = if before_ok && tail.starts_with("crate::") {
                (Vec::new(), &tail["crate::".len()..])
            } else if before_ok && tail.starts_with("super::") {
                let mut m = module.to_vec();
                let mut t = tail;
                while let Some(r) = t.strip_prefix("super::") {
                    m.pop();
                    t = r;
                }
                (m, t)
            } else {
                rest = &rest[i + 1..];
                continue;
            };
            let segs: Vec<String> = after
                .split("::")
                .map(|s| s.chars().take_while(|&c| ident(c)).collect::<String>())
                .take_while(|s| !s.is_empty())
                .collect();
            let mut p = base;
            p.extend(segs);
            // `use crate::a::{b, c}` names several: each member is a path too.
            if let Some(open) = after.find("::{")
                && let Some(close) = after[open..].find('}')
            {
                for m in after[open + 3..open + close].split(',') {
                    let name: String = m.trim().chars().take_while(|&c| ident(c)).collect();
                    if !name.is_empty() {
                        let mut q = p.clone();
                        q.push(name);
                        out.push(q);
                    }
                }
            }
            out.push(p);
            rest = &rest[i + 1..];
        }
    }
    out
}

/// Circles of imports between modules of one crate (`src` its source folder).
fn crate_cycles(src: &Path, files: &[PathBuf]) -> Vec<Vec<String>> {
    let mut modules: BTreeMap<Vec<String>, PathBuf> = BTreeMap::new();
    for f in files {
        if let Some(m) = module_of(src, f) {
            modules.insert(m, f.clone());
        }
    }
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (m, f) in &modules {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for p in paths(&text, m) {
            // The longest prefix that is a module of this crate.
            let target = (0..=p.len())
                .rev()
                .map(|k| p[..k].to_vec())
                .find(|q| modules.contains_key(q));
            if let Some(t) = target
                && t != *m
                && !m.starts_with(&t)
            {
                edges.entry(m.clone()).or_default().insert(t);
            }
        }
    }
    // Strongly connected components (Tarjan), each of more than one module a circle.
    struct T<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<Vec<String>, usize>,
        low: BTreeMap<Vec<String>, usize>,
        stack: Vec<Vec<String>>,
        on: BTreeSet<Vec<String>>,
        n: usize,
        out: Vec<Vec<String>>,
    }
    fn visit(t: &mut T<'_>, v: &Vec<String>) {
        t.index.insert(v.clone(), t.n);
        t.low.insert(v.clone(), t.n);
        t.n += 1;
        t.stack.push(v.clone());
        t.on.insert(v.clone());
        let next: Vec<Vec<String>> = t.edges.get(v).into_iter().flatten().cloned().collect();
        for w in next {
            if !t.index.contains_key(&w) {
                visit(t, &w);
                let lw = t.low[&w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(&w) {
                let iw = t.index[&w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(&w);
                let done = w == *v;
                comp.push(w.join("::"));
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges: &edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        n: 0,
        out: Vec::new(),
    };
    for m in modules.keys() {
        if !t.index.contains_key(m) {
            visit(&mut t, m);
        }
    }
    t.out
}

/// Import circles in every crate of the workspace, as "crate: a ↔ b ↔ …".
pub fn cycles() -> Result<Vec<String>> {
    let files = rust_files()?;
    let mut found = Vec::new();
    for src in [
        "src",
        "crates/fsdr-net-io/src",
        "crates/fsdr-net-lttng/src",
        "crates/fsdr-net-trace/src",
        "xtask/src",
    ] {
        let src = Path::new(src);
        let mine: Vec<PathBuf> = files
            .iter()
            .filter(|f| f.starts_with(src))
            .cloned()
            .collect();
        for c in crate_cycles(src, &mine) {
            found.push(format!("{}: {}", src.display(), c.join(" ↔ ")));
        }
    }
    Ok(found)
}

/// Fails with the list when a file is too long or modules import each other in a circle.
pub fn check() -> Result<()> {
    let mut problems = Vec::new();
    for (f, n) in long_files()? {
        problems.push(format!(
            "{} has {n} lines (over {MAX_LINES}; split it, or say why in its first lines with `long: …`)",
            f.display()
        ));
    }
    for c in cycles()? {
        problems.push(format!("import circle: {c}"));
    }
    problems.extend(documents()?);
    problems.extend(crate::safety::problems(&rust_files()?));
    if problems.is_empty() {
        Ok(())
    } else {
        bail!("the code's shape:\n  {}", problems.join("\n  "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_links_leave_out_web_addresses_and_anchors() {
        let text = "see [a](docs/a.md#x), [b](https://x.org/y), [c](../c.md) and [d](#top)";
        assert_eq!(local_links(text), ["docs/a.md", "../c.md"]);
    }

    #[test]
    fn paths_resolve_crate_super_and_groups() {
        let m: Vec<String> = vec!["engine".into(), "backend".into(), "mio".into()];
        let p = paths(
            "use super::super::receive::{DRAIN_CALLS, recv_batch};\nuse crate::seq::{Gap, Released};",
            &m,
        );
        assert!(p.contains(&vec![
            "engine".to_string(),
            "receive".into(),
            "DRAIN_CALLS".into()
        ]));
        assert!(p.contains(&vec!["seq".to_string(), "Gap".into()]));
        assert!(
            !paths("// use crate::x;", &m)
                .iter()
                .any(|p| p.first().is_some_and(|s| s == "x"))
        );
    }
}
