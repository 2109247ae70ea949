//! Building specs: typed (schemas from `schemars`, rules from `validator`) or dynamic (JSON
//! Schemas, as in TOML spec files). Both end in the same checks.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use validator::Validate;

use super::core::{Decoder, Limits, OutputKind, OutputMode, Source, SpecCore, SpecDef};
use super::SubAgentSpec;
use crate::contract::{violations_from_rules, Contract, Violation};
use crate::diag::{codes, shown};
use crate::json::compact_chars;
use crate::model::ToolDefinition;
use crate::model::{SUBMIT_DESCRIPTION, SUBMIT_TOOL};
use crate::tool::is_valid_name;

/// Where in a spec a [`SpecProblem`] is. A spec file turns it into a line and column
/// (`subcontract check`, [`load_spec`](crate::spec::load_spec)); a spec built in Rust has
/// nothing more precise than the spec itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecLocation {
    /// The spec's name.
    Name,
    /// The description.
    Description,
    /// The tool at this index of the spec's tool list.
    Tool(usize),
    /// One limit, by its [`Limits`] field name (`max_turns`, `timeout`, `max_cost_usd`, …).
    Limit(&'static str),
    /// One sampling setting, by its [`Sampling`](crate::model::Sampling) field name
    /// (`temperature`, `top_p`, `seed`).
    Sampling(&'static str),
    /// A place in the input or output schema.
    Schema {
        /// `input` or `output`.
        which: &'static str,
        /// A JSON Pointer into that schema; empty for its root.
        pointer: String,
    },
    /// The `max_output_chars` limit, which the output schema's worst case exceeds.
    MaxOutputChars,
    /// One key of the `[workspace]` table (`writes`, `checks`, `max_diff_lines`, …).
    Workspace(&'static str),
    /// One side of a contract example.
    Example {
        /// 0-based index in the spec's examples.
        index: usize,
        /// `input` or `output`.
        side: &'static str,
        /// A JSON Pointer to the first offending value in it; empty for the whole side.
        instance_path: String,
    },
}

/// One thing wrong with a spec: a stable code (the `subcontract check` codes of
/// `src/docs/invariants.md`, e.g. `bad-limits`, `output-too-large`), what is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecProblem {
    /// The stable code.
    pub code: &'static str,
    /// What is wrong, and where possible how to fix it.
    pub message: String,
    /// Where.
    pub at: SpecLocation,
}

impl std::fmt::Display for SpecProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)
    }
}

/// Why a spec could not be built: every problem found, not only the first.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec `{}`: {}", shown(spec), problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct SpecError {
    /// The spec's name, as given.
    pub spec: String,
    /// Every problem, in the order of the spec's parts; never empty.
    pub problems: Vec<SpecProblem>,
}

crate::debug_as_display!(SpecError);

impl SpecError {
    /// Whether some problem has this code.
    pub fn has(&self, code: &str) -> bool {
        self.problems.iter().any(|p| p.code == code)
    }
}

/// Builds a [`SubAgentSpec`]. Obtain one from [`SubAgentSpec::builder`] or
/// [`SubAgentSpec::dynamic`].
pub struct SpecBuilder<I, O> {
    /// The settings, written by the setters and kept as they are by the built spec.
    def: SpecDef,
    input_schema: Result<Value, String>,
    output_schema: Result<Value, String>,
    decode_input: Box<Decoder>,
    decode_output: Box<Decoder>,
    allow_unbounded: bool,
    _types: PhantomData<fn(I) -> O>,
}

pub(super) fn schema_of<T: JsonSchema>() -> Result<Value, String> {
    Ok(schemars::schema_for!(T).to_value())
}

