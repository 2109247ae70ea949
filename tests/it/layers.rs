//! The library's modules form layers: no concept imports a concept that imports it back,
//! except `ctx` and `tool` (a tool is called with the context that holds it), and no file
//! imports a higher layer than its own. A cycle is how a house stops being one floor per
//! concept, so it fails here. Every way a path is written counts: `crate::…`, `super::…`,
//! `self::…`, a child module named bare (`use turn::…` beside `mod turn;`), and a re-export
//! (`crate::Ctx` is an import of `ctx.rs`, followed through `pub use` in `lib.rs`). Files of
//! one concept (a `mod.rs` and the files under it) may use each other.

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

/// Where a path starts: the crate root, the parent module, or this module (`self::`, or a
/// child module named bare: `use turn::Plan` beside `mod turn;`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    Crate,
    Super,
    Here,
}

/// The child modules a file declares (`mod turn;`, `pub(crate) mod json;`).
fn child_modules(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub(crate) mod ")
                .or(l.strip_prefix("pub mod "))
                .or(l.strip_prefix("mod "))?;
            let name = rest.strip_suffix(';')?;
            Some(name.trim().to_owned())
        })
        .collect()
}

/// Every path `crate::a::b…`, `super::a…`, `self::a…` or `child::a…` (a declared child
/// module) in `code`, grouped imports expanded one level. Re-exports (`pub use`) are left
/// out: they are a module's interface, followed where the item is used instead.
fn paths(code: &str) -> Vec<(From, Vec<String>)> {
    let code: String = code
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            !(l.starts_with("pub use ") || l.starts_with("pub(crate) use "))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let code = code.as_str();
    let mut out = Vec::new();
    let children: Vec<String> = child_modules(code)
        .into_iter()
        .map(|c| format!("{c}::"))
        .collect();
    let mut roots: Vec<(&str, From)> = vec![
        ("crate::", From::Crate),
        ("super::", From::Super),
        ("self::", From::Here),
    ];
    for c in &children {
        roots.push((c.as_str(), From::Here));
    }
    for (root, from) in roots {
        let mut rest = code;
        while let Some(i) = rest.find(root) {
            let before = rest[..i].chars().last();
            rest = &rest[i + root.len()..];
            // `x::` inside a longer path (`crate::x::`, `a_x::`) is not a root.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            // A child module's name only starts a path in this module's own code.
            let mut segs_prefix = Vec::new();
            if from == From::Here && root != "self::" {
                segs_prefix.push(root.trim_end_matches("::").to_owned());
            }
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let mut segs = segs_prefix.clone();
                    segs.extend(
                        item.trim()
                            .split("::")
                            .map(|s| s.trim().to_owned())
                            .filter(|s| !s.is_empty() && s != "self" && s != "{"),
                    );
                    out.push((from, segs));
                }
            } else {
                let mut segs = segs_prefix;
                segs.extend(
                    rest.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .next()
                        .unwrap_or("")
                        .split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
                out.push((from, segs));
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
    // A path written from `file`, as a full module path.
    let absolute = |file: &str, from: From, segs: Vec<String>| -> Vec<String> {
        let me = module_of(file);
        let mut full: Vec<String> = match from {
            From::Crate => Vec::new(),
            From::Super => me[..me.len().saturating_sub(1)].to_vec(),
            From::Here => me.clone(),
        };
        full.extend(segs);
        full
    };
    // Re-exports (`pub use ctx::{Ctx, CtxBuilder}` in `lib.rs`): `crate::Ctx` is an import
    // of `ctx.rs`, not of the crate root, so they are followed to where the item lives.
    let mut aliases: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    for (file, src) in &sources {
        let children = child_modules(src);
        // Statements, not lines: a group may span several (`pub use ctx::{` … `};`).
        for stmt in src.split(';') {
            let l = stmt.split_whitespace().collect::<Vec<_>>().join(" ");
            let l = l.replace("{ ", "{").replace(", }", "}").replace(" }", "}");
            let Some(at) = l.find("pub use ").or(l.find("pub(crate) use ")) else {
                continue;
            };
            let l = &l[at..];
            let Some(rest) = l
                .strip_prefix("pub use ")
                .or(l.strip_prefix("pub(crate) use "))
            else {
                continue;
            };
            let (from, rest) = if let Some(r) = rest.strip_prefix("crate::") {
                (From::Crate, r)
            } else if let Some(r) = rest.strip_prefix("super::") {
                (From::Super, r)
            } else if let Some(r) = rest.strip_prefix("self::") {
                (From::Here, r)
            } else if children.iter().any(|c| rest.starts_with(&format!("{c}::"))) {
                (From::Here, rest)
            } else {
                continue; // another crate's item
            };
            let rest = rest.trim_end_matches(';');
            let (base, names): (&str, Vec<&str>) = match rest.split_once("::{") {
                Some((base, group)) => (base, group.trim_end_matches('}').split(',').collect()),
                None => match rest.rsplit_once("::") {
                    Some((base, name)) => (base, vec![name]),
                    None => continue,
                },
            };
            let me = module_of(file);
            for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
                let (item, shown) = match name.split_once(" as ") {
                    Some((item, shown)) => (item.trim(), shown.trim()),
                    None => (name, name),
                };
                let mut target =
                    absolute(file, from, base.split("::").map(str::to_owned).collect());
                target.extend(item.split("::").map(str::to_owned));
                let mut alias = me.clone();
                alias.push(shown.to_owned());
                aliases.insert(alias, target);
            }
        }
    }
    let resolve = |segs: &[String]| -> Option<&String> {
        // Through at most a few re-exports (a re-export of a re-export), longest prefix first.
        let mut segs = segs.to_vec();
        for _ in 0..4 {
            let hop = (1..=segs.len()).rev().find_map(|n| {
                aliases.get(&segs[..n]).map(|to| {
                    let mut t = to.clone();
                    t.extend_from_slice(&segs[n..]);
                    t
                })
            });
            match hop {
                Some(t) if t != segs => segs = t,
                _ => break,
            }
        }
        (0..=segs.len()).rev().find_map(|n| modules.get(&segs[..n]))
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, src) in &sources {
        for (from, segs) in paths(src) {
            let full = absolute(file, from, segs);
            if let Some(target) = resolve(&full) {
                // The crate root names the modules; it is no concept of its own.
                if target != file
                    && !full.is_empty()
                    && target != "src/lib.rs"
                    && file != "src/lib.rs"
                {
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

/// The concept a file belongs to: the longest module path the layer comment of `lib.rs`
/// names that holds it (`spec::core`, `run`), or its top-level module. Files of one concept
/// may use each other (a `mod.rs` and the files under it); concepts may not.
fn concept_of(file: &str, layers: &[Vec<Vec<String>>]) -> String {
    let m = module_of(file);
    let best = layers
        .iter()
        .flatten()
        .filter(|p| m.len() >= p.len() && m[..p.len()] == p[..])
        .max_by_key(|p| p.len());
    match best {
        Some(p) => p.join("::"),
        None => m.first().cloned().unwrap_or_default(),
    }
}

#[test]
fn the_library_has_no_import_cycle_but_ctx_and_tool() {
    let layers = documented_layers();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in import_edges() {
        for to in targets {
            let (a, b) = (concept_of(&from, &layers), concept_of(&to, &layers));
            if a != b {
                edges.entry(a).or_default().insert(b);
            }
        }
    }
    // A concept on a cycle reaches itself; report every such pair but the allowed one.
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
                if !(pair.contains(&"ctx") && pair.contains(&"tool")) {
                    cycles.push(format!("{from} -> {to} -> … -> {from}"));
                }
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
    // The check sees the imports it guards: ctx and tool do use each other, `crate::Ctx`
    // (a re-export at the root) counts as an import of `ctx`, and a bare child path (`use
    // turn::…` beside `mod turn;`) as one of that child.
    assert!(edges["ctx"].contains("tool"));
    assert!(edges["tool"].contains("ctx"));
    let files = import_edges();
    // `use crate::{…, Ctx, …}` (a re-export), and `use turn::turns;` beside `mod turn;`.
    assert!(files["src/host.rs"].contains("src/ctx.rs"));
    assert!(files["src/run/mod.rs"].contains("src/run/turn.rs"));
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
