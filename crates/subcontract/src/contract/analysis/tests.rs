//! The worst-case analysis held to hand-counted sizes and known problems.

use super::*;
use serde_json::{json, Map};

fn size(schema: Value) -> Option<u64> {
    analyze(&schema).worst_case_chars
}

/// `(kind, schema_path)` of every problem, in order.
fn problems(schema: Value) -> Vec<(UnboundedKind, String)> {
    let analysis = analyze(&schema);
    assert!(!analysis.is_bounded(), "expected unbounded: {analysis:?}");
    analysis
        .problems
        .into_iter()
        .map(|p| (p.kind, p.schema_path))
        .collect()
}

fn x(n: usize) -> String {
    "x".repeat(n)
}

fn chars(v: &Value) -> u64 {
    let text = serde_json::to_string(v).expect("serialises");
    text.chars().count() as u64
}

#[test]
fn string_max_length() {
    assert_eq!(size(json!({"type": "string", "maxLength": 10})), Some(12));
    assert_eq!(size(json!({"type": "string", "maxLength": 0})), Some(2));
    assert_eq!(size(json!({"maxLength": 3})), Some(5));
}

#[test]
fn string_without_max_length_is_reported() {
    let a = analyze(&json!({"type": "string", "minLength": 1}));
    assert_eq!(a.worst_case_chars, None);
    assert_eq!(
        a.problems,
        vec![Unbounded {
            kind: UnboundedKind::String,
            schema_path: String::new(),
            message: "string without maxLength (add maxLength, enum or const)".to_owned(),
        }]
    );
}

#[test]
fn enum_takes_longest_value() {
    assert_eq!(
        size(json!({"type": "string", "enum": ["low", "medium", "high"]})),
        Some(8)
    );
    assert_eq!(
        size(json!({"enum": [1, null, "ab", [1, 2], {"k": true}]})),
        Some(10)
    );
    assert_eq!(size(json!({"enum": []})), Some(0));
}

#[test]
fn const_uses_its_compact_length() {
    assert_eq!(size(json!({"const": "done"})), Some(6));
    assert_eq!(size(json!({"type": "string", "const": "é"})), Some(3));
    let value = json!({"a": [1, "two", null], "b": {"c": false}});
    assert_eq!(size(json!({ "const": value.clone() })), Some(chars(&value)));
}

#[test]
fn integer_ranges() {
    // The longest is an integral float at a bound: `100.0`, `-1000.0`.
    let both = json!({"type": "integer", "minimum": -5, "maximum": 100});
    assert_eq!(size(both), Some(5));
    assert_eq!(chars(&json!(100.0)), 5);
    let both = json!({"type": "integer", "minimum": -1000, "maximum": 5});
    assert_eq!(size(both), Some(7));
    assert_eq!(chars(&json!(-1000.0)), 7);
    let exclusive = json!({"type": "integer", "exclusiveMinimum": -10, "exclusiveMaximum": 100});
    assert_eq!(size(exclusive), Some(4));
    // Past 1e16 floats take exponent form, up to any number's length.
    assert_eq!(chars(&json!(-1.2345678901234567e18)), 23);
    assert_eq!(size(json!({"type": "integer", "minimum": 0})), Some(24));
    assert_eq!(size(json!({"type": "integer", "maximum": 0})), Some(24));
    assert_eq!(size(json!({"type": "integer"})), Some(24));
    assert_eq!(
        size(json!({"type": "integer", "minimum": 0, "maximum": 1e300})),
        Some(24)
    );
    assert_eq!(
        size(json!({"type": "integer", "minimum": 0, "maximum": 9_999_999_999_999_999_i64})),
        Some(18)
    );
    assert_eq!(chars(&json!(9_999_999_999_999_998.0)), 18);
    assert_eq!(
        size(json!({"type": "integer", "minimum": 5, "maximum": 1})),
        Some(0)
    );
}

