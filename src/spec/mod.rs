//! Sub-agent specs: name, description, system prompt, narrowed tools, limits, and the input
//! and output contracts.

mod agent_tool;
mod builder;
pub mod file;
mod load;

pub use agent_tool::AgentTool;
pub use builder::{SpecBuilder, SpecError};
pub use load::{
    build as build_raw, load_spec, load_spec_str, spec_files, to_diagnostic, LoadError,
};

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::Value;

use crate::contract::{Contract, Violation};
use crate::ctx::Ctx;
use crate::json::tape::Tape;
use crate::model::ToolDefinition;
use crate::runloop::{self, RunResult};
use crate::tool::Tool;

/// Default maximum compact-JSON size of an output, in characters.
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 4000;
/// Default run timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Default turn limit.
pub const DEFAULT_MAX_TURNS: u32 = 10;
/// Default upper bound on output tokens per model call.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A sub-agent's limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Model turns before the run ends with `max_turns` (default 10).
    pub max_turns: u32,
    /// USD the run (and its own sub-agents) may spend; `None` leaves only the parent's limit.
    pub max_cost_usd: Option<Decimal>,
    /// Model calls the run (and its sub-agents) may make; `None` for no own limit.
    pub max_model_calls: Option<u64>,
    /// Wall time before the run ends with `timeout` (default 120 s).
    pub timeout: Duration,
    /// Largest output the parent may receive, as compact JSON characters (default 4000).
    pub max_output_chars: usize,
    /// Output-token limit of each model call (default 4096); also what a call reserves.
    pub max_tokens_per_turn: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_turns: DEFAULT_MAX_TURNS,
            max_cost_usd: None,
            max_model_calls: None,
            timeout: DEFAULT_TIMEOUT,
            max_output_chars: DEFAULT_MAX_OUTPUT_CHARS,
            max_tokens_per_turn: DEFAULT_MAX_TOKENS,
        }
    }
}

/// How the sub-agent hands back its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// By calling the submission tool, whose arguments are the output (any non-string schema).
    Tool,
    /// As its final text (an output schema of `type: string`).
    Text,
}

/// What a decoder reads: a JSON value, or JSON text already parsed into a tape.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    Value(&'a Value),
    Tape(&'a Tape<'a>),
}

/// Decodes an already schema-checked document and applies the typed rules. A typed decoder
/// returns its type; a decoder over JSON values returns `()` for a `Value` (the caller keeps
/// it, see [`with_value`]) and the document as a `Value` for a tape.
pub(crate) type Decoder =
    dyn Fn(Source<'_>) -> Result<Box<dyn Any + Send>, Vec<Violation>> + Send + Sync;

/// The untyped heart of a spec, shared by every typed view of it.
pub struct SpecCore {
    pub(crate) name: String,
    pub(crate) name_arc: Arc<str>,
    pub(crate) description: String,
    pub(crate) system: String,
    pub(crate) tools: Vec<String>,
    pub(crate) limits: Limits,
    pub(crate) model: Option<String>,
    pub(crate) input: Contract,
    pub(crate) output: Contract,
    pub(crate) output_mode: OutputMode,
    /// The submission tool offered in [`OutputMode::Tool`], built once: every run offers it.
    pub(crate) submit_tool: Option<ToolDefinition>,
    /// Compact JSON bytes of the output schema, counted once for budget reservations.
    pub(crate) output_schema_bytes: usize,
    pub(crate) decode_input: Box<Decoder>,
    pub(crate) decode_output: Box<Decoder>,
    pub(crate) examples: Vec<(Value, Value)>,
}

impl std::fmt::Debug for SpecCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpecCore")
            .field("name", &self.name)
            .field("tools", &self.tools)
            .field("limits", &self.limits)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// An accepted output: its compact JSON (when asked for) and its decoded value (for a spec
/// over JSON values read from a `Value`, `()` until [`with_value`] puts the value there).
pub(crate) type Accepted = (Option<String>, Box<dyn Any + Send>);

/// Whether a run's caller reads its output as compact JSON (a parent reading a sub-agent's
/// tool result) or takes the value (a typed run, a validity check).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputText {
    /// Write the compact JSON and hand it back.
    Write,
    /// Only count its characters.
    Skip,
}

impl SpecCore {
    /// Checks an output: size, schema, then the typed rules; returns the decoded value and,
    /// when `text` says a parent will read it, the output's compact JSON. The size limit is
    /// then measured on that text, written once here, so a sub-agent's output is not walked
    /// twice; otherwise it is counted without writing anything.
    pub(crate) fn accept_output(
        &self,
        v: &Value,
        text: OutputText,
    ) -> Result<Accepted, Vec<Violation>> {
        let (text, chars) = match text {
            OutputText::Write => {
                let t = crate::json::to_compact_string(v);
                let chars = t.chars().count();
                (Some(t), chars)
            }
            OutputText::Skip => (None, crate::json::compact_chars(v)),
        };
        if chars > self.limits.max_output_chars {
            let mut out = vec![Violation {
                path: String::new(),
                message: format!(
                    "the output is {chars} characters of compact JSON; the limit is {}: shorten it",
                    self.limits.max_output_chars
                ),
            }];
            // The fields that broke their bounds too, so that the repair names them.
            if let Err(v) = self.output.validate(v) {
                out.extend(v);
            }
            return Err(out);
        }
        self.output.validate(v)?;
        Ok((text, (self.decode_output)(Source::Value(v))?))
    }

