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

mod keys;
mod positions;
mod raw;
mod settings;
mod values;
mod workspace;

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use serde_json::Value;
use toml::de::{DeString, DeTable, DeValue};
use toml::Spanned;

pub(crate) use crate::diag::shown;
use crate::diag::{codes, Diagnostic, LineIndex, Pos};
use crate::spec::core::SpecDef;
use crate::spec::Limits;

pub(crate) use keys::suggest;
#[cfg(test)]
use keys::MODEL_KEYS;
use keys::{EXAMPLE_KEYS, LIMIT_KEYS, TOP_KEYS};
use keys::{IN_LIMITS, TOP_LEVEL};
pub(crate) use positions::PositionMap;
pub(crate) use raw::{Located, RawExample, RawSpec, Written};

pub(crate) use crate::tool::is_valid_name;

/// Parse one spec file's text. `path` is used for diagnostics and to resolve `system_file`
/// (relative to the spec file's directory), which is read from disk.
///
/// Never panics. Returns the raw spec when every required part could be built and the TOML had
/// no syntax errors (values in a recovered tree can't be trusted), and every diagnostic found,
/// sorted by position. Diagnostics carry the spec's name once it is known to be valid.
pub(crate) fn parse_spec(path: &Path, src: &str) -> (Option<RawSpec>, Vec<Diagnostic>) {
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

/// The most bytes a spec file, or a prompt file it names, may hold (4 MiB): far above any
/// spec, and a bound on what a path a hostile file names can make us read.
pub(crate) const MAX_SPEC_FILE_BYTES: u64 = 4 << 20;

/// What kind of file `meta` describes, for a refusal: `a directory`, `a FIFO`, `a device`, …
pub(crate) fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_file() {
        return "a regular file";
    }
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// The file at `path` (a link followed), read whole when it is a regular file of at most
/// `max` bytes. Anything else is refused before it is opened: a FIFO would block the read
/// for ever, a device (`/dev/zero`) would never end it.
pub(crate) fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other(format!(
            "it is {}, not a regular file",
            file_kind(&meta)
        )));
    }
    let too_big = |n: u64| {
        std::io::Error::other(format!(
            "it is {n} bytes, over the {max} bytes such a file may hold"
        ))
    };
    if meta.len() > max {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Read and parse one spec file. Content that is not UTF-8 is a `toml-syntax` diagnostic at the
/// first bad byte, not an error; only failing to read the file is.
pub(crate) fn parse_spec_file(
    path: &Path,
) -> Result<(Option<RawSpec>, Vec<Diagnostic>), std::io::Error> {
    let bytes = read_regular(path, MAX_SPEC_FILE_BYTES)?;
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
        let mut def = SpecDef::default();
        let mut at = Written::default();
        if let Some((_, v)) = fields.get("model") {
            self.model(v, &mut def, &mut at);
        }
        if let Some((_, v)) = fields.get("output_mode") {
            let mode = self.output_mode(v);
            if let Some(mode) = at.put("output_mode", mode) {
                def.output_mode = mode;
            }
        }
        if let Some((_, v)) = fields.get("prompt_cache") {
            let cache = self.prompt_cache(v);
            def.prompt_cache = at.put("prompt_cache", cache);
        }
        if let Some((_, v)) = fields.get("require_tool_first") {
            let on = self.boolean("require_tool_first", v);
            if let Some(on) = at.put("require_tool_first", on) {
                def.require_tool_first = on;
            }
        }
        if let Some((_, v)) = fields.get("limits") {
            match v.get_ref() {
                DeValue::Table(t) => self.limits(t, &mut def.limits, &mut at),
                other => self.invalid_type(v, "limits", "a table ([limits])", other),
            }
        }
        if let Some((_, v)) = fields.get("workspace") {
            match v.get_ref() {
                DeValue::Table(t) => self.workspace(t, &mut def.workspace, &mut at),
                other => self.invalid_type(v, "workspace", "a table ([workspace])", other),
            }
        }
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
        if [&input, &output].iter().any(|s| s.is_none())
            || name.is_none()
            || description.is_none()
            || system.is_none()
        {
            // Too broken to build, so the builder will not check the limits and sampling
            // settings: ask it here, so one run still shows every mistake.
            let mut problems = Vec::new();
            crate::spec::builder::limit_problems(&def.limits, &mut problems);
            crate::spec::builder::sampling_problems(&def.sampling, &mut problems);
            for p in problems {
                let (key, table) = match p.at {
                    crate::spec::SpecLocation::Limit(key) => (key, "limits"),
                    crate::spec::SpecLocation::Sampling(key) => (key, "model"),
                    _ => ("", "limits"),
                };
                let pos = at
                    .pos(key)
                    .or_else(|| positions.locate(&[table]))
                    .unwrap_or(Pos::START);
                self.error_at(pos, p.code, p.message);
            }
        }
        let spec = match (name, description, system, input, output) {
            (Some(name), Some(description), Some(system), Some(input), Some(output)) => {
                (def.name, at.name) = (name.value, name.pos);
                (def.description, at.description) = (description.value, description.pos);
                (def.system, at.system) = (system.value, system.pos);
                let (names, pos): (Vec<String>, Vec<Pos>) =
                    tools.into_iter().map(|t| (t.value, t.pos)).unzip();
                (def.tools, at.tools) = (names.into(), pos);
                Some(RawSpec {
                    path: path.to_owned(),
                    def,
                    at,
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
                let read = read_regular(&resolved, MAX_SPEC_FILE_BYTES).and_then(|b| {
                    String::from_utf8(b).map_err(|_| std::io::Error::other("it is not UTF-8"))
                });
                match read {
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
    /// The `[limits]` table: each value converted to its [`Limits`] field's type (zero passes:
    /// the spec builder checks limits) and stored there, its position noted under the field's
    /// name.
    fn limits(&mut self, table: &DeTable<'_>, limits: &mut Limits, at: &mut Written) {
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        // Read with `u32::MAX` as their most, so the conversion cannot fail.
        let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        for (key, v) in table.iter() {
            match key.get_ref().as_ref() {
                k @ "max_turns" => {
                    let n = self.limit_int(k, v, u64::from(u32::MAX));
                    if let Some(n) = at.put("max_turns", n) {
                        limits.max_turns = narrow(n);
                    }
                }
                "max_cost_usd" => {
                    let usd = self.cost(v);
                    if let Some(usd) = at.put("max_cost_usd", usd) {
                        limits.max_cost_usd = Some(usd);
                    }
                }
                k @ "max_tokens_per_turn" => {
                    let n = self.limit_int(k, v, u64::from(u32::MAX));
                    if let Some(n) = at.put("max_tokens_per_turn", n) {
                        limits.max_tokens_per_turn = narrow(n);
                    }
                }
                k @ "timeout_secs" => {
                    let secs = self.limit_int(k, v, u64::MAX);
                    if let Some(secs) = at.put("timeout", secs) {
                        limits.timeout = std::time::Duration::from_secs(secs);
                    }
                }
                k @ "max_output_chars" => {
                    let n = self.limit_int(k, v, u64::MAX);
                    if let Some(n) = at.put("max_output_chars", n) {
                        limits.max_output_chars = size(n);
                    }
                }
                k @ "max_tool_calls_per_turn" => {
                    let n = self.limit_int(k, v, u64::MAX);
                    if let Some(n) = at.put("max_tool_calls_per_turn", n) {
                        limits.max_tool_calls_per_turn = size(n);
                    }
                }
                k @ "max_tool_result_chars_per_turn" => {
                    let n = self.limit_int(k, v, u64::MAX);
                    if let Some(n) = at.put("max_tool_result_chars_per_turn", n) {
                        limits.max_tool_result_chars_per_turn = size(n);
                    }
                }
                "answer_reserve" => {
                    let on = self.boolean("answer_reserve", v);
                    if let Some(on) = at.put("answer_reserve", on) {
                        limits.answer_reserve = on;
                    }
                }
                _ => {
                    self.unknown_key(key, LIMIT_KEYS, IN_LIMITS);
                }
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
}

#[cfg(test)]
mod tests;
