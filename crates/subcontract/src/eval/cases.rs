//! The cases file: JSON Lines of `{"id", "input", "expect"}`, read bounded and checked whole
//! before anything runs.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::spec::DynSpec;
use crate::Outcome;

/// The most bytes a cases file may hold (16 MiB). A larger file is refused before it is read
/// further.
pub const MAX_CASES_BYTES: u64 = 16 * 1024 * 1024;

/// The most cases a file may hold. Each case runs once per mode and repeat, each run paid: a
/// file of more is a batch (`subcontract batch`), and is refused at once, before any line is
/// parsed.
pub const MAX_CASES: usize = 10_000;

/// The most errors one refusal lists (the count of the rest follows them).
const MAX_ERRORS_SHOWN: usize = 20;

/// One graded case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Its id, unique in the file.
    pub id: String,
    /// The spec's input.
    pub input: Value,
    /// What the run must do.
    pub expect: Expect,
    /// Its 1-based line in the file.
    pub line: usize,
}

/// The graders of a case; every one must hold.
#[derive(Debug, Clone, Default)]
pub struct Expect {
    /// The outcome's name (`completed` unless given).
    pub outcome: Option<String>,
    /// JSON pointer → the exact value there.
    pub fields: Vec<(String, Value)>,
    /// JSON pointer → substrings that must all occur in the string there, ignoring case.
    pub contains: Vec<(String, Vec<String>)>,
    /// JSON pointer → a regex the string there must match.
    pub matches: Vec<(String, Regex)>,
    /// JSON pointer → the inclusive range of the number there.
    pub range: Vec<(String, f64, f64)>,
    /// JSON pointer → the values allowed there.
    pub one_of: Vec<(String, Vec<Value>)>,
    /// A judge spec's path (as written, relative to the cases file).
    pub judge: Option<String>,
}

impl Expect {
    /// The outcome the case expects (`completed` unless it names another).
    pub fn expected_outcome(&self) -> &str {
        self.outcome.as_deref().unwrap_or("completed")
    }

    /// Every JSON pointer the graders read.
    pub fn pointers(&self) -> impl Iterator<Item = &str> {
        self.fields
            .iter()
            .map(|(p, _)| p.as_str())
            .chain(self.contains.iter().map(|(p, _)| p.as_str()))
            .chain(self.matches.iter().map(|(p, _)| p.as_str()))
            .chain(self.range.iter().map(|(p, _, _)| p.as_str()))
            .chain(self.one_of.iter().map(|(p, _)| p.as_str()))
    }
}

/// A cases file that cannot be used: every problem found, each as `file:line: message`.
#[derive(Clone, thiserror::Error)]
#[error("{}", render(.errors))]
pub struct CasesError {
    /// The problems, in file order.
    pub errors: Vec<String>,
}

crate::debug_as_display!(CasesError);

fn render(errors: &[String]) -> String {
    let mut out: Vec<String> = errors.iter().take(MAX_ERRORS_SHOWN).cloned().collect();
    if errors.len() > MAX_ERRORS_SHOWN {
        out.push(format!(
            "… and {} more error(s)",
            errors.len() - MAX_ERRORS_SHOWN
        ));
    }
    out.join("\n")
}

impl CasesError {
    fn one(message: String) -> Self {
        CasesError {
            errors: vec![message],
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    id: String,
    input: Value,
    #[serde(default)]
    expect: RawExpect,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    fields: Map<String, Value>,
    #[serde(default)]
    contains: Map<String, Value>,
    #[serde(default)]
    matches: Map<String, Value>,
    #[serde(default)]
    range: Map<String, Value>,
    #[serde(default)]
    one_of: Map<String, Value>,
    #[serde(default)]
    judge: Option<String>,
}

/// Whether `c` is a bidirectional-text control (an embedding, override or isolate, or a
/// directional mark): it changes the order in which text around it is shown.
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

/// A JSON document read only to refuse an object that names a key twice, at any depth.
struct UniqueKeys;

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueKeys)
    }
}

