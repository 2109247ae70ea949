//! Grounded outputs through a whole run: a value marked `x-grounded` reaches the caller only
//! when something the run read backs it; otherwise it goes back to the sub-agent for repair,
//! and never to a parent.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use subcontract::events::tree::{build_tree, render_tree};
use subcontract::model::{Message, ModelRequest, ScriptStep};
use subcontract::tool::workspace::Workspace;
use subcontract::{Ctx, EventKind, FnTool, MemorySink, Outcome, SubAgentSpec, ToolOutput, ToolSet};

use crate::common::*;

/// A workspace with a manifest whose name and version a model is asked for.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path();
    std::fs::write(
        p.join("Cargo.toml"),
        "[package]\nname = \"tidepool\"\nversion = \"0.7.3\"\n\n[dependencies]\nserde = \"1\"\n",
    )
    .unwrap();
    std::fs::create_dir(p.join("docs")).unwrap();
    std::fs::write(
        p.join("docs/a.md"),
        "Tidepool stores tides.\nIt keeps 14 days.\n",
    )
    .unwrap();
    std::fs::write(p.join("docs/b.md"), "The MIT License applies.\n").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("docs/a.md", p.join("link.md")).unwrap();
    dir
}

fn tools(dir: &tempfile::TempDir) -> ToolSet {
    Workspace::new(dir.path()).unwrap().tool_set().unwrap()
}

fn spec(output: Value, tools: &[&str], max_turns: u32) -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic("grounded", json!({"type": "object"}), output)
        .description("Answers from the workspace.")
        .system("CHILD")
        .tools(tools.iter().copied())
        .max_turns(max_turns)
        .build()
        .expect("a valid grounded spec")
}

fn manifest_schema() -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["name", "version"],
    "properties": {
        "name": {"type": "string", "maxLength": 40, "x-grounded": "text"},
        "version": {"type": "string", "maxLength": 20, "x-grounded": "text"}
    }})
}

/// What the model was told in reply to its last call or answer.
fn last_reply(req: &ModelRequest<'_>) -> String {
    match req.messages.last() {
        Some(Message::ToolResults { results, .. }) => results
            .iter()
            .map(|r| r.content.clone())
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Message::User { text }) => text.clone(),
        _ => String::new(),
    }
}

fn kinds(sink: &MemorySink) -> (usize, usize) {
    let ev = sink.events();
    let schema = ev
        .iter()
        .filter(|e| matches!(e.kind, EventKind::OutputRejected { .. }))
        .count();
    let ground = ev
        .iter()
        .filter(|e| matches!(e.kind, EventKind::OutputUngrounded { .. }))
        .count();
    (schema, ground)
}

