//! `subcontract run` and `subcontract trace` through the real binary: offline models, a
//! recording replayed, exit codes, and a real OpenAI-compatible HTTP server.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::providers::{Reply, Server};

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn run(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args)
        .current_dir(ROOT)
        .env_remove("SUBCONTRACT_MODEL");
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("the binary runs")
}

fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
fn run_example_model_trace_record_and_replay() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let rec = dir.path().join("rec.jsonl");
    let input = r#"{"question": "Which library hashes passwords?"}"#;
    let o = run(
        &[
            "run",
            "specs/research_topic.toml",
            "--model",
            "example",
            "--input",
            input,
            "--trace",
            trace.to_str().unwrap(),
            "--record",
            rec.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = stdout_json(&o);
    assert_eq!(out["findings"][0]["source_ids"][0], "Cargo.toml");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("[root.research_topic-1] completed"), "{err}");

    let t = run(&["trace", trace.to_str().unwrap()], &[]);
    assert_eq!(t.status.code(), Some(0));
    let tree = String::from_utf8_lossy(&t.stdout);
    assert!(
        tree.contains("root.research_topic-1 [research_topic] completed, 1 turn(s)"),
        "{tree}"
    );

    let replay = format!("replay:{}", rec.display());
    let r = run(
        &[
            "run",
            "specs/research_topic.toml",
            "--model",
            &replay,
            "--input",
            input,
            "-q",
        ],
        &[],
    );
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(stdout_json(&r), out);

    // The input from a file gives the same answer.
    let f = dir.path().join("input.json");
    std::fs::write(&f, input).unwrap();
    let at = format!("@{}", f.display());
    let r = run(
        &[
            "run",
            "specs/research_topic.toml",
            "--model",
            "example",
            "--input",
            &at,
            "-q",
        ],
        &[],
    );
    assert_eq!(stdout_json(&r), out);
}

