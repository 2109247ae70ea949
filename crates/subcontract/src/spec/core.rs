//! The untyped heart of a spec: its settings ([`SpecDef`], declared once), its compiled
//! contracts and the checks an output passes (size, schema, typed rules) before a parent sees
//! it.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use rust_decimal::Decimal;
use serde_json::Value;

use crate::contract::{Contract, Violation};
use crate::json::tape::Tape;
use crate::model::{PromptCache, Sampling, ToolDefinition};

/// Default maximum compact-JSON size of an output, in characters.
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 4000;
/// Default run timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Default turn limit.
pub const DEFAULT_MAX_TURNS: u32 = 10;
/// Default upper bound on output tokens per model call.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// Default number of tool calls of one model response that run.
pub const DEFAULT_MAX_TOOL_CALLS_PER_TURN: usize = 64;
/// Default number of characters the tool results of one turn may add to the conversation.
pub const DEFAULT_MAX_TOOL_RESULT_CHARS_PER_TURN: usize = 200_000;

/// A sub-agent's limits.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
    /// Tool calls of one model response that run (default 64); each call past it gets an
    /// error result instead.
    pub max_tool_calls_per_turn: usize,
    /// Characters the tool results of one turn may add to the conversation (default 200,000):
    /// once results, in call order, would pass it, each later result is an error saying so,
    /// and ordinary tools past that point do not run.
    pub max_tool_result_chars_per_turn: usize,
    /// Whether the run keeps an answer reserve (default on): before a turn that may call
    /// tools, it checks that what is left of its budget after that turn's call still pays for
    /// one output-only call, and that the time left covers two answers (its own call and the
    /// answer after it), an answer counted as the slowest model call so far times 1.5 plus the
    /// slowest output check; when either does not, that turn asks for the output alone,
    /// and the run completes cut short ([`Limit`](crate::Limit)). Off: a run works until a
    /// limit stops it, and ends `budget_exhausted` or `timeout` without an output.
    pub answer_reserve: bool,
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
            max_tool_calls_per_turn: DEFAULT_MAX_TOOL_CALLS_PER_TURN,
            max_tool_result_chars_per_turn: DEFAULT_MAX_TOOL_RESULT_CHARS_PER_TURN,
            answer_reserve: true,
        }
    }
}

/// The run loop's aids for small models, each of which can be turned off to measure what it is
/// worth (the real-model suite does, one at a time; BENCHMARKS.md, "The levers, measured"). Not
/// a setting to tune: the defaults are the measured best (`forced_output` and `text_calls` on,
/// `native_final` off), and only a measurement changes one.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Levers {
    /// A turn that asks for the output alone (the last allowed turn, every turn of a spec
    /// without tools, the turn after a repeated call or a text answer without an output)
    /// offers only the submission and forces it. Off: such turns are ordinary turns.
    pub forced_output: bool,
    /// A text answer that is exactly one call of an offered tool, written as JSON, is taken as
    /// that call. Off: it is read as text (an output, in the modes that take one from text).
    pub text_calls: bool,
    /// In `auto`, a turn that asks for the output alone sends the output schema as the
    /// provider's response format, with no tools, instead of forcing the submission tool.
    pub native_final: bool,
    /// A repair of a grounded value found in nothing read quotes the shortest lines read that
    /// mention its property (its name, or a word of its description), with their sources.
    /// Off: the repair names the value and what to do, and quotes nothing.
    pub grounding_pointers: bool,
}

impl Default for Levers {
    fn default() -> Self {
        Levers {
            forced_output: true,
            text_calls: true,
            native_final: false,
            grounding_pointers: true,
        }
    }
}

/// What the output is, as the run loop receives it; follows from the output schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// A JSON value (any non-string schema).
    Json,
    /// The final text itself (an output schema of `type: string`).
    Text,
}

/// How a sub-agent's JSON output travels from the model to the run loop. Whatever the mode,
/// the output is validated against the full contract and repaired the same way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum OutputMode {
    /// The submission tool, and a text answer that holds a JSON value (bare or in one fenced
    /// block) taken as the submission.
    #[default]
    Auto,
    /// Only the submission tool.
    Tool,
    /// The provider's structured output (a response format the server enforces).
    Native,
    /// The schema in the system prompt; the JSON taken from the text answer.
    Prompted,
}

impl OutputMode {
    /// Every mode, in the order the docs list them.
    pub const ALL: [OutputMode; 4] = [
        OutputMode::Auto,
        OutputMode::Tool,
        OutputMode::Native,
        OutputMode::Prompted,
    ];

    /// The mode's stable name (`auto`, `tool`, `native`, `prompted`).
    pub fn as_str(self) -> &'static str {
        match self {
            OutputMode::Auto => "auto",
            OutputMode::Tool => "tool",
            OutputMode::Native => "native",
            OutputMode::Prompted => "prompted",
        }
    }
}

impl std::fmt::Display for OutputMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for OutputMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        OutputMode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                format!("unknown output mode `{s}`: expected auto, tool, native or prompted")
            })
    }
}

