//! The flags every command that runs sub-agents takes (`run`, `batch`, `mcp`, `worker`), and
//! the one library [`HostBuilder`] they make.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use subcontract::events::JsonlSink;
use subcontract::host::{Host, HostBuilder};
use subcontract::model::{PriceTable, PromptCache, RateLimits};
use subcontract::SubAgentSpec;

use super::resolve::resolve_model;

/// Where runs happen and what they may use: the model, its API, the workspace, traces, prices
/// and rate limits.
#[derive(Debug, clap::Args, Clone)]
pub struct HostArgs {
    /// openai:MODEL, anthropic:MODEL, replay:FILE or example (default: $SUBCONTRACT_MODEL).
    #[arg(long, value_name = "PROVIDER:MODEL")]
    pub model: Option<String>,
    /// API root (OpenAI-compatible: with /v1; Anthropic: without).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Root of the read-only workspace tools (read_file, list_dir, grep).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub workspace: PathBuf,
    /// Write every run's events as JSON Lines (render with `subcontract trace`).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Extra or overriding model prices (TOML, USD per million tokens).
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Model calls per minute, per model, shared by every run.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub rpm: Option<u32>,
    /// Tokens (input + output) per minute, per model, shared by every run.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub tpm: Option<u64>,
    /// Prompt caching of every run whose spec sets no `prompt_cache`: off, 5m or 1h
    /// (default: $SUBCONTRACT_PROMPT_CACHE, else 5m). A spec's own setting wins.
    #[arg(long, value_name = "off|5m|1h", value_parser = parse_prompt_cache)]
    pub prompt_cache: Option<PromptCache>,
    /// MCP servers whose tools specs may name as mcp__SERVER__TOOL (the mcpServers format of
    /// .mcp.json). A .mcp.json beside the specs is used without it.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// Seconds one MCP tool call may take, for servers whose entry sets no `timeout`
    /// (default 60).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub mcp_timeout: Option<u64>,
}

/// A model that could not be made, as the command line says it: the library's message speaks
/// of a base URL (set in Rust with `HostBuilder::base_url`), so the flag that sets it here is
/// named after it.
pub fn model_error_line(name: String, error: subcontract::model::ModelError) -> String {
    let line = subcontract::host::HostError::Model { name, error }.to_string();
    if line.contains("base URL") {
        format!("{line}; here, pass the base URL with --base-url URL")
    } else {
        line
    }
}

fn parse_prompt_cache(s: &str) -> Result<PromptCache, String> {
    s.parse()
}

impl HostArgs {
    /// The model (`--model`, else `$SUBCONTRACT_MODEL`).
    pub fn model_name(&self) -> Result<String, String> {
        self.model
            .clone()
            .or_else(|| std::env::var("SUBCONTRACT_MODEL").ok())
            .ok_or_else(|| "no model: pass --model openai:MODEL|anthropic:MODEL|replay:FILE|example or set SUBCONTRACT_MODEL".to_string())
    }

