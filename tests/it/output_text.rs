//! Outputs checked from JSON text (`validate_output_json`, `Contract::validate_json`) give
//! exactly what the `Value` path gives: the same decoded output, or the same violations with
//! the same messages. The text path parses into a flat tape and falls back to the `Value` path
//! for anything it does not accept, so every fallback is exercised here.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use subcontract::model::ScriptStep;
use subcontract::{Contract, SubAgentSpec, Violation};
use validator::Validate;

use crate::common::*;

#[derive(Debug, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Report {
    #[validate(length(max = 40))]
    title: String,
    /// A rule the schema cannot say (schemars emits `format: email`, which JSON Schema
    /// validators only annotate): the typed rules catch it.
    #[validate(email)]
    contact: String,
    #[validate(range(min = 0.0, max = 1.0))]
    confidence: f64,
    #[validate(length(max = 3))]
    tags: Vec<String>,
    note: Option<String>,
}

#[derive(Serialize, Deserialize, JsonSchema, Validate)]
struct Ask {
    #[validate(length(max = 100))]
    q: String,
}

fn report_spec() -> SubAgentSpec<Ask, Report> {
    SubAgentSpec::<Ask, Report>::builder("report")
        .description("Writes a report.")
        .system("Report.")
        .max_output_chars(200)
        // Parity is the point here, not bounds; the size limit is still enforced.
        .allow_unbounded_output()
        .build()
        .expect("the test spec is valid")
}

/// Documents that cover each way out of the fast path, and the fast path itself.
fn report_cases() -> Vec<(&'static str, String)> {
    let ok = r#"{"title":"T","contact":"a@b.example","confidence":0.5,"tags":["x"],"note":null}"#;
    vec![
        ("valid", ok.to_string()),
        (
            "valid, spaced out and escaped",
            "{ \"title\" : \"T\\u00e9\\t\\\"q\\\"\",\n \"contact\": \"a@b.example\",\n \"confidence\": 5e-1, \"tags\": [ ], \"note\": \"\\ud83e\\udd80\" }".into(),
        ),
        ("integer literal for a float", ok.replace("0.5", "1")),
        // Compact, the document is under 200 characters; as sent it is over: only the
        // compact form counts, as on the Value path.
        ("whitespace beyond the limit", ok.replace(',', ",                              ")),
        ("over the size limit", ok.replace("\"x\"", &format!("\"{}\"", "x".repeat(200)))),
        ("schema: title too long", ok.replace("\"T\"", &format!("\"{}\"", "é".repeat(41)))),
        ("schema: title of 40 two-byte chars", ok.replace("\"T\"", &format!("\"{}\"", "é".repeat(40)))),
        ("schema: missing field", ok.replace(r#""title":"T","#, "")),
        ("schema: unknown field", ok.replace("\"note\":null", "\"note\":null,\"x\":1")),
        ("schema: wrong type", ok.replace("0.5", "\"high\"")),
        ("rules: not an email", ok.replace("a@b.example", "nobody")),
        ("rules and schema: four tags", ok.replace("[\"x\"]", "[\"a\",\"b\",\"c\",\"d\"]")),
        ("rules: confidence over 1", ok.replace("0.5", "2e0")),
        // serde_json keeps the last of duplicate keys; the tape refuses them, so this is
        // decided on the Value path.
        ("duplicate key", ok.replace("\"note\":null", "\"note\":null,\"note\":\"n\"")),
        ("not JSON: truncated", ok[..ok.len() - 1].to_string()),
        ("not JSON: fenced", format!("```json\n{ok}\n```")),
        ("not JSON: empty", String::new()),
        ("not JSON: trailing comma", ok.replace("}", ",}")),
        ("not an object", "[1,2]".into()),
    ]
}

/// The violation for text that is not JSON: serde_json's error (with its position), never
/// the text itself.
fn not_json(_text: &str, e: &serde_json::Error) -> Vec<Violation> {
    vec![Violation {
        path: String::new(),
        message: format!("not valid JSON ({e})"),
    }]
}

fn value_path<O: 'static>(spec: &SubAgentSpec<Ask, O>, text: &str) -> Result<O, Vec<Violation>> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => spec.validate_output(&v),
        Err(e) => Err(not_json(text, &e)),
    }
}

