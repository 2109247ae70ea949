//! Provider dialects of JSON Schema: what each host's strict mode accepts.
//!
//! Providers compile a strict tool's schema into a decoding grammar and refuse keywords their
//! compiler lacks. As their documentation describes strict mode (checked November 2026; treat
//! these lists as the conservative intersection of what has been documented, not a promise):
//!
//! - **OpenAI** (structured outputs / `strict: true` functions): every object needs
//!   `additionalProperties: false` and every property listed in `required` (an optional
//!   property becomes nullable instead); `anyOf`, `$ref` and `$defs` are allowed; strings take
//!   `pattern` and `format`, numbers `minimum`/`maximum`/`exclusive*`/`multipleOf`, arrays
//!   `minItems`/`maxItems`. String lengths (`minLength`/`maxLength`), `allOf`, `oneOf`, `not`,
//!   `if`/`then`/`else`, `patternProperties`, `uniqueItems`, `contains`, `minProperties`/
//!   `maxProperties` and the like are refused.
//! - **Anthropic** (strict tool use): objects need `additionalProperties: false`; numeric,
//!   string-length and array bounds are refused (except `minItems` of 0 or 1); `pattern` is
//!   limited, so it is moved out as well.
//!
//! [`openai_strict`] and [`anthropic`] keep what the provider accepts and move every bound they
//! strip into the schema's `description` ("at most 300 characters"; a rule with no short
//! wording, such as `not`, as written), so the model still sees it. Their output is for a tool
//! marked `strict: true`; a non-strict tool takes the full schema as it is. **The bounds stay enforced**: subcontract validates every output (and every tool
//! argument) against the full contract, and a violation goes back to the model to repair.
//! Looser is fine for the provider's grammar; our validation is the contract.
//!
//! Neither strict dialect takes our `x-grounded`: it is dropped there and said in the
//! description instead; the grounding check is ours either way. The full schema (a
//! non-strict tool, MCP, `schema --format json-schema`) keeps it.
//!
//! OpenAI's strict mode makes optional properties required-but-nullable, so a model may answer
//! `null` where the contract wants the property absent: run [`strip_optional_nulls`] (with the
//! original schema) on what comes back before validating it.

use serde_json::{Map, Value};

/// Deepest nesting converted; deeper parts are left as written (schemas that deep are refused
/// by every provider anyway, and recursion must stay bounded).
const MAX_DEPTH: usize = 128;

/// Keywords OpenAI strict mode accepts (anything else is dropped, bounds into the description).
pub const OPENAI_ALLOWED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
    "description",
    "title",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// Keywords Anthropic strict tool use accepts (`minItems` only as 0 or 1).
pub const ANTHROPIC_ALLOWED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
    "description",
    "title",
    "default",
    "format",
    "minItems",
];

/// String formats OpenAI strict mode documents.
const OPENAI_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];
/// String formats Anthropic strict mode documents.
const ANTHROPIC_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "uri",
    "ipv4",
    "ipv6",
    "uuid",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    OpenAi,
    Anthropic,
}

/// `schema` as OpenAI strict mode accepts it (function `parameters` with `strict: true`, or a
/// `json_schema` response format).
pub fn openai_strict(schema: &Value) -> Value {
    convert(schema, Dialect::OpenAi, 0)
}

/// A schema in OpenAI's dialect, and whether it may be sent with `strict: true`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiSchema {
    /// The converted schema ([`openai_strict`]).
    pub schema: Value,
    /// Whether it meets strict mode's other documented limits ([`openai_strict_compatible`]),
    /// so that `strict: true` would not make the request fail.
    pub strict: bool,
}

/// `schema` in OpenAI's dialect, with whether strict mode will take it.
pub fn openai(schema: &Value) -> OpenAiSchema {
    let schema = openai_strict(schema);
    let strict = openai_strict_compatible(&schema);
    OpenAiSchema { schema, strict }
}

