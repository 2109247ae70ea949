//! Grounded outputs: a contract on where a value came from, not only on its shape.
//!
//! An output property marked `x-grounded` must be backed by the run's **evidence**: its input
//! and the content of every tool result it received, kept in the pieces it was shown in (a
//! `read_file` range, a `grep` line, a text block); of a sub-agent's output, only the values
//! its own contract grounded, with the sources it found them in. Never the system prompt, the
//! model's own words, or a tool's own presentation (the line numbers of `read_file`, the
//! `path:line:` prefixes of `grep`, notes).
//!
//! - `"text"`: the value occurs as whole tokens within one piece of evidence, compared after
//!   NFKC, case folding and whitespace collapsing (`0.7` is not in `0.7.3`, `tide` not in
//!   `tidepool`); an empty value grounds nothing. A version is text;
//! - `"source"`: the value is the id of a source the run consulted (a path `read_file` showed
//!   or in which `grep` showed a match, an MCP resource, a source a tool's result names),
//!   optionally with a line anchor (`src/lib.rs:42`, `src/lib.rs:40-45`, `src/lib.rs#L42`),
//!   which is not checked;
//! - `"number"`: the value is, exactly (as decimals, never floats), a number written whole in
//!   the evidence (`14`, `14.0` and `1.4e1` are one number; `140` holds no `14`; `1,000` is
//!   1000).
//!
//! In an object with a `"source"` property and a `"text"` property, the text must occur in the
//! content of (one of) the source(s) that object cites.
//!
//! The check runs after the schema's, in every output mode; an ungrounded value is a violation
//! repaired like any other (the repair quotes the shortest lines read that mention the
//! property), and the parent never sees it.

mod evidence;
mod text;

use serde_json::Value;

pub(crate) use evidence::Body;
pub use evidence::Evidence;
pub use evidence::Provenance;

use crate::contract::Violation;
use crate::json::pointer::{child, parse_local_ref, resolve};

/// The extension keyword that marks a grounded value.
pub const KEYWORD: &str = "x-grounded";

/// What a grounded value must be backed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroundKind {
    /// The value occurs in the evidence.
    Text,
    /// The value is the id of a source the run consulted.
    Source,
    /// The value occurs in the evidence as a number.
    Number,
}

impl GroundKind {
    /// The kind's name in a schema.
    pub fn as_str(self) -> &'static str {
        match self {
            GroundKind::Text => "text",
            GroundKind::Source => "source",
            GroundKind::Number => "number",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "text" => Some(GroundKind::Text),
            "source" => Some(GroundKind::Source),
            "number" => Some(GroundKind::Number),
            _ => None,
        }
    }
}

/// One step from a value to a value inside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Seg {
    Prop(String),
    /// Every item of an array.
    Items,
    /// One item of an array (`prefixItems`).
    Index(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    path: Vec<Seg>,
    kind: GroundKind,
    /// What read lines that may hold the value mention, in order: the property's name, the
    /// parts of that name, then words of its description (normalized tokens).
    words: Vec<String>,
}

/// A value a sub-agent's contract grounded, as it travels up to its parent (who reads the
/// sub-agent's output as a tool result): the value and the sources it was found in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Carried {
    pub(crate) kind: GroundKind,
    /// A text as written, a number as the output holds it, a source's id.
    pub(crate) value: String,
    /// The consulted sources whose pieces hold it (none for a source, or for a value found
    /// only in the input or in results that name no source).
    pub(crate) sources: Vec<String>,
}

/// What an accepted output's grounded values carry up to a parent: each value with its
/// sources, and the pointers of those found only in the run's input (which its caller wrote).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CarriedUp {
    pub(crate) values: Vec<Carried>,
    pub(crate) from_input: Vec<String>,
}

/// An object whose text properties must occur in the sources its source properties name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pair {
    object: Vec<Seg>,
    sources: Vec<String>,
    texts: Vec<String>,
}

/// A problem with a schema's `x-grounded` keywords, at a JSON Pointer into the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroundingError {
    /// Where, in the schema.
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

