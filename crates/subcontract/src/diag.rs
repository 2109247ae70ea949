//! Diagnostics: what `subcontract check` reports and how it says where.
//!
//! A [`Diagnostic`] is a public format (its JSON field names are part of the command line's
//! contract, `src/docs/invariants.md`), so its fields are plain data. Codes are stable strings, listed in
//! [`codes`]. Positions are 1-based lines and columns counted in characters, computed from byte
//! offsets by a [`LineIndex`].

use serde::{Deserialize, Serialize};

/// How bad a diagnostic is. Errors fail `check`; warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The spec must not be used as written.
    Error,
    /// Worth fixing, but the spec still works.
    Warning,
    /// A note (a contract change that breaks no one, or an accepted break): never fails.
    Info,
}

/// One finding about one spec file, at one place in it.
///
/// The field names are the JSON output format of `check --format json`: keep them exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// The spec file's path, as it was given.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in characters.
    pub column: u32,
    /// Error or warning.
    pub severity: Severity,
    /// A stable code from [`codes`].
    pub code: String,
    /// The spec's name, when it is known.
    pub spec: Option<String>,
    /// What is wrong, and where possible how to fix it.
    pub message: String,
}

impl Diagnostic {
    /// An error at `pos` in `file`, with no spec name yet.
    pub fn error(
        file: impl Into<String>,
        pos: Pos,
        code: &str,
        message: impl Into<String>,
    ) -> Self {
        Self::new(file, pos, Severity::Error, code, message)
    }

    /// A warning at `pos` in `file`, with no spec name yet.
    pub fn warning(
        file: impl Into<String>,
        pos: Pos,
        code: &str,
        message: impl Into<String>,
    ) -> Self {
        Self::new(file, pos, Severity::Warning, code, message)
    }

    /// A note at `pos` in `file`, with no spec name yet.
    pub fn info(file: impl Into<String>, pos: Pos, code: &str, message: impl Into<String>) -> Self {
        Self::new(file, pos, Severity::Info, code, message)
    }

