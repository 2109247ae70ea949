//! The contract on a real model: Qwen2.5-Coder-Instruct (Q4_K_M) behind llama.cpp's own HTTP
//! server, installed into the target's temporary directory on first use (the test fails with
//! the command when it cannot; it never skips). Eight graded tasks (`bench/real/tasks.json`,
//! which the peer benchmark reads too) run through each setup (endpoint × chat template ×
//! output mode), and a table of what happened is printed and written to
//! `target/tmp/real-model/table.md`.
//!
//! Claimed, and asserted: no run ever returns an output that breaks its contract, and `auto`
//! passes at least the floor measured for it; a task that passed in no mode is printed. The
//! default run, part of `cargo test --all-features`, is the one setup that fits the CI budget:
//! `auto` over `/v1/chat/completions` with the tool-call template. `SUBCONTRACT_REAL_MATRIX=full`
//! runs every setup (both endpoints, both templates, every mode), and `SUBCONTRACT_REAL_MODEL`
//! picks the model size (`1.5b`, the default, or `0.5b`). `SUBCONTRACT_REAL_LEVERS` changes the
//! small-model aids from their defaults, to measure one at a time: a comma-separated list of
//! `NAME=on|off` for the run loop's `forced_output`, `text_calls` and `native_final`
//! ([`Levers`]) and the suite's own `require_tool_first` (on).
//! `SUBCONTRACT_REAL_MODES` (`auto,tool,native,prompted`, any of them) runs other output modes,
//! and `SUBCONTRACT_REAL_SETUP` (`own`, `messages`, or both, comma-separated) another template or
//! endpoint, in place of the default setup.
//!
//! Each task runs in two variants: `plain`, its contract as written, and `grounded`, the same
//! contract with the properties whose answer is in a file marked `x-grounded` (the task's
//! `ground`), so an answer the model did not read is sent back for repair.
//! `SUBCONTRACT_REAL_VARIANTS` (`plain`, `grounded`, or both, comma-separated) picks them.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use subcontract::model::Recorder;
use subcontract::provider::{AnthropicModel, ApiKey, OpenAiModel, ProviderConfig};
use subcontract::spec::{Levers, OutputMode};
use subcontract::tool::workspace::Workspace;
use subcontract::{Ctx, Model, Outcome, SubAgentSpec};

use crate::llama_server::{install, LlamaServer, Template};

/// The endpoint a run talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Chat,
    Messages,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Messages => "/v1/messages",
        }
    }

    fn model(self, server: &LlamaServer) -> Arc<dyn Model> {
        // A first prompt takes up to ~40 s cold on two busy cores; a timeout is a finding, not
        // something to retry against a loopback server.
        let config = |base: String| {
            ProviderConfig::new(base)
                .api_key(ApiKey::new("local"))
                .timeout(Duration::from_secs(180))
                .max_retries(0)
        };
        match self {
            Api::Chat => Arc::new(
                OpenAiModel::new("local", config(format!("{}/v1", server.base))).expect("client"),
            ),
            Api::Messages => {
                Arc::new(AnthropicModel::new("local", config(server.base.clone())).expect("client"))
            }
        }
    }
}

/// A task's contract as written, or with its answers grounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Plain,
    Grounded,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::Grounded => "grounded",
        }
    }
}

/// The variants to run: both unless `SUBCONTRACT_REAL_VARIANTS` names fewer.
fn variants() -> Vec<Variant> {
    let Ok(v) = std::env::var("SUBCONTRACT_REAL_VARIANTS") else {
        return vec![Variant::Plain, Variant::Grounded];
    };
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s {
            "plain" => Variant::Plain,
            "grounded" => Variant::Grounded,
            other => panic!("SUBCONTRACT_REAL_VARIANTS: `{other}`: plain or grounded"),
        })
        .collect()
}

/// One line of the table.
struct Row {
    task: String,
    variant: Variant,
    template: Template,
    api: Api,
    mode: OutputMode,
    verdict: String,
    passed: bool,
    requests: u32,
    tokens: (u64, u64),
    wall: Duration,
}

fn tasks() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/real/tasks.json");
    let text = std::fs::read_to_string(&path).expect("bench/real/tasks.json");
    let v: Value = serde_json::from_str(&text).expect("tasks.json is JSON");
    v["tasks"].as_array().expect("a tasks array").clone()
}

