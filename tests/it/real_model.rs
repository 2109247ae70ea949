//! The contract on a real model: Qwen2.5-Coder-Instruct (Q4_K_M) behind llama.cpp's own HTTP
//! server, installed into the target's temporary directory on first use (the test fails with
//! the command when it cannot; it never skips). The suite is eight graded tasks, each a spec
//! file with a cases file beside it (`bench/real/suite/specs/`) and a workspace of its own
//! (`bench/real/suite/workspaces/NAME/`), which the peer benchmark reads too. They run through
//! `subcontract eval`'s engine ([`run_eval`]) in each setup (endpoint × chat template × output
//! mode); every exchange is recorded under `target/tmp/real-model/records/`, and a table made
//! from the eval reports is printed and written to `target/tmp/real-model/table.md`.
//!
//! Claimed, and asserted: no run ever returns an output that breaks its contract (checked here
//! again, apart from the run loop), and `auto` passes at least the floor measured for it; a
//! task that passed in no mode is printed. The default run, part of `cargo test
//! --all-features`, is the one setup that fits the CI budget: `auto` over
//! `/v1/chat/completions` with the tool-call template. `SUBCONTRACT_REAL_MATRIX=full` runs every
//! setup (both endpoints, both templates, every mode), and `SUBCONTRACT_REAL_MODEL` picks the
//! model size (`1.5b`, the default, or `0.5b`). `SUBCONTRACT_REAL_LEVERS` changes the
//! small-model aids from their defaults, to measure one at a time: a comma-separated list of
//! `NAME=on|off` for the run loop's `forced_output`, `text_calls`, `native_final` and
//! `grounding_pointers` (a grounded value's repair quotes the lines read that mention its
//! property) ([`Levers`]) and the spec files' own `require_tool_first` (on in each file that
//! has tools; `off` turns it off). `SUBCONTRACT_REAL_MODES` (`auto,tool,native,prompted`, any of them) runs
//! other output modes, and `SUBCONTRACT_REAL_SETUP` (`own`, `messages`, or both,
//! comma-separated) another template or endpoint, in place of the default setup.
//!
//! Each task runs in two variants: `grounded`, its spec file as written (the properties whose
//! answer is in a file are marked `x-grounded`, so an answer the model did not read is sent
//! back for repair), and `plain`, the same contract without its `x-grounded` keywords.
//! `SUBCONTRACT_REAL_VARIANTS` (`plain`, `grounded`, or both, comma-separated) picks them.
//!
//! The grounded variant in the default setup is exactly what the command line runs:
//! `subcontract eval bench/real/suite/specs/extract.toml --workspace
//! bench/real/suite/workspaces/extract --model openai:local --base-url http://127.0.0.1:PORT/v1`
//! (the book's "Local models").

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use subcontract::eval::{
    check_cases, read_cases, run_eval, AttemptReport, Case, EvalOptions, EvalSpec, Recording,
};
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

/// One task of the suite: its spec file as loaded, its cases and its workspace.
struct Task {
    spec: SubAgentSpec<Value, Value>,
    cases: Vec<Case>,
    workspace: Option<PathBuf>,
}

impl Task {
    fn name(&self) -> &str {
        self.spec.name()
    }
}

/// The suite's tasks, in the order of their file names; every cases file is checked against
/// its spec's contracts first, as `subcontract eval` does.
fn suite() -> Vec<Task> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/real/suite");
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("specs"))
        .expect("bench/real/suite/specs")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 8, "eight tasks: {files:?}");
    files
        .into_iter()
        .map(|path| {
            let spec = subcontract::spec::load_spec(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let cases_path = path.with_extension("cases.jsonl");
            let cases = read_cases(&cases_path).unwrap_or_else(|e| panic!("{e}"));
            check_cases(&spec, &cases_path.display().to_string(), &cases)
                .unwrap_or_else(|e| panic!("{e}"));
            let workspace = root.join("workspaces").join(spec.name());
            Task {
                workspace: workspace.is_dir().then_some(workspace),
                spec,
                cases,
            }
        })
        .collect()
}

/// The aids in use: the run loop's defaults and the spec files' `require_tool_first`, changed
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
            "grounding_pointers" => a.levers.grounding_pointers = on,
            "require_tool_first" => a.require_tool_first = on,
            _ => panic!("SUBCONTRACT_REAL_LEVERS: no lever `{name}`"),
        }
    }
    a
}

/// Every `x-grounded` keyword removed from `schema`.
fn strip_grounded(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.remove("x-grounded");
            map.values_mut().for_each(strip_grounded);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_grounded),
        _ => {}
    }
}