pub(super) fn typed_decoder<T>() -> Box<Decoder>
where
    T: DeserializeOwned + Validate + Send + 'static,
{
    fn violation(e: impl std::fmt::Display) -> Vec<Violation> {
        vec![Violation {
            path: String::new(),
            message: crate::contract::decode_reason(&e.to_string()),
        }]
    }
    Box::new(|source: Source<'_>| {
        // Both deserialise in place: from &Value without copying it, from a tape without
        // building a Value.
        let t = match source {
            Source::Value(v) => T::deserialize(v).map_err(violation)?,
            Source::Tape(t) => t.decode::<T>().map_err(violation)?,
        };
        t.validate().map_err(|e| violations_from_rules(&e))?;
        Ok(Box::new(t) as Box<dyn Any + Send>)
    })
}

impl<I, O> SubAgentSpec<I, O>
where
    I: Serialize + DeserializeOwned + JsonSchema + Validate + Send + 'static,
    O: Serialize + DeserializeOwned + JsonSchema + Validate + Send + 'static,
{
    /// A builder for a typed spec. The input and output schemas come from `JsonSchema`
    /// (bounds written once, as `#[validate(...)]` attributes that schemars reads too), and
    /// `O`'s `validator` rules are enforced on every output.
    ///
    /// ```
    /// use schemars::JsonSchema;
    /// use serde::{Deserialize, Serialize};
    /// use validator::Validate;
    /// use subcontract::SubAgentSpec;
    ///
    /// #[derive(Serialize, Deserialize, JsonSchema, Validate)]
    /// #[serde(deny_unknown_fields)]
    /// struct Question { #[validate(length(min = 10, max = 500))] question: String }
    ///
    /// #[derive(Serialize, Deserialize, JsonSchema, Validate)]
    /// #[serde(deny_unknown_fields)]
    /// struct Answer { #[validate(length(max = 300))] answer: String }
    ///
    /// let spec = SubAgentSpec::<Question, Answer>::builder("ask")
    ///     .description("Answers one question from the workspace.")
    ///     .system("Answer briefly.")
    ///     .tools(["read_file"])
    ///     .max_turns(4)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(spec.output_contract().analysis().worst_case_chars, Some(313));
    /// ```
    pub fn builder(name: impl Into<String>) -> SpecBuilder<I, O> {
        SpecBuilder::new(
            name.into(),
            schema_of::<I>(),
            schema_of::<O>(),
            typed_decoder::<I>(),
            typed_decoder::<O>(),
        )
    }
}

impl SubAgentSpec<Value, Value> {
    /// A builder for a spec over JSON values, with the given input and output JSON Schemas.
    pub fn dynamic(
        name: impl Into<String>,
        input_schema: Value,
        output_schema: Value,
    ) -> SpecBuilder<Value, Value> {
        // JSON values have no rules beyond their schema, and the run keeps the value itself
        // (see `spec::with_value`): nothing to decode, nothing to copy.
        let nothing: fn() -> Box<Decoder> = || {
            Box::new(|source: Source<'_>| match source {
                Source::Value(_) => Ok(Box::new(()) as Box<dyn Any + Send>),
                Source::Tape(t) => Ok(Box::new(t.to_value(0)) as Box<dyn Any + Send>),
            })
        };
        SpecBuilder::new(
            name.into(),
            Ok(input_schema),
            Ok(output_schema),
            nothing(),
            nothing(),
        )
    }
}

impl<I, O> SpecBuilder<I, O> {
    pub(super) fn new(
        name: String,
        input_schema: Result<Value, String>,
        output_schema: Result<Value, String>,
        decode_input: Box<Decoder>,
        decode_output: Box<Decoder>,
    ) -> Self {
        SpecBuilder {
            def: SpecDef::new(name),
            input_schema,
            output_schema,
            decode_input,
            decode_output,
            allow_unbounded: false,
            _types: PhantomData,
        }
    }

    /// The builder with every setting replaced by `def`'s: how a spec file, whose settings
    /// the loader reads in one go, is built.
    pub(crate) fn with_def(mut self, def: SpecDef) -> Self {
        self.def = def;
        self
    }