/// Whether `output` is what the task expects; the first failed check when not.
fn grade(task: &Value, output: &Value) -> Result<(), String> {
    for check in task["expect"].as_array().expect("expect") {
        let pointer = check["pointer"].as_str().expect("pointer");
        let got = output.pointer(pointer).cloned().unwrap_or(Value::Null);
        if let Some(want) = check.get("equals") {
            if &got != want {
                return Err(format!("{pointer} is {got}, expected {want}"));
            }
        }
        if let Some(want) = check.get("contains").and_then(Value::as_str) {
            let ok = got
                .as_str()
                .is_some_and(|s| s.to_lowercase().contains(&want.to_lowercase()));
            if !ok {
                return Err(format!(
                    "{pointer} is {got}, expected it to contain {want:?}"
                ));
            }
        }
        if let Some(allowed) = check.get("one_of_each").and_then(Value::as_array) {
            let items = got.as_array().cloned().unwrap_or_default();
            let ok = !items.is_empty()
                && items.iter().all(|i| {
                    i.as_str().is_some_and(|s| {
                        allowed
                            .iter()
                            .any(|a| a.as_str().is_some_and(|a| s.trim().starts_with(a)))
                    })
                });
            if !ok {
                return Err(format!(
                    "{pointer} is {got}, expected items from {allowed:?}"
                ));
            }
        }
    }
    Ok(())
}

/// The task's workspace, written fresh under the target's temporary directory.
fn workspace(task: &Value) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("real-model/workspaces")
        .join(task["name"].as_str().expect("name"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("workspace dir");
    for (rel, body) in task["files"].as_object().expect("files") {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("dirs");
        std::fs::write(&p, body.as_str().expect("file text")).expect("write");
    }
    dir
}

/// The aids in use: the run loop's defaults and the suite's `require_tool_first` (on), changed
/// by `SUBCONTRACT_REAL_LEVERS` (`NAME=on|off,…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Aids {
    levers: Levers,
    require_tool_first: bool,
}

impl Default for Aids {
    fn default() -> Self {
        Aids {
            levers: Levers::default(),
            // Measured: 4 of 8 without it, 8 of 8 with it (2026-12-03; BENCHMARKS.md, "The
            // levers, measured").
            require_tool_first: true,
        }
    }
}

fn aids() -> Aids {
    let mut a = Aids::default();
    let Ok(spec) = std::env::var("SUBCONTRACT_REAL_LEVERS") else {
        return a;
    };
    for item in spec.split(',').filter(|s| !s.trim().is_empty()) {
        let (name, value) = item
            .trim()
            .split_once('=')
            .unwrap_or_else(|| panic!("SUBCONTRACT_REAL_LEVERS: `{item}` is not NAME=on|off"));
        let on = match value {
            "on" => true,
            "off" => false,
            _ => panic!("SUBCONTRACT_REAL_LEVERS: `{item}`: on or off"),
        };
        match name {
            "forced_output" => a.levers.forced_output = on,
            "text_calls" => a.levers.text_calls = on,
            "native_final" => a.levers.native_final = on,
            "require_tool_first" => a.require_tool_first = on,
            _ => panic!("SUBCONTRACT_REAL_LEVERS: no lever `{name}`"),
        }
    }
    a
}

/// The task's output contract in `variant`: for `grounded`, `x-grounded` added at each of
/// the task's `ground` pointers.
fn output_schema(task: &Value, variant: Variant) -> Value {
    let mut schema = task["output"].clone();
    if variant == Variant::Grounded {
        for (pointer, kind) in task["ground"].as_object().into_iter().flatten() {
            let at = schema
                .pointer_mut(pointer)
                .and_then(Value::as_object_mut)
                .unwrap_or_else(|| panic!("{}: no schema at {pointer}", task["name"]));
            at.insert("x-grounded".into(), kind.clone());
        }
    }
    schema
}