/// Strict mode's documented limits besides keywords (checked November 2026; the figures have
/// been raised before, so these are the conservative ones): an object at the root, at most
/// this many levels of nesting, properties in all, and enum values in all.
pub const OPENAI_STRICT_MAX_NESTING: usize = 10;
/// See [`OPENAI_STRICT_MAX_NESTING`].
pub const OPENAI_STRICT_MAX_PROPERTIES: usize = 5000;
/// See [`OPENAI_STRICT_MAX_NESTING`].
pub const OPENAI_STRICT_MAX_ENUM_VALUES: usize = 1000;

/// Whether `converted` (an [`openai_strict`] output) is a schema strict mode accepts: its root
/// an object; every subschema typed (a `type`, `anyOf`, `enum`, `const` or a `$ref` that
/// resolves here); nesting, property and enum counts within the documented limits; nothing
/// left unconverted past the converter's depth limit. A schema that fails is sent without
/// `strict`, so a request never fails for a schema our own validation could enforce anyway.
pub fn openai_strict_compatible(converted: &Value) -> bool {
    let root_is_object = converted.get("type") == Some(&Value::String("object".into()));
    let mut tally = Tally::default();
    root_is_object
        && strict_walk(converted, converted, 0, &mut tally)
        && tally.properties <= OPENAI_STRICT_MAX_PROPERTIES
        && tally.enum_values <= OPENAI_STRICT_MAX_ENUM_VALUES
}

#[derive(Default)]
struct Tally {
    properties: usize,
    enum_values: usize,
}

fn strict_walk(root: &Value, schema: &Value, depth: usize, tally: &mut Tally) -> bool {
    let Value::Object(m) = schema else {
        return false;
    };
    if depth > OPENAI_STRICT_MAX_NESTING {
        return false;
    }
    if let Some(r) = m.get("$ref") {
        // A ref must resolve within the schema sent; its target is checked under `$defs`.
        return r.is_string() && resolve(root, schema).is_some();
    }
    if !["type", "anyOf", "enum", "const"]
        .iter()
        .any(|k| m.contains_key(*k))
    {
        return false;
    }
    if let Some(Value::Array(e)) = m.get("enum") {
        tally.enum_values += e.len();
    }
    m.iter().all(|(k, v)| match (k.as_str(), v) {
        ("properties", Value::Object(ps)) => {
            tally.properties += ps.len();
            ps.values().all(|p| strict_walk(root, p, depth + 1, tally))
        }
        ("$defs" | "definitions", Value::Object(ds)) => {
            ds.values().all(|d| strict_walk(root, d, depth, tally))
        }
        ("items", s) => strict_walk(root, s, depth + 1, tally),
        ("anyOf", Value::Array(a)) => a.iter().all(|s| strict_walk(root, s, depth, tally)),
        // Keywords the converter keeps and that hold no subschema.
        _ => OPENAI_ALLOWED.contains(&k.as_str()),
    })
}

/// `schema` as Anthropic strict tool use accepts it (a tool's `input_schema`).
pub fn anthropic(schema: &Value) -> Value {
    convert(schema, Dialect::Anthropic, 0)
}