#[test]
fn run_exit_codes() {
    // The run ended without an output: 1, with the outcome on stderr.
    let o = run(
        &[
            "run",
            "specs/research_topic.toml",
            "--model",
            "example",
            "--input",
            r#"{"question": "short"}"#,
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid_input"));
    // Usage errors: 2.
    for args in [
        vec![
            "run",
            "specs/research_topic.toml",
            "--model",
            "example",
            "--input",
            "{not json",
        ],
        vec!["run", "specs/research_topic.toml", "--input", "{}"],
        vec![
            "run",
            "specs/missing.toml",
            "--model",
            "example",
            "--input",
            "{}",
        ],
        vec![
            "run",
            "specs/research_topic.toml",
            "--model",
            "nonsense",
            "--input",
            "{}",
        ],
        vec![
            "run",
            "specs/research_topic.toml",
            "--model",
            "example",
            "--input",
            "@/nonexistent",
        ],
    ] {
        let o = run(&args, &[]);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = run(&["trace", "/nonexistent.jsonl"], &[]);
    assert_eq!(o.status.code(), Some(2));
}

/// Errors that stop a run before it starts: one `error:` line each, exit 2, and no request
/// sent for a provider that cannot work without a key.
#[test]
fn run_refuses_early_with_a_plain_error() {
    let start = |args: &[&str]| {
        let o = Command::new(BIN)
            .args(args)
            .current_dir(ROOT)
            .env_remove("SUBCONTRACT_MODEL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL")
            .output()
            .expect("the binary runs");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let input = r#"{"claim": "The budget is charged to every ancestor."}"#;
    // A spec file that is not there is an I/O error, not a TOML syntax error.
    let (code, err) = start(&[
        "run",
        "specs/missing.toml",
        "--model",
        "example",
        "--input",
        "{}",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("error: specs/missing.toml: "), "{err}");
    assert!(!err.contains("toml-syntax"), "{err}");
    for (model, key) in [
        ("openai:gpt-4.1-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ] {
        let t = std::time::Instant::now();
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace.jsonl");
        let (code, err) = start(&[
            "run",
            "specs/check_claim.toml",
            "--model",
            model,
            "--input",
            input,
            "--trace",
            trace.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(2), "{model}: {err}");
        assert!(
            !trace.exists(),
            "{model}: a run that never started leaves no trace file"
        );
        assert!(
            err.starts_with("error: ") && err.contains(key),
            "{model}: {err}"
        );
        assert_eq!(
            err.lines().count(),
            1,
            "refused before the run started: {err}"
        );
        assert!(t.elapsed() < std::time::Duration::from_secs(10), "{model}");
    }
}

fn completion(message: Value, finish: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_against_an_openai_compatible_server() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("Cargo.toml"),
        "[dependencies]\nargon2 = \"0.5\"\n",
    )
    .unwrap();
    let grep_call = json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "grep", "arguments": "{\"pattern\": \"argon2\"}"}}]});
    let submit = json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": "call_2", "type": "function",
        "function": {"name": "submit_output", "arguments": "{\"findings\": [{\"claim\": \"Passwords are hashed with argon2.\", \"source_ids\": [\"Cargo.toml:2\"]}], \"gaps\": []}"}}]});
    let server = Server::start(vec![
        Reply::json(200, completion(grep_call, "tool_calls")),
        Reply::json(200, completion(submit, "tool_calls")),
    ])
    .await;
    let base = format!("{}/v1", server.base);
    let ws_path = ws.path().to_str().unwrap().to_string();
    let o = tokio::task::spawn_blocking(move || {
        run(
            &[
                "run",
                "specs/research_topic.toml",
                "--model",
                "openai:gpt-4.1-mini",
                "--base-url",
                &base,
                "--workspace",
                &ws_path,
                "--input",
                r#"{"question": "Which library hashes passwords?"}"#,
            ],
            &[("OPENAI_API_KEY", "sk-cli-test-key")],
        )
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(
        stdout_json(&o)["findings"][0]["source_ids"][0],
        "Cargo.toml:2"
    );
    assert!(
        !err.contains("sk-cli-test-key"),
        "the key never shows: {err}"
    );
    // gpt-4.1-mini has a built-in price, so the run cost something.
    assert!(!err.contains(" 0 USD in all"), "{err}");
    let got = server.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].path, "/v1/chat/completions");
    assert_eq!(
        got[0].headers.get("authorization").map(String::as_str),
        Some("Bearer sk-cli-test-key")
    );
    let tools: Vec<&str> = got[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        vec!["read_file", "grep", "submit_output"],
        "the spec's tools, never more"
    );
    let tool_msg = got[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert_eq!(tool_msg["tool_call_id"], "call_1");
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("Cargo.toml:2: argon2"),
        "{tool_msg}"
    );
}

/// `SUBCONTRACT_STRICT=1` sends the tools in OpenAI's strict dialect; the bounds it strips are
/// still enforced by our own validation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_mode_from_the_environment() {
    let long_claim = "x".repeat(301);
    // The spec grounds its citations: each answer reads the file it cites beside it.
    let submit = |claim: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_0", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\": \"Cargo.toml\"}"}}, {
            "id": "call_1", "type": "function",
            "function": {"name": "submit_output", "arguments": json!({"findings": [{"claim": claim, "source_ids": ["Cargo.toml"]}], "gaps": []}).to_string()}}]})
    };
    let server = Server::start(vec![
        Reply::json(200, completion(submit(&long_claim), "tool_calls")),
        Reply::json(200, completion(submit("short"), "tool_calls")),
    ])
    .await;
    let base = format!("{}/v1", server.base);
    let o = tokio::task::spawn_blocking(move || {
        run(
            &[
                "run",
                "specs/research_topic.toml",
                "--model",
                "openai:gpt-4.1-mini",
                "--base-url",
                &base,
                "--input",
                r#"{"question": "Which library hashes passwords?"}"#,
                "-q",
            ],
            &[("SUBCONTRACT_STRICT", "1")],
        )
    })
    .await
    .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(stdout_json(&o)["findings"][0]["claim"], "short");
    let got = server.received();
    assert_eq!(
        got.len(),
        2,
        "the 301-character claim was sent back for repair"
    );
    let submit_tool = got[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "submit_output")
        .unwrap()
        .clone();
    assert_eq!(submit_tool["function"]["strict"], true);
    assert!(
        !submit_tool.to_string().contains("maxLength"),
        "{submit_tool}"
    );
    // Nor our own `x-grounded`, which strict mode would refuse: it is said in words.
    assert!(
        !submit_tool.to_string().contains("x-grounded"),
        "{submit_tool}"
    );
    assert!(
        submit_tool
            .to_string()
            .contains("read or searched in this run"),
        "{submit_tool}"
    );
}

