use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::{Ctx, NextRun};
use crate::events::{EventKind, MemorySink};
use crate::model::{ScriptStep, ScriptedModel};
use crate::{Outcome, SubAgentSpec, Tool, ToolOutput, ToolSet};

/// What the probe saw of the context it was called with, and of the spec it ran in it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    run_id: String,
    depth: u32,
    is_run: bool,
    nested_id: String,
    nested: Outcome,
}

/// A tool that runs a spec in the context it was given, as a tool's `ctx.ask` does.
struct Probe {
    inner: SubAgentSpec<Value, Value>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

#[async_trait::async_trait]
impl Tool for Probe {
    fn name(&self) -> &str {
        "probe"
    }
    fn description(&self) -> &str {
        "Runs a spec in its context."
    }
    fn input_schema(&self) -> Arc<Value> {
        Arc::new(json!({"type": "object"}))
    }
    async fn call(&self, _args: Value, ctx: &Ctx) -> ToolOutput {
        let r = self.inner.run(&json!({}), ctx).await;
        self.seen.lock().unwrap().push(Seen {
            run_id: ctx.run_id().into(),
            depth: ctx.depth(),
            is_run: ctx.is_run(),
            nested_id: r.run_id.clone(),
            nested: r.outcome,
        });
        ToolOutput::text(r.run_id)
    }
}

/// What the probe saw since last asked, shallowest first.
fn by_depth(seen: &Mutex<Vec<Seen>>) -> Vec<Seen> {
    let mut got = std::mem::take(&mut *seen.lock().unwrap());
    got.sort_by_key(|s| s.depth);
    got
}

fn spec(name: &str, tools: &[&str]) -> SubAgentSpec<Value, Value> {
    SubAgentSpec::dynamic(name, json!({"type": "object"}), json!({"type": "boolean"}))
        .description(name)
        .system(name.to_uppercase())
        .tools(tools.iter().copied())
        .build()
        .unwrap()
}

/// The host's context and a child context made for a caller start root runs; a root run's
/// context and a sub-agent's are runs, and a spec a tool runs in either is a child of that
/// run, one level deeper, never a second root at its depth.
#[tokio::test]
async fn only_the_context_of_a_run_under_way_is_a_run() {
    let model = Arc::new(ScriptedModel::from_fn("scripted:role", |req| {
        // One call a turn, so that children are numbered in the order they start.
        match (req.system, req.messages.len()) {
            ("OUTER" | "MID", 1) => ScriptStep::tool_call("probe", json!({})),
            ("OUTER", 3) => ScriptStep::tool_call("mid", json!({})),
            _ => ScriptStep::submit(json!(true)),
        }
    }));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let probe = Arc::new(Probe {
        inner: spec("inner", &[]),
        seen: seen.clone(),
    });
    let mid = spec("mid", &["probe"]);
    let outer = spec("outer", &["probe", "mid"]);
    let sink = Arc::new(MemorySink::new());
    let host = Ctx::builder(model)
        .max_depth(3)
        .tools(
            ToolSet::new()
                .with(probe)
                .unwrap()
                .with(mid.as_tool())
                .unwrap(),
        )
        .events(sink.clone())
        .build();
    assert!(!host.is_run(), "the host's context");
    let offered: Arc<[String]> = Arc::from(vec!["probe".to_string()]);
    let NextRun::Root(n) = host.next_run() else {
        panic!("a host's context starts root runs")
    };
    let root = host.for_root_run(&offered, n);
    assert!(root.is_run(), "a root run's context");
    assert!(root
        .with_stricter_gate(Arc::new(crate::DenyTools::new(["x"])))
        .is_run());
    assert!(!host.is_run(), "starting a root run leaves the host a host");
    // The MCP server makes a child of its spec's for each call, and runs the spec in it.
    let child = host.child(&outer).unwrap();
    assert!(!child.is_run(), "a child context made for a caller");
    let sub = host.child_run(&mid).unwrap();
    assert!(sub.is_run(), "a sub-agent's context");
    assert_eq!(
        [child.run_id(), sub.run_id()],
        ["root.outer-1", "root.mid-2"]
    );

    // From the host: a root run (`root-2`: `for_root_run` above took `root`), whose tool's
    // spec is its child, and whose sub-agent's tool's spec is that sub-agent's child.
    let r = outer.run(&json!({}), &host).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(r.run_id, "root-2");
    let got = by_depth(&seen);
    let want = |run_id: &str, depth, nested_id: &str| Seen {
        run_id: run_id.into(),
        depth,
        is_run: true,
        nested_id: nested_id.into(),
        nested: Outcome::Completed,
    };
    assert_eq!(
        got,
        [
            want("root-2", 0, "root-2.inner-1"),
            want("root-2.mid-2", 1, "root-2.mid-2.inner-1"),
        ]
    );

    // From a child context (as the MCP server runs a call): the child's own run, at its
    // depth and with its id.
    let id = "root.outer-1";
    let r = outer.run(&json!({}), &child).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    assert_eq!(r.run_id, id);
    let got = by_depth(&seen);
    assert_eq!(
        got,
        [
            want(id, 1, &format!("{id}.inner-1")),
            want(&format!("{id}.mid-2"), 2, &format!("{id}.mid-2.inner-1")),
        ]
    );
    assert!(child.is_run(), "the child context is now its run's");
    // A second run in it is a child of that run, one level deeper, numbered after its
    // children: never a second root at the child's depth (with an id like `root.outer-1-2`,
    // which the host's second child of a spec named `outer-1` would have too). Its sub-agent's
    // tool is past the depth limit.
    let r = outer.run(&json!({}), &child).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let id = "root.outer-1.outer-3";
    assert_eq!(r.run_id, id);
    let got = by_depth(&seen);
    assert_eq!(
        got,
        [
            want(id, 2, &format!("{id}.inner-1")),
            Seen {
                nested: Outcome::Denied,
                ..want(
                    &format!("{id}.mid-2"),
                    3,
                    &format!("{id}.mid-2.inner-denied")
                )
            },
        ]
    );

    // Every nested run started one level below the run whose tool started it.
    let events = sink.events();
    let started = |e: &&crate::Event| matches!(e.kind, EventKind::Started { .. });
    let nested: Vec<_> = events
        .iter()
        .filter(started)
        .filter(|e| e.run_id.ends_with(".inner-1"))
        .collect();
    assert_eq!(
        nested.len(),
        5,
        "two in each of the first two runs, one in the third (its other past the depth limit)"
    );
    for e in nested {
        let parent = e.parent_run_id.as_deref().expect("a parent");
        let parent_depth = events
            .iter()
            .filter(started)
            .find(|p| &*p.run_id == parent)
            .map(|p| p.depth)
            .expect("the parent's start");
        assert_eq!(e.depth, parent_depth + 1, "{}", e.run_id);
    }
}

/// Two runs started together in one child context made for a caller: one is the child's own
/// run, the other that run's child; never two root runs, which could share an id.
#[tokio::test]
async fn two_runs_started_together_in_a_child_context_take_two_ids() {
    let model = Arc::new(ScriptedModel::from_fn("scripted:role", |_| {
        ScriptStep::submit(json!(true))
    }));
    let solo = spec("solo", &[]);
    let host = Ctx::builder(model).build();
    let child = host.child(&solo).unwrap();
    let input = json!({});
    let (a, b) = tokio::join!(solo.run(&input, &child), solo.run(&input, &child));
    assert_eq!(a.outcome, Outcome::Completed, "{:?}", a.error);
    assert_eq!(b.outcome, Outcome::Completed, "{:?}", b.error);
    let mut ids = [a.run_id, b.run_id];
    ids.sort();
    assert_eq!(ids, ["root.solo-1", "root.solo-1.solo-1"]);
}
