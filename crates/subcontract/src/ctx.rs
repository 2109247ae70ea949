//! The context a run executes in: the host's shared parts, a run's own, and the one way a
//! run's context is made from its parent's.

use std::fmt::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::act::{ActHost, RunCopy};
use crate::budget::{Budget, SpendJournal};
use crate::events::{Event, EventKind, EventSink, NullSink};
use crate::gate::{ApprovalGate, Gate};
use crate::model::{Model, ModelError, PriceTable, PromptCache};
use crate::outcome::SpawnError;
use crate::tool::workspace::Workspace;
use crate::tool::{LiveTools, ToolEntry, ToolSet};

mod clock;
mod shared_prefix;
#[cfg(test)]
mod tests;
mod unless_cancelled;

pub(crate) use clock::RunClock;
pub(crate) use shared_prefix::{Opener, SharedPrefix};
use unless_cancelled::UnlessCancelled;

/// Default maximum depth: the host is depth 0, its sub-agents 1, theirs 2.
pub const DEFAULT_MAX_DEPTH: u32 = 2;
/// Default number of sub-agent calls of one model response that run at once.
pub const DEFAULT_FANOUT_LIMIT: usize = 3;

/// What a context needs to know of a spec to fork the context its sub-agent runs in
/// ([`Ctx::child`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ChildTerms<'a> {
    /// The spec's name (the child's run id is `<parent>.<name>-<n>`).
    pub name: &'a Arc<str>,
    /// The tools the child may use; each must be held by the parent.
    pub tools: &'a [String],
    /// The child's own USD limit, capped by what the parent has left.
    pub max_cost_usd: Option<rust_decimal::Decimal>,
    /// The child's own model-call limit.
    pub max_model_calls: Option<u64>,
    /// The model the spec asks for, if not its parent's.
    pub model: Option<&'a str>,
}

/// Anything a child context can be forked for: a spec, typed ([`crate::SubAgentSpec`]) or
/// erased ([`crate::spec::DynSpec`]).
pub trait Delegate {
    /// The terms of the child context.
    fn terms(&self) -> ChildTerms<'_>;
}

/// Makes models from `provider:model` names (for specs that name their own model).
pub type ModelResolver = dyn Fn(&str) -> Result<Arc<dyn Model>, ModelError> + Send + Sync;

/// What every run under one host shares and never changes: made once by [`CtxBuilder::build`]
/// and held by every context under it, so that a run's own context holds only what differs.
struct HostParts {
    max_depth: u32,
    events: Arc<dyn EventSink>,
    resolver: Option<Arc<ModelResolver>>,
    prices: Arc<PriceTable>,
    fanout_limit: usize,
    journal: Option<Arc<dyn SpendJournal>>,
    prompt_cache: Option<PromptCache>,
    share_prefix: bool,
    /// What acting runs copy, and where copies and kept patches live.
    act: Option<Arc<ActHost>>,
}

/// Who a context is: its ids and depth, which every event it emits is stamped with, and
/// whether a run is under way in it.
#[derive(Clone)]
struct Stamp {
    run_id: Arc<str>,
    parent_run_id: Option<Arc<str>>,
    spec: Arc<str>,
    depth: u32,
    role: Role,
}

/// What a context is, which decides what a spec run in it starts ([`Ctx::next_run`]). Set
/// where the context is made, never changed after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The host's: each spec run in it is a root run of its own, with an id of its own
    /// (`root`, `root-2`, …).
    Host,
    /// A child context made for a caller by [`Ctx::child`] (as the MCP server makes one per
    /// call): the first spec run in it is the child's own run, with the child's id; from then
    /// on it is that run's context, and a later spec run in it is that run's child.
    Child,
    /// The context of a run under way, which its tools are called with: a spec run in it is a
    /// child of that run, one level deeper. Never a second root at the same depth, which would
    /// let a tool recurse without bound.
    Run,
}