/// Where an output schema grounds values: compiled once per spec. A spec that grounds
/// nothing has none, and its outputs pay nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grounding {
    rules: Vec<Rule>,
    pairs: Vec<Pair>,
    /// Where the keyword stands in the schema (a JSON Pointer to it), with its kind.
    marks: Vec<(String, GroundKind)>,
}

/// Deeper than this the walk stops (a schema is bounded in depth by its own analysis too).
const MAX_DEPTH: usize = 64;
/// Subschemas the walk visits at most, `$ref`s expanded where they are used.
const MAX_VISITS: usize = 100_000;

impl Grounding {
    /// The grounding rules of an output schema: `Ok(None)` when it grounds nothing, every
    /// misuse of the keyword otherwise.
    pub fn of_schema(schema: &Value) -> Result<Option<Grounding>, Vec<GroundingError>> {
        let mut w = Walk {
            root: schema,
            g: Grounding::default(),
            errors: Vec::new(),
            refs: Vec::new(),
            visits: 0,
            seen: Default::default(),
        };
        w.walk(schema, "", &mut Vec::new(), 0);
        if w.visits > MAX_VISITS {
            // `$ref`s that fan out can make a small schema a huge tree; one that grounds
            // nothing loses nothing by not being walked whole, one that does is refused.
            if !crate::json::to_compact_string(schema).contains(KEYWORD) {
                return Ok(None);
            }
            return Err(vec![GroundingError {
                pointer: String::new(),
                message: format!(
                    "the output schema expands to more than {MAX_VISITS} subschemas through its `$ref`s, too many to find every `{KEYWORD}` value"
                ),
            }]);
        }
        // A keyword the walk did not reach (under `additionalProperties`, `if`, `not`, a
        // remote `$ref`, …) would check nothing: refused, never ignored.
        let mut all = Vec::new();
        keyword_places(schema, String::new(), 0, &mut all);
        for at in all {
            let reached =
                w.g.marks.iter().any(|(p, _)| *p == at) || w.errors.iter().any(|e| e.pointer == at);
            if !reached {
                w.error(
                    at,
                    format!("`{KEYWORD}` here is never checked: it must sit on a value reached through `properties`, `items`, `prefixItems`, `anyOf`, `oneOf`, `allOf` or a local `$ref`"),
                );
            }
        }
        if !w.errors.is_empty() {
            w.errors.sort_by(|a, b| a.pointer.cmp(&b.pointer));
            w.errors.dedup();
            return Err(w.errors);
        }
        Ok((!w.g.rules.is_empty()).then_some(w.g))
    }

    /// Each place the schema uses the keyword (a JSON Pointer to it), with its kind.
    pub fn marks(&self) -> impl Iterator<Item = (&str, GroundKind)> {
        self.marks.iter().map(|(p, k)| (p.as_str(), *k))
    }

    /// Whether some value is grounded as this kind.
    pub fn grounds(&self, kind: GroundKind) -> bool {
        self.rules.iter().any(|r| r.kind == kind)
    }

    /// Checks `v` (already valid against its schema) against `ev`: every ungrounded value,
    /// in pointer order.
    pub fn check(&self, v: &Value, ev: &Evidence) -> Result<(), Vec<Ungrounded>> {
        let mut out = Vec::new();
        // Each distinct value is looked for once: an output of many short items repeated
        // does not scan the evidence once per item.
        let mut seen: std::collections::HashMap<(GroundKind, String), Option<Ungrounded>> =
            Default::default();
        for rule in &self.rules {
            each_at(v, &rule.path, String::new(), &mut |ptr, val| {
                let key = (rule.kind, val.to_string());
                let verdict = match seen.get(&key) {
                    Some(verdict) => verdict.as_ref().map(|prev| prev.at(ptr)),
                    None => {
                        let u = check_value(rule.kind, ptr, val, ev);
                        seen.insert(key, u.clone());
                        u
                    }
                };
                // The lines a repair points at are the rule's own: its property's name.
                out.extend(verdict.map(|u| u.pointing(rule, ev)));
            });
        }
        for pair in &self.pairs {
            each_at(v, &pair.object, String::new(), &mut |ptr, obj| {
                check_pair(pair, ptr, obj, ev, &mut out);
            });
        }
        if out.is_empty() {
            Ok(())
        } else {
            out.sort_by(|a, b| a.violation.path.cmp(&b.violation.path));
            out.dedup_by(|a, b| a.violation == b.violation);
            Err(out)
        }
    }

