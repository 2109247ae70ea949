//! The `example` model: answers every spec with its first contract example. Offline,
//! deterministic, and always valid, so `subcontract run` and `subcontract mcp` can be tried
//! (and tested) with no key and no network. It reports a usage of one token per four bytes of
//! request and answer (priced like any model with `--prices`, under the id `example`), and
//! waits `SUBCONTRACT_EXAMPLE_DELAY_MS` milliseconds before answering when that is set, so a
//! batch can be watched, interrupted and resumed offline.
//!
//! A spec whose output grounds sources (`x-grounded = "source"`) is answered as a careful
//! model would: with its submission it reads, with `read_file`, each source its example cites
//! (in the same response, so a run still takes one turn). Its example then holds in a
//! workspace that has those files, and fails as ungrounded, visibly, in one that does not.

use std::collections::HashMap;

use async_trait::async_trait;
use serde_json::Value;

use subcontract::model::{
    Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolCall, Usage, SUBMIT_TOOL,
};
use subcontract::SubAgentSpec;

/// Answers a sub-agent by its system prompt with the output of its first `[[examples]]`
/// entry; a spec without examples gets a [`ModelError::Exhausted`] (which ends the run as
/// `model_error`, visibly).
#[derive(Debug, Clone, Default)]
pub struct ExampleModel {
    by_system: HashMap<String, Value>,
    /// The sources each spec's example cites, by system prompt, for specs that ground them.
    reads: HashMap<String, Vec<String>>,
    delay: std::time::Duration,
}

impl ExampleModel {
    /// Learns the first example of each spec.
    pub fn new<'a, I: 'a, O: 'a>(specs: impl IntoIterator<Item = &'a SubAgentSpec<I, O>>) -> Self {
        let mut reads = HashMap::new();
        let mut by_system = HashMap::new();
        for s in specs {
            let Some((_, out)) = s.examples().first() else {
                continue;
            };
            if let Some(g) = s.grounding() {
                // Each source read once: the same call twice in a turn is a repeat.
                let mut cited: Vec<String> = Vec::new();
                for id in g.source_values(out) {
                    if !cited.contains(&id) {
                        cited.push(id);
                    }
                }
                if !cited.is_empty() {
                    reads.insert(s.system().to_string(), cited);
                }
            }
            by_system.insert(s.system().to_string(), out.clone());
        }
        ExampleModel {
            by_system,
            reads,
            delay: std::time::Duration::ZERO,
        }
    }

    /// Waits `delay` before each answer (a stand-in for a provider's latency).
    pub fn with_delay(mut self, delay: std::time::Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A `read_file` call for each of `paths`.
fn read_calls(paths: &[String]) -> impl Iterator<Item = ToolCall> + '_ {
    paths.iter().enumerate().map(|(i, p)| ToolCall {
        id: format!("example_read_{}", i + 1),
        name: "read_file".into(),
        arguments: serde_json::json!({ "path": p }).into(),
    })
}

/// One token per four bytes, rounded up: a deterministic stand-in for a provider's count.
fn tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

#[async_trait]
impl Model for ExampleModel {
    fn id(&self) -> &str {
        "example"
    }

    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let Some(output) = self.by_system.get(request.system) else {
            return Err(ModelError::Exhausted(
                "the example model has no [[examples]] entry for this spec to answer with".into(),
            ));
        };
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let read = request.system.len()
            + request
                .messages
                .iter()
                .map(|m| serde_json::to_string(m).map_or(0, |t| t.len()))
                .sum::<usize>();
        let usage = Usage::new(tokens(read), tokens(output.to_string().len()));
        // A spec that grounds sources: read them in the same response, when the turn offers
        // reading (the run judges such a submission after the reads).
        let offers_read = request.tools.iter().any(|t| &*t.name == "read_file");
        let reads: &[String] = match self.reads.get(request.system) {
            Some(paths) if offers_read => paths,
            _ => &[],
        };
        let submit = request.tools.iter().any(|t| &*t.name == SUBMIT_TOOL);
        // A turn that asks for a read (after an ungrounded answer) gets the reads alone.
        if !submit && !reads.is_empty() {
            return Ok(ModelResponse {
                text: None,
                tool_calls: read_calls(reads).collect(),
                usage,
                stop_reason: StopReason::ToolUse,
            });
        }
        Ok(match (submit, output) {
            (true, _) => ModelResponse {
                text: None,
                tool_calls: read_calls(reads)
                    .chain([ToolCall {
                        id: "example_1".into(),
                        name: SUBMIT_TOOL.into(),
                        arguments: output.clone().into(),
                    }])
                    .collect(),
                usage,
                stop_reason: StopReason::ToolUse,
            },
            (false, Value::String(s)) => ModelResponse {
                text: Some(s.clone()),
                tool_calls: Vec::new(),
                usage,
                stop_reason: StopReason::EndTurn,
            },
            (false, other) => ModelResponse {
                text: Some(other.to_string()),
                tool_calls: Vec::new(),
                usage,
                stop_reason: StopReason::EndTurn,
            },
        })
    }
}
