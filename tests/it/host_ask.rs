//! A Rust host's first hour: asking the host's own model (text or typed) with its specs as
//! tools, unique ids and totals for runs started from one root context, a turn count that
//! counts answers, and library errors that name no command-line flag.

use std::sync::Arc;

use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use validator::Validate;

use subcontract::events::tree::build_tree;
use subcontract::host::{AskError, Host, DEFAULT_HOST_SYSTEM};
use subcontract::model::{ModelError, Price, PriceTable, ScriptStep, ScriptedModel};
use subcontract::{EventKind, MemorySink, Outcome, SUBMIT_TOOL};

use crate::common::*;

/// A host whose model, by system prompt: the host delegates to `research` on its first turn
/// and answers in text on the next; the sub-agent submits its findings.
fn delegating_host() -> subcontract::CtxBuilder {
    let m = model(|system, turn, req| {
        if system.starts_with("CHILD") {
            return ScriptStep::submit(good_findings());
        }
        if turn == 1 {
            let names: Vec<&str> = req.tools.iter().map(|t| &*t.name).collect();
            assert_eq!(
                names,
                ["research"],
                "the host offers its spec, no submission"
            );
            ScriptStep::tool_call("research", json!({"question": "Which runtime?"}))
        } else {
            ScriptStep::text("It uses tokio (Cargo.toml).")
        }
    });
    Host::builder()
        .model(m)
        .spec(research_spec("research", &[]).erase())
        .build()
        .expect("a host")
}

#[tokio::test]
async fn a_host_asks_its_model_which_delegates_to_a_spec_and_answers_in_text() {
    let sink = Arc::new(MemorySink::new());
    let host = delegating_host().events(sink.clone()).build();
    let answer = host.ask("Which async runtime does it use?").await;
    assert_eq!(answer.expect("an answer"), "It uses tokio (Cargo.toml).");
    let events = sink.events();
    let finished: Vec<(&str, Option<&str>)> = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Finished { .. }))
        .map(|e| (&*e.run_id, e.parent_run_id.as_deref()))
        .collect();
    assert_eq!(
        finished,
        [("root.research-1", Some("root")), ("root", None)],
        "the sub-agent ran as a child of the host's run"
    );
    // The whole record: two host turns, the default system prompt.
    let r = host.ask("Again?").run().await.expect("a contract");
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(r.turns, 2);
    assert_eq!(r.run_id, "root-2");
    let started = events
        .iter()
        .find(|e| e.run_id.as_ref() == "root")
        .expect("the host's run");
    assert_eq!(&*started.spec, "host");
    assert!(DEFAULT_HOST_SYSTEM.contains("final answer"));
}

#[derive(Debug, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Verdict {
    #[validate(length(max = 20))]
    verdict: String,
    #[validate(range(max = 10))]
    confidence: u8,
}

#[tokio::test]
async fn a_typed_ask_is_checked_and_repaired_against_its_type() {
    let m = model(|_, turn, req| {
        // A typed answer travels as a submission, the only tool of a host without tools.
        assert!(req.tools.iter().any(|t| &*t.name == SUBMIT_TOOL));
        if turn == 1 {
            ScriptStep::submit(json!({"verdict": "supported", "confidence": 11}))
        } else {
            ScriptStep::submit(json!({"verdict": "supported", "confidence": 9}))
        }
    });
    let host = Host::builder().model(m).build().expect("a host").build();
    let r = host
        .ask("Is the claim supported?")
        .output::<Verdict>()
        .run()
        .await
        .expect("the contract fits");
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(r.turns, 2, "one repair");
    let v = r.output.expect("a verdict");
    assert_eq!((v.verdict.as_str(), v.confidence), ("supported", 9));
}

