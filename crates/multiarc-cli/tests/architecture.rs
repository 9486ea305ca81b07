//! The workspace's architecture, checked from its manifests (through
//! `cargo metadata`) and its sources:
//!
//! - no two crates depend on each other, and the test-support crates are
//!   never a normal dependency;
//! - the peer caches are dependencies of the benchmarks only;
//! - in every crate, no two modules import each other (directly or through
//!   others), and a folder's insides are imported only from inside it;
//! - the binary's modules import the libraries, not each other;
//! - the README's Layout table lists exactly the crates and their
//!   workspace dependencies.
//!
//! - the cache crate's rooms import one way: `mem` <- `arc` <- `l2` <- `api`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates that only tests may depend on.
const TEST_SUPPORT: [&str; 2] = ["multiarc-s3-loopback", "multiarc-garage-harness"];
/// The peer caches the benchmarks compare against.
const PEERS: [&str; 6] = ["moka", "quick_cache", "foyer", "TinyUFO", "concread", "lru"];
/// The crate that may depend on the peers (the CLI only through it).
const BENCH: &str = "multiarc-bench";
/// The cache crate's rooms (folders of `crates/multiarc/src`), lowest
/// first: each may import only from itself and those before it.
const CACHE_ROOMS: [&str; 4] = ["mem", "arc", "l2", "api"];

/// A workspace crate: its name, its directory, and its dependencies on
/// other workspace crates and on anything, by kind.
struct Crate {
    name: String,
    dir: PathBuf,
    /// Workspace crates it depends on, normal dependencies only.
    normal_workspace: BTreeSet<String>,
    /// Every normal dependency, by name.
    normal: BTreeSet<String>,
    /// Workspace crates it depends on as dev-dependencies.
    dev_workspace: BTreeSet<String>,
}

fn workspace() -> Vec<Crate> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap());
            let mut c = Crate {
                name: p["name"].as_str().unwrap().to_string(),
                dir: manifest.parent().unwrap().to_path_buf(),
                normal_workspace: BTreeSet::new(),
                normal: BTreeSet::new(),
                dev_workspace: BTreeSet::new(),
            };
            for d in p["dependencies"].as_array().unwrap() {
                let name = d["name"].as_str().unwrap().to_string();
                let ours = names.contains(&name) && d["path"].is_string();
                match d["kind"].as_str() {
                    None => {
                        if ours {
                            c.normal_workspace.insert(name.clone());
                        }
                        c.normal.insert(name);
                    }
                    Some("dev") if ours => {
                        c.dev_workspace.insert(name);
                    }
                    _ => {}
                }
            }
            c
        })
        .collect()
}

