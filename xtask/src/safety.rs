//! Every `unsafe` block's `// SAFETY:` comment names what checks it: a comment block with
//! `SAFETY:` also has `Checked by:`, and every test it names (a backticked `snake_case`
//! name) is a function of the workspace, so that a renamed or deleted test cannot leave a
//! claim behind. "nothing to check: …" is the answer for calls that take no memory.
//!
//! Where memory is lent to the kernel ([`KERNEL_LENT`]), a `SAFETY:` comment that speaks of
//! the kernel names a test of a `kernel_writes.rs` too: Miri runs no system call and ASan
//! does not see a write the kernel makes, so only that instrument can see the violation.

use std::collections::BTreeSet;
use std::path::PathBuf;

/// The files that lend memory to the kernel beyond a system call, or hand out what it wrote
/// (ARCHITECTURE.md, "Memory lent to the kernel").
pub const KERNEL_LENT: &[&str] = &[
    "engine/backend/uring.rs",
    "engine/backend/multishot/mod.rs",
    "engine/backend/multishot/buffers.rs",
    "send/uring.rs",
    "sys/xsk.rs",
    "sys/recv.rs",
    "inplace/scatter.rs",
];

/// One problem per `SAFETY:` comment that names no check, or names a test that is gone.
pub fn problems(files: &[PathBuf]) -> Vec<String> {
    let texts: Vec<(PathBuf, String)> = files
        .iter()
        .filter_map(|f| Some((f.clone(), std::fs::read_to_string(f).ok()?)))
        .collect();
    let fns: BTreeSet<String> = texts.iter().flat_map(|(_, t)| fn_names(t)).collect();
    let kernel_checks: BTreeSet<String> = texts
        .iter()
        .filter(|(f, _)| f.ends_with("kernel_writes.rs"))
        .flat_map(|(_, t)| fn_names(t))
        .collect();
    let mut problems = Vec::new();
    for (f, text) in &texts {
        let lent = KERNEL_LENT.iter().any(|l| f.to_string_lossy().ends_with(l));
        for (line, block) in safety_blocks(text) {
            let Some(at) = block.find("Checked by:") else {
                problems.push(format!(
                    "{}:{line}: a SAFETY comment without `Checked by:` (the test, Miri or ASan run that exercises it)",
                    f.display()
                ));
                continue;
            };
            if lent
                && block.contains("kernel")
                && !backticked(&block[at..])
                    .iter()
                    .any(|n| kernel_checks.contains(n))
            {
                problems.push(format!(
                    "{}:{line}: a SAFETY comment on memory lent to the kernel names no test of \
                     `kernel_writes.rs` (ASan does not see the kernel's writes)",
                    f.display()
                ));
            }
            for name in backticked(&block[at..]) {
                if is_fn_name(&name) && !fns.contains(&name) {
                    problems.push(format!(
                        "{}:{line}: the SAFETY comment names `{name}`, which is no function of the workspace",
                        f.display()
                    ));
                }
            }
        }
    }
    problems
}

/// The comment blocks (consecutive `//` lines, doc comments' `/// //` included) that hold
/// `SAFETY:`, with the line of `SAFETY:` (1-based).
fn safety_blocks(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if is_safety(lines[i]) {
            let mut block = String::new();
            let mut j = i;
            while j < lines.len() && lines[j].trim_start().starts_with("//") {
                block.push_str(lines[j].trim_start().trim_start_matches('/'));
                block.push(' ');
                j += 1;
                if j < lines.len() && is_safety(lines[j]) {
                    break;
                }
            }
            out.push((i + 1, block));
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// A comment line that starts a safety argument: `// SAFETY:` (in a doc example too).
fn is_safety(line: &str) -> bool {
    line.trim_start().starts_with("//")
        && line
            .trim_start_matches(|c: char| c == '/' || c.is_whitespace())
            .starts_with("SAFETY:")
}

/// Function names defined in a source text (`fn name`).
fn fn_names(text: &str) -> Vec<String> {
    text.split("fn ")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// A test's name: lower-case words joined by `_` (not a command like `cargo test`).
fn is_fn_name(s: &str) -> bool {
    s.contains('_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_safety_comment_needs_a_check_that_exists() {
        // Written with a placeholder, so that this file's own check does not read the
        // sample as comments of its own.
        let text = "fn real_test() {}\n\
                    // S: fine.\n// Checked by: `real_test` under ASan.\nunsafe {}\n\
                    // S: fine.\nunsafe {}\n\
                    // S: fine.\n// Checked by: `gone_test`.\nunsafe {}\n"
            .replace("S:", &["SAFE", "TY:"].concat());
        let dir = std::env::temp_dir().join(format!("xtask-safety-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.rs");
        std::fs::write(&f, text).unwrap();
        let p = problems(&[f]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains(":5: a SAFETY comment without"), "{p:?}");
        assert!(p[1].contains("`gone_test`"), "{p:?}");
    }
}