    /// [`accept_output`](Self::accept_output) for an output sent as JSON text. The decoded
    /// value is the typed output, or for a spec over JSON values the document itself.
    ///
    /// Valid text is sized, checked and decoded on a tape, without a `Value`. Anything the
    /// tape path does not accept (text that is not JSON, duplicate keys, an invalid document,
    /// a failed decode or rule) is redone on the `Value` path, so verdicts and repair
    /// messages are exactly those of `accept_output`.
    pub(crate) fn accept_output_json(
        &self,
        text: &str,
        out: OutputText,
    ) -> Result<Accepted, Vec<Violation>> {
        if let Some(accepted) = self.accept_tape(text, out) {
            return Ok(accepted);
        }
        let v = crate::contract::parse_json(text)?;
        let (written, decoded) = self.accept_output(&v, out)?;
        Ok((written, with_value(decoded, || v)))
    }

    /// The fast path of [`accept_output_json`](Self::accept_output_json): the output accepted
    /// on a tape, or `None` if anything there fails.
    fn accept_tape(&self, text: &str, out: OutputText) -> Option<Accepted> {
        let tape = Tape::parse(text).ok()?;
        if crate::json::tape_compact_chars(&tape) > self.limits.max_output_chars
            || !self.output.is_valid_tape(&tape)
        {
            return None;
        }
        let decoded = (self.decode_output)(Source::Tape(&tape)).ok()?;
        let written = match out {
            OutputText::Write => Some(crate::json::tape_to_compact_string(&tape)),
            OutputText::Skip => None,
        };
        Some((written, decoded))
    }

    /// Checks an input: schema, then the typed rules.
    pub(crate) fn accept_input(&self, v: &Value) -> Result<(), Vec<Violation>> {
        self.input.validate(v)?;
        (self.decode_input)(Source::Value(v)).map(|_| ())
    }
}

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
    pub fn core(&self) -> &SpecCore {
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
    /// How the output is handed back.
    pub fn output_mode(&self) -> OutputMode {
        self.core.output_mode
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

/// A decoded output as the run hands it on: the typed value, or, for a spec over JSON values
/// (whose decoder only validates and returns `()`), the validated value itself.
pub(crate) fn with_value(
    decoded: Box<dyn Any + Send>,
    value: impl FnOnce() -> Value,
) -> Box<dyn Any + Send> {
    if decoded.is::<()>() {
        Box::new(value())
    } else {
        decoded
    }
}

/// The output as `O`; an error only if a spec's decoder and its type parameter disagree,
/// which the builders rule out (reported, not a panic).
pub(crate) fn downcast_output<O: 'static>(decoded: Box<dyn Any + Send>) -> Result<O, &'static str> {
    decoded
        .downcast::<O>()
        .map(|o| *o)
        .map_err(|_| "internal: output type mismatch")
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
        runloop::run_core(&self.core, value, ctx, OutputText::Skip)
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
        runloop::run_child(&self.core, value, parent, OutputText::Skip)
            .await
            .downcast()
    }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use validator::Validate;

    use super::{OutputText, SubAgentSpec};

    #[derive(Serialize, Deserialize, JsonSchema, Validate)]
    #[serde(deny_unknown_fields)]
    struct Ask {
        #[validate(length(max = 100))]
        q: String,
    }

    #[derive(Debug, Serialize, Deserialize, JsonSchema, Validate)]
    #[serde(deny_unknown_fields)]
    struct Answer {
        #[validate(length(max = 20))]
        answer: String,
        #[validate(range(max = 10))]
        n: u8,
        #[validate(length(max = 3))]
        tags: Vec<Tag>,
    }

    #[derive(Debug, Serialize, Deserialize, JsonSchema, Validate)]
    #[serde(deny_unknown_fields)]
    struct Tag {
        #[validate(length(max = 5))]
        tag: String,
    }

    /// Valid text is accepted on the tape itself, not by the fallback: the parity tests
    /// (`tests/it/output_text.rs`) would pass either way, so this checks the fast path is
    /// the one taken, and that what it rejects it leaves to the `Value` path.
    #[test]
    fn valid_text_takes_the_fast_path() {
        let spec = SubAgentSpec::<Ask, Answer>::builder("a")
            .description("d")
            .system("s")
            .max_output_chars(80)
            // Its worst case is 97 characters; allowed, so the size limit can be exceeded.
            .allow_unbounded_output()
            .build()
            .expect("a valid spec");
        let core = spec.core();
        for text in [
            r#"{"answer":"yes","n":3,"tags":[{"tag":"a"}]}"#,
            "{ \"answer\" : \"y\\u00e9s \\\"q\\\"\",\n \"n\": 3, \"tags\": [] }",
        ] {
            let (written, decoded) = core
                .accept_tape(text, OutputText::Write)
                .unwrap_or_else(|| panic!("fast path refused {text}"));
            let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
            assert_eq!(written.as_deref(), Some(value.to_string().as_str()));
            assert!(decoded.is::<Answer>());
        }
        for text in [
            r#"{"answer":"yes","n":3,"tags":[{"tag":"toolong"}]}"#, // rules
            r#"{"answer":"yes","n":3}"#,                            // schema
            r#"{"answer":"yes","n":3,"tags":[],"n":4}"#,            // duplicate key
            r#"{"answer":"yes","n":3,"tags":[{"tag":"a"},{"tag":"b"},{"tag":"c"}],"x":"#, // not JSON
        ] {
            assert!(core.accept_tape(text, OutputText::Skip).is_none(), "{text}");
        }
        // Valid but over the 80-character limit (compact): refused on both paths.
        let long =
            r#"{"answer":"yyyyyyyyyyyyyyyyyyyy","n":10,"tags":[{"tag":"abcde"},{"tag":"abcde"}]}"#;
        assert!(long.chars().count() > 80, "{}", long.len());
        assert!(core.accept_tape(long, OutputText::Skip).is_none());
        assert!(spec.validate_output_json(long).is_err());
    }
}