/// What a spec run in a context starts ([`Ctx::next_run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NextRun {
    /// A root run, the `n`th started from the context ([`Ctx::for_root_run`]).
    Root(u32),
    /// A child of the run under way in the context ([`Ctx::child_run`]).
    Child,
}

/// The tools a context holds, and those of them its run offers its model.
#[derive(Clone)]
struct Holding {
    tools: ToolSet,
    // The tool names the run's spec lists, in a root run only: it holds the host's whole set
    // (which its sub-agents draw from) and offers its model those of it the spec names. A
    // child holds exactly what it offers.
    offered: Option<Arc<[String]>>,
    // The host's tools that follow sources which change (MCP servers): a run that starts
    // from the host gets the current set. `None` in every run's context, whose tools are fixed.
    live: Option<Arc<LiveTools>>,
    // The working copy the run's tools see: its own when its spec acts, else its nearest
    // acting ancestor's (read-only for it), else none (the host's workspace).
    copy: Option<Arc<RunCopy>>,
}

/// The model a context's run calls, with its id held once instead of copied into every
/// `started` event.
#[derive(Clone)]
struct RunModel {
    model: Arc<dyn Model>,
    id: Arc<str>,
}

impl RunModel {
    fn new(model: Arc<dyn Model>) -> Self {
        RunModel {
            id: Arc::from(model.id()),
            model,
        }
    }
}

/// A fan-out's share of one prompt-cache write ([`CtxBuilder::share_fanout_prefix`]).
#[derive(Clone, Default)]
struct Fanout {
    // Given to the sub-agents this view of the run starts (one fan-out's siblings of one spec).
    handoff: Option<Arc<SharedPrefix>>,
    // This run's siblings' share, when it was started as one of them.
    siblings: Option<Arc<SharedPrefix>>,
}

/// The counters that keep run ids unique, shared by every view of one run (see
/// [`Ctx::with_stricter_gate`]).
#[derive(Clone, Default)]
struct Counters {
    // Children made from this run.
    children: Arc<AtomicU32>,
    // What is this run's alone (one allocation a run).
    own: Arc<RunOwn>,
}

/// What every view of one run shares and no other run does.
#[derive(Default)]
struct RunOwn {
    // Runs started from this context as root runs (`next_run`), so that each gets an id of its
    // own; in a child context made for a caller, whether its own run has started.
    runs: AtomicU32,
    // When this run must answer by, for its sub-agents (written by the run as it goes).
    clock: RunClock,
}

/// What a run started from a context owns ([`Ctx::fork`]).
struct Fork {
    stamp: Stamp,
    holding: Holding,
    budget: Budget,
    model: RunModel,
    counters: Counters,
    siblings: Option<Arc<SharedPrefix>>,
}

/// A run's own context: what differs from one run to the next. The rest is the host's.
#[derive(Clone)]
struct Inner {
    host: Arc<HostParts>,
    stamp: Stamp,
    holding: Holding,
    budget: Budget,
    gate: Gate,
    model: RunModel,
    cancel: CancellationToken,
    fanout: Fanout,
    counters: Counters,
    // The run above's own part, whose clock bounds this run's (see `Counters::own`).
    parent_clock: Option<Arc<RunOwn>>,
}

