//! The host: everything a root context is assembled from — the model (a name or a user's
//! [`Model`]), the models specs name, rate limits, prices, the workspace tools, specs as tools,
//! a host's own tools and event sinks. `subcontract run`, `batch`, `mcp` and `worker` all
//! build their root context here, from the same flags; a Rust host does the same in a few
//! lines, and asks its own model with [`Ctx::ask`].
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

mod ask;

pub use ask::{Ask, AskError, AskFor, AskFuture, DEFAULT_HOST_SYSTEM, DEFAULT_MAX_ANSWER_CHARS};

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
#[derive(thiserror::Error)]
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
    /// Specs the host holds name tools it does not hold: each would end `denied` at its first
    /// call, so the host is refused instead.
    #[error("{}", unknown_tools(.0))]
    UnknownTools(Vec<UnknownTool>),
    /// A recording file could not be opened.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

crate::debug_as_display!(HostError);

/// One unknown tool on one line; several under a line that says how many, each indented, so
/// that a caller's prefix (`error: `) heads the whole.
fn unknown_tools(all: &[UnknownTool]) -> String {
    match all {
        [one] => one.to_string(),
        many => {
            let mut s = format!(
                "{} tools named by specs are not held by this host:",
                many.len()
            );
            for u in many {
                s.push_str(&format!("\n  {u}"));
            }
            s
        }
    }
}

/// A tool a spec names and the host does not hold ([`HostError::UnknownTools`]).
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "spec `{spec}` names the tool `{tool}`, which this host does not hold{}",
    match suggestion {
        Some(s) => format!("; did you mean `{s}`?"),
        None => String::new(),
    }
)]
#[non_exhaustive]
pub struct UnknownTool {
    /// The spec.
    pub spec: String,
    /// The name in its tool list.
    pub tool: String,
    /// The closest name the host holds, if one is close.
    pub suggestion: Option<String>,
}

crate::debug_as_display!(UnknownTool);

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
    copies_dir: Option<PathBuf>,
    specs: Vec<DynSpec>,
    // Offered when the host holds every tool they name, else left out (`optional_specs`).
    optional: Vec<DynSpec>,
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
            copies_dir: None,
            specs: Vec::new(),
            optional: Vec::new(),
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

    /// The workspace tools rooted at `dir`: the read-only ones (`read_file`, `list_dir`,
    /// `grep`), and, when one of the host's specs acts (its `[workspace]` isolates it), the
    /// acting ones (`write_file`, `edit_file`, `run_command`, `accept_changes`,
    /// `discard_changes`), which act only in a working copy of `dir` that an acting run gets,
    /// never on `dir` itself.
    pub fn workspace(mut self, dir: impl AsRef<Path>) -> Self {
        self.workspace = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Where acting runs' working copies (and the patches no one applied) live, instead of
    /// the default outside the workspace (`$TMPDIR/subcontract-copies`, or
    /// `SUBCONTRACT_COPIES_DIR`). Must not be inside the workspace.
    pub fn copies_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.copies_dir = Some(dir.as_ref().to_path_buf());
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

    /// Specs offered as tools only if the host holds every tool they name; one that names a
    /// tool the host lacks is left out (said in a `debug` log), not refused. For specs that
    /// are at hand rather than asked for, as the command line's `run` offers the other spec
    /// files of the run spec's directory: a typo in one of them is `check`'s to report, not a
    /// reason to refuse an unrelated run.
    pub fn optional_specs<S: Into<DynSpec>>(mut self, specs: impl IntoIterator<Item = S>) -> Self {
        self.optional.extend(specs.into_iter().map(Into::into));
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
    ///
    /// Every tool a held spec names must be held by the host (a workspace tool, one of its
    /// own tools, or another held spec), or the host is refused with
    /// [`HostError::UnknownTools`], each with a "did you mean". The exception: with a
    /// [`tool_source`](Self::tool_source), names `mcp__…` are the servers' to answer, and their
    /// tools may change while the host lives, so they are checked when a run starts.
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
            // Held only where a spec acts: a host whose specs only read offers its models no
            // tool that would refuse.
            let acts = self
                .specs
                .iter()
                .chain(&self.optional)
                .any(|s| s.workspace().acts());
            if acts {
                for t in crate::act::tools() {
                    tools.insert(t)?;
                }
            }
        }
        for t in self.tools {
            tools.insert(t)?;
        }
        // What the sources list now; `mcp__` names beyond it are left to them (their tools
        // may change while the host lives, and are checked when a run starts).
        let mut sourced = ToolSet::new();
        for source in &self.sources {
            for t in source.listed().tools.iter() {
                // A name listed twice is the join's to refuse, below.
                let _ = sourced.insert(t.clone());
            }
        }
        let specs = with_held_optional(
            self.specs,
            self.optional,
            &tools,
            &sourced,
            !self.sources.is_empty(),
        );
        for s in &specs {
            tools.insert(s.as_tool())?;
        }
        check_spec_tools(&specs, &tools, &sourced, !self.sources.is_empty())?;
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
        let mut ctx = ctx
            .prices(self.prices)
            .events(Arc::new(Sinks(self.sinks)))
            .model_resolver(resolver);
        if let Some(dir) = &self.workspace {
            let mut acting = crate::act::ActHost::new(dir);
            if let Some(copies) = &self.copies_dir {
                acting = acting.with_copies_dir(copies);
            }
            ctx = ctx.acting(acting);
        }
        Ok(match self.prompt_cache {
            Some(cache) => ctx.prompt_cache(cache),
            None => ctx,
        })
    }
}