/// How much of an input's check is left for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputCheck {
    /// Schema and typed rules.
    Full,
    /// Only the typed rules: the schema was checked against the same compiled contract.
    RulesOnly,
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

/// What a spec's author sets, and nothing derived from it. The builder's setters write
/// these fields, the spec-file loader fills them from its keys, and a built spec keeps them as
/// they are: a new setting is one field here, its setter, and (if files set it) its file key.
///
/// Not here: the contracts, given as schemas and decoders and held compiled by a built spec
/// ([`SpecCore`]), and the builder's `allow_unbounded_output`, a permission its build checks
/// the output's bound against rather than a setting the spec keeps.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SpecDef {
    /// The tool name a host sees.
    pub(crate) name: String,
    /// What it is for.
    pub(crate) description: String,
    /// The system prompt.
    pub(crate) system: String,
    /// The tools it may use, by name. Shared: every root run's context holds the list too
    /// (`Ctx::for_root_run`).
    pub(crate) tools: Arc<[String]>,
    /// Turns, money, time and size.
    pub(crate) limits: Limits,
    /// The model it asks for (`provider:model`), if not its parent's.
    pub(crate) model: Option<String>,
    /// How the output travels (a JSON output only).
    pub(crate) output_mode: OutputMode,
    /// Sampling settings sent with each model call.
    pub(crate) sampling: Sampling,
    /// Prompt caching for each model call, overriding the host's; `None` leaves it.
    pub(crate) prompt_cache: Option<PromptCache>,
    /// Whether the first turn requires a call of one of the spec's own tools.
    pub(crate) require_tool_first: bool,
    /// The small-model aids in use ([`Levers`] says which are on by default).
    pub(crate) levers: Levers,
    /// Contract examples (input, output), each validated when the spec is built.
    pub(crate) examples: Vec<(Value, Value)>,
    /// How an acting sub-agent's working copy is made and bounded (`[workspace]`).
    pub(crate) workspace: crate::act::WorkspacePolicy,
}

impl SpecDef {
    /// A spec named `name`, every other setting at its default.
    pub(crate) fn new(name: String) -> Self {
        SpecDef {
            name,
            ..SpecDef::default()
        }
    }

    /// Appends tools to the list. Rebuilding the shared list is a copy per call, paid while a
    /// spec is built, never by a run.
    pub(crate) fn add_tools(&mut self, more: impl IntoIterator<Item = String>) {
        let mut tools = self.tools.to_vec();
        tools.extend(more);
        self.tools = tools.into();
    }
}

/// The untyped heart of a spec, shared by every typed view of it: its settings as written,
/// and what building it derived from them.
pub(crate) struct SpecCore {
    /// The settings, as the builder or the spec file gave them.
    pub(crate) def: SpecDef,
    /// The name, shared with every context and trace that names the spec.
    pub(crate) name_arc: Arc<str>,
    pub(crate) input: Contract,
    pub(crate) output: Contract,
    pub(crate) output_kind: OutputKind,
    /// The submission tool offered for [`OutputKind::Json`], built once: every run offers it.
    pub(crate) submit_tool: Option<ToolDefinition>,
    /// Compact JSON bytes of the output schema, counted once for budget reservations.
    pub(crate) output_schema_bytes: usize,
    /// Where the output grounds its values (`x-grounded`); `None` when it grounds none, and
    /// then a run keeps no evidence.
    pub(crate) grounding: Option<Arc<crate::ground::Grounding>>,
    pub(crate) decode_input: Box<Decoder>,
    pub(crate) decode_output: Box<Decoder>,
}

impl std::fmt::Debug for SpecCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpecCore")
            .field("name", &self.def.name)
            .field("tools", &self.def.tools)
            .field("limits", &self.def.limits)
            .field("model", &self.def.model)
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

impl crate::ctx::Delegate for SpecCore {
    fn terms(&self) -> crate::ctx::ChildTerms<'_> {
        crate::ctx::ChildTerms {
            name: &self.name_arc,
            tools: &self.def.tools,
            max_cost_usd: self.def.limits.max_cost_usd,
            max_model_calls: self.def.limits.max_model_calls,
            model: self.def.model.as_deref(),
        }
    }
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
        if chars > self.def.limits.max_output_chars {
            let mut out = vec![Violation {
                path: String::new(),
                message: format!(
                    "the output is {chars} characters of compact JSON; the limit is {}: shorten it",
                    self.def.limits.max_output_chars
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
        if !crate::json::tape_compact_within(&tape, self.def.limits.max_output_chars)
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

    /// Checks an input: schema (unless the caller checked it against this contract already),
    /// then the typed rules.
    pub(crate) fn accept_input(&self, v: &Value, check: InputCheck) -> Result<(), Vec<Violation>> {
        if check == InputCheck::Full {
            self.input.validate(v)?;
        }
        (self.decode_input)(Source::Value(v)).map(|_| ())
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

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use validator::Validate;

    use super::OutputText;
    use crate::SubAgentSpec;

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
