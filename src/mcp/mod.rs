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

use std::path::PathBuf;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde_json::Value;

use crate::ctx::ModelResolver;
use crate::events::EventSink;
use crate::model::{Model, PriceTable};
use crate::SubAgentSpec;

pub use server::{output_schema, SubcontractServer};
pub use transport::{StdioTransport, MAX_LINE};

/// Why the server could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// Two specs share a name: a host could not tell the tools apart.
    #[error("two specs are named `{0}`")]
    DuplicateName(String),
    /// The workspace directory could not be opened.
    #[error("workspace: {0}")]
    Workspace(#[from] crate::tool::workspace::WorkspaceError),
    /// A tool could not be registered on the root context.
    #[error("tools: {0}")]
    Tools(#[from] crate::tool::ToolSetError),
    /// The MCP session could not be established (no `initialize`, transport closed, …).
    #[error("MCP session: {0}")]
    Session(String),
    /// The server task ended abnormally.
    #[error("MCP server task: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// What the server serves and with what.
pub struct McpConfig {
    /// The specs to serve, one tool each.
    pub specs: Vec<SubAgentSpec<Value, Value>>,
    /// The model every run uses (unless a spec names its own).
    pub model: Arc<dyn Model>,
    /// Makes the models that specs name themselves (`None`: such a spec's call is denied).
    pub resolver: Option<Arc<ModelResolver>>,
    /// The workspace the read-only tools (`read_file`, `list_dir`, `grep`) see.
    pub workspace: PathBuf,
    /// Limit of the server-wide budget across every call (`None`: unlimited, still counted).
    pub max_cost_usd: Option<Decimal>,
    /// Prices that turn usage into cost.
    pub prices: PriceTable,
    /// Where every call's run tree goes (`--trace FILE`), if anywhere.
    pub trace: Option<Arc<dyn EventSink>>,
    /// Whether to log one line per finished call to stderr.
    pub log: bool,
}

impl std::fmt::Debug for McpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConfig")
            .field(
                "specs",
                &self.specs.iter().map(|s| s.name()).collect::<Vec<_>>(),
            )
            .field("model", &self.model.id())
            .field("workspace", &self.workspace)
            .field("max_cost_usd", &self.max_cost_usd)
            .finish_non_exhaustive()
    }
}

impl McpConfig {
    /// A configuration serving `specs` with `model` on the workspace `workspace`: no budget
    /// limit, the built-in prices, no trace, no log.
    pub fn new(
        specs: Vec<SubAgentSpec<Value, Value>>,
        model: Arc<dyn Model>,
        workspace: impl Into<PathBuf>,
    ) -> Self {
        McpConfig {
            specs,
            model,
            resolver: None,
            workspace: workspace.into(),
            max_cost_usd: None,
            prices: PriceTable::builtin(),
            trace: None,
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