/// The names in `spec`'s tool list that neither `tools` nor `sourced` (what the sources list
/// now) holds; with `sources`, `mcp__` names are left to them.
fn missing_tools(spec: &DynSpec, tools: &ToolSet, sourced: &ToolSet, sources: bool) -> Vec<String> {
    spec.tools()
        .iter()
        .map(String::as_str)
        .filter(|n| !(sources && n.starts_with("mcp__")))
        .filter(|n| tools.listed([*n]).is_err() && sourced.listed([*n]).is_err())
        .map(str::to_owned)
        .collect()
}

/// `specs`, and those of `optional` whose every tool is held: by `tools`, the sources, a
/// spec, or another optional spec that stays (so until none is left out).
fn with_held_optional(
    specs: Vec<DynSpec>,
    mut optional: Vec<DynSpec>,
    tools: &ToolSet,
    sourced: &ToolSet,
    sources: bool,
) -> Vec<DynSpec> {
    loop {
        let mut held = tools.clone();
        for s in specs.iter().chain(&optional) {
            // A name taken twice is refused when the specs are inserted for real.
            let _ = held.insert(s.as_tool());
        }
        let before = optional.len();
        optional.retain(|s| {
            let missing = missing_tools(s, &held, sourced, sources);
            if !missing.is_empty() {
                tracing::debug!(
                    spec = s.name(),
                    ?missing,
                    "optional spec left out: it names tools the host does not hold"
                );
            }
            missing.is_empty()
        });
        if optional.len() == before {
            break;
        }
    }
    specs.into_iter().chain(optional).collect()
}