/// The task's spec in `mode` and `variant` with the aids in use: the file's spec, rebuilt with
/// only those changed.
fn spec(task: &Task, mode: OutputMode, variant: Variant, aids: Aids) -> SubAgentSpec<Value, Value> {
    let file = &task.spec;
    let mut output = Value::clone(file.output_contract().schema());
    if variant == Variant::Plain {
        strip_grounded(&mut output);
    }
    let spec = SubAgentSpec::dynamic(
        file.name(),
        Value::clone(file.input_contract().schema()),
        output,
    )
    .description(file.description())
    .system(file.system())
    .tools(file.tools().to_vec())
    .limits(file.limits().clone())
    .sampling(file.sampling())
    .output_mode(mode)
    .require_tool_first(file.require_tool_first() && aids.require_tool_first)
    .levers(aids.levers)
    .build()
    .expect("the task's spec is valid");
    assert_eq!(
        spec.grounding().is_some(),
        variant == Variant::Grounded && file.grounding().is_some(),
        "{}: the variant's grounding",
        file.name()
    );
    spec
}

/// One line of the table: one attempt of the eval.
struct Row {
    task: String,
    variant: Variant,
    template: Template,
    api: Api,
    attempt: AttemptReport,
}

impl Row {
    fn mode(&self) -> &str {
        &self.attempt.mode
    }

    fn wrong(&self) -> bool {
        self.attempt.valid && !self.attempt.passed
    }

    fn verdict(&self) -> String {
        let a = &self.attempt;
        let mut v = if a.passed {
            "pass".to_string()
        } else if a.valid {
            format!("wrong: {}", a.failed.join("; "))
        } else {
            a.failed.join("; ")
        };
        v = v.replace('\n', " ").replace('|', "/");
        if v.chars().count() > 160 {
            v = v.chars().take(160).collect();
        }
        v
    }
}

/// Runs every task in one setup through the eval engine, one attempt each; a completed output
/// is checked against its contract here, apart from the run loop, and a broken one fails the
/// test.
async fn run_setup(
    model: &Arc<dyn Model>,
    template: Template,
    api: Api,
    mode: OutputMode,
    variant: Variant,
    rows: &mut Vec<Row>,
) {
    let setup = format!(
        "{}-{}-{}-{}",
        template.name(),
        api.name().trim_start_matches("/v1/").replace('/', "-"),
        mode.as_str(),
        variant.name()
    );
    for task in suite() {
        let spec = spec(&task, mode, variant, aids());
        let host = match &task.workspace {
            Some(dir) => Ctx::builder(model.clone()).tools(
                Workspace::new(dir.clone())
                    .expect("workspace")
                    .tool_set()
                    .expect("tools"),
            ),
            None => Ctx::builder(model.clone()),
        };
        // Named as the model names itself, so that `subcontract eval --replay` of a setup's
        // directory finds the same model.
        let mut opts = EvalOptions::new(model.id());
        // Every exchange, to read what the model was sent and said, a directory per setup:
        // `subcontract eval SPEC --replay target/tmp/real-model/records/SETUP` answers from it.
        opts.recording = Recording::Record(
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join("real-model/records")
                .join(&setup),
        );
        let report = run_eval(
            &[EvalSpec::new(spec.clone())],
            &task.cases,
            &Default::default(),
            host,
            &opts,
            None,
        )
        .await;
        for attempt in report.cases {
            assert_eq!(
                attempt.outcome == Outcome::Completed.as_str(),
                attempt.output.is_some(),
                "{} ({setup}): a completed attempt has an output, and only one does: {attempt:?}",
                task.name()
            );
            if let Some(out) = &attempt.output {
                if let Err(v) = spec.validate_output(out) {
                    panic!(
                        "{} ({setup}): a completed run returned an output that breaks its contract: {v:?}\n{out}",
                        task.name()
                    );
                }
            }
            let row = Row {
                task: task.name().to_string(),
                variant,
                template,
                api,
                attempt,
            };
            let _ = writeln!(std::io::stderr(), "real model: {}", line(&row));
            rows.push(row);
        }
    }
}

fn line(r: &Row) -> String {
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} + {} | {:.1} s |",
        r.task,
        r.variant.name(),
        r.template.name(),
        r.api.name(),
        r.mode(),
        r.verdict(),
        r.attempt.requests,
        r.attempt.input_tokens,
        r.attempt.output_tokens,
        r.attempt.wall_ms as f64 / 1000.0
    )
}

