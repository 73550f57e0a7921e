//! The modules of crates/ebb depend on each other one way only (DESIGN.md:
//! "no import cycle"): this test reads the sources, takes every
//! `crate::<module>` a top-level module names outside its unit tests, and
//! fails on a cycle among top-level modules, printing it.
//!
//! One submodule is a node of its own: `stream::msg`, the message
//! interface both the stream and the muxes of either side speak. It
//! imports only the HTTP/1 codec, so a mux may use it while the stream
//! uses the mux (stream -> mux -> stream::msg).
//!
//! And the layers DESIGN.md names: `conn` and `mux` import no service
//! (`serve`, `stats`, `metrics`) and not the stream (except its message
//! interface).
//!
//! Test code (`#[cfg(test)]` onward, and `tests.rs` files) is left out:
//! a test may reach anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Submodules that are graph nodes of their own.
const OWN_NODES: [&str; 1] = ["stream::msg"];

/// The node a path after `crate::` (or a source file's module path)
/// names: its first segment, or one of [`OWN_NODES`] it starts with.
fn node_of(path: &str) -> String {
    for n in OWN_NODES {
        if path == n || path.starts_with(&format!("{n}::")) {
            return n.to_string();
        }
    }
    path.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The module names after `crate::` in `src`, including those inside
/// `use crate::{a, b::c}` groups.
fn deps_of(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let word = |s: &str| -> String {
        let p: String = s
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        node_of(&p)
    };
    let mut rest = src;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let w = word(part.trim());
                if !w.is_empty() {
                    out.insert(w);
                }
            }
        } else {
            let w = word(rest);
            if !w.is_empty() {
                out.insert(w);
            }
        }
    }
    out
}

/// `src` less its test code: an inline `#[cfg(test)] mod x { ... }` (by
/// convention the last item, so everything from it on), and the
/// declaration line of a test-only file module (`#[cfg(test)] mod x;`).
fn without_test_code(src: &str) -> String {
    let mut out = String::new();
    let mut lines = src.lines();
    while let Some(l) = lines.next() {
        if l.trim() != "#[cfg(test)]" {
            out.push_str(l);
            out.push('\n');
            continue;
        }
        match lines.next() {
            Some(next) if next.trim_end().ends_with(';') => {}
            _ => break,
        }
    }
    out
}

/// Files of modules declared `#[cfg(test)] mod name;` (test helpers).
fn test_only_files(files: &[std::path::PathBuf]) -> BTreeSet<std::path::PathBuf> {
    let mut out = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        let mut lines = text.lines();
        while let Some(l) = lines.next() {
            if l.trim() != "#[cfg(test)]" {
                continue;
            }
            let Some(next) = lines.next() else { break };
            let Some(decl) = next.trim().strip_suffix(';') else {
                continue;
            };
            let Some(name) = decl.split_whitespace().last() else {
                continue;
            };
            // The module's file sits beside `f` (for `mod.rs`/`lib.rs`) or
            // in the directory named after `f`.
            let dir = match f.file_stem().and_then(|s| s.to_str()) {
                Some("mod") | Some("lib") => f.parent().unwrap().to_path_buf(),
                Some(stem) => f.parent().unwrap().join(stem),
                None => continue,
            };
            out.insert(dir.join(format!("{name}.rs")));
            out.insert(dir.join(name).join("mod.rs"));
        }
    }
    out
}

/// The top-level module graph: module -> modules it names.
fn graph(src_dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src_dir, &mut files);
    let test_only = test_only_files(&files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src_dir).unwrap();
        let first = rel.iter().next().unwrap().to_string_lossy().into_owned();
        if first == "lib.rs" || first == "bin" || rel.ends_with("tests.rs") {
            continue;
        }
        let modpath = rel
            .with_extension("")
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .filter(|c| c != "mod")
            .collect::<Vec<_>>()
            .join("::");
        let top = node_of(&modpath);
        if test_only.contains(&f) {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = without_test_code(&text);
        let mut d = deps_of(&code);
        d.remove(&top);
        g.entry(top).or_default().extend(d);
    }
    // Names that are not modules (macros, items re-exported at the root).
    let mods: BTreeSet<String> = g.keys().cloned().collect();
    for d in g.values_mut() {
        d.retain(|m| mods.contains(m));
    }
    g
}

/// A cycle in `g`, if any, as the list of modules along it.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // 0 unvisited, 1 on the current path, 2 done.
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            match state.get(d.as_str()).copied().unwrap_or(0) {
                1 => {
                    let i = path.iter().position(|p| p == d).unwrap();
                    let mut c = path[i..].to_vec();
                    c.push(d.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(d, g, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_import_cycle_among_modules() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    assert!(
        g.contains_key("mux") && g.contains_key("stream") && g.contains_key("stream::msg"),
        "{g:?}"
    );
    if let Some(c) = find_cycle(&g) {
        panic!("import cycle: {}", c.join(" -> "));
    }
}

#[test]
fn conn_and_mux_import_no_service_and_not_the_stream() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    let banned = ["serve", "stats", "metrics", "stream"];
    for layer in ["conn", "mux"] {
        for d in g.get(layer).into_iter().flatten() {
            assert!(
                !banned.contains(&d.as_str()),
                "{layer} imports {d} (DESIGN.md: conn and mux import no service, and reach the stream only through stream::msg)"
            );
        }
    }
    // The message interface sits below both.
    for d in g.get("stream::msg").into_iter().flatten() {
        assert!(
            !["stream", "mux", "conn"].contains(&d.as_str()),
            "stream::msg imports {d}"
        );
    }
}

#[test]
fn the_checker_sees_a_cycle() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let edge = |g: &mut BTreeMap<String, BTreeSet<String>>, a: &str, b: &str| {
        g.entry(a.into()).or_default().insert(b.into());
        g.entry(b.into()).or_default();
    };
    edge(&mut g, "conn", "stats");
    edge(&mut g, "stats", "worker");
    assert_eq!(find_cycle(&g), None);
    edge(&mut g, "worker", "conn");
    assert_eq!(
        find_cycle(&g).unwrap(),
        ["conn", "stats", "worker", "conn"].map(String::from)
    );
    let d = deps_of("use crate::{a, b::c};\nfn f() { crate::d::e(); }");
    assert_eq!(d, ["a", "b", "d"].map(String::from).into());
    let d = deps_of("use crate::stream::msg::Fields;\nuse crate::{stream::msg, stream::Stream};");
    assert_eq!(d, ["stream", "stream::msg"].map(String::from).into());
}
