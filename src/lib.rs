#![doc = include_str!("docs/crate.md")]

pub mod budget;
pub mod check;
pub mod contract;
pub mod ctx;
pub mod diag;
pub mod dialect;
pub mod docs {
    //! Guides: the reference pages of `src/docs/`, kept beside the code they describe.

    pub mod specs {
        #![doc = include_str!("docs/specs.md")]
    }
    pub mod invariants {
        #![doc = include_str!("docs/invariants.md")]
    }
}
pub mod events;
pub mod gate;
pub(crate) mod json;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod model;
pub mod provider;
pub mod runloop;
pub mod runner;
pub mod spec;
pub mod tool;
pub mod tree;
pub mod workspace;

pub use budget::{Budget, BudgetError, Reservation};
pub use contract::{Contract, Violation};
pub use ctx::{Ctx, CtxBuilder, SpawnError};
pub use events::{Event, EventKind, EventSink, JsonlSink, MemorySink, TracingSink};
pub use gate::{ApprovalGate, Decision, Gate};
pub use model::Model;
pub use runloop::{Outcome, RunError, RunResult, SUBMIT_TOOL};
pub use spec::{Limits, SpecBuilder, SpecError, SubAgentSpec};
pub use tokio_util::sync::CancellationToken;
pub use tool::{FnTool, Tool, ToolOutput, ToolSet, TypedTool};

/// The README's code blocks, compiled and run as doc tests so the quick start cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
