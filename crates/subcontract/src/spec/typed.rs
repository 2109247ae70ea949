//! The typed view of a spec, `SubAgentSpec<I, O>`: what a user builds, runs and hands to a
//! host as a tool.

use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use super::core::{
    downcast_output, with_value, Limits, OutputKind, OutputMode, OutputText, SpecCore,
};
use super::erased::{DynSpec, ToolFormat};
use crate::contract::{Contract, Violation};
use crate::ctx::Ctx;
use crate::ground::Grounding;
use crate::model::{PromptCache, Sampling};
use crate::outcome::RunResult;
use crate::run;
use crate::tool::Tool;

/// A typed sub-agent: input `I`, output `O`, description, system prompt, narrowed tools,
/// limits and compiled contracts. Cheap to clone.
///
/// Build one with [`SubAgentSpec::builder`] (typed) or [`SubAgentSpec::dynamic`] (JSON
/// Schemas, as TOML specs are); run it with [`run`](Self::run) / [`run_child`](Self::run_child),
/// or hand it to a host with [`as_tool`](Self::as_tool).
///
/// What does not depend on `I` and `O` (name, limits, contracts, tool definitions) is
/// [`DynSpec`]'s: the accessors here forward to it, [`erase`](Self::erase) gives it, and a
/// function over any spec takes `impl AsRef<DynSpec>`.
pub struct SubAgentSpec<I, O> {
    /// The spec itself, over JSON values.
    erased: DynSpec,
    _types: PhantomData<fn(I) -> O>,
}

impl<I, O> Clone for SubAgentSpec<I, O> {
    fn clone(&self) -> Self {
        SubAgentSpec {
            erased: self.erased.clone(),
            _types: PhantomData,
        }
    }
}

impl<I, O> std::fmt::Debug for SubAgentSpec<I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core().fmt(f)
    }
}

/// The erased spec, borrowed: what a function over any spec takes, typed or not.
impl<I, O> AsRef<DynSpec> for SubAgentSpec<I, O> {
    fn as_ref(&self) -> &DynSpec {
        &self.erased
    }
}

impl<I, O> SubAgentSpec<I, O> {
    pub(crate) fn from_core(core: Arc<SpecCore>) -> Self {
        SubAgentSpec {
            erased: DynSpec::from_core(core),
            _types: PhantomData,
        }
    }

    /// The untyped core.
    pub(crate) fn core(&self) -> &SpecCore {
        self.erased.core()
    }

    /// The same spec over JSON values.
    pub fn erase(&self) -> DynSpec {
        self.erased.clone()
    }
}

