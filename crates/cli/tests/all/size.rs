//! The workspace's size rules: no source file over 700 lines and no
//! function over 80, in every crate and example, so each room stays
//! readable. What breaks a rule today is listed below with its reason; a
//! listed item that no longer breaks it must leave the list (the test says
//! so), and nothing new may join it silently.
//!
//! A listed function is still at most 120 lines, and at most three
//! outside tests may be listed: the exceptions stay exceptions.
//!
//! Functions are found as rustfmt lays them out: a line whose code starts
//! with `fn` (after `pub`, `pub(..)`, `const`), ending at the first `}` at
//! its indentation.

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 700;
const MAX_FN_LINES: usize = 80;
/// No function, listed or not, is longer.
const MAX_LISTED_FN_LINES: usize = 120;
/// Listed functions outside tests, at most.
const MAX_LISTED_FNS: usize = 3;

/// Files allowed past the line limit: (path from the workspace root, why).
const LONG_FILES: &[(&str, &str)] = &[];

/// Functions allowed past the line limit: (file, function, why).
const LONG_FNS: &[(&str, &str, &str)] = &[
    (
        "crates/scenarios/src/field.rs",
        "hackbench_in",
        "hackbench's create_worker()/group() in one place, op by op against its source",
    ),
    (
        "crates/scenarios/src/field.rs",
        "schbench",
        "schbench's message and worker threads in one place, op by op against its source",
    ),
    (
        "crates/scenarios/src/rtapp/events.rs",
        "event",
        "one arm per rt-app event kind, in rt-app's parse_thread_event_data() order",
    ),
    (
        "crates/cli/tests/all/validate.rs",
        "calibrate_then_validate_one_workload",
        "one end-to-end test, step by step",
    ),
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in entries {
        let path = e.expect("a directory entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            sources(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The name of the function a line opens, if it opens one with a body.
fn opens_fn(code: &str) -> Option<&str> {
    let mut rest = code;
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    Some(rest.split(['(', '<']).next().unwrap_or(rest))
}

/// Every function of `text` longer than the limit: (name, first line, lines).
fn long_fns(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = line.len() - code.len();
        let Some(name) = opens_fn(code) else { continue };
        if code.ends_with(';') {
            continue; // a declaration without a body
        }
        let close = format!("{}}}", " ".repeat(indent));
        let end = lines[i..]
            .iter()
            .position(|l| l.starts_with(&close) && l.len() - l.trim_start().len() == indent)
            .unwrap_or(lines.len() - i);
        if end + 1 > MAX_FN_LINES {
            long.push((name.to_string(), i + 1, end + 1));
        }
    }
    long
}

#[test]
fn no_file_over_700_lines_and_no_function_over_80_but_the_listed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for top in ["crates", "examples"] {
        sources(&root.join(top), &mut files);
    }
    files.sort();
    assert!(
        files.len() > 50,
        "expected the workspace's sources, found {}",
        files.len()
    );
    let mut broken = Vec::new();
    let mut seen_files = Vec::new();
    let mut seen_fns = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .unwrap_or(f)
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let n = text.lines().count();
        if n > MAX_FILE_LINES {
            if LONG_FILES.iter().any(|(p, _)| *p == rel) {
                seen_files.push(rel.clone());
            } else {
                broken.push(format!("{rel}: {n} lines (at most {MAX_FILE_LINES})"));
            }
        }
        for (name, line, len) in long_fns(&text) {
            if len > MAX_LISTED_FN_LINES {
                broken.push(format!(
                    "{rel}:{line}: fn {name} is {len} lines (at most {MAX_LISTED_FN_LINES}, listed or not)"
                ));
            } else if LONG_FNS.iter().any(|(p, f, _)| *p == rel && *f == name) {
                seen_fns.push((rel.clone(), name));
            } else {
                broken.push(format!(
                    "{rel}:{line}: fn {name} is {len} lines (at most {MAX_FN_LINES})"
                ));
            }
        }
    }
    for (p, _) in LONG_FILES {
        if !seen_files.iter().any(|s| s == p) {
            broken.push(format!(
                "{p}: listed as too long but it is not: take it off LONG_FILES"
            ));
        }
    }
    for (p, f, _) in LONG_FNS {
        if !seen_fns.iter().any(|(sp, sf)| sp == p && sf == f) {
            broken.push(format!(
                "{p}: fn {f} listed as too long but it is not: take it off LONG_FNS"
            ));
        }
    }
    let listed = LONG_FNS
        .iter()
        .filter(|(p, _, _)| !p.contains("/tests/"))
        .count();
    if listed > MAX_LISTED_FNS {
        broken.push(format!(
            "{listed} functions outside tests listed as too long (at most {MAX_LISTED_FNS}): split one"
        ));
    }
    assert!(
        broken.is_empty(),
        "size rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_function_finder_sees_a_long_function_and_skips_declarations() {
    let body = "    x += 1;\n".repeat(MAX_FN_LINES);
    let text = format!("trait T {{\n    fn d(&self);\n}}\n\npub(crate) fn long<T>(x: T) {{\n{body}}}\n\nfn short() {{\n}}\n");
    assert_eq!(
        long_fns(&text),
        vec![("long".to_string(), 5, MAX_FN_LINES + 2)],
        "expected only `long`, of its body plus two lines"
    );
}
