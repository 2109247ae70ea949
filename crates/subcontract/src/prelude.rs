//! One import for a spec and a tool: `use subcontract::prelude::*;`.
//!
//! It brings the types a host, a spec and a tool are written with, the derives their types
//! need (`Serialize`, `Deserialize`, `JsonSchema`, `Validate`, from subcontract's own
//! re-exports of serde, schemars and validator), `async_trait`, `Decimal`, and the attribute
//! macros [`tool`](macro@crate::tool) and [`contract`](macro@crate::contract). A crate that uses
//! it needs no dependency of its own on serde, schemars, validator, async-trait or
//! rust_decimal.
//!
//! The derives of serde, schemars and validator write paths to their own crates (`::serde`,
//! `schemars`, `::validator`) into the code they generate, so a type deriving them through
//! these re-exports carries [`#[contract]`](macro@crate::contract) above its `#[derive(...)]`:
//! it points each derive at `subcontract`'s copy.
//!
//! ```
//! use subcontract::prelude::*;
//!
//! #[contract]
//! #[derive(Debug, Serialize, Deserialize, JsonSchema, Validate)]
//! #[serde(deny_unknown_fields)]
//! struct Verdict {
//!     #[validate(length(max = 200))]
//!     reason: String,
//!     approved: bool,
//! }
//!
//! let spec = SubAgentSpec::<Verdict, Verdict>::builder("review")
//!     .description("Reviews a verdict.")
//!     .build()?;
//! assert_eq!(spec.name(), "review");
//! # Ok::<(), subcontract::SpecError>(())
//! ```

pub use crate::host::{Host, HostBuilder};
pub use crate::tool::{IntoTool, ToolRef};
pub use crate::{
    contract, tool, Ctx, Failure, Outcome, SubAgentSpec, Tool, ToolOutput, ToolSet, TypedTool,
};
pub use async_trait::async_trait;
pub use rust_decimal::Decimal;
pub use schemars::JsonSchema;
pub use serde::{Deserialize, Serialize};
pub use validator::Validate;