    /// What `v`'s grounded values (checked against `ev`) carry up to a parent that reads `v`
    /// as a tool result: each value with the sources it was found in, and the pointers of
    /// those found only in the run's input.
    pub(crate) fn carried(&self, v: &Value, ev: &Evidence) -> CarriedUp {
        let mut up = CarriedUp::default();
        for rule in &self.rules {
            each_at(v, &rule.path, String::new(), &mut |ptr, val| {
                let (found, value) = match (rule.kind, val) {
                    (GroundKind::Source, Value::String(s)) => {
                        up.values.push(Carried {
                            kind: GroundKind::Source,
                            value: s.clone(),
                            sources: Vec::new(),
                        });
                        return;
                    }
                    (GroundKind::Text, Value::String(s)) => {
                        let Some(n) = text::needle(s) else { return };
                        (ev.text_found(&n), s.clone())
                    }
                    (GroundKind::Number, val) => {
                        let Some(k) = number_of(val) else { return };
                        let Some(f) = ev.number_found(&k) else { return };
                        let shown = match val {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        (f, shown)
                    }
                    _ => return,
                };
                if found.input && !found.read {
                    up.from_input.push(if ptr.is_empty() {
                        "/".into()
                    } else {
                        ptr.to_owned()
                    });
                }
                if !found.input && !found.read {
                    return;
                }
                let sources = found
                    .sources
                    .iter()
                    .filter_map(|&i| ev.source_name(i).map(str::to_owned))
                    .collect();
                up.values.push(Carried {
                    kind: rule.kind,
                    value,
                    sources,
                });
            });
        }
        up.from_input.sort();
        up.from_input.dedup();
        up
    }

    /// Every word a repair may look for in read lines, over all grounded values.
    pub(crate) fn mention_words(&self) -> impl Iterator<Item = &str> {
        self.rules
            .iter()
            .filter(|r| r.kind != GroundKind::Source)
            .flat_map(|r| r.words.iter().map(String::as_str))
    }

    /// The values of `v` grounded as sources, as the ids a parent may cite: a sub-agent's
    /// validated output names them, so its parent has consulted them through it.
    pub fn source_values(&self, v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for rule in self.rules.iter().filter(|r| r.kind == GroundKind::Source) {
            each_at(v, &rule.path, String::new(), &mut |_, val| {
                if let Value::String(s) = val {
                    out.push(s.clone());
                }
            });
        }
        out
    }
}

/// Every place in `schema` that holds the keyword, as a JSON Pointer to it (data such as
/// `enum`, `const`, `default` and `examples` is not searched).
fn keyword_places(schema: &Value, ptr: String, depth: usize, out: &mut Vec<String>) {
    if depth > 2 * MAX_DEPTH {
        return;
    }
    match schema {
        Value::Object(m) => {
            for (k, v) in m {
                if k == KEYWORD {
                    out.push(child(&ptr, k));
                } else if !matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                    keyword_places(v, child(&ptr, k), depth + 1, out);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                keyword_places(v, format!("{ptr}/{i}"), depth + 1, out);
            }
        }
        _ => {}
    }
}

/// Calls `f` with every value at `path` inside `v`, and its pointer.
fn each_at(v: &Value, path: &[Seg], ptr: String, f: &mut dyn FnMut(&str, &Value)) {
    let Some((first, rest)) = path.split_first() else {
        if !v.is_null() {
            f(&ptr, v);
        }
        return;
    };
    match (first, v) {
        (Seg::Prop(k), Value::Object(m)) => {
            if let Some(x) = m.get(k) {
                each_at(x, rest, child(&ptr, k), f);
            }
        }
        (Seg::Items, Value::Array(items)) => {
            for (i, x) in items.iter().enumerate() {
                each_at(x, rest, format!("{ptr}/{i}"), f);
            }
        }
        (Seg::Index(i), Value::Array(items)) => {
            if let Some(x) = items.get(*i) {
                each_at(x, rest, format!("{ptr}/{i}"), f);
            }
        }
        _ => {}
    }
}

/// An ungrounded value: the violation that may travel up (where and why, never the value),
/// and the line the sub-agent reads, which shows the value it sent.
#[derive(Debug, Clone)]
pub struct Ungrounded {
    pub(crate) violation: Violation,
    pub(crate) repair: String,
    /// Whether the value occurs in nothing read (a repair may then point at lines read).
    nowhere: bool,
}

/// Lines of what was read a repair quotes at most per value.
const POINTER_LINES: usize = 3;

impl Ungrounded {
    /// The same verdict for the same value at another pointer.
    fn at(&self, ptr: &str) -> Ungrounded {
        let shown = if ptr.is_empty() { "/" } else { ptr };
        // The repair line starts with the pointer in backticks.
        let rest = self
            .repair
            .get(1..)
            .and_then(|r| r.find('`').map(|i| &r[i + 1..]))
            .unwrap_or("");
        Ungrounded {
            violation: Violation {
                path: ptr.to_owned(),
                message: self.violation.message.clone(),
            },
            repair: format!("`{shown}`{rest}"),
            nowhere: self.nowhere,
        }
    }

