//! A host's tools that follow sources whose tools change while it lives: an MCP server that
//! sends `notifications/tools/list_changed` adds or removes tools between runs.
//!
//! The design, in three rules:
//! - A [`ToolSource`] says, cheaply and without I/O, the version of its tools; the version
//!   moves on when they may have changed. Asked for its tools at a newer version, it lists
//!   them again, once for every caller at that time.
//! - [`LiveTools`] is the host's set: its fixed tools (workspace, specs, the host's own) and
//!   its sources' latest tools, put together by [`ToolSet::insert`] exactly as the first set
//!   was, so names, duplicates and schemas are checked the same way.
//! - Only a run that *starts* asks for the current set (the library does it where it forks a
//!   host's child, and where a spec runs in a host's context itself). A run's context holds a
//!   plain [`ToolSet`], fixed for its life: the tools it was offered, its narrowing and its
//!   prompt prefix never change under it, and its sub-agents get subsets of that same set
//!   (invariant 1), never tools their parent was not offered.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{Tool, ToolSet, ToolSetError};

/// Tools as a source listed them, at one version.
#[derive(Clone)]
pub struct Listing {
    /// The source's version when the listing was asked for.
    pub version: u64,
    /// The tools.
    pub tools: Arc<[Arc<dyn Tool>]>,
}