fn convert(schema: &Value, d: Dialect, depth: usize) -> Value {
    let Value::Object(obj) = schema else {
        // Boolean (or malformed) schemas: providers want an object; `{}` is the loosest.
        return Value::Object(Map::new());
    };
    if depth > MAX_DEPTH {
        return schema.clone();
    }
    let mut obj = merge_all_of(obj);
    // OpenAI and Anthropic take anyOf but not oneOf: anyOf is looser, which is safe.
    if let Some(one_of) = obj.remove("oneOf") {
        obj.entry("anyOf").or_insert(one_of);
    }
    let allowed = match d {
        Dialect::OpenAi => OPENAI_ALLOWED,
        Dialect::Anthropic => ANTHROPIC_ALLOWED,
    };
    let mut notes = Vec::new();
    let mut out = Map::new();
    for (k, v) in &obj {
        let keep = allowed.contains(&k.as_str())
            && match (d, k.as_str()) {
                (Dialect::Anthropic, "minItems") => v.as_u64().is_some_and(|n| n <= 1),
                (Dialect::OpenAi, "format") => {
                    v.as_str().is_some_and(|f| OPENAI_FORMATS.contains(&f))
                }
                (Dialect::Anthropic, "format") => {
                    v.as_str().is_some_and(|f| ANTHROPIC_FORMATS.contains(&f))
                }
                (_, "additionalProperties") => false, // set below for every object
                _ => true,
            };
        if keep {
            out.insert(k.clone(), convert_children(k, v, d, depth));
        } else if let Some(note) = describe(k, v) {
            notes.push(note);
        }
    }
    let is_object = obj.contains_key("properties")
        || match obj.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
            _ => false,
        };
    if is_object {
        if !matches!(
            obj.get("additionalProperties"),
            None | Some(Value::Bool(false))
        ) {
            notes.push("other properties are not accepted here".to_string());
        }
        out.insert("additionalProperties".into(), Value::Bool(false));
        let props = out
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if d == Dialect::OpenAi {
            let required: Vec<String> = obj
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            if let Value::Object(props) = props {
                // Strict mode wants every property required; optional ones may be null.
                for (name, p) in props.iter_mut() {
                    if !required.contains(name) {
                        *p = nullable(std::mem::take(p));
                    }
                }
                let all: Vec<Value> = props.keys().cloned().map(Value::String).collect();
                out.insert("required".into(), Value::Array(all));
            }
        }
    }
    if !notes.is_empty() {
        let extra = format!("({})", notes.join("; "));
        let desc = match out.get("description").and_then(Value::as_str) {
            Some(d) if !d.is_empty() => format!("{d} {extra}"),
            _ => extra,
        };
        out.insert("description".into(), Value::String(desc));
    }
    Value::Object(out)
}

fn convert_children(key: &str, v: &Value, d: Dialect, depth: usize) -> Value {
    match (key, v) {
        ("properties" | "$defs" | "definitions", Value::Object(m)) => Value::Object(
            m.iter()
                .map(|(k, s)| (k.clone(), convert(s, d, depth + 1)))
                .collect(),
        ),
        ("items", Value::Object(_) | Value::Bool(_)) => convert(v, d, depth + 1),
        ("anyOf", Value::Array(a)) => {
            Value::Array(a.iter().map(|s| convert(s, d, depth + 1)).collect())
        }
        _ => v.clone(),
    }
}

/// Folds `allOf` subschemas into their parent (properties and required merged, other keywords
/// first-wins), since neither provider takes `allOf` in strict mode.
fn merge_all_of(obj: &Map<String, Value>) -> Map<String, Value> {
    let mut out = obj.clone();
    let Some(Value::Array(parts)) = out.remove("allOf") else {
        return out;
    };
    for part in parts {
        let Value::Object(p) = part else { continue };
        let p = merge_all_of(&p);
        for (k, v) in p {
            match (k.as_str(), out.get_mut(&k), v) {
                ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                    for (name, s) in theirs {
                        mine.entry(name).or_insert(s);
                    }
                }
                ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                    for r in theirs {
                        if !mine.contains(&r) {
                            mine.push(r);
                        }
                    }
                }
                (_, Some(_), _) => {}
                (_, None, v) => {
                    out.insert(k, v);
                }
            }
        }
    }
    out
}

/// Makes a (converted) property schema also accept `null`.
fn nullable(mut p: Value) -> Value {
    if let Value::Object(m) = &mut p {
        // An enum must list null too, or the nullable type is unusable.
        let has_enum = match m.get_mut("enum") {
            Some(Value::Array(e)) => {
                if !e.contains(&Value::Null) {
                    e.push(Value::Null);
                }
                true
            }
            _ => false,
        };
        match m.get_mut("type") {
            Some(Value::String(t)) => {
                let t = Value::String(std::mem::take(t));
                m.insert("type".into(), Value::Array(vec![t, "null".into()]));
                return p;
            }
            Some(Value::Array(ts)) => {
                if !ts.iter().any(|t| t == "null") {
                    ts.push("null".into());
                }
                return p;
            }
            _ if has_enum => return p,
            _ => {}
        }
    }
    let description = p.get("description").cloned();
    let mut wrapper = Map::new();
    if let Some(d) = description {
        wrapper.insert("description".into(), d);
    }
    wrapper.insert(
        "anyOf".into(),
        Value::Array(vec![p, serde_json::json!({"type": "null"})]),
    );
    Value::Object(wrapper)
}

