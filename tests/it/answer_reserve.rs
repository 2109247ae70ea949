//! The answer reserve: a run that got to work answers, typed and valid, before its budget,
//! its time or its turns run out, and says it was cut short and by which limit; a parent's
//! sub-agents never take the money or the time of the parent's own answer; with the reserve
//! off a run works to its limit as before.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;
use serde_json::{json, Value};
use subcontract::events::{EventKind, Forced};
use subcontract::model::{ModelRequest, Price, PriceTable, ScriptStep, ScriptedModel, SUBMIT_TOOL};
use subcontract::{
    Budget, Ctx, Failure, Limit, MemorySink, Outcome, SpecBuilder, SubAgentSpec, ToolSet,
};

use crate::common::*;

/// Whether `req` asks for the output alone (only the submission tool is offered).
fn asks_for_output(req: &ModelRequest<'_>) -> bool {
    req.tools.len() == 1 && &*req.tools[0].name == SUBMIT_TOOL
}

/// A model that never stops calling `lookup` (each time with new arguments, so it never
/// stalls) until it is asked for its output alone, then submits `answer`. It counts calls.
fn never_stops(answer: Value, delay: Duration, calls: Arc<AtomicUsize>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn("scripted:test", move |req| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        let step = if asks_for_output(&req) {
            ScriptStep::submit(answer.clone())
        } else {
            ScriptStep::tool_call("lookup", json!({"q": format!("q{n}")}))
        };
        step.with_usage(300, 50).delayed(delay)
    }))
}

/// 10 USD per million tokens in and out: a call of this test's specs reserves about 0.01 USD
/// and costs 0.021.
fn priced() -> PriceTable {
    let mut prices = PriceTable::new();
    prices.insert(
        "scripted:test",
        Price::per_mtok(Decimal::from(10), Decimal::from(10)),
    );
    prices
}

fn looping_spec(name: &str, max_turns: u32, reserve: bool) -> SubAgentSpec<Value, Value> {
    research_builder(name, &["lookup"])
        .max_turns(max_turns)
        .max_tokens_per_turn(100)
        .answer_reserve(reserve)
        .build()
        .expect("valid spec")
}

/// A host over JSON values whose output is text of at most `max_len` characters, calling
/// `tool`, in four turns.
fn host_builder(tool: &str, max_len: u64) -> SpecBuilder<Value, Value> {
    SubAgentSpec::dynamic(
        "host",
        json!({"type": "object"}),
        json!({"type": "string", "maxLength": max_len}),
    )
    .description("The host agent.")
    .system("HOST")
    .tools([tool])
    .max_turns(4)
}

fn ctx_with(model: Arc<ScriptedModel>, budget: Budget, sink: Arc<MemorySink>) -> Ctx {
    let mut tools = ToolSet::new();
    tools.insert(lookup_tool("lookup")).unwrap();
    Ctx::builder(model)
        .tools(tools)
        .prices(priced())
        .budget(budget)
        .events(sink)
        .build()
}

/// How the first sub-agent (depth 1) in `sink` ended: its outcome, the limit that cut it
/// short, and its turns.
fn child_finished(sink: &MemorySink) -> (Outcome, Option<Limit>, u32) {
    sink.events()
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Finished {
                outcome,
                cut_short,
                turns,
                ..
            } if e.depth == 1 => Some((*outcome, *cut_short, *turns)),
            _ => None,
        })
        .expect("the child finished")
}

/// A host's context holding `lookup` and `tool`, its events in a sink.
fn host_ctx(model: Arc<ScriptedModel>, tool: Arc<dyn subcontract::Tool>) -> (Ctx, Arc<MemorySink>) {
    let mut tools = ToolSet::new();
    tools.insert(lookup_tool("lookup")).unwrap();
    tools.insert(tool).unwrap();
    let sink = Arc::new(MemorySink::new());
    let ctx = Ctx::builder(model)
        .tools(tools)
        .events(sink.clone())
        .build();
    (ctx, sink)
}

