//! A spec seen by a host as an ordinary tool.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::ctx::Ctx;
use crate::ground::GroundKind;
use crate::outcome::Outcome;
use crate::spec::core::{InputCheck, OutputText, SpecCore};
use crate::tool::{Tool, ToolKind, ToolOutput};

use super::wording::ended_without_result;

/// The tool [`SubAgentSpec::as_tool`](crate::spec::DynSpec::as_tool) returns.
#[derive(Debug, Clone)]
pub(crate) struct AgentTool {
    spec: Arc<SpecCore>,
}

impl AgentTool {
    pub(crate) fn new(spec: Arc<SpecCore>) -> Self {
        AgentTool { spec }
    }
}

#[async_trait]
impl Tool for AgentTool {
    fn name(&self) -> &str {
        &self.spec.def.name
    }
    fn description(&self) -> &str {
        &self.spec.def.description
    }
    fn input_schema(&self) -> Arc<Value> {
        self.spec.input.schema().clone()
    }
    fn output_schema(&self) -> Option<Arc<Value>> {
        Some(self.spec.output.schema().clone())
    }
    fn kind(&self) -> ToolKind {
        ToolKind::SubAgent
    }
    fn input_contract(&self) -> Option<crate::contract::Contract> {
        Some(self.spec.input.clone())
    }
    async fn call(&self, args: Value, ctx: &Ctx) -> ToolOutput {
        self.run(args, ctx, InputCheck::Full).await
    }
    async fn call_checked(&self, args: Value, ctx: &Ctx) -> ToolOutput {
        // The run loop checked the arguments against this very contract: only the typed
        // rules are left for the child's run.
        self.run(args, ctx, InputCheck::RulesOnly).await
    }
}

impl AgentTool {
    async fn run(&self, args: Value, ctx: &Ctx, check: InputCheck) -> ToolOutput {
        let (mut r, carried) =
            super::run_child_carrying(&self.spec, args, ctx, OutputText::Write, check).await;
        let changes = r.changes.take().filter(|c| !c.is_empty());
        let cut_short = r.cut_short;
        let mut out = match (r.outcome, r.output) {
            // The compact JSON was written when the output was checked.
            (Outcome::Completed, Some((Some(text), value))) => {
                // A spec over JSON values holds its output as one; a typed spec's output is
                // never turned back into a `Value` just for this copy (see `ToolOutput`).
                let structured = value.downcast::<Value>().ok().map(|v| *v);
                // The output is the child's model's words: only what the child's contract
                // grounded is evidence for the parent, each value with the sources the child
                // found it in; the sources it cites were checked against what it read, so the
                // parent has consulted them through it, and may cite them too.
                let values = carried.map(|c| c.values).unwrap_or_default();
                // An acting child's changes travel beside its output: the parent decides on
                // them (`accept_changes`), or they are kept as a patch, never lost.
                let text = match changes {
                    Some(c) => crate::act::run::hand_up(ctx, c, &text),
                    None => text,
                };
                let mut out = ToolOutput::text(text);
                out.structured = structured;
                for c in values.iter().filter(|c| c.kind == GroundKind::Source) {
                    out = out.with_source(c.value.clone());
                }
                out.with_child_values(values)
            }
            (outcome, _) => ToolOutput::error(ended_without_result(
                &self.spec.def.name,
                outcome,
                r.turns,
                r.error.as_ref(),
            )),
        };
        // A parent model is told its sub-agent was cut short, and by what.
        if let Some(limit) = cut_short {
            out.content.push_str(&super::wording::cut_short_note(limit));
        }
        out
    }
}