/// A bound a provider refuses, as words the model can still follow.
fn describe(key: &str, v: &Value) -> Option<String> {
    let n = || v.to_string();
    Some(match key {
        "minLength" => format!("at least {} characters", n()),
        "maxLength" => format!("at most {} characters", n()),
        "pattern" => format!("must match the regular expression {}", n()),
        "format" => format!("format: {}", v.as_str().map_or_else(n, String::from)),
        "minimum" => format!("at least {}", n()),
        "maximum" => format!("at most {}", n()),
        "exclusiveMinimum" => format!("greater than {}", n()),
        "exclusiveMaximum" => format!("less than {}", n()),
        "multipleOf" => format!("a multiple of {}", n()),
        "minItems" => format!("at least {} items", n()),
        "maxItems" => format!("at most {} items", n()),
        "uniqueItems" if v == &Value::Bool(true) => "items must be unique".to_string(),
        "minProperties" => format!("at least {} properties", n()),
        "maxProperties" => format!("at most {} properties", n()),
        // Rules with no short wording are restated as written, so none is dropped unseen.
        "not"
        | "if"
        | "then"
        | "else"
        | "patternProperties"
        | "propertyNames"
        | "contains"
        | "minContains"
        | "maxContains"
        | "dependentRequired"
        | "dependentSchemas"
        | "dependencies"
        | "prefixItems"
        | "additionalItems"
        | "unevaluatedProperties"
        | "unevaluatedItems" => format!("also checked: {key} {}", clipped(&n(), 200)),
        // Our own keyword, which no strict dialect takes: the model still learns what it asks.
        "x-grounded" => match v.as_str() {
            Some("text") => "copied from what this run read (its input or a tool result)".into(),
            Some("source") => "the id or path of a source read or searched in this run".into(),
            Some("number") => "a number as written in what this run read".into(),
            _ => return None,
        },
        _ => return None,
    })
}

