//! One integration-test binary (fewer links, faster CI), one module per area.

mod budget_stress;
mod check;
mod cli;
mod common;
mod invariants;
mod providers;
mod replay;
mod toml_specs;
