//! A tool's argument schema as a model is shown it: the same contract with what only costs
//! prompt tokens, or misleads a small model, taken out.
//!
//! Schemas derived from Rust types carry `$schema`, a `title` naming the Rust type, integer
//! `format`s such as `uint32` (which the type and bounds already say), and optional arguments
//! typed as "integer or null". Measured on a 1.5B model (BENCHMARKS.md, "The levers, measured"),
//! the nullable optional arguments were filled with `1` rather than left out, and the noise
//! made the first prompt larger than a peer's for the same task. Both providers send tools
//! through [`tool_schema`], strict or not.
//!
//! An optional property marked [`HIDDEN`] is not shown at all: the workspace tools mark the
//! arguments that only narrow what a call returns (`read_file`'s `end_line`, `grep`'s
//! `max_matches`), which the 1.5B model filled with `1` on most first calls even with their
//! defaults shown, and so saw one line of the file it was asked about.
//!
//! Only what the model is shown changes: every tool argument and every output is still checked
//! against the full schema it was declared with, so nothing shown here can let an invalid value
//! through, and a hidden argument that a model sends anyway is accepted as before. The changes
//! only narrow what a model is invited to send (a property outside `required` may be left out,
//! which the full schema allows, instead of sent as `null`).

use serde_json::{Map, Value};

/// The keyword that keeps an optional property out of what a model is shown
/// (`"x-subcontract-hidden": true`). Validators ignore it, as JSON Schema has them ignore every
/// keyword they do not know; a required property is shown whatever it says.
pub const HIDDEN: &str = "x-subcontract-hidden";

/// Deepest nesting rewritten; deeper parts are left as written (recursion stays bounded).
const MAX_DEPTH: usize = 64;

/// Numeric `format`s: implied by `type` and the bounds, and meaningless to a model.
const NUMERIC_FORMATS: &[&str] = &[
    "int", "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32",
    "uint64", "uint128", "float", "double",
];

/// `schema` as a model is shown it: `$schema` and every `title` dropped, numeric `format`s
/// dropped, and an optional property typed "T or null" (`type: [T, "null"]`, or `anyOf` of a
/// schema and `{type: null}`) shown as T with no `null` default, since leaving it out is how a
/// caller leaves it unset; an optional property marked [`HIDDEN`] left out. Everything else,
/// bounds and descriptions included, is kept.
pub fn tool_schema(schema: &Value) -> Value {
    let mut out = schema.clone();
    lean(&mut out, 0);
    out
}

fn lean(schema: &mut Value, depth: usize) {
    let Value::Object(m) = schema else { return };
    if depth > MAX_DEPTH {
        return;
    }
    m.remove("$schema");
    m.remove("title");
    if m.get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| NUMERIC_FORMATS.contains(&f))
    {
        m.remove("format");
    }
    let required: Vec<String> = match m.get("required") {
        Some(Value::Array(r)) => r
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        props.retain(|name, p| {
            required.iter().any(|r| r == name) || p.get(HIDDEN) != Some(&Value::Bool(true))
        });
        for (name, p) in props.iter_mut() {
            if let Value::Object(pm) = p {
                pm.remove(HIDDEN);
                if !required.iter().any(|r| r == name) {
                    unnull(pm);
                }
            }
            lean(p, depth + 1);
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = m.get_mut(key) {
            for d in defs.values_mut() {
                lean(d, depth + 1);
            }
        }
    }
    for key in ["items", "additionalProperties", "not", "if", "then", "else"] {
        if let Some(s @ Value::Object(_)) = m.get_mut(key) {
            lean(s, depth + 1);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(a)) = m.get_mut(key) {
            for s in a {
                lean(s, depth + 1);
            }
        }
    }
}

/// An optional property's "T or null" shown as T.
fn unnull(p: &mut Map<String, Value>) {
    let is_null = |v: &Value| v.as_str() == Some("null");
    if let Some(Value::Array(types)) = p.get("type") {
        if types.len() == 2 && types.iter().any(is_null) {
            if let Some(t) = types.iter().find(|t| !is_null(t)).cloned() {
                p.insert("type".into(), t);
            }
        }
    } else if let Some(Value::Array(any)) = p.get("anyOf") {
        let null_schema = |s: &Value| {
            s.get("type").is_some_and(is_null) && s.as_object().is_some_and(|o| o.len() == 1)
        };
        if any.len() == 2 && any.iter().any(null_schema) {
            if let Some(Value::Object(other)) = any.iter().find(|s| !null_schema(s)).cloned() {
                p.remove("anyOf");
                for (k, v) in other {
                    p.entry(k).or_insert(v);
                }
            }
        }
    }
    if p.get("default") == Some(&Value::Null) {
        p.remove("default");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn derived_noise_goes_and_optional_nullables_become_plain() {
        let full = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "ReadFileArgs",
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": 1024, "description": "A path."},
                "start_line": {"type": ["integer", "null"], "format": "uint32", "minimum": 1, "default": 1},
                "end_line": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": null},
                "when": {"type": "string", "format": "date-time", "maxLength": 40}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        let shown = tool_schema(&full);
        assert_eq!(
            shown,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "maxLength": 1024, "description": "A path."},
                    "start_line": {"type": "integer", "minimum": 1, "default": 1},
                    "end_line": {"type": "integer", "minimum": 1},
                    "when": {"type": "string", "format": "date-time", "maxLength": 40}
                },
                "required": ["path"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn a_required_nullable_stays_nullable_and_a_property_named_title_stays() {
        let full = json!({
            "type": "object",
            "properties": {
                "title": {"type": ["string", "null"], "maxLength": 10},
                "items": {"type": "array", "items": {"title": "Item", "type": "integer", "format": "int64"}}
            },
            "required": ["title"]
        });
        let shown = tool_schema(&full);
        assert_eq!(
            shown["properties"]["title"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(
            shown["properties"]["items"]["items"],
            json!({"type": "integer"})
        );
    }

    #[test]
    fn an_optional_property_marked_hidden_is_left_out_and_a_required_one_stays() {
        let full = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", HIDDEN: true},
                "end_line": {"type": ["integer", "null"], "minimum": 1, HIDDEN: true},
                "limit": {"type": "integer", HIDDEN: false},
                "nested": {"type": "object", "properties": {"n": {"type": "integer", HIDDEN: true}}}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        let shown = tool_schema(&full);
        assert_eq!(
            shown,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "limit": {"type": "integer"},
                    "nested": {"type": "object", "properties": {}}
                },
                "required": ["path"],
                "additionalProperties": false
            })
        );
        // The full schema, which arguments are checked against, still takes a hidden one.
        let check = jsonschema::validator_for(&full).unwrap();
        assert!(check.is_valid(&json!({"path": "a", "end_line": 3})));
        assert!(!check.is_valid(&json!({"path": "a", "end_line": 0})));
    }

    #[test]
    fn nesting_past_the_limit_is_left_as_written() {
        let mut deep = json!({"title": "leaf"});
        for _ in 0..(MAX_DEPTH + 10) {
            deep = json!({"type": "array", "items": deep});
        }
        let shown = tool_schema(&deep);
        assert!(shown.to_string().contains("leaf"));
    }
}
