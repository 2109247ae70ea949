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
    seen: HashMap<(String, String), u32>,
    /// Turns so far that repeated a call of an earlier turn.
    pub(crate) repeating_turns: u32,
}

impl Calls {
    /// Records a call of `tool` with `args` in `turn`; the earlier turn that made the
    /// identical call, if one did. The same call twice in one response is not a repeat: the
    /// model had not seen the first one's result.
    pub(crate) fn record(&mut self, tool: &str, args: &Value, turn: u32) -> Option<u32> {
        let first = *self
            .seen
            .entry((tool.to_owned(), canonical(args)))
            .or_insert(turn);
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

/// `v` as compact JSON with object keys sorted, so that arguments written in another key order
/// are the same call.
fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(o) => {
                let mut keys: Vec<&String> = o.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&o[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            v => v.clone(),
        }
    }
    sorted(v).to_string()
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
}
