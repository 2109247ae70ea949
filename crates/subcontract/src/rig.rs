//! A spec as a tool of a [rig](https://docs.rs/rig-core/0.44.0) agent (feature `rig`, rig
//! 0.44): [`tool`] makes a rig [`DynamicTool`] whose parameters are the spec's input schema
//! and whose result is the spec's validated output.
//!
//! Every call runs the sub-agent as a child of the parent context the tool holds, exactly as
//! a call from our own host would: the child's budget is forked from the parent's and its
//! spend is charged upward, its depth is bounded, its tools are a subset of the parent's, and
//! its output has passed the whole output contract (a typed spec's rules included) before rig
//! sees a byte of it. A run that ends without an output is a tool error whose text names the
//! outcome (`invalid_output`, `budget_exhausted`, …) and never carries a rejected value.
//!
//! All of rig's API that the adapter uses is in this one file: rig's tool contract changes
//! between minor versions, and the dependency is pinned to one.
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use subcontract::host::Host;
//! use subcontract::model::{ScriptStep, ScriptedModel};
//! use subcontract::spec::load_spec_str;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let spec = load_spec_str(std::path::Path::new("shout.toml"), r#"
//!     name = "shout"
//!     description = "Says it louder."
//!     system = "Repeat the text in capitals."
//!     [input]
//!     type = "object"
//!     properties.text = { type = "string", maxLength = 50 }
//!     required = ["text"]
//!     [output]
//!     type = "string"
//!     maxLength = 50
//! "#)?;
//! // The sub-agent's model; any `Model` (a provider, a recording) does.
//! let model = Arc::new(ScriptedModel::queue("scripted:demo", vec![ScriptStep::text("HI")]));
//! let parent = Host::builder().model(model).build()?.build();
//!
//! // Register it with a rig agent: `AgentBuilder::new(model).dynamic_tool(tool)`.
//! let tool = subcontract::rig::tool(&spec, &parent)?;
//! assert_eq!(tool.definition().parameters["properties"]["text"]["maxLength"], 50);
//!
//! let out = tool.execute(json!({"text": "hi"})).await?;
//! assert_eq!(out.as_json(), Some(&json!("HI")));
//! # Ok(()) }
//! ```

use rig_core::message::{EmptyToolName, ToolName};
use rig_core::tool::{DynamicTool, ToolErrorKind, ToolExecutionError, ToolOutput};
use serde_json::Value;

use crate::ctx::Ctx;
use crate::outcome::{Outcome, RunResult};
use crate::spec::DynSpec;

/// `spec` as a rig tool; each call runs it as a child of `parent` (usually a host's root
/// context, from [`Host::builder`](crate::host::Host::builder)), so the parent's budget,
/// depth limit, tools and gate bound every call. Register the tool with
/// `AgentBuilder::dynamic_tool`.
///
/// The tool's parameters are the spec's input schema in full (an object schema, as a tool's
/// parameters must be: a spec whose input is not an object is offered `{"type": "object"}`,
/// and its contract still checks every call). Its result is the validated output as one JSON
/// block. A run without an output is a [`ToolExecutionError`] whose [`code`] is the outcome's
/// name and whose text is the one our own host gives a parent model.
///
/// Errors only when the spec's name is empty, which a built spec's never is.
///
/// [`code`]: ToolExecutionError::code
pub fn tool(spec: impl Into<DynSpec>, parent: &Ctx) -> Result<DynamicTool, EmptyToolName> {
    let spec: DynSpec = spec.into();
    let name = ToolName::new(spec.name())?;
    let description = spec.description().to_string();
    let parameters = Value::Object(spec.object_input_schema());
    let parent = parent.clone();
    Ok(DynamicTool::new(
        name,
        description,
        parameters,
        move |args: Value| {
            let (spec, parent) = (spec.clone(), parent.clone());
            Box::pin(async move {
                let run = spec.call_json(args, &parent).await;
                into_tool_result(spec.name(), run)
            })
        },
    ))
}

/// Several specs as rig tools, each a child of `parent` (for `AgentBuilder::dynamic_tools`).
pub fn tools<S: Into<DynSpec>>(
    specs: impl IntoIterator<Item = S>,
    parent: &Ctx,
) -> Result<Vec<DynamicTool>, EmptyToolName> {
    specs.into_iter().map(|s| tool(s, parent)).collect()
}

/// A finished run as rig sees it: the validated output, or an error naming the outcome.
fn into_tool_result(spec: &str, run: RunResult<Value>) -> Result<ToolOutput, ToolExecutionError> {
    match (run.outcome, run.output) {
        (Outcome::Completed, Some(output)) => Ok(ToolOutput::json(output)),
        (outcome, _) => {
            let text =
                crate::run::ended_without_result(spec, outcome, run.turns, run.error.as_ref());
            tracing::debug!(spec, %outcome, turns = run.turns, "rig tool call ended without a result");
            let mut error =
                ToolExecutionError::new(error_kind(outcome), text).with_code(outcome.as_str());
            if let Some(failure) = run.error {
                error = error.with_source(failure);
            }
            Err(error)
        }
    }
}

/// rig's kind for an outcome, which its retry policy and telemetry read.
fn error_kind(outcome: Outcome) -> ToolErrorKind {
    match outcome {
        Outcome::InvalidInput => ToolErrorKind::InvalidArgs,
        Outcome::Timeout => ToolErrorKind::Timeout,
        Outcome::Cancelled => ToolErrorKind::Cancelled,
        Outcome::Denied => ToolErrorKind::PermissionDenied,
        Outcome::ModelError => ToolErrorKind::Provider,
        // Budget, turns, a stall and a rejected output: the sub-agent's own limits, not rig's
        // categories; a retry is the caller's decision.
        Outcome::BudgetExhausted
        | Outcome::MaxTurns
        | Outcome::Stalled
        | Outcome::InvalidOutput
        | Outcome::Completed => ToolErrorKind::Other,
    }
}