#[test]
fn typed_outputs_from_text_match_the_value_path() {
    let spec = report_spec();
    let mut accepted = 0;
    for (label, text) in report_cases() {
        let from_text = spec.validate_output_json(&text);
        let from_value = value_path(&spec, &text);
        assert_eq!(from_text, from_value, "{label}: {text}");
        accepted += usize::from(from_text.is_ok());
    }
    // The table is not all failures (or all successes): both sides of each check ran.
    assert_eq!(accepted, 6);
    let r = spec
        .validate_output_json(&report_cases()[1].1)
        .expect("the escaped case is valid");
    assert_eq!(r.title, "Té\t\"q\"");
    assert_eq!(r.note.as_deref(), Some("🦀"));
}

#[test]
fn json_value_outputs_from_text_match_the_value_path() {
    let spec = SubAgentSpec::dynamic("research", question_schema(), findings_schema())
        .description("d")
        .system("s")
        .build()
        .expect("valid spec");
    let good = serde_json::to_string(&good_findings()).expect("serialisable");
    let cases = [
        good.clone(),
        serde_json::to_string_pretty(&good_findings()).expect("serialisable"),
        good.replace("tokio.", "tokio. \\u00e9 \\/"),
        good.replace("\"gaps\":[]", "\"gaps\":[1]"),
        good.replace("\"gaps\":[]", "\"gaps\":[],\"gaps\":[\"last wins\"]"),
        good.replace("[\"Cargo.toml\"]", "[]"),
        "{".into(),
    ];
    for text in &cases {
        let from_value = match serde_json::from_str::<Value>(text) {
            Ok(v) => spec.validate_output(&v),
            Err(e) => Err(not_json(text, &e)),
        };
        let from_text = spec.validate_output_json(text);
        match (&from_text, &from_value) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
            (Err(a), Err(b)) => assert_eq!(a, b, "{text}"),
            _ => panic!("verdicts differ on {text}: {from_text:?} vs {from_value:?}"),
        }
    }
    let last = spec
        .validate_output_json(&cases[4])
        .expect("duplicate keys: the last one is kept, as serde_json does");
    assert_eq!(last["gaps"], json!(["last wins"]));
}

#[test]
fn contracts_validate_text_as_they_validate_values() {
    let contract = Contract::compile(Arc::new(findings_schema())).expect("compiles");
    let good = serde_json::to_string(&good_findings()).expect("serialisable");
    for text in [
        good.clone(),
        good.replace("[\"Cargo.toml\"]", "[]"),
        good.replace("\"gaps\":[]", "\"gaps\":[],\"extra\":true"),
        good.replace("\"gaps\":[]", "\"gaps\":[7],\"gaps\":[]"),
        "nope".into(),
    ] {
        let from_value = match serde_json::from_str::<Value>(&text) {
            Ok(v) => contract.validate(&v),
            Err(e) => Err(not_json(&text, &e)),
        };
        assert_eq!(contract.validate_json(&text), from_value, "{text}");
    }
    // Objects past the tape's member cap take the Value path: same verdicts.
    let capped = Contract::compile(Arc::new(json!({"type": "object", "maxProperties": 80})))
        .expect("compiles");
    for n in [70, 90] {
        let members: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
        let text = format!("{{{}}}", members.join(","));
        let v: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            capped.validate_json(&text),
            capped.validate(&v),
            "{n} members"
        );
        assert_eq!(capped.validate_json(&text).is_ok(), n <= 80);
    }
}

