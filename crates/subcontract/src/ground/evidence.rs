//! A run's evidence: what it was given and what its tools returned, as grounded values are
//! checked against it, and what a tool result says about where it came from.

use std::collections::HashMap;

use serde_json::Value;

use super::text::{self, normalize, NumKey, END};

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
    /// The content is a structured value shown as JSON: its string and number values are the
    /// evidence, not its syntax, from no source. (Only MCP tools return such results.)
    #[cfg_attr(not(feature = "mcp-client"), allow(dead_code))]
    Json,
    /// The content is a sub-agent's output: only the values its contract grounded are
    /// evidence, each with the sources the sub-agent found it in.
    Child(Vec<super::Carried>),
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

/// Where a piece of text came from, for [`Evidence::add_text`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// The run's input (its caller's words).
    Input,
    /// A tool result.
    Read,
}

/// One piece of evidence: a byte range of [`Evidence::text`], where it came from, and its
/// sources (a range of [`Evidence::piece_sources`]).
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: usize,
    end: usize,
    origin: Origin,
    sources: (u32, u32),
}

/// Where a number was seen: in the input, in a tool result, and under which sources.
#[derive(Debug, Default)]
struct SeenNumber {
    input: bool,
    read: bool,
    sources: Vec<u32>,
}

/// Where a value occurs in the evidence: in the input, in a tool result, and the sources of
/// the pieces that hold it (indices into the consulted sources).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) input: bool,
    pub(crate) read: bool,
    pub(crate) sources: Vec<u32>,
}

/// Lines of tool results this long (in characters) or shorter may be quoted in a repair.
const MENTION_CHARS: usize = 160;
/// Lines kept per word a repair may quote.
const MENTIONS_KEPT: usize = 3;

/// A line a repair may quote, with the index of its source.
type Mention = (Option<u32>, Box<str>);

/// The shortest lines read that mention each of some words: what a repair quotes beside a
/// value found nowhere, so a model that read the right file can copy the right value.
#[derive(Debug, Default)]
struct Mentions {
    /// Word (one normalized token) → its index in `best`.
    words: HashMap<String, usize>,
    /// Per word, up to [`MENTIONS_KEPT`] lines, shortest first, each with its source, among
    /// lines where the word is a whole token (`[0]`) and where it is a part of one (`[1]`:
    /// `timeout` in `request_timeout_seconds`).
    best: Vec<[Vec<Mention>; 2]>,
}