/// A sub-agent that keeps submitting an instruction for its caller: stderr (progress and the
/// final error) and the trace name the path and the reason of each rejection, never the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_output_shows_where_and_why_but_never_the_value() {
    let inject = crate::rejected_output::injection();
    let args = serde_json::to_string(&json!({
        "findings": [{"claim": inject, "source_ids": ["Cargo.toml"]}], "gaps": []
    }))
    .unwrap();
    let submit = json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "submit_output", "arguments": args}}]});
    // research_topic allows 8 turns.
    let server = Server::start(
        (0..8)
            .map(|_| Reply::json(200, completion(submit.clone(), "tool_calls")))
            .collect(),
    )
    .await;
    let base = format!("{}/v1", server.base);
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let trace_arg = trace.to_str().unwrap().to_string();
    let o = tokio::task::spawn_blocking(move || {
        run(
            &[
                "run",
                "specs/research_topic.toml",
                "--model",
                "openai:gpt-4.1-mini",
                "--base-url",
                &base,
                "--trace",
                &trace_arg,
                "--input",
                r#"{"question": "Which library hashes passwords?"}"#,
            ],
            &[("OPENAI_API_KEY", "sk-cli-test-key")],
        )
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("invalid_output"), "{err}");
    assert!(
        err.contains(
            "turn 1: output rejected: /findings/0/claim: the value is longer than 300 characters"
        ),
        "{err}"
    );
    assert!(!err.contains("IGNORE YOUR"), "{err}");
    let t = std::fs::read_to_string(&trace).unwrap();
    assert_eq!(t.matches("\"event\":\"output_rejected\"").count(), 8, "{t}");
    assert!(!t.contains("IGNORE YOUR"), "{t}");
    let shown = run(&["trace", trace.to_str().unwrap()], &[]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("turn 8: output rejected: /findings/0/claim"),
        "{shown}"
    );
    assert!(!shown.contains("IGNORE YOUR"), "{shown}");
}

/// A price file with an absurd price or a negative one: the first is a budget that cannot be
/// afforded (never a panic), the second is refused when the file is loaded, naming the model
/// and the column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extreme_and_negative_prices() {
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.toml");
    std::fs::write(
        &huge,
        "[prices.\"openai:gpt-4.1-mini\"]\ninput_per_mtok = \"79228162514264337593543950335\"\noutput_per_mtok = \"79228162514264337593543950335\"\n",
    )
    .unwrap();
    let negative = dir.path().join("negative.toml");
    std::fs::write(
        &negative,
        "[prices.\"openai:gpt-4.1-mini\"]\ninput_per_mtok = \"0.40\"\noutput_per_mtok = \"-1.60\"\n",
    )
    .unwrap();
    let submit = json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "submit_output", "arguments": "{\"findings\": [], \"gaps\": []}"}}]});
    let server = Server::start(vec![Reply::json(200, completion(submit, "tool_calls"))]).await;
    let base = format!("{}/v1", server.base);
    let run_with = |prices: std::path::PathBuf| {
        let base = base.clone();
        tokio::task::spawn_blocking(move || {
            run(
                &[
                    "run",
                    "specs/research_topic.toml",
                    "--model",
                    "openai:gpt-4.1-mini",
                    "--base-url",
                    &base,
                    "--prices",
                    prices.to_str().unwrap(),
                    "--input",
                    r#"{"question": "Which library hashes passwords?"}"#,
                ],
                &[],
            )
        })
    };
    let o = run_with(huge).await.unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(101), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // A price so large that no first call fits the cap is refused before the run starts.
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("over max_cost_usd"), "{err}");
    assert!(server.received().is_empty(), "no call is made");
    let o = run_with(negative).await.unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`output_per_mtok` of `openai:gpt-4.1-mini` is negative"),
        "{err}"
    );
}

