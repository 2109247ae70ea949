//! The library's modules form layers: no file imports, through `crate::` or `super::`, a file
//! that imports it back, except `ctx` and `tool` (a tool is called with the context that holds
//! it). A cycle is how a house stops being one floor per concept, so it fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The one cycle the layering allows.
const ALLOWED: [&str; 2] = ["src/ctx.rs", "src/tool/mod.rs"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable source tree") {
        let p = entry.expect("an entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file (`src/run/turn.rs` → `["run", "turn"]`).
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_start_matches("src/")
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code of a file before its unit tests, without line comments.
fn code(src: &str) -> String {
    let src = src.split("#[cfg(test)]\nmod tests {").next().unwrap_or(src);
    src.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path `crate::a::b…` or `super::a…` in `code`, grouped imports expanded one level.
fn paths(code: &str) -> Vec<(bool, Vec<String>)> {
    let mut out = Vec::new();
    for root in ["crate::", "super::"] {
        let mut rest = code;
        while let Some(i) = rest.find(root) {
            let before = rest[..i].chars().last();
            rest = &rest[i + root.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let is_crate = root == "crate::";
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let segs = item
                        .trim()
                        .split("::")
                        .map(|s| s.trim().to_owned())
                        .filter(|s| !s.is_empty() && s != "self" && s != "{")
                        .collect();
                    out.push((is_crate, segs));
                }
            } else {
                let segs = rest
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .next()
                    .unwrap_or("")
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
                out.push((is_crate, segs));
            }
        }
    }
    out
}

/// Every library file and the files it imports (`crate::…`, `super::…`), by path.
/// The library's package, where its `src/` is.
fn lib_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/subcontract")
}

fn import_edges() -> BTreeMap<String, BTreeSet<String>> {
    let root = &lib_root();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
    let mut sources = BTreeMap::new();
    for f in &files {
        let rel = f
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        // Unit-test files are not the library's layers.
        if rel.ends_with("tests.rs") || rel == "src/json/tape/suites.rs" {
            continue;
        }
        modules.insert(module_of(&rel), rel.clone());
        sources.insert(rel, code(&std::fs::read_to_string(f).expect("readable")));
    }
    let resolve = |segs: &[String]| -> Option<&String> {
        (0..=segs.len()).rev().find_map(|n| modules.get(&segs[..n]))
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, src) in &sources {
        let me = module_of(file);
        let parent = &me[..me.len().saturating_sub(1)];
        for (is_crate, segs) in paths(src) {
            let mut full: Vec<String> = if is_crate {
                Vec::new()
            } else {
                parent.to_vec()
            };
            full.extend(segs);
            if let Some(target) = resolve(&full) {
                if target != file && !full.is_empty() {
                    edges
                        .entry(file.clone())
                        .or_default()
                        .insert(target.clone());
                }
            }
        }
    }
    edges
}

#[test]
fn the_library_has_no_import_cycle_but_ctx_and_tool() {
    let edges = import_edges();
    // A file on a cycle reaches itself; report every such pair but the allowed one.
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(f) = stack.pop() {
            for t in edges.get(f.as_str()).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    stack.push(t.clone());
                }
            }
        }
        seen
    };
    let mut cycles = Vec::new();
    for (from, targets) in &edges {
        for to in targets {
            if reach(to).contains(from.as_str()) {
                let pair = [from.as_str(), to.as_str()];
                if !(ALLOWED.contains(&pair[0]) && ALLOWED.contains(&pair[1])) {
                    cycles.push(format!("{from} -> {to} -> … -> {from}"));
                }
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
    // The check sees the imports it guards: ctx and tool do use each other.
    assert!(edges["src/ctx.rs"].contains("src/tool/mod.rs"));
    assert!(edges["src/tool/mod.rs"].contains("src/ctx.rs"));
}

/// The layers `src/lib.rs` documents, lowest first: each a list of module paths
/// (`spec::core`), read from its comment (layers between `·`, modules between `,` or `⇄`,
/// parenthesised words left out).
fn documented_layers() -> Vec<Vec<Vec<String>>> {
    let lib = std::fs::read_to_string(lib_root().join("src/lib.rs")).expect("src/lib.rs");
    let mut text = String::new();
    let mut inside = false;
    for line in lib.lines() {
        let Some(c) = line.trim_start().strip_prefix("//") else {
            if inside {
                break;
            }
            continue;
        };
        if c.contains("The layers, lowest first") {
            inside = true;
            continue;
        }
        if inside && c.starts_with("  ") {
            text.push_str(c);
            text.push(' ');
        }
    }
    // Drop parentheticals: "spec (typed view, builder)" is the module `spec`.
    let mut plain = String::new();
    let mut depth = 0;
    for ch in text.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => plain.push(ch),
            _ => {}
        }
    }
    plain
        .split('·')
        .map(|layer| {
            layer
                .split([',', '⇄'])
                .map(|m| m.trim().split("::").map(str::to_owned).collect::<Vec<_>>())
                .filter(|m| !m[0].is_empty())
                .collect()
        })
        .collect()
}

#[test]
fn every_import_goes_to_the_same_or_a_lower_layer() {
    let layers = documented_layers();
    assert!(layers.len() >= 8, "the layer comment was read: {layers:?}");
    // A file's layer: that of the longest documented module path it lies in.
    let layer_of = |file: &str| -> Option<usize> {
        let m = module_of(file);
        let mut best: Option<(usize, usize)> = None;
        for (i, layer) in layers.iter().enumerate() {
            for path in layer {
                if m.len() >= path.len()
                    && m[..path.len()] == path[..]
                    && best.is_none_or(|(len, _)| path.len() > len)
                {
                    best = Some((path.len(), i));
                }
            }
        }
        best.map(|(_, i)| i)
    };
    let edges = import_edges();
    let mut wrong = Vec::new();
    for (from, targets) in &edges {
        let Some(lf) = layer_of(from) else {
            wrong.push(format!("{from} is on no documented layer"));
            continue;
        };
        for to in targets {
            let Some(lt) = layer_of(to) else {
                continue;
            };
            let allowed = ALLOWED.contains(&from.as_str()) && ALLOWED.contains(&to.as_str());
            if lt > lf && !allowed {
                wrong.push(format!("{from} (layer {lf}) imports {to} (layer {lt})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the documented layers:\n{}",
        wrong.join("\n")
    );
}
