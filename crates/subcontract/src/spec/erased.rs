//! The type-erased spec, [`DynSpec`]: any spec, typed or loaded from TOML, seen over JSON
//! values. What every host that speaks JSON takes: the MCP server, both batch engines, a
//! worker, another agent framework's tool adapter.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::core::{Limits, OutputKind, OutputMode, OutputText, SpecCore};
use crate::contract::Contract;
use crate::ctx::{ChildTerms, Ctx, Delegate};
use crate::outcome::{Failure, RunResult};
use crate::run::{self, AgentTool};
use crate::tool::Tool;

/// The property a non-object output is wrapped in where a host needs an object
/// ([`ToolFormat::Mcp`]).
pub const WRAP_KEY: &str = "result";

/// A spec with its types erased: input and output are JSON values. Made from any
/// [`SubAgentSpec`](crate::SubAgentSpec) with [`SubAgentSpec::erase`](crate::SubAgentSpec::erase) (or `From`); cheap to clone. The contracts,
/// limits and run loop are the spec's own: a typed spec's `validator` rules still hold on
/// every output a `DynSpec` returns.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
/// use subcontract::spec::{DynSpec, ToolFormat};
/// use subcontract::SubAgentSpec;
/// use validator::Validate;
///
/// #[derive(Serialize, Deserialize, JsonSchema, Validate)]
/// struct Q { #[validate(length(max = 200))] q: String }
/// #[derive(Serialize, Deserialize, JsonSchema, Validate)]
/// #[serde(deny_unknown_fields)]
/// struct A { #[validate(length(max = 10))] a: String }
///
/// let spec = SubAgentSpec::<Q, A>::builder("ask")
///     .description("Answers in a word.")
///     .system("Answer in one word.")
///     .build()
///     .unwrap();
/// let erased: DynSpec = spec.erase();
/// let def = erased.tool_definition(ToolFormat::Openai);
/// assert_eq!(def["function"]["name"], "ask");
/// ```
#[derive(Clone)]
pub struct DynSpec {
    core: Arc<SpecCore>,
}

impl std::fmt::Debug for DynSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core.fmt(f)
    }
}

/// A host's format for a tool definition ([`DynSpec::tool_definition`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolFormat {
    /// `{name, description, input_schema, output_schema}`, the schemas in full.
    JsonSchema,
    /// An OpenAI function tool (`{"type": "function", "function": {…}}`), strict, its
    /// parameters in OpenAI's dialect.
    Openai,
    /// An Anthropic tool (`{name, description, input_schema, strict}`), in Anthropic's dialect.
    Anthropic,
    /// An MCP tool (`{name, description, inputSchema, outputSchema}`); a non-object output is
    /// wrapped as `{"result": …}`.
    Mcp,
}

/// Itself: so that a function over any spec, taking `impl AsRef<DynSpec>`, takes a `DynSpec`
/// as it takes a [`SubAgentSpec`](crate::SubAgentSpec).
impl AsRef<DynSpec> for DynSpec {
    fn as_ref(&self) -> &DynSpec {
        self
    }
}

/// A spec in another spec's tool list: the sub-agent it may call.
impl crate::tool::ToolRef for DynSpec {
    fn tool_name(&self) -> &str {
        self.name()
    }
}

impl Delegate for DynSpec {
    fn terms(&self) -> ChildTerms<'_> {
        self.core.terms()
    }
}

impl DynSpec {
    pub(crate) fn from_core(core: Arc<SpecCore>) -> Self {
        DynSpec { core }
    }

    pub(crate) fn core(&self) -> &SpecCore {
        &self.core
    }

    /// The tool name a host sees.
    pub fn name(&self) -> &str {
        &self.core.def.name
    }
    /// What it is for.
    pub fn description(&self) -> &str {
        &self.core.def.description
    }
    /// Its system prompt.
    pub fn system(&self) -> &str {
        &self.core.def.system
    }
    /// The tools it may use (each must be held by the parent).
    pub fn tools(&self) -> &[String] {
        &self.core.def.tools
    }
    /// Its limits.
    pub fn limits(&self) -> &Limits {
        &self.core.def.limits
    }
    /// The model it asks for, if not its parent's.
    pub fn model(&self) -> Option<&str> {
        self.core.def.model.as_deref()
    }
    /// The input contract.
    pub fn input_contract(&self) -> &Contract {
        &self.core.input
    }
    /// The output contract.
    pub fn output_contract(&self) -> &Contract {
        &self.core.output
    }
    /// What the output is: JSON, or the final text.
    pub fn output_kind(&self) -> OutputKind {
        self.core.output_kind
    }
    /// How a JSON output travels from the model.
    pub fn output_mode(&self) -> OutputMode {
        self.core.def.output_mode
    }
    /// Whether the first turn requires a call of one of the spec's own tools
    /// ([`SpecBuilder::require_tool_first`](crate::SpecBuilder::require_tool_first)).
    pub fn require_tool_first(&self) -> bool {
        self.core.def.require_tool_first
    }
    /// Prompt caching asked for each model call, if the spec sets it.
    pub fn prompt_cache(&self) -> Option<crate::model::PromptCache> {
        self.core.def.prompt_cache
    }
    /// Sampling settings sent with each model call.
    pub fn sampling(&self) -> crate::model::Sampling {
        self.core.def.sampling
    }
    /// Contract examples (input, output), each validated when the spec was built.
    pub fn examples(&self) -> &[(Value, Value)] {
        &self.core.def.examples
    }
    /// How it acts, if it does: its `[workspace]` ([`WorkspacePolicy`](crate::act::WorkspacePolicy)).
    pub fn workspace(&self) -> &crate::act::WorkspacePolicy {
        &self.core.def.workspace
    }
    /// Where its output grounds values ([`x-grounded`](crate::ground)), if anywhere.
    pub fn grounding(&self) -> Option<&crate::ground::Grounding> {
        self.core.grounding.as_deref()
    }