    /// What it is for; hosts read this to decide when to call it.
    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.def.description = d.into();
        self
    }
    /// The system prompt of its fresh conversation.
    pub fn system(mut self, s: impl Into<String>) -> Self {
        self.def.system = s.into();
        self
    }
    /// Adds tools it may use, by name; each must be held by the parent when it runs. A host
    /// that holds the spec ([`HostBuilder::spec`](crate::host::HostBuilder::spec)) checks the
    /// names when it is built, with a "did you mean". A tool written in Rust is better named
    /// by value, with [`tool`](Self::tool).
    pub fn tools<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.def.add_tools(tools.into_iter().map(Into::into));
        self
    }
    /// Adds one tool it may use, named by the value the host holds: a [`#[tool]`](macro@crate::tool)
    /// function's tool type (`ReadSettingTool` for `read_setting`), any [`TypedTool`](crate::TypedTool), an `Arc<dyn Tool>`, or another spec (a
    /// sub-agent). A name as text works too (`.tool("grep")`).
    ///
    /// ```
    /// use subcontract::prelude::*;
    ///
    /// /// Reads one setting of the configuration.
    /// #[tool]
    /// async fn read_setting(
    ///     /// The setting's key.
    ///     #[validate(length(max = 40))]
    ///     key: String,
    /// ) -> Result<String, String> {
    ///     Ok(format!("{key} = on"))
    /// }
    ///
    /// let spec = SubAgentSpec::dynamic(
    ///     "settings",
    ///     serde_json::json!({"type": "string", "maxLength": 40}),
    ///     serde_json::json!({"type": "string", "maxLength": 40}),
    /// )
    /// .description("Answers questions about the settings.")
    /// .tool(&ReadSettingTool)
    /// .tool("grep")
    /// .build()?;
    /// assert_eq!(spec.tools(), ["read_setting", "grep"]);
    /// # Ok::<(), subcontract::SpecError>(())
    /// ```
    pub fn tool<T: crate::tool::ToolRef + ?Sized>(mut self, tool: &T) -> Self {
        self.def.add_tools([tool.tool_name().to_owned()]);
        self
    }
    /// All limits at once.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.def.limits = limits;
        self
    }
    /// Model turns allowed.
    pub fn max_turns(mut self, n: u32) -> Self {
        self.def.limits.max_turns = n;
        self
    }
    /// USD it may spend (its sub-agents included).
    pub fn max_cost_usd(mut self, usd: Decimal) -> Self {
        self.def.limits.max_cost_usd = Some(usd);
        self
    }
    /// Model calls it may make (its sub-agents included).
    pub fn max_model_calls(mut self, n: u64) -> Self {
        self.def.limits.max_model_calls = Some(n);
        self
    }
    /// Wall time allowed.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.def.limits.timeout = t;
        self
    }
    /// Largest output (compact JSON characters) the parent may receive.
    pub fn max_output_chars(mut self, n: usize) -> Self {
        self.def.limits.max_output_chars = n;
        self
    }
    /// Output tokens per model call.
    pub fn max_tokens_per_turn(mut self, n: u32) -> Self {
        self.def.limits.max_tokens_per_turn = n;
        self
    }
    /// Tool calls of one model response that run; calls past it get an error result.
    pub fn max_tool_calls_per_turn(mut self, n: usize) -> Self {
        self.def.limits.max_tool_calls_per_turn = n;
        self
    }
    /// Characters the tool results of one turn may add to the conversation; results past it
    /// are errors saying so.
    pub fn max_tool_result_chars_per_turn(mut self, n: usize) -> Self {
        self.def.limits.max_tool_result_chars_per_turn = n;
        self
    }
    /// Whether the run keeps an answer reserve in money and time (default on; see
    /// [`Limits::answer_reserve`]). Off trades a run cut short with an output for one that
    /// works to its limit and may end without one.
    pub fn answer_reserve(mut self, on: bool) -> Self {
        self.def.limits.answer_reserve = on;
        self
    }
    /// The model it uses (`provider:model`) instead of its parent's.
    pub fn model(mut self, m: impl Into<String>) -> Self {
        self.def.model = Some(m.into());
        self
    }
    /// Accepts an output schema that is unbounded or larger than `max_output_chars`. The size
    /// limit is still enforced on every actual output.
    pub fn allow_unbounded_output(mut self) -> Self {
        self.allow_unbounded = true;
        self
    }
    /// How a JSON output travels from the model (default [`OutputMode::Auto`]).
    pub fn output_mode(mut self, mode: OutputMode) -> Self {
        self.def.output_mode = mode;
        self
    }
    /// Prompt caching for every model call of the run: `Off`, or a TTL
    /// ([`PromptCache`](crate::model::PromptCache)). It wins over the host's setting (the
    /// CLI's `--prompt-cache`, [`CtxBuilder::prompt_cache`](crate::CtxBuilder::prompt_cache)),
    /// which wins over the model's own (`SUBCONTRACT_PROMPT_CACHE`, default 5 minutes).
    pub fn prompt_cache(mut self, cache: crate::model::PromptCache) -> Self {
        self.def.prompt_cache = Some(cache);
        self
    }
    /// Whether the first turn of a spec with tools requires a call of one of them (off by
    /// default). When on, the first turn offers the spec's own tools without the submission
    /// and sends `tool_choice` required, and the trace marks it `forced: first_turn`. A small
    /// model asked about files it has not read tends to answer at once with an invented,
    /// valid value; this makes it look first (on a 1.5B local model: 3 of 8 graded tasks
    /// passed without it, 5 with it; BENCHMARKS.md, "The levers, measured"). Off by default
    /// because the first turn then offers other tools than the later ones, so a provider's
    /// prompt cache written on it is not read on the second turn.
    pub fn require_tool_first(mut self, on: bool) -> Self {
        self.def.require_tool_first = on;
        self
    }
    /// The small-model aids of the run loop, to measure one turned off ([`Levers`]).
    ///
    /// [`Levers`]: super::core::Levers
    #[doc(hidden)]
    pub fn levers(mut self, levers: super::core::Levers) -> Self {
        self.def.levers = levers;
        self
    }
    /// Sampling settings for every model call of the run (default: the provider's).
    pub fn sampling(mut self, sampling: crate::model::Sampling) -> Self {
        self.def.sampling = sampling;
        self
    }
    /// The sampling temperature of every model call of the run.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.def.sampling.temperature = Some(temperature);
        self
    }
    /// How an acting sub-agent's working copy is made and bounded (a spec file's
    /// `[workspace]` table). A spec that names `write_file`, `edit_file` or `run_command` must
    /// isolate them in a copy of its own: `subcontract check` reports one that does not
    /// (`acting-without-isolation`), and the acting tools refuse to run outside a copy.
    ///
    /// ```
    /// use subcontract::act::{Isolation, WorkspacePolicy};
    /// use subcontract::SubAgentSpec;
    /// use serde_json::json;
    ///
    /// let spec = SubAgentSpec::dynamic("fix", json!({"type": "object"}), json!({"type": "string", "maxLength": 200}))
    ///     .description("Fix the failing test.")
    ///     .system("Find the cause, fix it, say what it was.")
    ///     .tools(["read_file", "edit_file", "run_command"])
    ///     .workspace(WorkspacePolicy {
    ///         isolation: Isolation::Copy,
    ///         commands: vec!["python3".into()],
    ///         checks: vec!["python3 -m unittest -q".into()],
    ///         ..WorkspacePolicy::default()
    ///     })
    ///     .build()?;
    /// # Ok::<(), subcontract::SpecError>(())
    /// ```
    pub fn workspace(mut self, policy: crate::act::WorkspacePolicy) -> Self {
        self.def.workspace = policy;
        self
    }
    /// A contract example; both sides must validate when the spec is built.
    pub fn example(mut self, input: Value, output: Value) -> Self {
        self.def.examples.push((input, output));
        self
    }

    /// Checks everything and compiles the contracts. Fails with every problem found (each with
    /// a stable code and a [`SpecLocation`]), not just the first.
    pub fn build(self) -> Result<SubAgentSpec<I, O>, SpecError> {
        let def = self.def;
        let mut problems = Vec::new();
        field_problems(
            &def.name,
            &def.description,
            &def.tools,
            &def.limits,
            &mut problems,
        );
        sampling_problems(&def.sampling, &mut problems);
        workspace_problems(&def.workspace, &mut problems);
        let input = compile("input", self.input_schema, &mut problems);
        let output = compile("output", self.output_schema, &mut problems);
        let max = def.limits.max_output_chars;
        if let Some(output) = &output {
            if !self.allow_unbounded {
                problems.extend(output_size_problems(output, max));
            }
        }
        let grounding = output
            .as_ref()
            .and_then(|o| grounding_of(o.schema(), &mut problems));
        problems.extend(example_problems(
            input.as_ref().map(|c| (c, &*self.decode_input)),
            output.as_ref().map(|c| (c, &*self.decode_output)),
            max,
            &def.examples,
        ));
        let (Some(input), Some(output), true) = (input, output, problems.is_empty()) else {
            return Err(SpecError {
                spec: def.name,
                problems,
            });
        };
        let output_kind = if output.schema().get("type").and_then(Value::as_str) == Some("string") {
            OutputKind::Text
        } else {
            OutputKind::Json
        };
        let output_schema_bytes = crate::json::compact_bytes(output.schema());
        let submit_tool = (output_kind == OutputKind::Json).then(|| ToolDefinition {
            name: Arc::from(SUBMIT_TOOL),
            description: Arc::from(SUBMIT_DESCRIPTION),
            input_schema: output.schema().clone(),
        });
        debug_assert!(def
            .examples
            .iter()
            .all(|(_, o)| compact_chars(o) <= def.limits.max_output_chars));
        let core = SpecCore {
            name_arc: Arc::from(def.name.as_str()),
            def,
            input,
            output,
            output_kind,
            submit_tool,
            output_schema_bytes,
            grounding,
            decode_input: self.decode_input,
            decode_output: self.decode_output,
        };
        Ok(SubAgentSpec::from_core(Arc::new(core)))
    }
}