/// Run id, parent run id, depth, capabilities (tools), budget, approval gate, event sink,
/// model and cancellation of one run. Cloning is cheap and shares everything.
///
/// Build the host's context with [`Ctx::builder`]: it holds what every run under the host
/// shares and never changes (event sink, prices, model resolver, depth and fan-out limits,
/// spend journal, prompt caching), and the host's tools, budget, gate and model. A run's
/// context holds only what is its own: its ids and depth, the tools it holds and offers, its
/// budget node, its gate chain, its model, its cancellation and its fan-out share.
///
/// A sub-agent's context comes from [`Ctx::child`], which enforces the invariants: a child's
/// tools are a subset of its parent's, its budget is forked from the parent's remaining
/// budget, its depth is bounded, its gate is at least as strict, and cancelling the parent
/// cancels it. A spec run straight from the host's context (a root run, `spec.run(&input,
/// &host)`) is made the same way at the host's depth: it holds the host's tools, which its
/// sub-agents draw from, and offers its own model those its spec names.
///
/// What a spec run in a context starts follows from what the context is, set where it is
/// made. In the host's context: a root run of its own. In a child context
/// made by [`Ctx::child`] and handed to a caller: the child's own run the first time, then
/// children of that run. In a run's context (a root run's, a sub-agent's, and every view of
/// either), which the run's tools are called with: a child of that run, one level deeper, so
/// a tool that runs a spec again and again is stopped by the depth limit.
#[derive(Clone)]
pub struct Ctx {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("run_id", &self.inner.stamp.run_id)
            .field("depth", &self.inner.stamp.depth)
            .field("tools", &self.inner.holding.tools)
            .field("model", &self.inner.model.id)
            .finish_non_exhaustive()
    }
}

/// Builds a host context. Cloning copies the settings (sharing the model, tools and sinks), so
/// one template can build many hosts.
#[derive(Clone)]
pub struct CtxBuilder {
    run_id: String,
    spec: String,
    max_depth: u32,
    tools: ToolSet,
    live: Option<Arc<LiveTools>>,
    budget: Budget,
    gate: Gate,
    events: Arc<dyn EventSink>,
    model: Arc<dyn Model>,
    resolver: Option<Arc<ModelResolver>>,
    // `None`: the built-in table, resolved at `build` so that a table given instead costs
    // no parse of it.
    prices: Option<Arc<PriceTable>>,
    cancel: CancellationToken,
    fanout_limit: usize,
    journal: Option<Arc<dyn SpendJournal>>,
    prompt_cache: Option<PromptCache>,
    share_prefix: bool,
    act: Option<Arc<ActHost>>,
}

