//! The servers of one config, as one shared handle that yields their tools.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::config::McpConfig;
use super::names::{server_prefix, tool_name};
use super::server::{McpError, Server};
use super::tool::McpTool;
use crate::tool::Tool;

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
    /// the [`ToolSet`](crate::ToolSet)'s job, as for every tool.
    pub async fn tools_for<'a>(
        self: &Arc<Self>,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let names: Vec<&str> = names.into_iter().collect();
        let wanted: Vec<&Arc<Server>> = self
            .servers
            .values()
            .filter(|s| {
                let p = server_prefix(&s.config.name);
                names.iter().any(|n| {
                    n.strip_prefix(p.as_str())
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with("__"))
                })
            })
            .collect();
        self.tools_of(wanted).await
    }

    /// The tools of every server (what `check --mcp-config` lists), starting them all.
    pub async fn all_tools(self: &Arc<Self>) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        self.tools_of(self.servers.values().collect()).await
    }

    async fn tools_of(&self, servers: Vec<&Arc<Server>>) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let mut by_name: BTreeMap<String, String> = BTreeMap::new();
        let mut out: Vec<Arc<dyn Tool>> = Vec::new();
        for server in servers {
            for t in server.list().await?.iter() {
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
        Ok(out)
    }
}
