#![doc = include_str!("docs/crate.md")]
#![warn(unreachable_pub)]

/// `Debug` for an error type, written as its sentence (its `Display`): a `main` that returns
/// `Result<(), Box<dyn Error>>` prints the error it ends with through `Debug`, and a user of
/// `?` there reads what went wrong, not a dump of the enum. Every public error type has it.
macro_rules! debug_as_display {
    ($($t:ty),+ $(,)?) => {$(
        impl ::std::fmt::Debug for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Display::fmt(self, f)
            }
        }
    )+};
}
pub(crate) use debug_as_display;

// The layers, lowest first, between `·`; each module uses only those on its own or a lower
// layer, except that `ctx` and `tool` use each other (a tool is called with the context that
// holds it). `tests/it/layers.rs` reads this list and holds the code to it:
//   json, diag, redact, budget, gate, tool::workspace (its files), act (the policy, copies,
//   changes and their git), act::sandbox · contract, model, outcome, act::host, act::run_copy ·
//   provider, events, ground · ctx ⇄ tool, tool::workspace::tools · spec::core · telemetry ·
//   act::run, act::tools · run · spec (typed view, erased view, builder, files) · host ·
//   check, mcp, batch, rig · eval, temporal · prelude
pub mod act;
pub mod batch;
pub mod budget;
pub mod check;
pub mod contract;
mod ctx;
pub(crate) mod diag;
pub mod eval;
pub mod events;
mod gate;
pub mod ground;
pub mod host;
pub(crate) mod json;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod model;
mod outcome;
pub mod prelude;
pub mod provider;
pub mod redact;
#[cfg(feature = "rig")]
pub mod rig;
mod run;
pub mod spec;
pub mod telemetry;
#[cfg(feature = "temporal")]
pub mod temporal;
pub mod tool;

pub mod docs {
    //! Guides: the reference pages of `src/docs/`, kept beside the code they describe.

    pub mod specs {
        #![doc = include_str!("docs/specs.md")]
    }
    pub mod invariants {
        #![doc = include_str!("docs/invariants.md")]
    }
    pub mod architecture {
        #![doc = include_str!("docs/architecture.md")]
    }
}

pub use budget::{Budget, BudgetError};
pub use contract::{Contract, Violation};
pub use ctx::{
    ChildTerms, Ctx, CtxBuilder, Delegate, ModelResolver, DEFAULT_FANOUT_LIMIT, DEFAULT_MAX_DEPTH,
};
pub use events::{Event, EventKind, EventSink, JsonlSink, MemorySink, TracingSink};
pub use gate::{ApprovalGate, ApprovalRequest, Decision, DenyTools, FnGate, Gate};
pub use model::{Model, SUBMIT_TOOL};
pub use outcome::{Failure, Limit, Outcome, RunError, RunResult, SpawnError};
pub use spec::{Limits, SpecBuilder, SpecError, SpecProblem, SubAgentSpec};
pub use tokio_util::sync::CancellationToken;
pub use tool::{FnTool, IntoTool, Tool, ToolOutput, ToolRef, ToolSet, TypedTool};

// The attribute macros. `tool` the attribute and `tool` the module share a name but not a
// namespace (macros and modules are looked up apart), so `#[subcontract::tool]` and
// `subcontract::tool::workspace` both resolve.
#[doc = include_str!("docs/tool_macro.md")]
pub use subcontract_macros::tool;

#[doc = include_str!("docs/contract_macro.md")]
pub use subcontract_macros::contract;

// The crates a spec's and a tool's types are written with, re-exported so that a user's crate
// needs no version of its own of each (and can't pick one that doesn't match ours). Which
// majors, and what a bump means: the crate docs, "Re-exported crates".
pub use async_trait;
pub use rust_decimal;
pub use schemars;
pub use serde;
pub use serde_json;
pub use validator;

/// The README's code blocks, compiled and run as doc tests so the quick start cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

// The book's chapters that hold Rust blocks, compiled and run the same way (book/src/).
#[cfg(doctest)]
#[doc = include_str!("../../../book/src/specs.md")]
pub struct BookSpecsDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../../book/src/bounds.md")]
pub struct BookBoundsDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../../book/src/tools.md")]
pub struct BookToolsDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../../book/src/hosts.md")]
pub struct BookHostsDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../../book/src/grounded.md")]
pub struct BookGroundedDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../../book/src/acting.md")]
pub struct BookActingDoctests;
