//! The parsed, not yet built, form of a spec file: every part with the position it was
//! written at.

use std::path::PathBuf;

use rust_decimal::Decimal;
use serde_json::Value;

use super::PositionMap;
use crate::diag::Pos;
use crate::model::Sampling;
use crate::spec::{Limits, OutputMode, SpecLocation};

/// A value and the position it was written at (the value's own position, e.g. the opening quote
/// of a string or the `[input]` header of a table).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Located<T> {
    /// The value.
    pub value: T,
    /// Where it starts in the file.
    pub pos: Pos,
}

/// The `[limits]` table as written, converted to each limit's type but not checked (zero
/// passes: the spec builder checks limits). A key is `None` when absent or not of its type
/// (those have a `bad-limits` diagnostic).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct RawLimits {
    /// Model turns the sub-agent may take.
    pub max_turns: Option<Located<u32>>,
    /// Spending cap in US dollars, exact.
    pub max_cost_usd: Option<Located<Decimal>>,
    /// Wall-clock limit for one run, in seconds.
    pub timeout_secs: Option<Located<u64>>,
    /// Longest compact JSON output the parent may receive, in characters.
    pub max_output_chars: Option<Located<u64>>,
    /// Output tokens of one model call (what each call reserves).
    pub max_tokens_per_turn: Option<Located<u32>>,
    /// Tool calls of one model response that run.
    pub max_tool_calls_per_turn: Option<Located<u64>>,
    /// Characters the tool results of one turn may add to the conversation.
    pub max_tool_result_chars_per_turn: Option<Located<u64>>,
}

/// The sampling settings of a `[model]` table, as written, not range-checked (the spec builder
/// checks them). A key is `None` when absent or not of its type (those have a diagnostic).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct RawSampling {
    /// Sampling temperature.
    pub temperature: Option<Located<f64>>,
    /// Nucleus sampling mass.
    pub top_p: Option<Located<f64>>,
    /// Sampling seed.
    pub seed: Option<Located<u64>>,
}

impl RawSampling {
    /// The settings as the spec builder takes them. A value is narrowed to `f32` here; one too
    /// large for it becomes infinite, which the builder's range check refuses.
    pub(crate) fn to_sampling(&self) -> Sampling {
        #[allow(clippy::cast_possible_truncation)]
        let narrow = |v: &Option<Located<f64>>| v.as_ref().map(|v| v.value as f32);
        Sampling {
            temperature: narrow(&self.temperature),
            top_p: narrow(&self.top_p),
            seed: self.seed.as_ref().map(|v| v.value),
        }
    }

    /// Where a setting was written, by its [`Sampling`] field name.
    pub(crate) fn pos(&self, key: &str) -> Option<Pos> {
        match key {
            "temperature" => self.temperature.as_ref().map(|v| v.pos),
            "top_p" => self.top_p.as_ref().map(|v| v.pos),
            "seed" => self.seed.as_ref().map(|v| v.pos),
            _ => None,
        }
    }
}

/// One `[[examples]]` entry that had both an `input` and an `output`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawExample {
    /// Its index in the file's `examples` array, which is also its key in [`PositionMap`]
    /// paths (`["examples", "2", "output"]`); entries lacking `input` or `output` are skipped,
    /// so this can differ from the index in [`RawSpec::examples`].
    pub index: usize,
    /// Where the entry starts (its `[[examples]]` header or inline table).
    pub pos: Pos,
    /// Optional label, used in messages.
    pub name: Option<Located<String>>,
    /// An instance of the input contract.
    pub input: Located<Value>,
    /// An instance of the output contract.
    pub output: Located<Value>,
}

/// A spec file as written: every required part present with the right type, nothing compiled.
///
/// Being returned does not make a spec usable: [`parse_spec`] also returns a `RawSpec` when it
/// found shape errors that leave the parts buildable (an unknown key, an invalid name, a bad
/// limit), so that `check` can go on to report schema problems too. Callers must refuse a spec
/// whose diagnostics contain any error.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawSpec {
    /// The spec file's path, as given.
    pub path: PathBuf,
    /// The tool name a host sees (may be invalid; see the diagnostics).
    pub name: Located<String>,
    /// What the tool does, for the host model.
    pub description: Located<String>,
    /// The system prompt: `system`, or the contents of `system_file` (positioned at the
    /// `system_file` value).
    pub system: Located<String>,
    /// Tools the sub-agent may use, in file order.
    pub tools: Vec<Located<String>>,
    /// `provider:model`, when the spec names one (`model = "…"`, or `name` in `[model]`).
    pub model: Option<Located<String>>,
    /// The sampling settings of the `[model]` table.
    pub sampling: RawSampling,
    /// `output_mode`, when written.
    pub output_mode: Option<Located<OutputMode>>,
    /// `prompt_cache`, when written.
    pub prompt_cache: Option<Located<crate::model::PromptCache>>,
    /// `require_tool_first`, when written.
    pub require_tool_first: Option<Located<bool>>,
    /// The `[limits]` table.
    pub limits: RawLimits,
    /// The `[input]` JSON Schema, converted from TOML.
    pub input: Located<Value>,
    /// The `[output]` JSON Schema, converted from TOML.
    pub output: Located<Value>,
    /// Contract examples.
    pub examples: Vec<RawExample>,
    /// Positions of every key and array element in the file.
    pub positions: PositionMap,
}

