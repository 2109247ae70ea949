#![doc = include_str!("docs/crate.md")]

// Modules in dependency order: each uses only those above it (and `ctx` and `tool` each
// other: a tool is called with the context, and the context holds the tools).
mod budget;
pub mod check;
pub mod contract;
mod ctx;
pub(crate) mod diag;
pub mod events;
mod gate;
pub(crate) mod json;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod model;
mod outcome;
pub mod provider;
pub mod redact;
mod run;
pub mod spec;
pub mod tool;

pub use budget::{
    check_limit_usd, Budget, BudgetError, BudgetSnapshot, LimitUsdError, Reservation,
};
pub use contract::{Contract, Violation};
pub use ctx::{
    Ctx, CtxBuilder, ModelResolver, SpawnError, DEFAULT_FANOUT_LIMIT, DEFAULT_MAX_DEPTH,
};
pub use events::{Event, EventKind, EventSink, JsonlSink, MemorySink, TracingSink};
pub use gate::{ApprovalGate, ApprovalRequest, Decision, DenyTools, FnGate, Gate};
pub use model::{Model, SUBMIT_TOOL};
pub use outcome::{Outcome, RunError, RunResult};
pub use spec::{Limits, SpecBuilder, SpecError, SubAgentSpec};
pub use tokio_util::sync::CancellationToken;
pub use tool::{FnTool, Tool, ToolOutput, ToolSet, TypedTool};

/// The README's code blocks, compiled and run as doc tests so the quick start cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