/// Why each model call of `run_id` asked for the output alone, in turn order.
fn forced_of(sink: &MemorySink, run_id: &str) -> Vec<Option<Forced>> {
    sink.events()
        .iter()
        .filter(|e| &*e.run_id == run_id)
        .filter_map(|e| match &e.kind {
            EventKind::ModelCall { forced, .. } => Some(*forced),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_model_that_never_stops_answers_cut_short_by_its_budget() {
    let calls = Arc::new(AtomicUsize::new(0));
    let sink = Arc::new(MemorySink::new());
    let model = never_stops(good_findings(), Duration::ZERO, calls.clone());
    let limit = Decimal::new(12, 2);
    let budget = Budget::new(Some(limit), None);
    let ctx = ctx_with(model, budget.clone(), sink.clone());
    let spec = looping_spec("r", 50, true);
    let r = spec.run(&json!({"question": "what?"}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(r.cut_short, Some(Limit::Budget));
    assert_eq!(r.output, Some(good_findings()));
    assert!(
        r.turns > 2,
        "it worked before it answered: {} turns",
        r.turns
    );
    let s = budget.snapshot();
    assert!(s.spent_usd <= limit, "{} > {limit}", s.spent_usd);
    assert_eq!(s.reserved_usd, Decimal::ZERO, "the hold is let go");
    let forced = forced_of(&sink, &r.run_id);
    assert_eq!(forced.last(), Some(&Some(Forced::Budget)), "{forced:?}");
    assert!(forced[..forced.len() - 1].iter().all(Option::is_none));
    // The finished event and the run tree say so too.
    let tree = subcontract::events::tree::build_tree(&sink.events());
    assert_eq!(tree[0].cut_short, Some(Limit::Budget));
    let text = subcontract::events::tree::render_tree(&tree);
    assert!(
        text.contains("completed, cut short by its budget"),
        "{text}"
    );
}

#[tokio::test]
async fn with_the_reserve_off_the_same_run_ends_budget_exhausted() {
    let calls = Arc::new(AtomicUsize::new(0));
    let sink = Arc::new(MemorySink::new());
    let model = never_stops(good_findings(), Duration::ZERO, calls.clone());
    let limit = Decimal::new(12, 2);
    let budget = Budget::new(Some(limit), None);
    let ctx = ctx_with(model, budget.clone(), sink.clone());
    let spec = looping_spec("r", 50, false);
    let r = spec.run(&json!({"question": "what?"}), &ctx).await;
    assert_eq!(r.outcome, Outcome::BudgetExhausted);
    assert_eq!(r.cut_short, None);
    assert!(r.output.is_none());
    assert!(budget.snapshot().spent_usd <= limit);
    assert!(forced_of(&sink, &r.run_id).iter().all(Option::is_none));
}

#[tokio::test]
async fn the_reserve_off_in_a_spec_file_is_the_old_behaviour() {
    let toml = r#"
name = "r"
description = "Investigate a question."
system = "CHILD r"
tools = ["lookup"]
[limits]
answer_reserve = false
[input]
type = "object"
additionalProperties = false
[output]
type = "object"
additionalProperties = false
"#;
    let load = |text: &str| subcontract::spec::load_spec_str(std::path::Path::new("r.toml"), text);
    let spec = load(toml).unwrap_or_else(|e| panic!("{e}"));
    assert!(!spec.limits().answer_reserve);
    let on = load(&toml.replace("answer_reserve = false\n", "")).expect("valid spec file");
    assert!(on.limits().answer_reserve, "on by default");
    let typo = load(&toml.replace("answer_reserve", "answer_reserv"));
    let err = typo.expect_err("an unknown key").to_string();
    assert!(err.contains("did you mean `answer_reserve`"), "{err}");
}

#[tokio::test]
async fn a_model_that_never_stops_answers_cut_short_by_its_turn_limit() {
    let calls = Arc::new(AtomicUsize::new(0));
    let sink = Arc::new(MemorySink::new());
    let model = never_stops(good_findings(), Duration::ZERO, calls.clone());
    let ctx = ctx_with(model, Budget::unlimited(), sink.clone());
    let r = looping_spec("r", 3, true)
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!((r.turns, r.cut_short), (3, Some(Limit::Turns)));
    assert_eq!(
        forced_of(&sink, &r.run_id),
        [None, None, Some(Forced::LastTurn)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_model_that_never_stops_answers_cut_short_by_its_timeout() {
    let calls = Arc::new(AtomicUsize::new(0));
    let sink = Arc::new(MemorySink::new());
    // Each call takes 200 ms of a 1 s timeout.
    let model = never_stops(good_findings(), Duration::from_millis(200), calls.clone());
    let ctx = ctx_with(model, Budget::unlimited(), sink.clone());
    let spec = research_builder("r", &["lookup"])
        .max_turns(50)
        .timeout(Duration::from_secs(1))
        .build()
        .expect("valid spec");
    let r = spec.run(&json!({"question": "what?"}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(r.cut_short, Some(Limit::Time));
    assert!(r.duration < Duration::from_secs(1), "{:?}", r.duration);
    assert!(r.turns >= 2, "it worked before it answered: {}", r.turns);
    let forced = forced_of(&sink, &r.run_id);
    assert_eq!(forced.last(), Some(&Some(Forced::Time)), "{forced:?}");

    // Off: the same run times out with nothing.
    let spec = research_builder("r", &["lookup"])
        .max_turns(50)
        .timeout(Duration::from_secs(1))
        .answer_reserve(false)
        .build()
        .expect("valid spec");
    let r = spec.run(&json!({"question": "what?"}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Timeout);
}

/// A host whose one tool turn starts a sub-agent that never stops: the sub-agent answers cut
/// short within what the host left it, and the host still answers with what it got.
#[tokio::test]
async fn a_child_never_eats_its_parents_answer() {
    for reserve in [true, false] {
        let sink = Arc::new(MemorySink::new());
        let n = Arc::new(AtomicUsize::new(0));
        let model = Arc::new(ScriptedModel::from_fn("scripted:test", {
            let n = n.clone();
            move |req| {
                let k = n.fetch_add(1, Ordering::SeqCst);
                let host = req.system.starts_with("HOST");
                let step = match (host, asks_for_output(&req)) {
                    (true, true) => ScriptStep::submit(json!("the host's answer")),
                    (true, false) if req.messages.len() == 1 => {
                        ScriptStep::tool_call("research", json!({"question": "what?"}))
                    }
                    (true, false) => ScriptStep::text("the host's answer"),
                    (false, true) => ScriptStep::submit(good_findings()),
                    (false, false) => {
                        ScriptStep::tool_call("lookup", json!({"q": format!("q{k}")}))
                    }
                };
                step.with_usage(300, 50)
            }
        }));
        let mut tools = ToolSet::new();
        tools.insert(lookup_tool("lookup")).unwrap();
        tools
            .insert(looping_spec("research", 50, reserve).as_tool())
            .unwrap();
        let limit = Decimal::new(12, 2);
        let budget = Budget::new(Some(limit), None);
        let ctx = Ctx::builder(model)
            .tools(tools)
            .prices(priced())
            .budget(budget.clone())
            .events(sink.clone())
            .build();
        let host = host_builder("research", 2000)
            // A long prompt: its answer costs more than any of the sub-agent's calls, so what a
            // sub-agent that works to the end of the budget leaves is not enough for it.
            .system(format!("HOST{}", " and so on".repeat(300)))
            .max_tokens_per_turn(300)
            .answer_reserve(reserve)
            .build()
            .unwrap();
        let r = host.run(&json!({}), &ctx).await;
        let child = child_finished(&sink);
        assert!(budget.snapshot().spent_usd <= limit);
        if reserve {
            assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
            assert!(r.turns == 2, "{}", r.turns);
            assert_eq!(r.output, Some(json!("the host's answer")));
            assert_eq!(
                (child.0, child.1),
                (Outcome::Completed, Some(Limit::Budget))
            );
        } else {
            // The old behaviour: the child spends what the host needed to answer.
            assert_eq!(child.0, Outcome::BudgetExhausted);
            assert_eq!(r.outcome, Outcome::BudgetExhausted, "{:?}", r.error);
        }
    }
}

#[tokio::test]
async fn the_parent_model_is_told_its_sub_agent_was_cut_short() {
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let model = Arc::new(ScriptedModel::from_fn("scripted:test", {
        let seen = seen.clone();
        move |req| match (req.system, asks_for_output(&req)) {
            ("HOST", _) if req.messages.len() == 1 => {
                ScriptStep::tool_call("research", json!({"question": "what?"}))
            }
            ("HOST", _) => {
                if let Some(subcontract::model::Message::ToolResults { results, .. }) =
                    req.messages.last()
                {
                    seen.lock()
                        .unwrap()
                        .extend(results.iter().map(|r| r.content.clone()));
                }
                ScriptStep::text("done")
            }
            (_, true) => ScriptStep::submit(good_findings()),
            (_, false) => {
                ScriptStep::tool_call("lookup", json!({"q": req.messages.len().to_string()}))
            }
        }
    }));
    let mut tools = ToolSet::new();
    tools.insert(lookup_tool("lookup")).unwrap();
    tools
        .insert(looping_spec("research", 2, true).as_tool())
        .unwrap();
    let ctx = Ctx::builder(model).tools(tools).build();
    let r = host_spec(&["research"]).run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].starts_with(&good_findings().to_string()),
        "{}",
        seen[0]
    );
    assert!(
        seen[0].contains("cut short by its turn limit") && seen[0].contains("more turns"),
        "{}",
        seen[0]
    );
}

#[tokio::test]
async fn a_budget_too_small_to_start_and_answer_is_refused_before_any_call_with_the_figure() {
    let calls = Arc::new(AtomicUsize::new(0));
    let sink = Arc::new(MemorySink::new());
    let model = never_stops(good_findings(), Duration::ZERO, calls.clone());
    let budget = Budget::new(Some(Decimal::new(1, 3)), None);
    let ctx = ctx_with(model, budget.clone(), sink.clone());
    let r = looping_spec("r", 5, true)
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::BudgetExhausted);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no call was made");
    assert!(r.refused_before_spend());
    let Some(Failure::NoRoomToAnswer { raise_to, .. }) = &r.error else {
        panic!("{:?}", r.error);
    };
    assert!(*raise_to > Decimal::new(1, 3), "{raise_to}");
    let text = r.error.as_ref().unwrap().to_string();
    assert!(
        text.contains(&format!("raise that limit to at least {raise_to} USD")),
        "{text}"
    );
    // The figure is enough: at that limit the run makes its call.
    let budget = Budget::new(Some(*raise_to), None);
    let ctx = ctx_with(
        never_stops(good_findings(), Duration::ZERO, calls.clone()),
        budget,
        sink,
    );
    let r = looping_spec("r", 5, true)
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    // One turn of work, then the answer it kept room for.
    assert_eq!((r.turns, r.cut_short), (2, Some(Limit::Budget)));

    // An eval of a spec whose own cap is that small says why, the figure included (a long
    // name makes the message long: its end is what matters).
    let name = "investigate_the_question_with_a_long_name";
    let capped = SubAgentSpec::dynamic(name, question_schema(), findings_schema())
        .description("Investigate a question and return findings.")
        .system("CHILD r")
        .tools(["lookup"])
        .max_turns(5)
        .max_tokens_per_turn(100)
        .max_cost_usd(Decimal::new(1, 3))
        .build()
        .expect("valid spec");
    let cases = subcontract::eval::parse_cases(
        "t.jsonl",
        r#"{"id": "q", "input": {"question": "what?"}, "expect": {}}"#,
    )
    .unwrap();
    let mut tools = ToolSet::new();
    tools.insert(lookup_tool("lookup")).unwrap();
    let report = subcontract::eval::run_eval(
        &[subcontract::eval::EvalSpec::new(capped)],
        &cases,
        &subcontract::eval::Judges::new(),
        Ctx::builder(never_stops(good_findings(), Duration::ZERO, calls))
            .tools(tools)
            .prices(priced()),
        &subcontract::eval::EvalOptions::new("scripted:test"),
        None,
    )
    .await;
    let failed = &report.cases[0].failed;
    assert!(
        failed[0].starts_with("outcome: expected completed, got budget_exhausted (")
            && failed[0].ends_with(&format!("raise that limit to at least {raise_to} USD)")),
        "{failed:?}"
    );
}

#[tokio::test]
async fn a_cut_short_answer_that_is_invalid_ends_invalid_output() {
    let calls = Arc::new(AtomicUsize::new(0));
    let sink = Arc::new(MemorySink::new());
    // Asked for its output, it submits one that breaks the contract, every time.
    let model = never_stops(json!({"findings": "none"}), Duration::ZERO, calls.clone());
    let limit = Decimal::new(12, 2);
    let budget = Budget::new(Some(limit), None);
    let ctx = ctx_with(model, budget.clone(), sink.clone());
    let r = looping_spec("r", 50, true)
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::InvalidOutput, "{:?}", r.error);
    assert!(r.output.is_none() && r.cut_short.is_none());
    assert!(budget.snapshot().spent_usd <= limit);
}

#[tokio::test]
async fn a_batch_line_and_an_eval_report_carry_cut_short() {
    let calls = Arc::new(AtomicUsize::new(0));
    let sink = Arc::new(MemorySink::new());
    let model = never_stops(good_findings(), Duration::ZERO, calls.clone());
    let ctx = ctx_with(model.clone(), Budget::unlimited(), sink);
    let spec = looping_spec("r", 2, true);
    let r = spec.run(&json!({"question": "what?"}), &ctx).await;
    let line = subcontract::batch::ResultLine::from_run("a".into(), r);
    let json: Value = serde_json::from_str(&line.to_json()).unwrap();
    assert_eq!(json["cut_short"], "turns", "{json}");
    assert_eq!(json["outcome"], "completed");

    let cases = subcontract::eval::parse_cases(
        "t.jsonl",
        r#"{"id": "q", "input": {"question": "what?"}, "expect": {"fields": {"/gaps": []}}}"#,
    )
    .unwrap();
    let mut tools = ToolSet::new();
    tools.insert(lookup_tool("lookup")).unwrap();
    let report = subcontract::eval::run_eval(
        &[subcontract::eval::EvalSpec::new(spec)],
        &cases,
        &subcontract::eval::Judges::new(),
        Ctx::builder(model).tools(tools),
        &subcontract::eval::EvalOptions::new("scripted:test"),
        None,
    )
    .await;
    assert_eq!(report.cases[0].cut_short, Some(Limit::Turns));
    assert!(report.cases[0].passed);
    assert_eq!(report.summary[0].1.cut_short, 1);
    assert_eq!(report.to_json()["summary"]["auto"]["cut_short"], 1);
    let table = report.to_table();
    assert!(
        table.contains("auto: 1 attempt(s) cut short by a limit (the answer may be incomplete), 1 of them passed"),
        "{table}"
    );
}

/// A host with a 2 s timeout starts a slow sub-agent (its own timeout 60 s) that never stops:
/// the sub-agent must answer before the host's own answer time, so it answers cut short by
/// time, and the host still answers, within its 2 s.
#[tokio::test(start_paused = true)]
async fn a_parents_time_bounds_its_children_so_the_parent_still_answers() {
    let model = Arc::new(ScriptedModel::from_fn("scripted:test", |req| {
        let host = req.system == "HOST";
        let step = match (host, asks_for_output(&req)) {
            (true, _) if req.messages.len() == 1 => {
                ScriptStep::tool_call("research", json!({"question": "what?"}))
            }
            (true, _) => ScriptStep::text("the host's answer"),
            (false, true) => ScriptStep::submit(good_findings()),
            (false, false) => {
                ScriptStep::tool_call("lookup", json!({"q": req.messages.len().to_string()}))
            }
        };
        step.delayed(Duration::from_millis(100))
    }));
    let child = research_builder("research", &["lookup"])
        .max_turns(1_000)
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let (ctx, sink) = host_ctx(model, child.as_tool());
    let host = host_builder("research", 2000)
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let r = host.run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert!(r.duration < Duration::from_secs(2), "{:?}", r.duration);
    let child = child_finished(&sink);
    assert_eq!((child.0, child.1), (Outcome::Completed, Some(Limit::Time)));
    assert!(child.2 > 2, "the child worked first: {child:?}");
}

/// A model behind a real local HTTP server speaking `/v1/chat/completions`: it calls
/// `read_file` on `notes0.txt`, `notes1.txt`, … (another file each time, so it never stalls)
/// until a request offers only the submission tool, then submits
/// `answer`. Each reply reports 400 prompt and 20 completion tokens. Returns the base URL;
/// the server thread ends with the test process.
fn reading_server(answer: Value) -> String {
    chat_server(move |n, req| {
        let tools = req["tools"].as_array().map_or(0, Vec::len);
        Some(if tools == 1 {
            (SUBMIT_TOOL.to_owned(), answer.clone())
        } else {
            let path = format!("notes{}.txt", n % 20);
            ("read_file".to_owned(), json!({ "path": path }))
        })
    })
}

/// From the command line: a model that never stops reading, under a spec's own cap, answers
/// cut short by its budget, and stderr says so after the run's line.
#[test]
fn the_command_line_says_a_run_was_cut_short_by_its_budget() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("workspace");
    for n in 0..20 {
        let note = format!("Note {n}: the cache is flushed every 30 seconds.\n");
        std::fs::write(ws.join(format!("notes{n}.txt")), note).expect("file");
    }
    std::fs::write(
        dir.path().join("prices.toml"),
        "[prices.\"openai:mock\"]\ninput_per_mtok = \"100\"\noutput_per_mtok = \"100\"\n",
    )
    .expect("prices");
    let spec = dir.path().join("reader.toml");
    std::fs::write(
        &spec,
        r#"name = "reader"
description = "Reads the notes."
system = "Read the notes, then submit what they say."
tools = ["read_file"]
[limits]
max_turns = 20
max_tokens_per_turn = 200
max_cost_usd = "0.6"
timeout_secs = 30
[input]
type = "object"
additionalProperties = false
[output]
type = "object"
required = ["fact"]
additionalProperties = false
properties.fact = { type = "string", maxLength = 100 }
"#,
    )
    .expect("spec");
    let url = reading_server(json!({"fact": "flushed every 30 seconds"}));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_subcontract"));
    cmd.arg("run")
        .arg(&spec)
        .args([
            "--input",
            "{}",
            "--model",
            "openai:mock",
            "--base-url",
            &url,
        ])
        .arg("--prices")
        .arg(dir.path().join("prices.toml"))
        .arg("--workspace")
        .arg(&ws)
        .env_remove("SUBCONTRACT_MODEL")
        .env("SUBCONTRACT_RETRIES", "0")
        .env("OPENAI_API_KEY", "test");
    // The spec's own timeout bounds the run.
    let out = cmd.output().expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).expect("the output on stdout"),
        json!({"fact": "flushed every 30 seconds"})
    );
    let lines: Vec<&str> = stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("root.reader-1: completed after "))
        .unwrap_or_else(|| panic!("the run's line: {stderr}"));
    // It worked before it answered: more than one turn.
    assert!(!lines[at].contains("after 1 turn(s)"), "{stderr}");
    assert_eq!(
        lines.get(at + 1).copied(),
        Some("completed, cut short by its budget: the answer may be incomplete"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[root.reader-1] completed, cut short by its budget"),
        "{stderr}"
    );
}

/// An answer that failed its checks, whose repair the run's time runs out during (a model
/// much slower the second time than the first, so the reserve's estimate let the call
/// start): the run ends `invalid_output` on those violations, not `timeout` as if it had no
/// answer at all. With the reserve off it ends `timeout`, as before.
#[tokio::test(start_paused = true)]
async fn time_running_out_during_a_repair_ends_invalid_output() {
    for reserve in [true, false] {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let model = Arc::new(ScriptedModel::from_fn("scripted:test", move |_| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            // Breaks the contract at once, then takes longer than the run has to repair it.
            let delay = if n == 0 { 10 } else { 60_000 };
            ScriptStep::submit(json!({"findings": "none"})).delayed(Duration::from_millis(delay))
        }));
        let sink = Arc::new(MemorySink::new());
        let ctx = ctx_with(model, Budget::unlimited(), sink);
        let spec = research_builder("r", &["lookup"])
            .max_turns(5)
            .timeout(Duration::from_secs(5))
            .answer_reserve(reserve)
            .build()
            .expect("valid spec");
        let r = spec.run(&json!({"question": "what?"}), &ctx).await;
        assert_eq!(calls.load(Ordering::SeqCst), 2, "the repair was asked for");
        if reserve {
            assert_eq!(r.outcome, Outcome::InvalidOutput, "{:?}", r.error);
            assert!(
                matches!(&r.error, Some(Failure::InvalidOutput(v)) if !v.is_empty()),
                "{:?}",
                r.error
            );
        } else {
            assert_eq!(r.outcome, Outcome::Timeout, "{:?}", r.error);
        }
        assert!(r.output.is_none());
    }
}

/// A last turn that repairs an answer the model had already given is not a cut: the run had
/// finished its work, so it completes without `cut_short`. One whose last turn came while it
/// was still calling tools is cut short by its turn limit (above).
#[tokio::test]
async fn a_repair_on_the_last_turn_is_not_a_cut() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let model = Arc::new(ScriptedModel::from_fn("scripted:test", move |_| {
        // An answer that breaks the contract at once, then the repair.
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            ScriptStep::submit(json!({"findings": "none"}))
        } else {
            ScriptStep::submit(good_findings())
        }
    }));
    let ctx = ctx_with(model, Budget::unlimited(), Arc::new(MemorySink::new()));
    let r = looping_spec("r", 2, true)
        .run(&json!({"question": "what?"}), &ctx)
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!((r.turns, r.cut_short), (2, None));
}

/// A tool of the host's own that runs a sub-agent in a context from [`Ctx::child`].
struct NestedTool(SubAgentSpec<Value, Value>);

#[async_trait::async_trait]
impl subcontract::Tool for NestedTool {
    fn name(&self) -> &str {
        "nested"
    }
    fn description(&self) -> &str {
        "Researches a question with a sub-agent."
    }
    fn input_schema(&self) -> Arc<Value> {
        Arc::new(json!({"type": "object"}))
    }
    async fn call(&self, _args: Value, ctx: &Ctx) -> subcontract::ToolOutput {
        let child = ctx.child(&self.0).expect("a child context");
        let r = self.0.run(&json!({"question": "what?"}), &child).await;
        subcontract::ToolOutput::text(format!("{:?} {:?}", r.outcome, r.cut_short))
    }
}

/// A sub-agent that a tool of the host's own starts in a context from `Ctx::child` (not a
/// spec's `as_tool`) is bound by the host's time as well: it answers, cut short by time,
/// before the host must, and the host still answers.
#[tokio::test(start_paused = true)]
async fn a_child_started_by_a_tool_of_its_own_ends_by_the_hosts_answer_time() {
    let model = Arc::new(ScriptedModel::from_fn("scripted:test", move |req| {
        let host = req.system.starts_with("HOST");
        let step = match (host, asks_for_output(&req)) {
            (true, _) if req.messages.len() == 1 => ScriptStep::tool_call("nested", json!({})),
            (true, true) => ScriptStep::submit(json!("the host's answer")),
            (true, false) => ScriptStep::text("the host's answer"),
            (false, true) => ScriptStep::submit(good_findings()),
            (false, false) => {
                ScriptStep::tool_call("lookup", json!({"q": format!("q{}", req.messages.len())}))
            }
        };
        step.delayed(Duration::from_millis(if host { 100 } else { 1_000 }))
    }));
    // Its own timeout is far away: only the host's time can end it.
    let child = research_builder("research", &["lookup"])
        .max_turns(1000)
        .timeout(Duration::from_secs(10_000))
        .build()
        .unwrap();
    let (ctx, sink) = host_ctx(model, Arc::new(NestedTool(child)));
    let host = host_builder("nested", 200)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let r = host.run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let child = child_finished(&sink);
    assert_eq!((child.0, child.1), (Outcome::Completed, Some(Limit::Time)));
}

/// A tool of the run's own that takes longer than the run has left: with the reserve on it is
/// stopped when only the answer's time is left, and the run answers, cut short by its time;
/// with the reserve off the run times out without an answer, as before.
#[tokio::test(start_paused = true)]
async fn a_slow_tool_is_stopped_so_that_the_run_still_answers() {
    for reserve in [true, false] {
        let model = Arc::new(ScriptedModel::from_fn("scripted:test", move |req| {
            let step = if asks_for_output(&req) {
                ScriptStep::submit(good_findings())
            } else {
                ScriptStep::tool_call("slow", json!({}))
            };
            step.delayed(Duration::from_millis(200))
        }));
        let slow = subcontract::FnTool::new(
            "slow",
            "Takes its time.",
            json!({"type": "object"}),
            |_| async {
                tokio::time::sleep(Duration::from_secs(3_600)).await;
                subcontract::ToolOutput::text("done")
            },
        );
        let mut tools = ToolSet::new();
        tools.insert(slow).unwrap();
        let ctx = Ctx::builder(model).tools(tools).build();
        let spec = research_builder("r", &["slow"])
            .max_turns(5)
            .timeout(Duration::from_secs(20))
            .answer_reserve(reserve)
            .build()
            .unwrap();
        let r = spec.run(&json!({"question": "what?"}), &ctx).await;
        if reserve {
            assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
            assert_eq!(r.cut_short, Some(Limit::Time));
            assert_eq!(r.output, Some(good_findings()));
        } else {
            assert_eq!(r.outcome, Outcome::Timeout, "{:?}", r.error);
        }
    }
}

/// A model-call limit is a budget too: a run that never stops calling tools under
/// `max_model_calls` answers, cut short by its budget, on its last allowed call.
#[tokio::test]
async fn a_model_call_limit_keeps_a_call_for_the_answer() {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = never_stops(good_findings(), Duration::ZERO, calls.clone());
    let ctx = ctx_with(model, Budget::unlimited(), Arc::new(MemorySink::new()));
    let spec = research_builder("r", &["lookup"])
        .max_turns(50)
        .max_model_calls(3)
        .build()
        .unwrap();
    // As a sub-agent: forked with the spec's own limits.
    let r = spec.run_child(&json!({"question": "what?"}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(r.output, Some(good_findings()));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(r.cut_short, Some(Limit::Budget));
}

/// A model-call limit of one, for a spec with tools: no call is made, and the refusal names
/// the limit to raise and the figure.
#[tokio::test]
async fn a_call_limit_too_small_to_work_and_answer_is_refused_with_the_figure() {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = never_stops(good_findings(), Duration::ZERO, calls.clone());
    let ctx = ctx_with(model, Budget::unlimited(), Arc::new(MemorySink::new()));
    let spec = research_builder("r", &["lookup"])
        .max_model_calls(1)
        .build()
        .unwrap();
    let r = spec.run_child(&json!({"question": "what?"}), &ctx).await;
    assert_eq!(r.outcome, Outcome::BudgetExhausted);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no call was made");
    let said = r
        .error
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        said.ends_with(
            "not enough to start and still answer; raise that limit to at least 2 calls"
        ),
        "{said}"
    );
    assert!(r.refused_before_spend());
}
