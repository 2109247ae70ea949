//! One server: started on first use, once per process, shared by every run (an MCP session
//! takes concurrent requests), restarted (a bounded number of times) after it died, stopped
//! with the process; its environment cleared but for an allow-list.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;

use super::child::{ChildTransport, MAX_LINE};
use super::config::{ServerConfig, ServerTransport};

/// How long one call may take when neither the server's `timeout` nor
/// [`McpServers::call_timeout`](super::McpServers::call_timeout) says otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The least time a server gets to start and answer `initialize` and `tools/list`: a server
/// run through `npx` or `uvx` on a loaded machine takes many seconds.
const MIN_START_TIMEOUT: Duration = Duration::from_secs(60);

/// How many times a stdio server that died is started again, per process: a server that
/// crashes on every call must not be restarted for ever.
const MAX_RESTARTS: u32 = 3;

/// The variables of our own environment a stdio server gets (besides the `env` its entry
/// declares): what a program needs to find itself and its files, never a credential. The
/// certificate paths are there because a network that inspects TLS (a company proxy) needs
/// its authority trusted, and a server that fetches would otherwise fail with a certificate
/// error it reports only on its stderr.
pub const ENV_ALLOW_LIST: [&str; 14] = [
    "HOME",
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TEMP",
    "TMP",
    "USER",
    "TERM",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
];

/// The largest response (JSON or one SSE event) taken from a streamable HTTP server.
const MAX_HTTP_RESPONSE: usize = 8 << 20;

/// Why servers or their tools are not available.
#[derive(Clone, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A server could not be started or did not answer.
    #[error("MCP server `{server}`: {message}")]
    Server {
        /// The server's name.
        server: String,
        /// What happened.
        message: String,
    },
    /// Two tools got the same model-facing name.
    #[error("MCP tools `{first}` and `{second}` are both named `{name}`; rename a server")]
    Collision {
        /// The name.
        name: String,
        /// One tool, as `SERVER/TOOL`.
        first: String,
        /// The other.
        second: String,
    },
    /// A tool of a server has a schema that does not compile, or a name no model may call.
    #[error("MCP server `{server}`, tool `{tool}`: {message}")]
    Tool {
        /// The server.
        server: String,
        /// The tool, as the server names it.
        tool: String,
        /// What is wrong.
        message: String,
    },
}

crate::debug_as_display!(McpError);

/// One server: its config, its running session (if any) and its last tool list.
pub(super) struct Server {
    pub(super) config: ServerConfig,
    timeout: std::sync::RwLock<Duration>,
    session: tokio::sync::Mutex<Option<Session>>,
    restarts: AtomicU32,
    started: AtomicBool,
    // The last listing and the version it was asked at; held across the listing, so callers
    // that find it out of date share one `tools/list`.
    tools: tokio::sync::Mutex<Option<(u64, Arc<Vec<rmcp::model::Tool>>)>>,
    // Moved on by `notifications/tools/list_changed` (and by a restart): a listing asked at an
    // older version is out of date.
    version: Arc<AtomicU64>,
    // Set when a stdio server wrote a line past the cap, which ended its session.
    oversized: Arc<AtomicBool>,
}

type Session = RunningService<RoleClient, Handler>;

/// What the server may tell us unasked.
struct Handler {
    server: String,
    version: Arc<AtomicU64>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info.name = "subcontract".into();
        info.client_info.version = env!("CARGO_PKG_VERSION").into();
        info
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "MCP server's tools changed");
        self.version.fetch_add(1, Ordering::AcqRel);
    }
}

impl Server {
    pub(super) fn new(config: ServerConfig) -> Self {
        let timeout = config.timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
        Server {
            config,
            timeout: std::sync::RwLock::new(timeout),
            session: tokio::sync::Mutex::default(),
            restarts: AtomicU32::new(0),
            started: AtomicBool::new(false),
            tools: tokio::sync::Mutex::default(),
            version: Arc::default(),
            oversized: Arc::default(),
        }
    }

    /// Sets the per-call timeout unless the server's entry has its own.
    pub(super) fn default_timeout(&self, timeout: Duration) {
        if self.config.timeout.is_none() {
            *self.timeout.write().unwrap_or_else(|p| p.into_inner()) = timeout;
        }
    }

    fn err(&self, message: impl Into<String>) -> McpError {
        McpError::Server {
            server: self.config.name.clone(),
            message: message.into(),
        }
    }

    pub(super) fn timeout(&self) -> Duration {
        *self.timeout.read().unwrap_or_else(|p| p.into_inner())
    }

    fn start_timeout(&self) -> Duration {
        self.timeout().max(MIN_START_TIMEOUT)
    }

    /// The version of the server's tools: it moves on whenever they may have changed.
    pub(super) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The server's tools and the version they were listed at: the last listing, unless the
    /// server said since that they changed. A failed listing keeps the last one out of date,
    /// so the next caller asks again.
    pub(super) async fn list(&self) -> Result<(u64, Arc<Vec<rmcp::model::Tool>>), McpError> {
        let mut last = self.tools.lock().await;
        // Read before the listing: a change said during it makes this listing out of date.
        let version = self.version();
        if let Some((v, t)) = last.as_ref() {
            if *v == version {
                return Ok((version, t.clone()));
            }
        }
        let peer = self.peer().await?;
        let tools = tokio::time::timeout(self.start_timeout(), peer.list_all_tools())
            .await
            .map_err(|_| {
                self.err(format!(
                    "no answer to tools/list within {:?}",
                    self.start_timeout()
                ))
            })?
            .map_err(|e| {
                self.err(format!(
                    "tools/list failed: {}",
                    crate::redact::redact(&e.to_string())
                ))
            })?;
        let tools = Arc::new(tools);
        *last = Some((version, tools.clone()));
        Ok((version, tools))
    }

