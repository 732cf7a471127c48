//! The simulator's size rules (set when the engine became one host loop):
//! no source file over 700 lines and no function over 80, so each room
//! stays readable. Functions are
//! found as rustfmt lays them out: a line whose code starts with `fn` (after
//! `pub`, `pub(..)`, `const`), ending at the first `}` at its indentation.

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 700;
const MAX_FN_LINES: usize = 80;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in entries {
        let path = e.expect("a directory entry").path();
        if path.is_dir() {
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
fn no_file_over_700_lines_and_no_function_over_80() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    files.sort();
    assert!(
        files.len() > 5,
        "expected the simulator's sources, found {files:?}"
    );
    let mut broken = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let n = text.lines().count();
        if n > MAX_FILE_LINES {
            broken.push(format!(
                "{}: {n} lines (at most {MAX_FILE_LINES})",
                f.display()
            ));
        }
        for (name, line, len) in long_fns(&text) {
            broken.push(format!(
                "{}:{line}: fn {name} is {len} lines (at most {MAX_FN_LINES})",
                f.display()
            ));
        }
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
