//! Spec files (`src/docs/specs.md`): TOML text → a [`RawSpec`] that remembers where everything was
//! written, plus every [`Diagnostic`] found on the way.
//!
//! This layer checks only the file's *shape*: known keys, value types, names, limits. It does not
//! compile the `[input]`/`[output]` JSON Schemas or analyse their size; the loader and `check` do
//! that, and use [`PositionMap`] to point their own diagnostics at the right line.
//!
//! Parsing never stops at the first problem: TOML syntax errors come from toml's recovering
//! parser, and the shape checks run over whatever tree it recovered, so one run of `check` shows
//! every mistake in a file.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use rust_decimal::Decimal;
use serde_json::{Map, Number, Value};
use toml::de::{DeString, DeTable, DeValue};
use toml::Spanned;

use crate::diag::{codes, Diagnostic, LineIndex, Pos};

/// A value and the position it was written at (the value's own position, e.g. the opening quote
/// of a string or the `[input]` header of a table).
#[derive(Debug, Clone, PartialEq)]
pub struct Located<T> {
    /// The value.
    pub value: T,
    /// Where it starts in the file.
    pub pos: Pos,
}

/// The `[limits]` table as written; a key is `None` when absent or invalid (invalid ones have a
/// `bad-limits` diagnostic), so the loader applies its defaults only to absent keys in practice.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawLimits {
    /// Model turns the sub-agent may take.
    pub max_turns: Option<Located<u32>>,
    /// Spending cap in US dollars, exact.
    pub max_cost_usd: Option<Located<Decimal>>,
    /// Wall-clock limit for one run, in seconds.
    pub timeout_secs: Option<Located<u64>>,
    /// Longest compact JSON output the parent may receive, in characters.
    pub max_output_chars: Option<Located<u64>>,
    /// Tool calls of one model response that run.
    pub max_tool_calls_per_turn: Option<Located<u64>>,
    /// Characters the tool results of one turn may add to the conversation.
    pub max_tool_result_chars_per_turn: Option<Located<u64>>,
}

/// One `[[examples]]` entry that had both an `input` and an `output`.
#[derive(Debug, Clone, PartialEq)]
pub struct RawExample {
    /// Its index in the file's `examples` array, which is also its key in [`PositionMap`]
    /// paths (`["examples", "2", "output"]`); entries lacking `input` or `output` are skipped,
    /// so this can differ from the index in [`RawSpec::examples`].
    pub index: usize,
    /// Where the entry starts (its `[[examples]]` header or inline table).
    pub pos: Pos,
    /// Optional label, used in messages.
    pub name: Option<Located<String>>,
    /// An instance of the input contract.
    pub input: Located<Value>,
    /// An instance of the output contract.
    pub output: Located<Value>,
}

/// A spec file as written: every required part present with the right type, nothing compiled.
///
/// Being returned does not make a spec usable: [`parse_spec`] also returns a `RawSpec` when it
/// found shape errors that leave the parts buildable (an unknown key, an invalid name, a bad
/// limit), so that `check` can go on to report schema problems too. Callers must refuse a spec
/// whose diagnostics contain any error.
#[derive(Debug, Clone, PartialEq)]
pub struct RawSpec {
    /// The spec file's path, as given.
    pub path: PathBuf,
    /// The tool name a host sees (may be invalid; see the diagnostics).
    pub name: Located<String>,
    /// What the tool does, for the host model.
    pub description: Located<String>,
    /// The system prompt: `system`, or the contents of `system_file` (positioned at the
    /// `system_file` value).
    pub system: Located<String>,
    /// Tools the sub-agent may use, in file order.
    pub tools: Vec<Located<String>>,
    /// `provider:model`, when the spec names one.
    pub model: Option<Located<String>>,
    /// The `[limits]` table.
    pub limits: RawLimits,
    /// The `[input]` JSON Schema, converted from TOML.
    pub input: Located<Value>,
    /// The `[output]` JSON Schema, converted from TOML.
    pub output: Located<Value>,
    /// Contract examples.
    pub examples: Vec<RawExample>,
    /// Positions of every key and array element in the file.
    pub positions: PositionMap,
}

/// Where every key (and array element) of a spec file was written, by path from the document
/// root, so later stages can point diagnostics about schema locations at source lines.
///
/// Paths are key names and decimal array indices: `["output", "properties", "findings"]`,
/// `["examples", "0", "output"]`. A table entry's position is its *key*'s (the last segment of a
/// dotted key, or the name in a `[table.header]`); an array element's is the element's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PositionMap {
    /// Node 0 is the document root.
    pos: Vec<Pos>,
    /// (parent node, segment) → child node. A flat map rather than a tree of maps, so building
    /// and dropping it never recurses, whatever the nesting.
    children: HashMap<(usize, String), usize>,
}

impl PositionMap {
    /// Position of the key (or array element) at `path`; the empty path is the document start.
    pub fn locate(&self, path: &[&str]) -> Option<Pos> {
        let mut node = 0;
        for seg in path {
            node = self.child(node, seg)?;
        }
        self.pos.get(node).copied()
    }

    /// Position of a JSON Pointer (RFC 6901, `~0`/`~1` unescaped, a leading `#` allowed) into
    /// the top-level table `table`, e.g. `("output", "/properties/findings/items")`.
    ///
    /// Falls back to the nearest ancestor that exists, so a schema location that was produced
    /// by defaults rather than written still points at the closest line; when `table` itself is
    /// absent this is the start of the file.
    pub fn locate_pointer(&self, table: &str, pointer: &str) -> Pos {
        let Some(mut node) = self.child(0, table) else {
            return Pos::START;
        };
        let pointer = pointer.strip_prefix('#').unwrap_or(pointer);
        for seg in crate::json::pointer::tokens(pointer) {
            match self.child(node, &seg) {
                Some(next) => node = next,
                None => break,
            }
        }
        self.pos[node]
    }

    fn child(&self, node: usize, seg: &str) -> Option<usize> {
        self.children.get(&(node, seg.to_owned())).copied()
    }

