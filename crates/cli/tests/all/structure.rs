//! Every crate's modules import each other in one direction only: no
//! import circle, so each room can be read knowing only what it imports (a
//! circle of eleven files had grown in crates/sched between the CPU, its
//! rooms and Linux's balancer; others in the CLI, between the run, real
//! and suite commands, and in the simulator, between the engine and the
//! figures of its outcome). An import is a `use crate::..`, a `crate::a::b` path, a
//! `use super::..` or a `pub use child::..`; comments and `#[cfg(test)]`
//! modules do not count, and a name the crate root re-exports counts as
//! its module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of the crate by path (`""` the root, `linux::lb`), with its
/// source, comments and test modules removed.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.expect("an entry").path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).expect("under src").with_extension("");
            let mut name = rel.to_string_lossy().replace(['/', '\\'], "::");
            if name == "lib" {
                name.clear();
            } else if let Some(parent) = name.strip_suffix("::mod") {
                name = parent.to_string();
            }
            let text = std::fs::read_to_string(&p).expect("a source file");
            out.insert(name, code_of(&text));
        }
    }
    out
}

/// The text without comment lines and without its `#[cfg(test)]` module.
fn code_of(text: &str) -> String {
    let cut = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..cut]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths after `prefix` in `code`: `a::b::C` and, for a group
/// `{X, y::Z}`, each of its items.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        let path: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let after = &rest[path.len()..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if (path.is_empty() || path.ends_with("::")) && after.starts_with('{') {
            let group = &after[1..after.find('}').unwrap_or(after.len())];
            for item in group.split(',') {
                let item = item.split_whitespace().next().unwrap_or("");
                if !item.is_empty() {
                    out.push(format!("{path}{item}"));
                }
            }
        } else {
            out.push(path);
        }
    }
    out
}

/// Each module's imports: the modules it names (see the module doc).
fn imports(mods: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    // Names the root re-exports, by the module they come from.
    let mut reexport: BTreeMap<String, String> = BTreeMap::new();
    for p in paths_after(&mods[""], "pub use ") {
        if let (Some((m, _)), Some(name)) = (p.split_once("::"), p.rsplit("::").next()) {
            reexport.insert(name.to_string(), m.to_string());
        }
    }
    // The longest module prefix of `path`, or the module a root name is from.
    let owner = |path: &str| -> Option<String> {
        let parts: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        for k in (1..=parts.len()).rev() {
            let c = parts[..k].join("::");
            if mods.contains_key(&c) {
                return Some(c);
            }
        }
        parts.first().and_then(|p| reexport.get(*p).cloned())
    };
    let mut edges = BTreeMap::new();
    for (m, code) in mods {
        let here: Vec<&str> = m.split("::").filter(|s| !s.is_empty()).collect();
        let mut to = BTreeSet::new();
        for p in paths_after(code, "crate::") {
            to.extend(owner(&p));
        }
        for p in paths_after(code, "super::") {
            // `super` is the module's parent, whatever file holds it.
            let ups = 1 + p.matches("super::").count();
            let rest = p.trim_start_matches("super::");
            let keep = here.len().saturating_sub(ups);
            let full: Vec<&str> = here[..keep].iter().copied().chain([rest]).collect();
            to.extend(owner(&full.join("::")));
        }
        for p in paths_after(code, "pub use ") {
            if !p.starts_with("crate::") && !p.starts_with("super::") && !m.is_empty() {
                to.extend(owner(&format!("{m}::{p}")));
            }
        }
        to.remove(m);
        to.remove("");
        // A child's import of its ancestor is the child being part of it.
        to.retain(|t| !m.starts_with(&format!("{t}::")));
        edges.insert(m.clone(), to);
    }
    edges
}