/// The repair requests a model reads after each of `submissions`, and how the run ended.
async fn run_submitting<O: Send + 'static>(
    spec: &SubAgentSpec<Ask, O>,
    submissions: Vec<Value>,
) -> (Vec<String>, subcontract::RunResult<O>) {
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let s = seen.clone();
    let m = model(move |_, turn, req| {
        if let Some(subcontract::model::Message::ToolResults { results, .. }) = req.messages.last()
        {
            s.lock().unwrap().push(results[0].content.clone());
        }
        ScriptStep::submit(submissions[(turn - 1).min(submissions.len() - 1)].clone())
    });
    let ctx = subcontract::Ctx::builder(m).build();
    let r = spec.run(&Ask { q: "why?".into() }, &ctx).await;
    let seen = seen.lock().unwrap().clone();
    (seen, r)
}

/// The run loop checks a submission sent as text (as providers hand arguments over) on the
/// text, and a model reads exactly the repair request it would read for the same output sent
/// as an object.
#[tokio::test]
async fn the_run_loop_checks_text_submissions_like_object_submissions() {
    let spec = report_spec();
    let cases = report_cases();
    let bad = [4, 5, 10, 12, 14, 16]; // size, schema, rules, not JSON
    let good = &cases[1].1;
    for i in bad {
        let (label, text) = &cases[i];
        let (as_text, r) = run_submitting(
            &spec,
            vec![Value::String(text.clone()), Value::String(good.clone())],
        )
        .await;
        assert_eq!(r.outcome, subcontract::Outcome::Completed, "{label}");
        assert_eq!(r.output.unwrap().title, "Té\t\"q\"", "{label}");
        match serde_json::from_str::<Value>(text) {
            // The same output as an object gets the same repair request.
            Ok(v) => {
                let (as_object, _) =
                    run_submitting(&spec, vec![v, Value::String(good.clone())]).await;
                assert_eq!(as_text, as_object, "{label}");
            }
            // Text that is not JSON: the parser's own error and the text's start.
            Err(e) => {
                let want = format!("- /: {}\n", not_json(text, &e)[0].message);
                assert!(as_text[0].contains(&want), "{label}: {as_text:?}");
            }
        }
    }
}

/// A sub-agent's result as a host's tool: compact JSON for the model either way, and the
/// output as a JSON value for a spec over JSON values (not rebuilt for a typed spec).
#[tokio::test]
async fn sub_agent_tool_results_from_text() {
    let host = subcontract::Ctx::builder(model(|system, _, _| {
        let out = if system == "Report." {
            r#"{ "title": "T", "contact": "a@b.example", "confidence": 1e0, "tags": [], "note": null }"#
        } else {
            r#"{ "findings": [ ], "gaps": [ "none \u00e9" ] }"#
        };
        ScriptStep::submit(Value::String(out.into()))
    }))
    .build();
    let typed = report_spec().as_tool();
    let out = typed.call(json!({"q": "why?"}), &host).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        r#"{"title":"T","contact":"a@b.example","confidence":1.0,"tags":[],"note":null}"#
    );
    assert_eq!(out.structured, None);

    let dynamic = research_spec("research", &[]).as_tool();
    let out = dynamic.call(json!({"question": "why?"}), &host).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(out.content, r#"{"findings":[],"gaps":["none é"]}"#);
    assert_eq!(
        out.structured,
        Some(json!({"findings": [], "gaps": ["none é"]}))
    );
}

/// Arguments a model double-encoded (JSON text of a string that holds JSON) are read once, as
/// the model sent them: a string, which the output's object schema rejects, so the model is
/// asked to repair instead of the string being parsed a second time.
#[tokio::test]
async fn double_encoded_submissions_are_repaired_not_guessed() {
    let spec = report_spec();
    let good = &report_cases()[0].1;
    let double = serde_json::to_string(good).expect("a string serialises");
    let (seen, r) = run_submitting(
        &spec,
        vec![Value::String(double), Value::String(good.clone())],
    )
    .await;
    assert_eq!(r.outcome, subcontract::Outcome::Completed);
    assert_eq!(r.turns, 2);
    assert!(seen[0].contains("is not of type \"object\""), "{seen:?}");
}
