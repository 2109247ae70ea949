//! The text path and the `Value` path held together on the official suites, vendored under
//! `tests/data/` (see the README there): the JSON Schema Test Suite (draft 2020-12), where both
//! paths must give the suite's verdict, and JSONTestSuite, where the text path must accept
//! exactly the texts serde_json accepts and check them as the `Value` path does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::Tape;
use crate::contract::Contract;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("readable directory").path())
        .collect();
    out.sort();
    out
}

/// The verdicts of both paths on one document, after checking that they agree.
fn both_paths(contract: &Contract, text: &str, what: &str) -> bool {
    let value: Value = serde_json::from_str(text).expect("the document is JSON");
    let by_value = contract.validate(&value).is_ok();
    assert_eq!(
        contract.is_valid(&value),
        by_value,
        "{what}: is_valid vs validate"
    );
    // The tape's own verdict, not only `validate_json`'s (which falls back to the `Value`
    // path whenever the tape rejects, and so would hide a tape that rejects too much).
    if let Ok(tape) = Tape::parse(text) {
        assert_eq!(
            contract.is_valid_tape(&tape),
            by_value,
            "{what}: tape vs Value on {text}"
        );
    }
    assert_eq!(
        contract.validate_json(text).is_ok(),
        by_value,
        "{what}: text vs Value on {text}"
    );
    by_value
}

#[derive(Deserialize)]
struct Group {
    description: String,
    schema: Value,
    tests: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    description: String,
    /// As written in the suite, so that number literals reach the text path unchanged.
    data: Box<RawValue>,
    valid: bool,
}

/// Groups not run, each with why: their schemas need what a contract deliberately lacks, so
/// they are refused when compiled (checked below), never compiled as something else.
const SKIPPED_GROUPS: [(&str, &str, &str); 7] = [
    (
        "dynamicRef.json",
        "strict-tree schema, guards against misspelled properties",
        REMOTE,
    ),
    (
        "dynamicRef.json",
        "tests for implementation dynamic anchor and reference link",
        REMOTE,
    ),
    (
        "dynamicRef.json",
        "$ref and $dynamicAnchor are independent of order - $defs first",
        REMOTE,
    ),
    (
        "dynamicRef.json",
        "$ref and $dynamicAnchor are independent of order - $ref first",
        REMOTE,
    ),
    (
        "dynamicRef.json",
        "$ref to $dynamicRef finds detached $dynamicAnchor",
        REMOTE,
    ),
    (
        "vocabulary.json",
        "schema that uses custom metaschema with with no validation vocabulary",
        META,
    ),
    (
        "vocabulary.json",
        "ignore unrecognized optional vocabulary",
        META,
    ),
];
const REMOTE: &str =
    "a $ref to a schema the suite serves over HTTP: contracts resolve no remote references";
const META: &str = "a custom meta-schema (served over HTTP): contracts are draft 2020-12 only";

#[test]
fn json_schema_test_suite_gives_the_same_verdict_on_both_paths() {
    let dir = data().join("json-schema-test-suite/draft2020-12");
    let mut paths = files(&dir);
    paths.extend(files(&dir.join("optional")));
    let (mut cases, mut skipped) = (0, Vec::new());
    for path in paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path).expect("readable");
        let groups: Vec<Group> = serde_json::from_str(&text).expect("a suite file");
        for g in groups {
            let compiled = Contract::compile(Arc::new(g.schema));
            if SKIPPED_GROUPS
                .iter()
                .any(|(f, d, _)| *f == file && *d == g.description)
            {
                assert!(compiled.is_err(), "{file}: {}: compiles", g.description);
                skipped.push(g.description);
                continue;
            }
            let contract = compiled.unwrap_or_else(|e| panic!("{file}: {}: {e}", g.description));
            for t in g.tests {
                let what = format!("{file}: {}: {}", g.description, t.description);
                let verdict = both_paths(&contract, t.data.get(), &what);
                assert_eq!(verdict, t.valid, "{what}: the suite says {}", t.valid);
                cases += 1;
            }
        }
    }
    // Every case ran but those of the groups listed above.
    assert_eq!(skipped.len(), SKIPPED_GROUPS.len(), "{skipped:?}");
    assert_eq!(cases, 1260);
}