fn spec(task: &Value, mode: OutputMode, variant: Variant) -> SubAgentSpec<Value, Value> {
    let tools: Vec<String> = task["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t.as_str().expect("tool name").to_owned())
        .collect();
    let aids = aids();
    SubAgentSpec::dynamic(
        task["name"].as_str().expect("name"),
        serde_json::json!({"type": "object"}),
        output_schema(task, variant),
    )
    .description(task["what"].as_str().expect("what"))
    .system(task["system"].as_str().expect("system"))
    .tools(tools)
    .max_turns(5)
    .max_tokens_per_turn(512)
    .temperature(0.0)
    .timeout(Duration::from_secs(600))
    .output_mode(mode)
    .require_tool_first(aids.require_tool_first)
    .levers(aids.levers)
    .build()
    .expect("the task's spec is valid")
}

/// Runs every task in one setup; a completed output is checked against its contract here,
/// independently of the run loop, and a broken one fails the test.
async fn run_setup(
    model: &Arc<dyn Model>,
    template: Template,
    api: Api,
    mode: OutputMode,
    variant: Variant,
    rows: &mut Vec<Row>,
) {
    for task in tasks() {
        let spec = spec(&task, mode, variant);
        let ws = Workspace::new(workspace(&task)).expect("workspace");
        // Every exchange, to read what the model was sent and said (and to replay it).
        let records = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "real-model/records/{}-{}-{}-{}",
            template.name(),
            api.name().trim_start_matches("/v1/").replace('/', "-"),
            mode.as_str(),
            variant.name()
        ));
        std::fs::create_dir_all(&records).expect("records dir");
        let recorder = Recorder::to_file(
            model.clone(),
            records.join(format!("{}.jsonl", task["name"].as_str().expect("name"))),
        )
        .expect("a record file");
        let ctx = Ctx::builder(Arc::new(recorder))
            .tools(ws.tool_set().expect("tools"))
            .build();
        let t0 = Instant::now();
        let r = spec.run(&task["input"], &ctx).await;
        let wall = t0.elapsed();
        let (verdict, passed) = match (&r.outcome, &r.output) {
            (Outcome::Completed, Some(out)) => {
                if let Err(v) = spec.validate_output(out) {
                    panic!(
                        "{} ({}, {}, {}): a completed run returned an output that breaks its contract: {v:?}\n{out}",
                        task["name"], template.name(), api.name(), mode.as_str()
                    );
                }
                match grade(&task, out) {
                    Ok(()) => ("pass".to_string(), true),
                    Err(why) => (format!("wrong: {why}"), false),
                }
            }
            (Outcome::Completed, None) => panic!("a completed run without an output"),
            (o, _) => (
                format!(
                    "{}: {}",
                    o.as_str(),
                    r.error.as_ref().map(|e| e.to_string()).unwrap_or_default()
                ),
                false,
            ),
        };
        let mut verdict = verdict.replace('\n', " ").replace('|', "/");
        verdict.truncate(160);
        let row = Row {
            task: task["name"].as_str().expect("name").to_owned(),
            variant,
            template,
            api,
            mode,
            verdict,
            passed,
            requests: r.turns,
            tokens: (r.usage.input_tokens, r.usage.output_tokens),
            wall,
        };
        let _ = writeln!(std::io::stderr(), "real model: {}", line(&row));
        rows.push(row);
    }
}

fn line(r: &Row) -> String {
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} + {} | {:.1} s |",
        r.task,
        r.variant.name(),
        r.template.name(),
        r.api.name(),
        r.mode.as_str(),
        r.verdict,
        r.requests,
        r.tokens.0,
        r.tokens.1,
        r.wall.as_secs_f64()
    )
}

/// The table: every run, then per setup and mode the passes, requests, tokens and wall time.
fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| task | variant | template | endpoint | mode | result | requests | tokens (prompt + completion) | wall |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(s, "{}", line(r));
    }
    s.push_str("\n| variant | template | endpoint | mode | passed | valid but wrong | no output | requests | tokens | wall |\n|---|---|---|---|---|---|---|---|---|---|\n");
    let mut keys: Vec<(Variant, Template, Api, OutputMode)> = Vec::new();
    for r in rows {
        if !keys.contains(&(r.variant, r.template, r.api, r.mode)) {
            keys.push((r.variant, r.template, r.api, r.mode));
        }
    }
    for k in keys {
        let of: Vec<&Row> = rows
            .iter()
            .filter(|r| (r.variant, r.template, r.api, r.mode) == k)
            .collect();
        let wrong = of.iter().filter(|r| r.verdict.starts_with("wrong")).count();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {}/{} | {wrong} | {} | {} | {} + {} | {:.0} s |",
            k.0.name(),
            k.1.name(),
            k.2.name(),
            k.3.as_str(),
            of.iter().filter(|r| r.passed).count(),
            of.len(),
            of.len() - wrong - of.iter().filter(|r| r.passed).count(),
            of.iter().map(|r| r.requests).sum::<u32>(),
            of.iter().map(|r| r.tokens.0).sum::<u64>(),
            of.iter().map(|r| r.tokens.1).sum::<u64>(),
            of.iter().map(|r| r.wall.as_secs_f64()).sum::<f64>()
        );
    }
    s
}

fn write_table(name: &str, rows: &[Row]) {
    let t = table(rows);
    let _ = writeln!(std::io::stderr(), "\n{t}");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-model");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join(name), t);
}