/// Where the output schema grounds its values, or each misuse of `x-grounded` as a problem.
fn grounding_of(
    schema: &Value,
    out: &mut Vec<SpecProblem>,
) -> Option<Arc<crate::ground::Grounding>> {
    match crate::ground::Grounding::of_schema(schema) {
        Ok(g) => g.map(Arc::new),
        Err(errors) => {
            out.extend(errors.into_iter().map(|e| SpecProblem {
                code: codes::INVALID_GROUNDING,
                message: e.message,
                at: SpecLocation::Schema {
                    which: "output",
                    pointer: e.pointer,
                },
            }));
            None
        }
    }
}

/// Name, description, tools and limits: everything that needs no contract.
fn field_problems(
    name: &str,
    description: &str,
    tools: &[String],
    l: &Limits,
    out: &mut Vec<SpecProblem>,
) {
    if !is_valid_name(name) {
        out.push(SpecProblem {
            code: codes::INVALID_NAME,
            message: format!(
                "name \"{}\" must be 1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`",
                shown(name)
            ),
            at: SpecLocation::Name,
        });
    }
    if description.trim().is_empty() {
        out.push(SpecProblem {
            code: codes::INVALID_VALUE,
            message: "`description` must not be empty: the host model chooses tools by it".into(),
            at: SpecLocation::Description,
        });
    }
    for (i, t) in tools.iter().enumerate() {
        let message = if !is_valid_name(t) {
            format!(
                "tool name \"{}\" must be 1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`",
                shown(t)
            )
        } else if t == SUBMIT_TOOL {
            format!("tool name `{t}` is reserved for the sub-agent's answer")
        } else if tools[..i].contains(t) {
            format!("tool `{t}` is listed twice")
        } else {
            continue;
        };
        out.push(SpecProblem {
            code: codes::INVALID_NAME,
            message,
            at: SpecLocation::Tool(i),
        });
    }
    limit_problems(l, out);
}

