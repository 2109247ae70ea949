//! Repeated tool calls: a model that sends the same call again (same tool, same arguments)
//! gets the same answer and learns nothing; such a run is stalled, not working.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use foldhash::fast::RandomState;

use serde_json::Value;

/// Turns that repeat a call a run may take before it ends `stalled`. Each repeated call is told
/// so in its result and makes the next turn ask for the output alone; a model that comes back
/// to repeating after that is not going to stop.
pub(crate) const MAX_REPEATING_TURNS: u32 = 2;

/// The tool calls of one run so far, by tool and canonical arguments, with the turn each was
/// first made in.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    /// A keyed 64-bit hash of each call (its tool, and its arguments with object keys in
    /// order) and the turn it was first made in. Only the hash is kept: two different calls
    /// are taken for one only when their hashes collide, by chance (the hash is keyed per run,
    /// so a model cannot aim for it), and that would cost a note and a forced turn, never a
    /// wrong output. The hashes are already spread, so the table hashes them with FNV.
    seen: HashMap<u64, u32, fnv::FnvBuildHasher>,
    keys: RandomState,
    /// Turns so far that repeated a call of an earlier turn.
    pub(crate) repeating_turns: u32,
}

impl Calls {
    /// Records a call of `tool` with `args` in `turn`; the earlier turn that made the
    /// identical call, if one did. The same call twice in one response is not a repeat: the
    /// model had not seen the first one's result.
    pub(crate) fn record(&mut self, tool: &str, args: &Value, turn: u32) -> Option<u32> {
        let mut h = self.keys.build_hasher();
        text(tool, &mut h);
        feed(args, &mut h);
        let first = *self.seen.entry(h.finish()).or_insert(turn);
        (first < turn).then_some(first)
    }

    /// Counts a turn that repeated a call; whether the run has now repeated itself as often as
    /// it may.
    pub(crate) fn repeated_in_turn(&mut self) -> bool {
        self.repeating_turns += 1;
        self.repeating_turns >= MAX_REPEATING_TURNS
    }
}

/// Feeds `v` to `h` with object keys in order, so that arguments written in another key order
/// are the same call. Every part is tagged or terminated, so that different values never feed
/// the same bytes (`["a","b"]` and `["ab"]`, `1` and `"1"`); numbers feed their value, as
/// parsed (`1` and `1.0` differ, as they do in JSON text).
fn feed(v: &Value, h: &mut impl Hasher) {
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => h.write_u8(1 + u8::from(*b)),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                h.write_u8(3);
                h.write_u64(u);
            } else if let Some(i) = n.as_i64() {
                h.write_u8(4);
                h.write_i64(i);
            } else {
                h.write_u8(5);
                h.write_u64(n.as_f64().map_or(0, f64::to_bits));
            }
        }
        Value::String(s) => {
            h.write_u8(6);
            text(s, h);
        }
        Value::Array(a) => {
            h.write_u8(7);
            h.write_usize(a.len());
            for v in a {
                feed(v, h);
            }
        }
        Value::Object(o) => {
            h.write_u8(8);
            h.write_usize(o.len());
            // Keys a model wrote in order (most calls, and every call of one argument) need
            // no sorted copy.
            if o.keys().is_sorted() {
                for (k, v) in o {
                    text(k, h);
                    feed(v, h);
                }
            } else {
                let mut entries: Vec<(&String, &Value)> = o.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                for (k, v) in entries {
                    text(k, h);
                    feed(v, h);
                }
            }
        }
    }
}

/// A string, terminated by a byte that UTF-8 never holds.
fn text(s: &str, h: &mut impl Hasher) {
    h.write(s.as_bytes());
    h.write_u8(0xff);
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
    fn nested_keys_are_sorted_and_different_values_stay_different() {
        let mut calls = Calls::default();
        assert_eq!(calls.record("t", &json!({"k": {"b": 1, "a": 2}}), 1), None);
        assert_eq!(
            calls.record("t", &json!({"k": {"a": 2, "b": 1}}), 2),
            Some(1)
        );
        assert_eq!(calls.record("t", &json!({"k": {"a": 2, "b": 3}}), 3), None);
        // Values that would run into each other, or print alike, are different calls.
        let distinct = [
            json!(["a", "b"]),
            json!(["ab"]),
            json!([["a"], "b"]),
            json!(1),
            json!(1.0),
            json!(-1),
            json!("1"),
            json!(true),
            json!(null),
            json!({"a": "b"}),
            json!({"ab": ""}),
            json!({"a": {"b": null}}),
        ];
        for v in &distinct {
            assert_eq!(calls.record("u", v, 4), None, "{v}");
        }
        for v in &distinct {
            assert_eq!(calls.record("u", v, 5), Some(4), "{v}");
        }
        // The tool name and arguments cannot run into each other.
        assert_eq!(calls.record("t\u{0}x", &json!({}), 6), None);
        assert_eq!(calls.record("tx", &json!({}), 6), None);
    }
}
