//! `call-over-budget`: a spec whose first model call, on a model it will run on, reserves more
//! than its own `max_cost_usd`, so that a run spends nothing and ends `budget_exhausted` after
//! 0 turns (for every input, or for its largest ones). `answer-over-budget`: the first call
//! fits, but not with the answer the answer reserve holds beside it, which ends every run the
//! same way.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{CatalogueTool, CheckOptions, Locator};
use crate::ctx::Ctx;
use crate::diag::{codes, Diagnostic, Severity};
use crate::spec::file::RawSpec;
use crate::spec::{CallOverBudget, SubAgentSpec};
use crate::tool::workspace::Workspace;
use crate::tool::{Tool, ToolOutput, ToolSet};

/// One warning per spec and model whose first call, or first call and the answer held beside
/// it, cannot fit the spec's cap. A spec that names
/// its own model is checked on that one; the others on every model of `opts.models`. A model
/// without a price is counted as free by the run, so it has nothing to warn about.
pub(super) fn call_over_budget(
    specs: &[(&RawSpec, &SubAgentSpec<Value, Value>)],
    opts: &CheckOptions,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if opts.models.is_empty() && specs.iter().all(|(_, s)| s.model().is_none()) {
        return out;
    }
    let tools = tool_set(specs, &opts.catalogue);
    for (raw, spec) in specs {
        let (Some(cap_pos), Some(_)) = (raw.at.pos("max_cost_usd"), spec.limits().max_cost_usd)
        else {
            continue;
        };
        let models: Vec<&str> = match spec.model() {
            Some(m) => vec![m],
            None => opts.models.iter().map(String::as_str).collect(),
        };
        // The largest valid input, when the schema bounds it; otherwise none at all, so that
        // what is reported holds for every input.
        let largest = spec.input_contract().analysis().worst_case_chars;
        let loc = Locator {
            file: raw.path.display().to_string(),
            spec: Some(spec.name().to_owned()),
            raw: Some(raw),
        };
        let mut seen = Vec::new();
        for model in models {
            if seen.contains(&model) {
                continue;
            }
            seen.push(model);
            let Some(price) = opts.prices.get(model) else {
                continue;
            };
            let cost = spec.first_call_cost_sized(
                &price,
                &tools,
                largest.unwrap_or(0),
                spec.prompt_cache(),
            );
            let cap = spec.limits().max_cost_usd.unwrap_or_default();
            let context = match largest {
                Some(n) => format!("for an input of the largest valid size ({n} characters), "),
                None => "even before its (unbounded) input is counted, ".to_owned(),
            };
            if let Some(over) = CallOverBudget::check(model, &price, cost, cap) {
                out.push(loc.diag(
                    cap_pos,
                    Severity::Warning,
                    codes::CALL_OVER_BUDGET,
                    format!("{context}{over}"),
                ));
            } else if let Some(over) = spec.answer_over_budget_sized(
                model,
                &price,
                &tools,
                largest.unwrap_or(0),
                spec.prompt_cache(),
            ) {
                out.push(loc.diag(
                    cap_pos,
                    Severity::Warning,
                    codes::ANSWER_OVER_BUDGET,
                    format!("{context}{over}"),
                ));
            }
        }
    }
    out
}

/// The tools a spec of the set can be offered, as a host would hold them: the built-in
/// workspace tools, the set's specs, and the catalogue's tools. Only their definitions matter
/// here: a definition's size is part of every prompt.
fn tool_set(
    specs: &[(&RawSpec, &SubAgentSpec<Value, Value>)],
    catalogue: &[CatalogueTool],
) -> ToolSet {
    let mut set = ToolSet::new();
    // A workspace over the temporary directory: the built-in tools' definitions do not depend
    // on their root. Should it fail, they are not counted, which only lowers the estimate.
    if let Ok(ws) = Workspace::new(std::env::temp_dir()) {
        for t in ws.tools() {
            let _ = set.insert(t);
        }
    }
    // A duplicate name is refused by the set (and reported by `check` as `duplicate-name`).
    for (_, spec) in specs {
        let _ = set.insert(spec.as_tool());
    }
    for t in catalogue {
        if set.get(&t.name).is_none() {
            let _ = set.insert(Arc::new(Declared {
                name: t.name.clone(),
                description: t.description.clone(),
                // A tool declared without a schema: counted as the smallest one.
                schema: Arc::new(t.input.clone().unwrap_or(Value::Bool(true))),
            }));
        }
    }
    set
}

/// A catalogue tool: a definition only, never called.
struct Declared {
    name: String,
    description: String,
    schema: Arc<Value>,
}

#[async_trait]
impl Tool for Declared {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Arc<Value> {
        self.schema.clone()
    }
    async fn call(&self, _args: Value, _ctx: &Ctx) -> ToolOutput {
        ToolOutput::error("a declared tool is only sized by `check`, never called")
    }
}
