//! The keys a spec file may use, and what is said about one it may not: the closest known
//! key ("did you mean"), or the table it belongs in.
//!
//! Each table's keys are one list here; adding a key is one line in its list plus reading it
//! in the parser.

use super::{shown, Key, Parser};
use crate::diag::codes;

pub(super) const TOP_KEYS: &[&str] = &[
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
pub(super) const LIMIT_KEYS: &[&str] = &[
    "max_turns",
    "max_cost_usd",
    "timeout_secs",
    "max_output_chars",
    "max_tool_calls_per_turn",
    "max_tool_result_chars_per_turn",
];
pub(super) const EXAMPLE_KEYS: &[&str] = &["name", "input", "output"];

pub(super) const TOP_LEVEL: &str = "at the top level";

impl Parser<'_> {
    /// Reports an unknown key, suggesting the closest known one. Returns the suggestion, so a
    /// caller does not also report that key as missing: one typo, one diagnostic.
    pub(super) fn unknown_key<'k>(
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
}

/// The known key closest to `key`, if within edit distance 2 (and not a wholesale rewrite of a
/// very short key).
pub fn suggest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .filter_map(|k| edit_distance(key, k, 2).map(|d| (d, *k)))
        .filter(|(d, _)| *d < key.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance between `a` and `b` in characters, or `None` when it exceeds `limit`.
/// The length check first keeps a 10 MB key from costing a full table.
pub(super) fn edit_distance(a: &str, b: &str, limit: usize) -> Option<usize> {
    let b_len = b.chars().count();
    let a_len = a.chars().take(b_len + limit + 1).count();
    if a_len.abs_diff(b_len) > limit {
        return None;
    }
    let d = strsim::levenshtein(a, b);
    (d <= limit).then_some(d)
}