    /// The host every run starts from: the model (one shared rate limiter per model id,
    /// sub-agents' models too, so a provider's `Retry-After` pauses every run), the
    /// workspace tools, `specs` as tools, the tools of the MCP servers they name (started
    /// here: `--mcp-config`, else a `.mcp.json` beside `spec_paths`), prices, the trace.
    /// Budget and run id are the caller's. The first `required` specs must hold every tool
    /// they name (the host is refused otherwise); the rest are at hand (the run spec's
    /// siblings) and left out when they name a tool the host lacks.
    pub async fn host(
        &self,
        specs: &[SubAgentSpec<Value, Value>],
        required: usize,
        spec_paths: &[PathBuf],
    ) -> Result<HostBuilder, String> {
        let model_name = self.model_name()?;
        // Made here, once, and handed to the host: a model that cannot be made (its key unset,
        // say) fails before MCP servers start and before an empty trace file is left behind.
        let model = resolve_model(&model_name, self.base_url.as_deref(), specs)
            .map_err(|error| model_error_line(model_name, error))?;
        let mut host = Host::builder()
            .model(model)
            .base_url(self.base_url.clone())
            .rate_limits(RateLimits {
                rpm: self.rpm,
                tpm: self.tpm,
            })
            .workspace(&self.workspace)
            .prompt_cache(self.prompt_cache)
            .specs(specs.iter().take(required).map(SubAgentSpec::erase))
            .optional_specs(specs.iter().skip(required).map(SubAgentSpec::erase));
        // `example` answers these specs; every other name goes to the library.
        let (resolver_specs, base_url) = (specs.to_vec(), self.base_url.clone());
        host = host.resolver(move |name| resolve_model(name, base_url.as_deref(), &resolver_specs));
        if let Some(path) = &self.prices {
            host = host.extra_prices(PriceTable::from_toml_file(path).map_err(|e| e.to_string())?);
        }
        if let Some(path) = &self.trace {
            let sink = JsonlSink::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
            host = host.sink(Arc::new(sink));
        }
        if let Some(source) = self.mcp_tools(specs, spec_paths).await? {
            host = host.tool_source(source);
        }
        Ok(host)
    }

    /// The tools of the MCP servers that `specs` name, starting those servers, as a source
    /// that follows their changes (each run that starts gets the current tools); none when
    /// there is no config.
    #[cfg(feature = "mcp-client")]
    async fn mcp_tools(
        &self,
        specs: &[SubAgentSpec<Value, Value>],
        spec_paths: &[PathBuf],
    ) -> Result<Option<Arc<dyn subcontract::tool::ToolSource>>, String> {
        use subcontract::tool::mcp::{
            find_mcp_config, load_mcp_config, render_diagnostics, McpServers,
        };
        let Some(path) = find_mcp_config(self.mcp_config.as_deref(), spec_paths)? else {
            return Ok(None);
        };
        if self.mcp_config.is_none() {
            tracing::info!("MCP servers from {}", path.display());
        }
        let config = load_mcp_config(&path).map_err(|d| render_diagnostics(&d))?;
        let servers = McpServers::new(config);
        if let Some(secs) = self.mcp_timeout {
            servers.call_timeout(std::time::Duration::from_secs(secs));
        }
        let names: Vec<String> = specs
            .iter()
            .flat_map(|s| s.erase().tools().to_vec())
            .collect();
        servers
            .source_for(names.iter().map(String::as_str))
            .await
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// Without MCP client support, a config is refused: a spec's MCP tools must never be
    /// silently missing.
    #[cfg(not(feature = "mcp-client"))]
    async fn mcp_tools(
        &self,
        _specs: &[SubAgentSpec<Value, Value>],
        _spec_paths: &[PathBuf],
    ) -> Result<Option<Arc<dyn subcontract::tool::ToolSource>>, String> {
        match self.mcp_config {
            None => Ok(None),
            Some(_) => {
                Err("--mcp-config: this build has no MCP client (feature `mcp-client`)".into())
            }
        }
    }

    /// The flags a Temporal starter does not take (they are the workers'), by name.
    pub fn set_flags(&self) -> Vec<&'static str> {
        let mut set = Vec::new();
        if self.model.is_some() {
            set.push("--model");
        }
        if self.base_url.is_some() {
            set.push("--base-url");
        }
        if self.workspace != std::path::Path::new(".") {
            set.push("--workspace");
        }
        if self.trace.is_some() {
            set.push("--trace");
        }
        if self.prices.is_some() {
            set.push("--prices");
        }
        if self.rpm.is_some() {
            set.push("--rpm");
        }
        if self.tpm.is_some() {
            set.push("--tpm");
        }
        if self.prompt_cache.is_some() {
            set.push("--prompt-cache");
        }
        if self.mcp_config.is_some() {
            set.push("--mcp-config");
        }
        if self.mcp_timeout.is_some() {
            set.push("--mcp-timeout");
        }
        set
    }
}