/// A server's template, and the endpoints and modes run against it.
type Setup = (Template, Vec<(Api, Vec<OutputMode>)>);

/// The setups to run: the default fits the CI budget; `SUBCONTRACT_REAL_MATRIX=full` runs all.
fn setups() -> Vec<Setup> {
    let full = std::env::var("SUBCONTRACT_REAL_MATRIX").is_ok_and(|v| v == "full");
    if full {
        let every = vec![
            OutputMode::Auto,
            OutputMode::Tool,
            OutputMode::Native,
            OutputMode::Prompted,
        ];
        let apis = vec![(Api::Chat, every.clone()), (Api::Messages, every)];
        vec![(Template::ToolCalls, apis.clone()), (Template::Own, apis)]
    } else {
        // `SUBCONTRACT_REAL_MODES=auto,native,…`: other modes on the default setup.
        let modes = match std::env::var("SUBCONTRACT_REAL_MODES") {
            Ok(v) => v
                .split(',')
                .map(|m| {
                    m.trim()
                        .parse()
                        .unwrap_or_else(|e| panic!("SUBCONTRACT_REAL_MODES: {e}"))
                })
                .collect(),
            Err(_) => vec![OutputMode::Auto],
        };
        // `SUBCONTRACT_REAL_SETUP=own,messages` (either or both): another template or endpoint.
        let picked = std::env::var("SUBCONTRACT_REAL_SETUP").unwrap_or_default();
        let mut template = Template::ToolCalls;
        let mut api = Api::Chat;
        for part in picked.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "own" => template = Template::Own,
                "tool-calls" => template = Template::ToolCalls,
                "messages" => api = Api::Messages,
                "chat" => api = Api::Chat,
                other => {
                    panic!("SUBCONTRACT_REAL_SETUP: `{other}`: own, tool-calls, messages or chat")
                }
            }
        }
        vec![(template, vec![(api, modes)])]
    }
}

/// One model server at a time: two would share the two cores and slow both past their
/// timeouts.
static ONE_SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Passes `auto` must reach on the default setup: one below the 8 of 8 it passed
/// on 2026-12-03 (BENCHMARKS.md, "A real model"), since temperature 0 on llama.cpp is
/// not bit-for-bit repeatable across prompt-cache states.
const AUTO_FLOOR: usize = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_holds_its_contract_on_a_real_model() {
    let _one = ONE_SERVER.lock().await;
    let installed = install();
    let aids = aids();
    if aids != Aids::default() {
        let _ = writeln!(std::io::stderr(), "real model: aids changed: {aids:?}");
    }
    let mut rows = Vec::new();
    for (template, apis) in setups() {
        let server = LlamaServer::start(&installed, template);
        for (api, modes) in apis {
            let model = api.model(&server);
            for mode in modes {
                for variant in variants() {
                    run_setup(&model, template, api, mode, variant, &mut rows).await;
                }
            }
        }
    }
    write_table("table.md", &rows);
    // Every task has passed in some mode (the default run's `auto`, 2026-12-03); one that
    // passes in none here is printed, and the floor below says whether that is a regression.
    for task in tasks() {
        let name = task["name"].as_str().expect("name");
        if !rows.iter().any(|r| r.task == name && r.passed) {
            let _ = writeln!(
                std::io::stderr(),
                "real model: NOT PASSED in any mode: {name}"
            );
        }
    }
    // `auto` reaches its floor on the default setup, with the aids as they ship (a measurement
    // with one turned off may fall below it). Other setups are measured, not held to a floor.
    if aids != Aids::default() {
        return;
    }
    // Both variants: 8 of 8 each on 2026-12-04 (BENCHMARKS.md, "Grounded outputs").
    for variant in [Variant::Plain, Variant::Grounded] {
        let default_setup = |r: &Row| {
            (r.variant, r.template, r.api, r.mode)
                == (variant, Template::ToolCalls, Api::Chat, OutputMode::Auto)
        };
        if rows.iter().any(default_setup) {
            let n = rows.iter().filter(|r| default_setup(r) && r.passed).count();
            assert!(
                n >= AUTO_FLOOR,
                "auto ({}) passed {n} of 8 on the default setup, under the measured floor {AUTO_FLOOR}",
                variant.name()
            );
        }
    }
}