/// What a `[workspace]` table's settings mean together: checks must be commands the spec
/// allows, globs must compile, limits must be positive.
pub(crate) fn workspace_problems(ws: &crate::act::WorkspacePolicy, out: &mut Vec<SpecProblem>) {
    // An acting tool without isolation is `check`'s to report, not the builder's: a tool of a
    // user's own may share the name, and ours refuse to act outside a copy anyway.
    for p in ws.problems() {
        out.push(SpecProblem {
            code: p.code,
            message: p.message,
            at: SpecLocation::Workspace(p.key),
        });
    }
}

/// The one place limits are checked: spec files only convert types and pass values on (and
/// call this themselves only for a file too broken to build).
pub(crate) fn limit_problems(l: &Limits, out: &mut Vec<SpecProblem>) {
    let zero = |key: &'static str| SpecProblem {
        code: codes::BAD_LIMITS,
        message: format!("`{key}` must be at least 1, found 0"),
        at: SpecLocation::Limit(key),
    };
    if l.max_turns == 0 {
        out.push(zero("max_turns"));
    }
    if let Some(Err(e)) = l.max_cost_usd.map(crate::budget::check_limit_usd) {
        out.push(SpecProblem {
            code: codes::BAD_LIMITS,
            message: format!("`max_cost_usd` {e}"),
            at: SpecLocation::Limit("max_cost_usd"),
        });
    }
    if l.timeout.is_zero() {
        out.push(SpecProblem {
            code: codes::BAD_LIMITS,
            message: "the timeout must be positive (`timeout_secs` at least 1), found 0".into(),
            at: SpecLocation::Limit("timeout"),
        });
    }
    for (value, key) in [
        (l.max_output_chars, "max_output_chars"),
        (l.max_tokens_per_turn as usize, "max_tokens_per_turn"),
        (l.max_tool_calls_per_turn, "max_tool_calls_per_turn"),
        (
            l.max_tool_result_chars_per_turn,
            "max_tool_result_chars_per_turn",
        ),
    ] {
        if value == 0 {
            out.push(zero(key));
        }
    }
    if l.max_model_calls == Some(0) {
        out.push(zero("max_model_calls"));
    }
    if l.max_tokens_per_turn > MAX_TOKENS_PER_TURN {
        out.push(SpecProblem {
            code: codes::BAD_LIMITS,
            message: format!(
                "`max_tokens_per_turn` must be at most {MAX_TOKENS_PER_TURN} (no model writes \
                 more in one call, and each call reserves this much), found {}",
                l.max_tokens_per_turn
            ),
            at: SpecLocation::Limit("max_tokens_per_turn"),
        });
    }
}

