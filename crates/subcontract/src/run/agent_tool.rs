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
        let r = super::run_child_checked(&self.spec, args, ctx, OutputText::Write, check).await;
        let cut_short = r.cut_short;
        let out = match (r.outcome, r.output) {
            // The compact JSON was written when the output was checked.
            (Outcome::Completed, Some((Some(text), value))) => {
                // A spec over JSON values holds its output as one; a typed spec's output is
                // never turned back into a `Value` just for this copy (see `ToolOutput`).
                let structured = value.downcast::<Value>().ok().map(|v| *v);
                // The sources the child's output cites were checked against what the child
                // read: the parent has consulted them through it, and may cite them too; a
                // text the child grounded beside a citation is that source's for the parent.
                let (cited, attributed) = match &self.spec.grounding {
                    Some(g) if g.grounds(GroundKind::Source) => {
                        let parsed;
                        let v = match &structured {
                            Some(v) => Some(v),
                            None => {
                                parsed = serde_json::from_str::<Value>(&text).ok();
                                parsed.as_ref()
                            }
                        };
                        v.map(|v| (g.source_values(v), g.pair_values(v)))
                            .unwrap_or_default()
                    }
                    _ => Default::default(),
                };
                let mut out = ToolOutput::text(text);
                out.structured = structured;
                for id in cited {
                    out = out.with_source(id);
                }
                out.with_json_body(attributed)
            }
            (outcome, _) => ToolOutput::error(ended_without_result(
                &self.spec.def.name,
                outcome,
                r.turns,
                r.error.as_ref(),
            )),
        };
        with_cut_short(out, cut_short)
    }
}

/// `out` with the note that says its sub-agent was cut short, and by what, if it was.
fn with_cut_short(mut out: ToolOutput, cut_short: Option<crate::outcome::Limit>) -> ToolOutput {
    if let Some(limit) = cut_short {
        out.content.push_str(&super::wording::cut_short_note(limit));
    }
    out
}