impl Mentions {
    fn offer(&mut self, words: &[(usize, usize)], line: &str, source: Option<u32>) {
        // Control characters (bidi overrides among them) are not quoted back to a model.
        let line: String = line
            .trim()
            .chars()
            .map(|c| {
                let bidi = matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
                if c.is_control() || bidi {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        let len = line.chars().count();
        for &(w, part) in words {
            let Some(list) = self.best.get_mut(w).and_then(|b| b.get_mut(part)) else {
                continue;
            };
            if list.iter().any(|(_, l)| **l == *line) {
                continue;
            }
            if list.len() == MENTIONS_KEPT {
                match list.last() {
                    Some((_, l)) if l.chars().count() > len => {
                        list.pop();
                    }
                    _ => continue,
                }
            }
            let at = list.partition_point(|(_, l)| l.chars().count() <= len);
            list.insert(at, (source, line.as_str().into()));
        }
    }
}

/// What a run has read, normalized once as it arrives: text pieces (each from the sources it
/// came from), the sources consulted, and the numbers that occur. The run loop keeps one per
/// run of a spec that grounds values; it is public for checks outside a run (an evaluation, a
/// benchmark).
///
/// Each piece is what one tool result showed as one stretch: a `read_file` range, one line
/// `grep` matched, one text block of an MCP result, one string of a structured value or of
/// the input. A text value must occur within one piece, as whole tokens.
///
/// Memory: one normalized copy of each piece, marked (two bytes more per word or number), so
/// never much more than the results the run already holds in its conversation (each turn's
/// results are capped by `max_tool_result_chars_per_turn`; a withheld result adds nothing),
/// plus a small record per piece, the set of numbers, and a few short lines per grounded
/// property's name for repairs.
#[derive(Debug, Default)]
pub struct Evidence {
    /// Every piece's marked, normalized text, each followed by [`END`]: one search covers all
    /// of them, and no match spans two.
    text: Vec<u8>,
    pieces: Vec<Piece>,
    /// The sources of the pieces: each piece's `sources` is a range in here.
    piece_sources: Vec<u32>,
    /// Source id → its index in `order`, and the pieces that came from it.
    sources: HashMap<String, (u32, Vec<u32>)>,
    /// Consulted sources in the order they were first seen.
    order: Vec<String>,
    numbers: HashMap<NumKey, SeenNumber>,
    /// Whether numbers are collected at all (a spec that grounds no number skips the scan).
    want_numbers: bool,
    /// The lines a repair may point at, when repairs point at what was read.
    mentions: Option<Mentions>,
}

impl Evidence {
    /// Empty evidence for checking outputs of `grounding` (numbers are collected only when
    /// it grounds one), keeping the lines a repair may quote.
    pub fn for_grounding(grounding: &super::Grounding) -> Self {
        Evidence::for_run(grounding, true)
    }

    /// [`for_grounding`](Self::for_grounding), keeping the lines a repair quotes only when
    /// `pointers` says so.
    pub(crate) fn for_run(grounding: &super::Grounding, pointers: bool) -> Self {
        let mut ev = Evidence::new(grounding.grounds(super::GroundKind::Number));
        if pointers {
            let mut m = Mentions::default();
            for w in grounding.mention_words() {
                if !m.words.contains_key(w) {
                    m.words.insert(w.to_owned(), m.best.len());
                    m.best.push(Default::default());
                }
            }
            ev.mentions = (!m.words.is_empty()).then_some(m);
        }
        ev
    }

    pub(crate) fn new(want_numbers: bool) -> Self {
        Evidence {
            want_numbers,
            ..Evidence::default()
        }
    }

    /// Adds a run's input: its string and number values.
    pub fn add_input(&mut self, input: &Value) {
        self.add_values(input, &[], Origin::Input);
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
                        Some(s) => self.add_text(text, std::slice::from_ref(&s), Origin::Read),
                        None => self.add_text(text, &[], Origin::Read),
                    }
                }
            }
            // A structured result shown as JSON: its values are evidence, from no source.
            Body::Json => {
                match structured.map(std::borrow::Cow::Borrowed).or_else(|| {
                    serde_json::from_str(content)
                        .ok()
                        .map(std::borrow::Cow::Owned)
                }) {
                    Some(v) => self.add_values(&v, &[], Origin::Read),
                    None => self.add_text(content, &[], Origin::Read),
                }
            }
            // A sub-agent's output is its model's words: only the values its own contract
            // grounded are evidence, each from the sources the sub-agent found it in.
            Body::Child(values) => {
                for c in values {
                    let srcs: Vec<String> =
                        c.sources.iter().filter_map(|s| source_key(s)).collect();
                    match c.kind {
                        super::GroundKind::Source => {
                            if let Some(k) = source_key(&c.value) {
                                self.consulted(&k);
                            }
                        }
                        super::GroundKind::Text | super::GroundKind::Number => {
                            self.add_text(&c.value, &srcs, Origin::Read)
                        }
                    }
                }
            }
            // What the model read: the content, or a structured value's values when the
            // content is that value as JSON (else the model never saw them).
            Body::Content => {
                match structured.filter(|v| crate::json::to_compact_string(v) == content) {
                    Some(v) => self.add_values(v, &sources, Origin::Read),
                    None => self.add_text(content, &sources, Origin::Read),
                }
            }
        }
    }

    /// The index of a consulted source, added if it is new.
    fn consulted(&mut self, key: &str) -> u32 {
        if let Some((i, _)) = self.sources.get(key) {
            return *i;
        }
        let i = u32::try_from(self.order.len()).unwrap_or(u32::MAX);
        self.sources.insert(key.to_owned(), (i, Vec::new()));
        self.order.push(key.to_owned());
        i
    }

    fn add_values(&mut self, v: &Value, source: &[String], origin: Origin) {
        match v {
            Value::String(s) => self.add_text(s, source, origin),
            Value::Number(n) => {
                if self.want_numbers {
                    if let Some(k) = text::json_number(n) {
                        let ids: Vec<u32> = source.iter().map(|s| self.consulted(s)).collect();
                        note_number(&mut self.numbers, k, origin, &ids);
                    }
                }
            }
            Value::Array(items) => items
                .iter()
                .for_each(|i| self.add_values(i, source, origin)),
            Value::Object(map) => map
                .values()
                .for_each(|i| self.add_values(i, source, origin)),
            Value::Bool(_) | Value::Null => {}
        }
    }

    /// Adds `text` as one piece from `sources`, line by line (each line normalized, the lines
    /// joined by a space as whitespace is), noting its numbers and the lines a repair may
    /// quote.
    fn add_text(&mut self, text: &str, sources: &[String], origin: Origin) {
        // An empty file read is still consulted.
        let ids: Vec<u32> = sources.iter().map(|s| self.consulted(s)).collect();
        let start = self.text.len();
        let Evidence {
            text: buf,
            numbers,
            mentions,
            want_numbers,
            ..
        } = self;
        let mut hits: Vec<(usize, usize)> = Vec::new();
        for line in text.split('\n') {
            let norm = normalize(line);
            if norm.is_empty() {
                continue;
            }
            if buf.len() > start {
                buf.push(b' ');
            }
            let words = mentions
                .as_ref()
                .filter(|_| origin == Origin::Read && line.len() <= 4 * MENTION_CHARS)
                .filter(|_| line.trim().chars().count() <= MENTION_CHARS)
                .map(|m| &m.words);
            hits.clear();
            text::mark(&norm, buf, |s, r| {
                if *want_numbers {
                    if let Some(k) = text::token_number(s, r.clone()) {
                        note_number(numbers, k, origin, &ids);
                    }
                }
                if let Some(words) = words {
                    let t = &s[r];
                    match words.get(t) {
                        Some(&w) => hits.push((w, 0)),
                        None if t.contains(['_', '-', '.']) => {
                            for part in t.split(['_', '-', '.']) {
                                if let Some(&w) = words.get(part) {
                                    hits.push((w, 1));
                                }
                            }
                        }
                        None => {}
                    }
                }
            });
            if !hits.is_empty() {
                if let Some(m) = mentions.as_mut() {
                    m.offer(&hits, line, ids.first().copied());
                }
            }
        }
        if self.text.len() == start {
            return;
        }
        self.text.push(END);
        let first = u32::try_from(self.piece_sources.len()).unwrap_or(u32::MAX);
        self.piece_sources.extend_from_slice(&ids);
        let i = u32::try_from(self.pieces.len()).unwrap_or(u32::MAX);
        self.pieces.push(Piece {
            start,
            end: self.text.len() - 1,
            origin,
            sources: (first, first + ids.len() as u32),
        });
        for s in sources {
            if let Some((_, list)) = self.sources.get_mut(s) {
                list.push(i);
            }
        }
    }

    /// Whether marked text `needle` occurs within one piece.
    pub(crate) fn has_text(&self, needle: &[u8]) -> bool {
        memchr::memmem::find(&self.text, needle).is_some()
    }

    /// Whether marked text `needle` occurs in a piece that came from source `key`.
    pub(crate) fn has_text_in(&self, key: &str, needle: &[u8]) -> bool {
        let f = memchr::memmem::Finder::new(needle);
        self.sources.get(key).is_some_and(|(_, ix)| {
            ix.iter().any(|&i| {
                let p = self.pieces[i as usize];
                f.find(&self.text[p.start..p.end]).is_some()
            })
        })
    }

    /// Where marked text `needle` occurs: each piece that holds it, once.
    pub(crate) fn text_found(&self, needle: &[u8]) -> Found {
        let f = memchr::memmem::Finder::new(needle);
        let mut found = Found::default();
        let mut at = 0;
        while let Some(i) = f.find(&self.text[at..]) {
            let pos = at + i;
            let ix = self.pieces.partition_point(|p| p.end < pos);
            let Some(p) = self.pieces.get(ix) else { break };
            match p.origin {
                Origin::Input => found.input = true,
                Origin::Read => found.read = true,
            }
            let (a, b) = p.sources;
            for &s in &self.piece_sources[a as usize..b as usize] {
                if !found.sources.contains(&s) {
                    found.sources.push(s);
                }
            }
            // The next piece: one is enough of each.
            at = p.end + 1;
        }
        found
    }

    /// Where number `n` occurs, if it does.
    pub(crate) fn number_found(&self, n: &NumKey) -> Option<Found> {
        self.numbers.get(n).map(|s| Found {
            input: s.input,
            read: s.read,
            sources: s.sources.clone(),
        })
    }

    pub(crate) fn has_source(&self, key: &str) -> bool {
        self.sources.contains_key(key)
    }

    pub(crate) fn has_number(&self, n: &NumKey) -> bool {
        self.numbers.contains_key(n)
    }

    /// The sources consulted so far, first seen first.
    pub(crate) fn consulted_sources(&self) -> &[String] {
        &self.order
    }

    /// The id of consulted source `i`.
    pub(crate) fn source_name(&self, i: u32) -> Option<&str> {
        self.order.get(i as usize).map(String::as_str)
    }

    /// Up to `max` of the shortest lines read that mention one of `words` (in the order of
    /// `words`: the first word's lines first), each with its source.
    pub(crate) fn mentions(&self, words: &[String], max: usize) -> Vec<(Option<&str>, &str)> {
        let Some(m) = &self.mentions else {
            return Vec::new();
        };
        let mut out: Vec<(Option<&str>, &str)> = Vec::new();
        // Lines where a word is a part of a token only when none has it whole: `version`
        // points at `version = …`, not `rust-version = …`, when both were read.
        for part in 0..2 {
            for w in words {
                let Some(&i) = m.words.get(w) else { continue };
                for (src, line) in &m.best[i][part] {
                    if out.len() == max {
                        return out;
                    }
                    if !out.iter().any(|(_, l)| *l == &**line) {
                        out.push((src.and_then(|s| self.source_name(s)), line));
                    }
                }
            }
            if !out.is_empty() {
                break;
            }
        }
        out
    }

    /// Bytes of normalized text held (the sources and numbers beside them are small).
    pub fn held_bytes(&self) -> usize {
        self.text.len()
    }
}