/// The most output tokens one call may ask for. The largest published per-call output limits
/// are a fraction of this, so a larger value is a typo, and it would reserve that many tokens'
/// worth of budget before every call.
pub const MAX_TOKENS_PER_TURN: u32 = 1_000_000;

/// The ranges providers accept: temperature 0 to 2 (OpenAI's range; Anthropic's is 0 to 1),
/// top_p above 0 and at most 1. Not-a-number and infinities are out of range.
pub(crate) fn sampling_problems(s: &crate::model::Sampling, out: &mut Vec<SpecProblem>) {
    if let Some(t) = s.temperature.filter(|t| !(0.0..=2.0).contains(t)) {
        out.push(SpecProblem {
            code: codes::INVALID_VALUE,
            message: format!("`temperature` must be a number from 0 to 2, found {t}"),
            at: SpecLocation::Sampling("temperature"),
        });
    }
    if let Some(p) = s.top_p.filter(|p| !(*p > 0.0 && *p <= 1.0)) {
        out.push(SpecProblem {
            code: codes::INVALID_VALUE,
            message: format!(
                "`top_p` must be a number above 0 and at most 1 (the probability mass \
                 sampled from), found {p}"
            ),
            at: SpecLocation::Sampling("top_p"),
        });
    }
}

/// Compiles one contract; a schema that could not be generated or does not compile is a
/// problem at the place in the schema a person must edit.
fn compile(
    which: &'static str,
    schema: Result<Value, String>,
    out: &mut Vec<SpecProblem>,
) -> Option<Contract> {
    let problem = |pointer: String, message: String| SpecProblem {
        code: codes::INVALID_SCHEMA,
        message,
        at: SpecLocation::Schema { which, pointer },
    };
    let schema = match schema {
        Ok(s) => Arc::new(s),
        Err(e) => {
            out.push(problem(
                String::new(),
                format!("the {which} schema could not be generated: {e}"),
            ));
            return None;
        }
    };
    match Contract::compile(Arc::clone(&schema)) {
        Ok(c) => Some(c),
        Err(e) => {
            // The compiler's path is into the meta-schema; the meta-schema check says where in
            // *this* schema the problem is.
            let pointer = match jsonschema::draft202012::meta::validate(&schema) {
                Err(m) => m.instance_path().to_string(),
                Ok(()) => String::new(),
            };
            out.push(problem(
                pointer,
                format!("the {which} schema does not compile: {}", e.message),
            ));
            None
        }
    }
}

