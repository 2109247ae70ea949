//! The draft 2020-12 vocabulary, and the keywords of a schema outside it. JSON Schema ignores
//! a keyword it does not know, so a misspelt one (`maxLenght`) silently constrains nothing.

use serde_json::{Map, Value};

use super::{Finding, FindingKind};
use crate::json::pointer::child;

/// Every keyword of the draft 2020-12 vocabularies (core, applicator, unevaluated,
/// validation, meta-data, format, content), plus `definitions`, the older name of `$defs`
/// that `$ref`s still point into.
pub const KEYWORDS: &[&str] = &[
    // core
    "$schema",
    "$id",
    "$ref",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "$comment",
    "$defs",
    "definitions",
    // applicator
    "prefixItems",
    "items",
    "contains",
    "additionalProperties",
    "properties",
    "patternProperties",
    "dependentSchemas",
    "propertyNames",
    "if",
    "then",
    "else",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    // unevaluated
    "unevaluatedItems",
    "unevaluatedProperties",
    // validation
    "type",
    "const",
    "enum",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    // meta-data
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
    // format and content
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
];

/// What earlier drafts called some 2020-12 keywords: named in the message, since the edit
/// distance to the new name is too large for a suggestion.
const RENAMED: &[(&str, &str)] = &[
    ("dependencies", "`dependentRequired` or `dependentSchemas`"),
    ("$recursiveRef", "`$dynamicRef`"),
    ("$recursiveAnchor", "`$dynamicAnchor`"),
    ("additionalItems", "`items` (beside `prefixItems`)"),
];

/// Whether `key` is an extension keyword, which is allowed: `x-` and its case variants, the
/// convention OpenAPI and others use for keys no validator reads.
fn is_extension(key: &str) -> bool {
    key.len() > 2 && key[..2].eq_ignore_ascii_case("x-")
}

/// Unknown keywords of the subschema `map` at `path`.
pub(super) fn unknown(path: &str, map: &Map<String, Value>, out: &mut Vec<Finding>) {
    for key in map.keys() {
        if KEYWORDS.contains(&key.as_str()) || is_extension(key) {
            continue;
        }
        let mut message = format!(
            "unknown keyword `{}`: JSON Schema ignores it, so it constrains nothing",
            crate::diag::shown(key)
        );
        if let Some((_, new)) = RENAMED.iter().find(|(old, _)| old == key) {
            message.push_str(&format!("; draft 2020-12 calls it {new}"));
        } else if let Some(best) = crate::diag::suggest(key, KEYWORDS) {
            message.push_str(&format!("; did you mean `{best}`?"));
        } else {
            message.push_str(" (extension keywords start with `x-`)");
        }
        out.push(Finding {
            kind: FindingKind::UnknownKeyword,
            schema_path: path.to_owned(),
            at: child(path, key),
            message,
        });
    }
}