    /// The same verdict with, for a value found nowhere, the shortest lines read that
    /// mention the rule's property (its name, or a word of its description), so a model that
    /// read the right file but wrote a remembered value can copy the right one.
    fn pointing(mut self, rule: &Rule, ev: &Evidence) -> Ungrounded {
        if !self.nowhere {
            return self;
        }
        let lines = ev.mentions(&rule.words, POINTER_LINES);
        if lines.is_empty() {
            return self;
        }
        self.repair
            .push_str(". Lines this run read that may hold it:");
        for (src, line) in lines {
            self.repair.push_str("\n    ");
            if let Some(src) = src {
                self.repair.push_str(src);
                self.repair.push_str(": ");
            }
            self.repair.push_str(line);
        }
        self
    }

    /// Where and why, never the value: what may reach a parent, a trace or a log.
    pub fn violation(&self) -> &Violation {
        &self.violation
    }

    /// The line the sub-agent is sent: the pointer, its value and what to do.
    pub fn repair(&self) -> &str {
        &self.repair
    }
}

/// The value as a repair message shows it: JSON, cut to a readable length.
fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 80 {
        s
    } else {
        format!("{}…", s.chars().take(80).collect::<String>())
    }
}

fn ungrounded(ptr: &str, val: &Value, why: &str, what_to_do: &str) -> Ungrounded {
    let at = if ptr.is_empty() { "/" } else { ptr };
    Ungrounded {
        violation: Violation {
            path: ptr.to_owned(),
            message: why.to_owned(),
        },
        repair: format!("`{at}` = {} {why}; {what_to_do}", shown(val)),
        nowhere: false,
    }
}

/// [`ungrounded`] for a value found in nothing read.
fn nowhere(ptr: &str, val: &Value, why: &str, what_to_do: &str) -> Ungrounded {
    Ungrounded {
        nowhere: true,
        ..ungrounded(ptr, val, why, what_to_do)
    }
}

/// The number a value grounded as one is: a JSON number as the output holds it, or a string
/// that is one number, written whole.
fn number_of(val: &Value) -> Option<text::NumKey> {
    match val {
        Value::Number(n) => text::json_number(n),
        Value::String(s) => text::parse_number(&text::normalize(s)),
        _ => None,
    }
}

const READ_IT: &str = "read the file that holds it, or correct the value";

