//! The typed view of a spec, `SubAgentSpec<I, O>`: what a user builds, runs and hands to a
//! host as a tool.

use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::core::{
    downcast_output, with_value, Limits, OutputKind, OutputMode, OutputText, SpecCore,
};
use crate::contract::{Contract, Violation};
use crate::ctx::Ctx;
use crate::outcome::RunResult;
use crate::run::{self, AgentTool};
use crate::tool::Tool;

/// A typed sub-agent: input `I`, output `O`, description, system prompt, narrowed tools,
/// limits and compiled contracts. Cheap to clone.
///
/// Build one with [`SubAgentSpec::builder`] (typed) or [`SubAgentSpec::dynamic`] (JSON
/// Schemas, as TOML specs are); run it with [`run`](Self::run) / [`run_child`](Self::run_child),
/// or hand it to a host with [`as_tool`](Self::as_tool).
pub struct SubAgentSpec<I, O> {
    core: Arc<SpecCore>,
    _types: PhantomData<fn(I) -> O>,
}

impl<I, O> Clone for SubAgentSpec<I, O> {
    fn clone(&self) -> Self {
        SubAgentSpec {
            core: self.core.clone(),
            _types: PhantomData,
        }
    }
}

impl<I, O> std::fmt::Debug for SubAgentSpec<I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core.fmt(f)
    }
}

impl<I, O> SubAgentSpec<I, O> {
    pub(crate) fn from_core(core: Arc<SpecCore>) -> Self {
        SubAgentSpec {
            core,
            _types: PhantomData,
        }
    }

    /// The untyped core.
    pub(crate) fn core(&self) -> &SpecCore {
        &self.core
    }
    pub(crate) fn core_arc(&self) -> &Arc<SpecCore> {
        &self.core
    }
    /// The tool name a host sees.
    pub fn name(&self) -> &str {
        &self.core.name
    }
    /// What it is for.
    pub fn description(&self) -> &str {
        &self.core.description
    }
    /// Its system prompt.
    pub fn system(&self) -> &str {
        &self.core.system
    }
    /// The tools it may use (each must be held by the parent).
    pub fn tools(&self) -> &[String] {
        &self.core.tools
    }
    /// Its limits.
    pub fn limits(&self) -> &Limits {
        &self.core.limits
    }
    /// The model it asks for, if not its parent's.
    pub fn model(&self) -> Option<&str> {
        self.core.model.as_deref()
    }
    /// The input contract.
    pub fn input_contract(&self) -> &Contract {
        &self.core.input
    }
    /// The output contract.
    pub fn output_contract(&self) -> &Contract {
        &self.core.output
    }
    /// What the output is: JSON, or the final text (an output schema of `type: string`).
    pub fn output_kind(&self) -> OutputKind {
        self.core.output_kind
    }
    /// How a JSON output travels from the model.
    pub fn output_mode(&self) -> OutputMode {
        self.core.output_mode
    }
    /// Sampling settings sent with each model call.
    pub fn sampling(&self) -> crate::model::Sampling {
        self.core.sampling
    }
    /// Contract examples (input, output), each already validated when the spec was built.
    pub fn examples(&self) -> &[(Value, Value)] {
        &self.core.examples
    }

    /// Wraps the spec as a tool: a host sees its name, description and input schema; a call
    /// forks a child context, runs the sub-agent, and returns its validated output as compact
    /// JSON, or an error result naming the outcome.
    pub fn as_tool(&self) -> Arc<dyn Tool> {
        Arc::new(AgentTool::new(self.core.clone()))
    }
}

impl<I, O: 'static> SubAgentSpec<I, O> {
    /// Checks an output exactly as the run loop does before a parent sees it — size,
    /// schema, then the typed decode and `validator` rules — and returns it decoded.
    pub fn validate_output(&self, output: &Value) -> Result<O, Vec<Violation>> {
        let (_, decoded) = self.core.accept_output(output, OutputText::Skip)?;
        downcast_output(with_value(decoded, || output.clone())).map_err(|m| {
            vec![Violation {
                path: String::new(),
                message: m.into(),
            }]
        })
    }

    /// [`validate_output`](Self::validate_output) for an output as JSON text, the way a model
    /// sends it: parse, size, schema, then the typed decode and rules. Text that is not JSON
    /// is one violation at the root.
    ///
    /// Valid text is checked and decoded straight from a flat parse of the text, without
    /// building a `serde_json::Value` first; errors are reported exactly as `validate_output`
    /// reports them.
    ///
    /// ```
    /// use schemars::JsonSchema;
    /// use serde::{Deserialize, Serialize};
    /// use validator::Validate;
    /// use subcontract::SubAgentSpec;
    ///
    /// #[derive(Serialize, Deserialize, JsonSchema, Validate)]
    /// struct Q { q: String }
    /// #[derive(Debug, Serialize, Deserialize, JsonSchema, Validate)]
    /// #[serde(deny_unknown_fields)]
    /// struct A { #[validate(length(max = 10))] answer: String }
    ///
    /// let spec = SubAgentSpec::<Q, A>::builder("ask")
    ///     .description("Answers.")
    ///     .system("Answer.")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(spec.validate_output_json(r#"{"answer": "yes"}"#).unwrap().answer, "yes");
    /// let errs = spec.validate_output_json(r#"{"answer": "no, not at all"}"#).unwrap_err();
    /// assert_eq!(errs[0].path, "/answer");
    /// ```
    pub fn validate_output_json(&self, text: &str) -> Result<O, Vec<Violation>> {
        let (_, decoded) = self.core.accept_output_json(text, OutputText::Skip)?;
        downcast_output(decoded).map_err(|m| {
            vec![Violation {
                path: String::new(),
                message: m.into(),
            }]
        })
    }
}

impl<I: Serialize, O: Send + 'static> SubAgentSpec<I, O> {
    /// Runs the spec in `ctx` itself (for a host: `ctx` is the root context). The offered tools
    /// are those of the spec, each of which `ctx` must hold.
    pub async fn run(&self, input: &I, ctx: &Ctx) -> RunResult<O> {
        let value = match serde_json::to_value(input) {
            Ok(v) => v,
            Err(e) => return RunResult::input_not_serialisable(ctx, e),
        };
        run::run_core(&self.core, value, ctx, OutputText::Skip)
            .await
            .downcast()
    }

    /// Forks a child of `parent` for this spec and runs it there, as a host's call of
    /// [`as_tool`](Self::as_tool) would. A child that cannot be made ends as `denied`.
    pub async fn run_child(&self, input: &I, parent: &Ctx) -> RunResult<O> {
        let value = match serde_json::to_value(input) {
            Ok(v) => v,
            Err(e) => return RunResult::input_not_serialisable(parent, e),
        };
        run::run_child(&self.core, value, parent, OutputText::Skip)
            .await
            .downcast()
    }
}

impl<I, O> crate::ctx::Delegate for SubAgentSpec<I, O> {
    fn terms(&self) -> crate::ctx::ChildTerms<'_> {
        self.core.terms()
    }
}