/// A project spec's name, its input, and its workspace's files (path, text).
type ProjectSpecRun = (&'static str, Value, Vec<(&'static str, &'static str)>);

/// The repository's own specs, with a small workspace each and the input their examples use.
/// Their `timeout_secs` suit a hosted model; a 1.5B model on two shared cores can take longer
/// than that for one cold prompt, so the test gives each run ten minutes instead, and turns
/// `require_tool_first` on as the suite does (the only changes: contracts, prompts, tools and
/// every other limit are the files').
fn project_specs() -> Vec<ProjectSpecRun> {
    let budget_rs = "//! Budgets that fork from their parent and charge every spend upward.\n\npub struct Budget { parent: Option<Box<Budget>>, spent: u64 }\n\nimpl Budget {\n    /// Charges `amount` to this budget and to every ancestor.\n    pub fn charge(&mut self, amount: u64) {\n        self.spent += amount;\n        if let Some(p) = self.parent.as_mut() {\n            p.charge(amount);\n        }\n    }\n}\n";
    let pay_rs = "pub fn refund(amount: i64) -> Result<(), PayError> {\n    // Zero and negative refunds are refused.\n    if amount >= 0 {\n        ledger::credit(amount)?;\n    }\n    Ok(())\n}\n";
    vec![
        (
            "research_topic",
            serde_json::json!({"question": "How does a sub-agent's spend reach its parent's budget?"}),
            vec![
                ("src/budget.rs", budget_rs),
                ("README.md", "A budget library.\n"),
            ],
        ),
        (
            "review_diff",
            serde_json::json!({
                "diff": "--- a/src/pay.rs\n+++ b/src/pay.rs\n@@ -3,3 +3,3 @@ pub fn refund(amount: i64) -> Result<(), PayError> {\n-    if amount > 0 {\n+    if amount >= 0 {\n         ledger::credit(amount)?;\n     }\n",
                "focus": "the refund condition"
            }),
            vec![("src/pay.rs", pay_rs)],
        ),
        (
            "check_claim",
            serde_json::json!({"claim": "The budget is charged to every ancestor."}),
            vec![("src/budget.rs", budget_rs)],
        ),
    ]
}

fn load_project_spec(name: &str) -> SubAgentSpec<Value, Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("specs/{name}.toml"));
    let text = std::fs::read_to_string(&path).expect("a project spec");
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("timeout_secs = ") {
                "timeout_secs = 600".to_string()
            } else if l.starts_with("tools = ") {
                format!("{l}\nrequire_tool_first = true")
            } else {
                l.to_string()
            }
        })
        .collect();
    assert_eq!(
        lines.iter().filter(|l| *l == "timeout_secs = 600").count(),
        1,
        "{name}: one timeout_secs line"
    );
    subcontract::spec::load_spec_str(&path, &lines.join("\n"))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The repository's three specs complete on the real model, in their own (`auto`) mode with
/// `require_tool_first`, over `/v1/chat/completions` and the tool-call template; each output is
/// checked against its contract here as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "about 6 minutes more on two busy cores: run with --ignored (the book: Local models)"]
async fn the_project_specs_complete_on_a_real_model() {
    let _one = ONE_SERVER.lock().await;
    let installed = install();
    let server = LlamaServer::start(&installed, Template::ToolCalls);
    let model = Api::Chat.model(&server);
    let mut failed = Vec::new();
    for (name, input, files) in project_specs() {
        let spec = load_project_spec(name);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("real-model/spec-workspaces")
            .join(name);
        let _ = std::fs::remove_dir_all(&dir);
        for (rel, body) in files {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().expect("a parent")).expect("dirs");
            std::fs::write(&p, body).expect("write");
        }
        let ws = Workspace::new(dir).expect("workspace");
        let ctx = Ctx::builder(model.clone())
            .tools(ws.tool_set().expect("tools"))
            .build();
        let t0 = Instant::now();
        let r = spec.run(&input, &ctx).await;
        let _ = writeln!(
            std::io::stderr(),
            "real model: spec {name}: {} after {} request(s), {} + {} tokens, {:.1} s: {}",
            r.outcome.as_str(),
            r.turns,
            r.usage.input_tokens,
            r.usage.output_tokens,
            t0.elapsed().as_secs_f64(),
            r.output
                .as_ref()
                .map(Value::to_string)
                .or(r.error.as_ref().map(|e| e.to_string()))
                .unwrap_or_default()
        );
        match (&r.outcome, &r.output) {
            (Outcome::Completed, Some(out)) => {
                if let Err(v) = spec.validate_output(out) {
                    panic!("{name}: a completed run returned an output that breaks its contract: {v:?}\n{out}");
                }
            }
            _ => failed.push(name),
        }
    }
    assert!(
        failed.is_empty(),
        "did not complete on the real model: {failed:?}"
    );
}
