//! `notifications/tools/list_changed` from a real stdio server. No reference server changes
//! its tool list on demand (server-everything registers a few tools once, after it starts),
//! so the hostile script's `toggle` does: it swaps `echo` for `extra` and sends the
//! notification. Runs that start afterwards are offered the new list (listed once for all of
//! them), a run in flight keeps the one it started with, and a spec naming a tool that went
//! away is refused, naming it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use subcontract::host::Host;
use subcontract::model::{ScriptStep, ScriptedModel};
use subcontract::spec::DynSpec;
use subcontract::{FnTool, Outcome, SubAgentSpec, ToolOutput, SUBMIT_TOOL};
use tokio::sync::Notify;

use crate::common::turn_of;
use crate::mcp_hostile::{hostile_script, servers};

/// A spec whose system prompt is its name, so the scripted model tells the runs apart.
fn spec(name: &str, tools: &[&str]) -> DynSpec {
    SubAgentSpec::dynamic(
        name,
        json!({"type": "object"}),
        json!({"type": "object", "required": ["done"], "additionalProperties": false,
               "properties": {"done": {"type": "boolean"}}}),
    )
    .description(format!("The {name} spec."))
    .system(name)
    .tools(tools.iter().copied())
    .max_turns(4)
    .build()
    .unwrap()
    .erase()
}

/// What the model was offered, by spec and turn, and the last message it read.
type Seen = Arc<Mutex<BTreeMap<(String, usize), (Vec<String>, String)>>>;

fn offered(seen: &Seen, spec: &str, turn: usize) -> Vec<String> {
    let seen = seen.lock().unwrap();
    match seen.get(&(spec.to_string(), turn)) {
        Some((tools, _)) => tools.clone(),
        None => panic!("`{spec}` made no model call in turn {turn}: {seen:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_start_after_list_changed_get_the_new_tools_and_runs_in_flight_keep_theirs() {
    let servers = servers(json!({"mcpServers": {"h": {
        "command": "python3", "args": [hostile_script()],
    }}}));
    let source = servers.source_for(["mcp__h"]).await.unwrap();
    let first_version = source.version();

    let seen: Seen = Arc::default();
    let model = {
        let seen = seen.clone();
        ScriptedModel::from_fn("scripted:t", move |req| {
            let turn = turn_of(&req);
            let tools: Vec<String> = req.tools.iter().map(|d| d.name.to_string()).collect();
            let last = format!("{:?}", req.messages.last());
            seen.lock()
                .unwrap()
                .insert((req.system.to_string(), turn), (tools, last));
            match (req.system, turn) {
                ("inflight", 1) => ScriptStep::tool_call("barrier", json!({})),
                // Still offered to this run; the server no longer has it.
                ("inflight", 2) => ScriptStep::tool_call("mcp__h__echo", json!({"text": "hi"})),
                ("new_one", 1) => ScriptStep::tool_call("mcp__h__extra", json!({"word": "found"})),
                _ => ScriptStep::submit(json!({"done": true})),
            }
        })
    };
    // The in-flight run waits in `barrier` while the server's list changes.
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let barrier = {
        let (entered, release) = (entered.clone(), release.clone());
        FnTool::new(
            "barrier",
            "Waits for the test.",
            json!({"type": "object"}),
            move |_| {
                let (entered, release) = (entered.clone(), release.clone());
                async move {
                    entered.notify_one();
                    release.notified().await;
                    ToolOutput::text("released")
                }
            },
        )
    };
    let (inflight, after, gone, new_one) = (
        spec("inflight", &["mcp__h", "barrier"]),
        spec("after", &["mcp__h"]),
        spec("gone", &["mcp__h__echo"]),
        spec("new_one", &["mcp__h__extra"]),
    );
    let root = Host::builder()
        .model(Arc::new(model))
        .tool(barrier)
        .tool_source(source.clone())
        .specs([
            inflight.clone(),
            after.clone(),
            gone.clone(),
            new_one.clone(),
        ])
        .build()
        .unwrap()
        .build();

    // Before the change, `extra` does not exist: a spec naming it is refused.
    let r = new_one.call_json(json!({}), &root).await;
    assert_eq!(r.outcome, Outcome::Denied, "{r:?}");
    assert!(
        r.error
            .as_ref()
            .unwrap()
            .to_string()
            .contains("mcp__h__extra"),
        "{r:?}"
    );

    let running = tokio::spawn({
        let (root, inflight) = (root.clone(), inflight.clone());
        async move { inflight.call_json(json!({}), &root).await }
    });
    tokio::time::timeout(Duration::from_secs(30), entered.notified())
        .await
        .expect("the in-flight run reaches its barrier");
    let before = offered(&seen, "inflight", 1);
    assert!(before.contains(&"mcp__h__echo".to_string()), "{before:?}");
    assert!(!before.contains(&"mcp__h__extra".to_string()), "{before:?}");

    // The server changes its list and says so.
    let toggle = root.tools().get("mcp__h__toggle").unwrap().tool().clone();
    let out = toggle.call(json!({}), &root).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("extra"), "{}", out.content);
    let waited = Instant::now();
    while source.version() == first_version {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "no tools/list_changed arrived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Runs that start now are offered the new list, listed once for all of them.
    let lists = root.tools().get("mcp__h__lists").unwrap().tool().clone();
    assert_eq!(lists.call(json!({}), &root).await.content, "1");
    let (r1, r2, r3) = tokio::join!(
        after.call_json(json!({}), &root),
        after.call_json(json!({}), &root),
        after.call_json(json!({}), &root),
    );
    for r in [r1, r2, r3] {
        assert_eq!(r.outcome, Outcome::Completed, "{r:?}");
    }
    assert_eq!(lists.call(json!({}), &root).await.content, "2");
    let now = offered(&seen, "after", 1);
    assert!(now.contains(&"mcp__h__extra".to_string()), "{now:?}");
    assert!(!now.contains(&"mcp__h__echo".to_string()), "{now:?}");
    assert!(now.contains(&"mcp__h__toggle".to_string()), "{now:?}");

    // A spec naming the tool that went away is refused, the tool named; never run without it.
    let r = gone.call_json(json!({}), &root).await;
    assert_eq!(r.outcome, Outcome::Denied, "{r:?}");
    let why = r.error.as_ref().unwrap().to_string();
    assert!(why.contains("mcp__h__echo"), "{why}");
    assert!(
        !seen.lock().unwrap().keys().any(|(s, _)| s == "gone"),
        "a refused run called the model"
    );

    // The new tool is offered to the spec that names it, alone, under its input schema.
    let r = new_one.call_json(json!({}), &root).await;
    assert_eq!(r.outcome, Outcome::Completed, "{r:?}");
    assert_eq!(
        offered(&seen, "new_one", 1),
        ["mcp__h__extra", SUBMIT_TOOL],
        "only the tool the spec names"
    );
    let (_, result) = seen.lock().unwrap()[&("new_one".to_string(), 2)].clone();
    assert!(result.contains("found"), "{result}");
    let extra = root.tools().get("mcp__h__extra");
    assert!(
        extra.is_none(),
        "the host's own view is the one it was built with"
    );

    // The run in flight kept the tools it started with, turn after turn; its call of the tool
    // that went away is an error result naming the server.
    release.notify_one();
    let r = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the in-flight run ends")
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed, "{r:?}");
    assert_eq!(offered(&seen, "inflight", 2), before);
    assert_eq!(offered(&seen, "inflight", 3), before);
    let (_, result) = seen.lock().unwrap()[&("inflight".to_string(), 3)].clone();
    assert!(result.contains("MCP server `h`"), "{result}");
}
