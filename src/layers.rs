//! The map in `lib.rs`, checked: its layers are the order of its `pub mod` lines, and a module
//! imports only from its own layer or the ones below, with no cycle inside a layer. Read from
//! the sources, `use` lines and inline `crate::` paths alike, leaving out comments and the
//! `#[cfg(test)]` module that closes a file. A module and the modules it holds (`gate` and
//! `gate::config`) are one unit and may use each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's modules, each by its path (`state::loops`) with the text that counts.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                if path.file_name() != Some("bin".as_ref()) {
                    dirs.push(path);
                }
                continue;
            }
            let skip = [src.join("lib.rs"), src.join("layers.rs")];
            if path.extension() != Some("rs".as_ref()) || skip.contains(&path) {
                continue;
            }
            let relative: PathBuf = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = relative
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if parts.last().map(String::as_str) == Some("mod") {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            found.insert(parts.join("::"), code_of(&text));
        }
    }
    found
}

/// The lines that are code: no comments, nothing from the closing test module on.
fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == "#[cfg(test)]"
                && lines
                    .get(i + 1)
                    .is_some_and(|l| l.trim_start().starts_with("mod tests"))
        })
        .unwrap_or(lines.len());
    let after: Vec<&&str> = lines[end..]
        .iter()
        .skip(2)
        .filter(|l| !l.is_empty() && !l.starts_with([' ', '}']))
        .collect();
    assert!(
        after.is_empty(),
        "code after the test module, which must close the file: {after:?}"
    );
    lines[..end]
        .iter()
        .filter(|l| !l.trim_start().starts_with("//"))
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::…` path the code names, with `use crate::a::{b, c::d}` spelled out.
fn paths_named(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
            continue;
        }
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let head = rest[..end].trim_end_matches(':').to_string();
        if rest[end..].starts_with('{') {
            let close = rest[end..].find('}').map_or(rest.len(), |i| end + i);
            for item in rest[end + 1..close].split(',') {
                let item = item.split(" as ").next().unwrap_or("").trim();
                if !item.is_empty() && item != "self" {
                    paths.push(format!("{head}::{item}"));
                }
            }
        }
        paths.push(head);
    }
    paths
}

/// The module a path lands in: its longest prefix that is a module.
fn module_of<'a>(path: &str, known: &'a BTreeMap<String, String>) -> Option<&'a str> {
    let segments: Vec<&str> = path.split("::").collect();
    (1..=segments.len())
        .rev()
        .map(|n| segments[..n].join("::"))
        .find_map(|prefix| known.get_key_value(&prefix).map(|(k, _)| k.as_str()))
}

fn layer(module: &str) -> &str {
    module.split("::").next().unwrap()
}

fn owns(a: &str, b: &str) -> bool {
    a == b || b.starts_with(&format!("{a}::")) || a.starts_with(&format!("{b}::"))
}

/// lib.rs's `mod` lines (`pub` or `pub(crate)`), in order: the layers, lowest first.
fn layers(src: &Path) -> Vec<String> {
    std::fs::read_to_string(src.join("lib.rs"))
        .expect("lib.rs")
        .lines()
        .filter_map(|l| {
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("pub(crate) mod "))
        })
        .map(|l| l.trim_end_matches(';').to_string())
        .collect()
}

#[test]
fn no_module_imports_from_a_layer_above_it_and_no_layer_has_an_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let order = layers(&src);
    let rank = |m: &str| order.iter().position(|l| l == layer(m));
    let known = modules(&src);
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut upward = Vec::new();
    for (module, code) in &known {
        assert!(
            rank(module).is_some(),
            "{module} is in no layer lib.rs names"
        );
        for path in paths_named(code) {
            let Some(target) = module_of(&path, &known) else {
                continue;
            };
            if owns(module, target) {
                continue;
            }
            if rank(target) > rank(module) {
                upward.push(format!("{module} -> {path}"));
            }
            if layer(target) == layer(module) {
                edges.entry(module).or_default().insert(target);
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports from a higher layer:\n{}",
        upward.join("\n")
    );
    // A cycle: a module that reaches itself through the edges of its layer.
    for start in edges.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(start, vec![start])];
        while let Some((at, trail)) = stack.pop() {
            for next in edges.get(at).into_iter().flatten() {
                assert!(
                    next != start,
                    "an import cycle: {} -> {start}",
                    trail.join(" -> ")
                );
                if seen.insert(*next) {
                    let mut longer = trail.clone();
                    longer.push(next);
                    stack.push((next, longer));
                }
            }
        }
    }
}

#[test]
fn the_check_sees_inline_paths_and_use_groups() {
    let code = "use crate::sys::{atomic, time::Deadline};\nfn f() { crate::state::loops::load(); }\n// crate::install::settings\n";
    let named = paths_named(&code_of(code));
    assert!(named.contains(&"sys::atomic".to_string()), "{named:?}");
    assert!(
        named.contains(&"sys::time::Deadline".to_string()),
        "{named:?}"
    );
    assert!(
        named.contains(&"state::loops::load".to_string()),
        "{named:?}"
    );
    assert!(!named.iter().any(|p| p.starts_with("install")), "{named:?}");
}

#[test]
fn only_the_platform_layer_touches_the_operating_system() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut texts: Vec<(String, String)> = modules(&src).into_iter().collect();
    for entry in std::fs::read_dir(src.join("bin")).expect("src/bin") {
        let path = entry.expect("an entry").path();
        let text = std::fs::read_to_string(&path).expect("a binary's source");
        texts.push((path.display().to_string(), code_of(&text)));
    }
    let outside: Vec<String> = texts
        .iter()
        .filter(|(module, _)| layer(module) != "sys")
        .flat_map(|(module, code)| {
            code.lines()
                .filter(|l| l.contains("libc::") || l.contains("std::os::"))
                .map(move |l| format!("{module}: {}", l.trim()))
        })
        .collect();
    assert!(
        outside.is_empty(),
        "system calls outside sys:\n{}",
        outside.join("\n")
    );
}