impl CtxBuilder {
    /// Run id of the host (default `root`). The first run started from the context has this
    /// id; each later one the id with `-2`, `-3`, … (`root-2`).
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run_id = id.into();
        self
    }
    /// Name recorded as the host's spec in events (default `host`).
    pub fn spec_name(mut self, name: impl Into<String>) -> Self {
        self.spec = name.into();
        self
    }
    /// Maximum depth (default 2).
    pub fn max_depth(mut self, depth: u32) -> Self {
        self.max_depth = depth;
        self
    }
    /// The tools the host holds: every capability any descendant can have. Replaces
    /// [`live_tools`](Self::live_tools).
    pub fn tools(mut self, tools: ToolSet) -> Self {
        self.tools = tools;
        self.live = None;
        self
    }
    /// Tools the host holds that follow sources whose tools change (MCP servers that send
    /// `tools/list_changed`): each run that starts from the host gets the set current then,
    /// and keeps it for its life. Replaces [`tools`](Self::tools).
    pub fn live_tools(mut self, live: Arc<LiveTools>) -> Self {
        self.tools = live.latest();
        self.live = Some(live);
        self
    }
    /// The root budget (default: unlimited, still counted).
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }
    /// The approval gate (default: allow all).
    pub fn gate(mut self, gate: Gate) -> Self {
        self.gate = gate;
        self
    }
    /// Where events go (default: nowhere).
    pub fn events(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.events = sink;
        self
    }
    /// Resolves the `model` a spec names.
    pub fn model_resolver(
        mut self,
        f: impl Fn(&str) -> Result<Arc<dyn Model>, ModelError> + Send + Sync + 'static,
    ) -> Self {
        self.resolver = Some(Arc::new(f));
        self
    }
    /// Wraps the host's model and every model the resolver makes from now on in `wrap` (a
    /// recorder or a replay per run, say): every model call under the context then passes
    /// through it, whichever model a spec names.
    pub fn map_models(
        mut self,
        wrap: impl Fn(Arc<dyn Model>) -> Arc<dyn Model> + Send + Sync + 'static,
    ) -> Self {
        let wrap = Arc::new(wrap);
        self.model = wrap(self.model);
        if let Some(resolve) = self.resolver.take() {
            self.resolver = Some(Arc::new(move |name: &str| resolve(name).map(|m| wrap(m))));
        }
        self
    }
    /// Prices used to turn usage into cost, in place of the default: the built-in table
    /// ([`PriceTable::builtin`]), as a [`Host`](crate::host::Host) has. A model with no price
    /// counts its calls as 0 USD, and says so once in a warning.
    pub fn prices(mut self, prices: PriceTable) -> Self {
        self.prices = Some(Arc::new(prices));
        self
    }
    /// Cancelling this token cancels the host and every descendant.
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }
    /// How many sub-agent calls of one model response run at once (default 3, at least 1;
    /// `usize::MAX` means no limit).
    pub fn fanout_limit(mut self, limit: usize) -> Self {
        self.fanout_limit = limit.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        self
    }
    /// Records the spend at stake before every model call of every run under this context
    /// (see [`SpendJournal`]): how a durable engine charges an attempt it lost mid-call.
    pub fn spend_journal(mut self, journal: Arc<dyn SpendJournal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Prompt caching for every run under this host whose spec does not set its own
    /// ([`SpecBuilder::prompt_cache`](crate::SpecBuilder::prompt_cache)); unset, each model
    /// keeps its own setting.
    pub fn prompt_cache(mut self, cache: PromptCache) -> Self {
        self.prompt_cache = Some(cache);
        self
    }

    /// Whether siblings of one spec that one model response starts share one prompt-cache
    /// write (default on): the first makes its first model call, the others make theirs once
    /// it is answered, and read the tools and system prompt it wrote. It saves the others'
    /// cache writes (on the billing mock, a quarter of a 3-sibling fan-out's bill on
    /// Anthropic) and costs them one model call's wait. Only where the sub-agents' calls are
    /// cached: a model without a provider cache (or `prompt_cache = "off"`) never waits.
    pub fn share_fanout_prefix(mut self, on: bool) -> Self {
        self.share_prefix = on;
        self
    }

    /// Lends acting sub-agents working copies of `acting`'s workspace (a spec with a
    /// `[workspace]` table that isolates it). Without it, such a spec's runs are refused. A
    /// [`Host`](crate::host::Host) with a workspace sets it.
    pub fn acting(mut self, acting: ActHost) -> Self {
        self.act = Some(Arc::new(acting));
        self
    }

    /// The context.
    pub fn build(self) -> Ctx {
        let host = HostParts {
            max_depth: self.max_depth,
            events: self.events,
            resolver: self.resolver,
            prices: self.prices.unwrap_or_else(PriceTable::builtin_shared),
            fanout_limit: self.fanout_limit,
            journal: self.journal,
            prompt_cache: self.prompt_cache,
            share_prefix: self.share_prefix,
            act: self.act,
        };
        Ctx {
            inner: Arc::new(Inner {
                host: Arc::new(host),
                stamp: Stamp {
                    run_id: self.run_id.into(),
                    parent_run_id: None,
                    spec: self.spec.into(),
                    depth: 0,
                    role: Role::Host,
                },
                holding: Holding {
                    tools: self.tools,
                    offered: None,
                    live: self.live,
                    copy: None,
                },
                budget: self.budget,
                gate: self.gate,
                model: RunModel::new(self.model),
                cancel: self.cancel,
                fanout: Fanout::default(),
                counters: Counters::default(),
                parent_clock: None,
            }),
        }
    }
}

impl Ctx {
    /// A builder for a host context using `model`.
    pub fn builder(model: Arc<dyn Model>) -> CtxBuilder {
        CtxBuilder {
            run_id: "root".into(),
            spec: "host".into(),
            max_depth: DEFAULT_MAX_DEPTH,
            tools: ToolSet::new(),
            live: None,
            budget: Budget::unlimited(),
            gate: Gate::allow_all(),
            events: Arc::new(NullSink),
            model,
            resolver: None,
            prices: None,
            cancel: CancellationToken::new(),
            fanout_limit: DEFAULT_FANOUT_LIMIT,
            journal: None,
            prompt_cache: None,
            share_prefix: true,
            act: None,
        }
    }

