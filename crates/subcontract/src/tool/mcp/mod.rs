//! Tools from MCP servers: the servers of an `mcpServers` config ([`config`]), started once per
//! process on first use and shared ([`McpServers`]), and each of their tools as a [`Tool`]
//! named `mcp__SERVER__TOOL`, under every guarantee a built-in tool has: arguments checked
//! against the tool's `inputSchema` (in the draft it names) before the call, `structuredContent`
//! against its `outputSchema`, results as bounded, redacted text, every failure an error
//! result naming the server. A server that says its tools changed (`tools/list_changed`) is
//! listed again for the runs that start afterwards ([`McpServers::source_for`], and
//! [`LiveTools`](crate::tool::LiveTools) for why runs in flight keep theirs).
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use subcontract::tool::mcp::{load_mcp_config, McpServers};
//! use subcontract::ToolSet;
//!
//! let config = load_mcp_config(".mcp.json".as_ref()).map_err(|d| format!("{d:?}"))?;
//! let servers = McpServers::new(config);
//! let mut tools = ToolSet::new();
//! // Starts the servers the names refer to (here `fs`), lists their tools.
//! for t in servers.tools_for(["mcp__fs__read_text_file"]).await? {
//!     tools.insert(t)?;
//! }
//! # Ok(()) }
//! ```
//!
//! [`Tool`]: crate::Tool

mod child;
pub mod config;
mod names;
mod server;
mod servers;
mod tool;

pub use config::{
    find_mcp_config, load_mcp_config, parse_mcp_config, render_diagnostics, McpConfig,
    ServerConfig, ServerTransport, BESIDE,
};
pub use names::{server_prefix, tool_name};
pub use server::{McpError, DEFAULT_CALL_TIMEOUT, ENV_ALLOW_LIST};
pub use servers::McpServers;
pub use tool::McpTool;

/// The prefix of every MCP tool name: `mcp__SERVER__TOOL`.
pub const PREFIX: &str = "mcp__";