/// An output contract that admits unbounded outputs, or outputs larger than `max`.
pub(crate) fn output_size_problems(output: &Contract, max: usize) -> Vec<SpecProblem> {
    let a = output.analysis();
    let mut out: Vec<SpecProblem> = a
        .problems
        .iter()
        .map(|p| SpecProblem {
            code: p.kind.code(),
            message: if p.schema_path.is_empty() {
                format!("the output schema's root: {}", p.message)
            } else {
                format!("output{}: {}", p.schema_path, p.message)
            },
            at: SpecLocation::Schema {
                which: "output",
                pointer: p.schema_path.clone(),
            },
        })
        .collect();
    match a.worst_case_chars {
        // A zero limit is a bad-limits problem already.
        Some(w) if w > max as u64 && max > 0 => out.push(SpecProblem {
            code: codes::OUTPUT_TOO_LARGE,
            message: format!(
                "the largest valid output is {w} characters of compact JSON, over \
                 max_output_chars = {max}: tighten maxLength/maxItems or raise the limit"
            ),
            at: SpecLocation::MaxOutputChars,
        }),
        _ => {}
    }
    out
}

/// Examples that do not validate against a contract that compiled (or, for a typed spec, do
/// not decode), or whose output is larger than `max`.
pub(crate) fn example_problems(
    input: Option<(&Contract, &Decoder)>,
    output: Option<(&Contract, &Decoder)>,
    max: usize,
    examples: &[(Value, Value)],
) -> Vec<SpecProblem> {
    let mut out = Vec::new();
    for (index, (i, o)) in examples.iter().enumerate() {
        if let Some((contract, decode)) = input {
            let vs = match contract.validate(i) {
                Ok(()) => decode(Source::Value(i)).err().unwrap_or_default(),
                Err(vs) => vs,
            };
            if !vs.is_empty() {
                out.push(example_problem(index, "input", &vs));
            }
        }
        if let Some((contract, decode)) = output {
            let mut vs = contract.validate(o).err().unwrap_or_default();
            let chars = compact_chars(o);
            if chars > max && max > 0 {
                vs.push(Violation {
                    path: String::new(),
                    message: format!(
                        "is {chars} characters of compact JSON, over max_output_chars = {max}"
                    ),
                });
            }
            if vs.is_empty() {
                vs = decode(Source::Value(o)).err().unwrap_or_default();
            }
            if !vs.is_empty() {
                out.push(example_problem(index, "output", &vs));
            }
        }
    }
    out
}