    /// Makes the context a sub-agent runs in: tools = the spec's tools, each of which this
    /// context must hold; budget forked with the spec's `max_cost_usd`; depth + 1 under the
    /// limit; run id `<this run id>.<spec>-<n>`; the same gate; a child cancellation token.
    /// Every child context is made by this one fork, under these invariants: this one, and
    /// each sub-agent's that a parent's run starts (there, the context of a run under way
    /// from the start).
    ///
    /// No run is under way in the context this returns: the first spec run in it is the
    /// child's own, at its depth and with its id, as when the MCP server runs a call in the
    /// child it made for it; a later one is a child of that run, one level deeper.
    pub fn child<S: Delegate + ?Sized>(&self, spec: &S) -> Result<Ctx, SpawnError> {
        self.fork_child(spec, Role::Child)
    }

    /// The context a sub-agent's run of `spec` runs in, started by this context's run: the
    /// fork [`child`](Self::child) makes, a run's from the start. No context of the child that
    /// is not a run's ever exists, and only such a context starts a root run, so none can take
    /// the child's own id again and it needs no reservation: a spec run in it (a tool's
    /// `ctx.ask`) is its child, numbered by its own count.
    pub(crate) fn child_run<S: Delegate + ?Sized>(&self, spec: &S) -> Result<Ctx, SpawnError> {
        self.fork_child(spec, Role::Run)
    }

    /// [`child`](Self::child), its context of `role`.
    fn fork_child<S: Delegate + ?Sized>(&self, spec: &S, role: Role) -> Result<Ctx, SpawnError> {
        let spec = spec.terms();
        let p = &self.inner;
        let depth = p.stamp.depth + 1;
        let max_depth = p.host.max_depth;
        if depth > max_depth {
            return Err(SpawnError::TooDeep {
                spec: spec.name.to_string(),
                depth,
                max_depth,
            });
        }
        // A host with live tools forks from their latest set (`for_new_run` brings it up to
        // date first, where the caller can wait for that).
        let latest = p.holding.live.as_ref().map(|l| l.latest());
        let tools = latest
            .as_ref()
            .unwrap_or(&p.holding.tools)
            .subset(spec.tools.iter().map(String::as_str))
            .map_err(|missing| SpawnError::CapabilityNotHeld {
                spec: spec.name.to_string(),
                missing,
            })?;
        let model = match spec.model {
            None => p.model.clone(),
            Some(name) if name == &*p.model.id => p.model.clone(),
            Some(name) => RunModel::new(self.resolve(spec.name, name)?),
        };
        let n = p.counters.children.fetch_add(1, Ordering::Relaxed) + 1;
        // Sized up front (20 = the digits of any u32 and the two separators), so the id costs
        // one buffer and its shared copy, which the budget node shares too.
        let mut id = String::with_capacity(p.stamp.run_id.len() + spec.name.len() + 20);
        let _ = write!(id, "{}.{}-{}", p.stamp.run_id, spec.name, n);
        let run_id: Arc<str> = id.into();
        let budget = p
            .budget
            .child(run_id.clone(), spec.max_cost_usd, spec.max_model_calls);
        Ok(self.fork(Fork {
            stamp: Stamp {
                run_id,
                parent_run_id: Some(p.stamp.run_id.clone()),
                spec: spec.name.clone(),
                depth,
                role,
            },
            holding: Holding {
                tools,
                offered: None,
                live: None,
                copy: p.holding.copy.clone(),
            },
            budget,
            model,
            counters: Counters::default(),
            siblings: p.fanout.handoff.clone(),
        }))
    }

