//! The shipped specs can make their calls on every model the README names and every model of
//! the built-in price table: `check` finds no `call-over-budget`, and a run on each priced model
//! completes. What `check` and `SubAgentSpec::first_call_cost` compute is exactly what the run
//! loop reserves.

use std::path::{Path, PathBuf};

use rust_decimal::Decimal;
use serde_json::Value;
use subcontract::check::{check_paths, CheckOptions};
use subcontract::model::{PriceTable, ScriptStep, ScriptedModel};
use subcontract::spec::{load_spec, spec_files};
use subcontract::tool::workspace::Workspace;
use subcontract::{Budget, Ctx, Outcome, SubAgentSpec, ToolSet};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `provider:model` ids written in `text`, in order, without repeats.
fn model_ids(text: &str) -> Vec<String> {
    let re = regex::Regex::new(r"\b(?:openai|anthropic):[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]")
        .expect("valid regex");
    let mut out: Vec<String> = Vec::new();
    for m in re.find_iter(text) {
        if !out.iter().any(|o| o == m.as_str()) {
            out.push(m.as_str().to_owned());
        }
    }
    out
}

/// Every model the README names that has a price (the others are counted as free), and every
/// model of the built-in table.
fn models() -> Vec<String> {
    let prices = PriceTable::builtin();
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let named: Vec<String> = model_ids(&readme)
        .into_iter()
        .filter(|m| prices.get(m).is_some())
        .collect();
    assert!(
        named.iter().any(|m| m.starts_with("anthropic:"))
            && named.iter().any(|m| m.starts_with("openai:")),
        "the README names priced models of both providers: {named:?}"
    );
    let table = std::fs::read_to_string(root().join("crates/subcontract/src/model/prices.toml"))
        .expect("prices");
    let mut all = named;
    for m in model_ids(&table) {
        if !all.contains(&m) {
            all.push(m);
        }
    }
    assert!(all.len() >= 10, "{all:?}");
    all
}

fn shipped() -> Vec<PathBuf> {
    let files = spec_files(&root().join("specs")).expect("specs/");
    assert!(files.len() >= 3, "{files:?}");
    files
}

fn workspace_tools() -> ToolSet {
    // The repository: the files the shipped examples cite (and, grounded, must read) are here.
    Workspace::new(root())
        .expect("workspace")
        .tool_set()
        .expect("workspace tools")
}

#[test]
fn check_finds_no_call_over_budget_in_the_shipped_specs_on_any_model() {
    let models = models();
    let opts = CheckOptions {
        models: models.clone(),
        ..CheckOptions::default()
    };
    let report = check_paths(&[root().join("specs")], &opts).expect("check runs");
    let over: Vec<String> = report
        .diagnostics
        .iter()
        .filter(|d| d.code == "call-over-budget")
        .map(|d| format!("{}:{}: {}", d.file, d.line, d.message))
        .collect();
    assert!(over.is_empty(), "{over:#?}");
    assert!(!report.failed(), "{:#?}", report.diagnostics);

    // The check is not vacuous: the same specs at the old default of 4,096 output tokens
    // per call do not fit on every model.
    let dir = tempfile::tempdir().expect("temp dir");
    for f in shipped() {
        let text = std::fs::read_to_string(&f).expect("spec");
        let old: String = text
            .lines()
            .filter(|l| !l.starts_with("max_tokens_per_turn"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(dir.path().join(f.file_name().expect("name")), old).expect("write");
    }
    let report = check_paths(&[dir.path().to_path_buf()], &opts).expect("check runs");
    assert!(
        report
            .diagnostics
            .iter()
            .any(|d| d.code == "call-over-budget"),
        "{:#?}",
        report.diagnostics
    );
}

/// A model with `id` that submits `output` at once, reporting no usage; beside the submission
/// it reads the sources `output` cites where `spec` grounds them (`x-grounded`), which the run
/// does before it judges the submission.
fn submitter(
    id: &str,
    spec: &SubAgentSpec<Value, Value>,
    output: Value,
) -> std::sync::Arc<ScriptedModel> {
    let reads: Vec<(String, Value)> = spec
        .grounding()
        .map(|g| g.source_values(&output))
        .unwrap_or_default()
        .into_iter()
        .map(|p| ("read_file".to_owned(), serde_json::json!({ "path": p })))
        .collect();
    std::sync::Arc::new(ScriptedModel::from_fn(id.to_owned(), move |_| {
        let mut calls = reads.clone();
        calls.push((subcontract::SUBMIT_TOOL.to_owned(), output.clone()));
        ScriptStep::tool_calls(calls).with_usage(0, 0)
    }))
}

fn ctx(model: std::sync::Arc<ScriptedModel>, limit: Option<Decimal>) -> Ctx {
    Ctx::builder(model)
        .tools(workspace_tools())
        .prices(PriceTable::builtin())
        .budget(Budget::new(limit, None))
        .build()
}

#[tokio::test]
async fn every_shipped_spec_runs_on_every_priced_model() {
    for f in shipped() {
        let spec: SubAgentSpec<Value, Value> = load_spec(&f).expect("loads");
        let (input, output) = spec.examples()[0].clone();
        for model in models() {
            let r = spec
                .run_child(&input, &ctx(submitter(&model, &spec, output.clone()), None))
                .await;
            assert_eq!(
                (r.outcome, r.turns),
                (Outcome::Completed, 1),
                "{} on {model}: {:?}",
                f.display(),
                r.error
            );
        }
    }
}

#[tokio::test]
async fn the_run_reserves_exactly_the_first_call_cost() {
    let prices = PriceTable::builtin();
    let tools = workspace_tools();
    for f in shipped() {
        let spec: SubAgentSpec<Value, Value> = load_spec(&f).expect("loads");
        let (input, output) = spec.examples()[0].clone();
        for model in ["anthropic:claude-sonnet-4-5", "openai:gpt-4.1-mini"] {
            let price = prices.get(model).expect("priced");
            let cost = spec.first_call_cost(&price, &tools, &input);
            assert!(cost.usd > Decimal::ZERO);
            // A parent with exactly the first call's cost left: the call is made, as the run's
            // answer (the answer reserve leaves nothing for a turn before it).
            let r = spec
                .run_child(
                    &input,
                    &ctx(submitter(model, &spec, output.clone()), Some(cost.usd)),
                )
                .await;
            // A spec with tools needs room for its answer beside its first call, and is
            // refused before it spends; one without tools answers in that one call.
            let refused = matches!(r.error, Some(subcontract::Failure::NoRoomToAnswer { .. }));
            assert_eq!(
                (r.turns, r.outcome == Outcome::BudgetExhausted, refused),
                if spec.tools().is_empty() {
                    (1, false, false)
                } else {
                    (0, true, true)
                },
                "{} on {model}: {:?}",
                f.display(),
                r.error
            );
            // A billionth of a dollar less: nothing is spent, no call is made.
            let less = cost.usd - Decimal::new(1, 9);
            let r = spec
                .run_child(
                    &input,
                    &ctx(submitter(model, &spec, output.clone()), Some(less)),
                )
                .await;
            assert_eq!(
                (r.outcome, r.turns),
                (Outcome::BudgetExhausted, 0),
                "{} on {model}: {:?}",
                f.display(),
                r.error
            );
            // And the spec's own cap says the same when it is the one that binds.
            let over = spec.call_over_budget(&prices, model, &tools, &input);
            assert_eq!(over.is_some(), spec.limits().max_cost_usd < Some(cost.usd));
        }
    }
}
