//! A run's evidence: what it was given and what its tools returned, as grounded values are
//! checked against it, and what a tool result says about where it came from.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::text::{normalize, number_key, numbers};

/// Where a tool result came from, and which part of it is evidence. Set through
/// [`ToolOutput::with_source`](crate::ToolOutput::with_source); the built-in workspace tools,
/// MCP tools and sub-agents set it themselves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Provenance {
    pub(crate) sources: Vec<String>,
    pub(crate) body: Body,
}

/// Which text of a result is evidence.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Body {
    /// The content the model read (or, for a structured result, its values).
    #[default]
    Content,
    /// The content is a sub-agent's JSON output: its string and number values are the
    /// evidence, not its syntax, from no source; beside them, (source, text) pairs the
    /// sub-agent grounded together (a quote beside its citation).
    Json(Vec<(String, String)>),
    /// Only these excerpts, each from the source it names (or none): the content is the tool's
    /// presentation of them (line numbers, `path:line:` prefixes, notes), which is not
    /// evidence.
    Excerpts(Vec<(Option<String>, String)>),
}

impl Provenance {
    /// The whole content, from no named source: what a result says by default.
    pub(crate) const NONE: Provenance = Provenance {
        sources: Vec::new(),
        body: Body::Content,
    };

    /// The ids of the sources the result came from.
    pub fn sources(&self) -> &[String] {
        &self.sources
    }
}

/// A source id as it is compared: a workspace path without `./` segments, doubled or trailing
/// slashes; a URI (anything with `://`) as it is. `None` for a path with a `..` segment,
/// which names no source: a file is cited by the path it was read under.
pub(crate) fn source_key(id: &str) -> Option<String> {
    let id = id.trim();
    if id.is_empty() {
        return None;
    }
    if id.contains("://") {
        return Some(id.to_owned());
    }
    let mut parts = Vec::new();
    for seg in id.split('/') {
        match seg {
            "" | "." => {}
            ".." => return None,
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        return None;
    }
    let joined = parts.join("/");
    Some(if id.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    })
}

/// `key` without a trailing line anchor (`:42`, `:40-45`, `#L42`, `#L40-L45`), if it has one.
pub(crate) fn without_anchor(key: &str) -> Option<&str> {
    // A URI's `:8080` or `:42` is part of its name.
    if key.contains("://") {
        return None;
    }
    fn digits(s: &str, l: bool) -> bool {
        let s = if l {
            s.strip_prefix('L').unwrap_or(s)
        } else {
            s
        };
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
    }
    let range = |s: &str, l: bool| match s.split_once('-') {
        Some((a, b)) => digits(a, l) && digits(b, l),
        None => digits(s, l),
    };
    if let Some((base, anchor)) = key.rsplit_once('#') {
        if anchor.starts_with('L') && range(anchor, true) && !base.is_empty() {
            return Some(base);
        }
    }
    let (base, anchor) = key.rsplit_once(':')?;
    (range(anchor, false) && !base.is_empty() && !base.ends_with(':')).then_some(base)
}

/// What a run has read, normalized once as it arrives: text pieces (each from the sources it
/// came from), the sources consulted, and the numbers that occur. The run loop keeps one per
/// run of a spec that grounds values; it is public for checks outside a run (an evaluation, a
/// benchmark).
///
/// Memory: one normalized copy of each piece, never more characters than the results the run
/// already holds in its conversation (each turn's results are capped by
/// `max_tool_result_chars_per_turn`; a withheld result adds nothing), plus a set of numbers.
#[derive(Debug, Default)]
pub struct Evidence {
    pieces: Vec<String>,
    /// Source id → indices into `pieces` of what came from it.
    sources: HashMap<String, Vec<usize>>,
    /// Consulted sources in the order they were first seen, for messages.
    order: Vec<String>,
    numbers: HashSet<u64>,
    /// Whether numbers are collected at all (a spec that grounds no number skips the scan).
    want_numbers: bool,
}

impl Evidence {
    /// Empty evidence for checking outputs of `grounding` (numbers are collected only when
    /// it grounds one).
    pub fn for_grounding(grounding: &super::Grounding) -> Self {
        Evidence::new(grounding.grounds(super::GroundKind::Number))
    }

    pub(crate) fn new(want_numbers: bool) -> Self {
        Evidence {
            want_numbers,
            ..Evidence::default()
        }
    }

    /// Adds a run's input: its string and number values.
    pub fn add_input(&mut self, input: &Value) {
        self.add_values(input, &[]);
    }

    /// Adds a tool result the run received: its `content`, its `structured` value if it has
    /// one, and its [`Provenance`] ([`ToolOutput::provenance`](crate::ToolOutput::provenance)).
    /// The run loop adds no error result: an error is the tool's own words.
    pub fn add_result(&mut self, content: &str, structured: Option<&Value>, prov: &Provenance) {
        let sources: Vec<String> = prov.sources.iter().filter_map(|s| source_key(s)).collect();
        for s in &sources {
            self.consulted(s);
        }
        match &prov.body {
            // Each excerpt is from the source it names, or from none.
            Body::Excerpts(parts) => {
                for (src, text) in parts {
                    match src.as_deref().and_then(source_key) {
                        Some(s) => {
                            self.consulted(&s);
                            self.add_text(text, std::slice::from_ref(&s));
                        }
                        None => self.add_text(text, &[]),
                    }
                }
            }
            // A sub-agent's output: its values are evidence, from no file; only the text it
            // grounded beside a source (a quote beside its citation) is that source's.
            Body::Json(attributed) => {
                match structured.map(std::borrow::Cow::Borrowed).or_else(|| {
                    serde_json::from_str(content)
                        .ok()
                        .map(std::borrow::Cow::Owned)
                }) {
                    Some(v) => self.add_values(&v, &[]),
                    None => self.add_text(content, &[]),
                }
                for (src, text) in attributed {
                    if let Some(s) = source_key(src) {
                        self.consulted(&s);
                        self.add_text(text, std::slice::from_ref(&s));
                    }
                }
            }
            // What the model read: the content, or a structured value's values when the
            // content is that value as JSON (else the model never saw them).
            Body::Content => {
                match structured.filter(|v| crate::json::to_compact_string(v) == content) {
                    Some(v) => self.add_values(v, &sources),
                    None => self.add_text(content, &sources),
                }
            }
        }
    }