#[test]
fn number() {
    assert_eq!(size(json!({"type": "number"})), Some(24));
    assert_eq!(
        size(json!({"type": "number", "minimum": 0, "maximum": 1})),
        Some(24)
    );
    let integral = json!({"type": "number", "minimum": 0, "maximum": 100, "multipleOf": 5});
    assert_eq!(size(integral), Some(5));
    assert_eq!(chars(&json!(-2.2250738585072014e-308)), 24);
}

#[test]
fn boolean_and_null() {
    assert_eq!(size(json!({"type": "boolean"})), Some(5));
    assert_eq!(size(json!({"type": "null"})), Some(4));
}

#[test]
fn array_max_items() {
    let arr = json!({"type": "array", "maxItems": 3, "items": {"type": "boolean"}});
    assert_eq!(size(arr), Some(2 + 3 * 5 + 2));
    let empty = json!({"type": "array", "maxItems": 0, "items": {"type": "string"}});
    assert_eq!(size(empty), Some(2));
    let one = json!({"type": "array", "maxItems": 1, "items": {"type": "null"}});
    assert_eq!(size(one), Some(6));
}

#[test]
fn array_without_max_items_is_reported_with_its_items() {
    let schema = json!({"type": "array", "items": {"type": "string"}});
    assert_eq!(
        problems(schema),
        vec![
            (UnboundedKind::String, "/items".to_owned()),
            (UnboundedKind::Array, String::new()),
        ]
    );
}

#[test]
fn array_without_items_schema_is_any_value() {
    let schema = json!({"type": "array", "maxItems": 2});
    assert_eq!(
        problems(schema),
        vec![(UnboundedKind::AnyValue, String::new())]
    );
}

#[test]
fn closed_tuple() {
    let tuple = json!({
        "type": "array",
        "prefixItems": [{"type": "boolean"}, {"type": "integer", "minimum": 0, "maximum": 99}],
        "items": false
    });
    // [false,99.0]
    assert_eq!(size(tuple), Some(12));
    assert_eq!(chars(&json!([false, 99.0])), 12);
    let capped = json!({
        "type": "array",
        "prefixItems": [{"type": "null"}, {"type": "null"}],
        "items": false,
        "maxItems": 1
    });
    assert_eq!(size(capped), Some(6));
    let tail = json!({
        "type": "array",
        "prefixItems": [{"type": "boolean"}],
        "items": {"type": "null"},
        "maxItems": 3
    });
    // [false,null,null]
    assert_eq!(size(tail), Some(17));
    let never_tail = json!({"type": "array", "items": false, "maxItems": 9});
    assert_eq!(size(never_tail), Some(2));
}

#[test]
fn huge_max_items_saturates() {
    let arr = json!({"type": "array", "maxItems": 1u64 << 60, "items": {"type": "string", "maxLength": 64}});
    assert_eq!(size(arr), Some(u64::MAX));
    let arr = json!({"type": "array", "maxItems": u64::MAX, "items": {"type": "null"}});
    assert_eq!(size(arr), Some(u64::MAX));
}

#[test]
fn closed_object_matches_a_maximal_instance() {
    let schema = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "ok": {"type": "boolean"},
            "n": {"type": "integer", "minimum": -50, "maximum": 50}
        }
    });
    // {"name":"xxxxxxxx","ok":false,"n":-50.0}
    // 2 + (7 + 10) + (5 + 5) + (4 + 5) + 2 commas = 40
    assert_eq!(size(schema), Some(40));
    let instance = json!({"name": x(8), "ok": false, "n": -50.0});
    assert_eq!(chars(&instance), 40);
    assert_eq!(
        size(json!({"type": "object", "additionalProperties": false})),
        Some(2)
    );
}

#[test]
fn false_property_drops_key_and_comma() {
    let schema = json!({
        "type": "object", "additionalProperties": false,
        "properties": {"a": {"type": "null"}, "gone": false}
    });
    assert_eq!(size(schema), Some(chars(&json!({"a": null}))));
}