/// Schemas every accepted JSONTestSuite document is also checked against on both paths: the
/// numbers there (huge, tiny, negative zero, exponents) are where the paths could differ.
fn number_schemas() -> Vec<Value> {
    let each = |s: Value| json!({"items": s, "additionalProperties": s});
    vec![
        json!({}),
        each(json!({"multipleOf": 2})),
        each(json!({"not": {"multipleOf": 2}})),
        each(json!({"multipleOf": 5})),
        each(json!({"multipleOf": 0.5})),
        each(json!({"type": "integer"})),
        each(json!({"maximum": 0})),
        each(json!({"minimum": 1e300})),
        each(json!({"exclusiveMaximum": -1e-300})),
        each(json!({"const": 0})),
        each(json!({"enum": [0, 1e308, -0.0]})),
        json!({"uniqueItems": true}),
        json!({"maxLength": 1}),
        json!({"type": ["array", "object"], "maxItems": 1, "maxProperties": 1}),
    ]
}

#[test]
fn json_test_suite_parses_on_the_text_path_as_serde_json_does() {
    let contracts: Vec<Contract> = number_schemas()
        .into_iter()
        .map(|s| Contract::compile(Arc::new(s)).expect("compiles"))
        .collect();
    let mut seen = [0usize; 3];
    for path in files(&data().join("jsontestsuite/test_parsing")) {
        let name = path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default()
            .to_string();
        let bytes = std::fs::read(&path).expect("readable");
        let by_serde = serde_json::from_slice::<Value>(&bytes).is_ok();
        // Text that is not UTF-8 never reaches the text path (it takes `&str`): rejected.
        let text = std::str::from_utf8(&bytes).ok();
        let by_text = text.is_some_and(|t| contracts[0].validate_json(t).is_ok());
        assert_eq!(by_text, by_serde, "{name}: text path vs serde_json");
        if let Some(t) = text {
            // The tape itself never accepts what serde_json rejects, and refuses what it
            // accepts only for duplicate keys (the `Value` path then decides).
            match Tape::parse(t) {
                Ok(_) => assert!(by_serde, "{name}: the tape accepts what serde_json rejects"),
                Err(e) => assert!(
                    !by_serde || e.what.contains("duplicate"),
                    "{name}: the tape rejects ({e}) what serde_json accepts"
                ),
            }
        }
        match &name[..2] {
            "y_" => {
                assert!(by_serde, "{name}: must parse");
                seen[0] += 1;
            }
            "n_" => {
                assert!(!by_serde, "{name}: must be rejected");
                seen[1] += 1;
            }
            _ => seen[2] += 1,
        }
        if let (true, Some(t)) = (by_serde, text) {
            for (c, s) in contracts.iter().zip(number_schemas()) {
                both_paths(c, t, &format!("{name} against {s}"));
            }
        }
    }
    assert_eq!(seen, [95, 188, 35], "y_, n_, i_ files");
}

/// Number literals an f64 cannot hold exactly get the `Value` path's verdict on the text path
/// too, through a contract and through a spec.
#[test]
fn literals_past_f64_get_one_verdict() {
    let cases = [
        (json!({"not": {"multipleOf": 2}}), "1e-400", false),
        (json!({"multipleOf": 2}), "1e-400", true),
        (json!({"multipleOf": 5}), "18446744073709551620", false),
        (
            json!({"not": {"multipleOf": 5}}),
            "18446744073709551620",
            true,
        ),
        (json!({"multipleOf": 3}), "-0", true),
        (
            json!({"multipleOf": 7}),
            "123456789012345678901234567890",
            false,
        ),
    ];
    for (schema, text, valid) in cases {
        let c = Contract::compile(Arc::new(schema.clone())).expect("compiles");
        assert_eq!(
            both_paths(&c, text, &format!("{schema}")),
            valid,
            "{schema} on {text}"
        );
        let spec = crate::SubAgentSpec::<Value, Value>::dynamic(
            "n",
            json!({"type": "object"}),
            json!({"type": "number", "maximum": 1e30, "minimum": -1e30, "allOf": [schema]}),
        )
        .description("d")
        .system("s")
        .build()
        .expect("a bounded spec");
        let value: Value = serde_json::from_str(text).expect("JSON");
        assert_eq!(
            spec.validate_output_json(text).is_ok(),
            spec.validate_output(&value).is_ok(),
            "{schema} on {text}"
        );
    }
}