    fn consulted(&mut self, key: &str) {
        if !self.sources.contains_key(key) {
            self.sources.insert(key.to_owned(), Vec::new());
            self.order.push(key.to_owned());
        }
    }

    fn add_values(&mut self, v: &Value, source: &[String]) {
        match v {
            Value::String(s) => self.add_text(s, source),
            Value::Number(n) => {
                if self.want_numbers {
                    if let Some(f) = n.as_f64() {
                        self.numbers.insert(number_key(f));
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| self.add_values(i, source)),
            Value::Object(map) => map.values().for_each(|i| self.add_values(i, source)),
            Value::Bool(_) | Value::Null => {}
        }
    }

    fn add_text(&mut self, text: &str, sources: &[String]) {
        // An empty file read is still consulted.
        for s in sources {
            self.consulted(s);
        }
        let norm = normalize(text);
        if norm.is_empty() {
            return;
        }
        if self.want_numbers {
            numbers(&norm, |n| {
                self.numbers.insert(number_key(n));
            });
        }
        let i = self.pieces.len();
        self.pieces.push(norm);
        for s in sources {
            self.consulted(s);
            if let Some(list) = self.sources.get_mut(s) {
                list.push(i);
            }
        }
    }

    /// Whether normalized text `needle` occurs within one piece (a value split across two
    /// results occurs in neither).
    pub(crate) fn has_text(&self, needle: &str) -> bool {
        let f = memchr::memmem::Finder::new(needle);
        needle.is_empty() || self.pieces.iter().any(|p| f.find(p.as_bytes()).is_some())
    }

    /// Whether normalized text `needle` occurs in what came from source `key`.
    pub(crate) fn has_text_in(&self, key: &str, needle: &str) -> bool {
        let f = memchr::memmem::Finder::new(needle);
        self.sources.get(key).is_some_and(|ix| {
            needle.is_empty()
                || ix
                    .iter()
                    .any(|&i| f.find(self.pieces[i].as_bytes()).is_some())
        })
    }

    pub(crate) fn has_source(&self, key: &str) -> bool {
        self.sources.contains_key(key)
    }

    pub(crate) fn has_number(&self, n: f64) -> bool {
        self.numbers.contains(&number_key(n))
    }

    /// The sources consulted so far, first seen first.
    pub(crate) fn consulted_sources(&self) -> &[String] {
        &self.order
    }

    /// Bytes of normalized text held (the sources and numbers beside them are small).
    pub fn held_bytes(&self) -> usize {
        self.pieces.iter().map(String::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn anchors() {
        assert_eq!(without_anchor("Cargo.toml:2"), Some("Cargo.toml"));
        assert_eq!(without_anchor("src/a.rs:40-45"), Some("src/a.rs"));
        assert_eq!(without_anchor("src/a.rs#L40-L45"), Some("src/a.rs"));
        assert_eq!(without_anchor("src/a.rs#L7"), Some("src/a.rs"));
        assert_eq!(without_anchor("src/a.rs"), None);
        assert_eq!(without_anchor("a.rs:x"), None);
        assert_eq!(without_anchor(":3"), None);
        assert_eq!(without_anchor("a.rs:"), None);
    }

    #[test]
    fn source_keys() {
        assert_eq!(source_key("./src//lib.rs").as_deref(), Some("src/lib.rs"));
        assert_eq!(source_key("src/./lib.rs/").as_deref(), Some("src/lib.rs"));
        assert_eq!(source_key("src/../Cargo.toml"), None);
        assert_eq!(source_key(".."), None);
        assert_eq!(source_key(""), None);
        assert_eq!(source_key("."), None);
        assert_eq!(source_key("file:///a//b").as_deref(), Some("file:///a//b"));
    }

    #[test]
    fn pieces_keep_their_sources() {
        let mut ev = Evidence::new(true);
        ev.add_input(&json!({"q": "Which version?", "n": 3}));
        let prov = Provenance {
            sources: vec![],
            body: Body::Excerpts(vec![
                (Some("a.toml".into()), "name = \"tidepool\"".into()),
                (Some("b.toml".into()), "version = \"0.7.3\"".into()),
            ]),
        };
        ev.add_result("   1| shown", None, &prov);
        assert!(ev.has_text("tidepool"));
        assert!(ev.has_text_in("a.toml", "tidepool"));
        assert!(!ev.has_text_in("b.toml", "tidepool"));
        assert!(!ev.has_text("shown"), "the presentation is not evidence");
        assert!(!ev.has_number(1.0), "nor are its line numbers");
        assert!(ev.has_number(3.0));
        assert_eq!(ev.consulted_sources(), ["a.toml", "b.toml"]);
    }
}
