//! Shared fixtures: a bounded findings contract, host/child specs, and scripted models.

use std::sync::Arc;

use serde_json::{json, Value};
use subcontract::model::{ModelRequest, ScriptStep, ScriptedModel};
use subcontract::{SubAgentSpec, ToolOutput};

pub fn findings_schema() -> Value {
    json!({
        "type": "object", "required": ["findings", "gaps"], "additionalProperties": false,
        "properties": {
            "findings": {"type": "array", "maxItems": 5, "items": {
                "type": "object", "additionalProperties": false, "required": ["claim", "source_ids"],
                "properties": {
                    "claim": {"type": "string", "maxLength": 300},
                    "source_ids": {"type": "array", "minItems": 1, "maxItems": 5, "items": {"type": "string", "maxLength": 64}}
                }}},
            "gaps": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 200}}
        }
    })
}

pub fn question_schema() -> Value {
    json!({"type": "object", "required": ["question"], "additionalProperties": false,
           "properties": {"question": {"type": "string", "minLength": 3, "maxLength": 500}}})
}

pub fn good_findings() -> Value {
    json!({"findings": [{"claim": "It uses tokio.", "source_ids": ["Cargo.toml"]}], "gaps": []})
}

/// A sub-agent spec over JSON with the findings contract.
pub fn research_spec(name: &str, tools: &[&str]) -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic(name, question_schema(), findings_schema())
        .description("Investigate a question and return findings.")
        .system(format!("CHILD {name}"))
        .tools(tools.iter().copied())
        .max_turns(4)
        .build()
        .expect("the test spec is valid")
}

/// A host spec whose output is bounded text.
pub fn host_spec(tools: &[&str]) -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic(
        "host",
        json!({"type": "object"}),
        json!({"type": "string", "maxLength": 2000}),
    )
    .description("The host agent.")
    .system("HOST")
    .tools(tools.iter().copied())
    .max_turns(6)
    .build()
    .expect("the host spec is valid")
}

/// Turn number (1-based) of a request: one user message, then two messages per turn.
pub fn turn_of(req: &ModelRequest<'_>) -> usize {
    req.messages.len().div_ceil(2)
}

/// A scripted model that answers by system prompt: `f(system, turn, request)`.
pub fn model(
    f: impl Fn(&str, usize, &ModelRequest<'_>) -> ScriptStep + Send + Sync + 'static,
) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn("scripted:test", move |req| {
        f(req.system, turn_of(&req), &req)
    }))
}

pub fn lookup_tool(name: &str) -> Arc<dyn subcontract::Tool> {
    subcontract::FnTool::new(
        name.to_string(),
        "Looks something up.",
        json!({"type": "object", "properties": {"q": {"type": "string", "maxLength": 100}}, "additionalProperties": false}),
        |_args| async { ToolOutput::text("constant-tool-result") },
    )
}