/// Every circle a depth-first walk of `edges` closes, as `a -> b -> a`.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut Vec<String>,
    ) {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut circle = path[i..].to_vec();
            circle.push(m.to_string());
            found.push(circle.join(" -> "));
            return;
        }
        if !done.insert(m.to_string()) {
            return;
        }
        path.push(m.to_string());
        for t in edges.get(m).into_iter().flatten() {
            visit(t, edges, path, done, found);
        }
        path.pop();
    }
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for m in edges.keys() {
        visit(m, edges, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

/// The workspace's root.
fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Each library of the workspace: (its directory, its `src`). A crate's
/// binary root (`main.rs`) is read as a module of its library, which it
/// only calls.
fn crates() -> Vec<(String, std::path::PathBuf)> {
    let mut out = Vec::new();
    for top in ["crates", "examples"] {
        let dir = root().join(top);
        for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.expect("an entry").path();
            if p.join("src/lib.rs").exists() {
                let name = format!(
                    "{top}/{}",
                    p.file_name().unwrap_or_default().to_string_lossy()
                );
                out.push((name, p.join("src")));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_module_of_any_crate_imports_one_that_imports_it_back() {
    let all = crates();
    assert!(
        all.len() >= 7,
        "expected the workspace's crates, found {all:?}"
    );
    let mut broken = Vec::new();
    for (name, src) in &all {
        let mods = modules(src);
        for c in circles(&imports(&mods)) {
            broken.push(format!("{name}: {c}"));
        }
    }
    let sched = modules(&root().join("crates/sched/src"));
    assert!(
        sched.len() > 20,
        "expected crates/sched's modules, found {}",
        sched.len()
    );
    assert!(broken.is_empty(), "import circles:\n{}", broken.join("\n"));
}

#[test]
fn the_path_reader_sees_groups_and_skips_longer_names() {
    let code =
        "use crate::{a::B, c};\nlet x = crate::d::e();\nmycrate::z();\nuse super::super::f::G;";
    assert_eq!(
        paths_after(code, "crate::"),
        vec!["a::B".to_string(), "c".to_string(), "d::e".to_string()],
        "expected a group's items and the path, not mycrate's"
    );
    assert_eq!(
        paths_after(code, "super::"),
        vec!["super::f::G".to_string()],
        "expected `super::super::` read once, from its start"
    );
}

/// The CPU's rooms (the modules `cpu` imports, outside `cpu` itself) never
/// name the CPU: each is lent the fields it works on and returns what the
/// CPU must do, so none can call back into the CPU that holds it. Only
/// `cpu` and its own files (`cpu::carry`, `cpu::thread`) implement
/// `CpuSched`.
#[test]
fn no_room_of_the_cpu_names_the_cpu() {
    let src = root().join("crates/sched/src");
    let mods = modules(&src);
    let edges = imports(&mods);
    let is_cpu = |m: &str| m == "cpu" || m.starts_with("cpu::");
    let rooms: BTreeSet<&String> = edges
        .iter()
        .filter(|(m, _)| is_cpu(m))
        .flat_map(|(_, to)| to)
        .filter(|t| !is_cpu(t))
        .collect();
    for expected in [
        "wake",
        "pick",
        "lifecycle",
        "cookie",
        "runqueue",
        "sleepers",
        "pick_state",
    ] {
        assert!(
            rooms.iter().any(|r| r.as_str() == expected),
            "expected the CPU to import its room `{expected}`; it imports {rooms:?}"
        );
    }
    let naming: Vec<&&String> = rooms
        .iter()
        .filter(|r| mods[r.as_str()].contains("CpuSched"))
        .collect();
    assert!(
        naming.is_empty(),
        "rooms of the CPU that name `CpuSched` (a room returns what the CPU must do instead): {naming:?}"
    );
    let implementing: Vec<&String> = mods
        .iter()
        .filter(|(m, code)| {
            !is_cpu(m)
                && code
                    .lines()
                    .any(|l| l.trim_start().starts_with("impl") && l.contains("CpuSched"))
        })
        .map(|(m, _)| m)
        .collect();
    assert!(
        implementing.is_empty(),
        "modules outside `cpu` that implement `CpuSched`: {implementing:?}"
    );
}