#[test]
fn max_properties_keeps_the_largest() {
    let schema = json!({
        "type": "object", "additionalProperties": false, "maxProperties": 1,
        "properties": {"a": {"type": "null"}, "b": {"type": "boolean"}}
    });
    assert_eq!(size(schema), Some(chars(&json!({"b": false}))));
}

#[test]
fn unevaluated_properties_false_closes_a_plain_object() {
    let schema = json!({"type": "object", "unevaluatedProperties": false,
        "properties": {"a": {"type": "null"}}});
    assert_eq!(size(schema), Some(10));
    // Beside allOf the object may carry the allOf's properties: not judged locally.
    let schema = json!({"type": "object", "unevaluatedProperties": false,
        "allOf": [{"properties": {"b": {"type": "string", "maxLength": 9}}}]});
    assert!(!analyze(&schema).is_bounded());
}

#[test]
fn open_objects_are_reported() {
    let missing = json!({"type": "object", "properties": {"a": {"type": "null"}}});
    assert_eq!(
        problems(missing),
        vec![(UnboundedKind::OpenObject, String::new())]
    );
    let explicit = json!({"type": "object", "additionalProperties": true});
    assert_eq!(
        problems(explicit),
        vec![(UnboundedKind::OpenObject, String::new())]
    );
    let schema_valued = json!({"type": "object", "additionalProperties": {"type": "null"}});
    assert_eq!(
        problems(schema_valued),
        vec![(UnboundedKind::OpenObject, String::new())]
    );
    let pattern = json!({
        "type": "object", "additionalProperties": false,
        "patternProperties": {"^x-": {"type": "null"}}
    });
    assert_eq!(
        problems(pattern),
        vec![(UnboundedKind::OpenObject, String::new())]
    );
}

#[test]
fn refs_and_defs() {
    let schema = json!({
        "type": "object", "additionalProperties": false,
        "properties": {"a": {"$ref": "#/$defs/Short"}, "b": {"$ref": "#/definitions/Flag"}},
        "$defs": {"Short": {"type": "string", "maxLength": 4}},
        "definitions": {"Flag": {"type": "boolean"}}
    });
    assert_eq!(size(schema), Some(chars(&json!({"a": x(4), "b": false}))));
}

#[test]
fn ref_pointer_escaping_and_percent_encoding() {
    let schema = json!({
        "type": "array", "maxItems": 2,
        "prefixItems": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/with%20space"}],
        "items": false,
        "$defs": {"a/b": {"type": "null"}, "with space": {"const": 12345}}
    });
    assert_eq!(size(schema), Some(chars(&json!([null, 12345]))));
}

#[test]
fn unresolvable_refs() {
    let remote = json!({"$ref": "https://example.com/schema.json"});
    assert_eq!(
        problems(remote),
        vec![(UnboundedKind::AnyValue, String::new())]
    );
    let missing =
        json!({"properties": {"a": {"$ref": "#/$defs/Nope"}}, "additionalProperties": false});
    let a = analyze(&missing);
    assert_eq!(a.problems.len(), 1);
    assert_eq!(a.problems[0].schema_path, "/properties/a");
    assert!(a.problems[0].message.starts_with("cannot resolve $ref"));
}

#[test]
fn problems_inside_a_shared_def_are_reported_once_at_the_def() {
    let schema = json!({
        "type": "object", "additionalProperties": false,
        "properties": {
            "one": {"$ref": "#/$defs/Finding"},
            "two": {"$ref": "#/$defs/Finding"}
        },
        "$defs": {"Finding": {"type": "object", "additionalProperties": false,
            "properties": {"claim": {"type": "string"}}}}
    });
    assert_eq!(
        problems(schema),
        vec![(
            UnboundedKind::String,
            "/$defs/Finding/properties/claim".to_owned()
        )]
    );
}

