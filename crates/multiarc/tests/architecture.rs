//! The crate's architecture, checked from its source: the rooms of
//! `src/` import one way (`mem` <- `arc` <- `l2` <- `api`), and no two
//! modules import each other, directly or through others.
//!
//! A module's imports are the `crate::room::...` and `super::...` paths in
//! its code (comments and its test module left out). A front door
//! (`mod.rs`) is the room seen from outside: its re-exports are not edges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The rooms, lowest first: each may import only from those before it.
const ROOMS: [&str; 4] = ["mem", "arc", "l2", "api"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The code of a source file: without comments, and without the test
/// module at its end (whose `super::` is the file itself).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(") && t.contains("test") {
            if let Some(next) = lines.peek() {
                if next.trim_start().starts_with("mod ") {
                    break;
                }
            }
        }
        let t = match t.find("//") {
            Some(i) => &t[..i],
            None => t,
        };
        out.push_str(t);
        out.push('\n');
    }
    out
}

/// Identifiers following each occurrence of `prefix` in `code`, with the
/// one after them (`crate::arc::core` gives `("arc", Some("core"))`).
fn paths<'a>(code: &'a str, prefix: &str) -> Vec<(&'a str, Option<&'a str>)> {
    let ident = |s: &'a str| -> (&'a str, &'a str) {
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        (&s[..end], &s[end..])
    };
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let (first, after) = ident(rest);
        if first.is_empty() {
            // `super::{a, b}`: each name in the braces.
            if let Some(inner) = rest.strip_prefix('{') {
                let close = inner.find('}').unwrap_or(inner.len());
                for name in inner[..close].split(',') {
                    let name = name.trim().split("::").next().unwrap_or("").trim();
                    if !name.is_empty() {
                        out.push((name, None));
                    }
                }
            }
            continue;
        }
        let second = after.strip_prefix("::").map(|s| ident(s).0);
        out.push((first, second.filter(|s| !s.is_empty())));
    }
    out
}

/// Every module file of the rooms, as `room/name` (`room/mod` for a front door).
fn modules() -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for room in ROOMS {
        let dir = src().join(room);
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "rs") {
                let name = path.file_stem().unwrap().to_str().unwrap().to_string();
                out.insert(format!("{room}/{name}"), path);
            }
        }
    }
    out
}

/// The module-level import graph: `room/name` -> the modules it imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, path) in &mods {
        let (room, file) = name.split_once('/').unwrap();
        let code = code(path);
        let edges = g.entry(name.clone()).or_default();
        let resolve = |r: &str, sub: Option<&str>| -> String {
            match sub {
                Some(s) if mods.contains_key(&format!("{r}/{s}")) => format!("{r}/{s}"),
                _ => format!("{r}/mod"),
            }
        };
        for (first, second) in paths(&code, "crate::") {
            if ROOMS.contains(&first) {
                edges.insert(resolve(first, second));
            }
        }
        if file != "mod" {
            for (first, _) in paths(&code, "super::") {
                edges.insert(resolve(room, Some(first)));
            }
        } else {
            // A front door's own code (not its `mod` lines and re-exports)
            // naming a module of its room: `feed::feed_once(..)`.
            let own: String = code
                .lines()
                .filter(|l| !(l.starts_with("mod ") || l.contains("use ") || l.contains(" mod ")))
                .collect::<Vec<_>>()
                .join("\n");
            for m in mods
                .keys()
                .filter_map(|m| m.strip_prefix(&format!("{room}/")))
            {
                if m != "mod" && !paths(&own, &format!("{m}::")).is_empty() {
                    edges.insert(format!("{room}/{m}"));
                }
            }
        }
        edges.remove(name);
    }
    g
}

#[test]
fn rooms_import_one_way() {
    let mut wrong = Vec::new();
    for (from, to) in graph() {
        let rank = |m: &str| ROOMS.iter().position(|r| m.starts_with(&format!("{r}/")));
        let (a, _) = from.split_once('/').unwrap();
        for t in to {
            if rank(&t) > rank(&from) {
                wrong.push(format!("{from} imports {t} (room {a} comes before it)"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the rooms' order:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_modules_import_each_other() {
    let g = graph();
    // Depth-first search for a cycle; report the first one found.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|s| s == m) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        stack.push(m.to_string());
        for t in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(t, g, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in g.keys() {
        if let Some(cycle) = visit(m, &g, &mut Vec::new(), &mut done) {
            panic!("modules importing each other: {}", cycle.join(" -> "));
        }
    }
}

/// The checks above would pass on a tree they cannot read: make sure they
/// see the modules and their imports.
#[test]
fn the_graph_sees_the_modules() {
    let g = graph();
    assert!(g.len() >= 20, "only {} modules found", g.len());
    assert!(g["arc/evict"].contains("arc/core"), "{:?}", g["arc/evict"]);
    assert!(g["api/cache"].contains("arc/mod"), "{:?}", g["api/cache"]);
    let pairs = paths(
        "use super::{a, b::c};\nlet x = crate::arc::core::Core;",
        "super::",
    );
    assert_eq!(pairs, [("a", None), ("b", None)]);
}