#[tokio::test]
async fn an_answer_over_the_limit_is_sent_back_and_a_type_too_large_is_refused() {
    let m = Arc::new(ScriptedModel::queue(
        "scripted:test",
        vec![
            ScriptStep::text("far more than twenty characters"),
            ScriptStep::text("short enough"),
        ],
    ));
    let host = Host::builder().model(m).build().expect("a host").build();
    let r = host
        .ask("Say it briefly.")
        .max_answer_chars(20)
        .run()
        .await
        .expect("a contract");
    assert_eq!(r.output.as_deref(), Some("short enough"));
    assert_eq!(r.turns, 2);

    // `Verdict`'s largest value does not fit in 10 characters: refused before any call.
    let never = Arc::new(ScriptedModel::queue("scripted:test", vec![]));
    let host = Host::builder()
        .model(never)
        .build()
        .expect("a host")
        .build();
    let e = host
        .ask("?")
        .max_answer_chars(10)
        .output::<Verdict>()
        .await
        .expect_err("too large");
    match &e {
        AskError::Contract(spec) => assert!(spec.has("output-too-large"), "{spec}"),
        other => panic!("expected a contract error, got {other}"),
    }
    assert!(e.failure().is_none());
}

#[tokio::test]
async fn an_ask_that_ends_without_an_answer_says_how() {
    let m = Arc::new(ScriptedModel::queue(
        "scripted:test",
        vec![ScriptStep::error(ModelError::Connection {
            provider: "openai".into(),
            message: "connection refused (http://127.0.0.1:9/v1)".into(),
        })],
    ));
    let host = Host::builder().model(m).build().expect("a host").build();
    let e = host.ask("Hello?").await.expect_err("no answer");
    let failure = e.failure().expect("the run's failure");
    assert_eq!(failure.outcome(), Outcome::ModelError);
    assert!(e.to_string().contains("connection refused"), "{e}");
}

/// A spec run twice from one root context, one after the other and then at once: each run
/// has an id of its own, its sub-agents' ids under it, and a total of its own; the trace's
/// tree shows each run on its own line with the same total as its result.
#[tokio::test]
async fn runs_from_one_root_context_have_their_own_ids_and_totals() {
    let mut prices = PriceTable::new();
    prices.insert(
        "scripted:test",
        Price::per_mtok(Decimal::ONE, Decimal::from(10)),
    );
    let m = model(|system, turn, _| {
        let step = if system == "HOST" && turn == 1 {
            ScriptStep::tool_call("research", json!({"question": "Which runtime?"}))
        } else if system == "HOST" {
            ScriptStep::text("done")
        } else {
            ScriptStep::submit(good_findings())
        };
        step.with_usage(1000, 100)
    });
    let sink = Arc::new(MemorySink::new());
    let root = Host::builder()
        .model(m)
        .prices(prices)
        .spec(research_spec("research", &[]).erase())
        .build()
        .expect("a host")
        .events(sink.clone())
        .build();
    let host = host_spec(&["research"]);
    let input = json!({});
    let first = host.run(&input, &root).await;
    let second = host.run(&input, &root).await;
    let (third, fourth) = tokio::join!(host.run(&input, &root), host.run(&input, &root));
    let runs = [&first, &second, &third, &fourth];
    let ids: Vec<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(&ids[..2], ["root", "root-2"]);
    let mut concurrent = ids[2..].to_vec();
    concurrent.sort_unstable();
    assert_eq!(concurrent, ["root-3", "root-4"]);
    // Three calls per run (host, sub-agent, host), each 0.002 USD: 0.006 USD a run, whatever
    // ran beside it.
    for r in runs {
        assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
        assert_eq!(r.total_cost_usd, Decimal::new(6, 3), "{}", r.run_id);
    }
    assert_eq!(root.budget().snapshot().spent_usd, Decimal::new(24, 3));
    let tree = build_tree(&sink.events());
    assert_eq!(tree.len(), 4, "one tree per run");
    for r in runs {
        let node = tree
            .iter()
            .find(|n| n.run_id == r.run_id)
            .expect("the run's tree");
        assert_eq!(node.total_cost_usd, r.total_cost_usd);
        assert_eq!(node.children.len(), 1);
        assert_eq!(node.children[0].run_id, format!("{}.research-1", r.run_id));
    }
}

