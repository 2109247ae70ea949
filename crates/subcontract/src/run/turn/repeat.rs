//! Repeated tool calls: a model that sends the same call again (same tool, same arguments)
//! gets the same answer and learns nothing; such a run is stalled, not working.

use std::collections::HashMap;

use serde_json::Value;

/// Turns that repeat a call a run may take before it ends `stalled`. Each repeated call is told
/// so in its result and makes the next turn ask for the output alone; a model that comes back
/// to repeating after that is not going to stop.
pub(crate) const MAX_REPEATING_TURNS: u32 = 2;

/// The tool calls of one run so far, by tool and canonical arguments, with the turn each was
/// first made in.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    /// `tool`, a NUL, and the canonical arguments: one string per call, hashed with FNV (a
    /// run's own calls are not an attacker's choice of keys worth SipHash's cost every turn).
    seen: HashMap<Vec<u8>, u32, fnv::FnvBuildHasher>,
    /// Turns so far that repeated a call of an earlier turn.
    pub(crate) repeating_turns: u32,
}

impl Calls {
    /// Records a call of `tool` with `args` in `turn`; the earlier turn that made the
    /// identical call, if one did. The same call twice in one response is not a repeat: the
    /// model had not seen the first one's result.
    pub(crate) fn record(&mut self, tool: &str, args: &Value, turn: u32) -> Option<u32> {
        let mut key = Vec::with_capacity(tool.len() + 1 + 64);
        key.extend_from_slice(tool.as_bytes());
        key.push(0);
        canonical(args, &mut key);
        let first = *self.seen.entry(key).or_insert(turn);
        (first < turn).then_some(first)
    }

    /// Counts a turn that repeated a call; whether the run has now repeated itself as often as
    /// it may.
    pub(crate) fn repeated_in_turn(&mut self) -> bool {
        self.repeating_turns += 1;
        self.repeating_turns >= MAX_REPEATING_TURNS
    }
}

/// What a repeated call's result says after its own content.
pub(crate) fn repeated_note(first: u32) -> String {
    format!(
        "\n\nNote: this is the same call, with the same arguments, as in turn {first}, and the result is the same. Do not repeat it: use what you have and give your answer."
    )
}

/// Appends `v` to `out` as compact JSON with object keys sorted, so that arguments written in
/// another key order are the same call. Written directly: no sorted copy of the value is made.
fn canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(o) => {
            let mut entries: Vec<(&String, &Value)> = o.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                // Writing JSON into memory cannot fail.
                let _ = serde_json::to_writer(&mut *out, k);
                out.push(b':');
                canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(v, out);
            }
            out.push(b']');
        }
        v => {
            let _ = serde_json::to_writer(&mut *out, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_same_tool_and_arguments_of_an_earlier_turn_in_any_key_order_is_a_repeat() {
        let mut calls = Calls::default();
        assert_eq!(
            calls.record("read_file", &json!({"path": "a", "end_line": 3}), 1),
            None
        );
        // Twice in one response is not a repeat.
        assert_eq!(
            calls.record("read_file", &json!({"path": "a", "end_line": 3}), 1),
            None
        );
        assert_eq!(calls.record("read_file", &json!({"path": "b"}), 1), None);
        assert_eq!(
            calls.record("grep", &json!({"path": "a", "end_line": 3}), 2),
            None
        );
        assert_eq!(
            calls.record("read_file", &json!({"end_line": 3, "path": "a"}), 3),
            Some(1)
        );
        assert!(!calls.repeated_in_turn());
        assert_eq!(calls.record("read_file", &json!({"path": "b"}), 4), Some(1));
        assert!(calls.repeated_in_turn());
    }

    #[test]
    fn nested_keys_are_sorted_and_strings_escaped() {
        let mut a = Vec::new();
        canonical(&json!({"b": [{"y": 1, "x": "q\"\n"}], "a": null}), &mut a);
        assert_eq!(
            String::from_utf8(a).unwrap(),
            r#"{"a":null,"b":[{"x":"q\"\n","y":1}]}"#
        );
        let mut calls = Calls::default();
        assert_eq!(calls.record("t", &json!({"k": {"b": 1, "a": 2}}), 1), None);
        assert_eq!(
            calls.record("t", &json!({"k": {"a": 2, "b": 1}}), 2),
            Some(1)
        );
        assert_eq!(calls.record("t", &json!({"k": {"a": 2, "b": 3}}), 3), None);
        // The tool name and arguments cannot run into each other.
        assert_eq!(calls.record("t\u{0}x", &json!({}), 4), None);
    }
}
