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

/// A spec with tools keeps room for its answer beside its first call: `check` warns
/// `answer-over-budget` exactly when a run is refused before that call, and names the cap the
/// run names.
#[tokio::test]
async fn check_and_the_run_agree_on_the_room_for_an_answer() {
    let model = "openai:gpt-4.1-mini";
    let prices = PriceTable::builtin();
    let price = prices.get(model).expect("priced");
    let tools = workspace_tools();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("finder.toml");
    let text = |cap: Decimal, reserve: bool| {
        format!(
            "name = \"finder\"\ndescription = \"Finds a file.\"\nsystem = \"Find the file.\"\n\
             tools = [\"grep\"]\n[limits]\nmax_tokens_per_turn = 700\nmax_cost_usd = \"{cap}\"\n\
             answer_reserve = {reserve}\n[input]\ntype = \"object\"\nadditionalProperties = false\n\
             [output]\ntype = \"object\"\nrequired = [\"file\"]\nadditionalProperties = false\n\
             properties.file = {{ type = \"string\", maxLength = 40 }}\n[[examples]]\n\
             input = {{}}\noutput = {{ file = \"src/lib.rs\" }}\n"
        )
    };
    let write_and_check = |cap: Decimal, reserve: bool| {
        std::fs::write(&file, text(cap, reserve)).expect("write");
        let opts = CheckOptions {
            models: vec![model.to_owned()],
            ..CheckOptions::default()
        };
        let report = check_paths(std::slice::from_ref(&file), &opts).expect("check runs");
        let spec: SubAgentSpec<Value, Value> = load_spec(&file).expect("loads");
        let warned: Vec<String> = report
            .diagnostics
            .iter()
            .filter(|d| d.code.ends_with("-over-budget"))
            .map(|d| {
                format!(
                    "{}:{}:{}: {}: {}",
                    d.file, d.line, d.column, d.code, d.message
                )
            })
            .collect();
        (spec, warned)
    };
    let input = serde_json::json!({});
    // What the two calls cost, from the spec at a cap that holds its first call alone.
    let (spec, _) = write_and_check(Decimal::ONE, true);
    let first = spec.first_call_cost(&price, &tools, &input);
    let (spec, warned) = write_and_check(first.usd, true);
    let over = spec
        .answer_over_budget(&prices, model, &tools, &input)
        .expect("the first call alone fits, not with its answer");
    assert_eq!(over.first, first);
    assert!(over.answer.usd > first.usd, "the answer's prompt is longer");
    assert_eq!(warned.len(), 1, "{warned:#?}");
    assert!(
        warned[0].contains(":7:16: answer-over-budget: for an input of the largest valid size (2 characters), the first turn on openai:gpt-4.1-mini reserves up to"),
        "{warned:#?}"
    );
    assert!(
        warned[0].ends_with(&format!(
            "raise max_cost_usd to {}, lower max_tokens_per_turn, or set answer_reserve = false",
            over.cap_needed()
        )),
        "{warned:#?}"
    );
    let run = |spec: &SubAgentSpec<Value, Value>| {
        let spec = spec.clone();
        async move {
            spec.run_child(
                &serde_json::json!({}),
                &ctx(
                    submitter(model, &spec, serde_json::json!({"file": "src/lib.rs"})),
                    None,
                ),
            )
            .await
        }
    };

    // Exactly the two calls: no warning, and the run makes its first call and completes.
    let (spec, warned) = write_and_check(over.total(), true);
    assert!(warned.is_empty(), "{warned:#?}");
    let r = run(&spec).await;
    assert_eq!(
        (r.outcome, r.turns),
        (Outcome::Completed, 1),
        "{:?}",
        r.error
    );

    // A billionth of a dollar less: warned, and the run is refused before any call with the
    // figure the warning names.
    let less = over.total() - Decimal::new(1, 9);
    let (spec, warned) = write_and_check(less, true);
    assert_eq!(warned.len(), 1, "{warned:#?}");
    let r = run(&spec).await;
    assert_eq!(r.turns, 0);
    match &r.error {
        Some(subcontract::Failure::NoRoomToAnswer { raise_to, .. }) => {
            assert_eq!(*raise_to, over.cap_needed())
        }
        other => panic!("refused before any call, not {other:?}"),
    }

    // Without the reserve, the same cap is no warning, and the run answers in its one call.
    let (spec, warned) = write_and_check(less, false);
    assert!(warned.is_empty(), "{warned:#?}");
    let r = run(&spec).await;
    assert_eq!(
        (r.outcome, r.turns),
        (Outcome::Completed, 1),
        "{:?}",
        r.error
    );
}