#[test]
fn any_of_and_one_of_take_the_max() {
    let schema = json!({"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 10}]});
    assert_eq!(size(schema), Some(12));
    let schema = json!({"oneOf": [{"type": "boolean"}, {"const": 7}]});
    assert_eq!(size(schema), Some(5));
    let schema = json!({"anyOf": [{"type": "null"}, {"type": "string"}]});
    assert_eq!(
        problems(schema),
        vec![(UnboundedKind::String, "/anyOf/1".to_owned())]
    );
}

#[test]
fn own_keywords_beside_any_of_take_the_min() {
    let schema = json!({
        "type": "string", "maxLength": 5,
        "anyOf": [{"maxLength": 100}, {"enum": ["a"]}]
    });
    assert_eq!(size(schema), Some(7));
    let schema = json!({"type": "string", "anyOf": [{"maxLength": 3}, {"maxLength": 8}]});
    assert_eq!(size(schema), Some(10));
}

#[test]
fn all_of_takes_the_min_of_bounded_branches() {
    let schema = json!({"allOf": [{"type": "string", "maxLength": 50}, {"maxLength": 10}]});
    assert_eq!(size(schema), Some(12));
    let schema = json!({"allOf": [{"type": "string"}, {"maxLength": 10}]});
    assert_eq!(size(schema), Some(12));
    let schema = json!({"allOf": [{"type": "string"}, {"type": "array"}]});
    assert_eq!(
        problems(schema),
        vec![
            (UnboundedKind::String, "/allOf/0".to_owned()),
            (UnboundedKind::AnyValue, "/allOf/1".to_owned()),
            (UnboundedKind::Array, "/allOf/1".to_owned()),
        ]
    );
}

#[test]
fn ref_beside_keywords_acts_like_all_of() {
    let schema = json!({
        "$ref": "#/$defs/Long", "maxLength": 3,
        "$defs": {"Long": {"type": "string", "maxLength": 300}}
    });
    assert_eq!(size(schema), Some(5));
}

#[test]
fn recursion_is_reported_at_the_ref() {
    let schema = json!({
        "$ref": "#/$defs/Node",
        "$defs": {"Node": {
            "type": "object", "additionalProperties": false,
            "properties": {
                "label": {"type": "string", "maxLength": 10},
                "children": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/Node"}}
            }
        }}
    });
    let a = analyze(&schema);
    assert_eq!(a.worst_case_chars, None);
    assert_eq!(a.problems.len(), 1);
    assert_eq!(a.problems[0].kind, UnboundedKind::RecursiveRef);
    assert_eq!(
        a.problems[0].schema_path,
        "/$defs/Node/properties/children/items"
    );
    assert!(a.problems[0].message.contains("#/$defs/Node"));
}

#[test]
fn recursion_through_the_root_and_mutual_refs() {
    let root = json!({"anyOf": [{"type": "null"}, {"type": "array", "maxItems": 1, "items": {"$ref": "#"}}]});
    assert_eq!(
        problems(root),
        vec![(UnboundedKind::RecursiveRef, "/anyOf/1/items".to_owned())]
    );
    let mutual = json!({
        "$ref": "#/$defs/A",
        "$defs": {
            "A": {"type": "array", "maxItems": 1, "items": {"$ref": "#/$defs/B"}},
            "B": {"type": "array", "maxItems": 1, "items": {"$ref": "#/$defs/A"}}
        }
    });
    assert_eq!(
        problems(mutual),
        vec![(UnboundedKind::RecursiveRef, "/$defs/B/items".to_owned())]
    );
}

#[test]
fn recursion_bounded_by_all_of_is_not_a_problem() {
    let schema = json!({
        "$ref": "#/$defs/N",
        "$defs": {"N": {"allOf": [
            {"type": "string", "maxLength": 5},
            {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/N"}]}
        ]}}
    });
    assert_eq!(size(schema), Some(7));
}

#[test]
fn a_def_inside_a_cycle_is_not_memoised_from_the_wrong_context() {
    // Entering at X, Y sees X unfinished; Y alone is still bounded (2 + 7 + 1 + 7 = 17).
    let schema = json!({
        "type": "array", "prefixItems": [{"$ref": "#/$defs/X"}, {"$ref": "#/$defs/Y"}],
        "items": false,
        "$defs": {
            "X": {"allOf": [{"type": "string", "maxLength": 5}, {"$ref": "#/$defs/Y"}]},
            "Y": {"anyOf": [{"type": "null"},
                {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/X"}}]}
        }
    });
    assert_eq!(size(schema), Some(2 + 7 + 1 + 17));
}

#[test]
fn type_arrays_take_the_max() {
    assert_eq!(
        size(json!({"type": ["string", "null"], "maxLength": 50})),
        Some(52)
    );
    assert_eq!(size(json!({"type": ["boolean", "null"]})), Some(5));
    assert_eq!(
        problems(json!({"type": ["string", "null"]})),
        vec![(UnboundedKind::String, String::new())]
    );
}

#[test]
fn boolean_schemas() {
    assert_eq!(
        problems(json!(true)),
        vec![(UnboundedKind::AnyValue, String::new())]
    );
    assert_eq!(size(json!(false)), Some(0));
    assert_eq!(
        problems(json!({})),
        vec![(UnboundedKind::AnyValue, String::new())]
    );
    // Only-restricting keywords do not bound anything on their own.
    assert_eq!(
        problems(json!({"not": {"type": "null"}})),
        vec![(UnboundedKind::AnyValue, String::new())]
    );
}

#[test]
fn every_problem_is_reported_with_its_pointer() {
    let schema = json!({
        "type": "object", "additionalProperties": false,
        "properties": {
            "findings": {"type": "array", "items": {"type": "object", "additionalProperties": false,
                "properties": {"claim": {"type": "string"}}}},
            "a/b~c": {"type": "string"},
            "meta": {"type": "object"},
            "ok": {"type": "boolean"}
        }
    });
    assert_eq!(
        problems(schema),
        vec![
            (
                UnboundedKind::String,
                "/properties/findings/items/properties/claim".to_owned()
            ),
            (UnboundedKind::Array, "/properties/findings".to_owned()),
            (UnboundedKind::String, "/properties/a~1b~0c".to_owned()),
            (UnboundedKind::OpenObject, "/properties/meta".to_owned()),
        ]
    );
}

#[test]
fn pathological_nesting_does_not_overflow() {
    let mut schema = json!({"type": "string", "maxLength": 1});
    for _ in 0..10_000 {
        // Not `json!`: it would serialise `schema` recursively to embed it.
        let mut wrapper = Map::new();
        wrapper.insert("type".to_owned(), json!("array"));
        wrapper.insert("maxItems".to_owned(), json!(1));
        wrapper.insert("items".to_owned(), schema);
        schema = Value::Object(wrapper);
    }
    let a = analyze(&schema);
    assert!(!a.is_bounded());
    assert_eq!(a.problems.len(), 1);
    assert_eq!(a.problems[0].kind, UnboundedKind::AnyValue);
    assert!(a.problems[0].message.contains("levels deep"));
    // serde_json drops recursively; unwind by hand so the test itself cannot overflow.
    let mut node = schema;
    while let Value::Object(mut map) = node {
        node = map.remove("items").unwrap_or(Value::Null);
    }
}

#[test]
fn exponential_ref_fan_out_stays_fast() {
    // D_i refers to D_{i-1} twice; memoisation keeps this linear (2^30 visits without it).
    // 30 levels of ref + prefixItems nest 60 deep, just inside MAX_DEPTH.
    let mut defs = Map::new();
    defs.insert("D0".to_owned(), json!({"type": "string", "maxLength": 1}));
    for i in 1..=30 {
        let prev = format!("#/$defs/D{}", i - 1);
        defs.insert(
            format!("D{i}"),
            json!({"type": "array", "maxItems": 2, "prefixItems": [{"$ref": prev}, {"$ref": prev}], "items": false}),
        );
    }
    let schema = json!({"$ref": "#/$defs/D30", "$defs": defs});
    // Each level is "[" + 2 * inner + "," + "]": s(n) = 2 s(n-1) + 3, s(0) = 3.
    assert_eq!(size(schema), Some(6 * (1 << 30) - 3));
}

#[test]
fn visit_budget_stops_adversarial_ref_graphs() {
    // Every D_i depends on the unfinished root, so none can be memoised and the fan-out is
    // exponential; the visit budget ends it.
    let mut defs = Map::new();
    defs.insert(
        "D0".to_owned(),
        json!({"allOf": [{"type": "string", "maxLength": 1}, {"$ref": "#"}]}),
    );
    for i in 1..=25 {
        let prev = format!("#/$defs/D{}", i - 1);
        defs.insert(
            format!("D{i}"),
            json!({"allOf": [{"type": "string", "maxLength": 1},
                {"anyOf": [{"$ref": prev}, {"$ref": prev}, {"$ref": "#"}]}]}),
        );
    }
    let schema = json!({"$ref": "#/$defs/D25", "$defs": defs});
    let a = analyze(&schema);
    assert!(!a.is_bounded());
    assert_eq!(a.problems.len(), 1);
    assert_eq!(a.problems[0].schema_path, "");
    assert!(a.problems[0].message.contains("too intricate"));
}

/// A random schema-shaped value: keywords the analysis reads, with values of any shape.
fn random_schema(rng: &mut rand::rngs::SmallRng, depth: u32) -> Value {
    use rand::Rng;
    const KEYWORDS: &[&str] = &[
        "type",
        "maxLength",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "items",
        "prefixItems",
        "maxItems",
        "properties",
        "additionalProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "patternProperties",
        "maxProperties",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "$defs",
        "not",
    ];
    const REFS: &[&str] = &[
        "#",
        "#/$defs/a",
        "#/$defs/b",
        "#/items",
        "#/anyOf/0",
        "#/%zz",
        "x#/y",
        "#/$defs/a/properties/p",
    ];
    const TYPES: &[&str] = &[
        "string", "integer", "number", "boolean", "null", "array", "object", "bogus",
    ];
    let leaf = |rng: &mut rand::rngs::SmallRng| match rng.random_range(0..8) {
        0 => Value::Bool(rng.random()),
        1 => json!(rng.random_range(-5i64..100)),
        2 => json!(rng.random::<u64>()),
        3 => json!(rng.random::<f64>() * 1e300 - 5e299),
        4 => json!(TYPES[rng.random_range(0..TYPES.len())]),
        5 => json!(REFS[rng.random_range(0..REFS.len())]),
        6 => Value::Null,
        _ => json!([TYPES[rng.random_range(0..TYPES.len())], "null"]),
    };
    if depth == 0 || rng.random_range(0..4) == 0 {
        return leaf(rng);
    }
    match rng.random_range(0..5) {
        0 => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| random_schema(rng, depth - 1))
                .collect(),
        ),
        _ => {
            let mut map = Map::new();
            for _ in 0..rng.random_range(0..6) {
                let key = KEYWORDS[rng.random_range(0..KEYWORDS.len())];
                let value = if rng.random_range(0..3) == 0 {
                    leaf(rng)
                } else {
                    random_schema(rng, depth - 1)
                };
                map.insert(key.to_owned(), value);
            }
            for name in ["a", "b", "p"] {
                if rng.random_range(0..4) == 0 {
                    map.insert(name.to_owned(), random_schema(rng, depth - 1));
                }
            }
            Value::Object(map)
        }
    }
}

#[test]
fn random_schemas_never_panic_and_keep_the_invariant() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed);
    for _ in 0..3_000 {
        let schema = random_schema(&mut rng, 6);
        let a = analyze(&schema);
        assert_eq!(a.is_bounded(), a.problems.is_empty(), "{schema}: {a:?}");
    }
}

#[test]
fn flagship_example() {
    let schema = json!({"type":"object","required":["findings","gaps"],"additionalProperties":false,
     "properties":{
       "findings":{"type":"array","maxItems":6,"items":{"type":"object","additionalProperties":false,"required":["claim","source_ids"],
          "properties":{"claim":{"type":"string","maxLength":300},"source_ids":{"type":"array","minItems":1,"maxItems":5,"items":{"type":"string","maxLength":64}}}}},
       "gaps":{"type":"array","maxItems":3,"items":{"type":"string","maxLength":200}}}});
    let analysis = analyze(&schema);
    assert_eq!(analysis.worst_case_chars, Some(4610));
    assert!(analysis.problems.is_empty());

    let finding = json!({"claim": x(300), "source_ids": vec![x(64); 5]});
    let instance = json!({"findings": vec![finding; 6], "gaps": vec![x(200); 3]});
    assert_eq!(chars(&instance), 4610);
}

#[test]
fn schemars_style_option_string() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Answer",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "inline": {"type": ["string", "null"], "maxLength": 50},
            "referenced": {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}
        },
        "required": ["inline"],
        "$defs": {"X": {"type": "string", "maxLength": 50}}
    });
    let analysis = analyze(&schema);
    let instance = json!({"inline": x(50), "referenced": x(50)});
    assert_eq!(analysis.worst_case_chars, Some(chars(&instance)));
    assert_eq!(analysis.worst_case_chars, Some(2 + 9 + 52 + 1 + 13 + 52));
}