    /// The spec as an ordinary tool of a host's [`ToolSet`](crate::ToolSet): a host sees its
    /// name, description and input schema; a call forks a child context, runs the sub-agent,
    /// and returns its validated output as compact JSON, or an error result naming the
    /// outcome.
    pub fn as_tool(&self) -> Arc<dyn Tool> {
        Arc::new(AgentTool::new(self.core.clone()))
    }

    /// Forks a child of `parent` and runs the sub-agent on `args`, as a host's tool call
    /// does: the input is checked against the input contract (a failure is an
    /// `invalid_input` result), and the output, when there is one, has passed every check of
    /// the output contract, a typed spec's rules included.
    pub async fn call_json(&self, args: Value, parent: &Ctx) -> RunResult<Value> {
        let r = run::run_child(&self.core, args, parent, OutputText::Write).await;
        into_value(r)
    }

    /// Runs the sub-agent on `args` in `ctx` itself (for a host: the root context).
    pub async fn run_json(&self, args: Value, ctx: &Ctx) -> RunResult<Value> {
        let r = run::run_core(&self.core, args, ctx, OutputText::Write).await;
        into_value(r)
    }

    /// Checks an output exactly as the run loop does before a parent sees it, but for grounded
    /// values (`x-grounded`), which need a run's evidence
    /// ([`Grounding::check`](crate::ground::Grounding::check)).
    pub fn validate_output(&self, output: &Value) -> Result<(), Vec<crate::Violation>> {
        self.core
            .accept_output(output, OutputText::Skip)
            .map(|_| ())
    }

    /// The spec as the tool definition a host registers, in `format`.
    pub fn tool_definition(&self, format: ToolFormat) -> Value {
        let (name, description) = (self.name(), self.description());
        let input: &Value = self.core.input.schema();
        let output: &Value = self.core.output.schema();
        match format {
            ToolFormat::JsonSchema => json!({
                "name": name, "description": description,
                "input_schema": input, "output_schema": output,
            }),
            ToolFormat::Openai => json!({
                "type": "function",
                "function": {
                    "name": name, "description": description,
                    "parameters": crate::provider::dialect::openai_strict(input), "strict": true,
                }
            }),
            // Strict tool use refuses bounds, so the dialect restates them in descriptions;
            // the tool must then be marked strict, or it would be registered with its bounds
            // gone.
            ToolFormat::Anthropic => json!({
                "name": name, "description": description,
                "input_schema": crate::provider::dialect::anthropic(input), "strict": true,
            }),
            ToolFormat::Mcp => json!({
                "name": name, "description": description,
                "inputSchema": self.object_input_schema(),
                "outputSchema": Value::Object(self.object_output_schema().0),
            }),
        }
    }

    /// The input schema as an object schema (a tool's parameters must be one): the schema
    /// itself, or `{"type": "object"}` for a non-object one, whose contract still checks every
    /// call.
    pub fn object_input_schema(&self) -> Map<String, Value> {
        match self.core.input.schema().as_ref() {
            Value::Object(m) => m.clone(),
            _ => Map::from_iter([("type".to_string(), json!("object"))]),
        }
    }

    /// The output schema as an object schema, and whether it was wrapped: a non-object output
    /// is served as `{"result": …}` where a host needs an object (MCP's `outputSchema`), with
    /// its definitions moved to the root, where its `#/$defs/…` references point.
    pub fn object_output_schema(&self) -> (Map<String, Value>, bool) {
        let schema: &Value = self.core.output.schema();
        match schema {
            Value::Object(m) if m.get("type").and_then(Value::as_str) == Some("object") => {
                (m.clone(), false)
            }
            _ => {
                let mut inner = schema.clone();
                let mut root = Map::new();
                root.insert("type".into(), json!("object"));
                if let Value::Object(m) = &mut inner {
                    for key in ["$schema", "$defs", "definitions"] {
                        if let Some(v) = m.remove(key) {
                            root.insert(key.into(), v);
                        }
                    }
                }
                root.insert("properties".into(), json!({ WRAP_KEY: inner }));
                root.insert("required".into(), json!([WRAP_KEY]));
                root.insert("additionalProperties".into(), json!(false));
                (root, true)
            }
        }
    }
}

/// A run's output as a JSON value: a spec over values holds it as one; a typed spec's output
/// is read back from the compact JSON the run wrote when it checked it.
fn into_value(r: RunResult<crate::spec::core::Accepted>) -> RunResult<Value> {
    r.map_output(|(text, any)| match any.downcast::<Value>() {
        Ok(v) => Ok(*v),
        Err(_) => text
            .as_deref()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
            // Written by us from a checked value: reported, never a panic.
            .ok_or_else(|| {
                Failure::OutputType("internal: the output's JSON could not be read back".into())
            }),
    })
}
