//! The command line's own pieces, over the library's public API: running one spec, serving
//! specs over MCP, and the models that only the command line names (`example`, `replay:`).

pub mod example_model;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod resolve;
pub mod run;