/// A provider whose model echoes the API key inside a submission's arguments (an invalid one,
/// so validation messages quote it): the key appears in none of stdout, stderr (progress,
/// outcome and the debug log), the JSONL trace or the recording.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echoed_key_leaves_the_process_nowhere() {
    const KEY: &str = "sk-echoed-SECRET-0123456789";
    let echo = json!({"role": "assistant", "content": format!("my key is {KEY}"), "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "submit_output", "arguments": json!({
            "findings": [{"claim": KEY, "source_ids": [KEY]}], "gaps": KEY}).to_string()}}]});
    let server = Server::start(vec![Reply::json(200, completion(echo, "tool_calls"))]).await;
    let base = format!("{}/v1", server.base);
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let rec = dir.path().join("rec.jsonl");
    let (trace_arg, rec_arg) = (
        trace.to_str().unwrap().to_string(),
        rec.to_str().unwrap().to_string(),
    );
    let o = tokio::task::spawn_blocking(move || {
        run(
            &[
                "run",
                "specs/research_topic.toml",
                "--model",
                "openai:gpt-4.1-mini",
                "--base-url",
                &base,
                "--input",
                r#"{"question": "Which library hashes passwords?"}"#,
                "--trace",
                &trace_arg,
                "--record",
                &rec_arg,
                "-vv",
            ],
            &[("OPENAI_API_KEY", KEY)],
        )
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(server.received().len() >= 2, "the bad output was sent back");
    let trace_text = std::fs::read_to_string(&trace).unwrap();
    let rec_text = std::fs::read_to_string(&rec).unwrap();
    for (what, text) in [
        ("stdout", String::from_utf8_lossy(&o.stdout).to_string()),
        ("stderr", err.to_string()),
        ("trace", trace_text.clone()),
        ("recording", rec_text.clone()),
    ] {
        assert!(!text.contains(KEY), "{what} shows the key: {text}");
    }
    // The recording holds the model's answers, so the echo reached it and was redacted: the
    // test exercises the path it guards. Stderr and the trace carry only paths and reasons
    // of the rejected output, so the echoed value never reaches them to begin with.
    assert!(rec_text.contains("***"), "{rec_text}");
    assert!(err.contains("output rejected: /gaps"), "{err}");
    // The trace is still a valid trace.
    subcontract::events::read_jsonl(&trace).expect("the redacted trace reads back");
}

/// The binary logs warnings on stderr: a model with no known price warns exactly once over a
/// two-turn run; `-q` silences it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpriced_model_warns_once_unless_quiet() {
    let submit = json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": "call_2", "type": "function",
        "function": {"name": "submit_output", "arguments": "{\"findings\": [], \"gaps\": [\"nothing found\"]}"}}]});
    let list = json!({"role": "assistant", "content": null, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "grep", "arguments": "{\"pattern\": \"argon2\"}"}}]});
    for quiet in [false, true] {
        let server = Server::start(vec![
            Reply::json(200, completion(list.clone(), "tool_calls")),
            Reply::json(200, completion(submit.clone(), "tool_calls")),
        ])
        .await;
        let base = format!("{}/v1", server.base);
        let o = tokio::task::spawn_blocking(move || {
            let mut args = vec![
                "run",
                "specs/research_topic.toml",
                "--model",
                "openai:a-local-model-with-no-price",
                "--base-url",
                &base,
                "--input",
                r#"{"question": "Which library hashes passwords?"}"#,
            ];
            if quiet {
                args.push("-q");
            }
            run(&args, &[("RUST_LOG", "")])
        })
        .await
        .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        assert_eq!(server.received().len(), 2);
        let warnings = err.matches("no price known").count();
        assert_eq!(warnings, usize::from(!quiet), "quiet={quiet}: {err}");
        assert_eq!(err.matches("WARN").count(), usize::from(!quiet), "{err}");
    }
}