impl RawLimits {
    /// The limits as the spec builder takes them: defaults for what is not written.
    pub(crate) fn to_limits(&self) -> Limits {
        let mut limits = Limits::default();
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        if let Some(v) = &self.max_turns {
            limits.max_turns = v.value;
        }
        if let Some(v) = &self.max_cost_usd {
            limits.max_cost_usd = Some(v.value);
        }
        if let Some(v) = &self.timeout_secs {
            limits.timeout = std::time::Duration::from_secs(v.value);
        }
        if let Some(v) = &self.max_output_chars {
            limits.max_output_chars = size(v.value);
        }
        if let Some(v) = &self.max_tokens_per_turn {
            limits.max_tokens_per_turn = v.value;
        }
        if let Some(v) = &self.max_tool_calls_per_turn {
            limits.max_tool_calls_per_turn = size(v.value);
        }
        if let Some(v) = &self.max_tool_result_chars_per_turn {
            limits.max_tool_result_chars_per_turn = size(v.value);
        }
        limits
    }

    /// Where the value of a limit was written, by its [`Limits`] field name.
    pub(crate) fn pos(&self, key: &str) -> Option<Pos> {
        match key {
            "max_turns" => self.max_turns.as_ref().map(|v| v.pos),
            "max_cost_usd" => self.max_cost_usd.as_ref().map(|v| v.pos),
            "timeout" => self.timeout_secs.as_ref().map(|v| v.pos),
            "max_output_chars" => self.max_output_chars.as_ref().map(|v| v.pos),
            "max_tokens_per_turn" => self.max_tokens_per_turn.as_ref().map(|v| v.pos),
            "max_tool_calls_per_turn" => self.max_tool_calls_per_turn.as_ref().map(|v| v.pos),
            "max_tool_result_chars_per_turn" => {
                self.max_tool_result_chars_per_turn.as_ref().map(|v| v.pos)
            }
            _ => None,
        }
    }
}

impl RawSpec {
    /// The line and column of a builder problem's location in this file: the value written
    /// for a name, tool or limit, the key of a schema location (or its nearest written
    /// ancestor), the value inside an example that a violation names.
    pub(crate) fn locate(&self, at: &SpecLocation) -> Pos {
        let p = &self.positions;
        match at {
            SpecLocation::Name => self.name.pos,
            SpecLocation::Description => self.description.pos,
            SpecLocation::Tool(i) => self.tools.get(*i).map_or(self.name.pos, |t| t.pos),
            SpecLocation::Limit(key) => self
                .limits
                .pos(key)
                .or_else(|| p.locate(&["limits"]))
                .unwrap_or(self.name.pos),
            SpecLocation::Sampling(key) => self
                .sampling
                .pos(key)
                .or_else(|| p.locate(&["model"]))
                .unwrap_or(self.name.pos),
            SpecLocation::Schema { which, pointer } => p.locate_pointer(which, pointer),
            SpecLocation::MaxOutputChars => p
                .locate(&["limits", "max_output_chars"])
                .unwrap_or(self.output.pos),
            SpecLocation::Example {
                index,
                side,
                instance_path,
            } => self.locate_example(*index, side, instance_path),
        }
    }

    /// The example's `input`/`output`, or the deepest written value on the way to the one a
    /// violation names. `index` counts the examples this spec kept.
    fn locate_example(&self, index: usize, side: &str, instance_path: &str) -> Pos {
        let Some(x) = self.examples.get(index) else {
            return self.name.pos;
        };
        let mut path: Vec<String> = vec!["examples".into(), x.index.to_string(), side.into()];
        let mut best = self
            .positions
            .locate(&path.iter().map(String::as_str).collect::<Vec<_>>());
        for seg in crate::json::pointer::tokens(instance_path) {
            path.push(seg.into_owned());
            match self
                .positions
                .locate(&path.iter().map(String::as_str).collect::<Vec<_>>())
            {
                Some(p) => best = Some(p),
                None => break,
            }
        }
        best.unwrap_or(if side == "input" {
            x.input.pos
        } else {
            x.output.pos
        })
    }
}