impl std::fmt::Debug for Listing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listing")
            .field("version", &self.version)
            .field(
                "tools",
                &self.tools.iter().map(|t| t.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Tools that may change while a host lives (the servers of an MCP config:
/// [`McpServers::source_for`](crate::tool::mcp::McpServers::source_for)).
#[async_trait]
pub trait ToolSource: Send + Sync {
    /// The version of the source's tools, without I/O: it moves on whenever they may have
    /// changed, and never goes back.
    fn version(&self) -> u64;
    /// The tools as last listed, without I/O.
    fn listed(&self) -> Listing;
    /// The tools at the current version: the last listing if it is current, else a new one;
    /// callers at the same time share one. An error says why the tools cannot be known.
    async fn refresh(&self) -> Result<Listing, BoxError>;
}

/// Why a source's tools could not be listed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One put-together set and the versions of the listings it holds, one per source.
struct Snapshot {
    versions: Vec<u64>,
    tools: ToolSet,
}

/// A host's tool set that follows its sources: its fixed tools and its sources' latest ones.
/// Only a run that starts asks for the [`current`](Self::current) set; a run's own context
/// holds a plain [`ToolSet`], fixed for its life, and its sub-agents get subsets of it. Shared
/// (`Arc`) by every context built from one host, so a change is put together once.
pub struct LiveTools {
    fixed: ToolSet,
    sources: Vec<Arc<dyn ToolSource>>,
    latest: Mutex<Arc<Snapshot>>,
}

impl std::fmt::Debug for LiveTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveTools")
            .field("latest", &self.latest().names().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl LiveTools {
    /// The `fixed` tools and the sources' tools as they last listed them.
    pub fn new(fixed: ToolSet, sources: Vec<Arc<dyn ToolSource>>) -> Result<Self, ToolSetError> {
        let listings: Vec<Listing> = sources.iter().map(|s| s.listed()).collect();
        let tools = join(&fixed, &listings)?;
        Ok(LiveTools {
            fixed,
            latest: Mutex::new(Arc::new(Snapshot {
                versions: listings.iter().map(|l| l.version).collect(),
                tools,
            })),
            sources,
        })
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The set as last put together, without I/O (it may be out of date: see
    /// [`is_stale`](Self::is_stale)).
    pub fn latest(&self) -> ToolSet {
        self.snapshot().tools.clone()
    }

    /// Whether a source's tools changed since the set was last put together.
    pub fn is_stale(&self) -> bool {
        let snap = self.snapshot();
        self.sources
            .iter()
            .zip(&snap.versions)
            .any(|(s, v)| s.version() != *v)
    }

    /// The set for a run that starts now: the last one, or, when a source's tools changed, a
    /// new one with that source's tools listed again.
    ///
    /// When the new tools cannot be had (a source fails to list them, or they break a rule of
    /// the set, a name taken say), the run gets the last set that was put together, with a
    /// warning, and the next run that starts asks again: a server that fails to list once
    /// does not refuse every run of the host, and a run is never offered tools the set's rules
    /// refused.
    pub async fn current(&self) -> ToolSet {
        let snap = self.snapshot();
        let stale = |(s, v): (&Arc<dyn ToolSource>, &u64)| s.version() != *v;
        if !self.sources.iter().zip(&snap.versions).any(stale) {
            return snap.tools.clone();
        }
        match self.put_together().await {
            Ok((versions, tools)) => {
                let mut latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
                // Two runs may put a change together at once; the newer set is kept.
                if versions.iter().zip(&latest.versions).all(|(n, o)| n >= o) {
                    *latest = Arc::new(Snapshot {
                        versions,
                        tools: tools.clone(),
                    });
                }
                tools
            }
            Err(error) => {
                tracing::warn!(
                    %error,
                    "the host's tools changed and could not be brought up to date; this run \
                     gets them as they were, and the next run asks again"
                );
                snap.tools.clone()
            }
        }
    }

    /// The fixed tools and every source's current ones, with the versions of their listings.
    async fn put_together(&self) -> Result<(Vec<u64>, ToolSet), BoxError> {
        let mut listings = Vec::with_capacity(self.sources.len());
        for s in &self.sources {
            let last = s.listed();
            listings.push(if last.version == s.version() {
                last
            } else {
                s.refresh().await?
            });
        }
        let tools = join(&self.fixed, &listings)?;
        Ok((listings.iter().map(|l| l.version).collect(), tools))
    }
}

/// The fixed tools and every listing's, by the rules of [`ToolSet::insert`].
fn join(fixed: &ToolSet, listings: &[Listing]) -> Result<ToolSet, ToolSetError> {
    let mut set = fixed.clone();
    for l in listings {
        for t in l.tools.iter() {
            set.insert(t.clone())?;
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use serde_json::json;

    use super::{BoxError, Listing, LiveTools, ToolSource};
    use crate::tool::{FnTool, Tool, ToolOutput, ToolSet};

    /// A tool; one named `mcp__s__*` is of the group `mcp__s`, as an MCP server's are.
    fn tool(name: &str) -> Arc<dyn Tool> {
        if name.starts_with("mcp__s__") {
            return Arc::new(Grouped(name.to_string()));
        }
        FnTool::new(name, "t", json!({"type": "object"}), |_| async {
            ToolOutput::text("")
        })
    }

    struct Grouped(String);

    #[async_trait::async_trait]
    impl Tool for Grouped {
        fn name(&self) -> &str {
            &self.0
        }
        fn description(&self) -> &str {
            "t"
        }
        fn input_schema(&self) -> Arc<serde_json::Value> {
            Arc::new(json!({"type": "object"}))
        }
        fn group(&self) -> Option<&str> {
            Some("mcp__s")
        }
        async fn call(&self, _: serde_json::Value, _: &crate::Ctx) -> ToolOutput {
            ToolOutput::text("")
        }
    }

    /// A source whose tools the test sets; it counts its listings and fails when told to.
    #[derive(Default)]
    struct Fake {
        version: AtomicU64,
        names: Mutex<Vec<&'static str>>,
        last: Mutex<Option<Listing>>,
        listings: AtomicU32,
        fail: AtomicBool,
    }

    impl Fake {
        fn change(&self, names: Vec<&'static str>) {
            *self.names.lock().unwrap() = names;
            self.version.fetch_add(1, Ordering::SeqCst);
        }
        fn list(&self) -> Listing {
            let tools: Vec<Arc<dyn Tool>> =
                self.names.lock().unwrap().iter().map(|n| tool(n)).collect();
            let l = Listing {
                version: self.version(),
                tools: tools.into(),
            };
            *self.last.lock().unwrap() = Some(l.clone());
            l
        }
    }

    #[async_trait::async_trait]
    impl ToolSource for Fake {
        fn version(&self) -> u64 {
            self.version.load(Ordering::SeqCst)
        }
        fn listed(&self) -> Listing {
            let last = self.last.lock().unwrap().clone();
            last.unwrap_or_else(|| self.list())
        }
        async fn refresh(&self) -> Result<Listing, BoxError> {
            if self.fail.load(Ordering::SeqCst) {
                return Err("server `fake` did not answer tools/list".into());
            }
            self.listings.fetch_add(1, Ordering::SeqCst);
            Ok(self.list())
        }
    }

    fn names(set: &ToolSet) -> Vec<&str> {
        set.names().collect()
    }

    fn live(fake: &Arc<Fake>) -> LiveTools {
        let fixed = ToolSet::new().with(tool("grep")).unwrap();
        LiveTools::new(fixed, vec![fake.clone() as Arc<dyn ToolSource>]).unwrap()
    }

    #[tokio::test]
    async fn a_change_is_listed_once_and_kept_until_the_next() {
        let fake = Arc::new(Fake::default());
        fake.change(vec!["mcp__s__a", "mcp__s__b"]);
        let live = live(&fake);
        assert_eq!(names(&live.latest()), ["grep", "mcp__s__a", "mcp__s__b"]);
        assert!(!live.is_stale());
        assert_eq!(names(&live.current().await).len(), 3);
        assert_eq!(fake.listings.load(Ordering::SeqCst), 0, "nothing changed");

        fake.change(vec!["mcp__s__a", "mcp__s__c"]);
        assert!(live.is_stale());
        let now = live.current().await;
        assert_eq!(names(&now), ["grep", "mcp__s__a", "mcp__s__c"]);
        assert_eq!(names(&live.latest()), names(&now));
        live.current().await;
        assert_eq!(fake.listings.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_listing_that_fails_or_collides_keeps_the_last_set_and_is_asked_again() {
        let fake = Arc::new(Fake::default());
        fake.change(vec!["mcp__s__a"]);
        let live = live(&fake);
        fake.change(vec!["mcp__s__b"]);
        fake.fail.store(true, Ordering::SeqCst);
        // The run starts, with the tools as they were; the source is asked again next time.
        assert_eq!(names(&live.current().await), ["grep", "mcp__s__a"]);
        assert!(live.is_stale(), "the old set is not taken for the new one");
        assert_eq!(names(&live.current().await), ["grep", "mcp__s__a"]);

        // The new list's names obey the set's rules: one taken by a fixed tool is refused,
        // and runs keep the last set that kept them.
        fake.fail.store(false, Ordering::SeqCst);
        fake.change(vec!["grep"]);
        assert_eq!(names(&live.current().await), ["grep", "mcp__s__a"]);
        assert!(live.is_stale());

        fake.change(vec!["mcp__s__b"]);
        assert_eq!(names(&live.current().await), ["grep", "mcp__s__b"]);
        assert!(!live.is_stale());
    }

    #[tokio::test]
    async fn a_run_keeps_its_set_and_its_sub_agents_get_theirs_from_it() {
        let fake = Arc::new(Fake::default());
        fake.change(vec!["mcp__s__a"]);
        let model = Arc::new(crate::model::ScriptedModel::queue("scripted:t", vec![]));
        let host = crate::Ctx::builder(model)
            .live_tools(Arc::new(live(&fake)))
            .build();
        let child = crate::SubAgentSpec::dynamic(
            "c",
            json!({"type": "object"}),
            json!({"type": "boolean"}),
        )
        .description("c")
        .system("c")
        .tools(["mcp__s"])
        .build()
        .unwrap()
        .erase();
        // A run started before the change.
        let run = host.for_new_run().await;
        fake.change(vec!["mcp__s__b"]);
        // Its sub-agent forks from the run's set, not the source's new one.
        assert_eq!(names(run.child(&child).unwrap().tools()), ["mcp__s__a"]);
        assert!(run.for_new_run().await.tools().contains("mcp__s__a"));
        // A run that starts from the host now gets the new set.
        let later = host.for_new_run().await;
        assert_eq!(names(later.child(&child).unwrap().tools()), ["mcp__s__b"]);
    }
}