fn check_value(kind: GroundKind, ptr: &str, val: &Value, ev: &Evidence) -> Option<Ungrounded> {
    match kind {
        GroundKind::Text => {
            let s = match val {
                Value::String(s) => std::borrow::Cow::Borrowed(s.as_str()),
                other => std::borrow::Cow::Owned(other.to_string()),
            };
            match text::needle(&s) {
                None => Some(ungrounded(
                    ptr,
                    val,
                    "is empty or blank, and claims nothing that could be grounded",
                    "write the text as it occurs in what was read",
                )),
                Some(n) if ev.has_text(&n) => None,
                Some(_) => Some(nowhere(
                    ptr,
                    val,
                    "occurs in nothing this run has read",
                    READ_IT,
                )),
            }
        }
        GroundKind::Number => match number_of(val) {
            None => Some(ungrounded(
                ptr,
                val,
                "is not a number, and only a number can be grounded as one",
                "write the number as it occurs in what was read",
            )),
            Some(n) if ev.has_number(&n) => None,
            Some(_) => Some(nowhere(
                ptr,
                val,
                "occurs as a number in nothing this run has read",
                "read the file that holds it, or correct the value (a value computed from what was read, such as a sum or a converted unit, cannot be grounded: give the number as it is written)",
            )),
        },
        GroundKind::Source => {
            let Value::String(s) = val else {
                return Some(ungrounded(
                    ptr,
                    val,
                    "is not a source id",
                    "cite a source by its id or path",
                ));
            };
            match evidence::source_key(s) {
                None => Some(ungrounded(
                    ptr,
                    val,
                    "names no source: a path with `..` or an empty id is never a source",
                    "cite a file by the path it was read under",
                )),
                Some(k) if ev.has_source(&k) => None,
                // A citation may point into the source (`src/lib.rs:42`, `…#L40-L45`): it
                // names that source; the anchor itself is not checked.
                Some(k) if evidence::without_anchor(&k).is_some_and(|b| ev.has_source(b)) => None,
                Some(_) => {
                    let seen = ev.consulted_sources();
                    let listed = if seen.is_empty() {
                        "nothing has been read or searched yet; read the source first".to_owned()
                    } else {
                        let mut l: Vec<String> =
                            seen.iter().take(10).map(|s| format!("`{s}`")).collect();
                        if seen.len() > 10 {
                            l.push(format!("and {} more", seen.len() - 10));
                        }
                        format!(
                            "cite only sources read or searched in this run ({}), or read it first",
                            l.join(", ")
                        )
                    };
                    Some(ungrounded(
                        ptr,
                        val,
                        "names no source this run consulted",
                        &listed,
                    ))
                }
            }
        }
    }
}