#[test]
fn schema_for_anthropic_is_strict_and_restates_every_bound() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = dir.path().join("bounded.toml");
    std::fs::write(
        &spec,
        r#"name = "bounded"
description = "Bounds of every kind."
system = "Answer."

[input]
type = "object"
required = ["text"]
additionalProperties = false
properties.text = { type = "string", minLength = 3, maxLength = 300, pattern = "^[a-z ]+$" }
properties.score = { type = "number", minimum = 0, maximum = 1 }
properties.count = { type = "integer", exclusiveMinimum = 0, multipleOf = 2 }
properties.tags = { type = "array", minItems = 2, maxItems = 5, items = { type = "string", maxLength = 20 } }

[output]
type = "string"
maxLength = 100
"#,
    )
    .expect("spec written");
    let spec = spec.to_str().expect("UTF-8 path");
    let full = stdout_json(&run(&["schema", spec, "--format", "json-schema"], &[]));
    let a = stdout_json(&run(&["schema", spec, "--format", "anthropic"], &[]));
    // Without `strict: true` a host registers the tool non-strict, where the removed bounds
    // would simply be gone.
    assert_eq!(a["strict"], true, "{a:#}");
    // Every bound of the full schema is in the strict one: kept, or restated in words.
    fn check(full: &Value, strict: &Value, path: &str) {
        let desc = strict["description"].as_str().unwrap_or("");
        for (k, v) in full.as_object().into_iter().flatten() {
            match k.as_str() {
                "minLength" | "maxLength" | "minimum" | "maximum" | "exclusiveMinimum"
                | "multipleOf" | "minItems" | "maxItems" | "pattern" => {
                    assert!(
                        strict.get(k) == Some(v) || desc.contains(&v.to_string()),
                        "{path}: {k} = {v} lost: {strict}"
                    );
                }
                "properties" => {
                    for (name, p) in v.as_object().into_iter().flatten() {
                        check(p, &strict["properties"][name], &format!("{path}/{name}"));
                    }
                }
                "items" => check(v, &strict["items"], &format!("{path}/items")),
                _ => {}
            }
        }
    }
    check(&full["input_schema"], &a["input_schema"], "");
    assert!(
        a["input_schema"]["properties"]["text"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("at most 300 characters")),
        "{a:#}"
    );
}