    /// The context a root run of a spec listing `offered` runs in: a run of its own under
    /// this context, at its depth, that holds every tool this context holds (its sub-agents
    /// draw from them) and offers its model those `offered` names. Its cancellation token is a
    /// child of this one's (the run loop cancels it to stop its own work on a timeout without
    /// cancelling the caller's token).
    ///
    /// `n` is the run's place among those started from this context, as
    /// [`next_run`](Self::next_run) gave it: the first has this context's id (`root`), the
    /// next ones that id with `-2`, `-3`, … (`root-2`; only a host's context starts more than
    /// one), their sub-agents `root-2.<spec>-<n>`. Each counts its spend in a budget node of
    /// its own under this one ([`Budget::tally`]), so a run's total is its own, never that of
    /// its siblings. The context made is a run's: a spec run in it is a child of this run,
    /// never another root.
    pub(crate) fn for_root_run(&self, offered: &Arc<[String]>, n: u32) -> Ctx {
        let p = &self.inner;
        let (run_id, children): (Arc<str>, _) = if n == 1 {
            // The context's own id: children made from the context itself
            // (`SubAgentSpec::run_child`) share its count, so no child id is given twice.
            (p.stamp.run_id.clone(), p.counters.children.clone())
        } else {
            (format!("{}-{n}", p.stamp.run_id).into(), Arc::default())
        };
        self.fork(Fork {
            budget: p.budget.tally(run_id.clone()),
            stamp: Stamp {
                run_id,
                role: Role::Run,
                ..p.stamp.clone()
            },
            holding: Holding {
                offered: Some(offered.clone()),
                ..p.holding.clone()
            },
            model: p.model.clone(),
            // A run's context starts no root run (`next_run`), so it counts none.
            counters: Counters {
                children,
                own: Arc::default(),
            },
            siblings: p.fanout.siblings.clone(),
        })
    }

    /// The context of a run started from this one, child or root: what the run owns, and
    /// the rest (the host's parts, the gate chain) shared. A run's token is a child of this
    /// context's, so that cancelling the caller cancels the run, and the run can stop itself.
    fn fork(&self, run: Fork) -> Ctx {
        let p = &self.inner;
        Ctx {
            inner: Arc::new(Inner {
                host: p.host.clone(),
                stamp: run.stamp,
                holding: run.holding,
                budget: run.budget,
                gate: p.gate.clone(),
                model: run.model,
                cancel: p.cancel.child_token(),
                fanout: Fanout {
                    handoff: None,
                    siblings: run.siblings,
                },
                counters: run.counters,
                // The clock of the nearest run above: a context made by `Ctx::child` runs
                // nothing itself, so a run in it is bound by the run that made it.
                parent_clock: match p.stamp.role {
                    Role::Child => p.parent_clock.clone(),
                    Role::Host | Role::Run => Some(p.counters.own.clone()),
                },
            }),
        }
    }

    /// The model `name` that the spec `spec` asks for, from the host's resolver.
    fn resolve(&self, spec: &str, name: &str) -> Result<Arc<dyn Model>, SpawnError> {
        let Some(resolve) = &self.inner.host.resolver else {
            return Err(SpawnError::Model {
                spec: spec.to_string(),
                error: ModelError::Config(format!(
                    "the spec asks for model `{name}` and no model resolver is configured"
                )),
            });
        };
        resolve(name).map_err(|error| SpawnError::Model {
            spec: spec.to_string(),
            error,
        })
    }

    /// Another view of the same run, with `change` made to it (its role too: the same run).
    fn view(&self, change: impl FnOnce(&mut Inner)) -> Ctx {
        let mut inner = (*self.inner).clone();
        change(&mut inner);
        Ctx {
            inner: Arc::new(inner),
        }
    }

    /// This context as a run that starts now sees it: for a host with live tools
    /// ([`CtxBuilder::live_tools`]), a view holding the current set (listed again where a
    /// source changed) and fixed from then on; any other context as it is.
    pub(crate) async fn for_new_run(&self) -> Ctx {
        let Some(live) = &self.inner.holding.live else {
            return self.clone();
        };
        let tools = live.current().await;
        self.view(|v| {
            v.holding.tools = tools;
            v.holding.live = None;
        })
    }

