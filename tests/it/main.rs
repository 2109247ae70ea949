//! One integration-test binary (fewer links, faster CI), one module per area.

mod budget_stress;
mod check;
mod cli;
mod common;
mod invariants;
#[cfg(feature = "mcp")]
mod mcp;
mod providers;
mod replay;
mod toml_specs;
