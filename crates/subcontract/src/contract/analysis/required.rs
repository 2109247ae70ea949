//! `required` properties a closed object forbids: no object can satisfy such a schema, so an
//! output contract with one rejects every output, and an input contract every call.

use serde_json::{Map, Value};

use super::walk::IN_PLACE_APPLICATORS;
use super::{Finding, FindingKind};
use crate::diag::shown;
use crate::json::pointer::child;

/// Patterns longer than this are not compiled: treated as matching anything, which only
/// means a finding is not made.
const MAX_PATTERN_BYTES: usize = 4096;

/// Required properties of the subschema `map` at `path` that no object it accepts can have.
pub(super) fn unsatisfiable(path: &str, map: &Map<String, Value>, out: &mut Vec<Finding>) {
    let Some(Value::Array(required)) = map.get("required") else {
        return;
    };
    let declared = map.get("properties").and_then(Value::as_object);
    let closed_by = if map.get("additionalProperties") == Some(&Value::Bool(false)) {
        Some("additionalProperties = false")
    } else if map.get("unevaluatedProperties") == Some(&Value::Bool(false))
        && !map.contains_key("additionalProperties")
        && !IN_PLACE_APPLICATORS.iter().any(|k| map.contains_key(*k))
    {
        // With an applicator beside it, a property could be evaluated (and so allowed) there.
        Some("unevaluatedProperties = false")
    } else {
        None
    };
    let patterns: Vec<Option<regex::Regex>> = map
        .get("patternProperties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(|k| compile(k)).collect())
        .unwrap_or_default();
    // A pattern that does not compile here (JSON Schema's are ECMA-262) may match anything.
    let matches_pattern = |name: &str| {
        patterns
            .iter()
            .any(|p| p.as_ref().is_none_or(|re| re.is_match(name)))
    };

    for (i, name) in required.iter().enumerate() {
        let Some(name) = name.as_str() else {
            continue;
        };
        let schema = declared.and_then(|d| d.get(name));
        let message = match (schema, closed_by) {
            (Some(Value::Bool(false)), _) => format!(
                "`required` names `{}`, whose schema in `properties` is `false`: no value is \
                 allowed for it, so no object satisfies this schema",
                shown(name)
            ),
            (None, Some(closed)) if !matches_pattern(name) => format!(
                "`required` names `{n}`, which `properties` does not declare, and {closed} \
                 forbids any other property: no object satisfies this schema (declare `{n}` in \
                 `properties`, or remove it from `required`)",
                n = shown(name)
            ),
            _ => continue,
        };
        out.push(Finding {
            kind: FindingKind::UnsatisfiableRequired,
            schema_path: path.to_owned(),
            at: child(&child(path, "required"), &i.to_string()),
            message,
        });
    }
}

fn compile(pattern: &str) -> Option<regex::Regex> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return None;
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .ok()
}
