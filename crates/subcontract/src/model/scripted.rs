//! A model that answers from a script: for tests, benchmarks and offline demos.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::SUBMIT_TOOL;
use super::{Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolCall, Usage};

/// One scripted answer: a response (or an error) and how long to wait before giving it.
#[derive(Debug, Clone)]
pub struct ScriptStep {
    /// What the model answers.
    pub response: Result<ModelResponse, ModelError>,
    /// Simulated latency.
    pub delay: Duration,
}

impl ScriptStep {
    /// A plain text answer that ends the turn.
    pub fn text(text: impl Into<String>) -> Self {
        Self::ok(ModelResponse {
            text: Some(text.into()),
            tool_calls: Vec::new(),
            usage: Usage::default(),
            stop_reason: StopReason::EndTurn,
        })
    }

    /// One tool call.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Self::tool_calls(vec![(name.into(), arguments)])
    }

    /// Several tool calls in one response (call ids `call_0`, `call_1`, …).
    pub fn tool_calls(calls: Vec<(String, Value)>) -> Self {
        let tool_calls = calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, arguments))| ToolCall {
                id: format!("call_{i}"),
                name,
                arguments: arguments.into(),
            })
            .collect();
        Self::ok(ModelResponse {
            text: None,
            tool_calls,
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
        })
    }

    /// Submits `output` as the sub-agent's final answer (a call of the submission tool).
    pub fn submit(output: Value) -> Self {
        Self::tool_call(SUBMIT_TOOL, output)
    }

    /// A model failure.
    pub fn error(error: ModelError) -> Self {
        ScriptStep {
            response: Err(error),
            delay: Duration::ZERO,
        }
    }

    /// Any response.
    pub fn ok(response: ModelResponse) -> Self {
        ScriptStep {
            response: Ok(response),
            delay: Duration::ZERO,
        }
    }

    /// Sets the reported usage.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        if let Ok(r) = &mut self.response {
            r.usage = Usage::new(input_tokens, output_tokens);
        }
        self
    }

    /// Waits `delay` before answering (the wait is cancelled with the run).
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

type ScriptFn = dyn Fn(ModelRequest<'_>) -> ScriptStep + Send + Sync;

type Queue = Mutex<VecDeque<ScriptStep>>;

enum Script {
    Queue(Queue),
    Function(Box<ScriptFn>),
    /// One queue per spec name, in the order given (few specs: a list beats a map).
    PerSpec(Vec<(String, Queue)>),
}

/// A model that answers from a script: a queue of steps taken in order, a queue per spec
/// ([`per_spec`](Self::per_spec): a host and its sub-agents, each scripted by name), or a
/// function of the request. A function is the right choice when several runs of one spec
/// share the model concurrently: it answers each request by its content, not by arrival
/// order.
///
/// ```
/// # tokio_test_block(async {
/// use serde_json::json;
/// use subcontract::model::{Model, ModelRequest, ScriptStep, ScriptedModel};
///
/// let model = ScriptedModel::queue("scripted:demo", vec![ScriptStep::text("hello")]);
/// let req = ModelRequest::new("", &[], &[], 100);
/// assert_eq!(model.complete(req).await.unwrap().text.as_deref(), Some("hello"));
/// assert!(model.complete(req).await.is_err()); // the script is used up
/// # });
/// # fn tokio_test_block(f: impl std::future::Future<Output = ()>) {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
pub struct ScriptedModel {
    id: String,
    script: Script,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// Answers with `steps` in order; after the last one every call fails with
    /// [`ModelError::Exhausted`].
    pub fn queue(id: impl Into<String>, steps: Vec<ScriptStep>) -> Self {
        ScriptedModel {
            id: id.into(),
            script: Script::Queue(Mutex::new(steps.into())),
        }
    }

    /// Answers each run from the script of its spec: `scripts` pairs a spec's name with its
    /// steps, taken in order by that spec's runs; `host` names a host's own model
    /// ([`Ctx::ask`](crate::Ctx::ask)). The name is the request's
    /// [`spec`](ModelRequest::spec), so one model serves a host and every sub-agent it
    /// calls, each with a script of its own. A spec with no script, or a script used up,
    /// fails the call with [`ModelError::Exhausted`] naming it.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use serde_json::json;
    /// use subcontract::model::{Model, ModelRequest, ScriptStep, ScriptedModel};
    ///
    /// let model = ScriptedModel::per_spec("scripted:demo", [
    ///     ("host", vec![ScriptStep::tool_call("lookup", json!({"city": "Lyon"}))]),
    ///     ("lookup", vec![ScriptStep::submit(json!("France"))]),
    /// ]);
    /// let asked = |spec| ModelRequest::new("", &[], &[], 100).with_spec(spec);
    /// let child = model.complete(asked("lookup")).await.unwrap();
    /// assert_eq!(child.tool_calls[0].name, "submit_output");
    /// let host = model.complete(asked("host")).await.unwrap();
    /// assert_eq!(host.tool_calls[0].name, "lookup");
    /// let e = model.complete(asked("other")).await.unwrap_err();
    /// assert!(e.to_string().contains("no script for spec `other`"), "{e}");
    /// # });
    /// ```
    pub fn per_spec<N: Into<String>>(
        id: impl Into<String>,
        scripts: impl IntoIterator<Item = (N, Vec<ScriptStep>)>,
    ) -> Self {
        ScriptedModel {
            id: id.into(),
            script: Script::PerSpec(
                scripts
                    .into_iter()
                    .map(|(name, steps)| (name.into(), Mutex::new(steps.into())))
                    .collect(),
            ),
        }
    }

    /// Answers each request with `f(request)`.
    pub fn from_fn(
        id: impl Into<String>,
        f: impl Fn(ModelRequest<'_>) -> ScriptStep + Send + Sync + 'static,
    ) -> Self {
        ScriptedModel {
            id: id.into(),
            script: Script::Function(Box::new(f)),
        }
    }
}

#[async_trait]
impl Model for ScriptedModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn complete(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let step = match &self.script {
            Script::Queue(q) => next(q).ok_or_else(|| {
                ModelError::Exhausted(format!("scripted model {} has no more responses", self.id))
            })?,
            Script::Function(f) => f(request),
            Script::PerSpec(scripts) => {
                let spec = request.spec.unwrap_or("");
                let Some((_, q)) = scripts.iter().find(|(name, _)| name == spec) else {
                    let names: Vec<&str> = scripts.iter().map(|(n, _)| n.as_str()).collect();
                    return Err(ModelError::Exhausted(format!(
                        "scripted model {} has no script for spec `{spec}`; it scripts {}",
                        self.id,
                        names.join(", ")
                    )));
                };
                next(q).ok_or_else(|| {
                    ModelError::Exhausted(format!(
                        "scripted model {} has no more responses for spec `{spec}`",
                        self.id
                    ))
                })?
            }
        };
        if !step.delay.is_zero() {
            tokio::time::sleep(step.delay).await;
        }
        step.response
    }
}

/// The next step of a queue (a poisoned lock still holds a usable queue).
fn next(q: &Queue) -> Option<ScriptStep> {
    q.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .pop_front()
}
