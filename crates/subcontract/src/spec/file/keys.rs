//! The keys a spec file may use, and what is said about one it may not: the closest known
//! key ("did you mean"), or the table it belongs in.
//!
//! Each table's keys are one list here; adding a key is one line in its list plus reading it
//! in the parser. `src/docs/specs.md` lists the same keys, and a test compares the two.

use super::{shown, Key, Parser};
use crate::diag::codes;
#[cfg(test)]
pub(super) use crate::diag::edit_distance;
pub(crate) use crate::diag::suggest;

pub(crate) const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "system",
    "system_file",
    "tools",
    "model",
    "output_mode",
    "prompt_cache",
    "require_tool_first",
    "limits",
    "workspace",
    "input",
    "output",
    "examples",
];
pub(crate) const LIMIT_KEYS: &[&str] = &[
    "max_turns",
    "max_cost_usd",
    "timeout_secs",
    "max_output_chars",
    "max_tokens_per_turn",
    "max_tool_calls_per_turn",
    "max_tool_result_chars_per_turn",
    "answer_reserve",
];
/// Keys of the `[workspace]` table (an acting sub-agent's working copy).
pub(crate) const WORKSPACE_KEYS: &[&str] = &[
    "isolation",
    "writes",
    "commands",
    "network",
    "checks",
    "max_changed_files",
    "max_diff_lines",
    "max_command_secs",
    "sandbox",
];
/// Keys of the `[model]` table (`model` may also be a plain string, the name alone).
pub(crate) const MODEL_KEYS: &[&str] = &["name", "temperature", "top_p", "seed"];
pub(crate) const EXAMPLE_KEYS: &[&str] = &["name", "input", "output"];

pub(super) const TOP_LEVEL: &str = "at the top level";
pub(super) const IN_LIMITS: &str = "in [limits]";
pub(super) const IN_MODEL: &str = "in [model]";
pub(super) const IN_WORKSPACE: &str = "in [workspace]";

/// Where a key written in the wrong table belongs: `(table, its keys)`. `name` is left out of
/// `[model]`'s keys here, since a top-level `name` is the spec's own.
const HOMES: &[(&str, &str, &[&str])] = &[
    (IN_LIMITS, "[limits]", LIMIT_KEYS),
    (IN_MODEL, "[model]", &["temperature", "top_p", "seed"]),
    (IN_WORKSPACE, "[workspace]", WORKSPACE_KEYS),
];

impl Parser<'_> {
    /// Reports an unknown key, suggesting the closest known one, or the table it belongs in
    /// when it is another table's key. Returns the suggestion, so a caller does not also report
    /// that key as missing: one typo, one diagnostic.
    pub(super) fn unknown_key<'k>(
        &mut self,
        key: &Key<'_>,
        known: &[&'k str],
        place: &str,
    ) -> Option<&'k str> {
        let k = key.get_ref().as_ref();
        let mut message = format!("unknown key `{}` {place}", shown(k));
        let mut suggested = None;
        if let Some((_, table, _)) = HOMES
            .iter()
            .find(|(home, _, keys)| *home != place && keys.contains(&k))
        {
            message.push_str(&format!("; `{k}` belongs in the {table} table"));
        } else if let Some(best) = suggest(k, known) {
            message.push_str(&format!("; did you mean `{best}`?"));
            suggested = Some(best);
        } else {
            message.push_str(&format!(" (expected one of: {})", known.join(", ")));
        }
        self.error(key.span(), codes::UNKNOWN_KEY, message);
        suggested
    }
}