#[tokio::test]
async fn an_invented_value_is_repaired_from_what_the_run_then_reads() {
    let dir = workspace();
    let told: Arc<Mutex<Vec<String>>> = Arc::default();
    let offered: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let (t, o) = (told.clone(), offered.clone());
    let m = model(move |_, turn, req| {
        t.lock().unwrap().push(last_reply(req));
        o.lock()
            .unwrap()
            .push(req.tools.iter().map(|d| d.name.to_string()).collect());
        match turn {
            // Submits at once, as small models do, a name and version it never read.
            1 => ScriptStep::submit(json!({"name": "Cargo.toml", "version": "1.63.0"})),
            2 => ScriptStep::tool_call("read_file", json!({"path": "Cargo.toml"})),
            _ => ScriptStep::submit(json!({"name": "tidepool", "version": "0.7.3"})),
        }
    });
    let sink = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(m)
        .tools(tools(&dir))
        .events(sink.clone())
        .build();
    let r = spec(manifest_schema(), &["read_file", "grep"], 5)
        .run(&json!({}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(
        r.output.unwrap(),
        json!({"name": "tidepool", "version": "0.7.3"})
    );
    assert_eq!(r.turns, 3);
    let told = told.lock().unwrap().clone();
    assert!(
        told[1].contains("`/version` = \"1.63.0\" occurs in nothing this run has read; read the file that holds it, or correct the value"),
        "{}",
        told[1]
    );
    assert!(told[1].contains("`/name` = \"Cargo.toml\""), "{}", told[1]);
    assert!(
        told[1].contains("Next, call one of `read_file`, `grep` to read what holds each value"),
        "{}",
        told[1]
    );
    // The turn after an ungrounded answer offers the spec's tools without the submission.
    let offered = offered.lock().unwrap();
    assert!(offered[0].iter().any(|t| t == subcontract::SUBMIT_TOOL));
    assert_eq!(offered[1], ["read_file", "grep"]);
    assert!(offered[2].iter().any(|t| t == subcontract::SUBMIT_TOOL));
    // Grounding rejections are counted apart from schema rejections, and shown as such.
    assert_eq!(kinds(&sink), (0, 1));
    let tree = render_tree(&build_tree(&sink.events()));
    assert!(tree.contains("turn 1: output ungrounded: /name"), "{tree}");
    let trace = serde_json::to_string(&sink.events()).unwrap();
    assert!(trace.contains("\"event\":\"output_ungrounded\""), "{trace}");
    assert!(
        !trace.contains("1.63.0"),
        "the value is in the trace: {trace}"
    );
}

#[tokio::test]
async fn line_numbers_and_grep_prefixes_are_not_evidence() {
    let dir = workspace();
    let schema = json!({"type": "object", "additionalProperties": false, "required": ["n"],
        "properties": {"n": {"type": "integer", "x-grounded": "number"}}});
    // `read_file` shows `    2| It keeps 14 days.`; `grep` shows `docs/a.md:2: …`. Neither
    // 2 is the file's: only 14 is.
    for (call, n, holds) in [
        (("read_file", json!({"path": "docs/a.md"})), 2, false),
        (("grep", json!({"pattern": "keeps"})), 2, false),
        (("read_file", json!({"path": "docs/a.md"})), 14, true),
        (("grep", json!({"pattern": "keeps"})), 14, true),
    ] {
        let c = call.clone();
        let m = model(move |_, turn, _| match turn {
            1 => ScriptStep::tool_call(c.0, c.1.clone()),
            _ => ScriptStep::submit(json!({"n": n})),
        });
        let ctx = Ctx::builder(m).tools(tools(&dir)).build();
        let r = spec(schema.clone(), &["read_file", "grep"], 3)
            .run(&json!({}), &ctx)
            .await;
        let want = if holds {
            Outcome::Completed
        } else {
            Outcome::InvalidOutput
        };
        assert_eq!(r.outcome, want, "{call:?} n={n}: {:?}", r.error);
        if !holds {
            let e = r.error.unwrap().to_string();
            assert!(e.contains("/n: occurs as a number in nothing"), "{e}");
        }
    }
}

#[tokio::test]
async fn a_source_is_only_what_was_read_under_that_name() {
    let dir = workspace();
    let schema = json!({"type": "object", "additionalProperties": false, "required": ["source"],
        "properties": {"source": {"type": "string", "maxLength": 80, "x-grounded": "source"}}});
    let mut cases = vec![
        ("docs/a.md", "docs/a.md", true),
        ("docs/a.md", "./docs//a.md", true),
        ("docs/a.md", "docs/../docs/a.md", false),
        ("docs/a.md", "docs/b.md", false),
    ];
    // A link is a source under the name it was read by, not under its target's.
    if cfg!(unix) {
        cases.push(("link.md", "docs/a.md", false));
        cases.push(("link.md", "link.md", true));
    }
    for (read, cite, holds) in cases {
        let m = model(move |_, turn, _| match turn {
            1 => ScriptStep::tool_call("read_file", json!({"path": read})),
            _ => ScriptStep::submit(json!({"source": cite})),
        });
        let ctx = Ctx::builder(m).tools(tools(&dir)).build();
        let r = spec(schema.clone(), &["read_file"], 3)
            .run(&json!({}), &ctx)
            .await;
        assert_eq!(
            r.outcome == Outcome::Completed,
            holds,
            "read {read}, cited {cite}: {:?}",
            r.error
        );
    }
}

#[tokio::test]
async fn a_quote_must_come_from_the_file_it_cites() {
    let dir = workspace();
    let schema = json!({"type": "object", "additionalProperties": false, "required": ["file", "quote"],
    "properties": {
        "file": {"type": "string", "maxLength": 80, "x-grounded": "source"},
        "quote": {"type": "string", "maxLength": 80, "x-grounded": "text"}
    }});
    let told: Arc<Mutex<Vec<String>>> = Arc::default();
    let t = told.clone();
    let m = model(move |_, turn, req| {
        t.lock().unwrap().push(last_reply(req));
        match turn {
            1 => ScriptStep::tool_calls(vec![
                ("read_file".into(), json!({"path": "docs/a.md"})),
                ("read_file".into(), json!({"path": "docs/b.md"})),
            ]),
            2 => ScriptStep::submit(json!({"file": "docs/b.md", "quote": "stores tides"})),
            _ => ScriptStep::submit(json!({"file": "docs/a.md", "quote": "STORES  tides"})),
        }
    });
    let ctx = Ctx::builder(m).tools(tools(&dir)).build();
    let r = spec(schema, &["read_file"], 4).run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let told = told.lock().unwrap();
    assert!(
        told[2].contains("`/quote` = \"stores tides\" does not occur in the source this object cites; quote `docs/b.md` exactly"),
        "{}",
        told[2]
    );
}

#[tokio::test]
async fn a_parent_never_sees_an_ungrounded_value() {
    let dir = workspace();
    let host_saw: Arc<Mutex<Vec<String>>> = Arc::default();
    let hs = host_saw.clone();
    let m = model(move |system, turn, req| match (system, turn) {
        ("HOST", 1) => ScriptStep::tool_call("grounded", json!({})),
        ("HOST", _) => {
            hs.lock().unwrap().push(last_reply(req));
            ScriptStep::text("done")
        }
        // The child never reads: every answer is invented.
        _ => ScriptStep::submit(json!({"name": "INVENTED-NAME", "version": "9.9.9"})),
    });
    let child = spec(manifest_schema(), &["read_file"], 3);
    let mut set = tools(&dir);
    set.insert(child.as_tool()).unwrap();
    let sink = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(m).tools(set).events(sink.clone()).build();
    let r = host_spec(&["grounded", "read_file"])
        .run(&json!({}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed);
    let host = host_saw.lock().unwrap().join("\n");
    assert!(host.contains("invalid_output"), "{host}");
    assert!(
        host.contains("/name: occurs in nothing this run has read"),
        "{host}"
    );
    assert!(!host.contains("INVENTED"), "the value went up: {host}");
    assert!(!host.contains("9.9.9"), "the value went up: {host}");
    let trace = serde_json::to_string(&sink.events()).unwrap();
    assert!(!trace.contains("INVENTED"), "{trace}");
    assert_eq!(kinds(&sink), (0, 3));
}

#[tokio::test]
async fn evidence_is_what_the_model_read_not_what_was_withheld() {
    // A 16 MiB result holds the value; the turn's cap withholds it, so it is not evidence. A
    // small result that names its source grounds both the text and the source.
    let huge = format!("{}tidepool-9{}", "x ".repeat(8 << 20), " y".repeat(10));
    assert!(huge.len() >= 16 << 20);
    let big = FnTool::new(
        "dump",
        "Dumps everything.",
        json!({"type": "object", "additionalProperties": false}),
        move |_| {
            let h = huge.clone();
            async move { ToolOutput::text(h) }
        },
    );
    let ticket = FnTool::new(
        "ticket",
        "Reads a ticket.",
        json!({"type": "object", "additionalProperties": false}),
        |_| async {
            ToolOutput::text("Ticket 42: login times out after 30 s.").with_source("ticket-42")
        },
    );
    let mut set = ToolSet::new();
    set.insert(big).unwrap();
    set.insert(ticket).unwrap();
    let schema = json!({"type": "object", "additionalProperties": false, "required": ["v"],
    "properties": {
        "v": {"type": "string", "maxLength": 40, "x-grounded": "text"},
        "src": {"type": "string", "maxLength": 40, "x-grounded": "source"}
    }});
    for (tool, answer, holds) in [
        ("dump", json!({"v": "tidepool-9"}), false),
        (
            "ticket",
            json!({"v": "login times out", "src": "ticket-42"}),
            true,
        ),
        (
            "ticket",
            json!({"v": "login times out", "src": "ticket-43"}),
            false,
        ),
    ] {
        let a = answer.clone();
        let m = model(move |_, turn, _| match turn {
            1 => ScriptStep::tool_call(tool, json!({})),
            _ => ScriptStep::submit(a.clone()),
        });
        let ctx = Ctx::builder(m).tools(set.clone()).build();
        let r = spec(schema.clone(), &["dump", "ticket"], 2)
            .run(&json!({}), &ctx)
            .await;
        assert_eq!(
            r.outcome == Outcome::Completed,
            holds,
            "{tool} {answer}: {:?}",
            r.error
        );
    }
}

#[tokio::test]
async fn the_input_is_evidence_and_the_system_prompt_is_not() {
    let schema = json!({"type": "object", "additionalProperties": false, "required": ["v"],
        "properties": {"v": {"type": "string", "maxLength": 40, "x-grounded": "text"}}});
    let s = SubAgentSpec::dynamic("g", json!({"type": "object"}), schema)
        .description("d")
        .system("The secret word is zebra.")
        .max_turns(1)
        .build()
        .unwrap();
    for (v, holds) in [("Quokka", true), ("zebra", false)] {
        let m = model(move |_, _, _| ScriptStep::submit(json!({"v": v})));
        let ctx = Ctx::builder(m).build();
        let r = s.run(&json!({"animal": "quokka"}), &ctx).await;
        assert_eq!(r.outcome == Outcome::Completed, holds, "{v}: {:?}", r.error);
    }
}

#[tokio::test]
async fn a_sub_agents_cited_sources_are_consulted_by_its_parent() {
    let dir = workspace();
    let child_schema = json!({"type": "object", "additionalProperties": false, "required": ["files"],
        "properties": {"files": {"type": "array", "maxItems": 3,
            "items": {"type": "string", "maxLength": 80, "x-grounded": "source"}}}});
    let parent_schema = json!({"type": "object", "additionalProperties": false, "required": ["cite"],
        "properties": {"cite": {"type": "string", "maxLength": 80, "x-grounded": "source"}}});
    let m = model(move |system, turn, _| match (system, turn) {
        ("PARENT", 1) => ScriptStep::tool_call("finder", json!({})),
        ("PARENT", _) => ScriptStep::submit(json!({"cite": "docs/a.md"})),
        (_, 1) => ScriptStep::tool_call("read_file", json!({"path": "docs/a.md"})),
        _ => ScriptStep::submit(json!({"files": ["docs/a.md"]})),
    });
    let child = SubAgentSpec::dynamic("finder", json!({"type": "object"}), child_schema)
        .description("Finds files.")
        .system("CHILD")
        .tools(["read_file"])
        .max_turns(3)
        .build()
        .unwrap();
    let parent = SubAgentSpec::dynamic("parent", json!({"type": "object"}), parent_schema)
        .description("Cites what its child found.")
        .system("PARENT")
        .tools(["finder", "read_file"])
        .max_turns(3)
        .build()
        .unwrap();
    let mut set = tools(&dir);
    set.insert(child.as_tool()).unwrap();
    let ctx = Ctx::builder(m).tools(set).build();
    let r = parent.run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
}

#[tokio::test]
async fn grounding_holds_in_every_output_mode() {
    use subcontract::spec::OutputMode;
    let dir = workspace();
    for mode in OutputMode::ALL {
        let m = model(move |_, turn, _| {
            let answer = json!({"name": "Cargo.toml", "version": "1.63.0"});
            match (mode, turn) {
                (_, 1) => ScriptStep::tool_call("read_file", json!({"path": "docs/b.md"})),
                (OutputMode::Auto | OutputMode::Tool, _) => ScriptStep::submit(answer),
                _ => ScriptStep::text(answer.to_string()),
            }
        });
        let ctx = Ctx::builder(m).tools(tools(&dir)).build();
        let s = SubAgentSpec::dynamic("g", json!({"type": "object"}), manifest_schema())
            .description("d")
            .system("CHILD")
            .tools(["read_file"])
            .output_mode(mode)
            .max_turns(3)
            .build()
            .unwrap();
        let r = s.run(&json!({}), &ctx).await;
        assert_eq!(r.outcome, Outcome::InvalidOutput, "{mode}: {:?}", r.error);
        assert!(r.output.is_none());
    }
}

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn cli(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = std::process::Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the subcontract binary runs");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A spec file whose one output property carries `grounded` (a TOML inline table's fields).
fn spec_file(tools: &str, prop: &str) -> String {
    format!(
        r#"name = "g"
description = "Answers from files."
system = "S"
tools = [{tools}]

[input]
type = "object"
additionalProperties = false
properties.q = {{ type = "string", maxLength = 50 }}

[output]
type = "object"
additionalProperties = false
required = ["v"]
properties.v = {{ {prop} }}
"#
    )
}

#[test]
fn check_refuses_each_misuse_of_the_keyword_at_its_place() {
    let dir = tempfile::tempdir().unwrap();
    for (tools, prop, want) in [
        (
            r#""read_file""#,
            r#"type = "string", maxLength = 9, x-grounded = "txt""#,
            "unknown grounding kind \"txt\": expected \"text\", \"source\" or \"number\"; did you mean `text`?",
        ),
        (
            r#""read_file""#,
            r#"type = "boolean", x-grounded = "text""#,
            "`x-grounded` on a boolean",
        ),
        (
            r#""read_file""#,
            r#"enum = ["a", "b"], x-grounded = "text""#,
            "`x-grounded` on an enum or const",
        ),
        (
            r#""list_dir""#,
            r#"type = "string", maxLength = 9, x-grounded = "source""#,
            "none of `g`'s tools can consult a source",
        ),
        (
            "",
            r#"type = "string", maxLength = 9, x-grounded = "source""#,
            "none of `g`'s tools can consult a source",
        ),
    ] {
        std::fs::write(dir.path().join("g.toml"), spec_file(tools, prop)).unwrap();
        let (code, out, err) = cli(dir.path(), &["check", "g.toml"]);
        assert_eq!(code, Some(1), "{prop}: {out}{err}");
        // The place is the keyword itself: line 15, the column of `x-grounded`.
        let col = spec_file(tools, prop)
            .lines()
            .nth(14)
            .and_then(|l| l.find("x-grounded"))
            .map(|c| c + 1)
            .unwrap();
        assert!(
            out.contains(&format!("g.toml:15:{col}: error[invalid-grounding]: ")),
            "{prop}: {out}"
        );
        assert!(out.contains(want), "{prop}: {out}");
    }
    // Well used, it passes.
    std::fs::write(
        dir.path().join("g.toml"),
        spec_file(
            r#""grep""#,
            r#"type = "string", maxLength = 9, x-grounded = "source""#,
        ),
    )
    .unwrap();
    let (code, out, err) = cli(dir.path(), &["check", "g.toml"]);
    assert_eq!(code, Some(0), "{out}{err}");
}

#[test]
fn exports_keep_the_keyword_where_the_target_takes_extra_keywords() {
    let root = std::path::Path::new(ROOT);
    let (code, out, err) = cli(
        root,
        &[
            "schema",
            "specs/research_topic.toml",
            "--format",
            "json-schema",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    let item =
        &j["output_schema"]["properties"]["findings"]["items"]["properties"]["source_ids"]["items"];
    assert_eq!(item["x-grounded"], "source", "{j}");
    let (code, out, err) = cli(
        root,
        &["schema", "specs/research_topic.toml", "--format", "mcp"],
    );
    assert_eq!(code, Some(0), "{err}");
    let m: Value = serde_json::from_str(&out).unwrap();
    let item =
        &m["outputSchema"]["properties"]["findings"]["items"]["properties"]["source_ids"]["items"];
    assert_eq!(item["x-grounded"], "source", "{m}");
    // A strict dialect refuses unknown keywords: it is dropped there and said in words.
    let strict = subcontract::provider::dialect::openai_strict(&json!({
        "type": "object", "required": ["v"],
        "properties": {"v": {"type": "string", "x-grounded": "source"}}
    }));
    let v = &strict["properties"]["v"];
    assert!(v.get("x-grounded").is_none(), "{strict}");
    assert!(
        v["description"]
            .as_str()
            .unwrap()
            .contains("source read or searched"),
        "{strict}"
    );
    let a = subcontract::provider::dialect::anthropic(&json!({
        "type": "object", "properties": {"v": {"type": "number", "x-grounded": "number"}}
    }));
    assert!(a["properties"]["v"].get("x-grounded").is_none(), "{a}");
}

/// The shipped specs ground their citations: the offline `example` model reads what its
/// example cites beside its submission, so `run` holds in one turn where those files are and
/// fails visibly where not.
#[test]
fn the_shipped_specs_hold_where_their_sources_are_and_fail_where_not() {
    let root = std::path::Path::new(ROOT);
    let input = r#"{"question": "Which crate validates JSON Schema?"}"#;
    let (code, out, err) = cli(
        root,
        &[
            "run",
            "specs/research_topic.toml",
            "--model",
            "example",
            "--input",
            input,
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"source_ids\":[\"Cargo.toml\"]"), "{out}");
    assert!(err.contains("completed after 1 turn(s)"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let ws = empty.path().to_str().unwrap();
    let (code, out, err) = cli(
        root,
        &[
            "run",
            "specs/research_topic.toml",
            "--model",
            "example",
            "--workspace",
            ws,
            "--input",
            input,
        ],
    );
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.is_empty(), "an ungrounded output reached stdout: {out}");
    assert!(
        err.contains(
            "output ungrounded: /findings/0/source_ids/0: names no source this run consulted"
        ),
        "{err}"
    );
    // It reads the missing file again each turn, so it ends stalled (or out of turns).
    assert!(
        err.contains("stalled") || err.contains("invalid_output"),
        "{err}"
    );
    // check_claim's quote must come from the file it cites.
    let (code, out, err) = cli(
        root,
        &[
            "run",
            "specs/check_claim.toml",
            "--model",
            "example",
            "--input",
            r#"{"claim": "Budgets charge upward."}"#,
        ],
    );
    assert_eq!(code, Some(0), "{out}{err}");
}

/// Through `batch`: an input whose output cannot be grounded is recorded as failed, and no
/// ungrounded value is written to the results.
#[test]
fn batch_writes_no_ungrounded_output() {
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("in.jsonl");
    let out = dir.path().join("out.jsonl");
    std::fs::write(
        &inp,
        "{\"id\": \"a\", \"input\": {\"question\": \"Which crate validates JSON Schema?\"}}\n",
    )
    .unwrap();
    let empty = tempfile::tempdir().unwrap();
    let (code, o, e) = cli(
        std::path::Path::new(ROOT),
        &[
            "batch",
            "specs/research_topic.toml",
            "--inputs",
            inp.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--model",
            "example",
            "--workspace",
            empty.path().to_str().unwrap(),
            "-q",
        ],
    );
    let written = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        !written.contains("Cargo.toml"),
        "an ungrounded value was written: {written}"
    );
    assert!(
        written.contains("\"outcome\":\"stalled\""),
        "{code:?} {o}{e}\n{written}"
    );
    assert!(!written.contains("\"output\""), "{written}");
}

/// Through `subcontract mcp`: an output that cannot be grounded is an `isError` result
/// naming where and why; one that can is the structured content.
#[cfg(feature = "mcp")]
#[test]
fn mcp_serves_no_ungrounded_output() {
    use crate::mcp::Served;
    let empty = tempfile::tempdir().unwrap();
    let call = |s: &mut Served| {
        s.send_line(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "research_topic",
                "arguments": {"question": "Which crate validates JSON Schema?"}}})
            .to_string(),
        );
        s.reply(1)
    };
    let mut s = Served::start_args(&[
        "mcp",
        "specs/research_topic.toml",
        "--model",
        "example",
        "--workspace",
        empty.path().to_str().unwrap(),
    ]);
    let r = call(&mut s);
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"].to_string();
    assert!(
        text.contains("stalled") || text.contains("invalid_output"),
        "{r}"
    );
    assert!(
        !text.contains("Cargo.toml"),
        "the ungrounded value went out: {r}"
    );
    assert!(r["result"].get("structuredContent").is_none(), "{r}");
    drop(s);
    let mut s = Served::start_args(&["mcp", "specs/research_topic.toml", "--model", "example"]);
    let r = call(&mut s);
    assert_eq!(
        r["result"]["structuredContent"]["findings"][0]["source_ids"][0], "Cargo.toml",
        "{r}"
    );
}

/// Through the rig adapter, with a typed output grounded from Rust (`schemars`' `extend`).
#[cfg(feature = "rig")]
#[tokio::test]
async fn the_rig_adapter_passes_no_ungrounded_output() {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use validator::Validate;

    #[derive(Serialize, Deserialize, JsonSchema, Validate)]
    #[serde(deny_unknown_fields)]
    struct Text {
        #[validate(length(max = 200))]
        text: String,
    }
    #[derive(Debug, Serialize, Deserialize, JsonSchema, Validate)]
    #[serde(deny_unknown_fields)]
    struct Version {
        #[validate(length(max = 20))]
        #[schemars(extend("x-grounded" = "text"))]
        version: String,
        #[schemars(extend("x-grounded" = "number"))]
        port: u16,
    }
    let spec = SubAgentSpec::<Text, Version>::builder("version_of")
        .description("Finds the version a text names.")
        .system("VERSION")
        .max_turns(2)
        .build()
        .unwrap();
    assert!(
        spec.grounding().is_some(),
        "the keyword came through schemars"
    );
    // Text and number, each invented once, then both as the input says.
    for (answer, port, holds) in [
        ("1.63.0", 8080, false),
        ("0.7.3", 8081, false),
        ("0.7.3", 8080, true),
    ] {
        let m = model(move |_, _, _| ScriptStep::submit(json!({"version": answer, "port": port})));
        let ctx = Ctx::builder(m).build();
        let tool = subcontract::rig::tool(spec.clone(), &ctx).expect("a rig tool");
        let r = tool
            .execute(json!({"text": "tidepool 0.7.3 is out; it listens on port 8080"}))
            .await;
        match r {
            Ok(out) => {
                assert!(holds, "{answer} {port} went through");
                assert_eq!(
                    out.as_json(),
                    Some(&json!({"version": "0.7.3", "port": 8080}))
                );
            }
            Err(e) => {
                assert!(!holds, "{answer} {port}: {}", e.message());
                assert!(e.message().contains("invalid_output"), "{}", e.message());
                assert!(!e.message().contains(answer), "{}", e.message());
                assert!(!e.message().contains(&port.to_string()), "{}", e.message());
            }
        }
    }
}

#[tokio::test]
async fn a_submission_beside_reads_is_judged_after_them() {
    let dir = workspace();
    let told: Arc<Mutex<Vec<String>>> = Arc::default();
    let t = told.clone();
    let m = model(move |_, turn, req| {
        t.lock().unwrap().push(last_reply(req));
        let read = ("read_file".to_string(), json!({"path": "Cargo.toml"}));
        match turn {
            // Reads and answers at once, inventing the version: judged after the read.
            1 => ScriptStep::tool_calls(vec![
                read.clone(),
                (
                    subcontract::SUBMIT_TOOL.into(),
                    json!({"name": "tidepool", "version": "1.0"}),
                ),
            ]),
            _ => ScriptStep::tool_calls(vec![
                read.clone(),
                (
                    subcontract::SUBMIT_TOOL.into(),
                    json!({"name": "tidepool", "version": "0.7.3"}),
                ),
            ]),
        }
    });
    let ctx = Ctx::builder(m).tools(tools(&dir)).build();
    let r = spec(manifest_schema(), &["read_file"], 3)
        .run(&json!({}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(r.turns, 2);
    let told = told.lock().unwrap();
    // The second turn saw the file and, for its submission, the repair.
    assert!(told[1].contains("version = \"0.7.3\""), "{}", told[1]);
    assert!(
        told[1].contains("`/version` = \"1.0\" occurs in nothing"),
        "{}",
        told[1]
    );
}

/// What the review of the check tried: ids with a number in them, empty files, a structured
/// value the model never read, `list_dir`'s notes, and a line cut through a number.
#[tokio::test]
async fn odd_sources_and_presentation_are_not_evidence() {
    let dir = workspace();
    std::fs::write(dir.path().join("empty.py"), "").unwrap();
    // `grep` shows 60 characters of this line, cut through the `1` of the number.
    std::fs::write(
        dir.path().join("long.txt"),
        format!("{} timeout = 123456789 and more\n", "a".repeat(48)),
    )
    .unwrap();
    let issue = FnTool::new(
        "issue",
        "Reads an issue.",
        json!({"type": "object", "additionalProperties": false}),
        |_| async {
            let mut out = ToolOutput::text("Issue 42 is closed.").with_source("issue:42");
            // A structured value the model never sees as text is not evidence.
            out.structured = Some(json!({"secret": "hidden-99"}));
            out
        },
    );
    let mut set = Workspace::new(dir.path())
        .unwrap()
        .with_limits(subcontract::tool::workspace::WorkspaceLimits {
            max_line_chars: 60,
            ..Default::default()
        })
        .tool_set()
        .unwrap();
    set.insert(issue).unwrap();
    let schema = json!({"type": "object", "additionalProperties": false,
    "properties": {
        "src": {"type": "string", "maxLength": 40, "x-grounded": "source"},
        "v": {"type": "string", "maxLength": 40, "x-grounded": "text"},
        "n": {"type": "integer", "x-grounded": "number"}
    }});
    for (call, answer, holds) in [
        (("issue", json!({})), json!({"src": "issue:42"}), true),
        (("issue", json!({})), json!({"src": "issue:99"}), false),
        (("issue", json!({})), json!({"v": "hidden-99"}), false),
        (
            ("read_file", json!({"path": "empty.py"})),
            json!({"src": "empty.py"}),
            true,
        ),
        // `list_dir`'s names are evidence; its `(symlink)` and counts are not.
        (("list_dir", json!({})), json!({"v": "Cargo.toml"}), true),
        (("list_dir", json!({})), json!({"v": "symlink"}), false),
        // The word a cut goes through is not the file's: neither the shown `1` nor the rest.
        (
            ("grep", json!({"pattern": "timeout"})),
            json!({"v": "timeout ="}),
            true,
        ),
        (
            ("grep", json!({"pattern": "timeout"})),
            json!({"n": 1}),
            false,
        ),
        (
            ("grep", json!({"pattern": "timeout"})),
            json!({"n": 123456789}),
            false,
        ),
    ] {
        let c = call.clone();
        let a = answer.clone();
        let m = model(move |_, turn, _| match turn {
            1 => ScriptStep::tool_call(c.0, c.1.clone()),
            _ => ScriptStep::submit(a.clone()),
        });
        let ctx = Ctx::builder(m).tools(set.clone()).build();
        let r = spec(
            schema.clone(),
            &["issue", "read_file", "list_dir", "grep"],
            2,
        )
        .run(&json!({}), &ctx)
        .await;
        assert_eq!(
            r.outcome == Outcome::Completed,
            holds,
            "{call:?} {answer}: {:?}",
            r.error
        );
    }
}

/// A parent may pair a quote with a citation when its sub-agent grounded them together, and
/// not with the sub-agent's other words.
#[tokio::test]
async fn a_sub_agents_quote_counts_for_the_source_it_grounded_it_beside() {
    let dir = workspace();
    let pair = |extra: &str| {
        let mut p = json!({"type": "object", "additionalProperties": false, "required": ["file", "quote"],
        "properties": {
            "file": {"type": "string", "maxLength": 80, "x-grounded": "source"},
            "quote": {"type": "string", "maxLength": 80, "x-grounded": "text"}
        }});
        if !extra.is_empty() {
            p["properties"][extra] = json!({"type": "string", "maxLength": 80});
        }
        p
    };
    for (parent_quote, holds) in [("stores tides", true), ("made up note", false)] {
        let m = model(move |system, turn, _| match (system, turn) {
            ("PARENT", 1) => ScriptStep::tool_call("quoter", json!({})),
            ("PARENT", _) => {
                ScriptStep::submit(json!({"file": "docs/a.md", "quote": parent_quote}))
            }
            (_, 1) => ScriptStep::tool_call("read_file", json!({"path": "docs/a.md"})),
            _ => ScriptStep::submit(
                json!({"file": "docs/a.md", "quote": "stores tides", "note": "made up note"}),
            ),
        });
        let child = SubAgentSpec::dynamic("quoter", json!({"type": "object"}), pair("note"))
            .description("Quotes a file.")
            .system("CHILD")
            .tools(["read_file"])
            .max_turns(3)
            .build()
            .unwrap();
        let parent = SubAgentSpec::dynamic("parent", json!({"type": "object"}), pair(""))
            .description("Quotes what its child quoted.")
            .system("PARENT")
            .tools(["quoter", "read_file"])
            .max_turns(2)
            .build()
            .unwrap();
        let mut set = tools(&dir);
        set.insert(child.as_tool()).unwrap();
        let ctx = Ctx::builder(m).tools(set).build();
        let r = parent.run(&json!({}), &ctx).await;
        assert_eq!(
            r.outcome == Outcome::Completed,
            holds,
            "{parent_quote}: {:?}",
            r.error
        );
    }
}

/// A parent whose `version` is grounded as text, beside the file it cites.
fn version_parent(child: &str) -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic(
        "parent",
        json!({"type": "object"}),
        json!({"type": "object", "additionalProperties": false, "required": ["version"],
        "properties": {
            "version": {"type": "string", "maxLength": 60, "x-grounded": "text"},
            "file": {"type": "string", "maxLength": 80, "x-grounded": "source"}
        }}),
    )
    .description("Reports a version through its child.")
    .system("PARENT")
    .tools([child, "read_file"])
    .max_turns(2)
    .build()
    .unwrap()
}

/// Every way a sub-agent's words could reach its parent as evidence: an output its contract
/// does not ground, a property of a grounded output that is not grounded, a text output; and
/// the ways its grounded values do: with the source it found them in, or from the input the
/// parent wrote (kept, and traced).
#[tokio::test]
async fn a_sub_agents_words_ground_nothing_for_its_parent() {
    let dir = workspace();
    let grounded = json!({"type": "object", "additionalProperties": false,
    "properties": {
        "version": {"type": "string", "maxLength": 20, "x-grounded": "text"},
        "note": {"type": "string", "maxLength": 80}
    }});
    let plain = json!({"type": "object", "additionalProperties": false,
        "properties": {"version": {"type": "string", "maxLength": 20}}});
    let text = json!({"type": "string", "maxLength": 200});
    // (child's output schema, what the child reads, its answer, the child's input, what the
    // parent submits, whether the parent's output holds)
    let cases: Vec<(Value, bool, Value, Value, Value, bool)> = vec![
        // A child that grounds nothing repeats an invented version.
        (
            plain.clone(),
            false,
            json!({"version": "1.63.0"}),
            json!({}),
            json!({"version": "1.63.0"}),
            false,
        ),
        // Even one that read the file: its output is its model's words.
        (
            plain.clone(),
            true,
            json!({"version": "0.7.3"}),
            json!({}),
            json!({"version": "0.7.3"}),
            false,
        ),
        // A grounded child's ungrounded property.
        (
            grounded.clone(),
            true,
            json!({"version": "0.7.3", "note": "the latest is 1.63.0"}),
            json!({}),
            json!({"version": "1.63.0"}),
            false,
        ),
        (
            grounded.clone(),
            true,
            json!({"version": "0.7.3", "note": "the latest is 1.63.0"}),
            json!({}),
            json!({"version": "the latest is 1.63.0"}),
            false,
        ),
        // A text output.
        (
            text.clone(),
            true,
            json!("version 1.63.0"),
            json!({}),
            json!({"version": "1.63.0"}),
            false,
        ),
        // A grounded value, with the file it was found in.
        (
            grounded.clone(),
            true,
            json!({"version": "0.7.3"}),
            json!({}),
            json!({"version": "0.7.3", "file": "Cargo.toml"}),
            true,
        ),
        // … and not with a file it was not found in.
        (
            grounded.clone(),
            true,
            json!({"version": "0.7.3"}),
            json!({}),
            json!({"version": "0.7.3", "file": "docs/a.md"}),
            false,
        ),
        // The parent's own words, written into the child's input, come back grounded.
        (
            grounded.clone(),
            false,
            json!({"version": "1.63.0"}),
            json!({"q": "confirm 1.63.0"}),
            json!({"version": "1.63.0"}),
            true,
        ),
    ];
    for (schema, reads, answer, input, submit, holds) in cases {
        let (a, i, sub) = (answer.clone(), input.clone(), submit.clone());
        let m = model(move |system, turn, _| match (system, turn) {
            ("PARENT", 1) => ScriptStep::tool_call("child", i.clone()),
            ("PARENT", _) => ScriptStep::submit(sub.clone()),
            (_, 1) if reads => ScriptStep::tool_call("read_file", json!({"path": "Cargo.toml"})),
            _ if a.is_string() => ScriptStep::text(a.as_str().unwrap()),
            _ => ScriptStep::submit(a.clone()),
        });
        let child = SubAgentSpec::dynamic("child", json!({"type": "object"}), schema.clone())
            .description("Reads the manifest.")
            .system("CHILD")
            .tools(["read_file"])
            .max_turns(3)
            .build()
            .unwrap();
        let mut set = tools(&dir);
        set.insert(child.as_tool()).unwrap();
        let sink = Arc::new(MemorySink::new());
        let ctx = Ctx::builder(m).tools(set).events(sink.clone()).build();
        let r = version_parent("child").run(&json!({}), &ctx).await;
        assert_eq!(
            r.outcome == Outcome::Completed,
            holds,
            "{schema} {answer} → {submit}: {:?}",
            r.error
        );
        // Which grounded values came from the child's input is in the trace: where, not what.
        let from_input: Vec<Vec<String>> = sink
            .events()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::GroundedFromInput { paths, .. } => Some(paths),
                _ => None,
            })
            .collect();
        if input == json!({}) {
            assert!(from_input.is_empty(), "{from_input:?}");
        } else {
            assert_eq!(from_input, [vec!["/version".to_string()]]);
            let tree = render_tree(&build_tree(&sink.events()));
            assert!(
                tree.contains("grounded only by its input: /version"),
                "{tree}"
            );
            let trace = serde_json::to_string(&sink.events()).unwrap();
            assert!(
                trace.contains("\"event\":\"grounded_from_input\""),
                "{trace}"
            );
        }
    }
}

/// Lines a search showed from one file, far apart, are not one text; a read's lines are.
#[tokio::test]
async fn text_is_whole_tokens_within_one_piece() {
    let dir = workspace();
    let mut far = String::from("The budget is charged\n");
    for i in 0..40 {
        far.push_str(&format!("filler line {i}\n"));
    }
    far.push_str("upward to the root.\n");
    std::fs::write(dir.path().join("far.md"), far).unwrap();
    let schema = json!({"type": "object", "additionalProperties": false, "required": ["v"],
        "properties": {"v": {"type": "string", "maxLength": 80, "x-grounded": "text"}}});
    let grep = ("grep", json!({"pattern": "charged|upward"}));
    let read = ("read_file", json!({"path": "Cargo.toml"}));
    let read_a = ("read_file", json!({"path": "docs/a.md"}));
    for (call, v, holds) in [
        (grep.clone(), "budget is charged", true),
        (grep.clone(), "upward to the root", true),
        (grep.clone(), "charged upward", false),
        (
            grep.clone(),
            "The budget is charged upward to the root.",
            false,
        ),
        (read_a.clone(), "stores tides. It keeps 14 days", true),
        (read_a.clone(), "keeps 1", false),
        (read.clone(), "0.7.3", true),
        (read.clone(), "version = \"0.7.3\"", true),
        (read.clone(), "0.7", false),
        (read.clone(), "7.3", false),
        (read.clone(), "3", false),
        (read.clone(), "tide", false),
        (read.clone(), "pool", false),
        (read.clone(), "   ", false),
        (read.clone(), "", false),
    ] {
        let c = call.clone();
        let m = model(move |_, turn, _| match turn {
            1 => ScriptStep::tool_call(c.0, c.1.clone()),
            _ => ScriptStep::submit(json!({ "v": v })),
        });
        let ctx = Ctx::builder(m).tools(tools(&dir)).build();
        let r = spec(schema.clone(), &["read_file", "grep"], 2)
            .run(&json!({}), &ctx)
            .await;
        assert_eq!(
            r.outcome == Outcome::Completed,
            holds,
            "{call:?} {v:?}: {:?}",
            r.error
        );
    }
}

/// The typical wrong answer: the model read the manifest, then wrote a remembered version.
/// The repair quotes the line read that mentions `version`, with its file, and a model that
/// copies it passes; with the pointers off, the same model never sees it.
#[tokio::test]
async fn a_refused_value_is_pointed_at_the_line_that_holds_the_right_one() {
    use subcontract::spec::Levers;
    for pointers in [true, false] {
        let dir = workspace();
        let told: Arc<Mutex<Vec<String>>> = Arc::default();
        let t = told.clone();
        let m = model(move |_, turn, req| {
            let reply = last_reply(req);
            t.lock().unwrap().push(reply.clone());
            let pointed = t
                .lock()
                .unwrap()
                .iter()
                .any(|r| r.contains("Cargo.toml: version = \"0.7.3\""));
            match turn {
                1 => ScriptStep::tool_call("read_file", json!({"path": "Cargo.toml"})),
                2 => ScriptStep::submit(json!({"name": "tidepool", "version": "1.62.0"})),
                // The turn after a refusal asks for a read first.
                3 => ScriptStep::tool_call("grep", json!({"pattern": "license"})),
                // It copies what it was pointed at, if anything, else repeats itself.
                _ if pointed => ScriptStep::submit(json!({"name": "tidepool", "version": "0.7.3"})),
                _ => ScriptStep::submit(json!({"name": "tidepool", "version": "1.62.0"})),
            }
        });
        let s = SubAgentSpec::dynamic("g", json!({"type": "object"}), manifest_schema())
            .description("Reads the manifest.")
            .system("CHILD")
            .tools(["read_file", "grep"])
            .max_turns(4)
            .levers(Levers {
                grounding_pointers: pointers,
                ..Levers::default()
            })
            .build()
            .unwrap();
        let sink = Arc::new(MemorySink::new());
        let ctx = Ctx::builder(m)
            .tools(tools(&dir))
            .events(sink.clone())
            .build();
        let r = s.run(&json!({}), &ctx).await;
        let told = told.lock().unwrap().clone();
        let repair = &told[2];
        assert!(
            repair.contains("`/version` = \"1.62.0\" occurs in nothing this run has read"),
            "{repair}"
        );
        if pointers {
            assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
            assert_eq!(r.output.unwrap()["version"], "0.7.3");
            assert!(
                repair.contains(
                    "Lines this run read that may hold it:\n    Cargo.toml: version = \"0.7.3\""
                ),
                "{repair}"
            );
        } else {
            assert_eq!(r.outcome, Outcome::InvalidOutput, "{:?}", r.error);
            assert!(!repair.contains("Lines this run read"), "{repair}");
        }
        // The trace has where and why, never the value or the lines.
        let trace = serde_json::to_string(&sink.events()).unwrap();
        assert!(
            !trace.contains("1.62.0") && !trace.contains("0.7.3"),
            "{trace}"
        );
    }
}
