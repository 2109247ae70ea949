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

use super::core::{Decoder, Limits, OutputMode, OutputText, Source, SpecCore};
use super::SubAgentSpec;
use crate::contract::{violations_from_rules, Contract, Unbounded, Violation};
use crate::json::compact_chars;
use crate::model::ToolDefinition;
use crate::model::{SUBMIT_DESCRIPTION, SUBMIT_TOOL};
use crate::tool::is_valid_name;

/// Why a spec could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// The name is not `[A-Za-z0-9_-]{1,64}`.
    #[error("invalid spec name `{0}`: use 1 to 64 of A-Z a-z 0-9 _ -")]
    InvalidName(String),
    /// The description is empty.
    #[error("spec `{0}`: the description is empty; hosts choose tools by it")]
    MissingDescription(String),
    /// A tool name is invalid, reserved or repeated.
    #[error("spec `{spec}`: tool `{tool}`: {reason}")]
    BadTool {
        /// The spec.
        spec: String,
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// A limit makes no sense.
    #[error("spec `{spec}`: bad limits: {reason}")]
    BadLimits {
        /// The spec.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// A schema does not compile (or could not be generated).
    #[error("spec `{spec}`: invalid {which} schema: {message}")]
    InvalidSchema {
        /// The spec.
        spec: String,
        /// `input` or `output`.
        which: &'static str,
        /// Why.
        message: String,
    },
    /// The output schema admits outputs of any size.
    #[error("spec `{spec}`: the output schema is unbounded: {}", problems.iter().map(|p| format!("{} ({})", if p.schema_path.is_empty() { "/" } else { &p.schema_path }, p.message)).collect::<Vec<_>>().join("; "))]
    UnboundedOutput {
        /// The spec.
        spec: String,
        /// Every unbounded place.
        problems: Vec<Unbounded>,
    },
    /// The largest valid output is larger than `max_output_chars`.
    #[error("spec `{spec}`: the largest valid output is {worst_case} characters, over max_output_chars = {max}: tighten maxLength/maxItems or raise the limit")]
    OutputTooLarge {
        /// The spec.
        spec: String,
        /// Worst-case size.
        worst_case: u64,
        /// The limit.
        max: usize,
    },
    /// A contract example does not validate.
    #[error("spec `{spec}`: example {index} {side} is invalid: {}", violations.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("; "))]
    ExampleInvalid {
        /// The spec.
        spec: String,
        /// 0-based example index.
        index: usize,
        /// `input` or `output`.
        side: &'static str,
        /// What is wrong.
        violations: Vec<Violation>,
    },
}

/// Builds a [`SubAgentSpec`]. Obtain one from [`SubAgentSpec::builder`] or
/// [`SubAgentSpec::dynamic`].
pub struct SpecBuilder<I, O> {
    name: String,
    description: String,
    system: String,
    tools: Vec<String>,
    limits: Limits,
    model: Option<String>,
    input_schema: Result<Value, String>,
    output_schema: Result<Value, String>,
    decode_input: Box<Decoder>,
    decode_output: Box<Decoder>,
    allow_unbounded: bool,
    examples: Vec<(Value, Value)>,
    _types: PhantomData<fn(I) -> O>,
}

fn schema_of<T: JsonSchema>() -> Result<Value, String> {
    Ok(schemars::schema_for!(T).to_value())
}

fn typed_decoder<T>() -> Box<Decoder>
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
    fn new(
        name: String,
        input_schema: Result<Value, String>,
        output_schema: Result<Value, String>,
        decode_input: Box<Decoder>,
        decode_output: Box<Decoder>,
    ) -> Self {
        SpecBuilder {
            name,
            description: String::new(),
            system: String::new(),
            tools: Vec::new(),
            limits: Limits::default(),
            model: None,
            input_schema,
            output_schema,
            decode_input,
            decode_output,
            allow_unbounded: false,
            examples: Vec::new(),
            _types: PhantomData,
        }
    }

    /// What it is for; hosts read this to decide when to call it.
    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = d.into();
        self
    }
    /// The system prompt of its fresh conversation.
    pub fn system(mut self, s: impl Into<String>) -> Self {
        self.system = s.into();
        self
    }
    /// The tools it may use; each must be held by the parent when it runs.
    pub fn tools<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.tools = tools.into_iter().map(Into::into).collect();
        self
    }
    /// All limits at once.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
    /// Model turns allowed.
    pub fn max_turns(mut self, n: u32) -> Self {
        self.limits.max_turns = n;
        self
    }
    /// USD it may spend (its sub-agents included).
    pub fn max_cost_usd(mut self, usd: Decimal) -> Self {
        self.limits.max_cost_usd = Some(usd);
        self
    }
    /// Model calls it may make (its sub-agents included).
    pub fn max_model_calls(mut self, n: u64) -> Self {
        self.limits.max_model_calls = Some(n);
        self
    }
    /// Wall time allowed.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.limits.timeout = t;
        self
    }
    /// Largest output (compact JSON characters) the parent may receive.
    pub fn max_output_chars(mut self, n: usize) -> Self {
        self.limits.max_output_chars = n;
        self
    }
    /// Output tokens per model call.
    pub fn max_tokens_per_turn(mut self, n: u32) -> Self {
        self.limits.max_tokens_per_turn = n;
        self
    }
    /// Tool calls of one model response that run; calls past it get an error result.
    pub fn max_tool_calls_per_turn(mut self, n: usize) -> Self {
        self.limits.max_tool_calls_per_turn = n;
        self
    }
    /// Characters the tool results of one turn may add to the conversation; results past it
    /// are errors saying so.
    pub fn max_tool_result_chars_per_turn(mut self, n: usize) -> Self {
        self.limits.max_tool_result_chars_per_turn = n;
        self
    }
    /// The model it uses (`provider:model`) instead of its parent's.
    pub fn model(mut self, m: impl Into<String>) -> Self {
        self.model = Some(m.into());
        self
    }
    /// Accepts an output schema that is unbounded or larger than `max_output_chars`. The size
    /// limit is still enforced on every actual output.
    pub fn allow_unbounded_output(mut self) -> Self {
        self.allow_unbounded = true;
        self
    }
    /// A contract example; both sides must validate when the spec is built.
    pub fn example(mut self, input: Value, output: Value) -> Self {
        self.examples.push((input, output));
        self
    }

    /// Checks everything and compiles the contracts.
    pub fn build(self) -> Result<SubAgentSpec<I, O>, SpecError> {
        let spec = self.name.clone();
        if !is_valid_name(&self.name) {
            return Err(SpecError::InvalidName(self.name));
        }
        if self.description.trim().is_empty() {
            return Err(SpecError::MissingDescription(spec));
        }
        for (i, t) in self.tools.iter().enumerate() {
            let reason = if !is_valid_name(t) {
                Some("invalid name")
            } else if t == SUBMIT_TOOL {
                Some("reserved name")
            } else if self.tools[..i].contains(t) {
                Some("listed twice")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(SpecError::BadTool {
                    spec,
                    tool: t.clone(),
                    reason: reason.into(),
                });
            }
        }
        let l = &self.limits;
        let bad = if l.max_turns == 0 {
            Some("max_turns must be at least 1".to_string())
        } else if l.timeout.is_zero() {
            Some("timeout must be positive".to_string())
        } else if l.max_output_chars == 0 {
            Some("max_output_chars must be positive".to_string())
        } else if l.max_tokens_per_turn == 0 {
            Some("max_tokens_per_turn must be positive".to_string())
        } else if l.max_tool_calls_per_turn == 0 {
            Some("max_tool_calls_per_turn must be at least 1".to_string())
        } else if l.max_tool_result_chars_per_turn == 0 {
            Some("max_tool_result_chars_per_turn must be positive".to_string())
        } else if let Some(Err(e)) = l.max_cost_usd.map(crate::budget::check_limit_usd) {
            Some(format!("max_cost_usd {e}"))
        } else if l.max_model_calls == Some(0) {
            Some("max_model_calls must be at least 1".to_string())
        } else {
            None
        };
        if let Some(reason) = bad {
            return Err(SpecError::BadLimits { spec, reason });
        }
        let compile =
            |which: &'static str, s: Result<Value, String>| -> Result<Contract, SpecError> {
                let s = s.map_err(|message| SpecError::InvalidSchema {
                    spec: spec.clone(),
                    which,
                    message,
                })?;
                Contract::compile(Arc::new(s)).map_err(|e| SpecError::InvalidSchema {
                    spec: spec.clone(),
                    which,
                    message: e.to_string(),
                })
            };
        let input = compile("input", self.input_schema)?;
        let output = compile("output", self.output_schema)?;
        if !self.allow_unbounded {
            let a = output.analysis();
            match a.worst_case_chars {
                None => {
                    return Err(SpecError::UnboundedOutput {
                        spec,
                        problems: a.problems.clone(),
                    })
                }
                Some(w) if w > self.limits.max_output_chars as u64 => {
                    return Err(SpecError::OutputTooLarge {
                        spec,
                        worst_case: w,
                        max: self.limits.max_output_chars,
                    })
                }
                Some(_) => {}
            }
        }
        let output_mode = if output.schema().get("type").and_then(Value::as_str) == Some("string") {
            OutputMode::Text
        } else {
            OutputMode::Tool
        };
        let output_schema_bytes = crate::json::compact_bytes(output.schema());
        let submit_tool = (output_mode == OutputMode::Tool).then(|| ToolDefinition {
            name: Arc::from(SUBMIT_TOOL),
            description: Arc::from(SUBMIT_DESCRIPTION),
            input_schema: output.schema().clone(),
        });
        let core = SpecCore {
            name_arc: Arc::from(self.name.as_str()),
            name: self.name,
            description: self.description,
            system: self.system,
            tools: self.tools,
            limits: self.limits,
            model: self.model,
            input,
            output,
            output_mode,
            submit_tool,
            output_schema_bytes,
            decode_input: self.decode_input,
            decode_output: self.decode_output,
            examples: Vec::new(),
        };
        for (index, (i, o)) in self.examples.iter().enumerate() {
            if let Err(violations) = core.accept_input(i) {
                return Err(SpecError::ExampleInvalid {
                    spec,
                    index,
                    side: "input",
                    violations,
                });
            }
            if let Err(violations) = core.accept_output(o, OutputText::Skip) {
                return Err(SpecError::ExampleInvalid {
                    spec,
                    index,
                    side: "output",
                    violations,
                });
            }
            debug_assert!(compact_chars(o) <= core.limits.max_output_chars);
        }
        let core = SpecCore {
            examples: self.examples,
            ..core
        };
        Ok(SubAgentSpec::from_core(Arc::new(core)))
    }
}