/// A run whose first model call fails before any answer took 0 turns: in its result, its
/// event, its tree and the error a parent model reads; a call answered with a usage that
/// cannot be read still counts.
#[tokio::test]
async fn a_run_whose_model_never_answered_took_zero_turns() {
    let refused = || {
        ScriptStep::error(ModelError::Connection {
            provider: "openai".into(),
            message: "connection refused".into(),
        })
    };
    let sink = Arc::new(MemorySink::new());
    let told = Arc::new(std::sync::Mutex::new(String::new()));
    let heard = told.clone();
    let m = model(move |system, turn, req| {
        if system == "HOST" && turn == 1 {
            ScriptStep::tool_call("research", json!({"question": "Which runtime?"}))
        } else if system == "HOST" {
            if let Some(subcontract::model::Message::ToolResults { results, .. }) =
                req.messages.last()
            {
                *heard.lock().unwrap() = results[0].content.clone();
            }
            ScriptStep::text("gave up")
        } else {
            refused()
        }
    });
    let root = Host::builder()
        .model(m)
        .spec(research_spec("research", &[]).erase())
        .build()
        .expect("a host")
        .events(sink.clone())
        .build();
    let r = host_spec(&["research"]).run(&json!({}), &root).await;
    assert_eq!(r.outcome, Outcome::Completed);
    let events = sink.events();
    let child = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Finished { outcome, turns, .. } if &*e.run_id == "root.research-1" => {
                Some((*outcome, *turns))
            }
            _ => None,
        })
        .expect("the sub-agent finished");
    assert_eq!(child, (Outcome::ModelError, 0));
    // What the host's model was told of it.
    let told = told.lock().unwrap().clone();
    assert!(
        told.contains("ended without a result: model_error after 0 turn(s)"),
        "{told}"
    );
    let tree = build_tree(&events);
    assert_eq!(tree[0].children[0].turns, 0);

    // The same run on its own: 0 turns in its result.
    let alone = Host::builder()
        .model(model(move |_, _, _| refused()))
        .build()
        .expect("a host")
        .build();
    let r = research_spec("research", &[])
        .run(&json!({"question": "Which runtime?"}), &alone)
        .await;
    assert_eq!((r.outcome, r.turns), (Outcome::ModelError, 0));

    // An answer whose usage cannot be read happened: it counts.
    let unreadable = Host::builder()
        .model(model(|_, _, _| {
            ScriptStep::error(ModelError::UnreadableUsage {
                provider: "openai".into(),
                message: "usage is not a number".into(),
            })
        }))
        .build()
        .expect("a host")
        .build();
    let r = research_spec("research", &[])
        .run(&json!({"question": "Which runtime?"}), &unreadable)
        .await;
    assert_eq!((r.outcome, r.turns), (Outcome::ModelError, 1));
}

#[test]
fn library_model_errors_name_no_command_line_flag() {
    let error = |b: subcontract::host::HostBuilder| match b.build() {
        Ok(_) => panic!("built"),
        Err(e) => e.to_string(),
    };
    let no_model = error(Host::builder());
    for name in [
        "ollama:llama3.1",
        "lmstudio:qwen",
        "openrouter:x/y",
        "mystery:m",
    ] {
        let e = error(Host::builder().model_name(name));
        assert!(e.contains("base URL"), "{name}: {e}");
        for said in [&e, &no_model] {
            assert!(
                !said.contains("--") && !said.contains("SUBCONTRACT_MODEL"),
                "{name}: {said}"
            );
        }
    }
    let e = error(Host::builder().model_name("ollama:llama3.1"));
    assert!(
        e.contains("`openai:llama3.1` with the base URL http://localhost:11434/v1"),
        "{e}"
    );
}

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const INPUT: &str = r#"{"question": "Which library hashes passwords?"}"#;

