//! `subcontract mcp`: serves specs as MCP tools over stdio, with their output contracts intact.
//!
//! Every spec becomes one tool: its input schema is the tool's `inputSchema`, its output schema
//! the tool's `outputSchema`, and a completed run returns the validated output as
//! `structuredContent` plus a compact JSON text copy. A run that ends without an output (invalid
//! arguments, max turns, budget, timeout, model error, …) is an `isError` result naming the
//! outcome; the server keeps serving.
//!
//! Every call runs as a child of one server-wide root context, so one budget
//! (`--max-cost-usd`) bounds what a host can spend across all calls, and specs can call each
//! other within the depth limit.
//!
//! MCP requires `outputSchema` to describe an object. A spec whose output is not an object
//! (a bare string, an array, …) is served with its output wrapped as `{"result": <output>}`:
//! the schema is wrapped the same way (its `$defs` move to the wrapper so references still
//! resolve).
//!
//! Over stdio ([`serve_stdio`]), a message over the 16 MiB line limit is answered with an
//! Invalid Request error instead of being dropped unanswered, and when the host goes away
//! (stdin ends, or stdout fails or is closed) every in-flight run is cancelled at once: nobody
//! is left to read its result, so it must stop spending (see [`StdioTransport`]).

mod progress;
mod server;
mod transport;

use rust_decimal::Decimal;

use crate::host::HostBuilder;

pub use server::SubcontractServer;
pub use transport::{StdioTransport, MAX_LINE};

/// Why the server could not start or stopped abnormally.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// Two specs share a name: a host could not tell the tools apart.
    #[error("two specs are named `{0}`")]
    DuplicateName(String),
    /// The host (model, workspace, tools) could not be assembled.
    #[error("{0}")]
    Host(#[from] crate::host::HostError),
    /// The MCP session could not be established (no `initialize`, transport closed, …).
    #[error("MCP session: {0}")]
    Session(String),
    /// The server task ended abnormally.
    #[error("MCP server task: {0}")]
    Join(#[from] tokio::task::JoinError),
}

crate::debug_as_display!(McpError);

/// What the server serves and with what.
pub struct McpConfig {
    /// The host every call runs under: its model, the models specs name, the workspace,
    /// prices, sinks (a `--trace` file), and its specs, each served as one tool (loaded from
    /// TOML, or typed Rust specs). The server adds its own progress sink.
    pub host: HostBuilder,
    /// Limit of the server-wide budget across every call (`None`: unlimited, still counted).
    pub max_cost_usd: Option<Decimal>,
    /// Whether to log one line per finished call to stderr.
    pub log: bool,
}

impl std::fmt::Debug for McpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConfig")
            .field("host", &self.host)
            .field("max_cost_usd", &self.max_cost_usd)
            .finish_non_exhaustive()
    }
}

impl McpConfig {
    /// A configuration serving every spec of `host`: no budget limit, no log.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use subcontract::host::Host;
    /// use subcontract::mcp::McpConfig;
    /// use subcontract::model::{ScriptStep, ScriptedModel};
    /// # let spec = subcontract::spec::load_spec("specs/check_claim.toml").unwrap();
    /// let model = Arc::new(ScriptedModel::queue("scripted:demo", vec![ScriptStep::text("x")]));
    /// let host = Host::builder().model(model).workspace(".").spec(spec);
    /// let config = McpConfig::new(host);
    /// assert_eq!(config.host.spec_list().len(), 1);
    /// ```
    pub fn new(host: HostBuilder) -> Self {
        McpConfig {
            host,
            max_cost_usd: None,
            log: false,
        }
    }
}

/// Serves `config` over stdin/stdout until the client closes the connection. Once the host
/// is gone (stdin ends, stdout fails or closes), in-flight runs are cancelled.
pub async fn serve_stdio(config: McpConfig) -> Result<(), McpError> {
    use rmcp::ServiceExt;
    let server = SubcontractServer::new(config)?;
    let runs = server.root().cancellation().clone();
    let transport = StdioTransport::new(tokio::io::stdin(), tokio::io::stdout());
    let closed = transport.closed();
    transport::watch_stdout(closed.clone());
    // Cancelling the root cancels every call, each a child of it.
    tokio::spawn(async move {
        closed.cancelled().await;
        runs.cancel();
    });
    let running = server
        .serve(transport)
        .await
        .map_err(|e| McpError::Session(e.to_string()))?;
    running.waiting().await?;
    Ok(())
}