/// The accessors of [`DynSpec`], forwarded: a typed spec is read as its erased one is.
impl<I, O> SubAgentSpec<I, O> {
    /// The tool name a host sees ([`DynSpec::name`]).
    pub fn name(&self) -> &str {
        self.erased.name()
    }
    /// What it is for ([`DynSpec::description`]).
    pub fn description(&self) -> &str {
        self.erased.description()
    }
    /// Its system prompt ([`DynSpec::system`]).
    pub fn system(&self) -> &str {
        self.erased.system()
    }
    /// The tools it may use ([`DynSpec::tools`]).
    pub fn tools(&self) -> &[String] {
        self.erased.tools()
    }
    /// Its limits ([`DynSpec::limits`]).
    pub fn limits(&self) -> &Limits {
        self.erased.limits()
    }
    /// The model it asks for, if not its parent's ([`DynSpec::model`]).
    pub fn model(&self) -> Option<&str> {
        self.erased.model()
    }
    /// The input contract ([`DynSpec::input_contract`]).
    pub fn input_contract(&self) -> &Contract {
        self.erased.input_contract()
    }
    /// The output contract ([`DynSpec::output_contract`]).
    pub fn output_contract(&self) -> &Contract {
        self.erased.output_contract()
    }
    /// What the output is: JSON, or the final text ([`DynSpec::output_kind`]).
    pub fn output_kind(&self) -> OutputKind {
        self.erased.output_kind()
    }
    /// How a JSON output travels from the model ([`DynSpec::output_mode`]).
    pub fn output_mode(&self) -> OutputMode {
        self.erased.output_mode()
    }
    /// Whether the first turn requires a call of one of the spec's own tools
    /// ([`DynSpec::require_tool_first`]).
    pub fn require_tool_first(&self) -> bool {
        self.erased.require_tool_first()
    }
    /// Prompt caching asked for each model call, if the spec sets it
    /// ([`DynSpec::prompt_cache`]).
    pub fn prompt_cache(&self) -> Option<PromptCache> {
        self.erased.prompt_cache()
    }
    /// Sampling settings sent with each model call ([`DynSpec::sampling`]).
    pub fn sampling(&self) -> Sampling {
        self.erased.sampling()
    }
    /// Contract examples (input, output) ([`DynSpec::examples`]).
    pub fn examples(&self) -> &[(Value, Value)] {
        self.erased.examples()
    }
    /// How it acts, if it does ([`DynSpec::workspace`]).
    pub fn workspace(&self) -> &crate::act::WorkspacePolicy {
        self.erased.workspace()
    }
    /// Where its output grounds values, if anywhere ([`DynSpec::grounding`]).
    pub fn grounding(&self) -> Option<&Grounding> {
        self.erased.grounding()
    }
    /// The spec as an ordinary tool of a host's [`ToolSet`](crate::ToolSet)
    /// ([`DynSpec::as_tool`]).
    pub fn as_tool(&self) -> Arc<dyn Tool> {
        self.erased.as_tool()
    }
    /// Forks a child of `parent` and runs the sub-agent on `args` as a host's tool call does,
    /// over JSON values ([`DynSpec::call_json`]).
    pub async fn call_json(&self, args: Value, parent: &Ctx) -> RunResult<Value> {
        self.erased.call_json(args, parent).await
    }
    /// Runs the sub-agent on `args` in `ctx` itself, over JSON values
    /// ([`DynSpec::run_json`]).
    pub async fn run_json(&self, args: Value, ctx: &Ctx) -> RunResult<Value> {
        self.erased.run_json(args, ctx).await
    }
    /// The spec as the tool definition a host registers, in `format`
    /// ([`DynSpec::tool_definition`]).
    pub fn tool_definition(&self, format: ToolFormat) -> Value {
        self.erased.tool_definition(format)
    }
    /// The input schema as an object schema ([`DynSpec::object_input_schema`]).
    pub fn object_input_schema(&self) -> Map<String, Value> {
        self.erased.object_input_schema()
    }
    /// The output schema as an object schema, and whether it was wrapped
    /// ([`DynSpec::object_output_schema`]).
    pub fn object_output_schema(&self) -> (Map<String, Value>, bool) {
        self.erased.object_output_schema()
    }
}

impl<I, O: 'static> SubAgentSpec<I, O> {
    /// Checks an output exactly as the run loop does before a parent sees it — size, schema,
    /// then the typed decode and `validator` rules — and returns it decoded. Grounded values
    /// (`x-grounded`) are not checked here: that needs a run's evidence
    /// ([`Grounding::check`](crate::ground::Grounding::check)).
    pub fn validate_output(&self, output: &Value) -> Result<O, Vec<Violation>> {
        let (_, decoded) = self.core().accept_output(output, OutputText::Skip)?;
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
        let (_, decoded) = self.core().accept_output_json(text, OutputText::Skip)?;
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
        run::run_core(self.core(), value, ctx, OutputText::Skip)
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
        run::run_child(self.core(), value, parent, OutputText::Skip)
            .await
            .downcast()
    }
}

impl<I, O> From<SubAgentSpec<I, O>> for DynSpec {
    fn from(spec: SubAgentSpec<I, O>) -> Self {
        spec.erase()
    }
}

impl<I, O> From<&SubAgentSpec<I, O>> for DynSpec {
    fn from(spec: &SubAgentSpec<I, O>) -> Self {
        spec.erase()
    }
}

/// A spec in another spec's tool list: the sub-agent it may call.
impl<I, O> crate::tool::ToolRef for SubAgentSpec<I, O> {
    fn tool_name(&self) -> &str {
        self.erased.name()
    }
}

impl<I, O> crate::ctx::Delegate for SubAgentSpec<I, O> {
    fn terms(&self) -> crate::ctx::ChildTerms<'_> {
        self.core().terms()
    }
}
