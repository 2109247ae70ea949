//! Sub-agent specs: name, description, system prompt, narrowed tools, limits, and the input
//! and output contracts.

pub(crate) mod builder;
mod call_cost;
pub(crate) mod core;
mod erased;
pub(crate) mod file;
pub(crate) mod load;
pub(crate) mod text;
pub use text::MAX_TEXT_CHARS;
mod typed;

pub use builder::{SpecBuilder, SpecError, SpecLocation, SpecProblem, MAX_TOKENS_PER_TURN};
pub use call_cost::{AnswerOverBudget, CallCost, CallOverBudget};
pub use core::{
    Levers, Limits, OutputKind, OutputMode, DEFAULT_MAX_OUTPUT_CHARS, DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_TOOL_CALLS_PER_TURN, DEFAULT_MAX_TOOL_RESULT_CHARS_PER_TURN, DEFAULT_MAX_TURNS,
    DEFAULT_TIMEOUT,
};
pub use erased::{DynSpec, ToolFormat, WRAP_KEY};
pub use load::{load_spec, load_spec_str, spec_files, LoadError};
pub use typed::SubAgentSpec;