impl<'de> serde::de::Visitor<'de> for UniqueKeys {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self, A::Error> {
        let mut keys = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !keys.insert(key.clone()) {
                let key = crate::contract::truncate_chars(&key, 80);
                return Err(serde::de::Error::custom(format!(
                    "the key `{}` is given twice in one object",
                    key.escape_debug()
                )));
            }
            map.next_value::<UniqueKeys>()?;
        }
        Ok(UniqueKeys)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(UniqueKeys)
    }
}

/// Every outcome's name, for checking `expect.outcome`.
const OUTCOMES: [Outcome; 10] = [
    Outcome::Completed,
    Outcome::MaxTurns,
    Outcome::Stalled,
    Outcome::BudgetExhausted,
    Outcome::Timeout,
    Outcome::Cancelled,
    Outcome::InvalidOutput,
    Outcome::InvalidInput,
    Outcome::ModelError,
    Outcome::Denied,
];

/// Reads the cases file at `path`: at most [`MAX_CASES_BYTES`] bytes and [`MAX_CASES`]
/// cases, or an error saying which bound it passed. Nothing is parsed from a file over
/// either.
pub fn read_cases(path: &Path) -> Result<Vec<Case>, CasesError> {
    let shown = path.display().to_string();
    let unreadable = |e: &dyn std::fmt::Display| {
        CasesError::one(format!("{shown}: cannot read the cases file: {e}"))
    };
    // A FIFO or a device is refused before it is opened (it would block, or never end), as
    // is a link that leads out of the file's directory.
    super::files::no_link_out(path).map_err(|e| CasesError::one(e.to_string()))?;
    let meta = std::fs::metadata(path).map_err(|e| unreadable(&e))?;
    if !meta.is_file() {
        let kind = crate::spec::file::file_kind(&meta);
        return Err(unreadable(&format!("it is {kind}, not a regular file")));
    }
    let file = std::fs::File::open(path).map_err(|e| unreadable(&e))?;
    let mut bytes = Vec::new();
    if meta.len() <= MAX_CASES_BYTES {
        file.take(MAX_CASES_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| unreadable(&e))?;
    }
    if meta.len() > MAX_CASES_BYTES || bytes.len() as u64 > MAX_CASES_BYTES {
        return Err(CasesError::one(format!(
            "{shown}: the cases file is over {} MiB; split it, or run the inputs with `subcontract batch`",
            MAX_CASES_BYTES / (1024 * 1024)
        )));
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| CasesError::one(format!("{shown}: the cases file is not UTF-8: {e}")))?;
    parse_cases(&shown, &text)
}

/// Parses cases from JSON Lines text; `file` names it in errors. Blank lines are skipped.
/// The longest case id, in characters.
pub const MAX_ID_CHARS: usize = 256;

/// Every malformed line is reported (bad JSON, an unknown key, a repeated id, a grader that
/// is not well formed), and then none of the cases is returned.
pub fn parse_cases(file: &str, text: &str) -> Result<Vec<Case>, CasesError> {
    let count = text.lines().filter(|l| !l.trim().is_empty()).count();
    if count > MAX_CASES {
        return Err(CasesError::one(format!(
            "{file}: {count} cases, over the limit of {MAX_CASES}: each case is a paid run per mode and repeat; split the file, or run the inputs with `subcontract batch`"
        )));
    }
    let mut cases = Vec::with_capacity(count);
    let mut errors = Vec::new();
    let mut ids = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("{file}:{}", i + 1);
        // serde_json keeps the last of two equal keys: a grader (or an input) that named a key
        // twice would silently grade (or send) less than it says.
        if let Err(e) = serde_json::from_str::<UniqueKeys>(line) {
            errors.push(format!("{at}: {e}"));
            continue;
        }
        let raw: RawCase = match serde_json::from_str(line) {
            Ok(r) => r,
            Err(e) => {
                errors.push(format!("{at}: {e}"));
                continue;
            }
        };
        if raw.id.trim().is_empty() {
            errors.push(format!("{at}: the case id is empty"));
            continue;
        }
        // An id is a name in reports, file names and messages: short, printable, and shown
        // as written (a bidi control would reorder what a report shows of it).
        if raw.id.chars().count() > MAX_ID_CHARS
            || raw.id.chars().any(|c| c.is_control() || is_bidi_control(c))
        {
            errors.push(format!(
                "{at}: a case id is at most {MAX_ID_CHARS} characters, with no control or bidi control character"
            ));
            continue;
        }
        if !ids.insert(raw.id.clone()) {
            errors.push(format!("{at}: the case id `{}` is repeated", raw.id));
            continue;
        }
        match expect(raw.expect) {
            Ok(expect) => cases.push(Case {
                id: raw.id,
                input: raw.input,
                expect,
                line: i + 1,
            }),
            Err(problems) => errors.extend(problems.into_iter().map(|p| format!("{at}: {p}"))),
        }
    }
    if errors.is_empty() {
        Ok(cases)
    } else {
        Err(CasesError { errors })
    }
}