    fn build(root: &DeTable<'_>, index: &LineIndex) -> Self {
        let mut map = PositionMap {
            pos: vec![Pos::START],
            children: HashMap::new(),
        };
        // Explicit stack: nesting is bounded by toml's recursion limit, but this stays
        // correct (and stack-safe) even if that limit changes.
        let mut stack: Vec<(usize, &DeValue<'_>)> = Vec::new();
        map.expand_table(0, root, index, &mut stack);
        while let Some((node, value)) = stack.pop() {
            match value {
                DeValue::Table(t) => map.expand_table(node, t, index, &mut stack),
                DeValue::Array(a) => {
                    for (i, item) in a.iter().enumerate() {
                        let child = map.add(node, i.to_string(), index.pos(item.span().start));
                        stack.push((child, item.get_ref()));
                    }
                }
                _ => {}
            }
        }
        map
    }

    fn expand_table<'a, 'i>(
        &mut self,
        node: usize,
        table: &'a DeTable<'i>,
        index: &LineIndex,
        stack: &mut Vec<(usize, &'a DeValue<'i>)>,
    ) {
        for (key, value) in table.iter() {
            let child = self.add(node, key.get_ref().to_string(), index.pos(key.span().start));
            stack.push((child, value.get_ref()));
        }
    }

    fn add(&mut self, parent: usize, seg: String, pos: Pos) -> usize {
        let id = self.pos.len();
        self.pos.push(pos);
        self.children.insert((parent, seg), id);
        id
    }
}

pub use crate::tool::is_valid_name;

/// Parse one spec file's text. `path` is used for diagnostics and to resolve `system_file`
/// (relative to the spec file's directory), which is read from disk.
///
/// Never panics. Returns the raw spec when every required part could be built and the TOML had
/// no syntax errors (values in a recovered tree can't be trusted), and every diagnostic found,
/// sorted by position. Diagnostics carry the spec's name once it is known to be valid.
pub fn parse_spec(path: &Path, src: &str) -> (Option<RawSpec>, Vec<Diagnostic>) {
    let index = LineIndex::new(src);
    let (root, errors) = DeTable::parse_recoverable(src);
    let mut parser = Parser {
        file: path.display().to_string(),
        index: &index,
        diags: Vec::new(),
        recovered: !errors.is_empty(),
    };
    parser.syntax_errors(&errors);
    let positions = PositionMap::build(root.get_ref(), &index);
    let (spec, name) = parser.spec(path, root.get_ref(), positions);
    let mut diags = parser.diags;
    if parser.recovered {
        // After a syntax error the recovered tree can misplace keys (an unclosed `[input`
        // header moves its keys to the top level), so shape findings from there on would be
        // noise. Those before the first syntax error are trustworthy and kept.
        let first_syntax = diags
            .iter()
            .filter(|d| d.code == codes::TOML_SYNTAX)
            .map(Diagnostic::pos)
            .min()
            .unwrap_or(Pos::START);
        diags.retain(|d| d.code == codes::TOML_SYNTAX || d.pos() < first_syntax);
    }
    if let Some(name) = name {
        for d in &mut diags {
            d.spec = Some(name.clone());
        }
    }
    // Stable, so diagnostics at one position keep the order they were found in.
    diags.sort_by_key(|d| (d.line, d.column));
    (spec, diags)
}

/// Read and parse one spec file. Content that is not UTF-8 is a `toml-syntax` diagnostic at the
/// first bad byte, not an error; only failing to read the file is.
pub fn parse_spec_file(path: &Path) -> Result<(Option<RawSpec>, Vec<Diagnostic>), std::io::Error> {
    let bytes = std::fs::read(path)?;
    match String::from_utf8(bytes) {
        Ok(src) => Ok(parse_spec(path, &src)),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let prefix = String::from_utf8_lossy(&e.as_bytes()[..valid]);
            let pos = LineIndex::new(&prefix).pos(valid);
            let diag = Diagnostic::error(
                path.display().to_string(),
                pos,
                codes::TOML_SYNTAX,
                format!("file is not valid UTF-8 (first invalid byte at offset {valid})"),
            );
            Ok((None, vec![diag]))
        }
    }
}

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "system",
    "system_file",
    "tools",
    "model",
    "limits",
    "input",
    "output",
    "examples",
];
const LIMIT_KEYS: &[&str] = &[
    "max_turns",
    "max_cost_usd",
    "timeout_secs",
    "max_output_chars",
    "max_tool_calls_per_turn",
    "max_tool_result_chars_per_turn",
];
const EXAMPLE_KEYS: &[&str] = &["name", "input", "output"];

/// Beyond this many, syntax errors are summarised: a garbage file can produce one per token,
/// and nobody reads the thousandth.
const MAX_SYNTAX_DIAGNOSTICS: usize = 100;
/// Belt and braces under toml's own recursion limit (80 per value, plus dotted keys/headers).
const MAX_JSON_DEPTH: usize = 512;

type Item<'i> = Spanned<DeValue<'i>>;
type Key<'i> = Spanned<DeString<'i>>;

/// Walks the recovered tree, collecting diagnostics.
struct Parser<'a> {
    file: String,
    index: &'a LineIndex,
    diags: Vec<Diagnostic>,
    /// The TOML had syntax errors: no spec is returned, and "missing key" errors are not
    /// reported because the key may well be in the part that failed to parse.
    recovered: bool,
}