    fn new(
        file: impl Into<String>,
        pos: Pos,
        severity: Severity,
        code: &str,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            file: file.into(),
            line: pos.line,
            column: pos.column,
            severity,
            code: code.to_owned(),
            spec: None,
            message: message.into(),
        }
    }

    /// Where this diagnostic points.
    pub fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            column: self.column,
        }
    }

    /// True for [`Severity::Error`].
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// The stable diagnostic codes (`src/docs/invariants.md`). Tools and CI match on these strings.
pub mod codes {
    /// The file is not valid TOML (or not valid UTF-8).
    pub const TOML_SYNTAX: &str = "toml-syntax";
    /// The spec file could not be read at all (missing, a directory, no permission):
    /// `load_spec` only; `check` treats an unreadable path as a usage error (exit 2).
    pub const IO_ERROR: &str = "io-error";
    /// A key the spec format does not know (typos must not pass CI).
    pub const UNKNOWN_KEY: &str = "unknown-key";
    /// A spec or tool name missing or not matching `[A-Za-z0-9_-]{1,64}`.
    pub const INVALID_NAME: &str = "invalid-name";
    /// Two specs in one set share a name.
    pub const DUPLICATE_NAME: &str = "duplicate-name";
    /// An input or output contract is not a valid JSON Schema.
    pub const INVALID_SCHEMA: &str = "invalid-schema";
    /// A string in the output contract has no `maxLength` (nor `enum`/`const`).
    pub const UNBOUNDED_STRING: &str = "unbounded-string";
    /// An array in the output contract has no `maxItems`.
    pub const UNBOUNDED_ARRAY: &str = "unbounded-array";
    /// An object in the output contract admits unlisted properties.
    pub const OPEN_OBJECT: &str = "open-object";
    /// A `$ref` in the output contract recurses, so its size is unbounded.
    pub const RECURSIVE_REF: &str = "recursive-ref";
    /// The output contract's worst-case size exceeds `max_output_chars`.
    pub const OUTPUT_TOO_LARGE: &str = "output-too-large";
    /// A spec names a tool that is neither built in, another spec, nor in the catalogue.
    pub const UNKNOWN_TOOL: &str = "unknown-tool";
    /// The MCP config is not valid JSON.
    pub const JSON_SYNTAX: &str = "json-syntax";
    /// An MCP config key for a feature subcontract does not have (`oauth`, `headersHelper`,
    /// the SSE transport): refused, not ignored.
    pub const MCP_UNSUPPORTED: &str = "mcp-unsupported";
    /// A spec names MCP tools and no MCP config was given, so `check` cannot know them.
    pub const MCP_UNCHECKED: &str = "mcp-unchecked";
    /// A spec calls another spec without holding every tool that spec uses (capabilities never
    /// widen: invariant 1 of `src/docs/invariants.md`), so spawning it would fail.
    pub const TOOL_NOT_HELD: &str = "tool-not-held";
    /// Specs call each other in a cycle.
    pub const CALL_CYCLE: &str = "call-cycle";
    /// A chain of spec-to-spec calls is deeper than the depth limit.
    pub const TOO_DEEP: &str = "too-deep";
    /// A `[limits]` value is zero, negative, or not a number of the right kind.
    pub const BAD_LIMITS: &str = "bad-limits";
    /// A contract example does not validate against its schema.
    pub const EXAMPLE_INVALID: &str = "example-invalid";
    /// A value has the wrong type, or a required key is missing (outside `[limits]`).
    pub const INVALID_VALUE: &str = "invalid-value";
    /// A spec names an acting tool (`write_file`, `edit_file`, `run_command`) without a
    /// `[workspace]` table that isolates it (`isolation = "worktree"` or `"copy"`).
    pub const ACTING_WITHOUT_ISOLATION: &str = "acting-without-isolation";
    /// A `[workspace]` `checks` command whose program is not in `commands`, or a command line
    /// that cannot be split into arguments.
    pub const CHECK_NOT_ALLOWED: &str = "check-not-allowed";
    /// A `[workspace]` `writes` glob that does not compile.
    pub const INVALID_GLOB: &str = "invalid-glob";
    /// Warning: `[workspace] sandbox = "none"`: commands run without the OS sandbox.
    pub const NO_SANDBOX: &str = "no-sandbox";
    /// Warning: an acting spec names a tool that does not work in the run's copy (a host's
    /// own tool or an MCP server's), so it sees, and may change, the parent's files.
    pub const TOOL_OUTSIDE_COPY: &str = "tool-outside-copy";
    /// Warning: the spec has no `[[examples]]`, so its contracts are checked against nothing.
    pub const NO_EXAMPLES: &str = "no-examples";
    /// A schema keyword outside the draft 2020-12 vocabulary (a typo such as `maxLenght`):
    /// JSON Schema ignores it, so it constrains nothing. `x-` extension keywords are allowed.
    pub const UNKNOWN_KEYWORD: &str = "unknown-keyword";
    /// A `required` property that a closed object (`additionalProperties = false`) does not
    /// declare, or declares as `false`: no instance satisfies the contract.
    pub const UNSATISFIABLE_REQUIRED: &str = "unsatisfiable-required";
    /// Warning: on a model the spec will run on, one model call's worst case (the reservation
    /// made before it) is over the spec's `max_cost_usd`, so the run spends nothing and ends
    /// `budget_exhausted` after 0 turns (for its largest inputs, or for every input).
    pub const CALL_OVER_BUDGET: &str = "call-over-budget";
    /// Warning: on a model the spec will run on, its first call fits its `max_cost_usd` but
    /// not together with the answer the answer reserve holds beside it, so every run is
    /// refused before its first call (`budget_exhausted`, 0 turns).
    pub const ANSWER_OVER_BUDGET: &str = "answer-over-budget";
    /// An output value is marked `x-grounded` with an unknown kind, on a value that cannot be
    /// grounded (a boolean, an object, an enum), or as `"source"` in a spec none of whose tools
    /// can consult a source.
    pub const INVALID_GROUNDING: &str = "invalid-grounding";
}

/// A 1-based line and column; the column counts characters, not bytes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column in characters.
    pub column: u32,
}