/// The graders of one line, each checked for its shape.
fn expect(raw: RawExpect) -> Result<Expect, Vec<String>> {
    let mut problems = Vec::new();
    if let Some(o) = &raw.outcome {
        if !OUTCOMES.iter().any(|k| k.as_str() == o) {
            let names: Vec<&str> = OUTCOMES.iter().map(|k| k.as_str()).collect();
            problems.push(format!(
                "expect.outcome `{o}` is not an outcome ({})",
                names.join(", ")
            ));
        }
    }
    let mut e = Expect {
        outcome: raw.outcome,
        judge: raw.judge,
        ..Expect::default()
    };
    let mut pointer = |grader: &str, p: &str| -> bool {
        let ok = p.is_empty() || p.starts_with('/');
        if !ok {
            problems.push(format!(
                "expect.{grader}: `{p}` is not a JSON pointer (it starts with `/`, or is empty for the whole output)"
            ));
        }
        ok
    };
    let mut shape = Vec::new();
    for (p, v) in raw.fields {
        if pointer("fields", &p) {
            e.fields.push((p, v));
        }
    }
    for (p, v) in raw.contains {
        if !pointer("contains", &p) {
            continue;
        }
        let subs: Option<Vec<String>> = match v {
            Value::String(s) => Some(vec![s]),
            Value::Array(a) => a
                .into_iter()
                .map(|x| x.as_str().map(str::to_owned))
                .collect(),
            _ => None,
        };
        match subs {
            Some(s) => e.contains.push((p, s)),
            None => shape.push(format!(
                "expect.contains `{p}`: a string or an array of strings"
            )),
        }
    }
    for (p, v) in raw.matches {
        if !pointer("matches", &p) {
            continue;
        }
        // Bounded: a pattern compiles to at most 1 MiB, whatever it asks for.
        let build = |pat: &str| {
            regex::RegexBuilder::new(pat)
                .size_limit(1 << 20)
                .dfa_size_limit(1 << 20)
                .build()
        };
        match v.as_str().filter(|p| p.len() <= 1000).map(build) {
            Some(Ok(r)) => e.matches.push((p, r)),
            Some(Err(err)) => shape.push(format!("expect.matches `{p}`: not a regex: {err}")),
            None => shape.push(format!(
                "expect.matches `{p}`: a regex (a string of at most 1,000 bytes)"
            )),
        }
    }
    for (p, v) in raw.range {
        if !pointer("range", &p) {
            continue;
        }
        match v.as_array().map(Vec::as_slice) {
            Some([lo, hi]) => match (lo.as_f64(), hi.as_f64()) {
                (Some(lo), Some(hi)) if lo <= hi => e.range.push((p, lo, hi)),
                _ => shape.push(format!(
                    "expect.range `{p}`: [min, max], two numbers with min <= max"
                )),
            },
            _ => shape.push(format!(
                "expect.range `{p}`: [min, max], two numbers with min <= max"
            )),
        }
    }
    for (p, v) in raw.one_of {
        if !pointer("one_of", &p) {
            continue;
        }
        match v {
            Value::Array(a) if !a.is_empty() => e.one_of.push((p, a)),
            _ => shape.push(format!(
                "expect.one_of `{p}`: a non-empty array of allowed values"
            )),
        }
    }
    problems.extend(shape);
    if problems.is_empty() {
        Ok(e)
    } else {
        Err(problems)
    }
}