/// Every tool the specs name that `tools` (or the sources' current listing) does not hold,
/// with the closest held name. With `sources`, `mcp__` names are left to them.
fn check_spec_tools(
    specs: &[DynSpec],
    tools: &ToolSet,
    sourced: &ToolSet,
    sources: bool,
) -> Result<(), HostError> {
    let mut unknown = Vec::new();
    for spec in specs {
        let missing = missing_tools(spec, tools, sourced, sources);
        if missing.is_empty() {
            continue;
        }
        // Sorted, so a tie between suggestions is broken the same way every time.
        let mut known: Vec<&str> = tools
            .names()
            .chain(tools.entries().filter_map(|e| e.tool().group()))
            .chain(sourced.names())
            .chain(sourced.entries().filter_map(|e| e.tool().group()))
            .filter(|n| *n != spec.name())
            .collect();
        known.sort_unstable();
        known.dedup();
        for tool in missing {
            let suggestion = crate::diag::suggest(&tool, &known).map(str::to_owned);
            unknown.push(UnknownTool {
                spec: spec.name().to_owned(),
                tool,
                suggestion,
            });
        }
    }
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(HostError::UnknownTools(unknown))
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use serde_json::json;

    use super::{Host, HostBuilder, HostError, UnknownTool};
    use crate::model::ScriptedModel;
    use crate::spec::DynSpec;
    use crate::tool::{BoxError, Listing, ToolSource};
    use crate::{FnTool, SubAgentSpec, ToolOutput};

    fn spec(name: &str, tools: &[&str]) -> DynSpec {
        let s = json!({"type": "string", "maxLength": 20});
        SubAgentSpec::dynamic(name, s.clone(), s)
            .description("A test spec.")
            .tools(tools.iter().copied())
            .build()
            .expect("a spec")
            .erase()
    }

    fn host() -> HostBuilder {
        let lookup = FnTool::new(
            "lookup_order",
            "Looks an order up.",
            json!({"type": "object"}),
            |_| async { ToolOutput::text("shipped") },
        );
        Host::builder()
            .model(Arc::new(ScriptedModel::queue("scripted:t", vec![])))
            .tool(lookup)
    }

    fn unknown(host: HostBuilder) -> Vec<UnknownTool> {
        match host.build() {
            Err(HostError::UnknownTools(u)) => u,
            Err(e) => panic!("another error: {e}"),
            Ok(_) => panic!("the host was built"),
        }
    }

    #[test]
    fn a_misspelt_tool_of_a_held_spec_fails_the_build_with_a_suggestion() {
        let u = unknown(host().spec(spec("order_status", &["lookup_ordr"])));
        assert_eq!(
            u,
            [UnknownTool {
                spec: "order_status".into(),
                tool: "lookup_ordr".into(),
                suggestion: Some("lookup_order".into()),
            }]
        );
        assert_eq!(
            HostError::UnknownTools(u).to_string(),
            "spec `order_status` names the tool `lookup_ordr`, which this host does not hold; \
             did you mean `lookup_order`?"
        );
    }

    #[test]
    fn every_unknown_tool_of_every_spec_is_named_and_far_names_get_no_suggestion() {
        let u = unknown(
            host()
                .spec(spec("a", &["lookup_order", "weather"]))
                .spec(spec("b", &["greep", "a"])),
        );
        let got: Vec<(&str, &str, Option<&str>)> = u
            .iter()
            .map(|u| (&*u.spec, &*u.tool, u.suggestion.as_deref()))
            .collect();
        // Without a workspace, `grep` is not held, so it is not suggested either.
        assert_eq!(got, [("a", "weather", None), ("b", "greep", None)]);
    }

    #[test]
    fn held_tools_workspace_tools_and_held_specs_pass() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        host()
            .workspace(dir.path())
            .spec(spec("a", &["lookup_order", "grep", "read_file"]))
            .spec(spec("b", &["a", "list_dir"]))
            .build()
            .expect("every named tool is held");
        let u = unknown(host().workspace(dir.path()).spec(spec("a", &["gerp"])));
        assert_eq!(u[0].suggestion.as_deref(), Some("grep"));
    }

    /// A tool that implements `Tool` itself.
    struct Plain;

    #[async_trait]
    impl crate::Tool for Plain {
        fn name(&self) -> &str {
            "plain"
        }
        fn description(&self) -> &str {
            "A plain tool."
        }
        fn input_schema(&self) -> Arc<serde_json::Value> {
            Arc::new(json!({"type": "object"}))
        }
        async fn call(&self, _: serde_json::Value, _: &crate::Ctx) -> ToolOutput {
            ToolOutput::text("plain")
        }
    }

    #[test]
    fn a_host_takes_an_arc_of_a_tool_type_as_it_takes_a_dyn_tool() {
        let root = host()
            .tool(Arc::new(Plain))
            .spec(spec("a", &["plain", "lookup_order"]))
            .build()
            .expect("both tools are held")
            .build();
        assert!(root.tools().get("plain").is_some());
    }

    /// A source that lists nothing yet: its servers' tools may appear later.
    struct Later;

    #[async_trait]
    impl ToolSource for Later {
        fn version(&self) -> u64 {
            0
        }
        fn listed(&self) -> Listing {
            Listing {
                version: 0,
                tools: Arc::new([]),
            }
        }
        async fn refresh(&self) -> Result<Listing, BoxError> {
            Ok(self.listed())
        }
    }

    #[test]
    fn mcp_names_are_left_to_a_tool_source_and_refused_without_one() {
        let named = spec("a", &["mcp__fs__read_text_file"]);
        host()
            .tool_source(Arc::new(Later))
            .spec(named.clone())
            .build()
            .expect("a source answers mcp__ names when a run starts");
        let u = unknown(host().spec(named));
        assert_eq!(u[0].tool, "mcp__fs__read_text_file");
    }

    /// A source of the caller's own that lists `search` now.
    struct Listed;

    #[async_trait]
    impl ToolSource for Listed {
        fn version(&self) -> u64 {
            1
        }
        fn listed(&self) -> Listing {
            let t: Arc<dyn crate::tool::Tool> = FnTool::new(
                "search",
                "Searches.",
                json!({"type": "object"}),
                |_| async { ToolOutput::text("found") },
            );
            Listing {
                version: 1,
                tools: Arc::new([t]),
            }
        }
        async fn refresh(&self) -> Result<Listing, BoxError> {
            Ok(self.listed())
        }
    }

    #[test]
    fn a_tool_a_source_lists_now_is_held_and_near_misses_are_suggested() {
        host()
            .tool_source(Arc::new(Listed))
            .spec(spec("a", &["search"]))
            .build()
            .expect("the source lists `search`");
        let u = unknown(
            host()
                .tool_source(Arc::new(Listed))
                .spec(spec("a", &["serch"])),
        );
        assert_eq!(u[0].suggestion.as_deref(), Some("search"));
    }

    #[test]
    fn several_unknown_tools_read_as_one_message_with_a_line_each() {
        let e = match host().spec(spec("a", &["lookup_ordr", "zzz"])).build() {
            Err(e) => e.to_string(),
            Ok(_) => panic!("the host was built"),
        };
        let lines: Vec<&str> = e.lines().collect();
        assert_eq!(
            lines[0], "2 tools named by specs are not held by this host:",
            "{e}"
        );
        assert!(
            lines[1].starts_with("  spec `a` names the tool `lookup_ordr`"),
            "{e}"
        );
        assert_eq!(lines.len(), 3, "{e}");
    }

    #[test]
    fn optional_specs_that_name_unheld_tools_are_left_out_not_refused() {
        let ctx = host()
            .spec(spec("main", &["lookup_order", "helper"]))
            .optional_specs([
                spec("helper", &["lookup_order"]),
                spec("typo", &["lookup_ordr"]),
                // Stays only while `typo` would: left out with it.
                spec("leans", &["typo"]),
            ])
            .build()
            .expect("a typo in an optional spec does not refuse the host")
            .build();
        let names: Vec<&str> = ctx.tools().names().collect();
        assert!(names.contains(&"helper"), "{names:?}");
        assert!(
            !names.contains(&"typo") && !names.contains(&"leans"),
            "{names:?}"
        );
        // A required spec that leans on a left-out one is refused, with the name.
        let u = unknown(
            host()
                .spec(spec("main", &["typo"]))
                .optional_specs([spec("typo", &["lookup_ordr"])]),
        );
        assert_eq!((u[0].spec.as_str(), u[0].tool.as_str()), ("main", "typo"));
    }
}