    /// The same run, its next child one of the siblings sharing `share`.
    pub(crate) fn with_siblings(&self, share: Arc<SharedPrefix>) -> Ctx {
        self.view(|v| v.fanout.handoff = Some(share))
    }

    /// The same run, acting in `copy` from now on (its spec's own working copy).
    pub(crate) fn with_copy(&self, copy: Arc<RunCopy>) -> Ctx {
        self.view(|v| v.holding.copy = Some(copy))
    }

    /// The working copy this run's tools act on and read from, if it or an ancestor acts.
    pub(crate) fn run_copy(&self) -> Option<&Arc<RunCopy>> {
        self.inner.holding.copy.as_ref()
    }

    /// The workspace a run's file tools see: its working copy's, when it or an ancestor acts
    /// in one; `None` when they see the host's workspace. A tool of your own that reads or
    /// writes files should use it when it is there.
    pub fn copy_workspace(&self) -> Option<&Arc<Workspace>> {
        self.run_copy().map(|c| c.workspace())
    }

    /// What the host lends acting runs, if it does ([`CtxBuilder::acting`]).
    pub(crate) fn act_host(&self) -> Option<&Arc<ActHost>> {
        self.inner.host.act.as_ref()
    }

    /// Whether a fan-out's siblings share a prompt-cache write
    /// ([`CtxBuilder::share_fanout_prefix`]).
    pub fn shares_fanout_prefix(&self) -> bool {
        self.inner.host.share_prefix
    }

    /// The share of the siblings this run was started among, if any.
    pub(crate) fn siblings(&self) -> Option<&Arc<SharedPrefix>> {
        self.inner.fanout.siblings.as_ref()
    }

    /// The same context with `gate` added to its chain: stricter, never looser. Children made
    /// from the result inherit the stricter chain.
    pub fn with_stricter_gate(&self, gate: Arc<dyn ApprovalGate>) -> Ctx {
        self.view(|v| v.gate = v.gate.stricter(gate))
    }