/// Checks cases against the spec before any call: each input against the input contract
/// (unless the case expects `invalid_input`), and each grader's pointer against what the
/// output contract can produce. `file` names the cases file in errors. `spec` is any spec,
/// typed or not.
pub fn check_cases<S>(spec: &S, file: &str, cases: &[Case]) -> Result<(), CasesError>
where
    S: AsRef<DynSpec> + ?Sized,
{
    check_cases_of(spec.as_ref(), file, cases)
}

/// [`check_cases`], compiled once rather than per spec type.
fn check_cases_of(spec: &DynSpec, file: &str, cases: &[Case]) -> Result<(), CasesError> {
    let mut errors = Vec::new();
    let schema: &Value = spec.output_contract().schema();
    for c in cases {
        let at = format!("{file}:{} (case `{}`)", c.line, c.id);
        if c.expect.expected_outcome() != Outcome::InvalidInput.as_str() {
            if let Err(violations) = spec.input_contract().validate(&c.input) {
                let all: Vec<String> = violations.iter().map(ToString::to_string).collect();
                errors.push(format!(
                    "{at}: the input breaks the input contract of `{}`: {} (a case that means to test this expects \"outcome\": \"invalid_input\")",
                    spec.name(),
                    all.join("; ")
                ));
            }
        }
        for p in c.expect.pointers() {
            if !can_produce(schema, schema, p) {
                errors.push(format!(
                    "{at}: the pointer `{p}` names nothing the output contract of `{}` can produce",
                    spec.name()
                ));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(CasesError { errors })
    }
}

/// Unescapes one JSON-pointer segment (`~1` is `/`, `~0` is `~`).
fn unescape(seg: &str) -> String {
    seg.replace("~1", "/").replace("~0", "~")
}

/// Whether `schema` (in the document `root`) can produce a value at `pointer`: the pointer's
/// segments are walked through `properties`, `patternProperties`, `additionalProperties`,
/// `items`/`prefixItems`, local `$ref`s and every branch of `anyOf`/`oneOf`/`allOf`. A schema
/// that says nothing of a step (`true`, `{}`) allows it.
pub fn can_produce(root: &Value, schema: &Value, pointer: &str) -> bool {
    let segs: Vec<String> = match pointer.strip_prefix('/') {
        None if pointer.is_empty() => Vec::new(),
        // Not a JSON Pointer at all.
        None => return false,
        Some(rest) => rest.split('/').map(unescape).collect(),
    };
    walk(root, schema, &segs, 0, &std::cell::Cell::new(0))
}

fn walk(
    root: &Value,
    schema: &Value,
    segs: &[String],
    depth: u32,
    visits: &std::cell::Cell<u32>,
) -> bool {
    // A `$ref` cycle cannot go deeper than this without producing nothing new; `$ref`s that
    // fan out are cut off after this many subschemas (then the pointer is given the benefit
    // of the doubt, and grading says whether it held).
    visits.set(visits.get().saturating_add(1));
    if depth > 64 || visits.get() > 100_000 {
        return true;
    }
    let Some(seg) = segs.first() else {
        return !matches!(schema, Value::Bool(false));
    };
    let obj = match schema {
        Value::Bool(b) => return *b,
        Value::Object(o) => o,
        _ => return false,
    };
    if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
        match r.strip_prefix('#').and_then(|p| root.pointer(p)) {
            Some(target) => {
                if !walk(root, target, segs, depth + 1, visits) {
                    return false;
                }
            }
            // A reference this walk cannot follow: allow rather than refuse a good case.
            None => return true,
        }
    }
    for key in ["allOf"] {
        if let Some(all) = obj.get(key).and_then(Value::as_array) {
            if !all.iter().all(|s| walk(root, s, segs, depth + 1, visits)) {
                return false;
            }
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(any) = obj.get(key).and_then(Value::as_array) {
            if !any.iter().any(|s| walk(root, s, segs, depth + 1, visits)) {
                return false;
            }
        }
    }
    let types: Vec<&str> = match obj.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let typed = |t: &str| types.is_empty() || types.contains(&t);
    let has_object_words = ["properties", "patternProperties", "additionalProperties"]
        .iter()
        .any(|k| obj.contains_key(*k));
    let has_array_words = ["items", "prefixItems"]
        .iter()
        .any(|k| obj.contains_key(*k));
    if !has_object_words && !has_array_words {
        // Nothing said about children: a scalar type produces none, anything else may.
        return types.is_empty() || types.iter().any(|t| matches!(*t, "object" | "array"));
    }
    let rest = &segs[1..];
    let mut ok = false;
    if typed("object") && (has_object_words || types.contains(&"object")) {
        if let Some(p) = obj
            .get("properties")
            .and_then(Value::as_object)
            .and_then(|m| m.get(seg.as_str()))
        {
            ok |= walk(root, p, rest, depth + 1, visits);
        } else {
            let mut matched = false;
            if let Some(pats) = obj.get("patternProperties").and_then(Value::as_object) {
                for (pat, s) in pats {
                    if Regex::new(pat).is_ok_and(|r| r.is_match(seg)) {
                        matched = true;
                        ok |= walk(root, s, rest, depth + 1, visits);
                    }
                }
            }
            if !matched {
                ok |= match obj.get("additionalProperties") {
                    None => true,
                    Some(s) => walk(root, s, rest, depth + 1, visits),
                };
            }
        }
    }
    if typed("array") && (has_array_words || types.contains(&"array")) {
        if let Ok(i) = seg.parse::<usize>() {
            let prefix = obj.get("prefixItems").and_then(Value::as_array);
            let max_items = obj.get("maxItems").and_then(Value::as_u64);
            if max_items.is_none_or(|m| (i as u64) < m) {
                ok |= match prefix.and_then(|p| p.get(i)) {
                    Some(s) => walk(root, s, rest, depth + 1, visits),
                    None => match obj.get("items") {
                        None => true,
                        Some(s) => walk(root, s, rest, depth + 1, visits),
                    },
                };
            }
        }
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object", "additionalProperties": false,
            "properties": {
                "findings": {"type": "array", "maxItems": 5, "items": {"$ref": "#/$defs/finding"}},
                "score": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                "meta": {"type": "object", "additionalProperties": {"type": "string"}}
            },
            "$defs": {"finding": {"type": "object", "additionalProperties": false,
                "properties": {"claim": {"type": "string"}}}}
        })
    }

    #[test]
    fn pointers_walk_properties_items_refs_and_branches() {
        let s = schema();
        for p in [
            "",
            "/findings",
            "/findings/0/claim",
            "/findings/4",
            "/score",
            "/meta/x",
        ] {
            assert!(can_produce(&s, &s, p), "{p}");
        }
        for p in [
            "/nope",
            "/findings/5",
            "/findings/x",
            "/findings/0/nope",
            "/score/x",
            "/findings/0/claim/x",
        ] {
            assert!(!can_produce(&s, &s, p), "{p}");
        }
    }

    #[test]
    fn malformed_lines_name_their_line_and_nothing_is_returned() {
        let text = "{\"id\":\"a\",\"input\":{}}\n\nnot json\n{\"id\":\"a\",\"input\":{}}\n{\"id\":\"b\",\"input\":{},\"expect\":{\"similar\":{}}}\n{\"id\":\"c\",\"input\":{},\"expect\":{\"range\":{\"/n\":[3,1]},\"matches\":{\"/s\":\"(\"},\"outcome\":\"done\"}}\n";
        let err = parse_cases("c.jsonl", text).unwrap_err();
        let all = err.to_string();
        assert!(all.contains("c.jsonl:3: expected"), "{all}");
        assert!(
            all.contains("c.jsonl:4: the case id `a` is repeated"),
            "{all}"
        );
        assert!(all.contains("c.jsonl:5: unknown field `similar`"), "{all}");
        assert!(all.contains("c.jsonl:6: expect.outcome `done`"), "{all}");
        assert!(all.contains("c.jsonl:6: expect.range `/n`"), "{all}");
        assert!(
            all.contains("c.jsonl:6: expect.matches `/s`: not a regex"),
            "{all}"
        );
    }

    #[test]
    fn too_many_cases_are_refused_before_parsing() {
        let text = "x\n".repeat(MAX_CASES + 1);
        let err = parse_cases("big.jsonl", &text).unwrap_err();
        assert_eq!(err.errors.len(), 1);
        assert!(err.errors[0].contains("over the limit of 10000"), "{err}");
    }
}
