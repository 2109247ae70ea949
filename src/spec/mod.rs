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

pub(crate) type Decoder =
    dyn Fn(&Value) -> Result<Box<dyn Any + Send>, Vec<Violation>> + Send + Sync;

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

impl SpecCore {
    /// Checks an output: size, schema, then the typed rules; returns the decoded value.
    pub(crate) fn accept_output(&self, v: &Value) -> Result<Box<dyn Any + Send>, Vec<Violation>> {
        let chars = compact_chars(v);
        if chars > self.limits.max_output_chars {
            return Err(vec![Violation {
                path: String::new(),
                message: format!(
                    "the output is {chars} characters of compact JSON; the limit is {}: shorten it",
                    self.limits.max_output_chars
                ),
            }]);
        }
        self.output.validate(v)?;
        (self.decode_output)(v)
    }

    /// Checks an input: schema, then the typed rules.
    pub(crate) fn accept_input(&self, v: &Value) -> Result<(), Vec<Violation>> {
        self.input.validate(v)?;
        (self.decode_input)(v).map(|_| ())
    }
}

/// Length in characters of `v`'s compact JSON (as `serde_json::to_string` writes it), counted
/// by walking the value: no formatting, no allocation. It runs on every output a sub-agent
/// submits.
pub(crate) fn compact_chars(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => number_len(n),
        Value::String(s) => string_chars(s),
        Value::Array(a) => {
            2 + a.len().saturating_sub(1) + a.iter().map(compact_chars).sum::<usize>()
        }
        Value::Object(o) => {
            2 + o.len().saturating_sub(1)
                + o.iter()
                    .map(|(k, v)| string_chars(k) + 1 + compact_chars(v))
                    .sum::<usize>()
        }
    }
}

fn number_len(n: &serde_json::Number) -> usize {
    if let Some(u) = n.as_u64() {
        u.checked_ilog10().map_or(1, |d| d as usize + 1)
    } else if let Some(i) = n.as_i64() {
        // Negative (non-negative fits u64): the sign plus the digits of its magnitude.
        1 + i
            .unsigned_abs()
            .checked_ilog10()
            .map_or(1, |d| d as usize + 1)
    } else {
        // Floats are rare in outputs; let serde_json render them exactly as it would.
        n.to_string().len()
    }
}

/// Characters of a JSON string literal: quotes, escapes as serde_json writes them. Counted per
/// byte through a table (UTF-8 continuation bytes count 0), which is several times faster
/// than decoding characters.
fn string_chars(s: &str) -> usize {
    const TABLE: [u8; 256] = {
        let mut t = [1u8; 256];
        let mut b = 0;
        while b < 0x20 {
            t[b] = 6; // \u00XX
            b += 1;
        }
        t[0x08] = 2; // \b
        t[0x09] = 2; // \t
        t[0x0a] = 2; // \n
        t[0x0c] = 2; // \f
        t[0x0d] = 2; // \r
        t[b'"' as usize] = 2;
        t[b'\\' as usize] = 2;
        let mut c = 0x80;
        while c < 0xC0 {
            t[c] = 0; // continuation byte: part of a character already counted
            c += 1;
        }
        t
    };
    2 + s.bytes().map(|b| TABLE[b as usize] as usize).sum::<usize>()
}

/// Length in bytes of `v`'s compact JSON, without building the string.
pub(crate) fn compact_bytes(v: &Value) -> usize {
    compact_len(v, <[u8]>::len)
}

fn compact_len(v: &Value, count: fn(&[u8]) -> usize) -> usize {
    struct Count(usize, fn(&[u8]) -> usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += (self.1)(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0, count);
    // Writing a Value to an infallible writer cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
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

impl<I, O: 'static> SubAgentSpec<I, O> {
    /// Checks an output exactly as the run loop does before a parent sees it — size,
    /// schema, then the typed decode and `validator` rules — and returns it decoded.
    pub fn validate_output(&self, output: &Value) -> Result<O, Vec<Violation>> {
        let decoded = self.core.accept_output(output)?;
        decoded.downcast::<O>().map(|b| *b).map_err(|_| {
            // The builders pair every decoder with its type parameter; report, don't panic.
            vec![Violation {
                path: String::new(),
                message: "internal: output type mismatch".into(),
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
        runloop::run_core(&self.core, value, ctx).await.downcast()
    }

    /// Forks a child of `parent` for this spec and runs it there, as a host's call of
    /// [`as_tool`](Self::as_tool) would. A child that cannot be made ends as `denied`.
    pub async fn run_child(&self, input: &I, parent: &Ctx) -> RunResult<O> {
        let value = match serde_json::to_value(input) {
            Ok(v) => v,
            Err(e) => return RunResult::input_not_serialisable(parent, e),
        };
        runloop::run_child(&self.core, value, parent)
            .await
            .downcast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compact_chars_matches_serde_json() {
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(7),
            json!(10),
            json!(-1),
            json!(-10),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(1.5),
            json!(-0.1),
            json!(1e300),
            json!("a\"b\\c\nd\u{1}e\u{7f}é€😀\u{8}\u{c}\t\r/"),
            json!([]),
            json!({}),
            json!([1, "x", {"k": [null, {"é": "ü"}]}]),
        ];
        for v in values {
            assert_eq!(
                compact_chars(&v),
                serde_json::to_string(&v).unwrap().chars().count(),
                "{v}"
            );
        }
    }
}
