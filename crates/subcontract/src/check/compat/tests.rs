use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::codes::*;
use super::*;
use crate::contract::subsume::{self as schema, compare as cmp, Side};

/// (what, side, old, new, expected code; `None` = compatible, no finding at all).
fn table() -> Vec<(&'static str, Side, Value, Value, Option<&'static str>)> {
    use Side::{Input as I, Output as O};
    let obj = |props: Value, req: Value, closed: bool| json!({"type": "object", "properties": props, "required": req, "additionalProperties": !closed});
    let s = json!({"type": "string", "maxLength": 10});
    vec![
        // Input: required.
        (
            "in: new required",
            I,
            obj(json!({"a": s}), json!([]), true),
            obj(json!({"a": s}), json!(["a"]), true),
            Some(INPUT_REQUIRED_ADDED),
        ),
        (
            "in: required dropped",
            I,
            obj(json!({"a": s}), json!(["a"]), true),
            obj(json!({"a": s}), json!([]), true),
            None,
        ),
        // Input: properties of a closed object.
        (
            "in: property removed, closed",
            I,
            obj(json!({"a": s, "b": s}), json!([]), true),
            obj(json!({"a": s}), json!([]), true),
            Some(INPUT_PROPERTY_REMOVED),
        ),
        (
            "in: property added, closed",
            I,
            obj(json!({"a": s}), json!([]), true),
            obj(json!({"a": s, "b": s}), json!([]), true),
            None,
        ),
        (
            "in: object closed",
            I,
            obj(json!({"a": s}), json!([]), false),
            obj(json!({"a": s}), json!([]), true),
            Some(INPUT_PROPERTY_REMOVED),
        ),
        (
            "in: object opened",
            I,
            obj(json!({"a": s}), json!([]), true),
            obj(json!({"a": s}), json!([]), false),
            None,
        ),
        // Input: types.
        (
            "in: type narrowed",
            I,
            json!({"type": ["string", "null"]}),
            json!({"type": "string"}),
            Some(INPUT_TYPE_NARROWED),
        ),
        (
            "in: type widened",
            I,
            json!({"type": "string"}),
            json!({"type": ["string", "null"]}),
            None,
        ),
        (
            "in: number to integer",
            I,
            json!({"type": "number"}),
            json!({"type": "integer"}),
            Some(INPUT_TYPE_NARROWED),
        ),
        (
            "in: integer to number",
            I,
            json!({"type": "integer"}),
            json!({"type": "number"}),
            None,
        ),
        // Input: bounds.
        (
            "in: maxLength lowered",
            I,
            json!({"type": "string", "maxLength": 500}),
            json!({"type": "string", "maxLength": 300}),
            Some(INPUT_BOUND_TIGHTENED),
        ),
        (
            "in: maxLength raised",
            I,
            json!({"type": "string", "maxLength": 300}),
            json!({"type": "string", "maxLength": 500}),
            None,
        ),
        (
            "in: minLength raised",
            I,
            json!({"type": "string", "minLength": 1}),
            json!({"type": "string", "minLength": 5}),
            Some(INPUT_BOUND_TIGHTENED),
        ),
        (
            "in: minLength lowered",
            I,
            json!({"type": "string", "minLength": 5}),
            json!({"type": "string", "minLength": 1}),
            None,
        ),
        (
            "in: maxItems lowered",
            I,
            json!({"type": "array", "maxItems": 5}),
            json!({"type": "array", "maxItems": 4}),
            Some(INPUT_BOUND_TIGHTENED),
        ),
        (
            "in: maxItems removed",
            I,
            json!({"type": "array", "maxItems": 5}),
            json!({"type": "array"}),
            None,
        ),
        (
            "in: maximum lowered",
            I,
            json!({"type": "integer", "maximum": 10}),
            json!({"type": "integer", "maximum": 9}),
            Some(INPUT_BOUND_TIGHTENED),
        ),
        (
            "in: maximum raised",
            I,
            json!({"type": "integer", "maximum": 10}),
            json!({"type": "integer", "maximum": 11}),
            None,
        ),
        (
            "in: maximum made exclusive",
            I,
            json!({"type": "number", "maximum": 10}),
            json!({"type": "number", "exclusiveMaximum": 10}),
            Some(INPUT_BOUND_TIGHTENED),
        ),
        (
            "in: exclusive made inclusive",
            I,
            json!({"type": "number", "exclusiveMaximum": 10}),
            json!({"type": "number", "maximum": 10}),
            None,
        ),
        (
            "in: minimum added",
            I,
            json!({"type": "number"}),
            json!({"type": "number", "minimum": 0}),
            Some(INPUT_BOUND_TIGHTENED),
        ),
        (
            "in: minimum removed",
            I,
            json!({"type": "number", "minimum": 0}),
            json!({"type": "number"}),
            None,
        ),
        (
            "in: multipleOf added",
            I,
            json!({"type": "integer"}),
            json!({"type": "integer", "multipleOf": 2}),
            Some(INPUT_BOUND_TIGHTENED),
        ),
        (
            "in: multipleOf divided",
            I,
            json!({"type": "integer", "multipleOf": 4}),
            json!({"type": "integer", "multipleOf": 2}),
            None,
        ),
        (
            "in: minProperties raised",
            I,
            json!({"type": "object", "minProperties": 0}),
            json!({"type": "object", "minProperties": 1}),
            Some(INPUT_BOUND_TIGHTENED),
        ),
        (
            "in: maxProperties raised",
            I,
            json!({"type": "object", "maxProperties": 1}),
            json!({"type": "object", "maxProperties": 2}),
            None,
        ),
        // Input: enums.
        (
            "in: enum value removed",
            I,
            json!({"enum": ["a", "b"]}),
            json!({"enum": ["a"]}),
            Some(INPUT_ENUM_NARROWED),
        ),
        (
            "in: enum value added",
            I,
            json!({"enum": ["a"]}),
            json!({"enum": ["a", "b"]}),
            None,
        ),
        (
            "in: const changed",
            I,
            json!({"const": "a"}),
            json!({"const": "b"}),
            Some(INPUT_ENUM_NARROWED),
        ),
        (
            "in: const to enum",
            I,
            json!({"const": "a"}),
            json!({"enum": ["a", "b"]}),
            None,
        ),
        (
            "in: enum added to a string",
            I,
            json!({"type": "string"}),
            json!({"type": "string", "enum": ["x"]}),
            Some(INPUT_ENUM_NARROWED),
        ),
        (
            "in: enum into a string",
            I,
            json!({"enum": ["x", "y"]}),
            json!({"type": "string", "maxLength": 3}),
            None,
        ),
        // Input: patterns.
        (
            "in: pattern added",
            I,
            json!({"type": "string"}),
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            Some(INPUT_PATTERN_TIGHTENED),
        ),
        (
            "in: pattern removed",
            I,
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            json!({"type": "string"}),
            None,
        ),
        (
            "in: pattern changed",
            I,
            json!({"type": "string", "pattern": "^[a-z]+$"}),
            json!({"type": "string", "pattern": "^[a-z0-9]+$"}),
            Some(CANNOT_PROVE),
        ),
        (
            "in: pattern unchanged",
            I,
            json!({"type": "string", "pattern": "^a"}),
            json!({"type": "string", "pattern": "^a"}),
            None,
        ),
        // Input: other constraints.
        (
            "in: uniqueItems added",
            I,
            json!({"type": "array"}),
            json!({"type": "array", "uniqueItems": true}),
            Some(INPUT_CONSTRAINT_ADDED),
        ),
        (
            "in: uniqueItems removed",
            I,
            json!({"type": "array", "uniqueItems": true}),
            json!({"type": "array"}),
            None,
        ),
        (
            "in: item type narrowed",
            I,
            json!({"type": "array", "items": {"type": ["string", "integer"]}}),
            json!({"type": "array", "items": {"type": "string"}}),
            Some(INPUT_TYPE_NARROWED),
        ),
        (
            "in: item type widened",
            I,
            json!({"type": "array", "items": {"type": "string"}}),
            json!({"type": "array", "items": {"type": ["string", "integer"]}}),
            None,
        ),
        (
            "in: unfamiliar keyword",
            I,
            json!({"type": "string"}),
            json!({"type": "string", "x-strict": true}),
            Some(CANNOT_PROVE),
        ),
        (
            "in: not added",
            I,
            json!({"type": "string"}),
            json!({"type": "string", "not": {"const": "x"}}),
            Some(CANNOT_PROVE),
        ),
        (
            "in: anyOf branch removed",
            I,
            json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
            json!({"anyOf": [{"type": "string"}]}),
            Some(INPUT_TYPE_NARROWED),
        ),
        (
            "in: anyOf branch added",
            I,
            json!({"anyOf": [{"type": "string"}]}),
            json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
            None,
        ),
        // Input: `$ref`s, resolved in each document.
        (
            "in: $ref target narrowed",
            I,
            json!({"$defs": {"T": {"type": "string", "maxLength": 9}}, "type": "object", "properties": {"t": {"$ref": "#/$defs/T"}}}),
            json!({"$defs": {"T": {"type": "string", "maxLength": 5}}, "type": "object", "properties": {"t": {"$ref": "#/$defs/T"}}}),
            Some(INPUT_BOUND_TIGHTENED),
        ),
        (
            "in: $ref target widened",
            I,
            json!({"$defs": {"T": {"type": "string", "maxLength": 5}}, "type": "object", "properties": {"t": {"$ref": "#/$defs/T"}}}),
            json!({"$defs": {"T": {"type": "string", "maxLength": 9}}, "type": "object", "properties": {"t": {"$ref": "#/$defs/T"}}}),
            None,
        ),
        (
            "in: remote $ref",
            I,
            json!({"type": "string"}),
            json!({"$ref": "other.json#/x"}),
            Some(CANNOT_PROVE),
        ),
        (
            "in: recursive $ref unchanged",
            I,
            json!({"$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}, "$ref": "#/$defs/N"}),
            json!({"$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}, "$ref": "#/$defs/N"}),
            None,
        ),
        (
            "in: nested $id",
            I,
            json!({"type": "object", "properties": {"t": {"$id": "http://x/t", "type": "string"}}}),
            json!({"type": "object", "properties": {"t": {"$id": "http://x/t", "type": "string"}, "u": {"type": "string"}}}),
            Some(CANNOT_PROVE),
        ),
        // Output: the mirror rules.
        (
            "out: required removed",
            O,
            obj(json!({"a": s}), json!(["a"]), true),
            obj(json!({"a": s}), json!([]), true),
            Some(OUTPUT_REQUIRED_REMOVED),
        ),
        (
            "out: required added",
            O,
            obj(json!({"a": s}), json!([]), true),
            obj(json!({"a": s}), json!(["a"]), true),
            None,
        ),
        (
            "out: property added, old closed",
            O,
            obj(json!({"a": s}), json!(["a"]), true),
            obj(json!({"a": s, "b": s}), json!(["a"]), true),
            Some(OUTPUT_PROPERTY_ADDED),
        ),
        (
            "out: property removed",
            O,
            obj(json!({"a": s, "b": s}), json!(["a"]), true),
            obj(json!({"a": s}), json!(["a"]), true),
            None,
        ),
        (
            "out: type widened",
            O,
            json!({"type": "string"}),
            json!({"type": ["string", "null"]}),
            Some(OUTPUT_TYPE_WIDENED),
        ),
        (
            "out: type narrowed",
            O,
            json!({"type": ["string", "null"]}),
            json!({"type": "string"}),
            None,
        ),
        (
            "out: maxLength raised",
            O,
            json!({"type": "string", "maxLength": 10}),
            json!({"type": "string", "maxLength": 20}),
            Some(OUTPUT_BOUND_LOOSENED),
        ),
        (
            "out: maxLength lowered",
            O,
            json!({"type": "string", "maxLength": 20}),
            json!({"type": "string", "maxLength": 10}),
            None,
        ),
        (
            "out: minimum lowered",
            O,
            json!({"type": "integer", "minimum": 1}),
            json!({"type": "integer", "minimum": 0}),
            Some(OUTPUT_BOUND_LOOSENED),
        ),
        (
            "out: minimum raised",
            O,
            json!({"type": "integer", "minimum": 0}),
            json!({"type": "integer", "minimum": 1}),
            None,
        ),
        (
            "out: enum value added",
            O,
            json!({"enum": ["a"]}),
            json!({"enum": ["a", "b"]}),
            Some(OUTPUT_ENUM_WIDENED),
        ),
        (
            "out: enum value removed",
            O,
            json!({"enum": ["a", "b"]}),
            json!({"enum": ["a"]}),
            None,
        ),
        (
            "out: pattern removed",
            O,
            json!({"type": "string", "pattern": "^a"}),
            json!({"type": "string"}),
            Some(OUTPUT_PATTERN_LOOSENED),
        ),
        (
            "out: pattern added",
            O,
            json!({"type": "string"}),
            json!({"type": "string", "pattern": "^a"}),
            None,
        ),
        (
            "out: uniqueItems removed",
            O,
            json!({"type": "array", "uniqueItems": true}),
            json!({"type": "array"}),
            Some(OUTPUT_CONSTRAINT_REMOVED),
        ),
        (
            "out: maxItems raised in items",
            O,
            json!({"type": "array", "items": {"type": "array", "maxItems": 2}}),
            json!({"type": "array", "items": {"type": "array", "maxItems": 3}}),
            Some(OUTPUT_BOUND_LOOSENED),
        ),
        (
            "out: prefixItems tightened",
            O,
            json!({"type": "array", "prefixItems": [{"type": ["string", "null"]}]}),
            json!({"type": "array", "prefixItems": [{"type": "string"}]}),
            None,
        ),
        (
            "out: allOf member loosened",
            O,
            json!({"allOf": [{"type": "string", "maxLength": 5}]}),
            json!({"allOf": [{"type": "string", "maxLength": 6}]}),
            Some(OUTPUT_BOUND_LOOSENED),
        ),
        (
            "out: allOf member tightened",
            O,
            json!({"allOf": [{"type": "string", "maxLength": 6}]}),
            json!({"allOf": [{"type": "string", "maxLength": 5}]}),
            None,
        ),
    ]
}

fn run(side: Side, old: &Value, new: &Value) -> Vec<schema::Finding> {
    match side {
        Side::Input => cmp(old, new, side),
        Side::Output => cmp(new, old, side),
    }
}

#[test]
fn every_rule_in_both_directions() {
    let t = table();
    assert!(t.len() >= 40, "{}", t.len());
    let mut failures = Vec::new();
    for (what, side, old, new, want) in &t {
        let got = run(*side, old, new);
        let ok = match want {
            None => got.is_empty(),
            Some(code) => got.iter().any(|f| super::code(f.kind, *side) == *code),
        };
        if !ok {
            failures.push(format!("{what}: want {want:?}, got {got:#?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn findings_point_into_the_new_schema_and_say_who_breaks() {
    let f = cmp(
        &json!({"type": "object", "properties": {"q": {"type": "string", "maxLength": 9}}}),
        &json!({"type": "object", "properties": {"q": {"type": "string", "maxLength": 5}}}),
        Side::Input,
    );
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].pointer, "/properties/q/maxLength");
    assert!(f[0].message.contains("callers break"), "{}", f[0].message);
    let f = cmp(
        &json!({"type": ["string", "null"]}),
        &json!({"type": "string"}),
        Side::Output,
    );
    assert!(f[0].message.contains("parents"), "{}", f[0].message);
}

#[test]
fn adversarial_ref_graphs_end_as_cannot_prove() {
    // A chain of refs deeper than the engine descends: a warning, never a pass or a hang.
    let mut defs = serde_json::Map::new();
    for i in 0..200 {
        defs.insert(
            format!("d{i}"),
            json!({"type": "array", "items": {"$ref": format!("#/$defs/d{}", i + 1)}}),
        );
    }
    defs.insert("d200".into(), json!({"type": "string"}));
    let old = json!({"$defs": defs.clone(), "$ref": "#/$defs/d0"});
    defs.insert("d200".into(), json!({"type": "string", "maxLength": 1}));
    let new = json!({"$defs": defs, "$ref": "#/$defs/d0"});
    let f = cmp(&old, &new, Side::Input);
    assert!(!f.is_empty());
    assert!(f
        .iter()
        .all(|x| x.kind == schema::Kind::CannotProve || x.kind == schema::Kind::Bound));
}

#[test]
fn exponential_alternatives_stop_at_the_visit_cap_quickly() {
    // 40 levels of two-branch `anyOf` over refs: 2^40 paths if explored naively.
    let mk = |leaf: Value| {
        let mut defs = serde_json::Map::new();
        for i in 0..40 {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(
                format!("d{i}"),
                json!({"anyOf": [{"$ref": next}, {"type": "array", "items": {"$ref": next}}]}),
            );
        }
        defs.insert("d40".into(), leaf);
        json!({"$defs": defs, "$ref": "#/$defs/d0"})
    };
    let old = mk(json!({"type": "string", "maxLength": 9}));
    let new = mk(json!({"type": "string", "maxLength": 5}));
    let started = std::time::Instant::now();
    let f = cmp(&old, &new, Side::Input);
    assert!(!f.is_empty(), "a narrowing is never passed");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// A random schema from the family the engine compares exactly, as (schema, a description of
/// its keywords we can narrow or widen).
fn random_schema(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..if depth > 2 { 3 } else { 5 }) {
        0 => {
            json!({"type": "string", "minLength": rng.random_range(1..5), "maxLength": rng.random_range(10..100)})
        }
        1 => {
            json!({"type": "integer", "minimum": rng.random_range(-50..0), "maximum": rng.random_range(1..50)})
        }
        2 => {
            let all = ["a", "b", "c", "d"];
            json!({"enum": all[..rng.random_range(2..=4)]})
        }
        3 => {
            json!({"type": "array", "minItems": 1, "maxItems": rng.random_range(2..9), "items": random_schema(rng, depth + 1)})
        }
        _ => {
            let mut props = serde_json::Map::new();
            let n = rng.random_range(1..4);
            for i in 0..n {
                props.insert(format!("p{i}"), random_schema(rng, depth + 1));
            }
            json!({"type": "object", "properties": props, "required": ["p0"], "additionalProperties": false})
        }
    }
}

/// Every place a keyword can be narrowed (or widened): JSON Pointers of the leaf schemas.
fn leaves(v: &Value, at: String, out: &mut Vec<String>) {
    match v.get("type").and_then(Value::as_str) {
        Some("array") => leaves(&v["items"], format!("{at}/items"), out),
        Some("object") => {
            for (k, p) in v["properties"].as_object().unwrap() {
                leaves(p, format!("{at}/properties/{k}"), out);
            }
            out.push(at);
        }
        _ => out.push(at),
    }
}

/// Changes the schema at `at` one step: narrower when `narrow`, wider otherwise.
fn mutate(root: &Value, at: &str, narrow: bool, rng: &mut StdRng) -> Value {
    let mut root = root.clone();
    let node = root.pointer_mut(at).unwrap();
    let d = if narrow { -1 } else { 1 };
    match node.get("type").and_then(Value::as_str) {
        Some("string") => {
            if rng.random_bool(0.5) {
                node["maxLength"] = json!(node["maxLength"].as_i64().unwrap() + d);
            } else {
                node["minLength"] = json!(node["minLength"].as_i64().unwrap() - d);
            }
        }
        Some("integer") => {
            if rng.random_bool(0.5) {
                node["maximum"] = json!(node["maximum"].as_i64().unwrap() + d);
            } else {
                node["minimum"] = json!(node["minimum"].as_i64().unwrap() - d);
            }
        }
        Some("array") => node["maxItems"] = json!(node["maxItems"].as_i64().unwrap() + d),
        Some("object") => {
            if narrow {
                // A new required property, or one removed from the closed object.
                let props = node["properties"].as_object().unwrap().clone();
                let k = props.keys().next_back().unwrap().clone();
                if rng.random_bool(0.5) && k != "p0" {
                    node["properties"].as_object_mut().unwrap().remove(&k);
                } else if k != "p0" {
                    node["required"].as_array_mut().unwrap().push(json!(k));
                } else {
                    // One property, already required: fewer properties allowed is narrower.
                    node["maxProperties"] = json!(0);
                }
            } else if rng.random_bool(0.5) {
                node["required"] = json!([]);
            } else {
                node["properties"]["extra"] = json!({"type": "string", "maxLength": 3});
            }
        }
        _ => {
            let e = node["enum"].as_array_mut().unwrap();
            if narrow {
                e.pop();
            } else {
                e.push(json!("zz"));
            }
        }
    }
    root
}

#[test]
fn property_narrowed_input_is_always_flagged_and_widened_never() {
    let mut rng = StdRng::seed_from_u64(15);
    for case in 0..400 {
        let old = random_schema(&mut rng, 0);
        let mut at = Vec::new();
        leaves(&old, String::new(), &mut at);
        let place = &at[rng.random_range(0..at.len())];
        let narrowed = mutate(&old, place, true, &mut rng);
        let widened = mutate(&old, place, false, &mut rng);
        let f = cmp(&old, &narrowed, Side::Input);
        assert!(
            !f.is_empty(),
            "case {case}: narrowing at {place} not flagged\nold {old}\nnew {narrowed}"
        );
        let f = cmp(&old, &widened, Side::Input);
        assert!(
            f.is_empty(),
            "case {case}: widening at {place} flagged: {f:#?}\nold {old}\nnew {widened}"
        );
        // The output direction is the mirror: a widened output is flagged, a narrowed one not.
        assert!(
            !cmp(&widened, &old, Side::Output).is_empty(),
            "case {case}: output widened"
        );
        assert!(
            cmp(&narrowed, &old, Side::Output).is_empty(),
            "case {case}: output narrowed"
        );
    }
}

const SPEC: &str = r#"
name = "NAME"
description = "Find things."
system = "You find things."
tools = ["grep"]
[limits]
max_turns = 4
max_cost_usd = "0.10"
max_output_chars = 500
[input]
type = "object"
required = ["q"]
additionalProperties = false
properties.q = { type = "string", maxLength = 100 }
[output]
type = "object"
required = ["a"]
additionalProperties = false
properties.a = { type = "string", maxLength = 50 }
"#;

fn set(files: &[(&str, String)]) -> SpecSet {
    let sources: Vec<(PathBuf, String)> = files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.clone()))
        .collect();
    SpecSet::from_sources(&sources)
}

fn codes_of(r: &CheckReport) -> Vec<(String, Severity)> {
    r.diagnostics
        .iter()
        .map(|d| (d.code.clone(), d.severity))
        .collect()
}

#[test]
fn spec_level_changes() {
    let base = SPEC.replace("NAME", "find");
    let old = set(&[("s/find.toml", base.clone())]);
    let changed = base
        .replace(r#"tools = ["grep"]"#, r#"tools = ["grep", "write_file"]"#)
        .replace("max_turns = 4", "max_turns = 6")
        .replace(r#""0.10""#, r#""0.50""#)
        .replace("Find things.", "Find more things.")
        .replace("You find things.", "You find more.");
    let r = compare(
        &old,
        &set(&[("s/find.toml", changed)]),
        &CompatOptions::default(),
    );
    let c = codes_of(&r);
    assert!(c.contains(&(TOOL_ADDED.into(), Severity::Error)), "{c:?}");
    assert_eq!(
        c.iter()
            .filter(|x| x.0 == LIMIT_RAISED && x.1 == Severity::Info)
            .count(),
        2,
        "{c:?}"
    );
    assert!(
        c.contains(&(DESCRIPTION_CHANGED.into(), Severity::Info)),
        "{c:?}"
    );
    assert!(
        c.contains(&(PROMPT_CHANGED.into(), Severity::Info)),
        "{c:?}"
    );
    assert!(r.failed());
    let tool = r.diagnostics.iter().find(|d| d.code == TOOL_ADDED).unwrap();
    assert_eq!((tool.line, tool.column), (5, 18), "points at the new tool");

    // Unchanged: nothing at all.
    let r = compare(
        &old,
        &set(&[("s/find.toml", base.clone())]),
        &CompatOptions::default(),
    );
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);

    // Removed, renamed (same file), added.
    let r = compare(&old, &set(&[]), &CompatOptions::default());
    assert_eq!(codes_of(&r), vec![(SPEC_REMOVED.into(), Severity::Error)]);
    let r = compare(
        &old,
        &set(&[("s/find.toml", SPEC.replace("NAME", "search"))]),
        &CompatOptions::default(),
    );
    assert_eq!(codes_of(&r), vec![(SPEC_RENAMED.into(), Severity::Error)]);
    let r = compare(
        &old,
        &set(&[
            ("s/find.toml", base.clone()),
            ("s/new.toml", SPEC.replace("NAME", "other")),
        ]),
        &CompatOptions::default(),
    );
    assert_eq!(codes_of(&r), vec![(SPEC_ADDED.into(), Severity::Info)]);
    assert!(!r.failed());
}

#[test]
fn output_size_growth_past_the_old_promise_is_flagged() {
    let base = SPEC.replace("NAME", "find");
    let old = set(&[("f.toml", base.clone())]);
    // Raising the string's bound raises the worst case (old promise: 58 characters).
    let grown = base.replace("maxLength = 50", "maxLength = 60");
    let r = compare(&old, &set(&[("f.toml", grown)]), &CompatOptions::default());
    let c = codes_of(&r);
    assert!(
        c.contains(&(OUTPUT_SIZE_GREW.into(), Severity::Error)),
        "{c:?}"
    );
    let shrunk = base.replace("maxLength = 50", "maxLength = 40");
    let r = compare(&old, &set(&[("f.toml", shrunk)]), &CompatOptions::default());
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
}

#[test]
fn allow_and_acknowledged_turn_breaks_into_notes() {
    let base = SPEC.replace("NAME", "find");
    let old = set(&[("f.toml", base.clone())]);
    let new = set(&[(
        "f.toml",
        base.replace(r#"tools = ["grep"]"#, r#"tools = ["grep", "read_file"]"#),
    )]);
    let r = compare(
        &old,
        &new,
        &CompatOptions {
            allow: vec![TOOL_ADDED.into()],
            ..Default::default()
        },
    );
    assert!(!r.failed());
    assert!(r.diagnostics[0].message.contains("--allow tool-added"));
    let acks = parse_acknowledged(
        "a.toml",
        "[[acknowledged]]\nspec = \"find\"\ncode = \"tool-added\"\nreason = \"reviewed\"\n",
    )
    .unwrap();
    let r = compare(
        &old,
        &new,
        &CompatOptions {
            acknowledged: acks.clone(),
            ..Default::default()
        },
    );
    assert!(!r.failed());
    assert!(r.diagnostics[0].message.contains("acknowledged: reviewed"));
    // Another spec's acknowledgement does not apply.
    let other = vec![Acknowledged {
        spec: "x".into(),
        ..acks[0].clone()
    }];
    assert!(compare(
        &old,
        &new,
        &CompatOptions {
            acknowledged: other,
            ..Default::default()
        }
    )
    .failed());
    assert!(parse_acknowledged(
        "a",
        "[[acknowledged]]\nspec = \"a\"\ncode = \"b\"\nreason = \" \"\n"
    )
    .is_err());
    assert!(parse_acknowledged("a", "[[acknowledged]]\nspec = \"a\"\ncode = \"b\"\n").is_err());
}

#[test]
fn lock_file_round_trips_with_stable_bytes() {
    let s = set(&[
        ("b.toml", SPEC.replace("NAME", "b")),
        ("a.toml", SPEC.replace("NAME", "a")),
    ]);
    let lock = LockFile::new(s.entries().iter().map(|e| e.snapshot.clone()).collect());
    let text = lock.to_json();
    assert_eq!(lock.specs[0].name, "a", "sorted by name");
    let back = LockFile::from_json(&text).unwrap();
    assert_eq!(back, lock);
    assert_eq!(back.to_json(), text);
    // Keys are sorted, whatever order the spec wrote them in.
    assert!(text.find("\"additionalProperties\"").unwrap() < text.find("\"properties\"").unwrap());
    // The locked set compares clean against the files it came from.
    let r = compare(
        &SpecSet::from_lock("l.json", &back),
        &s,
        &CompatOptions::default(),
    );
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    assert!(matches!(
        LockFile::from_json(r#"{"version": 2, "specs": []}"#),
        Err(LockError::Version(2))
    ));
    assert!(LockFile::from_json("[]").is_err());
}

#[test]
fn registry_macro_locks_rust_specs() {
    let spec = crate::SubAgentSpec::dynamic(
        "r",
        json!({"type": "string"}),
        json!({"type": "string", "maxLength": 5}),
    )
    .description("d")
    .system("s")
    .build()
    .unwrap();
    let lock = crate::registry![spec.clone(), spec];
    assert_eq!(lock.specs.len(), 2);
    assert_eq!(
        lock.specs[0].output,
        json!({"maxLength": 5, "type": "string"})
    );
}

#[test]
fn notes_never_fail_even_under_deny_warnings_but_cannot_prove_does() {
    let base = SPEC.replace("NAME", "find");
    let old = set(&[("f.toml", base.clone())]);
    let deny = CompatOptions {
        deny_warnings: true,
        ..Default::default()
    };
    let added = set(&[
        ("f.toml", base.clone()),
        ("g.toml", SPEC.replace("NAME", "g")),
    ]);
    let r = compare(&old, &added, &deny);
    assert_eq!(codes_of(&r), vec![(SPEC_ADDED.into(), Severity::Info)]);
    assert_eq!(r.warning_count(), 0);
    assert!(!r.failed(), "a note fails nothing");
    let json = crate::check::render::json(&r);
    assert!(json.contains("\"severity\": \"info\""), "{json}");
    assert!(crate::check::render::github(&r).starts_with("::notice file=g.toml,"));

    let pattern = base.replace(
        "properties.q = { type = \"string\", maxLength = 100 }",
        "properties.q = { type = \"string\", maxLength = 100, pattern = \"^b\" }",
    );
    let old_pattern = base.replace(
        "properties.q = { type = \"string\", maxLength = 100 }",
        "properties.q = { type = \"string\", maxLength = 100, pattern = \"^a\" }",
    );
    let r = compare(
        &set(&[("f.toml", old_pattern)]),
        &set(&[("f.toml", pattern)]),
        &deny,
    );
    assert_eq!(codes_of(&r), vec![(CANNOT_PROVE.into(), Severity::Warning)]);
    assert!(r.failed());
    assert!(r.diagnostics[0].message.contains("two different patterns"));
}