fn note_number(numbers: &mut HashMap<NumKey, SeenNumber>, k: NumKey, origin: Origin, ids: &[u32]) {
    let seen = numbers.entry(k).or_default();
    match origin {
        Origin::Input => seen.input = true,
        Origin::Read => seen.read = true,
    }
    for &i in ids {
        if !seen.sources.contains(&i) {
            seen.sources.push(i);
        }
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

    fn n(s: &str) -> Vec<u8> {
        text::needle(s).unwrap()
    }

    fn num(s: &str) -> NumKey {
        text::parse_number(s).unwrap()
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
        assert!(ev.has_text(&n("tidepool")));
        assert!(ev.has_text_in("a.toml", &n("tidepool")));
        assert!(!ev.has_text_in("b.toml", &n("tidepool")));
        assert!(
            !ev.has_text(&n("shown")),
            "the presentation is not evidence"
        );
        assert!(!ev.has_number(&num("1")), "nor are its line numbers");
        assert!(ev.has_number(&num("3")));
        assert_eq!(ev.consulted_sources(), ["a.toml", "b.toml"]);
        // Two pieces are never one: the end of one and the start of the next do not meet.
        assert!(!ev.has_text(&n("\"tidepool\" version")));
        let f = ev.text_found(&n("0.7.3"));
        assert_eq!((f.input, f.read, f.sources), (false, true, vec![1]));
        let f = ev.text_found(&n("which version"));
        assert_eq!((f.input, f.read, f.sources), (true, false, vec![]));
        let f = ev.number_found(&num("3.0")).unwrap();
        assert_eq!((f.input, f.read), (true, false));
    }

    #[test]
    fn a_read_is_one_piece_and_its_lines_meet() {
        let mut ev = Evidence::new(false);
        let prov = Provenance {
            sources: vec![],
            body: Body::Excerpts(vec![(
                Some("a.md".into()),
                "Tidepool stores\ntides.\n\nIt keeps 14 days.\n".into(),
            )]),
        };
        ev.add_result("", None, &prov);
        assert!(ev.has_text(&n("stores tides")));
        assert!(ev.has_text(&n("tides. it keeps")));
        assert!(!ev.has_text(&n("stores tide")));
    }

    #[test]
    fn the_shortest_lines_that_mention_a_word_are_kept() {
        let mut ev = Evidence::new(false);
        ev.mentions = Some(Mentions {
            words: [("version".to_owned(), 0), ("rust".to_owned(), 1)]
                .into_iter()
                .collect(),
            best: vec![Default::default(), Default::default()],
        });
        let long = format!("version {}", "x".repeat(MENTION_CHARS));
        let text = format!(
            "[package]\nname = \"tidepool\"\nversion = \"0.7.3\"\nrust-version = \"1.62\"\n{long}\n# the version, as released: 0.7.3\nversion = \"0.7.3\"\nversion\u{202e} = 1\n"
        );
        let prov = Provenance {
            sources: vec![],
            body: Body::Excerpts(vec![(Some("Cargo.toml".into()), text)]),
        };
        ev.add_result("", None, &prov);
        ev.add_input(&json!({"q": "version"}));
        let got = ev.mentions(&["version".to_owned()], 5);
        assert_eq!(
            got,
            [
                (Some("Cargo.toml"), "version  = 1"),
                (Some("Cargo.toml"), "version = \"0.7.3\""),
                (Some("Cargo.toml"), "# the version, as released: 0.7.3"),
            ]
        );
        assert!(ev.mentions(&["name".to_owned()], 5).is_empty());
        // A word inside a token counts only where no line has it whole.
        assert_eq!(
            ev.mentions(&["rust".to_owned()], 5),
            [(Some("Cargo.toml"), "rust-version = \"1.62\"")]
        );
    }
}