#[test]
fn test_support_is_never_a_normal_dependency() {
    let crates = workspace();
    assert!(crates.len() >= 10, "only {} crates found", crates.len());
    let mut wrong = Vec::new();
    for c in &crates {
        for t in TEST_SUPPORT {
            if c.normal.contains(t) && !TEST_SUPPORT.contains(&c.name.as_str()) {
                wrong.push(format!("{} depends on {t}", c.name));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // And the tests do use it (the check sees dev-dependencies).
    assert!(crates
        .iter()
        .any(|c| c.dev_workspace.contains(TEST_SUPPORT[0])));
}

#[test]
fn peer_caches_are_the_benchmarks_dependencies_only() {
    let mut wrong = Vec::new();
    for c in workspace() {
        for p in PEERS {
            if c.normal.contains(p) && c.name != BENCH {
                wrong.push(format!("{} depends on the peer cache {p}", c.name));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_crates_depend_on_each_other() {
    let crates = workspace();
    let g: BTreeMap<String, BTreeSet<String>> = crates
        .iter()
        .map(|c| (c.name.clone(), c.normal_workspace.clone()))
        .collect();
    if let Some(cycle) = find_cycle(&g) {
        panic!("crates depending on each other: {}", cycle.join(" -> "));
    }
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

/// The `::`-separated identifiers following each occurrence of `prefix`
/// in `code` (`crate::a::b::C` gives `["a", "b", "C"]`); `super::{a, b}`
/// gives one path per name in the braces.
fn paths(code: &str, prefix: &str) -> Vec<Vec<String>> {
    fn ident(s: &str) -> (&str, &str) {
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        (&s[..end], &s[end..])
    }
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(inner) = rest.strip_prefix('{') {
            let close = inner.find('}').unwrap_or(inner.len());
            for name in inner[..close].split(',') {
                let parts: Vec<String> = name
                    .split("::")
                    .map(|p| p.trim().to_string())
                    .filter(|p| !p.is_empty() && p != "{")
                    .collect();
                if !parts.is_empty() {
                    out.push(parts);
                }
            }
            continue;
        }
        let mut parts = Vec::new();
        let mut s = rest;
        loop {
            let (first, after) = ident(s);
            if first.is_empty() {
                break;
            }
            parts.push(first.to_string());
            match after.strip_prefix("::") {
                Some(next) => s = next,
                None => break,
            }
        }
        if !parts.is_empty() {
            out.push(parts);
        }
    }
    out
}

/// A crate's modules by path (`dir/fs`; a folder's front door by the
/// folder's name, `dir`), with their files. The crate root is left out:
/// it declares every module and re-exports their items.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let name = path.file_stem().unwrap().to_str().unwrap().to_string();
            if path.is_dir() {
                walk(&path, &format!("{prefix}{name}/"), out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let id = if name == "mod" {
                    prefix.trim_end_matches('/').to_string()
                } else {
                    format!("{prefix}{name}")
                };
                if !id.is_empty() && !(prefix.is_empty() && (name == "lib" || name == "main")) {
                    out.insert(id, path);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, "", &mut out);
    out
}

/// The module-level import graph of the crate whose sources are `src`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules(src);
    // The longest module path that `parts` begins with.
    let resolve = |parts: &[String]| -> Option<String> {
        (1..=parts.len())
            .rev()
            .map(|n| parts[..n].join("/"))
            .find(|m| mods.contains_key(m))
    };
    let mut g = BTreeMap::new();
    for (id, path) in &mods {
        let front_door = path.file_name().is_some_and(|f| f == "mod.rs");
        let code = code(path);
        // A front door's `mod` lines and re-exports are not imports.
        let code: String = if front_door {
            code.lines()
                .filter(|l| {
                    !(l.starts_with("mod ") || l.contains(" mod ") || l.starts_with("pub use "))
                })
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            code
        };
        let mut edges = BTreeSet::new();
        for parts in paths(&code, "crate::") {
            edges.extend(resolve(&parts));
        }
        // `super::` of `a/b` (the file `a/b.rs` or the front door
        // `a/b/mod.rs`) is `a`.
        let parent = id.rsplit_once('/').map(|(p, _)| p.to_string());
        for parts in paths(&code, "super::") {
            let base = match &parent {
                Some(p) => {
                    let mut v: Vec<String> = p.split('/').map(String::from).collect();
                    v.extend(parts);
                    v
                }
                None => parts,
            };
            edges.extend(resolve(&base));
        }
        // A front door naming its own modules: `fs::MultiarcFs`.
        if front_door {
            for child in mods
                .keys()
                .filter_map(|m| m.strip_prefix(&format!("{id}/")))
                .filter(|m| !m.contains('/'))
            {
                if !paths(&code, &format!("{child}::")).is_empty() {
                    edges.insert(format!("{id}/{child}"));
                }
            }
        }
        edges.remove(id);
        g.insert(id.clone(), edges);
    }
    g
}

/// A cycle of `g`, if it has one.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
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
    g.keys()
        .find_map(|m| visit(m, g, &mut Vec::new(), &mut done))
}

#[test]
fn no_modules_import_each_other_in_any_crate() {
    let mut seen = 0;
    for c in workspace() {
        let g = module_graph(&c.dir.join("src"));
        seen += g.len();
        if let Some(cycle) = find_cycle(&g) {
            panic!(
                "{}: modules importing each other: {}",
                c.name,
                cycle.join(" -> ")
            );
        }
    }
    assert!(seen >= 100, "only {seen} modules found");
}

/// The modules a folder shows outside it: those its front door declares
/// `pub` or `pub(crate)` (`pub(crate) mod sync;`), as `folder/name`.
fn shown_modules(src: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (id, path) in modules(src) {
        if path.file_name().is_none_or(|f| f != "mod.rs") {
            continue;
        }
        for line in code(&path).lines() {
            let rest = line
                .strip_prefix("pub(crate) mod ")
                .or_else(|| line.strip_prefix("pub mod "));
            if let Some(name) = rest.and_then(|r| r.strip_suffix(';')) {
                out.insert(format!("{id}/{}", name.trim()));
            }
        }
    }
    out
}

#[test]
fn a_folders_insides_are_imported_only_from_inside_it() {
    let mut wrong = Vec::new();
    for c in workspace() {
        let src = c.dir.join("src");
        let shown = shown_modules(&src);
        for (from, to) in &module_graph(&src) {
            for t in to {
                let Some((folder, _)) = t.rsplit_once('/') else {
                    continue;
                };
                let inside = from == folder || from.starts_with(&format!("{folder}/"));
                if !inside && !shown.contains(t) {
                    wrong.push(format!("{}: {from} imports {t}", c.name));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_cache_rooms_import_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../multiarc/src");
    let rank = |m: &str| {
        let room = m.split('/').next().unwrap_or(m);
        CACHE_ROOMS.iter().position(|r| *r == room)
    };
    let g = module_graph(&src);
    assert!(g.len() >= 40, "only {} modules found", g.len());
    let mut wrong = Vec::new();
    for (from, to) in &g {
        for t in to {
            if rank(t) > rank(from) {
                wrong.push(format!("{from} imports {t} (its room comes before)"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the rooms' order:\n{}",
        wrong.join("\n")
    );
    assert!(g["arc/evict"].contains("arc/core"), "{:?}", g["arc/evict"]);
    assert!(g["api/cache"].contains("arc"), "{:?}", g["api/cache"]);
}

#[test]
fn the_binarys_modules_import_the_libraries_not_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = module_graph(&src);
    assert!(g.contains_key("mount"), "{g:?}");
    for (from, to) in g {
        assert!(to.is_empty(), "{from} imports {to:?}");
    }
}

/// The graph sees imports: a check on a tree it cannot read would pass.
#[test]
fn the_graph_sees_the_modules_and_their_imports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let fuse = module_graph(&root.join("multiarc-fuse/src"));
    assert!(fuse["dir/fs"].contains("dir/data"), "{:?}", fuse["dir/fs"]);
    assert!(fuse["dir/fs"].contains("control"), "{:?}", fuse["dir/fs"]);
    assert!(fuse["dir"].contains("dir/fs"), "{:?}", fuse["dir"]);
    let store = module_graph(&root.join("multiarc-object-store/src"));
    assert!(store["store"].contains("state"), "{:?}", store["store"]);
    let shown = shown_modules(&root.join("multiarc/src"));
    assert!(shown.contains("mem/sync"), "{shown:?}");
    assert!(!shown.contains("mem/table"), "{shown:?}");
    let parsed = paths(
        "use super::{a, b::c};\nlet x = crate::arc::core::Core;",
        "super::",
    );
    assert_eq!(
        parsed,
        [vec!["a".to_string()], vec!["b".into(), "c".into()]]
    );
    let mut cyclic = BTreeMap::new();
    cyclic.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    cyclic.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert!(find_cycle(&cyclic).is_some());
}

/// The README's Layout table: `| `crates/NAME` | what | deps |` rows.
fn readme_layout() -> BTreeMap<String, BTreeSet<String>> {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let text = std::fs::read_to_string(readme).unwrap();
    let section = text
        .split("\n## Layout")
        .nth(1)
        .expect("README has a Layout section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter(|l| l.starts_with("| `crates/"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells[1]
                .trim_matches('`')
                .trim_start_matches("crates/")
                .to_string();
            let deps = cells[cells.len() - 2];
            let deps: BTreeSet<String> = if deps == "none" {
                BTreeSet::new()
            } else {
                deps.split(',')
                    .map(|d| d.trim().trim_matches('`').to_string())
                    .collect()
            };
            (name, deps)
        })
        .collect()
}

#[test]
fn the_readme_layout_lists_the_crates_and_their_dependencies() {
    let layout = readme_layout();
    let actual: BTreeMap<String, BTreeSet<String>> = workspace()
        .into_iter()
        .map(|c| (c.name, c.normal_workspace))
        .collect();
    let names = |m: &BTreeMap<String, BTreeSet<String>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&layout),
        names(&actual),
        "README Layout rows against the workspace"
    );
    for (name, deps) in &actual {
        assert_eq!(
            &layout[name], deps,
            "README Layout: the workspace dependencies of {name}"
        );
    }
}
