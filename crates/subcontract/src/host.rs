//! The host: everything a root context is assembled from — the model (a name or a user's
//! [`Model`]), the models specs name, rate limits, prices, the workspace tools, specs as tools,
//! a host's own tools and event sinks. `subcontract run`, `batch`, `mcp` and `worker` all
//! build their root context here, from the same flags; a Rust host does the same in a few
//! lines.
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use subcontract::host::Host;
//! use subcontract::model::{ScriptStep, ScriptedModel};
//! use subcontract::spec::load_spec_str;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let spec = load_spec_str(std::path::Path::new("echo.toml"), r#"
//!     name = "echo"
//!     description = "Says it back."
//!     system = "Repeat the text."
//!     [input]
//!     type = "object"
//!     properties.text = { type = "string", maxLength = 50 }
//!     [output]
//!     type = "string"
//!     maxLength = 50
//! "#)?;
//! let model = Arc::new(ScriptedModel::queue("scripted:demo", vec![ScriptStep::text("hi")]));
//! let root = Host::builder()
//!     .model(model)
//!     .spec(spec.erase())
//!     .build()?
//!     .build();
//! let run = spec.erase().call_json(json!({"text": "hi"}), &root).await;
//! assert_eq!(run.output, Some(json!("hi")));
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::ctx::{CtxBuilder, ModelResolver};
use crate::events::{EventSink, Sinks};
use crate::model::{
    Model, ModelError, PriceTable, PromptCache, RateLimited, RateLimits, Recorder, ReplayModel,
};
use crate::spec::DynSpec;
use crate::tool::workspace::{Workspace, WorkspaceError};
use crate::tool::{IntoTool, LiveTools, Tool, ToolSet, ToolSetError, ToolSource};
use crate::Ctx;