fn cli_run(model: &str, base_url: Option<&str>) -> (Option<i32>, String) {
    let mut c = std::process::Command::new(BIN);
    c.args([
        "run",
        "specs/research_topic.toml",
        "--model",
        model,
        "--input",
        INPUT,
    ])
    .current_dir(ROOT)
    .env_remove("SUBCONTRACT_MODEL")
    .env_remove("OPENAI_BASE_URL")
    .env("SUBCONTRACT_RETRIES", "0");
    if let Some(url) = base_url {
        c.args(["--base-url", url]);
    }
    let o = c.output().expect("the binary runs");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The command line says the flag the library's message leaves out.
#[test]
fn the_command_line_names_its_flag_after_a_library_error() {
    let (code, err) = cli_run("ollama:llama3.1", None);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("`openai:llama3.1` with the base URL http://localhost:11434/v1"),
        "{err}"
    );
    assert!(err.contains("--base-url URL"), "{err}");
}

/// A server that refuses the connection: the run line says 0 turns, and the error names the
/// URL it tried.
#[test]
fn a_refused_connection_is_reported_after_zero_turns() {
    // A port that was free a moment ago: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let (code, err) = cli_run("openai:test", Some(&url));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("model_error after 0 turn(s)"), "{err}");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
}

#[derive(Serialize, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
struct Task {
    #[validate(length(max = 200))]
    task: String,
}

/// `SubAgentSpec<Task, String>`: a typed input, the final text as the output, bounded by the
/// length given when it was built; a longer text is sent back.
#[tokio::test]
async fn a_typed_spec_answers_in_bounded_text() {
    let spec = subcontract::SubAgentSpec::<Task, String>::text("summarise", 12)
        .description("Summarises.")
        .system("Summarise.")
        .build()
        .expect("a valid spec");
    let m = Arc::new(ScriptedModel::queue(
        "scripted:test",
        vec![
            ScriptStep::text("line one\nline two\nline three"),
            ScriptStep::text("one\ttwo\n\"3\""),
        ],
    ));
    let root = Host::builder().model(m).build().expect("a host").build();
    let r = spec
        .run(
            &Task {
                task: "Summarise the notes.".into(),
            },
            &root,
        )
        .await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    // 12 characters, escapes and all: the length decides, not the JSON's size.
    assert_eq!(r.output.as_deref(), Some("one\ttwo\n\"3\""));
    assert_eq!(r.turns, 2);
}