impl Pos {
    /// The start of a file.
    pub const START: Pos = Pos { line: 1, column: 1 };
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Converts byte offsets in one source text to [`Pos`]itions, and gives back line texts.
///
/// Lookups are O(log lines) plus a bounded scan, so even a 10 MB single-line file with
/// thousands of diagnostics stays fast: every 256 bytes a running character count
/// is stored, and a column is the difference of two such counts.
#[derive(Debug, Clone)]
pub(crate) struct LineIndex {
    src: String,
    /// Byte offset where each line starts; always begins with 0.
    line_starts: Vec<usize>,
    /// `char_checkpoints[i]` = characters in `src[..i * CHUNK]`.
    char_checkpoints: Vec<u32>,
}

const CHUNK: usize = 256;

impl LineIndex {
    /// Indexes `src` (copying it, so the index can outlive the caller's buffer).
    pub(crate) fn new(src: &str) -> Self {
        let bytes = src.as_bytes();
        let mut line_starts = vec![0];
        line_starts.extend(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, &b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        let mut char_checkpoints = Vec::with_capacity(bytes.len() / CHUNK + 1);
        let mut count: u32 = 0;
        char_checkpoints.push(0);
        for chunk in bytes.chunks(CHUNK) {
            count = count.saturating_add(count_chars(chunk));
            char_checkpoints.push(count);
        }
        LineIndex {
            src: src.to_owned(),
            line_starts,
            char_checkpoints,
        }
    }

    /// The 1-based position of `byte_offset`; offsets past the end clamp to the end.
    pub(crate) fn pos(&self, byte_offset: usize) -> Pos {
        let offset = byte_offset.min(self.src.len());
        // The last line start that is <= offset.
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        // Short distances (the usual case) are counted directly; long lines use checkpoints.
        let chars = if offset - start <= CHUNK {
            count_chars(&self.src.as_bytes()[start..offset])
        } else {
            self.chars_before(offset) - self.chars_before(start)
        };
        let mut column = chars + 1;
        // Editors don't show a byte-order mark, so don't count it as a column.
        if line == 0 && offset >= 3 && self.src.starts_with('\u{feff}') {
            column -= 1;
        }
        Pos {
            line: u32::try_from(line + 1).unwrap_or(u32::MAX),
            column,
        }
    }

    /// The text of a 1-based line, without its line ending; `None` past the last line.
    pub(crate) fn line_text(&self, line: u32) -> Option<&str> {
        let i = usize::try_from(line).ok()?.checked_sub(1)?;
        let start = *self.line_starts.get(i)?;
        let end = self
            .line_starts
            .get(i + 1)
            .map_or(self.src.len(), |&next| next - 1);
        let text = self.src.get(start..end)?;
        Some(text.strip_suffix('\r').unwrap_or(text))
    }

    /// Characters in `src[..offset]`.
    fn chars_before(&self, offset: usize) -> u32 {
        let chunk = offset / CHUNK;
        let base = self.char_checkpoints[chunk];
        base.saturating_add(count_chars(&self.src.as_bytes()[chunk * CHUNK..offset]))
    }
}

/// A user-written string as quoted in a message: long ones are cut, so one absurd value can't
/// make every diagnostic about it megabytes long.
pub(crate) fn shown(s: &str) -> String {
    const MAX: usize = 60;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_owned(),
    }
}

/// The known name closest to `key`, if within edit distance 2 (and not a wholesale rewrite of
/// a very short key): the "did you mean" of unknown keys, tools and schema keywords.
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
pub(crate) fn edit_distance(a: &str, b: &str, limit: usize) -> Option<usize> {
    let b_len = b.chars().count();
    let a_len = a.chars().take(b_len + limit + 1).count();
    if a_len.abs_diff(b_len) > limit {
        return None;
    }
    let d = strsim::levenshtein(a, b);
    (d <= limit).then_some(d)
}

/// Characters in a byte slice of UTF-8: every byte that is not a continuation byte starts one.
/// Works on slices cut anywhere, which is what lets the checkpoints use fixed-size chunks.
fn count_chars(bytes: &[u8]) -> u32 {
    let n = bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: u32, column: u32) -> Pos {
        Pos { line, column }
    }

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let idx = LineIndex::new("ab\ncé d\n\nx");
        assert_eq!(idx.pos(0), p(1, 1));
        assert_eq!(idx.pos(2), p(1, 3)); // the newline itself
        assert_eq!(idx.pos(3), p(2, 1));
        assert_eq!(idx.pos(6), p(2, 3)); // after the two-byte é
        assert_eq!(idx.pos(9), p(3, 1));
        assert_eq!(idx.pos(10), p(4, 1));
        assert_eq!(idx.pos(1000), p(4, 2)); // clamps to the end
    }

    #[test]
    fn line_text_strips_line_endings() {
        let idx = LineIndex::new("one\r\ntwo\n\nfour");
        assert_eq!(idx.line_text(0), None);
        assert_eq!(idx.line_text(1), Some("one"));
        assert_eq!(idx.line_text(2), Some("two"));
        assert_eq!(idx.line_text(3), Some(""));
        assert_eq!(idx.line_text(4), Some("four"));
        assert_eq!(idx.line_text(5), None);
    }

    #[test]
    fn empty_source() {
        let idx = LineIndex::new("");
        assert_eq!(idx.pos(0), p(1, 1));
        assert_eq!(idx.line_text(1), Some(""));
    }

    #[test]
    fn long_lines_use_checkpoints_correctly() {
        // Multibyte characters straddling chunk boundaries must still count once each.
        let line: String = "é".repeat(1000) + "x";
        let src = format!("a\n{line}");
        let idx = LineIndex::new(&src);
        let x = src.len() - 1;
        assert_eq!(idx.pos(x), p(2, 1001));
        for k in [0usize, 1, 127, 128, 129, 255, 256, 999] {
            assert_eq!(idx.pos(2 + 2 * k), p(2, k as u32 + 1));
        }
    }

    #[test]
    fn diagnostic_json_field_names_are_stable() {
        let d = Diagnostic::error("specs/a.toml", p(3, 5), codes::BAD_LIMITS, "no");
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"file": "specs/a.toml", "line": 3, "column": 5,
                "severity": "error", "code": "bad-limits", "spec": null, "message": "no"})
        );
        let w = Diagnostic::warning("f", p(1, 1), codes::NO_EXAMPLES, "m");
        assert_eq!(serde_json::to_value(w.severity).unwrap(), "warning");
        assert!(!w.is_error());
    }
}