#[test]
fn lint_survives_deep_and_wide_schemas() {
    use super::{lint, FindingKind};
    // Deep: 2,000 nested `items`, linted on a 64 KiB stack, which a recursive walk of that
    // depth would overflow.
    let mut schema = json!({"type": "string", "maxLenght": 1});
    for _ in 0..2_000 {
        schema = json!({"type": "array", "items": schema});
    }
    let found = std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn_scoped(s, || lint(&schema))
            .expect("thread")
            .join()
            .expect("no overflow")
    });
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].kind, FindingKind::UnknownKeyword);
    assert_eq!(found[0].at.matches("/items").count(), 2_000);

    // Wide: the walk stops after MAX_VISITS subschemas, so a typo past them is not reached
    // (and the size analysis reports such a schema as too intricate anyway).
    let mut props: serde_json::Map<String, serde_json::Value> = (0..super::MAX_VISITS)
        .map(|i| (format!("p{i}"), json!({"type": "null"})))
        .collect();
    props.insert("last".into(), json!({"typ": "string"}));
    assert!(lint(&json!({"type": "object", "properties": props})).is_empty());
    let mut first = serde_json::Map::new();
    first.insert("first".into(), json!({"typ": "string"}));
    first.extend(props);
    // One typo first, reached; the one last, not.
    assert_eq!(
        lint(&json!({"type": "object", "properties": first})).len(),
        1
    );
    // Booleans, non-object schemas and data are skipped.
    assert!(lint(&json!(true)).is_empty());
    assert!(lint(&json!({"enum": [{"maxLenght": 1}], "const": {"x": 1}, "items": 5})).is_empty());
    // A required name matched by a pattern is allowed; an ECMA pattern Rust cannot compile
    // is assumed to match.
    let closed = |pattern: &str| {
        lint(
            &json!({"type": "object", "additionalProperties": false, "required": ["x1"],
            "patternProperties": {pattern: {}}}),
        )
    };
    assert!(closed("^x[0-9]$").is_empty());
    assert!(closed("(?<=a)b").is_empty());
    assert_eq!(closed("^y$").len(), 1);
}