/// Why a host could not be assembled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// No model was given, by name or as a value.
    #[error(
        "no model: give the host one with `HostBuilder::model` (a `Model` value) or `HostBuilder::model_name` (`openai:MODEL`, `anthropic:MODEL`, `replay:FILE`)"
    )]
    NoModel,
    /// The model could not be made.
    #[error("model `{name}`: {error}")]
    Model {
        /// The name asked for.
        name: String,
        /// Why.
        error: ModelError,
    },
    /// The workspace is not a directory that can be opened.
    #[error("workspace: {0}")]
    Workspace(#[from] WorkspaceError),
    /// Two tools share a name (a spec named like a workspace tool, say).
    #[error("tools: {0}")]
    Tools(#[from] ToolSetError),
    /// A recording file could not be opened.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// The entry point: [`Host::builder`].
#[derive(Debug)]
pub struct Host;

impl Host {
    /// A host with no model yet, the built-in prices, no rate limits, no tools and no sinks.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }
}

enum ModelChoice {
    None,
    Named(String),
    Given(Arc<dyn Model>),
}

/// Assembles a root context ([`HostBuilder::build`] returns the [`CtxBuilder`], for the
/// caller's budget, run id, gate or spend journal).
pub struct HostBuilder {
    model: ModelChoice,
    base_url: Option<String>,
    resolver: Option<Arc<ModelResolver>>,
    rate_limits: Option<RateLimits>,
    record: Option<PathBuf>,
    prompt_cache: Option<PromptCache>,
    prices: PriceTable,
    workspace: Option<PathBuf>,
    specs: Vec<DynSpec>,
    tools: Vec<Arc<dyn Tool>>,
    sources: Vec<Arc<dyn ToolSource>>,
    sinks: Vec<Arc<dyn EventSink>>,
}

impl Default for HostBuilder {
    fn default() -> Self {
        HostBuilder {
            model: ModelChoice::None,
            base_url: None,
            resolver: None,
            rate_limits: None,
            record: None,
            prompt_cache: None,
            prices: PriceTable::builtin(),
            workspace: None,
            specs: Vec::new(),
            tools: Vec::new(),
            sources: Vec::new(),
            sinks: Vec::new(),
        }
    }
}

impl std::fmt::Debug for HostBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let model = match &self.model {
            ModelChoice::None => "none".to_string(),
            ModelChoice::Named(n) => n.clone(),
            ModelChoice::Given(m) => m.id().to_string(),
        };
        f.debug_struct("HostBuilder")
            .field("model", &model)
            .field("workspace", &self.workspace)
            .field(
                "specs",
                &self.specs.iter().map(DynSpec::name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl HostBuilder {
    /// The host's model, as a value (a provider, a scripted model, a user's own `Model`).
    pub fn model(mut self, model: Arc<dyn Model>) -> Self {
        self.model = ModelChoice::Given(model);
        self
    }

    /// The host's model by name (`openai:MODEL`, `anthropic:MODEL`, `replay:FILE`, or any
    /// name the [`resolver`](Self::resolver) knows), made when the host is built.
    pub fn model_name(mut self, name: impl Into<String>) -> Self {
        self.model = ModelChoice::Named(name.into());
        self
    }

    /// The API root for models made by name (with `/v1` for OpenAI-compatible servers).
    pub fn base_url(mut self, url: Option<String>) -> Self {
        self.base_url = url;
        self
    }

    /// Makes models from names: the host's model when given by name, and the models specs
    /// name. It may answer only some names and hand the rest to [`resolve_model`]. Default:
    /// [`resolve_model`] with the host's base URL.
    pub fn resolver(
        mut self,
        resolve: impl Fn(&str) -> Result<Arc<dyn Model>, ModelError> + Send + Sync + 'static,
    ) -> Self {
        self.resolver = Some(Arc::new(resolve));
        self
    }

    /// Rate limits per model id, shared by every run under the host; each model is wrapped
    /// once in a [`RateLimited`], so a provider's `Retry-After` pauses every run that uses
    /// it.
    pub fn rate_limits(mut self, limits: RateLimits) -> Self {
        self.rate_limits = Some(limits);
        self
    }

    /// Records the host model's exchanges to `path`, for `replay:PATH`.
    pub fn record(mut self, path: Option<PathBuf>) -> Self {
        self.record = path;
        self
    }

    /// Prompt caching for every run whose spec does not set its own
    /// ([`CtxBuilder::prompt_cache`]); `None` leaves each model's own setting.
    pub fn prompt_cache(mut self, cache: Option<PromptCache>) -> Self {
        self.prompt_cache = cache;
        self
    }

    /// The price table (default: the built-in one).
    pub fn prices(mut self, prices: PriceTable) -> Self {
        self.prices = prices;
        self
    }

    /// Prices added to (or overriding) the table.
    pub fn extra_prices(mut self, prices: PriceTable) -> Self {
        self.prices.extend(prices);
        self
    }

    /// The read-only workspace tools (`read_file`, `list_dir`, `grep`), rooted at `dir`.
    pub fn workspace(mut self, dir: impl AsRef<Path>) -> Self {
        self.workspace = Some(dir.as_ref().to_path_buf());
        self
    }

    /// A spec as a tool of the host (and of every sub-agent whose spec names it).
    pub fn spec(mut self, spec: impl Into<DynSpec>) -> Self {
        self.specs.push(spec.into());
        self
    }

    /// Several specs as tools.
    pub fn specs<S: Into<DynSpec>>(mut self, specs: impl IntoIterator<Item = S>) -> Self {
        self.specs.extend(specs.into_iter().map(Into::into));
        self
    }

    /// One of the host's own tools: a [`#[tool]`](macro@crate::tool) function, any
    /// [`TypedTool`](crate::TypedTool), or an `Arc<dyn Tool>` ([`FnTool`](crate::FnTool), …).
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.tools.push(tool.into_dyn_tool());
        self
    }

    /// Tools of a source whose tools change while the host lives (the MCP servers specs
    /// name: [`McpServers::source_for`](crate::tool::mcp::McpServers::source_for)): each run
    /// that starts gets the source's current tools, under the rules of every other tool.
    pub fn tool_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
        self
    }

    /// An event sink (a trace file, progress, …); every run's events reach each one.
    pub fn sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// The specs added so far.
    pub fn spec_list(&self) -> &[DynSpec] {
        &self.specs
    }

    /// Makes the model, the tool set and the sinks, and returns the root context's builder.
    pub fn build(self) -> Result<CtxBuilder, HostError> {
        let limiter = self.rate_limits.map(|limits| {
            Arc::new(Limiter {
                limits,
                by_id: Mutex::default(),
            })
        });
        let base_url = self.base_url;
        let named: Arc<ModelResolver> = self.resolver.unwrap_or_else(|| {
            let base_url = base_url.clone();
            Arc::new(move |name: &str| resolve_model(name, base_url.as_deref()))
        });
        let mut model = match self.model {
            ModelChoice::None => return Err(HostError::NoModel),
            ModelChoice::Given(m) => m,
            ModelChoice::Named(name) => named(&name).map_err(|error| HostError::Model {
                name: name.clone(),
                error,
            })?,
        };
        if let Some(path) = &self.record {
            model = Arc::new(
                Recorder::to_file(model, path).map_err(|source| HostError::Io {
                    path: path.display().to_string(),
                    source,
                })?,
            );
        }
        if let Some(l) = &limiter {
            model = l.wrap(model);
        }
        let mut tools = ToolSet::new();
        if let Some(dir) = &self.workspace {
            for t in Workspace::new(dir)?.tools() {
                tools.insert(t)?;
            }
        }
        for t in self.tools {
            tools.insert(t)?;
        }
        for s in &self.specs {
            tools.insert(s.as_tool())?;
        }
        let resolver = move |name: &str| -> Result<Arc<dyn Model>, ModelError> {
            let m = named(name)?;
            Ok(match &limiter {
                Some(l) => l.wrap(m),
                None => m,
            })
        };
        let ctx = Ctx::builder(model);
        let ctx = if self.sources.is_empty() {
            ctx.tools(tools)
        } else {
            ctx.live_tools(Arc::new(LiveTools::new(tools, self.sources)?))
        };
        let ctx = ctx
            .prices(self.prices)
            .events(Arc::new(Sinks(self.sinks)))
            .model_resolver(resolver);
        Ok(match self.prompt_cache {
            Some(cache) => ctx.prompt_cache(cache),
            None => ctx,
        })
    }
}

/// Makes a model from its name: `replay:PATH` (answers recorded with `--record PATH`), or a
/// provider's `openai:MODEL` / `anthropic:MODEL` ([`crate::provider::model_from_name`], with
/// `base_url` as the API root).
pub fn resolve_model(name: &str, base_url: Option<&str>) -> Result<Arc<dyn Model>, ModelError> {
    if let Some(path) = name.strip_prefix("replay:") {
        return ReplayModel::from_file(path)
            .map(|m| Arc::new(m) as Arc<dyn Model>)
            .map_err(|e| ModelError::Config(e.to_string()));
    }
    crate::provider::model_from_name(name, base_url)
}

/// One shared [`RateLimited`] per model id, so every run of the host draws from the same
/// buckets.
struct Limiter {
    limits: RateLimits,
    by_id: Mutex<HashMap<String, Arc<dyn Model>>>,
}

impl Limiter {
    fn wrap(&self, model: Arc<dyn Model>) -> Arc<dyn Model> {
        let limits = self.limits;
        let mut by_id = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        by_id
            .entry(model.id().to_string())
            .or_insert_with(|| Arc::new(RateLimited::new(model, limits)))
            .clone()
    }
}