    /// What a spec run started in this context is, claimed at once so that two runs started
    /// together cannot both take one id: in the host's context, the next root run; in a
    /// child context made by [`child`](Self::child), the child's own run the first time, then
    /// a child of that run; in a run's context (a root run's, a sub-agent's, any view of
    /// either), a child of that run.
    pub(crate) fn next_run(&self) -> NextRun {
        let runs = &self.inner.counters.own.runs;
        match self.inner.stamp.role {
            Role::Host => NextRun::Root(runs.fetch_add(1, Ordering::Relaxed) + 1),
            Role::Child => {
                match runs.compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => NextRun::Root(1),
                    Err(_) => NextRun::Child,
                }
            }
            Role::Run => NextRun::Child,
        }
    }

    /// Whether a spec run in this context would be a child of a run under way in it (what
    /// [`next_run`](Self::next_run) would say, without claiming anything).
    #[cfg(test)]
    pub(crate) fn is_run(&self) -> bool {
        match self.inner.stamp.role {
            Role::Host => false,
            Role::Child => self.inner.counters.own.runs.load(Ordering::Relaxed) > 0,
            Role::Run => true,
        }
    }

    /// The tool `name` if the run this context belongs to offers it to its model: held, and
    /// in a root run also named by its spec (a child holds only what its spec names). The run
    /// loop runs a call only through this; a tool can ask it about another, as `grep` does
    /// before it points at `read_file`.
    pub fn offered_tool(&self, name: &str) -> Option<&ToolEntry> {
        let holding = &self.inner.holding;
        let entry = holding.tools.get(name)?;
        match &holding.offered {
            Some(names) if !entry.named_by(names) => None,
            _ => Some(entry),
        }
    }

    /// This run's id.
    pub fn run_id(&self) -> &str {
        &self.inner.stamp.run_id
    }
    /// The parent run's id (`None` for the host).
    pub fn parent_run_id(&self) -> Option<&str> {
        self.inner.stamp.parent_run_id.as_deref()
    }
    /// The spec this context runs.
    pub fn spec_name(&self) -> &str {
        &self.inner.stamp.spec
    }
    /// Depth (host = 0).
    pub fn depth(&self) -> u32 {
        self.inner.stamp.depth
    }
    /// The depth limit.
    pub fn max_depth(&self) -> u32 {
        self.inner.host.max_depth
    }
    /// The tools this context holds (for a host with live tools, those it was built with;
    /// each run started from it gets the set current then).
    pub fn tools(&self) -> &ToolSet {
        &self.inner.holding.tools
    }
    /// Its budget node.
    pub fn budget(&self) -> &Budget {
        &self.inner.budget
    }
    /// Its approval gate.
    pub fn gate(&self) -> &Gate {
        &self.inner.gate
    }
    /// Its model.
    pub fn model(&self) -> &Arc<dyn Model> {
        &self.inner.model.model
    }
    /// Its model's id, shared.
    pub(crate) fn model_id(&self) -> &Arc<str> {
        &self.inner.model.id
    }
    /// Its price table.
    pub fn prices(&self) -> &PriceTable {
        &self.inner.host.prices
    }
    /// This run's clock, and its parent's: when each must answer by.
    pub(crate) fn clocks(&self) -> (&RunClock, Option<&RunClock>) {
        (
            &self.inner.counters.own.clock,
            self.inner.parent_clock.as_deref().map(|o| &o.clock),
        )
    }
    /// Its cancellation token.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// `fut`'s output, unless this context is cancelled first (`None`); `fut` is never
    /// polled, so never started, once it is ([`UnlessCancelled`]).
    pub(crate) fn unless_cancelled<F: std::future::Future>(
        &self,
        fut: F,
    ) -> UnlessCancelled<'_, F> {
        UnlessCancelled::new(&self.inner.cancel, fut)
    }
    /// The host's prompt caching, if it sets one ([`CtxBuilder::prompt_cache`]).
    pub fn prompt_cache(&self) -> Option<PromptCache> {
        self.inner.host.prompt_cache
    }
    /// How many sub-agent calls of one response run at once.
    pub fn fanout_limit(&self) -> usize {
        self.inner.host.fanout_limit
    }
    /// What records the spend at stake before each model call, if anything does.
    pub(crate) fn spend_journal(&self) -> Option<&Arc<dyn SpendJournal>> {
        self.inner.host.journal.as_ref()
    }
    /// Its event sink.
    pub fn events(&self) -> &Arc<dyn EventSink> {
        &self.inner.host.events
    }

    /// Emits an event for a child run of this context that never got a context of its own
    /// (it was refused at spawn).
    pub(crate) fn emit_child(&self, run_id: &str, spec: &Arc<str>, kind: EventKind) {
        if !self.inner.host.events.wants_events() {
            return;
        }
        self.inner.host.events.emit(&Event {
            ts_ms: crate::events::now_ms(),
            run_id: run_id.into(),
            parent_run_id: Some(self.inner.stamp.run_id.clone()),
            spec: spec.clone(),
            depth: self.inner.stamp.depth + 1,
            kind: kind.redacted(),
        });
    }

    /// Emits an event stamped with this context's ids.
    pub fn emit(&self, kind: EventKind) {
        if !self.inner.host.events.wants_events() {
            return;
        }
        self.inner.host.events.emit(&Event {
            ts_ms: crate::events::now_ms(),
            run_id: self.inner.stamp.run_id.clone(),
            parent_run_id: self.inner.stamp.parent_run_id.clone(),
            spec: self.inner.stamp.spec.clone(),
            depth: self.inner.stamp.depth,
            kind: kind.redacted(),
        });
    }
}
