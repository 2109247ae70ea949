//! One integration-test binary (fewer links, faster CI), one module per area.

mod acting;
mod answer_reserve;
mod batch;
#[path = "../support/billing_mock.rs"]
mod billing_mock;
mod budget_stress;
#[path = "../support/cache_scenario.rs"]
mod cache_scenario;
mod call_cost;
mod check;
mod cli;
mod common;
mod compat;
mod eval;
mod first_hour;
mod forced_turns;
mod grounded;
mod host_ask;
mod hostile_provider;
mod invariants;
mod layers;
#[path = "../support/llama_server.rs"]
mod llama_server;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(all(feature = "mcp", feature = "mcp-client"))]
mod mcp_commands;
#[cfg(feature = "mcp-client")]
mod mcp_hostile;
#[cfg(feature = "mcp-client")]
mod mcp_list_changed;
#[cfg(feature = "mcp-client")]
mod mcp_reference;
#[cfg(feature = "mcp-client")]
mod mcp_tools;
#[cfg(feature = "otel")]
mod otel;
mod output_text;
mod packaging;
mod prompt_cache;
mod provider_wire;
mod providers;
mod real_model;
mod rejected_output;
mod replay;
#[cfg(feature = "rig")]
mod rig;
#[cfg(feature = "temporal")]
mod temporal;
#[cfg(feature = "temporal")]
#[path = "../support/temporal_dev.rs"]
mod temporal_dev;
mod toml_specs;
mod typed_spec;