fn example_problem(index: usize, side: &'static str, vs: &[Violation]) -> SpecProblem {
    let list: Vec<String> = vs.iter().map(ToString::to_string).collect();
    SpecProblem {
        code: codes::EXAMPLE_INVALID,
        message: format!(
            "example {} {side} does not validate against the {side} contract: {}",
            index + 1,
            list.join("; ")
        ),
        at: SpecLocation::Example {
            index,
            side,
            instance_path: vs.first().map_or_else(String::new, |v| v.path.clone()),
        },
    }
}

impl<I, O> SubAgentSpec<I, O> {
    /// The contract problems of a built spec: an unbounded or too-large output (possible with
    /// `allow_unbounded_output`) and examples that do not validate.
    pub(crate) fn contract_problems(&self) -> Vec<SpecProblem> {
        let core = self.core();
        let max = core.def.limits.max_output_chars;
        let mut out = output_size_problems(&core.output, max);
        out.extend(example_problems(
            Some((&core.input, &*core.decode_input)),
            Some((&core.output, &*core.decode_output)),
            max,
            &core.def.examples,
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::diag::codes;

    #[test]
    fn build_reports_every_problem_not_just_the_first() {
        let err = SubAgentSpec::dynamic(
            "bad name",
            json!({"type": "object"}),
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
        )
        .tools(["grep", SUBMIT_TOOL, "grep"])
        .max_turns(0)
        .timeout(Duration::ZERO)
        .example(json!(1), json!({"a": 2}))
        .build()
        .unwrap_err();
        let got: Vec<(&str, &SpecLocation)> =
            err.problems.iter().map(|p| (p.code, &p.at)).collect();
        let ex = |side: &'static str, path: &str| SpecLocation::Example {
            index: 0,
            side,
            instance_path: path.into(),
        };
        assert_eq!(
            got,
            [
                (codes::INVALID_NAME, &SpecLocation::Name),
                (codes::INVALID_VALUE, &SpecLocation::Description),
                (codes::INVALID_NAME, &SpecLocation::Tool(1)),
                (codes::INVALID_NAME, &SpecLocation::Tool(2)),
                (codes::BAD_LIMITS, &SpecLocation::Limit("max_turns")),
                (codes::BAD_LIMITS, &SpecLocation::Limit("timeout")),
                (
                    codes::UNBOUNDED_STRING,
                    &SpecLocation::Schema {
                        which: "output",
                        pointer: "/properties/a".into()
                    }
                ),
                (
                    codes::OPEN_OBJECT,
                    &SpecLocation::Schema {
                        which: "output",
                        pointer: String::new()
                    }
                ),
                (codes::EXAMPLE_INVALID, &ex("input", "")),
                (codes::EXAMPLE_INVALID, &ex("output", "/a")),
            ],
            "{err}"
        );
        // Display lists them all, after the spec's name.
        let text = err.to_string();
        assert!(
            text.starts_with("spec `bad name`: [invalid-name]"),
            "{text}"
        );
        assert!(text.contains("tool `grep` is listed twice"), "{text}");
        assert_eq!(text.matches("; [").count(), err.problems.len() - 1);
    }

    #[test]
    fn a_schema_that_does_not_compile_points_into_itself() {
        let err = SubAgentSpec::dynamic(
            "s",
            json!({"type": "object", "properties": {"q": {"type": 5}}}),
            json!({"type": "string", "maxLength": 5}),
        )
        .description("d")
        .build()
        .unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        assert_eq!(err.problems[0].code, codes::INVALID_SCHEMA);
        assert_eq!(
            err.problems[0].at,
            SpecLocation::Schema {
                which: "input",
                pointer: "/properties/q/type".into()
            }
        );
    }
}