/// Money has one default: a context built with `Ctx::builder`, like a `Host`, prices its calls
/// with the built-in table, so a spec's `max_cost_usd` binds without a price table of one's own.
#[tokio::test]
async fn a_bare_context_prices_calls_with_the_built_in_table() {
    let m = Arc::new(ScriptedModel::queue(
        "openai:gpt-4.1-mini",
        vec![ScriptStep::submit(good_findings()).with_usage(1_000, 200)],
    ));
    let spec = research_spec("research", &[]);
    let ctx = subcontract::Ctx::builder(m).build();
    let r = spec.run(&json!({"question": "Which runtime?"}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let price = PriceTable::builtin()
        .get("openai:gpt-4.1-mini")
        .expect("a built-in price");
    assert_eq!(r.total_cost_usd, price.cost(r.usage));
    assert!(r.total_cost_usd > Decimal::ZERO, "{}", r.total_cost_usd);
}

/// A tool that asks its own run's model again, which calls the tool again, and so on.
struct AskAgain {
    ids: Arc<std::sync::Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl subcontract::Tool for AskAgain {
    fn name(&self) -> &str {
        "ask_again"
    }
    fn description(&self) -> &str {
        "Asks again."
    }
    fn input_schema(&self) -> Arc<serde_json::Value> {
        Arc::new(json!({"type": "object", "additionalProperties": false}))
    }
    async fn call(
        &self,
        _args: serde_json::Value,
        ctx: &subcontract::Ctx,
    ) -> subcontract::ToolOutput {
        match ctx.ask("again").run().await {
            Ok(r) => {
                self.ids.lock().unwrap().push(r.run_id.clone());
                subcontract::ToolOutput::text(format!("{} {}", r.run_id, r.outcome))
            }
            Err(e) => subcontract::ToolOutput::error(e.to_string()),
        }
    }
}

/// An ask from inside a run is a child of that run: a tool that asks again and again is
/// stopped by the depth limit (never a stack overflow), and every run has an id of its own.
#[tokio::test]
async fn asks_from_inside_a_run_are_children_bounded_by_depth() {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let m = Arc::new(ScriptedModel::from_fn("scripted:deep", move |req| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // Call the tool on the first turn (while it is offered), then answer.
        if req.messages.len() == 1 && req.tools.iter().any(|t| &*t.name == "ask_again") {
            ScriptStep::tool_call("ask_again", json!({}))
        } else {
            ScriptStep::text("done")
        }
    }));
    let ids = Arc::new(std::sync::Mutex::new(Vec::new()));
    let root = subcontract::Ctx::builder(m)
        .max_depth(3)
        .tools(
            subcontract::ToolSet::new()
                .with(Arc::new(AskAgain { ids: ids.clone() }))
                .unwrap(),
        )
        .build();
    let r = root.ask("start").run().await.expect("a bounded answer");
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let ids = ids.lock().unwrap().clone();
    // Three levels of children under the root run, then the depth limit refuses the fourth.
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert!(ids.iter().any(|i| i.ends_with("-denied")), "{ids:?}");
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    assert!(calls.load(std::sync::atomic::Ordering::SeqCst) < 20);
}

/// A text answer of 0 characters (or past the largest) is refused before anything runs.
#[tokio::test]
async fn an_answer_limit_of_zero_is_refused_before_any_call() {
    let m = Arc::new(ScriptedModel::queue("scripted:zero", vec![]));
    let root = subcontract::Ctx::builder(m).build();
    for n in [0, subcontract::spec::MAX_TEXT_CHARS + 1] {
        match root.ask("hi").max_answer_chars(n).await {
            Err(AskError::Contract(e)) => {
                assert!(e.to_string().contains("a text output holds 1 to"), "{e}")
            }
            other => panic!("{n}: {other:?}"),
        }
    }
}

/// A source whose tools change every time anyone looks: each version lists one tool, named
/// for that version (`t1`, `t2`, …).
struct Churning(std::sync::atomic::AtomicU64);

#[subcontract::async_trait::async_trait]
impl subcontract::tool::ToolSource for Churning {
    fn version(&self) -> u64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
    }
    fn listed(&self) -> subcontract::tool::Listing {
        let v = self.0.load(std::sync::atomic::Ordering::SeqCst);
        let t: Arc<dyn subcontract::Tool> = subcontract::FnTool::new(
            format!("t{v}"),
            "Changes.",
            json!({"type": "object"}),
            |_| async { subcontract::ToolOutput::text("x") },
        );
        subcontract::tool::Listing {
            version: v,
            tools: Arc::new([t]),
        }
    }
    async fn refresh(&self) -> Result<subcontract::tool::Listing, subcontract::tool::BoxError> {
        Ok(self.listed())
    }
}

#[tokio::test]
async fn an_ask_runs_with_the_tools_it_listed_though_its_sources_change_meanwhile() {
    let offered: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let seen = offered.clone();
    let m = model(move |_, _, req| {
        *seen.lock().unwrap() = req.tools.iter().map(|t| t.name.to_string()).collect();
        ScriptStep::text("done")
    });
    let live = subcontract::tool::LiveTools::new(
        subcontract::ToolSet::new(),
        vec![Arc::new(Churning(Default::default()))],
    )
    .expect("a live set");
    let host = subcontract::Ctx::builder(m)
        .live_tools(Arc::new(live))
        .build();
    // The ask lists the host's tools once and runs with that set: had the run looked again,
    // it would hold a set without the tool the ask's spec names, and end `tools not held`.
    let r = host.ask("hi").run().await.expect("an ask");
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let offered = offered.lock().unwrap();
    assert_eq!(offered.len(), 1, "{offered:?}");
    assert!(offered[0].starts_with('t'), "{offered:?}");
}