fn check_pair(pair: &Pair, ptr: &str, obj: &Value, ev: &Evidence, out: &mut Vec<Ungrounded>) {
    let Value::Object(m) = obj else { return };
    let mut cited = Vec::new();
    for p in &pair.sources {
        match m.get(p) {
            Some(Value::String(s)) => cited.push(s.as_str()),
            Some(Value::Array(a)) => cited.extend(a.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    // Only sources that were consulted: an unconsulted one is reported on its own.
    let keys: Vec<String> = cited
        .iter()
        .filter_map(|s| evidence::source_key(s))
        .filter_map(|k| {
            if ev.has_source(&k) {
                Some(k)
            } else {
                evidence::without_anchor(&k)
                    .filter(|b| ev.has_source(b))
                    .map(str::to_owned)
            }
        })
        .collect();
    if keys.is_empty() {
        return;
    }
    for t in &pair.texts {
        let texts: Vec<(String, &Value)> = match m.get(t) {
            Some(v @ Value::String(_)) => vec![(child(ptr, t), v)],
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_string())
                .map(|(i, v)| (format!("{}/{i}", child(ptr, t)), v))
                .collect(),
            _ => Vec::new(),
        };
        for (at, v) in texts {
            // An empty one is reported by its own rule.
            let Some(needle) = text::needle(v.as_str().unwrap_or_default()) else {
                continue;
            };
            // Text found nowhere is reported by its own rule.
            if !ev.has_text(&needle) || keys.iter().any(|k| ev.has_text_in(k, &needle)) {
                continue;
            }
            let names: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
            out.push(ungrounded(
                &at,
                v,
                "does not occur in the source this object cites",
                &format!(
                    "quote {} exactly, or cite the source the text comes from",
                    names.join(" or ")
                ),
            ));
        }
    }
}

/// Words too common to point at a line: a description's words are looked for only past these.
const STOPWORDS: &[&str] = &[
    "about", "after", "also", "always", "been", "before", "each", "either", "exactly", "file",
    "files", "from", "given", "have", "into", "must", "only", "other", "same", "should", "some",
    "than", "that", "their", "them", "then", "there", "these", "they", "this", "those", "used",
    "value", "values", "what", "when", "where", "which", "will", "with", "written", "your",
];

/// A description's words looked for at most.
const DESCRIPTION_WORDS: usize = 6;

/// The words a read line that may hold the value at `path` mentions: the property's name
/// (the last one on the path), its parts (`crate_version`: `crate`, `version`; `maxRetries`:
/// `max`, `retries`), then words of the description of `s`.
fn words_of(path: &[Seg], s: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let add = |w: String, out: &mut Vec<String>| {
        if !w.is_empty() && !out.contains(&w) {
            out.push(w);
        }
    };
    if let Some(name) = path.iter().rev().find_map(|s| match s {
        Seg::Prop(p) => Some(p.as_str()),
        _ => None,
    }) {
        let norm = text::normalize(name);
        text::tokens(&norm, |r| add(norm[r].to_owned(), &mut out));
        // Split at `_`, `-`, `.` and where a lower-case letter meets an upper-case one.
        let mut part = String::new();
        let mut prev_lower = false;
        for c in name.chars() {
            let split = matches!(c, '_' | '-' | '.' | ' ') || (c.is_uppercase() && prev_lower);
            if split && !part.is_empty() {
                add(text::normalize(&part), &mut out);
                part.clear();
            }
            if !matches!(c, '_' | '-' | '.' | ' ') {
                part.push(c);
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
        }
        if part.len() < name.len() {
            add(text::normalize(&part), &mut out);
        }
    }
    if let Some(d) = s.get("description").and_then(Value::as_str) {
        let norm = text::normalize(d);
        let mut n = 0;
        text::tokens(&norm, |r| {
            let w = &norm[r];
            if n < DESCRIPTION_WORDS
                && w.chars().count() >= 4
                && w.chars().all(char::is_alphabetic)
                && !STOPWORDS.contains(&w)
            {
                n += 1;
                add(w.to_owned(), &mut out);
            }
        });
    }
    out
}

/// The walk over an output schema that finds its grounded values.
struct Walk<'a> {
    root: &'a Value,
    g: Grounding,
    errors: Vec<GroundingError>,
    /// `$ref` targets being expanded: a recursive one is not expanded again.
    refs: Vec<String>,
    /// Subschemas visited so far; past [`MAX_VISITS`] the walk stops.
    visits: usize,
    /// The rules found so far, to add each once.
    seen: std::collections::HashSet<(Vec<Seg>, GroundKind)>,
}

/// Whether a subschema's values are fixed by the contract.
fn typed_enum(s: &Value) -> bool {
    s.get("enum").is_some() || s.get("const").is_some()
}

/// The JSON types a subschema admits (from `type`), `None` if it does not say.
fn types(s: &Value) -> Option<Vec<&str>> {
    match s.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(a) => Some(a.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

impl<'a> Walk<'a> {
    /// `s` with its local `$ref` followed (once; a recursive one is left as is).
    fn deref(&self, s: &'a Value) -> &'a Value {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) if !self.refs.iter().any(|x| x == r) => parse_local_ref(r)
                .and_then(|t| resolve(self.root, &t))
                .unwrap_or(s),
            _ => s,
        }
    }

    /// The kind `s` (followed through a `$ref`) grounds its values or its items as.
    fn kind_of(&self, s: &'a Value) -> Option<GroundKind> {
        // The keyword beside a `$ref`, or on what it refers to.
        let own = [s, self.deref(s)].into_iter().find_map(|x| {
            x.get(KEYWORD)
                .and_then(Value::as_str)
                .and_then(GroundKind::parse)
        });
        let s = self.deref(s);
        own.or_else(|| {
            let items = s.get("items")?;
            self.deref(items)
                .get(KEYWORD)
                .and_then(Value::as_str)
                .and_then(GroundKind::parse)
        })
        .or_else(|| {
            // `Option<T>` is `anyOf: [T, null]`: the kind of its one non-null branch.
            ["anyOf", "oneOf"].iter().find_map(|k| {
                let branches = s.get(*k)?.as_array()?;
                let mut kinds = branches
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                    .map(|b| self.kind_of(b));
                match (kinds.next(), kinds.next()) {
                    (Some(k), None) => k,
                    _ => None,
                }
            })
        })
    }

    fn rule(&mut self, path: Vec<Seg>, kind: GroundKind, at: String, s: &Value) {
        if self.seen.insert((path.clone(), kind)) {
            let words = words_of(&path, s);
            self.g.rules.push(Rule { path, kind, words });
        }
        if !self.g.marks.iter().any(|(p, k)| *p == at && *k == kind) {
            self.g.marks.push((at, kind));
        }
    }

    fn error(&mut self, pointer: String, message: String) {
        self.errors.push(GroundingError { pointer, message });
    }

    fn walk(&mut self, s: &'a Value, ptr: &str, path: &mut Vec<Seg>, depth: usize) {
        let Value::Object(map) = s else { return };
        self.visits += 1;
        if depth > MAX_DEPTH || self.visits > MAX_VISITS {
            return;
        }
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            let target = parse_local_ref(r).and_then(|t| resolve(self.root, &t));
            if !self.refs.iter().any(|x| x == r) {
                if let Some(target) = target {
                    self.refs.push(r.to_owned());
                    let at = r.trim_start_matches('#').to_owned();
                    self.walk(target, &at, path, depth + 1);
                    self.refs.pop();
                }
            } else if target.is_some_and(|t| {
                let mut found = Vec::new();
                keyword_places(t, String::new(), 0, &mut found);
                !found.is_empty()
            }) {
                // The rules are paths, unrolled once: deeper levels would go unchecked.
                self.error(
                    child(ptr, "$ref"),
                    format!("`{KEYWORD}` under a `$ref` that recurses cannot be checked at every depth; ground values outside the recursion"),
                );
            }
        }
        if let Some(g) = map.get(KEYWORD) {
            self.marked(s, g, ptr, path);
        }
        if let Some(Value::Object(props)) = map.get("properties") {
            let base = child(ptr, "properties");
            let (mut sources, mut texts) = (Vec::new(), Vec::new());
            for (k, sub) in props {
                path.push(Seg::Prop(k.clone()));
                self.walk(sub, &child(&base, k), path, depth + 1);
                path.pop();
                match self.kind_of(sub) {
                    Some(GroundKind::Source) => sources.push(k.clone()),
                    Some(GroundKind::Text) => texts.push(k.clone()),
                    _ => {}
                }
            }
            if !sources.is_empty() && !texts.is_empty() {
                self.g.pairs.push(Pair {
                    object: path.clone(),
                    sources,
                    texts,
                });
            }
        }
        if let Some(items) = map.get("items") {
            path.push(Seg::Items);
            self.walk(items, &child(ptr, "items"), path, depth + 1);
            path.pop();
        }
        if let Some(Value::Array(prefix)) = map.get("prefixItems") {
            for (i, sub) in prefix.iter().enumerate() {
                path.push(Seg::Index(i));
                self.walk(sub, &format!("{ptr}/prefixItems/{i}"), path, depth + 1);
                path.pop();
            }
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = map.get(key) {
                for (i, sub) in branches.iter().enumerate() {
                    self.walk(sub, &format!("{ptr}/{key}/{i}"), path, depth + 1);
                }
            }
        }
    }

    /// A subschema that carries the keyword: checks the use and records the rule.
    fn marked(&mut self, s: &'a Value, g: &Value, ptr: &str, path: &[Seg]) {
        let at = child(ptr, KEYWORD);
        let Some(kind) = g.as_str().and_then(GroundKind::parse) else {
            let got = crate::diag::shown(&g.to_string());
            let hint = g
                .as_str()
                .and_then(|s| crate::diag::suggest(s, &["text", "source", "number"]))
                .map(|b| format!("; did you mean `{b}`?"))
                .unwrap_or_default();
            self.error(
                at,
                format!("unknown grounding kind {got}: expected \"text\", \"source\" or \"number\"{hint}"),
            );
            return;
        };
        if typed_enum(s) || typed_enum(self.deref(s)) {
            self.error(
                at,
                format!("`{KEYWORD}` on an enum or const: its values are fixed by the contract, not drawn from what the run read"),
            );
            return;
        }
        // `{"$ref": …, "x-grounded": …}`: the type is the target's.
        let typed = if s.get("type").is_some() {
            s
        } else {
            self.deref(s)
        };
        let Some(ts) = types(typed) else {
            self.error(
                at,
                format!("`{KEYWORD}` needs a `type`: only strings and numbers (or arrays of them) can be grounded"),
            );
            return;
        };
        let scalar = |t: &str| matches!(t, "string" | "number" | "integer" | "null");
        let ts: Vec<&str> = ts.into_iter().filter(|t| *t != "null").collect();
        if !ts.is_empty() && ts.iter().all(|t| scalar(t)) {
            if kind == GroundKind::Text && !ts.contains(&"string") {
                // As text, `14` would be found inside `2140`.
                self.error(
                    at,
                    "a number is grounded as `\"number\"`, not `\"text\"`".into(),
                );
                return;
            }
            if kind == GroundKind::Source && !ts.contains(&"string") {
                self.error(
                    at,
                    "a source id is a string: `\"source\"` grounds strings only".into(),
                );
                return;
            }
            self.rule(path.to_vec(), kind, at, s);
            return;
        }
        if ts == ["array"] {
            let items = typed.get("items").map(|i| self.deref(i));
            let item_types: Vec<&str> = items
                .and_then(types)
                .unwrap_or_default()
                .into_iter()
                .filter(|t| *t != "null")
                .collect();
            let enum_items =
                items.is_some_and(|i| i.get("enum").is_some() || i.get("const").is_some());
            if !enum_items
                && !item_types.is_empty()
                && item_types.iter().all(|t| scalar(t))
                && (kind != GroundKind::Source || item_types.contains(&"string"))
            {
                let mut p = path.to_vec();
                p.push(Seg::Items);
                self.rule(p, kind, at, s);
                return;
            }
            self.error(
                at,
                format!("`{KEYWORD}` on an array whose items are not strings or numbers: mark the string or number values inside it instead"),
            );
            return;
        }
        let what = ts.join(" or ");
        self.error(
            at,
            format!("`{KEYWORD}` on a {what}: only strings and numbers (or arrays of them) can be grounded; mark the values inside it instead"),
        );
    }
}

/// The lines a grounding rejection adds to a repair request.
pub(crate) fn repair_message(u: &[Ungrounded], hint: &str) -> String {
    let mut s = String::from(
        "Your output was rejected: some values are not backed by anything this run has read (its input and its tool results). Fix every problem below and submit again.\n",
    );
    for x in u.iter().take(crate::contract::MAX_VIOLATIONS) {
        s.push_str("- ");
        s.push_str(&x.repair);
        s.push('\n');
    }
    if u.len() > crate::contract::MAX_VIOLATIONS {
        s.push_str(&format!(
            "- … and {} more\n",
            u.len() - crate::contract::MAX_VIOLATIONS
        ));
    }
    s.push_str(hint);
    s
}

#[cfg(test)]
mod tests;
