//! Every subschema of a schema, with its JSON Pointer: the places where keywords are keywords
//! (a key of `properties` is a property name, and `enum`, `const`, `default` and `examples`
//! hold data, not schemas).

use serde_json::{Map, Value};

use super::MAX_VISITS;
use crate::json::pointer::child;

/// Keywords whose value is one subschema.
const ONE: &[&str] = &[
    "additionalProperties",
    "propertyNames",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];
/// Keywords whose value is an array of subschemas.
const LIST: &[&str] = &["prefixItems", "allOf", "anyOf", "oneOf"];
/// Keywords whose value maps names (or patterns) to subschemas.
const MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];

/// Calls `visit` with every object subschema of `schema` (the root included) and its pointer,
/// parents before children; boolean schemas have no keywords and are skipped. Iterative, so
/// nesting cannot exhaust the stack, and stops after [`MAX_VISITS`] subschemas.
pub(super) fn each(schema: &Value, mut visit: impl FnMut(&str, &Map<String, Value>)) {
    let mut stack: Vec<(String, &Value)> = vec![(String::new(), schema)];
    let mut visits: u64 = 0;
    while let Some((path, node)) = stack.pop() {
        let Value::Object(map) = node else {
            continue;
        };
        visits += 1;
        if visits > MAX_VISITS {
            return;
        }
        visit(&path, map);
        // Pushed in reverse, so subschemas are visited in the order they were written.
        let mut children: Vec<(String, &Value)> = Vec::new();
        for (key, value) in map {
            let at = child(&path, key);
            if ONE.contains(&key.as_str()) {
                children.push((at, value));
            } else if LIST.contains(&key.as_str()) {
                if let Value::Array(items) = value {
                    for (i, item) in items.iter().enumerate() {
                        children.push((child(&at, &i.to_string()), item));
                    }
                }
            } else if MAP.contains(&key.as_str()) {
                if let Value::Object(entries) = value {
                    for (name, item) in entries {
                        children.push((child(&at, name), item));
                    }
                }
            }
        }
        stack.extend(children.into_iter().rev());
    }
}