    /// The running session's peer, starting the server if it is not running (again, after it
    /// died, at most [`MAX_RESTARTS`] times).
    pub(super) async fn peer(&self) -> Result<rmcp::Peer<RoleClient>, McpError> {
        let mut session = self.session.lock().await;
        if let Some(s) = session.as_ref() {
            if !s.is_closed() && !s.peer().is_transport_closed() {
                return Ok(s.peer().clone());
            }
            tracing::warn!(server = %self.config.name, "MCP server stopped; starting it again");
            *session = None;
        }
        if self.started.swap(true, Ordering::AcqRel)
            && self.restarts.fetch_add(1, Ordering::AcqRel) >= MAX_RESTARTS
        {
            return Err(self.err(format!(
                "it stopped and was started again {MAX_RESTARTS} times; not starting it again"
            )));
        }
        let s = tokio::time::timeout(self.start_timeout(), self.start())
            .await
            .map_err(|_| self.err(format!("did not start within {:?}", self.start_timeout())))??;
        let peer = s.peer().clone();
        *session = Some(s);
        if self.restarts.load(Ordering::Acquire) > 0 {
            // A server started again may list other tools, and says nothing about it.
            self.version.fetch_add(1, Ordering::AcqRel);
        }
        Ok(peer)
    }

    async fn start(&self) -> Result<Session, McpError> {
        let handler = Handler {
            server: self.config.name.clone(),
            version: self.version.clone(),
        };
        let failed = |e: &dyn std::fmt::Display| {
            self.err(format!(
                "cannot connect: {}",
                crate::redact::redact(&e.to_string())
            ))
        };
        match &self.config.transport {
            ServerTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).env_clear().kill_on_drop(true);
                for k in ENV_ALLOW_LIST {
                    if let Some(v) = std::env::var_os(k) {
                        cmd.env(k, v);
                    }
                }
                cmd.envs(env);
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                use std::process::Stdio;
                cmd.stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                let mut child = cmd
                    .spawn()
                    .map_err(|e| self.err(format!("cannot start `{command}`: {e}")))?;
                if let Some(stderr) = child.stderr.take() {
                    tokio::spawn(log_stderr(self.config.name.clone(), stderr));
                }
                self.oversized.store(false, Ordering::Release);
                let transport = ChildTransport::new(child, self.oversized.clone())
                    .map_err(|e| self.err(format!("cannot start `{command}`: {e}")))?;
                handler.serve(transport).await.map_err(|e| {
                    let hint = "the server's own output is in the log: -vv shows it";
                    failed(&format!("{e} ({hint})"))
                })
            }
            ServerTransport::Http { url, headers } => {
                let mut map = std::collections::HashMap::new();
                for (k, v) in headers {
                    let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                        .map_err(|e| self.err(format!("header `{k}`: {e}")))?;
                    let mut value = reqwest::header::HeaderValue::from_str(v)
                        .map_err(|_| self.err(format!("header `{k}`: not a valid header value")))?;
                    value.set_sensitive(true);
                    map.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(map)
                    .max_json_response_size(MAX_HTTP_RESPONSE)
                    .max_sse_event_size(MAX_HTTP_RESPONSE);
                let client = crate::provider::http_client(Some(self.start_timeout()))
                    .map_err(|e| self.err(e))?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                handler.serve(transport).await.map_err(|e| failed(&e))
            }
        }
    }

    /// One `tools/call`, bounded by the server's timeout. Errors are messages for the model.
    pub(super) async fn call(
        &self,
        tool: &str,
        args: Option<serde_json::Map<String, Value>>,
    ) -> Result<rmcp::model::CallToolResult, String> {
        let peer = self.peer().await.map_err(|e| e.to_string())?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = args;
        let timeout = self.timeout();
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => Err(format!(
                "MCP server `{}` did not answer within {} s (its `timeout`, or the servers' call timeout)",
                self.config.name,
                timeout.as_secs_f64()
            )),
            Ok(Err(_)) if self.oversized.load(Ordering::Acquire) => Err(format!(
                "MCP server `{}` answered with a message over {} MiB, which ended its session; \
                 it is started again for the next call",
                self.config.name,
                MAX_LINE >> 20
            )),
            Ok(Err(e)) => Err(format!(
                "MCP server `{}`: {}",
                self.config.name,
                crate::redact::redact(&e.to_string())
            )),
            Ok(Ok(r)) => Ok(r),
        }
    }
}

/// A stdio server's stderr, to our log at debug level, redacted, in bounded chunks (a server
/// that writes one endless line costs a buffer, not memory without end).
async fn log_stderr(server: String, mut stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 4096];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let text = String::from_utf8_lossy(&buf[..n]);
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    tracing::debug!(server = %server, "MCP server stderr: {}", crate::redact::redact(line));
                }
            }
        }
    }
}