impl Parser<'_> {
    fn error(&mut self, at: Range<usize>, code: &str, message: impl Into<String>) {
        let pos = self.index.pos(at.start);
        self.error_at(pos, code, message);
    }

    fn error_at(&mut self, pos: Pos, code: &str, message: impl Into<String>) {
        self.diags
            .push(Diagnostic::error(self.file.clone(), pos, code, message));
    }

    fn located<T>(&self, value: T, span: Range<usize>) -> Located<T> {
        Located {
            value,
            pos: self.index.pos(span.start),
        }
    }

    fn syntax_errors(&mut self, errors: &[toml::de::Error]) {
        let mut seen = std::collections::HashSet::new();
        let mut shown = 0;
        let mut hidden = 0;
        for e in errors {
            // Recovery often reports one unclosed bracket many times over.
            if !seen.insert((e.span(), e.message().to_owned())) {
                continue;
            }
            if shown == MAX_SYNTAX_DIAGNOSTICS {
                hidden += 1;
                continue;
            }
            shown += 1;
            let at = e.span().unwrap_or(0..0);
            self.error(at, codes::TOML_SYNTAX, e.message().trim_end());
        }
        if hidden > 0 {
            let last = self.diags.last().map_or(Pos::START, Diagnostic::pos);
            self.error_at(
                last,
                codes::TOML_SYNTAX,
                format!("{hidden} more syntax errors not shown"),
            );
        }
    }

    fn missing(&mut self, pos: Pos, code: &str, message: String) {
        if !self.recovered {
            self.error_at(pos, code, message);
        }
    }

    /// Reports an unknown key, suggesting the closest known one. Returns the suggestion, so a
    /// caller does not also report that key as missing: one typo, one diagnostic.
    fn unknown_key<'k>(
        &mut self,
        key: &Key<'_>,
        known: &[&'k str],
        place: &str,
    ) -> Option<&'k str> {
        let k = key.get_ref().as_ref();
        let mut message = format!("unknown key `{}` {place}", shown(k));
        let mut suggested = None;
        if place == TOP_LEVEL && LIMIT_KEYS.contains(&k) {
            message.push_str(&format!("; `{k}` belongs in the [limits] table"));
        } else if let Some(best) = suggest(k, known) {
            message.push_str(&format!("; did you mean `{best}`?"));
            suggested = Some(best);
        } else {
            message.push_str(&format!(" (expected one of: {})", known.join(", ")));
        }
        self.error(key.span(), codes::UNKNOWN_KEY, message);
        suggested
    }

    /// The whole document. Returns the spec (when buildable) and its name (when valid).
    fn spec(
        &mut self,
        path: &Path,
        root: &DeTable<'_>,
        positions: PositionMap,
    ) -> (Option<RawSpec>, Option<String>) {
        let mut fields: HashMap<&str, (&Key<'_>, &Item<'_>)> = HashMap::new();
        // Keys an unknown key was taken for (`descripton`): not reported missing as well.
        let mut misspelt: Vec<&str> = Vec::new();
        for (key, value) in root.iter() {
            match TOP_KEYS.iter().find(|k| **k == key.get_ref().as_ref()) {
                Some(k) => {
                    fields.insert(k, (key, value));
                }
                None => misspelt.extend(self.unknown_key(key, TOP_KEYS, TOP_LEVEL)),
            }
        }

        let name = match fields.get("name") {
            Some((_, v)) => self.name(v),
            None if misspelt.contains(&"name") => None,
            None => {
                self.missing(
                    Pos::START,
                    codes::INVALID_NAME,
                    "missing `name` (the tool name a host sees, matching [A-Za-z0-9_-]{1,64})"
                        .into(),
                );
                None
            }
        };
        let description = match fields.get("description") {
            Some((_, v)) => self.description(v),
            None if misspelt.contains(&"description") => None,
            None => {
                self.missing(
                    Pos::START,
                    codes::INVALID_VALUE,
                    "missing `description` (a string telling the host model what this \
                     sub-agent does and when to use it)"
                        .into(),
                );
                None
            }
        };
        let (system, system_file) = (fields.get("system"), fields.get("system_file"));
        let system = if system.is_none()
            && system_file.is_none()
            && misspelt.iter().any(|k| k.starts_with("system"))
        {
            None
        } else {
            self.system(path, system.copied(), system_file.copied())
        };
        let tools = fields
            .get("tools")
            .map_or_else(Vec::new, |(_, v)| self.tools(v));
        let model = fields
            .get("model")
            .and_then(|(_, v)| self.string("model", v, "a string such as \"openai:gpt-4.1-mini\""))
            .and_then(|m| {
                if m.value.trim().is_empty() {
                    self.error_at(m.pos, codes::INVALID_VALUE, "`model` must not be empty");
                    None
                } else {
                    Some(m)
                }
            });
        let limits = match fields.get("limits") {
            Some((_, v)) => match v.get_ref() {
                DeValue::Table(t) => self.limits(t),
                other => {
                    self.invalid_type(v, "limits", "a table ([limits])", other);
                    RawLimits::default()
                }
            },
            None => RawLimits::default(),
        };
        let input = self.schema("input", fields.get("input").copied());
        let output = self.schema("output", fields.get("output").copied());
        let examples = match fields.get("examples") {
            Some((key, v)) => self.examples(key, v),
            None => {
                if !self.recovered {
                    self.no_examples(Pos::START);
                }
                Vec::new()
            }
        };

        let valid_name = name
            .as_ref()
            .filter(|n| is_valid_name(&n.value))
            .map(|n| n.value.clone());
        if self.recovered {
            return (None, valid_name);
        }
        let spec = match (name, description, system, input, output) {
            (Some(name), Some(description), Some(system), Some(input), Some(output)) => {
                Some(RawSpec {
                    path: path.to_owned(),
                    name,
                    description,
                    system,
                    tools,
                    model,
                    limits,
                    input,
                    output,
                    examples,
                    positions,
                })
            }
            _ => None,
        };
        (spec, valid_name)
    }

    fn invalid_type(&mut self, v: &Item<'_>, key: &str, expected: &str, found: &DeValue<'_>) {
        let message = format!("`{key}` must be {expected}, found {}", found.type_str());
        self.error(v.span(), codes::INVALID_VALUE, message);
    }

    /// A string value, or an `invalid-value` diagnostic. Placeholders left by syntax-error
    /// recovery have empty spans and are skipped silently: they were reported already.
    fn string(&mut self, key: &str, v: &Item<'_>, expected: &str) -> Option<Located<String>> {
        if v.span().is_empty() {
            return None;
        }
        match v.get_ref() {
            DeValue::String(s) => Some(self.located(s.to_string(), v.span())),
            other => {
                self.invalid_type(v, key, expected, other);
                None
            }
        }
    }

    fn name(&mut self, v: &Item<'_>) -> Option<Located<String>> {
        let name = self.string("name", v, "a string matching [A-Za-z0-9_-]{1,64}")?;
        if !is_valid_name(&name.value) {
            self.error_at(
                name.pos,
                codes::INVALID_NAME,
                format!(
                    "name \"{}\" must be 1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`",
                    shown(&name.value)
                ),
            );
        }
        Some(name)
    }

    fn description(&mut self, v: &Item<'_>) -> Option<Located<String>> {
        let d = self.string("description", v, "a string")?;
        if d.value.trim().is_empty() {
            self.error_at(
                d.pos,
                codes::INVALID_VALUE,
                "`description` must not be empty: the host model chooses tools by it",
            );
        }
        Some(d)
    }

    fn system(
        &mut self,
        path: &Path,
        system: Option<(&Key<'_>, &Item<'_>)>,
        file: Option<(&Key<'_>, &Item<'_>)>,
    ) -> Option<Located<String>> {
        match (system, file) {
            (Some((_, v)), None) => self.string("system", v, "a string (the system prompt)"),
            (None, Some((_, v))) => {
                let rel = self.string("system_file", v, "a string (a path to the prompt)")?;
                if rel.value.is_empty() {
                    self.error_at(rel.pos, codes::INVALID_VALUE, "`system_file` is empty");
                    return None;
                }
                let dir = path.parent().unwrap_or(Path::new(""));
                let resolved = dir.join(&rel.value);
                match std::fs::read_to_string(&resolved) {
                    Ok(text) => Some(Located {
                        value: text,
                        pos: rel.pos,
                    }),
                    Err(e) => {
                        self.error_at(
                            rel.pos,
                            codes::INVALID_VALUE,
                            format!(
                                "cannot read system_file \"{}\" (resolved to {}): {e}",
                                shown(&rel.value),
                                resolved.display()
                            ),
                        );
                        None
                    }
                }
            }
            (Some((_, v)), Some((key, _))) => {
                self.error(
                    key.span(),
                    codes::INVALID_VALUE,
                    "give either `system` or `system_file`, not both",
                );
                // Keep the inline prompt so later checks still run; the error stands.
                self.string("system", v, "a string (the system prompt)")
            }
            (None, None) => {
                self.missing(
                    Pos::START,
                    codes::INVALID_VALUE,
                    "missing `system` (the system prompt) or `system_file` (a path to it, \
                     relative to this file)"
                        .into(),
                );
                None
            }
        }
    }

    fn tools(&mut self, v: &Item<'_>) -> Vec<Located<String>> {
        let expected = "an array of tool names, e.g. [\"read_file\", \"grep\"]";
        let items = match v.get_ref() {
            DeValue::Array(a) => a,
            _ if v.span().is_empty() => return Vec::new(),
            other => {
                self.invalid_type(v, "tools", expected, other);
                return Vec::new();
            }
        };
        let mut tools = Vec::new();
        for item in items.iter() {
            let Some(tool) = self.string("tools", item, expected) else {
                continue;
            };
            if !is_valid_name(&tool.value) {
                self.error_at(
                    tool.pos,
                    codes::INVALID_NAME,
                    format!(
                        "tool name \"{}\" must be 1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`",
                        shown(&tool.value)
                    ),
                );
                continue;
            }
            tools.push(tool);
        }
        tools
    }

    fn limits(&mut self, table: &DeTable<'_>) -> RawLimits {
        let mut limits = RawLimits::default();
        for (key, v) in table.iter() {
            match key.get_ref().as_ref() {
                "max_turns" => {
                    limits.max_turns = self
                        .positive_int("max_turns", v, u64::from(u32::MAX))
                        .and_then(|l| {
                            Some(Located {
                                value: u32::try_from(l.value).ok()?,
                                pos: l.pos,
                            })
                        });
                }
                "max_cost_usd" => limits.max_cost_usd = self.cost(v),
                "timeout_secs" => {
                    limits.timeout_secs = self.positive_int("timeout_secs", v, u64::MAX)
                }
                "max_output_chars" => {
                    limits.max_output_chars = self.positive_int("max_output_chars", v, u64::MAX);
                }
                k @ "max_tool_calls_per_turn" => {
                    limits.max_tool_calls_per_turn = self.positive_int(k, v, u64::MAX);
                }
                k @ "max_tool_result_chars_per_turn" => {
                    limits.max_tool_result_chars_per_turn = self.positive_int(k, v, u64::MAX);
                }
                _ => {
                    self.unknown_key(key, LIMIT_KEYS, "in [limits]");
                }
            }
        }
        limits
    }

    fn positive_int(&mut self, key: &str, v: &Item<'_>, max: u64) -> Option<Located<u64>> {
        if v.span().is_empty() {
            return None;
        }
        let problem = match v.get_ref() {
            DeValue::Integer(i) => match i128::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) if n < 0 => format!("`{key}` must be a positive integer, found {n}"),
                Ok(0) => format!("`{key}` must be at least 1, found 0"),
                Ok(n) => match u64::try_from(n) {
                    Ok(n) if n <= max => return Some(self.located(n, v.span())),
                    _ => format!("`{key}` is too large (at most {max}), found {n}"),
                },
                Err(_) => format!("`{key}` is too large (at most {max})"),
            },
            other => format!(
                "`{key}` must be a positive integer, found {}",
                other.type_str()
            ),
        };
        self.error(v.span(), codes::BAD_LIMITS, problem);
        None
    }

    fn cost(&mut self, v: &Item<'_>) -> Option<Located<Decimal>> {
        if v.span().is_empty() {
            return None;
        }
        let expected = "`max_cost_usd` must be a decimal number of US dollars such as \"0.20\"";
        let parsed = match v.get_ref() {
            DeValue::String(s) => Decimal::from_str_exact(s.trim())
                .map_err(|_| format!("{expected}, found \"{}\"", shown(s))),
            DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
                .ok()
                .and_then(|n| Decimal::from_str_exact(&n.to_string()).ok())
                .ok_or_else(|| format!("{expected}; {i} is out of range")),
            // Go through the float's shortest round-trip text, so 0.2 is 0.2, not
            // 0.200000000000000011102230246251565404236316680908203125.
            DeValue::Float(f) => f
                .as_str()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .and_then(|x| Decimal::from_str(&x.to_string()).ok())
                .ok_or_else(|| format!("{expected}, found {f}")),
            other => Err(format!("{expected}, found {}", other.type_str())),
        };
        match parsed.map(crate::budget::check_limit_usd) {
            Ok(Ok(d)) => Some(self.located(d, v.span())),
            Ok(Err(e)) => {
                self.error(v.span(), codes::BAD_LIMITS, format!("`max_cost_usd` {e}"));
                None
            }
            Err(message) => {
                self.error(v.span(), codes::BAD_LIMITS, message);
                None
            }
        }
    }

    /// `[input]` or `[output]`: a table, converted to JSON.
    fn schema(
        &mut self,
        key: &str,
        field: Option<(&Key<'_>, &Item<'_>)>,
    ) -> Option<Located<Value>> {
        let Some((_, v)) = field else {
            self.missing(
                Pos::START,
                codes::INVALID_VALUE,
                format!("missing [{key}] (the {key} contract: a JSON Schema written as TOML)"),
            );
            return None;
        };
        match v.get_ref() {
            DeValue::Table(_) => {
                let json = self.json(v, 0)?;
                Some(self.located(json, v.span()))
            }
            _ if v.span().is_empty() => None,
            other => {
                self.invalid_type(v, key, "a table (a JSON Schema object)", other);
                None
            }
        }
    }

    fn no_examples(&mut self, pos: Pos) {
        self.diags.push(Diagnostic::warning(
            self.file.clone(),
            pos,
            codes::NO_EXAMPLES,
            "no [[examples]]: add one input/output pair so `check` can test the contracts",
        ));
    }

    fn examples(&mut self, key: &Key<'_>, v: &Item<'_>) -> Vec<RawExample> {
        let items = match v.get_ref() {
            DeValue::Array(a) => a,
            _ if v.span().is_empty() => return Vec::new(),
            other => {
                self.invalid_type(v, "examples", "an array of tables ([[examples]])", other);
                return Vec::new();
            }
        };
        if items.is_empty() {
            let pos = self.index.pos(key.span().start);
            self.no_examples(pos);
        }
        let mut examples = Vec::new();
        for (index, item) in items.iter().enumerate() {
            match item.get_ref() {
                DeValue::Table(t) => {
                    if let Some(e) = self.example(index, item.span(), t) {
                        examples.push(e);
                    }
                }
                _ if item.span().is_empty() => {}
                other => self.invalid_type(
                    item,
                    "examples",
                    "an array of tables with `input` and `output`",
                    other,
                ),
            }
        }
        examples
    }

    fn example(
        &mut self,
        index: usize,
        span: Range<usize>,
        table: &DeTable<'_>,
    ) -> Option<RawExample> {
        let pos = self.index.pos(span.start);
        let (mut name, mut input, mut output) = (None, None, None);
        let (mut has_input, mut has_output) = (false, false);
        let mut misspelt = Vec::new();
        for (key, v) in table.iter() {
            match key.get_ref().as_ref() {
                "name" => name = self.string("name", v, "a string"),
                "input" => {
                    has_input = true;
                    input = self.json(v, 0).map(|j| self.located(j, v.span()));
                }
                "output" => {
                    has_output = true;
                    output = self.json(v, 0).map(|j| self.located(j, v.span()));
                }
                _ => misspelt.extend(self.unknown_key(key, EXAMPLE_KEYS, "in [[examples]]")),
            }
        }
        for (present, which) in [(has_input, "input"), (has_output, "output")] {
            if !present && !misspelt.contains(&which) {
                self.missing(
                    pos,
                    codes::INVALID_VALUE,
                    format!("example {} is missing `{which}`", index + 1),
                );
            }
        }
        Some(RawExample {
            index,
            pos,
            name,
            input: input?,
            output: output?,
        })
    }

    /// TOML → JSON. Integers stay integers and floats floats; datetimes become their RFC 3339
    /// text. What JSON cannot hold (NaN, infinities, integers past u64) is `invalid-value`.
    fn json(&mut self, v: &Item<'_>, depth: usize) -> Option<Value> {
        if depth > MAX_JSON_DEPTH {
            self.error(v.span(), codes::INVALID_VALUE, "value is nested too deeply");
            return None;
        }
        Some(match v.get_ref() {
            DeValue::String(s) => Value::String(s.to_string()),
            DeValue::Integer(i) => {
                let n = i64::from_str_radix(i.as_str(), i.radix())
                    .map(Number::from)
                    .or_else(|_| u64::from_str_radix(i.as_str(), i.radix()).map(Number::from));
                match n {
                    Ok(n) => Value::Number(n),
                    Err(_) => {
                        self.error(
                            v.span(),
                            codes::INVALID_VALUE,
                            format!("integer {i} is out of range"),
                        );
                        return None;
                    }
                }
            }
            DeValue::Float(f) => match f.as_str().parse::<f64>().ok().and_then(Number::from_f64) {
                Some(n) => Value::Number(n),
                None => {
                    self.error(
                        v.span(),
                        codes::INVALID_VALUE,
                        format!("{f} has no JSON equivalent (JSON has no NaN or infinity)"),
                    );
                    return None;
                }
            },
            DeValue::Boolean(b) => Value::Bool(*b),
            DeValue::Datetime(d) => Value::String(d.to_string()),
            DeValue::Array(a) => {
                let mut out = Vec::with_capacity(a.len());
                let mut ok = true;
                for item in a.iter() {
                    // Keep going after a failure, to report every bad value.
                    match self.json(item, depth + 1) {
                        Some(j) => out.push(j),
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                Value::Array(out)
            }
            DeValue::Table(t) => {
                let mut out = Map::with_capacity(t.len());
                let mut ok = true;
                for (key, item) in t.iter() {
                    match self.json(item, depth + 1) {
                        Some(j) => {
                            out.insert(key.get_ref().to_string(), j);
                        }
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                Value::Object(out)
            }
        })
    }
}

const TOP_LEVEL: &str = "at the top level";

/// The known key closest to `key`, if within edit distance 2 (and not a wholesale rewrite of a
/// very short key).
pub(crate) fn suggest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .filter_map(|k| edit_distance(key, k, 2).map(|d| (d, *k)))
        .filter(|(d, _)| *d < key.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance between `a` and `b` in characters, or `None` when it exceeds `limit`.
/// The length check first keeps a 10 MB key from costing a full table.
fn edit_distance(a: &str, b: &str, limit: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().take(b.len() + limit + 1).collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > limit {
        return None;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    let d = prev[b.len()];
    (d <= limit).then_some(d)
}

/// A user-written string as quoted in a message: long ones are cut, so one absurd value can't
/// make every diagnostic about it megabytes long.
fn shown(s: &str) -> String {
    const MAX: usize = 60;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Severity;
    use serde_json::json;

    /// The flagship example (`specs/research_topic.toml`, as the README shows it), verbatim.
    const DESIGN_EXAMPLE: &str = r#"name = "research_topic"            # the tool name a host sees: [A-Za-z0-9_-]{1,64}
description = "Investigate a topic across the workspace and return findings. Not for one lookup."
system = "You are a focused researcher. ..."   # or: system_file = "prompts/research.md"
tools = ["read_file", "grep"]      # narrower than the host's
model = "openai:gpt-4.1-mini"      # optional; default: the host's model

[limits]
max_turns = 8
max_cost_usd = "0.20"              # decimal string; a TOML number is accepted too
timeout_secs = 120
max_output_chars = 4000

[input]                            # JSON Schema, written as TOML
type = "object"
required = ["question"]
additionalProperties = false
properties.question = { type = "string", minLength = 10, maxLength = 500 }

[output]
type = "object"
required = ["findings", "gaps"]
additionalProperties = false
properties.gaps = { type = "array", maxItems = 3, items = { type = "string", maxLength = 200 } }
[output.properties.findings]
type = "array"
maxItems = 6
items = { type = "object", additionalProperties = false, required = ["claim", "source_ids"], properties = { claim = { type = "string", maxLength = 300 }, source_ids = { type = "array", minItems = 1, maxItems = 5, items = { type = "string", maxLength = 64 } } } }

[[examples]]                       # contract examples: both sides must validate
input = { question = "Which authentication library does this project use?" }
output = { findings = [{ claim = "It uses argon2 for password hashing.", source_ids = ["Cargo.toml"] }], gaps = [] }
"#;

    /// A minimal valid spec, to which tests append or in which they replace lines.
    const MINIMAL: &str = r#"name = "s"
description = "d"
system = "p"
[input]
type = "object"
[output]
type = "object"
[[examples]]
input = {}
output = {}
"#;

    fn p(line: u32, column: u32) -> Pos {
        Pos { line, column }
    }

    fn parse(src: &str) -> (Option<RawSpec>, Vec<Diagnostic>) {
        parse_spec(Path::new("specs/t.toml"), src)
    }

    /// (code, line, column) of every diagnostic, for exact comparisons.
    fn summary(diags: &[Diagnostic]) -> Vec<(&str, u32, u32)> {
        diags
            .iter()
            .map(|d| (d.code.as_str(), d.line, d.column))
            .collect()
    }

    #[test]
    fn design_example_parses_cleanly() {
        let (spec, diags) = parse(DESIGN_EXAMPLE);
        assert!(diags.is_empty(), "{diags:#?}");
        let spec = spec.expect("spec");
        assert_eq!(spec.path, Path::new("specs/t.toml"));
        assert_eq!(spec.name.value, "research_topic");
        assert_eq!(spec.name.pos, p(1, 8));
        assert!(spec.description.value.starts_with("Investigate a topic"));
        assert_eq!(spec.description.pos, p(2, 15));
        assert_eq!(spec.system.value, "You are a focused researcher. ...");
        let tools: Vec<_> = spec
            .tools
            .iter()
            .map(|t| (t.value.as_str(), t.pos))
            .collect();
        assert_eq!(tools, [("read_file", p(4, 10)), ("grep", p(4, 23))]);
        assert_eq!(spec.model.as_ref().unwrap().value, "openai:gpt-4.1-mini");

        let l = &spec.limits;
        assert_eq!(
            l.max_turns,
            Some(Located {
                value: 8,
                pos: p(8, 13)
            })
        );
        assert_eq!(l.max_cost_usd.as_ref().unwrap().value, Decimal::new(20, 2));
        assert_eq!(l.max_cost_usd.as_ref().unwrap().pos, p(9, 16));
        assert_eq!(l.timeout_secs.as_ref().unwrap().value, 120);
        assert_eq!(l.max_output_chars.as_ref().unwrap().value, 4000);

        assert_eq!(
            spec.input.value,
            json!({"type": "object", "required": ["question"], "additionalProperties": false,
                   "properties": {"question": {"type": "string", "minLength": 10, "maxLength": 500}}})
        );
        assert_eq!(spec.input.pos, p(13, 1));
        let out = &spec.output.value;
        // preserve_order: properties keep file order (gaps was written first).
        let props: Vec<_> = out["properties"].as_object().unwrap().keys().collect();
        assert_eq!(props, ["gaps", "findings"]);
        assert_eq!(out["properties"]["findings"]["maxItems"], json!(6));
        assert_eq!(
            out["properties"]["findings"]["items"]["properties"]["source_ids"]["items"],
            json!({"type": "string", "maxLength": 64})
        );

        assert_eq!(spec.examples.len(), 1);
        let ex = &spec.examples[0];
        assert_eq!((ex.index, ex.pos), (0, p(29, 1)));
        assert_eq!(ex.name, None);
        assert_eq!(
            ex.input.value,
            json!({"question": "Which authentication library does this project use?"})
        );
        assert_eq!(
            ex.output.value["findings"][0]["source_ids"],
            json!(["Cargo.toml"])
        );
        assert_eq!(ex.output.pos, p(31, 10));
    }

    #[test]
    fn positions_cover_dotted_keys_inline_tables_headers_and_arrays() {
        let (spec, _) = parse(DESIGN_EXAMPLE);
        let m = &spec.unwrap().positions;
        assert_eq!(m.locate(&[]), Some(Pos::START));
        // Dotted key: points at `question` in `properties.question = ...`.
        assert_eq!(
            m.locate(&["input", "properties", "question"]),
            Some(p(17, 12))
        );
        // The implicit `properties` table: its first dotted mention.
        assert_eq!(m.locate(&["input", "properties"]), Some(p(17, 1)));
        assert_eq!(
            m.locate(&["input", "properties", "question", "maxLength"]),
            Some(p(17, 58))
        );
        assert_eq!(
            m.locate(&["output", "properties", "gaps", "items", "maxLength"]),
            Some(p(23, 78))
        );
        // A [table.header]: the name in the header; its keys on their own lines.
        assert_eq!(
            m.locate(&["output", "properties", "findings"]),
            Some(p(24, 20))
        );
        assert_eq!(
            m.locate(&["output", "properties", "findings", "maxItems"]),
            Some(p(26, 1))
        );
        // Deep inline tables on one line.
        let claim = [
            "output",
            "properties",
            "findings",
            "items",
            "properties",
            "claim",
        ];
        assert_eq!(m.locate(&claim), Some(p(27, 109)));
        // Array elements and arrays of tables.
        assert_eq!(m.locate(&["tools", "1"]), Some(p(4, 23)));
        assert_eq!(m.locate(&["examples", "0"]), Some(p(29, 1)));
        assert_eq!(m.locate(&["examples", "0", "output"]), Some(p(31, 1)));
        assert_eq!(m.locate(&["examples", "1"]), None);
        assert_eq!(m.locate(&["output", "nope"]), None);

        assert_eq!(m.locate_pointer("input", "/properties/question"), p(17, 12));
        assert_eq!(
            m.locate_pointer("input", "#/properties/question"),
            p(17, 12)
        );
        assert_eq!(
            m.locate_pointer("output", "/properties/findings/items/properties/claim"),
            p(27, 109)
        );
        assert_eq!(
            m.locate_pointer("output", "/properties/gaps/items/maxLength"),
            p(23, 78)
        );
        // Falls back to the nearest ancestor that exists.
        assert_eq!(
            m.locate_pointer("output", "/properties/findings/nope/deeper"),
            p(24, 20)
        );
        assert_eq!(m.locate_pointer("output", ""), p(19, 2));
        assert_eq!(m.locate_pointer("missing", "/x"), Pos::START);
    }

    #[test]
    fn pointer_segments_are_unescaped() {
        let src = MINIMAL.replace(
            "[output]\ntype = \"object\"\n",
            "[output]\ntype = \"object\"\nproperties.\"a/b\" = {}\nproperties.\"c~d\" = {}\n",
        );
        let (spec, diags) = parse(&src);
        assert!(diags.is_empty(), "{diags:#?}");
        let m = spec.unwrap().positions;
        assert_eq!(m.locate_pointer("output", "/properties/a~1b"), p(8, 12));
        assert_eq!(m.locate_pointer("output", "/properties/c~0d"), p(9, 12));
    }

    #[test]
    fn toml_syntax_errors_are_all_reported_at_their_spans() {
        let src = "name = \"s\"\ndescription = = \"d\"\n[input\ntype = 'object'\n";
        let (spec, diags) = parse(src);
        assert!(spec.is_none());
        assert_eq!(
            summary(&diags),
            [
                ("toml-syntax", 2, 15),
                ("toml-syntax", 2, 17),
                ("toml-syntax", 3, 7)
            ],
            "{diags:#?}"
        );
        assert!(diags.iter().all(|d| d.severity == Severity::Error));
        assert_eq!(diags[0].spec.as_deref(), Some("s"));
        assert_eq!(diags[0].file, "specs/t.toml");
    }

    #[test]
    fn shape_errors_before_the_first_syntax_error_are_kept() {
        let src = "name = \"s\"\nmodle = \"m\"\ntools = 3\n[input\ntype = 'object'\nfoo = 1\n";
        let (spec, diags) = parse(src);
        assert!(spec.is_none());
        assert_eq!(
            summary(&diags),
            [
                ("unknown-key", 2, 1),
                ("invalid-value", 3, 9),
                ("toml-syntax", 4, 7)
            ],
            "{diags:#?}"
        );
    }

    #[test]
    fn duplicate_keys_are_syntax_errors() {
        let src = MINIMAL.replace("description", "name = \"again\"\ndescription");
        let (spec, diags) = parse(&src);
        assert!(spec.is_none());
        assert_eq!(summary(&diags), [("toml-syntax", 2, 1)]);
    }

    #[test]
    fn unknown_keys_with_did_you_mean() {
        let src = MINIMAL.replace("[input]", "[limits]\nmax_turn = 8\n[input]");
        let (spec, diags) = parse(&src);
        assert_eq!(summary(&diags), [("unknown-key", 5, 1)]);
        assert_eq!(
            diags[0].message,
            "unknown key `max_turn` in [limits]; did you mean `max_turns`?"
        );
        // Unknown keys do not stop the spec from being built.
        assert!(spec.is_some());
    }

    #[test]
    fn unknown_keys_everywhere_but_inside_schemas() {
        let src = r#"name = "s"
descripton = "d"
description = "d"
system = "p"
max_turns = 3
zzzzzz = 1
[input]
type = "object"
notAKeyword = "schemas are not checked here"
[output]
type = "object"
[[examples]]
nmae = "first"
input = {}
output = {}
"#;
        let (_, diags) = parse(src);
        assert_eq!(
            summary(&diags),
            [
                ("unknown-key", 2, 1),
                ("unknown-key", 5, 1),
                ("unknown-key", 6, 1),
                ("unknown-key", 13, 1)
            ],
            "{diags:#?}"
        );
        assert!(diags[0].message.ends_with("did you mean `description`?"));
        assert!(diags[1].message.contains("belongs in the [limits] table"));
        assert!(diags[2]
            .message
            .contains("expected one of: name, description"));
        assert!(diags[3]
            .message
            .contains("in [[examples]]; did you mean `name`?"));
    }

    #[test]
    fn a_misspelt_key_is_not_also_reported_missing() {
        for (from, to, line) in [
            ("description = \"d\"", "descripton = \"d\"", 2),
            ("name = \"s\"", "nmae = \"s\"", 1),
            ("system = \"p\"", "sytem = \"p\"", 3),
            ("input = {}", "inptu = {}", 9),
        ] {
            let src = MINIMAL.replace(from, to);
            let (_, diags) = parse(&src);
            assert_eq!(
                summary(&diags),
                [("unknown-key", line, 1)],
                "{to}: {diags:#?}"
            );
            assert!(diags[0].message.contains("did you mean"), "{diags:#?}");
        }
        // A key that is missing outright (no near miss) is still reported.
        let (_, diags) = parse(&MINIMAL.replace("description = \"d\"\n", "zzzzzz = 1\n"));
        assert_eq!(
            summary(&diags),
            [("invalid-value", 1, 1), ("unknown-key", 2, 1)],
            "{diags:#?}"
        );
    }

    #[test]
    fn invalid_names() {
        let src = MINIMAL.replace(
            "name = \"s\"",
            "name = \"bad name!\"\ntools = [\"ok\", \"no/slash\", \"\"]",
        );
        let (spec, diags) = parse(&src);
        assert_eq!(
            summary(&diags),
            [
                ("invalid-name", 1, 8),
                ("invalid-name", 2, 16),
                ("invalid-name", 2, 28)
            ],
            "{diags:#?}"
        );
        // An invalid name is not a "known" name for the spec field.
        assert!(diags.iter().all(|d| d.spec.is_none()));
        let spec = spec.unwrap();
        let tools: Vec<_> = spec.tools.iter().map(|t| t.value.as_str()).collect();
        assert_eq!(tools, ["ok"]);

        let long = "x".repeat(65);
        let (_, diags) = parse(&MINIMAL.replace("name = \"s\"", &format!("name = \"{long}\"")));
        assert_eq!(summary(&diags), [("invalid-name", 1, 8)]);
        assert!(is_valid_name(&"x".repeat(64)));
        assert!(is_valid_name("a-b_C9"));
        assert!(!is_valid_name("é"));

        let (spec, diags) = parse(&MINIMAL.replace("name = \"s\"\n", ""));
        assert!(spec.is_none());
        assert_eq!(summary(&diags), [("invalid-name", 1, 1)]);
        assert!(diags[0].message.starts_with("missing `name`"));
    }

    #[test]
    fn invalid_values() {
        let src = r#"name = "s"
description = 5
system = "p"
tools = "read_file"
model = 4
limits = 3
input = "object"
examples = {}
[output]
type = "object"
"#;
        let (spec, diags) = parse(src);
        assert!(spec.is_none());
        assert_eq!(
            summary(&diags),
            [
                ("invalid-value", 2, 15),
                ("invalid-value", 4, 9),
                ("invalid-value", 5, 9),
                ("invalid-value", 6, 10),
                ("invalid-value", 7, 9),
                ("invalid-value", 8, 12)
            ],
            "{diags:#?}"
        );
        assert_eq!(
            diags[0].message,
            "`description` must be a string, found integer"
        );
        assert!(diags[1]
            .message
            .starts_with("`tools` must be an array of tool names"));
        assert!(diags.iter().all(|d| d.spec.as_deref() == Some("s")));
    }

    #[test]
    fn empty_description_and_missing_required_keys() {
        let (spec, diags) = parse("name = \"s\"\ndescription = \"  \"\n[[examples]]\ninput = 1\n");
        assert!(spec.is_none());
        assert_eq!(
            summary(&diags),
            [
                ("invalid-value", 1, 1), // no system
                ("invalid-value", 1, 1), // no input
                ("invalid-value", 1, 1), // no output
                ("invalid-value", 2, 15),
                ("invalid-value", 3, 1) // example without output
            ],
            "{diags:#?}"
        );
        assert!(diags[0].message.contains("`system_file`"));
        assert!(diags[4].message.contains("example 1 is missing `output`"));
    }

    #[test]
    fn system_and_system_file_are_exclusive() {
        let src = MINIMAL.replace("system = \"p\"", "system = \"p\"\nsystem_file = \"p.md\"");
        let (spec, diags) = parse(&src);
        assert_eq!(summary(&diags), [("invalid-value", 4, 1)]);
        // The inline prompt is kept so later checks can still run.
        assert_eq!(spec.unwrap().system.value, "p");
    }

    #[test]
    fn system_file_is_resolved_relative_to_the_spec() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("specs/prompts")).unwrap();
        std::fs::write(dir.path().join("specs/prompts/r.md"), "You research.\n").unwrap();
        let spec_path = dir.path().join("specs/r.toml");
        let src = MINIMAL.replace("system = \"p\"", "system_file = \"prompts/r.md\"");
        std::fs::write(&spec_path, &src).unwrap();

        let (spec, diags) = parse_spec_file(&spec_path).unwrap();
        assert!(diags.is_empty(), "{diags:#?}");
        let system = spec.unwrap().system;
        assert_eq!(system.value, "You research.\n");
        assert_eq!(system.pos, p(3, 15));

        let missing = MINIMAL.replace("system = \"p\"", "system_file = \"prompts/nope.md\"");
        let (spec, diags) = parse_spec(&spec_path, &missing);
        assert!(spec.is_none());
        assert_eq!(summary(&diags), [("invalid-value", 3, 15)]);
        assert!(
            diags[0].message.contains("prompts/nope.md"),
            "{}",
            diags[0].message
        );
    }

    #[test]
    fn bad_limits() {
        let src = r#"[limits]
max_turns = 0
max_cost_usd = "0"
timeout_secs = 0
max_output_chars = 0
"#;
        let (_, diags) = parse(&format!("{MINIMAL}{src}"));
        assert_eq!(
            summary(&diags),
            [
                ("bad-limits", 12, 13),
                ("bad-limits", 13, 16),
                ("bad-limits", 14, 16),
                ("bad-limits", 15, 20)
            ],
            "{diags:#?}"
        );
        assert_eq!(diags[0].message, "`max_turns` must be at least 1, found 0");

        let src = r#"[limits]
max_turns = -3
max_cost_usd = -1.5
timeout_secs = "120"
max_output_chars = 1.5
"#;
        let (spec, diags) = parse(&format!("{MINIMAL}{src}"));
        assert_eq!(
            summary(&diags),
            [
                ("bad-limits", 12, 13),
                ("bad-limits", 13, 16),
                ("bad-limits", 14, 16),
                ("bad-limits", 15, 20)
            ],
            "{diags:#?}"
        );
        assert_eq!(
            diags[0].message,
            "`max_turns` must be a positive integer, found -3"
        );
        assert_eq!(
            diags[2].message,
            "`timeout_secs` must be a positive integer, found string"
        );
        assert_eq!(spec.unwrap().limits, RawLimits::default());

        let src = "[limits]\nmax_turns = 4294967296\nmax_cost_usd = \"twenty cents\"\n";
        let (_, diags) = parse(&format!("{MINIMAL}{src}"));
        assert_eq!(
            summary(&diags),
            [("bad-limits", 12, 13), ("bad-limits", 13, 16)]
        );
        assert!(diags[0].message.contains("too large"));
        assert!(diags[1].message.contains("\"twenty cents\""));
    }

    #[test]
    fn cost_as_decimal_string_and_as_number() {
        let cost = |v: &str| {
            let (spec, diags) = parse(&format!("{MINIMAL}[limits]\nmax_cost_usd = {v}\n"));
            assert!(diags.is_empty(), "{v}: {diags:#?}");
            spec.unwrap().limits.max_cost_usd.unwrap().value
        };
        let d = cost("\"0.20\"");
        assert_eq!((d, d.scale()), (Decimal::new(20, 2), 2));
        let d = cost("0.2");
        assert_eq!((d, d.to_string().as_str()), (Decimal::new(2, 1), "0.2"));
        assert_eq!(cost("0.1").to_string(), "0.1");
        assert_eq!(cost("1e-2"), Decimal::new(1, 2));
        assert_eq!(cost("3"), Decimal::from(3));
        assert_eq!(cost("\"12.345\""), Decimal::new(12345, 3));
    }

    #[test]
    fn no_examples_is_a_warning() {
        let src = MINIMAL.replace("[[examples]]\ninput = {}\noutput = {}\n", "");
        let (spec, diags) = parse(&src);
        assert!(spec.is_some());
        assert_eq!(summary(&diags), [("no-examples", 1, 1)]);
        assert_eq!(diags[0].severity, Severity::Warning);
        assert_eq!(diags[0].spec.as_deref(), Some("s"));

        let (spec, diags) = parse(&format!("examples = []\n{src}"));
        assert!(spec.unwrap().examples.is_empty());
        assert_eq!(summary(&diags), [("no-examples", 1, 1)]);
    }

    #[test]
    fn several_errors_in_one_file_are_all_reported() {
        let src = r#"name = "has space"
description = ""
system = "p"
tools = ["grep", 7]
colour = "blue"
[limits]
max_turns = 0
timeout_sec = 5
[input]
type = "object"
[output]
type = "object"
minimum = nan
[[examples]]
input = {}
"#;
        let (spec, diags) = parse(src);
        assert!(spec.is_none()); // output has a NaN, so no output contract
        assert_eq!(
            summary(&diags),
            [
                ("invalid-name", 1, 8),
                ("invalid-value", 2, 15),
                ("invalid-value", 4, 18),
                ("unknown-key", 5, 1),
                ("bad-limits", 7, 13),
                ("unknown-key", 8, 1),
                ("invalid-value", 13, 11),
                ("invalid-value", 14, 1)
            ],
            "{diags:#?}"
        );
        assert!(diags[5].message.contains("did you mean `timeout_secs`?"));
    }

    #[test]
    fn toml_values_map_to_json() {
        let src = MINIMAL.replace(
            "[[examples]]\ninput = {}",
            "[[examples]]\nname = \"typed\"\ninput = { i = 0x10, f = 1.5, big = 9223372036854775807, b = true, \
             d = 1979-05-27T07:32:00Z, ld = 1979-05-27, a = [1, 2.0, \"x\"] }",
        );
        let (spec, diags) = parse(&src);
        assert!(diags.is_empty(), "{diags:#?}");
        let ex = &spec.unwrap().examples[0];
        assert_eq!(ex.name.as_ref().unwrap().value, "typed");
        let v = &ex.input.value;
        assert_eq!(v["i"], json!(16));
        assert!(v["i"].is_i64());
        assert!(v["f"].is_f64());
        assert_eq!(v["big"], json!(i64::MAX));
        assert_eq!(v["b"], json!(true));
        assert_eq!(v["d"], json!("1979-05-27T07:32:00Z"));
        assert_eq!(v["ld"], json!("1979-05-27"));
        assert_eq!(v["a"], json!([1, 2.0, "x"]));
        assert!(v["a"][1].is_f64());

        let src = MINIMAL.replace(
            "output = {}",
            "output = { x = inf, y = 99999999999999999999 }",
        );
        let (spec, diags) = parse(&src);
        assert!(spec.unwrap().examples.is_empty());
        assert_eq!(
            summary(&diags),
            [("invalid-value", 10, 16), ("invalid-value", 10, 25)]
        );
    }

    #[test]
    fn empty_file() {
        let (spec, diags) = parse("");
        assert!(spec.is_none());
        assert_eq!(
            summary(&diags),
            [
                ("invalid-name", 1, 1),
                ("invalid-value", 1, 1),
                ("invalid-value", 1, 1),
                ("invalid-value", 1, 1),
                ("invalid-value", 1, 1),
                ("no-examples", 1, 1)
            ]
        );
    }

    #[test]
    fn garbage_never_panics() {
        // A small deterministic generator: no need for a real RNG here.
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        const ALPHABET: &[u8] = b"[]{}=\"'.,#\n \t\\abcxyz019-_:+eE\r";
        for round in 0..300 {
            let len = (next() % 200) as usize;
            let text: String = if round % 2 == 0 {
                (0..len)
                    .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize] as char)
                    .collect()
            } else {
                let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            };
            let (_, diags) = parse(&text);
            assert!(!diags.is_empty(), "{text:?}");
            for d in &diags {
                assert!(d.line >= 1 && d.column >= 1);
            }
        }
        // Valid spec text cut at every point.
        for cut in 0..DESIGN_EXAMPLE.len() {
            if DESIGN_EXAMPLE.is_char_boundary(cut) {
                let _ = parse(&DESIGN_EXAMPLE[..cut]);
            }
        }
    }

    #[test]
    fn syntax_errors_are_capped_for_huge_garbage() {
        let src = "= = =\n".repeat(100_000);
        let (spec, diags) = parse(&src);
        assert!(spec.is_none());
        assert_eq!(
            diags
                .iter()
                .filter(|d| d.code == codes::TOML_SYNTAX)
                .count(),
            MAX_SYNTAX_DIAGNOSTICS + 1
        );
        assert!(diags
            .iter()
            .any(|d| d.message.ends_with("more syntax errors not shown")));
    }

    #[test]
    fn huge_file() {
        // ~10 MB: a long description and a wide schema.
        let mut src = MINIMAL.replace(
            "description = \"d\"",
            &format!("description = \"{}\"", "y".repeat(5_000_000)),
        );
        src.push_str("[output.properties]\n");
        for i in 0..200_000 {
            src.push_str(&format!("p{i} = {{ type = \"string\" }}\n"));
        }
        let (spec, diags) = parse(&src);
        assert!(diags.is_empty(), "{:?}", summary(&diags));
        let spec = spec.unwrap();
        assert_eq!(spec.description.value.len(), 5_000_000);
        assert_eq!(
            spec.positions.locate(&["output", "properties", "p199999"]),
            Some(p(200_011, 1))
        );
        // One 10 MB line of garbage.
        let (_, diags) = parse(&"x=1 ".repeat(2_500_000));
        assert!(!diags.is_empty());
    }

    #[test]
    fn deep_nesting_is_a_diagnostic_not_a_crash() {
        for src in [
            format!("input = {}", "[".repeat(10_000)),
            format!("input = {}", "{a=".repeat(10_000)),
            format!("{} = 1", vec!["k"; 10_000].join(".")),
            format!("[{}]\n", vec!["k"; 10_000].join(".")),
            format!("[[{}]]\n", vec!["k"; 10_000].join(".")),
            format!("input = {}1{}", "[".repeat(10_000), "]".repeat(10_000)),
        ] {
            let (spec, diags) = parse(&src);
            assert!(spec.is_none());
            assert!(
                diags.iter().any(|d| d.code == codes::TOML_SYNTAX),
                "{:?}",
                summary(&diags)
            );
        }
        // As deep as toml allows is still fine, and converts.
        let nested = format!("{}1{}", "[".repeat(70), "]".repeat(70));
        let src = MINIMAL.replace("output = {}", &format!("output = {nested}"));
        let (spec, diags) = parse(&src);
        assert!(diags.is_empty(), "{diags:#?}");
        assert!(spec.unwrap().examples[0].output.value.is_array());
    }

    #[test]
    fn non_utf8_file_is_a_syntax_diagnostic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, b"name = \"ok\"\ndesc\xFFription = 1\n").unwrap();
        let (spec, diags) = parse_spec_file(&path).unwrap();
        assert!(spec.is_none());
        assert_eq!(summary(&diags), [("toml-syntax", 2, 5)]);
        assert!(diags[0].message.contains("UTF-8"));
        assert!(parse_spec_file(&dir.path().join("absent.toml")).is_err());
    }

    #[test]
    fn byte_order_mark_does_not_shift_columns() {
        let (_, diags) = parse(&format!("\u{feff}{}", MINIMAL.replace("name", "nmae")));
        assert!(
            summary(&diags).contains(&("unknown-key", 1, 1)),
            "{diags:#?}"
        );
    }

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance("max_turn", "max_turns", 2), Some(1));
        assert_eq!(edit_distance("tiemout_secs", "timeout_secs", 2), Some(2));
        assert_eq!(edit_distance("kitten", "sitting", 2), None);
        assert_eq!(edit_distance("", "ab", 2), Some(2));
        assert_eq!(edit_distance(&"x".repeat(1_000_000), "name", 2), None);
        assert_eq!(suggest("tols", TOP_KEYS), Some("tools"));
        assert_eq!(suggest("x", TOP_KEYS), None);
        assert_eq!(shown(&"é".repeat(100)).chars().count(), 61);
    }
}