/// A first call that the spec's cap cannot afford is said in one line, with the fix, before
/// anything is spent: no model call is made (the trace holds none).
#[test]
fn run_says_in_one_line_when_no_call_fits_the_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = dir.path().join("check_claim.toml");
    let text =
        std::fs::read_to_string(Path::new(ROOT).join("specs/check_claim.toml")).expect("spec");
    let tight = text
        .lines()
        .map(|l| {
            if l.starts_with("max_cost_usd") {
                "max_cost_usd = \"0.5\"".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(tight, text, "the cap was lowered");
    std::fs::write(&spec, tight).expect("write spec");
    let prices = dir.path().join("prices.toml");
    std::fs::write(
        &prices,
        // Output dear: half of max_tokens_per_turn (1,024) would fit the 0.5 USD cap.
        "[prices.\"example\"]\ninput_per_mtok = \"1\"\noutput_per_mtok = \"1000\"\n",
    )
    .expect("prices");
    let trace = dir.path().join("trace.jsonl");
    let p = |p: &Path| p.to_str().expect("utf-8").to_string();
    let o = run(
        &[
            "run",
            &p(&spec),
            "--model",
            "example",
            "--prices",
            &p(&prices),
            "--trace",
            &p(&trace),
            "--input",
            r#"{"claim": "The budget is charged to every ancestor."}"#,
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("over max_cost_usd") && err.contains("lower max_tokens_per_turn to"),
        "{err}"
    );
    let events = std::fs::read_to_string(&trace).unwrap_or_default();
    assert!(!events.contains("model_call"), "{events}");
}

/// `--mcp-config` naming a file that cannot be read stops `batch` and `mcp` before any run,
/// with the file named: a spec's MCP tools must never go missing silently.
#[test]
fn a_missing_mcp_config_is_refused_by_batch_and_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in.jsonl");
    std::fs::write(&inputs, "{\"question\": \"q\"}\n").unwrap();
    let out = dir.path().join("out.jsonl");
    let (inputs, out) = (inputs.to_str().unwrap(), out.to_str().unwrap());
    for args in [
        vec![
            "batch",
            "specs/research_topic.toml",
            "--inputs",
            inputs,
            "--out",
            out,
            "--model",
            "example",
            "--mcp-config",
            "nowhere.json",
        ],
        vec![
            "mcp",
            "specs/",
            "--model",
            "example",
            "--mcp-config",
            "nowhere.json",
        ],
    ] {
        let o = run(&args, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("nowhere.json") && err.contains("cannot read the MCP config"),
            "{args:?}: {err}"
        );
    }
    assert!(!std::path::Path::new(out).exists(), "no result was written");
}

/// Ctrl-C during `run` cancels the run rather than killing the process: the outcome line
/// (`cancelled`) is reported, the trace holds the run's finished event, and the exit code is an
/// interrupted process's (130).
#[test]
fn ctrl_c_during_run_reports_cancelled_and_flushes_the_trace() {
    use std::io::{BufRead as _, BufReader};
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    // Each example-model call waits 30 s: the signal always lands mid-call.
    let mut child = Command::new(BIN)
        .args([
            "run",
            "specs/research_topic.toml",
            "--model",
            "example",
            "--input",
            r#"{"question": "Which library hashes passwords?"}"#,
            "--trace",
            trace.to_str().unwrap(),
        ])
        .current_dir(ROOT)
        .env_remove("SUBCONTRACT_MODEL")
        .env("SUBCONTRACT_EXAMPLE_DELAY_MS", "30000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Wait for the run to start (its first progress line), then interrupt it.
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    while !seen.contains("started") {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).expect("stderr") > 0,
            "exited before starting: {seen}"
        );
        seen.push_str(&line);
    }
    let sent = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).expect("stderr");
    seen.push_str(&rest);
    let o = child.wait_with_output().expect("exits");
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(o.status.code(), Some(130), "{seen}");
    assert!(o.stdout.is_empty(), "no output for a cancelled run");
    assert!(seen.contains("interrupted: cancelling the run"), "{seen}");
    assert!(seen.contains("[root.research_topic-1] cancelled"), "{seen}");
    let events = std::fs::read_to_string(&trace).expect("trace written");
    let finished: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|e| e["event"] == "finished")
        .collect();
    assert_eq!(finished.len(), 1, "{events}");
    assert_eq!(finished[0]["outcome"], "cancelled", "{events}");
    let t = run(&["trace", trace.to_str().unwrap()], &[]);
    assert_eq!(t.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&t.stdout).contains("cancelled"),
        "{}",
        String::from_utf8_lossy(&t.stdout)
    );
}

/// `run` offers the spec's siblings as tools; a sibling that names a tool the host lacks is
/// left out (`check` reports it), while the run spec itself naming one is refused, with a
/// "did you mean".
#[test]
fn a_sibling_with_a_misspelt_tool_does_not_refuse_an_unrelated_run() {
    let dir = tempfile::tempdir().unwrap();
    let spec = |name: &str, tools: &str| {
        format!(
            "name = \"{name}\"\ndescription = \"Says hi.\"\nsystem = \"Say hi.\"\ntools = [{tools}]\n\n[input]\ntype = \"string\"\nmaxLength = 20\n\n[output]\ntype = \"string\"\nmaxLength = 20\n\n[[examples]]\ninput = \"hi\"\noutput = \"hello\"\n"
        )
    };
    std::fs::write(
        dir.path().join("greet.toml"),
        spec("greet", "\"read_file\""),
    )
    .unwrap();
    std::fs::write(dir.path().join("typo.toml"), spec("typo", "\"read_fle\"")).unwrap();
    let go = |file: &str| {
        Command::new(BIN)
            .current_dir(dir.path())
            .args(["run", file, "--model", "example", "--input", "\"hi\""])
            .env_remove("SUBCONTRACT_MODEL")
            .output()
            .unwrap()
    };
    let o = go("greet.toml");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = go("typo.toml");
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("spec `typo` names the tool `read_fle`")
            && err.contains("did you mean `read_file`?"),
        "{err}"
    );
}
