//! The servers of one config, as one shared handle that yields their tools.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::config::McpConfig;
use super::names::{server_prefix, tool_name};
use super::server::{McpError, Server};
use super::tool::McpTool;
use crate::tool::{BoxError, Listing, Tool, ToolSource};

/// The servers of one config. Cheap to share (`Arc`); a server starts when its tools are first
/// asked for and stops when the last handle is dropped (stdio servers also exit when their
/// stdin closes, as it does when this process ends, even by `kill -9`).
pub struct McpServers {
    servers: BTreeMap<String, Arc<Server>>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.servers.keys()).finish()
    }
}

impl McpServers {
    /// The servers of `config`; none is started yet.
    pub fn new(config: McpConfig) -> Arc<Self> {
        let servers = config
            .servers
            .into_iter()
            .map(|c| (c.name.clone(), Arc::new(Server::new(c))))
            .collect();
        Arc::new(McpServers { servers })
    }

    /// Sets the per-call timeout of every server whose entry has no `timeout` of its own
    /// (`--mcp-timeout`; default [`DEFAULT_CALL_TIMEOUT`](super::DEFAULT_CALL_TIMEOUT)).
    pub fn call_timeout(&self, timeout: Duration) {
        for s in self.servers.values() {
            s.default_timeout(timeout);
        }
    }

    /// The servers' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.servers.keys().map(String::as_str)
    }

    /// The tools of every server that one of `names` refers to (`mcp__SERVER` or
    /// `mcp__SERVER__TOOL`; other names are ignored), starting those servers if they are not
    /// running. Every tool of such a server is returned: narrowing to what a spec names is
    /// the [`ToolSet`](crate::ToolSet)'s job, as for every tool. The tools as listed now; for
    /// tools that follow the servers' changes, see [`source_for`](Self::source_for).
    pub async fn tools_for<'a>(
        self: &Arc<Self>,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let wanted = self.named(names);
        Ok(tools_of(&wanted).await?.1)
    }

    /// The same servers as [`tools_for`](Self::tools_for), listed now, as a
    /// [`ToolSource`] for a host's [`LiveTools`](crate::tool::LiveTools): after a server
    /// sends `notifications/tools/list_changed` (or is started again), the next run that
    /// starts gets its tools listed again, under the same names and rules.
    pub async fn source_for<'a>(
        self: &Arc<Self>,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Arc<dyn ToolSource>, McpError> {
        let servers = self.named(names);
        let (version, tools) = tools_of(&servers).await?;
        Ok(Arc::new(McpSource {
            servers,
            last: Mutex::new(Listing {
                version,
                tools: tools.into(),
            }),
            listing: tokio::sync::Mutex::new(()),
        }))
    }

    /// The servers one of `names` refers to.
    fn named<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<Arc<Server>> {
        let names: Vec<&str> = names.into_iter().collect();
        self.servers
            .values()
            .filter(|s| {
                let p = server_prefix(&s.config.name);
                names.iter().any(|n| {
                    n.strip_prefix(p.as_str())
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with("__"))
                })
            })
            .cloned()
            .collect()
    }

    /// The tools of every server (what `check --mcp-config` lists), starting them all.
    pub async fn all_tools(self: &Arc<Self>) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let all: Vec<Arc<Server>> = self.servers.values().cloned().collect();
        Ok(tools_of(&all).await?.1)
    }
}

/// The tools of `servers` as models see them, with the sum of the versions they were listed
/// at (each server's only moves on, so the sum moves on when any does). Names that collide
/// are an error naming both.
async fn tools_of(servers: &[Arc<Server>]) -> Result<(u64, Vec<Arc<dyn Tool>>), McpError> {
    let mut by_name: BTreeMap<String, String> = BTreeMap::new();
    let mut out: Vec<Arc<dyn Tool>> = Vec::new();
    let mut version = 0u64;
    for server in servers {
        let (v, listed) = server.list().await?;
        version = version.wrapping_add(v);
        for t in listed.iter() {
            let name = tool_name(&server.config.name, &t.name);
            let qualified = format!("{}/{}", server.config.name, t.name);
            if let Some(first) = by_name.insert(name.clone(), qualified.clone()) {
                return Err(McpError::Collision {
                    name,
                    first,
                    second: qualified,
                });
            }
            out.push(Arc::new(McpTool::new(server.clone(), name, t)?));
        }
    }
    Ok((version, out))
}

/// Some servers' tools, following their changes ([`McpServers::source_for`]).
struct McpSource {
    servers: Vec<Arc<Server>>,
    last: Mutex<Listing>,
    // Held while listing, so runs that start together after a change share one listing.
    listing: tokio::sync::Mutex<()>,
}

#[async_trait]
impl ToolSource for McpSource {
    fn version(&self) -> u64 {
        self.servers
            .iter()
            .fold(0u64, |sum, s| sum.wrapping_add(s.version()))
    }

    fn listed(&self) -> Listing {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn refresh(&self) -> Result<Listing, BoxError> {
        let _one = self.listing.lock().await;
        let last = self.listed();
        if last.version == self.version() {
            return Ok(last);
        }
        let (version, tools) = tools_of(&self.servers).await?;
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        tracing::info!(tools = ?names, "MCP servers' tools listed again after a change");
        let listing = Listing {
            version,
            tools: tools.into(),
        };
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = listing.clone();
        Ok(listing)
    }
}