/// `text` cut to at most `max` characters, marked when cut.
fn clipped(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// Undoes [`openai_strict`]'s nullable rewrite on a value that came back: removes `null`
/// properties that the *original* schema does not require and does not allow to be null, so
/// the value can be validated against the full contract. Follows `properties`, `items` and
/// local `$ref`s (`#/$defs/…`, `#/definitions/…`).
pub fn strip_optional_nulls(original: &Value, value: &mut Value) {
    strip(original, original, value, 0);
}

fn strip(root: &Value, schema: &Value, value: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let Some(schema) = resolve(root, schema) else {
        return;
    };
    match value {
        Value::Object(obj) => {
            let Some(Value::Object(props)) = schema.get("properties") else {
                return;
            };
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            obj.retain(|k, v| {
                !(v.is_null()
                    && !required.contains(&k.as_str())
                    && props
                        .get(k)
                        .is_some_and(|p| !allows_null(resolve(root, p).unwrap_or(p))))
            });
            for (k, v) in obj.iter_mut() {
                if let Some(p) = props.get(k) {
                    strip(root, p, v, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for v in items {
                    strip(root, item_schema, v, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Follows same-document `$ref`s (`#/$defs/My%20Type`: JSON Pointer tokens, percent-decoded,
/// by [`crate::json::pointer`], the one reader of them), a bounded number of hops so that a
/// ref cycle cannot loop; `None` when one does not resolve.
fn resolve<'a>(root: &'a Value, mut schema: &'a Value) -> Option<&'a Value> {
    use crate::json::pointer;
    for _ in 0..32 {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => schema = pointer::resolve(root, &pointer::parse_local_ref(r)?)?,
            None => return Some(schema),
        }
    }
    None
}

fn allows_null(schema: &Value) -> bool {
    let has_null = |v: Option<&Value>| match v {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(a)) => a.iter().any(|t| t == "null" || t.is_null()),
        _ => false,
    };
    has_null(schema.get("type"))
        || has_null(schema.get("enum"))
        || schema.get("const").is_some_and(Value::is_null)
        || ["anyOf", "oneOf"].iter().any(|k| {
            schema
                .get(*k)
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(allows_null))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "required": ["findings"],
            "additionalProperties": false,
            "properties": {
                "findings": {
                    "type": "array", "minItems": 2, "maxItems": 6, "uniqueItems": true,
                    "items": {
                        "type": "object",
                        "properties": {
                            "claim": {"type": "string", "minLength": 1, "maxLength": 300,
                                      "description": "One claim."},
                            "score": {"type": "number", "minimum": 0, "maximum": 1},
                            "id": {"type": "string", "pattern": "^[a-z]+$", "format": "uuid"},
                            "kind": {"oneOf": [{"const": "a"}, {"const": "b"}]}
                        },
                        "required": ["claim"]
                    }
                },
                "meta": {"$ref": "#/$defs/Meta"},
                "mixed": {"allOf": [
                    {"type": "object", "properties": {"x": {"type": "string", "maxLength": 3}}},
                    {"required": ["x"], "minProperties": 1}
                ]}
            },
            "$defs": {"Meta": {"type": "object", "properties": {"n": {"type": "integer"}},
                               "patternProperties": {"^x": {}}, "not": {"required": ["z"]}}}
        })
    }

    /// Every keyword of every (sub)schema, with its path.
    fn keywords(v: &Value, path: String, out: &mut Vec<(String, String)>) {
        let Value::Object(m) = v else { return };
        for (k, c) in m {
            out.push((path.clone(), k.clone()));
            match (k.as_str(), c) {
                ("properties" | "$defs" | "definitions", Value::Object(ps)) => {
                    for (n, s) in ps {
                        keywords(s, format!("{path}/{k}/{n}"), out);
                    }
                }
                ("anyOf", Value::Array(a)) => {
                    for (i, s) in a.iter().enumerate() {
                        keywords(s, format!("{path}/anyOf/{i}"), out);
                    }
                }
                ("items", s) => keywords(s, format!("{path}/items"), out),
                _ => {}
            }
        }
    }

    fn objects_closed(v: &Value) -> bool {
        let Value::Object(m) = v else { return true };
        if (m.get("type") == Some(&json!("object")) || m.contains_key("properties"))
            && m.get("additionalProperties") != Some(&json!(false))
        {
            return false;
        }
        m.iter().all(|(k, c)| match (k.as_str(), c) {
            ("properties" | "$defs", Value::Object(ps)) => ps.values().all(objects_closed),
            ("anyOf", Value::Array(a)) => a.iter().all(objects_closed),
            ("items", s) => objects_closed(s),
            _ => true,
        })
    }

    #[test]
    fn openai_keeps_only_accepted_keywords() {
        let s = openai_strict(&sample());
        let mut kw = Vec::new();
        keywords(&s, String::new(), &mut kw);
        for (path, k) in &kw {
            assert!(
                OPENAI_ALLOWED.contains(&k.as_str()),
                "{k} survives at {path}"
            );
        }
        for forbidden in [
            "minLength",
            "maxLength",
            "uniqueItems",
            "allOf",
            "oneOf",
            "not",
            "patternProperties",
            "minProperties",
            "$schema",
        ] {
            assert!(!kw.iter().any(|(_, k)| k == forbidden), "{forbidden}");
        }
        assert!(objects_closed(&s), "{s:#}");
        let item = &s["properties"]["findings"]["items"];
        // Every property required; the optional ones nullable.
        assert_eq!(item["required"], json!(["claim", "score", "id", "kind"]));
        assert_eq!(
            item["properties"]["score"]["type"],
            json!(["number", "null"])
        );
        assert_eq!(
            item["properties"]["kind"]["anyOf"][1],
            json!({"type": "null"})
        );
        assert_eq!(
            item["properties"]["claim"]["description"],
            "One claim. (at least 1 characters; at most 300 characters)"
        );
        // Accepted bounds stay native.
        assert_eq!(s["properties"]["findings"]["maxItems"], 6);
        assert_eq!(item["properties"]["id"]["pattern"], "^[a-z]+$");
        assert_eq!(item["properties"]["id"]["format"], "uuid");
        // allOf folded in.
        assert_eq!(
            s["properties"]["mixed"]["properties"]["x"]["description"],
            "(at most 3 characters)"
        );
        assert_eq!(s["properties"]["mixed"]["required"], json!(["x"]));
        assert_eq!(
            s["$defs"]["Meta"]["properties"]["n"]["type"],
            json!(["integer", "null"])
        );
    }

    /// Walks `original` (no `allOf`) and checks that every constraint keyword survives in
    /// `converted` at the same place: kept with its value, or restated in the description.
    fn no_bound_lost(original: &Value, converted: &Value, path: &str) {
        let (Value::Object(o), Value::Object(c)) = (original, converted) else {
            return;
        };
        let desc = c.get("description").and_then(Value::as_str).unwrap_or("");
        for (k, v) in o {
            if let Some(note) = describe(k, v) {
                assert!(
                    c.get(k) == Some(v) || desc.contains(&note),
                    "{path}: {k} = {v} lost in {converted}"
                );
            }
            match (k.as_str(), v) {
                ("properties" | "$defs" | "definitions", Value::Object(ps)) => {
                    for (n, s) in ps {
                        no_bound_lost(s, &c[k.as_str()][n], &format!("{path}/{k}/{n}"));
                    }
                }
                ("anyOf" | "oneOf", Value::Array(a)) => {
                    for (i, s) in a.iter().enumerate() {
                        no_bound_lost(s, &c["anyOf"][i], &format!("{path}/{k}/{i}"));
                    }
                }
                ("items", s) => no_bound_lost(s, &c["items"], &format!("{path}/items")),
                _ => {}
            }
        }
    }

    #[test]
    fn anthropic_restates_every_bound_it_removes() {
        let mut original = sample();
        // allOf is merged away (checked elsewhere); everything else maps one to one.
        original["properties"]
            .as_object_mut()
            .expect("properties")
            .remove("mixed");
        original["properties"]["tags"] = json!({
            "type": "array", "minItems": 1, "maxItems": 3, "contains": {"const": "x"},
            "items": {"type": "string", "minLength": 2, "maxLength": 8,
                      "pattern": "^[a-z]+$", "format": "hostname"}
        });
        original["properties"]["n"] = json!({
            "type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10,
            "multipleOf": 2, "not": {"const": 4}
        });
        let converted = anthropic(&original);
        no_bound_lost(&original, &converted, "");
        // Before: `not` and `patternProperties` vanished without a word.
        let meta = converted["$defs"]["Meta"]["description"]
            .as_str()
            .unwrap_or("");
        assert!(
            meta.contains(r#"also checked: not {"required":["z"]}"#),
            "{meta}"
        );
        assert!(
            meta.contains(r#"also checked: patternProperties {"^x":{}}"#),
            "{meta}"
        );
        // A long rule is clipped, visibly.
        let long = json!({"type": "string", "not": {"enum": vec!["abcdefghij"; 40]}});
        let d = anthropic(&long)["description"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(d.ends_with("…)") && d.chars().count() < 240, "{d}");
    }

    #[test]
    fn anthropic_strips_every_bound() {
        let s = anthropic(&sample());
        let mut kw = Vec::new();
        keywords(&s, String::new(), &mut kw);
        for (path, k) in &kw {
            assert!(
                ANTHROPIC_ALLOWED.contains(&k.as_str()),
                "{k} survives at {path}"
            );
        }
        for forbidden in [
            "minLength",
            "maxLength",
            "maxItems",
            "minimum",
            "maximum",
            "pattern",
            "uniqueItems",
            "allOf",
            "oneOf",
            "not",
        ] {
            assert!(
                !kw.iter().any(|(_, k)| k == forbidden),
                "{forbidden} in {s:#}"
            );
        }
        assert!(objects_closed(&s), "{s:#}");
        let f = &s["properties"]["findings"];
        assert_eq!(
            f["description"],
            "(at least 2 items; at most 6 items; items must be unique)"
        );
        assert_eq!(f["items"]["required"], json!(["claim"]));
        assert_eq!(
            f["items"]["properties"]["id"]["description"],
            "(must match the regular expression \"^[a-z]+$\")"
        );
        assert_eq!(f["items"]["properties"]["id"]["format"], "uuid");
        // minItems 0 or 1 is accepted.
        let t = anthropic(&json!({"type": "array", "minItems": 1, "items": {"type": "string"}}));
        assert_eq!(t["minItems"], 1);
    }

    #[test]
    fn nulls_for_optional_properties_are_stripped_back() {
        let original = sample();
        let mut v = json!({
            "findings": [{"claim": "c", "score": null, "id": null, "kind": "a"}],
            "meta": {"n": null},
            "mixed": null
        });
        strip_optional_nulls(&original, &mut v);
        assert_eq!(
            v,
            json!({"findings": [{"claim": "c", "kind": "a"}], "meta": {}})
        );
        // A property that may be null keeps its null.
        let s = json!({"type": "object", "properties": {"x": {"type": ["string", "null"]}}});
        let mut v = json!({"x": null});
        strip_optional_nulls(&s, &mut v);
        assert_eq!(v, json!({"x": null}));
    }

    /// A `$ref` whose JSON Pointer token is percent-encoded (a space in a `$defs` name) is
    /// followed: the nulls under it are stripped too. The dialect's own resolver missed it.
    #[test]
    fn percent_encoded_refs_are_followed() {
        let original = json!({
            "type": "object",
            "properties": {"item": {"$ref": "#/$defs/My%20Type"}, "tilde": {"$ref": "#/$defs/a~1b"}},
            "$defs": {
                "My Type": {"type": "object", "properties": {"note": {"type": "string"}}},
                "a/b": {"type": "object", "properties": {"n": {"type": "integer"}}}
            }
        });
        let mut v = json!({"item": {"note": null}, "tilde": {"n": null}});
        strip_optional_nulls(&original, &mut v);
        assert_eq!(v, json!({"item": {}, "tilde": {}}));
        let converted = openai(&original);
        assert!(converted.strict, "{:#}", converted.schema);
    }

    #[test]
    fn strict_is_claimed_only_for_schemas_strict_mode_takes() {
        assert!(openai(&sample()).strict);
        // The root must be an object.
        assert!(!openai(&json!({"type": "array", "items": {"type": "string"}})).strict);
        assert!(!openai(&json!({"anyOf": [{"type": "object"}, {"type": "null"}]})).strict);
        // An untyped subschema (any value) has no strict form.
        assert!(!openai(&json!({"type": "object", "properties": {"x": {}}})).strict);
        // A ref that does not resolve, or points elsewhere.
        assert!(
            !openai(&json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/Nope"}}}))
                .strict
        );
        assert!(
            !openai(&json!({"type": "object", "properties": {"x": {"$ref": "other.json#/a"}}}))
                .strict
        );
        // Nesting past the documented limit.
        let mut deep = json!({"type": "string"});
        for _ in 0..=OPENAI_STRICT_MAX_NESTING {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        assert!(!openai(&deep).strict);
        let shallow = json!({"type": "object", "properties": {"x": {"type": "object", "properties": {"y": {"type": "string"}}}}});
        assert!(openai(&shallow).strict);
        // Too many enum values in all.
        let values: Vec<Value> = (0..=OPENAI_STRICT_MAX_ENUM_VALUES)
            .map(|i| json!(i.to_string()))
            .collect();
        assert!(!openai(&json!({"type": "object", "properties": {"e": {"enum": values}}})).strict);
    }

    #[test]
    fn deep_and_odd_schemas_do_not_panic() {
        let mut s = json!({"type": "string", "maxLength": 1});
        for _ in 0..500 {
            s = json!({"type": "array", "maxItems": 2, "items": s});
        }
        let _ = openai_strict(&s);
        assert!(!openai(&s).strict, "too deep for strict mode");
        let _ = anthropic(&s);
        assert_eq!(openai_strict(&json!(true)), json!({}));
        assert_eq!(anthropic(&json!(7)), json!({}));
    }
}