/// The table: every attempt, then per setup and mode the passes, requests, tokens and wall
/// time, all read from the eval reports.
fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| task | variant | template | endpoint | mode | result | requests | tokens (prompt + completion) | wall |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(s, "{}", line(r));
    }
    s.push_str("\n| variant | template | endpoint | mode | passed | valid but wrong | no output | requests | tokens | wall |\n|---|---|---|---|---|---|---|---|---|---|\n");
    let key = |r: &Row| (r.variant, r.template, r.api, r.mode().to_string());
    let mut keys = Vec::new();
    for r in rows {
        if !keys.contains(&key(r)) {
            keys.push(key(r));
        }
    }
    for k in keys {
        let of: Vec<&Row> = rows.iter().filter(|r| key(r) == k).collect();
        let passed = of.iter().filter(|r| r.attempt.passed).count();
        let wrong = of.iter().filter(|r| r.wrong()).count();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {passed}/{} | {wrong} | {} | {} | {} + {} | {:.0} s |",
            k.0.name(),
            k.1.name(),
            k.2.name(),
            k.3,
            of.len(),
            of.len() - wrong - passed,
            of.iter().map(|r| r.attempt.requests).sum::<u64>(),
            of.iter().map(|r| r.attempt.input_tokens).sum::<u64>(),
            of.iter().map(|r| r.attempt.output_tokens).sum::<u64>(),
            of.iter().map(|r| r.attempt.wall_ms).sum::<u64>() as f64 / 1000.0
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
    for task in suite() {
        if !rows
            .iter()
            .any(|r| r.task == task.name() && r.attempt.passed)
        {
            let _ = writeln!(
                std::io::stderr(),
                "real model: NOT PASSED in any mode: {}",
                task.name()
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
            (r.variant, r.template, r.api, r.mode())
                == (variant, Template::ToolCalls, Api::Chat, "auto")
        };
        if rows.iter().any(default_setup) {
            let n = rows
                .iter()
                .filter(|r| default_setup(r) && r.attempt.passed)
                .count();
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

/// The acting tasks (`bench/real/acting/`): a small repository with a failing test each, which
/// the model must find the cause of and fix in its own working copy, under the OS sandbox; the
/// spec's checks (the tests) must pass before an output is accepted. Run through the eval
/// engine on the default setup, once each. Asserted: no completed run's output breaks its
/// contract (a completed run's changes passed its checks in its copy: the run loop does not
/// accept an output before they do). How many pass is measured, not held to a floor; the table
/// goes to `target/tmp/real-model/acting.md`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acting_tasks_on_a_real_model() {
    let _one = ONE_SERVER.lock().await;
    let installed = install();
    let server = LlamaServer::start(&installed, Template::ToolCalls);
    let model = Api::Chat.model(&server);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/real/acting");
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut rows = Vec::new();
    for name in ["fix_greeting", "fix_mean"] {
        let path = root.join("specs").join(format!("{name}.toml"));
        let spec = subcontract::spec::load_spec(&path).unwrap_or_else(|e| panic!("{e}"));
        let cases_path = path.with_extension("cases.jsonl");
        let cases = read_cases(&cases_path).unwrap_or_else(|e| panic!("{e}"));
        let dir = root.join("workspaces").join(name);
        let mut tools = Workspace::new(&dir)
            .expect("workspace")
            .tool_set()
            .expect("tools");
        for t in subcontract::act::tools() {
            tools.insert(t).expect("acting tools");
        }
        let host = Ctx::builder(model.clone()).tools(tools).acting(
            subcontract::act::ActHost::new(&dir).with_copies_dir(scratch.path().join("copies")),
        );
        let mut opts = EvalOptions::new(model.id());
        opts.recording = Recording::Record(
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-model/records/acting"),
        );
        let report = run_eval(
            &[EvalSpec::new(spec.clone())],
            &cases,
            &Default::default(),
            host,
            &opts,
            None,
        )
        .await;
        for attempt in report.cases {
            if let Some(out) = &attempt.output {
                if let Err(v) = spec.validate_output(out) {
                    panic!("{name}: a completed run's output breaks its contract: {v:?}\n{out}");
                }
            }
            let _ = writeln!(
                std::io::stderr(),
                "real model (acting): {name}: {} ({}), {} requests, {:.1} s",
                if attempt.passed { "pass" } else { "not passed" },
                attempt.outcome,
                attempt.requests,
                attempt.wall_ms as f64 / 1000.0
            );
            rows.push(Row {
                task: name.to_string(),
                variant: Variant::Plain,
                template: Template::ToolCalls,
                api: Api::Chat,
                attempt,
            });
        }
    }
    write_table("acting.md", &rows);
}
